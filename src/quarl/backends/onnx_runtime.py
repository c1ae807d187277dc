"""ONNX Runtime on the CPU: fp32, and int8 (dynamic for MLPs, static with a PTQ policy's own 8-bit
ranges; static and calibrated for CNNs)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from quarl.config.backend_registry import Backend
from quarl.errors import QuarlError

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner


def fp32(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
    from quarl.deploy import onnx_io
    from quarl.deploy.execution import OnnxRunner

    return OnnxRunner(net, "onnx", onnx_io.to_onnx(net, example), threads)


def int8(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
    from quarl.deploy import onnx_io
    from quarl.deploy.execution import OnnxRunner, calibrated_int8_ranges, check_int8, has_conv, without_fake_quant

    for package in ("onnx", "onnxscript", "onnxruntime"):
        onnx_io.require(package, "backend=onnx_int8")
    check_int8(net, "onnx_int8")
    static = has_conv(net)
    if static and not calibrated:
        raise QuarlError(
            "backend=onnx_int8 quantizes convolutional policies statically and needs calibration observations: "
            "pass example_obs, a batch of a few hundred real observations from the environment."
        )
    model = onnx_io.to_onnx(without_fake_quant(net), example)
    ranges = None if static else calibrated_int8_ranges(net)
    quantized = onnx_io.quantize_int8(model, example if static or ranges else None, static, input_ranges=ranges)
    return OnnxRunner(net, "onnx_int8", quantized, threads)


BACKENDS = (
    Backend(
        "onnx",
        "fp32",
        fp32,
        "ONNX Runtime",
        export_format="onnx",
        export_summary="one ONNX file for ONNX Runtime, at the record's own precision (--precision)",
        rank=1,
    ),
    Backend(
        "onnx_int8",
        "int8",
        int8,
        "ONNX Runtime: dynamic (MLPs; static for PTQ) / static, calibrated (CNNs)",
        max_bits=8,
        auto=True,
        rank=2,
    ),
)
