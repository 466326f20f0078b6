/* AVX2/FMA building blocks shared by the nn kernels: an accurate vector exp, horizontal
 * reductions, tail masks and double-precision accumulation of float vectors. Everything here
 * is static inline with the avx2,fma target, so only callers compiled for it use it. */
#ifndef OAR_NN_SIMD_H
#define OAR_NN_SIMD_H

#if defined(__x86_64__) && defined(__GNUC__)
#define OAR_NN_SIMD 1
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define NN_AVX2 __attribute__((target("avx2,fma")))

/* exp(x) for 8 floats: x = k ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by its
 * degree-7 Taylor polynomial (truncation error < 6e-9), then scaled by 2^k through the exponent
 * bits. Relative error about 1.5e-7 (a couple of ulps). Below -87.34 (2^-126) the result is 0,
 * above 88.37 it is +inf; NaN stays NaN. */
static inline NN_AVX2 __m256 nn_exp256(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-87.3365447505531f);
    __m256 over = _mm256_cmp_ps(x, hi, _CMP_GT_OQ), under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(lo, _mm256_min_ps(hi, x)); /* min/max return their 2nd operand on NaN: kept */
    __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_andnot_ps(under, y);
    return _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), over);
}

/* Lanes [0, n) set, for the last partial vector of a row (n in 1..8). */
static inline NN_AVX2 __m256i nn_tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Masked load with fill in the lanes past the end. */
static inline NN_AVX2 __m256 nn_load_tail(const float *p, __m256i mask, float fill) {
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, mask), _mm256_castsi256_ps(mask));
}

static inline NN_AVX2 float nn_hmax256(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* Float vectors summed into two double vectors: long rows keep float-free accuracy. */
typedef struct nn_dacc {
    __m256d lo, hi;
} nn_dacc;
static inline NN_AVX2 nn_dacc nn_dacc_zero(void) {
    nn_dacc a = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    return a;
}
static inline NN_AVX2 void nn_dacc_add(nn_dacc *a, __m256 v) {
    a->lo = _mm256_add_pd(a->lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    a->hi = _mm256_add_pd(a->hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}
/* v*v accumulated in double (the square of a float is exact in double). */
static inline NN_AVX2 void nn_dacc_add_sq(nn_dacc *a, __m256 v) {
    __m256d l = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), h = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    a->lo = _mm256_fmadd_pd(l, l, a->lo);
    a->hi = _mm256_fmadd_pd(h, h, a->hi);
}
static inline NN_AVX2 double nn_dacc_sum(nn_dacc a) {
    __m256d s = _mm256_add_pd(a.lo, a.hi);
    __m128d t = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(t, _mm_unpackhi_pd(t, t)));
}
/* The 8 lane sums of a, in order (column reductions keep one sum per lane). */
static inline NN_AVX2 void nn_dacc_lanes(nn_dacc a, double out[8]) {
    _mm256_storeu_pd(out, a.lo);
    _mm256_storeu_pd(out + 4, a.hi);
}

#endif
#endif
