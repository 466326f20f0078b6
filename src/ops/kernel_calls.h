/* A count of kernel calls: every path that runs an op's kernel (oar_op_run_kernel, the
 * executor's instructions) adds one just before the call, and the executor once more at the
 * start of each run (its inputs are bound without a kernel). A kernel that keeps work for the
 * next call (conv_dnnl.c's converted dy) compares counts to know that no kernel ran between. */
#ifndef OAR_KERNEL_CALLS_H
#define OAR_KERNEL_CALLS_H

#include <stdint.h>

extern uint64_t oar_kernel_calls_n;

static inline void oar_kernel_call_begin(void) { __atomic_add_fetch(&oar_kernel_calls_n, 1, __ATOMIC_RELAXED); }
static inline uint64_t oar_kernel_calls_now(void) { return __atomic_load_n(&oar_kernel_calls_n, __ATOMIC_RELAXED); }

#endif
