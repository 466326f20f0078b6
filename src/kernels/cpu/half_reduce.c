/* The AVX2 sum primitives of avx2_reduce.c on bf16/f16 values, widened in registers as they are
 * loaded (nn_half.h): every addition of the f32 primitives, in their order and precision, so
 * a sum or mean of a bf16 tensor gives the bits of the via-f32 path (widen, the f32 kernel,
 * round) without its f32 copy. O2 steps sum their bf16 bias gradients down [tokens, width]
 * columns. Keep the structure in step with avx2_reduce.c: the column groups (32, 4, 1) and
 * row groups (64 / 8, 4) decide the rounding. */
#include "kernels/cpu/avx2_reduce.h"
#include "kernels/cpu/nn_half.h"

#if defined(OAR_HAVE_AVX2_REDUCE) && defined(OAR_NN_SIMD)

NN_HINL __m256d add_ps_to_pd(__m256d t, __m256 v) {
    t = _mm256_add_pd(t, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(t, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

NN_HINL double hsum_pd(__m256d t) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

static inline float widen1(const uint16_t *x, int64_t i, int k) {
    return k == NN_BF16 ? oar_bf16_to_f32(x[i]) : oar_f16_to_f32(x[i]);
}

/* 4 values at element i */
NN_HINL __m128 ld4(const uint16_t *x, int64_t i, int k) {
    __m128i h = _mm_loadl_epi64((const __m128i *)(x + i));
    return k == NN_BF16 ? _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16)) : _mm_cvtph_ps(h);
}

NN_HINL double row_sum(const uint16_t *x, int64_t n, const int k) {
    __m256d t0 = _mm256_setzero_pd(), t1 = t0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256 a = _mm256_add_ps(_mm256_add_ps(nn_ld(x, i, k), nn_ld(x, i + 8, k)),
                                 _mm256_add_ps(nn_ld(x, i + 16, k), nn_ld(x, i + 24, k)));
        __m256 b = _mm256_add_ps(_mm256_add_ps(nn_ld(x, i + 32, k), nn_ld(x, i + 40, k)),
                                 _mm256_add_ps(nn_ld(x, i + 48, k), nn_ld(x, i + 56, k)));
        __m256 s = _mm256_add_ps(a, b);
        t0 = _mm256_add_pd(t0, _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
        t1 = _mm256_add_pd(t1, _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
    }
    for (; i + 8 <= n; i += 8) t0 = add_ps_to_pd(t0, nn_ld(x, i, k));
    double s = hsum_pd(_mm256_add_pd(t0, t1));
    for (; i < n; i++) s += widen1(x, i, k);
    return s;
}

NN_AVX2H double oar_avx2_row_sum_half(const uint16_t *x, int64_t n, int kind) {
    return kind == NN_BF16 ? row_sum(x, n, NN_BF16) : row_sum(x, n, NN_F16);
}

NN_HINL __m256 rows4(const uint16_t *x, int64_t i, int64_t ld, int k) {
    return _mm256_add_ps(_mm256_add_ps(nn_ld(x, i, k), nn_ld(x, i + ld, k)),
                         _mm256_add_ps(nn_ld(x, i + 2 * ld, k), nn_ld(x, i + 3 * ld, k)));
}
NN_HINL __m128 rows4_128(const uint16_t *x, int64_t i, int64_t ld, int k) {
    return _mm_add_ps(_mm_add_ps(ld4(x, i, k), ld4(x, i + ld, k)), _mm_add_ps(ld4(x, i + 2 * ld, k), ld4(x, i + 3 * ld, k)));
}

NN_HINL void col_sum(const uint16_t *x, int64_t rows, int64_t ld, int64_t cols, const int k, double *acc) {
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
        __m256d s[8];
        for (int q = 0; q < 8; q++) s[q] = _mm256_setzero_pd();
        int64_t r = 0, p = c;
        for (; r + 4 <= rows; r += 4, p += 4 * ld) {
            for (int q = 0; q < 4; q++) {
                __m256 v = rows4(x, p + 8 * q, ld, k);
                s[2 * q] = _mm256_add_pd(s[2 * q], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                s[2 * q + 1] = _mm256_add_pd(s[2 * q + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
            }
        }
        for (; r < rows; r++, p += ld)
            for (int q = 0; q < 8; q++) s[q] = _mm256_add_pd(s[q], _mm256_cvtps_pd(ld4(x, p + 4 * q, k)));
        for (int q = 0; q < 8; q++) _mm256_storeu_pd(acc + c + 4 * q, s[q]);
    }
    for (; c + 4 <= cols; c += 4) {
        __m256d s = _mm256_setzero_pd();
        int64_t r = 0, p = c;
        for (; r + 4 <= rows; r += 4, p += 4 * ld) s = _mm256_add_pd(s, _mm256_cvtps_pd(rows4_128(x, p, ld, k)));
        for (; r < rows; r++, p += ld) s = _mm256_add_pd(s, _mm256_cvtps_pd(ld4(x, p, k)));
        _mm256_storeu_pd(acc + c, s);
    }
    for (; c < cols; c++) {
        double s = 0;
        for (int64_t r = 0; r < rows; r++) s += widen1(x, r * ld + c, k);
        acc[c] = s;
    }
}

NN_AVX2H void oar_avx2_col_sum_half(const uint16_t *x, int64_t rows, int64_t ld, int64_t cols, int kind, double *acc) {
    if (kind == NN_BF16) col_sum(x, rows, ld, cols, NN_BF16, acc);
    else col_sum(x, rows, ld, cols, NN_F16, acc);
}

#endif
