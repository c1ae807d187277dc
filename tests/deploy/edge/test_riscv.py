"""The RISC-V rv32imac target (picolibc, QEMU virt): the core has no FPU, so the policy's float steps
link libgcc's soft-float helpers into the firmware, and its linked flash counts them."""

from __future__ import annotations

import subprocess

import pytest

from quarl.deploy.edge.targets import riscv32
from quarl.deploy.edge.toolchain import tool


def test_soft_float_helpers_link_in_and_count_in_the_flash(cartpole, tmp_path):
    t = riscv32.TARGET
    if t.missing():
        pytest.skip(t.missing())
    assert {"-march=rv32imac", "-mabi=ilp32", "--specs=picolibc.specs"} <= set(t.cflags)
    policy = cartpole.integer()
    firmware = t.firmware(policy, cartpole.states[:20], cartpole.states[:2], tmp_path)
    nm = tool(t.cc).replace("-gcc", "-nm")
    with_policy, without = (
        subprocess.run([nm, elf], cwd=tmp_path, capture_output=True, text=True).stdout
        for elf in ("measure/calls-2.elf", "measure/bare.elf")
    )
    assert "__mulsf3" in with_policy or "__addsf3" in with_policy
    assert "__addsf3" not in without and "__mulsf3" not in without
    assert firmware.flash >= t.footprint(policy, tmp_path / "object").flash + 1000  # the helpers
