"""Static fake quantization of activations: a layer's input quantized with a frozen range, the
form calibrated PTQ and frozen QAT take in an acting network."""

from __future__ import annotations

import torch
import torch.nn as nn


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
