/* v / y_scale for requantization, as the float division rounds it to an integer, by a
 * multiplication with 1 / y_scale where that gives the same integer (the argument is in
 * qadd_avx2.c's comment): a vector with a lane within 1e-3 of a half-integer, below 1024 in
 * magnitude, divides. fast: 1 / y_scale is normal and finite (else every vector divides). Shared
 * by qadd's kernels and qconv2d_nhwc's int8 residual epilogues, so both round as qadd does. */
#ifndef OAR_KERNELS_CPU_QQUOTIENT_H
#define OAR_KERNELS_CPU_QQUOTIENT_H

#include <immintrin.h>
#include <stdbool.h>

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256
oar_qquotient8(__m256 v, __m256 sy, __m256 inv, bool fast) {
    if (!fast) return _mm256_div_ps(v, sy);
    __m256 t = _mm256_mul_ps(v, inv);
    __m256 d = _mm256_and_ps(_mm256_sub_ps(t, _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                             _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); /* |t - round(t)| <= 0.5 */
    __m256 near = _mm256_and_ps(_mm256_cmp_ps(d, _mm256_set1_ps(0.5f - 1e-3f), _CMP_GT_OQ),
                                _mm256_cmp_ps(_mm256_and_ps(t, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))),
                                              _mm256_set1_ps(1024.0f), _CMP_LT_OQ));
    return _mm256_movemask_ps(near) ? _mm256_div_ps(v, sy) : t;
}

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512
oar_qquotient16(__m512 v, __m512 sy, __m512 inv, bool fast) {
    if (!fast) return _mm512_div_ps(v, sy);
    __m512 t = _mm512_mul_ps(v, inv);
    __m512 d = _mm512_abs_ps(_mm512_sub_ps(t, _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
    __mmask16 k = _mm512_cmp_ps_mask(d, _mm512_set1_ps(0.5f - 1e-3f), _CMP_GT_OQ) &
                  _mm512_cmp_ps_mask(_mm512_abs_ps(t), _mm512_set1_ps(1024.0f), _CMP_LT_OQ);
    return k ? _mm512_div_ps(v, sy) : t;
}

#endif
