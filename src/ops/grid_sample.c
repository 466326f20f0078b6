/* grid_sample(input [N,C,H,W], grid [N,Ho,Wo,2]) -> [N,C,Ho,Wo]: torch.nn.functional.grid_sample
 * in 2-d. grid holds (x, y) in [-1, 1] (x over W); mode bilinear or nearest (round half to even);
 * padding_mode zeros (taps outside read 0), border (coordinates clamped) or reflection
 * (coordinates reflected at the borders, then clamped); align_corners: -1 and 1 are the centres
 * of the corner pixels (true) or their outer edges (false). grid_sample_backward gives the
 * gradients of input and grid (nearest: zero for the grid, as torch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"

enum { GS_BILINEAR, GS_NEAREST };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_opts {
    int mode, pad;
    bool align;
} gs_opts;

static oar_status gs_opts_read(const char *op, const oar_attr *a, gs_opts *o) {
    if (strcmp(a[0].s, "bilinear") == 0) o->mode = GS_BILINEAR;
    else if (strcmp(a[0].s, "nearest") == 0) o->mode = GS_NEAREST;
    else
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected mode 'bilinear' or 'nearest', got '%s' (bicubic is not "
                         "offered)", op, a[0].s);
    if (strcmp(a[1].s, "zeros") == 0) o->pad = GS_ZEROS;
    else if (strcmp(a[1].s, "border") == 0) o->pad = GS_BORDER;
    else if (strcmp(a[1].s, "reflection") == 0) o->pad = GS_REFLECTION;
    else
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected padding_mode 'zeros', 'border' or 'reflection', got '%s'",
                         op, a[1].s);
    o->align = a[2].i != 0;
    return OAR_OK;
}

/* The checks both ops share: input [N,C,H,W] and grid [N,Ho,Wo,2] of one float dtype. */
static oar_status gs_check(const char *op, const oar_tensor *x, const oar_tensor *grid, const oar_attr *a) {
    gs_opts o;
    oar_status st = gs_opts_read(op, a, &o);
    if (st == OAR_OK) st = oar_check_float(op, x, "input");
    if (st != OAR_OK) return st;
    if (x->ndim != 4)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a 4-d input [N, C, H, W], got %d-d; only 2-d sampling is "
                         "offered", op, x->ndim);
    if (grid->ndim != 4 || grid->shape[3] != 2)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a grid [N, H_out, W_out, 2], got %d-d with last dim %lld", op,
                         grid->ndim, grid->ndim ? (long long)grid->shape[grid->ndim - 1] : 0LL);
    if (grid->dtype != x->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected grid of input's dtype %s, got %s", op, oar_dtype_name(x->dtype),
                         oar_dtype_name(grid->dtype));
    if (grid->shape[0] != x->shape[0])
        return oar_error(OAR_ERR_SHAPE, "%s: expected grid and input with the same batch, got %lld and %lld", op,
                         (long long)grid->shape[0], (long long)x->shape[0]);
    if (x->shape[2] == 0 || x->shape[3] == 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an input with non-empty spatial dims, got %lldx%lld", op,
                         (long long)x->shape[2], (long long)x->shape[3]);
    return OAR_OK;
}

static oar_status gs_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = gs_check("grid_sample", in[0], in[1], a);
    if (st != OAR_OK) return st;
    out[0] = (oar_meta){.dtype = in[0]->dtype, .ndim = 4,
                        .shape = {in[0]->shape[0], in[0]->shape[1], in[1]->shape[1], in[1]->shape[2]}};
    *n_out = 1;
    return OAR_OK;
}

/* torch's clamp into [0, size - 1]; *d: the derivative (0 where clamped). */
static double clip(double c, int64_t size, double *d) {
    double hi = (double)(size - 1);
    if (c <= 0) { *d = 0; return 0; }
    if (c >= hi) { *d = 0; return hi; }
    *d = 1;
    return c;
}

/* Reflects c into [lo2 / 2, hi2 / 2] (twice the bounds, so half-pixel bounds stay integers). */
static double reflect(double c, double lo2, double hi2, double *d) {
    if (lo2 == hi2) { *d = 0; return 0; }
    double lo = lo2 / 2, span = (hi2 - lo2) / 2, sign = 1;
    c -= lo;
    if (c < 0) { sign = -1; c = -c; }
    double extra = fmod(c, span), flips = floor(c / span);
    if (fmod(flips, 2) == 0) { *d = sign; return extra + lo; }
    *d = -sign;
    return span - extra + lo;
}

/* Pixel coordinate of normalized g along a dim of size; *d: d(coordinate)/dg. */
static double source(double g, int64_t size, const gs_opts *o, double *d) {
    double c, k;
    if (o->align) { k = (double)(size - 1) / 2; c = (g + 1) * k; }
    else { k = (double)size / 2; c = ((g + 1) * (double)size - 1) / 2; }
    double dc = 1;
    if (o->pad == GS_BORDER) c = clip(c, size, &dc);
    else if (o->pad == GS_REFLECTION) {
        double r;
        c = o->align ? reflect(c, 0, 2 * (double)(size - 1), &r) : reflect(c, -1, 2 * (double)size - 1, &r);
        c = clip(c, size, &dc);
        dc *= r;
    }
    *d = k * dc;
    return c;
}

/* Up to four taps of one sample: flat offsets into an H*W plane (-1: outside, reads 0), their
 * weights, and the weights' derivatives by the x and y pixel coordinates. */
typedef struct taps {
    int n;
    int64_t at[4];
    double w[4], dwx[4], dwy[4];
    double dcx, dcy; /* d(pixel coordinate)/d(grid value) */
} taps;

static int64_t tap_at(double fy, double fx, int64_t h, int64_t w) {
    if (!(fx >= 0 && fx < (double)w && fy >= 0 && fy < (double)h)) return -1; /* NaN too */
    return (int64_t)fy * w + (int64_t)fx;
}

static void taps_of(double gx, double gy, int64_t h, int64_t w, const gs_opts *o, taps *t) {
    double x = source(gx, w, o, &t->dcx), y = source(gy, h, o, &t->dcy);
    if (o->mode == GS_NEAREST) {
        t->n = 1;
        t->at[0] = tap_at(nearbyint(y), nearbyint(x), h, w);
        t->w[0] = 1;
        t->dwx[0] = t->dwy[0] = 0;
        return;
    }
    double x0 = floor(x), y0 = floor(y), tx = x - x0, ty = y - y0;
    t->n = 4;
    for (int k = 0; k < 4; k++) {
        int ex = k & 1, ey = k >> 1; /* nw, ne, sw, se */
        double wx = ex ? tx : 1 - tx, wy = ey ? ty : 1 - ty;
        t->at[k] = tap_at(y0 + ey, x0 + ex, h, w);
        t->w[k] = wx * wy;
        t->dwx[k] = (ex ? 1 : -1) * wy;
        t->dwy[k] = (ey ? 1 : -1) * wx;
    }
}

static oar_status gs_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *x = in[0], *grid = in[1];
    gs_opts o;
    gs_opts_read("grid_sample", a, &o);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size, n = x->shape[0], c = x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t oh = grid->shape[1], ow = grid->shape[2];
    const char *xp = oar_tensor_ptr(x), *gp = oar_tensor_ptr(grid);
    char *yp = oar_tensor_ptr(out[0]);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < oh * ow; p++) {
            const char *g = gp + ((b * oh * ow + p) * 2) * es;
            taps t;
            taps_of(tr->load(g), tr->load(g + es), h, w, &o, &t);
            for (int64_t ch = 0; ch < c; ch++) {
                const char *plane = xp + ((b * c + ch) * h * w) * es;
                double acc = 0;
                for (int k = 0; k < t.n; k++)
                    if (t.at[k] >= 0) acc += t.w[k] * tr->load(plane + t.at[k] * es);
                tr->store(yp + ((b * c + ch) * oh * ow + p) * es, acc);
            }
        }
    return OAR_OK;
}

static oar_status gs_grad(oar_grad_ctx *g) {
    oar_tensor *in[3] = {g->gout[0], g->in[0], g->in[1]}, *d[2];
    int n = 2;
    oar_status st = oar_op_call(OAR_OP_grid_sample_backward, in, 3, g->attrs, d, &n);
    if (st != OAR_OK) return st;
    for (int i = 0; i < 2; i++) oar_track(d[i]);
    if (g->needs[0]) g->gin[0] = d[0];
    if (g->needs[1]) g->gin[1] = d[1];
    return OAR_OK;
}

#define GS_ATTRS {"mode", OAR_ATTR_STR, "bilinear"}, {"padding_mode", OAR_ATTR_STR, "zeros"}, \
                 {"align_corners", OAR_ATTR_INT, "false"}

const oar_op_def oar_opdef_grid_sample = {
    .name = "grid_sample", .n_inputs = 2, .n_outputs = 1, .n_attrs = 3, .attrs = {GS_ATTRS},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = gs_infer, .reference = gs_ref, .grad = gs_grad,
};

/* ---- grid_sample_backward(grad_out, input, grid) -> (grad_input, grad_grid) */
static oar_status gsb_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "grid_sample_backward";
    const oar_tensor *gy = in[0], *x = in[1], *grid = in[2];
    oar_status st = gs_check(op, x, grid, a);
    if (st != OAR_OK) return st;
    if (gy->dtype != x->dtype || gy->ndim != 4 || gy->shape[0] != x->shape[0] || gy->shape[1] != x->shape[1] ||
        gy->shape[2] != grid->shape[1] || gy->shape[3] != grid->shape[2])
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad_out of grid_sample's output shape [%lld, %lld, %lld, %lld] "
                         "and dtype %s", op, (long long)x->shape[0], (long long)x->shape[1],
                         (long long)grid->shape[1], (long long)grid->shape[2], oar_dtype_name(x->dtype));
    out[0] = (oar_meta){.dtype = x->dtype, .ndim = 4};
    out[1] = (oar_meta){.dtype = x->dtype, .ndim = 4};
    memcpy(out[0].shape, x->shape, 4 * sizeof(int64_t));
    memcpy(out[1].shape, grid->shape, 4 * sizeof(int64_t));
    *n_out = 2;
    return OAR_OK;
}

static oar_status gsb_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *gy = in[0], *x = in[1], *grid = in[2];
    gs_opts o;
    gs_opts_read("grid_sample_backward", a, &o);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size, n = x->shape[0], c = x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t oh = grid->shape[1], ow = grid->shape[2];
    double *dx = calloc((size_t)(x->numel ? x->numel : 1), sizeof(double));
    if (!dx) return oar_error(OAR_ERR_OOM, "grid_sample_backward: no memory for %lld gradients", (long long)x->numel);
    const char *xp = oar_tensor_ptr(x), *gp = oar_tensor_ptr(grid), *gyp = oar_tensor_ptr(gy);
    char *dgp = oar_tensor_ptr(out[1]);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < oh * ow; p++) {
            const char *g = gp + ((b * oh * ow + p) * 2) * es;
            taps t;
            taps_of(tr->load(g), tr->load(g + es), h, w, &o, &t);
            double gx = 0, gyy = 0; /* d loss / d pixel coordinates */
            for (int64_t ch = 0; ch < c; ch++) {
                double go = tr->load(gyp + ((b * c + ch) * oh * ow + p) * es);
                int64_t base = (b * c + ch) * h * w;
                for (int k = 0; k < t.n; k++) {
                    if (t.at[k] < 0) continue;
                    dx[base + t.at[k]] += t.w[k] * go;
                    double v = tr->load(xp + (base + t.at[k]) * es);
                    gx += t.dwx[k] * v * go;
                    gyy += t.dwy[k] * v * go;
                }
            }
            char *dg = dgp + ((b * oh * ow + p) * 2) * es;
            tr->store(dg, gx * t.dcx);
            tr->store(dg + es, gyy * t.dcy);
        }
    char *dxp = oar_tensor_ptr(out[0]);
    for (int64_t i = 0; i < x->numel; i++) tr->store(dxp + i * es, dx[i]);
    free(dx);
    return OAR_OK;
}

static oar_status gsb_grad(oar_grad_ctx *g) {
    return oar_error(OAR_ERR_UNSUPPORTED, "grid_sample_backward: second-order gradients of grid_sample are not "
                     "offered; differentiate grid_sample once");
}

const oar_op_def oar_opdef_grid_sample_backward = {
    .name = "grid_sample_backward", .n_inputs = 3, .n_outputs = 2, .n_attrs = 3, .attrs = {GS_ATTRS},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES, .key_input = 1,
    .infer = gsb_infer, .reference = gsb_ref, .grad = gsb_grad,
};

oar_tensor *oar_grid_sample(oar_tensor *input, oar_tensor *grid, const char *mode, const char *padding_mode,
                            bool align_corners) {
    oar_attr a[3] = {oar_attr_str(mode ? mode : "bilinear"), oar_attr_str(padding_mode ? padding_mode : "zeros"),
                     oar_attr_int(align_corners)};
    oar_tensor *in[2] = {input, grid};
    return oar_op_call1(OAR_OP_grid_sample, in, 2, a);
}
