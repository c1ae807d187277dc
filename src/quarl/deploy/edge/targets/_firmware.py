"""The minimal firmware around the C policy, the same for every target (a `Target` says how to build and
emulate it): `main.c` acts on the recorded states of `states.h` and prints the actions through
semihosting (the check), or calls `policy_act` a given number of times and prints nothing (the
measure: executed instructions, and the linked flash and RAM against the same firmware without the
policy). Built in one folder per policy:

    <cc> <cflags> -fstack-usage -c policy.c -o policy.o
    <cc> <cflags> <ldflags> -I. <start-up> check/main.c policy.o -o check/policy.elf
    <emulator> <emulator args> check/policy.elf
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional, Protocol, Sequence

import numpy as np

from quarl.deploy.edge.cgen import c_values, hex_float
from quarl.deploy.edge.tools import Footprint, locate, run
from quarl.errors import QuarlError

if TYPE_CHECKING:
    from quarl.deploy.edge.integer import IntegerPolicy


class FirmwareTarget(Protocol):
    """What the firmware needs of a target (met by quarl.deploy.edge.targets.Target, which imports this module)."""

    @property
    def name(self) -> str: ...
    @property
    def cc(self) -> str: ...
    @property
    def size(self) -> str: ...
    @property
    def emulator(self) -> str: ...
    @property
    def cflags(self) -> tuple[str, ...]: ...
    @property
    def ldflags(self) -> tuple[str, ...]: ...
    @property
    def emulator_args(self) -> tuple[str, ...]: ...
    @property
    def files(self) -> Mapping[str, str]: ...
    @property
    def main_prelude(self) -> str: ...
    @property
    def main_init(self) -> str: ...
    @property
    def packages(self) -> Mapping[str, str]: ...
    def c_files(self) -> list[str]: ...


CHECK_MAIN = r"""/* Runs the C policy on recorded states and prints its actions through semihosting:
   discrete actions as integers, continuous ones as the hexadecimal bits of each float32. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "states.h"
/*PRELUDE*/
int main(void) {
    long k;
    int j;
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
/*INIT*/
    printf("quarl policy: %d states\n", N_STATES);
    for (k = 0; k < N_STATES; ++k) {
        policy_act(&STATES[k * POLICY_OBS_DIM], action);
        for (j = 0; j < POLICY_ACTION_DIM; ++j) {
#if POLICY_DISCRETE
            printf("%ld", (long)action[j]);
#else
            uint32_t bits;
            memcpy(&bits, &action[j], sizeof bits);
            printf("%08lx", (unsigned long)bits);
#endif
            putchar(j + 1 < POLICY_ACTION_DIM ? ' ' : '\n');
        }
    }
    printf("done\n");
    fflush(stdout);
    return 0;
}
"""

MEASURE_MAIN = r"""/* Calls policy_act QUARL_CALLS times on the recorded states, in turn, and prints nothing: the
   firmware whose executed instructions and linked size measure the policy. The count is data, not
   code, so the builds for 0 and n calls execute the same instructions but for the n calls. Linked
   with stub.c instead of the policy, it is the same firmware without the policy. */
#include <stdint.h>
#include <string.h>

#include "policy.h"
#include "states.h"

volatile long quarl_calls = QUARL_CALLS;
volatile uint32_t quarl_sink;

int main(void) {
    long k;
    long calls = quarl_calls;
    uint32_t bits = 0;
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
    for (k = 0; k < calls; ++k) {
        policy_act(&STATES[(k % N_STATES) * POLICY_OBS_DIM], action);
        memcpy(&bits, &action[0], sizeof action[0] < sizeof bits ? sizeof action[0] : sizeof bits);
        quarl_sink ^= bits;
    }
    return 0;
}
"""


STUB = r"""/* Stands in for the policy: the firmware without it (copies the first observation's bits). */
#include <string.h>

#include "policy.h"

void policy_act(const float *obs, POLICY_ACTION_T *action) {
    memcpy(action, obs, sizeof action[0] < sizeof obs[0] ? sizeof action[0] : sizeof obs[0]);
}
"""


EMULATOR_TIMEOUT = 300.0  # seconds a build or a firmware run may take (a crashed firmware spins forever)


def _tool(target: FirmwareTarget, name: str) -> str:
    return locate(name, target.packages[name])


def _literal(v: float) -> str:
    """A C float constant: an exact hexadecimal float, or C99's INFINITY / NAN (math.h, no libm)."""
    if np.isnan(v):
        return "NAN"
    return hex_float(v) if np.isfinite(v) else ("INFINITY" if v > 0 else "-INFINITY")


def states_header(states: np.ndarray, note: Optional[str] = None) -> str:
    """`states.h`: N_STATES raw observations as one const float array (exact hexadecimal floats;
    the extreme probes' infinities and NaNs as C99's macros)."""
    flat = np.asarray(states, dtype=np.float32).reshape(len(states), -1)
    body = c_values(_literal(float(v)) for v in flat.reshape(-1))
    comment = f"/* {note} */\n" if note else ""
    return (
        f"{comment}#ifndef QUARL_STATES_H\n#define QUARL_STATES_H\n\n#include <math.h>\n\n"
        f"#define N_STATES {len(flat)}\n\n"
        f"static const float STATES[{flat.size}] = {{\n{body}\n}};\n\n#endif\n"
    )


def check_main(target: FirmwareTarget) -> str:
    """The check firmware's main.c for `target` (its semihosting set-up spliced in)."""
    return CHECK_MAIN.replace("/*PRELUDE*/", target.main_prelude).replace("/*INIT*/", target.main_init)


@dataclass
class Firmware:
    """The policy in a target's minimal firmware, measured under the emulator."""

    target: str
    actions: np.ndarray  # on the check states
    flash: int  # linked firmware with the policy minus without it: size's text + data
    ram: int  # the same for data + bss, plus the stack of policy_act
    instructions: float  # executed per action (QEMU, one instruction per block), start-up excluded
    counted: int  # states the instructions were counted over


def _prepare(target: FirmwareTarget, policy: IntegerPolicy, folder: Path) -> tuple[str, int]:
    """Writes the policy and the target's files in `folder`, compiles policy.o; its path and stack."""
    from quarl.deploy.edge.cgen import header, source

    cc = _tool(target, target.cc)
    (folder / "policy.h").write_text(header(policy, "policy"))
    (folder / "policy.c").write_text(source(policy, "policy"))
    for name, text in target.files.items():
        (folder / name).write_text(text)
    run(
        [cc, *target.cflags, "-fstack-usage", "-c", "policy.c", "-o", "policy.o"],
        folder,
        f"Compiling for {target.name}",
    )
    return cc, sum(int(m.group(1)) for m in re.finditer(r"\t(\d+)\t", (folder / "policy.su").read_text()))


def _link(
    target: FirmwareTarget,
    cc: str,
    folder: Path,
    main: str,
    elf: str,
    defines: Sequence[str] = (),
    policy: str = "policy.o",
) -> Path:
    cmd = [cc, *target.cflags, *defines, *target.ldflags, "-I.", *target.c_files(), main, policy, "-o", elf]
    run(cmd, folder, f"Building the {target.name} firmware")
    return folder / elf


def _emulate(target: FirmwareTarget, elf: Path, timeout: float = EMULATOR_TIMEOUT) -> str:
    cmd = [_tool(target, target.emulator), *target.emulator_args, str(elf)]
    done = run(cmd, elf.parent, f"Running the policy under {target.emulator}", timeout)
    return done.stdout + done.stderr  # QEMU writes a semihosting console (SYS_WRITEC: picolibc) to stderr


def one_instruction_per_block(version_text: str) -> list[str]:
    """QEMU's flag for translation blocks of one instruction, from its `--version` output:
    `-accel tcg,one-insn-per-tb=on` from QEMU 8.1 (which deprecates `-singlestep`), `-singlestep`
    before it (Debian 12 ships 7.2)."""
    found = re.search(r"version (\d+)\.(\d+)", version_text)
    if found is None:  # a version this does not read: QEMU 10 has dropped -singlestep, 8.1+ take -accel
        return ["-accel", "tcg,one-insn-per-tb=on"]
    return ["-accel", "tcg,one-insn-per-tb=on"] if (int(found[1]), int(found[2])) >= (8, 1) else ["-singlestep"]


@lru_cache(maxsize=None)
def _single_step(emulator: str) -> tuple[str, ...]:
    done = subprocess.run([emulator, "--version"], capture_output=True, text=True, timeout=60)
    return tuple(one_instruction_per_block(done.stdout))


def executed_instructions(target: FirmwareTarget, elf: Path, timeout: float = EMULATOR_TIMEOUT) -> int:
    """Instructions the firmware executes under QEMU: with one instruction per translation block
    (`one_instruction_per_block`), -d exec,nochain logs one "Trace" line per instruction executed."""
    emulator = _tool(target, target.emulator)
    cmd = [emulator, *_single_step(emulator), "-d", "exec,nochain", "-D", "/dev/stdout"]
    proc = subprocess.Popen([*cmd, *target.emulator_args, str(elf)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    timed_out = threading.Event()

    def stop() -> None:  # a crashed firmware spins forever
        timed_out.set()
        proc.kill()

    watchdog = threading.Timer(timeout, stop)
    watchdog.start()
    count, rest = 0, b""
    try:
        while chunk := proc.stdout.read(1 << 20):
            lines, _, rest = (rest + chunk).rpartition(b"\n")
            count += lines.count(b"Trace ")
        count += rest.count(b"Trace ")
        _, err = proc.communicate()
    finally:
        watchdog.cancel()
    if proc.returncode != 0:
        ended = f"ended by signal {-proc.returncode}" if proc.returncode < 0 else f"failed (exit {proc.returncode})"
        why = f"did not finish in {timeout:.0f} s" if timed_out.is_set() else f"{ended}: {err.decode()[-2000:]}"
        raise QuarlError(f"Counting instructions under {target.emulator} {why} ({' '.join(cmd)}).")
    return count


def parse_actions(printed: str, policy: IntegerPolicy) -> np.ndarray:
    """The actions the check firmware printed, shaped like `IntegerPolicy.act`'s."""
    lines = printed.splitlines()
    try:
        start, end = next(i for i, s in enumerate(lines) if s.startswith("quarl policy:")), lines.index("done")
    except (StopIteration, ValueError):
        raise QuarlError(f"The firmware did not finish; it printed:\n{printed[-2000:]}") from None
    rows = [line.split() for line in lines[start + 1 : end]]
    if policy.action_kind == "discrete":
        return np.array([int(r[0]) for r in rows], dtype=np.int64)
    bits = np.array([[int(v, 16) for v in r] for r in rows], dtype=np.uint32)
    return bits.view(np.float32).reshape((len(rows), *policy.action_shape))


def _check(target: FirmwareTarget, cc: str, policy: IntegerPolicy, states: np.ndarray, folder: Path) -> np.ndarray:
    (folder / "check").mkdir(exist_ok=True)
    (folder / "check" / "main.c").write_text(check_main(target))
    (folder / "check" / "states.h").write_text(states_header(policy.batch(states), f"{len(states)} recorded states"))
    elf = _link(target, cc, folder, "check/main.c", "check/policy.elf")
    return parse_actions(_emulate(target, elf), policy)


def _folder(folder: Optional[Path], tmp: str) -> Path:
    work = Path(folder) if folder is not None else Path(tmp)
    work.mkdir(parents=True, exist_ok=True)
    return work


def actions(
    target: FirmwareTarget, policy: IntegerPolicy, states: np.ndarray, folder: Optional[Path] = None
) -> np.ndarray:
    """The C policy's actions on `states`, computed by `target`'s firmware under its emulator."""
    with tempfile.TemporaryDirectory(prefix=f"quarl-{target.name}-") as tmp:
        work = _folder(folder, tmp)
        cc, _ = _prepare(target, policy, work)
        return _check(target, cc, policy, states, work)


def _size(target: FirmwareTarget, elf: Path) -> tuple[int, int, int]:
    """text, data, bss of an ELF (Berkeley format: every allocated section in one of the three)."""
    out = run([_tool(target, target.size), "-B", "-d", elf.name], elf.parent, target.size).stdout.splitlines()
    text, data, bss = (int(v) for v in out[1].split()[:3])
    return text, data, bss


def measure(
    target: FirmwareTarget, policy: IntegerPolicy, check: np.ndarray, count: np.ndarray, folder: Optional[Path] = None
) -> Firmware:
    """`check`'s actions under the emulator; the firmware's flash and RAM with the policy minus
    without it; instructions per action: (those of n calls - those of 0 calls) / n, n = len(count)."""
    with tempfile.TemporaryDirectory(prefix=f"quarl-{target.name}-") as tmp:
        work = _folder(folder, tmp)
        cc, stack = _prepare(target, policy, work)
        got = _check(target, cc, policy, check, work)
        n = len(count)
        (work / "measure").mkdir(exist_ok=True)
        (work / "measure" / "main.c").write_text(MEASURE_MAIN)
        (work / "measure" / "stub.c").write_text(STUB)
        (work / "measure" / "states.h").write_text(states_header(policy.batch(count), f"{n} states"))
        elfs = {
            calls: _link(target, cc, work, "measure/main.c", f"measure/calls-{calls}.elf", [f"-DQUARL_CALLS={calls}"])
            for calls in (0, n)
        }
        bare = _link(target, cc, work, "measure/main.c", "measure/bare.elf", [f"-DQUARL_CALLS={n}"], "measure/stub.c")
        (text, data, bss), (text0, data0, bss0) = _size(target, elfs[n]), _size(target, bare)
        idle, busy = (executed_instructions(target, elfs[calls]) for calls in (0, n))
    return Firmware(
        target=target.name,
        actions=got,
        flash=(text + data) - (text0 + data0),
        ram=(data + bss) - (data0 + bss0) + stack,
        instructions=(busy - idle) / n,
        counted=n,
    )


def object_footprint(target: FirmwareTarget, policy: IntegerPolicy, folder: Optional[Path] = None) -> Footprint:
    """policy.o for `target` (its cflags, -fstack-usage): .text, .rodata, .data, .bss and its stack."""
    with tempfile.TemporaryDirectory(prefix=f"quarl-{target.name}-") as tmp:
        work = _folder(folder, tmp)
        _, stack = _prepare(target, policy, work)
        out = run([_tool(target, target.size), "-A", "-d", "policy.o"], work, target.size).stdout
    sections: dict[str, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].startswith(".") and parts[1].isdigit():
            sections[parts[0]] = sections.get(parts[0], 0) + int(parts[1])

    def pick(prefix: str) -> int:
        return sum(v for k, v in sections.items() if k == prefix or k.startswith(prefix + "."))

    return Footprint(
        pick(".text"),
        pick(".rodata") + pick(".srodata"),
        pick(".data") + pick(".sdata"),
        pick(".bss") + pick(".sbss"),
        stack,
    )
