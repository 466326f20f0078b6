/* Casts on AVX2 around int8 arithmetic, 8 values at a time with the reference's conversions, so
 * the results are the same for every input:
 *  - f32 -> u8 / i8 (src/tensor/dtype.c: NaN -> 0, below the range -> its low end, above -> its
 *    high end, else truncation toward zero): quantized codes computed in f32 end in it (ONNX
 *    QuantizeLinear and DynamicQuantizeLinear as the importer composes them);
 *  - i32 -> f32 (the exact integer rounded once to nearest even, as cvtdq2ps does): integer sums
 *    going back to floats (ONNX MatMulInteger -> Cast).
 * The reference's element loops took half of a dynamically quantized MLP's run. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

typedef struct cast_job {
    const float *x;
    uint8_t *y;
    float lo, hi;
    bool u8;
} cast_job;

/* the reference's conversion of one value */
static inline uint8_t cast_one(const cast_job *j, float v) {
    if (v != v) return 0;
    float t = v < j->lo ? j->lo : v > j->hi ? j->hi : v;
    return j->u8 ? (uint8_t)(int32_t)t : (uint8_t)(int8_t)(int32_t)t;
}

AVX2 static void cast_range(void *ctx, int64_t b, int64_t e) {
    const cast_job *j = ctx;
    const __m256 lo = _mm256_set1_ps(j->lo), hi = _mm256_set1_ps(j->hi);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 v = _mm256_loadu_ps(j->x + i);
        v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v); /* NaN -> +0 */
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);                /* within [lo, hi] */
        __m256i q = _mm256_cvttps_epi32(v);                         /* truncation toward zero */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        __m128i bytes = j->u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
        _mm_storel_epi64((__m128i *)(j->y + i), bytes);
    }
    for (; i < e; i++) j->y[i] = cast_one(j, j->x[i]);
}

static oar_status cast_int8_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out, (void)a;
    bool u8 = out[0]->dtype == OAR_U8;
    cast_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .y = (uint8_t *)oar_tensor_ptr(out[0]),
                  .lo = u8 ? 0.0f : -128.0f, .hi = u8 ? 255.0f : 127.0f, .u8 = u8};
    if (in[0]->numel) oar_parallel_for(in[0]->numel, 1 << 15, cast_range, &j);
    return OAR_OK;
}

static bool int8_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out, (void)a;
    return oar_cpu_has_avx2() && in[0]->dtype == OAR_F32 && (out[0]->dtype == OAR_U8 || out[0]->dtype == OAR_I8) &&
           in[0]->contiguous && out[0]->contiguous;
}

typedef struct int_job {
    const int32_t *x;
    float *y;
} int_job;

AVX2 static void i32_range(void *ctx, int64_t b, int64_t e) {
    const int_job *j = ctx;
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
        _mm256_storeu_ps(j->y + i, _mm256_cvtepi32_ps(_mm256_loadu_si256((const __m256i *)(j->x + i))));
    for (; i < e; i++) j->y[i] = (float)j->x[i];
}

static oar_status cast_i32_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out, (void)a;
    int_job j = {.x = (const int32_t *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0])};
    if (in[0]->numel) oar_parallel_for(in[0]->numel, 1 << 15, i32_range, &j);
    return OAR_OK;
}

static bool i32_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out, (void)a;
    return oar_cpu_has_avx2() && in[0]->dtype == OAR_I32 && out[0]->dtype == OAR_F32 && in[0]->contiguous &&
           out[0]->contiguous;
}

void oar_cpu_register_cast_fast(void) {
    oar_register_kernel(OAR_OP_cast, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                        .impl = "avx2", .priority = 10, .fn = cast_int8_avx2,
                                                        .supports = int8_supports});
    oar_register_kernel(OAR_OP_cast, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_I32),
                                                        .impl = "avx2", .priority = 10, .fn = cast_i32_avx2,
                                                        .supports = i32_supports});
}
#else
void oar_cpu_register_cast_fast(void) {}
#endif
