"""Pretrained policies: an SB3 / rl-zoo3 model from a folder (`policy.source=path`) or from the
model hub (`policy.source=hub`), checked against the env and copied into the policy cache.

Layouts read:

- rl-zoo3's log folder ``logs/<algo>/<EnvId>_<n>/``: ``<EnvId>.zip`` (or ``best_model.zip``) and
  ``<EnvId>/`` with ``config.yml`` (hyperparameters) and ``vecnormalize.pkl`` (normalisation);
- a model zip given directly, with ``vecnormalize.pkl`` / ``config.yml`` beside it when present;
- a model-hub repo as rl-zoo3 pushes it: ``<algo>-<EnvId>.zip``, ``config.yml``, ``vec_normalize.pkl``.

The files are read without running code from them (`quarl.train.untrusted`), unless
`policy.trust=true`; the cache gets their safe form.
"""

from __future__ import annotations

import json
import logging
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from hydra.core.hydra_config import HydraConfig
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv

from quarl.errors import QuarlError
from quarl.rl import algos
from quarl.rl.envs import make_env
from quarl.store import provenance
from quarl.train import untrusted, zoo_yaml

log = logging.getLogger(__name__)

NORMALIZE_NAMES = ("vecnormalize.pkl", "vec_normalize.pkl")
NOT_MODELS = ("train_eval_metrics.zip",)


@dataclass(frozen=True)
class Found:
    """The files of one pretrained model."""

    model: Path
    normalize: Optional[Path]
    config: Optional[Path]


def _first(folder: Path, names: tuple[str, ...]) -> Optional[Path]:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def _in_folder(folder: Path, env_id: str) -> Found:
    stats = folder / env_id  # rl-zoo3 keeps config.yml and vecnormalize.pkl in <log>/<EnvId>/
    zips = [z for z in sorted(folder.glob("*.zip")) if z.name not in NOT_MODELS]
    model = _first(folder, (f"{env_id}.zip", "best_model.zip")) or (zips[0] if len(zips) == 1 else None)
    if model is None:
        shown = ", ".join(z.name for z in zips) or "none"
        raise QuarlError(
            f"policy.path={folder} holds no single model zip for {env_id} (zips found: {shown}): point "
            f"policy.path at the model zip, or at an rl-zoo3 log folder with {env_id}.zip."
        )
    extras = stats if stats.is_dir() else folder
    return Found(model, _first(extras, NORMALIZE_NAMES), _first(extras, ("config.yml",)))


def _beside(model: Path, env_id: str, names: tuple[str, ...]) -> Optional[Path]:
    """A file next to a model zip: in rl-zoo3's `<EnvId>/` folder beside it, or beside it."""
    return _first(model.parent / env_id, names) or _first(model.parent, names)


def locate(path: str | Path, env_id: str) -> Found:
    """The model zip, normalisation statistics and hyperparameters at `path` (a zip or a folder)."""
    p = Path(path).expanduser()
    if p.is_file():
        return Found(p, _beside(p, env_id, NORMALIZE_NAMES), _beside(p, env_id, ("config.yml",)))
    if p.is_dir():
        return _in_folder(p, env_id)
    raise QuarlError(f"policy.path={path} does not exist: give an rl-zoo3 log folder or an SB3 model zip.")


def check_normalisation(found: Found, hyperparams: dict[str, str]) -> None:
    """Refuse a model trained with observation normalisation whose statistics are not there: it
    would run on raw observations and score far below what it learned."""
    normalize = hyperparams.get("normalize", "False")
    if found.normalize is None and normalize not in ("False", "false", "None", "{}"):
        raise QuarlError(
            f"{found.model} was trained with normalize={normalize} ({found.config}), but no "
            f"{' or '.join(NORMALIZE_NAMES)} was found beside it or in its <EnvId>/ folder: put the "
            "statistics saved with the model there, or point policy.path at the rl-zoo3 log folder."
        )


def saved_algorithm(model_zip: Path) -> Optional[str]:
    """The algorithm that saved an SB3 model zip, read from its `data` (None when unknown): the
    policy class tells DQN, SAC, TD3-style and actor-critic models apart; PPO saves a clip range
    that A2C lacks; DDPG is TD3 with policy_delay=1 and no target noise."""
    try:
        with zipfile.ZipFile(model_zip) as archive:
            data = json.loads(archive.read("data"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None  # not readable as SB3's format: the loader says why
    module = str(data.get("policy_class", {}).get("__module__", ""))
    if module.endswith("dqn.policies"):
        return "dqn"
    if module.endswith("sac.policies"):
        return "sac"
    if module.endswith("td3.policies"):
        return "ddpg" if data.get("policy_delay") == 1 and data.get("target_noise_clip") == 0.0 else "td3"
    if module == "stable_baselines3.common.policies":
        return "ppo" if "clip_range" in data else "a2c"
    return None


def download(repo: str, cache: Path) -> Path:
    """Fetch a model-hub repo into `cache`; returns the local folder."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise QuarlError(
            "policy.source=hub needs huggingface_hub: pip install -c constraints.txt -e '.[hub]'"
        ) from None
    try:
        return Path(snapshot_download(repo_id=repo, cache_dir=str(cache)))
    except Exception as exc:  # offline, unknown repo, no permission: all end the same way for the user
        raise QuarlError(
            f"policy.repo={repo} could not be fetched from the model hub ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}). Without the hub, download the "
            "repo's files elsewhere and use policy.source=path policy.path=<that folder>."
        ) from None


def trusted(cfg: Any) -> bool:
    """Whether the user trusts the pretrained policy's files to run code: `policy.trust=true` said on
    the command line of the run (Hydra's task overrides), never a config file's value alone. Outside
    a Hydra run (the Python API, where the caller builds the config), the config's value."""
    wanted = bool(cfg.policy.get("trust", False))
    if not wanted or not HydraConfig.initialized():
        return wanted
    said = [o.split("=", 1)[1] for o in HydraConfig.get().overrides.task if o.lstrip("+~").startswith("policy.trust=")]
    if said and said[-1].strip().lower() == "true":
        return True
    log.warning(
        "policy.trust=true comes from a config file, not this command line: the policy's files are read without "
        "running code (add policy.trust=true to the command to load them once, trusted)."
    )
    return False


def hyperparams(config: Optional[Path], trust: bool = False) -> dict[str, Any]:
    """rl-zoo3's saved hyperparameters (an OrderedDict dump) as plain text values; read without
    running code (`zoo_yaml.read_yaml`) unless `trust`."""
    if config is None:
        return {}
    try:
        data = zoo_yaml.read_yaml(config, trust)
    except yaml.YAMLError as exc:
        raise QuarlError(f"{config} is not a readable rl-zoo3 config.yml ({exc}).") from None
    except QuarlError:
        raise
    except Exception as exc:  # a tag rl-zoo3 writes, with arguments it does not (an OrderedDict of a string)
        raise QuarlError(f"{config} is not a readable rl-zoo3 config.yml ({type(exc).__name__}: {exc}).") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise QuarlError(
            f"{config} is not a readable rl-zoo3 config.yml: it holds a {type(data).__name__}, not its "
            "hyperparameters by name."
        )
    return {str(k): str(v) for k, v in data.items()}


def load_checked(model_zip: Path, cfg: Any, shown: Optional[str] = None) -> BaseAlgorithm:
    """Load `model_zip` as `cfg.algo` (without running code from it unless `policy.trust=true`) and
    check it acts in `cfg.env`'s spaces; errors name the model as `shown` (what the user gave: a
    folder and the zip found in it), else its path."""
    cls = algos.sb3_class(cfg.algo.name)
    saved = saved_algorithm(model_zip)
    name = shown or str(model_zip)
    if saved is not None and saved != cfg.algo.name:
        raise QuarlError(
            f"{name} holds a {saved.upper()} model, not {cfg.algo.name.upper()}: run it with algo={saved}."
        )
    try:
        model = untrusted.load_model(cls, model_zip, device="cpu", trust=trusted(cfg))
    except QuarlError:
        raise
    except Exception as exc:  # not a zip, not SB3's format, another algorithm: all fail in SB3's loader
        raise QuarlError(
            f"{name} cannot be loaded as an SB3 {cls.__name__} model ({type(exc).__name__}: {exc}); "
            f"give a model zip saved by SB3 or rl-zoo3 for algo={cfg.algo.name}."
        ) from None
    env = make_env(cfg.env)
    try:
        spaces = (
            ("observation", env.observation_space, model.observation_space),
            ("action", env.action_space, model.action_space),
        )
    finally:
        env.close()
    for what, expected, got in spaces:
        if expected.shape != got.shape or type(expected) is not type(got):
            raise QuarlError(
                f"{name} was trained on another environment: its {what}s are {type(got).__name__}"
                f"{tuple(got.shape or ())}, but env={cfg.env.name} ({cfg.env.id}) has {type(expected).__name__}"
                f"{tuple(expected.shape or ())}. Pick the env the model was trained on."
            )
    return model


def install(cfg: Any, folder: Path, tmp: Path, downloads: Path) -> None:
    """Check the pretrained model `cfg.policy` names and write it into `tmp` in the cache's layout."""
    from quarl.train import META_FILE, MODEL_FILE, NORMALIZE_FILE

    source = cfg.policy.path if cfg.policy.source == "path" else download(cfg.policy.repo, downloads)
    found = locate(source, cfg.env.id)
    saved_hyperparams = hyperparams(found.config, trusted(cfg))
    check_normalisation(found, saved_hyperparams)
    if found.normalize is not None:  # the cache gets the statistics rebuilt from their numbers alone
        untrusted.write_safe_normalizer(
            found.normalize, tmp / NORMALIZE_FILE, lambda: DummyVecEnv([lambda: make_env(cfg.env)]), trusted(cfg)
        )
    given = Path(str(source)).expanduser()
    shown = f"policy.path={source} (the {found.model.name} in it)" if given.is_dir() else None
    model = load_checked(found.model, cfg, shown)
    untrusted.write_safe_model(found.model, tmp / MODEL_FILE)  # training state replaced, code dropped
    meta = {
        "key": folder.name,
        "source": {
            "kind": cfg.policy.source,
            "from": str(source),
            "model": str(found.model),
            "normalize": str(found.normalize) if found.normalize else None,
        },
        "hyperparams": saved_hyperparams,
        "train_time_s": None,
        "timesteps": int(model.num_timesteps),
        "versions": provenance.versions(),
        "created_at": provenance.now(),
    }
    (tmp / META_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True))
    log.info(
        "Pretrained %s policy from %s (%d training steps%s)",
        cfg.algo.name,
        found.model,
        model.num_timesteps,
        ", with its VecNormalize statistics" if found.normalize else "",
    )
