/* oar's f32 GEMM on bf16/f16 matrices (gemm_half.c): A, B and C all of one low dtype, the
 * products and sums in f32, for CPUs without native bf16 (and f16 on every CPU). The operands
 * are widened while they are packed for the micro-kernel and C is rounded as it is stored, so
 * there is no f32 copy of an operand or of the result and no conversion pass of its own. */
#ifndef OAR_GEMM_HALF_H
#define OAR_GEMM_HALF_H

#include "ops/op.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether this build and CPU (within the ISA cap) run oar_hgemm_own: AVX2, FMA and F16C. */
bool oar_hgemm_own_available(void);

/* Row-major C = op(A)·op(B) + beta·C, A, B and C in dt (OAR_BF16 or OAR_F16), leading
 * dimensions in elements; beta 0 never reads C. Each element of C is what oar_hgemm_plain
 * computes, bitwise, for any blocking and for both tile widths nr (16: AVX2 tiles, 32:
 * AVX-512 tiles, which the caller must have). Call only when oar_hgemm_own_available(). */
void oar_hgemm_own(int nr, oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A,
                   int64_t lda, const void *B, int64_t ldb, float beta, void *C, int64_t ldc);

/* The definition, element by element (portable, slow): the operands widened exactly to f32,
 * the arithmetic of oar_sgemm_plain (per K block of OAR_GEMM_KC: acc = 0, acc = fma(a, b, acc)
 * in k order, then c = acc or c + acc, c starting from beta·C), c rounded once to dt (nearest
 * even, the `cast` op's bits). That is what the via-f32 path gave: widen, oar's f32 kernel,
 * round. */
void oar_hgemm_plain(oar_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const void *A, int64_t lda,
                     const void *B, int64_t ldb, float beta, void *C, int64_t ldc);

#endif
