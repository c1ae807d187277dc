"""The scaling rules: how each format picks the scales of a group of weights and the elements that
multiply them. Inputs are float64 (exact copies of fp32 weights), so a weight's quotient by its scale
is rounded once (not at all for the power-of-two MX scales) before its element rounding.

Non-finite weights: a group (tensor, channel or block) holding an infinity or a NaN comes out NaN as
a whole, as the MX spec's NaN scale (E8M0 0xFF) makes a block NaN; NVFP4's tensor scale, taken from
the tensor's absolute maximum, makes that the whole tensor.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from quarl.quantize.formats.elements import E8M0_MAX, E8M0_MIN, Element, FloatElement


class Parts(NamedTuple):
    """A quantized group: elements on the element grid times their scales (broadcast)."""

    elements: torch.Tensor
    scales: torch.Tensor  # per tensor, channel or block (E8M0, E4M3 or fp32 values)
    tensor_scale: torch.Tensor  # NVFP4's second-level fp32 scale; 1 for the other formats

    def dequantize(self) -> torch.Tensor:
        """The values the parts stand for (exact in float64: elements and scales are short)."""
        return self.elements * self.scales * self.tensor_scale


def fp32(x: torch.Tensor) -> torch.Tensor:
    """`x` rounded to the nearest fp32 value (a scale stored as fp32), kept in x's dtype."""
    return x.float().to(x.dtype)


def _nan_where_nonfinite(values: torch.Tensor, amax: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(amax), values, torch.full_like(values, float("nan")))


def _one(value: torch.Tensor) -> torch.Tensor:
    return torch.ones((), dtype=value.dtype, device=value.device)


def by_amax(matrix: torch.Tensor, element: FloatElement) -> Parts:
    """FP8 with an fp32 scale per row of `matrix` (pass [1, n] for one scale per tensor):
    scale = amax / element.max (stored as fp32; 1 for an all-zero row), element = round(v / scale)."""
    amax = matrix.abs().amax(dim=1, keepdim=True)
    scale = fp32(amax / element.max)
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    elements = _nan_where_nonfinite(element.round(matrix / scale), amax)
    return Parts(elements, _nan_where_nonfinite(scale, amax), _one(matrix))


def static(values: torch.Tensor, element: FloatElement, amax: float) -> Parts:
    """FP8 with one fixed fp32 scale, amax / element.max (a calibrated range's; 1 where amax is 0):
    values past amax saturate to the element's max."""
    scale = fp32(torch.tensor(amax / element.max if amax > 0 else 1.0, dtype=values.dtype, device=values.device))
    return Parts(element.round(values / scale), scale, _one(values))


def shared_exponents(amax: torch.Tensor, element: Element) -> torch.Tensor:
    """OCP MX v1.0 section 6.3: floor(log2(amax)) - emax_elem, clamped to E8M0's exponents; an
    all-zero block (log2 0 = -inf) gets the smallest, 2^-127."""
    _, exponent = torch.frexp(amax)  # amax = m * 2^exponent, m in [0.5, 1): floor(log2) exactly
    shared = torch.clamp(exponent - 1 - element.emax, E8M0_MIN, E8M0_MAX)
    return torch.where(amax > 0, shared, torch.full_like(shared, E8M0_MIN))


def mx(blocks: torch.Tensor, element: Element) -> Parts:
    """An MX block [.., block]: scale X = 2^shared_exponent (E8M0), elements round(v / X) saturated."""
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = torch.exp2(shared_exponents(amax, element).to(blocks.dtype))
    elements = _nan_where_nonfinite(element.round(blocks / scale), amax)
    return Parts(elements, _nan_where_nonfinite(scale, amax), _one(blocks))


def nvfp4(blocks: torch.Tensor, element: FloatElement, block_scale: FloatElement) -> Parts:
    """NVFP4 blocks [.., block]: tensor scale t = amax / (448 * 6) in fp32, block scale
    s = round_e4m3(block amax / 6 / t), elements round_e2m1(v / (s * t)) (0 where s rounds to 0)."""
    amax = blocks.abs().amax()
    tensor = fp32(amax / (block_scale.max * element.max))
    tensor = torch.where(tensor > 0, tensor, torch.ones_like(tensor))  # all zeros: any scale will do
    block_amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = block_scale.round(block_amax / (element.max * tensor))
    divisor = torch.where(scale > 0, scale * tensor, torch.ones_like(scale))
    elements = torch.where(scale > 0, element.round(blocks / divisor), torch.zeros_like(blocks))
    return Parts(_nan_where_nonfinite(elements, amax), _nan_where_nonfinite(scale, amax), tensor)


def absmax(blocks: torch.Tensor, element: Element) -> Parts:
    """NF4 blocks [.., block]: scale = the block's absolute maximum (fp32), elements the table values
    nearest v / scale."""
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(amax > 0, amax, torch.ones_like(amax))
    elements = _nan_where_nonfinite(element.round(blocks / scale), amax)
    return Parts(elements, _nan_where_nonfinite(scale, amax), _one(blocks))
