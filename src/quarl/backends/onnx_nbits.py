"""ONNX Runtime's MatMulNBits: 4-bit or 2-bit weights, int8 activations (quarl.deploy.nbits)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

import numpy as np

from quarl.config.backend_registry import Backend

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner

log = logging.getLogger(__name__)


def builder(bits: int) -> Callable[..., Runner]:
    """The weight-only `bits`-bit runner: every Linear MatMulNBits can run, the rest in float32 (logged)."""

    def build(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
        from quarl.deploy import nbits, onnx_io
        from quarl.deploy.execution import NbitsRunner

        name = f"onnx_int{bits}"
        for package in ("onnx", "onnxscript", "onnxruntime"):
            onnx_io.require(package, f"backend={name}")
        model, report = nbits.quantize_nbits(onnx_io.to_onnx(net, example), bits)
        if report.fp32:
            kept = "; ".join(f"{n} ({why})" for n, why in report.fp32.items())
            log.info("backend=%s keeps %s in float32.", name, kept)
        if report.rtn:
            log.warning(
                "backend=%s rounds %s to %d bits block-wise (blocks of %d, not the policy's own weights: they are "
                "not on a %d-bit grid; quantize the policy to quant.bits<=%d to execute its own weights).",
                name,
                ", ".join(report.rtn),
                bits,
                nbits.RTN_BLOCK,
                bits,
                bits,
            )
        return NbitsRunner(net, name, model, threads, report)

    return build


BACKENDS = tuple(
    Backend(
        f"onnx_int{bits}",
        f"int{bits}",
        builder(bits),
        f"ONNX Runtime MatMulNBits: {bits}-bit weights, int8 activations",
        max_bits=bits,
        auto=True,
        rank=3 if bits == 4 else 4,
    )
    for bits in (4, 2)
)
