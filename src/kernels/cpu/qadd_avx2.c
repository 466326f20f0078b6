/* qadd on AVX2 (src/ops/quant_add.c defines it): 8 codes at a time with the reference's float
 * operations in the same order, (a - a_zp) exactly in int32 then converted, times a_scale, the
 * same for b, their sum, relu, the division by y_scale (correctly rounded as the scalar one),
 * the clamp to the output range less its zero point, rounding half to even (the default MXCSR
 * mode, as nearbyintf), the zero point added: the bytes are the reference's. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant_add.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

typedef struct qadd_job {
    const uint8_t *a, *b;
    uint8_t *y;
    oar_qadd_params_t p;
} qadd_job;

AVX2 static inline __m256 deq8(const uint8_t *x, bool is_signed, __m256i zp, __m256 s) {
    __m128i raw = _mm_loadl_epi64((const __m128i *)x);
    __m256i v = is_signed ? _mm256_cvtepi8_epi32(raw) : _mm256_cvtepu8_epi32(raw);
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)), s);
}

AVX2 static void qadd_range(void *ctx, int64_t b0, int64_t e) {
    const qadd_job *j = ctx;
    const oar_qadd_params_t *p = &j->p;
    __m256 sa = _mm256_set1_ps(p->sa), sb = _mm256_set1_ps(p->sb), sy = _mm256_set1_ps(p->sy);
    __m256 lo = _mm256_set1_ps(p->lo), hi = _mm256_set1_ps(p->hi), zero = _mm256_setzero_ps();
    __m256i za = _mm256_set1_epi32(p->za), zb = _mm256_set1_epi32(p->zb), zy = _mm256_set1_epi32(p->zy);
    bool u8 = !p->y_signed;
    int64_t i = b0;
    for (; i + 8 <= e; i += 8) {
        __m256 v = _mm256_add_ps(deq8(j->a + i, p->a_signed, za, sa), deq8(j->b + i, p->b_signed, zb, sb));
        if (p->relu) v = _mm256_max_ps(v, zero);
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, sy), lo), hi);
        __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), zy); /* within the output's range */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(j->y + i), u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w));
    }
    for (; i < e; i++) j->y[i] = (uint8_t)oar_qadd_one(p, j->a[i], j->b[i]);
}

static oar_status qadd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    qadd_job j = {.a = (const uint8_t *)oar_tensor_ptr(in[QA_A]), .b = (const uint8_t *)oar_tensor_ptr(in[QA_B]),
                  .y = (uint8_t *)oar_tensor_ptr(out[0])};
    if (oar_qadd_params(in, out, a, &j.p) != OAR_OK)
        return oar_opdef_qadd.reference(ctx, in, n_in, out, n_out, a); /* its error */
    if (out[0]->numel) oar_parallel_for(out[0]->numel, 1 << 15, qadd_range, &j);
    return OAR_OK;
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
