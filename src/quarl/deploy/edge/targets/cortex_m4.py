"""The Arm Cortex-M4F on QEMU's MPS2 AN386 board, with semihosting (newlib's rdimon).

`startup.c` (vector table, reset handler: .data copied from flash, .bss zeroed, the FPU on, then main
and exit) and `mps2.ld` (flash at 0x00000000, RAM at 0x20000000, 4 MB each on the AN385/AN386
images). The hard-float ABI (`-mfloat-abi=hard -mfpu=fpv4-sp-d16`, the M4F's single-precision FPU):
the policy's float steps (quantizing the observation, a continuous head) are FPU instructions, and
no soft-float helper of libgcc links in.

    arm-none-eabi-gcc -std=c99 -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os \
        -Wall -Wextra -Werror -specs=rdimon.specs -nostartfiles -T mps2.ld startup.c main.c policy.c -o policy.elf
    qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from quarl.deploy.edge.targets import Target

MACHINE = "mps2-an386"  # Cortex-M4; mps2-an385 is a Cortex-M3
CPU = "cortex-m4"
FLOAT = ("-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
CFLAGS = ("-std=c99", f"-mcpu={CPU}", "-mthumb", *FLOAT, "-Os", "-Wall", "-Wextra", "-Werror")
LINK = ("-specs=rdimon.specs", "-nostartfiles", "-T", "mps2.ld")

STARTUP = r"""/* Bare-metal start-up for QEMU's MPS2 Cortex-M boards: vector table, reset handler. */
#include <stdint.h>
#include <stdlib.h>

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);

void Reset_Handler(void);
void Default_Handler(void);
void _init(void);
void _fini(void);

void Reset_Handler(void) {
    uint32_t *src = &_sidata;
    uint32_t *dst = &_sdata;
    while (dst < &_edata) {
        *dst++ = *src++;
    }
    for (dst = &_sbss; dst < &_ebss; ++dst) {
        *dst = 0;
    }
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= 0xFu << 20; /* CPACR: the FPU on, for -mfloat-abi=hard builds */
#endif
    exit(main());
}

void Default_Handler(void) {
    for (;;) {
    }
}

/* newlib's __libc_init_array / __libc_fini_array want these (linked with -nostartfiles) */
void _init(void) {}
void _fini(void) {}

__attribute__((section(".isr_vector"), used)) void (*const vector_table[16])(void) = {
    (void (*)(void))(uintptr_t)&_estack, /* initial stack pointer: the top of RAM */
    Reset_Handler,
    Default_Handler, /* NMI */
    Default_Handler, /* HardFault */
    Default_Handler, /* MemManage */
    Default_Handler, /* BusFault */
    Default_Handler, /* UsageFault */
    0, 0, 0, 0,
    Default_Handler, /* SVCall */
    Default_Handler, /* DebugMon */
    0,
    Default_Handler, /* PendSV */
    Default_Handler, /* SysTick */
};
"""

LINKER_SCRIPT = r"""/* QEMU MPS2 (AN385 / AN386): code memory at 0x00000000, RAM at 0x20000000, 4 MB each. */
ENTRY(Reset_Handler)

MEMORY
{
    FLASH (rx)  : ORIGIN = 0x00000000, LENGTH = 4M
    RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = 4M
}

_estack = ORIGIN(RAM) + LENGTH(RAM);

SECTIONS
{
    .isr_vector : { KEEP(*(.isr_vector)) } > FLASH
    .text :
    {
        *(.text*)
        *(.rodata*)
        KEEP(*(.init))
        KEEP(*(.fini))
        . = ALIGN(4);
    } > FLASH
    .ARM.extab : { *(.ARM.extab* .gnu.linkonce.armextab.*) } > FLASH
    .ARM.exidx : { __exidx_start = .; *(.ARM.exidx* .gnu.linkonce.armexidx.*) __exidx_end = .; } > FLASH
    .preinit_array :
    {
        PROVIDE_HIDDEN(__preinit_array_start = .);
        KEEP(*(.preinit_array*))
        PROVIDE_HIDDEN(__preinit_array_end = .);
    } > FLASH
    .init_array :
    {
        PROVIDE_HIDDEN(__init_array_start = .);
        KEEP(*(SORT(.init_array.*)))
        KEEP(*(.init_array*))
        PROVIDE_HIDDEN(__init_array_end = .);
    } > FLASH
    .fini_array :
    {
        PROVIDE_HIDDEN(__fini_array_start = .);
        KEEP(*(SORT(.fini_array.*)))
        KEEP(*(.fini_array*))
        PROVIDE_HIDDEN(__fini_array_end = .);
    } > FLASH

    _sidata = LOADADDR(.data);
    .data : { . = ALIGN(4); _sdata = .; *(.data*) . = ALIGN(4); _edata = .; } > RAM AT > FLASH
    .bss (NOLOAD) : { . = ALIGN(4); _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; } > RAM
    . = ALIGN(8);
    end = .;
    _end = .;
}
"""


TARGET = Target(
    name="cortex-m4",
    title="Cortex-M4F (QEMU mps2-an386)",
    cc="arm-none-eabi-gcc",
    size="arm-none-eabi-size",
    emulator="qemu-system-arm",
    packages={
        "arm-none-eabi-gcc": "gcc-arm-none-eabi and libnewlib-arm-none-eabi (apt-get install gcc-arm-none-eabi "
        "libnewlib-arm-none-eabi)",
        "arm-none-eabi-size": "binutils-arm-none-eabi (installed with gcc-arm-none-eabi)",
        "qemu-system-arm": "qemu-system-arm (apt-get install qemu-system-arm)",
    },
    cflags=CFLAGS,
    ldflags=LINK,
    emulator_args=(
        "-M",
        MACHINE,
        "-nographic",
        "-monitor",
        "none",
        "-semihosting-config",
        "enable=on,target=native",
        "-kernel",
    ),
    files={"startup.c": STARTUP, "mps2.ld": LINKER_SCRIPT},
    main_prelude="\nextern void initialise_monitor_handles(void);\n\nstatic char out_buffer[4096];\n",
    main_init="    initialise_monitor_handles();\n    setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);",
    float_note="hard-float ABI: FPv4-SP instructions, no float helpers linked",
)
