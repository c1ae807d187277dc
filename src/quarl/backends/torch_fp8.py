"""PyTorch with every Linear layer an FP8 E4M3 matrix product (`torch._scaled_mm`; `quarl.deploy.fp8`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from quarl.config.backend_registry import Backend

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner


def build(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
    from quarl.deploy.execution import Fp8Runner

    return Fp8Runner(net, "torch_fp8")


BACKENDS = (
    Backend(
        "torch_fp8",
        "fp8",
        build,
        "PyTorch, Linear layers as FP8 E4M3 GEMMs (torch._scaled_mm), inputs scaled per call",
        formats=("fp8_e4m3",),
        mlp_only=True,
        rank=8,
    ),
)
