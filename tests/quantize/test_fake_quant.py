"""QAT: the fake-quant module's numerics and switches, and that QAT training really trains quantized."""

import itertools
import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from stable_baselines3 import DQN

from quarl.config.schema import check
from quarl.errors import QuarlError
from quarl.quantize import fake_quant as qat
from quarl.quantize.weights import fake_quantize
from quarl.train.cache import obtain
from quarl.train.trainer import train
from tests.conftest import compose_cfg

QUANT = dict(method="qat", bits=4, act_bits=8, scheme="affine", granularity="per_tensor", quantize_bias=False)


def quant(**kw):
    return OmegaConf.create({**QUANT, **kw})


@pytest.mark.parametrize(
    "bits, scheme, granularity",
    [c for c in itertools.product([2, 4, 8], ["affine", "symmetric", "quarl_code", "published"],
                                  ["per_tensor", "per_channel"])
     if not (c[1] in ("quarl_code", "published") and c[2] == "per_channel")],
)
def test_fake_quant_forward_equals_the_ptq_quantizer(bits, scheme, granularity):
    w = torch.randn(12, 7) * 0.4
    fq = qat.FakeQuant(bits, scheme, channels=12 if granularity == "per_channel" else 1)
    fq.enabled.fill_(True)
    assert torch.equal(fq(w), fake_quantize(w, bits, scheme, granularity))


def test_backward_is_straight_through_inside_the_range_and_zero_outside():
    fq = qat.FakeQuant(8, "affine")
    fq.observe(torch.tensor([-1.0, 1.0]))
    fq.enabled.fill_(True)
    fq.frozen.fill_(True)
    x = torch.tensor([-2.0, -0.5, 0.3, 0.9, 2.0], requires_grad=True)
    fq(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    # QuaRL's formulas: straight through everywhere (they do not clamp)
    fq = qat.FakeQuant(4, "quarl_code")
    fq.enabled.fill_(True)
    x = torch.tensor([-2.0, 0.3, 2.0], requires_grad=True)
    fq(x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]


def test_before_the_delay_outputs_equal_fp32_while_ranges_are_observed():
    layer = torch.nn.Linear(5, 3)
    wrapped = qat.QuantLayer(layer, quant())
    x = torch.randn(8, 5)
    assert torch.equal(wrapped(x), layer(x))
    assert bool(wrapped.input_fq.observed) and wrapped.input_fq.lo.item() == pytest.approx(x.min().item())
    qat.set_switches({"l": wrapped}, enabled=True)
    assert not torch.equal(wrapped(x), layer(x))


def test_activation_ranges_move_as_a_moving_average_and_stop_when_frozen():
    fq = qat.FakeQuant(8, "affine", momentum=0.01)
    fq(torch.tensor([-1.0, 1.0]))
    fq(torch.tensor([-3.0, 5.0]))
    assert fq.lo.item() == pytest.approx(-1.02) and fq.hi.item() == pytest.approx(1.04)
    fq.frozen.fill_(True)
    fq(torch.tensor([-100.0, 100.0]))
    assert fq.lo.item() == pytest.approx(-1.02) and fq.hi.item() == pytest.approx(1.04)


def test_weight_ranges_follow_the_current_weights_per_channel():
    fq = qat.FakeQuant(4, "symmetric", channels=2)
    fq(torch.tensor([[1.0, -2.0], [0.5, 0.25]]))
    assert fq.lo.tolist() == [-2.0, 0.25] and fq.hi.tolist() == [1.0, 0.5]


@pytest.mark.parametrize("freeze", [False, True])
def test_restored_weight_ranges_come_from_the_final_weights_unless_frozen(freeze):
    """The last forward pass observes the weights before the last optimizer step: evaluation must
    not clip the final weights with those stale ranges (unless the user froze them on purpose)."""
    layer = qat.QuantLayer(torch.nn.Linear(2, 2), quant(act_bits=32))
    with torch.no_grad():
        layer.layer.weight.copy_(torch.tensor([[1.0, -1.0], [0.5, 0.0]]))
    layer(torch.ones(1, 2))  # the forward pass of the last update observes [-1, 1]
    if freeze:
        qat.set_switches({"l": layer}, frozen=True)
    with torch.no_grad():  # the last optimizer step moves a weight outside that range
        layer.layer.weight[0, 0] = 3.0
    states = {"l": {k: v for k, v in layer.state_dict().items() if not k.startswith("layer.")}}
    model = torch.nn.Module()
    model.policy = torch.nn.Module()
    model.policy.l = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.policy.l.weight.copy_(layer.layer.weight)
    restored = qat.restore(model, quant(act_bits=32), states)["l"]
    expected_hi = 1.0 if freeze else 3.0
    assert restored.weight_fq.hi.item() == expected_hi and restored.weight_fq.lo.item() == -1.0
    out = restored.weight_fq(restored.layer.weight)
    step = (expected_hi + 1.0) / 15  # 4-bit affine over [-1, expected_hi]
    assert out.max().item() == pytest.approx(expected_hi, abs=step)  # 3.0 is kept (or clipped to 1 when frozen)


def test_attach_wraps_every_trained_network_but_not_targets():
    import gymnasium as gym
    from stable_baselines3 import DDPG, PPO

    ddpg = DDPG("MlpPolicy", gym.make("Pendulum-v1"), device="cpu")
    names = set(qat.attach(ddpg, quant()))
    assert {"actor.mu.0", "critic.qf0.0"} <= names and not any("target" in n for n in names)
    ppo = PPO("MlpPolicy", gym.make("CartPole-v1"), device="cpu")
    names = set(qat.attach(ppo, quant()))
    assert {"mlp_extractor.policy_net.0", "mlp_extractor.value_net.0", "action_net", "value_net"} <= names
    states = qat.detach(ppo)
    assert set(states) == names and not any(isinstance(m, qat.QuantLayer) for m in ppo.policy.modules())


def test_layers_qat_cannot_handle_are_refused():
    import gymnasium as gym
    from stable_baselines3 import PPO

    model = PPO("MlpPolicy", gym.make("CartPole-v1"), device="cpu")
    model.policy.mlp_extractor.policy_net.append(torch.nn.GRU(64, 64))
    with pytest.raises(QuarlError, match="cannot quantize layer mlp_extractor.policy_net.4 \\(GRU\\)"):
        qat.attach(model, quant())


def _trained_weights(tmp: Path, *overrides: str) -> dict[str, torch.Tensor]:
    cfg = compose_cfg("algo=dqn", "train.steps=600", *overrides)  # learning_starts shrinks to 12
    folder = tmp / "_".join(overrides).replace("=", "-").replace(".", "")
    folder.mkdir()
    train(cfg, folder, progress=False)
    return {k: v for k, v in DQN.load(folder / "model.zip").policy.state_dict().items() if "target" not in k}


def test_qat_training_is_not_fp32_training(tmp_path):
    """Fails if fake quant were silently bypassed (the original QuaRL's A2C QAT bug)."""
    fp32 = _trained_weights(tmp_path, "quant=fp32")
    again = _trained_weights(tmp_path, "quant=fp32", "seed=0")
    assert all(torch.equal(fp32[k], again[k]) for k in fp32)  # training is deterministic here
    late = _trained_weights(tmp_path, "quant=qat", "quant.delay=100000")  # never switches on
    assert all(torch.equal(fp32[k], late[k]) for k in fp32)  # observing ranges changes nothing
    on = _trained_weights(tmp_path, "quant=qat", "quant.bits=3", "quant.delay=0")
    assert any(not torch.equal(fp32[k], on[k]) for k in fp32)


def test_cached_qat_policy_is_evaluated_in_its_quantized_form(tmp_path):
    cfg = compose_cfg("quant=qat", "quant.bits=3", "quant.delay=0", "train.steps=512")
    policy = obtain(cfg, tmp_path)
    assert policy.folder.name.startswith("ppo-cartpole-seed0-qat3-")
    model = policy.load()
    layers = [m for m in model.policy.modules() if isinstance(m, qat.QuantLayer)]
    assert layers and all(bool(fq.enabled) and bool(fq.frozen) for layer in layers for fq in layer.fake_quants())
    weight = layers[0].weight_fq(layers[0].layer.weight)
    assert len(torch.unique(weight)) <= 8  # 3-bit weights at evaluation
    assert json.loads((policy.folder / "curve.json").read_text())  # training curve kept


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["quant.bits=32"], "quant.bits=32 is out of range for quant=qat: use 2..16"),
        (["quant.bits=1"], "quant.bits=1 is out of range for quant=qat"),
        (["quant.act_bits=1"], "quant.act_bits=1 is out of range: use 2..16, or 32"),
        (["quant.delay=-5"], "quant.delay=-5 must be a number of env steps >= 0"),
        (["quant.delay=1000", "quant.freeze_after=10"], "quant.freeze_after=10 comes before quant.delay=1000"),
    ],
)
def test_bad_qat_settings_are_refused_before_training(overrides, message):
    with pytest.raises(QuarlError, match=message.replace(".", r"\.")):
        check(compose_cfg("quant=qat", *overrides))


class Frames(__import__("gymnasium").Env):
    """A tiny image env (random 48x48x3 frames) for CNN policies."""

    def __init__(self):
        import gymnasium as gym
        import numpy as np

        self.observation_space = gym.spaces.Box(0, 255, (48, 48, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(3)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, False, False, {}


def test_qat_wraps_conv_layers_of_cnn_policies_and_trains():
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    model = PPO("CnnPolicy", DummyVecEnv([Frames]), n_steps=16, batch_size=16, n_epochs=1, device="cpu", seed=0)
    layers = qat.attach(model, quant(bits=4, granularity="per_channel"))
    convs = {n: layer for n, layer in layers.items() if isinstance(layer.layer, torch.nn.Conv2d)}
    assert len(convs) == 3 and convs["features_extractor.cnn.0"].weight_fq.lo.numel() == 32  # per channel
    qat.set_switches(layers, enabled=True)
    x = torch.rand(2, 3, 48, 48)
    conv = convs["features_extractor.cnn.0"]
    expected = torch.nn.functional.conv2d(conv.input_fq(x),
                                          fake_quantize(conv.layer.weight, 4, "affine", "per_channel"),
                                          conv.layer.bias, stride=4)
    assert torch.allclose(conv(x), expected)
    before = conv.layer.weight.clone()
    model.learn(32)
    assert not torch.equal(before, conv.layer.weight)  # gradients reach the conv weights through fake quant
