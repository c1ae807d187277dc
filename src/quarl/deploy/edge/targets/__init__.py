"""Microcontroller targets of the C policy, one module per target in this package.

A target module defines `TARGET`, a `Target`: its name, its cross compiler, size tool and flags, its
Debian packages, its start-up code and linker script, and the emulator that runs its firmware with
semihosting. `TARGETS` lists them (every module here whose name does not start with "_"), `target(name)`
looks one up. Importing the registry reads no toolchain: tools are looked up when a target is used.

What a target does with a policy (build the firmware, run it on states under the emulator, count the
executed instructions, measure the linked flash and RAM) is the same for every target and lives in
`_firmware`; a target that needs more overrides the method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

from quarl.config.plugins import discover
from quarl.errors import QuarlError

if TYPE_CHECKING:
    import numpy as np

    from quarl.deploy.edge.integer import IntegerPolicy
    from quarl.deploy.edge.targets._firmware import Firmware
    from quarl.deploy.edge.tools import Footprint


@dataclass(frozen=True)
class Target:
    """A microcontroller: how the C policy is compiled, linked and emulated for it."""

    name: str  # the registry key, e.g. "cortex-m4"
    title: str  # for reports: the core, its float arithmetic and the emulated board
    cc: str  # the cross compiler (gcc's flags)
    size: str  # binutils' size for that compiler's ELF files
    emulator: str  # the QEMU system emulator
    packages: Mapping[str, str]  # tool -> the Debian packages that install it, as one phrase
    cflags: tuple[str, ...]  # compiling the policy and the firmware
    ldflags: tuple[str, ...]  # linking the firmware: C library, start-up, linker script
    emulator_args: tuple[str, ...]  # the emulator's arguments before the ELF (which follows "-kernel")
    files: Mapping[str, str] = field(default_factory=dict)  # start-up code, linker script: name -> text
    main_prelude: str = ""  # C declarations before main (the C library's semihosting set-up)
    main_init: str = ""  # C statements main runs first
    float_note: str = ""  # how the policy's float arithmetic (input quantization, a float head) is done

    def tools(self) -> tuple[str, ...]:
        """The commands this target needs."""
        return (self.cc, self.size, self.emulator)

    def missing(self) -> Optional[str]:
        """None where every tool is installed, else one sentence naming the first missing one's packages."""
        from quarl.deploy.edge.tools import locate

        for name in self.tools():
            try:
                locate(name, self.packages[name])
            except QuarlError as exc:
                return str(exc)
        return None

    def c_files(self) -> list[str]:
        """The target's own C files, linked beside main.c and the policy (its start-up code)."""
        return sorted(name for name in self.files if name.endswith(".c"))

    def actions(self, policy: IntegerPolicy, states: np.ndarray, folder: Optional[Path] = None) -> np.ndarray:
        """The C policy's actions on `states`, computed by the firmware under the emulator."""
        from quarl.deploy.edge.targets import _firmware

        return _firmware.actions(self, policy, states, folder)

    def footprint(self, policy: IntegerPolicy, folder: Optional[Path] = None) -> Footprint:
        """The policy object's sections (policy.o) and the stack of policy_act."""
        from quarl.deploy.edge.targets import _firmware

        return _firmware.object_footprint(self, policy, folder)

    def firmware(
        self, policy: IntegerPolicy, check: np.ndarray, count: np.ndarray, folder: Optional[Path] = None
    ) -> Firmware:
        """The policy in the minimal firmware: its actions on `check` (under the emulator), its linked
        flash and RAM, and its executed instructions per action over `count`."""
        from quarl.deploy.edge.targets import _firmware

        return _firmware.measure(self, policy, check, count, folder)


def _discover() -> dict[str, Target]:
    """Every target of the package's plugin modules (`quarl.config.plugins`: helpers `_x` skipped)."""
    return discover(__name__, "TARGET", Target, one=True)


TARGETS: dict[str, Target] = _discover()


def target(name: str) -> Target:
    """The target called `name`, or a QuarlError naming the known ones."""
    if name not in TARGETS:
        raise QuarlError(f"target={name} is not a microcontroller target: choose one of {', '.join(TARGETS)}.")
    return TARGETS[name]


def packages() -> dict[str, str]:
    """Every target's tool -> Debian packages."""
    return {tool: phrase for t in TARGETS.values() for tool, phrase in t.packages.items()}
