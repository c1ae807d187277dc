"""4-bit (and 2-bit) weights executed for real: ONNX Runtime's `MatMulNBits` (com.microsoft).

`MatMulNBits` multiplies float activations by a weight matrix stored as n-bit codes, block-wise
along the input dimension K: each block of `block_size` weights of one output unit has its own
float32 scale and n-bit zero point, and `weight = (code - zero_point) * scale`. Activations are not
stored; with `accuracy_level=4` (used here) ONNX Runtime quantizes each block of the activations to
int8 on the fly and multiplies in integers.

How the weights of a layer become codes:

- *exact*: weights that already lie on one grid of at most 2^bits levels containing 0, per tensor
  or per output unit (a quarl PTQ/QAT policy at quant.bits <= bits, any scheme whose zero is a level:
  affine, symmetric; `paper` when its rounding used at most 2^bits levels), are stored as those very
  levels: every block of a unit carries the unit's (or tensor's) scale and zero point. The executed
  weights equal the fake-quantized ones up to float32 rounding.
  The executed policy then differs from the fake-quantized one only by MatMulNBits's int8
  activations (per block, symmetric, computed per call). Measured on 2048 states of random-action
  episodes: PPO policies (actor 256-256) at PTQ 4-bit (affine per tensor, symmetric per channel)
  and 2-bit act as their fake-quant versions on 2048 of 2048 CartPole states, and Pendulum actions
  are within 1e-4 of the action range (mean 2e-5); tests/deploy/test_nbits.py asserts >= 97% and
  2% (mean 0.5%).
- *rtn*: any other weights (fp32, or more than 2^bits levels) are rounded to the nearest of 2^bits
  levels per block (quarl's `affine` scheme per block: range [min(0, block), max(0, block)], integer
  zero point), ONNX Runtime's own default (`MatMulNBitsQuantizer`, asymmetric RTN). That is a
  different, coarser policy than the network's, and the report says which layers were so rounded.
- *fp32*: layers MatMulNBits cannot run stay float32: convolutions, weights that are not a constant
  2-D matrix, and layers with fewer than MIN_K inputs (the smallest block is 16; a CartPole policy's
  first layer has 4 inputs, which as a 16-block would be larger than in fp32).

Block size: EXACT_BLOCK for exact codes (their scale is the same in every block, so the block size
changes nothing but speed, bytes and the blocks the activations are quantized in), RTN_BLOCK for
rounded weights, or the largest power of two <= K for smaller layers; K is padded to whole blocks.
Bytes per weight: bits/8 + (4 + bits/8) / block_size, so a large 4-bit layer with blocks of 256 is
7.7x smaller than fp32, 7.4x with blocks of 128 (scales are float32 because the activations are).

Speed (ONNX Runtime 1.31 on x86; benchmarks/bench_int4.py measures every setting side by side):
`accuracy_level=4` selects MLAS's CompInt8 kernels (activations quantized to int8 per block, 4-bit
codes unpacked to bytes and multiplied with vpmaddubsw, or vpdpbusd where the CPU has AVX-VNNI /
AVX512-VNNI); levels 0-3 select CompFp32 on x86 (fp16 and bf16 fall back to it), which at batch 1
converts every weight to float32 in registers and multiplies with FMA: 6x-40x slower here. Blocks of 256
are the fastest (fewer per-block float conversions; ONNX Runtime accepts 16 to 256). ONNX Runtime
prepacks the weights at session start (its default); without prepacking it dequantizes the whole
matrix to float32 on every call (hundreds of times slower). Graph optimisation levels change nothing.
The defaults here are the fastest of these settings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from quarl.deploy import onnx_io
from quarl.errors import QuarlError

log = logging.getLogger(__name__)

# Weights per block along K. Exact codes do not depend on it: the largest block with a fast CPU kernel
# (ONNX Runtime 1.31, x86 AVX2, 3x2048 MLP at batch 1: 4-bit 256 is 6% faster than 128; 2-bit 256
# has no kernel and runs 100x slower). Rounded weights: ONNX Runtime's default block of 128.
EXACT_BLOCK = {4: 256, 2: 128}
RTN_BLOCK = 128
MIN_K = 16  # MatMulNBits's smallest block
BLOCK_SIZES = (16, 32, 64, 128, 256)  # the block sizes ONNX Runtime's MatMulNBits accepts
ACCURACY_LEVEL = 4  # int8 activations inside MatMulNBits: the fast CPU kernels
ACCURACY_LEVELS = (0, 1, 2, 3, 4)
BITS = (2, 4)
GRID_TOLERANCE = 1e-3  # |w / step - integer| below this: w is on the grid


@dataclass
class Packed:
    """One weight matrix [N, K] in MatMulNBits's layout."""

    codes: np.ndarray  # uint8 [N, n_blocks, block_size * bits / 8]
    scales: np.ndarray  # float32 [N * n_blocks]
    zero_points: np.ndarray  # uint8 [N * ceil(n_blocks * bits / 8)]
    block_size: int
    exact: bool  # codes reproduce the given weights (else: rounded block-wise)


@dataclass
class Report:
    """What the conversion did with each weight layer (by its ONNX weight name)."""

    exact: list[str] = field(default_factory=list)
    rtn: list[str] = field(default_factory=list)
    fp32: dict[str, str] = field(default_factory=dict)  # name -> why it stays float32

    def summary(self, bits: int) -> str:
        parts = []
        if self.exact:
            parts.append(
                f"{len(self.exact)} layer(s) with the policy's own {bits}-bit weights ({', '.join(self.exact)})"
            )
        if self.rtn:
            parts.append(
                f"{len(self.rtn)} layer(s) rounded block-wise to {bits} bits, not on a {bits}-bit grid "
                f"({', '.join(self.rtn)})"
            )
        if self.fp32:
            parts.append("float32: " + "; ".join(f"{n} ({why})" for n, why in self.fp32.items()))
        return "; ".join(parts)


def block_size_for(k: int, largest: int) -> int:
    """The block size for a layer with `k` >= MIN_K inputs: `largest`, or the largest power of two <= k."""
    return int(min(largest, 2 ** int(np.floor(np.log2(k)))))


def _step(values: np.ndarray, levels: int) -> Optional[float]:
    """The step s of a grid {s * i : i integer} holding every one of the sorted unique `values`
    within `levels` consecutive levels, or None."""
    if len(values) > levels:
        return None
    if len(values) == 1:
        return float(abs(values[0])) or 1.0
    smallest, span = float(np.diff(values).min()), float(values[-1] - values[0])
    for k in range(1, levels):
        s = smallest / k
        if span / s > levels - 1 + GRID_TOLERANCE:
            return None
        r = values / s
        if np.all(np.abs(r - np.rint(r)) <= GRID_TOLERANCE):
            m = np.rint(r)
            return float((values * m).sum() / (m * m).sum())  # least squares: the step the values were made with
    return None


def _grid(w: np.ndarray, bits: int) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """Steps and zero points ([N] each) putting `w` [N, K] exactly on `bits`-bit codes: one grid for
    the tensor, else one per row; None if `w` is on no such grid."""
    levels = 2**bits
    w64 = w.astype(np.float64)
    if len(np.unique(w64[0])) > levels:  # on no grid, per tensor or per row (fp32 weights: decided here)
        return None
    step = _step(np.unique(w64), levels)
    if step is not None:
        steps = np.full(w.shape[0], step)
    else:
        found = []
        for row in w64:
            found.append(_step(np.unique(row), levels))
            if found[-1] is None:
                return None
        steps = np.asarray(found, dtype=np.float64)
    ints = np.rint(w64 / steps[:, None])
    lo, hi = -ints.min(axis=1), levels - 1 - ints.max(axis=1)  # zero point z: ints + z within [0, levels)
    zero = np.clip(np.full(len(steps), levels // 2), np.maximum(lo, 0), np.minimum(hi, levels - 1))
    if np.any(lo > hi):
        return None
    return steps, zero


def _rtn(w: np.ndarray, bits: int, block: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes [N, Kp], scales [N, n_blocks], zero points [N, n_blocks]: per block, the range
    [min(0, block), max(0, block)] in 2^bits levels with an integer zero point."""
    n, kp = w.shape
    blocks = w.reshape(n, kp // block, block).astype(np.float32)
    qmax = 2**bits - 1
    lo, hi = np.minimum(blocks.min(axis=2), 0), np.maximum(blocks.max(axis=2), 0)
    scales = (hi - lo) / qmax
    scales = np.where(scales > 0, scales, 1.0).astype(np.float32)
    zero = np.clip(np.rint(-lo / scales), 0, qmax)
    codes = np.clip(np.rint(blocks / scales[..., None]) + zero[..., None], 0, qmax)
    return codes.reshape(n, kp).astype(np.uint8), scales, zero.astype(np.uint8)


def _pack(values: np.ndarray, bits: int, fill: int = 0) -> np.ndarray:
    """uint8 values < 2^bits along the last axis, packed 8/bits to a byte, first in the lowest bits
    (the last axis padded with `fill` to whole bytes)."""
    per = 8 // bits
    pad = (-values.shape[-1]) % per
    if pad:
        values = np.concatenate([values, np.full((*values.shape[:-1], pad), fill, np.uint8)], axis=-1)
    grouped = values.reshape(*values.shape[:-1], -1, per).astype(np.uint8)
    out = np.zeros(grouped.shape[:-1], np.uint8)
    for i in range(per):
        out |= grouped[..., i] << (bits * i)
    return out


def pack(w: np.ndarray, bits: int = 4, block_size: Optional[int] = None) -> Packed:
    """A float weight matrix `w` [N, K] (output units x inputs) as MatMulNBits inputs: exact codes
    where `w` is on a grid of 2^bits levels (per tensor or per row), else block-wise RTN."""
    if bits not in BITS:
        raise ValueError(f"bits={bits}: MatMulNBits is used with {BITS} bits here")
    n, k = w.shape
    grid = _grid(np.asarray(w, np.float32), bits)
    block = block_size or block_size_for(k, EXACT_BLOCK[bits] if grid is not None else RTN_BLOCK)
    n_blocks = -(-k // block)
    padded = np.zeros((n, n_blocks * block), np.float32)
    padded[:, :k] = w
    if grid is not None:
        steps, zero = grid
        codes = (np.rint(padded / steps[:, None]) + zero[:, None]).astype(np.uint8)
        codes[:, k:] = zero[:, None]  # padding dequantizes to 0
        scales = np.repeat(steps.astype(np.float32)[:, None], n_blocks, axis=1)
        zeros = np.repeat(zero.astype(np.uint8)[:, None], n_blocks, axis=1)
    else:
        codes, scales, zeros = _rtn(padded, bits, block)
    return Packed(
        codes=_pack(codes.reshape(n, n_blocks, block), bits),
        scales=scales.reshape(-1).astype(np.float32),
        zero_points=_pack(zeros, bits, fill=2 ** (bits - 1)).reshape(-1),  # as ONNX Runtime pads
        block_size=block,
        exact=grid is not None,
    )


def dequantize(p: Packed, bits: int, k: int) -> np.ndarray:
    """The float32 weights [N, K] that MatMulNBits computes with (for tests and reports)."""
    per, n = 8 // bits, p.codes.shape[0]
    mask = 2**bits - 1
    codes = np.stack([(p.codes >> (bits * i)) & mask for i in range(per)], axis=-1).reshape(n, -1)
    n_blocks = p.codes.shape[1]
    zp_bytes = p.zero_points.reshape(n, -1)
    zeros = np.stack([(zp_bytes >> (bits * i)) & mask for i in range(per)], axis=-1).reshape(n, -1)[:, :n_blocks]
    scales = p.scales.reshape(n, n_blocks)
    w = (codes.reshape(n, n_blocks, -1).astype(np.float32) - zeros[..., None]) * scales[..., None]
    return w.reshape(n, -1)[:, :k]


def _attr(node, name: str, default):
    for a in node.attribute:
        if a.name == name:
            from onnx import helper

            return helper.get_attribute_value(a)
    return default


def _weight(node, inits: dict) -> tuple[Optional[np.ndarray], Optional[str]]:
    """The [N, K] weight of a Gemm / MatMul node with a constant 2-D weight, or (None, why not)."""
    from onnx import numpy_helper

    if node.input[1] not in inits:
        return None, "its weight is not a constant"
    w = numpy_helper.to_array(inits[node.input[1]])
    if w.ndim != 2 or w.dtype != np.float32:
        return None, f"its weight is not a float32 matrix ({w.dtype}, shape {list(w.shape)})"
    if node.op_type == "Gemm":
        if _attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0 or _attr(node, "beta", 1.0) != 1.0:
            return None, "Gemm with transA/alpha/beta"
        return (w if _attr(node, "transB", 0) else w.T), None
    return w.T, None  # MatMul: [K, N]


def _bias(node, inits: dict, n: int) -> Optional[np.ndarray]:
    from onnx import numpy_helper

    if node.op_type != "Gemm" or len(node.input) < 3 or not node.input[2]:
        return np.zeros(0, np.float32)
    if node.input[2] not in inits:
        return None
    c = numpy_helper.to_array(inits[node.input[2]]).astype(np.float32)
    return c.reshape(-1) if c.size == n else None


def quantize_nbits(
    model: bytes, bits: int = 4, block_size: Optional[int] = None, accuracy_level: int = ACCURACY_LEVEL
) -> tuple[bytes, Report]:
    """`model` (fp32 ONNX) with every Gemm / MatMul that MatMulNBits can run replaced by MatMulNBits
    at `bits`; the report says which layers are exact, rounded, or left in float32 and why.
    `block_size` (one of BLOCK_SIZES; None: EXACT_BLOCK / RTN_BLOCK) is the largest block, smaller
    layers get the largest power of two <= K; `accuracy_level` is MatMulNBits's attribute."""
    if block_size is not None and block_size not in BLOCK_SIZES:
        raise ValueError(f"block_size={block_size}: MatMulNBits accepts {BLOCK_SIZES}")
    if accuracy_level not in ACCURACY_LEVELS:
        raise ValueError(f"accuracy_level={accuracy_level}: MatMulNBits accepts {ACCURACY_LEVELS}")
    onnx = onnx_io.require("onnx", f"The onnx_int{bits} backend")
    from onnx import helper, numpy_helper

    proto = onnx.load_model_from_string(model)
    graph = proto.graph
    inits = {t.name: t for t in graph.initializer}
    report, nodes, used_new = Report(), [], []
    for node in graph.node:
        if node.op_type in ("Conv", "ConvTranspose"):
            report.fp32[node.input[1]] = "a convolution: MatMulNBits runs matrix products only"
        if node.op_type not in ("Gemm", "MatMul"):
            nodes.append(node)
            continue
        w, why = _weight(node, inits)
        bias = None if w is None else _bias(node, inits, w.shape[0])
        if w is not None and bias is None:
            why = "its bias is not a constant vector"
        elif w is not None and w.shape[1] < MIN_K:
            why = f"{w.shape[1]} inputs, fewer than MatMulNBits's smallest block of {MIN_K}"
        if why is not None:
            report.fp32[node.input[1]] = why
            nodes.append(node)
            continue
        assert w is not None and bias is not None  # a layer without both has a reason to stay in float32
        name = node.input[1]
        packed = pack(w, bits, None if block_size is None else block_size_for(w.shape[1], block_size))
        (report.exact if packed.exact else report.rtn).append(name)
        tensors = [
            numpy_helper.from_array(packed.codes, f"{name}_q{bits}"),
            numpy_helper.from_array(packed.scales, f"{name}_scales"),
            numpy_helper.from_array(packed.zero_points, f"{name}_zero_points"),
        ]
        inputs = [node.input[0], *(t.name for t in tensors)]
        if bias.size:
            tensors.append(numpy_helper.from_array(bias, f"{name}_bias"))
            inputs += ["", tensors[-1].name]
        used_new += tensors
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                inputs,
                list(node.output),
                name=f"{node.name or name}_q{bits}",
                domain="com.microsoft",
                K=w.shape[1],
                N=w.shape[0],
                bits=bits,
                block_size=packed.block_size,
                accuracy_level=accuracy_level,
            )
        )
    if not report.exact and not report.rtn:
        raise QuarlError(
            f"backend=onnx_int{bits} has no layer it can run in {bits} bits (MatMulNBits runs Linear layers with at "
            f"least {MIN_K} inputs; {'; '.join(f'{n}: {w}' for n, w in report.fp32.items()) or 'none found'}): "
            "use backend=onnx_int8, onnx or torch."
        )
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(used_new)
    referenced = {i for n in graph.node for i in n.input}
    kept = [t for t in graph.initializer if t.name in referenced]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    del graph.value_info[:]
    if not any(o.domain == "com.microsoft" for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return proto.SerializeToString(), report
