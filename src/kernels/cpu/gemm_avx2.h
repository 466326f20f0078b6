/* oar's own f32 GEMM (gemm_avx2.c): a 6x16 AVX2/FMA or 6x32 AVX-512F register-blocked
 * micro-kernel over panels read in place or packed, on the calling thread. It beats the
 * libraries on small products, where their per-call cost (argument checks, dispatch, buffer
 * setup) is most of the time. Both widths give bitwise equal results. */
#ifndef OAR_GEMM_AVX2_H
#define OAR_GEMM_AVX2_H

#include <stdbool.h>
#include <stddef.h>
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
/* For other drivers of the same micro-kernel (gemm_half.c): rows per tile, the K block, and
 * the kernel of a tile width (16: AVX2, 32: AVX-512; NULL where unavailable). It computes
 * c[MR x nr] = acc (add false) or c + acc, acc the k-ordered FMA chain over op(A) rows at a
 * (element (r, p) at a[r * ars + p * aps]) and op(B) columns at b (element (p, j) at
 * b[p * bps + j]): the arithmetic of oar_sgemm_plain per K block. */
#define OAR_GEMM_MR 6
#define OAR_GEMM_KC 256
typedef void (*oar_gemm_micro_fn)(int64_t kc, const float *a, int64_t ars, int64_t aps, const float *b, int64_t bps,
                                  float *c, int64_t ldc, bool add);
oar_gemm_micro_fn oar_gemm_micro(int nr);
/* The calling thread's packing buffer, 64-byte aligned, at least floats long (it only grows;
 * freed when the thread exits); NULL when memory is short. One driver at a time uses it. */
float *oar_gemm_scratch(size_t floats);

/* The arithmetic both compute, written element by element (portable, slow): the definition
 * the tests compare them with bitwise. */
void oar_sgemm_plain(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *A, int64_t lda, const float *B,
                     int64_t ldb, float beta, float *C, int64_t ldc);

#endif
