"""The Arm Cortex-M0 (ARMv6-M) of QEMU's `microbit` board (Nordic nRF51822), with semihosting
(newlib's rdimon).

ARMv6-M is the smallest Cortex-M profile: Thumb with few Thumb-2 instructions, no DSP extension, no
hardware divide, no FPU. The C policy takes its portable kernel (`POLICY_SIMD` 0), its float steps call
libgcc's soft-float helpers (which link in and count in the flash). The start-up code is the other
Cortex-M targets' (`_cortex_m`); `nrf51.ld` places flash at 0x00000000 (256 KB) and RAM at 0x20000000
(16 KB), as QEMU's nRF51 SoC maps them (hw/arm/nrf51_soc.c, the nRF51822's sizes).

The optimisation flags are the M0's own (`OPTIMIZE`): with its 8 low registers, `-Os` spills the
4-row kernel's sums and re-materializes each LDRSB's register offset (6.9 instructions per
multiply-accumulate in the 64x64 layer's loop, 9.8 per MAC for the whole action); `-O2` with the
register-pressure-aware loop allocation and no induction-variable rewriting keeps them in registers
(8.45 per MAC for the whole action, arm-none-eabi-gcc 12.2).

    arm-none-eabi-gcc -std=c99 -mcpu=cortex-m0 -mthumb -mfloat-abi=soft -O2 -fira-loop-pressure -fno-ivopts \
        -Wall -Wextra -Werror -specs=rdimon.specs -nostartfiles -T nrf51.ld startup.c main.c policy.c -o policy.elf
    qemu-system-arm -M microbit -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from quarl.deploy.edge.targets._cortex_m import SOFT_FLOAT, cortex_m, linker_script

OPTIMIZE = ("-O2", "-fira-loop-pressure", "-fno-ivopts")
LINKER_SCRIPT = linker_script(
    "QEMU microbit (nRF51822): flash at 0x00000000, 256 KB; RAM at 0x20000000, 16 KB.", "256K", "16K"
)

TARGET = cortex_m(
    name="cortex-m0",
    title="Cortex-M0 (QEMU microbit)",
    cpu="cortex-m0",
    float_abi=SOFT_FLOAT,
    machine="microbit",
    script=("nrf51.ld", LINKER_SCRIPT),
    float_note="no FPU: libgcc's soft-float helpers link in",
    board="QEMU's micro:bit (nRF51822, Cortex-M0)",
    optimize=OPTIMIZE,
)
