"""Pretrained policies: a model trained by rl-zoo3's own command loads with policy.source=path, is
quantized without training, and its fp32 reward matches rl-zoo3's evaluation; bad models are refused."""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ENV, WARM, run_quarl

QUIET = ["hydra.callbacks.collate.enabled=false", "eval.n_envs=2"]


def _zoo(cwd: Path, module: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", f"rl_zoo3.{module}", *args], cwd=cwd, capture_output=True,
                          text=True, env=ENV, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def zoo_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """PPO on CartPole trained by `python -m rl_zoo3.train`, with VecNormalize (rl-zoo3's layout)."""
    root = tmp_path_factory.mktemp("zoo")
    _zoo(root, "train", "--algo", "ppo", "--env", "CartPole-v1", "-n", "50000", "-f", "logs", "--seed", "0",
         "--eval-freq", "-1", "--hyperparams", "normalize:True")
    return root


@pytest.mark.slow
def test_rl_zoo3_model_loads_quantizes_and_matches_zoo_evaluation(zoo_logs: Path) -> None:
    folder = zoo_logs / "logs" / "ppo" / "CartPole-v1_1"
    assert (folder / "CartPole-v1" / "vecnormalize.pkl").exists()
    out = _zoo(zoo_logs, "enjoy", "--algo", "ppo", "--env", "CartPole-v1", "-f", "logs", "--exp-id", "1",
               "-n", "5000", "--deterministic", "--no-render")
    zoo_mean = float(re.search(r"Mean reward: ([-\d.]+)", out).group(1))
    run_quarl(zoo_logs, "policy.source=path", f"policy.path={folder}", "quant=ptq", "quant.bits=8",
              "eval.episodes=10", *QUIET)
    with sqlite3.connect(zoo_logs / "outputs" / "results.sqlite") as con:
        rows = dict(con.execute("SELECT quant, reward_mean FROM runs WHERE status = 'done'").fetchall())
        trained = con.execute("SELECT trained, train_time_s FROM runs WHERE quant = 'fp32'").fetchone()
    assert set(rows) == {"fp32", "ptq"}
    assert trained == (0, None)  # loaded, not trained by quarl
    assert abs(rows["fp32"] - zoo_mean) <= 0.05 * abs(zoo_mean), (rows, zoo_mean)
    assert rows["fp32"] > 150  # the VecNormalize statistics were applied (without them the policy fails)


@pytest.mark.slow
def test_model_zip_given_directly_keeps_its_normalisation(zoo_logs: Path) -> None:
    """rl-zoo3 keeps vecnormalize.pkl in <EnvId>/ beside <EnvId>.zip: a zip path finds it as a folder does."""
    model_zip = zoo_logs / "logs" / "ppo" / "CartPole-v1_1" / "CartPole-v1.zip"
    done = run_quarl(zoo_logs, "policy.source=path", f"policy.path={model_zip}", "quant=fp32", "eval.episodes=10",
                     "store.path=outputs/zip.sqlite", *QUIET)
    assert "with its VecNormalize statistics" in done.stdout + done.stderr
    with sqlite3.connect(zoo_logs / "outputs" / "zip.sqlite") as con:
        reward = con.execute("SELECT reward_mean FROM runs WHERE quant = 'fp32'").fetchone()[0]
    assert reward > 150  # without the statistics this policy scored 359 ± 110, with them 500


@pytest.mark.slow
def test_bad_pretrained_models_get_one_clear_line(zoo_logs: Path, tmp_path: Path) -> None:
    folder = zoo_logs / "logs" / "ppo" / "CartPole-v1_1"
    (tmp_path / "junk.zip").write_text("not a model")
    bare = tmp_path / "bare"  # the zip and its config.yml (normalize: True) without the statistics
    (bare / "CartPole-v1").mkdir(parents=True)
    shutil.copy(folder / "CartPole-v1.zip", bare / "CartPole-v1.zip")
    shutil.copy(folder / "CartPole-v1" / "config.yml", bare / "CartPole-v1" / "config.yml")
    cases = {
        "holds a PPO model, not A2C: run it with algo=ppo": ["policy.source=path", f"policy.path={folder}", "algo=a2c"],
        "was trained with normalize=True": ["policy.source=path", f"policy.path={bare / 'CartPole-v1.zip'}"],
        "cannot be loaded as an SB3 PPO model": ["policy.source=path", f"policy.path={tmp_path / 'junk.zip'}"],
        # the folder the user gave is named, with the zip found in it
        "zip in it) was trained on another environment": ["policy.source=path", f"policy.path={folder}", "env=acrobot"],
        "does not exist": ["policy.source=path", f"policy.path={tmp_path / 'nowhere'}"],
        "needs policy.path": ["policy.source=path"],
        "could not be fetched from the model hub": ["policy.source=hub", "policy.repo=sb3/ppo-CartPole-v1"],
    }
    for message, args in cases.items():  # the hub is never reached from tests
        done = WARM(tmp_path, [*args, *QUIET], timeout=300, env={"HF_HUB_OFFLINE": "1"})
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        output = done.stdout + done.stderr
        assert message in output and "Traceback" not in output, (args, output)
    assert not (tmp_path / "outputs" / "results.sqlite").exists() or _no_done_rows(tmp_path)


def _no_done_rows(root: Path) -> bool:
    with sqlite3.connect(root / "outputs" / "results.sqlite") as con:
        return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_hub_source_falls_back_with_instructions(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from quarl.errors import QuarlError
    from quarl.train.pretrained import download

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(QuarlError, match="policy.source=path policy.path="):
        download("sb3/ppo-CartPole-v1", tmp_path)
    assert os.listdir(tmp_path) == [] or all(p.is_dir() for p in tmp_path.iterdir())
