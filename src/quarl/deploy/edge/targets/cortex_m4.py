"""The Arm Cortex-M4F on QEMU's MPS2 AN386 board, with semihosting (newlib's rdimon).

`startup.c` (vector table, reset handler: .data copied from flash, .bss zeroed, the FPU on, then main
and exit) and `mps2.ld` (flash at 0x00000000, RAM at 0x20000000, 4 MB each on the AN385/AN386
images), shared with the other Cortex-M targets (`_cortex_m`). The hard-float ABI (`-mfloat-abi=hard
-mfpu=fpv4-sp-d16`, the M4F's single-precision FPU): the policy's float steps (quantizing the
observation, a continuous head) are FPU instructions, and no soft-float helper of libgcc links in. The
DSP extension turns on the C policy's SIMD kernels (`POLICY_SIMD`: SMLAD, SXTB16).

    arm-none-eabi-gcc -std=c99 -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os \
        -Wall -Wextra -Werror -specs=rdimon.specs -nostartfiles -T mps2.ld startup.c main.c policy.c -o policy.elf
    qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from quarl.deploy.edge.targets._cortex_m import MPS2_SCRIPT, STARTUP, cortex_m

MACHINE = "mps2-an386"  # Cortex-M4; mps2-an385 is a Cortex-M3 (cortex_m3.py)
LINKER_SCRIPT = MPS2_SCRIPT  # examples/cortex_m4_cartpole/ carries copies of these two files
__all__ = ["LINKER_SCRIPT", "MACHINE", "STARTUP", "TARGET"]

TARGET = cortex_m(
    name="cortex-m4",
    title="Cortex-M4F (QEMU mps2-an386)",
    cpu="cortex-m4",
    float_abi=("-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
    machine=MACHINE,
    script=("mps2.ld", LINKER_SCRIPT),
    float_note="hard-float ABI: FPv4-SP instructions, no float helpers linked",
)
