"""A pretrained policy's files, read without running code from them.

SB3 and rl-zoo3 read a policy's files with Python's pickle (`vecnormalize.pkl`, the cloudpickle
entries of `model.zip`) and PyYAML's unsafe loader (`config.yml`): a crafted file runs whatever code
it names when it is loaded. quarl reads the files of `policy.source=path|hub` so that none runs:

- `config.yml` (quarl.train.zoo_yaml): plain YAML, and the ``!!python/object/apply:collections.OrderedDict``
  tag that rl-zoo3 writes (and ``!!python/tuple``); any other Python tag is refused, and so is a
  file too large or whose aliases expand too far.
- `vecnormalize.pkl`: a restricted unpickler that builds VecNormalize, its RunningMeanStd
  statistics, gymnasium spaces and numpy arrays, and nothing that names another callable.
- `model.zip`: SB3's loader with every ``:serialized:`` (cloudpickle) entry of its `data` answered
  by `custom_objects`, which SB3 then does not deserialize. The policy's class, its settings
  (`policy_kwargs`) and its spaces are read by the restricted unpickler, which also accepts SB3's,
  sb3-contrib's, torch's and quarl's (train.robust) network and optimizer classes by name;
  training state (schedules, buffers, noise, the last observations) is not read at all, only
  replaced. The weights (`*.pth`) are read by SB3 with torch's `weights_only=True`.

A file that needs code to load is refused in one sentence that names it (`Untrusted`), unless the
user trusts its source (`policy.trust=true` on the command line of the run: then SB3's and rl-zoo3's
own loaders read it; nothing read back, a record or a stored config, grants it). The
policy cache keeps the safe form: `model.zip` with the training state replaced and the entries
that need code dropped (those that describe the network are kept, and need `policy.trust=true`
again), and `vecnormalize.pkl` rebuilt from its statistics alone.
"""

from __future__ import annotations

import _compat_pickle
import base64
import binascii
import importlib
import io
import json
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from quarl.errors import QuarlError

TRUST_HINT = "if you trust where it came from, run again with policy.trust=true"
# What the read commands (export, collate), which never run code from a file, say instead.
READ_HINT = (
    "quarl's read commands never run code from a file; if you trust where it came from, load it once, "
    "trusted, with `python run.py <the cell's overrides> policy.trust=true`"
)

# Training state in a model zip's `data`: not needed to act, rebuilt by SB3's _setup_model or left
# empty; never deserialized, always answered with these JSON values (rl-zoo3's schedules are its
# own classes or, with older versions, functions pickled by value).
TRAINING_STATE: dict[str, Any] = {
    "learning_rate": 0.0,
    "lr_schedule": None,
    "clip_range": 0.2,
    "clip_range_vf": None,
    "exploration_schedule": None,
    "train_freq": 1,
    "action_noise": None,
    "rollout_buffer_class": None,
    "rollout_buffer_kwargs": {},
    "replay_buffer_class": None,
    "replay_buffer_kwargs": {},
    "_last_obs": None,
    "_last_episode_starts": None,
    "_last_original_obs": None,
    "ep_info_buffer": None,
    "ep_success_buffer": None,
}
# What the network is built from: kept in the cache even when it needs code (with policy.trust=true).
NETWORK = ("policy_class", "policy_kwargs", "observation_space", "action_space")

# Callables a genuine pickle of numpy arrays, spaces, VecNormalize or SB3 settings names; calling
# any of them with any arguments builds data and nothing else.
_NUMPY = (
    ("numpy", "dtype"),
    ("numpy", "ndarray"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy.random._pickle", "__generator_ctor"),
    ("numpy.random._pickle", "__bit_generator_ctor"),
    ("numpy.random._pickle", "__randomstate_ctor"),
    ("numpy.random._generator", "Generator"),
    ("numpy.random.mtrand", "RandomState"),
    ("numpy.random._pcg64", "PCG64"),
    ("numpy.random._pcg64", "PCG64DXSM"),
    ("numpy.random._mt19937", "MT19937"),
    ("numpy.random._philox", "Philox"),
    ("numpy.random._sfc64", "SFC64"),
    ("numpy.random.bit_generator", "SeedSequence"),
    ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence"),
)
_BUILTINS = "list dict tuple set frozenset int float complex bool str bytes bytearray slice range"
_PLAIN = tuple(("builtins", n) for n in _BUILTINS.split()) + (
    ("collections", "OrderedDict"),
    ("collections", "deque"),
    ("_codecs", "encode"),
    ("copyreg", "_reconstructor"),
)
_SB3 = (
    ("stable_baselines3.common.vec_env.vec_normalize", "VecNormalize"),
    ("stable_baselines3.common.running_mean_std", "RunningMeanStd"),
)
ALLOWED = frozenset(_NUMPY + _PLAIN + _SB3)
# Classes named by module: networks, optimizers and spaces (checked by type once imported).
CLASS_MODULES = (
    "stable_baselines3.",
    "sb3_contrib.",
    "torch.nn.modules.",
    "torch.optim.",
    "gymnasium.spaces.",
    "quarl.rl.",  # train.robust's optimizers
)


class Untrusted(QuarlError):
    """A policy file that would run code when loaded."""


class Refused(pickle.UnpicklingError):
    """What the restricted unpickler raises for a global it does not build (`name`)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is not allowed")
        self.name = name


def _allowed_class(obj: Any) -> bool:
    import gymnasium
    import torch

    return isinstance(obj, type) and issubclass(obj, (torch.nn.Module, torch.optim.Optimizer, gymnasium.spaces.Space))


class _Unpickler(pickle.Unpickler):
    """Builds only what `ALLOWED` and `CLASS_MODULES` name: no callable that reaches code."""

    allowed = ALLOWED

    def allowed_class(self, obj: Any) -> bool:
        """Whether `obj`, named in one of `CLASS_MODULES`, is a class this unpickler builds."""
        return _allowed_class(obj)

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _compat_pickle.NAME_MAPPING:  # protocol 2 pickles name Python 2's modules
            module, name = _compat_pickle.NAME_MAPPING[module, name]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        shown = f"{module}.{name}"
        if "." in name or "__main__" in module.split("."):  # a class's methods; a module that runs when imported
            raise Refused(shown)
        if (module, name) in self.allowed:
            return getattr(importlib.import_module(module), name)
        if module.startswith(CLASS_MODULES):
            found = getattr(importlib.import_module(module), name, None)
            if self.allowed_class(found):
                return found
        raise Refused(shown)


class _BufferUnpickler(_Unpickler):
    """`_Unpickler`, and SB3's replay buffer classes and the torch device a buffer names."""

    allowed = ALLOWED | {("torch", "device")}

    def allowed_class(self, obj: Any) -> bool:
        from stable_baselines3.common.buffers import BaseBuffer

        return _allowed_class(obj) or (isinstance(obj, type) and issubclass(obj, BaseBuffer))


def restricted_loads(data: bytes) -> Any:
    """Unpickle `data`, building only numpy arrays, spaces, VecNormalize statistics and network
    classes; `pickle.UnpicklingError` (`Refused`) for anything else."""
    return _Unpickler(io.BytesIO(data)).load()


def read_buffer(path: Path) -> Any:
    """The replay buffer SB3's save_replay_buffer pickled in `path`, built by the restricted
    unpickler (SB3's buffer classes and their arrays, spaces and device); `Refused` for anything else."""
    with path.open("rb") as file:
        return _BufferUnpickler(file).load()


# ----------------------------------------------------------------------------------------- model.zip


def model_data(model_zip: Path) -> dict[str, Any]:
    """The JSON `data` of an SB3 model zip, read as SB3 reads it ({} when it has none)."""
    with zipfile.ZipFile(model_zip) as archive:
        if "data" not in archive.namelist():
            return {}
        data = json.loads(archive.read("data").decode())
    if not isinstance(data, dict):
        raise ValueError(f"its data is a JSON {type(data).__name__}, not an object")
    return data


def _serialized(item: Any) -> bool:
    return isinstance(item, dict) and ":serialized:" in item


def _entry(model_zip: Path, key: str, item: dict[str, Any]) -> Any:
    """One `:serialized:` entry, by the restricted unpickler: `Refused` when it needs code."""
    try:
        raw = base64.b64decode(str(item[":serialized:"]).encode(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"its data entry {key!r} is not base64 ({exc})") from None
    try:
        return restricted_loads(raw)
    except Refused:
        raise
    except Exception as exc:  # a damaged pickle or a module not installed: SB3 must not try it either
        raise ValueError(f"its data entry {key!r} cannot be read ({type(exc).__name__}: {exc})") from None


def _refusal(model_zip: Path, key: str, refused: Refused, hint: str) -> Untrusted:
    return Untrusted(
        f"{model_zip} holds a pickled Python object in its data ({key}, naming {refused.name}) that can run "
        f"code when loaded: quarl reads an SB3 model's weights, network and spaces without running code ({hint})."
    )


def custom_objects(model_zip: Path, trust: bool = False, hint: str = TRUST_HINT) -> dict[str, Any]:
    """SB3's `custom_objects` for `model_zip`: an answer for every `:serialized:` entry of its data,
    so that SB3 deserializes none. Training state is replaced; the rest is read by the restricted
    unpickler, and an entry that needs code is refused (`Untrusted`, ending in `hint`), or with
    `trust` left to SB3."""
    objects: dict[str, Any] = {}
    for key, item in model_data(model_zip).items():
        if not _serialized(item):
            continue
        if key in TRAINING_STATE:
            objects[key] = TRAINING_STATE[key]
            continue
        try:
            objects[key] = _entry(model_zip, key, item)
        except Refused as refused:
            if not trust:
                raise _refusal(model_zip, key, refused, hint) from None
    return objects


def load_model(cls: Any, model_zip: Path, device: str = "cpu", trust: bool = False, hint: str = TRUST_HINT) -> Any:
    """`cls.load(model_zip)` (an SB3 algorithm class) without running code from the zip. Weights
    (`*.pth`) that name code, which torch's `weights_only` loader refuses in a page of advice, are
    refused in one sentence (`Untrusted`)."""
    objects = custom_objects(model_zip, trust, hint)
    try:
        return cls.load(model_zip, device=device, custom_objects=objects)
    except pickle.UnpicklingError as exc:
        named = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if "Weights only load failed" not in str(exc):
            raise
        raise Untrusted(
            f"{model_zip} holds weights (*.pth) that name {named.group(1) if named else 'a Python object'}, which "
            "can run code when loaded: SB3 and quarl read a model's weights as tensors only, so this is no model "
            "SB3 saved; give the model zip saved by SB3 or rl-zoo3."
        ) from None


def write_safe_model(model_zip: Path, out: Path) -> None:
    """`model_zip` copied to `out` with its training state replaced by plain values and the entries
    that need code dropped, except those the network is built from (which a trusted install keeps)."""
    data = model_data(model_zip)
    for key, item in list(data.items()):
        if not _serialized(item):
            continue
        if key in TRAINING_STATE:
            data[key] = TRAINING_STATE[key]
            continue
        try:
            _entry(model_zip, key, item)
        except Refused:
            if key not in NETWORK:
                del data[key]
    with zipfile.ZipFile(model_zip) as source, zipfile.ZipFile(out, "w") as copy:
        for info in source.infolist():
            payload = json.dumps(data, indent=4).encode() if info.filename == "data" else source.read(info)
            copy.writestr(info, payload)


# ----------------------------------------------------------------------------------- vecnormalize.pkl

# VecNormalize statistics: a mean and a variance per observation value (an Atari frame stack's: 0.5 MB).
NORMALIZER_MAX_BYTES = 64 << 20


def read_normalizer(path: Path, trust: bool = False, hint: str = TRUST_HINT) -> Any:
    """The object pickled in `path`, by the restricted unpickler (`Untrusted`, ending in `hint`, when
    it needs code); with `trust`, by Python's pickle as SB3's VecNormalize.load reads it. QuarlError
    for a file larger than `NORMALIZER_MAX_BYTES`."""
    size = path.stat().st_size
    if size > NORMALIZER_MAX_BYTES:
        raise QuarlError(
            f"{path} is {size:,} bytes, and quarl reads VecNormalize statistics of at most {NORMALIZER_MAX_BYTES:,} "
            "(an Atari policy's are under a megabyte): give the vecnormalize.pkl saved with the model."
        )
    raw = path.read_bytes()
    if trust:
        return pickle.loads(raw)  # noqa: S301  # the user trusts this file
    try:
        return restricted_loads(raw)
    except Refused as refused:
        raise Untrusted(
            f"{path} names {refused.name}, which can run code when unpickled and which VecNormalize statistics "
            f"never need: quarl reads numpy arrays, spaces and SB3's statistics only ({hint})."
        ) from None


def load_normalizer(path: Path, make_venv: Callable[[], Any], trust: bool = False, hint: str = TRUST_HINT) -> Any:
    """SB3's VecNormalize.load(path, make_venv()) without running code from `path`."""
    from stable_baselines3.common.vec_env import VecNormalize

    normalizer = read_normalizer(path, trust, hint)
    if not isinstance(normalizer, VecNormalize):
        raise ValueError(f"it holds a {type(normalizer).__name__}, not SB3's VecNormalize")
    normalizer.set_venv(make_venv())
    return normalizer


def _statistics(rms: Any, shape: tuple[int, ...], path: Path, what: str) -> Any:
    """A fresh RunningMeanStd holding `rms`'s mean, variance and count, checked against `shape`."""
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    if not isinstance(rms, RunningMeanStd):
        raise QuarlError(f"{path} is not VecNormalize statistics: its {what} is a {type(rms).__name__}.")
    fresh = RunningMeanStd(shape=shape)
    mean = np.asarray(rms.mean, dtype=np.float64)
    var = np.asarray(rms.var, dtype=np.float64)
    if mean.shape != tuple(shape) or var.shape != tuple(shape):
        raise QuarlError(
            f"{path} holds {what} statistics of shape {mean.shape}, but the env's are {tuple(shape)}: give the "
            "statistics saved with this model, for this env."
        )
    fresh.mean, fresh.var, fresh.count = mean.copy(), var.copy(), float(rms.count)
    return fresh


def write_safe_normalizer(path: Path, out: Path, make_venv: Callable[[], Any], trust: bool = False) -> None:
    """The VecNormalize statistics in `path`, rebuilt over `make_venv()` from their numbers alone
    (means, variances, counts, clip and discount settings) and pickled to `out`."""
    from stable_baselines3.common.vec_env import VecNormalize

    try:
        saved = read_normalizer(path, trust)
    except QuarlError:
        raise
    except Exception as exc:  # damaged or not a pickle
        raise QuarlError(f"{path} cannot be read as VecNormalize statistics ({type(exc).__name__}: {exc}).") from None
    if not isinstance(saved, VecNormalize):
        raise QuarlError(f"{path} is not VecNormalize statistics: it holds a {type(saved).__name__}.")
    venv = make_venv()
    try:
        keys: Optional[list[str]] = getattr(saved, "norm_obs_keys", None)
        fresh = VecNormalize(
            venv,
            training=False,
            norm_obs=bool(getattr(saved, "norm_obs", True)),
            norm_reward=bool(getattr(saved, "norm_reward", True)),
            clip_obs=float(getattr(saved, "clip_obs", 10.0)),
            clip_reward=float(getattr(saved, "clip_reward", 10.0)),
            gamma=float(getattr(saved, "gamma", 0.99)),
            epsilon=float(getattr(saved, "epsilon", 1e-8)),
            norm_obs_keys=[str(k) for k in keys] if keys else None,
        )
        if fresh.norm_obs:
            if isinstance(fresh.obs_rms, dict):
                got = saved.obs_rms if isinstance(saved.obs_rms, dict) else {}
                for key, rms in fresh.obs_rms.items():
                    fresh.obs_rms[key] = _statistics(got.get(key), rms.mean.shape, path, f"observation {key!r}")
            else:
                fresh.obs_rms = _statistics(saved.obs_rms, fresh.obs_rms.mean.shape, path, "observation")
        fresh.ret_rms = _statistics(saved.ret_rms, (), path, "return")
        fresh.save(str(out))
    finally:
        venv.close()
