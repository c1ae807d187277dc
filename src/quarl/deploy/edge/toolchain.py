"""Compiling and running the C policy: the host compiler (a shared library driven through ctypes),
`arm-none-eabi-gcc` (flash and RAM of the policy for a Cortex-M4) and `qemu-system-arm` (the policy
on an emulated MPS2 board). A missing tool is one QuarlError naming the Debian package."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from quarl.deploy.edge import board
from quarl.deploy.edge.cgen import header, source
from quarl.deploy.edge.integer import IntegerPolicy
from quarl.errors import QuarlError

HOST_FLAGS = ["-std=c99", "-O3", "-Wall", "-Wextra", "-Werror"]
PACKAGES = {
    "cc": "gcc (apt-get install gcc)",
    "arm-none-eabi-gcc": "gcc-arm-none-eabi and libnewlib-arm-none-eabi (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi)",
    "arm-none-eabi-size": "binutils-arm-none-eabi (installed with gcc-arm-none-eabi)",
    "qemu-system-arm": "qemu-system-arm (apt-get install qemu-system-arm)",
}
HARNESS = r"""/* Host harness: many observations per call, for ctypes (one call per batch, not per state), and a
   native timing of policy_act (ns per call, without the Python call's overhead). */
#define _POSIX_C_SOURCE 199309L
#include <time.h>

#include "policy.h"

void policy_act_many(const float *obs, long n, POLICY_ACTION_T *actions);
double policy_ns_per_call(const float *obs, long n, long repeats);

double policy_ns_per_call(const float *obs, long n, long repeats) {
    struct timespec t0, t1;
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
    volatile POLICY_ACTION_T sink;
    long r, k;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (r = 0; r < repeats; ++r) {
        for (k = 0; k < n; ++k) {
            policy_act(obs + k * POLICY_OBS_DIM, action);
            sink = action[0];
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    (void)sink;
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)(n * repeats);
}

void policy_act_many(const float *obs, long n, POLICY_ACTION_T *actions) {
    long k;
    for (k = 0; k < n; ++k) {
        policy_act(obs + k * POLICY_OBS_DIM, actions + k * POLICY_ACTION_DIM);
    }
}
"""


def tool(name: str) -> str:
    """The path of `name` (cc: $CC, cc or gcc), or a QuarlError naming the Debian package that has it."""
    candidates = [os.environ.get("CC", ""), "cc", "gcc"] if name == "cc" else [name]
    for candidate in candidates:
        found = shutil.which(candidate) if candidate else None
        if found:
            return found
    raise QuarlError(f"{name} is not installed: the C policy needs it; it comes with Debian's {PACKAGES[name]}.")


def available(*names: str) -> Optional[str]:
    """None where every tool is installed, else the sentence `tool` raises for the first missing one."""
    for name in names:
        try:
            tool(name)
        except QuarlError as exc:
            return str(exc)
    return None


def _run(cmd: Sequence[str], cwd: Path, what: str, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise QuarlError(f"{what} failed ({' '.join(cmd)}):\n{done.stdout}{done.stderr}")
    return done


def write_sources(policy: IntegerPolicy, folder: Path, name: str = "policy") -> tuple[Path, Path]:
    """`name`.h and `name`.c in `folder` (created if needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    h, c = folder / f"{name}.h", folder / f"{name}.c"
    h.write_text(header(policy, name))
    c.write_text(source(policy, name))
    return h, c


class CPolicy:
    """The C policy compiled by the host compiler into a shared library, called through ctypes.

    `act(obs)` takes a batch of raw observations and returns actions shaped like
    `IntegerPolicy.act`'s; `act_one(obs)` calls `policy_act` once (the batch-1 path).
    """

    def __init__(self, policy: IntegerPolicy, folder: Optional[Path] = None) -> None:
        self.policy = policy
        self._tmp = None if folder is not None else tempfile.TemporaryDirectory(prefix="quarl-c-")
        self.folder = Path(folder if folder is not None else self._tmp.name)  # type: ignore[union-attr]
        cc = tool("cc")
        _, c = write_sources(policy, self.folder)
        (self.folder / "harness.c").write_text(HARNESS)
        lib = self.folder / "libpolicy.so"
        _run(
            [cc, *HOST_FLAGS, "-fPIC", "-shared", c.name, "harness.c", "-o", lib.name],
            self.folder,
            "Compiling the C policy",
        )
        self.lib = ctypes.CDLL(str(lib))
        self.discrete = policy.action_kind == "discrete"
        self.action_dim = 1 if self.discrete else int(np.prod(policy.action_shape))
        self._ctype = ctypes.c_int32 if self.discrete else ctypes.c_float
        self._dtype = np.int32 if self.discrete else np.float32
        # raw addresses (c_void_p): the cheapest ctypes call, so a batch-1 call costs little over the C
        self.lib.policy_act.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.lib.policy_act.restype = None
        self.lib.policy_act_many.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
        self.lib.policy_act_many.restype = None
        self.lib.policy_ns_per_call.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
        self.lib.policy_ns_per_call.restype = ctypes.c_double
        self._one_out = np.zeros(self.action_dim, dtype=self._dtype)
        self._one_out_address = self._one_out.ctypes.data

    def _shape(self, out: np.ndarray, n: int) -> np.ndarray:
        if self.discrete:
            return out.reshape(n).astype(np.int64)
        return out.reshape((n, *self.policy.action_shape))

    def act(self, obs: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        if len(x) == 1:
            return self.act_one(x)
        out = np.empty((len(x), self.action_dim), dtype=self._dtype)
        self.lib.policy_act_many(x.ctypes.data, len(x), out.ctypes.data)
        return self._shape(out, len(x))

    def act_one(self, obs: np.ndarray) -> np.ndarray:
        """One `policy_act` call (the batch-1 path: `obs` is one observation, or a batch of one)."""
        x = np.ascontiguousarray(obs, dtype=np.float32)
        self.lib.policy_act(x.ctypes.data, self._one_out_address)
        if self.discrete:
            return np.array([self._one_out[0]], dtype=np.int64)
        return self._one_out.reshape((1, *self.policy.action_shape)).copy()

    def native_ns(self, obs: np.ndarray, repeats: int = 20) -> float:
        """ns per `policy_act` call over `obs` (one observation per call), timed in C."""
        x = np.ascontiguousarray(self.policy.batch(obs), dtype=np.float32)
        return float(self.lib.policy_ns_per_call(x.ctypes.data, len(x), repeats))

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


@dataclass
class Footprint:
    """Bytes of the policy object for a Cortex-M (arm-none-eabi-size of policy.o; stack from -fstack-usage)."""

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


def arm_footprint(policy: IntegerPolicy, folder: Optional[Path] = None, cpu: str = board.CPU) -> Footprint:
    """Cross-compile the policy with `arm-none-eabi-gcc -mcpu=<cpu> -mthumb -Os -Wall -Wextra -Werror`
    and measure it: .text, .rodata, .data, .bss of policy.o and its stack use."""
    gcc = tool("arm-none-eabi-gcc")
    size = tool("arm-none-eabi-size")
    with tempfile.TemporaryDirectory(prefix="quarl-arm-") as tmp:
        work = Path(folder) if folder is not None else Path(tmp)
        _, c = write_sources(policy, work)
        flags = [f if not f.startswith("-mcpu=") else f"-mcpu={cpu}" for f in board.CFLAGS]
        _run([gcc, *flags, "-fstack-usage", "-c", c.name, "-o", "policy.o"], work, "Cross-compiling the C policy")
        sections = _sections(_run([size, "-A", "-d", "policy.o"], work, "arm-none-eabi-size").stdout)
        stack = sum(int(m.group(1)) for m in re.finditer(r"\t(\d+)\t", (work / "policy.su").read_text()))
    pick = lambda prefix: sum(v for k, v in sections.items() if k == prefix or k.startswith(prefix + "."))  # noqa: E731
    return Footprint(pick(".text"), pick(".rodata"), pick(".data"), pick(".bss"), stack)


def _sections(text: str) -> dict[str, int]:
    sections: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = sections.get(parts[0], 0) + int(parts[1])
    return sections


def build_firmware(policy: IntegerPolicy, states: np.ndarray, folder: Path) -> Path:
    """The bare-metal program for QEMU's MPS2 board (`board`): the policy acting on `states`.
    Returns the ELF."""
    gcc = tool("arm-none-eabi-gcc")
    folder.mkdir(parents=True, exist_ok=True)
    write_sources(policy, folder)
    (folder / "startup.c").write_text(board.STARTUP)
    (folder / "mps2.ld").write_text(board.LINKER_SCRIPT)
    (folder / "main.c").write_text(board.MAIN)
    (folder / "states.h").write_text(board.states_header(policy.batch(states), f"{len(states)} recorded states"))
    _run(
        [gcc, *board.CFLAGS, *board.LINK, "startup.c", "main.c", "policy.c", "-o", "policy.elf"],
        folder,
        "Building the Cortex-M program",
    )
    return folder / "policy.elf"


def run_qemu(elf: Path, machine: str = board.MACHINE, timeout: float = 600) -> str:
    """Run a semihosting program under `qemu-system-arm -M <machine>` and return what it printed."""
    qemu = tool("qemu-system-arm")
    cmd = [qemu, "-M", machine, "-nographic", "-monitor", "none", "-semihosting-config", "enable=on,target=native"]
    done = _run([*cmd, "-kernel", str(elf)], elf.parent, f"Running the policy under {Path(qemu).name}", timeout)
    return done.stdout


def parse_actions(printed: str, policy: IntegerPolicy) -> np.ndarray:
    """The actions `board.MAIN` printed, shaped like `IntegerPolicy.act`'s."""
    lines = printed.splitlines()
    try:
        start, end = next(i for i, s in enumerate(lines) if s.startswith("quarl policy:")), lines.index("done")
    except (StopIteration, ValueError):
        raise QuarlError(f"The Cortex-M program did not finish; it printed:\n{printed[-2000:]}") from None
    rows = [line.split() for line in lines[start + 1 : end]]
    if policy.action_kind == "discrete":
        return np.array([int(r[0]) for r in rows], dtype=np.int64)
    bits = np.array([[int(v, 16) for v in r] for r in rows], dtype=np.uint32)
    return bits.view(np.float32).reshape((len(rows), *policy.action_shape))


def qemu_actions(policy: IntegerPolicy, states: np.ndarray, folder: Optional[Path] = None) -> np.ndarray:
    """The C policy's actions on `states` computed on an emulated Cortex-M4 (mps2-an386)."""
    with tempfile.TemporaryDirectory(prefix="quarl-mps2-") as tmp:
        elf = build_firmware(policy, states, Path(folder) if folder is not None else Path(tmp))
        return parse_actions(run_qemu(elf), policy)
