"""How a weight tensor is cut into the groups that share a scale.

A weight is seen as a matrix of rows: a Linear weight [out, in] as it is, a Conv weight
[out, in, k...] as [out, in * k...] (each row is one output's reduction, as in the im2col GEMM), a
1-D tensor (a bias) as one row. Blocks of `block` elements run along each row, the reduction axis
the MX and NVFP4 GEMMs scale along ("rows"), or along the flattened tensor as bitsandbytes cuts NF4
("flat"). A row (or tensor) whose length is not a multiple of the block ends in a short block: it
is its own block, with its own scale. A CartPole policy's first layer [64, 4] has 64 blocks of 4.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F

AXES = ("rows", "flat")


def matrix_shape(shape: Sequence[int], axis: str = "rows") -> tuple[int, int]:
    """(rows, row length) of a tensor of `shape` seen as a matrix ("flat": one row)."""
    numel = math.prod(shape)
    if axis == "flat" or len(shape) < 2:
        return 1, numel
    return shape[0], numel // shape[0] if shape[0] else 0


def as_matrix(w: torch.Tensor, axis: str = "rows") -> torch.Tensor:
    """`w` as the matrix `matrix_shape` describes."""
    return w.reshape(matrix_shape(w.shape, axis))


def block_count(shape: Sequence[int], block: int, axis: str) -> int:
    """Blocks of a tensor of `shape`, short ones included (0 for an empty tensor)."""
    rows, length = matrix_shape(shape, axis)
    return rows * math.ceil(length / block)


def to_blocks(matrix: torch.Tensor, block: int) -> torch.Tensor:
    """[rows, length] -> [rows, blocks, block], the last block of each row padded with zeros (which
    change no block's absolute maximum)."""
    rows, length = matrix.shape
    padded = F.pad(matrix, (0, -length % block))
    return padded.reshape(rows, -1, block)


def from_blocks(blocks: torch.Tensor, length: int) -> torch.Tensor:
    """[rows, blocks, block] -> [rows, length]: `to_blocks` undone, padding dropped."""
    return blocks.reshape(blocks.shape[0], -1)[:, :length]
