"""The registry of number formats: name -> `Format` (element, blocks, scales, storage cost)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional, Sequence, Union

import torch

from quarl.errors import QuarlError
from quarl.quantize.formats import blocks, scaling
from quarl.quantize.formats.elements import E2M1, E2M3, E3M2, E4M3, E5M2, INT8, NF4, Element, FloatElement

RULES = ("fp8", "mx", "nvfp4", "nf4")  # how the scales are chosen (quarl.quantize.formats.scaling)


@dataclass(frozen=True)
class Format:
    """A weight format: elements of `element`, scaled per tensor, per output channel or per block of
    `block` elements along `axis` ("rows": the reduction axis; "flat": the flattened tensor)."""

    name: str
    element: Element
    rule: str  # one of RULES
    granularity: str  # "per_tensor" or "per_channel" (FP8), "per_block"
    scale: str  # the scale's type, in words
    scale_bits: int  # bits of each scale (the tensor's, a channel's or a block's)
    block: Optional[int] = None  # elements per block (per_block only)
    axis: str = "rows"
    tensor_scale_bits: int = 0  # a second, per-tensor scale (NVFP4's fp32)
    summary: str = ""

    def scale_count(self, shape: Sequence[int]) -> int:
        """Scales stored for a tensor of `shape` (one per tensor, output channel or block)."""
        if math.prod(shape) == 0:
            return 0
        if self.granularity == "per_tensor":
            return 1
        if self.granularity == "per_channel":
            return blocks.matrix_shape(shape)[0]
        assert self.block is not None
        return blocks.block_count(shape, self.block, self.axis)

    def storage_bits(self, shape: Sequence[int]) -> int:
        """Bits of a tensor of `shape`: its elements, every scale (short blocks' too) and the tensor scale."""
        numel = math.prod(shape)
        tensor = self.tensor_scale_bits if numel else 0
        return numel * self.element.bits + self.scale_count(shape) * self.scale_bits + tensor

    def bits_per_weight(self, shape: Sequence[int]) -> float:
        """Storage bits per element of a tensor of `shape` (0 for an empty one)."""
        numel = math.prod(shape)
        return self.storage_bits(shape) / numel if numel else 0.0

    def nbytes(self, shape: Sequence[int]) -> int:
        """Bytes of a tensor of `shape`, elements and scales bit-packed, rounded up once."""
        return math.ceil(self.storage_bits(shape) / 8)

    def parts(self, weight: torch.Tensor) -> scaling.Parts:
        """Elements and scales of `weight` (float64; blocks as [rows, blocks, block], zero-padded)."""
        w = weight.detach().to(torch.float64)
        if self.rule == "fp8":
            assert isinstance(self.element, FloatElement)
            flat = self.granularity == "per_tensor"
            return scaling.by_amax(w.reshape(1, -1) if flat else blocks.as_matrix(w), self.element)
        assert self.block is not None
        grouped = blocks.to_blocks(blocks.as_matrix(w, self.axis), self.block)
        if self.rule == "mx":
            return scaling.mx(grouped, self.element)
        if self.rule == "nvfp4":
            assert isinstance(self.element, FloatElement)
            return scaling.nvfp4(grouped, self.element, E4M3)
        return scaling.absmax(grouped, self.element)

    def fake_quantize(self, weight: torch.Tensor) -> torch.Tensor:
        """`weight` quantized and dequantized, in its shape and dtype; the gradient passes straight
        through (the straight-through estimator) where `weight` requires one."""
        if weight.numel() == 0:
            return weight.clone()
        values = self.parts(weight).dequantize()
        if self.rule != "fp8":
            values = blocks.from_blocks(values, blocks.matrix_shape(weight.shape, self.axis)[1])
        quantized = values.reshape(weight.shape).to(weight.dtype)
        return quantized + (weight - weight.detach()) if weight.requires_grad else quantized

    def fake_quantize_activation(self, x: torch.Tensor, amax: Optional[float] = None) -> torch.Tensor:
        """An activation `x` [batch, features..] in the format: FP8 with the static scale of a
        calibrated `amax` (per tensor), a block format with scales from `x` itself, blocks along
        each sample's features (NF4's too: one sample's blocks never mix with another's)."""
        if self.rule != "fp8":
            return replace(self, axis="rows").fake_quantize(x)
        if amax is None:
            raise ValueError(f"{self.name} activations take a calibrated amax (a static per-tensor scale)")
        assert isinstance(self.element, FloatElement)
        values = scaling.static(x.detach().to(torch.float64), self.element, amax).dequantize()
        quantized = values.to(x.dtype)
        return quantized + (x - x.detach()) if x.requires_grad else quantized


def _fp8(name: str, element: FloatElement) -> Format:
    return Format(name, element, "fp8", "per_tensor", "fp32", 32, summary=f"OCP FP8 {element.name.upper()}, fp32 scale")


def _mx(name: str, element: Element) -> Format:
    words = f"OCP MX v1.0 {name.upper()}: {element.name.upper()} elements, an E8M0 scale per 32 along each row"
    return Format(name, element, "mx", "per_block", "E8M0 (power of two)", 8, block=32, summary=words)


FORMATS: dict[str, Format] = {
    "fp8_e4m3": _fp8("fp8_e4m3", E4M3),
    "fp8_e5m2": _fp8("fp8_e5m2", E5M2),
    "mxfp8_e4m3": _mx("mxfp8_e4m3", E4M3),
    "mxfp8_e5m2": _mx("mxfp8_e5m2", E5M2),
    "mxfp6_e3m2": _mx("mxfp6_e3m2", E3M2),
    "mxfp6_e2m3": _mx("mxfp6_e2m3", E2M3),
    "mxfp4": _mx("mxfp4", E2M1),
    "mxint8": _mx("mxint8", INT8),
    "nvfp4": Format(
        name="nvfp4",
        element=E2M1,
        rule="nvfp4",
        granularity="per_block",
        scale="E4M3 per block, fp32 per tensor",
        scale_bits=8,
        block=16,
        tensor_scale_bits=32,
        summary="NVFP4: E2M1 elements, an E4M3 scale per 16 along each row and an fp32 scale per tensor",
    ),
    "nf4": Format(
        name="nf4",
        element=NF4,
        rule="nf4",
        granularity="per_block",
        scale="fp32 absmax",
        scale_bits=32,
        block=64,
        axis="flat",
        summary="QLoRA's NF4: 16 normal-float quantiles, an fp32 absmax per 64 of the flattened tensor",
    ),
}


def names() -> list[str]:
    """The registered formats' names, in the registry's order."""
    return list(FORMATS)


def get(name: str, granularity: Optional[str] = None) -> Format:
    """The format `name`; FP8 formats take `granularity` per_tensor (their default) or per_channel."""
    if name not in FORMATS:
        raise QuarlError(f"Unknown number format {name!r}: the formats are {', '.join(FORMATS)}.")
    fmt = FORMATS[name]
    if granularity is None or granularity == fmt.granularity:
        return fmt
    if fmt.rule == "fp8" and granularity == "per_channel":
        return replace(fmt, granularity=granularity)
    allowed = "per_tensor or per_channel" if fmt.rule == "fp8" else fmt.granularity
    raise QuarlError(f"Number format {name} takes granularity {allowed}, not {granularity!r}.")


FormatLike = Union[Format, str]


def resolve(fmt: FormatLike, granularity: Optional[str] = None) -> Format:
    """A `Format` given one or its name."""
    return get(fmt, granularity) if isinstance(fmt, str) else fmt


def fake_quantize(weight: torch.Tensor, fmt: FormatLike, granularity: Optional[str] = None) -> torch.Tensor:
    """`weight` quantized to `fmt` and dequantized (see `Format.fake_quantize`)."""
    return resolve(fmt, granularity).fake_quantize(weight)


def bits_per_weight(fmt: FormatLike, shape: Sequence[int], granularity: Optional[str] = None) -> float:
    """Storage bits per weight of a tensor of `shape` in `fmt`, every scale counted."""
    return resolve(fmt, granularity).bits_per_weight(shape)


def nbytes(fmt: FormatLike, shape: Sequence[int], granularity: Optional[str] = None) -> int:
    """Bytes of a tensor of `shape` in `fmt`, bit-packed."""
    return resolve(fmt, granularity).nbytes(shape)
