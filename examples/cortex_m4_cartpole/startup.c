/* Bare-metal start-up for QEMU's MPS2 Cortex-M boards: vector table, reset handler. */
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
