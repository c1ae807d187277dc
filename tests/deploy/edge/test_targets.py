"""The microcontroller targets (`quarl.deploy.edge.targets`): the registry, and for every target whose
toolchain and emulator are installed, the C policy in its minimal firmware under QEMU: bit for bit
the integer reference, its linked flash and RAM, its executed instructions per action. A target
module added to the package is picked up here: the tests are parametrized over `TARGETS`."""

from __future__ import annotations

import dataclasses
import os
import pkgutil
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from quarl.deploy.edge import targets
from quarl.deploy.edge.targets import TARGETS, Target, target
from quarl.errors import QuarlError
from tests.conftest import ROOT

EVERY = [pytest.param(t, id=t.name) for t in TARGETS.values()]


def need(t: Target) -> None:
    """Skip with the one sentence naming the Debian packages of `t`'s first missing tool."""
    missing = t.missing()
    if missing:
        pytest.skip(missing)


def test_every_target_module_is_registered_and_an_unknown_name_lists_them():
    modules = {m.name for m in pkgutil.iter_modules(targets.__path__) if not m.name.startswith("_")}
    assert {"cortex_m0", "cortex_m3", "cortex_m4", "riscv32"} <= modules and len(TARGETS) == len(modules)
    assert {"cortex-m0", "cortex-m3", "cortex-m4", "riscv32"} <= set(TARGETS)
    assert target("riscv32") is TARGETS["riscv32"]
    known = ", ".join(TARGETS)
    with pytest.raises(QuarlError, match=f"target=avr is not a microcontroller target: choose one of {known}."):
        target("avr")
    for t in TARGETS.values():
        assert set(t.tools()) <= set(t.packages) and "-kernel" == t.emulator_args[-1] and t.float_note


def test_importing_the_registry_calls_no_tool():
    code = (
        "import shutil, subprocess\n"
        "def refuse(*a, **k): raise AssertionError('a tool was looked up or run at import')\n"
        "shutil.which = subprocess.run = subprocess.Popen = refuse\n"
        "from quarl.deploy.edge.targets import TARGETS\n"
        "print(sorted(TARGETS))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sorted(TARGETS))


def check_docs_rows(edge_md: str) -> None:
    """docs/edge.md's table of targets (`edge_md`; docs/adding-a-target.md names it): one row per
    registered target, naming its compiler and its emulator."""
    section = edge_md.split("## Microcontroller targets", 1)[1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `([\w.-]+)` \|.*$", section, re.M)}
    assert sorted(rows) == sorted(TARGETS)
    for t in TARGETS.values():
        assert t.cc in rows[t.name] and t.emulator in rows[t.name], t.name


def test_docs_edge_md_has_a_row_for_every_target():
    check_docs_rows((ROOT / "docs" / "edge.md").read_text())


@pytest.mark.parametrize("t", EVERY)
def test_a_missing_tool_is_one_sentence_naming_the_debian_packages(t, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    missing = t.missing()
    assert missing is not None and missing.startswith(f"{t.cc} is not installed")
    assert f"Debian's {t.packages[t.cc]}" in missing and "\n" not in missing


CASES = [("cartpole", 8, "packed"), ("pendulum", 8, "packed"), ("cartpole", 4, "huffman")]


@pytest.mark.parametrize("which, bits, coding", CASES, ids=["cartpole-int8", "pendulum-int8", "cartpole-int4-huffman"])
@pytest.mark.parametrize("t", EVERY)
def test_the_firmware_acts_as_the_reference_and_is_measured(t, which, bits, coding, request, tmp_path):
    need(t)
    trained = request.getfixturevalue(which)
    policy = dataclasses.replace(trained.integer(weight_bits=bits), weight_coding=coding)
    check = trained.states[::40][:250]  # the policy's own states and random-action ones
    firmware = t.firmware(policy, check, trained.states[:2], tmp_path)
    expected = policy.act(check)
    assert np.array_equal(np.asarray(firmware.actions).view(np.uint8), np.asarray(expected).view(np.uint8))
    footprint = t.footprint(policy, tmp_path / "object")
    assert 0.9 * footprint.flash <= firmware.flash <= footprint.flash + 4096  # + soft-float helpers, where linked
    assert footprint.bss <= firmware.ram <= 1024
    assert 1000 < firmware.instructions < 2_000_000 and firmware.counted == 2
    if (which, bits) == ("cartpole", 8):  # the count is the emulator's, one case shows it deterministic
        again = t.firmware(policy, check[:3], trained.states[:2], tmp_path / "again")
        assert again.instructions == firmware.instructions and again.flash == firmware.flash


def test_the_huffman_coded_4_bit_policy_costs_at_most_3_times_the_int8_one_on_the_cortex_m4(cartpole, tmp_path):
    """Instructions per action under QEMU (deterministic; an instruction is not a cycle): one look-up per
    pair of weights, straight into SMLAD, the Tanh tables in flash (2.75x the int8 policy when measured)."""
    t = TARGETS["cortex-m4"]
    need(t)
    check, count = cartpole.states[:20], cartpole.states[:2]
    int8 = t.firmware(cartpole.integer(), check, count, tmp_path / "int8")
    coded = dataclasses.replace(cartpole.integer(weight_bits=4), weight_coding="huffman")
    huffman = t.firmware(coded, check, count, tmp_path / "huffman")
    assert np.array_equal(huffman.actions, coded.act(check))
    assert huffman.instructions <= 3 * int8.instructions, (huffman.instructions, int8.instructions)


#: instructions per action of the default-shaped policy (PPO CartPole, 64x64, int8: 4 x 64 + 64 x 64 + 64 x 2 =
#: 4,480 multiply-accumulates): rv32imac's and the Cortex-M3's portable kernel of plain int8 rows at most 6 per
#: MAC, all in (soft-float input and requantization included), the Cortex-M0's (ARMv6-M: 8 low registers,
#: no 64-bit product) at most 9 per MAC; the Cortex-M4's SMLAD kernel under 8,000
BUDGETS = {"riscv32": 27_000, "cortex-m3": 27_000, "cortex-m0": 9 * 4_480, "cortex-m4": 8_000}


def test_every_target_has_an_instruction_budget():
    assert sorted(BUDGETS) == sorted(TARGETS), "a new target adds its budget to BUDGETS (docs/adding-a-target.md)"


@pytest.mark.parametrize("name", sorted(BUDGETS))
def test_the_int8_64x64_policy_stays_within_its_instruction_budget(name, cartpole, tmp_path):
    """QEMU counts executed instructions exactly (the same count on every run: not a timing, and an
    instruction is not a cycle), so the kernels' cost per action is a deterministic budget."""
    t = TARGETS[name]
    need(t)
    policy = cartpole.integer()
    assert [layer.weight.shape for layer in policy.layers] == [(64, 4), (64, 64), (2, 64)]
    check = cartpole.states[::40][:50]
    firmware = t.firmware(policy, check, cartpole.states[:2], tmp_path)
    assert np.array_equal(firmware.actions, policy.act(check))
    assert firmware.instructions <= BUDGETS[name], (name, firmware.instructions)


def test_a_command_that_does_not_finish_is_one_sentence(tmp_path):
    from quarl.deploy.edge.tools import run

    with pytest.raises(QuarlError, match=r"Running the firmware did not finish in 0 s \(sleep 5\)\."):
        run(["sleep", "5"], tmp_path, "Running the firmware", timeout=0.2)


def test_one_instruction_per_block_takes_the_flag_the_installed_qemu_knows():
    """`-singlestep` is deprecated since QEMU 8.1 for `-accel tcg,one-insn-per-tb=on`; Debian 12 ships 7.2,
    which knows only the first: instruction counts hold on either."""
    from quarl.deploy.edge.targets._firmware import one_instruction_per_block

    assert one_instruction_per_block("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)") == ["-singlestep"]
    assert one_instruction_per_block("QEMU emulator version 8.0.5") == ["-singlestep"]
    for newer in ("QEMU emulator version 8.1.0", "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2)", "?"):
        assert one_instruction_per_block(newer) == ["-accel", "tcg,one-insn-per-tb=on"]  # 10 drops -singlestep
    installed = shutil.which("qemu-system-arm")
    if installed:  # the installed QEMU parses the flag chosen for it
        version = subprocess.run([installed, "--version"], capture_output=True, text=True).stdout
        done = subprocess.run([installed, *one_instruction_per_block(version), "-M", "help"], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr


def test_an_emulator_that_crashes_while_counting_says_so_not_that_it_timed_out(tmp_path, monkeypatch):
    """A QEMU that aborts at once (a newer build loading an older build's modules did) is reported
    with its signal and its error, not as a firmware that did not finish."""
    from quarl.deploy.edge.targets._firmware import executed_instructions

    fake = tmp_path / "bin" / "qemu-system-arm"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "QEMU emulator version 10.0.2"; exit 0; }\n'
                    'echo "Only modules from the same build can be loaded." >&2\nkill -ABRT $$\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    with pytest.raises(QuarlError, match=r"ended by signal 6: Only modules from the same build"):
        executed_instructions(TARGETS["cortex-m0"], tmp_path / "policy.elf", timeout=60)
