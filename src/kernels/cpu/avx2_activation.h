/* AVX2/FMA f32 activations shared by the unfused kernels (avx2_unary.c, avx2_unary_backward.c)
 * and the fused ones (avx2_fused_ew.c, linear_act): one definition, so fused and unfused
 * results are bitwise equal. Include from x86-64 code only (see avx2_math.h). */
#ifndef OAR_AVX2_ACTIVATION_H
#define OAR_AVX2_ACTIVATION_H

#include "kernels/cpu/avx2_math.h"

#if defined(__x86_64__)

/* gelu, tanh form: x/2 (1 + tanh(u)) = x sigmoid(2u), z = 2u = x (A + B x^2). An f32 rounding
 * of z would cost |z| ulps through the exponential, so z is carried as zh + zl with
 * error-free products and sums (constants split in two as well), and
 * sigmoid(zh + zl) = s + zl s (1 - s) to first order. */
#define OAR_GELU_A 1.5957691216057308 /* 2 sqrt(2/pi) */
#define OAR_GELU_B (OAR_GELU_A * 0.044715)
OAR_V_INLINE __m256 oar_v_gelu_tanh(__m256 x) {
    const __m256 ah = _mm256_set1_ps((float)OAR_GELU_A), al = _mm256_set1_ps((float)(OAR_GELU_A - (float)OAR_GELU_A));
    const __m256 bh = _mm256_set1_ps((float)OAR_GELU_B), bl = _mm256_set1_ps((float)(OAR_GELU_B - (float)OAR_GELU_B));
    __m256 h = _mm256_mul_ps(x, x), hl = _mm256_fmsub_ps(x, x, h);        /* x^2 = h + hl */
    __m256 q = _mm256_mul_ps(bh, h), ql = _mm256_fmsub_ps(bh, h, q);      /* bh h = q + ql */
    __m256 p = _mm256_add_ps(ah, q);                                       /* two-sum ah + q */
    __m256 qv = _mm256_sub_ps(p, ah), av = _mm256_sub_ps(p, qv);
    __m256 pl = _mm256_add_ps(_mm256_sub_ps(ah, av), _mm256_sub_ps(q, qv));
    pl = _mm256_add_ps(pl, _mm256_add_ps(ql, _mm256_fmadd_ps(bh, hl, _mm256_fmadd_ps(bl, h, al))));
    __m256 zh = _mm256_mul_ps(x, p);
    __m256 zl = _mm256_fmadd_ps(x, pl, _mm256_fmsub_ps(x, p, zh));
    __m256 s = oar_v_sigmoid(zh);
    /* zl is NaN where zh is infinite (inf - inf): the correction is dropped there */
    __m256 corr = _mm256_mul_ps(_mm256_mul_ps(s, zl), _mm256_sub_ps(_mm256_set1_ps(1.0f), s));
    corr = _mm256_andnot_ps(oar_v_isnan(corr), corr);
    return _mm256_mul_ps(x, _mm256_add_ps(s, corr));
}

/* gelu, erf form: x Phi(x) */
OAR_V_INLINE __m256 oar_v_gelu_erf(__m256 x) { return _mm256_mul_ps(x, oar_v_normcdf(x)); }

/* gelu'(x), tanh form: with z = 2 k (x + c x^3) and s = sigmoid(z) (so (1 + tanh(z/2)) / 2 = s
 * and 1 - tanh^2 = 4 s (1 - s)): gelu' = s + x s (1 - s) z', z' = 2 k (1 + 3 c x^2). */
#define OAR_GB_A 1.5957691216057308f /* 2 sqrt(2/pi) */
#define OAR_GB_B (1.5957691216057308f * 0.044715f)
#define OAR_GB_INV_SQRT_2PI 0.3989422804014327f
OAR_V_INLINE __m256 oar_v_gelu_prime_tanh(__m256 x) {
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 z = _mm256_mul_ps(x, _mm256_fmadd_ps(_mm256_set1_ps(OAR_GB_B), x2, _mm256_set1_ps(OAR_GB_A)));
    __m256 dz = _mm256_fmadd_ps(_mm256_set1_ps(3.0f * OAR_GB_B), x2, _mm256_set1_ps(OAR_GB_A));
    __m256 s = oar_v_sigmoid(z);
    __m256 xs1 = _mm256_mul_ps(_mm256_mul_ps(x, _mm256_sub_ps(_mm256_set1_ps(1.0f), s)), dz);
    /* s + s * x (1 - s) z' */
    return _mm256_fmadd_ps(s, xs1, s);
}

/* gelu'(x), erf form: Phi(x) + x phi(x) */
OAR_V_INLINE __m256 oar_v_gelu_prime_erf(__m256 x) {
    __m256 pdf = _mm256_mul_ps(oar_v_exp(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f))),
                               _mm256_set1_ps(OAR_GB_INV_SQRT_2PI));
    return _mm256_fmadd_ps(x, pdf, oar_v_normcdf(x));
}

/* relu: max(0, v) returns its second operand for NaN and for -0.0, as torch.relu does */
OAR_V_INLINE __m256 oar_v_relu(__m256 v) { return _mm256_max_ps(_mm256_setzero_ps(), v); }

/* relu_backward: x > 0 ? g : 0 */
OAR_V_INLINE __m256 oar_v_relu_backward(__m256 g, __m256 x) {
    return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), g);
}

#endif /* __x86_64__ */
#endif
