"""The Cortex-M4 target builds for the M4F's hard-float ABI: no float helper of libgcc links in, so the
linked firmware holds little more than the policy object."""

from __future__ import annotations

import subprocess

import pytest

from quarl.deploy.edge.targets import cortex_m4
from quarl.deploy.edge.toolchain import tool


def test_the_hard_float_firmware_links_no_float_helpers(cartpole, tmp_path):
    t = cortex_m4.TARGET
    if t.missing():
        pytest.skip(t.missing())
    assert {"-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"} <= set(t.cflags)
    policy = cartpole.integer()
    firmware = t.firmware(policy, cartpole.states[:20], cartpole.states[:2], tmp_path)
    nm = tool(t.cc).replace("-gcc", "-nm")
    symbols = subprocess.run([nm, "measure/calls-2.elf"], cwd=tmp_path, capture_output=True, text=True).stdout
    assert "policy_act" in symbols and "__aeabi_f" not in symbols and "__aeabi_d" not in symbols
    assert firmware.flash <= t.footprint(policy, tmp_path / "object").flash + 64
