"""The integer policy as self-contained C99: `policy.h` and `policy.c`, for microcontrollers.

The source computes exactly `IntegerPolicy.act` (quarl.deploy.edge.integer): int8 (or packed 4-/2-bit)
weights in `const` arrays (flash), each row laid out for the Cortex-M4's SXTB16/SMLAD (`csimd`),
int32 biases, TFLite's fixed-point requantization, Tanh as a 256-entry table, activations in two
static int8 buffers; no dynamic allocation and no libm. Floats appear only where the observation
enters (VecNormalize and the per-feature grid: subtract, divide, compare, truncate; every constant
printed as an exact hexadecimal float) and, for continuous actions, as a table of the action value of
each output code. With int16 activations (TFLite's 16x8 scheme) the buffers hold int16, the
accumulators int64, Tanh interpolates TFLite's sigmoid table, and a continuous head dequantizes and
squashes or clips in float32 (C99 does not contract those operations into fused multiply-adds, so they
round as numpy's). Huffman-coded weights (`cstream`) are decoded a row at a time by table look-up.

Where the compiler has the DSP extension (`__ARM_FEATURE_DSP`: arm-none-eabi-gcc -mcpu=cortex-m4) the
layers' dot products run two rows at a time on SXTB16 and SMLAD (SMLALD for 16x8) through the ACLE
intrinsics of <arm_acle.h>; elsewhere a portable C99 loop reads the same layout. Integer sums do not
depend on their order, so both give the reference's actions bit for bit. It compiles warning-free with
`-std=c99 -Wall -Wextra -Werror -pedantic` for the host and for `arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb`.

    #include "policy.h"
    float obs[POLICY_OBS_DIM];  POLICY_ACTION_T action[POLICY_ACTION_DIM];
    policy_act(obs, action);   /* discrete: action[0] is the index; continuous: the action values */
"""

from __future__ import annotations

import re
from typing import Iterable

import numpy as np

from quarl.deploy.edge import c_runtime, csimd, cstream, huffman
from quarl.deploy.edge.csimd import pack_weights
from quarl.deploy.edge.cstream import half_table, is_odd
from quarl.deploy.edge.fixedpoint import DOUBLE_16X8, SIGMOID_TABLE_UINT16
from quarl.deploy.edge.integer import Dense, IntegerPolicy
from quarl.errors import QuarlError

PER_LINE = 24  # array values per source line
STREAM_PAD = 4  # zero bytes after the stream: the decoder's bit buffer reads up to 4 bytes ahead


def _ident(name: str) -> str:
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name).strip("_") or "policy"
    return ident if not ident[0].isdigit() else f"p_{ident}"


def _hex_float(x: float) -> str:
    """An exact C float literal of a float32 value."""
    value = float(np.float32(x))
    if value == 0.0:
        return "-0.0f" if np.signbit(np.float32(x)) else "0.0f"
    return f"{value.hex()}f"


def _values(values: Iterable[str], indent: str = "    ") -> str:
    items = list(values)
    lines = [", ".join(items[i : i + PER_LINE]) for i in range(0, len(items), PER_LINE)]
    return indent + f",\n{indent}".join(lines)


def _array(ctype: str, name: str, values: Iterable[str], dims: str) -> str:
    return f"static const {ctype} {name}{dims} = {{\n{_values(values)}\n}};\n"


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
    2^47, as TFLite's 16x8 requantization assumes), checked."""
    codes = layer.weight.astype(np.int64)
    bias = layer.bias.astype(np.int64) - layer.input.zero_point * codes.sum(axis=1)
    worst = np.abs(bias) + (-layer.input.qmin) * np.abs(codes).sum(axis=1)
    if np.any(worst >= (2**31 if layer.bits == 8 else 2**47)):
        raise QuarlError(
            f"{layer.name}'s accumulator could overflow: its bias or weights are too large for int{layer.bits} "
            "activations."
        )
    return bias


def _narrow_bias(layer: Dense) -> bool:
    """Whether the folded bias fits the narrow type (int16 beside int32 accumulators, int32 beside int64)."""
    limit = 2**15 if layer.bits == 8 else 2**31
    return bool(np.all(np.abs(folded_bias(layer)) < limit))


def _bias_types(policy: IntegerPolicy) -> tuple[str, str]:
    return ("int16_t", "int32_t") if policy.activation_bits == 8 else ("int32_t", "int64_t")


def _uniform(a: np.ndarray) -> bool:
    return bool(np.all(np.asarray(a) == np.asarray(a).reshape(-1)[0]))


def data_bytes(policy: IntegerPolicy) -> int:
    """Bytes of the constant arrays `source` emits (weights, biases, requantization, tables, float
    constants): the tensors the C policy computes with, without its code and layer descriptors."""
    total = 4 * 2 * policy.obs_dim  # IN_CENTER, IN_STEP
    if policy.mean is not None:
        total += 4 * 2 * policy.obs_dim + 4  # OBS_MEAN, OBS_STD, OBS_CLIP
    coded = policy.weight_coding == "huffman"
    if coded:  # the weights, shifts and Tanh tables are in the stream
        code, stream = cstream.encoded(policy)
        total += stream.size + STREAM_PAD + len(code.counts) + len(code.symbols)
        total += 2 << min(code.max_length, huffman.LOOKUP_BITS)  # HUFF_LUT
    for layer in policy.layers:
        rows = layer.weight.shape[0]
        total += rows * (1 if _narrow_bias(layer) else 2) * (2 if layer.bits == 8 else 4)
        total += 0 if _uniform(layer.multiplier) else 4 * rows
        if coded:
            continue
        total += pack_weights(layer.weight, layer.weight_bits).size
        total += 0 if _uniform(layer.shift) else rows
        if layer.tanh_table is not None:
            total += 129 if is_odd(layer.tanh_table) else 256
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
    act_t = "int16_t" if wide else "int8_t"
    narrow_t, wide_t = _bias_types(policy)
    discrete = policy.action_kind == "discrete"
    layers = policy.layers
    width = max(max(layer.weight.shape[0] for layer in layers), policy.obs_dim, 1)
    scheme = "16x8 scheme (int16 activations, int8 weights, int64 biases)" if wide else "int8 scheme"
    parts: list[str] = [
        f"/* quarl full-integer policy ({policy.algo or 'SB3'}, {len(layers)} layers, {bits}-bit weights):\n"
        " * generated by"
        " quarl.deploy.edge.cgen from the integer reference quarl.deploy.edge.integer, do not edit.\n"
        f" * Arithmetic: TFLite's {scheme}: per-channel symmetric weights, requantization by a\n"
        f" * fixed-point multiplier and shift ({policy.rounding} rounding). No heap, no libm. */\n",
        f'#include "{name}.h"\n',
        csimd.PRELUDE + "\n",
        "#define I32_MIN (-2147483647 - 1)\n#define I32_MAX 2147483647\n",
        f"#define ACT_MIN ({policy.input.qmin})\n#define ACT_MAX {policy.input.qmax}\n",
        f"typedef {act_t} act_t;\ntypedef {'int64_t' if wide else 'int32_t'} acc_t;\n\n",
    ]
    n = policy.obs_dim
    if policy.mean is not None and policy.std is not None and policy.clip is not None:
        parts.append(_array("float", "OBS_MEAN", map(_hex_float, policy.mean), f"[{n}]"))
        parts.append(_array("float", "OBS_STD", map(_hex_float, policy.std), f"[{n}]"))
        parts.append(f"static const float OBS_CLIP = {_hex_float(policy.clip)};\n")
    parts.append(_array("float", "IN_CENTER", map(_hex_float, policy.center), f"[{n}]"))
    parts.append(_array("float", "IN_STEP", map(_hex_float, policy.step), f"[{n}]"))
    coded = policy.weight_coding == "huffman"
    if coded:
        parts.append(_stream_arrays(policy))
    for i, layer in enumerate(layers):
        rows, cols = layer.weight.shape
        parts.append(f"\n/* {layer.name}: {cols} -> {rows}, {layer.activation} */\n")
        if not coded:  # each row in the SIMD layout (csimd), which the portable path reads too
            packed = pack_weights(csimd.layout(layer.weight, bits, policy.activation_bits), bits)
            wtype = "int8_t" if bits == 8 else "uint8_t"
            wvals = _ints(packed.view(np.int8)) if bits == 8 else _ints(packed)
            parts.append(_array(wtype, f"L{i}_W", wvals, f"[{packed.size}]"))
        bias = folded_bias(layer)
        if _narrow_bias(layer):
            parts.append(_array(narrow_t, f"L{i}_B", _int32s(bias), f"[{rows}]"))
        else:
            parts.append(_array(wide_t, f"L{i}_B", _int64s(bias) if wide else _int32s(bias), f"[{rows}]"))
        if not _uniform(layer.multiplier):
            parts.append(_array("int32_t", f"L{i}_M", _int32s(layer.multiplier), f"[{rows}]"))
        if not _uniform(layer.shift) and not coded:
            parts.append(_array("int8_t", f"L{i}_S", _ints(layer.shift), f"[{rows}]"))
        if layer.tanh_table is not None and not coded:
            table = half_table(layer.tanh_table) if is_odd(layer.tanh_table) else layer.tanh_table
            parts.append(_array("int8_t", f"L{i}_TANH", _ints(table), f"[{len(table)}]"))
        if _in_double(policy):
            parts.append(_array("double", f"L{i}_REAL", (float(v).hex() for v in layer.real_multiplier), f"[{rows}]"))
    if any(layer.tanh_int16 for layer in layers):
        parts.append("\n/* TFLite's sigmoid(i / 24) in unsigned 0.16 fixed point: its int16 Tanh interpolates it */\n")
        parts.append(_array("uint16_t", "SIGMOID", _ints(SIGMOID_TABLE_UINT16), f"[{len(SIGMOID_TABLE_UINT16)}]"))
    if not discrete:
        parts.append(_head_constants(policy))
    parts.append(f"\nstatic act_t buf_a[{width}];\nstatic act_t buf_b[{width}];\n")
    requantize = (c_runtime.REQUANTIZE_16X8 if wide else c_runtime.REQUANTIZE)[policy.rounding]
    parts.append(c_runtime.RUNTIME.replace("@REQUANTIZE@", requantize))
    if _even_features(policy):
        parts.append(c_runtime.QUANTIZE_EVEN)
    tables = any(layer.tanh_table is not None for layer in layers)
    parts.append(c_runtime.weight_reader(8 if coded else bits))  # a coded row is decoded into int8
    parts.append(csimd.dot(8 if coded else bits, policy.activation_bits))
    parts.append(
        f"#define ROW_MAX {max(layer.weight.shape[1] for layer in layers)}\n" + c_runtime.HUFFMAN_READER
        if coded
        else ""
    )
    parts.append(c_runtime.STREAM_TABLE if coded and tables else "")
    parts.append(_layer_t(policy))
    parts.append(_layers(policy))
    tanh16 = any(layer.tanh_int16 for layer in layers)
    parts.append(c_runtime.TANH16 if tanh16 else "" if wide else c_runtime.ODD_LOOKUP)
    activate = (c_runtime.TANH16_APPLY if tanh16 else c_runtime.PLAIN_APPLY) if wide else c_runtime.TABLE_APPLY
    if _in_double(policy):
        call = c_runtime.REQUANTIZE_DOUBLE
    else:
        call = c_runtime.REQUANTIZE_STREAM if coded else c_runtime.REQUANTIZE_FIXED
    output = c_runtime.OUTPUT.replace("@BIAS@", c_runtime.BIAS).replace("@ACTIVATE@", activate)
    parts.append(output.replace("@REQUANTIZE@", call))
    if coded:
        fc_stream = c_runtime.FC_STREAM.replace("@PREPARE@", c_runtime.READ_TABLE if tables else "")
        parts.append(fc_stream.replace("@SHIFT@", c_runtime.READ_SHIFT if cstream.shifts_read(policy) else ""))
    else:
        parts.append(c_runtime.FC)
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
            + _array("float", "ACTION_TABLE", map(_hex_float, table.reshape(-1)), f"[{table.shape[0] * 256}]")
        )
    assert policy.low is not None and policy.high is not None
    k = policy.n_outputs
    low, high = policy.low.astype(np.float32), policy.high.astype(np.float32)
    second = ("SPAN", (high - low).astype(np.float32)) if policy.squash else ("HIGH", high)
    return (
        f"\n/* the float32 head: SB3's {'squash' if policy.squash else 'clip'} of the dequantized output */\n"
        f"static const float OUT_SCALE = {_hex_float(policy.output.scale)};\n"
        + _array("float", "LOW", map(_hex_float, low), f"[{k}]")
        + _array("float", second[0], map(_hex_float, second[1]), f"[{k}]")
    )


def _layer_t(policy: IntegerPolicy) -> str:
    narrow_t, wide_t = _bias_types(policy)
    if policy.activation_bits == 8:
        tanh = "    const int8_t *table;\n"
        tail = "    int8_t odd; /* the table: codes 0..127 and -128 of an odd table (else all 256, by code + 128) */\n"
        about = "and Tanh table (null: none)"
    else:
        tanh = "    int32_t tanh_mult; /* int16 Tanh's input multiplier (0: no Tanh) and left shift */\n"
        tanh += (
            "    const double *real; /* the real multipliers (LiteRT's float64 requantization) */\n"
            if _in_double(policy)
            else ""
        )
        tail = "    int8_t tanh_shift;\n"
        about = "and Tanh (TFLite's int16 TANH parameters)"
    return f"""
/* a layer: its weights, bias (the input zero point folded in; {narrow_t} or {wide_t}: the other pointer
   null), requantization (per channel, or one value for every channel: the pointer null) {about} */
typedef struct {{
    const weight_t *w;
    const {narrow_t} *bias_narrow;
    const {wide_t} *bias_wide;
    const int32_t *mult;
    const int8_t *shift;
{tanh}    int32_t mult_all;
    int16_t n_in, n_out, out_zp, act_min;
    int8_t shift_all;
{tail}}} layer_t;
"""


def _layers(policy: IntegerPolicy) -> str:
    entries = []
    for i, layer in enumerate(policy.layers):
        rows, cols = layer.weight.shape
        narrow = _narrow_bias(layer)
        coded = policy.weight_coding == "huffman"
        mult = "0" if _uniform(layer.multiplier) else f"L{i}_M"
        shift = "0" if _uniform(layer.shift) or coded else f"L{i}_S"
        if policy.activation_bits == 8:
            table = "0" if layer.tanh_table is None else "TANH" if coded else f"L{i}_TANH"
            odd = int(layer.tanh_table is not None and is_odd(layer.tanh_table))
            tanh, tail = f"{table}, ", f", {odd}"
        else:
            tanh_mult, tanh_shift = layer.tanh_int16 or (0, 0)
            tanh, tail = f"{tanh_mult}, " + (f"L{i}_REAL, " if _in_double(policy) else ""), f", {tanh_shift}"
        weights = "0" if coded else f"L{i}_W"  # a coded layer reads the stream
        entries.append(
            f"    {{{weights}, {f'L{i}_B' if narrow else '0'}, {'0' if narrow else f'L{i}_B'}, {mult}, {shift}, {tanh}"
            f"{_int32s(layer.multiplier[:1])[0]}, {cols}, {rows}, {layer.output.zero_point}, "
            f"{layer.act_min}, {int(layer.shift[0])}{tail}}},"
        )
    return (
        f"\n#define N_LAYERS {len(policy.layers)}\nstatic const layer_t LAYERS[N_LAYERS] = {{\n"
        + "\n".join(entries)
        + "\n};\n"
    )


def _act(policy: IntegerPolicy) -> str:
    n = policy.obs_dim
    normalize = policy.mean is not None and policy.std is not None and policy.clip is not None
    lines = [
        "\nvoid policy_act(const float *obs, POLICY_ACTION_T *action) {",
        "    int j;",
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
    lines += [f"        buf_a[j] = {quantize}((x - IN_CENTER[j]) / IN_STEP[j]);", "    }"]
    lines += (
        ["    bit_buf = 0;", "    bit_count = 0;", "    bit_next = STREAM;"]
        if policy.weight_coding == "huffman"
        else []
    )
    lines += [
        "    {",
        "        int l;",
        "        act_t *src = buf_a, *dst = buf_b, *swap;",
        "        for (l = 0; l < N_LAYERS; ++l) {",
        "            fc(&LAYERS[l], src, dst);",
        "            swap = src;",
        "            src = dst;",
        "            dst = swap;",
        "        }",
        "    }",
    ]
    src = "buf_a" if len(policy.layers) % 2 == 0 else "buf_b"
    if policy.action_kind == "discrete":
        lines += [
            "    {",
            "        int best = 0;",
            f"        for (j = 1; j < {policy.n_outputs}; ++j) {{",
            f"            if ({src}[j] > {src}[best]) {{",
            "                best = j;",
            "            }",
            "        }",
            "        action[0] = (int32_t)best;",
            "    }",
        ]
    elif policy.action_table is not None:
        lines += [
            f"    for (j = 0; j < {policy.n_outputs}; ++j) {{",
            f"        action[j] = ACTION_TABLE[j * 256 + ((int)({src}[j]) + 128)];",
            "    }",
        ]
    else:  # the float32 head of int16 outputs (zero point 0), in numpy's order of operations
        squash = "LOW[j] + (0.5f * (v + 1.0f)) * SPAN[j]"
        value = squash if policy.squash else "v < LOW[j] ? LOW[j] : (v > HIGH[j] ? HIGH[j] : v)"
        lines += [
            f"    for (j = 0; j < {policy.n_outputs}; ++j) {{",
            f"        const float v = OUT_SCALE * (float){src}[j];",
            f"        action[j] = {value};",
            "    }",
        ]
    lines.append("}\n")
    return "\n".join(lines)
