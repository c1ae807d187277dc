"""What the Arm Cortex-M targets share: newlib's rdimon semihosting, the start-up code (vector table,
reset handler), the linker script of a board with flash at 0x00000000 and RAM at 0x20000000 (QEMU's
MPS2 boards, the micro:bit's nRF51), and the QEMU command line. A target module calls `cortex_m`
with its core, float ABI, board and memory sizes.
"""

from __future__ import annotations

from quarl.deploy.edge.targets import Target

PACKAGES = {
    "arm-none-eabi-gcc": "gcc-arm-none-eabi and libnewlib-arm-none-eabi (apt-get install gcc-arm-none-eabi "
    "libnewlib-arm-none-eabi)",
    "arm-none-eabi-size": "binutils-arm-none-eabi (installed with gcc-arm-none-eabi)",
    "qemu-system-arm": "qemu-system-arm (apt-get install qemu-system-arm)",
}
SOFT_FLOAT = ("-mfloat-abi=soft",)  # a core without FPU: libgcc's soft-float helpers link in

# newlib's rdimon routes printf and exit to semihosting; the check firmware buffers stdout
MAIN_PRELUDE = "\nextern void initialise_monitor_handles(void);\n\nstatic char out_buffer[4096];\n"
MAIN_INIT = "    initialise_monitor_handles();\n    setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);"

_STARTUP_BODY = r"""#include <stdint.h>
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

_SCRIPT_BODY = r"""ENTRY(Reset_Handler)

MEMORY
{
    FLASH (rx)  : ORIGIN = 0x00000000, LENGTH = @FLASH@
    RAM   (rwx) : ORIGIN = 0x20000000, LENGTH = @RAM@
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


def startup(board: str = "QEMU's MPS2 Cortex-M boards") -> str:
    """`startup.c`: the vector table and a reset handler (.data copied, .bss zeroed, the FPU on where
    the build is hard-float, then main and exit)."""
    return f"/* Bare-metal start-up for {board}: vector table, reset handler. */\n" + _STARTUP_BODY


def linker_script(comment: str, flash: str, ram: str) -> str:
    """A linker script for flash at 0x00000000 and RAM at 0x20000000 of the given lengths ("4M",
    "256K"), the stack at the top of RAM; `comment` names the board on its first line."""
    head = f"/* {comment} */\n"
    return head + _SCRIPT_BODY.replace("@FLASH@", flash).replace("@RAM@", ram)


STARTUP = startup()
MPS2_SCRIPT = linker_script(
    "QEMU MPS2 (AN385 / AN386): code memory at 0x00000000, RAM at 0x20000000, 4 MB each.", "4M", "4M"
)


def cortex_m(
    name: str,
    title: str,
    cpu: str,
    float_abi: tuple[str, ...],
    machine: str,
    script: tuple[str, str],
    float_note: str,
    board: str = "QEMU's MPS2 Cortex-M boards",
    optimize: tuple[str, ...] = ("-Os",),
) -> Target:
    """A Cortex-M target: `-mcpu=<cpu> -mthumb <float_abi> <optimize>`, newlib's rdimon, `startup.c`
    and `script` (file name, text), run by `qemu-system-arm -M <machine>` with semihosting."""
    script_name, script_text = script
    return Target(
        name=name,
        title=title,
        cc="arm-none-eabi-gcc",
        size="arm-none-eabi-size",
        emulator="qemu-system-arm",
        packages=PACKAGES,
        cflags=("-std=c99", f"-mcpu={cpu}", "-mthumb", *float_abi, *optimize, "-Wall", "-Wextra", "-Werror"),
        ldflags=("-specs=rdimon.specs", "-nostartfiles", "-T", script_name),
        emulator_args=(
            "-M",
            machine,
            "-nographic",
            "-monitor",
            "none",
            "-semihosting-config",
            "enable=on,target=native",
            "-kernel",
        ),
        files={"startup.c": startup(board), script_name: script_text},
        main_prelude=MAIN_PRELUDE,
        main_init=MAIN_INIT,
        float_note=float_note,
    )
