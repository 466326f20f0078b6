/* clamp(v / y_scale, lo, hi) for requantization, as the float division gives it up to the rounding
 * to an integer that follows, by a multiplication with 1 / y_scale where that gives the same
 * integer. lo and hi are the output range less its zero point: integers within [-255, 255]. The
 * product, clamped, lies within 2^-22 * 255 < 7e-5 of the clamped exact quotient (two roundings:
 * 1 / y_scale's and the product's), the clamped float quotient within 2^-24 * 255, so where the clamped product is 1e-3 or more from
 * every half-integer both round to the same integer (beyond a bound both clamp to it: the bound
 * is an integer); a vector with a lane nearer a half-integer divides. Clamping first leaves no
 * magnitude to test. fast: 1 / y_scale is normal and finite (else every vector divides). Shared
 * by qadd's kernels and qconv2d_nhwc's int8 residual epilogues, so both round as qadd does. */
#ifndef OAR_KERNELS_CPU_QQUOTIENT_H
#define OAR_KERNELS_CPU_QQUOTIENT_H

#include <immintrin.h>
#include <stdbool.h>

__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256
oar_qclampdiv8(__m256 v, __m256 sy, __m256 inv, __m256 lo, __m256 hi, bool fast) {
    if (fast) {
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(v, inv), lo), hi);
        __m256 d = _mm256_and_ps(_mm256_sub_ps(t, _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                                 _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); /* |t - round(t)| <= 0.5 */
        if (!_mm256_movemask_ps(_mm256_cmp_ps(d, _mm256_set1_ps(0.5f - 1e-3f), _CMP_GT_OQ))) return t;
    }
    return _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, sy), lo), hi);
}

__attribute__((target("avx512f"))) static inline __attribute__((always_inline)) __m512
oar_qclampdiv16(__m512 v, __m512 sy, __m512 inv, __m512 lo, __m512 hi, bool fast) {
    if (fast) {
        __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(v, inv), lo), hi);
        __m512 d = _mm512_abs_ps(_mm512_sub_ps(t, _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
        if (!_mm512_cmp_ps_mask(d, _mm512_set1_ps(0.5f - 1e-3f), _CMP_GT_OQ)) return t;
    }
    return _mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, sy), lo), hi);
}

#endif
