/* AVX2 primitives for f32 reductions (avx2_reduce.c), used by cpu_reduce.c. Call them only
 * after oar_cpu_has_avx2() said yes; they exist on x86-64 builds only. Sums are returned in
 * double (partial sums are kept short in float and gathered in double), extremes are exact
 * and propagate NaN like torch. */
#ifndef OAR_AVX2_REDUCE_H
#define OAR_AVX2_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define OAR_HAVE_AVX2_REDUCE 1

/* Sum of x[0..n). */
double oar_avx2_row_sum_f32(const float *x, int64_t n);
/* Max (or min) of x[0..n), n >= 1; NaN if any element is NaN. */
float oar_avx2_row_extreme_f32(const float *x, int64_t n, bool is_min);
/* acc[c] = sum over r < rows of x[r * ld + c], for c < cols (acc is overwritten). */
void oar_avx2_col_sum_f32(const float *x, int64_t rows, int64_t ld, int64_t cols, double *acc);
/* The two sums above on bf16 (kind 1) or f16 (kind 2, F16C) values, widened as they are
 * loaded: the same additions in the same order, so the bits of the f32 primitives on a widened
 * copy (half_reduce.c). */
double oar_avx2_row_sum_half(const uint16_t *x, int64_t n, int kind);
void oar_avx2_col_sum_half(const uint16_t *x, int64_t rows, int64_t ld, int64_t cols, int kind, double *acc);
/* out[c] = max (or min) over r < rows (rows >= 1) of x[r * ld + c]; NaN if any is NaN. */
void oar_avx2_col_extreme_f32(const float *x, int64_t rows, int64_t ld, int64_t cols, bool is_min, float *out);
#endif

#endif
