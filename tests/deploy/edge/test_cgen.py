"""The full-integer policy and its C99 form: TFLite's fixed-point arithmetic on hand-worked numbers,
the numpy reference against the fake-quant policy, the C policy bit for bit against the reference
(host cc through ctypes, and on an emulated Cortex-M4 under qemu-system-arm), its flash and RAM,
and every refusal in one sentence."""

from __future__ import annotations

import copy
import dataclasses
import random
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces
from omegaconf import OmegaConf
from stable_baselines3 import DQN, PPO, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from quarl.config.schema import EnvConfig
from quarl.deploy import acting_network
from quarl.deploy.edge import cpairs, cstream, fixedpoint, huffman, integer_policy, visited_states
from quarl.deploy.edge.cgen import data_bytes, half_table, header, pack_weights, source
from quarl.deploy.edge.integer import Quant
from quarl.deploy.edge.stages import check_model
from quarl.deploy.edge.targets import TARGETS
from quarl.deploy.edge.toolchain import CPolicy, available, tool
from quarl.errors import QuarlError
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations

PTQ8 = OmegaConf.create(dict(method="ptq", bits=8, scheme="affine", granularity="per_tensor", quantize_bias=False))
N_STATES = 10_000  # recorded states every target is compared on


def env_cfg(env_id: str):
    return OmegaConf.structured(EnvConfig(id=env_id, suite="classic"))


def recorded_states(model, env_id: str, transform=None, n: int = N_STATES) -> np.ndarray:
    """States the policy visits (greedy episodes), topped up with random-action states to `n`."""
    visited = visited_states(model, env_cfg(env_id), [101, 102, 103], transform)
    extra = random_observations(env_id, max(n - len(visited), 0), seed=5)
    return np.concatenate([visited, extra])[:n].astype(np.float32)


class Trained:
    """A briefly trained policy, PTQ-quantized to 8 bits, with calibration and recorded states."""

    def __init__(self, model, env_id: str, norm=None) -> None:
        transform = norm.normalize_obs if norm is not None else None
        self.env_id = env_id
        self.calibration = visited_states(model, env_cfg(env_id), [11, 12, 13, 14, 15], transform)
        if len(self.calibration) < 200:  # a short-lived early policy: more states from random play
            self.calibration = np.concatenate([self.calibration, random_observations(env_id, 200, seed=3)])
        self.states = recorded_states(model, env_id, transform)
        self.fp32 = acting_network(model, norm)
        self.saved = copy.deepcopy(model.policy.state_dict())
        self.model, self.norm = model, norm
        quantize_policy(model, PTQ8)
        self.net = acting_network(model, norm)

    def model_copy(self):
        """A fresh copy of the model, PTQ-quantized (safe to change)."""
        model = copy.deepcopy(self.model)
        model.policy.load_state_dict(self.saved)
        quantize_policy(model, PTQ8)
        return model

    def integer(self, **kwargs):
        return integer_policy(self.net, self.calibration, **kwargs)


def make_cartpole() -> Trained:
    """PPO on CartPole (SB3's 64x64 Tanh MLP), trained for a few seconds."""
    torch.manual_seed(0)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=256, batch_size=64, n_epochs=4, seed=0, device="cpu").learn(2048)
    return Trained(model, "CartPole-v1")


def make_pendulum() -> Trained:
    """PPO with VecNormalize on a continuous task: normalisation and clipping are in the policy."""
    venv = VecNormalize(make_vec_env("Pendulum-v1", n_envs=2, seed=0), norm_reward=False)
    model = PPO("MlpPolicy", venv, n_steps=256, batch_size=64, n_epochs=4, seed=0, device="cpu").learn(1024)
    venv.training = False
    return Trained(model, "Pendulum-v1", venv)


# --- TFLite's fixed-point arithmetic -----------------------------------------------------------------


def _srdhm_exact(a: int, b: int) -> int:
    """gemmlowp's SaturatingRoundingDoublingHighMul written with Python integers."""
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    num = ab + nudge
    return num // (1 << 31) if num >= 0 else -((-num) // (1 << 31))


def _rdbpot_exact(x: int, e: int) -> int:
    """x / 2^e to nearest, ties away from zero, with Python's exact rationals."""
    from fractions import Fraction

    q = Fraction(x, 2**e)
    return int(q + Fraction(1, 2)) if q >= 0 else -int(-q + Fraction(1, 2))


def test_fixed_point_matches_gemmlowp_on_hand_worked_and_random_numbers():
    assert fixedpoint.quantize_multiplier(0.5) == (2**30, 0)
    assert fixedpoint.quantize_multiplier(0.25) == (2**30, -1)
    assert fixedpoint.quantize_multiplier(1.0) == (2**30, 1)
    assert fixedpoint.quantize_multiplier(0.0) == (0, 0)
    # 0.75 * 2^-10: mantissa 0.75 -> round(0.75 * 2^31)
    assert fixedpoint.quantize_multiplier(0.75 * 2**-10) == (round(0.75 * 2**31), -10)
    # SaturatingRoundingDoublingHighMul rounds ties upward: 7 * 0.5 = 3.5 -> 4, -7 * 0.5 = -3.5 -> -3
    m, s = fixedpoint.quantize_multiplier(0.5)
    assert fixedpoint.multiply_by_quantized_multiplier(np.array([7, -7, 6]), m, s).tolist() == [4, -3, 3]
    # x 0.25 is x 0.5 (rounded as above), then / 2 rounded half away: TFLite's double rounding, so
    # 5 * 0.25 = 1.25 -> 2.5 -> 3 -> 1.5 -> 2 and -5 * 0.25 -> -2.5 -> -2 -> -1
    m, s = fixedpoint.quantize_multiplier(0.25)
    assert fixedpoint.multiply_by_quantized_multiplier(np.array([5, -5, 6, -6]), m, s).tolist() == [2, -1, 2, -2]
    assert fixedpoint.round_half_away(np.array([0.5, -0.5, 1.5, 2.5, -2.5, 0.49999997], dtype=np.float32)).tolist() == [
        1,
        -1,
        2,
        3,
        -3,
        0,
    ]
    rng = random.Random(0)
    a = [rng.randint(-(2**31), 2**31 - 1) for _ in range(2000)] + [-(2**31)]
    b = [rng.randint(2**30, 2**31 - 1) for _ in range(2000)] + [-(2**31)]
    got = fixedpoint.saturating_rounding_doubling_high_mul(np.array(a), np.array(b))
    assert got.tolist() == [_srdhm_exact(x, y) for x, y in zip(a, b)]
    e = [rng.randint(0, 31) for _ in a]
    assert fixedpoint.rounding_divide_by_pot(np.array(a), np.array(e)).tolist() == [
        _rdbpot_exact(x, k) for x, k in zip(a, e)
    ]


def test_packed_weights_and_half_tables_round_trip():
    codes = np.array([[-7, 7, 0, -1, 3], [1, -2, 6, -7, 0]])
    packed = pack_weights(codes, 4)
    assert packed.shape == (2, 3)
    low, high = (packed & 0xF).astype(int), (packed >> 4).astype(int)
    nibbles = np.stack([low, high], axis=2).reshape(2, -1)[:, :5]
    assert np.array_equal((nibbles ^ 8) - 8, codes)
    two = pack_weights(np.array([[-1, 0, 1, 1, -1]]), 2)
    assert two.tolist() == [[0b01_01_00_11, 0b11]]
    q = Quant(0.02, 0)
    from quarl.deploy.edge.convert import _tanh_table

    table = _tanh_table(q)
    half = half_table(table)
    rebuilt = [half[c] if c >= 0 else (half[128] if c == -128 else -half[-c]) for c in range(-128, 128)]
    assert np.array_equal(np.array(rebuilt), table.astype(int))


def test_canonical_huffman_code_on_a_hand_worked_stream():
    values = np.array([0, 0, 0, 0, 1, 1, -1, 2])  # 0 four times, 1 twice, -1 and 2 once
    code = huffman.canonical_code(values)
    # lengths 1, 2, 3, 3; canonical codes 0 -> 0, 1 -> 10, -1 -> 110, 2 -> 111
    assert code.counts == (0, 1, 1, 2) and code.symbols == (0, 1, -1, 2)
    assert code.codebook() == {0: (0b0, 1), 1: (0b10, 2), -1: (0b110, 3), 2: (0b111, 3)}
    stream = huffman.encode(np.array([0, 1, -1, 2]), code)
    # bits 0 10 110 111, each byte filled from its lowest bit: 0b11011010, then 0b1
    assert stream.tolist() == [0xDA, 0x01]
    assert huffman.decode(stream, code, 4).tolist() == [0, 1, -1, 2]
    lone = huffman.canonical_code(np.array([5, 5, 5]))
    assert lone.counts == (0, 1) and huffman.decode(huffman.encode(np.array([5, 5]), lone), lone, 2).tolist() == [5, 5]
    rng = np.random.default_rng(0)
    many = np.clip(np.round(rng.normal(0, 2, 5000)), -7, 7).astype(np.int64)
    many_code = huffman.canonical_code(many)
    assert np.array_equal(huffman.decode(huffman.encode(many, many_code), many_code, len(many)), many)
    assert 8 * huffman.encode(many, many_code).size < 3.2 * len(many)  # entropy of the rounded normal: ~3.05 bits


# --- the reference -----------------------------------------------------------------------------------


def test_reference_follows_the_fake_quant_policy_and_names_its_ranges(cartpole):
    policy = cartpole.integer()
    agree = np.mean(policy.act(cartpole.states) == cartpole.net.act(cartpole.states))
    assert agree >= 0.9  # int8 activations of a briefly trained policy: near, not equal
    assert [layer.activation for layer in policy.layers] == ["tanh", "tanh", "none"]
    text = policy.describe()
    assert "minmax per feature of" in text and "through atanh" in text
    # TFLite's int8 Tanh: output scale 1/128, zero point 0; its input zero point 0 (odd table)
    assert all(layer.out_quant == Quant(1 / 128, 0) for layer in policy.layers[:2])
    assert all(layer.output.zero_point == 0 for layer in policy.layers[:2])


def test_reference_takes_a_records_calibrated_ranges_without_states():
    """A PTQ record with act_bits=input_bits=8 carries every layer's input range: the integer policy
    needs no states (the last layer's output range is then bounded from its input and weights)."""
    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [16, 16]}, seed=2, buffer_size=100, device="cpu")
    quant = OmegaConf.create(dict(PTQ8, act_bits=8, input_bits=8))
    quantize_policy(
        model,
        quant,
        calibrate=lambda m: {
            n: (-2.5 if i == 0 else 0.0, 2.5)
            for i, n in enumerate(__import__("quarl.quantize.weights", fromlist=["x"]).inference_layers(m))
        },
    )
    policy = integer_policy(acting_network(model))
    assert "the record's calibrated input range" in policy.describe()
    assert "bounded from its input range and weights" in policy.describe()
    assert [layer.activation for layer in policy.layers] == ["relu", "relu", "none"]
    assert policy.layers[1].input.zero_point == -128  # a ReLU's output [0, hi]


# --- the C policy, host ---------------------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["packed", "huffman"])
@pytest.mark.parametrize("bits", [8, 4, 2])
def test_c_policy_gives_the_reference_actions_bit_for_bit_discrete(cartpole, tmp_path, bits, coding):
    policy = dataclasses.replace(cartpole.integer(weight_bits=bits), weight_coding=coding)
    c = CPolicy(policy, tmp_path)
    states = cartpole.states
    assert len(states) >= N_STATES
    assert np.array_equal(c.act(states), policy.act(states))
    assert c.act_one(states[7])[0] == policy.act(states[7:8])[0]
    src = (tmp_path / "policy.c").read_text()
    assert "malloc" not in src and "math.h" not in src and "static const" in src


@pytest.mark.parametrize("rounding", ["gemmlowp", "ruy", "single"])
def test_c_policy_follows_each_runtimes_rounding(pendulum, tmp_path, rounding):
    """One integer policy, requantized as TFLite Micro (gemmlowp), LiteRT's builtin kernels (ruy) or
    its reference kernels (single rounding) round: the C policy computes each bit for bit."""
    policy = pendulum.integer(rounding=rounding)
    assert policy.rounding == rounding and f"{rounding} rounding" in policy.describe()
    got, expected = CPolicy(policy, tmp_path).act(pendulum.states), policy.act(pendulum.states)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


@pytest.mark.parametrize("granularity", ["per_channel_pow2", "per_channel", "per_tensor"])
def test_c_policy_is_exact_for_continuous_actions_with_vecnormalize(pendulum, tmp_path, granularity):
    policy = pendulum.integer(granularity=granularity)
    assert policy.mean is not None  # VecNormalize folded in
    c = CPolicy(policy, tmp_path)
    got, expected = c.act(pendulum.states), policy.act(pendulum.states)
    assert got.dtype == np.float32 and got.shape == (len(pendulum.states), 1)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))  # the same float32 bits
    fp32 = pendulum.fp32.act(pendulum.states)
    assert np.mean(np.abs(got - fp32) <= 0.05 * 4.0) >= 0.9  # within 5% of the action range


@pytest.mark.parametrize(
    "make, env_id",
    [
        (
            lambda: DQN(
                "MlpPolicy", "CartPole-v1", policy_kwargs={"net_arch": [32, 32]}, seed=1, buffer_size=100, device="cpu"
            ),
            "CartPole-v1",
        ),
        (
            lambda: TD3(
                "MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [32, 32]}, seed=1, buffer_size=100, device="cpu"
            ),
            "Pendulum-v1",
        ),
        (
            lambda: SAC(
                "MlpPolicy",
                "MountainCarContinuous-v0",
                policy_kwargs={"net_arch": [32, 32]},
                seed=1,
                buffer_size=100,
                device="cpu",
            ),
            "MountainCarContinuous-v0",
        ),
    ],
    ids=["dqn-relu-argmax", "td3-tanh-squash", "sac-squashed-tanh-head"],
)
@pytest.mark.parametrize("activation_bits", [8, 16])
def test_c_policy_is_exact_for_relu_and_squashing_policies(make, env_id, activation_bits, tmp_path):
    model = make()
    quantize_policy(model, PTQ8)
    net = acting_network(model)
    states = random_observations(env_id, 3000, seed=1)
    policy = integer_policy(net, states[:500], activation_bits=activation_bits)
    if env_id != "CartPole-v1":
        assert policy.layers[-1].activation == "tanh" and policy.squash
    for coding in ("packed", "huffman"):
        coded = dataclasses.replace(policy, weight_coding=coding)
        got, expected = CPolicy(coded, tmp_path / coding).act(states), policy.act(states)
        assert np.array_equal(np.asarray(got).view(np.uint8), np.asarray(expected).view(np.uint8))


def test_huffman_stream_holds_what_the_c_policy_reads_in_its_order(cartpole, pendulum, tmp_path):
    """The stream: per layer its Tanh table's 128 steps, then per row the weights and, where the
    layer's shifts differ, the shift's difference from the layer's first; decoded, it gives back the
    reference's integers."""
    policy = cartpole.integer(weight_bits=4)
    values = cstream.values(policy)
    first = policy.layers[0]
    steps = cstream.table_steps(first)
    assert len(steps) == 128 and steps.min() >= 0  # Tanh rises
    half = half_table(first.tanh_table).astype(int)
    assert np.array_equal(np.cumsum(steps)[:127], half[1:128]) and steps.sum() == -half[128]
    assert np.array_equal(values[:128], steps)
    rows, cols = first.weight.shape
    row0 = values[128 : 128 + cols + 1]
    assert np.array_equal(row0[:cols], first.weight[0]) and row0[cols] == 0  # the first row's shift is the base
    assert cstream.shift_varies(first) and not cstream.shift_varies(policy.layers[1])
    shifts = sum(len(x.shift) for x in policy.layers if cstream.shift_varies(x))
    assert len(values) == sum(128 * (x.tanh_table is not None) + x.weight.size for x in policy.layers) + shifts
    code, stream = cstream.encoded(policy)
    assert np.array_equal(huffman.decode(stream, code, len(values)), values)
    coded = dataclasses.replace(policy, weight_coding="huffman")
    pair_code = cpairs.encoded(coded)  # the C policy's stream: the same values in pairs, and its look-up table
    assert pair_code is not None and pair_code.stream.size < 4480 // 2  # fewer than 4 bits per weight, all in
    assert data_bytes(coded) - (4 << pair_code.bits) < data_bytes(policy) < data_bytes(coded)  # the table counted
    src = source(coded)
    assert "HUFF = {" in src and "L1_W" not in src and "L1_TANH[256]" in src  # the pair stream leaves Tanh in flash
    continuous = dataclasses.replace(pendulum.integer(), weight_coding="huffman")  # VecNormalize, a float head
    got, expected = CPolicy(continuous, tmp_path).act(pendulum.states), continuous.act(pendulum.states)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


# --- the C policy on a Cortex-M ----------------------------------------------------------------------------


def _arm_missing() -> str | None:
    return available("arm-none-eabi-gcc", "arm-none-eabi-size")


def test_cartpole_64x64_fits_6_25kb_flash_and_1kb_ram_at_8_bits(cartpole):
    missing = _arm_missing()
    if missing:
        pytest.skip(missing)
    cortex_m4 = TARGETS["cortex-m4"]
    footprint = cortex_m4.footprint(cartpole.integer())
    # 4,480 weights, biases, two 256-entry Tanh tables (one load per output) and the layers' code
    assert footprint.flash <= 6.25 * 1024, footprint
    assert footprint.ram <= 1024, footprint
    smaller = cortex_m4.footprint(cartpole.integer(weight_bits=4))
    assert smaller.rodata < footprint.rodata - 2000  # the 4096 + 384 weights packed two to a byte
    coded = cortex_m4.footprint(dataclasses.replace(cartpole.integer(weight_bits=4), weight_coding="huffman"))
    # weights and shifts Huffman-coded in pairs (about 1.9 KB), the pairs' 256-entry table (1 KB), the two Tanh
    # tables (512 B, as the packed policy's) and the layers' code: more than the packed 4-bit policy, the price of
    # one look-up per pair
    assert coded.rodata < smaller.rodata + 1100 and coded.flash <= 5.25 * 1024 and coded.ram <= 512, coded


@pytest.mark.parametrize(
    "which, bits, coding", [("cartpole", 8, "packed"), ("pendulum", 8, "packed"), ("cartpole", 4, "huffman")]
)
def test_c_policy_on_an_emulated_cortex_m4_gives_the_reference_actions(which, bits, coding, request, tmp_path):
    missing = _arm_missing() or available("qemu-system-arm")
    if missing:
        pytest.skip(missing)
    trained = request.getfixturevalue(which)
    policy = dataclasses.replace(trained.integer(weight_bits=bits), weight_coding=coding)
    got = TARGETS["cortex-m4"].actions(policy, trained.states, tmp_path)
    expected = policy.act(trained.states)
    assert len(got) == len(trained.states) >= N_STATES
    assert np.array_equal(np.asarray(got).view(np.uint8), np.asarray(expected).view(np.uint8))


# --- what the integer policy refuses, in one sentence -------------------------------------------------------


class _ImageEnv(gym.Env):
    """A tiny image environment (SB3's NatureCNN takes 36x36 frames and up)."""

    observation_space = spaces.Box(0, 255, (36, 36, 1), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def test_unsupported_policies_are_named_with_what_is_supported():
    elu = PPO("MlpPolicy", "CartPole-v1", policy_kwargs={"activation_fn": nn.ELU}, device="cpu")
    with pytest.raises(
        QuarlError,
        match=r"The layer body\.1\.1 \(ELU\) has no integer form here: the integer policy "
        r"takes MLP policies: Linear layers with ReLU, Tanh",
    ):
        integer_policy(acting_network(elu), np.zeros((64, 4), np.float32))
    conv = PPO("MlpPolicy", "CartPole-v1", device="cpu")
    net = acting_network(conv)
    net.body[1][0] = nn.Conv1d(1, 4, 3)  # a convolution where the integer policy expects Linear layers
    with pytest.raises(QuarlError, match=r"Convolutional policies are not supported by the integer policy \(body\.1"):
        integer_policy(net, np.zeros((64, 4), np.float32))

    image = PPO("CnnPolicy", _ImageEnv(), n_steps=16, device="cpu")
    with pytest.raises(QuarlError, match=r"Convolutional policies are not supported .* \(body\.0\.cnn\.0 is a Conv2d"):
        integer_policy(acting_network(image), None)
    sb3_contrib = pytest.importorskip("sb3_contrib")
    lstm = sb3_contrib.RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16, device="cpu")
    with pytest.raises(QuarlError, match=r"Recurrent policies \(recurrentppo, LSTM\) are not supported"):
        integer_policy(acting_network(lstm), np.zeros((64, 4), np.float32))

    class RecurrentActorCriticPolicy:
        pass

    class FakeRecurrent:
        policy = RecurrentActorCriticPolicy()

    with pytest.raises(QuarlError, match=r"Recurrent policies \(RecurrentActorCriticPolicy, LSTM\) are not supported"):
        check_model(FakeRecurrent())


def test_calibration_without_states_or_with_a_zero_range_is_an_error(cartpole):
    with pytest.raises(QuarlError, match="Calibration saw no states"):
        integer_policy(cartpole.net, np.zeros((0, 4), np.float32))
    with pytest.raises(QuarlError, match="Every observation feature was constant in calibration"):
        integer_policy(cartpole.net, np.zeros((64, 4), np.float32))
    with pytest.raises(QuarlError, match="The observation's range is unknown: pass calibration observations"):
        integer_policy(cartpole.net, None)
    dead = PPO("MlpPolicy", "CartPole-v1", device="cpu")
    with torch.no_grad():
        dead.policy.mlp_extractor.policy_net[2].weight.zero_()
        dead.policy.mlp_extractor.policy_net[2].bias.zero_()
    with pytest.raises(QuarlError, match=r"Every weight of body\.1\.2 is zero"):
        integer_policy(acting_network(dead), random_observations("CartPole-v1", 64))


def test_a_missing_toolchain_names_the_debian_package(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(
        QuarlError,
        match="arm-none-eabi-gcc is not installed: .* Debian's gcc-arm-none-eabi and libnewlib-arm-none-eabi",
    ):
        tool("arm-none-eabi-gcc")
    with pytest.raises(QuarlError, match="qemu-system-arm is not installed: .* Debian's qemu-system-arm"):
        tool("qemu-system-arm")
    assert "gcc" in (available("cc") or "")


@pytest.mark.parametrize("coding", ["packed", "huffman"])
def test_generated_sources_are_c99_without_warnings_under_pedantic_flags(cartpole, tmp_path, coding):
    policy = dataclasses.replace(cartpole.integer(weight_bits=4), weight_coding=coding)
    (tmp_path / "policy.h").write_text(header(policy))
    (tmp_path / "policy.c").write_text(source(policy))
    import subprocess

    cc = tool("cc")
    done = subprocess.run(
        [
            cc,
            "-std=c99",
            "-pedantic",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wconversion",
            "-c",
            "policy.c",
            "-o",
            "policy.o",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "policy.o").exists()
