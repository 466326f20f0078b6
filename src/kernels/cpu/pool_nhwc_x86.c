/* max_pool2d_nhwc and avg_pool2d_nhwc (below) on x86 (f32; max pooling of u8/i8 codes further down): the channels, contiguous in NHWC, are the vector lanes (16 with
 * AVX-512, 8 with AVX2; the last block masked), so every window tap is one vector load. Max
 * pooling takes one max per tap (vmaxps(v, best) is "v > best ? v : best": the reference's
 * strict choice, the first of equal values kept) and ORs an unordered-compare mask beside it;
 * a vector whose window held a NaN (rare) is recomputed by the reference's rule, the last NaN
 * winning, so the result has the reference's bits. Full 16-channel blocks use plain loads, only
 * the last partial block a masked one: on Zen 5 masked loads that miss the cache made
 * squeezenet1_1's first pooling at batch 32 three times slower (22 ms of CPU, now 7.5, with
 * the max replacing a dependent compare-and-blend per tap). A column whose window lies inside the
 * input's columns takes its row's tap offsets, computed once a row (pn_row_taps), shifted by its
 * first column; only the padded edges find their taps one column at a time (squeezenet1_1's
 * five poolings at batch 1: 134 -> 98 us, onnxruntime's 78). Rows of output
 * (image, oy) are split over the threads. Registered above the reference; each path declines
 * when the ISA cap (OAR_CPU_ISA) is below it, so the sweep at avx2 and generic runs the AVX2
 * kernel and the reference. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/pool_nhwc.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

#define PN_AVX2 __attribute__((target("avx2,fma")))
#define PN_AVX512 __attribute__((target("avx512f,avx2,fma")))

typedef struct pn_job {
    const float *x;
    float *y;
    oar_pool_nhwc_geom g;
} pn_job;

/* The valid taps of output column ox in row oy: their offsets (in floats) into x's image. */
static int pn_taps(const oar_pool_nhwc_geom *g, int64_t oy, int64_t ox, int64_t *off) {
    int n = 0;
    for (int64_t ky = 0; ky < g->k[0]; ky++) {
        int64_t iy = oy * g->s[0] - g->p[0] + ky * g->d[0];
        if (iy < 0 || iy >= g->h) continue;
        for (int64_t kx = 0; kx < g->k[1]; kx++) {
            int64_t ix = ox * g->s[1] - g->p[1] + kx * g->d[1];
            if (ix >= 0 && ix < g->w) off[n++] = (iy * g->w + ix) * g->c;
        }
    }
    return n;
}

#define PN_MAX_TAPS 1024 /* larger windows go to the reference */

/* Output row oy's taps for the output columns whose window lies inside the input's columns
 * (all but the padded edges): offsets relative to the window's first column, so such a
 * column's taps are ix0 * c + rel[t], computed once a row rather than once a column. Returns
 * their count (the rows in range times the kernel's width). */
static int pn_row_taps(const oar_pool_nhwc_geom *g, int64_t oy, int64_t *rel) {
    int n = 0;
    for (int64_t ky = 0; ky < g->k[0]; ky++) {
        int64_t iy = oy * g->s[0] - g->p[0] + ky * g->d[0];
        if (iy < 0 || iy >= g->h) continue;
        for (int64_t kx = 0; kx < g->k[1]; kx++) rel[n++] = (iy * g->w + kx * g->d[1]) * g->c;
    }
    return n;
}

/* Whether output column ox's window lies inside the input's columns; *ix0 its first column. */
static bool pn_inner_col(const oar_pool_nhwc_geom *g, int64_t ox, int64_t *ix0) {
    *ix0 = ox * g->s[1] - g->p[1];
    return *ix0 >= 0 && *ix0 + (g->k[1] - 1) * g->d[1] < g->w;
}

/* Output column ox's taps: its row's (rel, shifted by *base, the window's first column) when the
 * window lies inside the input's columns, else its own, found into edge (*base 0). Returns their count. */
static int pn_col_taps(const oar_pool_nhwc_geom *g, int64_t oy, int64_t ox, const int64_t *rel, int nrel,
                       int64_t *edge, const int64_t **off, int64_t *base) {
    int64_t ix0;
    if (pn_inner_col(g, ox, &ix0)) {
        *off = rel, *base = ix0 * g->c;
        return nrel;
    }
    *off = edge, *base = 0;
    return pn_taps(g, oy, ox, edge);
}

/* The reference's rule for one vector's lanes (a later tap wins when greater or NaN), for a
 * window that held a NaN. */
static void pn_exact(const float *img, const int64_t *off, int nt, int64_t c, int lanes, float *yp) {
    for (int l = 0; l < lanes; l++) {
        float best = -INFINITY;
        for (int t = 0; t < nt; t++) {
            float v = img[off[t] + c + l];
            if (v > best || isnan(v)) best = v;
        }
        yp[c + l] = best;
    }
}

static PN_AVX512 void pn_rows_512(void *ctx, int64_t b, int64_t e) {
    const pn_job *j = ctx;
    const oar_pool_nhwc_geom *g = &j->g;
    int64_t edge[PN_MAX_TAPS], rel[PN_MAX_TAPS];
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->oh, oy = r % g->oh;
        const float *imgn = j->x + n * g->h * g->w * g->c;
        float *yrow = j->y + r * g->ow * g->c;
        int nrel = pn_row_taps(g, oy, rel);
        for (int64_t ox = 0; ox < g->ow; ox++) {
            const int64_t *off;
            int64_t base;
            int nt = pn_col_taps(g, oy, ox, rel, nrel, edge, &off, &base);
            const float *img = imgn + base; /* taps at img + off[t] */
            float *yp = yrow + ox * g->c;
            int64_t c = 0;
            for (; c + 16 <= g->c; c += 16) { /* plain loads: masked ones that miss the cache ran 3x slower on Zen 5 */
                __m512 best = _mm512_set1_ps(-INFINITY);
                __mmask16 nan = 0;
                for (int t = 0; t < nt; t++) {
                    __m512 v = _mm512_loadu_ps(img + off[t] + c);
                    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    best = _mm512_max_ps(v, best);
                }
                if (OAR_UNLIKELY(nan)) pn_exact(img, off, nt, c, 16, yp);
                else _mm512_storeu_ps(yp + c, best);
            }
            if (c < g->c) { /* the last, partial block */
                int lanes = (int)(g->c - c);
                __mmask16 m = (__mmask16)((1u << lanes) - 1);
                __m512 best = _mm512_set1_ps(-INFINITY);
                __mmask16 nan = 0;
                for (int t = 0; t < nt; t++) {
                    __m512 v = _mm512_maskz_loadu_ps(m, img + off[t] + c);
                    nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
                    best = _mm512_max_ps(v, best);
                }
                if (OAR_UNLIKELY(nan)) pn_exact(img, off, nt, c, lanes, yp);
                else _mm512_mask_storeu_ps(yp + c, m, best);
            }
        }
    }
}

static PN_AVX2 void pn_rows_avx2(void *ctx, int64_t b, int64_t e) {
    const pn_job *j = ctx;
    const oar_pool_nhwc_geom *g = &j->g;
    int64_t edge[PN_MAX_TAPS], rel[PN_MAX_TAPS];
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->oh, oy = r % g->oh;
        const float *imgn = j->x + n * g->h * g->w * g->c;
        float *yrow = j->y + r * g->ow * g->c;
        int nrel = pn_row_taps(g, oy, rel);
        for (int64_t ox = 0; ox < g->ow; ox++) {
            const int64_t *off;
            int64_t base;
            int nt = pn_col_taps(g, oy, ox, rel, nrel, edge, &off, &base);
            const float *img = imgn + base; /* taps at img + off[t] */
            float *yp = yrow + ox * g->c;
            int64_t c = 0;
            for (; c + 8 <= g->c; c += 8) {
                __m256 best = _mm256_set1_ps(-INFINITY), nan = _mm256_setzero_ps();
                for (int t = 0; t < nt; t++) {
                    __m256 v = _mm256_loadu_ps(img + off[t] + c);
                    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                    best = _mm256_max_ps(v, best);
                }
                if (OAR_UNLIKELY(_mm256_movemask_ps(nan))) pn_exact(img, off, nt, c, 8, yp);
                else _mm256_storeu_ps(yp + c, best);
            }
            if (c < g->c) pn_exact(img, off, nt, c, (int)(g->c - c), yp); /* the scalar tail */
        }
    }
}

static oar_status pn_run(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, oar_range_fn fn) {
    pn_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0])};
    oar_status st = oar_pool_nhwc_read(in[0], a, &j.g);
    if (st != OAR_OK) return st;
    int64_t rows = j.g.n * j.g.oh, per_row = j.g.ow * j.g.c * j.g.k[0] * j.g.k[1];
    if (rows > 0) oar_parallel_for(rows, 1 + 32768 / (per_row + 1), fn, &j);
    return OAR_OK;
}

static oar_status pn_fwd_512(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return pn_run(in, out, a, pn_rows_512);
}

static oar_status pn_fwd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return pn_run(in, out, a, pn_rows_avx2);
}

/* max_pool2d_nhwc on u8/i8 codes (the quant_nhwc pass's int8 poolings): 32 channels a vector,
 * vpmaxub / vpmaxsb per tap (exact, so the reference's bits), the last partial block by scalars.
 * Before it these ran the reference loop: 7.4 ms of torchvision's quantized resnet18's 12 ms. */
typedef struct pn8_job {
    const uint8_t *x;
    uint8_t *y;
    oar_pool_nhwc_geom g;
    bool is_signed;
} pn8_job;

static PN_AVX2 void pn8_rows_avx2(void *ctx, int64_t b, int64_t e) {
    const pn8_job *j = ctx;
    const oar_pool_nhwc_geom *g = &j->g;
    int64_t edge[PN_MAX_TAPS], rel[PN_MAX_TAPS];
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->oh, oy = r % g->oh;
        const uint8_t *imgn = j->x + n * g->h * g->w * g->c;
        uint8_t *yrow = j->y + r * g->ow * g->c;
        int nrel = pn_row_taps(g, oy, rel);
        for (int64_t ox = 0; ox < g->ow; ox++) {
            const int64_t *off;
            int64_t base;
            int nt = pn_col_taps(g, oy, ox, rel, nrel, edge, &off, &base);
            const uint8_t *img = imgn + base;
            uint8_t *yp = yrow + ox * g->c;
            int64_t c = 0;
            for (; c + 32 <= g->c; c += 32) {
                __m256i best = _mm256_loadu_si256((const __m256i *)(img + off[0] + c));
                for (int t = 1; t < nt; t++) {
                    __m256i v = _mm256_loadu_si256((const __m256i *)(img + off[t] + c));
                    best = j->is_signed ? _mm256_max_epi8(best, v) : _mm256_max_epu8(best, v);
                }
                _mm256_storeu_si256((__m256i *)(yp + c), best);
            }
            for (; c < g->c; c++) { /* the tail */
                int best = j->is_signed ? (int)(int8_t)img[off[0] + c] : img[off[0] + c];
                for (int t = 1; t < nt; t++) {
                    int v = j->is_signed ? (int)(int8_t)img[off[t] + c] : img[off[t] + c];
                    if (v > best) best = v;
                }
                yp[c] = (uint8_t)best;
            }
        }
    }
}

static oar_status pn8_fwd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pn8_job j = {.x = (const uint8_t *)oar_tensor_ptr(in[0]), .y = (uint8_t *)oar_tensor_ptr(out[0]),
                 .is_signed = in[0]->dtype == OAR_I8};
    oar_status st = oar_pool_nhwc_read(in[0], a, &j.g);
    if (st != OAR_OK) return st;
    int64_t rows = j.g.n * j.g.oh, per_row = j.g.ow * j.g.c * j.g.k[0] * j.g.k[1];
    if (rows > 0) oar_parallel_for(rows, 1 + 131072 / (per_row + 1), pn8_rows_avx2, &j);
    return OAR_OK;
}

/* avg_pool2d_nhwc: per output position, the window and divisor of the reference, then each
 * channel's sum in double lanes over the window's rows then columns (the reference's order),
 * divided in double and rounded to f32 once: the reference's bits. */
typedef struct pa_job {
    const float *x;
    float *y;
    oar_avg_nhwc_geom g;
} pa_job;

static PN_AVX512 void pa_rows_512(void *ctx, int64_t b, int64_t e) {
    const pa_job *j = ctx;
    const oar_avg_nhwc_geom *g = &j->g;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->oh, oy = r % g->oh;
        const float *img = j->x + n * g->h * g->w * g->c;
        float *yrow = j->y + r * g->ow * g->c;
        for (int64_t ox = 0; ox < g->ow; ox++) {
            int64_t y0, y1, x0, x1;
            double div = 1;
            bool any = oar_avg_nhwc_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
            __m512d vdiv = _mm512_set1_pd(div);
            float *yp = yrow + ox * g->c;
            for (int64_t c = 0; c < g->c; c += 16) {
                __mmask16 m = g->c - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (g->c - c)) - 1);
                __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
                for (int64_t iy = y0; any && iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        const float *src = img + (iy * g->w + ix) * g->c + c;
                        __m512 v = m == 0xffff ? _mm512_loadu_ps(src) : _mm512_maskz_loadu_ps(m, src); /* see max */
                        lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                        hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
                    }
                if (any) lo = _mm512_div_pd(lo, vdiv), hi = _mm512_div_pd(hi, vdiv);
                __m512 out = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),
                                                                 _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
                _mm512_mask_storeu_ps(yp + c, m, out);
            }
        }
    }
}

static PN_AVX2 void pa_rows_avx2(void *ctx, int64_t b, int64_t e) {
    const pa_job *j = ctx;
    const oar_avg_nhwc_geom *g = &j->g;
    for (int64_t r = b; r < e; r++) {
        int64_t n = r / g->oh, oy = r % g->oh;
        const float *img = j->x + n * g->h * g->w * g->c;
        float *yrow = j->y + r * g->ow * g->c;
        for (int64_t ox = 0; ox < g->ow; ox++) {
            int64_t y0, y1, x0, x1;
            double div = 1;
            bool any = oar_avg_nhwc_window(g, oy, ox, &y0, &y1, &x0, &x1, &div);
            __m256d vdiv = _mm256_set1_pd(div);
            float *yp = yrow + ox * g->c;
            int64_t c = 0;
            for (; c + 8 <= g->c; c += 8) {
                __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
                for (int64_t iy = y0; any && iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        __m256 v = _mm256_loadu_ps(img + (iy * g->w + ix) * g->c + c);
                        lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                        hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
                    }
                if (any) lo = _mm256_div_pd(lo, vdiv), hi = _mm256_div_pd(hi, vdiv);
                _mm256_storeu_ps(yp + c, _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)));
            }
            for (; c < g->c; c++) { /* the reference's arithmetic, one channel at a time */
                double acc = 0;
                for (int64_t iy = y0; any && iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) acc += img[(iy * g->w + ix) * g->c + c];
                yp[c] = (float)(any ? acc / div : acc);
            }
        }
    }
}

static oar_status pa_run(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, oar_range_fn fn) {
    pa_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .y = (float *)oar_tensor_ptr(out[0])};
    oar_status st = oar_avg_nhwc_read(in[0], a, &j.g);
    if (st != OAR_OK) return st;
    int64_t rows = j.g.n * j.g.oh, per_row = j.g.ow * j.g.c * j.g.k[0] * j.g.k[1];
    if (rows > 0) oar_parallel_for(rows, 1 + 32768 / (per_row + 1), fn, &j);
    return OAR_OK;
}

static oar_status pa_fwd_512(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return pa_run(in, out, a, pa_rows_512);
}

static oar_status pa_fwd_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return pa_run(in, out, a, pa_rows_avx2);
}

static bool pa_ok_512(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    return oar_cpu_has_avx512() && in[0]->contiguous && in[0]->ndim == 4;
}

static bool pa_ok_avx2(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    return oar_cpu_has_avx2() && in[0]->contiguous && in[0]->ndim == 4;
}

static bool pn_ok(oar_tensor *const *in, const oar_attr *a) {
    return in[0]->contiguous && in[0]->ndim == 4 && a[0].n == 2 && a[0].ints[0] * a[0].ints[1] <= PN_MAX_TAPS;
}

static bool pn_ok_512(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return oar_cpu_has_avx512() && pn_ok(in, a);
}

static bool pn_ok_avx2(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return oar_cpu_has_avx2() && pn_ok(in, a);
}

/* every window must hold a tap (padding below the kernel, no ceil_mode window past the input);
 * others go to the reference */
static bool pn8_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return oar_cpu_has_avx2() && pn_ok(in, a) && a[2].ints[0] < a[0].ints[0] && a[2].ints[1] < a[0].ints[1] &&
           !a[4].i;
}
#endif

void oar_cpu_register_pool_nhwc(void) {
#if defined(__x86_64__) && defined(__GNUC__)
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "avx512", .priority = 20,
                          .fn = pn_fwd_512, .supports = pn_ok_512};
    oar_register_kernel(OAR_OP_max_pool2d_nhwc, e);
    e.impl = "avx2", e.priority = 10, e.fn = pn_fwd_avx2, e.supports = pn_ok_avx2;
    oar_register_kernel(OAR_OP_max_pool2d_nhwc, e);
    e.dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8), e.impl = "avx2-int8", e.fn = pn8_fwd_avx2;
    e.supports = pn8_ok;
    oar_register_kernel(OAR_OP_max_pool2d_nhwc, e);
    e.dtypes = OAR_DTYPE_BIT(OAR_F32);
    e.impl = "avx512", e.priority = 20, e.fn = pa_fwd_512, e.supports = pa_ok_512;
    oar_register_kernel(OAR_OP_avg_pool2d_nhwc, e);
    e.impl = "avx2", e.priority = 10, e.fn = pa_fwd_avx2, e.supports = pa_ok_avx2;
    oar_register_kernel(OAR_OP_avg_pool2d_nhwc, e);
#endif
}
