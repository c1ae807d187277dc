"""The fp32 policy cache: each trained policy is keyed by everything that shaped it and trained once.

A folder per policy under `store.policies` holds `model.zip` (SB3's format), `vecnormalize.pkl`
when observations are normalised, and `meta.json`. A file lock makes concurrent sweep jobs wait
for the one that trains; a policy is written to a temporary folder and renamed into place, so an
interrupted training leaves nothing that looks finished.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
from filelock import FileLock
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from quarl import algos, provenance
from quarl.envs import make_env
from quarl.errors import QuarlError
from quarl.keys import policy_key, train_steps, training_spec

log = logging.getLogger(__name__)

MODEL_FILE, NORMALIZE_FILE, META_FILE = "model.zip", "vecnormalize.pkl", "meta.json"


@dataclass
class CachedPolicy:
    """A trained fp32 policy on disk."""

    key: str
    folder: Path
    algo: str
    env_cfg: Any
    trained: bool  # trained by this call (False: found in the cache)

    @property
    def meta(self) -> dict[str, Any]:
        try:
            return json.loads((self.folder / META_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise self._corrupt(exc) from None

    def load(self, device: str = "cpu") -> BaseAlgorithm:
        """A fresh copy of the model (safe to quantize in place)."""
        try:
            return algos.spec(self.algo).cls.load(self.folder / MODEL_FILE, device=device)
        except Exception as exc:  # a damaged zip fails in many ways (zipfile, pickle, torch, KeyError)
            raise self._corrupt(exc) from None

    def obs_transform(self) -> Optional[Callable[[np.ndarray], np.ndarray]]:
        """The saved observation normalisation, or None when the policy was trained without it."""
        path = self.folder / NORMALIZE_FILE
        if not path.exists():
            return None
        try:
            normalizer = VecNormalize.load(str(path), DummyVecEnv([lambda: make_env(self.env_cfg)]))
        except Exception as exc:  # damaged pickle
            raise self._corrupt(exc) from None
        normalizer.training = False
        return normalizer.normalize_obs

    def _corrupt(self, exc: Exception) -> QuarlError:
        return QuarlError(
            f"The cached policy in {self.folder} cannot be read ({type(exc).__name__}: {exc}); "
            "delete that folder and run again to retrain it."
        )


def _train(cfg: Any, folder: Path, progress: bool) -> None:
    steps = train_steps(cfg)
    algo_cfg = cfg.algo
    venv = make_vec_env(lambda: make_env(cfg.env), n_envs=algo_cfg.n_envs, seed=cfg.seed)
    if algo_cfg.normalize:
        gamma = algo_cfg.hyperparams.get("gamma", 0.99)
        venv = VecNormalize(venv, gamma=gamma, **dict(algo_cfg.normalize_kwargs))
    model = algos.build(algo_cfg, venv, seed=cfg.seed, device=cfg.train.device, total_steps=steps)
    start = time.perf_counter()
    model.learn(total_timesteps=steps, progress_bar=progress)
    seconds = time.perf_counter() - start
    model.save(folder / MODEL_FILE)
    if algo_cfg.normalize:
        venv.save(str(folder / NORMALIZE_FILE))
    venv.close()
    meta = {
        "key": policy_key(cfg),
        "spec": training_spec(cfg),
        "train_time_s": seconds,
        "versions": provenance.versions(),
        "created_at": provenance.now(),
    }
    (folder / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))


def folder_of(cfg: Any, root: Path) -> Path:
    """The cache folder of this config's fp32 policy (it may not exist yet)."""
    return root / f"{cfg.algo.name}-{cfg.env.name}-seed{cfg.seed}-{policy_key(cfg)}"


def cached(cfg: Any, root: Path) -> CachedPolicy:
    """The cached fp32 policy of a config (for example a stored record's), without training."""
    folder = folder_of(cfg, root)
    if not (folder / META_FILE).exists():
        raise QuarlError(f"No cached policy for {cfg.algo.name}/{cfg.env.name} seed={cfg.seed} in {root}.")
    return CachedPolicy(policy_key(cfg), folder, cfg.algo.name, cfg.env, trained=False)


def obtain(cfg: Any, root: Path, progress: bool = False) -> CachedPolicy:
    """The fp32 policy for this cell's (algo, env, hyperparameters, seed, steps): cached or trained now."""
    key = policy_key(cfg)
    folder = folder_of(cfg, root)
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        cached = CachedPolicy(key, folder, cfg.algo.name, cfg.env, trained=False)
        if (folder / META_FILE).exists():
            log.info("Using cached policy %s", folder.name)
            return cached
        if folder.exists():
            raise cached._corrupt(FileNotFoundError(f"no {META_FILE}"))
        log.info("Training %s on %s for %d steps (seed %d)", cfg.algo.name, cfg.env.id, train_steps(cfg), cfg.seed)
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            _train(cfg, tmp, progress)
            tmp.replace(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return CachedPolicy(key, folder, cfg.algo.name, cfg.env, trained=True)
