"""The exact evaluation envs: Gymnasium's episodes bit for bit, for identical seeds."""

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf
from stable_baselines3 import PPO

from quarl.config.schema import EnvConfig
from quarl.errors import QuarlError
from quarl.evaluate.episodes import evaluate
from quarl.evaluate.fastenvs import CartPole, eval_env, exact_env


def cartpole_cfg(env_id: str = "CartPole-v1", **kwargs) -> object:
    return OmegaConf.structured(EnvConfig(name="cartpole", id=env_id, kwargs=kwargs))


def balance(obs: np.ndarray, rng: np.random.Generator, noise: float) -> int:
    """A controller that often lasts to the time limit, with a share `noise` of random actions."""
    if rng.random() < noise:
        return int(rng.integers(2))
    return int(obs[2] + 0.5 * obs[3] + 0.01 * obs[1] > 0)


@pytest.mark.parametrize(
    "env_id, kwargs",
    [("CartPole-v1", {}), ("CartPole-v0", {}), ("CartPole-v1", {"max_episode_steps": 50, "sutton_barto_reward": True})],
)
def test_cartpole_steps_gymnasiums_episodes_bit_for_bit(env_id, kwargs):
    ours, theirs = exact_env(cartpole_cfg(env_id, **kwargs)), gym.make(env_id, **kwargs)
    assert isinstance(ours, CartPole)
    rng, ends = np.random.default_rng(0), set()
    for i, seed in enumerate([0, 1, 7, 123, 2**31 - 1, 987654321]):
        noise = 0.05 if i % 2 else 0.6
        a, b = ours.reset(seed=seed)[0], theirs.reset(seed=seed)[0]
        assert a.dtype == b.dtype == np.float32 and a.tobytes() == b.tobytes()
        done = False
        while not done:
            action = balance(b, rng, noise) if rng.random() < 0.5 else np.int64(balance(b, rng, noise))
            a_step, b_step = ours.step(action), theirs.step(action)
            assert a_step[0].tobytes() == b_step[0].tobytes()  # every observation, bit for bit
            assert a_step[1:4] == b_step[1:4]  # reward, terminated, truncated
            done = b_step[2] or b_step[3]
            b = b_step[0]
        ends.add("truncated" if b_step[3] else "terminated")
    assert ends == {"truncated", "terminated"}  # both ends of an episode were compared
    # unseeded resets go on with the generator of the last seed, as Gymnasium's do
    assert ours.reset()[0].tobytes() == theirs.reset()[0].tobytes()


def test_evaluation_rewards_are_gymnasiums_for_identical_seeds():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=2, device="cpu")
    cfg = cartpole_cfg()
    fast = evaluate(model, cfg, episodes=6, seed=4, n_envs=4)
    slow = evaluate(model, cfg, episodes=6, seed=4, n_envs=4, env_engine="gymnasium")
    assert fast.rewards == slow.rewards and fast.lengths == slow.lengths and fast.seeds == slow.seeds


def test_other_envs_and_settings_step_gymnasium():
    assert exact_env(cartpole_cfg(render_mode="rgb_array")) is None
    assert exact_env(OmegaConf.structured(EnvConfig(name="acrobot", id="Acrobot-v1"))) is None
    assert isinstance(eval_env(cartpole_cfg(), "gymnasium"), gym.Env)
    with pytest.raises(QuarlError, match="env_engine=envpool"):
        eval_env(cartpole_cfg(), "envpool")
    with pytest.raises(QuarlError, match="action 0 or 1"):
        CartPole(500).step(2)


def atari_cfg(env_id: str) -> object:
    return OmegaConf.structured(EnvConfig(name="atari", id=env_id, suite="atari", frame_stack=4))


@pytest.mark.parametrize("env_id", ["PongNoFrameskip-v4", "BreakoutNoFrameskip-v4"])
def test_atari_seeded_reset_without_reload_plays_gymnasiums_episodes(env_id):
    pytest.importorskip("ale_py")
    ours, theirs = eval_env(atari_cfg(env_id)), eval_env(atari_cfg(env_id), "gymnasium")
    assert ours.unwrapped.load_game != theirs.unwrapped.load_game  # the reload is really skipped
    rng = np.random.default_rng(0)
    for seed in (0, 5, 2**31 - 1):  # each after the last one's emulator state: the restore must undo it
        a, b = ours.reset(seed=seed), theirs.reset(seed=seed)
        assert a[0].tobytes() == b[0].tobytes() and a[1] == b[1]
        for _ in range(400):
            action = int(rng.integers(ours.action_space.n))
            a, b = ours.step(action), theirs.step(action)
            assert a[0].tobytes() == b[0].tobytes() and a[1:] == b[1:]
            if a[2] or a[3]:
                break


def test_sticky_atari_envs_keep_their_reload():
    pytest.importorskip("ale_py")
    env = eval_env(atari_cfg("ALE/Pong-v5"))  # sticky actions: ALE's reseeded generator decides them
    assert "load_game" not in vars(env.unwrapped)
