/* CPU vectorized reductions. */
#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_register_reduce(void) {
}
