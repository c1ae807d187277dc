"""Every env config composes and steps with its suite's preprocessing; one tiny PTQ run per suite."""

from __future__ import annotations

import sqlite3
import sys

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.atari_wrappers import ClipRewardEnv, EpisodicLifeEnv

from quarl.app import CONF_DIR
from quarl.errors import QuarlError
from quarl.rl.algos import ALGOS
from quarl.rl.envs import SUITES, make_env, require_suite
from quarl.rl.matrix import applies, env_choices, env_config, matrix
from tests.conftest import FAST, compose_cfg, run_quarl

ENVS = env_choices(CONF_DIR)


def _wrappers(env: gym.Env) -> list[type]:
    out = []
    while isinstance(env, gym.Wrapper):
        out.append(type(env))
        env = env.env
    return out


@pytest.mark.parametrize("choice", ENVS)
def test_every_env_config_composes_and_steps(choice: str) -> None:
    cfg = compose_cfg(f"env={choice}")
    assert cfg.env.name == choice  # the name in the store is what the user typed
    env = make_env(cfg.env)
    try:
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs), (choice, obs.shape, env.observation_space)
        env.action_space.seed(0)
        for _ in range(5):
            obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            assert np.isfinite(reward)
            if terminated or truncated:
                obs, _ = env.reset()
        if cfg.env.suite == "atari":
            assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8  # stacked grey frames, channels first
        if cfg.env.suite == "dmc":
            assert obs.ndim == 1 and obs.dtype == np.float32
            assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    finally:
        env.close()


def test_atari_training_only_wrappers() -> None:
    cfg = compose_cfg("env=atari/breakout")
    train, evaluation = make_env(cfg.env, training=True), make_env(cfg.env)
    assert {EpisodicLifeEnv, ClipRewardEnv} <= set(_wrappers(train))
    assert not {EpisodicLifeEnv, ClipRewardEnv} & set(_wrappers(evaluation))  # evaluation scores the whole game
    train.close()
    evaluation.close()


def test_atari_evaluation_plays_the_whole_game_without_the_policy_pressing_fire() -> None:
    """A policy trained with episodic life never presses FIRE (every life starts fired): evaluated
    on the whole game, each lost life is followed by FIRE, so a never-firing policy loses all five
    Breakout lives and the episode ends, far before the 108k-frame cap."""
    env = make_env(compose_cfg("env=atari/breakout").env)
    env.reset(seed=0)
    for _steps in range(1, 5001):
        _, _, terminated, truncated, info = env.step(0)  # NOOP only
        if terminated or truncated:
            break
    env.close()
    assert terminated and info["lives"] == 0 and _steps < 5000


def test_missing_suite_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pybullet_envs_gymnasium", None)  # import now fails as if not installed
    with pytest.raises(QuarlError, match=r"pip install .*\.\[bullet\]"):
        require_suite(compose_cfg("env=bullet/halfcheetah").env)


def test_unknown_env_id_is_a_clear_error(scratch) -> None:
    done = run_quarl(scratch, "env=cartpole", "env.id=NoSuchEnv-v9", *FAST, check=False)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "env.id=NoSuchEnv-v9 is not a registered Gymnasium environment" in done.stderr + done.stdout


def test_matrix_marks_tuned_default_and_na() -> None:
    table = matrix(CONF_DIR).set_index("env")
    assert table.loc["atari/breakout", "ppo"] == "tuned"  # rl-zoo3's shared Atari entry
    assert table.loc["atari/breakout", "ddpg"] == "n/a"
    assert table.loc["pendulum", "dqn"] == "n/a"
    assert table.loc["dmc/cheetah_run", "sac"] == "default"  # rl-zoo3 has no DMC values
    assert table.loc["dmc/cheetah_run", "d4pg"] == "actorq"
    assert set(table["suite"]) == set(SUITES)  # every suite has env configs; every env config a known suite


# One env per suite, trained 300 steps and evaluated 2 short episodes: what lands is checked, not learning.
# Every gradient step still runs, on 32 samples (not 256) and, for PPO, in one epoch (not 4): a
# third to a half of each run's CPU.
SMALL_BATCH = "++algo.hyperparams.batch_size=32"
SUITE_RUNS = {
    "atari": ["algo=ppo", "env=atari/pong", "algo.n_envs=2", "quant.granularity=per_channel",  # CNN policy
              "++algo.hyperparams.n_epochs=1"],
    "box2d": ["algo=td3", "env=box2d/bipedalwalker", SMALL_BATCH],
    "bullet": ["algo=ddpg", "env=bullet/halfcheetah", SMALL_BATCH],
    "mujoco": ["algo=sac", "env=mujoco/hopper", SMALL_BATCH],
    "dmc": ["algo=sac", "env=dmc/cartpole_balance", SMALL_BATCH],
}
CLASSIC = "classic"  # EnvConfig's default suite: its envs run in most other tests


def suite_run(suite: str) -> list[str]:
    """The tiny run of `suite`: SUITE_RUNS' where it has one, else its first env with the first
    SB3 algorithm that acts in it."""
    if suite in SUITE_RUNS:
        return SUITE_RUNS[suite]
    env = next(choice for choice in ENVS if env_config(CONF_DIR, choice).suite == suite)
    algo = next(a for a, spec in ALGOS.items() if spec.cls is not None and applies(CONF_DIR, a, env))
    return [f"algo={algo}", f"env={env}"]


TINY = ["train.steps=300", "eval.episodes=2", "eval.n_envs=1", "hydra.callbacks.collate.enabled=false",
        "++env.kwargs.max_episode_steps=400"]


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(set(SUITES) - {CLASSIC}))
def test_tiny_ptq_run_per_suite_lands_in_the_store(scratch, suite: str) -> None:
    done = run_quarl(scratch, *suite_run(suite), *TINY)
    assert "Traceback" not in done.stdout + done.stderr  # evaluation's workers (Atari) end silently
    with sqlite3.connect(scratch / "outputs" / "results.sqlite") as con:
        rows = con.execute(
            "SELECT quant, status, reward_mean, n_episodes, policy_bytes, fp32_bytes FROM runs").fetchall()
    by_quant = {r[0]: r for r in rows}
    assert set(by_quant) == {"fp32", "ptq"}
    for _quant, status, reward, episodes, _size, _fp32_size in rows:
        assert status == "done" and np.isfinite(reward) and episodes == 2
    assert by_quant["ptq"][4] < by_quant["fp32"][4] / 3  # 8-bit weights
