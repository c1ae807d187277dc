"""train.subproc_envs: the training envs step in processes of their own (SB3's SubprocVecEnv), and the
training is the one DummyVecEnv gives: same trajectories, same policy, same key (issue 59: the
device's cores step the Atari envs of the ledger's jobs)."""

from __future__ import annotations

import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

from quarl.config.keys import policy_key
from quarl.rl.envs import training_envs
from quarl.train import MODEL_FILE
from quarl.train import trainer as training
from tests.conftest import compose_cfg


@pytest.mark.slow  # the env processes start in seconds (forkserver: each imports quarl's modules)
def test_envs_in_their_own_processes_train_the_same_policy(tmp_path):
    base = ("algo=ppo", "env=cartpole", "algo.n_envs=2", "algo.hyperparams.batch_size=64", "train.steps=256")
    models = {}
    for subproc in (False, True):
        cfg = compose_cfg(*base, f"train.subproc_envs={str(subproc).lower()}")
        folder = tmp_path / str(subproc)
        folder.mkdir()
        training.train(cfg, folder, progress=False)
        models[subproc] = PPO.load(folder / MODEL_FILE, device="cpu").policy.state_dict()
    assert models[False].keys() == models[True].keys()
    assert all(torch.equal(models[False][k], models[True][k]) for k in models[False])
    assert policy_key(compose_cfg(*base)) == policy_key(compose_cfg(*base, "train.subproc_envs=true"))
    venv = training_envs(compose_cfg(*base).env, 2, 0, subproc=True)
    try:
        assert isinstance(venv, SubprocVecEnv)
    finally:
        venv.close()
    assert isinstance(training_envs(compose_cfg(*base).env, 1, 0, subproc=True), DummyVecEnv)  # one env: no process
