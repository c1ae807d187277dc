"""The learner loop: publish weights, take in experience, train within the samples-per-insert limit,
watch the actors, until the actors have taken the run's env-step budget (or, with
`actorq.stop_at_return`, until the training return reaches it).

The loop never waits for one actor: it waits for *any* chunk, a bounded time, and checks the
actors' health between waits. An actor that dies is restarted (at most `actorq.max_restarts`
times per actor id) and the log says so; when none is left, or no experience has arrived for
`actorq.stall_timeout_s`, the run ends with a clear error instead of hanging.

The learner keeps its own time breakdown (`LearnerTimings`): waiting for experience, inserting it,
sampling batches, updating, publishing. On a GPU the updates are queued without waiting for them
(losses stay on the device until a curve row reads them), so `update_s` is the time to launch
them and the GPU's own time shows where the learner next waits on it (a publish or a curve row).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol

import numpy as np
import torch

from quarl.actorq import fidelity
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

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """One gradient step; its losses as 0-d tensors on the learner's device (read without waiting)."""
        ...


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
class LearnerTimings:
    """Cumulative seconds the learner spent on each part of its loop."""

    wait_s: float = 0.0  # waiting for experience (the rate limiter allowed no update)
    insert_s: float = 0.0  # inserting chunks into the replay
    sample_s: float = 0.0  # sampling batches
    update_s: float = 0.0  # gradient updates (launching them, on a GPU)
    publish_s: float = 0.0  # packing and publishing weights (one copy from the GPU each)

    def fields(self, updates: int, wall_s: float) -> dict[str, float]:
        """The record's learner fields: each part's seconds and the updates per second of wall time."""
        parts = {f"learner_{k}": v for k, v in vars(self).items() if k != "publish_s"}
        return {**parts, "learner_updates_per_s": updates / wall_s if wall_s > 0 else 0.0}


@dataclass
class TrainResult:
    """What a run measured: curve rows, actor breakdowns, the learner's counts and timings."""

    curve: list[dict[str, float]]
    actors: list[dict[str, Any]]
    env_steps: int
    learner_steps: int
    publishes: int
    bytes_per_publish: int
    wall_s: float
    last_losses: dict[str, float]
    learner: LearnerTimings
    stopped_by: str  # budget, target (actorq.stop_at_return) or time_limit (actorq.time_limit_s)
    first_experience_s: Optional[float]  # seconds from the learner's start to the first chunk of experience


def open_run_curves(cfg: Any, run_dir: Path) -> Curves:
    """The curve writers of an ActorQ run: CSV in `<run dir>/curves` (quarl.train.curves),
    plus the trackers `train.tracking` turns on, the run named by algo, env, seed and actor precision."""
    actors = cfg.quant.get("actor_format") or cfg.quant.actor_bits
    name = f"actorq-{cfg.algo.name}-{cfg.env.name.replace('/', '-')}-seed{cfg.seed}-actor{actors}"
    tags = {
        "algo": cfg.algo.name,
        "env": cfg.env.name,
        "quant": "actorq",
        "seed": str(cfg.seed),
        "actor_bits": str(cfg.quant.actor_bits),
        **({"actor_format": str(cfg.quant.actor_format)} if cfg.quant.get("actor_format") else {}),
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
    """The learner's losses averaged between two curve rows, summed on the learner's device (read
    once per row, so a GPU learner does not wait for every update)."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, losses: dict[str, torch.Tensor]) -> None:
        for k, v in losses.items():
            self.sums[k] = self.sums[k] + v.detach() if k in self.sums else v.detach().clone()
        self.count += 1

    def take(self) -> dict[str, float]:
        means = {f"train/{k}": v.item() / self.count for k, v in self.sums.items()} if self.count else {}
        self.sums, self.count = {}, 0
        return means


def train(
    settings: Settings, learner: Learner, transport: Transport, progress: bool, curves: Optional[Curves] = None
) -> TrainResult:
    """Run the actors and train `learner` until the env-step budget is spent; stops the actors in any case.

    `progress`: a bar on a terminal; otherwise a progress line every `actorq.log_interval_s`. With
    `curves`, every training episode and the learner's mean losses go to them (closed at the end)."""
    loop = _Loop(settings, learner, transport, progress, curves)
    try:
        loop.start_actors()
        while not loop.stopped_by():
            now, moved = loop.take_experience()
            loop.update()
            loop.watch(now, moved)
            loop.report(now)
    finally:
        loop.close()
    return loop.result()


class _Loop:
    """The learner's side of a run: replay, rate limiter, parameter quantizer, the actors' book,
    curve and progress; one pass of `train`'s loop calls its steps in order."""

    def __init__(
        self, settings: Settings, learner: Learner, transport: Transport, progress: bool, curves: Optional[Curves]
    ) -> None:
        spec = settings.actor
        self.settings, self.learner, self.transport, self.curves = settings, learner, transport, curves
        self.budget = spec.total_steps
        self.replay = Replay(settings.replay_size, seed=spec.seed)
        self.limiter = RateLimiter(
            settings.samples_per_insert,
            settings.min_replay,
            settings.hyper["batch_size"],
            slack=SLACK_CHUNKS * spec.chunk_size * settings.actors,
        )
        self.quantizer = ParameterQuantizer(spec.layer_shapes, spec.comm_bits)
        self.book = ActorBook()
        self.curve: list[dict[str, float]] = []
        self.env_steps, self.version = 0, 0
        self.timings = LearnerTimings()
        self.losses: dict[str, torch.Tensor] = {}
        self.stop = ""
        self.first_experience_s: Optional[float] = None
        self.start = self.last_progress = time.perf_counter()
        self.bar = Progress(
            self.budget,
            f"ActorQ {spec.algo} {spec.precision}",
            unit="env step",
            interval_s=settings.log_interval_s,
            interactive=progress or None,
            logger=log,
        )
        self.window, self.dump_every, self.last_dump = LossWindow(), max(1, self.budget // CURVE_ROWS), 0

    def publish(self) -> None:
        """Quantize the learner's weights once and hand them to the transport."""
        t0 = time.perf_counter()
        self.transport.publish(self.version, self.quantizer.pack(self.learner.policy))
        self.timings.publish_s += time.perf_counter() - t0

    def stopped_by(self) -> str:
        """Why the run ends now ('' while it goes on): its budget, its target return or its time limit."""
        s = self.settings
        if self.env_steps >= self.budget:
            self.stop = "budget"
        elif _reached(s, self.curve, self.env_steps):
            self.stop = "target"
        elif s.time_limit_s is not None and time.perf_counter() - self.start >= s.time_limit_s:
            log.warning(
                "Stopping at %d of %d env steps: the run reached actorq.time_limit_s=%g s.",
                self.env_steps,
                self.budget,
                s.time_limit_s,
            )
            self.stop = "time_limit"
        return self.stop

    def start_actors(self) -> None:
        for actor_id, where in enumerate(self.transport.start(list(range(self.settings.actors)))):
            log.info("Actor %d started (%s)", actor_id, where)
        self.publish()  # after every start: the actors wait for the first weights, so none gets a head start
        self.last_progress = time.perf_counter()

    def take_experience(self) -> tuple[float, bool]:
        """Insert the chunks the actors sent (waiting a little where the learner cannot train yet);
        the time after receiving, and whether any experience came or the learner can train."""
        can_train = self.limiter.can_sample(self.replay.inserted)
        can_insert = self.limiter.can_insert(self.replay.inserted)
        t0 = time.perf_counter()
        chunks = self.transport.receive(0.0 if can_train else WAIT_S) if can_insert else []
        now = time.perf_counter()
        self.timings.wait_s += now - t0
        if chunks and self.first_experience_s is None:  # the start-up ends here
            self.first_experience_s = now - self.start
        for chunk in chunks:
            seen = len(self.curve)
            self.env_steps += _take(chunk, self.replay, self.book, self.curve, self.env_steps, now - self.start)
            if self.curves is not None:
                for point in self.curve[seen:]:
                    self.curves.episode(
                        int(point["step"]), point["reward"], int(point["length"]), point["wall_s"], actor=point["actor"]
                    )
        self.timings.insert_s += time.perf_counter() - now
        return now, bool(chunks) or can_train

    def update(self) -> None:
        """Learner updates while the rate limiter allows, publishing every actorq.publish_period."""
        for _ in range(UPDATES_PER_DRAIN):
            if not self.limiter.can_sample(self.replay.inserted):
                break
            self.limiter.sample()
            t0 = time.perf_counter()
            batch = self.replay.sample(self.limiter.batch)
            t1 = time.perf_counter()
            self.losses = self.learner.update(batch)
            self.window.add(self.losses)
            self.timings.sample_s += t1 - t0
            self.timings.update_s += time.perf_counter() - t1
            if self.learner.updates % self.settings.publish_period == 0:
                self.version += 1
                self.publish()

    def watch(self, now: float, moved: bool) -> None:
        """Restart dead actors; end the run when no experience came for actorq.stall_timeout_s."""
        if moved:
            self.last_progress = now
        _watch(self.settings, self.transport, self.book)
        if now - self.last_progress > self.settings.stall_timeout_s:
            raise QuarlError(
                f"No experience from any actor for {self.settings.stall_timeout_s:.0f} s "
                "(actorq.stall_timeout_s): the actors are stuck or cannot start; see the log above."
            )

    def report(self, now: float) -> None:
        """Progress, and the learner's mean losses into the curve every dump_every env steps."""
        recent = [c["reward"] for c in self.curve[-20:]]
        self.bar.update(
            min(self.budget, self.env_steps) - self.bar.done,
            **{
                "learner steps": self.learner.updates,
                "replay": len(self.replay),
                "return": float(np.mean(recent)) if recent else "n/a",
            },
        )
        if self.curves is not None and self.env_steps - self.last_dump >= self.dump_every:
            self.last_dump = self.env_steps
            self.curves.scalars(
                self.env_steps,
                {
                    **self.window.take(),
                    "train/learner_steps": self.learner.updates,
                    "train/replay": len(self.replay),
                    "train/publishes": self.version + 1,
                    **self.fidelity(),
                },
                wall_s=now - self.start,
            )

    def fidelity(self) -> dict[str, float]:
        """Actors in a number format: how their copy acts beside the learner's (`quarl.actorq.fidelity`)."""
        spec = self.settings.actor
        if spec.actor_format is None:
            return {}
        obs = fidelity.recent_observations(self.replay.arrays, self.replay.size, self.replay.pos)
        return fidelity.fidelity(spec, self.quantizer.pack(self.learner.policy), obs)

    def close(self) -> None:
        self.bar.close()
        self.transport.stop()
        if self.curves is not None:
            self.curves.close()

    def result(self) -> TrainResult:
        return TrainResult(
            self.curve,
            self.book.rows(),
            self.env_steps,
            self.learner.updates,
            self.version + 1,
            self.quantizer.nbytes,
            time.perf_counter() - self.start,
            {k: v.item() for k, v in self.losses.items()},
            self.timings,
            self.stop,
            self.first_experience_s,
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
            (where,) = transport.start([actor_id])
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
