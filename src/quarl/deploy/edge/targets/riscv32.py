"""A bare-metal RISC-V RV32IMAC core on QEMU's `virt` board, with picolibc and semihosting.

picolibc brings the start-up code (`--crt0=semihost`: .data copied, .bss zeroed, main, exit through
semihosting) and its linker script; `virt.ld` only places it in the board's RAM, which starts at
0x80000000 (2 MB "flash" for code and constants, then 2 MB RAM). rv32imac has no FPU: the policy's
float steps (quantizing the observation, a continuous head) call libgcc's soft-float helpers
(__mulsf3, __addsf3, __fixsfsi, ...), which link into the firmware and count in its flash.

    riscv64-unknown-elf-gcc -std=c99 -march=rv32imac -mabi=ilp32 --specs=picolibc.specs -Os -Wall -Wextra \\
        -Werror --oslib=semihost --crt0=semihost -T virt.ld main.c policy.c -o policy.elf
    qemu-system-riscv32 -M virt -bios none -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from quarl.deploy.edge.targets import Target

MACHINE = "virt"
# picolibc's specs give the compiler its headers and the linker its C library, start-up and script
CFLAGS = ("-std=c99", "-march=rv32imac", "-mabi=ilp32", "--specs=picolibc.specs", "-Os", "-Wall", "-Wextra", "-Werror")
# picolibc's integer-only printf keeps the check firmware small (it prints integers and hex bits only)
LINK = ("--oslib=semihost", "--crt0=semihost", "-DPICOLIBC_INTEGER_PRINTF_SCANF", "-T", "virt.ld")

LINKER_SCRIPT = r"""/* QEMU virt (RISC-V): RAM from 0x80000000, where -bios none starts the kernel; picolibc's
   script lays out the sections in the two regions defined here. */
__flash = 0x80000000;
__flash_size = 0x00200000;
__ram = 0x80200000;
__ram_size = 0x00200000;
__stack_size = 0x00001000;

INCLUDE picolibc.ld
"""

TARGET = Target(
    name="riscv32",
    title="RISC-V rv32imac (QEMU virt)",
    cc="riscv64-unknown-elf-gcc",
    size="riscv64-unknown-elf-size",
    emulator="qemu-system-riscv32",
    packages={
        "riscv64-unknown-elf-gcc": "gcc-riscv64-unknown-elf and picolibc-riscv64-unknown-elf (apt-get install "
        "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf)",
        "riscv64-unknown-elf-size": "binutils-riscv64-unknown-elf (installed with gcc-riscv64-unknown-elf)",
        "qemu-system-riscv32": "qemu-system-misc (apt-get install qemu-system-misc)",
    },
    cflags=CFLAGS,
    ldflags=LINK,
    emulator_args=(
        "-M",
        MACHINE,
        "-bios",
        "none",
        "-nographic",
        "-monitor",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
    ),
    files={"virt.ld": LINKER_SCRIPT},
    float_note="no FPU: libgcc's soft-float helpers link in",
)
