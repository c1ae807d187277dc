"""The C policy's weight layout and dot products for the Cortex-M4's DSP instructions (SMLAD, SMLALD,
SXTB16), in the style of CMSIS-NN's `arm_nn_vec_mat_mult_t_s8`, and the portable C99 loop reading the
same layout.

One 32-bit load of a row's weights gives, through SXTB16 and SXTB16 of it rotated by 8 bits, two
pairs of int16 weights: bytes 0 and 2, then bytes 1 and 3. Each row's weights are laid out at export
so that these pairs meet the activation pairs the kernel forms, in groups of `group` weights (the
tail of a row, shorter than a group, stays in order):

- int8 activations, `b`-bit weights: the kernel loads 4 activations a word and expands them with the
  same SXTB16 pair, (a0, a2) and (a1, a3); a group is 4 x 8/b weights in 8/b words of activations.
  Byte m of the group's word holds, in its b-bit slot j, the weight 4j + m (8 bits: the plain order).
  Slot j is moved to the top of each byte (a shift and a mask) and sign-extended there: the weight
  times 2^(8-b), which every product carries, so the sum is shifted back exactly at the end;
- int16 activations (16x8, int8 weights): one word is the pair (a0, a1), so a group of 4 is stored
  as w0, w2, w1, w3 and SXTB16 gives (w0, w1), then (w2, w3); SMLALD accumulates in int64.

Integer sums do not depend on their order, so both paths give the reference's accumulators bit for
bit; the portable path reads each weight where the layout put it (`POS`).
"""

from __future__ import annotations

import numpy as np


def pack_weights(codes: np.ndarray, bits: int) -> np.ndarray:
    """Rows of `bits`-bit two's-complement codes packed into bytes, lowest bits first; each row padded
    to whole bytes (8 bits: the codes as uint8)."""
    codes = np.asarray(codes, dtype=np.int64)
    if bits == 8:
        return (codes & 0xFF).astype(np.uint8)
    per = 8 // bits
    rows, cols = codes.shape
    padded = np.zeros((rows, -(-cols // per) * per), dtype=np.int64)
    padded[:, :cols] = codes & ((1 << bits) - 1)
    groups = padded.reshape(rows, -1, per)
    packed = np.zeros(groups.shape[:2], dtype=np.int64)
    for k in range(per):
        packed |= groups[:, :, k] << (bits * k)
    return packed.astype(np.uint8)


def group(weight_bits: int, activation_bits: int) -> int:
    """Weights per group of the layout (one 32-bit word of weights)."""
    return 4 * (8 // weight_bits) if activation_bits == 8 else 4


def _block(weight_bits: int, activation_bits: int) -> np.ndarray:
    """Within a group, the logical index of the weight at each stored position."""
    shape = (8 // weight_bits, 4) if activation_bits == 8 else (2, 2)
    return np.arange(shape[0] * shape[1]).reshape(shape).T.reshape(-1)


def order(n: int, weight_bits: int, activation_bits: int) -> np.ndarray:
    """The logical column stored at each position of a row of `n` weights."""
    g = group(weight_bits, activation_bits)
    full = n - n % g
    block = _block(weight_bits, activation_bits)
    starts = np.arange(0, full, g)
    inside = (starts[:, None] + block[None, :]).reshape(-1)
    return np.concatenate([inside, np.arange(full, n)]).astype(np.int64)


def layout(codes: np.ndarray, weight_bits: int, activation_bits: int) -> np.ndarray:
    """Each row of `codes` (rows x n) in the SIMD layout, before packing."""
    codes = np.asarray(codes)
    return codes[:, order(codes.shape[1], weight_bits, activation_bits)]


def position_macro(weight_bits: int, activation_bits: int) -> str:
    """`POS(i)`: the stored position of a row's weight i within the full groups (the inverse of `order`)."""
    g = group(weight_bits, activation_bits)
    if activation_bits == 16:
        inner = "(((i) & 1) << 1) | (((i) >> 1) & 1)"
    elif weight_bits == 8:
        return "#define POS(i) (i)\n"
    else:
        per = 8 // weight_bits
        inner = f"(((i) & 3) * {per}) | (((i) >> 2) & {per - 1})"
    return f"#define POS(i) (((i) & ~{g - 1}) | {inner})\n"


PRELUDE = r"""
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
#include <arm_acle.h>
#include <string.h>
#define POLICY_SIMD 1
#else
#define POLICY_SIMD 0
#endif
#if POLICY_SIMD && defined(__GNUC__)
#define KERNEL __attribute__((noinline)) /* its own registers, not spilled into the caller's */
#else
#define KERNEL
#endif
"""

HELPERS = r"""
#if POLICY_SIMD
/* a 32-bit word from any address (the Cortex-M4 loads unaligned words) */
static uint32_t load32(const void *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* SXTB16 of x rotated by 8 bits: bytes 1 and 3 as int16 */
#if defined(__GNUC__)
static int16x2_t sxtb16_ror8(uint32_t x) {
    int16x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
#else
#define sxtb16_ror8(x) __sxtb16((int8x4_t)(((x) >> 8) | ((x) << 24)))
#endif
#endif
"""


def rows(activation_bits: int) -> int:
    """Output rows per kernel call (what the registers hold without spilling: the input pair is shared)."""
    return 2


def _simd_body(weight_bits: int, activation_bits: int) -> list[str]:
    """The loop body over one group: rows r0.. into s0.., then every pointer past the group."""
    n_rows = rows(activation_bits)
    lines: list[str] = []
    if activation_bits == 16:
        lines += ["const int16x2_t a = (int16x2_t)load32(x), b = (int16x2_t)load32(x + 2);", "uint32_t w;"]
        for k in range(n_rows):
            lines += [
                f"w = load32(r{k});",
                f"s{k} = __smlald(__sxtb16((int8x4_t)w), a, s{k});",
                f"s{k} = __smlald(sxtb16_ror8(w), b, s{k});",
            ]
    else:
        per = 8 // weight_bits
        top = {1: "", 2: "0xF0F0F0F0u", 4: "0xC0C0C0C0u"}[per]
        lines.append("uint32_t w;")
        for j in range(per):
            lines += [
                "{" if per > 1 else "{",
                f"    const uint32_t v = load32(x + {4 * j});",
                "    const int16x2_t a = __sxtb16((int8x4_t)v), b = sxtb16_ror8(v);",
            ]
            shift = 8 - weight_bits * (j + 1)
            for k in range(n_rows):
                if per == 1:
                    lines.append(f"    w = load32(r{k});")
                elif shift:
                    lines.append(f"    w = (load32(r{k}) << {shift}) & {top};")
                else:
                    lines.append(f"    w = load32(r{k}) & {top};")
                lines.append(f"    s{k} = __smlad(__sxtb16((int8x4_t)w), a, s{k});")
                lines.append(f"    s{k} = __smlad(sxtb16_ror8(w), b, s{k});")
            lines.append("}")
    lines.append(f"x += {group(weight_bits, activation_bits)};")
    lines += [f"r{k} += 4;" for k in range(n_rows)]
    return lines


def dot(weight_bits: int, activation_bits: int) -> str:
    """`dot`: `rows` rows' dot products with the input, on the DSP extension and in portable C."""
    n_rows = rows(activation_bits)
    acc = "int64_t" if activation_bits == 16 else "int32_t"
    body = "\n".join("            " + line for line in _simd_body(weight_bits, activation_bits))
    scaled = 8 - weight_bits if activation_bits == 8 else 0
    rs = ", ".join(f"*r{k} = {'row' if k == 0 else f'r{k - 1} + (rows > {k} ? stride : 0)'}" for k in range(n_rows))
    ss = ", ".join(f"s{k} = 0" for k in range(n_rows))
    shift = f" >> {scaled}" if scaled else ""
    stores = "\n".join(f"        sum[{k}] = s{k}{shift};" for k in range(n_rows))
    note = (
        f"        /* each product carried the weights' factor 2^{scaled}: the sums are its multiples */\n"
        if scaled
        else ""
    )
    mac = "SMLAD" if activation_bits == 8 else "SMLALD"
    return f"""
{position_macro(weight_bits, activation_bits)}#define GROUP {group(weight_bits, activation_bits)}
#define ROWS {n_rows}
{HELPERS}
/* the dot products of `rows` (1..ROWS) consecutive rows with the input into sum[0..rows-1]: the full
   groups by SXTB16 and {mac} on the Cortex-M4's DSP extension (extra rows repeat the last), else one
   weight at a time from where the layout put it; the tail of each row in order */
KERNEL static void dot(const weight_t *row, long stride, int rows, const act_t *in, int n, acc_t *sum) {{
    const int full = n - n % GROUP;
    int k, i;
#if POLICY_SIMD
    {{
        const weight_t {rs};
        const act_t *x = in, *end = in + full;
        {acc} {ss};
        while (x != end) {{
{body}
        }}
{note}{stores}
    }}
    (void)i;
#else
    for (k = 0; k < rows; ++k) {{
        const weight_t *r = row + k * stride;
        acc_t s = 0;
        for (i = 0; i < full; ++i) {{
            s += (acc_t)((int32_t)in[i] * WEIGHT(r, POS(i)));
        }}
        sum[k] = s;
    }}
#endif
    for (k = 0; k < rows; ++k) {{
        const weight_t *r = row + k * stride;
        for (i = full; i < n; ++i) {{
            sum[k] += (acc_t)((int32_t)in[i] * WEIGHT(r, i));
        }}
    }}
}}
"""
