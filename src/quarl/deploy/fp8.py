"""Linear layers as FP8 matrix products (`torch._scaled_mm`): the `torch_fp8` backend's arithmetic.

Each Linear layer's weight is stored as OCP FP8 E4M3 (`torch.float8_e4m3fn`) with an fp32 scale per
tensor or per output channel, the scales quarl's `fp8_e4m3` format picks (amax / 448): a weight
already on that format's grid (a `quant.format=fp8_e4m3` cell, per tensor or per channel) is stored
exactly (`weight_scale`). Its input is
quantized per call to E4M3 with a dynamic per-tensor scale (the batch's amax / 448, saturating, round
to nearest even), the product runs in FP8 with fp32 accumulation and output, then the channel scales
and the bias are applied in fp32. Inner and outer dimensions are zero-padded to multiples of 16, as
the GPU kernels require (zeros add nothing to a sum). On Hopper GPUs `_scaled_mm` is a tensor-core
FP8 GEMM; on a CPU torch computes the same products in software (exact, not fast).
"""

from __future__ import annotations

import torch
import torch.nn as nn

E4M3_MAX = 448.0
ALIGN = 16  # _scaled_mm's CUDA kernels take dimensions that are multiples of 16


def _pad(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def to_e4m3(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`x / scale` as E4M3, saturating to +-448 (torch's cast rounds to nearest even)."""
    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def amax_scale(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """amax / 448 as fp32 (per tensor, or along `dim` kept), 1 where the amax is 0."""
    amax = x.abs().amax() if dim is None else x.abs().amax(dim=dim, keepdim=True)
    scale = (amax.float() / E4M3_MAX).float()
    return torch.where(scale > 0, scale, torch.ones_like(scale))


def weight_scale(w: torch.Tensor) -> torch.Tensor:
    """The fp32 scale a weight is stored with: per tensor where its values lie exactly on a per-tensor
    E4M3 grid (a `quant.format=fp8_e4m3` cell's), else per output channel (exact on such a cell's
    per-channel grid; the finer rounding for any other weight)."""
    for scale in (amax_scale(w), amax_scale(w, dim=1)):
        if torch.equal(to_e4m3(w, scale).float() * scale, w):
            return scale
    return scale


class Fp8Linear(nn.Module):
    """A Linear layer computed as an FP8 E4M3 matrix product (module docstring)."""

    weight: torch.Tensor  # buffers, registered in __init__: E4M3 [out, in], padded to multiples of 16
    weight_scale: torch.Tensor  # fp32, one per output channel
    bias: torch.Tensor

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        w = linear.weight.detach().float()
        out_features, in_features = w.shape
        self.in_features, self.out_features = in_features, out_features
        scale = weight_scale(w)
        padded = torch.zeros(_pad(out_features), _pad(in_features), device=w.device)
        padded[:out_features, :in_features] = w / scale
        self.register_buffer("weight", to_e4m3(padded, torch.ones((), device=w.device)))  # [out, in], padded
        self.register_buffer("weight_scale", scale.reshape(-1).expand(out_features).contiguous())
        bias = linear.bias.detach().float() if linear.bias is not None else torch.zeros(out_features)
        self.register_buffer("bias", bias.to(w.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        rows = x.shape[0]
        padded = torch.zeros(_pad(rows), self.weight.shape[1], device=x.device)
        padded[:rows, : self.in_features] = x
        x_scale = amax_scale(padded)
        one = torch.ones((), device=x.device)
        out = torch._scaled_mm(  # noqa: SLF001 - torch's FP8 GEMM has no public name yet
            to_e4m3(padded, x_scale), self.weight.t(), scale_a=x_scale, scale_b=one, out_dtype=torch.float32
        )
        return out[:rows, : self.out_features] * self.weight_scale + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, e4m3"


def fp8_layers(module: nn.Module) -> nn.Module:
    """`module` with every Linear layer replaced by an Fp8Linear, in place."""
    for name, child in module.named_children():
        if isinstance(child, nn.Linear):
            setattr(module, name, Fp8Linear(child))
        else:
            fp8_layers(child)
    return module


def fp8_weight_bytes(module: nn.Module) -> int:
    """Bytes of the FP8 weights (unpadded), their scales and the fp32 biases of `module`."""
    layers = [m for m in module.modules() if isinstance(m, Fp8Linear)]
    return sum(m.in_features * m.out_features + 4 * (m.weight_scale.numel() + m.bias.numel()) for m in layers)
