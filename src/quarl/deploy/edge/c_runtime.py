"""The C functions and templates a generated policy (`quarl.deploy.edge.cgen`) is made of: TFLite's
requantizations (one per runtime family, for int32 and int64 accumulators), the input quantization,
the Huffman stream's decoder, the Tanh of int16 activations, each computing exactly what
`quarl.deploy.edge.fixedpoint` and `quarl.deploy.edge.integer` compute in numpy (the layers
themselves are `quarl.deploy.edge.ckernel`'s)."""

from __future__ import annotations

REQUANTIZE = {
    "gemmlowp": r"""/* TFLite's MultiplyByQuantizedMultiplier (gemmlowp's double rounding, as TFLite Micro) */
static int32_t requantize(int32_t acc, int32_t multiplier, int shift) {
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    return rdbpot(srdhm((int32_t)((uint32_t)acc << left), multiplier), right);
}
""",
    "ruy": r"""/* ruy's requantization (LiteRT's builtin kernels): the rounding shift's ties go upward */
static int32_t requantize(int32_t acc, int32_t multiplier, int shift) {
    const int left = shift > 0 ? shift : 0;
    const int right = shift > 0 ? 0 : -shift;
    const int32_t high = srdhm((int32_t)((uint32_t)acc << left), multiplier);
    (void)rdbpot;
    if (right == 0) {
        return high;
    }
    return (int32_t)(((int64_t)high + ((int64_t)1 << (right - 1))) >> right);
}
""",
    "single": r"""/* TFLite's MultiplyByQuantizedMultiplier with TFLITE_SINGLE_ROUNDING (LiteRT's reference kernels) */
static int32_t requantize(int32_t acc, int32_t multiplier, int shift) {
    const int total = 31 - shift;
    (void)rdbpot;
    (void)srdhm;
    return (int32_t)(((int64_t)acc * multiplier + ((int64_t)1 << (total - 1))) >> total);
}
""",
}

REDUCED_64 = r"""/* TFLite's MultiplyByQuantizedMultiplier of an int64 accumulator (TFLite Micro's 16x8 kernels):
   the multiplier cut to 16 bits, one rounding, ties upward */
static int32_t requantize(int64_t acc, int32_t multiplier, int shift) {
    const int64_t reduced = multiplier < 0x7FFF0000 ? ((int64_t)multiplier + (1 << 15)) >> 16 : 0x7FFF;
    const int total = 15 - shift;
    (void)rdbpot;
    (void)srdhm;
    return (int32_t)((acc * reduced + ((int64_t)1 << (total - 1))) >> total);
}
"""

DOUBLE_64 = r"""/* LiteRT's 16x8 requantization: the accumulator times the real multiplier in double, rounded half
   away from zero (2v is exact and truncates to 2n or 2n + 1) */
static int32_t requantize(double v) {
    int64_t t;
    (void)rdbpot;
    (void)srdhm;
    if (v > 1099511627776.0) {
        v = 1099511627776.0;
    }
    if (v < -1099511627776.0) {
        v = -1099511627776.0;
    }
    t = (int64_t)(v + v);
    t = (t + (t > 0) - (t < 0)) / 2;
    return t > I32_MAX ? I32_MAX : (t < I32_MIN ? I32_MIN : (int32_t)t);
}
"""

REQUANTIZE_16X8 = {"gemmlowp": REDUCED_64, "ruy": DOUBLE_64, "single": DOUBLE_64}

RUNTIME = r"""
/* gemmlowp's SaturatingRoundingDoublingHighMul: (ab + nudge) / 2^31 truncated toward zero with
   nudge 2^30 (ab >= 0) or 1 - 2^30 (ab < 0), which is floor((ab + 2^30) / 2^31) either way */
static int32_t srdhm(int32_t a, int32_t b) {
    if (a == b && a == I32_MIN) {
        return I32_MAX;
    }
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 30)) >> 31);
}

/* gemmlowp's RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero: floor((x' / 2^(e-1)
   + 1) / 2) with x' = x - 1 for negative x (x > I32_MIN: srdhm's results are) */
static int32_t rdbpot(int32_t x, int e) {
    if (e == 0) {
        return x;
    }
    return (((x + (x >> 31)) >> (e - 1)) + 1) >> 1;
}

@REQUANTIZE@"""

#: NaN and infinite observations saturate to the input codes (docs/edge.md) only under IEEE float
#: semantics; fast math lets the compiler assume neither occurs, and the policy then acts otherwise
IEEE_ONLY = r"""
#if defined(__FAST_MATH__) || (defined(__FINITE_MATH_ONLY__) && __FINITE_MATH_ONLY__)
#error "NaN and infinite inputs need IEEE floats (docs/edge.md): build without -ffast-math, -Ofast, -ffinite-math-only"
#endif
"""

QUANTIZE = r"""
/* clamp(round half away from zero (v)) to act_t, without libm: 2v is exact and truncates to 2n or
   2n + 1 (n = trunc(v)), so (t + sign(t)) / 2 rounds half away; NaN enters as ACT_MIN */
static act_t quantize(float v) {
    int32_t t;
    if (!(v > ACT_MIN - 0.5f)) {
        return (act_t)ACT_MIN;
    }
    if (v >= ACT_MAX + 0.5f) {
        return (act_t)ACT_MAX;
    }
    t = (int32_t)(v + v);
    return (act_t)((t + (t > 0) - (t < 0)) / 2);
}
"""

QUANTIZE_EVEN = r"""
/* as quantize, but a tie (2v an odd integer) goes to the even neighbour: LiteRT's builtin QUANTIZE
   on its blocks of 8 features */
static act_t quantize_even(float v) {
    int32_t t, n;
    if (!(v > ACT_MIN - 0.5f) || v >= ACT_MAX + 0.5f) {
        return quantize(v);
    }
    t = (int32_t)(v + v);
    n = t / 2;
    if ((float)t == v + v && t != 2 * n && n % 2 == 0) {
        return (act_t)n;
    }
    return quantize(v);
}
"""


HUFFMAN_READER = r"""
/* the stream (cstream) is read in order: every row's weights start where the last read ended;
   policy_act rewinds it. Its next bits wait in bit_buf, the first at bit 0 */
static uint32_t bit_buf;
static int bit_count;
static const uint8_t *bit_next;

/* the stream's next value: canonical Huffman decoding (quarl.deploy.edge.huffman), a code of up to
   HUFF_LUT_BITS bits by one look-up of the next bits in HUFF_LUT ((length << 8) | symbol), a longer
   one bit by bit (its bits most significant first); STREAM is padded so the buffer may read ahead */
static int32_t next_value(const uint8_t *stream) {
    uint32_t entry;
    int32_t word = 0, first = 0, index = 0, count;
    int length = 0;
    (void)stream;
    while (bit_count <= 24) {
        bit_buf |= (uint32_t)*bit_next++ << bit_count;
        bit_count += 8;
    }
    entry = HUFF_LUT[bit_buf & ((1u << HUFF_LUT_BITS) - 1)];
    if (entry != 0) {
        bit_buf >>= entry >> 8;
        bit_count -= (int)(entry >> 8);
        return (int32_t)((entry & 0xFF) ^ 0x80) - 0x80;
    }
    for (;;) {
        if (bit_count == 0) {
            bit_buf = *bit_next++;
            bit_count = 8;
        }
        word |= (int32_t)(bit_buf & 1);
        bit_buf >>= 1;
        --bit_count;
        count = HUFF_COUNT[++length];
        if (word - first < count) {
            return HUFF_SYMBOL[index + word - first];
        }
        index += count;
        first = (first + count) << 1;
        word <<= 1;
    }
}
"""

STREAM_TABLE = r"""
/* the Tanh table of the layer starting, by code + 128, from the steps of its odd half (codes 1..127,
   then the magnitude at -128) */
static int8_t TANH[256];
static void read_table(void) {
    int32_t v = 0;
    int q;
    for (q = 1; q < 128; ++q) {
        v += next_value(STREAM);
        TANH[128 + q] = (int8_t)v;
        TANH[128 - q] = (int8_t)-v;
    }
    TANH[0] = (int8_t)-(v + next_value(STREAM));
}
"""

TANH16 = r"""
/* TFLite's int16 TANH (output scale 1/32768): tanh(x) = 2 sigmoid(2x) - 1, the sigmoid table
   interpolated in 24-bit fixed point */
static int16_t tanh16(int32_t q, int32_t multiplier, int left_shift) {
    const int32_t round = left_shift > 0 ? (int32_t)1 << (left_shift - 1) : 0;
    const int32_t x = (q * multiplier + round) >> left_shift;
    const uint32_t magnitude = (uint32_t)(x >= 0 ? x : -x);
    const uint32_t high = magnitude >> 8;
    int32_t result;
    if (high >= 255) {
        result = 0xFFFF << 8;
    } else {
        const uint32_t a = SIGMOID[high], b = SIGMOID[high + 1];
        result = (int32_t)((a << 8) + (magnitude & 0xFF) * (b - a));
    }
    result = x >= 0 ? result - (1 << 23) + (1 << 7) : -result + (1 << 23) + (1 << 7) - 1;
    return (int16_t)(result >> 8);
}
"""

ROW_SHIFT = "static int32_t row_shift[ROWS]; /* the shifts of the rows being computed, from the layer's first */\n"

DECODE_ROW = r"""
/* the weights of the rows being computed, decoded: row k of `rows` interleaved word by word (ckernel) */
static uint32_t rows_w[ROWS * ROW_WORDS];

/* the next row's n weights from the stream into row k of a pass of `rows` rows in rows_w, padded with
   zeros to whole words: the bit buffer in registers, a code longer than HUFF_LUT_BITS through next_value */
KERNEL static void decode_row(int k, int rows, int n) {
    int8_t *const w = (int8_t *)rows_w;
    uint32_t buf = bit_buf;
    int count = bit_count, i;
    const uint8_t *next = bit_next;
    for (i = 0; i < n; ++i) {
        uint32_t entry;
        int32_t v;
        while (count <= 24) {
            buf |= (uint32_t)*next++ << count;
            count += 8;
        }
        entry = HUFF_LUT[buf & ((1u << HUFF_LUT_BITS) - 1)];
        if (entry != 0) {
            buf >>= entry >> 8;
            count -= (int)(entry >> 8);
            v = (int32_t)((entry & 0xFF) ^ 0x80) - 0x80;
        } else {
            bit_buf = buf;
            bit_count = count;
            bit_next = next;
            v = next_value(STREAM);
            buf = bit_buf;
            count = bit_count;
            next = bit_next;
        }
        w[((i >> 2) * rows + k) * 4 + (i & 3)] = (int8_t)v;
    }
    for (; (i & 3) != 0; ++i) {
        w[((i >> 2) * rows + k) * 4 + (i & 3)] = 0;
    }
    bit_buf = buf;
    bit_count = count;
    bit_next = next;
}
"""
