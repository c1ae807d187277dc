"""The Huffman-coded C policy's table-driven form (`weight_coding="huffman"`, int8 activations): the
weight codes and shifts coded in pairs of int8 values, one canonical code over the pairs, and every
pair decoded by one look-up straight into the dot product.

A pair is what one SMLAD multiplies: the weights (w0, w2) or (w1, w3) of a row's word of 4, meeting
the activation pairs (a0, a2) and (a1, a3) (`ckernel`). No code is longer than the table's K bits
(`huffman.limited_code`; K chosen at export, the fewest bytes of table and stream), so one look-up of
the stream's next K bits in `HUFF.lut` decodes a pair: its entry holds the code's length (byte 0),
the pair's first value (byte 1) and its second (byte 3). On the Cortex-M4 (`PAIR_ASM`) a pair is
UBFX, LDR, LSR of the bit buffer by the entry, UXTAB of the length into the position, SXTB16 of the
entry rotated by 8 and SMLAD: 6 instructions, and one unaligned word load (4 instructions) refills the
buffer every 25 // K pairs. Nothing is decoded into RAM: the Tanh tables stay whole in flash (256 B
each, as the packed policy's: decoding them per call cost more instructions than they save bytes).
The portable C99 path reads the same stream a pair at a time.

The stream's order, per layer: per pass of 4 rows the shifts' differences from the layer's first
((d0, d1), (d2, d3), where they vary), and per word column, per row, (w0, w2) and (w1, w3); then the
rows left one by one, each with (d, 0) and its columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Optional

import numpy as np

from quarl.deploy.edge import c_runtime, ckernel, csimd, cstream, huffman
from quarl.deploy.edge.integer import Dense, IntegerPolicy
from quarl.errors import QuarlError

ROWS = 4  # rows per kernel pass (ckernel.ROWS)
MAX_LUT_BITS = 10  # a longer table (4 KB) outweighs the stream: the one-value code (cstream) is used
WINDOW = 25  # bits a refill leaves in the buffer at least (an unaligned word shifted by up to 7)
PAD = 4  # zero bytes after the stream: a refill reads a word from the position's byte


@dataclass(frozen=True)
class PairCode:
    """The pair stream: its canonical code (symbols: `key`s), the look-up bits and the stream's bytes."""

    code: huffman.CanonicalCode
    bits: int
    stream: np.ndarray
    pairs: int

    @property
    def per_refill(self) -> int:
        """Pairs decoded from one refill of the bit buffer."""
        return WINDOW // self.bits

    def table(self) -> np.ndarray:
        """HUFF.lut: for the stream's next `bits` bits, length | first << 8 | second << 24."""
        return lookup(self.code, self.bits)


def key(pairs: np.ndarray) -> np.ndarray:
    """A pair of int8 values as one symbol: first & 0xFF | (second & 0xFF) << 8."""
    pairs = np.asarray(pairs, dtype=np.int64)
    return (pairs[:, 0] & 0xFF) | ((pairs[:, 1] & 0xFF) << 8)


def _layer_pairs(layer: Dense, vary: bool) -> list[np.ndarray]:
    rows, cols = layer.weight.shape
    words = csimd.row_words(cols, 8)
    codes = np.zeros((rows, 4 * words), dtype=np.int64)
    codes[:, :cols] = layer.weight
    grid = codes.reshape(rows, words, 4)
    per = np.stack([grid[:, :, [0, 2]], grid[:, :, [1, 3]]], axis=2)  # rows, words, 2 pairs, 2 values
    delta = layer.shift.astype(np.int64) - int(layer.shift[0])
    full = rows - rows % ROWS
    parts: list[np.ndarray] = []
    for o in range(0, full, ROWS):
        if vary:
            parts.append(delta[o : o + ROWS].reshape(2, 2))
        parts.append(per[o : o + ROWS].transpose(1, 0, 2, 3).reshape(-1, 2))  # per column, per row
    for o in range(full, rows):
        if vary:
            parts.append(np.array([[delta[o], 0]]))
        parts.append(per[o].reshape(-1, 2))
    return parts


def pairs(policy: IntegerPolicy) -> np.ndarray:
    """Every pair of the stream (n x 2), in the order the C policy reads them."""
    parts: list[np.ndarray] = []
    for layer in policy.layers:
        parts += _layer_pairs(layer, cstream.shifts_read(policy) and cstream.shift_varies(layer))
    out = np.concatenate(parts).astype(np.int64)
    if out.min() < -128 or out.max() > 127:
        raise QuarlError("A value of the C policy's stream does not fit int8: use weight_coding=packed.")
    return out


def lookup(code: huffman.CanonicalCode, bits: int) -> np.ndarray:
    """The table of the next `bits` bits (the first at bit 0): every index starting with a pair's
    (reversed) code holds length | first << 8 | second << 24; a code longer than `bits` is an error."""
    table = np.zeros(1 << bits, dtype=np.uint32)
    for symbol, (word, length) in code.codebook().items():
        if length > bits:
            raise ValueError(f"a code of {length} bits does not fit a table of {bits} bits")
        reversed_word = int(format(word, f"0{length}b")[::-1], 2)
        entry = length | (symbol & 0xFF) << 8 | (symbol >> 8 & 0xFF) << 24
        table[reversed_word + (np.arange(1 << (bits - length)) << length)] = entry
    return table


def decode(stream: np.ndarray, table: np.ndarray, bits: int, n: int) -> np.ndarray:
    """The first `n` pairs of `stream`, decoded as the C policy does (one look-up each)."""
    padded = np.concatenate([np.asarray(stream, dtype=np.uint8), np.zeros(PAD, dtype=np.uint8)])
    stream_bits = np.unpackbits(padded, bitorder="little")
    weights = 1 << np.arange(bits)
    out, pos = np.zeros((n, 2), dtype=np.int64), 0
    for i in range(n):
        entry = int(table[int(np.dot(stream_bits[pos : pos + bits], weights))])
        out[i] = ((entry >> 8 & 0xFF) ^ 0x80) - 0x80, ((entry >> 24) ^ 0x80) - 0x80
        pos += entry & 0xFF
    return out


def encoded(policy: IntegerPolicy) -> Optional[PairCode]:
    """The pair stream of a Huffman-coded int8-activation policy, its table bits chosen for the fewest
    bytes of table (4 per entry) and stream; None where no table of MAX_LUT_BITS bits holds the code
    (8-bit weights: the one-value stream, `cstream`) or the activations are int16."""
    if policy.weight_coding != "huffman" or policy.activation_bits != 8:
        return None
    stream_pairs = pairs(policy)
    keys = key(stream_pairs)
    symbols, counts = np.unique(keys, return_counts=True)
    shortest = max(1, int(np.ceil(np.log2(len(symbols)))))
    longest = huffman.canonical_code(keys).max_length
    if shortest > MAX_LUT_BITS:
        return None
    best: Optional[tuple[int, huffman.CanonicalCode]] = None
    for limit in range(shortest, min(longest, MAX_LUT_BITS) + 1):
        code = huffman.limited_code(keys, limit)
        book = code.codebook()
        size = -(-sum(int(c) * book[int(s)][1] for s, c in zip(symbols, counts)) // 8) + (4 << code.max_length)
        if best is None or size < best[0]:
            best = (size, code)
    if best is None:
        return None
    code = best[1]
    return PairCode(code, code.max_length, huffman.encode(keys, code), len(stream_pairs))


def data_bytes(policy: IntegerPolicy) -> int:
    """Bytes of HUFF: the table and the stream with its padding."""
    pair_code = encoded(policy)
    assert pair_code is not None
    return (4 << pair_code.bits) + pair_code.stream.size + PAD


def arrays(policy: IntegerPolicy, render: Callable[[Iterable[str]], str]) -> str:
    """HUFF: the look-up table, then the stream (one object, so one register addresses both);
    `render` lays out an array's values (cgen's)."""
    pair_code = encoded(policy)
    assert pair_code is not None
    n_weights = sum(layer.weight.size for layer in policy.layers)
    stream = np.concatenate([pair_code.stream, np.zeros(PAD, np.uint8)])
    lut = render(f"0x{int(v):08x}u" for v in pair_code.table())
    data = render(str(int(v)) for v in stream)
    return (
        "\n/* HUFF.stream holds, in the order the policy reads them, per output\n"
        f"   channel its {policy.weight_bits}-bit weight codes and its shift (from the layer's first), in pairs, in"
        f" one\n   canonical Huffman code of pairs ({8 * pair_code.stream.size / n_weights:.2f} bits per weight,"
        " all in), no code longer\n   than HUFF_LUT_BITS: HUFF.lut[the stream's next HUFF_LUT_BITS bits] ="
        " length | first << 8 | second << 24 */\n"
        f"#define HUFF_LUT_BITS {pair_code.bits}\n"
        f"static const struct {{\n    uint32_t lut[1 << HUFF_LUT_BITS];\n    uint8_t stream[{stream.size}];\n"
        f"}} HUFF = {{\n    {{\n{lut}\n    }},\n    {{\n{data}\n    }}\n}};\n"
    )


DECODER = r"""
/* the stream's position in bits from the start of HUFF; policy_act rewinds it to HUFF_START */
static uint32_t bit_pos;
#define HUFF_BYTES ((const uint8_t *)&HUFF)
#define HUFF_START ((uint32_t)(HUFF.stream - HUFF_BYTES) * 8u)
/* a pair's first and second value from its entry */
#define FIRST(e) ((int32_t)((((e) >> 8) & 0xFFu) ^ 0x80u) - 0x80)
#define SECOND(e) ((int32_t)(((e) >> 24) ^ 0x80u) - 0x80)

#if !PAIR_ASM
/* the next pair's entry: one look-up of the stream's next HUFF_LUT_BITS bits (the first at bit 0) */
static inline uint32_t next_pair(void) {
    const uint8_t *p = HUFF_BYTES + (bit_pos >> 3);
    const uint32_t bits = ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16) >> (bit_pos & 7u);
    const uint32_t e = HUFF.lut[bits & ((1u << HUFF_LUT_BITS) - 1u)];
    bit_pos += e & 0xFFu;
    return e;
}
#endif
"""

READ_SHIFTS = r"""
/* the differences of the next `rows` rows' shifts from the layer's first: rows / 2 pairs, or (d, 0) */
static void read_shifts(int rows) {
    int k;
    for (k = 0; k < rows; k += 2) {
        const uint32_t e = next_pair();
        row_shift[k] = FIRST(e);
        if (k + 1 < rows) {
            row_shift[k + 1] = SECOND(e);
        }
    }
}
"""

PORTABLE = r"""
/* `rows` rows' dot products with x over `words` words, the pairs decoded one at a time (portable C) */
KINLINE static void pdot(const buf_t *x, int words, int rows, acc_t *s) {
    int j, k;
    for (k = 0; k < rows; ++k) {
        s[k] = 0;
    }
    for (j = 0; j < words; ++j) {
        for (k = 0; k < rows; ++k) {
            const uint32_t a = next_pair();
            const uint32_t b = next_pair();
            s[k] += FIRST(a) * ACT(x, 4 * j) + SECOND(a) * ACT(x, 4 * j + 2) + FIRST(b) * ACT(x, 4 * j + 1) +
                    SECOND(b) * ACT(x, 4 * j + 3);
        }
    }
}
"""


def _asm_column(rows: int, bits: int, per_refill: int) -> str:
    """One word column of `rows` rows: the activation words, then per row (w0, w2) and (w1, w3), each
    looked up and multiplied, the buffer refilled from the position every `per_refill` pairs."""
    refill = r'"lsr %[e], %[pos], #3\n ldr %[buf], [%[lut], %[e]]\n and %[e], %[pos], #7\n lsr %[buf], %[buf], %[e]\n"'
    lines = [r'"ldrd %[a], %[b], [%[x]], #8\n"']
    for i in range(2 * rows):
        if i % per_refill == 0:
            lines.append(refill)
        s, act = f"s{i // 2}", "ab"[i % 2]
        lines.append(
            rf'"ubfx %[e], %[buf], #0, #{bits}\n ldr %[e], [%[lut], %[e], lsl #2]\n lsr %[buf], %[buf], %[e]\n'
            rf' uxtab %[pos], %[pos], %[e]\n sxtb16 %[e], %[e], ror #8\n smlad %[{s}], %[e], %[{act}], %[{s}]\n"'
        )
    return "\n        ".join(lines)


def _asm_kernel(rows: int, bits: int, per_refill: int) -> str:
    sums = ", ".join(f"s{k} = 0" for k in range(rows))
    outs = ", ".join(f'[s{k}] "+r"(s{k})' for k in range(rows))
    stores = " ".join(f"s[{k}] = s{k};" for k in range(rows))
    return f"""
/* {rows} row(s) times x over `words` word columns, each pair decoded into SXTB16 and SMLAD */
static inline __attribute__((always_inline)) void pdot{rows}(const uint32_t *x, int words, int32_t *s) {{
    const uint32_t *const end = x + 2 * words;
    const uint32_t *const lut = HUFF.lut;
    uint32_t pos = bit_pos, buf, a, b, e;
    int32_t {sums};
    __asm__("1:\\n"
        {_asm_column(rows, bits, per_refill)}
        "cmp %[x], %[end]\\n bne 1b\\n"
        : {outs}, [x] "+r"(x), [pos] "+r"(pos), [buf] "=&r"(buf), [a] "=&r"(a), [b] "=&r"(b), [e] "=&r"(e)
        : [lut] "r"(lut), [end] "r"(end)
        : "cc", "memory");
    bit_pos = pos;
    {stores}
}}
"""


NEXT_PAIR = r"""
/* the next pair's entry: a refill from the position and one look-up of the next HUFF_LUT_BITS bits */
static inline __attribute__((always_inline)) uint32_t next_pair(void) {
    uint32_t pos = bit_pos, w, e;
    __asm__("lsr %[e], %[pos], #3\n ldr %[w], [%[lut], %[e]]\n and %[e], %[pos], #7\n lsr %[w], %[w], %[e]\n"
        "ubfx %[e], %[w], #0, #@BITS@\n ldr %[e], [%[lut], %[e], lsl #2]\n uxtab %[pos], %[pos], %[e]\n"
        : [pos] "+r"(pos), [w] "=&r"(w), [e] "=&r"(e) : [lut] "r"(HUFF.lut));
    bit_pos = pos;
    return e;
}
"""


def runtime(policy: IntegerPolicy) -> str:
    """The decoder, the shifts' reader and the kernels (SIMD and portable)."""
    pair_code = encoded(policy)
    assert pair_code is not None
    bits, per = pair_code.bits, pair_code.per_refill
    out = ["\n#if POLICY_SIMD && defined(__GNUC__) && !defined(__ARM_BIG_ENDIAN)\n#define PAIR_ASM 1\n#else\n"]
    out.append("#define PAIR_ASM 0\n#endif\n" + DECODER)
    if cstream.shifts_read(policy) and any(cstream.shift_varies(layer) for layer in policy.layers):
        out.append("#if PAIR_ASM\n" + NEXT_PAIR.replace("@BITS@", str(bits)) + "#endif\n")
        out.append(c_runtime.ROW_SHIFT + READ_SHIFTS)
    out.append("\n#if PAIR_ASM\n")
    out.append(_asm_kernel(ROWS, bits, per) + _asm_kernel(1, bits, per))
    out.append("#define PDOT4(x, words, s) pdot4(x, words, s)\n#define PDOT1(x, words, s) pdot1(x, words, s)\n")
    out.append("#else\n" + PORTABLE)
    out.append("#define PDOT4(x, words, s) pdot(x, words, 4, s)\n#define PDOT1(x, words, s) pdot(x, words, 1, s)\n")
    out.append("#endif\n")
    return "".join(out)


def layer_function(policy: IntegerPolicy, i: int, layer: Dense) -> str:
    """`layer{i}(in, out)`: every output of layer i from the pairs, 4 rows a pass, then one by one."""
    rows, cols = layer.weight.shape
    words = csimd.row_words(cols, 8)
    full = rows - rows % ROWS
    vary = cstream.shifts_read(policy) and cstream.shift_varies(layer)
    shifts4 = "        read_shifts(4);\n" if vary else ""
    shifts1 = "        read_shifts(1);\n" if vary else ""
    loops = ckernel.row_loops(
        i, full, rows, f"{shifts4}        PDOT4(in, {words}, s);", f"{shifts1}        PDOT1(in, {words}, s);"
    )
    return f"""
/* layer {i}: {cols} -> {rows} */
static void layer{i}(const buf_t *in, buf_t *out) {{
    acc_t s[{ROWS}];
    int o;
{loops}}}
"""
