/* grid_sample(input [N,C,H,W], grid [N,Ho,Wo,2]) -> [N,C,Ho,Wo], or in 5-d (input [N,C,D,H,W], grid
 * [N,Do,Ho,Wo,3]) -> [N,C,Do,Ho,Wo]: torch.nn.functional.grid_sample. grid holds (x, y[, z]) in
 * [-1, 1] (x over W); mode bilinear (trilinear in 5-d), nearest (round half to even) or bicubic
 * (4-d only); padding_mode zeros (taps outside read 0), border (coordinates clamped) or
 * reflection (coordinates reflected at the borders, then clamped); align_corners: -1 and 1 are
 * the centres of the corner pixels (true) or their outer edges (false). The geometry is in
 * grid_sample_taps.h. grid_sample_backward gives the gradients of input and grid (nearest: zero
 * for the grid, as torch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/grid_sample_taps.h"

/* The checks both ops share: input [N,C,H,W] with grid [N,Ho,Wo,2], or input [N,C,D,H,W] with
 * grid [N,Do,Ho,Wo,3], of one float dtype. */
static oar_status gs_check(const char *op, const oar_tensor *x, const oar_tensor *grid, const oar_attr *a) {
    gs_opts o;
    oar_status st = gs_opts_read(op, a, &o);
    if (st == OAR_OK) st = oar_check_float(op, x, "input");
    if (st != OAR_OK) return st;
    if (x->ndim != 4 && x->ndim != 5)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a 4-d input [N, C, H, W] or a 5-d input [N, C, D, H, W], got "
                         "%d-d", op, x->ndim);
    if (o.mode == GS_BICUBIC && x->ndim != 4)
        return oar_error(OAR_ERR_SHAPE, "%s: bicubic interpolation needs a 4-d input [N, C, H, W], got %d-d; use "
                         "mode 'bilinear' or 'nearest' for volumes", op, x->ndim);
    int sd = x->ndim - 2;
    if (grid->ndim != x->ndim || grid->shape[x->ndim - 1] != sd)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a grid [N, %s, %d] for a %d-d input, got %d-d with last dim %lld",
                         op, sd == 2 ? "H_out, W_out" : "D_out, H_out, W_out", sd, x->ndim, grid->ndim,
                         grid->ndim ? (long long)grid->shape[grid->ndim - 1] : 0LL);
    if (grid->dtype != x->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected grid of input's dtype %s, got %s", op, oar_dtype_name(x->dtype),
                         oar_dtype_name(grid->dtype));
    if (grid->shape[0] != x->shape[0])
        return oar_error(OAR_ERR_SHAPE, "%s: expected grid and input with the same batch, got %lld and %lld", op,
                         (long long)grid->shape[0], (long long)x->shape[0]);
    for (int d = 2; d < x->ndim; d++)
        if (x->shape[d] == 0)
            return oar_error(OAR_ERR_SHAPE, "%s: expected an input with non-empty spatial dims, got a size 0 at dim %d",
                             op, d);
    return OAR_OK;
}

static oar_status gs_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = gs_check("grid_sample", in[0], in[1], a);
    if (st != OAR_OK) return st;
    int nd = in[0]->ndim;
    out[0] = (oar_meta){.dtype = in[0]->dtype, .ndim = nd, .shape = {in[0]->shape[0], in[0]->shape[1]}};
    for (int d = 2; d < nd; d++) out[0].shape[d] = in[1]->shape[d - 1];
    *n_out = 1;
    return OAR_OK;
}

/* The geometry of input x; *points: grid points per batch element; *vol: input elements per channel. */
static gs_geom gs_geom_of(const oar_tensor *x, const oar_tensor *grid, int64_t *points, int64_t *vol) {
    gs_geom g = {.dims = x->ndim - 2};
    *points = *vol = 1;
    for (int d = 0; d < g.dims; d++) {
        g.size[d] = x->shape[x->ndim - 1 - d];
        *vol *= x->shape[2 + d];
        *points *= grid->shape[1 + d];
    }
    return g;
}

static oar_status gs_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *x = in[0], *grid = in[1];
    gs_opts o;
    gs_opts_read("grid_sample", a, &o);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size, n = x->shape[0], c = x->shape[1], np, vol;
    gs_geom geo = gs_geom_of(x, grid, &np, &vol);
    const char *xp = oar_tensor_ptr(x), *gp = oar_tensor_ptr(grid);
    char *yp = oar_tensor_ptr(out[0]);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < np; p++) {
            const char *g = gp + ((b * np + p) * geo.dims) * es;
            double gv[3];
            for (int d = 0; d < geo.dims; d++) gv[d] = tr->load(g + d * es);
            gs_taps t;
            gs_taps_of(gv, &geo, &o, &t);
            for (int64_t ch = 0; ch < c; ch++) {
                const char *plane = xp + ((b * c + ch) * vol) * es;
                double acc = 0;
                for (int k = 0; k < t.n; k++)
                    if (t.at[k] >= 0) acc += t.w[k] * tr->load(plane + t.at[k] * es);
                tr->store(yp + ((b * c + ch) * np + p) * es, acc);
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
    int nd = x->ndim;
    bool ok = gy->dtype == x->dtype && gy->ndim == nd && gy->shape[0] == x->shape[0] && gy->shape[1] == x->shape[1];
    for (int d = 2; ok && d < nd; d++) ok = gy->shape[d] == grid->shape[d - 1];
    if (!ok)
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad_out of grid_sample's output shape [%lld, %lld, %lld, %lld%s] "
                         "and dtype %s", op, (long long)x->shape[0], (long long)x->shape[1],
                         (long long)grid->shape[1], (long long)grid->shape[2], nd == 5 ? ", ..." : "",
                         oar_dtype_name(x->dtype));
    out[0] = (oar_meta){.dtype = x->dtype, .ndim = nd};
    out[1] = (oar_meta){.dtype = x->dtype, .ndim = nd};
    memcpy(out[0].shape, x->shape, (size_t)nd * sizeof(int64_t));
    memcpy(out[1].shape, grid->shape, (size_t)nd * sizeof(int64_t));
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
    int64_t es = (int64_t)tr->size, n = x->shape[0], c = x->shape[1], np, vol;
    gs_geom geo = gs_geom_of(x, grid, &np, &vol);
    double *dx = calloc((size_t)(x->numel ? x->numel : 1), sizeof(double));
    if (!dx) return oar_error(OAR_ERR_OOM, "grid_sample_backward: no memory for %lld gradients", (long long)x->numel);
    const char *xp = oar_tensor_ptr(x), *gp = oar_tensor_ptr(grid), *gyp = oar_tensor_ptr(gy);
    char *dgp = oar_tensor_ptr(out[1]);
    for (int64_t b = 0; b < n; b++)
        for (int64_t p = 0; p < np; p++) {
            const char *g = gp + ((b * np + p) * geo.dims) * es;
            double gv[3];
            for (int d = 0; d < geo.dims; d++) gv[d] = tr->load(g + d * es);
            gs_taps t;
            gs_taps_of(gv, &geo, &o, &t);
            double gc[3] = {0, 0, 0}; /* d loss / d pixel coordinates */
            for (int64_t ch = 0; ch < c; ch++) {
                double go = tr->load(gyp + ((b * c + ch) * np + p) * es);
                int64_t base = (b * c + ch) * vol;
                for (int k = 0; k < t.n; k++) {
                    if (t.at[k] < 0) continue;
                    dx[base + t.at[k]] += t.w[k] * go;
                    double v = tr->load(xp + (base + t.at[k]) * es);
                    for (int d = 0; d < geo.dims; d++) gc[d] += t.dw[d][k] * v * go;
                }
            }
            char *dg = dgp + ((b * np + p) * geo.dims) * es;
            for (int d = 0; d < geo.dims; d++) tr->store(dg + d * es, gc[d] * t.dc[d]);
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
