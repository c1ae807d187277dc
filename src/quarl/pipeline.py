"""One cell of a study, start to end: check, policy, fp32 baseline, quantize, evaluate, record."""

from __future__ import annotations

import dataclasses
import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from quarl.config import backend_registry, method_registry
from quarl.config.cells import finished, label, log_skip, resolve
from quarl.config.keys import cell_key
from quarl.config.method_registry import fp32_config
from quarl.errors import IncompatibleCell, QuarlError
from quarl.evaluate.episodes import Evaluation, evaluate_cell
from quarl.evaluate.fidelity import STATES, Fidelity, executed_fidelity, greedy_actions, policy_fidelity, relative_error
from quarl.progress import activity
from quarl.quantize import calibration
from quarl.quantize.weights import policy_bytes, quantize_policy
from quarl.rl.baseline import fp32_flag
from quarl.rl.envs import make_env
from quarl.rl.matrix import check_runnable
from quarl.store import provenance
from quarl.store.locks import taking_turns
from quarl.store.records import Context, make_record, store_record
from quarl.store.sqlite import Store, make_folder
from quarl.store.studies import PRUNED_MESSAGE
from quarl.train.cache import CachedPolicy, obtain
from quarl.train.loaded import fresh_model, loaded
from quarl.train.pruning import Pruned

log = logging.getLogger(__name__)


def evaluate_quantized(cfg: DictConfig, policy: CachedPolicy, desc: str, **kw: Any) -> tuple[Evaluation, int, Any]:
    """Evaluate the (fake-)quantized policy; returns the evaluation, its bytes and the model."""
    model = fresh_model(policy)  # a QAT policy comes quantized: its own fake-quant graph, ranges frozen
    size = policy_bytes(model, cfg.quant)  # counted on the fp32 weights (QuaRL's formulas count their levels)
    quantize_policy(model, cfg.quant, calibrate=calibration.calibrator(cfg, policy))  # PTQ activation ranges
    ev = evaluate_cell(model, cfg, loaded(policy)[1], progress=cfg.eval.progress, desc=desc, **kw)
    return ev, size, model


@dataclass
class Baseline:
    """The fp32 policy of a cell: its reward, bytes, the model and the states its evaluation visited."""

    reward: float
    nbytes: int
    policy: CachedPolicy
    states: np.ndarray

    def fidelity(self, model: Any, policy: CachedPolicy) -> Fidelity:
        """Action fidelity of a (fake-)quantized SB3 model to this fp32 policy."""
        return policy_fidelity(*loaded(self.policy), model, loaded(policy)[1], self.states)

    def reference_actions(self) -> np.ndarray:
        """The fp32 policy's greedy actions on the states."""
        reference, transform = loaded(self.policy)
        return greedy_actions(reference, transform(self.states) if transform is not None else self.states)


def _execute(cfg: Any, model: Any, baseline: Baseline, obs_transform: Any) -> dict[str, Any]:
    """Run the quantized policy on a real backend, one observation per call as it is deployed: its
    reward on the same episodes, its action fidelity, its batch-1 one-thread latency next to fp32
    eager torch's, and its bytes."""
    from quarl.deploy import compile_policy, measure

    backend = method_registry.of(cfg).auto_backend if cfg.quant.backend == "auto" else cfg.quant.backend
    env = make_env(cfg.env)
    example = np.asarray(env.reset(seed=cfg.seed)[0])[None]
    space = env.action_space
    env.close()
    from quarl.deploy.edge import calibration_states

    # a full-integer policy takes its activation ranges from the states the fp32 policy visits
    observed = calibration_states(cfg, baseline.policy) if backend_registry.get(backend).calibrated else example
    with activity(f"Compiling the policy for quant.backend={backend}"):
        runner = compile_policy(model, backend, observed, obs_transform=obs_transform)
    fp32_model, fp32_transform = loaded(baseline.policy)
    reference = compile_policy(fp32_model, "torch", example, obs_transform=fp32_transform)
    ev = evaluate_cell(runner, cfg, progress=cfg.eval.progress, desc=f"{runner.backend} eval", per_observation=True)
    fidelity = executed_fidelity(baseline.reference_actions(), runner, baseline.states, space)
    log.info(
        "Executed on %s (%s): reward %.2f, action agreement %.3f%s",
        runner.backend,
        runner.precision,
        ev.mean,
        fidelity.agreement,
        f"; {runner.reason}" if runner.reason else "",
    )
    with activity("Measuring batch-1 latency"):
        latency, fp32_latency = measure(runner, example)["median_ms"], measure(reference, example)["median_ms"]
    return {
        "backend": runner.backend,
        "backend_precision": runner.precision,
        "backend_reward": ev.mean,
        "backend_bytes": runner.nbytes,
        "latency_ms": latency,
        "fp32_latency_ms": fp32_latency,
        **fidelity.fields("backend_"),
    }


def _states_file(policy: CachedPolicy, key: str) -> Path:
    return policy.folder / f"eval-states-{key}.npz"


def _save_states(path: Path, states: np.ndarray) -> None:
    tmp = path.with_name(f"{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.savez_compressed(f, states=states)
    tmp.replace(path)


def _baseline(ctx: Context, store: Store, policy: CachedPolicy, started: str) -> Baseline:
    """The fp32 reward of this cell's policy and the states its evaluation visits: from the store
    and the policy cache, or evaluated and recorded once."""
    cfg = fp32_config(ctx.cfg)
    key = cell_key(cfg)
    states_file = _states_file(policy, key)
    with taking_turns(ctx.path(ctx.cfg.store.policies), f"{key}.eval", f"evaluating the fp32 policy of {label(cfg)}"):
        model_bytes = policy_bytes(loaded(policy)[0], cfg.quant)
        reward = store.reward(key)
        if reward is not None and states_file.exists():
            with np.load(states_file) as data:
                return Baseline(reward, model_bytes, policy, data["states"])
        ev, _, _ = evaluate_quantized(cfg, policy, "fp32 eval", keep_states=STATES)
        assert ev.states is not None
        _save_states(states_file, ev.states)
        if reward is None:
            weak = (fp32_flag(cfg.env, ev.mean) or (None, None))[1]
            fields = _measured(policy, ev, ev.mean, model_bytes, model_bytes, weak, policy.curve)
            name = "record.json" if method_registry.of(ctx.cfg).baseline else "baseline.record.json"
            _store(ctx, store, cfg, "done", started, name, rel_error=0.0, **fields)
            log.info("Recorded fp32 baseline of %s: %.2f ± %.2f", label(cfg), ev.mean, ev.std)
        return Baseline(ev.mean if reward is None else reward, model_bytes, policy, ev.states)


def _measured(
    policy: CachedPolicy,
    ev: Evaluation,
    fp32_reward: float,
    nbytes: int,
    fp32_bytes: int,
    fp32_note: str | None,
    curve: list[dict[str, float]],
) -> dict[str, Any]:
    """The record fields every evaluated cell has (the fp32 baseline's and a quantized cell's alike):
    its evaluation, its fp32 reward and why that is weak, its bytes and fp32's, and its training."""
    return {
        "evaluation": ev,
        "fp32_reward": fp32_reward,
        "fp32_note": fp32_note,
        "policy_bytes": nbytes,
        "fp32_bytes": fp32_bytes,
        "trained": policy.trained,
        "curve": curve,
        **_trained(policy),
    }


def _trained(policy: CachedPolicy) -> dict[str, Any]:
    """The record fields of the policy's training: its folder, time, the env steps it really ran and
    the device it ran on, and which step's model it is with its evaluation reward then
    (train.keep_best), where recorded."""
    meta = policy.meta
    kept = meta.get("kept") or {}
    return {
        "policy_dir": str(policy.folder),
        "train_time_s": meta["train_time_s"],
        **({"trained_steps": meta["timesteps"]} if meta.get("timesteps") is not None else {}),
        **({"training_device": meta["device"]} if meta.get("device") else {}),
        **({"kept_step": kept.get("step"), "kept_eval_reward": kept.get("reward")} if kept else {}),
    }


def run_cell(ctx: Context) -> None:
    """Run one cell and record it. In a sweep, a cell that cannot run is recorded as skipped and one
    that fails as failed (traceback in its run dir), and the sweep goes on; both are re-run by the
    same command once fixed. A single run raises instead."""
    cfg = ctx.cfg
    try:  # before anything is written: an invalid cell leaves no record and no marker
        key, cfg = resolve(cfg, warn=not ctx.multirun)
    except QuarlError as exc:
        if not ctx.multirun:
            raise
        log.error(
            "%s/%s seed=%s quant=%s is invalid and was not run: %s",
            cfg.algo.name,
            cfg.env.name,
            cfg.seed,
            cfg.quant.method,
            exc,
        )
        return
    ctx = dataclasses.replace(ctx, cfg=cfg)
    policies = make_folder(ctx.path(cfg.store.policies), "store.policies")
    store = Store(ctx.path(cfg.store.path))
    # two sweeps started together: the second waits for the first's cell, then finds it done
    with taking_turns(policies, f"{key}.cell", f"running {label(cfg)}"):
        status = store.status(key)
        if finished(cfg, status):
            log_skip(cfg, status)
            return
        _run_marked(ctx, store, key, status)


def _run_marked(ctx: Context, store: Store, key: str, status: str | None) -> None:
    """Run the cell behind a `running` marker (for `quarl status`) that its record replaces; a run
    interrupted (Ctrl-C, SIGTERM, SIGHUP) or a failed single run leaves no marker: neither its own nor
    one a killed run left (the cell's lock is held, so a `running` found here is stale). A record
    stored before (failed, or forced again) stays."""
    cfg = ctx.cfg
    started = provenance.now()
    marked = status in (None, "running")
    if status is None:
        store.write(make_record(cfg, "running", started, ctx.run_dir))
    try:
        torch.set_num_threads(cfg.train.threads)
        _run(ctx, store, started)
    except KeyboardInterrupt:
        if marked:
            store.delete(key)
        raise
    except Exception as exc:
        if not ctx.multirun:
            if marked:
                store.delete(key)
            raise
        _record_failure(ctx, store, started, exc)


def _record_failure(ctx: Context, store: Store, started: str, exc: Exception) -> None:
    """In a sweep: record a cell that raised as skipped (n/a), pruned (an Optuna search's) or failed,
    and go on."""
    cfg, name = ctx.cfg, label(ctx.cfg)
    if isinstance(exc, IncompatibleCell):
        _store(ctx, store, cfg, "skipped", started, message=str(exc))
        log.warning("Skipping %s: %s", name, exc)
    elif isinstance(exc, Pruned):  # its search trial was pruned: not done, and no fault
        _store(ctx, store, cfg, "pruned", started, message=f"{PRUNED_MESSAGE} {exc}")
        log.info("%s was pruned: %s", name, exc)
    else:
        error_file = ctx.run_dir / "error.txt"
        error_file.parent.mkdir(parents=True, exist_ok=True)
        error_file.write_text("".join(traceback.format_exception(exc)))
        first_line = (str(exc).splitlines() or [""])[0]
        _store(ctx, store, cfg, "failed", started, message=f"{type(exc).__name__}: {first_line}")
        log.error("%s failed: %s (traceback in %s)", name, first_line, error_file)


def _store(
    ctx: Context,
    store: Store,
    cfg: DictConfig,
    status: str,
    started: str,
    json_name: str = "record.json",
    **fields: Any,
) -> None:
    """Record the cell of `cfg` (the cell's own or its fp32 baseline's) in the store, with a JSON copy
    named `json_name` in the run dir."""
    store_record(store, make_record(cfg, status, started, ctx.run_dir, **fields), ctx.run_dir / json_name)


def _run(ctx: Context, store: Store, started: str) -> None:
    cfg = ctx.cfg
    method = method_registry.of(cfg)
    name = label(cfg)
    check_runnable(cfg)
    measured = method.own_cell(ctx)
    if measured is not None:  # the method ran the cell itself (ActorQ): recorded like every cell
        record = make_record(
            cfg, "done", started, ctx.run_dir, evaluation=measured.evaluation, curve=measured.curve, **measured.fields
        )
        store_record(store, {**record, **measured.extra}, ctx.run_dir / "record.json")
        return
    progress = cfg.train.progress and ctx.interactive
    policies = ctx.path(cfg.store.policies)
    fp32_policy = obtain(fp32_config(cfg), policies, progress=progress)
    baseline = _baseline(ctx, store, fp32_policy, started)
    flag, weak = fp32_flag(cfg.env, baseline.reward) or (None, None)
    if weak:
        log.warning("%s: %s.", name, weak)
    if method.baseline:
        log.info("%s: fp32 reward %.2f%s", name, baseline.reward, f" (fp32 policy {flag})" if flag else "")
        return
    policy = obtain(cfg, policies, progress=progress) if method.trains_policy else fp32_policy
    ev, size, model = evaluate_quantized(cfg, policy, f"{cfg.quant.method} eval")
    fidelity = baseline.fidelity(model, policy)
    executed = {} if cfg.quant.backend == "fake" else _execute(cfg, model, baseline, loaded(policy)[1])
    error, note = relative_error(baseline.reward, ev.mean, cfg.env.return_scale)
    curve = policy.curve if policy is not fp32_policy else []
    _store(
        ctx,
        store,
        cfg,
        "done",
        started,
        rel_error=error,
        rel_error_note=note,
        **_measured(policy, ev, baseline.reward, size, baseline.nbytes, weak, curve),
        **fidelity.fields(),
        **executed,
        **calibration.record_fields(model),
        **method.record_fields(model, cfg.quant),
    )
    shown = "n/a" if error is None else f"{100 * error:.2f}%"
    if note:
        log.warning("%s: %s.", name, note)
    ran = (  # what the executed policy does, last: its latency and its own agreement with fp32
        f" | latency {executed['latency_ms']:.3g} ms vs fp32 {executed['fp32_latency_ms']:.3g} ms | executed on "
        f"{executed['backend']}: action agreement {executed['backend_action_agreement']:.3f}"
        if executed
        else ""
    )
    log.info(
        "%s: fp32 %.2f | quantized %.2f ± %.2f | E = %s%s | action agreement %.3f (fake quantization) | %d -> %d "
        "bytes%s",
        name,
        baseline.reward,
        ev.mean,
        ev.std,
        shown,
        f" (fp32 policy {flag})" if flag else "",
        fidelity.agreement,
        baseline.nbytes,
        size,
        ran,
    )
