/* CPU AVX2/FMA kernels for elementwise unary and binary ops. */
#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_register_elementwise(void) {
}
