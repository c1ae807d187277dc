"""The integer policy as self-contained C99: `policy.h` and `policy.c`, for microcontrollers.

The source computes exactly `IntegerPolicy.act` (quarl.deploy.edge.integer): int8 (or packed 4-/2-bit)
weights in `const` arrays (flash), each row laid out for the Cortex-M4's SXTB16/SMLAD (`csimd`),
int32 biases, TFLite's fixed-point requantization, Tanh as a 256-entry table, activations in two
static buffers; no dynamic allocation and no libm. Floats appear only where the observation
enters (VecNormalize and the per-feature grid: subtract, divide, compare, truncate; every constant
printed as an exact hexadecimal float) and, for continuous actions, as a table of the action value of
each output code. With int16 activations (TFLite's 16x8 scheme) the buffers hold int16, the
accumulators int64, Tanh interpolates TFLite's sigmoid table, and a continuous head dequantizes and
squashes or clips in float32 (C99 does not contract those operations into fused multiply-adds, so they
round as numpy's). Huffman-coded weights (`cstream`) are decoded a row at a time by table look-up.

Each layer is a C function with its constants in the code (`ckernel`). Where the compiler has the
DSP extension (`__ARM_FEATURE_DSP`: arm-none-eabi-gcc -mcpu=cortex-m4; `POLICY_SIMD`) activations
wait in RAM as int16 pairs, rows padded to whole words and interleaved 4 at a time (`csimd`), the dot
products run on SXTB16 and SMLAD (SMLALD for 16x8), and the int8 requantization on SMMULR and SSAT.
Elsewhere (RISC-V, Cortex-M0/M3, the host) the portable C99 path keeps the activations as act_t in
their order and, with packed 8-bit weights, its own copy of the weights as plain int8 rows, 4 rows a
pass sharing each activation load (`ckernel.row_major`); policy.c carries both layouts behind
`#if POLICY_SIMD`, so each build compiles one. Integer sums do not depend on their order, so both
give the reference's actions bit for bit. It compiles warning-free with `-std=c99 -Wall -Wextra -Werror
-pedantic` for the host and for `arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb`.

    #include "policy.h"
    float obs[POLICY_OBS_DIM];  POLICY_ACTION_T action[POLICY_ACTION_DIM];
    policy_act(obs, action);   /* discrete: action[0] is the index; continuous: the action values */
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from quarl.deploy.edge import c_runtime, cavx2, ckernel, cpairs, csimd, cstream, huffman
from quarl.deploy.edge.csimd import pack_weights as pack_weights  # re-exported
from quarl.deploy.edge.cstream import half_table as half_table  # re-exported
from quarl.deploy.edge.fixedpoint import DOUBLE_16X8, SIGMOID_TABLE_UINT16
from quarl.deploy.edge.integer import Dense, IntegerPolicy

PER_LINE = 24  # array values per source line
STREAM_PAD = 4  # zero bytes after the stream: the decoder's bit buffer reads up to 4 bytes ahead


def _ident(name: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name).strip("_") or "policy"
    return ident if not ident[0].isdigit() else f"p_{ident}"


def hex_float(x: float) -> str:
    """An exact C float literal of a float32 value."""
    value = float(np.float32(x))
    if value == 0.0:
        return "-0.0f" if np.signbit(np.float32(x)) else "0.0f"
    return f"{value.hex()}f"


def c_values(values: Iterable[str], indent: str = "    ") -> str:
    """C initialiser lines of `values`, PER_LINE to a line, each line indented by `indent`."""
    items = list(values)
    lines = [", ".join(items[i : i + PER_LINE]) for i in range(0, len(items), PER_LINE)]
    return indent + f",\n{indent}".join(lines)


def _array(ctype: str, name: str, values: Iterable[str], dims: str) -> str:
    return f"static const {ctype} {name}{dims} = {{\n{c_values(values)}\n}};\n"


def _ints(a: np.ndarray) -> list[str]:
    return [str(int(v)) for v in np.asarray(a).reshape(-1)]


def _int32s(a: np.ndarray) -> list[str]:
    # INT32_MIN has no decimal literal of type int32_t
    return [str(int(v)) if int(v) != -(2**31) else "(-2147483647 - 1)" for v in np.asarray(a).reshape(-1)]


def _int64s(a: np.ndarray) -> list[str]:
    return [f"INT64_C({int(v)})" for v in np.asarray(a).reshape(-1)]


def folded_bias(layer: Dense) -> np.ndarray:
    """The bias with the input zero point folded in: sum((q - zp) w) + b = sum(q w) + (b - zp sum(w)).
    The same integers, as long as the accumulator stays in int32 (int64 with int16 activations: up to
    2^47, as TFLite's 16x8 requantization assumes), checked (`ckernel.check_sums`)."""
    codes = layer.weight.astype(np.int64)
    bias = layer.bias.astype(np.int64) - layer.input.zero_point * codes.sum(axis=1)
    ckernel.check_sums(layer, bias, layer.bits)
    return bias


def stored_bias(policy: IntegerPolicy, layer: Dense) -> np.ndarray:
    """The bias as the C stores it: folded, and times 2^(left + 1) where the layer requantizes by SMMULR."""
    bias = folded_bias(layer)
    if ckernel.fast_requantization(policy, layer, bias):
        return bias << (max(int(np.max(layer.shift)), 0) + 1)
    return bias


def _narrow_bias(policy: IntegerPolicy, layer: Dense) -> bool:
    """Whether the stored bias fits the narrow type (int16 beside int32 accumulators, int32 beside int64)."""
    limit = 2**15 if layer.bits == 8 else 2**31
    return bool(np.all(np.abs(stored_bias(policy, layer)) < limit))


def _bias_types(policy: IntegerPolicy) -> tuple[str, str]:
    return ("int16_t", "int32_t") if policy.activation_bits == 8 else ("int32_t", "int64_t")


_uniform = ckernel.uniform


def _shift_table(policy: IntegerPolicy, layer: Dense) -> bool:
    """Whether layer requantizes by SMMULR with a right shift per channel (`ckernel.shift_table`)."""
    bias = folded_bias(layer)
    return ckernel.shift_table(policy, layer, bias) and ckernel.fast_requantization(policy, layer, bias)


def data_bytes(policy: IntegerPolicy) -> int:
    """Bytes of the constant arrays `source` emits (weights, biases, requantization, tables, float
    constants): the tensors the C policy computes with, without its code and layer descriptors. The
    weights are counted in the SIMD layout (rows padded to whole words); the portable path's plain
    int8 rows are the same bytes where a layer's width is a multiple of 4, fewer where it is not."""
    total = 4 * 2 * policy.obs_dim  # IN_CENTER, IN_STEP
    if policy.mean is not None:
        total += 4 * 2 * policy.obs_dim + 4  # OBS_MEAN, OBS_STD, OBS_CLIP
    coded = policy.weight_coding == "huffman"
    paired = coded and cpairs.encoded(policy) is not None
    if paired:  # the pair stream and its table
        total += cpairs.data_bytes(policy)
    elif coded:  # the weights, shifts and Tanh tables are in the stream
        code, stream = cstream.encoded(policy)
        total += stream.size + STREAM_PAD + len(code.counts) + len(code.symbols)
        total += 2 << min(code.max_length, huffman.LOOKUP_BITS)  # HUFF_LUT
    for layer in policy.layers:
        rows, cols = layer.weight.shape
        total += rows * (1 if _narrow_bias(policy, layer) else 2) * (2 if layer.bits == 8 else 4)
        total += 0 if _uniform(layer.multiplier) else 4 * rows
        total += 8 * rows if _in_double(policy) else 0
        total += 256 if paired and layer.tanh_table is not None else 0  # the pair stream holds no Tanh table
        if coded:
            continue
        total += 4 * rows * csimd.row_words(cols, layer.weight_bits)
        total += 0 if _uniform(layer.shift) else rows
        total += rows if _shift_table(policy, layer) else 0  # L{i}_BE, not L{i}_B and L{i}_S
        total += 256 if layer.tanh_table is not None and policy.activation_bits == 8 else 0
    if policy.action_table is not None:
        total += 4 * policy.action_table.size
    if policy.activation_bits == 16:
        total += 2 * len(SIGMOID_TABLE_UINT16) if any(layer.tanh_int16 for layer in policy.layers) else 0
        total += 0 if policy.action_kind == "discrete" else 4 * 2 * policy.n_outputs  # LOW, HIGH or SPAN
    return total


def header(policy: IntegerPolicy, name: str = "policy") -> str:
    """The header: sizes, the action type and `policy_act`'s prototype."""
    guard = f"QUARL_{_ident(name).upper()}_H"
    discrete = policy.action_kind == "discrete"
    action_dim = 1 if discrete else int(np.prod(policy.action_shape))
    action_t = "int32_t" if discrete else "float"
    return f"""/* quarl full-integer {policy.algo.upper() or "SB3"} policy: generated by quarl.deploy.edge.cgen. */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

#define POLICY_OBS_DIM {policy.obs_dim}       /* float values of one raw observation */
#define POLICY_ACTION_DIM {action_dim}    /* values policy_act writes */
#define POLICY_DISCRETE {1 if discrete else 0}     /* 1: action[0] is an action index; 0: action values */
#define POLICY_N_OUTPUTS {policy.n_outputs}    /* {"actions" if discrete else "action values"} */
#define POLICY_WEIGHT_BITS {policy.weight_bits}
#define POLICY_ACTIVATION_BITS {policy.activation_bits}
typedef {action_t} POLICY_ACTION_T;

/* The greedy action for one raw observation (as SB3's predict(obs, deterministic=True), in TFLite's
   int8 arithmetic): obs holds POLICY_OBS_DIM floats, action receives POLICY_ACTION_DIM values. */
void policy_act(const float *obs, POLICY_ACTION_T *action);

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def source(policy: IntegerPolicy, name: str = "policy") -> str:
    """The C99 source computing `policy.act` bit for bit."""
    bits = policy.weight_bits
    wide = policy.activation_bits == 16
    narrow_t, wide_t = _bias_types(policy)
    layers = policy.layers
    coded = policy.weight_coding == "huffman"
    paired = cpairs.encoded(policy) is not None  # decoded a pair per look-up (cpairs)
    plain = ckernel.row_major(policy)  # the portable path's own layout: plain int8 rows
    width = max(max(csimd.padded(max(layer.weight.shape), 8) for layer in layers), csimd.padded(policy.obs_dim, 8))
    scheme = "16x8 scheme (int16 activations, int8 weights, int64 biases)" if wide else "int8 scheme"
    parts: list[str] = [
        f"/* quarl full-integer policy ({policy.algo or 'SB3'}, {len(layers)} layers, {bits}-bit weights):\n"
        " * generated by"
        " quarl.deploy.edge.cgen from the integer reference quarl.deploy.edge.integer, do not edit.\n"
        f" * Arithmetic: TFLite's {scheme}: per-channel symmetric weights, requantization by a\n"
        f" * fixed-point multiplier and shift ({policy.rounding} rounding). No heap, no libm. */\n",
        f'#include "{name}.h"\n',
        c_runtime.IEEE_ONLY,
        csimd.PRELUDE + cavx2.PRELUDE + "\n",
        "#define I32_MIN (-2147483647 - 1)\n#define I32_MAX 2147483647\n",
        f"#define ACT_MIN ({policy.input.qmin})\n#define ACT_MAX {policy.input.qmax}\n",
        f"#define ROWS {ckernel.ROWS}\ntypedef {'int16_t' if wide else 'int8_t'} act_t;\n",
        f"typedef {'int64_t' if wide else 'int32_t'} acc_t;\n",
        "#if POLICY_SIMD\ntypedef uint32_t buf_t; /* the activations as int16 pairs (ckernel) */\n#else\n"
        "typedef act_t buf_t; /* the activations in their order */\n#endif\n\n",
    ]
    n = policy.obs_dim
    if policy.mean is not None and policy.std is not None and policy.clip is not None:
        parts.append(_array("float", "OBS_MEAN", map(hex_float, policy.mean), f"[{n}]"))
        parts.append(_array("float", "OBS_STD", map(hex_float, policy.std), f"[{n}]"))
        parts.append(f"static const float OBS_CLIP = {hex_float(policy.clip)};\n")
    parts.append(_array("float", "IN_CENTER", map(hex_float, policy.center), f"[{n}]"))
    parts.append(_array("float", "IN_STEP", map(hex_float, policy.step), f"[{n}]"))
    if coded:
        parts.append(cpairs.arrays(policy, c_values) if paired else _stream_arrays(policy))
    for i, layer in enumerate(layers):
        rows, cols = layer.weight.shape
        parts.append(f"\n/* {layer.name}: {cols} -> {rows}, {layer.activation} */\n")
        if not coded:  # the rows laid out, padded and interleaved for the kernels (csimd)
            words = csimd.layer_words(layer.weight, bits, ckernel.ROWS)
            simd = _array("uint32_t", f"L{i}_W", (f"0x{int(v):08x}u" for v in words), f"[{words.size}]")
            if plain:  # and for the portable kernel, the plain rows (ckernel)
                rowwise = _array("int8_t", f"L{i}_W", _ints(layer.weight), f"[{layer.weight.size}]")
                simd = f"#if POLICY_SIMD\n{simd}#else\n{rowwise}#endif\n"
            parts.append(simd)
        bias = stored_bias(policy, layer)
        if _shift_table(policy, layer):  # (doubled bias << 16) | right shift (crequant)
            right = -layer.shift.astype(np.int64)
            parts.append(_array("int32_t", f"L{i}_BE", _int32s((bias << 16) | right), f"[{rows}]"))
        elif _narrow_bias(policy, layer):
            parts.append(_array(narrow_t, f"L{i}_B", _int32s(bias), f"[{rows}]"))
        else:
            parts.append(_array(wide_t, f"L{i}_B", _int64s(bias) if wide else _int32s(bias), f"[{rows}]"))
        if not _uniform(layer.multiplier):
            parts.append(_array("int32_t", f"L{i}_M", _int32s(layer.multiplier), f"[{rows}]"))
        if not _uniform(layer.shift) and not coded and not _shift_table(policy, layer):
            parts.append(_array("int8_t", f"L{i}_S", _ints(layer.shift), f"[{rows}]"))
        if layer.tanh_table is not None and (paired or not coded):
            parts.append(_array("int8_t", f"L{i}_TANH", _ints(layer.tanh_table), "[256]"))
        if _in_double(policy):
            parts.append(_array("double", f"L{i}_REAL", (float(v).hex() for v in layer.real_multiplier), f"[{rows}]"))
    tanh16 = any(layer.tanh_int16 for layer in layers)
    if tanh16:
        parts.append("\n/* TFLite's sigmoid(i / 24) in unsigned 0.16 fixed point: its int16 Tanh interpolates it */\n")
        parts.append(_array("uint16_t", "SIGMOID", _ints(SIGMOID_TABLE_UINT16), f"[{len(SIGMOID_TABLE_UINT16)}]"))
    if policy.action_kind != "discrete":
        parts.append(_head_constants(policy))
    parts.append(
        f"\n/* the activations: int16 pairs (ckernel), or act_t in their order */\n#if POLICY_SIMD\n"
        f"static buf_t buf_a[{width // 2}];\nstatic buf_t buf_b[{width // 2}];\n#else\n"
        f"static buf_t buf_a[{width}];\nstatic buf_t buf_b[{width}];\n#endif\n"
    )
    if not all(ckernel.fast_requantization(policy, layer, folded_bias(layer)) for layer in layers):
        requantize = (c_runtime.REQUANTIZE_16X8 if wide else c_runtime.REQUANTIZE)[policy.rounding]
        parts.append(c_runtime.RUNTIME.replace("@REQUANTIZE@", requantize))
    parts.append(c_runtime.QUANTIZE)
    if _even_features(policy):
        parts.append(c_runtime.QUANTIZE_EVEN)
    # a coded row is decoded into int8
    parts.append(ckernel.kernels(8 if coded else bits, policy.activation_bits, plain))
    if paired:
        parts.append(cpairs.runtime(policy))
    elif coded:
        row_words = max(csimd.row_words(layer.weight.shape[1], 8) for layer in layers)
        parts.append(f"#define ROW_WORDS {row_words}\n" + c_runtime.HUFFMAN_READER + c_runtime.DECODE_ROW)
        if cstream.shifts_read(policy) and any(cstream.shift_varies(layer) for layer in layers):
            parts.append(c_runtime.ROW_SHIFT)
        parts.append(c_runtime.STREAM_TABLE if any(layer.tanh_table is not None for layer in layers) else "")
    parts.append(c_runtime.TANH16 if tanh16 else "")
    for i, layer in enumerate(layers):
        parts.append(ckernel.output_function(policy, i, layer, folded_bias(layer), coded, coded and not paired))
        function = (
            cpairs.layer_function(policy, i, layer)
            if paired
            else ckernel.layer_function(policy, i, layer, coded, folded_bias(layer))
        )
        parts.append(function)
    parts.append(_act(policy))
    return "".join(parts)


def _stream_arrays(policy: IntegerPolicy) -> str:
    """The C arrays of the Huffman-coded stream (`cstream`) and its code."""
    code, stream = cstream.encoded(policy)
    lut_bits = min(code.max_length, huffman.LOOKUP_BITS)
    n_weights = sum(layer.weight.size for layer in policy.layers)
    shifts = " and its shift (from the layer's first)" if cstream.shifts_read(policy) else ""
    return (
        f"\n/* STREAM holds, in the order the policy reads them, each Tanh table's steps, then per output channel\n"
        f"   its {policy.weight_bits}-bit weight codes{shifts}, in one canonical Huffman code"
        f" ({8 * stream.size / n_weights:.2f} bits\n   per weight, all in): HUFF_COUNT[n] codes have n bits,"
        " HUFF_SYMBOL lists the values in code order */\n"
        f"#define HUFF_MAX_LENGTH {code.max_length}\n"
        + _array("uint8_t", "HUFF_COUNT", _ints(np.array(code.counts)), "[HUFF_MAX_LENGTH + 1]")
        + _array("int8_t", "HUFF_SYMBOL", _ints(np.array(code.symbols)), f"[{len(code.symbols)}]")
        + f"#define HUFF_LUT_BITS {lut_bits}\n"
        + _array("uint16_t", "HUFF_LUT", _ints(huffman.lookup_table(code, lut_bits)), "[1 << HUFF_LUT_BITS]")
        + _array(
            "uint8_t",
            "STREAM",
            _ints(np.concatenate([stream, np.zeros(STREAM_PAD, np.uint8)])),
            f"[{stream.size + STREAM_PAD}]",
        )
    )


def _in_double(policy: IntegerPolicy) -> bool:
    """Whether the layers requantize in float64 (LiteRT's 16x8 kernels: `fixedpoint.DOUBLE_16X8`)."""
    return policy.activation_bits == 16 and policy.rounding in DOUBLE_16X8


def _even_features(policy: IntegerPolicy) -> int:
    """How many leading features LiteRT's builtin QUANTIZE rounds half to even ("ruy": blocks of 8)."""
    return (policy.obs_dim // 8) * 8 if policy.rounding == "ruy" else 0


def _head_constants(policy: IntegerPolicy) -> str:
    """A continuous head's constants: each output code's action value (int8), or the output scale
    and the bounds for the float32 head (int16)."""
    if policy.action_table is not None:
        table = policy.action_table
        return (
            f"\n/* each output code's action value (at code + 128), SB3's {'squash' if policy.squash else 'clip'} */\n"
            + _array("float", "ACTION_TABLE", map(hex_float, table.reshape(-1)), f"[{table.shape[0] * 256}]")
        )
    assert policy.low is not None and policy.high is not None
    k = policy.n_outputs
    low, high = policy.low.astype(np.float32), policy.high.astype(np.float32)
    second = ("SPAN", (high - low).astype(np.float32)) if policy.squash else ("HIGH", high)
    return (
        f"\n/* the float32 head: SB3's {'squash' if policy.squash else 'clip'} of the dequantized output */\n"
        f"static const float OUT_SCALE = {hex_float(policy.output.scale)};\n"
        + _array("float", "LOW", map(hex_float, low), f"[{k}]")
        + _array("float", second[0], map(hex_float, second[1]), f"[{k}]")
    )


def _act(policy: IntegerPolicy) -> str:
    n = policy.obs_dim
    normalize = policy.mean is not None and policy.std is not None and policy.clip is not None
    lines = [
        "\nvoid policy_act(const float *obs, POLICY_ACTION_T *action) {",
        "    int j;",
        f"    int32_t q[{csimd.padded(n, 8)}];",
        f"    for (j = 0; j < {n}; ++j) {{",
    ]
    if normalize:
        lines += [
            "        float x = (obs[j] - OBS_MEAN[j]) / OBS_STD[j];",
            "        if (x < -OBS_CLIP) {",
            "            x = -OBS_CLIP;",
            "        }",
            "        if (x > OBS_CLIP) {",
            "            x = OBS_CLIP;",
            "        }",
        ]
    else:
        lines.append("        float x = obs[j];")
    even = _even_features(policy)
    quantize = f"(j < {even} ? quantize_even : quantize)" if even else "quantize"
    lines += [f"        q[j] = {quantize}((x - IN_CENTER[j]) / IN_STEP[j]);", "    }"]
    if csimd.padded(n, 8) > n:
        lines += [f"    for (j = {n}; j < {csimd.padded(n, 8)}; ++j) {{", "        q[j] = 0;", "    }"]
    lines += [
        "#if POLICY_SIMD",
        f"    for (j = 0; j < {csimd.padded(n, 8)}; j += 4) {{",
        "        buf_a[j / 2] = pack(q[j], q[j + 2]);",
        "        buf_a[j / 2 + 1] = pack(q[j + 1], q[j + 3]);",
        "    }",
        "#else",
        f"    for (j = 0; j < {csimd.padded(n, 8)}; ++j) {{",
        "        buf_a[j] = (act_t)q[j];",
        "    }",
        "#endif",
    ]
    if cpairs.encoded(policy) is not None:
        lines.append("    bit_pos = HUFF_START;")
    elif policy.weight_coding == "huffman":
        lines += ["    bit_buf = 0;", "    bit_count = 0;", "    bit_next = STREAM;"]
    buffers = ("buf_a", "buf_b")
    lines += [f"    layer{i}({buffers[i % 2]}, {buffers[1 - i % 2]});" for i in range(len(policy.layers))]
    src = "buf_a" if len(policy.layers) % 2 == 0 else "buf_b"
    if policy.action_kind == "discrete":
        lines += [
            "    {",
            "        int best = 0;",
            f"        for (j = 1; j < {policy.n_outputs}; ++j) {{",
            f"            if (ACT({src}, j) > ACT({src}, best)) {{",
            "                best = j;",
            "            }",
            "        }",
            "        action[0] = (int32_t)best;",
            "    }",
        ]
    elif policy.action_table is not None:
        lines += [
            f"    for (j = 0; j < {policy.n_outputs}; ++j) {{",
            f"        action[j] = ACTION_TABLE[j * 256 + (ACT({src}, j) + 128)];",
            "    }",
        ]
    else:  # the float32 head of int16 outputs (zero point 0), in numpy's order of operations
        squash = "LOW[j] + (0.5f * (v + 1.0f)) * SPAN[j]"
        value = squash if policy.squash else "v < LOW[j] ? LOW[j] : (v > HIGH[j] ? HIGH[j] : v)"
        lines += [
            f"    for (j = 0; j < {policy.n_outputs}; ++j) {{",
            f"        const float v = OUT_SCALE * (float)ACT({src}, j);",
            f"        action[j] = {value};",
            "    }",
        ]
    lines.append("}\n")
    return "\n".join(lines)
