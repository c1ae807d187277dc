"""Element types of the low-precision formats and rounding onto their grids (vectorized torch).

Every rounding is round-to-nearest, ties to even, onto the element's grid, subnormals included, and
saturating: a value beyond the largest finite element (infinity too) becomes that element with the
value's sign (the OCP MX v1.0 conversion, section 6.3: "clamping normal numbers to max"). NaN stays
NaN (the block formats carry it in their scale), and a zero keeps its sign.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Union

import torch


@dataclass(frozen=True)
class FloatElement:
    """A binary floating-point element: 1 sign bit, `ebits` exponent bits, `mbits` mantissa bits."""

    name: str
    ebits: int
    mbits: int
    bias: int
    max: float  # the largest finite value
    has_inf: bool
    has_nan: bool
    ml_dtype: str  # the ml_dtypes type with the same values (the tests' reference)

    @property
    def bits(self) -> int:
        return 1 + self.ebits + self.mbits

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal value (subnormals share its quantum)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Exponent of the largest normal value (the MX spec's emax_elem)."""
        return math.floor(math.log2(self.max))

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """`x` rounded to the nearest element, ties to even, saturating to +-`max`."""
        magnitude = x.abs().clamp(max=self.max)  # rounding is monotone and max is on the grid
        _, exponent = torch.frexp(magnitude)  # magnitude = m * 2^exponent, m in [0.5, 1)
        exponent = torch.clamp(exponent - 1, min=self.emin)  # floor(log2); subnormals share emin
        quantum = torch.exp2((exponent - self.mbits).to(x.dtype))
        return torch.copysign(torch.round(magnitude / quantum) * quantum, x)


@dataclass(frozen=True)
class IntElement:
    """A two's complement integer element with `frac_bits` fractional bits (an implicit scale of
    2^-frac_bits), saturating symmetrically to +-(2^(bits-1) - 1) codes: the code -2^(bits-1) is
    never produced (as in Microsoft's MX reference library)."""

    name: str
    bits: int
    frac_bits: int

    @property
    def max(self) -> float:
        return (2 ** (self.bits - 1) - 1) / 2**self.frac_bits

    @property
    def emax(self) -> int:
        """Exponent of the largest power of two within range (0 for MXINT8, whose max is 1 63/64)."""
        return math.floor(math.log2(self.max))

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """`x` rounded to the nearest multiple of 2^-frac_bits, ties to even, saturating to +-`max`."""
        step = 2.0**self.frac_bits
        top = 2 ** (self.bits - 1) - 1
        return torch.copysign(torch.clamp(torch.round(x * step), -top, top) / step, x)


@dataclass(frozen=True)
class TableElement:
    """An element that indexes a table of values (NF4's 16 normal-float quantiles in [-1, 1])."""

    name: str
    values: tuple[float, ...]  # ascending

    @property
    def bits(self) -> int:
        return math.ceil(math.log2(len(self.values)))

    @property
    def max(self) -> float:
        return max(abs(v) for v in self.values)

    @property
    def emax(self) -> int:
        return math.floor(math.log2(self.max))

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """The table value nearest `x`; an exact midpoint goes to the lower value (bitsandbytes'
        `x > midpoint` comparisons), and outside the table's range to its end."""
        table = torch.tensor(self.values, dtype=torch.float64, device=x.device)
        midpoints = ((table[:-1] + table[1:]) / 2).to(x.dtype)
        nearest = table.to(x.dtype)[torch.bucketize(x, midpoints)]
        return torch.where(torch.isnan(x), x, nearest)


Element = Union[FloatElement, IntElement, TableElement]

# OCP 8-bit Floating Point v1.0: E4M3 has no infinities and one NaN (S.1111.111), so 448 is its max;
# E5M2 is IEEE-like (infinities, NaNs, max 57344).
E4M3 = FloatElement("e4m3", 4, 3, 7, 448.0, has_inf=False, has_nan=True, ml_dtype="float8_e4m3fn")
E5M2 = FloatElement("e5m2", 5, 2, 15, 57344.0, has_inf=True, has_nan=True, ml_dtype="float8_e5m2")
# OCP MX v1.0 section 5.3: FP6 and FP4 have neither infinities nor NaN.
E3M2 = FloatElement("e3m2", 3, 2, 3, 28.0, has_inf=False, has_nan=False, ml_dtype="float6_e3m2fn")
E2M3 = FloatElement("e2m3", 2, 3, 1, 7.5, has_inf=False, has_nan=False, ml_dtype="float6_e2m3fn")
E2M1 = FloatElement("e2m1", 2, 1, 1, 6.0, has_inf=False, has_nan=False, ml_dtype="float4_e2m1fn")
# OCP MX v1.0 section 5.3.3: MXINT8's elements are 8-bit two's complement with 6 fractional bits.
INT8 = IntElement("int8", 8, 6)
#: QLoRA's NF4 (bitsandbytes' table): the normal distribution's quantiles, normalized to [-1, 1].
NF4 = TableElement(
    "nf4",
    (
        -1.0,
        -0.6961928009986877,
        -0.5250730514526367,
        -0.39491748809814453,
        -0.28444138169288635,
        -0.18477343022823334,
        -0.09105003625154495,
        0.0,
        0.07958029955625534,
        0.16093020141124725,
        0.24611230194568634,
        0.33791524171829224,
        0.44070982933044434,
        0.5626170039176941,
        0.7229568362236023,
        1.0,
    ),
)
FLOAT_ELEMENTS = (E4M3, E5M2, E3M2, E2M3, E2M1)

E8M0_MIN, E8M0_MAX = -127, 127  # the exponents of E8M0's powers of two (0xFF is its NaN)
