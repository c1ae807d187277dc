"""The evaluator: seeded episodes, batched inference, results independent of batching."""

import signal

import gymnasium as gym
import numpy as np
from omegaconf import OmegaConf
from stable_baselines3 import PPO
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from quarl.config.schema import EnvConfig
from quarl.errors import raise_terminated
from quarl.evaluate.episodes import episode_seeds, evaluate
from quarl.evaluate.workers import play

CARTPOLE = OmegaConf.structured(EnvConfig(name="cartpole", id="CartPole-v1"))


def test_episode_seeds_are_derived_from_the_run_seed():
    assert episode_seeds(0, 5) == episode_seeds(0, 5)
    assert episode_seeds(0, 5) != episode_seeds(1, 5)
    assert episode_seeds(0, 3) == episode_seeds(0, 5)[:3]
    assert len(set(episode_seeds(0, 100))) == 100


def test_results_do_not_depend_on_how_many_envs_run_at_once():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=0, device="cpu")
    one = evaluate(model, CARTPOLE, episodes=7, seed=3, n_envs=1)
    four = evaluate(model, CARTPOLE, episodes=7, seed=3, n_envs=4)
    assert one.rewards == four.rewards and one.lengths == four.lengths
    assert one.seeds == episode_seeds(3, 7)
    assert len(one.rewards) == 7 and all(r == n for r, n in zip(one.rewards, one.lengths))  # +1 per step


def test_same_returns_as_stepping_the_env_by_hand():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=1, device="cpu")
    ours = evaluate(model, CARTPOLE, episodes=3, seed=5, n_envs=3)
    for seed, reward in zip(ours.seeds, ours.rewards):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = env.step(action)
            total, done = total + r, term or trunc
        assert total == reward


def test_agrees_with_sb3_evaluate_policy_in_distribution():
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=2, device="cpu")
    ours = evaluate(model, CARTPOLE, episodes=20, seed=0)
    env = Monitor(gym.make("CartPole-v1"))
    env.reset(seed=0)
    theirs, _ = evaluate_policy(model, env, n_eval_episodes=20, deterministic=True)
    assert abs(np.mean(ours.rewards) - theirs) < 0.5 * max(theirs, 10)


def test_evaluation_workers_end_at_the_pools_sigterm_as_by_default(tmp_path):
    """A run turns SIGTERM into an exception (quarl.errors.ending_like_ctrl_c); the evaluation workers
    it forks do not keep that handler, or the pool's SIGTERM at the end made each print a traceback."""
    seen = tmp_path / "dispositions"

    def act(observations):
        with seen.open("a") as out:
            out.write(f"{signal.getsignal(signal.SIGTERM) == signal.SIG_DFL}\n")
        return [0] * len(observations)

    previous = signal.signal(signal.SIGTERM, raise_terminated)  # as a run sets it
    try:
        played = list(play(act, CARTPOLE, episode_seeds(0, 2), workers=2, sample=None))
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert len(played) == 2 and set(seen.read_text().split()) == {"True"}
