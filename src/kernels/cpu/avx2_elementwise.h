/* AVX2/FMA f32 elementwise kernels, split by arity; cpu_elementwise.c registers both. */
#ifndef OAR_AVX2_ELEMENTWISE_H
#define OAR_AVX2_ELEMENTWISE_H

#include "kernels/cpu/cpu_kernels.h"

/* Elements per thread chunk: big enough that the pool's hand-off cost is noise. */
#define OAR_EW_GRAIN 32768

void oar_avx2_register_unary(void);
void oar_avx2_register_binary(void);

#endif
