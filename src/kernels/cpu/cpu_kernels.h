/* CPU fast kernels (AVX2/FMA, OpenBLAS, oneDNN). Each file registers its kernels from an
 * init function listed in cpu_init.c; the reference kernels remain the oracle. */
#ifndef OAR_CPU_KERNELS_H
#define OAR_CPU_KERNELS_H

#include "ops/op.h"

void oar_cpu_kernels_init(void);
/* One registration function per file cpu_<family>.c. */
void oar_cpu_register_elementwise(void);
void oar_cpu_register_reduce(void);
void oar_cpu_register_gemm(void);
void oar_cpu_register_conv(void);
void oar_cpu_register_nn(void);
void oar_cpu_register_loss(void);
void oar_cpu_register_index(void);
/* True when the CPU supports AVX2 and FMA (checked at run time). */
bool oar_cpu_has_avx2(void);

#endif
