"""Post-training quantization of policy weights (quantize-dequantize, "fake" quantization).

Schemes, for a tensor (or one output channel) W quantized to n bits:

- ``affine``: the range [min(W, 0), max(W, 0)] is split into 2^n levels with
  scale = range / (2^n - 1) and an integer zero point; values are clamped to the levels.
- ``symmetric``: levels -(2^(n-1) - 1) .. 2^(n-1) - 1 with scale = max|W| / (2^(n-1) - 1).
- ``paper``: QuaRL's published formula, delta = (|min W| + |max W|) / 2^n and
  W_q = delta * rint(W / delta), per tensor, not clamped.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.algos import spec

LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
FLOAT_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def _reduce_dims(w: torch.Tensor, granularity: str) -> tuple[int, ...]:
    if granularity == "per_channel" and w.dim() > 1:
        return tuple(range(1, w.dim()))
    return tuple(range(w.dim()))


def fake_quantize(w: torch.Tensor, bits: int, scheme: str = "affine", granularity: str = "per_tensor") -> torch.Tensor:
    """Quantize `w` to `bits` and back to its float dtype; 32 bits returns an unchanged copy."""
    if bits == 32 or w.numel() == 0:
        return w.clone()
    if scheme == "paper":
        delta = (w.min().abs() + w.max().abs()) / 2**bits
        return w.clone() if delta == 0 else delta * torch.round(w / delta)
    dims = _reduce_dims(w, granularity)
    if scheme == "affine":
        lo = torch.clamp(w.amin(dim=dims, keepdim=True), max=0)
        hi = torch.clamp(w.amax(dim=dims, keepdim=True), min=0)
        qmax = 2**bits - 1
        scale = (hi - lo) / qmax
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zero_point = torch.clamp(torch.round(-lo / scale), 0, qmax)
        q = torch.clamp(torch.round(w / scale) + zero_point, 0, qmax)
        return (q - zero_point) * scale
    if scheme == "symmetric":
        qmax = 2 ** (bits - 1) - 1
        scale = w.abs().amax(dim=dims, keepdim=True) / qmax
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        return torch.clamp(torch.round(w / scale), -qmax, qmax) * scale
    raise ValueError(f"unknown scheme {scheme!r}")


def inference_layers(model: BaseAlgorithm) -> dict[str, nn.Module]:
    """The weight layers the policy computes actions with (not critics or target networks)."""
    layers: dict[str, nn.Module] = {}
    for root in spec(_algo_name(model)).inference_roots:
        module = model.policy.get_submodule(root)
        for name, sub in module.named_modules():
            if isinstance(sub, LAYER_TYPES):
                layers[f"{root}.{name}" if name else root] = sub
    return layers


def _algo_name(model: BaseAlgorithm) -> str:
    return type(model).__name__.lower()


def _quantized(t: torch.Tensor, quant: Any, granularity: str) -> torch.Tensor:
    if quant.method in FLOAT_DTYPES:
        return t.to(FLOAT_DTYPES[quant.method]).to(t.dtype)
    return fake_quantize(t, quant.bits, quant.scheme, granularity)


@torch.no_grad()
def quantize_policy(model: BaseAlgorithm, quant: Any) -> None:
    """Quantize the inference layers of `model` in place; it still acts through `model.predict`."""
    if quant.method == "fp32":
        return
    for layer in inference_layers(model).values():
        layer.weight.copy_(_quantized(layer.weight, quant, quant.granularity))
        if layer.bias is not None and (quant.quantize_bias or quant.method in FLOAT_DTYPES):
            layer.bias.copy_(_quantized(layer.bias, quant, "per_tensor"))


def _tensor_bytes(t: torch.Tensor, quant: Any, granularity: str, quantized: bool) -> int:
    if not quantized or quant.method == "fp32" or (quant.method == "ptq" and quant.bits == 32):
        return 4 * t.numel()
    if quant.method in FLOAT_DTYPES:
        return 2 * t.numel()
    ranges = t.shape[0] if granularity == "per_channel" and t.dim() > 1 else 1
    range_bytes = 8 if quant.scheme == "affine" else 4  # scale (+ zero point)
    return math.ceil(t.numel() * quant.bits / 8) + ranges * range_bytes


def policy_bytes(model: BaseAlgorithm, quant: Any) -> int:
    """Bytes of the inference layers' parameters when stored as `quant` describes."""
    total = 0
    for layer in inference_layers(model).values():
        total += _tensor_bytes(layer.weight, quant, quant.granularity, quantized=True)
        if layer.bias is not None:
            bias_quantized = quant.quantize_bias or quant.method in FLOAT_DTYPES
            total += _tensor_bytes(layer.bias, quant, "per_tensor", quantized=bias_quantized)
    return total
