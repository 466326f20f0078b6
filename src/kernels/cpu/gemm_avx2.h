/* oar's own f32 GEMM (gemm_avx2.c): a 6x16 AVX2/FMA or 6x32 AVX-512F register-blocked
 * micro-kernel over panels read in place or packed, on the calling thread. It beats the
 * libraries on small products, where their per-call cost (argument checks, dispatch, buffer
 * setup) is most of the time. Both widths give bitwise equal results. */
#ifndef OAR_GEMM_AVX2_H
#define OAR_GEMM_AVX2_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this build and CPU can run oar_sgemm_avx2 / oar_sgemm_avx512. */
bool oar_gemm_avx2_available(void);
bool oar_gemm_avx512_available(void);

/* Row-major C = op(A)·op(B) + beta·C, op(X) = X^T when the flag is set; beta 0 never reads C.
 * Every element of C is the same sequence of float operations wherever it lies in a tile, so
 * splitting m or n over threads never changes a result. Call only when available. */
void oar_sgemm_avx2(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                    int64_t ldb, float beta, float *C, int64_t ldc);
void oar_sgemm_avx512(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                      int64_t ldb, float beta, float *C, int64_t ldc);
/* The arithmetic both compute, written element by element (portable, slow): the definition
 * the tests compare them with bitwise. */
void oar_sgemm_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float beta, float *C, int64_t ldc);

#endif
