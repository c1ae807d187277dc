"""TFLite's fixed-point arithmetic in numpy, exactly as its int8 kernels compute it.

Every full-integer target (LiteRT, TFLite Micro, CMSIS-NN's double-rounding path, quarl's C policy)
requantizes an int32 accumulator to int8 this way:

    out = RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc * 2^left, M), right) + zero_point

with M and the shift from `quantize_multiplier(real_multiplier)` (TFLite's QuantizeMultiplier):
gemmlowp's SaturatingRoundingDoublingHighMul rounds the high half of the doubled 64-bit product to
nearest (ties upward: its nudge and C's truncating division) and RoundingDivideByPOT divides by a
power of two rounding to nearest (ties away from zero). Rounding twice, a product can land one away
from the nearest integer (5 x 0.25 gives 2): that is TFLite's arithmetic, so it is the reference's.
The functions work on int64 arrays holding int32 values.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (C's `round`, TFLite's TfLiteRound), for
    float32 or float64 values: exact, since a float32 value plus 0.5 is exact in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    return np.trunc(x64 + np.copysign(0.5, x64))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: (M, shift) with real ~= M * 2^(shift - 31), M in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"a requantization multiplier must be finite and positive, not {real}")
    q, shift = math.frexp(real)
    q_fixed = int(round_half_away(np.float64(q * (1 << 31))))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:  # every bit shifted out: TFLite uses a zero multiplier instead
        return 0, 0
    if shift > 30:  # TFLite saturates (single-rounding kernels cannot shift further)
        return INT32_MAX, 30
    return q_fixed, shift


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of int64 values to int32 (as an int32 multiply in C)."""
    return ((np.asarray(x, dtype=np.int64) + 2**31) % 2**32) - 2**31


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul on int32 values held in int64 arrays."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    overflow = (a == b) & (a == INT32_MIN)
    ab = a * b
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    num = ab + nudge
    high = np.where(num >= 0, num >> 31, -((-num) >> 31))  # C's division by 2^31: toward zero
    return np.where(overflow, np.int64(INT32_MAX), high)


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero."""
    x, exponent = np.asarray(x, dtype=np.int64), np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding), broadcast over the last axis."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = wrap_int32(np.asarray(x, dtype=np.int64) * (np.int64(1) << left))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_ruy(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """ruy's requantization (LiteRT's optimized CPU kernels, no delegate): SaturatingRoundingDoublingHighMul,
    then a rounding right shift with ties upward ((h + 2^(right-1)) >> right), not away from zero."""
    shift = np.asarray(shift, dtype=np.int64)
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    high = saturating_rounding_doubling_high_mul(wrap_int32(np.asarray(x, dtype=np.int64) << left), multiplier)
    half = np.where(right > 0, np.int64(1) << np.maximum(right - 1, 0), np.int64(0))
    return (high + half) >> right


def multiply_by_quantized_multiplier_single(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier built with TFLITE_SINGLE_ROUNDING (LiteRT's reference
    kernels): (x * M + 2^(30 - shift)) >> (31 - shift), one rounding, ties upward."""
    total = 31 - np.asarray(shift, dtype=np.int64)
    product = np.asarray(x, dtype=np.int64) * np.asarray(multiplier, dtype=np.int64)
    return (product + (np.int64(1) << (total - 1))) >> total


#: the requantization of each family of int8 kernels; they differ only where a product falls on (or,
#: rounded twice, next to) a tie, a few outputs in ten thousand
ROUNDINGS = {
    "gemmlowp": multiply_by_quantized_multiplier,  # TFLite Micro, CMSIS-NN's default, quarl's C policy
    "ruy": multiply_by_quantized_multiplier_ruy,  # LiteRT's builtin optimized kernels (ai-edge-litert)
    "single": multiply_by_quantized_multiplier_single,  # TFLITE_SINGLE_ROUNDING: LiteRT's reference kernels
}
