/* quantize of f32 data per tensor on AVX2 (and dequantize, below): 8 values at a time with the reference's float
 * arithmetic (src/ops/quant.h: x * (1/scale), clamp with the NaN order of oar_qmaxf/oar_qminf,
 * rounding half to even as nearbyintf, then the zero point), so the bytes are the same. An
 * int8 program quantizes its input once, and at LeNet's batch 32 the reference loop took an
 * eighth of the run. Scales or zero points the reference would refuse go to the reference,
 * which gives the error. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

typedef struct qjob {
    const float *x;
    uint8_t *y;
    float inv, lo, hi;
    int32_t zp;
    bool u8;
} qjob;

AVX2 static void quantize_range(void *ctx, int64_t b, int64_t e) {
    const qjob *j = ctx;
    __m256 inv = _mm256_set1_ps(j->inv), lo = _mm256_set1_ps(j->lo), hi = _mm256_set1_ps(j->hi);
    __m256i zp = _mm256_set1_epi32(j->zp);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_mul_ps(_mm256_loadu_ps(j->x + i), inv), lo), hi);
        __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(t), zp); /* within [qmin, qmax] */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        __m128i bytes = j->u8 ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
        _mm_storel_epi64((__m128i *)(j->y + i), bytes);
    }
    for (; i < e; i++) {
        float t = oar_qminf(oar_qmaxf(j->x[i] * j->inv, j->lo), j->hi);
        j->y[i] = (uint8_t)((int32_t)nearbyintf(t) + j->zp);
    }
}

static oar_status quantize_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    oar_dtype dt = out[0]->dtype;
    int32_t qmin, qmax;
    oar_qrange(dt, &qmin, &qmax);
    double s = oar_dtypes[in[1]->dtype].load(oar_tensor_ptr(in[1]));
    int64_t z = oar_dtypes[in[2]->dtype].load_i64(oar_tensor_ptr(in[2]));
    if (!(s > 0) || isinf(s) || !((float)s > 0) || z < qmin || z > qmax)
        return oar_opdef_quantize.reference(ctx, in, n_in, out, n_out, a); /* its error */
    qjob j = {.x = (const float *)oar_tensor_ptr(in[0]), .y = (uint8_t *)oar_tensor_ptr(out[0]),
              .inv = 1.0f / (float)s, .lo = (float)(qmin - (int32_t)z), .hi = (float)(qmax - (int32_t)z),
              .zp = (int32_t)z, .u8 = dt == OAR_U8};
    int64_t n = in[0]->numel;
    if (n) oar_parallel_for(n, 1 << 15, quantize_range, &j);
    return OAR_OK;
}

/* dequantize of u8/i8 codes per tensor: (float)(q - zp) * scale, 8 at a time, the reference's
 * operations (an exact int32 difference, converted exactly, one float product). The int8 block
 * tails of ResNet (static PTQ with int8_residual) dequantize the last block's residual for the
 * global pool: with the reference loop, 3% of the program at batch 32. */
typedef struct dqjob {
    const uint8_t *q;
    float *y, scale;
    int32_t zp;
    bool s8;
} dqjob;

AVX2 static void dequantize_range(void *ctx, int64_t b, int64_t e) {
    const dqjob *j = ctx;
    __m256 sc = _mm256_set1_ps(j->scale);
    __m256i zp = _mm256_set1_epi32(j->zp);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
        __m128i raw = _mm_loadl_epi64((const __m128i *)(j->q + i));
        __m256i v = j->s8 ? _mm256_cvtepi8_epi32(raw) : _mm256_cvtepu8_epi32(raw);
        _mm256_storeu_ps(j->y + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, zp)), sc));
    }
    for (; i < e; i++) j->y[i] = (float)((j->s8 ? (int32_t)(int8_t)j->q[i] : (int32_t)j->q[i]) - j->zp) * j->scale;
}

static oar_status dequantize_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    int32_t qmin, qmax;
    oar_qrange(in[0]->dtype, &qmin, &qmax);
    double s = oar_dtypes[in[1]->dtype].load(oar_tensor_ptr(in[1]));
    int64_t z = oar_dtypes[in[2]->dtype].load_i64(oar_tensor_ptr(in[2]));
    if (!(s > 0) || isinf(s) || (in[1]->dtype != OAR_F64 && !((float)s > 0)) || z < qmin || z > qmax)
        return oar_opdef_dequantize.reference(ctx, in, n_in, out, n_out, a); /* its error */
    dqjob j = {.q = (const uint8_t *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0]), .scale = (float)s,
               .zp = (int32_t)z, .s8 = in[0]->dtype == OAR_I8};
    if (in[0]->numel) oar_parallel_for(in[0]->numel, 1 << 15, dequantize_range, &j);
    return OAR_OK;
}

static bool dequantize_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2() && in[1]->ndim == 0;
}

/* f32 data, one scale (per tensor) */
static bool supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2() && in[0]->dtype == OAR_F32 && in[1]->ndim == 0;
}

/* choose_qparams of f32 data: the range 8 values at a time. lo = min(v, lo) and hi = max(v, hi)
 * are minps(v, lo) / maxps(v, hi) (the reference's v < lo ? v : lo, so -0 never replaces the
 * initial +0), and a min or max does not depend on the order, so the range and the qparams are
 * the reference's. v - v is 0 for every finite v; their sum turns NaN at the first NaN or Inf, and
 * then the reference runs, to name the element. Every dynamically quantized layer scans its
 * input with this once per call (a tenth of gpt-mini's int8 run with the scalar loop). */
AVX2 static oar_status choose_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    const float *x = (const float *)oar_tensor_ptr(in[0]);
    int64_t n = in[0]->numel, i = 0;
    __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        vlo = _mm256_min_ps(v, vlo);
        vhi = _mm256_max_ps(v, vhi);
        bad = _mm256_add_ps(bad, _mm256_sub_ps(v, v));
    }
    float lo8[8], hi8[8], bad8[8], lo = 0, hi = 0, nonfinite = 0;
    _mm256_storeu_ps(lo8, vlo);
    _mm256_storeu_ps(hi8, vhi);
    _mm256_storeu_ps(bad8, bad);
    for (int k = 0; k < 8; k++) {
        lo = lo8[k] < lo ? lo8[k] : lo;
        hi = hi8[k] > hi ? hi8[k] : hi;
        nonfinite += bad8[k];
    }
    for (; i < n; i++) {
        lo = x[i] < lo ? x[i] : lo;
        hi = x[i] > hi ? x[i] : hi;
        nonfinite += x[i] - x[i];
    }
    if (nonfinite != 0) return oar_opdef_choose_qparams.reference(ctx, in, n_in, out, n_out, a); /* its error */
    float s;
    int32_t z;
    oar_qparams_from_range(lo, hi, (oar_dtype)a[0].i, a[1].i != 0, &s, &z);
    *(float *)oar_tensor_ptr(out[0]) = s;
    *(int32_t *)oar_tensor_ptr(out[1]) = z;
    return OAR_OK;
}

static bool choose_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    return oar_cpu_has_avx2() && in[0]->dtype == OAR_F32;
}

void oar_cpu_register_quantize_fast(void) {
    oar_register_kernel(OAR_OP_quantize, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                            .impl = "avx2", .priority = 10, .fn = quantize_avx2,
                                                            .supports = supports});
    oar_register_kernel(OAR_OP_dequantize, (oar_kernel_entry){.device = OAR_CPU,
                                                              .dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
                                                              .impl = "avx2", .priority = 10, .fn = dequantize_avx2,
                                                              .supports = dequantize_supports});
    oar_register_kernel(OAR_OP_choose_qparams,
                        (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2",
                                           .priority = 10, .fn = choose_avx2, .supports = choose_supports});
}
#else
void oar_cpu_register_quantize_fast(void) {}
#endif
