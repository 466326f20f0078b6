/* linear of one row (a classifier at batch 1: y[n] = dot(w[n, :], x) + b[n]) on x86, f32.
 * A matrix-vector product reads each weight once and does one multiply-add with it, so it runs
 * at the speed the weights stream in (mobilenet_v2's 1000 x 1280 classifier: 5 MB, more than
 * this Zen 5's L2, usually coming from memory at batch 1). The GEMM backends gave it 160-200 us
 * there, dnnl_sgemm's M = 1 path; this kernel reads four weight rows side by side (four
 * sequential streams for the prefetchers), two vector accumulators a row over x held in
 * registers, and splits the rows over the threads.
 *
 * Each output is the same sequence of operations in the four-row and the one-row code and in
 * any split: lanes of the two accumulators over pairs of vectors of k, a last full vector into
 * the first, the remainder (masked) into the second, their sum reduced in a fixed order, then
 * the bias; so the bits do not depend on the thread count. AVX-512 (16 lanes) and AVX2 (8)
 * sum in different orders: each is checked against the reference by the op sweep at its cap.
 * Registered above the GEMM kernel for f32 rows of one; each declines below its ISA. */
#include "kernels/cpu/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define GV_AVX2 __attribute__((target("avx2,fma")))
#define GV_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define GV_ROWS_PER_PART 64
#define GV_SPLIT_MIN_MACS 262144 /* below this a second thread costs more than it saves */

typedef struct gv_job {
    const float *x, *w, *b;
    float *y;
    int64_t n, k;
} gv_job;

/* ---- AVX-512: R rows at w (row stride k) into y */
static GV_AVX512 inline __attribute__((always_inline)) void gv_rows_512(int R, const float *w, int64_t k,
                                                                        const float *x, const float *b, float *y) {
    __m512 a0[4], a1[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
        __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
        for (int r = 0; r < R; r++) {
            a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + i), x0, a0[r]);
            a1[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + i + 16), x1, a1[r]);
        }
    }
    if (i + 16 <= k) {
        __m512 x0 = _mm512_loadu_ps(x + i);
        for (int r = 0; r < R; r++) a0[r] = _mm512_fmadd_ps(_mm512_loadu_ps(w + r * k + i), x0, a0[r]);
        i += 16;
    }
    if (i < k) {
        __mmask16 m = (__mmask16)((1u << (k - i)) - 1);
        __m512 x0 = _mm512_maskz_loadu_ps(m, x + i);
        for (int r = 0; r < R; r++) a1[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w + r * k + i), x0, a1[r]);
    }
    for (int r = 0; r < R; r++) {
        float s = _mm512_reduce_add_ps(_mm512_add_ps(a0[r], a1[r]));
        y[r] = b ? s + b[r] : s;
    }
}

static GV_AVX512 void gv_part_512(void *ctx, int64_t p0, int64_t p1) {
    const gv_job *j = ctx;
    int64_t e = p1 * GV_ROWS_PER_PART < j->n ? p1 * GV_ROWS_PER_PART : j->n, r = p0 * GV_ROWS_PER_PART;
    for (; r + 4 <= e; r += 4) gv_rows_512(4, j->w + r * j->k, j->k, j->x, j->b ? j->b + r : NULL, j->y + r);
    for (; r < e; r++) gv_rows_512(1, j->w + r * j->k, j->k, j->x, j->b ? j->b + r : NULL, j->y + r);
}

/* ---- AVX2: the same with 8 lanes */
static GV_AVX2 inline __attribute__((always_inline)) float gv_sum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static GV_AVX2 inline __attribute__((always_inline)) void gv_rows_avx2(int R, const float *w, int64_t k,
                                                                       const float *x, const float *b, float *y) {
    __m256 a0[4], a1[4];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        for (int r = 0; r < R; r++) {
            a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * k + i), x0, a0[r]);
            a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * k + i + 8), x1, a1[r]);
        }
    }
    if (i + 8 <= k) {
        __m256 x0 = _mm256_loadu_ps(x + i);
        for (int r = 0; r < R; r++) a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(w + r * k + i), x0, a0[r]);
        i += 8;
    }
    if (i < k) {
        static const int lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
        __m256i m = _mm256_loadu_si256((const __m256i *)(lanes + 8 - (k - i)));
        __m256 x0 = _mm256_maskload_ps(x + i, m);
        for (int r = 0; r < R; r++) a1[r] = _mm256_fmadd_ps(_mm256_maskload_ps(w + r * k + i, m), x0, a1[r]);
    }
    for (int r = 0; r < R; r++) {
        float s = gv_sum8(_mm256_add_ps(a0[r], a1[r]));
        y[r] = b ? s + b[r] : s;
    }
}

static GV_AVX2 void gv_part_avx2(void *ctx, int64_t p0, int64_t p1) {
    const gv_job *j = ctx;
    int64_t e = p1 * GV_ROWS_PER_PART < j->n ? p1 * GV_ROWS_PER_PART : j->n, r = p0 * GV_ROWS_PER_PART;
    for (; r + 4 <= e; r += 4) gv_rows_avx2(4, j->w + r * j->k, j->k, j->x, j->b ? j->b + r : NULL, j->y + r);
    for (; r < e; r++) gv_rows_avx2(1, j->w + r * j->k, j->k, j->x, j->b ? j->b + r : NULL, j->y + r);
}

/* ---- the kernels */
static bool gv_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out) {
    const oar_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    return x->dtype == OAR_F32 && w->dtype == OAR_F32 && out[0]->dtype == OAR_F32 && w->ndim == 2 && x->contiguous &&
           w->contiguous && (!b || (b->dtype == OAR_F32 && b->contiguous && b->numel == w->shape[0])) &&
           w->shape[0] > 0 && w->shape[1] > 0 && out[0]->numel == w->shape[0] && x->numel == w->shape[1];
}

static bool gv_ok_512(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    return oar_cpu_has_avx512() && gv_ok(in, n_in, out);
}

static bool gv_ok_avx2(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_out; (void)a;
    return oar_cpu_has_avx2() && gv_ok(in, n_in, out);
}

static void gv_run(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, oar_range_fn part) {
    const oar_tensor *w = in[1];
    gv_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .w = (const float *)oar_tensor_ptr(w),
                .b = n_in > 2 && in[2] ? (const float *)oar_tensor_ptr(in[2]) : NULL,
                .y = (float *)oar_tensor_ptr(out[0]), .n = w->shape[0], .k = w->shape[1]};
    int64_t parts = (j.n + GV_ROWS_PER_PART - 1) / GV_ROWS_PER_PART;
    if (ctx->nthreads > 1 && parts > 1 && j.n * j.k >= GV_SPLIT_MIN_MACS) oar_parallel_for(parts, 1, part, &j);
    else part(&j, 0, parts);
}

static oar_status gv_fwd_512(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    (void)n_out; (void)a;
    gv_run(ctx, in, n_in, out, gv_part_512);
    return OAR_OK;
}

static oar_status gv_fwd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)n_out; (void)a;
    gv_run(ctx, in, n_in, out, gv_part_avx2);
    return OAR_OK;
}
#endif

void oar_cpu_register_gemv(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* above the GEMM kernel (20) */
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "gemv-avx512", .priority = 30,
                          .fn = gv_fwd_512, .supports = gv_ok_512};
    oar_register_kernel(OAR_OP_linear, e);
    e.impl = "gemv-avx2", e.priority = 25, e.fn = gv_fwd_avx2, e.supports = gv_ok_avx2;
    oar_register_kernel(OAR_OP_linear, e);
#endif
}
