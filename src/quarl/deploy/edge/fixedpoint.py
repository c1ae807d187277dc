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


# --- int16 activations (TFLite's 16x8 scheme) -------------------------------------------------------


def multiply_by_quantized_multiplier_int64(x: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier for an int64 accumulator (its 16x8 kernels, in every
    runtime): the multiplier cut to 16 bits, then one rounding, ties upward."""
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, np.int64(0x7FFF))
    total = 15 - np.asarray(shift, dtype=np.int64)
    return (np.asarray(x, dtype=np.int64) * reduced + (np.int64(1) << (total - 1))) >> total


#: TFLite's sigmoid(i / 24) in unsigned 0.16 fixed point, i = 0..255: the table its int16 TANH and
#: LOGISTIC interpolate (the same bytes in LiteRT, TFLite Micro and CMSIS-NN)
SIGMOID_TABLE_UINT16 = np.array(
    [
        32768,
        33451,
        34133,
        34813,
        35493,
        36169,
        36843,
        37513,
        38180,
        38841,
        39498,
        40149,
        40794,
        41432,
        42064,
        42688,
        43304,
        43912,
        44511,
        45102,
        45683,
        46255,
        46817,
        47369,
        47911,
        48443,
        48964,
        49475,
        49975,
        50464,
        50942,
        51409,
        51865,
        52311,
        52745,
        53169,
        53581,
        53983,
        54374,
        54755,
        55125,
        55485,
        55834,
        56174,
        56503,
        56823,
        57133,
        57433,
        57724,
        58007,
        58280,
        58544,
        58800,
        59048,
        59288,
        59519,
        59743,
        59959,
        60168,
        60370,
        60565,
        60753,
        60935,
        61110,
        61279,
        61441,
        61599,
        61750,
        61896,
        62036,
        62172,
        62302,
        62428,
        62549,
        62666,
        62778,
        62886,
        62990,
        63090,
        63186,
        63279,
        63368,
        63454,
        63536,
        63615,
        63691,
        63765,
        63835,
        63903,
        63968,
        64030,
        64090,
        64148,
        64204,
        64257,
        64308,
        64357,
        64405,
        64450,
        64494,
        64536,
        64576,
        64614,
        64652,
        64687,
        64721,
        64754,
        64786,
        64816,
        64845,
        64873,
        64900,
        64926,
        64950,
        64974,
        64997,
        65019,
        65039,
        65060,
        65079,
        65097,
        65115,
        65132,
        65149,
        65164,
        65179,
        65194,
        65208,
        65221,
        65234,
        65246,
        65258,
        65269,
        65280,
        65291,
        65301,
        65310,
        65319,
        65328,
        65337,
        65345,
        65352,
        65360,
        65367,
        65374,
        65381,
        65387,
        65393,
        65399,
        65404,
        65410,
        65415,
        65420,
        65425,
        65429,
        65433,
        65438,
        65442,
        65445,
        65449,
        65453,
        65456,
        65459,
        65462,
        65465,
        65468,
        65471,
        65474,
        65476,
        65479,
        65481,
        65483,
        65485,
        65488,
        65489,
        65491,
        65493,
        65495,
        65497,
        65498,
        65500,
        65501,
        65503,
        65504,
        65505,
        65507,
        65508,
        65509,
        65510,
        65511,
        65512,
        65513,
        65514,
        65515,
        65516,
        65517,
        65517,
        65518,
        65519,
        65520,
        65520,
        65521,
        65522,
        65522,
        65523,
        65523,
        65524,
        65524,
        65525,
        65525,
        65526,
        65526,
        65526,
        65527,
        65527,
        65528,
        65528,
        65528,
        65529,
        65529,
        65529,
        65529,
        65530,
        65530,
        65530,
        65530,
        65531,
        65531,
        65531,
        65531,
        65531,
        65532,
        65532,
        65532,
        65532,
        65532,
        65532,
        65533,
        65533,
        65533,
        65533,
        65533,
        65533,
        65533,
        65533,
        65534,
        65534,
        65534,
        65534,
        65534,
        65534,
        65534,
        65534,
        65534,
        65534,
        65535,
    ],
    dtype=np.int64,
)


def tanh_int16_params(input_scale: float) -> tuple[int, int]:
    """TFLite's int16 TANH preparation for a general (not power-of-two) input scale: the multiplier
    and left shift that bring the input to units of 1 / (3 * 4096), the multiplier in [2^14, 2^15)."""
    multiplier = float(np.float32(input_scale)) * 4096.0 * 3.0
    left_shift = 0
    while multiplier <= 32767.0 / 2.0 and left_shift <= 30:
        left_shift += 1
        multiplier *= 2.0
    return int(multiplier), left_shift


def tanh_int16(q: np.ndarray, multiplier: int, left_shift: int) -> np.ndarray:
    """TFLite's int16 TANH (output scale 1/32768): tanh(x) = 2 sigmoid(2x) - 1, the sigmoid table
    interpolated linearly between entries in 24-bit fixed point."""
    x = np.asarray(q, dtype=np.int64)
    rounding = (1 << (left_shift - 1)) if left_shift > 0 else 0
    scaled = (x * multiplier + rounding) >> left_shift
    magnitude = np.abs(scaled)
    high = np.minimum(magnitude >> 8, 254)
    low_entry, high_entry = SIGMOID_TABLE_UINT16[high], SIGMOID_TABLE_UINT16[high + 1]
    interpolated = (low_entry << 8) + (magnitude & 0xFF) * (high_entry - low_entry)
    result = np.where(magnitude >> 8 >= 255, np.int64(0xFFFF << 8), interpolated)
    result = np.where(scaled >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1)
    return (result >> 8).astype(np.int16)


def requantize_in_double(x: np.ndarray, real: np.ndarray) -> np.ndarray:
    """LiteRT's 16x8 requantization (its builtin and reference kernels, measured): the int64
    accumulator times the real multiplier (input scale x weight scale / output scale) in float64,
    rounded half away from zero. It parts from TFLite Micro's only where the product is within about
    1e-9 of a half (1 output in 10^5 of a Pendulum policy)."""
    product = np.asarray(x, dtype=np.int64).astype(np.float64) * np.asarray(real, dtype=np.float64)
    return round_half_away(np.clip(product, -(2.0**40), 2.0**40)).astype(np.int64)


#: the roundings (keys of ROUNDINGS) whose 16x8 kernels requantize in float64 (`requantize_in_double`):
#: LiteRT's; TFLite Micro's (and the C policy's default, "gemmlowp") cut the multiplier to 16 bits
#: (`multiply_by_quantized_multiplier_int64`)
DOUBLE_16X8 = ("ruy", "single")
