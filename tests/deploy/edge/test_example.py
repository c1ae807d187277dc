"""examples/cortex_m4_cartpole: the committed C policy compiles warning-free for the host, its board
files are quarl's, and (with the Arm toolchain and QEMU) `make run` balances CartPole on the
emulated Cortex-M4 with the commands its README gives."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from quarl.deploy.edge.targets import cortex_m4
from quarl.deploy.edge.toolchain import available, tool

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "cortex_m4_cartpole"


def test_board_files_are_quarls_and_the_policy_compiles_for_the_host(tmp_path):
    assert (EXAMPLE / "startup.c").read_text() == cortex_m4.STARTUP
    assert (EXAMPLE / "mps2.ld").read_text() == cortex_m4.LINKER_SCRIPT
    for name in ("policy.c", "policy.h"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    done = subprocess.run(
        [tool("cc"), "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "policy.c"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "malloc" not in (EXAMPLE / "policy.c").read_text() and "math.h" not in (EXAMPLE / "policy.c").read_text()


def test_make_run_balances_cartpole_on_the_emulated_cortex_m4(tmp_path):
    missing = available("arm-none-eabi-gcc", "qemu-system-arm") or (None if shutil.which("make") else "make is missing")
    if missing:
        pytest.skip(missing)
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work)
    done = subprocess.run(["make", "run"], cwd=work, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    returns = [int(r) for r in re.findall(r"episode \d+: return (\d+)", done.stdout)]
    assert len(returns) == 10 and min(returns) >= 195  # CartPole-v1 is solved at 475; this policy scores 500
    assert "mean return" in done.stdout
    size = subprocess.run(["make", "size"], cwd=work, capture_output=True, text=True, timeout=120)
    sections = dict(re.findall(r"^(\.\w+)\s+(\d+)", size.stdout, re.M))
    assert int(sections[".text"]) + int(sections[".rodata"]) <= 6.25 * 1024 and int(sections[".bss"]) <= 1024
