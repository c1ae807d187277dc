"""Training checkpoints, so a preempted or killed job resumes where it stopped.

A checkpoint folder holds the model's parameters and optimizer states (with the QAT fake-quant
buffers when present), the replay buffer of off-policy algorithms, the observation-normalisation
statistics, the step counters, the training curve so far, the QAT switches and the RNG states.
It is written to a temporary folder and renamed, so a kill during saving leaves the previous one;
a save that fails (disk full) or is interrupted (Ctrl-C, SIGTERM) removes what it wrote and keeps
the previous one. The curve so far is written beside it (`curves_of`).

A checkpoint is read as tensors and plain values only, as any outside file is: torch's
`weights_only` loader (numpy arrays and SB3's statistics allowed by name), the restricted unpickler
of quarl.train.untrusted for the normalisation statistics and a pickled replay buffer, numpy
without pickles for the replay rows. A checkpoint that would need code to read (or is damaged) is
not resumed: a warning says so and the training starts over.
"""

from __future__ import annotations

import importlib
import logging
import random
import re
import shutil
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import DictReplayBuffer, ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.off_policy_algorithm import OffPolicyAlgorithm
from stable_baselines3.common.running_mean_std import RunningMeanStd
from stable_baselines3.common.vec_env import VecNormalize

from quarl.errors import QuarlError
from quarl.store.disk import disk_full
from quarl.train import untrusted

log = logging.getLogger(__name__)

STATE_FILE, PARAMS_FILE, REPLAY_FILE, NORMALIZE_FILE = "state.pt", "params.pt", "replay.npz", "vecnormalize.pkl"
PICKLED_REPLAY_FILE = "replay.pkl"  # SB3's whole pickled buffer: other buffer kinds, and older checkpoints
COUNTERS = ("num_timesteps", "_episode_num", "_n_updates", "_n_calls")


def curves_of(folder: Path) -> Path:
    """The training curve so far of the checkpoint `folder` (`<policy>.ckpt.curves`), resumed with it."""
    return folder.with_name(folder.name + ".curves")


def exists(folder: Path) -> bool:
    """Whether `folder` holds a complete checkpoint (one a kill left between a save's two renames,
    as `<folder>.old`, is put back first)."""
    old = folder.with_name(folder.name + ".old")
    if not (folder / STATE_FILE).exists() and (old / STATE_FILE).exists():
        shutil.rmtree(folder, ignore_errors=True)
        old.replace(folder)
    return (folder / STATE_FILE).exists()


def save(folder: Path, model: BaseAlgorithm, extra: dict[str, Any]) -> None:
    """Write a checkpoint of `model` (and `extra` state of the caller) to `folder`, atomically. A
    save that fails or is interrupted leaves the previous checkpoint and no `.saving` folder; a full
    disk is a QuarlError that says so."""
    tmp = folder.with_name(folder.name + ".saving")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        torch.save(model.get_parameters(), tmp / PARAMS_FILE)
        if isinstance(model, OffPolicyAlgorithm):
            save_replay(model, tmp)
        venv = model.get_env()
        if isinstance(venv, VecNormalize):
            venv.save(str(tmp / NORMALIZE_FILE))
        state = {
            "counters": {name: getattr(model, name) for name in COUNTERS if hasattr(model, name)},
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
            "extra": extra,
        }
        torch.save(state, tmp / STATE_FILE)
        if folder.exists():
            folder.replace(old)
        tmp.replace(folder)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        exists(folder)  # renamed aside already: the previous checkpoint back in place
        if isinstance(exc, Exception) and disk_full(exc, folder.parent):
            raise QuarlError(
                f"The disk is full: the training checkpoint {folder} could not be written ({exc}). Free "
                "space there and run the same command again: the training resumes from its last checkpoint."
            ) from None
        raise
    shutil.rmtree(old, ignore_errors=True)


class Unreadable(QuarlError):
    """A checkpoint file that cannot be read as tensors and plain values (it needs code, or is damaged)."""


def _safe_globals() -> list[Any]:
    """What quarl's checkpoints hold besides tensors and plain values, each of which builds data
    only: numpy arrays and scalars (the RNG state) and SB3's statistics (kept by train.keep_best)."""
    multiarray = importlib.import_module("numpy._core.multiarray" if hasattr(np, "_core") else "numpy.core.multiarray")
    dtypes = [getattr(np.dtypes, name) for name in dir(np.dtypes) if name.endswith("DType")]
    return [RunningMeanStd, np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar, *dtypes]


def _needs(exc: Exception) -> Optional[str]:
    """The global a refused read named (torch's weights_only loader's or the restricted unpickler's), or None."""
    if isinstance(exc, untrusted.Refused):
        return exc.name
    found = re.search(r"GLOBAL ([\w.]+)", str(exc))
    return found.group(1) if found else None


def _refused(path: Path, exc: Exception) -> Unreadable:
    """The sentence for a checkpoint file that could not be read, naming the code it needs when it does."""
    needs = _needs(exc)
    if needs is not None:
        return Unreadable(
            f"The training checkpoint {path.parent} is not resumed: {path.name} would run code when read (it names "
            f"{needs}, which quarl's checkpoints never need; they are read as tensors and plain values only), so "
            "the training starts over from step 0."
        )
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Unreadable(
        f"The training checkpoint {path.parent} is not resumed: {path.name} cannot be read "
        f"({type(exc).__name__}: {first}), so the training starts over from step 0."
    )


def _load(path: Path) -> Any:
    """A file torch.save wrote, read as tensors and plain values only (`Unreadable` otherwise)."""
    try:
        with torch.serialization.safe_globals(_safe_globals()):
            return torch.load(path, weights_only=True)
    except Exception as exc:  # code it would run, or a damaged file: either way not resumed
        raise _refused(path, exc) from None


def _statistics(folder: Path) -> Optional[VecNormalize]:
    """The checkpoint's normalisation statistics (by the restricted unpickler), or None if it has none."""
    path = folder / NORMALIZE_FILE
    if not path.exists():
        return None
    try:
        saved = untrusted.restricted_loads(path.read_bytes())
    except Exception as exc:
        raise _refused(path, exc) from None
    if not isinstance(saved, VecNormalize):
        raise _refused(path, TypeError(f"it holds a {type(saved).__name__}, not SB3's VecNormalize"))
    return saved


def restore(folder: Path, model: BaseAlgorithm) -> Optional[dict[str, Any]]:
    """Load a checkpoint into a freshly built `model` (QAT layers already attached); returns `extra`.
    None, with a warning and `model` untouched, when a file of it cannot be read as tensors and plain
    values (one that would run code, or a damaged one): the training starts over."""
    try:
        params, state = _load(folder / PARAMS_FILE), _load(folder / STATE_FILE)
        saved = _statistics(folder)
        buffer = read_pickled_replay(folder) if isinstance(model, OffPolicyAlgorithm) else None
    except Unreadable as exc:
        log.warning("%s", exc)
        return None
    model.set_parameters(params, exact_match=True)
    if isinstance(model, OffPolicyAlgorithm):
        restore_replay(model, folder, buffer)
    venv = model.get_env()
    if isinstance(venv, VecNormalize) and saved is not None:
        venv.obs_rms, venv.ret_rms = saved.obs_rms, saved.ret_rms
    for name, value in state["counters"].items():
        setattr(model, name, value)
    random.setstate(state["rng"]["python"])
    np.random.set_state(state["rng"]["numpy"])
    torch.set_rng_state(state["rng"]["torch"])
    return state["extra"]


def save_replay(model: OffPolicyAlgorithm, folder: Path) -> None:
    """The replay buffer's filled rows only (a 1M-transition buffer holding 10k costs 10k rows, not
    SB3's whole pickled arrays), with its position; other buffer kinds as SB3 pickles them."""
    buffer = model.replay_buffer
    if buffer is None or type(buffer) not in (ReplayBuffer, DictReplayBuffer):
        model.save_replay_buffer(folder / PICKLED_REPLAY_FILE)
        return
    # one row past `pos` too: with optimize_memory_usage the next observation of the last transition is there
    rows = buffer.buffer_size if buffer.full else min(buffer.pos + 1, buffer.buffer_size)
    arrays: dict[str, Any] = {name: array[:rows] for name, array in _replay_arrays(buffer)}
    np.savez(folder / REPLAY_FILE, pos=np.int64(buffer.pos), full=np.bool_(buffer.full), **arrays)


def read_pickled_replay(folder: Path) -> Optional[ReplayBuffer]:
    """The checkpoint's replay buffer as SB3 pickles it (other buffer kinds, older checkpoints), by
    the restricted unpickler; None when it has none (its rows are in `REPLAY_FILE`, or none were saved)."""
    path = folder / PICKLED_REPLAY_FILE
    if not path.exists():
        return None
    try:
        buffer = untrusted.read_buffer(path)
    except Exception as exc:
        raise _refused(path, exc) from None
    if not isinstance(buffer, ReplayBuffer):
        raise _refused(path, TypeError(f"it holds a {type(buffer).__name__}, not an SB3 replay buffer"))
    return buffer


def restore_replay(model: OffPolicyAlgorithm, folder: Path, pickled: Optional[ReplayBuffer] = None) -> None:
    """Put a checkpoint's replay rows back into `model`'s freshly allocated buffer (or its `pickled`
    buffer, read by `read_pickled_replay`, in its place as SB3's load_replay_buffer puts it)."""
    if pickled is not None:
        from stable_baselines3.her.her_replay_buffer import HerReplayBuffer

        model.replay_buffer = pickled
        if isinstance(pickled, HerReplayBuffer):
            venv = model.get_env()
            assert venv is not None  # a model being trained has its envs
            pickled.set_env(venv)
        pickled.device = model.device
    if not (folder / REPLAY_FILE).exists():
        return
    buffer = model.replay_buffer
    assert buffer is not None  # an off-policy model allocates it when built
    with np.load(folder / REPLAY_FILE, allow_pickle=False) as saved:  # arrays only, never a pickle
        for name, array in _replay_arrays(buffer):
            array[: len(saved[name])] = saved[name]
        buffer.pos, buffer.full = int(saved["pos"]), bool(saved["full"])


def _replay_arrays(buffer: ReplayBuffer | DictReplayBuffer) -> list[tuple[str, np.ndarray]]:
    """The buffer's per-transition arrays by name (a dict observation's as `observations.<key>`)."""
    arrays = []
    for name, value in vars(buffer).items():
        items = value.items() if isinstance(value, dict) else [("", value)]
        for key, array in items:
            if isinstance(array, np.ndarray) and array.shape[:1] == (buffer.buffer_size,):
                arrays.append((f"{name}.{key}" if key else name, array))
    return arrays


class Checkpointer(BaseCallback):
    """Saves a checkpoint every `every` env steps; `extra()` supplies the caller's state.

    Saved when a rollout starts: right after the previous gradient updates, on the boundaries of
    SB3's collection chunks, so a resumed run takes the same steps as an uninterrupted one."""

    def __init__(self, folder: Path, every: int, extra: Any) -> None:
        super().__init__()
        self.folder, self.every, self.extra = folder, every, extra
        self.last: Optional[int] = None

    def _on_training_start(self) -> None:
        self.last = self.num_timesteps

    def _on_rollout_start(self) -> None:
        assert self.last is not None  # set when training starts
        if self.num_timesteps - self.last >= self.every:
            save(self.folder, self.model, self.extra())
            self.last = self.num_timesteps
            log.debug("Checkpoint at step %d", self.num_timesteps)

    def _on_step(self) -> bool:
        return True
