/* AVX2 f32 max pooling for the most common window: 2x2, stride 2, no padding, dilation 1
 * (LeNet, VGG-style nets). Windows do not overlap, so each output row reads two input rows:
 * 8 outputs at a time load 16 floats of each row, split them into even and odd columns (the
 * window's four taps a b / c d) and reduce in the reference's order, where a later tap wins
 * when it is greater or NaN. The backward pass recomputes which tap won and writes the
 * gradient there and 0 at the other three, so it needs no scatter and no memset of covered
 * elements (an odd last row or column, outside every window, is zeroed). Registered above
 * the generic kernels of conv_pool.c; declines every other geometry. */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define P2_AVX2 __attribute__((target("avx2,fma")))

typedef struct p2_job {
    const float *x, *gy;
    float *out;
    int64_t h, w, oh, ow;
} p2_job;

/* Lanes [0, n) of a vector, n clamped to [0, 8]. */
static inline P2_AVX2 __m256i p2_mask(int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* 16 floats from p (the first n of them; the rest read as 0) split into even and odd columns. */
static inline P2_AVX2 void p2_load_split(const float *p, int64_t n, __m256 *even, __m256 *odd) {
    __m256 lo, hi;
    if (n >= 16) {
        lo = _mm256_loadu_ps(p);
        hi = _mm256_loadu_ps(p + 8);
    } else {
        lo = _mm256_maskload_ps(p, p2_mask(n));
        hi = _mm256_maskload_ps(p + 8, p2_mask(n - 8));
    }
    /* in-lane shuffles give [0 2 8 10 | 4 6 12 14]; the 64-bit permute puts them in order */
    *even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    *odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
}

/* Interleaves even and odd columns back into 16 floats at p (the first n of them). */
static inline P2_AVX2 void p2_store_merge(float *p, int64_t n, __m256 even, __m256 odd) {
    __m256 ul = _mm256_unpacklo_ps(even, odd), uh = _mm256_unpackhi_ps(even, odd);
    __m256 lo = _mm256_permute2f128_ps(ul, uh, 0x20), hi = _mm256_permute2f128_ps(ul, uh, 0x31);
    if (n >= 16) {
        _mm256_storeu_ps(p, lo);
        _mm256_storeu_ps(p + 8, hi);
    } else {
        _mm256_maskstore_ps(p, p2_mask(n), lo);
        if (n > 8) _mm256_maskstore_ps(p + 8, p2_mask(n - 8), hi);
    }
}

/* The reference's update: a later tap v replaces best when greater or NaN. */
static inline P2_AVX2 __m256 p2_takes(__m256 v, __m256 best) {
    return _mm256_or_ps(_mm256_cmp_ps(v, best, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

/* Output rows [b, e) over all planes: row r is plane r / oh, output row r % oh. */
static P2_AVX2 void p2_fwd_rows(void *ctx, int64_t b, int64_t e) {
    const p2_job *j = ctx;
    for (int64_t r = b; r < e; r++) {
        int64_t p = r / j->oh, oy = r % j->oh;
        const float *r0 = j->x + (p * j->h + 2 * oy) * j->w, *r1 = r0 + j->w;
        float *y = j->out + r * j->ow;
        for (int64_t ox = 0; ox < j->ow; ox += 8) {
            int64_t n = 2 * (j->ow - ox); /* input floats left in the window row */
            __m256 a, bb, c, d;
            p2_load_split(r0 + 2 * ox, n, &a, &bb);
            p2_load_split(r1 + 2 * ox, n, &c, &d);
            __m256 best = a;
            best = _mm256_blendv_ps(best, bb, p2_takes(bb, best));
            best = _mm256_blendv_ps(best, c, p2_takes(c, best));
            best = _mm256_blendv_ps(best, d, p2_takes(d, best));
            if (j->ow - ox >= 8) _mm256_storeu_ps(y + ox, best);
            else _mm256_maskstore_ps(y + ox, p2_mask(j->ow - ox), best);
        }
    }
}

static P2_AVX2 void p2_bwd_rows(void *ctx, int64_t b, int64_t e) {
    const p2_job *j = ctx;
    for (int64_t r = b; r < e; r++) {
        int64_t p = r / j->oh, oy = r % j->oh;
        const float *r0 = j->x + (p * j->h + 2 * oy) * j->w, *r1 = r0 + j->w, *gy = j->gy + r * j->ow;
        float *d0 = j->out + (p * j->h + 2 * oy) * j->w, *d1 = d0 + j->w;
        for (int64_t ox = 0; ox < j->ow; ox += 8) {
            int64_t n = 2 * (j->ow - ox);
            __m256 a, bb, c, d;
            p2_load_split(r0 + 2 * ox, n, &a, &bb);
            p2_load_split(r1 + 2 * ox, n, &c, &d);
            __m256 mb = p2_takes(bb, a), best = _mm256_blendv_ps(a, bb, mb);
            __m256 mc = p2_takes(c, best);
            best = _mm256_blendv_ps(best, c, mc);
            __m256 md = p2_takes(d, best);
            __m256 g = j->ow - ox >= 8 ? _mm256_loadu_ps(gy + ox) : _mm256_maskload_ps(gy + ox, p2_mask(j->ow - ox));
            /* the winner is the last tap that took over */
            __m256 gd = _mm256_and_ps(md, g);
            __m256 gc = _mm256_andnot_ps(md, _mm256_and_ps(mc, g));
            __m256 gb = _mm256_andnot_ps(_mm256_or_ps(mc, md), _mm256_and_ps(mb, g));
            __m256 ga = _mm256_andnot_ps(_mm256_or_ps(mb, _mm256_or_ps(mc, md)), g);
            p2_store_merge(d0 + 2 * ox, n, ga, gb);
            p2_store_merge(d1 + 2 * ox, n, gc, gd);
        }
        if (j->w > 2 * j->ow) d0[j->w - 1] = d1[j->w - 1] = 0.0f; /* odd width: the last column */
        if (oy == j->oh - 1)                                      /* rows below the last window */
            memset(d1 + j->w, 0, sizeof(float) * (size_t)((j->h - 2 * j->oh) * j->w));
    }
}

static void p2_setup(p2_job *j, const oar_tensor *x, const oar_tensor *y) {
    int nd = x->ndim;
    j->h = x->shape[nd - 2], j->w = x->shape[nd - 1];
    j->oh = y->shape[nd - 2], j->ow = y->shape[nd - 1];
}

static void p2_run(p2_job *j, int64_t planes, oar_range_fn fn) {
    int64_t rows = planes * j->oh, per_row = 3 * j->w; /* floats touched per output row */
    oar_parallel_for(rows, per_row >= 16384 ? 1 : 16384 / per_row, fn, j);
}

static oar_status p2_fwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    p2_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .out = (float *)oar_tensor_ptr(out[0])};
    p2_setup(&j, in[0], out[0]);
    if (out[0]->numel) p2_run(&j, in[0]->numel / (j.h * j.w), p2_fwd_rows);
    return OAR_OK;
}

static oar_status p2_bwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    p2_job j = {.gy = (const float *)oar_tensor_ptr(in[0]), .x = (const float *)oar_tensor_ptr(in[1]),
                .out = (float *)oar_tensor_ptr(out[0])};
    p2_setup(&j, in[1], in[0]);
    if (in[0]->numel) p2_run(&j, in[1]->numel / (j.h * j.w), p2_bwd_rows);
    else memset(j.out, 0, sizeof(float) * (size_t)out[0]->numel);
    return OAR_OK;
}

/* attrs (ops/pool.c): kernel, stride, padding, dilation, ceil_mode. Every window must lie
 * inside the input (2 oh <= h, 2 ow <= w), which ceil mode can break. */
static bool p2_geometry(const oar_tensor *x, const oar_tensor *y, const oar_attr *a) {
    if (!oar_cpu_has_avx2() || x->dtype != OAR_F32 || !x->contiguous) return false;
    for (int i = 0; i < 2; i++)
        if (a[0].ints[i] != 2 || a[1].ints[i] != 2 || a[2].ints[i] != 0 || a[3].ints[i] != 1) return false;
    int nd = x->ndim;
    return 2 * y->shape[nd - 2] <= x->shape[nd - 2] && 2 * y->shape[nd - 1] <= x->shape[nd - 1];
}

static bool p2_fwd_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return p2_geometry(in[0], out[0], a);
}

static bool p2_bwd_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)out;
    return in[0]->contiguous && p2_geometry(in[1], in[0], a);
}
#endif

void oar_cpu_register_pool2x2(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx2-2x2", .priority = 15,
                          .fn = p2_fwd, .supports = p2_fwd_ok};
    oar_register_kernel(OAR_OP_max_pool2d, e);
    e.fn = p2_bwd;
    e.supports = p2_bwd_ok;
    oar_register_kernel(OAR_OP_max_pool2d_backward, e);
#endif
}
