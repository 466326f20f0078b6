/* AVX2/FMA f32 kernels for binary ops, comparisons and where under any broadcast
 * (avx2_broadcast.c); cpu_elementwise.c registers them. */
#ifndef OAR_AVX2_BROADCAST_H
#define OAR_AVX2_BROADCAST_H

#include "kernels/cpu/cpu_kernels.h"

void oar_avx2_register_broadcast(void);

#endif
