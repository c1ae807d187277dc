"""Training: curve files beside the policy, progress off a terminal, keep-best (with VecNormalize and
resume), the device warning."""

from __future__ import annotations

import csv
import json
import logging

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from quarl.config.keys import policy_key
from quarl.evaluate.episodes import episode_seeds, evaluate
from quarl.train import cache as policy_files
from quarl.train import checkpoint
from quarl.train import trainer as training
from quarl.train.cache import cached, obtain
from quarl.train.keep_best import STUDY_SEEDS, eval_seed
from tests.conftest import FAST, compose_cfg, run_quarl
from tests.train.interrupted import Killed, KilledAfterCheckpoint

KEEP_BEST = ["train.keep_best=true", "train.eval_every=512", "train.eval_episodes=5"]


def csv_rows(path):
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_a_fresh_training_leaves_tensorboard_and_csv_curves_beside_its_policy(scratch):
    done = run_quarl(scratch, *FAST, "algo=ppo", "train.log_interval_s=0.2", "train.tracking.tensorboard=true")
    log = done.stdout + done.stderr
    # stderr is a pipe here: progress comes as log lines with steps, rate, recent return and time left
    lines = [line for line in log.splitlines() if "Training fp32 ppo: " in line]
    assert lines and "/1500 steps (" in lines[0] and "steps/s, return " in lines[-1] and " elapsed" in lines[-1]
    policy = cached(compose_cfg(*FAST[:1], "algo=ppo"), scratch / "outputs" / "policies")
    assert f"Training curve in {policy.curves}" in log
    episodes = csv_rows(policy.curves / "episodes.csv")
    assert len(episodes) == len(policy.curve) > 10  # one row per training episode
    assert [float(r["reward"]) for r in episodes] == [p["reward"] for p in policy.curve]
    assert all(float(a["wall_s"]) <= float(b["wall_s"]) for a, b in zip(episodes, episodes[1:]))
    scalars = csv_rows(policy.curves / "scalars.csv")
    assert {"train/loss", "train/value_loss", "rollout/ep_rew_mean", "time/fps", "wall_s"} <= set(scalars[0])
    assert int(scalars[-1]["step"]) >= 1500
    events = EventAccumulator(str(policy.curves))
    events.Reload()
    returns = events.Scalars("episode/return")
    assert [(e.step, e.value) for e in returns] == [(p["step"], p["reward"]) for p in policy.curve]
    assert "train/loss" in events.Tags()["scalars"]
    # a later cell reuses the cached policy, and its curve stays with it
    again = run_quarl(scratch, *FAST, "algo=ppo", "quant.bits=4")
    assert "Using cached policy" in again.stdout + again.stderr
    assert len(csv_rows(policy.curves / "episodes.csv")) == len(episodes)


@pytest.mark.slow
def test_keep_best_records_the_kept_model_and_saves_it_with_its_normalisation(tmp_path):
    # 10 episodes per evaluation: here the kept model (step 2560) is not the final one (3072)
    cfg = compose_cfg("algo=ppo", "algo.normalize=true", "train.steps=3000", *KEEP_BEST, "train.eval_episodes=10")
    policy = obtain(cfg, tmp_path)
    meta, kept = policy.meta, policy.kept
    evaluations = meta["evaluations"]
    assert [e["step"] for e in evaluations] == [512 * i for i in range(1, 7)]  # and the final model at 3072
    best = max(evaluations, key=lambda e: e["reward"])  # the earliest of the best, as rl-zoo3 keeps it
    assert (kept["step"], kept["reward"]) == (best["step"], best["reward"])
    assert kept["final_step"] == meta["timesteps"] == 3072 and kept["final_reward"] == evaluations[-1]["reward"]
    assert kept["eval_seed"] == eval_seed(cfg.seed, 10)
    # the saved policy is the kept one: evaluated again on the same episodes it scores what was recorded
    again = evaluate(policy.load(), cfg.env, kept["episodes"], kept["eval_seed"], obs_transform=policy.obs_transform())
    assert again.mean == pytest.approx(kept["reward"], abs=1e-9)
    # and its normalisation statistics are those of the kept step (one observation per env step, n_envs at reset)
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    from quarl.rl.envs import make_env

    stats = VecNormalize.load(str(policy.folder / policy_files.NORMALIZE_FILE),
                              DummyVecEnv([lambda: make_env(cfg.env)]))
    assert stats.obs_rms.count == pytest.approx(kept["step"] + cfg.algo.n_envs, abs=1)


@pytest.mark.slow
def test_qat_keeps_the_best_fake_quantized_model(tmp_path):
    """Only models with fake quant on compete, evaluated as the saved QAT policy computes."""
    cfg = compose_cfg("algo=ppo", "quant=qat", "quant.bits=4", "quant.delay=1024", "train.steps=2048", *KEEP_BEST[:1],
                      "train.eval_every=256", "train.eval_episodes=5", "train.tracking.tensorboard=true")
    policy = obtain(cfg, tmp_path)
    evaluations, kept = policy.meta["evaluations"], policy.kept
    assert [e["step"] for e in evaluations] == list(range(1024, 2049, 256))
    assert (policy.curves / "episodes.csv").exists() and list(policy.curves.glob("events.out.tfevents.*"))
    again = evaluate(policy.load(), cfg.env, kept["episodes"], kept["eval_seed"])
    assert again.mean == pytest.approx(kept["reward"], abs=1e-9)


@pytest.mark.slow
def test_an_actorq_run_writes_its_curve_in_its_run_dir(scratch):
    done = run_quarl(scratch, *FAST, "algo=dqn", "quant=actorq", "train.steps=3000", "actorq.actors=1",
                     "actorq.log_interval_s=0.5", "hydra.run.dir=run", "train.tracking.tensorboard=true")
    assert "ActorQ dqn int8: " in done.stdout + done.stderr and "/3000 env steps (" in done.stdout + done.stderr
    curves = scratch / "run" / "curves"
    episodes = csv_rows(curves / "episodes.csv")
    assert len(episodes) > 10 and {"step", "wall_s", "reward", "length", "actor"} <= set(episodes[0])
    assert "train/loss" in csv_rows(curves / "scalars.csv")[-1]
    events = EventAccumulator(str(curves))
    events.Reload()
    assert len(events.Scalars("episode/return")) == len(episodes)


def test_keep_best_is_part_of_the_policy_key_and_its_seeds_avoid_the_studys():
    plain = policy_key(compose_cfg())
    assert len({plain, policy_key(compose_cfg("train.keep_best=true")),
                policy_key(compose_cfg("train.keep_best=true", "train.eval_every=1000"))}) == 3
    assert policy_key(compose_cfg("train.eval_every=1000")) == plain  # no effect without keep_best
    for seed in range(5):
        chosen = episode_seeds(eval_seed(seed, 100), 100)
        assert not set(chosen) & set(episode_seeds(seed, STUDY_SEEDS)) and len(set(chosen)) == 100


@pytest.mark.slow
def test_a_resumed_training_keeps_the_best_model_so_far(tmp_path, monkeypatch):
    cfg = compose_cfg("algo=ppo", "train.steps=3000", "train.checkpoint_every=1024", *KEEP_BEST,
                      "train.tracking.tensorboard=true")
    folder, ckpt = tmp_path / "policy", tmp_path / "policy.ckpt"
    folder.mkdir()
    kill = KilledAfterCheckpoint(monkeypatch)
    with pytest.raises(Killed):
        training.train(cfg, folder, progress=False, checkpoints=ckpt)
    before = torch.load(ckpt / checkpoint.STATE_FILE, weights_only=False)["extra"]["best"]
    kill.lift()
    training.train(cfg, folder, progress=False, checkpoints=ckpt)
    meta = json.loads((folder / policy_files.META_FILE).read_text())
    assert meta["resumed_at"] == kill.saved[0] == 1024
    evaluations = meta["evaluations"]
    assert evaluations[: len(before["evaluations"])] == before["evaluations"]  # the evaluations before the kill stay
    assert [e["step"] for e in evaluations] == [512 * i for i in range(1, 7)]
    best = max(evaluations, key=lambda e: e["reward"])
    assert (meta["kept"]["step"], meta["kept"]["reward"]) == (best["step"], best["reward"])
    # the curve continues from the checkpoint: the points the killed run wrote after it are gone
    steps = [int(r["step"]) for r in csv_rows(folder / "curves" / "episodes.csv")]
    assert steps == sorted(steps) and len(steps) == len(json.loads((folder / policy_files.CURVE_FILE).read_text()))
    events = EventAccumulator(str(folder / "curves"))
    events.Reload()
    assert [e.step for e in events.Scalars("episode/return")] == steps
    if before["best"] is not None:  # the kept parameters came through the checkpoint as tensors
        assert all(isinstance(v, torch.Tensor) for v in before["best"]["params"].values())


def test_a_checkpoint_that_would_run_code_is_not_resumed_and_the_training_starts_over(tmp_path, monkeypatch, caplog):
    from tests.train.test_checkpoint import Touch

    cfg = compose_cfg("algo=ppo", "train.steps=2048", "train.checkpoint_every=1024")
    folder, ckpt, marker = tmp_path / "policy", tmp_path / "policy.ckpt", tmp_path / "ran"
    folder.mkdir()
    kill = KilledAfterCheckpoint(monkeypatch)
    with pytest.raises(Killed):
        training.train(cfg, folder, progress=False, checkpoints=ckpt)
    params = ckpt / checkpoint.PARAMS_FILE  # re-saved with an entry whose unpickling runs os.system
    torch.save({**torch.load(params, weights_only=False), "payload": Touch(marker)}, params)
    kill.lift()
    with caplog.at_level("INFO"):
        training.train(cfg, folder, progress=False, checkpoints=ckpt)
    assert not marker.exists()
    assert f"The training checkpoint {ckpt} is not resumed: params.pt would run code when read" in caplog.text
    assert "Resuming from the checkpoint" not in caplog.text
    meta = json.loads((folder / policy_files.META_FILE).read_text())
    assert meta["resumed_at"] is None and "Trained fp32 ppo for 2048 steps" in caplog.text


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_training_on_cuda_without_a_gpu_warns(caplog):
    caplog.set_level(logging.WARNING, logger="quarl.train.trainer")
    assert training.resolve_device("cuda") == "cpu"
    assert caplog.messages == ["train.device=cuda but no GPU is visible: training runs on the CPU."]
    assert training.resolve_device("auto") == "auto" and len(caplog.messages) == 1
