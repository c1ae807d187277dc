"""A layer whose output channels have different shifts (per-channel scales off a power-of-two grid)
still requantizes by SMMULR, each channel's right shift in its bias word's low byte and its rounding
constant from a table (`crequant.shift_table`): bit for bit the integer reference on the host and on an emulated
Cortex-M4 and Cortex-M0; and the Cortex-M0's SMMULR from 16-bit halves on the host."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import numpy as np
import pytest

from quarl.deploy.edge import ckernel
from quarl.deploy.edge.cgen import folded_bias
from quarl.deploy.edge.integer import IntegerPolicy
from quarl.deploy.edge.targets import TARGETS
from quarl.deploy.edge.toolchain import CPolicy


def uneven(policy: IntegerPolicy) -> IntegerPolicy:
    """The policy with every other channel of its middle layer shifted one bit further right."""
    layer = policy.layers[1]
    shift = layer.shift.copy()
    shift[::2] -= 1
    layers = list(policy.layers)
    layers[1] = dataclasses.replace(layer, shift=shift)
    return dataclasses.replace(policy, layers=type(policy.layers)(layers))


def test_uneven_shifts_take_the_smmulr_path_bit_for_bit_on_the_host(cartpole, tmp_path):
    policy = uneven(cartpole.integer())
    layer = policy.layers[1]
    assert not ckernel.uniform(layer.shift) and int(layer.shift.max()) < 0
    bias = folded_bias(layer)
    assert ckernel.shift_table(policy, layer, bias) and ckernel.fast_requantization(policy, layer, bias)
    c = CPolicy(policy, tmp_path)
    out1 = re.search(r"static int32_t out1\(.*?\n}", (tmp_path / "policy.c").read_text(), re.S)
    assert out1 is not None and "smmulr(" in out1[0] and "asr_byte(" in out1[0] and "requantize" not in out1[0]
    assert np.array_equal(c.act(cartpole.states), policy.act(cartpole.states))
    assert not np.array_equal(policy.act(cartpole.states), cartpole.integer().act(cartpole.states))


@pytest.mark.parametrize("name", ["cortex-m4", "cortex-m0"])  # ASR by a register in Thumb-2 and Thumb-1
def test_uneven_shifts_are_bit_exact_on_emulated_cortex_m_cores(name, cartpole, tmp_path):
    t = TARGETS[name]
    if t.missing():
        pytest.skip(t.missing())
    policy, states = uneven(cartpole.integer()), cartpole.states[::50][:200]
    assert np.array_equal(t.actions(policy, states, tmp_path), policy.act(states))


def test_the_armv6m_smmulr_from_16_bit_halves_is_the_64_bit_product_rounded(tmp_path):
    """The Cortex-M0's SMMULR (no 64-bit product there) against (a b + 2^31) >> 32 on the host: every
    pair of edge values and 2 million random pairs, many of them small."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler")
    start = ckernel.RUNTIME.index("#if defined(__ARM_ARCH_6M__)")
    halves = ckernel.RUNTIME[ckernel.RUNTIME.index("\n", start) : ckernel.RUNTIME.index("#else", start)]
    (tmp_path / "t.c").write_text("#include <stdint.h>\n#include <stdio.h>\n" + halves + HARNESS, encoding="utf-8")
    subprocess.run([cc, "-O2", "-o", "t", "t.c"], cwd=tmp_path, check=True)
    out = subprocess.run(["./t"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0 of 2000289 differ"


HARNESS = r"""
static int32_t wide(int32_t a, int32_t b) { return (int32_t)(((int64_t)a * b + ((int64_t)1 << 31)) >> 32); }
static uint64_t state = 88172645463325252u;
static uint32_t next(void) { state ^= state << 13; state ^= state >> 7; state ^= state << 17; return (uint32_t)state; }
int main(void) {
    const int32_t edge[] = {0, 1, -1, 2, -2, 0x7FFF, 0x8000, -0x8000, 0xFFFF, 0x10000, -0x10000, 0x7FFFFFFF,
                            -0x7FFFFFFF, INT32_MIN, 0x40000000, -0x40000000, 0x3FFFFFFF};
    long bad = 0, n = 0, k;
    unsigned i, j;
    for (i = 0; i < 17; ++i)
        for (j = 0; j < 17; ++j, ++n) bad += smmulr(edge[i], edge[j]) != wide(edge[i], edge[j]);
    for (k = 0; k < 2000000; ++k, ++n) {
        int32_t a = (int32_t)next(), b = (int32_t)next();
        a = k & 1 ? a >> (next() & 31) : a;
        b = k & 2 ? b >> (next() & 31) : b;
        bad += smmulr(a, b) != wide(a, b);
    }
    printf("%ld of %ld differ\n", bad, n);
    return 0;
}
"""
