"""The learner loop: publish weights, take in experience, train within the samples-per-insert limit,
watch the actors, until the actors have taken the run's env-step budget (or, with
`actorq.stop_at_return`, until the training return reaches it).

The loop never waits for one actor: it waits for *any* chunk, a bounded time, and checks the
actors' health between waits. An actor that dies is restarted (at most `actorq.max_restarts`
times per actor id) and the log says so; when none is left, or no experience has arrived for
`actorq.stall_timeout_s`, the run ends with a clear error instead of hanging.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

import numpy as np
import torch

from quarl.actorq.constants import RETURN_WINDOW
from quarl.actorq.params import ParameterQuantizer
from quarl.actorq.replay import Chunk, RateLimiter, Replay
from quarl.actorq.settings import Settings
from quarl.actorq.transport import Transport
from quarl.errors import QuarlError
from quarl.progress import Progress
from quarl.train.curves import CURVES_DIR, Curves, RunName, launch_dir, open_curves, sweep_group

log = logging.getLogger(__name__)

WAIT_S = 0.05  # longest wait for experience before the loop looks at the actors again
UPDATES_PER_DRAIN = 16  # gradient steps between two looks at the queue
SLACK_CHUNKS = 2  # the samples-per-insert limit's slack, in chunks per actor
CURVE_ROWS = 250  # learner scalars (mean losses, ...) are written about this many times per run


class Learner(Protocol):
    """What the loop needs from DQN and D4PG learners."""

    updates: int

    @property
    def policy(self) -> torch.nn.Module:
        """The fp32 acting network (published)."""
        ...

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]: ...


@dataclass
class ActorBook:
    """Each actor's latest time breakdown, its earlier lives' breakdowns and its restarts."""

    current: dict[int, dict[str, float]] = field(default_factory=dict)
    earlier: dict[int, list[dict[str, float]]] = field(default_factory=dict)
    restarts: dict[int, int] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)  # died with no restart left

    def died(self, actor_id: int) -> None:
        if actor_id in self.current:
            self.earlier.setdefault(actor_id, []).append(self.current.pop(actor_id))

    def rows(self) -> list[dict[str, Any]]:
        """One row per actor id: its lives' breakdowns summed (steps/s over its total wall time)."""
        rows = []
        for actor_id in sorted(set(self.current) | set(self.earlier)):
            lives = self.earlier.get(actor_id, []) + ([self.current[actor_id]] if actor_id in self.current else [])
            row = {k: sum(life[k] for life in lives) for k in lives[0] if k != "steps_per_s"}
            row["steps_per_s"] = row["steps"] / row["wall_s"] if row["wall_s"] > 0 else 0.0
            rows.append({"actor": actor_id, **row, "restarts": self.restarts.get(actor_id, 0)})
        return rows


@dataclass
class TrainResult:
    """What a run measured: curve rows, actor breakdowns, the learner's counts and timings."""

    curve: list[dict[str, float]]
    actors: list[dict[str, Any]]
    env_steps: int
    learner_steps: int
    publishes: int
    bytes_per_publish: int
    publish_s: float
    wall_s: float
    last_losses: dict[str, float]


def open_run_curves(cfg: Any, run_dir: Path) -> Curves:
    """The curve writers of an ActorQ run: CSV in `<run dir>/curves` (quarl.train.curves),
    plus the trackers `train.tracking` turns on, the run named by algo, env, seed and actor precision."""
    name = f"actorq-{cfg.algo.name}-{cfg.env.name.replace('/', '-')}-seed{cfg.seed}-actor{cfg.quant.actor_bits}"
    tags = {
        "algo": cfg.algo.name,
        "env": cfg.env.name,
        "quant": "actorq",
        "seed": str(cfg.seed),
        "actor_bits": str(cfg.quant.actor_bits),
    }
    from omegaconf import OmegaConf

    config = {
        "algo": OmegaConf.to_container(cfg.algo, resolve=True),
        "actorq": OmegaConf.to_container(cfg.actorq, resolve=True),
        "steps": cfg.train.steps,
    }
    return open_curves(
        run_dir / CURVES_DIR,
        cfg.train.tracking,
        RunName(name, sweep_group(cfg.train.tracking.group), tags, config),
        launch_dir(),
    )


class LossWindow:
    """The learner's losses averaged between two curve rows."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.count = 0

    def add(self, losses: dict[str, float]) -> None:
        for k, v in losses.items():
            self.sums[k] = self.sums.get(k, 0.0) + v
        self.count += 1

    def take(self) -> dict[str, float]:
        means = {f"train/{k}": v / self.count for k, v in self.sums.items()} if self.count else {}
        self.sums, self.count = {}, 0
        return means


def train(
    settings: Settings, learner: Learner, transport: Transport, progress: bool, curves: Optional[Curves] = None
) -> TrainResult:
    """Run the actors and train `learner` until the env-step budget is spent; stops the actors in any case.

    `progress`: a bar on a terminal; otherwise a progress line every `actorq.log_interval_s`. With
    `curves`, every training episode and the learner's mean losses go to them (closed at the end)."""
    spec = settings.actor
    budget = spec.total_steps
    replay = Replay(settings.replay_size, seed=spec.seed)
    limiter = RateLimiter(
        settings.samples_per_insert,
        settings.min_replay,
        settings.hyper["batch_size"],
        slack=SLACK_CHUNKS * spec.chunk_size * settings.actors,
    )
    quantizer = ParameterQuantizer(spec.layer_shapes, spec.comm_bits)
    book = ActorBook()
    curve: list[dict[str, float]] = []
    env_steps, version, publish_s, losses = 0, 0, 0.0, {}
    start = time.perf_counter()

    def publish() -> None:
        nonlocal publish_s
        t0 = time.perf_counter()
        transport.publish(version, quantizer.pack(learner.policy))
        publish_s += time.perf_counter() - t0

    precision = f"int{spec.actor_bits}" if spec.actor_bits == 8 else f"fp{spec.actor_bits}"
    bar = Progress(
        budget,
        f"ActorQ {spec.algo} {precision}",
        unit="env step",
        interval_s=settings.log_interval_s,
        interactive=progress or None,
        logger=log,
    )
    window, dump_every, last_dump = LossWindow(), max(1, budget // CURVE_ROWS), 0
    try:
        for actor_id in range(settings.actors):
            log.info("Actor %d started (%s)", actor_id, transport.start(actor_id))
        publish()  # after every start: the actors wait for the first weights, so none gets a head start
        last_progress = time.perf_counter()
        while env_steps < budget and not _reached(settings, curve, env_steps):
            can_train = limiter.can_sample(replay.inserted)
            chunks = transport.receive(0.0 if can_train else WAIT_S) if limiter.can_insert(replay.inserted) else []
            now = time.perf_counter()
            for chunk in chunks:
                seen = len(curve)
                env_steps += _take(chunk, replay, book, curve, env_steps, now - start)
                if curves is not None:
                    for point in curve[seen:]:
                        curves.episode(
                            int(point["step"]),
                            point["reward"],
                            int(point["length"]),
                            point["wall_s"],
                            actor=point["actor"],
                        )
            if chunks or can_train:
                last_progress = now
            for _ in range(UPDATES_PER_DRAIN):
                if not limiter.can_sample(replay.inserted):
                    break
                limiter.sample()
                losses = learner.update(replay.sample(limiter.batch))
                window.add(losses)
                if learner.updates % settings.publish_period == 0:
                    version += 1
                    publish()
            _watch(settings, transport, book)
            if now - last_progress > settings.stall_timeout_s:
                raise QuarlError(
                    f"No experience from any actor for {settings.stall_timeout_s:.0f} s "
                    "(actorq.stall_timeout_s): the actors are stuck or cannot start; see the log above."
                )
            recent = [c["reward"] for c in curve[-20:]]
            bar.update(
                min(budget, env_steps) - bar.done,
                **{
                    "learner steps": learner.updates,
                    "replay": len(replay),
                    "return": float(np.mean(recent)) if recent else "n/a",
                },
            )
            if curves is not None and env_steps - last_dump >= dump_every:
                last_dump = env_steps
                curves.scalars(
                    env_steps,
                    {
                        **window.take(),
                        "train/learner_steps": learner.updates,
                        "train/replay": len(replay),
                        "train/publishes": version + 1,
                    },
                    wall_s=now - start,
                )
    finally:
        bar.close()
        transport.stop()
        if curves is not None:
            curves.close()
    return TrainResult(
        curve,
        book.rows(),
        env_steps,
        learner.updates,
        version + 1,
        quantizer.nbytes,
        publish_s,
        time.perf_counter() - start,
        losses,
    )


def _reached(settings: Settings, curve: list[dict[str, float]], env_steps: int) -> bool:
    """Whether the last RETURN_WINDOW training episodes average `actorq.stop_at_return` (then say so)."""
    if settings.stop_at_return is None or len(curve) < RETURN_WINDOW:
        return False
    recent = float(np.mean([c["reward"] for c in curve[-RETURN_WINDOW:]]))
    if recent < settings.stop_at_return:
        return False
    log.info(
        "Mean return of the last %d training episodes %.1f >= %g (actorq.stop_at_return) after %d env steps: stopping.",
        RETURN_WINDOW,
        recent,
        settings.stop_at_return,
        env_steps,
    )
    return True


def _take(chunk: Chunk, replay: Replay, book: ActorBook, curve: list, env_steps: int, wall_s: float) -> int:
    """Insert a chunk; record its episodes on the curve and its actor's breakdown. Returns its env steps."""
    if len(chunk.data.get("obs", ())):
        replay.insert(chunk.data)
    book.current[chunk.actor] = chunk.stats
    step = env_steps + chunk.steps
    curve += [
        {"step": step, "wall_s": wall_s, "reward": r, "length": n, "actor": chunk.actor} for r, n in chunk.episodes
    ]
    return chunk.steps


def _watch(settings: Settings, transport: Transport, book: ActorBook) -> None:
    """Restart actors that died (within `max_restarts`); fail when none is left."""
    for actor_id, why in transport.dead().items():
        book.died(actor_id)
        restarts = book.restarts.get(actor_id, 0)
        if restarts < settings.max_restarts:
            book.restarts[actor_id] = restarts + 1
            where = transport.start(actor_id)
            log.warning(
                "Actor %d died (%s); restarted it (%s), restart %d of at most %d.",
                actor_id,
                why,
                where,
                restarts + 1,
                settings.max_restarts,
            )
        else:
            book.gone.add(actor_id)
            log.warning(
                "Actor %d died (%s) and has used its %d restarts (actorq.max_restarts): going on without it.",
                actor_id,
                why,
                settings.max_restarts,
            )
    if len(book.gone) == settings.actors:
        raise QuarlError("Every actor died and none can be restarted (actorq.max_restarts): see the log above.")
