/* CPU fast kernels for elementwise unary and binary ops. The AVX2/FMA kernels are registered
 * on every x86-64 build; their `supports` checks the CPU at run time, so other machines fall
 * back to the reference kernels. */
#include "kernels/cpu/avx2_broadcast.h"
#include "kernels/cpu/avx2_elementwise.h"

void oar_cpu_register_elementwise(void) {
#if defined(__x86_64__)
    oar_avx2_register_unary();
    oar_avx2_register_binary();
    oar_avx2_register_broadcast();
#endif
}
