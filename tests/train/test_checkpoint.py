"""A training checkpoint whose save fails (a full disk) or is interrupted (Ctrl-C, SIGTERM) leaves
no `.saving` folder, keeps the previous checkpoint, and a full disk is called so."""

from __future__ import annotations

import errno

import pytest
import torch
from stable_baselines3 import DQN

from quarl.errors import QuarlError, Terminated
from quarl.train import checkpoint
from tests.full_disk import FILL, run_on_a_small_disk

FULL = "The disk is full: the training checkpoint "


def small_dqn() -> DQN:
    return DQN("MlpPolicy", "CartPole-v1", buffer_size=1000, learning_starts=0, seed=0, device="cpu")


def _step(folder) -> int:
    return int(torch.load(folder / checkpoint.STATE_FILE, weights_only=False)["counters"]["num_timesteps"])


@pytest.mark.parametrize("failure", ["torch's writer", "ENOSPC", "SIGTERM"])
def test_a_failed_checkpoint_save_leaves_no_debris_and_keeps_the_previous_one(tmp_path, monkeypatch, failure):
    model = small_dqn()
    folder = tmp_path / "p.ckpt"
    model.num_timesteps = 1024
    checkpoint.save(folder, model, {"curve": []})
    model.num_timesteps = 2048
    if failure == "torch's writer":  # what torch.save raises on a full disk: no OS error in it
        error: BaseException = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")
        monkeypatch.setattr("quarl.store.disk.nearly_full", lambda where: True)
    elif failure == "ENOSPC":
        error = OSError(errno.ENOSPC, "No space left on device")
    else:
        error = Terminated(15)
    real = torch.save
    calls = []

    def save(obj, path, *args, **kw):
        calls.append(path)
        real(obj, path, *args, **kw)  # part of the file is written, then the failure
        if len(calls) == 2:  # the second file of the checkpoint (the state, after params and replay)
            raise error

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(QuarlError if failure != "SIGTERM" else Terminated) as err:
        checkpoint.save(folder, model, {"curve": []})
    if failure != "SIGTERM":
        assert str(err.value).startswith(f"{FULL}{folder} could not be written (")
        assert "run the same command again: the training resumes from its last checkpoint" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.ckpt"]  # no p.ckpt.saving, no p.ckpt.old
    assert checkpoint.exists(folder) and _step(folder) == 1024


def test_an_unrelated_write_error_is_not_called_a_full_disk(tmp_path, monkeypatch):
    model = small_dqn()
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        checkpoint.save(tmp_path / "p.ckpt", model, {})
    assert list(tmp_path.iterdir()) == []


def test_a_kill_between_the_renames_of_a_save_loses_no_checkpoint(tmp_path):
    model = small_dqn()
    folder = tmp_path / "p.ckpt"
    model.num_timesteps = 1024
    checkpoint.save(folder, model, {})
    folder.replace(tmp_path / "p.ckpt.old")  # where a save killed between its two renames leaves it
    assert checkpoint.exists(folder) and _step(folder) == 1024
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.ckpt"]


_SAVE = f"""
import os
from quarl.errors import QuarlError
from quarl.train import checkpoint
from tests.train.test_checkpoint import small_dqn

model = small_dqn()
{FILL}
try:
    checkpoint.save(__import__("pathlib").Path("p.ckpt").resolve(), model, {{}})
except QuarlError as exc:
    print("refused:", exc)
print("left:", sorted(os.listdir(".")))
"""


def test_a_checkpoint_on_a_really_full_disk_is_called_disk_full(tmp_path):
    """A real full file system (a 512 KiB tmpfs mounted in a user namespace, filled up): torch's
    writer fails without an OS error, and the checkpoint is refused as a full disk, leaving nothing.
    Skipped where namespaces or mounts are not allowed."""
    done = run_on_a_small_disk(tmp_path / "small", "512k", _SAVE)
    log = done.stdout + done.stderr
    assert done.returncode == 0 and "Traceback" not in log, log
    assert f"refused: {FULL}/" in log and "left: ['filler']" in log, log
    assert log.count("\n") == 2  # the refusal is one line


@pytest.mark.parametrize(("size", "steps", "kw"), [
    (100_000, 300, {}),  # partly filled: its 300 rows (and the next) are written, not 100,000
    (100, 250, {}),  # wrapped: all 100 rows, pos 50
    (100_000, 300, {"optimize_memory_usage": True, "replay_buffer_kwargs": {"handle_timeout_termination": False}}),
])
def test_a_checkpoint_keeps_the_filled_replay_rows_and_restores_them_exactly(tmp_path, size, steps, kw):
    import numpy as np

    model = DQN("MlpPolicy", "CartPole-v1", buffer_size=size, learning_starts=10_000, seed=0, device="cpu", **kw)
    model.learn(steps)
    checkpoint.save(tmp_path / "p.ckpt", model, {})
    with np.load(tmp_path / "p.ckpt" / checkpoint.REPLAY_FILE) as saved:
        assert len(saved["observations"]) == (size if model.replay_buffer.full else model.replay_buffer.pos + 1)
    fresh = DQN("MlpPolicy", "CartPole-v1", buffer_size=size, learning_starts=10_000, seed=1, device="cpu", **kw)
    checkpoint.restore(tmp_path / "p.ckpt", fresh)
    old, new = model.replay_buffer, fresh.replay_buffer
    assert (new.pos, new.full) == (old.pos, old.full) and old.full == (size < steps) and old.pos > 0
    names = ["observations", "actions", "rewards", "dones", "timeouts"] + ["next_observations"] * (not kw)
    for name in names:
        assert np.array_equal(getattr(new, name), getattr(old, name)), name


def test_an_older_checkpoint_with_sb3s_pickled_buffer_still_restores(tmp_path):
    import numpy as np

    model = small_dqn()
    model.learn(200)
    checkpoint.save(tmp_path / "p.ckpt", model, {})
    (tmp_path / "p.ckpt" / checkpoint.REPLAY_FILE).unlink()
    model.save_replay_buffer(tmp_path / "p.ckpt" / checkpoint.PICKLED_REPLAY_FILE)  # as quarl wrote them before
    fresh = small_dqn()
    checkpoint.restore(tmp_path / "p.ckpt", fresh)
    assert fresh.replay_buffer.pos == 200 and np.array_equal(fresh.replay_buffer.actions, model.replay_buffer.actions)


# ---------------------------------------------------------------------- read as tensors and plain values


class Touch:
    """Unpickled, it runs `touch MARKER` (pickle calls os.system with the reduce tuple's arguments)."""

    def __init__(self, marker) -> None:
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_a_checkpoint_with_normalisation_and_kept_statistics_is_read_without_code(tmp_path, monkeypatch):
    """Numpy RNG state, VecNormalize statistics and keep-best's RunningMeanStd come back through
    torch's weights_only loader and the restricted unpickler: nothing is read with pickle's full power."""
    import pickle

    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    def ppo(seed: int) -> PPO:
        venv = VecNormalize(make_vec_env("CartPole-v1", n_envs=1, seed=seed))
        return PPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=1, seed=seed, device="cpu")

    model = ppo(0)
    model.learn(128)
    kept = {"evaluations": [{"step": 64, "reward": np.float64(9.5)}],
            "best": {"params": model.policy.state_dict(), "obs_rms": model.get_env().obs_rms,
                     "ret_rms": model.get_env().ret_rms}, "last_eval": 64}
    checkpoint.save(tmp_path / "p.ckpt", model, {"curve": [], "best": kept})
    monkeypatch.setattr(pickle, "loads", None)  # the unrestricted readers are never called
    monkeypatch.setattr(torch, "load", lambda *a, weights_only, **kw: real_load(*a, weights_only=weights_only, **kw)
                        if weights_only else pytest.fail("torch.load without weights_only"))
    fresh = ppo(1)
    extra = checkpoint.restore(tmp_path / "p.ckpt", fresh)
    assert extra is not None and extra["best"]["best"]["obs_rms"].count == model.get_env().obs_rms.count
    assert fresh.num_timesteps == model.num_timesteps
    assert np.array_equal(fresh.get_env().obs_rms.mean, model.get_env().obs_rms.mean)


real_load = torch.load


@pytest.mark.parametrize("where", [checkpoint.PARAMS_FILE, checkpoint.STATE_FILE, checkpoint.NORMALIZE_FILE,
                                   checkpoint.PICKLED_REPLAY_FILE])
def test_a_checkpoint_file_that_would_run_code_is_refused_and_the_model_left_as_built(tmp_path, caplog, where):
    import pickle

    model = small_dqn()
    model.learn(200)
    folder = tmp_path / "p.ckpt"
    checkpoint.save(folder, model, {"curve": []})
    marker = tmp_path / "ran"
    path = folder / where
    if where in (checkpoint.PARAMS_FILE, checkpoint.STATE_FILE):  # re-saved with one more entry
        torch.save({**torch.load(path, weights_only=False), "payload": Touch(marker)}, path)
    else:
        path.write_bytes(pickle.dumps({"payload": Touch(marker)}))
    fresh = small_dqn()
    before = {k: v.clone() for k, v in fresh.policy.state_dict().items()}
    with caplog.at_level("WARNING"):
        assert checkpoint.restore(folder, fresh) is None
    assert not marker.exists()
    (message,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert message == (f"The training checkpoint {folder} is not resumed: {where} would run code when read (it names "
                       "posix.system, which quarl's checkpoints never need; they are read as tensors and plain values "
                       "only), so the training starts over from step 0.")
    assert fresh.num_timesteps == 0 and all(torch.equal(v, before[k]) for k, v in fresh.policy.state_dict().items())


def test_a_damaged_checkpoint_is_not_resumed_either(tmp_path, caplog):
    model = small_dqn()
    folder = tmp_path / "p.ckpt"
    checkpoint.save(folder, model, {"curve": []})
    (folder / checkpoint.PARAMS_FILE).write_bytes(b"not a torch file")
    with caplog.at_level("WARNING"):
        assert checkpoint.restore(folder, small_dqn()) is None
    assert f"The training checkpoint {folder} is not resumed: params.pt cannot be read (" in caplog.text
    assert caplog.text.rstrip().endswith("so the training starts over from step 0.")
