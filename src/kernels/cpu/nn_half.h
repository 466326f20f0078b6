/* Loads and stores of 8 values as f32 vectors from f32, bf16 or f16 memory, for the norm kernels
 * that read low-precision activations directly (batch norm on bf16/f16 inputs with f32
 * parameters): the values are widened and rounded in registers, with no f32 copy of the tensor.
 * Rounding to bf16 is the integer one of half_f32.c (nearest even, NaN kept quiet), so a kernel
 * using these gives the bits of the via-f32 path (widen, f32 kernel, round). f16 uses F16C.
 * The element kind is a run-time argument; callers branch on it once per vector (predictable). */
#ifndef OAR_NN_HALF_H
#define OAR_NN_HALF_H

#include "ops/op.h"

#include "kernels/cpu/nn_simd.h"

#ifdef OAR_NN_SIMD
#include <string.h>

/* avx2 + fma + f16c: every function that inlines the helpers below needs this target */
#define NN_AVX2H __attribute__((target("avx2,fma,f16c")))
#define NN_HINL static inline __attribute__((always_inline)) NN_AVX2H

enum { NN_F32 = 0, NN_BF16 = 1, NN_F16 = 2 };

/* The kind of a dtype, or -1 for one these helpers do not handle. */
static inline int nn_kind(oar_dtype dt) {
    return dt == OAR_F32 ? NN_F32 : dt == OAR_BF16 ? NN_BF16 : dt == OAR_F16 ? NN_F16 : -1;
}

/* 8 bf16 values (in the low 16 bits of each 32-bit lane) rounded from v */
NN_HINL __m256i nn_bf16_bits(__m256 v) {
    const __m256i x = _mm256_castps_si256(v), one = _mm256_set1_epi32(1);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), odd)), 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x0040)), nan);
}

/* v rounded to the kind and widened back (what storing and reloading it gives) */
NN_HINL __m256 nn_round(__m256 v, int k) {
    if (k == NN_BF16) return _mm256_castsi256_ps(_mm256_slli_epi32(nn_bf16_bits(v), 16));
    if (k == NN_F16) return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    return v;
}

NN_HINL __m256 nn_widen8(__m128i h, int k) {
    return k == NN_BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

NN_HINL __m128i nn_narrow8(__m256 v, int k) {
    if (k == NN_F16) return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    __m256i h = nn_bf16_bits(v);
    return _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* 8 values at element i of p */
NN_HINL __m256 nn_ld(const void *p, int64_t i, int k) {
    if (k == NN_F32) return _mm256_loadu_ps((const float *)p + i);
    return nn_widen8(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)), k);
}

/* the first n (1..8) values at element i, fill in the other lanes; mask = nn_tail_mask(n) */
NN_HINL __m256 nn_ld_tail(const void *p, int64_t i, int64_t n, __m256i mask, float fill, int k) {
    if (k == NN_F32) return nn_load_tail((const float *)p + i, mask, fill);
    uint16_t b[8] = {0};
    memcpy(b, (const uint16_t *)p + i, sizeof(uint16_t) * (size_t)n);
    __m256 v = nn_widen8(_mm_loadu_si128((const __m128i *)b), k);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), v, _mm256_castsi256_ps(mask));
}

NN_HINL void nn_st(void *p, int64_t i, __m256 v, int k) {
    if (k == NN_F32) _mm256_storeu_ps((float *)p + i, v);
    else _mm_storeu_si128((__m128i *)((uint16_t *)p + i), nn_narrow8(v, k));
}

/* Stores of values the kind holds exactly (rounded already, or selected from its values): bf16
 * keeps the upper halves, as rounding them again would, without the rounding's integer work. */
NN_HINL __m128i nn_narrow8_exact(__m256 v, int k) {
    if (k == NN_F16) return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    __m256i h = _mm256_srli_epi32(_mm256_castps_si256(v), 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

NN_HINL void nn_st_exact(void *p, int64_t i, __m256 v, int k) {
    if (k == NN_F32) _mm256_storeu_ps((float *)p + i, v);
    else _mm_storeu_si128((__m128i *)((uint16_t *)p + i), nn_narrow8_exact(v, k));
}

NN_HINL void nn_st_tail_exact(void *p, int64_t i, int64_t n, __m256i mask, __m256 v, int k) {
    if (k == NN_F32) {
        _mm256_maskstore_ps((float *)p + i, mask, v);
        return;
    }
    uint16_t b[8];
    _mm_storeu_si128((__m128i *)b, nn_narrow8_exact(v, k));
    memcpy((uint16_t *)p + i, b, sizeof(uint16_t) * (size_t)n);
}

NN_HINL void nn_st_tail(void *p, int64_t i, int64_t n, __m256i mask, __m256 v, int k) {
    if (k == NN_F32) {
        _mm256_maskstore_ps((float *)p + i, mask, v);
        return;
    }
    uint16_t b[8];
    _mm_storeu_si128((__m128i *)b, nn_narrow8(v, k));
    memcpy((uint16_t *)p + i, b, sizeof(uint16_t) * (size_t)n);
}

/* Rows r[0..7] become columns: r[i][j] takes r[j][i]. */
NN_HINL void nn_transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        u[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

#endif
#endif
