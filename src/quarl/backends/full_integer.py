"""The full-integer policy of quarl.deploy.edge (TFLite's integer arithmetic), run as the C99 policy
(`c`, compiled by the host cc, via ctypes) or as a LiteRT model (`tflite`, ai-edge-litert's builtin
kernels), with int8 activations or (`_16x8`) TFLite's 16x8 scheme: int16 activations, int8 weights."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from quarl.config.backend_registry import Backend

if TYPE_CHECKING:
    from quarl.deploy.acting import ActingNetwork
    from quarl.deploy.runner import Runner


def builder(runtime: str, activation_bits: int) -> Callable[..., Runner]:
    """The full-integer runner on `runtime` (c or tflite) with `activation_bits` activations."""

    def build(net: ActingNetwork, example: np.ndarray, calibrated: bool, threads: int) -> Runner:
        from quarl.deploy.edge.runners import CRunner, TfliteRunner, edge_policy

        integer = edge_policy(net, example, calibrated, "gemmlowp", activation_bits)
        return CRunner(net, integer) if runtime == "c" else TfliteRunner(net, integer)

    return build


WRITES = {
    "c": "a folder with policy.c and policy.h, C99 for microcontrollers, checked bit for bit against quarl's "
    "integer reference before it is kept",
    "tflite": "a full-integer LiteRT model (runs under ai-edge-litert and TFLite Micro: pip install 'quarl[edge]'), "
    "checked bit for bit against quarl's integer reference before it is kept",
}
SUMMARY = {
    "c": "full-integer C99 policy (quarl.deploy.edge), compiled by the host cc, via ctypes",
    "tflite": "full-integer LiteRT model (quarl.deploy.edge), ai-edge-litert's builtin kernels",
}
BACKENDS = tuple(
    Backend(
        runtime if bits == 8 else f"{runtime}_16x8",
        "int8" if bits == 8 else "16x8",
        builder(runtime, bits),
        SUMMARY[runtime] if bits == 8 else f"`{runtime}` in TFLite's 16x8 scheme: int16 activations, int8 weights",
        max_bits=8,
        mlp_only=True,
        calibrated=True,
        export_format=runtime,
        export_summary=WRITES[runtime],
        rank=7 + rank,
    )
    for rank, (bits, runtime) in enumerate([(8, "c"), (8, "tflite"), (16, "c"), (16, "tflite")])
)
