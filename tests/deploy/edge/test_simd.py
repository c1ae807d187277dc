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
from quarl.deploy.edge import csimd, cstream, huffman, integer_policy
from quarl.deploy.edge.cgen import header, pack_weights, source
from quarl.deploy.edge.toolchain import CPolicy, available, qemu_actions, tool
from quarl.quantize.weights import quantize_policy
from quarl.rl.envs import random_observations
from tests.deploy.edge.test_cgen import PTQ8

torch.set_num_threads(1)


def _sxtb16(word: int, rotate: bool) -> tuple[int, int]:
    """SXTB16 (of the word rotated right by 8 bits): bytes 0 and 2 (1 and 3) as signed values."""
    b = [(word >> (8 * k)) & 0xFF for k in range(4)]
    lo, hi = (b[1], b[3]) if rotate else (b[0], b[2])
    return (lo ^ 0x80) - 0x80, (hi ^ 0x80) - 0x80


def _kernel_dot(packed_row: np.ndarray, x: np.ndarray, weight_bits: int, activation_bits: int) -> int:
    """The SIMD kernel's sum over a row's full groups, from its packed bytes, as the C computes it."""
    g = csimd.group(weight_bits, activation_bits)
    total = 0
    for start in range(0, len(x) - len(x) % g, g):
        offset = start * weight_bits // 8
        word = int.from_bytes(bytes(packed_row[offset : offset + 4].astype(np.uint8)), "little")
        if activation_bits == 16:
            pairs = [x[start : start + 2], x[start + 2 : start + 4]]
            for rotate, (a, b) in zip((False, True), pairs):
                w = _sxtb16(word, rotate)
                total += int(w[0]) * int(a) + int(w[1]) * int(b)
            continue
        per, scaled = 8 // weight_bits, 8 - weight_bits
        top = sum(((0xFF << scaled) & 0xFF) << (8 * k) for k in range(4))
        for j in range(per):
            v = int.from_bytes(bytes(x[start + 4 * j : start + 4 * j + 4].astype(np.int8)), "little")
            w = ((word << (8 - weight_bits * (j + 1))) & 0xFFFFFFFF) & top
            for rotate in (False, True):
                wa, wb = _sxtb16(w, rotate)
                xa, xb = _sxtb16(v, rotate)
                total += wa * xa + wb * xb
        assert total % (1 << scaled) == 0
    return total >> (8 - weight_bits) if activation_bits == 8 else total


@pytest.mark.parametrize("weight_bits, activation_bits", [(8, 8), (4, 8), (2, 8), (8, 16)])
@pytest.mark.parametrize("n", [3, 4, 13, 37, 64])
def test_layout_pairs_reproduce_the_plain_dot_products(weight_bits, activation_bits, n):
    rng = np.random.default_rng(n)
    lo, hi = -(2 ** (weight_bits - 1)), 2 ** (weight_bits - 1) - 1
    codes = rng.integers(lo, hi + 1, size=(5, n))
    codes[0, : min(n, 4)] = lo  # the extreme codes too
    act_hi = 2 ** (activation_bits - 1)
    x = rng.integers(-act_hi, act_hi, size=n)
    order = csimd.order(n, weight_bits, activation_bits)
    assert sorted(order.tolist()) == list(range(n))  # a permutation of each row
    packed = pack_weights(csimd.layout(codes, weight_bits, activation_bits), weight_bits)
    full = n - n % csimd.group(weight_bits, activation_bits)
    for row, packed_row in zip(codes, packed):
        got = _kernel_dot(packed_row.view(np.uint8), x, weight_bits, activation_bits)
        assert got == int(row[:full] @ x[:full])
    # the portable path's POS(i) is the inverse of the stored order
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    macro = csimd.position_macro(weight_bits, activation_bits)
    expression = macro.split(" ", 2)[2].strip()  # C's integer operators, in Python
    for i in range(full):
        assert eval(expression.replace("(i)", f"({i})")) == pos[i]


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
    got = qemu_actions(policy, states[:300], tmp_path / "mps2")
    assert np.array_equal(np.asarray(got).view(np.uint8), policy.act(states[:300]).view(np.uint8))


def test_the_stream_is_padded_for_the_bit_buffer(cartpole):
    policy = dataclasses.replace(cartpole.integer(weight_bits=4), weight_coding="huffman")
    _, stream = cstream.encoded(policy)
    src = source(policy)
    assert f"STREAM[{stream.size + 4}]" in src and "HUFF_LUT[1 << HUFF_LUT_BITS]" in src
