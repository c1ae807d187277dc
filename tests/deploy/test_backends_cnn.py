"""A Nature-CNN policy on real Atari frames (channels-first uint8 stacks from quarl's preprocessing):
the acting network computes exactly what SB3's `predict` does, /255 included, and int8 execution
agrees with the 8-bit fake-quant policy. No training: the action head is fitted in closed form."""

import copy

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.preprocessing import preprocess_obs

from quarl.deploy import acting_network, compile_policy
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import make_env, random_observations
from tests.conftest import compose_cfg

pytest.importorskip("ale_py")
pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def breakout():
    """The Breakout config (PTQ 8-bit) and two sets of real frames (calibration, held out)."""
    cfg = compose_cfg("algo=ppo", "env=atari/breakout", "quant=ptq", "quant.bits=8")
    return cfg, random_observations(cfg.env, 256, seed=1), random_observations(cfg.env, 256, seed=2)


def decisive_head(model: PPO, frames: np.ndarray) -> None:
    """Make an untrained policy's actions depend on the frame: the action logits become the
    leading principal components of its CNN features over `frames`, centred and scaled to unit
    variance. (An untrained head's logits are near-equal and dominated by the mean frame: it picks
    one action everywhere, and a test on it proves nothing.)"""
    policy = model.policy
    with torch.no_grad():
        features = policy.pi_features_extractor(preprocess_obs(torch.as_tensor(frames), policy.observation_space))
        mean = features.mean(dim=0)
        _, singular, directions = torch.linalg.svd(features - mean, full_matrices=False)
        n = model.action_space.n
        weight = directions[:n] / (singular[:n, None] / len(frames) ** 0.5)
        policy.action_net.weight.copy_(weight)
        policy.action_net.bias.copy_(-(weight @ mean))


@pytest.fixture(scope="module")
def cnn(breakout):
    cfg, calibration, _ = breakout
    model = PPO("CnnPolicy", make_env(cfg.env), seed=0, device="cpu")
    decisive_head(model, calibration)
    return model


def logits(model: PPO, frames: np.ndarray) -> torch.Tensor:
    """The normalised logits of SB3's categorical distribution, as `predict` computes them."""
    with torch.no_grad():
        obs, _ = model.policy.obs_to_tensor(frames)
        return model.policy.get_distribution(obs).distribution.logits


def test_real_atari_frames_are_channels_first_uint8_stacks(breakout, cnn):
    cfg, frames, _ = breakout
    assert cnn.observation_space.shape == (4, 84, 84) and cnn.observation_space.dtype == np.uint8
    assert frames.shape == (256, 4, 84, 84)
    assert np.array_equal(frames, frames.astype(np.uint8))  # whole grey levels
    assert frames.max() > 1  # raw 0..255 pixels, not already scaled


def test_acting_network_is_model_predict_on_real_frames(breakout, cnn):
    _, _, frames = breakout
    net = acting_network(cnn)
    assert net.obs_dtype == np.uint8
    pixels = torch.from_numpy(frames.astype(np.uint8))
    # the /255 of SB3's preprocess_obs, on the channels-first stack as it is (no transpose)
    assert torch.equal(net.prep(pixels), preprocess_obs(pixels, cnn.observation_space))
    with torch.no_grad():
        net_logits = net.body(net.prep(pixels))
    net_logits = net_logits - net_logits.logsumexp(dim=-1, keepdim=True)
    assert torch.allclose(net_logits, logits(cnn, frames), atol=1e-6)
    expected, _ = cnn.predict(frames, deterministic=True)
    assert np.array_equal(net.act(frames), expected)
    assert np.array_equal(net.act(frames.astype(np.uint8)), expected)  # float or uint8 pixels alike
    assert len(np.unique(expected)) >= 3  # the actions depend on the frame


def test_int8_argmax_agrees_with_fake_quant_on_real_frames(breakout, cnn):
    cfg, calibration, frames = breakout
    fake = copy.deepcopy(cnn)
    quantize_policy(fake, cfg.quant)
    expected, _ = fake.predict(frames, deterministic=True)
    runner = compile_policy(cnn, "onnx_int8", calibration)
    assert runner.precision == "int8"
    int8 = runner(frames)
    top2 = logits(fake, frames).topk(2, dim=1).values
    # frames whose top two logits differ by more than 0.5: closer calls are decided by int8's rounding
    # of the activations, which the weight-only fake quant does not do (on all frames: 85% agree)
    decisive = (top2[:, 0] - top2[:, 1]).numpy() > 0.5
    assert (int8 == expected).mean() >= 0.8
    assert decisive.mean() >= 0.5 and (int8[decisive] == expected[decisive]).mean() >= 0.98
    assert len(np.unique(expected)) >= 3
