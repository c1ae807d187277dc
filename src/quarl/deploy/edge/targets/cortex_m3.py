"""The Arm Cortex-M3 (ARMv7-M) on QEMU's MPS2 AN385 board, with semihosting (newlib's rdimon).

The same board family, start-up code and `mps2.ld` as the Cortex-M4 (`_cortex_m`). The M3 has no DSP
extension and no FPU: the C policy takes its portable kernel (`POLICY_SIMD` 0: int8 rows, MLA), and
its float steps (quantizing the observation, a continuous head) call libgcc's soft-float helpers,
which link in and count in the flash.

    arm-none-eabi-gcc -std=c99 -mcpu=cortex-m3 -mthumb -mfloat-abi=soft -Os \
        -Wall -Wextra -Werror -specs=rdimon.specs -nostartfiles -T mps2.ld startup.c main.c policy.c -o policy.elf
    qemu-system-arm -M mps2-an385 -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from quarl.deploy.edge.targets._cortex_m import MPS2_SCRIPT, SOFT_FLOAT, cortex_m

TARGET = cortex_m(
    name="cortex-m3",
    title="Cortex-M3 (QEMU mps2-an385)",
    cpu="cortex-m3",
    float_abi=SOFT_FLOAT,
    machine="mps2-an385",
    script=("mps2.ld", MPS2_SCRIPT),
    float_note="no FPU: libgcc's soft-float helpers link in",
)
