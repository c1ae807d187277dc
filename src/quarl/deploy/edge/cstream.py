"""The C policy's Huffman-coded stream (`weight_coding="huffman"`): every small integer the policy
reads per call, in the order it reads them, in one canonical Huffman code (`huffman`).

Per layer: its Tanh table, if it has one, as the 128 steps of its odd half (codes 1..127, then the
magnitude at code -128), decoded into RAM when the layer starts; then per output channel its weight
codes and, where the layer's shifts differ, its shift's difference from the layer's first (where the
layer requantizes by multiplier and shift). A trained MLP's codes crowd near zero and the tables
rise in steps of 0 to 2, so the stream takes about 3 bits per 4-bit weight. The values, and so
every action, are the reference's.
"""

from __future__ import annotations

import numpy as np

from quarl.deploy.edge import huffman
from quarl.deploy.edge.fixedpoint import DOUBLE_16X8
from quarl.deploy.edge.integer import Dense, IntegerPolicy
from quarl.errors import QuarlError


def shifts_read(policy: IntegerPolicy) -> bool:
    """Whether the layers requantize by multiplier and shift (not LiteRT's float64 16x8 product)."""
    return not (policy.activation_bits == 16 and policy.rounding in DOUBLE_16X8)


def shift_varies(layer: Dense) -> bool:
    """Whether the layer's output channels have different shifts (the stream holds each one's)."""
    return bool(np.any(layer.shift != layer.shift[0]))


def is_odd(table: np.ndarray) -> bool:
    """Whether an int8 table indexed by code + 128 is odd (t[-q] = -t[q] for q in 1..127, t[0] = 0)."""
    full = np.asarray(table, dtype=np.int64)
    q = np.arange(1, 128)
    return bool(full[128] == 0 and np.array_equal(full[128 - q], -full[128 + q]))


def half_table(table: np.ndarray) -> np.ndarray:
    """An odd int8 table (the Tanh of a zero-point-0 input) as its codes 0..127 and, last, its code
    -128: 129 bytes instead of 256."""
    if not is_odd(table):
        raise ValueError("the table is not odd")
    full = np.asarray(table, dtype=np.int64)
    return np.concatenate([full[128:], full[:1]]).astype(np.int8)


def table_steps(layer: Dense) -> np.ndarray:
    """The steps of a layer's odd int8 Tanh table: magnitudes at codes 0..127 and -128, differenced."""
    assert layer.tanh_table is not None
    if not is_odd(layer.tanh_table):
        raise QuarlError(f"{layer.name}'s Tanh table is not odd, so the Huffman-coded C policy cannot store it.")
    half = half_table(layer.tanh_table).astype(np.int64)
    return np.diff(np.concatenate([half[:128], -half[128:]]))


def values(policy: IntegerPolicy) -> np.ndarray:
    """Every value of the stream, in the order the C policy reads them."""
    parts: list[np.ndarray] = []
    shifts = shifts_read(policy)
    for layer in policy.layers:
        if layer.tanh_table is not None:
            parts.append(table_steps(layer))
        codes = layer.weight.astype(np.int64)
        if shifts and shift_varies(layer):
            deltas = layer.shift.astype(np.int64) - int(layer.shift[0])
            codes = np.concatenate([codes, deltas[:, None]], axis=1)
        parts.append(codes.reshape(-1))
    out = np.concatenate(parts)
    if out.min() < -128 or out.max() > 127:
        raise QuarlError("A value of the C policy's stream does not fit int8: use weight_coding=packed.")
    return out


def encoded(policy: IntegerPolicy) -> tuple[huffman.CanonicalCode, np.ndarray]:
    """The stream's canonical code and its bytes."""
    stream = values(policy)
    code = huffman.canonical_code(stream)
    return code, huffman.encode(stream, code)
