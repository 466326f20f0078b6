/* AVX2 f32 reduction primitives: along a contiguous row, and down the columns of rows that
 * are ld floats apart. See avx2_reduce.h for the contracts. */
#include "kernels/cpu/avx2_reduce.h"

#ifdef OAR_HAVE_AVX2_REDUCE
#include <immintrin.h>
#include <math.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

AVX2_INLINE __m256d add_ps_to_pd(__m256d t, __m256 v) {
    t = _mm256_add_pd(t, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(t, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

AVX2_INLINE double hsum_pd(__m256d t) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* Row sums add each 64 floats as a pairwise tree in float (three roundings per element, on
 * partial sums of at most 8 values) and gather the trees in double, so the error does not
 * grow with the row's length; the double part costs 2 conversions per 8 loads. */
AVX2 double oar_avx2_row_sum_f32(const float *x, int64_t n) {
    __m256d t0 = _mm256_setzero_pd(), t1 = t0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const float *p = x + i;
        __m256 a = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)),
                                 _mm256_add_ps(_mm256_loadu_ps(p + 16), _mm256_loadu_ps(p + 24)));
        __m256 b = _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(p + 32), _mm256_loadu_ps(p + 40)),
                                 _mm256_add_ps(_mm256_loadu_ps(p + 48), _mm256_loadu_ps(p + 56)));
        __m256 s = _mm256_add_ps(a, b);
        t0 = _mm256_add_pd(t0, _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
        t1 = _mm256_add_pd(t1, _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
    }
    for (; i + 8 <= n; i += 8) t0 = add_ps_to_pd(t0, _mm256_loadu_ps(x + i));
    double s = hsum_pd(_mm256_add_pd(t0, t1));
    for (; i < n; i++) s += x[i];
    return s;
}

/* max/min that ignore NaN; NaN is tracked separately (the AVX instructions drop it). */
AVX2_INLINE __m256 pick(__m256 a, __m256 b, bool is_min) { return is_min ? _mm256_min_ps(a, b) : _mm256_max_ps(a, b); }
AVX2_INLINE float pick1(float a, float b, bool is_min) { return is_min ? (b < a ? b : a) : (b > a ? b : a); }
AVX2_INLINE __m256 isnan8(__m256 v) { return _mm256_cmp_ps(v, v, _CMP_UNORD_Q); }

AVX2_INLINE float row_extreme(const float *x, int64_t n, bool is_min) {
    float m = x[0];
    bool nan = false;
    int64_t i = 0;
    if (n >= 32) {
        __m256 m0 = _mm256_loadu_ps(x), m1 = m0, m2 = m0, m3 = m0, bad = _mm256_setzero_ps();
        for (; i + 32 <= n; i += 32) {
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
            __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v2, v3, _CMP_UNORD_Q));
            m0 = pick(m0, v0, is_min);
            m1 = pick(m1, v1, is_min);
            m2 = pick(m2, v2, is_min);
            m3 = pick(m3, v3, is_min);
        }
        float lanes[8];
        _mm256_storeu_ps(lanes, pick(pick(m0, m1, is_min), pick(m2, m3, is_min), is_min));
        for (int k = 0; k < 8; k++) m = pick1(m, lanes[k], is_min);
        nan = _mm256_movemask_ps(bad) != 0;
    }
    for (; i < n; i++) {
        nan |= x[i] != x[i];
        m = pick1(m, x[i], is_min);
    }
    return nan ? NAN : m;
}

AVX2 float oar_avx2_row_extreme_f32(const float *x, int64_t n, bool is_min) {
    return is_min ? row_extreme(x, n, true) : row_extreme(x, n, false);
}

/* Columns add 4 rows at a time as a pairwise tree in float and gather the groups in double:
 * two roundings per element on partial sums of at most 4 values, then exact-to-double
 * accumulation for any number of rows, at half a conversion per loaded vector. */
AVX2_INLINE __m256 rows4_ps(const float *p, int64_t ld) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + ld)),
                         _mm256_add_ps(_mm256_loadu_ps(p + 2 * ld), _mm256_loadu_ps(p + 3 * ld)));
}
AVX2_INLINE __m128 rows4_ps128(const float *p, int64_t ld) {
    return _mm_add_ps(_mm_add_ps(_mm_loadu_ps(p), _mm_loadu_ps(p + ld)),
                      _mm_add_ps(_mm_loadu_ps(p + 2 * ld), _mm_loadu_ps(p + 3 * ld)));
}

AVX2 void oar_avx2_col_sum_f32(const float *x, int64_t rows, int64_t ld, int64_t cols, double *acc) {
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
        __m256d s[8];
        for (int k = 0; k < 8; k++) s[k] = _mm256_setzero_pd();
        const float *p = x + c;
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4, p += 4 * ld) {
            for (int k = 0; k < 4; k++) {
                __m256 v = rows4_ps(p + 8 * k, ld);
                s[2 * k] = _mm256_add_pd(s[2 * k], _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                s[2 * k + 1] = _mm256_add_pd(s[2 * k + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
            }
        }
        for (; r < rows; r++, p += ld)
            for (int k = 0; k < 8; k++) s[k] = _mm256_add_pd(s[k], _mm256_cvtps_pd(_mm_loadu_ps(p + 4 * k)));
        for (int k = 0; k < 8; k++) _mm256_storeu_pd(acc + c + 4 * k, s[k]);
    }
    for (; c + 4 <= cols; c += 4) {
        __m256d s = _mm256_setzero_pd();
        const float *p = x + c;
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4, p += 4 * ld) s = _mm256_add_pd(s, _mm256_cvtps_pd(rows4_ps128(p, ld)));
        for (; r < rows; r++, p += ld) s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm_loadu_ps(p)));
        _mm256_storeu_pd(acc + c, s);
    }
    for (; c < cols; c++) {
        double s = 0;
        for (int64_t r = 0; r < rows; r++) s += x[r * ld + c];
        acc[c] = s;
    }
}

AVX2_INLINE void col_extreme(const float *x, int64_t rows, int64_t ld, int64_t cols, bool is_min, float *out) {
    const __m256 qnan = _mm256_set1_ps(NAN);
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
        __m256 m[4], bad[4];
        for (int k = 0; k < 4; k++) {
            m[k] = _mm256_loadu_ps(x + c + 8 * k);
            bad[k] = isnan8(m[k]);
        }
        const float *p = x + ld + c;
        for (int64_t r = 1; r < rows; r++, p += ld) {
            for (int k = 0; k < 4; k++) {
                __m256 v = _mm256_loadu_ps(p + 8 * k);
                bad[k] = _mm256_or_ps(bad[k], isnan8(v));
                m[k] = pick(m[k], v, is_min);
            }
        }
        for (int k = 0; k < 4; k++) _mm256_storeu_ps(out + c + 8 * k, _mm256_blendv_ps(m[k], qnan, bad[k]));
    }
    for (; c + 8 <= cols; c += 8) {
        __m256 m = _mm256_loadu_ps(x + c), bad = isnan8(m);
        const float *p = x + ld + c;
        for (int64_t r = 1; r < rows; r++, p += ld) {
            __m256 v = _mm256_loadu_ps(p);
            bad = _mm256_or_ps(bad, isnan8(v));
            m = pick(m, v, is_min);
        }
        _mm256_storeu_ps(out + c, _mm256_blendv_ps(m, qnan, bad));
    }
    for (; c < cols; c++) {
        float m = x[c];
        bool nan = m != m;
        for (int64_t r = 1; r < rows; r++) {
            float v = x[r * ld + c];
            nan |= v != v;
            m = pick1(m, v, is_min);
        }
        out[c] = nan ? NAN : m;
    }
}

AVX2 void oar_avx2_col_extreme_f32(const float *x, int64_t rows, int64_t ld, int64_t cols, bool is_min, float *out) {
    if (is_min) col_extreme(x, rows, ld, cols, true, out);
    else col_extreme(x, rows, ld, cols, false, out);
}
#endif
