"""Activations and inputs in a number format (quant.act_format, quant.input_format; issue 57): FP8
with the static scale of a calibrated range, block formats scaled from each sample's own features,
worked by hand; a cell records each quantized input's format, and keys only what it uses."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
import torch

from quarl.config import method_registry
from quarl.config.cells import resolve
from quarl.quantize.activations import FormatFakeQuant
from quarl.store import query as results
from tests.conftest import FAST, compose_cfg, run_quarl


def test_mxfp4_activations_scale_each_sample_by_its_own_block():
    """Sample 0: amax 20, shared exponent floor(log2 20) - 2 = 2, scale 4; 0.3/4 -> 0, -1.7/4 =
    -0.425 -> -0.5, 5/4 = 1.25 ties to 1, 20/4 = 5 ties to 4: [0, -2, 4, 16]. Sample 1 keeps its own
    scale (amax 0.75: 2^-3): 0.8 -> 1, 1.6 -> 1.5, -6 -> -6; sample 0's scale would flush it to zero."""
    quant = FormatFakeQuant("l", "mxfp4", "activation", None, None)
    x = torch.tensor([[0.3, -1.7, 5.0, 20.0], [0.1, 0.2, -0.75, 0.0]])
    out = quant(x)
    assert out[0].tolist() == [0.0, -2.0, 4.0, 16.0]
    assert out[1].tolist() == [0.125, 0.1875, -0.75, 0.0]
    assert quant(x[1:]).tolist() == out[1:].tolist()  # the batch around a sample changes nothing


def test_fp8_activations_take_the_calibrated_scale_and_saturate():
    """Range [-3.5, 2]: amax 3.5, scale 3.5 / 448 = 2^-7. 0.78125 / 2^-7 = 100 lies between E4M3's 96
    and 104 and ties to 96 (even mantissa): 0.75; -0.3 -> -38.4 -> -40 (quantum 4): -0.3125; 7.0 is
    past the range and saturates to 448: 3.5."""
    quant = FormatFakeQuant("l", "fp8_e4m3", "input", -3.5, 2.0)
    x = torch.tensor([[0.78125, 7.0, -0.3, 0.0]], dtype=torch.float64)
    assert quant(x)[0].tolist() == [0.75, 3.5, -0.3125, 0.0]
    scaled = np.clip(x[0].numpy() * 128, -448, 448).astype(np.float32)
    assert quant(x)[0].tolist() == (scaled.astype(ml_dtypes.float8_e4m3fn).astype(np.float64) / 128).tolist()
    with pytest.raises(ValueError, match="calibrated range"):
        FormatFakeQuant("l", "fp8_e4m3", "input", None, None)


def test_only_a_cell_that_uses_a_calibrated_range_keys_the_calibration():
    def key(*overrides: str) -> dict:
        cfg = resolve(compose_cfg("quant=ptq", *overrides), warn=False)[1]
        return method_registry.of(cfg).spec(cfg)

    assert "calibration" not in key("quant.format=mxfp4", "quant.act_format=mxfp4")  # scaled from each input
    assert "calibration" in key("quant.format=mxfp4", "quant.act_format=fp8_e4m3")  # a static range
    assert "act_format" not in key() and "act_format" in key("quant.act_format=nvfp4")


def test_a_cell_with_format_activations_records_each_input_s_format(scratch, shared_policies):
    run_quarl(
        scratch,
        *FAST,
        "quant=ptq",
        "quant.format=mxfp4",
        "quant.act_format=mxfp6_e2m3",
        "quant.input_format=fp8_e4m3",
        policies=shared_policies,
    )
    (_, row), *_ = results.load(scratch / "outputs/results.sqlite", quant="ptq").iterrows()
    assert row["status"] == "done" and row["quant.act_format"] == "mxfp6_e2m3"
    assert row["quant.input_format"] == "fp8_e4m3"
    ranges = json.loads(row["act_ranges"])
    roles = sorted((entry["role"], entry["format"]) for entry in ranges.values())
    assert roles == [("activation", "mxfp6_e2m3"), ("activation", "mxfp6_e2m3"), ("input", "fp8_e4m3")]
    first = next(entry for entry in ranges.values() if entry["role"] == "input")
    assert first["lo"] < 0 < first["hi"]  # CartPole's observations, calibrated
    assert all(entry["lo"] is None for entry in ranges.values() if entry["role"] == "activation")
