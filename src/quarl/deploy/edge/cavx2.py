"""The C policy's host vector path (`ckernel`'s `dot4` and `dot1` under `POLICY_AVX2`): AVX2 dot products
of the portable path's plain int8 rows, where the host compiler targets AVX2.

`POLICY_AVX2` is 1 where the compiler defines `__AVX2__` on a core without the Cortex-M's DSP extension:
the host build adds `-mavx2` where its compiler and CPU have AVX2 (`host_vector`, a look at the
compiler's `-march=native` macros at build time); every other build, and every microcontroller's,
compiles the portable C of `ckernel` as before. Per 16 columns, the activations are loaded once
(int8 widened to int16 by VPMOVSXBW; int16 as they are) and each row's 16 int8 weights widened
likewise, then VPMADDWD multiplies the int16 pairs and adds each pair into an int32 lane: a pair of
int8 x int8 products is at most 2 x 128 x 128 = 2^15 in magnitude, of int16 x int8 ones 2^23, so no
lane saturates or wraps in a step (VPMADDUBSW, which saturates int16 pairs, is not used). The lanes
are summed by VPHADDD into one int32 per row: with int8 activations the whole sum stays within the
int32 accumulator the export proves (`ckernel.check_sums`), and int32 arithmetic wraps modulo 2^32,
so the sum is the portable kernel's exactly. With int16 activations the lanes are summed every
`BLOCK_16` columns (at most 256 x 2^22 = 2^30 in magnitude) into the int64 accumulators. The columns
past the last multiple of 16 follow one by one, as in the portable kernel."""

from __future__ import annotations

import functools
import logging
import subprocess

logger = logging.getLogger(__name__)

BLOCK_16 = 256  # columns of int16 activations summed in int32 lanes before the int64 accumulator
FLAGS = ["-mavx2"]  # what the host build adds where `host_vector` finds AVX2

PRELUDE = r"""
#if !POLICY_SIMD && defined(__AVX2__)
#include <immintrin.h>
#define POLICY_AVX2 1 /* the host's vector path (cavx2) */
#else
#define POLICY_AVX2 0
#endif
"""

HELPERS = r"""
#if POLICY_AVX2
/* the rows' 16 int8 weights at w times the 16 activations a (int16), summed in pairs into v's int32 lanes */
#define MADD16(v, w, a) \
    (v) = _mm256_add_epi32((v), _mm256_madd_epi16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w))), (a)))
/* 16 activations from x as int16 */
#define LOAD16(x) @LOAD16@
/* the sums of the 8 int32 lanes of v0..v3 (modulo 2^32) */
static inline __m128i hsum4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}
/* the sum of the 8 int32 lanes of v (modulo 2^32) */
static inline int32_t hsum1(__m256i v) {
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}
#endif
"""


def helpers(activation_bits: int) -> str:
    """`MADD16`, `LOAD16` (int8 activations widened, or int16 ones as they are) and the lane sums."""
    load = "_mm256_loadu_si256((const __m256i *)(x))"
    if activation_bits == 8:
        load = "_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x)))"
    return HELPERS.replace("@LOAD16@", load)


def dot(rows: int, activation_bits: int) -> str:
    """The AVX2 body of `dot{rows}` over n plain int8 weights per row (rows one after another) and the
    n activations at x, leaving the sums in s[0..rows-1] and returning the weights past the rows."""
    offsets = ["", " + n", *(f" + {k} * n" for k in range(2, rows))][:rows]
    zero = ", ".join(f"v{k} = _mm256_setzero_si256()" for k in range(rows))
    madds = "\n".join(f"            MADD16(v{k}, w{offsets[k]}, a);" for k in range(rows))
    if rows == 4:
        reduce = [
            "const __m128i t = hsum4(v0, v1, v2, v3);",
            *(f"s{k} += (acc_t)_mm_extract_epi32(t, {k});" for k in range(4)),
        ]
    else:
        reduce = ["s0 += (acc_t)hsum1(v0);"]
    reduced = "\n".join("        " + line for line in reduce)
    row = ["0", "n", *(f"{k} * n" for k in range(2, rows))]
    tail = "\n".join(f"        s{k} += w[{row[k]}] * a;" for k in range(rows))
    sums = ", ".join(f"s{k} = 0" for k in range(rows))
    stores = " ".join(f"s[{k}] = s{k};" for k in range(rows))
    after = f" + {rows - 1} * n" if rows > 1 else ""
    block = f"{BLOCK_16}" if activation_bits == 16 else "n"
    return f"""    const act_t *const last = x + (n - n % 16), *const end = x + n;
    acc_t {sums};
    while (x != last) {{ /* a block of columns in int32 lanes, then summed */
        const act_t *const stop = last - x > {block} ? x + {block} : last;
        __m256i {zero};
        for (; x != stop; x += 16, w += 16) {{
            const __m256i a = LOAD16(x);
{madds}
        }}
        {{
{reduced}
        }}
    }}
    for (; x != end; ++x, ++w) {{
        const int32_t a = *x;
{tail}
    }}
    {stores}
    return w{after};"""


@functools.lru_cache(maxsize=None)
def host_vector(cc: str) -> bool:
    """Whether the host compiler `cc` targets AVX2 on this CPU: `__AVX2__` among its `-march=native`
    macros (the compiler knows the flag and the CPU has the instructions)."""
    try:
        macros = subprocess.run(
            [cc, "-march=native", "-dM", "-E", "-"], input="", capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        logger.info("no AVX2 for the C policy: %s -march=native failed (%s)", cc, exc)
        return False
    found = macros.returncode == 0 and "#define __AVX2__ 1" in macros.stdout
    logger.info("the C policy's host build: %s", "AVX2 (-mavx2)" if found else "the portable path")
    return found


def requantize8(i: int, rows: int, shift: int, zero_point: int, multiplier: str, low: str, tanh: bool) -> str:
    """Layer i's outputs 0..rows - rows % 8 from the int32 sums in `sum`, 8 a step, as `ckernel`'s
    SMMULR path computes each (`output_function`): the sum doubled and shifted, the stored bias, the
    rounded high word of the product with the multiplier (VPMULDQ of the even and the odd lanes, 2^31
    added in 64 bits), RoundingDivideByPOT with the zero point, the clamp to [low, ACT_MAX], and the
    Tanh table (per lane) or the code; `multiplier` is a constant or the array L{i}_M."""
    left, right = max(shift, 0), max(-shift, 0)
    lanes = ", ".join(f"{{a}}[o + {k}]" for k in range(8))
    bias = f"_mm256_setr_epi32({lanes.format(a=f'L{i}_B')})"
    mult = (
        f"_mm256_set1_epi32({multiplier})"
        if multiplier.lstrip("-").isdigit()
        else f"_mm256_setr_epi32({lanes.format(a=multiplier)})"
    )
    if right:
        constant = (1 << (right - 1)) + (zero_point << right)
        rounded = (
            f"_mm256_srai_epi32(_mm256_add_epi32(_mm256_add_epi32(h, _mm256_srai_epi32(h, 31)), "
            f"_mm256_set1_epi32({constant})), {right})"
        )
    else:
        rounded = f"_mm256_add_epi32(h, _mm256_set1_epi32({zero_point}))"
    store = f"out[o + k] = L{i}_TANH[c[k] + 128];" if tanh else "out[o + k] = (act_t)c[k];"
    loaded = "_mm256_loadu_si256((const __m256i *)(sum + o))"
    clamped = f"_mm256_min_epi32(_mm256_max_epi32({rounded}, _mm256_set1_epi32({low})), _mm256_set1_epi32(ACT_MAX))"
    body = [
        f"const __m256i x = _mm256_add_epi32(_mm256_slli_epi32({loaded}, {left + 1}), {bias});",
        f"const __m256i m = {mult}, round = _mm256_set1_epi64x((int64_t)1 << 31);",
        "const __m256i even = _mm256_add_epi64(_mm256_mul_epi32(x, m), round);",
        "const __m256i odd = _mm256_add_epi64(",
        "    _mm256_mul_epi32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(m, 32)), round);",
        "const __m256i h = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);",
        "int32_t c[8];",
        "int k;",
        f"_mm256_storeu_si256((__m256i *)c, {clamped});",
        "for (k = 0; k < 8; ++k) {",
        f"    {store}",
        "}",
    ]
    lines = "\n".join("        " + line for line in body)
    return f"    for (o = 0; o < {rows - rows % 8}; o += 8) {{\n{lines}\n    }}\n"


def layer_loops(i: int, rows: int, cols: int, full: int, requantize: str) -> str:
    """Layer i's loops on the AVX2 path: every row's int32 sum into `sum` (4 rows a pass, then one by
    one), the outputs 8 a step (`requantize`, from `requantize8`), the rows left by `out{i}`."""
    left = rows - rows % 8
    loop4 = f"    for (o = 0; o < {full}; o += 4) {{\n        w = dot4(w, in, {cols}, sum + o);\n    }}\n"
    loop1 = f"    for (o = {full}; o < {rows}; ++o) {{\n        w = dot1(w, in, {cols}, sum + o);\n    }}\n"
    rest = f"    for (o = {left}; o < {rows}; ++o) {{\n        set_act(out, o, out{i}(sum[o], o, 0));\n    }}\n"
    return (
        f"    acc_t sum[{rows}];\n    (void)s;\n"
        + (loop4 if full else "")
        + (loop1 if rows > full else "")
        + (requantize if left else "")
        + (rest if rows > left else "")
    )
