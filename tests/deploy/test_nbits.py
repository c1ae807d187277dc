"""Real 4-bit / 2-bit execution (ONNX Runtime MatMulNBits): packing as ONNX Runtime's own quantizer
packs, a PTQ policy's own low-bit weights executed exactly, bytes about an eighth of fp32, layers it
cannot run kept in fp32, auto's choice, export, a run's record, and bad input refused."""

import logging
import subprocess
import sys

import numpy as np
import pytest
import torch.nn as nn
from omegaconf import OmegaConf
from stable_baselines3 import DQN, PPO

from quarl.deploy import compile_network, compile_policy, execution, export, nbits, onnx_io
from quarl.deploy.acting import acting_network
from quarl.errors import QuarlError
from quarl.quantize.weights import fake_quantize, quantize_policy
from quarl.rl.envs import random_observations
from quarl.store import query as results
from tests.conftest import FAST, run_quarl
from tests.deploy.test_backends import STANDALONE, Frames

WIDE = dict(net_arch=dict(pi=[256, 256], vf=[64]))


def ptq(bits: int, scheme: str = "affine", granularity: str = "per_tensor"):
    return OmegaConf.create(dict(method="ptq", bits=bits, scheme=scheme, granularity=granularity, quantize_bias=False))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Briefly trained policies with wide actors (saved: each test loads its own copy to quantize)."""
    folder = tmp_path_factory.mktemp("int4")
    common = dict(n_steps=256, batch_size=64, n_epochs=4, seed=0, device="cpu")
    PPO("MlpPolicy", "CartPole-v1", policy_kwargs=WIDE, **common).learn(1536).save(folder / "cartpole")
    PPO("MlpPolicy", "Pendulum-v1", policy_kwargs=WIDE, **common).learn(1024).save(folder / "pendulum")
    return folder


def load(saved, name: str, quant=None) -> PPO:
    model = PPO.load(saved / f"{name}.zip", device="cpu")
    if quant is not None:
        quantize_policy(model, quant)
    return model


# --- packing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [4, 2])
@pytest.mark.parametrize("k", [300, 256, 40])
def test_rounded_weights_are_packed_as_onnxruntimes_quantizer_packs_them(bits, k):
    from onnxruntime.quantization.matmul_nbits_quantizer import quantize_matmul_2bits, quantize_matmul_4bits

    n = 24
    w = np.random.default_rng(k).normal(size=(n, k)).astype(np.float32)
    ours = nbits.pack(w, bits)
    assert not ours.exact and ours.block_size == min(nbits.RTN_BLOCK, 2 ** int(np.log2(k)))
    block, blocks = ours.block_size, -(-k // ours.block_size)
    padded = np.zeros((blocks * block, n), np.float32)
    padded[:k] = w.T
    codes = np.zeros((n, blocks, block * bits // 8), np.uint8)
    zeros = np.zeros((n, -(-blocks * bits // 8)), np.uint8)
    scales = np.zeros((n, blocks), np.float32)
    (quantize_matmul_4bits if bits == 4 else quantize_matmul_2bits)(codes, padded, scales, zeros, block, n,
                                                                    blocks * block, False)
    assert np.array_equal(ours.codes, codes) and np.array_equal(ours.zero_points, zeros.reshape(-1))
    assert np.array_equal(ours.scales, scales.reshape(-1))
    step = scales.max()  # rounding moves a weight by at most half a step of its block
    assert np.abs(nbits.dequantize(ours, bits, k) - w).max() <= step / 2 * 1.001


@pytest.mark.parametrize("bits, scheme, granularity", [(4, "affine", "per_tensor"), (4, "symmetric", "per_channel"),
                                                       (3, "affine", "per_channel"), (2, "affine", "per_tensor")])
def test_weights_on_a_low_bit_grid_are_stored_exactly(bits, scheme, granularity):
    w = fake_quantize(nn.Linear(300, 32).weight.detach(), bits, scheme, granularity).numpy()
    packed = nbits.pack(w, 4)
    assert packed.exact and packed.block_size == 256
    assert np.allclose(nbits.dequantize(packed, 4, 300), w, rtol=1e-6, atol=1e-7)
    assert nbits.pack(w, 2).exact == (bits == 2)


# --- a trained policy executed with its own 4-bit weights ---------------------------------------------


@pytest.mark.parametrize("bits, backend", [(4, "onnx_int4"), (2, "onnx_int2"), (2, "onnx_int4")])
def test_low_bit_ptq_policy_runs_its_own_weights_and_acts_as_the_fake_quant_policy(saved, bits, backend):
    model = load(saved, "cartpole", ptq(bits))
    obs = random_observations("CartPole-v1", 512, 3)
    fake_quant, _ = model.predict(obs, deterministic=True)
    runner = compile_policy(model, backend, obs)
    assert runner.backend == backend and runner.precision == execution.BACKENDS[backend]
    assert runner.exact and runner.report.exact == ["body.1.2.weight", "body.2.weight"]
    assert list(runner.report.fp32) == ["body.1.0.weight"]  # CartPole's 4 inputs: fewer than a block of 16
    actions = runner(obs)
    assert actions.dtype == np.int64 and actions.shape == fake_quant.shape
    # the weights are the policy's; only MatMulNBits's int8 activations differ (measured: 512/512)
    assert (actions == fake_quant).mean() >= 0.97
    assert len(np.unique(fake_quant)) > 1


@pytest.mark.parametrize("block, level", [(64, 4), (None, 1)])
def test_block_size_and_accuracy_level_are_set_and_keep_the_policys_own_weights(saved, block, level):
    import onnx
    from onnx import helper

    model = load(saved, "cartpole", ptq(4))
    obs = random_observations("CartPole-v1", 512, 3)
    fake_quant, _ = model.predict(obs, deterministic=True)
    net = acting_network(model)
    converted, report = nbits.quantize_nbits(onnx_io.to_onnx(net, net.batch(obs[:1])), 4, block_size=block,
                                             accuracy_level=level)
    nodes = [n for n in onnx.load_model_from_string(converted).graph.node if n.op_type == "MatMulNBits"]
    attributes = [{a.name: helper.get_attribute_value(a) for a in n.attribute} for n in nodes]
    assert [a["block_size"] for a in attributes] == [block or 256] * 2  # the 256-unit layer and the action layer
    assert [a["accuracy_level"] for a in attributes] == [level] * 2
    runner = execution.NbitsRunner(net, "onnx_int4", converted, 1, report)
    assert runner.exact and (runner(obs) == fake_quant).mean() >= 0.97


@pytest.mark.parametrize("option, value", [("block_size", 512), ("accuracy_level", 5)])
def test_a_block_size_or_accuracy_level_matmulnbits_lacks_is_refused(option, value):
    with pytest.raises(ValueError, match=f"{option}={value}: MatMulNBits accepts"):
        nbits.quantize_nbits(b"", 4, **{option: value})


def test_continuous_4bit_policy_acts_as_the_fake_quant_policy(saved):
    model = load(saved, "pendulum", ptq(4, "symmetric", "per_channel"))
    obs = random_observations("Pendulum-v1", 512, 3)
    fake_quant, _ = model.predict(obs, deterministic=True)
    runner = compile_policy(model, "onnx_int4", obs)
    assert runner.exact
    error = np.abs(runner(obs) - fake_quant) / 4.0  # Pendulum's action range is 4
    assert error.max() <= 0.02 and error.mean() <= 0.005
    assert execution.action_agreement(runner.net, runner, obs) >= 0.99
    assert fake_quant.std() > 1e-3


def test_fp32_weights_are_rounded_block_wise_and_said_so(saved, caplog):
    model = load(saved, "cartpole")
    obs = random_observations("CartPole-v1", 512, 3)
    with caplog.at_level(logging.WARNING, logger="quarl.deploy.execution"):
        runner = compile_policy(model, "onnx_int4", obs)
    assert not runner.exact and runner.report.rtn == ["body.1.2.weight", "body.2.weight"]
    assert "rounds body.1.2.weight, body.2.weight to 4 bits block-wise" in caplog.text
    expected, _ = model.predict(obs, deterministic=True)
    assert (runner(obs) == expected).mean() >= 0.9  # a different, rounded policy: close, not the same


def test_bytes_are_about_an_eighth_of_fp32_for_the_big_layers():
    model = PPO("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=dict(pi=[1024, 1024, 1024], vf=[8])), seed=0,
                device="cpu")
    quantize_policy(model, ptq(4))
    net = acting_network(model)
    fp32 = compile_network(net, "torch").nbytes
    int4, int2 = compile_network(net, "onnx_int4"), compile_network(net, "onnx_int2")
    # 4 bits + a float32 scale and a 4-bit zero point per block of 256 weights: 7.7x for the big layers;
    # the first layer (4 inputs) and the biases stay float32
    assert 7.0 <= fp32 / int4.nbytes <= 8.0
    assert 12.0 <= fp32 / int2.nbytes <= 16.0  # rounded 4-bit weights: 2-bit blocks of 128, 14x


def test_convolutions_stay_fp32_and_the_linear_layer_runs_in_4_bits():
    model = PPO("CnnPolicy", Frames(), n_steps=8, batch_size=8, seed=0, device="cpu")
    quantize_policy(model, ptq(4))
    frames = np.random.default_rng(0).integers(0, 256, (64, 4, 84, 84), dtype=np.uint8)
    runner = compile_policy(model, "onnx_int4", frames)
    assert len(runner.report.fp32) == 3 and all("convolution" in why for why in runner.report.fp32.values())
    assert runner.exact and len(runner.report.exact) == 2  # the 3136 -> 512 layer and the action layer
    assert (runner(frames) == model.predict(frames, deterministic=True)[0]).mean() >= 0.9


# --- auto ------------------------------------------------------------------------------------------


def fixed(times: dict):
    return lambda runners, obs: {name: times[name] for name in runners}


TIMES = {"torch": 2.0, "onnx": 1.0, "onnx_int8": 0.6, "onnx_int4": 0.3, "onnx_int2": 0.2}


def test_auto_runs_4_bits_where_they_are_the_policys_own_weights_and_faster(saved, monkeypatch):
    monkeypatch.setattr(execution, "quick_median_ms", fixed(TIMES))
    obs = random_observations("CartPole-v1", 128, 3)
    runner = compile_policy(load(saved, "cartpole", ptq(4)), "auto", obs)
    assert runner.backend == "onnx_int4" and "running int4 on onnx_int4" in runner.reason
    assert "onnx_int2 is not run: its 2-bit weights would be rounded" in runner.reason
    monkeypatch.setattr(execution, "quick_median_ms", fixed({**TIMES, "onnx_int4": 0.95}))
    assert compile_policy(load(saved, "cartpole", ptq(4)), "auto", obs).backend == "onnx_int8"  # int8 faster


def test_auto_rounds_weights_only_within_min_agreement(saved, monkeypatch):
    monkeypatch.setattr(execution, "quick_median_ms", fixed(TIMES))
    obs = random_observations("CartPole-v1", 256, 3)
    runner = compile_policy(load(saved, "cartpole"), "auto", obs)  # fp32 weights: rounding them is not asked for
    assert runner.backend == "onnx_int8" and "onnx_int4 is not run" in runner.reason
    runner = compile_policy(load(saved, "cartpole"), "auto", obs, min_agreement=0.5)
    assert runner.backend == "onnx_int2"
    measured = {"onnx_int8": 0.999, "onnx_int4": 0.99, "onnx_int2": 0.9}
    monkeypatch.setattr(execution, "action_agreement", lambda net, runner, obs: measured[runner.backend])
    runner = compile_policy(load(saved, "cartpole"), "auto", obs, min_agreement=0.95)
    assert runner.backend == "onnx_int4"  # the fastest within the bound
    assert "onnx_int2 is not run: its action agreement 0.900 is below min_agreement=0.95" in runner.reason


# --- export and a run ------------------------------------------------------------------------------


def test_int4_export_acts_in_a_fresh_process_without_quarl(saved, tmp_path):
    model = load(saved, "cartpole", ptq(4))
    obs = random_observations("CartPole-v1", 256, 5)
    path = export(model, tmp_path / "policy.onnx", precision="int4")
    np.save(tmp_path / "obs.npy", obs)
    done = subprocess.run([sys.executable, "-c", STANDALONE, str(path), str(tmp_path / "obs.npy"),
                           str(tmp_path / "act.npy")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert np.array_equal(np.load(tmp_path / "act.npy"), compile_policy(model, "onnx_int4", obs)(obs))
    import onnx

    proto = onnx.load(str(path))
    assert {p.key: p.value for p in proto.metadata_props}["quarl.precision"] == "int4"
    assert sum(n.op_type == "MatMulNBits" for n in proto.graph.node) == 2


def test_a_4bit_run_records_reward_latency_and_bytes(scratch, shared_policies):
    run_quarl(scratch, *FAST, "quant.bits=4", "quant.backend=onnx_int4", policies=shared_policies)
    cell = results.load(scratch / "outputs/results.sqlite", quant="ptq").iloc[0]
    assert cell["backend"] == "onnx_int4" and cell["backend_precision"] == "int4"
    assert cell["backend_reward"] == pytest.approx(cell["reward_mean"], rel=0.2)  # same episodes, its own weights
    assert 0 < cell["latency_ms"] < 100 and 0 < cell["fp32_latency_ms"] < 100
    assert 0 < cell["backend_bytes"] < cell["fp32_bytes"] / 3


# --- bad input -------------------------------------------------------------------------------------


def test_a_policy_without_a_layer_4_bits_can_run_is_refused_in_one_sentence():
    model = DQN("MlpPolicy", "CartPole-v1", policy_kwargs=dict(net_arch=[8, 8]), seed=0, device="cpu")
    with pytest.raises(QuarlError, match=r"backend=onnx_int4 has no layer it can run in 4 bits "
                                         r".*use backend=onnx_int8, onnx or torch\.$") as err:
        compile_policy(model, "onnx_int4")
    assert str(err.value).count(". ") == 0  # one sentence
    net = acting_network(model)
    net.body[1].insert(1, nn.LayerNorm(8))
    with pytest.raises(QuarlError, match="has no layer it can run in 4 bits"):
        compile_network(net, "onnx_int4")


@pytest.mark.parametrize("backend, bound, n, message", [
    ("auto", 0.0, 128, r"min_agreement=0.0 is out of range: use a fraction in \(0, 1\]"),
    ("auto", 1.5, 128, r"min_agreement=1.5 is out of range"),
    ("onnx_int4", 0.9, 128, "min_agreement=0.9 bounds backend=auto's choice: use backend=auto, or leave it unset."),
    ("auto", 0.9, 10, "min_agreement needs example_obs, a batch of at least 64 real observations"),
])
def test_bad_min_agreement_is_refused(saved, backend, bound, n, message):
    obs = random_observations("CartPole-v1", n, 3)
    with pytest.raises(QuarlError, match=message):
        compile_policy(load(saved, "cartpole"), backend, obs, min_agreement=bound)
