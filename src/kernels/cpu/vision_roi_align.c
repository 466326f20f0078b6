/* Fast CPU kernels for roi_align and roi_align_backward (f32 input): the reference's geometry
 * (ops/roi_align_geom.h, in double), with the sample taps computed once and shared by every
 * channel, direct f32 loads, on the thread pool.
 *
 * Forward: tasks over boxes. A box's taps (every bin's samples, up to ROI_BOX_SAMPLES) are
 * computed first, then each channel's plane is read for all bins at once (torchvision's order:
 * one plane stays in cache); a larger box goes bin by bin in chunks of samples. An output
 * element is the sum of its bin's samples times 1/count. Backward: tasks over channel ranges;
 * every task walks the boxes, bins and samples in the reference's order and scatter-adds into
 * its channels' planes only, so each input gradient element takes the same additions in the
 * same order at any thread count (boxes of one image overlap, so splitting by box would race or
 * depend on the split). Every box is checked before any work, so a bad box fails the call as
 * the reference's does. The backward also has an AVX2 entry, the same code compiled for
 * AVX2/FMA (it declines below an avx2 cap): measured 1.3x faster than the generic build; the
 * forward's AVX2 build measured the same (on the bin-by-bin loop), so it has none.
 *
 * With 8 channels or more the forward is the "channels" kernel: the input copied to [N, H*W, C]
 * once per call, each sample then vector FMAs over the channels (generic, AVX2 and AVX-512
 * builds of one loop, picked by the ISA cap); Faster R-CNN's 150 boxes x 256 channels. */
#include "kernels/cpu/cpu_kernels.h"

#include <stdlib.h>
#include <string.h>

#include "ops/roi_align_geom.h"

#define ROI_CHUNK 64 /* samples whose taps are computed before the channel loop */

typedef struct roi_job {
    const float *x, *gy;
    float *y, *dx;
    const roi_geom *geo; /* one per box */
    int64_t k, c, h, w, ph, pw;
} roi_job;

#define ROI_INLINE static inline __attribute__((always_inline))

/* Taps of samples [s0, s1) of bin (py, px) of a box (samples numbered row by row); returns how
 * many lie inside (outside samples are dropped; they read 0). */
ROI_INLINE int chunk_taps(const roi_job *j, const roi_geom *r, int64_t py, int64_t px, int64_t s0, int64_t s1,
                          int64_t *at, float *wt) {
    int m = 0;
    for (int64_t s = s0; s < s1; s++) {
        int64_t iy = s / r->gw, ix = s % r->gw;
        double sy = roi_sample_at(r->y0, r->bin_h, py, iy, r->gh);
        double sx = roi_sample_at(r->x0, r->bin_w, px, ix, r->gw);
        int64_t a[4];
        double wd[4];
        roi_sample_taps(sy, sx, j->h, j->w, a, wd);
        if (a[0] < 0) continue;
        for (int t = 0; t < 4; t++) at[m * 4 + t] = a[t], wt[m * 4 + t] = (float)wd[t];
        m++;
    }
    return m;
}

/* One box whose samples' taps fit the buffers: the taps of every bin first, then channel by
 * channel (one plane at a time stays in cache) each bin's sum over its samples. */
ROI_INLINE void fwd_box_whole(const roi_job *j, const roi_geom *r, int64_t k, int64_t *at, float *wt, int *cnt) {
    int64_t hw = j->h * j->w, bins = j->ph * j->pw, ns = r->gh * r->gw, m = 0;
    float inv = 1.0f / (float)(ns > 0 ? ns : 1);
    for (int64_t py = 0; py < j->ph; py++)
        for (int64_t px = 0; px < j->pw; px++) {
            int c = chunk_taps(j, r, py, px, 0, ns, at + m * 4, wt + m * 4);
            cnt[py * j->pw + px] = c;
            m += c;
        }
    const float *img = j->x + r->batch * j->c * hw;
    for (int64_t ch = 0; ch < j->c; ch++) {
        const float *p = img + ch * hw;
        float *y = j->y + (k * j->c + ch) * bins;
        const int64_t *a = at;
        const float *w = wt;
        for (int64_t bin = 0; bin < bins; bin++) {
            float s = 0;
            for (int q = 0; q < cnt[bin]; q++, a += 4, w += 4)
                s += w[0] * p[a[0]] + w[1] * p[a[1]] + w[2] * p[a[2]] + w[3] * p[a[3]];
            y[bin] = s * inv;
        }
    }
}

/* A box with more samples than the buffers hold: bin by bin, the samples in chunks, every
 * channel of a bin before the next (the sums gather in the output). */
ROI_INLINE void fwd_box_chunked(const roi_job *j, const roi_geom *r, int64_t k, int64_t *at, float *wt) {
    int64_t hw = j->h * j->w, bins = j->ph * j->pw, ns = r->gh * r->gw;
    float inv = 1.0f / (float)(ns > 0 ? ns : 1);
    const float *img = j->x + r->batch * j->c * hw;
    for (int64_t py = 0; py < j->ph; py++)
        for (int64_t px = 0; px < j->pw; px++) {
            float *y = j->y + k * j->c * bins + py * j->pw + px;
            for (int64_t ch = 0; ch < j->c; ch++) y[ch * bins] = 0;
            for (int64_t s0 = 0; s0 < ns; s0 += ROI_CHUNK) {
                int m = chunk_taps(j, r, py, px, s0, s0 + ROI_CHUNK < ns ? s0 + ROI_CHUNK : ns, at, wt);
                for (int64_t ch = 0; ch < j->c; ch++) {
                    const float *p = img + ch * hw;
                    float s = 0;
                    for (int q = 0; q < m; q++) {
                        const int64_t *a = at + q * 4;
                        const float *w = wt + q * 4;
                        s += w[0] * p[a[0]] + w[1] * p[a[1]] + w[2] * p[a[2]] + w[3] * p[a[3]];
                    }
                    y[ch * bins] += s;
                }
            }
            for (int64_t ch = 0; ch < j->c; ch++) y[ch * bins] *= inv;
        }
}

#define ROI_BOX_SAMPLES 4096 /* a box's samples whose taps are kept for all its channels */

ROI_INLINE void fwd_boxes(const roi_job *j, int64_t k0, int64_t k1) {
    int64_t bins = j->ph * j->pw;
    int64_t *at = malloc(ROI_BOX_SAMPLES * 4 * sizeof(int64_t));
    float *wt = malloc(ROI_BOX_SAMPLES * 4 * sizeof(float));
    int *cnt = malloc((size_t)bins * sizeof(int));
    int64_t at_s[ROI_CHUNK * 4];
    float wt_s[ROI_CHUNK * 4];
    for (int64_t k = k0; k < k1; k++) {
        const roi_geom *r = &j->geo[k];
        if (at && wt && cnt && bins * r->gh * r->gw <= ROI_BOX_SAMPLES) fwd_box_whole(j, r, k, at, wt, cnt);
        else fwd_box_chunked(j, r, k, at_s, wt_s); /* also when the buffers could not be had */
    }
    free(at), free(wt), free(cnt);
}

ROI_INLINE void bwd_channels(const roi_job *j, int64_t c0, int64_t c1) {
    int64_t at[ROI_CHUNK * 4];
    float wt[ROI_CHUNK * 4];
    int64_t hw = j->h * j->w, bins = j->ph * j->pw;
    for (int64_t k = 0; k < j->k; k++) {
        const roi_geom *r = &j->geo[k];
        int64_t ns = r->gh * r->gw;
        float inv = 1.0f / (float)(ns > 0 ? ns : 1);
        float *img = j->dx + r->batch * j->c * hw;
        for (int64_t py = 0; py < j->ph; py++)
            for (int64_t px = 0; px < j->pw; px++) {
                const float *g = j->gy + k * j->c * bins + py * j->pw + px;
                for (int64_t s0 = 0; s0 < ns; s0 += ROI_CHUNK) {
                    int m = chunk_taps(j, r, py, px, s0, s0 + ROI_CHUNK < ns ? s0 + ROI_CHUNK : ns, at, wt);
                    for (int64_t ch = c0; ch < c1; ch++) {
                        float *p = img + ch * hw, gv = g[ch * bins] * inv;
                        for (int q = 0; q < m; q++)
                            for (int t = 0; t < 4; t++) p[at[q * 4 + t]] += wt[q * 4 + t] * gv;
                    }
                }
            }
    }
}

/* Channels-last forward, for many channels: the input transposed once to [N, H*W, C], so a tap
 * reads C contiguous floats and every sample is a few vector FMAs over the channels (the planes
 * walk gathers one float per tap and channel). acc holds one bin's C sums; the sample order per
 * element is the whole-box walk's. */
ROI_INLINE void fwd_channels(const roi_job *j, const float *xt, int64_t k0, int64_t k1) {
    int64_t c = j->c, hw = j->h * j->w, bins = j->ph * j->pw;
    float *acc = malloc((size_t)c * sizeof(float));
    int64_t at[ROI_CHUNK * 4];
    float wt[ROI_CHUNK * 4];
    for (int64_t k = k0; k < k1 && acc; k++) {
        const roi_geom *r = &j->geo[k];
        int64_t ns = r->gh * r->gw;
        float inv = 1.0f / (float)(ns > 0 ? ns : 1);
        const float *img = xt + r->batch * hw * c;
        float *y = j->y + k * c * bins;
        for (int64_t py = 0; py < j->ph; py++)
            for (int64_t px = 0; px < j->pw; px++) {
                memset(acc, 0, (size_t)c * sizeof(float));
                for (int64_t s0 = 0; s0 < ns; s0 += ROI_CHUNK) {
                    int m = chunk_taps(j, r, py, px, s0, s0 + ROI_CHUNK < ns ? s0 + ROI_CHUNK : ns, at, wt);
                    for (int q = 0; q < m; q++) {
                        const float *restrict p0 = img + at[q * 4] * c, *restrict p1 = img + at[q * 4 + 1] * c;
                        const float *restrict p2 = img + at[q * 4 + 2] * c, *restrict p3 = img + at[q * 4 + 3] * c;
                        float w0 = wt[q * 4], w1 = wt[q * 4 + 1], w2 = wt[q * 4 + 2], w3 = wt[q * 4 + 3];
                        float *restrict a = acc;
                        for (int64_t ch = 0; ch < c; ch++) a[ch] += w0 * p0[ch] + w1 * p1[ch] + w2 * p2[ch] + w3 * p3[ch];
                    }
                }
                float *yb = y + py * j->pw + px;
                for (int64_t ch = 0; ch < c; ch++) yb[ch * bins] = acc[ch] * inv;
            }
    }
    free(acc);
}

#define AVX2_FN __attribute__((target("avx2,fma")))
#define AVX512_FN __attribute__((target("avx512f,avx2,fma")))
#define ROI_INSTANCES(name)                                                                            \
    static void name##_gen(void *ctx, int64_t b, int64_t e) { name(ctx, b, e); }                       \
    AVX2_FN static void name##_avx2(void *ctx, int64_t b, int64_t e) { name(ctx, b, e); }
static void fwd_boxes_gen(void *ctx, int64_t b, int64_t e) { fwd_boxes(ctx, b, e); }
ROI_INSTANCES(bwd_channels)

typedef struct roi_cjob {
    roi_job j;
    const float *xt;
} roi_cjob;
static void fwd_channels_gen(void *ctx, int64_t b, int64_t e) { fwd_channels(&((roi_cjob *)ctx)->j, ((roi_cjob *)ctx)->xt, b, e); }
AVX2_FN static void fwd_channels_avx2(void *ctx, int64_t b, int64_t e) {
    fwd_channels(&((roi_cjob *)ctx)->j, ((roi_cjob *)ctx)->xt, b, e);
}
AVX512_FN static void fwd_channels_avx512(void *ctx, int64_t b, int64_t e) {
    fwd_channels(&((roi_cjob *)ctx)->j, ((roi_cjob *)ctx)->xt, b, e);
}

/* Every box's geometry, checked, into a fresh array (NULL with the error set). */
static roi_geom *geoms_of(const char *op, const oar_tensor *boxes, int64_t n, const oar_attr *a) {
    int64_t k = boxes->shape[0];
    roi_geom *g = malloc((size_t)(k ? k : 1) * sizeof *g);
    if (!g) {
        oar_error(OAR_ERR_OOM, "%s: no memory for %lld boxes", op, (long long)k);
        return NULL;
    }
    for (int64_t i = 0; i < k; i++)
        if (roi_geom_of(op, boxes, i, n, a, &g[i]) != OAR_OK) {
            free(g);
            return NULL;
        }
    return g;
}

static oar_status roi_fast(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0], *boxes = in[1];
    roi_geom *g = geoms_of("roi_align", boxes, x->shape[0], a);
    if (!g) return oar_last_status();
    roi_job j = {.x = (const float *)oar_tensor_ptr(x), .y = (float *)oar_tensor_ptr(out[0]), .geo = g, .k = boxes->shape[0],
                 .c = x->shape[1], .h = x->shape[2], .w = x->shape[3], .ph = a[0].ints[0], .pw = a[0].ints[1]};
    oar_range_fn fn = fwd_boxes_gen;
    if (j.k > 0 && j.c > 0) {
        if (ctx->nthreads > 1 && j.k > 1 && j.k * j.c * j.ph * j.pw >= 4096) oar_parallel_for(j.k, 1, fn, &j);
        else fn(&j, 0, j.k);
    }
    free(g);
    return OAR_OK;
}

/* The channels-last forward: x transposed to [N, H*W, C] once, then tasks over boxes. */
static oar_status roi_channels(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0], *boxes = in[1];
    int64_t n = x->shape[0], c = x->shape[1], hw = x->shape[2] * x->shape[3];
    float *xt = malloc((size_t)(n * hw * c > 0 ? n * hw * c : 1) * sizeof(float));
    if (!xt) return oar_error(OAR_ERR_OOM, "roi_align: no memory for a channels-last copy of the input");
    roi_geom *g = geoms_of("roi_align", boxes, n, a);
    if (!g) {
        free(xt);
        return oar_last_status();
    }
    const float *xp = (const float *)oar_tensor_ptr(x);
    for (int64_t b = 0; b < n; b++) /* blocks of 16 positions: reads of 16 floats per plane */
        for (int64_t p0 = 0; p0 < hw; p0 += 16)
            for (int64_t ch = 0; ch < c; ch++)
                for (int64_t p = p0; p < p0 + 16 && p < hw; p++) xt[(b * hw + p) * c + ch] = xp[(b * c + ch) * hw + p];
    roi_cjob cj = {.j = {.y = (float *)oar_tensor_ptr(out[0]), .geo = g, .k = boxes->shape[0], .c = c,
                         .h = x->shape[2], .w = x->shape[3], .ph = a[0].ints[0], .pw = a[0].ints[1]},
                   .xt = xt};
    oar_range_fn fn = oar_cpu_has_avx512() ? fwd_channels_avx512 : oar_cpu_has_avx2() ? fwd_channels_avx2 : fwd_channels_gen;
    if (cj.j.k > 0 && c > 0) {
        if (ctx->nthreads > 1 && cj.j.k > 1 && cj.j.k * c * cj.j.ph * cj.j.pw >= 4096) oar_parallel_for(cj.j.k, 1, fn, &cj);
        else fn(&cj, 0, cj.j.k);
    }
    free(g);
    free(xt);
    return OAR_OK;
}

static oar_status roib_fast(bool avx2, const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out,
                            const oar_attr *a) {
    const oar_tensor *gy = in[0], *boxes = in[1];
    oar_tensor *dx = out[0];
    roi_geom *g = geoms_of("roi_align_backward", boxes, dx->shape[0], a + 1);
    if (!g) return oar_last_status();
    roi_job j = {.gy = (const float *)oar_tensor_ptr(gy), .dx = (float *)oar_tensor_ptr(dx), .geo = g, .k = boxes->shape[0],
                 .c = dx->shape[1], .h = dx->shape[2], .w = dx->shape[3], .ph = a[1].ints[0], .pw = a[1].ints[1]};
    memset(j.dx, 0, (size_t)dx->numel * sizeof(float));
    oar_range_fn fn = avx2 ? bwd_channels_avx2 : bwd_channels_gen;
    if (j.k > 0 && j.c > 0) {
        int64_t nt = ctx->nthreads > 1 ? ctx->nthreads : 1;
        /* one channel range per thread: the taps are recomputed once per range */
        if (nt > 1 && j.c > 1 && j.k * j.c * j.ph * j.pw >= 4096) oar_parallel_for(j.c, (j.c + nt - 1) / nt, fn, &j);
        else fn(&j, 0, j.c);
    }
    free(g);
    return OAR_OK;
}

static oar_status roi_generic(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)n_in, (void)n_out;
    return roi_fast(ctx, in, out, a);
}
static oar_status roi_channels_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out;
    return roi_channels(ctx, in, out, a);
}
/* The channels-last walk pays a copy of the input; it wins from about a vector of channels. */
static bool many_channels(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out, (void)a;
    return in[0]->shape[1] >= 8;
}
static oar_status roib_generic(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_in, (void)n_out;
    return roib_fast(false, ctx, in, out, a);
}
static oar_status roib_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)n_in, (void)n_out;
    return roib_fast(true, ctx, in, out, a);
}

static bool has_avx2(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in, (void)n_in, (void)out, (void)n_out, (void)a;
    return oar_cpu_has_avx2();
}

void oar_cpu_register_roi_align(void) {
    uint32_t f32 = OAR_DTYPE_BIT(OAR_F32);
    oar_register_kernel(OAR_OP_roi_align, (oar_kernel_entry){.device = OAR_CPU, .dtypes = f32, .impl = "bins",
                                                             .priority = 10, .fn = roi_generic});
    oar_register_kernel(OAR_OP_roi_align, (oar_kernel_entry){.device = OAR_CPU, .dtypes = f32, .impl = "channels",
                                                             .priority = 20, .fn = roi_channels_kernel,
                                                             .supports = many_channels});
    oar_register_kernel(OAR_OP_roi_align_backward, (oar_kernel_entry){.device = OAR_CPU, .dtypes = f32,
                                                                      .impl = "bins", .priority = 10,
                                                                      .fn = roib_generic});
    oar_register_kernel(OAR_OP_roi_align_backward, (oar_kernel_entry){.device = OAR_CPU, .dtypes = f32,
                                                                      .impl = "avx2", .priority = 20,
                                                                      .fn = roib_avx2, .supports = has_avx2});
}
