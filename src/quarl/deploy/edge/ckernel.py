"""The C policy's layers (`quarl.deploy.edge.cgen`): one function per layer, its constants in the code.

Activations live in RAM as int16 pairs, in the order SMLAD pairs them with SXTB16's halves of a weight
word: per 4 activations a0..a3, the words (a0, a2) and (a1, a3) (`ACT(x, i)` reads activation i). A
layer writes its outputs so, 4 at a time (PKHBT), and the next layer's kernel loads them without
expanding anything. Each layer's rows are padded with zero weights to whole words (`csimd`) and
interleaved 4 at a time, word by word (`csimd.interleave`), so that one pointer walks 4 rows: per word
of 4 int8 weights and 4 rows, one LDM of 4 weight words, the 2 activation words, 8 SXTB16 and 8 SMLAD.
The rows past the last multiple of 4 follow one by one.

Per output: the bias (the input zero point folded in), TFLite's requantization, the output zero point,
the clamp (SSAT) and Tanh as a 256-entry table. With gemmlowp's rounding, a per-layer shift and an
accumulator that provably stays within +-2^30 (checked at export, `fast_requantization`), gemmlowp's
SaturatingRoundingDoublingHighMul is one SMMULR of the doubled accumulator (floor((2xM + 2^31) / 2^32)
= floor((xM + 2^30) / 2^31); the bias is stored doubled) and RoundingDivideByPOT by 2^e, with the zero
point, floor((h - [h < 0] + 2^(e-1) + zp 2^e) / 2^e), the same integers; where the channels' shifts
differ (all right shifts), e is the low byte of the bias word and 2^(e-1) + zp 2^e is
((2 zp + 1) << e) >> 1 (`crequant`); otherwise the runtime's `requantize`.

Without the DSP extension (`POLICY_SIMD` 0: RISC-V, Cortex-M0/M3, the host) the activations are act_t
in their order (`ACT(x, i)` is x[i]) and packed 8-bit weights have their own layout (`row_major`):
plain int8 rows, one after another, which `dot4` walks 4 rows at a time, COLS columns an iteration:
each activation loaded once for the 4 rows, one byte load, multiply and add per weight, int32 sums
(int64 beside int16 activations) as a 32-bit core adds cheaply. 4-/2-bit codes and Huffman-decoded
rows keep the SIMD layout, read one weight at a time (`dot_c`). On a host whose build has AVX2
(`POLICY_AVX2`), the plain rows' dot products and the SMMULR requantization run 16 columns and 8 outputs
a step (`cavx2`), the same integers."""

from __future__ import annotations

import numpy as np

from quarl.deploy.edge import cavx2, csimd, cstream
from quarl.deploy.edge.crequant import ASR_BYTE, fast_requantization, shift_table, uniform
from quarl.deploy.edge.crequant import accumulator_bound as accumulator_bound  # re-exported
from quarl.deploy.edge.crequant import check_sums as check_sums  # re-exported
from quarl.deploy.edge.integer import Dense, IntegerPolicy

ROWS = 4  # rows per kernel pass
COLS = 4  # columns per iteration of the portable kernel of plain int8 rows

RUNTIME = r"""
#if POLICY_SIMD
/* activation i of the pairs at x: word (i / 4) * 2 + i % 2, half (i / 2) % 2 */
#define ACT(x, i) \
    ((int32_t)((((x)[((i) >> 2) * 2 + ((i) & 1)] >> (16 * (((i) >> 1) & 1))) & 0xFFFFu) ^ 0x8000u) - 0x8000)
#else
/* activation i of x: the activations in their order (act_t) */
#define ACT(x, i) ((int32_t)(x)[i])
#endif
#if POLICY_SIMD && defined(__GNUC__)
#define KINLINE __attribute__((always_inline)) inline
/* SXTB16 of x rotated by 8 bits: bytes 1 and 3 as int16 */
static inline int16x2_t sxtb16_ror8(uint32_t x) {
    int16x2_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
}
/* (a b + 2^31) >> 32, the rounded high word of the product */
static inline int32_t smmulr(int32_t a, int32_t b) {
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
#define SAT(v, bits) __ssat(v, bits)
/* the low halves of lo and hi as one word */
static inline uint32_t pack(int32_t lo, int32_t hi) {
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(lo), "r"(hi));
    return r;
}
#else
#if defined(__GNUC__)
#define KINLINE __attribute__((always_inline)) inline
#else
#define KINLINE inline
#endif
#if defined(__ARM_ARCH_6M__) || defined(__ARM_ARCH_8M_BASE__)
/* (a b + 2^31) >> 32 from 16-bit halves (each product within 32 bits): ARMv6-M has no 32 x 32 -> 64-bit
   multiply, and libgcc's __aeabi_lmul takes about 40 instructions a call */
static inline int32_t smmulr(int32_t a, int32_t b) {
    const uint32_t al = (uint32_t)a & 0xFFFFu, bl = (uint32_t)b & 0xFFFFu;
    const int32_t ah = a >> 16, bh = b >> 16, lh = ah * (int32_t)bl, hl = (int32_t)al * bh;
    const uint32_t mid = (al * bl >> 16) + ((uint32_t)lh & 0xFFFFu) + ((uint32_t)hl & 0xFFFFu) + 0x8000u;
    return ah * bh + (lh >> 16) + (hl >> 16) + (int32_t)(mid >> 16);
}
#else
static inline int32_t smmulr(int32_t a, int32_t b) {
    return (int32_t)(((int64_t)a * b + ((int64_t)1 << 31)) >> 32);
}
#endif
#define SAT(v, bits) ((v) < ACT_MIN ? ACT_MIN : ((v) > ACT_MAX ? ACT_MAX : (v)))
#if POLICY_SIMD
static inline uint32_t pack(int32_t lo, int32_t hi) {
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}
#endif
#endif

#if POLICY_SIMD
/* activation i of x set to v */
static inline void set_act(uint32_t *x, int i, int32_t v) {
    uint32_t *word = &x[(i >> 2) * 2 + (i & 1)];
    const int half = 16 * ((i >> 1) & 1);
    *word = (*word & ~(0xFFFFu << half)) | (((uint32_t)v & 0xFFFFu) << half);
}
/* activations o..o + 3 of x set to v0..v3: the pairs (v0, v2) and (v1, v3) */
#define PUT4(x, o, v0, v1, v2, v3) \
    do { \
        (x)[(o) / 2] = pack(v0, v2); \
        (x)[(o) / 2 + 1] = pack(v1, v3); \
    } while (0)
#else
#define set_act(x, i, v) ((x)[i] = (act_t)(v))
#define PUT4(x, o, v0, v1, v2, v3) \
    do { \
        (x)[o] = (act_t)(v0); \
        (x)[(o) + 1] = (act_t)(v1); \
        (x)[(o) + 2] = (act_t)(v2); \
        (x)[(o) + 3] = (act_t)(v3); \
    } while (0)
#endif

/* one row's dot product from its words w[0], w[stride], ..., one weight at a time (portable C) */
static inline acc_t dot_c(const uint32_t *w, int stride, const buf_t *x, int words) {
    acc_t s = 0;
    int j, t;
    for (j = 0; j < words; ++j) {
        const uint32_t v = w[j * stride];
        for (t = 0; t < GROUP; ++t) { /* weight t of the word: byte t & 3, slot t >> 2 */
            const uint32_t code = (v >> (8 * (t & 3) + WBITS * (t >> 2))) & ((1u << WBITS) - 1);
            s += (acc_t)((int32_t)(code ^ (1u << (WBITS - 1))) - (1 << (WBITS - 1))) * ACT(x, j * GROUP + t);
        }
    }
    return s;
}
"""


def _mac_lines(rows: int, weight_bits: int, mac: str) -> list[str]:
    """The SIMD loop body over one word of each row (w[0..rows-1]) and the activations at x."""
    per = 8 // weight_bits
    top = {1: "", 2: "0xF0F0F0F0u", 4: "0xC0C0C0C0u"}[per]
    names = [f"w{k}" for k in range(rows)]
    lines = [f"const uint32_t {', '.join(f'{n} = w[{k}]' for k, n in enumerate(names))};"]
    for j in range(per):
        shift = 8 - weight_bits * (j + 1)
        lines.append(f"a = (int16x2_t)x[{2 * j}];")
        for k, n in enumerate(names):
            word = n if per == 1 else f"(({n} << {shift}) & {top})" if shift else f"({n} & {top})"
            lines.append(f"s{k} = {mac}(__sxtb16((int8x4_t){word}), a, s{k});")
        lines.append(f"a = (int16x2_t)x[{2 * j + 1}];")
        for k, n in enumerate(names):
            word = n if per == 1 else f"(({n} << {shift}) & {top})" if shift else f"({n} & {top})"
            lines.append(f"s{k} = {mac}(sxtb16_ror8({word}), a, s{k});")
    lines.append(f"w += {rows};")
    lines.append(f"x += {2 * per};")
    return lines


def _asm_step() -> str:
    """One word of 4 interleaved rows, as C string literals for the asm (rows 0 and 1, then 2 and 3)."""
    lines = [r'"ldrd %[a], %[b], [%[x]], #8\n"']
    for first in (0, 2):
        lines.append(r'"ldrd %[u], %[v], [%[w]], #8\n"')
        for reg, row in (("u", first), ("v", first + 1)):
            for rotate, act in (("", "a"), (", ror #8", "b")):
                lines.append(rf'"sxtb16 %[t], %[{reg}]{rotate}\n smlad %[s{row}], %[t], %[{act}], %[s{row}]\n"')
    return " \\\n    ".join(lines)


ASM_DOT4 = r"""
#if POLICY_SIMD && defined(__GNUC__)
#define DOT4_ASM 1
/* 4 interleaved rows of int8 weights times the activation pairs at x: per word of each row, SXTB16
   twice and SMLAD twice; LDRD loads 2 rows' words, and the 2 activation words */
#define DOT4_STEP \
    @STEP@
#define DOT4_OPERANDS \
    : [s0] "+r"(s0), [s1] "+r"(s1), [s2] "+r"(s2), [s3] "+r"(s3), [w] "+r"(w), [x] "+r"(x), [a] "=&r"(a), \
      [b] "=&r"(b), [u] "=&r"(u), [v] "=&r"(v), [t] "=&r"(t) \
    : [end] "r"(end) \
    : "cc", "memory"
static inline __attribute__((always_inline)) const uint32_t *dot4_asm(const uint32_t *w, const uint32_t *x,
                                                                     int words, int32_t *s) {
    const uint32_t *const end = x + 2 * words;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    uint32_t a, b, u, v, t;
    if (words % 2 == 0) { /* two words a pass */
        __asm__("1:\n" DOT4_STEP DOT4_STEP "cmp %[x], %[end]\n bne 1b\n" DOT4_OPERANDS);
    } else {
        __asm__("1:\n" DOT4_STEP "cmp %[x], %[end]\n bne 1b\n" DOT4_OPERANDS);
    }
    s[0] = s0;
    s[1] = s1;
    s[2] = s2;
    s[3] = s3;
    return w;
}
#else
#define DOT4_ASM 0
#endif
""".replace("@STEP@", _asm_step())


def _row_major(rows: int) -> str:
    """The portable kernel of `rows` plain int8 rows of n weights (one after another) times the n
    activations at x: COLS columns an iteration, each activation loaded once for the rows, int32
    products summed into acc_t; the columns past the last multiple of COLS one by one."""
    sums = ", ".join(f"s{k} = 0" for k in range(rows))
    acts = ", ".join(f"a{c} = x[{c}]" for c in range(COLS))
    row = [f"{k} * n + " if k > 1 else "n + " if k == 1 else "" for k in range(rows)]
    block = "\n".join(
        f"        s{k} += {' + '.join(f'w[{row[k]}{c}] * a{c}' for c in range(COLS))};" for k in range(rows)
    )
    tail = "\n".join(f"        s{k} += w[{row[k]}0] * a;" for k in range(rows))
    stores = " ".join(f"s[{k}] = s{k};" for k in range(rows))
    after = f" + {rows - 1} * n" if rows > 1 else ""
    return f"""    const act_t *const last = x + (n - n % {COLS}), *const end = x + n;
    acc_t {sums};
    for (; x != last; x += {COLS}, w += {COLS}) {{
        const int32_t {acts};
{block}
    }}
    for (; x != end; ++x, ++w) {{
        const int32_t a = *x;
{tail}
    }}
    {stores}
    return w{after};"""


def row_major(policy: IntegerPolicy) -> bool:
    """Whether the portable C path keeps the layers' weights as plain int8 rows (packed 8-bit weights);
    4-/2-bit codes and the Huffman-coded rows keep the SIMD layout there too."""
    return policy.weight_coding != "huffman" and policy.weight_bits == 8


def kernels(weight_bits: int, activation_bits: int, plain: bool = False) -> str:
    """The helpers (`RUNTIME`), `dot4` and `dot1`: the dot products of 4 rows (of one row) with x over
    n words of weights each (the SIMD layout: 4 rows interleaved word by word), or, on the portable
    path of `plain` policies (`row_major`), over n int8 weights each (rows one after another); they
    return the pointer past the rows."""
    acc, mac = ("int64_t", "__smlald") if activation_bits == 16 else ("int32_t", "__smlad")
    scaled = 8 - weight_bits
    shift = f" >> {scaled}" if scaled else ""
    out = [f"#define GROUP {csimd.group(weight_bits)}\n#define WBITS {weight_bits}\n", RUNTIME, ASR_BYTE]
    if plain:
        out.append(
            "#if POLICY_SIMD\ntypedef uint32_t weight_t;\n#define ROW_N(words, cols) (words)\n"
            "#else\ntypedef int8_t weight_t; /* plain int8 rows (ckernel) */\n#define ROW_N(words, cols) (cols)\n"
            "#endif\n"
        )
    else:
        out.append("typedef uint32_t weight_t;\n#define ROW_N(words, cols) (words)\n")
    if weight_bits == 8 and activation_bits == 8:
        out.append(ASM_DOT4)
    if plain:
        out.append(cavx2.helpers(activation_bits))
    for rows in (ROWS, 1):
        guard = "#if POLICY_SIMD"
        if rows == ROWS and weight_bits == 8 and activation_bits == 8:
            guard = "#if DOT4_ASM\n    return dot4_asm(w, x, n, s);\n#elif POLICY_SIMD"
        body = "\n".join("        " + line for line in _mac_lines(rows, weight_bits, mac))
        sums = ", ".join(f"s{k} = 0" for k in range(rows))
        stores = " ".join(f"s[{k}] = s{k}{shift};" for k in range(rows))
        dots = " ".join(f"s[{k}] = dot_c(w + {k}, {rows}, x, n);" for k in range(rows))
        portable = _row_major(rows) if plain else f"    {dots}\n    return w + {rows} * n;"
        if plain:  # the host's AVX2 kernel where the build has it (cavx2)
            portable = f"{cavx2.dot(rows, activation_bits)}\n#else\n{portable}"
        out.append(
            f"""
/* {rows} row(s) times x: s[0..{rows - 1}]; the weights past them */
KINLINE static const weight_t *dot{rows}(const weight_t *w, const buf_t *x, int n, acc_t *s) {{
{guard}
    const uint32_t *const end = w + {rows} * n;
    {acc} {sums};
    int16x2_t a;
    do {{
{body}
    }} while (w != end);
    {stores}{" /* each product carried 2^" + str(scaled) + " */" if scaled else ""}
    return w;
#{"elif POLICY_AVX2" if plain else "else"}
{portable}
#endif
}}
"""
        )
    return "".join(out)


def _clamp(layer: Dense, bits: int, value: str) -> str:
    """The clamp to [act_min, ACT_MAX] (SSAT where act_min is the type's minimum)."""
    if int(layer.act_min) == -(2 ** (bits - 1)):
        return f"SAT({value}, {bits})"
    return f"{value} < {int(layer.act_min)} ? {int(layer.act_min)} : ({value} > ACT_MAX ? ACT_MAX : {value})"


def output_function(
    policy: IntegerPolicy, i: int, layer: Dense, bias: np.ndarray, coded: bool, ram_tanh: bool = False
) -> str:
    """`out{i}(s, o, k)`: output channel o (row k of its pass) of layer i from its dot product s; the
    Tanh table is `L{i}_TANH` in flash, or `TANH` where the stream's decoder fills it (`ram_tanh`)."""
    tanh16 = policy.activation_bits == 16 and layer.tanh_int16 is not None
    zp = int(layer.output.zero_point)
    if fast_requantization(policy, layer, bias):
        shift = int(np.max(layer.shift))
        left, right = max(shift, 0), max(-shift, 0)
        mult = str(int(layer.multiplier[0])) if uniform(layer.multiplier) else f"L{i}_M[o]"
        doubled = f"(int32_t)((uint32_t)s << {left + 1}) + L{i}_B[o]"
        lines = [f"const int32_t h = smmulr({doubled}, {mult});"]
        if shift_table(policy, layer, bias):  # the bias word's low byte: the channel's right shift
            lines[0] = f"const int32_t be = L{i}_BE[o];\n    " + lines[0].replace(f"L{i}_B[o]", "(be >> 16)")
            half = f"(lsl_byte({2 * zp + 1}, be) >> 1)"  # 2^(e-1) + zp 2^e
            lines.append(f"const int32_t r = asr_byte(h + (h >> 31) + {half}, be);")
        elif right:
            constant = (1 << (right - 1)) + (zp << right)
            lines.append(f"const int32_t r = (h + (h >> 31) + {constant}) >> {right};")
        else:
            lines.append(f"const int32_t r = h + {zp};")
        about = "bias doubled, SMMULR, RoundingDivideByPOT and the zero point in one shift"
    else:
        if policy.activation_bits == 16 and policy.rounding != "gemmlowp":
            call = f"requantize((double)(s + L{i}_B[o]) * L{i}_REAL[o])"
        else:
            mult = str(int(layer.multiplier[0])) if uniform(layer.multiplier) else f"L{i}_M[o]"
            if coded and cstream.shift_varies(layer):  # the stream's shifts (16x8 in double has none)
                shifts = f"{int(layer.shift[0])} + row_shift[k]"
            else:
                shifts = str(int(layer.shift[0])) if uniform(layer.shift) else f"L{i}_S[o]"
            call = f"requantize(s + L{i}_B[o], {mult}, {shifts})"
        lines = [f"const int32_t r = {call} + {zp};"]
        about = "bias, the runtime's requantization, the zero point"
    lines.append(f"const int32_t c = {_clamp(layer, policy.activation_bits, 'r')};")
    if layer.tanh_table is not None and policy.activation_bits == 8:
        table = "TANH" if ram_tanh else f"L{i}_TANH"
        lines.append(f"(void)k;\n    return {table}[c + 128];")
        about += ", clamp, Tanh by table"
    elif tanh16 and layer.tanh_int16 is not None:
        tanh_mult, tanh_left = layer.tanh_int16
        lines.append(f"(void)k;\n    return tanh16(c, {int(tanh_mult)}, {int(tanh_left)});")
        about += ", clamp, TFLite's int16 Tanh"
    else:
        lines.append("(void)k;\n    return c;")
        about += ", clamp"
    body = "\n    ".join(lines)
    return f"""
/* layer {i}'s output channel o from its dot product s: {about} */
KINLINE static int32_t out{i}(acc_t s, int o, int k) {{
    {body}
}}
"""


def row_loops(i: int, full: int, rows: int, dot4: str, dot1: str) -> str:
    """Layer i's loops over its outputs: ROWS rows a pass while `full` rows last (`dot4`, the C lines
    that leave ROWS sums in `s`), then the rows left one by one (`dot1`: one sum in `s[0]`)."""
    loop4 = f"""    for (o = 0; o < {full}; o += {ROWS}) {{
{dot4}
        PUT4(out, o, out{i}(s[0], o, 0), out{i}(s[1], o + 1, 1), out{i}(s[2], o + 2, 2), out{i}(s[3], o + 3, 3));
    }}
"""
    loop1 = f"""    for (o = {full}; o < {rows}; ++o) {{
{dot1}
        set_act(out, o, out{i}(s[0], o, 0));
    }}
"""
    return (loop4 if full else "") + (loop1 if rows > full else "")


def _vector_loops(policy: IntegerPolicy, i: int, layer: Dense, bias: np.ndarray) -> str:
    """Layer i's loops on the host's AVX2 path (`cavx2`) where its outputs requantize by SMMULR, else ''."""
    if not row_major(policy) or not uniform(layer.shift) or not fast_requantization(policy, layer, bias):
        return ""
    rows, cols = layer.weight.shape
    shift, zp = int(layer.shift[0]), int(layer.output.zero_point)
    mult = str(int(layer.multiplier[0])) if uniform(layer.multiplier) else f"L{i}_M"
    low = "ACT_MIN" if int(layer.act_min) == -(2 ** (policy.activation_bits - 1)) else str(int(layer.act_min))
    tanh = layer.tanh_table is not None
    requantize = cavx2.requantize8(i, rows, shift, zp, mult, low, tanh)
    return cavx2.layer_loops(i, rows, cols, rows - rows % ROWS, requantize)


def layer_function(policy: IntegerPolicy, i: int, layer: Dense, coded: bool, bias: np.ndarray) -> str:
    """`layer{i}(in, out)`: every output of layer i, ROWS rows a pass, then the rows left one by one
    (`bias`: the folded bias, which says whether the AVX2 path requantizes 8 outputs a step)."""
    rows, cols = layer.weight.shape
    words = csimd.row_words(cols, 8 if coded else layer.weight_bits)
    full = rows - rows % ROWS
    prepare = ""
    if coded and layer.tanh_table is not None:
        prepare = "    read_table();\n"
    if coded:
        shift = cstream.shifts_read(policy) and cstream.shift_varies(layer)
        read = "            row_shift[k] = next_value(STREAM);\n" if shift else ""
        decode4 = (
            f"        for (k = 0; k < {ROWS}; ++k) {{\n            decode_row(k, {ROWS}, {cols});\n{read}        }}\n"
        )
        decode1 = f"        decode_row(0, 1, {cols});\n" + read.replace("[k]", "[0]").replace(" " * 12, " " * 8)
        weights = "rows_w"
    else:
        decode4 = decode1 = ""
        weights = f"L{i}_W"
    again = "        w = rows_w;\n" if coded else ""
    loops = row_loops(
        i,
        full,
        rows,
        decode4 + again + f"        w = dot4(w, in, ROW_N({words}, {cols}), s);",
        decode1 + again + f"        w = dot1(w, in, ROW_N({words}, {cols}), s);",
    )
    vector = "" if coded else _vector_loops(policy, i, layer, bias)
    if vector:
        loops = f"#if POLICY_AVX2\n{vector}#else\n{loops}#endif\n"
    return f"""
/* layer {i}: {cols} -> {rows} */
static void layer{i}(const buf_t *in, buf_t *out) {{
    const weight_t *w = {weights};
    acc_t s[{ROWS}];
    int o{", k" if coded and full else ""};
{prepare}{loops}    (void)w;
}}
"""
