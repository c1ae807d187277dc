"""Canonical Huffman coding of weight codes: the C policy's `--weight-coding huffman` storage.

Lossless: the C policy decodes the same integer codes the reference computes with, one at a time in
the order its layers read them, so the arithmetic (and every action) is unchanged. 4-bit codes of a
trained MLP are far from uniform (most lie near zero), so they take about 3 bits each instead of 4.

The code is canonical (as DEFLATE's): it is described by how many codes each length has and the
symbols in code order, and a symbol's code is read most significant bit first; the stream's bits
fill each byte from its lowest bit. The C policy decodes a code with one look-up (`lookup_table`,
indexed by the stream's next k bits, as zlib's inflate), and only a code longer than k bit by bit.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CanonicalCode:
    """A canonical prefix code: `counts[n]` codes of length n (counts[0] = 0), `symbols` in code order."""

    counts: tuple[int, ...]
    symbols: tuple[int, ...]

    @property
    def max_length(self) -> int:
        return len(self.counts) - 1

    def codebook(self) -> dict[int, tuple[int, int]]:
        """symbol -> (code, length)."""
        book: dict[int, tuple[int, int]] = {}
        code, index = 0, 0
        for length in range(1, len(self.counts)):
            for _ in range(self.counts[length]):
                book[self.symbols[index]] = (code, length)
                code += 1
                index += 1
            code <<= 1
        return book


def code_lengths(values: np.ndarray) -> dict[int, int]:
    """Huffman code length of each distinct value, from its count (a lone value gets length 1)."""
    symbols, counts = np.unique(np.asarray(values).reshape(-1), return_counts=True)
    if len(symbols) == 1:
        return {int(symbols[0]): 1}
    heap = [(int(c), i, [int(s)]) for i, (s, c) in enumerate(zip(symbols, counts))]
    heapq.heapify(heap)
    lengths = {int(s): 0 for s in symbols}
    order = len(heap)
    while len(heap) > 1:
        c1, _, group1 = heapq.heappop(heap)
        c2, _, group2 = heapq.heappop(heap)
        for s in group1 + group2:
            lengths[s] += 1
        heapq.heappush(heap, (c1 + c2, order, group1 + group2))
        order += 1
    return lengths


def canonical_code(values: np.ndarray) -> CanonicalCode:
    """The canonical Huffman code of `values` (symbols ordered by length, then value)."""
    lengths = code_lengths(values)
    longest = max(lengths.values())
    counts = [0] * (longest + 1)
    for length in lengths.values():
        counts[length] += 1
    symbols = sorted(lengths, key=lambda s: (lengths[s], s))
    return CanonicalCode(tuple(counts), tuple(symbols))


def limited_code(values: np.ndarray, limit: int) -> CanonicalCode:
    """The optimal canonical prefix code of `values` with no code longer than `limit` bits
    (Larmore and Hirschberg's package-merge); Huffman's own lengths where they fit."""
    symbols, counts = np.unique(np.asarray(values).reshape(-1), return_counts=True)
    n = len(symbols)
    if n > 1 << limit:
        raise ValueError(f"{n} values do not fit codes of {limit} bits")
    lengths = code_lengths(values)
    if max(lengths.values()) > limit:
        order = np.argsort(counts, kind="stable")
        leaves = [(int(counts[i]), np.eye(n, dtype=np.int64)[i]) for i in order]
        items = list(leaves)
        for _ in range(limit - 1):
            packages = [
                (items[k][0] + items[k + 1][0], items[k][1] + items[k + 1][1]) for k in range(0, len(items) - 1, 2)
            ]
            items = sorted(leaves + packages, key=lambda item: item[0])
        depth = np.sum([item[1] for item in items[: 2 * n - 2]], axis=0)
        lengths = {int(s): int(d) for s, d in zip(symbols, depth)}
    longest = max(lengths.values())
    histogram = [0] * (longest + 1)
    for length in lengths.values():
        histogram[length] += 1
    return CanonicalCode(tuple(histogram), tuple(sorted(lengths, key=lambda s: (lengths[s], s))))


def encode(values: np.ndarray, code: CanonicalCode) -> np.ndarray:
    """The bit stream of `values` (flattened, in order) as uint8 bytes, lowest bit first."""
    book = code.codebook()
    bits: list[int] = []
    for v in np.asarray(values).reshape(-1).tolist():
        word, length = book[int(v)]
        bits.extend((word >> (length - 1 - k)) & 1 for k in range(length))
    return np.packbits(np.array(bits, dtype=np.uint8), bitorder="little")


def decode(stream: np.ndarray, code: CanonicalCode, n: int) -> np.ndarray:
    """The first `n` values of `stream`, decoded as the C policy does (the check of `encode`)."""
    bits = np.unpackbits(np.asarray(stream, dtype=np.uint8), bitorder="little").tolist()
    out, pos = [], 0
    for _ in range(n):
        word, first, index = 0, 0, 0
        for length in range(1, len(code.counts)):
            word |= bits[pos]
            pos += 1
            count = code.counts[length]
            if word - first < count:
                out.append(code.symbols[index + word - first])
                break
            index += count
            first = (first + count) << 1
            word <<= 1
        else:
            raise ValueError("the stream holds a word the code does not have")
    return np.array(out, dtype=np.int64)


LOOKUP_BITS = 6  # the C policy's table: 2^6 entries, 128 bytes of flash; longer codes are read bit by bit


def lookup_table(code: CanonicalCode, bits: int) -> np.ndarray:
    """The decoding table of the stream's next `bits` bits (the first at bit 0): for every code of at most
    `bits` bits, each index that starts with it holds (length << 8) | (symbol & 0xFF); 0 where the next
    code is longer (read bit by bit)."""
    table = np.zeros(1 << bits, dtype=np.uint16)
    for symbol, (word, length) in code.codebook().items():
        if length > bits:
            continue
        reversed_word = int(format(word, f"0{length}b")[::-1], 2)  # the stream holds the first bit lowest
        for high in range(1 << (bits - length)):
            table[reversed_word | (high << length)] = (length << 8) | (symbol & 0xFF)
    return table


def decode_with_table(stream: np.ndarray, code: CanonicalCode, n: int, bits: int) -> np.ndarray:
    """`decode` as the C policy does it: a look-up of the next `bits` bits, else bit by bit."""
    table = lookup_table(code, bits)
    padded = np.concatenate([np.asarray(stream, dtype=np.uint8), np.zeros(8, dtype=np.uint8)])
    stream_bits = np.unpackbits(padded, bitorder="little")
    out, pos = [], 0
    for _ in range(n):
        window = int(np.dot(stream_bits[pos : pos + bits], 1 << np.arange(bits)))
        entry = int(table[window])
        if entry:
            out.append(((entry & 0xFF) ^ 0x80) - 0x80)
            pos += entry >> 8
            continue
        value = decode(np.packbits(stream_bits[pos:], bitorder="little"), code, 1)[0]
        out.append(int(value))
        pos += code.codebook()[int(value)][1]
    return np.array(out, dtype=np.int64)
