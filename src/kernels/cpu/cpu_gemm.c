/* CPU GEMM-backed kernels (OpenBLAS / oneDNN) for matmul and linear. */
#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_register_gemm(void) {
}
