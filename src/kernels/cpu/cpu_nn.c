/* CPU vectorized softmax, normalization and other nn kernels. */
#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_register_nn(void) {
}
