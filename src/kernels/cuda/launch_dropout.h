/* Launchers of dropout.cu. Plain C; dtypes are oar_dtype values; returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_DROPOUT_H
#define OAR_CUDA_LAUNCH_DROPOUT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element i keeps when the uniform of Philox-4x32-10 counter (offset + i) under key seed (53
 * bits of its words 0 and 1, as oar_rng_uniform) is >= p: mask[i] = keep ? scale : 0 (scale_bits:
 * 1/(1-p) already stored in the element type) and y[i] = x[i] * mask[i]. dtype: f32, f64, f16,
 * bf16. The same stream as the CPU reference, so the masks are bitwise the CPU's. rng_dev: NULL,
 * or device memory holding {seed, offset} that replace the arguments when the kernel runs. */
int oar_cu_dropout(void *y, void *mask, const void *x, int dtype, int64_t n, double p, uint64_t scale_bits,
                   uint64_t seed, uint64_t offset, const uint64_t *rng_dev, void *stream);

#ifdef __cplusplus
}
#endif
#endif
