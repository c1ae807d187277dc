"""Fake quantization of activations: a layer's input quantized with a frozen range, the form
calibrated PTQ and frozen QAT take in an acting network, or in a number format."""

from __future__ import annotations

import torch
import torch.nn as nn

from quarl.quantize import formats


class ActivationFakeQuant(nn.Module):
    """A QAT layer's input fake quantization with its frozen range (per tensor, affine).

    The arithmetic of `torch.fake_quantize_per_tensor_affine`, written with plain ops so it exports
    to ONNX at any bit width: (clamp(round(x * (1 / scale)) + zp, qmin, qmax) - zp) * scale.
    """

    scale: torch.Tensor  # buffers, registered in __init__
    inv_scale: torch.Tensor

    def __init__(self, scale: float, zero_point: int, qmin: int, qmax: int) -> None:
        super().__init__()
        self.register_buffer("scale", torch.tensor(scale, dtype=torch.float32))
        self.register_buffer("inv_scale", torch.tensor(1.0, dtype=torch.float32) / self.scale)
        self.zero_point, self.qmin, self.qmax = float(zero_point), float(qmin), float(qmax)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        q = torch.clamp(torch.round(x32 * self.inv_scale) + self.zero_point, self.qmin, self.qmax)
        return ((q - self.zero_point) * self.scale).to(x.dtype)

    def extra_repr(self) -> str:
        return (
            f"scale={self.scale.item():.6g}, zero_point={int(self.zero_point)}, "
            f"range=[{int(self.qmin)}, {int(self.qmax)}]"
        )


class FormatFakeQuant(nn.Module):
    """A layer's input in a number format (`quant.act_format`, `quant.input_format`; docs/formats.md):
    FP8 with a static per-tensor scale from its calibrated range [lo, hi], a block format (MX, NVFP4,
    NF4) with its scales computed from each input, block by block along a sample's features, as MX
    hardware scales activations. It keeps the layer, role and range for the record."""

    onnx_exportable = False  # its rounding (torch.frexp) has no ONNX operator: evaluated in torch

    def __init__(self, layer: str, number_format: str, role: str, lo: float | None, hi: float | None) -> None:
        super().__init__()
        self.fmt = formats.get(number_format)
        self.layer, self.role, self.number_format = layer, role, number_format
        self.lo = self.hi = self.amax = None
        if self.fmt.rule == "fp8":
            if lo is None or hi is None:
                raise ValueError(f"{number_format} activations need a calibrated range (lo, hi)")
            self.lo, self.hi = float(lo), float(hi)
            self.amax = max(abs(self.lo), abs(self.hi))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fmt.fake_quantize_activation(x, self.amax)

    def extra_repr(self) -> str:
        return f"{self.number_format}" + ("" if self.amax is None else f", amax={self.amax:.6g}")
