/* f32 dropout, threaded, with Philox drawn for eight elements at once under AVX2. Drawing the
 * random numbers dominates, and element i's draw is a pure function of (seed, offset + i), so
 * neither the split over threads nor the vector width changes the result: both kernels match
 * the reference bit for bit. */
#include "kernels/cpu/nn_kernels.h"
#include "kernels/cpu/nn_simd.h"

#include <math.h>

typedef struct drop_job {
    const float *x;
    float *y, *mask;
    oar_rng_state rng;
    double p;
    uint64_t threshold; /* u >= p  <=>  the 53 random bits >= threshold (both sides exact) */
    float scale;
} drop_job;

static inline void drop_one(const drop_job *j, int64_t i, bool keep) {
    /* the mask holds the scale rounded to f32, so y = x * mask as in the reference */
    float m = keep ? j->scale : 0.0f;
    j->mask[i] = m;
    j->y[i] = j->x[i] * m;
}

static void drop_range(void *ctx, int64_t begin, int64_t end) {
    const drop_job *j = ctx;
    for (int64_t i = begin; i < end; i++) drop_one(j, i, oar_rng_uniform(j->rng, (uint64_t)i) >= j->p);
}

#ifdef OAR_NN_SIMD
/* 32x32 -> 64-bit products of eight lanes by one constant, split into low and high words. */
static inline NN_AVX2 void mulhilo8(__m256i a, __m256i m, __m256i *lo, __m256i *hi) {
    __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/* Philox-4x32-10 (see base/rng.c) for counters first .. first + 8 * NSET - 1, as NSET
 * independent sets of eight lanes: the sets interleave, hiding the multiplies' latency. Returns
 * words 0 and 1 of each counter. */
#define NSET 4
static inline NN_AVX2 void philox_sets(uint64_t seed, uint64_t first, __m256i w0[NSET], __m256i w1[NSET]) {
    const __m256i m0 = _mm256_set1_epi32((int)0xD2511F53u), m1 = _mm256_set1_epi32((int)0xCD9E8D57u);
    __m256i c0[NSET], c1[NSET], c2[NSET], c3[NSET];
    for (int s = 0; s < NSET; s++) {
        uint32_t lo[8], hi[8];
        for (int l = 0; l < 8; l++) {
            uint64_t c = first + (uint64_t)(s * 8 + l);
            lo[l] = (uint32_t)c;
            hi[l] = (uint32_t)(c >> 32);
        }
        c0[s] = _mm256_loadu_si256((const __m256i *)lo);
        c1[s] = _mm256_loadu_si256((const __m256i *)hi);
        c2[s] = c3[s] = _mm256_setzero_si256();
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        const __m256i vk0 = _mm256_set1_epi32((int)k0), vk1 = _mm256_set1_epi32((int)k1);
        for (int s = 0; s < NSET; s++) {
            __m256i lo0, hi0, lo1, hi1;
            mulhilo8(c0[s], m0, &lo0, &hi0);
            mulhilo8(c2[s], m1, &lo1, &hi1);
            c0[s] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[s]), vk0);
            c1[s] = lo1;
            c2[s] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[s]), vk1);
            c3[s] = lo0;
        }
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    for (int s = 0; s < NSET; s++) {
        w0[s] = c0[s];
        w1[s] = c1[s];
    }
}

/* Lanes whose uniform draw is >= p. The draw's 53 bits are (w0 << 21) ^ w1: compared with the
 * threshold as a high part (w0 >> 11, 21 bits: signed compares are safe) and a low 32-bit part
 * (unsigned compare through the sign-flip trick). */
static inline NN_AVX2 __m256i keep_lanes(__m256i w0, __m256i w1, __m256i thi, __m256i tlo_flipped) {
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    __m256i hi = _mm256_srli_epi32(w0, 11);
    __m256i lo = _mm256_xor_si256(_mm256_xor_si256(_mm256_slli_epi32(w0, 21), w1), sign);
    __m256i hi_gt = _mm256_cmpgt_epi32(hi, thi), hi_eq = _mm256_cmpeq_epi32(hi, thi);
    __m256i lo_lt = _mm256_cmpgt_epi32(tlo_flipped, lo);
    return _mm256_or_si256(hi_gt, _mm256_andnot_si256(lo_lt, hi_eq));
}

static NN_AVX2 void drop_range_avx2(void *ctx, int64_t begin, int64_t end) {
    const drop_job *j = ctx;
    const __m256i thi = _mm256_set1_epi32((int)(j->threshold >> 32));
    const __m256i tlo = _mm256_set1_epi32((int)((uint32_t)j->threshold ^ 0x80000000u));
    const __m256 scale = _mm256_set1_ps(j->scale);
    int64_t i = begin;
    for (; i + 8 * NSET <= end; i += 8 * NSET) {
        __m256i w0[NSET], w1[NSET];
        philox_sets(j->rng.seed, j->rng.offset + (uint64_t)i, w0, w1);
        for (int s = 0; s < NSET; s++) {
            /* the mask holds the scale rounded to f32, so y = x * mask as in the reference */
            __m256 m = _mm256_and_ps(_mm256_castsi256_ps(keep_lanes(w0[s], w1[s], thi, tlo)), scale);
            _mm256_storeu_ps(j->mask + i + 8 * s, m);
            _mm256_storeu_ps(j->y + i + 8 * s, _mm256_mul_ps(_mm256_loadu_ps(j->x + i + 8 * s), m));
        }
    }
    drop_range(ctx, i, end);
}
#endif

static oar_status dropout_run(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a,
                              oar_range_fn fn) {
    double p = a[0].f;
    drop_job j = {(const float *)oar_tensor_ptr(in[0]), (float *)oar_tensor_ptr(out[0]),
                  (float *)oar_tensor_ptr(out[1]), ctx->rng, p, (uint64_t)ceil(p * 9007199254740992.0),
                  (float)(1.0 / (1.0 - p))};
    oar_parallel_for(out[0]->numel, 4096, fn, &j);
    return OAR_OK;
}

static oar_status dropout_threaded(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return dropout_run(ctx, in, out, a, drop_range);
}

/* Only the random case (a mask output); identity and zeros stay with the reference's memcpy. */
static bool dropout_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)out; (void)a;
    return n_out == 2;
}

#ifdef OAR_NN_SIMD
static oar_status dropout_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return dropout_run(ctx, in, out, a, drop_range_avx2);
}
static bool dropout_avx2_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2() && dropout_ok(in, n_in, out, n_out, a);
}
#endif

void oar_cpu_nn_register_dropout(void) {
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "threaded", .priority = 5,
                          .fn = dropout_threaded, .supports = dropout_ok};
    oar_register_kernel(OAR_OP_dropout, e);
#ifdef OAR_NN_SIMD
    e.impl = "avx2";
    e.priority = 10;
    e.fn = dropout_avx2;
    e.supports = dropout_avx2_ok;
    oar_register_kernel(OAR_OP_dropout, e);
#endif
}
