"""The build tools of the C policy, for the host compiler and every microcontroller target: a
command looked up (a missing one is one QuarlError naming the Debian packages that install it), a
command run (a failure is one QuarlError with its output), and what `size` and `-fstack-usage`
measure of a policy object (`Footprint`)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from quarl.errors import QuarlError


def locate(name: str, packages: str) -> str:
    """The path of the command `name`, or a QuarlError naming the Debian `packages` that install it."""
    found = shutil.which(name)
    if found is None:
        raise QuarlError(f"{name} is not installed: the C policy needs it; it comes with Debian's {packages}.")
    return found


def run(cmd: Sequence[str], cwd: Path, what: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `cmd`; a failure or a run past `timeout` seconds is one QuarlError with its output."""
    try:
        done = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise QuarlError(f"{what} did not finish in {timeout:.0f} s ({' '.join(cmd)}).") from None
    if done.returncode != 0:
        raise QuarlError(f"{what} failed ({' '.join(cmd)}):\n{done.stdout}{done.stderr}")
    return done


@dataclass
class Footprint:
    """Bytes of the policy object (`size -A` of policy.o; stack from -fstack-usage)."""

    text: int  # code
    rodata: int  # const arrays: weights, biases, multipliers, tables
    data: int
    bss: int  # the activation buffers
    stack: int  # the deepest frame chain of policy_act (an upper bound: every function's frame summed)

    @property
    def flash(self) -> int:
        return self.text + self.rodata + self.data

    @property
    def ram(self) -> int:
        return self.data + self.bss + self.stack
