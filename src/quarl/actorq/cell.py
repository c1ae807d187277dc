"""`quant=actorq` in the pipeline: train with quantized actors, evaluate, record."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Any, Iterator

import numpy as np
import torch

from quarl.actorq import execution, params
from quarl.actorq.actor import scale_action
from quarl.actorq.d4pg import D4PGLearner
from quarl.actorq.dqn import DQNLearner
from quarl.actorq.learner import TrainResult, open_run_curves, train
from quarl.actorq.settings import Settings, resolve
from quarl.actorq.transport import LocalTransport, Transport, actor_cores
from quarl.errors import raise_terminated
from quarl.evaluate.episodes import Evaluation, evaluate
from quarl.evaluate.fidelity import STATES, executed_fidelity, greedy_actions
from quarl.rl.envs import make_env
from quarl.store.records import Context, Measured

log = logging.getLogger(__name__)


class GreedyPolicy:
    """A policy function as SB3's `predict` (for `quarl.evaluate.episodes.evaluate`): greedy Q-values, or
    D4PG actions scaled from [-1, 1] to the env's bounds."""

    def __init__(self, forward: Any, settings: Settings) -> None:
        self.forward, self.settings = forward, settings

    def predict(
        self, obs: np.ndarray, state: Any = None, episode_start: Any = None, deterministic: bool = True
    ) -> tuple[np.ndarray, None]:
        out = self.forward(np.asarray(obs, dtype=np.float32))
        if self.settings.actor.squash:
            s = self.settings
            return scale_action(out, np.asarray(s.action_low, np.float32), np.asarray(s.action_high, np.float32)), None
        return np.argmax(out, axis=-1), None


def _device(name: str) -> torch.device:
    if name in ("cuda", "auto") and torch.cuda.is_available():
        return torch.device("cuda")
    if name == "cuda":
        log.warning("train.device=cuda but no GPU is visible: the learner runs on the CPU.")
    return torch.device("cpu")


@contextlib.contextmanager
def learner_threads(settings: Settings, device: torch.device) -> Iterator[int]:
    """A CPU learner runs on the cores its local actors leave (one each), at least one: torch's
    default of every core makes each update wait on busy cores (measured 4x slower on 2 cores)."""
    previous = torch.get_num_threads()
    local_actors = settings.actors  # a joined Ray cluster places actors on this node too (it is one of its nodes)
    threads = previous if device.type != "cpu" else max(1, (os.cpu_count() or 1) - local_actors)
    torch.set_num_threads(threads)
    try:
        yield threads
    finally:
        torch.set_num_threads(previous)


def make_transport(settings: Settings) -> Transport:
    """The transport `actorq.backend` names (Ray is imported only when chosen)."""
    capacity = params.packed_size(settings.actor.layer_shapes, settings.actor.comm_bits)
    if settings.backend == "ray":
        from quarl.actorq.ray_transport import RayTransport

        return RayTransport(settings.actor, settings.ray_address, settings.actors)
    return LocalTransport(settings.actor, capacity, actor_cores(settings.actors) if settings.pin_actors else None)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (scancel, kill) ends the run like Ctrl-C: through the `finally` that stops every actor
    (also under submitit, whose own handler would let the actors run on until SIGKILL)."""
    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _actor_policy(learner: Any, settings: Settings) -> GreedyPolicy:
    """The learner's final policy as the actors execute it (published at comm_bits, run at actor_bits)."""
    spec = settings.actor
    packed = params.ParameterQuantizer(spec.layer_shapes, spec.comm_bits).pack(learner.policy)
    layers = execution.convert(
        params.unpack(packed, spec.layer_shapes, spec.comm_bits), spec.actor_bits, spec.actor_format
    )
    return GreedyPolicy(execution.build(layers, spec.actor_bits, spec.squash), settings)


def _fields(result: TrainResult, actor_ev: Evaluation) -> dict[str, Any]:
    """The run-level numbers of a record: totals over actors, learner counts, bytes, wall time."""
    actors = result.actors
    steps = sum(a["steps"] for a in actors)
    return {
        "actor_reward": actor_ev.mean,
        "train_time_s": result.wall_s,
        "env_steps": result.env_steps,
        "learner_steps": result.learner_steps,
        "publishes": result.publishes,
        "bytes_per_publish": result.bytes_per_publish,
        "publish_ms": 1e3 * result.learner.publish_s / max(1, result.publishes),
        "actor_steps_per_s": sum(a["steps_per_s"] for a in actors),
        "actor_inference_ms": 1e3 * sum(a["inference_s"] for a in actors) / max(1, steps),
        "actor_restarts": sum(a["restarts"] for a in actors),
        "policy_bytes": result.bytes_per_publish,
        "actor_send_s": sum(a["send_s"] for a in actors),
        "stopped_by": result.stopped_by,
        "first_experience_s": result.first_experience_s,
        **result.learner.fields(result.learner_steps, result.wall_s),
    }


def run_actorq_cell(ctx: Context) -> Measured:
    """Train `ctx.cfg` with ActorQ, evaluate the learner's fp32 policy and the actors' quantized
    copy of it greedily; what it measured (reward, curve, per-actor breakdown) for the pipeline to record."""
    cfg = ctx.cfg
    settings, learner, device = _start(cfg)
    with sigterm_as_interrupt(), learner_threads(settings, device) as threads:
        log.debug("Learner on %d CPU threads.", threads)
        result = train(
            settings,
            learner,
            make_transport(settings),
            progress=cfg.train.progress and ctx.interactive,
            curves=open_run_curves(cfg, ctx.run_dir),
        )
    ev, actor_ev, fidelity = _evaluate_both(cfg, settings, learner, device)
    fields = {**_fields(result, actor_ev), **fidelity.fields("actor_"), "training_device": str(device)}
    _log_breakdown(result)
    _log_summary(cfg, settings, result, ev, actor_ev, fidelity.agreement, fields["actor_steps_per_s"])
    return Measured(ev, fields, result.curve, {"actors": result.actors})


def _start(cfg: Any) -> tuple[Settings, Any, torch.device]:
    """The run's settings and its learner on the device that really runs it (said in the log)."""
    settings = resolve(cfg)
    if settings.backend == "ray":
        from quarl.actorq.ray_transport import ray_module

        ray_module()  # fail before any work when Ray is missing
    torch.manual_seed(cfg.seed)
    device = _device(cfg.train.device)
    learner = (DQNLearner if settings.actor.algo == "dqn" else D4PGLearner)(settings, device)
    spec = settings.actor
    log.info(
        "ActorQ %s on %s: %d %s actors (%s backend), weights sent at %d bits, learner on %s, %d env steps.",
        cfg.algo.name,
        cfg.env.name,
        settings.actors,
        spec.precision,
        settings.backend,
        spec.comm_bits,
        device,
        spec.total_steps,
    )
    return settings, learner, device


def _evaluate_both(
    cfg: Any, settings: Settings, learner: Any, device: torch.device
) -> tuple[Evaluation, Evaluation, Any]:
    """The fp32 learner's and the actor-precision policy's seeded greedy episodes (the latter as the
    actors run it, one observation per call), and the actors' action fidelity to the learner."""
    run_eval = dict(
        episodes=cfg.eval.episodes,
        seed=cfg.seed,
        n_envs=cfg.eval.n_envs,
        deterministic=True,
        progress=cfg.eval.progress,
    )
    learner.policy.eval()
    fp32_policy = GreedyPolicy(
        lambda x: learner.policy(torch.as_tensor(x, device=device)).detach().cpu().numpy(), settings
    )
    ev = evaluate(fp32_policy, cfg.env, desc="fp32 learner eval", keep_states=STATES, **run_eval)
    actor_policy = _actor_policy(learner, settings)
    actor_ev = evaluate(actor_policy, cfg.env, desc="actor-precision eval", per_observation=True, **run_eval)
    assert ev.states is not None
    env = make_env(cfg.env)
    space = env.action_space
    env.close()
    fidelity = executed_fidelity(greedy_actions(fp32_policy, ev.states), actor_policy, ev.states, space)
    return ev, actor_ev, fidelity


def _log_breakdown(result: TrainResult) -> None:
    """Where the learner's time went, and each actor's steps and time."""
    t = result.learner
    log.info(
        "learner: %d updates, %.0f updates/s; waiting for experience %.1f s, insert %.1f s, sample %.1f s, "
        "update %.1f s, publish %.1f s",
        result.learner_steps,
        result.learner_steps / result.wall_s if result.wall_s > 0 else 0.0,
        t.wait_s,
        t.insert_s,
        t.sample_s,
        t.update_s,
        t.publish_s,
    )
    for a in result.actors:
        log.info(
            "actor %d: %d steps, %.0f steps/s; inference %.1f s, env %.1f s, pull %.2f s, deserialize %.2f s, "
            "load %.2f s, send %.2f s (%d pulls, %d restarts)",
            a["actor"],
            a["steps"],
            a["steps_per_s"],
            a["inference_s"],
            a["env_s"],
            a["pull_s"],
            a["deserialize_s"],
            a["load_s"],
            a["send_s"],
            a["pulls"],
            a["restarts"],
        )


def _log_summary(
    cfg: Any,
    settings: Settings,
    result: TrainResult,
    ev: Evaluation,
    actor_ev: Evaluation,
    agreement: float,
    actor_steps_per_s: float,
) -> None:
    """The cell's one-line summary."""
    precision = settings.actor.precision
    log.info(
        "%s/%s ActorQ %s actors: reward %.2f ± %.2f (fp32 learner), %.2f (%s actor policy, action agreement "
        "%.3f) | %d env steps in %.1f s, %.0f actor steps/s, %d learner steps, %d bytes per publish",
        cfg.algo.name,
        cfg.env.name,
        precision,
        ev.mean,
        ev.std,
        actor_ev.mean,
        precision,
        agreement,
        result.env_steps,
        result.wall_s,
        actor_steps_per_s,
        result.learner_steps,
        result.bytes_per_publish,
    )
