/* 16 bf16/f16 values at a time for the mixed batch norm kernels at the `avx512` cap: the
 * operations of nn_half.h's helpers on twice the lanes (bf16: the same integer rounding to
 * nearest even with NaN kept quiet; f16: the F16C conversions' AVX-512 forms). The loops that use
 * them are elementwise (each value's own fma, roundings and store), so they give the AVX2
 * loops' bits; at 8 lanes a bf16 rounding took 10 vector operations per 8 values, the bulk of
 * what the mixed kernels paid over the f32 ones (docs/amp.md, "resnet20 O2"). Sums keep the AVX2
 * code's 8-lane accumulators, whose order defines their bits (the backward feeds them each
 * 16-value load's two halves in turn; the forward's statistics stay 8-lane). */
#ifndef OAR_NN_HALF512_H
#define OAR_NN_HALF512_H

#include "kernels/cpu/nn_half.h"

#ifdef OAR_NN_SIMD

#define NN_X512 __attribute__((target("avx2,fma,f16c,avx512f")))
#define NN_X512INL static inline __attribute__((always_inline)) NN_X512

/* 16 values of kind k (NN_BF16 or NN_F16) at element i of p, widened */
NN_X512INL __m512 nn16_ld(const void *p, int64_t i, const int k) {
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
    if (k == NN_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* bf16 bits of v in each 32-bit lane: nn_bf16_bits on 16 lanes */
NN_X512INL __m512i nn16_bf16_bits(__m512 v) {
    const __m512i x = _mm512_castps_si512(v), hi = _mm512_srli_epi32(x, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), odd)), 16);
    return _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x0040));
}

/* v rounded to kind k and widened back */
NN_X512INL __m512 nn16_round(__m512 v, const int k) {
    if (k == NN_F16) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    return _mm512_castsi512_ps(_mm512_slli_epi32(nn16_bf16_bits(v), 16));
}

/* 16 values rounded to kind k, stored at element i of p */
NN_X512INL void nn16_st(void *p, int64_t i, __m512 v, const int k) {
    __m256i h = k == NN_F16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : _mm512_cvtepi32_epi16(nn16_bf16_bits(v));
    _mm256_storeu_si256((__m256i *)((uint16_t *)p + i), h);
}

/* 16 values kind k holds exactly: bf16 keeps their upper halves (nn_st_exact) */
NN_X512INL void nn16_st_exact(void *p, int64_t i, __m512 v, const int k) {
    __m256i h = k == NN_F16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)
                            : _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16));
    _mm256_storeu_si256((__m256i *)((uint16_t *)p + i), h);
}

#endif
#endif
