/* Vectorized f32 math for AVX2/FMA kernels: exp, expm1, log, tanh, sigmoid and the normal
 * CDF, accurate to a few ulp over the whole float range (checked against double precision).
 * Every function handles NaN, +-inf, zeros and subnormals like the libm function it mirrors.
 * Only include from x86-64 code; callers need the same target attribute (OAR_AVX2). */
#ifndef OAR_AVX2_MATH_H
#define OAR_AVX2_MATH_H

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>
#include <stdint.h>

#define OAR_AVX2 __attribute__((target("avx2,fma")))
#define OAR_V_INLINE static inline OAR_AVX2

#define OAR_V1(c) _mm256_set1_ps(c)

/* Lanes 0..n-1 set, for masked loads and stores of a tail of n < 8 elements. */
OAR_V_INLINE __m256i oar_v_tail_mask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

OAR_V_INLINE __m256 oar_v_abs(__m256 x) { return _mm256_andnot_ps(OAR_V1(-0.0f), x); }
OAR_V_INLINE __m256 oar_v_isnan(__m256 x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }

/* 2^n for integer lanes n in [-126, 127], built in the exponent field. */
OAR_V_INLINE __m256 oar_v_pow2i(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

/* x = k ln2 + r with |r| <= ln2/2 (slightly more when x log2(e) rounds the other way).
 * ln2 is split in two (Cody-Waite); the high part has 9 bits, so k * hi is exact. */
OAR_V_INLINE __m256 oar_v_exp_reduce(__m256 x, __m256 *k) {
    *k = _mm256_round_ps(_mm256_mul_ps(x, OAR_V1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(*k, OAR_V1(0.693359375f), x);
    return _mm256_fnmadd_ps(*k, OAR_V1(-2.12194440054690583e-4f), r);
}

/* e^r - 1 for |r| <= 0.35: Taylor terms to r^8, truncation below 1e-9 relative. */
OAR_V_INLINE __m256 oar_v_expm1_small(__m256 r) {
    __m256 p = OAR_V1(1.0f / 40320);
    p = _mm256_fmadd_ps(p, r, OAR_V1(1.0f / 5040));
    p = _mm256_fmadd_ps(p, r, OAR_V1(1.0f / 720));
    p = _mm256_fmadd_ps(p, r, OAR_V1(1.0f / 120));
    p = _mm256_fmadd_ps(p, r, OAR_V1(1.0f / 24));
    p = _mm256_fmadd_ps(p, r, OAR_V1(1.0f / 6));
    p = _mm256_fmadd_ps(p, r, OAR_V1(0.5f));
    return _mm256_fmadd_ps(_mm256_mul_ps(r, r), p, r);
}

/* e^x. Inputs are clamped to [-104, 89], past which the result is 0 or inf anyway; 2^k is
 * applied in two halves so that subnormal results are rounded once, correctly. */
OAR_V_INLINE __m256 oar_v_exp(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, OAR_V1(-104.0f)), OAR_V1(89.0f));
    __m256 k;
    __m256 r = oar_v_exp_reduce(xc, &k);
    __m256 p = _mm256_add_ps(oar_v_expm1_small(r), OAR_V1(1.0f));
    __m256i n = _mm256_cvtps_epi32(k);
    __m256i n1 = _mm256_srai_epi32(n, 1);
    __m256i n2 = _mm256_sub_epi32(n, n1);
    __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, oar_v_pow2i(n1)), oar_v_pow2i(n2));
    return _mm256_blendv_ps(y, x, oar_v_isnan(x)); /* the clamp dropped NaN */
}

/* e^x - 1 without cancellation near 0: 2^k (e^r - 1) + (2^k - 1). Above 80 the -1 is below
 * half an ulp and e^x itself is used. */
OAR_V_INLINE __m256 oar_v_expm1(__m256 x) {
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, OAR_V1(-30.0f)), OAR_V1(80.0f)); /* expm1(-30) is -1 in f32 */
    __m256 k;
    __m256 r = oar_v_exp_reduce(xc, &k);
    __m256 p = oar_v_expm1_small(r);
    __m256 t = oar_v_pow2i(_mm256_cvtps_epi32(k));
    __m256 y = _mm256_fmadd_ps(t, p, _mm256_sub_ps(t, OAR_V1(1.0f)));
    __m256 big = _mm256_cmp_ps(x, OAR_V1(80.0f), _CMP_GT_OQ);
    if (!_mm256_testz_ps(big, big)) y = _mm256_blendv_ps(y, oar_v_exp(x), big);
    return _mm256_blendv_ps(y, x, oar_v_isnan(x));
}

/* log x = e ln2 + log(1 + f), 1 + f = m in [sqrt(1/2), sqrt(2)). With s = f / (2 + f),
 * log(1 + f) = 2 atanh(s) = f - (f^2/2 - s (f^2/2 + R(s^2))), R the tail of the atanh series
 * (to s^8 here; the rest is below 1e-9). The small correction carries all rounding. */
OAR_V_INLINE __m256 oar_v_log(__m256 x) {
    __m256 sub = _mm256_cmp_ps(x, OAR_V1(1.17549435e-38f), _CMP_LT_OQ); /* subnormal: scale by 2^23 */
    __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, OAR_V1(8388608.0f)), sub);
    __m256i bits = _mm256_castps_si256(xs);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007FFFFF)),
                                                   _mm256_set1_epi32(0x3F800000)));
    __m256 big = _mm256_cmp_ps(m, OAR_V1(1.41421356f), _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, OAR_V1(0.5f)), big);
    e = _mm256_add_ps(e, _mm256_and_ps(big, OAR_V1(1.0f)));
    e = _mm256_sub_ps(e, _mm256_and_ps(sub, OAR_V1(23.0f)));
    __m256 f = _mm256_sub_ps(m, OAR_V1(1.0f)); /* exact */
    __m256 s = _mm256_div_ps(f, _mm256_add_ps(f, OAR_V1(2.0f)));
    __m256 z = _mm256_mul_ps(s, s);
    __m256 R = OAR_V1(2.0f / 9);
    R = _mm256_fmadd_ps(R, z, OAR_V1(2.0f / 7));
    R = _mm256_fmadd_ps(R, z, OAR_V1(2.0f / 5));
    R = _mm256_fmadd_ps(R, z, OAR_V1(2.0f / 3));
    R = _mm256_mul_ps(R, z);
    __m256 hfsq = _mm256_mul_ps(OAR_V1(0.5f), _mm256_mul_ps(f, f));
    __m256 t = _mm256_fmadd_ps(s, _mm256_add_ps(hfsq, R), _mm256_mul_ps(e, OAR_V1(-2.12194440054690583e-4f)));
    t = _mm256_sub_ps(f, _mm256_sub_ps(hfsq, t));
    __m256 y = _mm256_fmadd_ps(e, OAR_V1(0.693359375f), t);
    /* specials: log 0 = -inf, log(x < 0) = NaN, log inf = inf, NaN stays */
    y = _mm256_blendv_ps(y, OAR_V1(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
    y = _mm256_blendv_ps(y, OAR_V1(INFINITY), _mm256_cmp_ps(x, OAR_V1(INFINITY), _CMP_EQ_OQ));
    __m256 bad = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ), oar_v_isnan(x));
    return _mm256_blendv_ps(y, OAR_V1(NAN), bad);
}

/* tanh |x| = em / (em + 2) with em = e^(2|x|) - 1: no cancellation anywhere. Past |x| = 10
 * the quotient is 1 in f32; min(20, .) keeps a NaN operand. */
OAR_V_INLINE __m256 oar_v_tanh(__m256 x) {
    __m256 a = oar_v_abs(x);
    __m256 em = oar_v_expm1(_mm256_min_ps(OAR_V1(20.0f), _mm256_add_ps(a, a)));
    __m256 t = _mm256_div_ps(em, _mm256_add_ps(em, OAR_V1(2.0f)));
    return _mm256_or_ps(t, _mm256_and_ps(x, OAR_V1(-0.0f)));
}

/* 1 / (1 + e^-x) from e = e^-|x|: 1/(1+e) for x >= 0, e/(1+e) below (no overflow, and
 * relative accuracy kept for very negative x). */
OAR_V_INLINE __m256 oar_v_sigmoid(__m256 x) {
    __m256 e = oar_v_exp(_mm256_or_ps(x, OAR_V1(-0.0f)));
    __m256 num = _mm256_blendv_ps(OAR_V1(1.0f), e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
    return _mm256_div_ps(num, _mm256_add_ps(OAR_V1(1.0f), e));
}

/* Phi(x), the standard normal CDF. The tail Phi(-s), s = |x|, is e^(-s^2/2) Q(s), with
 * Q(s) = t P(t), t = 1 / (1 + s/2), P of degree 10 fitted for relative error (0.75 ulp over
 * s in [0, 15]; past 15 the tail is 0 in f32). s^2 is split into hi + lo so that its rounding
 * does not reach the exponent. Phi(x) = x < 0 ? tail : 1 - tail. */
OAR_V_INLINE __m256 oar_v_normcdf(__m256 x) {
    __m256 s = _mm256_min_ps(OAR_V1(15.0f), oar_v_abs(x));
    __m256 t = _mm256_div_ps(OAR_V1(1.0f), _mm256_fmadd_ps(s, OAR_V1(0.5f), OAR_V1(1.0f)));
    __m256 p = OAR_V1(-4.104786366e-02f);
    p = _mm256_fmadd_ps(p, t, OAR_V1(1.987128407e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(-3.392240405e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(1.271829009e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(3.211595416e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(-3.901620209e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(4.712814465e-02f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(2.446296439e-02f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(1.530997902e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(1.992083043e-01f));
    p = _mm256_fmadd_ps(p, t, OAR_V1(1.994794160e-01f));
    __m256 q = _mm256_mul_ps(p, t);
    __m256 hi = _mm256_mul_ps(s, s);
    __m256 lo = _mm256_fmsub_ps(s, s, hi);
    __m256 g = oar_v_exp(_mm256_mul_ps(hi, OAR_V1(-0.5f)));
    g = _mm256_fnmadd_ps(g, _mm256_mul_ps(lo, OAR_V1(0.5f)), g); /* e^(-lo/2) ~ 1 - lo/2 */
    __m256 tail = _mm256_mul_ps(g, q);
    return _mm256_blendv_ps(_mm256_sub_ps(OAR_V1(1.0f), tail), tail, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
}

#undef OAR_V1
#endif /* __x86_64__ */
#endif
