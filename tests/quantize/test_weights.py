"""Quantizer numerics against hand-worked examples, and which layers a policy quantizes."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from quarl.quantize.weights import fake_quantize, inference_layers, policy_bytes, quantize_policy

T = lambda *v: torch.tensor(v, dtype=torch.float32)  # noqa: E731


@pytest.mark.parametrize(
    "bits, scheme, w, expected",
    [
        # affine: range [min(w,0), max(w,0)], scale = range / (2^n - 1), zero point, clamp
        (2, "affine", T(-1.0, -0.2, 0.3, 2.0), T(-1.0, 0.0, 0.0, 2.0)),  # scale 1, zp 1
        (4, "affine", T(-1.0, 0.5, 2.0), T(-1.0, 0.4, 2.0)),  # scale 0.2, zp 5; 2.5 rounds to even 2
        (8, "affine", T(0.004, 1.0, 2.55), T(0.0, 1.0, 2.55)),  # scale 0.01, zp 0
        # symmetric: levels -(2^(n-1)-1) .. 2^(n-1)-1, scale = max|w| / (2^(n-1)-1)
        (2, "symmetric", T(-0.6, 0.2, 1.0), T(-1.0, 0.0, 1.0)),  # scale 1
        (4, "symmetric", T(-0.45, 0.33, 1.4), T(-0.4, 0.4, 1.4)),  # scale 0.2
        (8, "symmetric", T(-1.27, 0.5, 0.004), T(-1.27, 0.5, 0.0)),  # scale 0.01
        # quarl_code (QuaRL's released code): delta = (|min| + |max|) / 2^n, w_q = delta * rint(w / delta)
        (2, "quarl_code", T(-1.0, 0.3, 2.0), T(-0.75, 0.0, 2.25)),  # delta 0.75
        (4, "quarl_code", T(-1.0, 0.3, 2.0), T(-0.9375, 0.375, 2.0625)),  # delta 0.1875
        (8, "quarl_code", T(-1.0, 0.3, 2.0), T(-0.99609375, 0.3046875, 2.00390625)),  # delta 3/256
        # published: delta = (|min(w,0)| + |max(w,0)|) / 2^n, Q = floor(w / delta) + z, z = floor(-min(w,0) / delta)
        (2, "published", T(-1.0, 0.3, 2.0), T(-1.5, 0.0, 1.5)),  # delta 0.75, z 1: Q = -1, 1, 3
        (2, "published", T(0.5, 1.0, 2.0), T(0.5, 1.0, 2.0)),  # all positive: delta 0.5, z 0: Q = 1, 2, 4
        (2, "published", T(-2.0, -1.0, -0.3), T(-2.0, -1.0, -0.5)),  # all negative: delta 0.5, z 4: Q = 0, 2, 3
        (3, "published", T(1.5, 1.5), T(1.5, 1.5)),  # constant: delta 0.1875, Q = 8 (= 2^n)
        (3, "quarl_code", T(1.5, 1.5), T(1.5, 1.5)),  # constant: delta 0.375, rint(4) = 4
        (2, "quarl_code", T(0.5, 1.0, 2.0), T(0.625, 1.25, 1.875)),  # all positive: delta 0.625
        (2, "quarl_code", T(-2.0, -1.0, -0.3), T(-1.725, -1.15, -0.575)),  # all negative: delta 0.575
    ],
)
def test_per_tensor_hand_worked(bits, scheme, w, expected):
    assert torch.allclose(fake_quantize(w, bits, scheme), expected, atol=1e-6)


def test_per_channel_uses_one_range_per_output_row():
    w = torch.tensor([[-1.0, 0.4, 2.0], [0.1, 0.2, 0.3]])
    per_channel = fake_quantize(w, 2, "affine", "per_channel")
    assert torch.allclose(per_channel, torch.tensor([[-1.0, 0.0, 2.0], [0.1, 0.2, 0.3]]), atol=1e-6)
    # one range for the whole tensor (scale 1) wipes out the small row
    per_tensor = fake_quantize(w, 2, "affine", "per_tensor")
    assert torch.allclose(per_tensor, torch.tensor([[-1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]))


def test_per_channel_symmetric_on_conv_weights():
    w = torch.zeros(2, 1, 2, 2)
    w[0] = torch.tensor([[1.0, -0.5], [0.2, 0.0]])
    w[1] = torch.tensor([[0.01, 0.02], [-0.03, 0.0]])
    out = fake_quantize(w, 2, "symmetric", "per_channel")  # levels -1, 0, 1 per channel
    assert torch.allclose(out[0], torch.tensor([[1.0, 0.0], [0.0, 0.0]]))  # scale 1; -0.5 rounds to even 0
    assert torch.allclose(out[1], torch.tensor([[0.0, 0.03], [-0.03, 0.0]]))  # scale 0.03


def quarl_code_numpy(w: np.ndarray, bits: int) -> np.ndarray:
    """The PTQ formula of QuaRL's released code, written with NumPy as in its new_ptq.py."""
    delta = (np.abs(np.min(w)) + np.abs(np.max(w))) / 2**bits
    return delta * np.rint(w / delta)


@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7, 8, 12, 16])
def test_quarl_code_scheme_matches_released_code_bit_for_bit(bits):
    w = np.random.default_rng(bits).normal(0, 0.3, size=(64, 33)).astype(np.float32)
    ours = fake_quantize(torch.from_numpy(w), bits, "quarl_code").numpy()
    assert ours.dtype == np.float32
    assert np.array_equal(ours, quarl_code_numpy(w, bits))


@pytest.mark.parametrize(
    "scheme, w, bits, needed",
    [
        ("quarl_code", T(-1.0, 0.3, 2.0), 2, 3),  # codes -1..3: 5 levels at "2 bits"
        ("quarl_code", T(0.5, 1.0, 2.0), 2, 2),  # codes 1..3
        ("published", T(-1.0, 0.3, 2.0), 2, 3),  # codes -1..3
        ("published", T(0.0, 2.0), 2, 3),  # codes 0..4: the maximum lands on 2^n
        ("published", T(1.5, 1.5), 3, 1),  # a constant needs one level
        ("affine", T(-1.0, 0.3, 2.0), 2, 2),
    ],
)
def test_bits_are_counted_from_the_levels_a_scheme_uses(scheme, w, bits, needed):
    """A formula whose codes span more than 2^n levels is stored with the bits they need."""
    from quarl.quantize.weights import integer_tensor_bytes

    weights = w.repeat(24)
    counted = integer_tensor_bytes(weights, _quant(bits=bits, scheme=scheme), "per_tensor", bits)
    range_bytes = 4 if scheme == "quarl_code" else 8
    assert counted == weights.numel() * needed // 8 + range_bytes  # `needed` bits a weight, plus the range


@pytest.mark.parametrize("scheme", ["affine", "symmetric"])
@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
@pytest.mark.parametrize("bits", [2, 4, 8])
def test_level_count_and_error_bound(scheme, granularity, bits):
    w = torch.randn(16, 40)
    q = fake_quantize(w, bits, scheme, granularity)
    rows = q if granularity == "per_channel" else q.reshape(1, -1)
    ranges = w if granularity == "per_channel" else w.reshape(1, -1)
    if scheme == "affine":  # 2^n levels over [min, max]
        levels, steps = 2**bits, (ranges.amax(1) - ranges.amin(1)) / (2**bits - 1)
    else:  # 2^n - 1 levels over [-max|w|, max|w|]
        levels, steps = 2**bits - 1, ranges.abs().amax(1) / (2 ** (bits - 1) - 1)
    assert all(len(torch.unique(r)) <= levels for r in rows)
    assert ((q.reshape_as(ranges) - ranges).abs() <= steps[:, None] / 2 + 1e-5).all()


def test_32_bits_leaves_weights_unchanged_and_zero_tensor_is_safe():
    w = torch.randn(5, 5)
    assert torch.equal(fake_quantize(w, 32, "affine"), w)
    for scheme in ("affine", "symmetric", "quarl_code", "published"):
        assert torch.equal(fake_quantize(torch.zeros(3, 3), 4, scheme), torch.zeros(3, 3))


def _quant(**kw):
    base = {"method": "ptq", "bits": 8, "scheme": "affine", "granularity": "per_tensor", "quantize_bias": False}
    return OmegaConf.create({**base, **kw})


@pytest.fixture(scope="module")
def models():
    import gymnasium as gym
    from stable_baselines3 import DDPG, DQN, PPO

    return {
        "dqn": DQN("MlpPolicy", gym.make("CartPole-v1"), device="cpu"),
        "ppo": PPO("MlpPolicy", gym.make("CartPole-v1"), device="cpu"),
        "ddpg": DDPG("MlpPolicy", gym.make("Pendulum-v1"), device="cpu"),
    }


def test_inference_layers_are_the_acting_networks_only(models):
    assert set(inference_layers(models["dqn"])) == {"q_net.q_net.0", "q_net.q_net.2", "q_net.q_net.4"}
    assert set(inference_layers(models["ppo"])) == {
        "mlp_extractor.policy_net.0", "mlp_extractor.policy_net.2", "action_net"}
    assert set(inference_layers(models["ddpg"])) == {"actor.mu.0", "actor.mu.2", "actor.mu.4"}


def test_fp16_casts_weights_and_biases():
    lin = torch.nn.Linear(1, 1)
    with torch.no_grad():
        lin.weight.fill_(0.1)
    assert lin.weight.half().float().item() == 0.0999755859375
    assert lin.weight.bfloat16().float().item() == 0.10009765625


def test_quantize_policy_changes_only_inference_layers_and_counts_bytes(models):
    import copy

    model = copy.deepcopy(models["dqn"])
    target_before = [p.clone() for p in model.policy.q_net_target.parameters()]
    quantize_policy(model, _quant(bits=2, scheme="symmetric"))
    for layer in inference_layers(model).values():
        assert len(torch.unique(layer.weight)) <= 3  # 2-bit symmetric: -s, 0, s
    assert all(torch.equal(a, b) for a, b in zip(target_before, model.policy.q_net_target.parameters()))
    n_weights = sum(layer.weight.numel() for layer in inference_layers(model).values())
    n_bias = sum(layer.bias.numel() for layer in inference_layers(model).values())
    assert policy_bytes(model, _quant(method="fp32", bits=32)) == 4 * (n_weights + n_bias)
    assert policy_bytes(model, _quant(method="fp16")) == 2 * (n_weights + n_bias)
    # 8-bit affine per tensor: one byte a weight, scale + zero point per layer, fp32 biases
    assert policy_bytes(model, _quant(bits=8)) == n_weights + 3 * 8 + 4 * n_bias


def test_cnn_policy_ptq_per_channel_quantizes_every_conv_layer_by_output_channel():
    """Atari's Nature CNN: each conv filter gets its own grid of 2^bits levels spanning its own range."""
    from stable_baselines3 import PPO

    from quarl.rl.envs import training_envs
    from tests.conftest import compose_cfg

    cfg = compose_cfg("algo=ppo", "env=atari/breakout", "quant.bits=4", "quant.granularity=per_channel")
    model = PPO("CnnPolicy", training_envs(cfg.env, 1, 0), n_steps=8, batch_size=8, seed=0, device="cpu")
    layers = inference_layers(model)
    convs = {n: layer for n, layer in layers.items() if isinstance(layer, torch.nn.Conv2d)}
    assert len(convs) == 3  # the Nature CNN's three conv layers are on the policy path
    before = {n: layer.weight.detach().clone() for n, layer in convs.items()}
    quantize_policy(model, cfg.quant)
    for name, layer in convs.items():
        w, w0 = layer.weight.detach(), before[name]
        for c in range(w.shape[0]):
            lo, hi = min(w0[c].min().item(), 0.0), max(w0[c].max().item(), 0.0)
            scale = (hi - lo) / 15
            zero_point = round(-lo / scale)
            expected = (torch.clamp(torch.round(w0[c] / scale) + zero_point, 0, 15) - zero_point) * scale
            assert len(torch.unique(w[c])) <= 16
            assert torch.allclose(w[c], expected, atol=1e-6)


def test_tflite_rule_leaves_weights_under_min_elements_in_float(models):
    """quant.min_elements=1024, TFLite's rule: CartPole DQN's first (4x64) and output (64x2) layers
    stay fp32, the 64x64 hidden layer is quantized; the bytes count them so."""
    import copy

    model = copy.deepcopy(models["dqn"])
    before = {name: layer.weight.clone() for name, layer in inference_layers(model).items()}
    quant = _quant(bits=2, scheme="symmetric", min_elements=1024)
    quantize_policy(model, quant)
    after = inference_layers(model)
    assert torch.equal(after["q_net.q_net.0"].weight, before["q_net.q_net.0"])  # 256 elements
    assert torch.equal(after["q_net.q_net.4"].weight, before["q_net.q_net.4"])  # 128 elements
    assert len(torch.unique(after["q_net.q_net.2"].weight)) <= 3  # 4096 elements: 2-bit
    n_bias = sum(layer.bias.numel() for layer in after.values())
    expected = 4 * (256 + 128) + (4096 * 2 // 8 + 4) + 4 * n_bias
    assert policy_bytes(models["dqn"], quant) == expected
