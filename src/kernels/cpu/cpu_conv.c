/* CPU convolution kernels (f32): im2col + GEMM for conv2d, conv1d, conv_transpose2d and
 * conv2d's two backward ops, each image and group one GEMM. Small GEMMs run one per thread
 * over parts of the batch; large ones run one at a time and thread inside the GEMM. A 1x1
 * stride-1 unpadded conv is a GEMM on the image itself (no im2col). Pooling kernels live in
 * conv_pool.c; all are registered here. */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/conv_dnnl.h"
#include "kernels/cpu/conv_gemm.h"
#include "kernels/cpu/conv_pool.h"

#include <string.h>

/* Geometry of the loop nest, as in ops/conv.c: x [n, ci, h, w], weight [co, ci / groups, kh,
 * kw], output grid [n, co, oh, ow] (possibly smaller than the full conv output). */
typedef struct cgeom {
    int64_t n, ci, h, w, co, kh, kw, oh, ow;
    int64_t sh, sw, ph, pw, dh, dw, groups;
} cgeom;

/* Inference has validated everything: only read. nd is 4, or 3 for conv1d (unit height). */
static void cgeom_make(cgeom *g, const int64_t *xs, const int64_t *ws, const int64_t *ys, int nd, const oar_attr *s,
                       const oar_attr *p, const oar_attr *d, const oar_attr *groups) {
    bool two = nd == 4;
    g->n = xs[0], g->ci = xs[1], g->h = two ? xs[2] : 1, g->w = xs[nd - 1];
    g->co = ws[0], g->kh = two ? ws[2] : 1, g->kw = ws[nd - 1];
    g->oh = two ? ys[2] : 1, g->ow = ys[nd - 1];
    g->sh = two ? s->ints[0] : 1, g->sw = s->ints[two];
    g->ph = two ? p->ints[0] : 0, g->pw = p->ints[two];
    g->dh = two ? d->ints[0] : 1, g->dw = d->ints[two];
    g->groups = groups->i;
}

/* The 1x1 case where the image itself is the im2col matrix. */
static bool is_direct(const cgeom *g) {
    return g->kh == 1 && g->kw == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 && g->oh == g->h &&
           g->ow == g->w;
}

/* Output columns ox whose input column ox * sw + off lies in [0, w): [*lo, *hi). */
static void valid_cols(const cgeom *g, int64_t off, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t h = g->w - 1 - off < 0 ? 0 : (g->w - 1 - off) / g->sw + 1;
    if (h > g->ow) h = g->ow;
    if (l > h) l = h;
    *lo = l, *hi = h;
}

/* col[(c, ky, kx)][(oy, ox)] = x[c][oy*sh - ph + ky*dh][ox*sw - pw + kx*dw], 0 outside x;
 * for nc channels of one image. */
static void im2col(const cgeom *g, const float *restrict x, int64_t nc, float *restrict col) {
    int64_t ohw = g->oh * g->ow;
    for (int64_t c = 0; c < nc; c++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                float *row = col + ((c * g->kh + ky) * g->kw + kx) * ohw;
                int64_t off = kx * g->dw - g->pw, lo, hi;
                valid_cols(g, off, &lo, &hi);
                /* rows are short (image widths): plain loops beat memcpy/memset calls */
                for (int64_t oy = 0; oy < g->oh; oy++) {
                    float *restrict r = row + oy * g->ow;
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    if (iy < 0 || iy >= g->h) {
                        for (int64_t ox = 0; ox < g->ow; ox++) r[ox] = 0;
                        continue;
                    }
                    const float *restrict xr = x + (c * g->h + iy) * g->w;
                    for (int64_t ox = 0; ox < lo; ox++) r[ox] = 0;
                    if (g->sw == 1)
                        for (int64_t ox = lo; ox < hi; ox++) r[ox] = xr[ox + off];
                    else
                        for (int64_t ox = lo; ox < hi; ox++) r[ox] = xr[ox * g->sw + off];
                    for (int64_t ox = hi; ox < g->ow; ox++) r[ox] = 0;
                }
            }
}

/* The adjoint of im2col: each column entry added back to the input element it came from. */
static void col2im(const cgeom *g, const float *restrict col, int64_t nc, float *restrict x) {
    int64_t ohw = g->oh * g->ow;
    for (int64_t c = 0; c < nc; c++)
        for (int64_t ky = 0; ky < g->kh; ky++)
            for (int64_t kx = 0; kx < g->kw; kx++) {
                const float *row = col + ((c * g->kh + ky) * g->kw + kx) * ohw;
                int64_t off = kx * g->dw - g->pw, lo, hi;
                valid_cols(g, off, &lo, &hi);
                for (int64_t oy = 0; oy < g->oh; oy++) {
                    int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                    if (iy < 0 || iy >= g->h) continue;
                    const float *r = row + oy * g->ow;
                    float *xr = x + (c * g->h + iy) * g->w;
                    for (int64_t ox = lo; ox < hi; ox++) xr[ox * g->sw + off] += r[ox];
                }
            }
}

/* Adds b[c] to each channel plane of one image. */
static void add_bias(float *restrict y, const float *restrict b, int64_t channels, int64_t plane) {
    for (int64_t c = 0; c < channels; c++)
        for (int64_t i = 0; i < plane; i++) y[c * plane + i] += b[c];
}

typedef enum { JOB_FORWARD, JOB_GRAD_INPUT, JOB_GRAD_WEIGHT } job_kind;

/* One kernel call, split into parts of the batch. x / w / y are the loop nest's operands (the
 * one the kind writes is the output); bias applies to the output's channels. */
#define GW_PARTS 4 /* batch parts of the weight gradient (each a partial sum, added in order) */

typedef struct conv_job {
    job_kind kind;
    cgeom g;
    const float *x, *w, *y, *bias;
    float *out;
    float *col;        /* parts * col_size floats of im2col scratch */
    int64_t col_size;
    float *partial;    /* grad_weight: parts - 1 extra accumulators of acc_size floats */
    int64_t acc_size;
    int64_t parts;
} conv_job;

static void forward_image(const conv_job *j, int64_t n, float *col) {
    const cgeom *g = &j->g;
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups, k = cig * g->kh * g->kw, ohw = g->oh * g->ow;
    const float *x = j->x + n * g->ci * g->h * g->w;
    float *y = j->out + n * g->co * ohw;
    for (int64_t gi = 0; gi < g->groups; gi++) {
        const float *xg = x + gi * cig * g->h * g->w, *b = xg;
        if (!is_direct(g)) {
            im2col(g, xg, cig, col);
            b = col;
        }
        oar_conv_sgemm(false, false, cog, ohw, k, j->w + gi * cog * k, k, b, ohw, 0.0f, y + gi * cog * ohw, ohw);
    }
    if (j->bias) add_bias(y, j->bias, g->co, ohw);
}

static void grad_input_image(const conv_job *j, int64_t n, float *col) {
    const cgeom *g = &j->g;
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups, k = cig * g->kh * g->kw, ohw = g->oh * g->ow;
    int64_t hw = g->h * g->w;
    const float *gy = j->y + n * g->co * ohw;
    float *dx = j->out + n * g->ci * hw;
    if (!is_direct(g)) memset(dx, 0, sizeof(float) * (size_t)(g->ci * hw));
    for (int64_t gi = 0; gi < g->groups; gi++) {
        const float *wg = j->w + gi * cog * k, *gg = gy + gi * cog * ohw;
        float *dxg = dx + gi * cig * hw;
        if (is_direct(g)) {
            oar_conv_sgemm(true, false, k, ohw, cog, wg, k, gg, ohw, 0.0f, dxg, ohw);
        } else {
            oar_conv_sgemm(true, false, k, ohw, cog, wg, k, gg, ohw, 0.0f, col, ohw);
            col2im(g, col, cig, dxg);
        }
    }
    if (j->bias) add_bias(dx, j->bias, g->ci, hw);
}

/* Adds image n's weight gradient into acc [co, ci / groups, kh, kw]. */
static void grad_weight_image(const conv_job *j, int64_t n, float *col, float *acc) {
    const cgeom *g = &j->g;
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups, k = cig * g->kh * g->kw, ohw = g->oh * g->ow;
    const float *x = j->x + n * g->ci * g->h * g->w, *gy = j->y + n * g->co * ohw;
    for (int64_t gi = 0; gi < g->groups; gi++) {
        const float *xg = x + gi * cig * g->h * g->w, *b = xg;
        if (!is_direct(g)) {
            im2col(g, xg, cig, col);
            b = col;
        }
        oar_conv_sgemm(false, true, cog, k, ohw, gy + gi * cog * ohw, ohw, b, ohw, 1.0f, acc + gi * cog * k, k);
    }
}

static void run_parts(void *ctx, int64_t begin, int64_t end) {
    const conv_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        float *col = j->col ? j->col + p * j->col_size : NULL;
        /* part 0 accumulates straight into the output, the others into their own buffers */
        float *acc = j->kind != JOB_GRAD_WEIGHT || p == 0 ? j->out : j->partial + (p - 1) * j->acc_size;
        for (int64_t n = p * j->g.n / j->parts; n < (p + 1) * j->g.n / j->parts; n++) {
            switch (j->kind) {
            case JOB_FORWARD: forward_image(j, n, col); break;
            case JOB_GRAD_INPUT: grad_input_image(j, n, col); break;
            case JOB_GRAD_WEIGHT: grad_weight_image(j, n, col, acc); break;
            }
        }
    }
}

static oar_status conv_run(const oar_kctx *ctx, conv_job *j, int64_t out_numel) {
    const cgeom *g = &j->g;
    if (out_numel == 0) return OAR_OK;
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups, k = cig * g->kh * g->kw, ohw = g->oh * g->ow;
    bool gw = j->kind == JOB_GRAD_WEIGHT;
    /* the GEMM of one image and group decides who threads: BLAS inside it, or we over images */
    bool blas_threads = j->kind == JOB_FORWARD       ? oar_conv_sgemm_threads_itself(cog, ohw, k)
                        : j->kind == JOB_GRAD_INPUT ? oar_conv_sgemm_threads_itself(k, ohw, cog)
                                                    : oar_conv_sgemm_threads_itself(cog, k, ohw);
    int64_t parts = blas_threads ? 1 : ctx->nthreads < g->n ? ctx->nthreads : g->n;
    /* the weight gradient sums the batch: in fixed parts, whatever the threads, so the sum's
     * order (and its bits) never depends on the thread count */
    if (gw) parts = g->n < GW_PARTS ? g->n : GW_PARTS;
    j->parts = parts < 1 ? 1 : parts;
    j->col_size = is_direct(g) ? 0 : k * ohw;
    j->acc_size = gw ? out_numel : 0;
    size_t col_bytes = sizeof(float) * (size_t)(j->parts * j->col_size);
    size_t acc_bytes = sizeof(float) * (size_t)((j->parts - 1) * j->acc_size);
    j->col = col_bytes ? oar_alloc(col_bytes) : NULL;
    j->partial = acc_bytes ? oar_alloc(acc_bytes) : NULL;
    if ((col_bytes && !j->col) || (acc_bytes && !j->partial)) {
        oar_free(j->col, col_bytes);
        oar_free(j->partial, acc_bytes);
        return OAR_ERR_OOM;
    }
    if (gw) {
        memset(j->out, 0, sizeof(float) * (size_t)out_numel);
        if (acc_bytes) memset(j->partial, 0, acc_bytes);
    }
    if (g->n > 0) oar_parallel_for(j->parts, 1, run_parts, j);
    for (int64_t p = 1; gw && p < j->parts; p++) {
        const float *restrict src = j->partial + (p - 1) * j->acc_size;
        for (int64_t i = 0; i < out_numel; i++) j->out[i] += src[i];
    }
    oar_free(j->col, col_bytes);
    oar_free(j->partial, acc_bytes);
    return OAR_OK;
}

static const float *fptr(const oar_tensor *t) { return t ? (const float *)oar_tensor_ptr(t) : NULL; }

/* ---- the registered kernels: each maps its op's operands onto the loop nest */
static oar_status conv2d_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)n_in; (void)n_out;
    conv_job j = {.kind = JOB_FORWARD, .x = fptr(in[0]), .w = fptr(in[1]), .bias = fptr(in[2]),
                  .out = (float *)oar_tensor_ptr(out[0])};
    cgeom_make(&j.g, in[0]->shape, in[1]->shape, out[0]->shape, 4, &a[0], &a[1], &a[2], &a[3]);
    return conv_run(ctx, &j, out[0]->numel);
}

static oar_status conv1d_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    (void)n_in; (void)n_out;
    conv_job j = {.kind = JOB_FORWARD, .x = fptr(in[0]), .w = fptr(in[1]), .bias = fptr(in[2]),
                  .out = (float *)oar_tensor_ptr(out[0])};
    cgeom_make(&j.g, in[0]->shape, in[1]->shape, out[0]->shape, 3, &a[0], &a[1], &a[2], &a[3]);
    return conv_run(ctx, &j, out[0]->numel);
}

static oar_status grad_input_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    conv_job j = {.kind = JOB_GRAD_INPUT, .y = fptr(in[0]), .w = fptr(in[1]), .out = (float *)oar_tensor_ptr(out[0])};
    cgeom_make(&j.g, out[0]->shape, in[1]->shape, in[0]->shape, 4, &a[1], &a[2], &a[3], &a[4]);
    return conv_run(ctx, &j, out[0]->numel);
}

static oar_status grad_weight_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    conv_job j = {.kind = JOB_GRAD_WEIGHT, .x = fptr(in[0]), .y = fptr(in[1]), .out = (float *)oar_tensor_ptr(out[0])};
    cgeom_make(&j.g, in[0]->shape, out[0]->shape, in[1]->shape, 4, &a[1], &a[2], &a[3], &a[4]);
    return conv_run(ctx, &j, out[0]->numel);
}

/* conv_transpose2d is grad_input with x as the grad, plus a bias on its output. */
static oar_status transpose_fast(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    conv_job j = {.kind = JOB_GRAD_INPUT, .y = fptr(in[0]), .w = fptr(in[1]), .bias = fptr(in[2]),
                  .out = (float *)oar_tensor_ptr(out[0])};
    cgeom_make(&j.g, out[0]->shape, in[1]->shape, in[0]->shape, 4, &a[0], &a[1], &a[3], &a[4]);
    return conv_run(ctx, &j, out[0]->numel);
}

void oar_cpu_register_conv(void) {
    const char *impl = "im2col"; /* its GEMMs: oar_gemm's choice with OpenBLAS, else portable */
    struct { oar_op_id op; oar_kernel_fn fn; } k[] = {
        {OAR_OP_conv2d, conv2d_fast}, {OAR_OP_conv1d, conv1d_fast}, {OAR_OP_conv2d_grad_input, grad_input_fast},
        {OAR_OP_conv2d_grad_weight, grad_weight_fast}, {OAR_OP_conv_transpose2d, transpose_fast},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        oar_register_kernel(k[i].op, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                        .impl = impl, .priority = 10, .fn = k[i].fn});
    oar_cpu_conv_register_pool();
    oar_cpu_conv_register_dnnl(); /* conv2d and its backward ops, priority 20 where oneDNN takes them */
}
