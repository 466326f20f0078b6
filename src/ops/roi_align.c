/* roi_align(input [N,C,H,W], boxes [K,5]) -> [K,C,ph,pw]: torchvision.ops.roi_align. Each box row
 * is (batch index, x1, y1, x2, y2) in input coordinates times 1/spatial_scale. Each of the ph x pw
 * bins averages a grid of bilinear samples: sampling_ratio per side, or (-1, adaptive)
 * ceil(box side / bins) per side. aligned shifts the box by half a pixel (the exact mapping);
 * without it a box is at least one pixel per side, as torchvision. Samples more than a pixel
 * outside the input read 0; others are clamped to the border. boxes get no gradient (as
 * torchvision); roi_align_backward spreads grad_out back over the input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/roi_align_geom.h"

static oar_status roi_check(const char *op, const oar_tensor *x, const oar_tensor *boxes, const oar_attr *a) {
    oar_status st = oar_check_float(op, x, "input");
    if (st == OAR_OK) st = oar_check_float(op, boxes, "boxes");
    if (st != OAR_OK) return st;
    if (x->ndim != 4)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a 4-d input [N, C, H, W], got %d-d", op, x->ndim);
    if (boxes->ndim != 2 || boxes->shape[1] != 5)
        return oar_error(OAR_ERR_SHAPE, "%s: expected boxes [K, 5] (batch index, x1, y1, x2, y2), got %d-d with "
                         "last dim %lld; pass a list of [L, 4] tensors through oar.ops.roi_align", op, boxes->ndim,
                         boxes->ndim ? (long long)boxes->shape[boxes->ndim - 1] : 0LL);
    if (a[0].n != 2 || a[0].ints[0] <= 0 || a[0].ints[1] <= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected output_size of two positive ints, got %d value(s)%s", op,
                         a[0].n, a[0].n == 2 ? " not both positive" : "");
    if (!(a[1].f > 0) || !isfinite(a[1].f))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a positive spatial_scale, got %g", op, a[1].f);
    if (a[2].i < -1 || a[2].i == 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected sampling_ratio > 0, or -1 (adaptive), got %lld", op,
                         (long long)a[2].i);
    return OAR_OK;
}

static oar_status roi_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = roi_check("roi_align", in[0], in[1], a);
    if (st != OAR_OK) return st;
    out[0] = (oar_meta){.dtype = in[0]->dtype, .ndim = 4,
                        .shape = {in[1]->shape[0], in[0]->shape[1], a[0].ints[0], a[0].ints[1]}};
    *n_out = 1;
    return OAR_OK;
}

/* Walks every sample of every bin of box k: forward sums the input into y (a K x C x ph x pw
 * buffer of doubles); backward spreads gy into dx. */
static void roi_walk(bool forward, const roi_geom *r, int64_t k, const oar_tensor *x, const oar_attr *a,
                     double *y, const oar_tensor *gy, double *dx) {
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size, c = x->shape[1], h = x->shape[2], w = x->shape[3];
    int64_t ph = a[0].ints[0], pw = a[0].ints[1];
    double count = (double)(r->gh * r->gw > 0 ? r->gh * r->gw : 1);
    const char *xp = oar_tensor_ptr(x), *gyp = gy ? oar_tensor_ptr(gy) : NULL;
    for (int64_t py = 0; py < ph; py++)
        for (int64_t px = 0; px < pw; px++)
            for (int64_t iy = 0; iy < r->gh; iy++) {
                double sy = roi_sample_at(r->y0, r->bin_h, py, iy, r->gh);
                for (int64_t ix = 0; ix < r->gw; ix++) {
                    double sx = roi_sample_at(r->x0, r->bin_w, px, ix, r->gw);
                    int64_t at[4];
                    double wt[4];
                    roi_sample_taps(sy, sx, h, w, at, wt);
                    if (at[0] < 0) continue;
                    for (int64_t ch = 0; ch < c; ch++) {
                        int64_t plane = (r->batch * c + ch) * h * w, o = ((k * c + ch) * ph + py) * pw + px;
                        if (forward) {
                            double s = 0;
                            for (int t = 0; t < 4; t++) s += wt[t] * tr->load(xp + (plane + at[t]) * es);
                            y[o] += s / count;
                        } else {
                            double g = tr->load(gyp + o * es) / count;
                            for (int t = 0; t < 4; t++) dx[plane + at[t]] += wt[t] * g;
                        }
                    }
                }
            }
}

static oar_status roi_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *x = in[0], *boxes = in[1];
    oar_tensor *y = out[0];
    double *acc = calloc((size_t)(y->numel ? y->numel : 1), sizeof(double));
    if (!acc) return oar_error(OAR_ERR_OOM, "roi_align: no memory for %lld outputs", (long long)y->numel);
    oar_status st = OAR_OK;
    for (int64_t k = 0; k < boxes->shape[0] && st == OAR_OK; k++) {
        roi_geom r;
        st = roi_geom_of("roi_align", boxes, k, x->shape[0], a, &r);
        if (st == OAR_OK) roi_walk(true, &r, k, x, a, acc, NULL, NULL);
    }
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    char *yp = oar_tensor_ptr(y);
    for (int64_t i = 0; st == OAR_OK && i < y->numel; i++) tr->store(yp + i * (int64_t)tr->size, acc[i]);
    free(acc);
    return st;
}

static oar_status roi_grad(oar_grad_ctx *g) {
    if (!g->needs[0]) return OAR_OK; /* boxes: no gradient, as torchvision */
    const oar_tensor *x = g->in[0];
    oar_attr a[5] = {oar_attr_ints(x->shape, 4), g->attrs[0], g->attrs[1], g->attrs[2], g->attrs[3]};
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_roi_align_backward, in, 2, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

#define ROI_ATTRS {"output_size", OAR_ATTR_INTS}, {"spatial_scale", OAR_ATTR_FLOAT, "1"}, \
                  {"sampling_ratio", OAR_ATTR_INT, "-1"}, {"aligned", OAR_ATTR_INT, "false"}

const oar_op_def oar_opdef_roi_align = {
    .name = "roi_align", .n_inputs = 2, .n_outputs = 1, .n_attrs = 4, .attrs = {ROI_ATTRS},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = roi_infer, .reference = roi_ref, .grad = roi_grad,
};

/* ---- roi_align_backward(grad_out [K,C,ph,pw], boxes; input_shape, ...) -> grad_input */
static oar_status roib_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "roi_align_backward";
    const oar_tensor *gy = in[0], *boxes = in[1];
    if (a[0].n != 4 || a[0].ints[0] < 0 || a[0].ints[1] < 0 || a[0].ints[2] <= 0 || a[0].ints[3] <= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape [N, C, H, W] with H, W > 0, got %d value(s)",
                         op, a[0].n);
    oar_status st = oar_check_float(op, gy, "grad_out");
    if (st != OAR_OK) return st;
    /* the forward's checks, on a stand-in of the input's shape */
    oar_tensor shape = {.dtype = gy->dtype, .ndim = 4};
    memcpy(shape.shape, a[0].ints, 4 * sizeof(int64_t));
    st = roi_check(op, &shape, boxes, a + 1);
    if (st != OAR_OK) return st;
    if (gy->ndim != 4 || gy->shape[0] != boxes->shape[0] || gy->shape[1] != a[0].ints[1] ||
        gy->shape[2] != a[1].ints[0] || gy->shape[3] != a[1].ints[1])
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad_out [%lld, %lld, %lld, %lld] (boxes, channels, "
                         "output_size), got %d-d", op, (long long)boxes->shape[0], (long long)a[0].ints[1],
                         (long long)a[1].ints[0], (long long)a[1].ints[1], gy->ndim);
    out[0] = (oar_meta){.dtype = gy->dtype, .ndim = 4};
    memcpy(out[0].shape, a[0].ints, 4 * sizeof(int64_t));
    *n_out = 1;
    return OAR_OK;
}

static oar_status roib_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *gy = in[0], *boxes = in[1];
    oar_tensor *dx = out[0];
    double *acc = calloc((size_t)(dx->numel ? dx->numel : 1), sizeof(double));
    if (!acc) return oar_error(OAR_ERR_OOM, "roi_align_backward: no memory for %lld gradients", (long long)dx->numel);
    oar_status st = OAR_OK;
    for (int64_t k = 0; k < boxes->shape[0] && st == OAR_OK; k++) {
        roi_geom r;
        st = roi_geom_of("roi_align_backward", boxes, k, dx->shape[0], a + 1, &r);
        if (st == OAR_OK) roi_walk(false, &r, k, dx, a + 1, NULL, gy, acc); /* dx gives the shape */
    }
    const oar_dtype_traits *tr = &oar_dtypes[dx->dtype];
    char *p = oar_tensor_ptr(dx);
    for (int64_t i = 0; st == OAR_OK && i < dx->numel; i++) tr->store(p + i * (int64_t)tr->size, acc[i]);
    free(acc);
    return st;
}

/* Linear in grad_out: its gradient is roi_align of the incoming gradient. */
static oar_status roib_grad(oar_grad_ctx *g) {
    if (!g->needs[0] || !g->gout[0]) return OAR_OK;
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_roi_align, in, 2, g->attrs + 1);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_roi_align_backward = {
    .name = "roi_align_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, ROI_ATTRS},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = roib_infer, .reference = roib_ref, .grad = roib_grad,
};

oar_tensor *oar_roi_align(oar_tensor *input, oar_tensor *boxes, int64_t out_h, int64_t out_w, double spatial_scale,
                          int64_t sampling_ratio, bool aligned) {
    int64_t size[2] = {out_h, out_w};
    oar_attr a[4] = {oar_attr_ints(size, 2), oar_attr_float(spatial_scale), oar_attr_int(sampling_ratio),
                     oar_attr_int(aligned)};
    oar_tensor *in[2] = {input, boxes};
    return oar_op_call1(OAR_OP_roi_align, in, 2, a);
}
