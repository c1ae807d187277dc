"""The full-integer LiteRT model: written from the integer reference, it acts exactly as the
reference under ai-edge-litert (its builtin and reference kernels, each in its own rounding) and
under TFLite Micro on >= 10,000 recorded states; its scales are the reference's; its export is
checked, refuses existing paths, and a missing package is one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from quarl.deploy.edge import fixedpoint
from quarl.errors import QuarlError
from tests.deploy.edge.test_cgen import N_STATES, PTQ8, Trained

litert = pytest.importorskip(
    "ai_edge_litert.interpreter", reason="ai-edge-litert is not installed: pip install 'quarl[edge]'"
)
pytest.importorskip("tflite_micro", reason="tflite-micro is not installed: pip install 'quarl[edge]'")

from quarl.deploy.edge.tflite import (  # noqa: E402
    RUNTIME_ROUNDING,
    LiteRTPolicy,
    MicroPolicy,
    check,
    read_metadata,
    tflite_model,
)


@pytest.mark.parametrize("which", ["cartpole", "pendulum"])
def test_litert_and_tflite_micro_give_the_reference_actions_exactly(which, request):
    trained: Trained = request.getfixturevalue(which)
    policy = trained.integer()
    model = tflite_model(policy, {"env_id": trained.env_id})
    states = trained.states
    assert len(states) >= N_STATES
    assert check(model, policy, states) == {"litert": 0, "litert-reference": 0, "tflite-micro": 0}
    micro = MicroPolicy(model, policy)
    assert micro.arena_bytes is not None and 0 < micro.arena_bytes < 16384
    meta = read_metadata(model)
    assert meta["env_id"] == trained.env_id and meta["action_kind"] == policy.action_kind


def test_the_runtimes_round_differently_and_each_is_one_rounding_of_the_reference(pendulum):
    """LiteRT's builtin kernels (ruy), its reference kernels (single rounding) and TFLite Micro
    (gemmlowp) differ on a few states of a continuous policy; each equals the reference in its own."""
    policy = pendulum.integer()
    states = pendulum.states[:3000]
    model = tflite_model(policy)
    got = LiteRTPolicy(model, policy).act(states)
    assert np.array_equal(got, policy.with_rounding(RUNTIME_ROUNDING["litert"]).act(states))
    micro = MicroPolicy(model, policy).act(states)
    assert np.array_equal(micro, policy.act(states))  # gemmlowp, the reference's default
    assert set(fixedpoint.ROUNDINGS) == {"gemmlowp", "ruy", "single"}


def test_the_files_scales_weights_and_biases_are_the_references(cartpole):
    policy = cartpole.integer()
    model = tflite_model(policy)
    interpreter = litert.Interpreter(model_content=model)
    tensors = {t["name"]: t for t in interpreter.get_tensor_details()}
    for layer in policy.layers:
        w = tensors[f"{layer.name}/weights"]
        assert np.array_equal(w["quantization_parameters"]["scales"], layer.weight_scale)
        assert np.array_equal(interpreter.get_tensor(w["index"]), layer.weight)
        b = tensors[f"{layer.name}/bias"]
        assert np.array_equal(interpreter.get_tensor(b["index"]), layer.bias)
        out = tensors[f"{layer.name}/out"]["quantization_parameters"]
        assert out["scales"][0] == np.float32(layer.output.scale) and out["zero_points"][0] == layer.output.zero_point
    assert tensors["input/int8"]["quantization_parameters"]["scales"][0] == 1.0


def test_litert_models_hold_8_bit_weights_only(cartpole):
    with pytest.raises(QuarlError, match="LiteRT models hold 8-bit weights here, not 4-bit"):
        tflite_model(cartpole.integer(weight_bits=4))


def test_export_writes_a_checked_tflite_file_and_refuses_an_existing_path(tmp_path):
    from stable_baselines3 import PPO

    from quarl.deploy.edge.export import export_edge
    from quarl.quantize.weights import quantize_policy
    from quarl.rl.envs import random_observations

    model = PPO("MlpPolicy", "CartPole-v1", seed=3, device="cpu")
    quantize_policy(model, PTQ8)
    states = random_observations("CartPole-v1", 2000, seed=2)
    report = export_edge(model, tmp_path / "policy.tflite", "tflite", calibration_obs=states[:500], check_obs=states)
    assert (tmp_path / "policy.tflite").stat().st_size == report.sizes["file"]
    assert report.checked == {"litert": 0, "litert-reference": 0, "tflite-micro": 0}
    assert report.states == 2000 and report.probes == 9 * 5  # 9 extreme values in each of 4 features, then in all
    assert "identical to the integer reference on 2000 states" in report.text()
    with pytest.raises(QuarlError, match="already exists"):
        export_edge(model, tmp_path / "policy.tflite", "tflite", calibration_obs=states[:500])
    with pytest.raises(QuarlError, match="must end in .tflite"):
        export_edge(model, tmp_path / "policy.bin", "tflite", calibration_obs=states[:500])
    with pytest.raises(QuarlError, match="precision=int4 is not supported for format=tflite"):
        export_edge(model, tmp_path / "p4.tflite", "tflite", calibration_obs=states[:500], precision="int4")
    c = export_edge(model, tmp_path / "c_policy", "c", calibration_obs=states[:500], check_obs=states)
    assert sorted(p.name for p in (tmp_path / "c_policy").iterdir()) == ["measures.json", "policy.c", "policy.h"]
    assert c.checked["C policy (host cc)"] == 0 and set(c.checked.values()) == {0}  # and each target's firmware
    measures = json.loads((tmp_path / "c_policy/measures.json").read_text())  # what the export printed, for scripts
    assert measures["checked"] == c.checked and measures["states"] == 2000 and measures["firmware"] == c.firmware
    for name, firmware in c.firmware.items():
        assert f"{firmware['instructions']:,.0f} instructions per action" in c.text(), name
    with pytest.raises(QuarlError, match="already exists"):
        export_edge(model, tmp_path / "c_policy", "c", calibration_obs=states[:500])


def test_a_missing_runtime_names_the_extra(monkeypatch, cartpole):
    import importlib

    real = importlib.import_module

    def missing(name, *args):
        if name.startswith("ai_edge_litert"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", missing)
    with pytest.raises(QuarlError, match=r"needs ai_edge_litert, which is not installed: pip install 'quarl\[edge\]'"):
        tflite_model(cartpole.integer())


@pytest.mark.parametrize("activation_bits", [8, 16])
def test_extreme_observations_saturate_alike_in_every_runtime(cartpole, activation_bits):
    """±inf, NaN and huge values in any feature: LiteRT and TFLite Micro saturate them to the input's
    codes as the reference does (a QUANTIZE of a value beyond int32 alone gives the lowest code on x86)."""
    from quarl.deploy.edge.export import EXTREMES, extreme_probes

    policy = cartpole.integer(activation_bits=activation_bits)
    probes = extreme_probes(cartpole.states[0])
    assert len(probes) == len(EXTREMES) * (policy.obs_dim + 1) and np.isnan(probes).any() and np.isinf(probes).any()
    assert check(tflite_model(policy), policy, probes) == {"litert": 0, "litert-reference": 0, "tflite-micro": 0}
    inf, nan = probes[[0]].copy(), probes[[0]].copy()
    inf[0, :], nan[0, :] = np.inf, np.nan
    assert (policy.quantize_input(inf) == policy.input.qmax).all()  # saturated, not wrapped
    assert (policy.quantize_input(nan) == policy.input.qmin).all()
