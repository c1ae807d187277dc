"""Curve writers (CSV, TensorBoard, W&B offline, MLflow local store) and the progress helper."""

from __future__ import annotations

import csv
import logging
import time
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from quarl.config import schema
from quarl.errors import QuarlError
from quarl.progress import Progress, activity, duration
from quarl.train.curves import EPISODES_CSV, SCALARS_CSV, RunName, open_curves
from tests.conftest import compose_cfg


def tracking(**overrides):
    return OmegaConf.merge(OmegaConf.structured(schema.TrackingConfig), overrides)


def tb_scalars(folder: Path, tag: str) -> list[tuple[int, float]]:
    events = EventAccumulator(str(folder))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def write_run(folder: Path, steps: range, resume_step=None, settings=None) -> None:
    curves = open_curves(folder, settings or tracking(), RunName("ppo-cartpole-seed0", "g"), folder,
                         resume_step=resume_step)
    for step in steps:
        curves.episode(step, reward=step / 10, length=step // 10, wall_s=step / 100)
        curves.scalars(step, {"train/loss": 1.0 / (step + 1), "train/note": "text", "train/flag": True})
    curves.scalars(steps[-1], {"eval/mean_reward": 7.0})  # a key seen late widens the CSV
    curves.close()


def test_curves_go_to_csv_and_tensorboard_where_asked(tmp_path):
    write_run(tmp_path / "csv", range(10, 60, 10))
    assert not list((tmp_path / "csv").glob("events.out.tfevents.*"))  # TensorBoard is opt-in, as in SB3
    write_run(tmp_path, range(10, 60, 10), settings=tracking(tensorboard=True))
    episodes = rows(tmp_path / EPISODES_CSV)
    assert [int(r["step"]) for r in episodes] == [10, 20, 30, 40, 50]
    assert [float(r["reward"]) for r in episodes] == [1.0, 2.0, 3.0, 4.0, 5.0]
    scalars = rows(tmp_path / SCALARS_CSV)
    assert list(scalars[0]) == ["step", "train/loss", "eval/mean_reward"]  # numbers only, header widened
    assert scalars[-1]["eval/mean_reward"] == "7.0" and scalars[0]["eval/mean_reward"] == ""
    assert tb_scalars(tmp_path, "episode/return") == [(10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0), (50, 5.0)]
    assert [s for s, _ in tb_scalars(tmp_path, "train/loss")] == [10, 20, 30, 40, 50]


def test_a_resumed_curve_drops_the_points_after_its_checkpoint(tmp_path):
    board = tracking(tensorboard=True)
    write_run(tmp_path, range(10, 60, 10), settings=board)  # killed at 50, its checkpoint at 30
    # TensorBoard orders event files by the second their name records: a resume comes later than this
    time.sleep(1.1)
    write_run(tmp_path, range(30, 80, 10), resume_step=30, settings=board)
    assert [int(r["step"]) for r in rows(tmp_path / EPISODES_CSV)] == [10, 20, 30, 40, 50, 60, 70]
    assert [s for s, _ in tb_scalars(tmp_path, "episode/return")] == [10, 20, 30, 40, 50, 60, 70]


def test_a_tracker_whose_package_is_missing_is_refused_by_name(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(QuarlError,
                       match=r"train.tracking.wandb=true needs the wandb package: pip install 'quarl\[tracking\]'"):
        schema.check(compose_cfg("train.tracking.wandb=true"))


@pytest.mark.parametrize("override, message", [
    ("train.eval_every=0", "train.eval_every=0 must be a positive number of env steps"),
    ("train.eval_episodes=0", "train.eval_episodes=0 must be a positive number of episodes"),
    ("train.log_interval_s=-1", "train.log_interval_s=-1.0 must be >= 0 seconds"),
    ("train.tracking.wandb_mode=cloud",
     "train.tracking.wandb_mode=cloud is not allowed: choose one of offline, online"),
])
def test_bad_training_options_get_one_sentence(override, message):
    with pytest.raises(QuarlError, match=message):
        schema.check(compose_cfg(override))


def test_keep_best_with_actorq_is_refused():
    with pytest.raises(QuarlError, match="train.keep_best=true applies to SB3 and QAT trainings"):
        schema.check(compose_cfg("algo=dqn", "quant=actorq", "train.keep_best=true"))


@pytest.mark.slow
def test_wandb_offline_and_mlflow_local_store_get_the_curve(tmp_path):
    pytest.importorskip("wandb")
    mlflow = pytest.importorskip("mlflow")
    settings = tracking(wandb=True, mlflow=True, wandb_dir=str(tmp_path / "wb"), mlflow_uri=str(tmp_path / "mlflow.db"),
                        project="quarl-test")
    write_run(tmp_path / "curves", range(10, 60, 10), settings=settings)
    assert len(list((tmp_path / "wb" / "wandb").glob("offline-run-*/run-*.wandb"))) == 1
    client = mlflow.tracking.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("quarl-test").experiment_id])
    assert [r.info.run_name for r in runs] == ["ppo-cartpole-seed0"] and runs[0].data.tags["group"] == "g"
    history = client.get_metric_history(runs[0].info.run_id, "episode/return")
    assert sorted((m.step, m.value) for m in history) == [(10, 1.0), (20, 2.0), (30, 3.0), (40, 4.0), (50, 5.0)]


def test_progress_logs_a_line_off_a_terminal(caplog):
    caplog.set_level(logging.INFO, logger="quarl.progress")
    with Progress(10, "Training fp32 ppo", interval_s=1e-9, interactive=False) as progress:
        time.sleep(0.01)
        progress.update(5, **{"return": 3.0})
    line = caplog.messages[-1]
    assert line.startswith("Training fp32 ppo: 5/10 steps (50%), ")
    assert "steps/s, return 3.0, " in line and " elapsed, ~" in line and line.endswith(" left")


def test_progress_on_a_terminal_or_turned_off_logs_nothing(caplog):
    caplog.set_level(logging.INFO, logger="quarl.progress")
    for kwargs in ({"interactive": True}, {"interactive": False, "enabled": False},
                   {"interactive": False, "interval_s": 0}):
        with Progress(10, "x", **kwargs) as progress:
            progress.update(10)
    assert caplog.messages == []


def test_activity_says_what_a_silent_stretch_does(caplog):
    caplog.set_level(logging.INFO, logger="quarl.progress")
    with activity("Compiling the onnx_int8 policy", interval_s=0.02, interactive=False):
        time.sleep(0.15)
    assert caplog.messages[0] == "Compiling the onnx_int8 policy ..."
    assert "Compiling the onnx_int8 policy: still running (0 s)" in caplog.messages
    assert caplog.messages[-1].startswith("Compiling the onnx_int8 policy: done in ")


def test_durations_read_as_a_person_writes_them():
    assert [duration(s) for s in (4.2, 185, 7620)] == ["4 s", "3 min 5 s", "2 h 07 min"]


def test_a_full_disk_under_the_curve_is_called_so(tmp_path, monkeypatch):
    import errno

    curves = open_curves(tmp_path, tracking(), RunName("ppo-cartpole-seed0", "g"), tmp_path)
    curves.episode(10, reward=1.0, length=10, wall_s=0.1)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "open", full)
    for write in (lambda: curves.episode(20, reward=2.0, length=10, wall_s=0.2),
                  lambda: curves.scalars(20, {"train/loss": 0.5})):
        with pytest.raises(QuarlError) as err:
            write()
        assert str(err.value) == (
            f"The disk is full: the training curve in {tmp_path} could not be written ([Errno 28] No space left on "
            "device). Free space there and run the same command again: the training resumes from its last checkpoint.")
