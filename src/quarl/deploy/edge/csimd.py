"""The C policy's weight layout for the Cortex-M4's DSP instructions (SXTB16, SMLAD, SMLALD), in the
style of CMSIS-NN's `arm_nn_vec_mat_mult_t_s8`; the kernels that read it are `ckernel`'s.

One 32-bit load of a row's weights gives, through SXTB16 and SXTB16 of it rotated by 8 bits, two
pairs of int16 weights: bytes 0 and 2, then bytes 1 and 3. The activations wait in RAM as the int16
pairs (a0, a2), (a1, a3) of every 4 (`ckernel`), so these meet without a permutation: a word of
`b`-bit weights holds 4 x 8/b of them, byte m holding in its b-bit slot j the weight 4j + m (8 bits:
the plain order). Slot j is moved to the top of each byte (a shift and a mask) and sign-extended
there: the weight times 2^(8-b), which every product carries, so the sum is shifted back exactly at
the end. Each row is padded with zero weights to whole words, and the rows are interleaved 4 at a
time, word by word, so one pointer (one LDM) walks 4 rows. int16 activations (16x8) take the same
layout with SMLALD's int64 sums. Integer sums do not depend on their order, so every path gives the
reference's accumulators bit for bit.
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


def group(weight_bits: int) -> int:
    """Weights per 32-bit word of a row: 4 x 8/b, with 4 x 8/b activations (int16 pairs, `ckernel`)."""
    return 4 * (8 // weight_bits)


def padded(n: int, weight_bits: int) -> int:
    """A row of n weights padded with zero weights to whole words."""
    g = group(weight_bits)
    return -(-n // g) * g


def row_words(n: int, weight_bits: int) -> int:
    """32-bit words of a row of n weights."""
    return padded(n, weight_bits) // group(weight_bits)


def _block(weight_bits: int) -> np.ndarray:
    """Within a word, the logical index of the weight at each stored position (byte m, slot j: 4j + m)."""
    per = 8 // weight_bits
    return np.arange(per * 4).reshape(per, 4).T.reshape(-1)


def order(n: int, weight_bits: int) -> np.ndarray:
    """The logical column stored at each position of a row of `n` weights padded to whole words (n and
    above: a zero weight)."""
    g = group(weight_bits)
    starts = np.arange(0, padded(n, weight_bits), g)
    return (starts[:, None] + _block(weight_bits)[None, :]).reshape(-1).astype(np.int64)


def layout(codes: np.ndarray, weight_bits: int) -> np.ndarray:
    """Each row of `codes` (rows x n) padded with zeros to whole words, in the SIMD layout, before packing."""
    codes = np.asarray(codes, dtype=np.int64)
    rows, n = codes.shape
    wide = np.zeros((rows, padded(n, weight_bits) + 1), dtype=np.int64)
    wide[:, :n] = codes
    return wide[:, np.minimum(order(n, weight_bits), n)]


def interleave(words: np.ndarray, rows: int = 4) -> np.ndarray:
    """Rows of 32-bit words (rows x k) as the kernel reads them: each full block of `rows` rows word by
    word (row 0's word 0, row 1's word 0, ..., row 0's word 1, ...), then the rows left one after another."""
    words = np.asarray(words)
    full = len(words) - len(words) % rows
    blocks = words[:full].reshape(-1, rows, words.shape[1]).transpose(0, 2, 1).reshape(-1)
    return np.concatenate([blocks, words[full:].reshape(-1)])


def layer_words(codes: np.ndarray, weight_bits: int, rows: int = 4) -> np.ndarray:
    """A layer's weight codes as the uint32 words the C policy stores (laid out, packed, interleaved)."""
    packed = np.ascontiguousarray(pack_weights(layout(codes, weight_bits), weight_bits))
    return interleave(packed.view("<u4").astype(np.uint32), rows)


PRELUDE = r"""
#if defined(__ARM_FEATURE_DSP) && defined(__ARM_FEATURE_SIMD32)
#include <arm_acle.h>
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
