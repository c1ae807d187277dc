"""Training one policy with SB3: env, normalisation, model, callbacks (QAT schedule, curve, progress,
keep-best, checkpoints), resume, save."""

from __future__ import annotations

import collections
import json
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from quarl.config import method_registry
from quarl.config.cells import torch_threads
from quarl.config.keys import as_dict, keep_best_every, policy_key, slug, train_steps, training_spec
from quarl.config.method_registry import TrainingHook
from quarl.progress import Progress
from quarl.rl import algos
from quarl.rl.envs import training_envs
from quarl.store import provenance
from quarl.train import CURVE_FILE, META_FILE, MODEL_FILE, NORMALIZE_FILE, checkpoint
from quarl.train.amp import AutocastWhileTraining
from quarl.train.curves import CURVES_DIR, Curves, CurvesOutput, RunName, launch_dir, open_curves, sweep_group
from quarl.train.keep_best import KeepBest
from quarl.train.pruning import pruning_callback
from quarl.train.stopping import StopAtReturn

log = logging.getLogger(__name__)


CURVE_ROWS = 250  # the algorithm's logged scalars are written about this many times per training
RECENT = 20  # training episodes averaged in the progress line's "return"


class TrainingLog(BaseCallback):
    """Every training episode (return, length, the env step it ended at) to `points` and the curve
    writers; the algorithm's logged scalars to the curve every `dump_every` env steps, when a
    rollout starts (right after the gradient updates); progress to `progress`."""

    def __init__(self, curves: Curves, progress: Progress, dump_every: int, spent_s: float = 0.0) -> None:
        super().__init__()
        self.curves, self.progress, self.dump_every = curves, progress, dump_every
        self.points: list[dict[str, float]] = []
        self.recent: collections.deque[float] = collections.deque(maxlen=RECENT)
        self.spent_s, self.start = spent_s, time.perf_counter()
        self.last_dump: Optional[int] = None
        self.started_at = 0

    def wall_s(self) -> float:
        """Training wall time so far, across resumes."""
        return self.spent_s + time.perf_counter() - self.start

    def resume(self, points: list[dict[str, float]], spent_s: float) -> None:
        self.points, self.spent_s = points, spent_s
        self.recent.extend(p["reward"] for p in points[-RECENT:])

    def _on_training_start(self) -> None:
        self.started_at = self.num_timesteps
        if self.last_dump is None:
            self.last_dump = self.num_timesteps

    def _on_step(self) -> bool:
        ended = False
        for info in self.locals.get("infos", []):
            if "episode" in info:
                reward, length = float(info["episode"]["r"]), int(info["episode"]["l"])
                self.points.append({"step": self.num_timesteps, "reward": reward, "length": length})
                self.curves.episode(self.num_timesteps, reward, length, self.wall_s())
                self.recent.append(reward)
                ended = True
        info = {"return": float(np.mean(self.recent))} if ended else {}
        self.progress.update(self.num_timesteps - self.progress.done, **info)
        return True

    def _on_rollout_start(self) -> None:
        assert self.last_dump is not None  # set when training starts
        if self.num_timesteps - self.last_dump >= self.dump_every:
            self.dump()

    def _on_training_end(self) -> None:
        self.dump()

    def dump(self) -> None:
        """Write the scalars the algorithm logged since the last dump, with episode and time summaries."""
        self.last_dump = self.num_timesteps
        logger, buffer = self.model.logger, self.model.ep_info_buffer
        if buffer:
            logger.record("rollout/ep_rew_mean", float(np.mean([e["r"] for e in buffer])))
            logger.record("rollout/ep_len_mean", float(np.mean([e["l"] for e in buffer])))
        elapsed = time.perf_counter() - self.start
        if elapsed > 0:
            logger.record("time/fps", (self.num_timesteps - self.started_at) / elapsed)
        logger.record("time/episodes", len(self.points))
        logger.record("time/wall_s", self.wall_s())
        logger.dump(self.num_timesteps)


def checkpoint_every(cfg: Any) -> int:
    """Env steps between checkpoints: `train.checkpoint_every`, a tenth of the budget when null, 0 = off."""
    every = cfg.train.checkpoint_every
    return max(1, train_steps(cfg) // 10) if every is None else int(every)


def resolve_device(name: str) -> str:
    """The torch device to train on; `cuda` without a visible GPU warns and trains on the CPU."""
    if name == "cuda" and not torch.cuda.is_available():
        log.warning("train.device=cuda but no GPU is visible: training runs on the CPU.")
        return "cpu"
    return name


def run_name(cfg: Any) -> RunName:
    """How this training is named (by the policy it trains) and grouped (by its sweep) in trackers."""
    method = method_registry.of(cfg)
    name = f"{cfg.algo.name}-{slug(cfg.env.name)}-seed{cfg.seed}{method.policy_tag(cfg.quant)}"
    quant = method.name if method.trains_policy else method_registry.BASELINE
    tags = {
        "algo": cfg.algo.name,
        "env": cfg.env.name,
        "quant": quant,
        "seed": str(cfg.seed),
        "policy_key": policy_key(cfg),
    }
    return RunName(name, sweep_group(cfg.train.tracking.group), tags, training_spec(cfg))


KEEP_BEST_ENVS = 4  # keep-best evaluations step this many episodes side by side


def _keep_best(cfg: Any, hook: Optional[TrainingHook], curves: Curves, progress: Progress) -> KeepBest:
    def on_eval(step: int, mean: float, std: float) -> None:
        curves.scalars(step, {"eval/mean_reward": mean, "eval/std_reward": std})
        progress.update(0, eval=mean)

    eligible = hook.ready if hook is not None else (lambda: True)
    # a fixed number of episodes side by side: eval.n_envs is not in the policy key, so it must not
    # touch the float rounding that decides which model is kept
    return KeepBest(
        cfg.env,
        cfg.seed,
        keep_best_every(cfg),
        int(cfg.train.eval_episodes),
        KEEP_BEST_ENVS,
        eligible=eligible,
        on_eval=on_eval,
    )


def _warn_rounding(model: BaseAlgorithm, steps: int) -> None:
    """Say when SB3 will train past the budget: an on-policy algorithm collects whole rollouts."""
    n_steps = getattr(model, "n_steps", None)
    if not isinstance(n_steps, int) or n_steps <= 0:
        return
    rollout = n_steps * model.n_envs
    trained = -(-steps // rollout) * rollout
    if trained != steps:  # a warning where it trains a tenth more or beyond, else a note
        log.log(
            logging.WARNING if trained > 1.1 * steps else logging.INFO,
            "The budget of %d env steps is rounded up to %d: %s collects whole rollouts of n_steps=%d x "
            "n_envs=%d = %d env steps (set train.steps to a multiple of %d to train exactly).",
            steps,
            trained,
            type(model).__name__,
            n_steps,
            model.n_envs,
            rollout,
            rollout,
        )


@dataclass
class _Training:
    """One training's parts, as its steps build them."""

    cfg: Any
    steps: int
    venv: VecEnv
    normalizer: Optional[VecNormalize]
    model: BaseAlgorithm
    hook: Optional[TrainingHook]
    live: Path  # where the curve is written while training
    curves: Curves
    bar: Progress
    logged: TrainingLog
    keeper: Optional[KeepBest]
    stopper: Optional[StopAtReturn]  # train.stop_at_return
    callbacks: list[BaseCallback]
    done: int  # env steps done before (a resumed checkpoint)
    seconds: float = 0.0  # wall time of the training (a resumed one's included), once it ran


def train(cfg: Any, folder: Path, progress: bool, checkpoints: Path | None = None) -> None:
    """Train the policy `cfg` describes (fp32, or its method's own, such as QAT) and save it in `folder`,
    with its training curve in `folder/curves` (CSV, and the trackers train.tracking turns on; quarl.train.curves).

    `progress`: a bar on a terminal; off a terminal (and with train.progress) a log line every
    `train.log_interval_s` seconds. With `checkpoints`, progress is saved there every
    `checkpoint_every(cfg)` steps and a checkpoint found there is resumed; it is removed once the
    policy is saved. The curve is written beside it (`<checkpoints>.curves`) until then.
    """
    torch.set_num_threads(torch_threads(cfg))  # train.threads: cells side by side do not oversubscribe the cores
    run = _start(cfg, folder, progress, checkpoints)
    if checkpoints is not None and checkpoint_every(cfg) > 0:
        run.callbacks.append(checkpoint.Checkpointer(checkpoints, checkpoint_every(cfg), lambda: _state(run)))
    pruning = pruning_callback(cfg)  # in a search that prunes: reports to its trial (after the checkpoint)
    run.callbacks += [pruning] if pruning is not None else []
    _learn(run)
    kept = _keep_the_best(run)
    _save(run, folder, kept)


def _model(cfg: Any, steps: int) -> tuple[VecEnv, Optional[VecNormalize], BaseAlgorithm]:
    """The training envs (normalised where algo.normalize says) and a fresh SB3 model on them."""
    algo_cfg = cfg.algo
    venv: VecEnv = training_envs(cfg.env, algo_cfg.n_envs, cfg.seed, bool(cfg.train.get("subproc_envs", False)))
    normalizer: Optional[VecNormalize] = None
    if algo_cfg.normalize:
        kwargs = as_dict(algo_cfg.normalize_kwargs)
        venv = normalizer = VecNormalize(venv, gamma=algo_cfg.hyperparams.get("gamma", 0.99), **kwargs)
    device = resolve_device(cfg.train.device)
    model = algos.build(algo_cfg, venv, seed=cfg.seed, device=device, total_steps=steps, train=cfg.train)
    _warn_rounding(model, steps)
    return venv, normalizer, model


def _start(cfg: Any, folder: Path, progress: bool, checkpoints: Path | None) -> _Training:
    """The model, its method's hook, curve writers, progress and callbacks; resumed from `checkpoints`."""
    steps = train_steps(cfg)
    venv, normalizer, model = _model(cfg, steps)
    method = method_registry.of(cfg)
    hook = method.training_hook(model, cfg)
    found = (
        checkpoint.restore(checkpoints, model) if checkpoints is not None and checkpoint.exists(checkpoints) else None
    )
    resuming, extra = found is not None, found or {}  # a checkpoint it refused to read: started over
    done = model.num_timesteps if resuming else 0
    live = folder / CURVES_DIR if checkpoints is None else checkpoint.curves_of(checkpoints)
    if not resuming:
        shutil.rmtree(live, ignore_errors=True)
    curves = open_curves(live, cfg.train.tracking, run_name(cfg), launch_dir(), resume_step=done if resuming else None)
    bar = Progress(
        steps,
        f"Training {method.policy_kind(cfg.quant)} {cfg.algo.name}",
        interval_s=cfg.train.log_interval_s,
        interactive=progress or None,
        enabled=progress or cfg.train.progress,
        initial=done,
        logger=log,
    )
    logged = TrainingLog(curves, bar, dump_every=max(1, steps // CURVE_ROWS))
    model.set_logger(Logger(str(live), [CurvesOutput(curves)]))
    callbacks: list[BaseCallback] = [logged] + ([hook.callback] if hook is not None else [])
    if cfg.train.get("robust"):  # the perturbation is off while acting, evaluating and saving
        from quarl.rl.robust import OnlyWhileTraining

        callbacks.insert(0, OnlyWhileTraining())
    if cfg.train.get("amp"):  # updates in bfloat16; acting, evaluating and saving in fp32
        callbacks.insert(0, AutocastWhileTraining())
    keeper = _keep_best(cfg, hook, curves, bar) if cfg.train.keep_best else None
    callbacks += [keeper] if keeper is not None else []
    target = cfg.train.get("stop_at_return")  # ends once the training return reaches it (QAT: with fake quant on)
    stopper = StopAtReturn(target, eligible=hook.ready if hook is not None else None) if target is not None else None
    callbacks += [stopper] if stopper is not None else []
    run = _Training(
        cfg, steps, venv, normalizer, model, hook, live, curves, bar, logged, keeper, stopper, callbacks, done
    )
    if resuming:
        _resume(run, extra)
    return run


def _resume(run: _Training, extra: dict[str, Any]) -> None:
    """Give the curve, the hook and keep-best the state the checkpoint kept."""
    run.logged.resume(extra["curve"], extra["seconds"])
    run.logged.last_dump = extra.get("dumped", run.done)
    if run.hook is not None:
        run.hook.load_state(extra.get("hook", extra.get("qat")))  # "qat": a checkpoint written before hooks
    if run.keeper is not None and extra.get("best") is not None:
        run.keeper.load_state(extra["best"])
    if run.stopper is not None:
        run.stopper.counted = int(extra.get("stop") or 0)
    # SB3 starts a resumed run with no finished episodes: the curve's last ones back, as an uninterrupted run has them
    # (SB3 then keeps both buffers as they are; successes are not in the curve)
    window = run.model._stats_window_size
    recent = ({"r": p["reward"], "l": p["length"]} for p in run.logged.points[-window:])
    run.model.ep_info_buffer = collections.deque(recent, maxlen=window)
    run.model.ep_success_buffer = collections.deque(maxlen=window)
    log.info("Resuming from the checkpoint at step %d of %d", run.done, run.steps)


def _state(run: _Training) -> dict[str, Any]:
    """What a checkpoint keeps besides the model: curve, time, hook and keep-best state."""
    return {
        "curve": run.logged.points,
        "seconds": run.logged.wall_s(),
        "dumped": run.logged.last_dump,
        "hook": run.hook.state() if run.hook is not None else None,
        "best": run.keeper.state() if run.keeper is not None else None,
        "stop": run.stopper.counted if run.stopper is not None else None,
    }


def _learn(run: _Training) -> None:
    """SB3's training loop over the budget left, with every callback."""
    try:
        run.model.learn(
            total_timesteps=run.steps - run.done,
            progress_bar=False,
            callback=run.callbacks,
            log_interval=None,  # type: ignore[arg-type]  # SB3 checks for None (no log lines); annotated int
            reset_num_timesteps=run.done == 0,
        )
    finally:
        for callback in run.callbacks:
            if isinstance(callback, AutocastWhileTraining):
                callback.leave()  # also when the training broke off mid-update
        run.bar.close()
        run.curves.close()
    run.seconds = run.logged.wall_s()
    how = method_registry.of(run.cfg).policy_kind(run.cfg.quant)
    log.info("Trained %s %s for %d steps in %.0f s", how, run.cfg.algo.name, run.model.num_timesteps, run.seconds)


def _keep_the_best(run: _Training) -> Optional[dict[str, Any]]:
    """With train.keep_best: the best evaluated model back in place, and which one it is."""
    if run.keeper is None:
        return None
    run.keeper.restore_best(run.model)
    kept = run.keeper.summary(run.model.num_timesteps)
    log.info(
        "Kept the model of step %d (evaluation reward %s over %d episodes; final model %s)",
        kept["step"],
        _reward(kept["reward"]),
        kept["episodes"],
        _reward(kept.get("final_reward")),
    )
    return kept


def _save(run: _Training, folder: Path, kept: Optional[dict[str, Any]]) -> None:
    """The policy folder: model, normalisation, the hook's files, the curve and meta.json."""
    cfg, model = run.cfg, run.model
    if run.hook is not None:
        run.hook.save(model, folder)
    model.save(folder / MODEL_FILE)
    if run.normalizer is not None:  # algo.normalize
        run.normalizer.save(str(folder / NORMALIZE_FILE))
    run.venv.close()
    if run.live != folder / CURVES_DIR:
        shutil.move(str(run.live), str(folder / CURVES_DIR))
    (folder / CURVE_FILE).write_text(json.dumps(run.logged.points))
    meta = {
        "key": policy_key(cfg),
        "spec": training_spec(cfg),
        "train_time_s": run.seconds,
        "timesteps": model.num_timesteps,
        "device": str(model.device),  # the device that really trained it (train.device=cuda without a GPU: cpu)
        "resumed_at": run.done or None,
        "curves": CURVES_DIR,
        "versions": provenance.versions(),
        "created_at": provenance.now(),
    }
    if kept is not None and run.keeper is not None:
        meta.update(kept=kept, evaluations=run.keeper.evaluations)
    if run.stopper is not None:  # train.stop_at_return: the step it stopped at (null: it trained the whole budget)
        stopped = {"stopped_at": run.stopper.stopped_at, "mean_return": run.stopper.mean}
        meta["stop_at_return"] = {"target": run.stopper.target, **stopped}
    (folder / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))


def _reward(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"
