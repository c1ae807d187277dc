"""Training one policy with SB3: env, normalisation, model, callbacks (QAT schedule, curve,
checkpoints), resume, save."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecNormalize

from quarl import algos, checkpoint, provenance, qat
from quarl.envs import training_envs
from quarl.keys import policy_key, qat_delay, train_steps, training_spec

log = logging.getLogger(__name__)

MODEL_FILE, NORMALIZE_FILE, META_FILE = "model.zip", "vecnormalize.pkl", "meta.json"
QAT_FILE, CURVE_FILE = "qat_state.pt", "curve.json"


class EpisodeCurve(BaseCallback):
    """Return and length of every training episode, with the env step it ended at."""

    def __init__(self) -> None:
        super().__init__()
        self.points: list[dict[str, float]] = []

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            if "episode" in info:
                self.points.append({"step": self.num_timesteps, "reward": float(info["episode"]["r"]),
                                    "length": int(info["episode"]["l"])})
        return True


def checkpoint_every(cfg: Any) -> int:
    """Env steps between checkpoints: `train.checkpoint_every`, a tenth of the budget when null, 0 = off."""
    every = cfg.train.checkpoint_every
    return max(1, train_steps(cfg) // 10) if every is None else int(every)


def train(cfg: Any, folder: Path, progress: bool, checkpoints: Path | None = None) -> None:
    """Train the policy `cfg` describes (fp32, or QAT when quant.method=qat) and save it in `folder`.

    With `checkpoints`, progress is saved there every `checkpoint_every(cfg)` steps and a
    checkpoint found there is resumed; it is removed once the policy is saved.
    """
    steps = train_steps(cfg)
    algo_cfg = cfg.algo
    venv = training_envs(cfg.env, algo_cfg.n_envs, cfg.seed)
    if algo_cfg.normalize:
        kwargs = OmegaConf.to_container(algo_cfg.normalize_kwargs, resolve=True)
        venv = VecNormalize(venv, gamma=algo_cfg.hyperparams.get("gamma", 0.99), **kwargs)
    model = algos.build(algo_cfg, venv, seed=cfg.seed, device=cfg.train.device, total_steps=steps)
    curve = EpisodeCurve()
    callbacks: list[BaseCallback] = [curve]
    schedule = None
    if cfg.quant.method == "qat":
        layers = qat.attach(model, cfg.quant)
        schedule = qat.QATSchedule(layers, qat_delay(cfg), cfg.quant.freeze_after)
        callbacks.append(schedule)
    done, spent = 0, 0.0
    if checkpoints is not None and checkpoint.exists(checkpoints):
        extra = checkpoint.restore(checkpoints, model)
        curve.points, spent, done = extra["curve"], extra["seconds"], model.num_timesteps
        if schedule is not None:
            schedule.enabled_at, schedule.frozen_at = extra["qat"]
        log.info("Resuming from the checkpoint at step %d of %d", done, steps)
    start = time.perf_counter()
    if checkpoints is not None and checkpoint_every(cfg) > 0:
        extra = lambda: {"curve": curve.points, "seconds": spent + time.perf_counter() - start,  # noqa: E731
                         "qat": (schedule.enabled_at, schedule.frozen_at) if schedule else None}
        callbacks.append(checkpoint.Checkpointer(checkpoints, checkpoint_every(cfg), extra))
    model.learn(total_timesteps=steps - done, progress_bar=progress, callback=callbacks,
                reset_num_timesteps=done == 0)
    seconds = spent + time.perf_counter() - start
    if cfg.quant.method == "qat":
        torch.save(qat.detach(model), folder / QAT_FILE)
    model.save(folder / MODEL_FILE)
    if algo_cfg.normalize:
        venv.save(str(folder / NORMALIZE_FILE))
    venv.close()
    (folder / CURVE_FILE).write_text(json.dumps(curve.points))
    meta = {
        "key": policy_key(cfg),
        "spec": training_spec(cfg),
        "train_time_s": seconds,
        "timesteps": model.num_timesteps,
        "resumed_at": done or None,
        "versions": provenance.versions(),
        "created_at": provenance.now(),
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
