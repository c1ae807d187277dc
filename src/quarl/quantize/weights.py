"""Weight quantizers and the policy layers they apply to: the primitives quarl's methods
(`quarl.methods`) quantize with (quantize-dequantize, "fake" quantization).

Schemes, for a tensor (or one output channel) W quantized to n bits:

- ``affine``: the range [min(W, 0), max(W, 0)] is split into 2^n levels with
  scale = range / (2^n - 1) and an integer zero point; values are clamped to the levels.
- ``symmetric``: levels -(2^(n-1) - 1) .. 2^(n-1) - 1 with scale = max|W| / (2^(n-1) - 1).
- ``quarl_code``: the formula of QuaRL's released code, delta = (|min W| + |max W|) / 2^n and
  W_q = delta * rint(W / delta), per tensor, not clamped. Its codes span up to 2^n + 1 levels
  (5 at 2 bits), so it is stored with ceil(log2(levels)) bits, not n.
- ``published``: the formula printed in the paper, Q = floor(W / delta) + z with
  delta = (|min(W, 0)| + |max(W, 0)|) / 2^n and z = floor(-min(W, 0) / delta), dequantized as
  (Q - z) * delta; per tensor, not clamped. Its codes span up to 2^n + 2 levels (floor puts the
  minimum one below z's level and the maximum at 2^n), also counted truthfully.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Optional

import torch
import torch.nn as nn
from stable_baselines3.common.base_class import BaseAlgorithm

from quarl.config import method_registry
from quarl.config.method_registry import Calibrate
from quarl.errors import QuarlError
from quarl.rl.algos import spec

LAYER_TYPES = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
WeightLayer = nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d  # an instance of LAYER_TYPES


def ranges(w: torch.Tensor, granularity: str = "per_tensor") -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max of `w`: one pair (shape [1]) per tensor, or one per output channel (shape [C])."""
    flat = w.reshape(w.shape[0], -1) if granularity == "per_channel" and w.dim() > 1 else w.reshape(1, -1)
    return flat.amin(dim=1), flat.amax(dim=1)


def qparams(lo: torch.Tensor, hi: torch.Tensor, bits: int, scheme: str) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """Scale, zero point and integer range that cover [lo, hi] at `bits` (affine or symmetric)."""
    if scheme == "affine":
        lo, hi = torch.clamp(lo, max=0), torch.clamp(hi, min=0)
        qmin, qmax = 0, 2**bits - 1
        scale = (hi - lo) / qmax
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zero_point = torch.clamp(torch.round(-lo / scale), qmin, qmax)
    elif scheme == "symmetric":
        qmax = 2 ** (bits - 1) - 1
        qmin = -qmax
        scale = torch.maximum(lo.abs(), hi.abs()) / qmax
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zero_point = torch.zeros_like(scale)
    else:
        raise ValueError(f"unknown scheme {scheme!r}")
    return scale.float(), zero_point.to(torch.int32), qmin, qmax


def quantize_with(w: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """Quantize-dequantize with given parameters (per tensor when `scale` has one element, else
    per output channel), on PyTorch's core fake-quant ops: gradient 1 inside the range, 0 outside."""
    if scale.numel() == 1:
        return torch.fake_quantize_per_tensor_affine(w, scale.reshape(1), zero_point.reshape(1), qmin, qmax)
    return torch.fake_quantize_per_channel_affine(w, scale, zero_point, 0, qmin, qmax)


FORMULA_SCHEMES = ("quarl_code", "published")  # QuaRL's own per-tensor formulas (not clamped)


def formula_codes(w: torch.Tensor, bits: int, scheme: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Integer codes, step delta and zero point of one of QuaRL's formulas (delta 0: codes are 0)."""
    if scheme == "quarl_code":
        delta = (w.min().abs() + w.max().abs()) / 2**bits
        zero = torch.zeros_like(delta)
        codes = torch.round(w / delta) if delta > 0 else torch.zeros_like(w)
    elif scheme == "published":
        delta = (torch.clamp(w.min(), max=0).abs() + torch.clamp(w.max(), min=0)) / 2**bits
        zero = torch.floor(-torch.clamp(w.min(), max=0) / delta) if delta > 0 else torch.zeros_like(delta)
        codes = torch.floor(w / delta) + zero if delta > 0 else torch.zeros_like(w)
    else:
        raise ValueError(f"unknown formula scheme {scheme!r}")
    return codes, delta, zero


def formula_quantize(w: torch.Tensor, bits: int, scheme: str) -> torch.Tensor:
    """Quantize-dequantize with QuaRL's released-code or published formula (see the module doc)."""
    codes, delta, zero = formula_codes(w, bits, scheme)
    return w.clone() if delta == 0 else (codes - zero) * delta


def formula_bits(w: torch.Tensor, bits: int, scheme: str) -> int:
    """Bits an integer code of `w` really needs under a QuaRL formula: ceil(log2(levels spanned))."""
    codes, _, _ = formula_codes(w.detach(), bits, scheme)
    levels = int(codes.max().item() - codes.min().item()) + 1 if codes.numel() else 1
    return max(1, math.ceil(math.log2(levels)))


def fake_quantize(w: torch.Tensor, bits: int, scheme: str = "affine", granularity: str = "per_tensor") -> torch.Tensor:
    """Quantize `w` to `bits` with ranges taken from `w` itself; 32 bits returns an unchanged copy."""
    if bits == 32 or w.numel() == 0:
        return w.clone()
    if scheme in FORMULA_SCHEMES:
        return formula_quantize(w, bits, scheme)
    return quantize_with(w, *qparams(*ranges(w.detach(), granularity), bits, scheme))


def inference_layers(model: BaseAlgorithm) -> dict[str, WeightLayer]:
    """The weight layers the policy computes actions with (not critics or target networks), by
    their name in `model.policy`, in the order they act (the first one takes the observation)."""
    return policy_layers(model.policy, _algo_name(model))


def policy_layers(policy: nn.Module, algo: str) -> dict[str, WeightLayer]:
    """`inference_layers` of an SB3 policy network of algorithm `algo` (e.g. "dqn")."""
    layers: dict[str, WeightLayer] = {}
    for root in spec(algo).inference_roots:
        module = policy.get_submodule(root)
        for name, sub in module.named_modules():
            if isinstance(sub, LAYER_TYPES):
                layers[f"{root}.{name}" if name else root] = sub
    return layers


def layer_bits(quant: Any) -> dict[str, int]:
    """`quant.layer_bits` as a plain dict ({} where absent or null)."""
    value = quant.get("layer_bits") if hasattr(quant, "get") else getattr(quant, "layer_bits", None)
    return {str(k): int(v) for k, v in (value or {}).items()}


def check_layers(names: Iterable[str], quant: Any) -> None:
    """Raise a QuarlError naming a `quant.layer_bits` layer that is not among the policy's `names`."""
    names = list(names)
    for layer in layer_bits(quant):
        if layer not in names:
            raise QuarlError(
                f"quant.layer_bits names {layer}, which this policy does not have: its layers are {', '.join(names)}."
            )


def bits_of(name: str, quant: Any, numel: int) -> int:
    """The weight bits of inference layer `name`, whose weight has `numel` elements: 32 (left in
    float) under `quant.min_elements` (TFLite's rule: 1024), else `quant.layer_bits` where named,
    else `quant.bits`."""
    if numel < int(quant.get("min_elements") or 0):
        return 32
    return layer_bits(quant).get(name, quant.bits)


def _algo_name(model: BaseAlgorithm) -> str:
    return type(model).__name__.lower()


#: a tensor's replacement: tensor(t, granularity, bits) -> t quantized (quantize-dequantize)
TensorQuantizer = Callable[[torch.Tensor, str, int], torch.Tensor]


@torch.no_grad()
def quantize_weights(model: BaseAlgorithm, quant: Any, tensor: TensorQuantizer, with_bias: bool) -> None:
    """Replace every inference layer's weights (and biases, `with_bias`) in place by `tensor` of
    them, at the layer's bits (`quant.layer_bits`, else `quant.bits`); biases per tensor."""
    layers = inference_layers(model)
    check_layers(layers, quant)
    for name, layer in layers.items():
        bits = bits_of(name, quant, layer.weight.numel())
        layer.weight.copy_(tensor(layer.weight, quant.granularity, bits))
        if layer.bias is not None and with_bias:
            layer.bias.copy_(tensor(layer.bias, "per_tensor", bits))


def integer_tensor_bytes(t: torch.Tensor, quant: Any, granularity: str, bits: int) -> int:
    """Bytes of `t` stored as `bits`-bit integer codes of `quant.scheme` with their ranges (fp32 at 32 bits)."""
    if bits == 32:
        return 4 * t.numel()
    ranges = t.shape[0] if granularity == "per_channel" and t.dim() > 1 else 1
    range_bytes = 4 if quant.scheme in ("symmetric", "quarl_code") else 8  # scale (+ zero point)
    stored = formula_bits(t, bits, quant.scheme) if quant.scheme in FORMULA_SCHEMES else bits
    return math.ceil(t.numel() * stored / 8) + ranges * range_bytes


def quantize_policy(model: BaseAlgorithm, quant: Any, calibrate: Optional[Calibrate] = None) -> None:
    """Quantize `model`'s inference layers in place as `quant` describes; it still acts through
    `model.predict`. A policy its method trained (QAT) comes quantized and is left as it is. PTQ of
    activations or inputs calls `calibrate` (quarl.quantize.calibration.calibrator) on the fp32 model first."""
    with torch.no_grad():
        method_registry.get(quant.method).quantize(model, quant, calibrate)


def layer_bytes(name: str, layer: Any, quant: Any) -> int:
    """Bytes of one inference layer's parameters when stored as `quant` describes (fp32 weights)."""
    method, bits = method_registry.get(quant.method), bits_of(name, quant, layer.weight.numel())
    total = method.tensor_bytes(layer.weight, quant, quant.granularity, bits)
    if layer.bias is not None:
        quantized = method.quantizes_bias(quant)
        total += method.tensor_bytes(layer.bias, quant, "per_tensor", bits) if quantized else 4 * layer.bias.numel()
    return total


def policy_bytes(model: BaseAlgorithm, quant: Any) -> int:
    """Bytes of the inference layers' parameters when stored as `quant` describes; pass the fp32
    model (QuaRL's formulas count the levels its weights span)."""
    layers = inference_layers(model)
    check_layers(layers, quant)
    return sum(layer_bytes(name, layer, quant) for name, layer in layers.items())
