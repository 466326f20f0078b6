/* CPU fast kernels (AVX2/FMA, OpenBLAS, oneDNN). Each file registers its kernels from an
 * init function listed in cpu_init.c; the reference kernels remain the oracle. */
#ifndef OAR_CPU_KERNELS_H
#define OAR_CPU_KERNELS_H

#include "ops/op.h"

void oar_cpu_kernels_init(void);
/* True when the CPU supports AVX2 and FMA (checked at run time). */
bool oar_cpu_has_avx2(void);

#endif
