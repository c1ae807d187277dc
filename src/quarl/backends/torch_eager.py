"""Eager PyTorch: the fp32 reference, and the weight layers in float16 or bfloat16."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import numpy as np

from quarl.config.backend_registry import Backend

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner


def builder(name: str, cast: Optional[str] = None) -> Callable[..., Runner]:
    """The eager runner called `name`, its weight layers cast to `cast` (a torch dtype's name) where given."""

    def build(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
        from quarl.deploy.execution import TorchRunner

        return TorchRunner(net, name, cast)

    return build


BACKENDS = (
    Backend("torch", "fp32", builder("torch"), "eager PyTorch: the reference", rank=0),
    Backend("torch_fp16", "fp16", builder("torch_fp16", "float16"), "eager PyTorch, weight layers in float16", rank=5),
    Backend(
        "torch_bf16", "bf16", builder("torch_bf16", "bfloat16"), "eager PyTorch, weight layers in bfloat16", rank=6
    ),
)
