/* Learnable-scale fake quantization (LSQ, Esser et al. 2020), with torch's semantics
 * (torch._fake_quantize_learnable_per_tensor_affine):
 *
 *   fake_quant_lsq(x, scale, zero_point; quant_min, quant_max, grad_factor)
 *     z = clamp(round(zero_point), qmin, qmax); q = clamp(round(x / scale) + z, qmin, qmax)
 *     y = (q - z) * scale                      (the same float arithmetic as fake_quant)
 *   fake_quant_lsq_grad(grad, x, scale, zero_point; ...) -> (dx, dscale, dzero_point)
 *     inside the range (round(x / scale) + z in [qmin, qmax]):
 *       dx = grad, dscale += grad * (y - x) / scale * grad_factor, dzero_point += 0
 *     clamped:
 *       dx = 0, dscale += grad * (qmin - z or qmax - z) * grad_factor,
 *       dzero_point += -grad * scale * grad_factor
 *
 * scale and zero_point are float 0-d (or one-element) tensors, both learnable; per tensor only.
 * d/dscale is LSQ's estimator: round() is passed straight through, so inside the range the
 * derivative of (round(x/s) + z - z) * s is taken as round(x/s) - x/s; outside it is the true
 * derivative. grad_factor is LSQ's gradient scale (1 / sqrt(numel * qmax) in the paper). The
 * backward is an op of its own (not differentiated again). Sums are in double. */
#include "ops/op.h"
#include "ops/quant.h"

#include <math.h>
#include <string.h>

#define LSQ_ATTRS                                                                                                      \
    .n_attrs = 3, .attrs = {{"quant_min", OAR_ATTR_INT}, {"quant_max", OAR_ATTR_INT}, {"grad_factor", OAR_ATTR_FLOAT}}

static oar_status check_lsq(const char *op, oar_tensor *const *in, const oar_attr *a) {
    const oar_tensor *x = in[0], *s = in[1], *z = in[2];
    if (!oar_dtypes[x->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "%s: expected a floating x, got %s", op, oar_dtype_name(x->dtype));
    if (s->numel != 1 || z->numel != 1 || !oar_dtypes[s->dtype].is_float || !oar_dtypes[z->dtype].is_float)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a one-element floating scale and zero point (per tensor), "
                                              "got %s[%lld] and %s[%lld]", op, oar_dtype_name(s->dtype),
                         (long long)s->numel, oar_dtype_name(z->dtype), (long long)z->numel);
    if (a[0].i >= a[1].i || a[0].i < -(1ll << 24) || a[1].i > (1ll << 24))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected quant_min < quant_max within +-2^24, got %lld and %lld", op,
                         (long long)a[0].i, (long long)a[1].i);
    return OAR_OK;
}

/* The scale, its inverse and the rounded zero point; a scale that is not positive and finite is
 * an error (a learned scale went wrong: lower the learning rate or the grad factor). */
static oar_status lsq_params(const char *op, const oar_tensor *s, const oar_tensor *z, const oar_attr *a, double *sc,
                             int32_t *zp) {
    const oar_dtype_traits *ts = &oar_dtypes[s->dtype], *tz = &oar_dtypes[z->dtype];
    *sc = ts->load(oar_tensor_ptr(s)); /* used in x's precision: rounded to float for f32 x */
    if (!(*sc > 0) || isinf(*sc) || (float)*sc == 0)
        return oar_error(OAR_ERR_NUMERIC, "%s: expected a positive finite scale, got %g; a learned scale left its "
                                          "range: lower the learning rate or grad_factor", op, (double)*sc);
    double zv = tz->load(oar_tensor_ptr(z));
    if (isnan(zv)) return oar_error(OAR_ERR_NUMERIC, "%s: expected a finite zero point, got NaN", op);
    zv = nearbyint(zv);
    *zp = (int32_t)(zv < (double)a[0].i ? (double)a[0].i : zv > (double)a[1].i ? (double)a[1].i : zv);
    return OAR_OK;
}

static oar_status lsq_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = check_lsq("fake_quant_lsq", in, a);
    if (st != OAR_OK) return st;
    return oar_infer_same_as_input0(in, n_in, a, out, n_out);
}

/* One element: the rounded value before clamping (r) and the fake-quantized value (v), in x's
 * precision (f32: x times 1/scale in float, as fake_quant; f64: in double). */
static inline void lsq_point(bool f64, double xv, double sc, int32_t zp, const oar_attr *a, double *r, double *v) {
    int32_t qmin = (int32_t)a[0].i, qmax = (int32_t)a[1].i;
    if (f64) {
        double inv = 1.0 / sc;
        *r = nearbyint(xv * inv) + zp;
        *v = (double)(oar_quantize_f64(xv, inv, zp, qmin, qmax) - zp) * sc;
    } else {
        float s32 = (float)sc, inv = 1.0f / s32;
        *r = (double)nearbyintf((float)xv * inv) + zp;
        *v = (float)(oar_quantize_f32((float)xv, inv, zp, qmin, qmax) - zp) * s32;
    }
}

static oar_status lsq_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *x = in[0];
    double sc;
    int32_t zp;
    oar_status st = lsq_params("fake_quant_lsq", in[1], in[2], a, &sc, &zp);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    const char *xp = oar_tensor_ptr(x);
    char *yp = oar_tensor_ptr(out[0]);
    for (int64_t i = 0; i < x->numel; i++) {
        double r, v;
        lsq_point(x->dtype == OAR_F64, tx->load(xp + i * (int64_t)tx->size), sc, zp, a, &r, &v);
        tx->store(yp + i * (int64_t)tx->size, v);
    }
    return OAR_OK;
}

static oar_status lsq_grad_rule(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    oar_tensor *d[3];
    oar_status st = oar_fake_quant_lsq_grad(g->gout[0], g->in[0], g->in[1], g->in[2], g->attrs[0].i, g->attrs[1].i,
                                            g->attrs[2].f, &d[0], &d[1], &d[2]);
    if (st != OAR_OK) return st;
    for (int i = 0; i < 3; i++) g->gin[i] = g->needs[i] ? d[i] : NULL;
    return OAR_OK;
}

const oar_op_def oar_opdef_fake_quant_lsq = {
    .name = "fake_quant_lsq", .n_inputs = 3, .n_outputs = 1, LSQ_ATTRS,
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = lsq_infer, .reference = lsq_ref, .grad = lsq_grad_rule,
};

static oar_status lsq_grad_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = check_lsq("fake_quant_lsq_grad", in + 1, a);
    if (st != OAR_OK) return st;
    const oar_tensor *g = in[0], *x = in[1];
    if (g->dtype != x->dtype || g->ndim != x->ndim || memcmp(g->shape, x->shape, sizeof(int64_t) * (size_t)g->ndim))
        return oar_error(OAR_ERR_SHAPE, "fake_quant_lsq_grad: expected grad and x of one shape and dtype, got %s and "
                                        "%s of %d and %d dims", oar_dtype_name(g->dtype), oar_dtype_name(x->dtype),
                         g->ndim, x->ndim);
    for (int i = 0; i < 3; i++) oar_meta_from(&out[i], in[1 + i]);
    *n_out = 3;
    return OAR_OK;
}

static oar_status lsq_grad_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out;
    const oar_tensor *gr = in[0], *x = in[1];
    double sc;
    int32_t zp;
    oar_status st = lsq_params("fake_quant_lsq_grad", in[2], in[3], a, &sc, &zp);
    if (st != OAR_OK) return st;
    int32_t qmin = (int32_t)a[0].i, qmax = (int32_t)a[1].i;
    double gf = a[2].f, ds = 0, dz = 0;
    bool f64 = x->dtype == OAR_F64;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    const char *xp = oar_tensor_ptr(x), *gp = oar_tensor_ptr(gr);
    char *dxp = oar_tensor_ptr(out[0]);
    for (int64_t i = 0; i < x->numel; i++) {
        int64_t off = i * (int64_t)tx->size;
        double xv = tx->load(xp + off), gv = tx->load(gp + off), r, v;
        lsq_point(f64, xv, sc, zp, a, &r, &v);
        bool in_range = r >= qmin && r <= qmax;
        tx->store(dxp + off, in_range ? gv : 0.0);
        if (in_range) /* (fake_quant(x) - x) / scale, in x's precision, as torch */
            ds += gv * (f64 ? (v - xv) / sc : (double)(((float)v - (float)xv) * (1.0f / (float)sc)));
        else ds += gv * ((r < qmin ? qmin : qmax) - zp), dz -= gv * (f64 ? sc : (double)(float)sc);
    }
    oar_dtypes[out[1]->dtype].store(oar_tensor_ptr(out[1]), ds * gf);
    oar_dtypes[out[2]->dtype].store(oar_tensor_ptr(out[2]), dz * gf);
    return OAR_OK;
}

const oar_op_def oar_opdef_fake_quant_lsq_grad = {
    .name = "fake_quant_lsq_grad", .n_inputs = 4, .n_outputs = 3, LSQ_ATTRS,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = lsq_grad_infer, .reference = lsq_grad_ref,
};

oar_tensor *oar_fake_quant_lsq(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int64_t quant_min,
                               int64_t quant_max, double grad_factor) {
    oar_tensor *in[3] = {x, scale, zero_point};
    oar_attr at[3] = {oar_attr_int(quant_min), oar_attr_int(quant_max), oar_attr_float(grad_factor)};
    return oar_op_call1(OAR_OP_fake_quant_lsq, in, 3, at);
}

oar_status oar_fake_quant_lsq_grad(oar_tensor *grad, oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point,
                                   int64_t quant_min, int64_t quant_max, double grad_factor, oar_tensor **dx,
                                   oar_tensor **dscale, oar_tensor **dzero_point) {
    oar_tensor *in[4] = {grad, x, scale, zero_point}, *out[3];
    oar_attr at[3] = {oar_attr_int(quant_min), oar_attr_int(quant_max), oar_attr_float(grad_factor)};
    int n = 3;
    oar_status st = oar_op_call(OAR_OP_fake_quant_lsq_grad, in, 4, at, out, &n);
    if (st != OAR_OK) return st;
    *dx = oar_track(out[0]); /* like every op's result: owned by the current scope, if any */
    *dscale = oar_track(out[1]);
    *dzero_point = oar_track(out[2]);
    return OAR_OK;
}
