"""TFLite's 16x8 scheme (int16 activations, int8 weights, int64 biases): its fixed-point arithmetic
on hand-worked numbers and, exhaustively, against LiteRT's and TFLite Micro's int16 TANH; the C policy
and TFLite Micro bit for bit against the reference; the agreement with fp32 it buys over int8."""

from __future__ import annotations

import math

import numpy as np
import pytest
from stable_baselines3 import DQN, SAC

from quarl.deploy import acting_network, compile_policy
from quarl.deploy.edge import fixedpoint, integer_policy
from quarl.deploy.edge.export import export_edge
from quarl.deploy.edge.toolchain import CPolicy
from quarl.errors import QuarlError
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.deploy.edge.test_cgen import PTQ8, Trained


def _installed(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


EDGE_EXTRA = pytest.mark.skipif(
    not (_installed("ai_edge_litert.interpreter") and _installed("tflite_micro")),
    reason="ai-edge-litert and tflite-micro are not installed: pip install 'quarl[edge]'",
)


def test_int64_requantization_and_int16_tanh_on_hand_worked_numbers():
    # TFLite Micro's: M = 2^30 + 2^14 (0.5000076) cut to 16 bits is 2^14 (0.5): 1001 x 0.5 = 500.5, a tie,
    # goes up to 501; -3 x 0.5 = -1.5 goes up to -1
    m, shift = np.int64(2**30 + 2**14), np.int64(0)
    got = fixedpoint.multiply_by_quantized_multiplier_int64(np.array([1000, 1001, -3]), m, shift)
    assert got.tolist() == [500, 501, -1]
    # LiteRT's, in float64: -3 x 0.5000076 = -1.5000229 -> -2; a tie rounds away from zero
    assert fixedpoint.requantize_in_double(np.array([-3, 3, 1001]), np.array(0.5000076)).tolist() == [-2, 2, 501]
    assert fixedpoint.requantize_in_double(np.array([3, -3]), np.array(0.5)).tolist() == [2, -2]
    mult, left = fixedpoint.tanh_int16_params(1e-4)
    assert 2**14 <= mult < 2**15 and left > 0
    q = np.array([0, 10_000, -10_000, 32767, -32768])
    out = fixedpoint.tanh_int16(q, mult, left)
    assert out[0] == 0 and out[1] == -out[2] == 24956  # tanh(1.0) = 0.76159 = 24956.2 / 32768
    assert abs(out[3] / 32768 - math.tanh(3.2767)) < 2e-4 and abs(out[4] / 32768 + math.tanh(3.2768)) < 2e-4


@EDGE_EXTRA
@pytest.mark.parametrize("scale", [1.69e-4, 3.3e-5, 1.2345e-3])
def test_int16_tanh_is_litert_and_tflite_micro_on_every_input(scale):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from tflite_micro.python.tflite_micro import runtime

    from quarl.deploy.edge.tflite import _Graph, _schema

    s = _schema()
    g = _Graph(s)
    x = g.tensor("obs", [65536], s.TensorType.INT16, (scale, 0))
    y = g.tensor("action", [65536], s.TensorType.INT16, (1 / 32768, 0))
    g.op(s.BuiltinOperator.TANH, [x], [y], 3)
    model = g.finish([x], [y], "tanh", {})
    q = np.arange(-32768, 32768).astype(np.int16)
    expected = fixedpoint.tanh_int16(q, *fixedpoint.tanh_int16_params(scale))
    for kind in (OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, OpResolverType.BUILTIN_REF):
        it = Interpreter(model_content=model, experimental_op_resolver_type=kind)
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], q)
        it.invoke()
        assert np.array_equal(it.get_tensor(it.get_output_details()[0]["index"]), expected)
    micro = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    micro.set_input(q, 0)
    micro.invoke()
    assert np.array_equal(micro.get_output(0), expected)


@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
@pytest.mark.parametrize("rounding", ["gemmlowp", "ruy", "single"])
def test_c_policy_is_the_16x8_reference_bit_for_bit(which, rounding, request, tmp_path):
    trained: Trained = request.getfixturevalue(which)
    policy = trained.integer(activation_bits=16, rounding=rounding)
    assert policy.activation_bits == 16 and all(layer.bias.dtype == np.int64 for layer in policy.layers)
    assert "int16 (16x8) activations" in policy.describe()
    got, expected = CPolicy(policy, tmp_path).act(trained.states), policy.act(trained.states)
    assert np.array_equal(got.view(np.uint32), expected.astype(got.dtype).view(np.uint32))
    src = (tmp_path / "policy.c").read_text()
    assert "int16_t act_t" in src and "math.h" not in src and "malloc" not in src


@EDGE_EXTRA
@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
def test_16x8_tflite_is_the_reference_under_litert_and_tflite_micro(which, request):
    from quarl.deploy.edge.tflite import MicroPolicy, check, tflite_model

    trained: Trained = request.getfixturevalue(which)
    policy = trained.integer(activation_bits=16)
    model = tflite_model(policy)
    # TFLite Micro cuts the multiplier to 16 bits, LiteRT requantizes in float64: each is exact in its own
    assert check(model, policy, trained.states) == {"litert": 0, "litert-reference": 0, "tflite-micro": 0}
    assert 0 < MicroPolicy(model, policy).arena_bytes < 16384  # type: ignore[operator]


@EDGE_EXTRA
@pytest.mark.parametrize(
    "algo, env_id",
    [(DQN, "CartPole-v1"), (SAC, "MountainCarContinuous-v0")],
    ids=["dqn-relu-argmax", "sac-squashed-tanh-head"],
)
def test_16x8_tflite_is_exact_for_relu_and_squashing_policies(algo, env_id):
    """int16 ReLU fused into the FC (clamp at 0), and a squashing head (int16 TANH, then float32)."""
    from quarl.deploy.edge.tflite import check, tflite_model

    model = algo("MlpPolicy", env_id, policy_kwargs={"net_arch": [32, 32]}, seed=1, buffer_size=100, device="cpu")
    quantize_policy(model, PTQ8)
    states = random_observations(env_id, 3000, seed=1)
    policy = integer_policy(acting_network(model), states[:500], activation_bits=16)
    assert check(tflite_model(policy), policy, states) == {"litert": 0, "litert-reference": 0, "tflite-micro": 0}


def test_16x8_keeps_more_of_the_fp32_actions_than_int8(cartpole, pendulum):
    states = cartpole.states
    fp32 = cartpole.fp32.act(states)
    int8 = np.mean(cartpole.integer().act(states) == fp32)
    int16 = np.mean(cartpole.integer(activation_bits=16).act(states) == fp32)
    assert int16 >= 0.99 and int16 >= int8
    continuous = pendulum.fp32.act(pendulum.states)
    error8 = np.abs(pendulum.integer().act(pendulum.states) - continuous).mean()
    error16 = np.abs(pendulum.integer(activation_bits=16).act(pendulum.states) - continuous).mean()
    assert error16 < error8  # the 8-bit weights' error stays: the activations' part is what goes


def test_16x8_is_a_backend_and_an_export_and_refuses_packed_weights(cartpole, tmp_path):
    runner = compile_policy(cartpole.model_copy(), "c_16x8", cartpole.calibration)
    assert runner.backend == "c_16x8" and runner.precision == "16x8"
    assert np.array_equal(runner(cartpole.states[:2000]), runner.integer.act(cartpole.states[:2000]))
    report = export_edge(
        cartpole.model_copy(), tmp_path / "policy", "c", calibration_obs=cartpole.calibration, activations="int16"
    )
    assert "#define POLICY_ACTIVATION_BITS 16" in (tmp_path / "policy" / "policy.h").read_text()
    assert report.checked["C policy (host cc)"] == 0 and set(report.checked.values()) == {0}  # and any firmware
    with pytest.raises(QuarlError, match="activations=int16 takes int8 weights"):
        export_edge(
            cartpole.model_copy(),
            tmp_path / "p4",
            "c",
            calibration_obs=cartpole.calibration,
            precision="int4",
            activations="int16",
        )
    with pytest.raises(QuarlError, match="activations=int12 is not supported: choose one of int8, int16"):
        export_edge(
            cartpole.model_copy(), tmp_path / "p12", "c", calibration_obs=cartpole.calibration, activations="int12"
        )
    assert not (tmp_path / "p4").exists() and not (tmp_path / "p12").exists()
