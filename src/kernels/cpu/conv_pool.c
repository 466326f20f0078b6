/* f32 pooling kernels. Forward kernels sweep whole output rows per window tap, so the inner
 * loop is a strided load and a max/add the compiler vectorizes; backward kernels scatter per
 * output. All thread over planes (N * C), each plane written by one thread only. Window
 * rules (torch's) are those of ops/pool.c, which the sweep checks these against. */
#include "kernels/cpu/conv_pool.h"
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <string.h>

typedef struct pgeom {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool include_pad;
} pgeom;

/* x's shape gives the planes and input size, y's the output size; k, s, p from the attrs
 * (inference has checked them), d may be NULL (1). */
static void pgeom_make(pgeom *g, const oar_tensor *x, const oar_tensor *y, const oar_attr *k, const oar_attr *s,
                       const oar_attr *p, const oar_attr *d) {
    int nd = x->ndim;
    g->h = x->shape[nd - 2], g->w = x->shape[nd - 1];
    g->oh = y->shape[nd - 2], g->ow = y->shape[nd - 1];
    g->planes = x->numel / (g->h * g->w); /* inference guarantees h, w >= 1 */
    g->kh = k->ints[0], g->kw = k->ints[1], g->sh = s->ints[0], g->sw = s->ints[1];
    g->ph = p->ints[0], g->pw = p->ints[1];
    g->dh = d ? d->ints[0] : 1, g->dw = d ? d->ints[1] : 1;
    g->include_pad = false;
}

/* Output columns ox whose input column ox * sw + off lies in [0, w): [*lo, *hi). */
static void valid_cols(const pgeom *g, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t h = g->w - 1 - off < 0 ? 0 : (g->w - 1 - off) / g->sw + 1;
    if (h > g->ow) h = g->ow;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

typedef struct pool_job {
    pgeom g;
    const float *x, *gy; /* input (forward) or x of max pooling's backward; incoming gradient */
    float *out;
} pool_job;

/* Plane counts per task so each task touches at least ~16K elements. */
static int64_t plane_grain(const pgeom *g) {
    int64_t per = g->h * g->w + g->oh * g->ow;
    return per >= 16384 ? 1 : 16384 / (per ? per : 1);
}

/* ---- max pooling: the first maximum wins, a NaN beats everything (torch's rule) */
static void max_fwd_planes(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const pgeom *g = &j->g;
    for (int64_t p = begin; p < end; p++) {
        const float *x = j->x + p * g->h * g->w;
        float *y = j->out + p * g->oh * g->ow;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            float *restrict yr = y + oy * g->ow;
            for (int64_t ox = 0; ox < g->ow; ox++) yr[ox] = -INFINITY;
            for (int64_t ky = 0; ky < g->kh; ky++) {
                int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                if (iy < 0 || iy >= g->h) continue;
                const float *restrict xr = x + iy * g->w;
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t off = kx * g->dw - g->pw, lo, hi;
                    valid_cols(g, off, &lo, &hi);
                    for (int64_t ox = lo; ox < hi; ox++) {
                        float v = xr[ox * g->sw + off];
                        yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];
                    }
                }
            }
        }
    }
}

/* Index in the plane of output (oy, ox)'s window maximum; -1 for an empty window. */
static int64_t argmax_at(const pgeom *g, const float *x, int64_t oy, int64_t ox) {
    int64_t best_i = -1;
    float best = -INFINITY;
    for (int64_t ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->ph + ky * g->dh;
        if (iy < 0 || iy >= g->h) continue;
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pw + kx * g->dw;
            if (ix < 0 || ix >= g->w) continue;
            float v = x[iy * g->w + ix];
            if (best_i < 0 || v > best || v != v) {
                best = v;
                best_i = iy * g->w + ix;
            }
        }
    }
    return best_i;
}

static void max_bwd_planes(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const pgeom *g = &j->g;
    for (int64_t p = begin; p < end; p++) {
        const float *x = j->x + p * g->h * g->w, *gy = j->gy + p * g->oh * g->ow;
        float *dx = j->out + p * g->h * g->w;
        memset(dx, 0, sizeof(float) * (size_t)(g->h * g->w));
        for (int64_t oy = 0; oy < g->oh; oy++)
            for (int64_t ox = 0; ox < g->ow; ox++) {
                int64_t i = argmax_at(g, x, oy, ox);
                if (i >= 0) dx[i] += gy[oy * g->ow + ox];
            }
    }
}

/* ---- average pooling */
/* Rows [*y0, *y1) of output row oy's windows and the padded height torch divides by. */
static int64_t avg_rows(const pgeom *g, int64_t oy, int64_t *y0, int64_t *y1) {
    int64_t hs = oy * g->sh - g->ph, he = hs + g->kh < g->h + g->ph ? hs + g->kh : g->h + g->ph;
    *y0 = hs > 0 ? hs : 0;
    *y1 = he < g->h ? he : g->h;
    return he - hs;
}

/* The divisor of output (oy, ox), 0 when its window holds no input element. */
static float avg_divisor(const pgeom *g, int64_t oy, int64_t ox) {
    int64_t y0, y1, pad_h = avg_rows(g, oy, &y0, &y1);
    int64_t ws = ox * g->sw - g->pw, we = ws + g->kw < g->w + g->pw ? ws + g->kw : g->w + g->pw;
    int64_t x0 = ws > 0 ? ws : 0, x1 = we < g->w ? we : g->w;
    if (y0 >= y1 || x0 >= x1) return 0;
    return (float)(g->include_pad ? pad_h * (we - ws) : (y1 - y0) * (x1 - x0));
}

static void avg_fwd_planes(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const pgeom *g = &j->g;
    for (int64_t p = begin; p < end; p++) {
        const float *x = j->x + p * g->h * g->w;
        float *y = j->out + p * g->oh * g->ow;
        for (int64_t oy = 0; oy < g->oh; oy++) {
            float *restrict yr = y + oy * g->ow;
            int64_t y0, y1;
            avg_rows(g, oy, &y0, &y1);
            for (int64_t ox = 0; ox < g->ow; ox++) yr[ox] = 0;
            for (int64_t iy = y0; iy < y1; iy++) {
                const float *restrict xr = x + iy * g->w;
                for (int64_t kx = 0; kx < g->kw; kx++) {
                    int64_t off = kx - g->pw, lo, hi;
                    valid_cols(g, off, &lo, &hi);
                    for (int64_t ox = lo; ox < hi; ox++) yr[ox] += xr[ox * g->sw + off];
                }
            }
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float div = avg_divisor(g, oy, ox);
                yr[ox] = div > 0 ? yr[ox] / div : 0.0f;
            }
        }
    }
}

static void avg_bwd_planes(void *ctx, int64_t begin, int64_t end) {
    const pool_job *j = ctx;
    const pgeom *g = &j->g;
    for (int64_t p = begin; p < end; p++) {
        const float *gy = j->gy + p * g->oh * g->ow;
        float *dx = j->out + p * g->h * g->w;
        memset(dx, 0, sizeof(float) * (size_t)(g->h * g->w));
        for (int64_t oy = 0; oy < g->oh; oy++) {
            int64_t y0, y1;
            avg_rows(g, oy, &y0, &y1);
            for (int64_t ox = 0; ox < g->ow; ox++) {
                float div = avg_divisor(g, oy, ox);
                if (div == 0) continue;
                float v = gy[oy * g->ow + ox] / div;
                int64_t ws = ox * g->sw - g->pw, x0 = ws > 0 ? ws : 0;
                int64_t x1 = ws + g->kw < g->w ? ws + g->kw : g->w;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) dx[iy * g->w + ix] += v;
            }
        }
    }
}

static oar_status run_planes(pool_job *j, oar_range_fn fn) {
    oar_parallel_for(j->g.planes, plane_grain(&j->g), fn, j);
    return OAR_OK;
}

/* ---- registered kernels; attrs as in ops/pool.c */
static oar_status max_fwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pool_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .out = (float *)oar_tensor_ptr(out[0])};
    pgeom_make(&j.g, in[0], out[0], &a[0], &a[1], &a[2], &a[3]);
    return run_planes(&j, max_fwd_planes);
}

static oar_status max_bwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pool_job j = {.gy = (const float *)oar_tensor_ptr(in[0]), .x = (const float *)oar_tensor_ptr(in[1]),
                  .out = (float *)oar_tensor_ptr(out[0])};
    pgeom_make(&j.g, in[1], in[0], &a[0], &a[1], &a[2], &a[3]);
    return run_planes(&j, max_bwd_planes);
}

static oar_status avg_fwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pool_job j = {.x = (const float *)oar_tensor_ptr(in[0]), .out = (float *)oar_tensor_ptr(out[0])};
    pgeom_make(&j.g, in[0], out[0], &a[0], &a[1], &a[2], NULL);
    j.g.include_pad = a[4].i != 0;
    return run_planes(&j, avg_fwd_planes);
}

static oar_status avg_bwd(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pool_job j = {.gy = (const float *)oar_tensor_ptr(in[0]), .out = (float *)oar_tensor_ptr(out[0])};
    pgeom_make(&j.g, out[0], in[0], &a[1], &a[2], &a[3], NULL);
    j.g.include_pad = a[5].i != 0;
    return run_planes(&j, avg_bwd_planes);
}

void oar_cpu_conv_register_pool(void) {
    struct { oar_op_id op; oar_kernel_fn fn; } k[] = {
        {OAR_OP_max_pool2d, max_fwd}, {OAR_OP_max_pool2d_backward, max_bwd},
        {OAR_OP_avg_pool2d, avg_fwd}, {OAR_OP_avg_pool2d_backward, avg_bwd},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                        .impl = "c-vector", .priority = 10, .fn = k[i].fn});
}
