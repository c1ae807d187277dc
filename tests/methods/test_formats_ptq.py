"""PTQ in a number format (quant.format, issue 57): every inference layer's weights through the
format's fake_quantize, the record's bits_per_weight and policy_bytes from the format's storage cost,
the default (int) leaving every key as it was, and the refusals in one sentence before anything runs."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from stable_baselines3 import DQN

from quarl.config.cells import resolve
from quarl.config.keys import cell_key, policy_key
from quarl.methods._formats import FORMAT_BITS
from quarl.quantize import formats
from quarl.quantize.weights import inference_layers, quantize_policy
from quarl.rl.algos import sb3_class
from quarl.store import query as results
from tests.conftest import FAST, compose_cfg, run_quarl
from tests.test_run import log_of


def test_the_formats_bits_are_the_registrys():
    """PTQ's torch-free table (a refused run ends before torch loads) is the registry's."""
    assert FORMAT_BITS == {name: fmt.element.bits for name, fmt in formats.FORMATS.items()}


def test_the_default_format_leaves_every_key_as_it_was():
    plain, said = compose_cfg("quant=ptq"), compose_cfg("quant=ptq", "quant.format=int")
    assert plain.quant.format == "int"
    assert cell_key(plain) == cell_key(said) and policy_key(plain) == policy_key(said)
    assert resolve(plain, warn=False)[0] == cell_key(plain)  # no key holds format=int


def test_a_format_implies_its_bits_and_a_block_format_ignores_granularity():
    key, cfg = resolve(compose_cfg("quant=ptq", "quant.format=mxfp4"), warn=False)
    assert (
        cfg.quant.bits == 4
        and key == resolve(compose_cfg("quant=ptq", "quant.format=mxfp4", "quant.bits=4"), warn=False)[0]
    )
    assert (
        key == resolve(compose_cfg("quant=ptq", "quant.format=mxfp4", "quant.granularity=per_channel"), warn=False)[0]
    )
    assert key != resolve(compose_cfg("quant=ptq", "quant.format=nvfp4"), warn=False)[0]
    fp8 = [
        resolve(compose_cfg("quant=ptq", "quant.format=fp8_e4m3", f"quant.granularity={g}"), warn=False)[0]
        for g in ("per_tensor", "per_channel")
    ]
    assert fp8[0] != fp8[1]  # FP8 scales per tensor or per channel: two cells


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        (["quant.format=mxfp4", "quant.bits=6"], "quant.bits=6 disagrees with quant.format=mxfp4, which implies 4-bit"),
        (["quant.format=nf4", "quant.bits=8"], "quant.bits=8 disagrees with quant.format=nf4, which implies 4-bit"),
        (["quant.format=fp4"], "quant.format=fp4 is not allowed: choose one of int, fp8_e4m3,"),
        (["quant.format=mxfp4", "quant.act_bits=8"], "quant.format=mxfp4 takes no integer activations or inputs"),
        (["quant.act_format=mxfp4", "quant.act_bits=8"], "quant.act_format=mxfp4 and quant.act_bits=8 both quantize"),
        (["quant.input_format=fp16"], "quant.input_format=fp16 is not allowed: choose one of fp8_e4m3,"),
        (["quant.act_format=nf4", "quant.backend=auto"], "cannot run quant.act_format=nf4: no executing backend"),
        (["quant.format=fp8_e4m3", "quant.backend=auto"],
         "cannot run quant.format=fp8_e4m3: use quant.backend=fake or quant.backend=torch_fp8."),
        (["quant.format=int", "quant.backend=torch_fp8"],
         "quant.backend=torch_fp8 executes quant.format=fp8_e4m3 cells only"),
    ],
)
def test_a_format_cell_ptq_cannot_run_is_refused_in_one_sentence(scratch, overrides, said):
    done = run_quarl(scratch, *FAST, "quant=ptq", *overrides, check=False)
    assert done.returncode == 1, log_of(done)
    assert said in log_of(done) and "Traceback" not in log_of(done)
    assert not (scratch / "outputs/results.sqlite").exists()  # refused before anything ran: no record


def _untrained_cartpole() -> DQN:
    import gymnasium as gym

    return DQN("MlpPolicy", gym.make("CartPole-v1"), policy_kwargs={"net_arch": [64, 64]}, seed=0)


@pytest.mark.parametrize("granularity", ["per_tensor", "per_channel"])
def test_fp8_weights_are_ml_dtypes_casts_of_the_scaled_fp32_weights(granularity):
    model = _untrained_cartpole()
    fp32 = {name: layer.weight.detach().clone() for name, layer in inference_layers(model).items()}
    quant = compose_cfg("quant=ptq", "quant.format=fp8_e4m3", f"quant.granularity={granularity}").quant
    quantize_policy(model, quant)
    for name, layer in inference_layers(model).items():
        w = fp32[name].double().numpy()
        amax = np.abs(w).max(axis=1, keepdims=True) if granularity == "per_channel" else np.abs(w).max()
        scale = np.float32(amax / 448.0).astype(np.float64)  # an fp32 scale
        cast = (w / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * scale
        assert np.array_equal(layer.weight.detach().numpy(), cast.astype(np.float32)), name
        assert not torch.equal(layer.weight, fp32[name])  # quantized, in place


def format_cells(scratch: Path, policies: Path, method: str, budget: tuple[str, ...], *fmts: str) -> dict[str, object]:
    """One `quant=<method> quant.format=<f>` cell per format, run in `scratch`: each format's record."""
    for fmt in fmts:
        run_quarl(scratch, *budget, f"quant={method}", f"quant.format={fmt}", policies=policies)
    rows = results.load(scratch / "outputs/results.sqlite", quant=method)
    return {row["quant.format"]: row for _, row in rows.iterrows()}


def _cells(scratch: Path, shared_policies: Path, *fmts: str) -> dict[str, object]:
    return format_cells(scratch, shared_policies, "ptq", tuple(FAST), *fmts)


def test_a_format_cell_records_its_bits_per_weight_and_bytes(scratch, shared_policies):
    cells = _cells(scratch, shared_policies, "mxfp4", "fp8_e4m3")
    mxfp4, fp8 = cells["mxfp4"], cells["fp8_e4m3"]
    assert mxfp4["status"] == fp8["status"] == "done" and mxfp4["quant.bits"] == 4 and fp8["quant.bits"] == 8
    policy = sb3_class(mxfp4["algo"]).load(Path(mxfp4["policy_dir"]) / "model.zip", device="cpu")
    shapes = [tuple(layer.weight.shape) for layer in inference_layers(policy).values()]
    assert all(isinstance(layer, torch.nn.Linear) for layer in inference_layers(policy).values())
    total_bits = sum(formats.bits_per_weight("mxfp4", s) * np.prod(s) for s in shapes)
    assert mxfp4["bits_per_weight"] == pytest.approx(total_bits / sum(np.prod(s) for s in shapes))
    assert 4 < mxfp4["bits_per_weight"] < fp8["bits_per_weight"]  # the scales' share counted
    biases = sum(4 * layer.bias.numel() for layer in inference_layers(policy).values())  # fp32
    assert mxfp4["policy_bytes"] == sum(formats.nbytes("mxfp4", s) for s in shapes) + biases
    assert mxfp4["policy_bytes"] < fp8["policy_bytes"] < mxfp4["fp32_bytes"]
    assert mxfp4["policy_key"] == fp8["policy_key"]  # one fp32 policy, quantized two ways
    for cell in (mxfp4, fp8):  # agreement is a count over the states the record compared on
        agreeing = cell["action_agreement"] * cell["agreement_states"]
        assert cell["agreement_states"] > 0 and agreeing == pytest.approx(round(agreeing), abs=1e-6)


def test_a_format_record_is_not_exported_as_an_integer_policy(scratch, shared_policies):
    """No export format writes MX blocks yet: `quarl export` of such a record refuses to pass it off
    as int4 (its implied bits), and with --precision exports the fp32 policy at that precision, saying so."""
    from tests.conftest import quarl_cli

    _cells(scratch, shared_policies, "mxfp4")
    refused = quarl_cli(scratch, "export", "quant=ptq", "quant.format=mxfp4", "--out", "p.onnx")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert "runs in quant.format=mxfp4, which no export format writes yet: add --precision" in refused.stderr
    assert not (scratch / "p.onnx").exists()
    done = quarl_cli(scratch, "export", "quant=ptq", "quant.format=mxfp4", "--precision", "fp32", "--out", "p.onnx")
    assert done.returncode == 0, done.stderr
    assert "exports this record's fp32 policy at fp32, not in quant.format=mxfp4" in done.stderr
    assert (scratch / "p.onnx").is_file()


def test_every_format_is_an_option_of_the_format_group_and_of_the_formats_sweep():
    """A format added to the registry needs its `+format` option (conf/format/<name>.yaml) and its place
    in sweep ptq_formats: this names what is missing."""
    from quarl.report import facts

    group = {p.stem for p in (Path(facts.SWEEPS).parent / "format").glob("*.yaml")}
    assert group == {"fp32", "int4", "int6", "int8", *formats.names()}
    assert set(facts.sweep("ptq_formats").grid["+format"]) == group
