"""Which of the C policy's layers requantize by SMMULR (`ckernel`), and the checks that keep it exact.

With gemmlowp's rounding and an accumulator proven to stay within +-2^30, a layer requantizes by one
SMMULR of its doubled accumulator and RoundingDivideByPOT by 2^e with the zero point in one add and
one shift (`fast_requantization`). Where the output channels' shifts differ and all shift right
(per-channel scales off a power-of-two grid), each channel's e rides in the low byte of its bias word,
(doubled bias << 16) | e, which an ARM register shift reads as it is (`ASR_BYTE`), and its constant
2^(e-1) + zp 2^e is ((2 zp + 1) << e) >> 1 (`shift_table`): one instruction more per output than one
shift for the layer on a Cortex-M4, and 1 byte more per output channel."""

from __future__ import annotations

import numpy as np

from quarl.deploy.edge.integer import Dense, IntegerPolicy
from quarl.errors import QuarlError

ASR_BYTE = r"""
#if defined(__GNUC__) && defined(__thumb2__)
/* x >> (<<) the low byte of n (a shift by a register reads the register's bottom byte) */
static inline int32_t asr_byte(int32_t x, int32_t n) {
    __asm__("asr %0, %0, %1" : "+r"(x) : "r"(n));
    return x;
}
static inline int32_t lsl_byte(int32_t x, int32_t n) {
    __asm__("lsl %0, %0, %1" : "+r"(x) : "r"(n));
    return x;
}
#elif defined(__GNUC__) && defined(__thumb__) && !defined(__ARM_ASM_SYNTAX_UNIFIED__)
static inline int32_t asr_byte(int32_t x, int32_t n) { /* Thumb-1: inline asm in divided syntax */
    __asm__("asr %0, %1" : "+l"(x) : "l"(n) : "cc");
    return x;
}
static inline int32_t lsl_byte(int32_t x, int32_t n) {
    __asm__("lsl %0, %1" : "+l"(x) : "l"(n) : "cc");
    return x;
}
#else
#define asr_byte(x, n) ((x) >> ((n) & 31)) /* the shifts are 1..30 */
#define lsl_byte(x, n) ((int32_t)((uint32_t)(x) << ((n) & 31)))
#endif
"""


def uniform(a: np.ndarray) -> bool:
    """Whether every element of a equals its first."""
    return bool(np.all(np.asarray(a) == np.asarray(a).reshape(-1)[0]))


def accumulator_bound(layer: Dense, bias: np.ndarray) -> int:
    """The largest |accumulator| (bias + dot product) any input codes can give, weights scaled as the
    kernel scales them (2^(8 - bits))."""
    codes = np.abs(layer.weight.astype(np.int64)).sum(axis=1) << (8 - layer.weight_bits)
    extreme = max(-int(layer.input.qmin), int(layer.input.qmax))
    return int(np.max(np.abs(bias) + extreme * codes))


def fast_requantization(policy: IntegerPolicy, layer: Dense, bias: np.ndarray) -> bool:
    """Whether the layer requantizes by SMMULR: int8 activations, gemmlowp's rounding, one shift for
    the layer or a right shift per output channel (`shift_table`), |2 (acc << left)| < 2^31 for every
    input, and each rounding constant within 2^30."""
    shifts = uniform(layer.shift) or shift_table(policy, layer, bias)
    if policy.activation_bits != 8 or policy.rounding != "gemmlowp" or not shifts:
        return False
    left, right = max(int(np.max(layer.shift)), 0), -np.minimum(np.asarray(layer.shift, dtype=np.int64), 0)
    if int(right.max()) > 30:
        return False
    constant = ((1 << right) >> 1) + (int(layer.output.zero_point) << right)
    small = bool(np.all(np.abs(constant) < 2**30))
    return accumulator_bound(layer, bias) << (left + 1) < 2**31 and small


def shift_table(policy: IntegerPolicy, layer: Dense, bias: np.ndarray) -> bool:
    """Whether the layer's SMMULR requantization reads its channels' right shifts from their bias words
    (`L{i}_BE`): shifts that differ, all below 0, a doubled bias within int16, in a policy of packed
    8-bit weights (a Huffman stream holds the shifts; 4-/2-bit weights keep their 3 B a channel, int16
    bias and int8 shift, as their flash is their point, and requantize by the runtime's `requantize`)."""
    if uniform(layer.shift) or policy.weight_coding == "huffman" or policy.weight_bits != 8:
        return False
    if int(np.max(layer.shift)) >= 0:
        return False
    return bool(np.all(np.abs(np.asarray(bias, dtype=np.int64) << 1) < 2**15))


def check_sums(layer: Dense, bias: np.ndarray, activation_bits: int) -> None:
    """The kernel's sums (weights scaled by 2^(8 - bits)) must stay within its accumulator."""
    if accumulator_bound(layer, bias) >= (2**31 if activation_bits == 8 else 2**47):
        raise QuarlError(
            f"{layer.name}'s accumulator could overflow: its bias or weights are too large for "
            f"int{activation_bits} activations."
        )
