"""The fast evaluator (quarl.evaluate.greedy.GreedyActor) against SB3's `predict` path: on the same seeded
episodes, the same rewards, for every algorithm and suite quarl evaluates.

The `predict` path is each episode stepped by hand with `model.predict(obs_transform(obs),
deterministic=True)`, one observation per call. Continuous actions run on torch's own kernels and
must match bit for bit. Discrete actions run in numpy (MLPs) or ONNX Runtime, whose last float bits
differ from torch's: an argmax can flip where two logits are tied to within that rounding. Every step below
checks the actor's action against predict's; flips seen so far: none (0 in 54,199 CartPole steps of
trained and untrained DQN/A2C/PPO policies, 30 episodes each, and none here). The assertions allow
one per 2,000 steps so a rare tie does not fail the test; an episode with a flip is not compared.
"""

from __future__ import annotations

import copy
import importlib.util

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from stable_baselines3 import A2C, DDPG, DQN, PPO, SAC, TD3
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

from quarl.config.method_registry import settings
from quarl.config.schema import EnvConfig
from quarl.evaluate.episodes import evaluate
from quarl.evaluate.greedy import GreedyActor
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import make_env
from tests.conftest import compose_cfg

FLIPS_PER_STEP = 1 / 2000  # allowed argmax flips on float ties (none seen so far)


def env_cfg(name: str, env_id: str, **kw):
    return OmegaConf.structured(EnvConfig(name=name, id=env_id, **kw))


CARTPOLE = env_cfg("cartpole", "CartPole-v1")
PENDULUM = env_cfg("pendulum", "Pendulum-v1")


def by_hand(model, cfg, seeds, transform=None, engine="auto"):
    """Each seeded episode stepped with `predict` (batch 1); the actor's action is compared on
    every state. Returns the rewards, the steps and the flips, per episode."""
    actor = GreedyActor(model, transform, engine)
    out = []
    for seed in seeds:
        env = make_env(cfg)
        obs, _ = env.reset(seed=seed)
        total, steps, flips, done = 0.0, 0, 0, False
        while not done:
            normalised = transform(obs[None]) if transform is not None else obs[None]
            action = model.predict(normalised, deterministic=True)[0]
            flips += int(not np.array_equal(actor(obs[None]), action))
            obs, reward, term, trunc, _ = env.step(action[0])
            total, steps, done = total + float(reward), steps + 1, term or trunc
        env.close()
        out.append((total, steps, flips))
    return out


def check_same_rewards(model, cfg, episodes=4, seed=0, transform=None, engine="auto"):
    ours = evaluate(model, cfg, episodes=episodes, seed=seed, n_envs=3, obs_transform=transform, engine=engine)
    theirs = by_hand(model, cfg, ours.seeds, transform, engine)
    flips = sum(f for _, _, f in theirs)
    steps = sum(n for _, n, _ in theirs)
    assert flips <= max(1, FLIPS_PER_STEP * steps), f"{flips} argmax flips in {steps} steps"
    for reward, (expected, _, f) in zip(ours.rewards, theirs):
        if f == 0:
            assert reward == expected
    alone = evaluate(model, cfg, episodes=episodes, seed=seed, n_envs=1, obs_transform=transform, engine=engine)
    assert alone.rewards == ours.rewards
    in_workers = evaluate(model, cfg, episodes=episodes, seed=seed, workers=2, obs_transform=transform, engine=engine)
    assert (in_workers.rewards, in_workers.lengths) == (ours.rewards, ours.lengths)
    return ours


def trained(cls, cfg, steps, **kw):
    torch.manual_seed(0)
    model = cls("MlpPolicy", make_env(cfg), seed=0, device="cpu", **kw)
    if steps:
        model.learn(steps)
    return model


@pytest.mark.parametrize("cls, steps, kw", [
    (DQN, 1500, {"learning_starts": 200, "exploration_fraction": 0.5}),
    (A2C, 1500, {}),
    (PPO, 2048, {"n_steps": 256}),
])
def test_discrete_policies_get_predicts_rewards(cls, steps, kw):
    model = trained(cls, CARTPOLE, steps, **kw)
    assert GreedyActor(model).engine == "numpy"  # an MLP: nothing to export
    for engine in ("auto", "onnx"):
        check_same_rewards(model, CARTPOLE, episodes=6, engine=engine)


@pytest.mark.parametrize("cls", [DDPG, TD3, SAC, A2C, PPO])
def test_continuous_policies_get_predicts_rewards_bit_for_bit(cls):
    off_policy = cls in (DDPG, TD3, SAC)  # 300 steps of 32-sample updates: weights away from their init
    model = trained(cls, PENDULUM, 300, batch_size=32) if off_policy else trained(cls, PENDULUM, 0)
    ours = check_same_rewards(model, PENDULUM, episodes=3)
    assert GreedyActor(model).engine == "torch"
    assert ours.rewards == [r for r, _, _ in by_hand(model, PENDULUM, ours.seeds)]  # no ties in continuous actions


def test_quantized_and_normalised_policies():
    """PTQ weights, and a VecNormalize'd policy (the normalisation is applied in numpy as before predict)."""
    model = trained(PPO, CARTPOLE, 0)
    for bits in (2, 8):
        q = copy.deepcopy(model)
        quantize_policy(q, compose_cfg("quant=ptq", f"quant.bits={bits}").quant)
        check_same_rewards(q, CARTPOLE, episodes=3)
    venv = VecNormalize(DummyVecEnv([lambda: make_env(PENDULUM)]))
    model = SAC("MlpPolicy", venv, seed=0, device="cpu", learning_starts=100)
    model.learn(300)
    venv.training = False
    check_same_rewards(model, PENDULUM, episodes=2, transform=venv.normalize_obs)


def test_qat_policy_is_folded_and_evaluated_as_it_acts():
    from quarl.quantize import fake_quant as qat

    model = trained(DQN, CARTPOLE, 0)
    quant = OmegaConf.merge(settings("qat"), {"bits": 4, "act_bits": 8})
    layers = qat.attach(model, quant)
    states = np.stack([make_env(CARTPOLE).observation_space.sample() for _ in range(256)])
    model.predict(states, deterministic=True)  # observe activation ranges
    qat.set_switches(layers, enabled=True, frozen=True)
    check_same_rewards(model, CARTPOLE, episodes=3)
    assert GreedyActor(model).engine == "onnx"  # the folded activation fake quants are not numpy's


def test_stochastic_evaluation_still_samples():
    model = trained(PPO, CARTPOLE, 0)
    a = evaluate(model, CARTPOLE, episodes=4, seed=1, deterministic=False)
    b = evaluate(model, CARTPOLE, episodes=4, seed=1, deterministic=False)
    assert a.rewards == b.rewards  # seeded


@pytest.mark.skipif(importlib.util.find_spec("ale_py") is None,
                    reason="ale-py is not installed (pip install 'quarl[atari]')")
def test_atari_cnn_policy_gets_predicts_rewards():
    cfg = env_cfg("atari/pong", "PongNoFrameskip-v4", suite="atari", frame_stack=4, kwargs={"max_episode_steps": 2000})
    model = DQN("CnnPolicy", make_env(cfg), seed=0, device="cpu", buffer_size=1000)
    check_same_rewards(model, cfg, episodes=2)


def test_workers_play_the_same_episodes_and_sample_the_same_states():
    """Episodes played whole in forked workers (eval.workers) give the in-process loop's rewards,
    lengths and sampled observations, for an SB3 policy and for an int8 ONNX Runtime policy built
    before the fork."""
    from quarl.deploy import compile_policy

    model = trained(DQN, CARTPOLE, 1500, learning_starts=200, exploration_fraction=0.5)
    one = evaluate(model, CARTPOLE, episodes=5, seed=3, keep_states=40)
    two = evaluate(model, CARTPOLE, episodes=5, seed=3, keep_states=40, workers=2)
    assert (two.rewards, two.lengths, two.seeds) == (one.rewards, one.lengths, one.seeds)
    assert np.array_equal(two.states, one.states) and len(one.states) == 40
    runner = compile_policy(model, "onnx_int8", one.states)
    one = evaluate(runner, CARTPOLE, episodes=3, seed=3, per_observation=True)
    two = evaluate(runner, CARTPOLE, episodes=3, seed=3, per_observation=True, workers=3)
    assert (two.rewards, two.lengths) == (one.rewards, one.lengths)


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is None, reason="Box2D is not installed (gymnasium[box2d])")
def test_box2d_policies_get_predicts_rewards():
    lander = env_cfg("box2d/lunarlander", "LunarLander-v3", suite="box2d")
    check_same_rewards(trained(DQN, lander, 0), lander, episodes=2)
    continuous = env_cfg("box2d/lunarlander_continuous", "LunarLanderContinuous-v3", suite="box2d")
    check_same_rewards(trained(TD3, continuous, 0), continuous, episodes=2)


@pytest.mark.skipif(importlib.util.find_spec("mujoco") is None,
                    reason="MuJoCo is not installed (pip install 'quarl[mujoco]')")
def test_mujoco_policy_gets_predicts_rewards():
    cfg = env_cfg("mujoco/hopper", "Hopper-v5", suite="mujoco")
    check_same_rewards(trained(SAC, cfg, 0), cfg, episodes=2)
