"""The fp32 policy cache: each trained policy is keyed by everything that shaped it and trained once.

A folder per policy under `store.policies` holds `model.zip` (SB3's format), `vecnormalize.pkl` when
observations are normalised, `qat_state.pt` (fake-quant ranges) for QAT policies, the training curve
(`curve.json`, and `curves/` with CSV files, and TensorBoard's where asked: quarl.train.curves) and `meta.json` (with
`kept`: the step and evaluation reward of the model kept by `train.keep_best`). A file lock makes
concurrent sweep jobs wait for the one that trains; a policy is written to a temporary folder and
renamed into place, so an interrupted training leaves nothing that looks finished.

A policy's files are read without running code from them (quarl.train.untrusted), unless the run
that obtains it says `policy.trust=true` on its command line: a pretrained policy is cached in that
safe form, and a file that needs code (one copied in by an older quarl) is refused by name. A policy
found for a stored record (`cached`: quarl export, collate) is never trusted, whatever the record's
config says: trust is not something a file written earlier can grant.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional, cast

import numpy as np
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl.config import method_registry
from quarl.config.keys import policy_key, slug, train_steps
from quarl.errors import QuarlError
from quarl.rl import algos
from quarl.rl.envs import make_env
from quarl.store.locks import taking_turns
from quarl.store.sqlite import make_folder
from quarl.train import CURVE_FILE, META_FILE, MODEL_FILE, NORMALIZE_FILE, checkpoint, pretrained, untrusted
from quarl.train.curves import CURVES_DIR
from quarl.train.trainer import train

log = logging.getLogger(__name__)


# How a damaged file fails to load (a truncated or overwritten zip, pickle or torch file).
DAMAGED = (zipfile.BadZipFile, EOFError, pickle.UnpicklingError, json.JSONDecodeError, FileNotFoundError)
DAMAGED_SIGNS = (
    "PytorchStreamReader",
    "zip archive",
    "zip-file",
    "not a zip file",
    "invalid load key",
    "truncated",
    "No data found in the saved file",  # SB3's assertion on a zip cut short
)


@dataclass
class CachedPolicy:
    """A trained fp32 policy on disk."""

    key: str
    folder: Path
    cfg: Any  # the config it was trained for
    trained: bool  # trained by this call (False: found in the cache)
    trust: bool = False  # its files may run code: the command being run said policy.trust=true
    hint: str = untrusted.READ_HINT  # how a refusal of a file that needs code ends

    @property
    def meta(self) -> dict[str, Any]:
        try:
            return json.loads((self.folder / META_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise self._corrupt(exc) from None

    @property
    def curve(self) -> list[dict[str, float]]:
        """Return and length of each training episode, with the env step it ended at."""
        path = self.folder / CURVE_FILE
        return json.loads(path.read_text()) if path.exists() else []

    @property
    def curves(self) -> Path:
        """The folder of the training's curve files (CSV, TensorBoard where asked); absent for pretrained policies."""
        return self.folder / CURVES_DIR

    @property
    def kept(self) -> Optional[dict[str, Any]]:
        """With train.keep_best: the kept model's step, evaluation reward and evaluation seed; else None."""
        return self.meta.get("kept")

    def load(self, device: str = "cpu") -> BaseAlgorithm:
        """A fresh copy of the model (safe to quantize in place); QAT policies come with their
        fake-quant graph on and ranges frozen."""
        try:
            cls = algos.sb3_class(self.cfg.algo.name)
            model = untrusted.load_model(cls, self.folder / MODEL_FILE, device, self.trust, self.hint)
            method_registry.of(self.cfg).restore(model, self.cfg.quant, self.folder)
            return model
        except QuarlError:
            raise
        except Exception as exc:
            raise self._unreadable(exc) from exc

    def obs_transform(self) -> Optional[Callable[[np.ndarray], np.ndarray]]:
        """The saved observation normalisation, or None when the policy was trained without it."""
        path = self.folder / NORMALIZE_FILE
        if not path.exists():
            return None
        try:
            normalizer = untrusted.load_normalizer(
                path, lambda: DummyVecEnv([lambda: make_env(self.cfg.env)]), self.trust, self.hint
            )
        except QuarlError:
            raise
        except Exception as exc:
            raise self._unreadable(exc) from exc
        normalizer.training = False
        # SB3 types normalize_obs for dict observations too; on Box observations it maps arrays to arrays
        return cast(Callable[[np.ndarray], np.ndarray], normalizer.normalize_obs)

    def _corrupt(self, exc: Exception) -> QuarlError:
        return QuarlError(
            f"The cached policy in {self.folder} cannot be read ({type(exc).__name__}: {exc}); "
            "delete that folder and run again to retrain it."
        )

    def _unreadable(self, exc: Exception) -> QuarlError:
        """A load that failed: damaged files get the advice to retrain; anything else (a version
        mismatch, a bug) names the exception and keeps the policy that may have taken hours."""
        if isinstance(exc, DAMAGED) or any(sign in str(exc) for sign in DAMAGED_SIGNS):
            return self._corrupt(exc)
        try:
            saved_with = json.loads((self.folder / META_FILE).read_text()).get("versions", {})
        except (OSError, json.JSONDecodeError):
            saved_with = {}
        shown = ", ".join(f"{k} {v}" for k, v in sorted(saved_with.items()) if k in ("stable-baselines3", "torch"))
        return QuarlError(
            f"The cached policy in {self.folder} cannot be read ({type(exc).__name__}: {exc}). Its files do not look "
            f"damaged: keep the folder; it was saved with {shown or 'versions not recorded'}, so check the installed "
            "packages against those (a damaged file would say so)."
        )


def folder_of(cfg: Any, root: Path) -> Path:
    """The cache folder of this config's trained policy (it may not exist yet)."""
    kind = method_registry.of(cfg).policy_tag(cfg.quant)
    if cfg.policy.source != "train":
        return root / f"{cfg.algo.name}-{slug(cfg.env.name)}-{cfg.policy.source}-{policy_key(cfg)}"
    robust = f"-{cfg.train.robust}" if cfg.train.get("robust") else ""
    robust += "-amp" if cfg.train.get("amp") else ""
    return root / f"{cfg.algo.name}-{slug(cfg.env.name)}-seed{cfg.seed}{kind}{robust}-{policy_key(cfg)}"


def cached(cfg: Any, root: Path) -> CachedPolicy:
    """The cached fp32 policy of a config (for example a stored record's), without training; read
    without trust, whatever `cfg.policy.trust` says."""
    folder = folder_of(cfg, root)
    if not (folder / META_FILE).exists():
        raise QuarlError(f"No cached policy for {cfg.algo.name}/{cfg.env.name} seed={cfg.seed} in {root}.")
    return CachedPolicy(policy_key(cfg), folder, cfg, trained=False)


def recorded(record: Any, cfg: Any) -> CachedPolicy:
    """The cached policy `cfg` (a stored record's policy config) acts with: in the record's
    `policy_dir`, where its run found it, whatever the current folder; else (a record written before
    runs recorded it, or a cache moved since) in `store.policies` from the current folder. Read
    without trust, as `cached`."""
    folder = record.get("policy_dir")
    if isinstance(folder, str) and folder and (Path(folder) / META_FILE).exists():
        return CachedPolicy(policy_key(cfg), Path(folder), cfg, trained=False)
    try:
        return cached(cfg, Path(cfg.store.policies))
    except QuarlError:
        if not isinstance(folder, str) or not folder:
            raise
        raise QuarlError(
            f"No cached policy for {cfg.algo.name}/{cfg.env.name} seed={cfg.seed} in {folder} (its record's "
            f"policy_dir) or in {cfg.store.policies} (store.policies from this folder): run the cell again with "
            "run.py to train or install it."
        ) from None


def obtain(cfg: Any, root: Path, progress: bool = False) -> CachedPolicy:
    """The policy for this config's (algo, env, hyperparameters, seed, steps, and QAT settings for
    quant=qat): cached, or trained now; with policy.source=path|hub, the pretrained model, checked
    against the env and copied into the cache (no training)."""
    key = policy_key(cfg)
    folder = folder_of(cfg, root)
    make_folder(root, "store.policies")
    with taking_turns(root, folder.name, f"training or installing the policy {folder.name}"):
        cached = CachedPolicy(key, folder, cfg, trained=False, trust=pretrained.trusted(cfg), hint=untrusted.TRUST_HINT)
        if (folder / META_FILE).exists():
            log.info("Using cached policy %s", folder.name)
            return cached
        if folder.exists():
            raise cached._corrupt(FileNotFoundError(f"no {META_FILE}"))
        for stale in root.glob(f"{folder.name}.tmp-*"):  # left by a killed job; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        tmp = folder.with_name(f"{folder.name}.tmp-{os.getpid()}")
        tmp.mkdir()
        checkpoints = folder.with_name(f"{folder.name}.ckpt")
        try:
            if cfg.policy.source == "train":
                how = method_registry.of(cfg).policy_kind(cfg.quant)
                robust = f", train.robust={cfg.train.robust}" if cfg.train.get("robust") else ""
                log.info(
                    "Training %s %s on %s for %d steps (seed %d%s)",
                    how,
                    cfg.algo.name,
                    cfg.env.id,
                    train_steps(cfg),
                    cfg.seed,
                    robust,
                )
                train(cfg, tmp, progress, checkpoints)
            else:
                pretrained.install(cfg, folder, tmp, downloads=root / "hub")
            tmp.replace(folder)
            shutil.rmtree(checkpoints, ignore_errors=True)  # its curve went into the policy folder
            if cfg.policy.source == "train":
                tensorboard = "; tensorboard --logdir opens it" if cfg.train.tracking.tensorboard else ""
                log.info("Training curve in %s (CSV%s)", folder / CURVES_DIR, tensorboard)
        finally:  # also on Ctrl-C, SIGTERM and SIGHUP: the checkpoint, with its curve so far, is kept
            shutil.rmtree(tmp, ignore_errors=True)
            if not checkpoint.exists(checkpoints):  # nothing to resume: the curve so far is debris
                shutil.rmtree(checkpoint.curves_of(checkpoints), ignore_errors=True)
    return replace(cached, trained=cfg.policy.source == "train")
