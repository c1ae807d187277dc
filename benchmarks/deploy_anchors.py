"""The anchors of the deployment goals: CMSIS-NN's `arm_fully_connected_s8` counted on quarl's harness.

Each registered microcontroller target builds CMSIS-NN's int8 fully connected layer (its pure-C kernel
where the core has no DSP extension: Cortex-M0, M3, RISC-V; its SIMD kernel, SMLAD, on the Cortex-M4)
with the target's own flags, start-up code and linker script, for the same layer shapes as the policy
(4 -> 64 -> 64 -> 2 for the 64x64 CartPole policy: 4,480 multiply-accumulates). One 'action' is one
forward through the layer stack (random int8 weights, inputs and int32 biases, per-tensor
requantization, activations clamped to int8; no Tanh, no input quantization, no argmax: CMSIS-NN's
share of an action only). Its instructions are counted as quarl counts its own firmware: QEMU with one
instruction per translation block (`_firmware.executed_instructions`), n calls minus 0 calls, / n.

The CMSIS-NN sources are copied, unmodified, into benchmarks/anchors/cmsis_nn/ (Apache-2.0, see its
NOTICE); `--cmsis-nn PATH` points at another checkout (its Include/ and Source/ trees).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CMSIS_NN = ROOT / "benchmarks" / "anchors" / "cmsis_nn"  # the copied files; a checkout has the same layout
SOURCES = ("arm_fully_connected_s8.c", "arm_nn_vec_mat_mult_t_s8.c")
CALLS = 4  # forwards counted (the count is exact: n calls minus 0 calls, / n)

MAIN = r"""/* CMSIS-NN's arm_fully_connected_s8 through the layers of LAYERS.h, QUARL_CALLS times, printing
   nothing: the anchor counted on quarl's harness (benchmarks/deploy_anchors.py). */
#include <stdint.h>
#include <stddef.h>

#include "arm_nnfunctions.h"
#include "layers.h"

volatile long quarl_calls = QUARL_CALLS;
volatile int32_t quarl_sink;

static int8_t act_a[MAX_WIDTH], act_b[MAX_WIDTH];

static void fully_connected(const int8_t *in, int32_t n_in, const int8_t *w, const int32_t *b, int8_t *out,
                            int32_t n_out, int32_t multiplier, int32_t shift) {
    cmsis_nn_context ctx = {NULL, 0};
    cmsis_nn_fc_params fc = {INPUT_OFFSET, 0, OUTPUT_OFFSET, {-128, 127}};
    cmsis_nn_per_tensor_quant_params q = {multiplier, shift};
    cmsis_nn_dims in_dims = {1, 1, 1, n_in};
    cmsis_nn_dims filter_dims = {n_in, 1, 1, n_out};
    cmsis_nn_dims bias_dims = {1, 1, 1, n_out};
    cmsis_nn_dims out_dims = {1, 1, 1, n_out};
    (void)arm_fully_connected_s8(&ctx, &fc, &q, &in_dims, in, &filter_dims, w, &bias_dims, b, &out_dims, out);
}

int main(void) {
    long k;
    long calls = quarl_calls;
    for (k = 0; k < calls; ++k) {
        FORWARD((&INPUTS[(k % N_INPUTS) * INPUT_WIDTH]));
        quarl_sink ^= (int32_t)act_a[0] + (int32_t)act_b[0];
    }
    return 0;
}
"""


@dataclass(frozen=True)
class Anchor:
    """CMSIS-NN's instructions per forward of a layer stack on one target."""

    target: str
    kernel: str  # "pure C" or "SIMD (DSP extension)"
    instructions: float
    macs: int
    optimize: str  # the -O level it was built with

    @property
    def per_mac(self) -> float:
        return self.instructions / self.macs


def _c_array(ctype: str, name: str, values: np.ndarray) -> str:
    body = ", ".join(str(int(v)) for v in values.reshape(-1))
    return f"static const {ctype} {name}[{values.size}] = {{{body}}};\n"


def layers_header(widths: Sequence[int], seed: int = 0, n_inputs: int = CALLS) -> str:
    """`layers.h`: random int8 weights and inputs, int32 biases, a per-tensor multiplier and shift per
    layer of `widths` (4, 64, 64, 2), and FORWARD(x), the stack's forward through act_a / act_b."""
    rng = np.random.default_rng(seed)
    text = (
        "/* Random int8 layers for the CMSIS-NN anchor (seeded numpy). */\n"
        f"#define INPUT_WIDTH {widths[0]}\n#define MAX_WIDTH {max(widths[1:])}\n#define N_INPUTS {n_inputs}\n"
        "#define INPUT_OFFSET 3\n#define OUTPUT_OFFSET -5\n"
    )
    text += _c_array("int8_t", "INPUTS", rng.integers(-128, 128, size=(n_inputs, widths[0])))
    calls = []
    for i, (n_in, n_out) in enumerate(zip(widths[:-1], widths[1:])):
        text += _c_array("int8_t", f"W{i}", rng.integers(-128, 128, size=(n_out, n_in)))
        text += _c_array("int32_t", f"B{i}", rng.integers(-4096, 4096, size=n_out))
        src = "x" if i == 0 else ("act_a" if i % 2 else "act_b")
        dst = "act_a" if i % 2 == 0 else "act_b"
        multiplier, shift = int(rng.integers(1 << 30, (1 << 31) - 1)), -int(rng.integers(6, 10))
        calls.append(f"fully_connected({src}, {n_in}, W{i}, B{i}, {dst}, {n_out}, {multiplier}, {shift})")
    return text + "#define FORWARD(x) do { " + "; ".join(calls) + "; } while (0)\n"


def missing_sources(root: Path) -> Optional[str]:
    """None where `root` holds CMSIS-NN's headers and the two sources, else why not (one sentence)."""
    wanted = [root / "Include" / "arm_nnfunctions.h", *(_source(root, name) for name in SOURCES)]
    absent = [str(p) for p in wanted if p is None or not p.exists()]
    return f"no CMSIS-NN checkout ({', '.join(absent)} missing): --cmsis-nn PATH" if absent else None


def _source(root: Path, name: str) -> Optional[Path]:
    """A source in the copied layout (Source/<name>) or a checkout's (Source/<group>/<name>)."""
    flat = root / "Source" / name
    return flat if flat.exists() else next(iter(sorted((root / "Source").glob(f"*/{name}"))), None)


def kernel_of(cc: str, flags: Sequence[str]) -> str:
    """Which of CMSIS-NN's kernels the build selects: SIMD where the compiler defines __ARM_FEATURE_DSP."""
    import subprocess

    done = subprocess.run([cc, *flags, "-dM", "-E", "-x", "c", "/dev/null"], capture_output=True, text=True, timeout=60)
    return "SIMD (DSP extension)" if "__ARM_FEATURE_DSP" in done.stdout else "pure C"


def count(
    target: Any,
    widths: Sequence[int],
    root: Path = CMSIS_NN,
    optimize: Optional[str] = None,
    folder: Optional[Path] = None,
) -> Anchor:
    """CMSIS-NN's instructions per forward of `widths` on `target` (a registered `Target`), under QEMU,
    built with the target's flags (its -O level replaced by `optimize` where given)."""
    from quarl.deploy.edge.targets._firmware import executed_instructions
    from quarl.deploy.edge.tools import locate, run

    cc = locate(target.cc, target.packages[target.cc])
    sources = [str(_source(root, name)) for name in SOURCES]
    flags = [f for f in target.cflags if f != "-Werror"]  # CMSIS-NN's code is not ours to hold to -Werror
    if optimize is not None:
        flags = [optimize if f.startswith("-O") else f for f in flags]
    with tempfile.TemporaryDirectory(prefix=f"quarl-cmsis-{target.name}-") as tmp:
        work = Path(folder) if folder is not None else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for name, text in target.files.items():
            (work / name).write_text(text)
        (work / "main.c").write_text(MAIN)
        (work / "layers.h").write_text(layers_header(widths))
        counts = {}
        for calls in (0, CALLS):
            elf = f"anchor-{calls}.elf"
            cmd = [
                cc,
                *flags,
                "-w",
                f"-DQUARL_CALLS={calls}",
                *target.ldflags,
                "-I.",
                f"-I{root / 'Include'}",
                *target.c_files(),
                "main.c",
                *sources,
                "-o",
                elf,
            ]
            run(cmd, work, f"Building CMSIS-NN for {target.name}")
            counts[calls] = executed_instructions(target, work / elf)
    macs = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    level = next((f for f in flags if f.startswith("-O")), "-O0")
    return Anchor(target.name, kernel_of(cc, flags), (counts[CALLS] - counts[0]) / CALLS, macs, level)


def anchors(targets: Sequence[Any], widths: Sequence[int], root: Path = CMSIS_NN) -> dict[str, Any]:
    """Per target name its `Anchor`, the fewer instructions of the target's own flags and of -O2 (CMSIS-NN's
    SIMD kernel wants its loops unrolled: 3.42 per MAC at -O2, 4.37 at -Os on the Cortex-M4), or one
    sentence why none (tools or CMSIS-NN missing, a failed build)."""
    from quarl.errors import QuarlError

    why = missing_sources(root)
    found: dict[str, Any] = {}
    for target in targets:
        absent = why or target.missing()
        if absent is not None:
            found[target.name] = absent
            continue
        try:
            levels = (None,) if "-O2" in target.cflags else (None, "-O2")
            built = [count(target, widths, root, level) for level in levels]
            found[target.name] = min(built, key=lambda a: a.instructions)
        except QuarlError as exc:
            found[target.name] = str(exc).splitlines()[0]
    return found
