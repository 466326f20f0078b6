/* The f32 GEMM the convolution kernels run on: OpenBLAS when built with it, else portable
 * loops the compiler can vectorize. */
#ifndef OAR_CONV_GEMM_H
#define OAR_CONV_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* Row-major C[m, n] = op(A)·op(B) + beta·C, where op(A) is [m, k] and op(B) is [k, n]; ta / tb
 * mean A is stored [k, m] / B is stored [n, k]. beta is 0 or 1. */
void oar_conv_sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* True when the GEMM of this size runs threads of its own (so callers should not). */
bool oar_conv_sgemm_threads_itself(int64_t m, int64_t n, int64_t k);

#endif
