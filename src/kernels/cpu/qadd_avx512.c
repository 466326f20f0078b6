/* qadd on AVX-512 (src/ops/quant_add.c defines it): the AVX2 kernel's operations (qadd_avx2.c)
 * 16 codes at a time, with its multiplication by 1 / y_scale in place of the division wherever
 * that gives the same code (a vector with a lane within 1e-3 of a half-integer divides): the
 * bytes are the reference's. ResNet-20's int8 residual additions run here natively; the flags
 * (relu, signedness) are constants of each compiled loop, so the loop tests nothing but its bound
 * and the half-integer mask (the AVX2 loop, testing them per vector, took 0.38 ns a code against
 * 0.08 for quantize's). */
#include "kernels/cpu/qadd_job.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#include "kernels/cpu/qquotient.h"

#define AVX512 __attribute__((target("avx512f,fma")))

AVX512 static inline __attribute__((always_inline)) __m512 deq16(const uint8_t *x, bool is_signed, __m512i zp,
                                                                  __m512 s) {
    __m128i raw = _mm_loadu_si128((const __m128i *)x);
    __m512i v = is_signed ? _mm512_cvtepi8_epi32(raw) : _mm512_cvtepu8_epi32(raw);
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(v, zp)), s);
}

AVX512 static inline __attribute__((always_inline)) void
range16(const qadd_job *j, int64_t b0, int64_t e, bool as, bool bs, bool relu, bool fast) {
    const oar_qadd_params_t *p = &j->p;
    const uint8_t *pa = j->a, *pb = j->b;
    uint8_t *py = j->y;
    const __m512 sa = _mm512_set1_ps(p->sa), sb = _mm512_set1_ps(p->sb), sy = _mm512_set1_ps(p->sy);
    const __m512 inv = _mm512_set1_ps(1.0f / p->sy), lo = _mm512_set1_ps(p->lo), hi = _mm512_set1_ps(p->hi);
    const __m512i za = _mm512_set1_epi32(p->za), zb = _mm512_set1_epi32(p->zb), zy = _mm512_set1_epi32(p->zy);
    int64_t i = b0;
    for (; i + 16 <= e; i += 16) {
        __m512 v = _mm512_add_ps(deq16(pa + i, as, za, sa), deq16(pb + i, bs, zb, sb));
        if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
        __m512 t = oar_qclampdiv16(v, sy, inv, lo, hi, fast);
        __m512i q = _mm512_add_epi32(_mm512_cvtps_epi32(t), zy); /* within the output's range */
        _mm_storeu_si128((__m128i *)(py + i), _mm512_cvtepi32_epi8(q));
    }
    for (; i < e; i++) py[i] = (uint8_t)oar_qadd_one(p, pa[i], pb[i]);
}

/* one loop per combination of the flags (the output's signedness needs none: the codes are
 * within its range, truncated to bytes) */
#define VARIANT(name, as, bs, relu, fast) \
    AVX512 static void name(void *ctx, int64_t b0, int64_t e) { range16(ctx, b0, e, as, bs, relu, fast); }
VARIANT(uu_relu, false, false, true, true)
VARIANT(uu, false, false, false, true)

AVX512 static void any_range(void *ctx, int64_t b0, int64_t e) {
    const qadd_job *j = ctx;
    const oar_qadd_params_t *p = &j->p;
    bool as = p->a_signed, bs = p->b_signed, relu = p->relu;
    if (j->fast) {
        if (as && bs) relu ? range16(j, b0, e, true, true, true, true) : range16(j, b0, e, true, true, false, true);
        else if (as) relu ? range16(j, b0, e, true, false, true, true) : range16(j, b0, e, true, false, false, true);
        else relu ? range16(j, b0, e, false, true, true, true) : range16(j, b0, e, false, true, false, true);
    } else {
        range16(j, b0, e, as, bs, relu, false);
    }
}

static oar_status qadd_avx512(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    return qadd_launch(ctx, in, n_in, out, n_out, a, any_range, uu, uu_relu);
}

static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx512();
}

void oar_cpu_register_qadd_avx512(void) {
    oar_register_kernel(OAR_OP_qadd, (oar_kernel_entry){.device = OAR_CPU,
                                                        .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                        .impl = "avx512", .priority = 20, .fn = qadd_avx512,
                                                        .supports = supports});
}
#else
void oar_cpu_register_qadd_avx512(void) {}
#endif
