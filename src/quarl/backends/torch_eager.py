"""Eager PyTorch: the fp32 reference, and the weight layers in float16 or bfloat16."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from quarl.config.backend_registry import Backend

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner


def builder(name: str) -> Callable[..., Runner]:
    """The eager runner called `name` (its weight layers in that backend's dtype)."""

    def build(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
        from quarl.deploy.backends import TorchRunner

        return TorchRunner(net, name)

    return build


BACKENDS = (
    Backend("torch", "fp32", builder("torch"), "eager PyTorch: the reference", rank=0),
    Backend("torch_fp16", "fp16", builder("torch_fp16"), "eager PyTorch, weight layers in float16", rank=5),
    Backend("torch_bf16", "bf16", builder("torch_bf16"), "eager PyTorch, weight layers in bfloat16", rank=6),
)
