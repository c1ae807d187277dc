"""A bare-metal Cortex-M program around the C policy, for QEMU's MPS2 boards with semihosting.

`startup.c` (vector table, reset handler: .data copied from flash, .bss zeroed, then main and exit),
`mps2.ld` (flash at 0x00000000, RAM at 0x20000000, 4 MB each on the AN385/AN386 images), `main.c`
(acts on every recorded state of `states.h` and prints the actions through semihosting) and the
commands that build and run them:

    arm-none-eabi-gcc -std=c99 -mcpu=cortex-m4 -mthumb -Os -Wall -Wextra -Werror \
        -specs=rdimon.specs -nostartfiles -T mps2.ld startup.c main.c policy.c -o policy.elf
    qemu-system-arm -M mps2-an386 -nographic -semihosting-config enable=on,target=native -kernel policy.elf
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from quarl.deploy.edge.cgen import _hex_float, _values

MACHINE = "mps2-an386"  # Cortex-M4; mps2-an385 is a Cortex-M3
CPU = "cortex-m4"
CFLAGS = ["-std=c99", f"-mcpu={CPU}", "-mthumb", "-Os", "-Wall", "-Wextra", "-Werror"]
LINK = ["-specs=rdimon.specs", "-nostartfiles", "-T", "mps2.ld"]

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

MAIN = r"""/* Runs the C policy on recorded states and prints its actions through semihosting:
   discrete actions as integers, continuous ones as the hexadecimal bits of each float32. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "states.h"

extern void initialise_monitor_handles(void);

static char out_buffer[4096];

int main(void) {
    long k;
    int j;
    POLICY_ACTION_T action[POLICY_ACTION_DIM];
    initialise_monitor_handles();
    setvbuf(stdout, out_buffer, _IOFBF, sizeof out_buffer);
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


def states_header(states: np.ndarray, note: Optional[str] = None) -> str:
    """`states.h`: N_STATES raw observations as one const float array (exact hexadecimal floats)."""
    flat = np.asarray(states, dtype=np.float32).reshape(len(states), -1)
    body = _values(_hex_float(float(v)) for v in flat.reshape(-1))
    comment = f"/* {note} */\n" if note else ""
    return (
        f"{comment}#ifndef QUARL_STATES_H\n#define QUARL_STATES_H\n\n#define N_STATES {len(flat)}\n\n"
        f"static const float STATES[{flat.size}] = {{\n{body}\n}};\n\n#endif\n"
    )
