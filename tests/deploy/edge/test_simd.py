"""The C policy's SIMD path: the weight layout (numpy: SXTB16's pairs of the laid-out words meet the
kernel's activation pairs and give the plain dot products), the Huffman decoding table, the host C
bit for bit on odd layer sizes (widths not multiples of 4 or 2, a single output), and the Cortex-M4
build on the DSP extension (SMLAD in the object code, the same actions under QEMU)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO

from quarl.deploy import acting_network
from quarl.deploy.edge import cpairs, csimd, huffman, integer_policy
from quarl.deploy.edge.cgen import header, source
from quarl.deploy.edge.targets import TARGETS
from quarl.deploy.edge.toolchain import CPolicy, available, tool
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.deploy.edge.test_cgen import PTQ8

torch.set_num_threads(1)


def _sxtb16(word: int, rotate: bool) -> tuple[int, int]:
    """SXTB16 (of the word rotated right by 8 bits): bytes 0 and 2 (1 and 3) as signed values."""
    b = [(word >> (8 * k)) & 0xFF for k in range(4)]
    lo, hi = (b[1], b[3]) if rotate else (b[0], b[2])
    return (lo ^ 0x80) - 0x80, (hi ^ 0x80) - 0x80


def _pairs(x: np.ndarray) -> list[int]:
    """The activations as the C keeps them: per 4, the int16 pairs (a0, a2) and (a1, a3), as words."""
    padded = np.zeros(-(-len(x) // 16) * 16, dtype=np.int64)
    padded[: len(x)] = x
    return [
        (int(padded[4 * g + k]) & 0xFFFF) | ((int(padded[4 * g + k + 2]) & 0xFFFF) << 16)
        for g in range(len(padded) // 4)
        for k in (0, 1)
    ]


def _smlad(w: tuple[int, int], word: int) -> int:
    lo, hi = ((word & 0xFFFF) ^ 0x8000) - 0x8000, ((word >> 16) ^ 0x8000) - 0x8000
    return w[0] * lo + w[1] * hi


def _kernel_dots(words: np.ndarray, rows: int, x: np.ndarray, weight_bits: int) -> list[int]:
    """The SIMD kernels' sums from a layer's stored words (4 rows interleaved word by word, then the
    rows left one by one), as the C computes them: SXTB16 of each word (slot j moved to the top of each
    byte) and of it rotated by 8, SMLAD with the activation pairs."""
    per, scaled = 8 // weight_bits, 8 - weight_bits
    top = sum(((0xFF << scaled) & 0xFF) << (8 * k) for k in range(4))
    n_words = len(words) // rows
    act = _pairs(x)
    sums = []
    for r in range(rows):
        block, k = divmod(r, 4)
        full = rows - rows % 4
        stride, base = (4, block * 4 * n_words + k) if r < full else (1, full * n_words + (r - full) * n_words)
        total = 0
        for j in range(n_words):
            word = int(words[base + j * stride])
            for slot in range(per):
                w = ((word << (8 - weight_bits * (slot + 1))) & 0xFFFFFFFF) & top if per > 1 else word
                a, b = act[2 * (j * per + slot)], act[2 * (j * per + slot) + 1]
                total += _smlad(_sxtb16(w, False), a) + _smlad(_sxtb16(w, True), b)
        assert total % (1 << scaled) == 0
        sums.append(total >> scaled)
    return sums


@pytest.mark.parametrize("weight_bits", [8, 4, 2])
@pytest.mark.parametrize("n, rows", [(3, 1), (4, 5), (13, 7), (37, 4), (64, 9)])
def test_layout_pairs_reproduce_the_plain_dot_products(weight_bits, n, rows):
    """Random codes through a numpy model of the kernels: the stored words (padded, laid out, packed,
    interleaved) and the activation pairs give the plain dot products, odd widths and a single row too."""
    rng = np.random.default_rng(n * rows)
    lo, hi = -(2 ** (weight_bits - 1)), 2 ** (weight_bits - 1) - 1
    codes = rng.integers(lo, hi + 1, size=(rows, n))
    codes[0, : min(n, 4)] = lo  # the extreme codes too
    order = csimd.order(n, weight_bits)
    assert sorted(order.tolist()) == list(range(csimd.padded(n, weight_bits)))  # a permutation of the padded row
    words = csimd.layer_words(codes, weight_bits)
    assert words.dtype == np.uint32 and len(words) == rows * csimd.row_words(n, weight_bits)
    for activation_bits in (8, 16):
        x = rng.integers(-(2 ** (activation_bits - 1)), 2 ** (activation_bits - 1), size=n)
        assert _kernel_dots(words, rows, x, weight_bits) == [int(v) for v in codes @ x]


def test_huffman_table_decodes_as_the_canonical_code():
    rng = np.random.default_rng(1)
    values = np.clip(np.round(rng.normal(0, 2.5, 3000)), -8, 7).astype(np.int64)
    values[:3] = [-8, 7, -8]  # rare values: codes longer than the table
    code = huffman.canonical_code(values)
    stream = huffman.encode(values, code)
    for bits in (1, 3, huffman.LOOKUP_BITS, code.max_length):
        assert np.array_equal(huffman.decode_with_table(stream, code, len(values), bits), values)
    assert code.max_length > huffman.LOOKUP_BITS  # the bit-by-bit path was taken


def _odd_policy(activation_bits: int, weight_bits: int, coding: str):
    """PPO on Pendulum (3 observations, 1 action) with hidden widths 21 and 35."""
    torch.manual_seed(0)
    model = PPO("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [21, 35]}, n_steps=64, seed=0, device="cpu")
    quantize_policy(model, PTQ8)
    states = random_observations("Pendulum-v1", 1000, seed=2)
    policy = integer_policy(
        acting_network(model), states[:300], weight_bits=weight_bits, activation_bits=activation_bits
    )
    assert [layer.weight.shape for layer in policy.layers] == [(21, 3), (35, 21), (1, 35)]
    return dataclasses.replace(policy, weight_coding=coding), states


ODD = [(8, 8, "packed"), (8, 4, "packed"), (8, 2, "packed"), (16, 8, "packed"), (8, 4, "huffman"), (16, 8, "huffman")]


@pytest.mark.parametrize("activation_bits, weight_bits, coding", ODD)
def test_c_policy_is_exact_on_odd_layer_sizes(activation_bits, weight_bits, coding, tmp_path):
    policy, states = _odd_policy(activation_bits, weight_bits, coding)
    got, expected = CPolicy(policy, tmp_path).act(states), policy.act(states)
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def _arm_missing():
    objdump = None if shutil.which("arm-none-eabi-objdump") else "arm-none-eabi-objdump is not installed"
    return available("arm-none-eabi-gcc", "qemu-system-arm") or objdump


@pytest.mark.parametrize("activation_bits, weight_bits, coding", ODD)
def test_the_cortex_m4_build_runs_the_dsp_kernel_bit_for_bit(activation_bits, weight_bits, coding, tmp_path):
    missing = _arm_missing()
    if missing:
        pytest.skip(missing)
    gcc = tool("arm-none-eabi-gcc")
    defined = subprocess.run(
        [gcc, "-mcpu=cortex-m4", "-mthumb", "-dM", "-E", "-"], input="", capture_output=True, text=True
    ).stdout
    assert "#define __ARM_FEATURE_DSP 1" in defined
    policy, states = _odd_policy(activation_bits, weight_bits, coding)
    (tmp_path / "policy.h").write_text(header(policy))
    (tmp_path / "policy.c").write_text(source(policy))
    flags = ["-std=c99", "-mcpu=cortex-m4", "-mthumb", "-Os", "-Wall", "-Wextra", "-Werror", "-pedantic"]
    subprocess.run([gcc, *flags, "-c", "policy.c", "-o", "policy.o"], cwd=tmp_path, check=True)
    dump = subprocess.run(["arm-none-eabi-objdump", "-d", "policy.o"], cwd=tmp_path, capture_output=True, text=True)
    assert "sxtb16" in dump.stdout and ("smlald" if activation_bits == 16 else "smlad") in dump.stdout
    assert "smmulr" in dump.stdout or activation_bits == 16  # the int8 requantization
    got = TARGETS["cortex-m4"].actions(policy, states[:300], tmp_path / "mps2")
    assert np.array_equal(np.asarray(got).view(np.uint8), policy.act(states[:300]).view(np.uint8))


def test_length_limited_code_is_a_prefix_code_within_its_limit():
    rng = np.random.default_rng(3)
    values = np.clip(np.round(rng.normal(0, 2.5, 4000)), -8, 7).astype(np.int64) * 16 + rng.integers(0, 12, 4000)
    free = huffman.canonical_code(values)
    for limit in range(int(np.ceil(np.log2(len(np.unique(values))))), free.max_length + 1):
        code = huffman.limited_code(values, limit)
        lengths = [n for n, c in enumerate(code.counts) for _ in range(c)]
        assert code.max_length <= limit and sum(2.0**-n for n in lengths) <= 1
        stream = huffman.encode(values, code)
        assert np.array_equal(huffman.decode(stream, code, len(values)), values)
        assert stream.size >= huffman.encode(values, free).size  # Huffman's is the shortest
    with pytest.raises(ValueError):
        huffman.limited_code(values, 3)


def test_the_pair_stream_decodes_by_one_look_up_per_pair(cartpole):
    """int4 weights: one canonical code over the pairs SMLAD multiplies, no code longer than the table's
    bits (8: a 1 KB table), every pair one look-up; 8-bit weights keep the one-value stream."""
    policy = dataclasses.replace(cartpole.integer(weight_bits=4), weight_coding="huffman")
    pair_code = cpairs.encoded(policy)
    assert pair_code is not None and pair_code.bits <= 8 and pair_code.per_refill >= 3
    pairs = cpairs.pairs(policy)
    assert len(pairs) == pair_code.pairs == 16 * 2 + (4480 // 2)  # layer 0's shifts; the Tanh tables are in flash
    assert np.array_equal(cpairs.decode(pair_code.stream, pair_code.table(), pair_code.bits, len(pairs)), pairs)
    src = source(policy)
    assert f"uint8_t stream[{pair_code.stream.size + 4}]" in src and "uint32_t lut[1 << HUFF_LUT_BITS]" in src
    wide = dataclasses.replace(cartpole.integer(weight_bits=8), weight_coding="huffman")
    assert cpairs.encoded(wide) is None and "STREAM[" in source(wide)
