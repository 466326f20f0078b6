/* qadd on AVX2 (src/ops/quant_add.c defines it): 8 codes at a time with the reference's float
 * operations in the same order, (a - a_zp) exactly in int32 then converted, times a_scale, the
 * same for b, their sum, relu, the division by y_scale (correctly rounded as the scalar one),
 * the clamp to the output range less its zero point, rounding half to even (the default MXCSR
 * mode, as nearbyintf), the zero point added: the bytes are the reference's.
 *
 * The division (a third of the time of ResNet-20's int8 residual additions: vdivps is several
 * times slower than vmulps) is a multiplication by 1 / y_scale wherever that gives the same code
 * (kernels/cpu/qquotient.h says why); a vector with a lane near a half-integer divides. */
#include "kernels/cpu/qadd_job.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "kernels/cpu/qquotient.h"

#define AVX2 __attribute__((target("avx2")))

AVX2 static inline __attribute__((always_inline)) __m256 deq8(const uint8_t *x, bool is_signed, __m256i zp, __m256 s) {
    __m128i raw = _mm_loadl_epi64((const __m128i *)x);
    __m256i v = is_signed ? _mm256_cvtepi8_epi32(raw) : _mm256_cvtepu8_epi32(raw);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)), s);
}

/* The loop with the flags as constants (always inlined into one loop per combination: a loop
 * testing them and reloading the pointers per vector ran 2.4x slower) */
AVX2 static inline __attribute__((always_inline)) void range8(const qadd_job *j, int64_t b0, int64_t e, bool as,
                                                              bool bs, bool relu, bool fast) {
    const oar_qadd_params_t *p = &j->p;
    const uint8_t *pa = j->a, *pb = j->b;
    uint8_t *py = j->y;
    const __m256 sa = _mm256_set1_ps(p->sa), sb = _mm256_set1_ps(p->sb), sy = _mm256_set1_ps(p->sy);
    const __m256 inv = _mm256_set1_ps(1.0f / p->sy), lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi);
    const __m256i za = _mm256_set1_epi32(p->za), zb = _mm256_set1_epi32(p->zb), zy = _mm256_set1_epi32(p->zy);
    const bool u8 = !p->y_signed;
    int64_t i = b0;
    for (; i + 8 <= e; i += 8) {
        __m256 v = _mm256_add_ps(deq8(pa + i, as, za, sa), deq8(pb + i, bs, zb, sb));
        if (relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
        __m256 t = oar_qclampdiv8(v, sy, inv, lo, hi, fast);
        __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), zy); /* within the output's range */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(py + i), u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
    }
    for (; i < e; i++) py[i] = (uint8_t)oar_qadd_one(p, pa[i], pb[i]);
}

AVX2 static void uu_relu(void *ctx, int64_t b0, int64_t e) { range8(ctx, b0, e, false, false, true, true); }
AVX2 static void uu(void *ctx, int64_t b0, int64_t e) { range8(ctx, b0, e, false, false, false, true); }
AVX2 static void any_range(void *ctx, int64_t b0, int64_t e) {
    const qadd_job *j = ctx;
    range8(j, b0, e, j->p.a_signed, j->p.b_signed, j->p.relu, j->fast);
}

static oar_status qadd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    return qadd_launch(ctx, in, n_in, out, n_out, a, any_range, uu, uu_relu);
}

static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2();
}

void oar_cpu_register_qadd_fast(void) {
    oar_register_kernel(OAR_OP_qadd, (oar_kernel_entry){.device = OAR_CPU,
                                                        .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                        .impl = "avx2", .priority = 10, .fn = qadd_avx2,
                                                        .supports = supports});
}
#else
void oar_cpu_register_qadd_fast(void) {}
#endif
