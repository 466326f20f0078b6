/* CPU fast shape and indexing kernels. */
#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_register_index(void) {
}
