/* Quantization ops. Scales and zero points are tensor inputs (never attributes), so calibration
 * writes data and a compiled program stays reusable: a 0-d scale quantizes per tensor, a 1-d
 * one per channel along `axis`. The arithmetic is torch's (src/ops/quant.h), pinned by golden
 * values from torch 1.13 (tests/golden/gen_quant.py).
 *
 *   quantize(x, scale, zero_point; axis, dtype)        float -> u8/i8, saturating
 *   dequantize(q, scale, zero_point; axis)             u8/i8 -> f32
 *   fake_quant(x, scale, zero_point; axis, qmin, qmax) float -> float on the quantized grid;
 *       gradient straight through where the value was not clamped (fake_quant_grad)
 *   qlinear(x, x_scale, x_zp, w, w_scale, bias?, y_scale?, y_zp?, residual?; activation, dtype)
 *       int8 x·wᵀ accumulated in int32, then bias, residual add and ReLU in f32, giving f32 or
 *       requantized u8/i8. Weights are s8 and symmetric (zero point 0), per tensor or per row. */
#include "ops/quant.h"

#include <stdlib.h>
#include <string.h>

static bool is_q8(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8; }
static bool is_int(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8 || dt == OAR_I32 || dt == OAR_I64; }

/* ---- quantization parameters: scale and zero point, 0-d (per tensor) or 1-d along axis */

static oar_status check_qparams(const char *op, const oar_tensor *x, const oar_tensor *scale, const oar_tensor *zp,
                                int64_t axis) {
    if (!oar_dtypes[scale->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "%s: expected a floating scale, got %s", op, oar_dtype_name(scale->dtype));
    if (!is_int(zp->dtype))
        return oar_error(OAR_ERR_DTYPE, "%s: expected an integer zero_point (i32, i64, i8 or u8), got %s", op,
                         oar_dtype_name(zp->dtype));
    if (scale->ndim > 1 || zp->ndim != scale->ndim || (scale->ndim == 1 && zp->shape[0] != scale->shape[0]))
        return oar_error(OAR_ERR_SHAPE, "%s: expected scale and zero_point both 0-d (per tensor) or both 1-d of one "
                                        "size (per channel), got %d-d and %d-d", op, scale->ndim, zp->ndim);
    if (scale->ndim == 1) {
        int ax = oar_dim_index(axis, x->ndim);
        if (ax < 0 || x->ndim == 0) return oar_dim_error(op, axis, x->ndim);
        if (scale->shape[0] != x->shape[ax])
            return oar_error(OAR_ERR_SHAPE, "%s: expected per-channel scale of size x.shape[%d] = %lld, got %lld", op,
                             ax, (long long)x->shape[ax], (long long)scale->shape[0]);
    }
    return OAR_OK;
}

/* Scales and zero points read into arrays, checked (scale positive and finite, zero point in
 * [qmin, qmax]); the element loop runs outer x channels x inner. */
typedef struct qparams {
    int64_t channels, inner, outer;
    double *scale;
    int32_t *zp;
} qparams;

static void qparams_free(qparams *p) {
    free(p->scale);
    free(p->zp);
}

static oar_status qparams_load(const char *op, const oar_tensor *x, const oar_tensor *scale, const oar_tensor *zp,
                               int64_t axis, int32_t qmin, int32_t qmax, qparams *p) {
    memset(p, 0, sizeof *p);
    p->channels = scale->ndim ? scale->shape[0] : 1;
    p->inner = 1;
    if (scale->ndim) {
        int ax = oar_dim_index(axis, x->ndim);
        for (int d = ax + 1; d < x->ndim; d++) p->inner *= x->shape[d];
    }
    int64_t block = p->channels * p->inner;
    p->outer = block ? x->numel / block : 0;
    p->scale = malloc(sizeof(double) * (size_t)(p->channels ? p->channels : 1));
    p->zp = malloc(sizeof(int32_t) * (size_t)(p->channels ? p->channels : 1));
    if (!p->scale || !p->zp) {
        qparams_free(p);
        return oar_error(OAR_ERR_OOM, "%s: out of memory for %lld quantization parameters", op, (long long)p->channels);
    }
    const oar_dtype_traits *ts = &oar_dtypes[scale->dtype], *tz = &oar_dtypes[zp->dtype];
    for (int64_t c = 0; c < p->channels; c++) {
        double s = ts->load(oar_tensor_ptr(scale) + c * (int64_t)ts->size);
        int64_t z = tz->load_i64(oar_tensor_ptr(zp) + c * (int64_t)tz->size);
        if (!(s > 0) || isinf(s) || (scale->dtype != OAR_F64 && !((float)s > 0))) {
            qparams_free(p);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected positive finite scales, got scale[%lld] = %g; calibrate "
                                                  "on data that is not all zero", op, (long long)c, s);
        }
        if (z < qmin || z > qmax) {
            qparams_free(p);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected zero_point within [%d, %d], got zero_point[%lld] = %lld",
                             op, qmin, qmax, (long long)c, (long long)z);
        }
        p->scale[c] = s;
        p->zp[c] = (int32_t)z;
    }
    return OAR_OK;
}

/* ---- quantize */

static oar_status quantize_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float("quantize", in[0], "x");
    if (st != OAR_OK) return st;
    if ((st = check_qparams("quantize", in[0], in[1], in[2], a[0].i)) != OAR_OK) return st;
    if (!is_q8((oar_dtype)a[1].i))
        return oar_error(OAR_ERR_DTYPE, "quantize: expected dtype u8 or i8, got %s", oar_dtype_name((oar_dtype)a[1].i));
    oar_meta_from(out, in[0]);
    out->dtype = (oar_dtype)a[1].i;
    *n_out = 1;
    return OAR_OK;
}

static oar_status quantize_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                               const oar_attr *a) {
    oar_tensor *x = in[0], *y = out[0];
    int32_t qmin, qmax;
    oar_qrange(y->dtype, &qmin, &qmax);
    qparams p;
    oar_status st = qparams_load("quantize", x, in[1], in[2], a[0].i, qmin, qmax, &p);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    const char *xp = oar_tensor_ptr(x);
    char *yp = oar_tensor_ptr(y);
    int64_t i = 0;
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t c = 0; c < p.channels; c++) {
            float inv = 1.0f / (float)p.scale[c];
            double inv64 = 1.0 / p.scale[c];
            for (int64_t k = 0; k < p.inner; k++, i++) {
                int32_t q = x->dtype == OAR_F32 ? oar_quantize_f32(((const float *)xp)[i], inv, p.zp[c], qmin, qmax)
                          : x->dtype == OAR_F64 ? oar_quantize_f64(((const double *)xp)[i], inv64, p.zp[c], qmin, qmax)
                          : oar_quantize_f32((float)tx->load(xp + i * (int64_t)tx->size), inv, p.zp[c], qmin, qmax);
                if (y->dtype == OAR_U8) ((uint8_t *)yp)[i] = (uint8_t)q;
                else ((int8_t *)yp)[i] = (int8_t)q;
            }
        }
    qparams_free(&p);
    return OAR_OK;
}

const oar_op_def oar_opdef_quantize = {
    .name = "quantize", .n_inputs = 3, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"axis", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .flags = OAR_OPF_NONDIFF | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = quantize_infer, .reference = quantize_ref,
};

/* ---- dequantize */

static oar_status dequantize_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    if (!is_q8(in[0]->dtype))
        return oar_error(OAR_ERR_DTYPE, "dequantize: expected a u8 or i8 input, got %s; quantize it first",
                         oar_dtype_name(in[0]->dtype));
    oar_status st = check_qparams("dequantize", in[0], in[1], in[2], a[0].i);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    out->dtype = OAR_F32;
    *n_out = 1;
    return OAR_OK;
}

static oar_status dequantize_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    oar_tensor *q = in[0];
    int32_t qmin, qmax;
    oar_qrange(q->dtype, &qmin, &qmax);
    qparams p;
    oar_status st = qparams_load("dequantize", q, in[1], in[2], a[0].i, qmin, qmax, &p);
    if (st != OAR_OK) return st;
    const uint8_t *u = (const uint8_t *)oar_tensor_ptr(q);
    const int8_t *s = (const int8_t *)oar_tensor_ptr(q);
    float *y = (float *)oar_tensor_ptr(out[0]);
    int64_t i = 0;
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t c = 0; c < p.channels; c++) {
            float sc = (float)p.scale[c];
            for (int64_t k = 0; k < p.inner; k++, i++)
                y[i] = (float)((q->dtype == OAR_U8 ? (int32_t)u[i] : (int32_t)s[i]) - p.zp[c]) * sc;
        }
    qparams_free(&p);
    return OAR_OK;
}

const oar_op_def oar_opdef_dequantize = {
    .name = "dequantize", .n_inputs = 3, .n_outputs = 1, .n_attrs = 1, .attrs = {{"axis", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = dequantize_infer, .reference = dequantize_ref,
};

/* ---- fake_quant and its straight-through gradient */

static oar_status check_range(const char *op, const oar_attr *a) {
    if (a[1].i >= a[2].i || a[1].i < -(1ll << 24) || a[2].i > (1ll << 24))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected quant_min < quant_max within +-2^24, got %lld and %lld", op,
                         (long long)a[1].i, (long long)a[2].i);
    return OAR_OK;
}

static oar_status fake_quant_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float("fake_quant", in[0], "x");
    if (st == OAR_OK) st = check_qparams("fake_quant", in[0], in[1], in[2], a[0].i);
    if (st == OAR_OK) st = check_range("fake_quant", a);
    if (st != OAR_OK) return st;
    return oar_infer_same_as_input0(in, n_in, a, out, n_out);
}

/* grad == NULL: y = fake-quantized x; else y = grad where x*inv rounded lies in [qmin, qmax], 0 elsewhere */
static oar_status fake_quant_run(const char *op, oar_tensor *x, oar_tensor *scale, oar_tensor *zp, oar_tensor *grad,
                                 oar_tensor *y, const oar_attr *a) {
    int32_t qmin = (int32_t)a[1].i, qmax = (int32_t)a[2].i;
    qparams p;
    oar_status st = qparams_load(op, x, scale, zp, a[0].i, qmin, qmax, &p);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    const char *xp = oar_tensor_ptr(x), *gp = grad ? oar_tensor_ptr(grad) : NULL;
    char *yp = oar_tensor_ptr(y);
    int64_t i = 0;
    for (int64_t o = 0; o < p.outer; o++)
        for (int64_t c = 0; c < p.channels; c++) {
            float inv = 1.0f / (float)p.scale[c], sc = (float)p.scale[c];
            double inv64 = 1.0 / p.scale[c];
            for (int64_t k = 0; k < p.inner; k++, i++) {
                int64_t off = i * (int64_t)tx->size;
                double v, r; /* r: the rounded value before clamping */
                if (x->dtype == OAR_F64) {
                    r = nearbyint(((const double *)xp)[i] * inv64);
                    v = (double)(oar_quantize_f64(((const double *)xp)[i], inv64, p.zp[c], qmin, qmax) - p.zp[c]) *
                        p.scale[c];
                } else {
                    float xv = x->dtype == OAR_F32 ? ((const float *)xp)[i] : (float)tx->load(xp + off);
                    r = nearbyintf(xv * inv);
                    v = (float)(oar_quantize_f32(xv, inv, p.zp[c], qmin, qmax) - p.zp[c]) * sc;
                }
                if (grad) {
                    r += p.zp[c];
                    v = r >= qmin && r <= qmax ? tx->load(gp + off) : 0.0;
                }
                if (x->dtype == OAR_F32) ((float *)yp)[i] = (float)v;
                else tx->store(yp + off, v);
            }
        }
    qparams_free(&p);
    return OAR_OK;
}

static oar_status fake_quant_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    return fake_quant_run("fake_quant", in[0], in[1], in[2], NULL, out[0], a);
}

static oar_status fake_quant_grad_rule(oar_grad_ctx *g) {
    if (g->gout[0] && g->needs[0])
        g->gin[0] = oar_fake_quant_grad(g->gout[0], g->in[0], g->in[1], g->in[2], g->attrs[0].i, g->attrs[1].i,
                                        g->attrs[2].i);
    return OAR_OK;
}

#define FQ_ATTRS .n_attrs = 3, .attrs = {{"axis", OAR_ATTR_INT}, {"quant_min", OAR_ATTR_INT}, {"quant_max", OAR_ATTR_INT}}

/* The straight-through estimator: d fake_quant / dx is taken as 1 inside the range, 0 where the
 * value saturated (as torch). Scale and zero point get no gradient here (a learnable-scale
 * variant would be its own op). */
const oar_op_def oar_opdef_fake_quant = {
    .name = "fake_quant", .n_inputs = 3, .n_outputs = 1, FQ_ATTRS,
    .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = fake_quant_infer, .reference = fake_quant_ref, .grad = fake_quant_grad_rule,
};

static oar_status fq_grad_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float("fake_quant_grad", in[0], "grad");
    if (st == OAR_OK) st = check_qparams("fake_quant_grad", in[1], in[2], in[3], a[0].i);
    if (st == OAR_OK) st = check_range("fake_quant_grad", a);
    if (st != OAR_OK) return st;
    if (in[0]->dtype != in[1]->dtype || in[0]->ndim != in[1]->ndim ||
        memcmp(in[0]->shape, in[1]->shape, sizeof(int64_t) * (size_t)in[0]->ndim))
        return oar_error(OAR_ERR_SHAPE, "fake_quant_grad: expected grad and x of one shape and dtype, got %s and %s "
                                        "of %d and %d dims", oar_dtype_name(in[0]->dtype),
                         oar_dtype_name(in[1]->dtype), in[0]->ndim, in[1]->ndim);
    return oar_infer_same_as_input0(in, n_in, a, out, n_out);
}

static oar_status fq_grad_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    return fake_quant_run("fake_quant_grad", in[1], in[2], in[3], in[0], out[0], a);
}

/* Linear in grad: its own gradient is itself; x, scale and zero point only choose the mask. */
static oar_status fq_grad_grad(oar_grad_ctx *g) {
    if (g->gout[0] && g->needs[0])
        g->gin[0] = oar_fake_quant_grad(g->gout[0], g->in[1], g->in[2], g->in[3], g->attrs[0].i, g->attrs[1].i,
                                        g->attrs[2].i);
    return OAR_OK;
}

const oar_op_def oar_opdef_fake_quant_grad = {
    .name = "fake_quant_grad", .n_inputs = 4, .n_outputs = 1, FQ_ATTRS,
    .flags = OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = fq_grad_infer, .reference = fq_grad_ref, .grad = fq_grad_grad,
};

/* ---- qlinear */

static oar_status check_0d(const char *what, const oar_tensor *t, bool want_float) {
    if (t->ndim != 0)
        return oar_error(OAR_ERR_SHAPE, "qlinear: expected a 0-d %s (per-tensor), got %d-d", what, t->ndim);
    if (want_float ? !oar_dtypes[t->dtype].is_float : !is_int(t->dtype))
        return oar_error(OAR_ERR_DTYPE, "qlinear: expected %s %s, got %s", want_float ? "a floating" : "an integer",
                         what, oar_dtype_name(t->dtype));
    return OAR_OK;
}

static oar_status qlinear_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    const oar_tensor *x = in[QL_X], *w = in[QL_W], *ws = in[QL_WS], *b = in[QL_BIAS];
    oar_dtype odt = (oar_dtype)a[1].i;
    if (a[0].i < OAR_QACT_NONE || a[0].i > OAR_QACT_GELU_TANH)
        return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected activation 0 (none), 1 (relu), 2 (gelu, erf) or 3 "
                                              "(gelu, tanh), got %lld", (long long)a[0].i);
    if (odt != OAR_F32 && odt != OAR_I32 && !is_q8(odt))
        return oar_error(OAR_ERR_DTYPE, "qlinear: expected output dtype f32, u8, i8 or i32 (the raw sums), got %s",
                         oar_dtype_name(odt));
    if (odt == OAR_I32 && (a[0].i != OAR_QACT_NONE || in[QL_BIAS] || in[QL_RES]))
        return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected no activation, bias or residual with an i32 output "
                                              "(the raw sums sum_k (x - x_zp) w), got %s%s%s",
                         a[0].i != OAR_QACT_NONE ? "an activation " : "", in[QL_BIAS] ? "a bias " : "",
                         in[QL_RES] ? "a residual" : "");
    if (a[0].i >= OAR_QACT_GELU_ERF && odt != OAR_F32)
        return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected f32 output with a GELU activation, got %s; run "
                                              "quantize after it", oar_dtype_name(odt));
    if (!is_q8(x->dtype) || x->ndim < 1)
        return oar_error(OAR_ERR_DTYPE, "qlinear: expected x of dtype u8 or i8 with at least 1 dim, got %s of %d dims; "
                                        "quantize it first", oar_dtype_name(x->dtype), x->ndim);
    if (w->dtype != OAR_I8 || w->ndim != 2)
        return oar_error(OAR_ERR_DTYPE, "qlinear: expected weight i8 of 2 dims [out, in], got %s of %d dims",
                         oar_dtype_name(w->dtype), w->ndim);
    int64_t k = x->shape[x->ndim - 1], n = w->shape[0];
    if (w->shape[1] != k)
        return oar_error(OAR_ERR_SHAPE, "qlinear: expected x.shape[-1] == weight.shape[1], got %lld != %lld",
                         (long long)k, (long long)w->shape[1]);
    oar_status st;
    if ((st = check_0d("x_scale", in[QL_XS], true)) != OAR_OK || (st = check_0d("x_zero_point", in[QL_XZP], false)))
        return st;
    if (!oar_dtypes[ws->dtype].is_float || ws->ndim > 1 || (ws->ndim == 1 && ws->shape[0] != n))
        return oar_error(OAR_ERR_SHAPE, "qlinear: expected a floating w_scale, 0-d or of shape [%lld], got %s of %d dims",
                         (long long)n, oar_dtype_name(ws->dtype), ws->ndim);
    if (b && (b->dtype != OAR_F32 || b->ndim != 1 || b->shape[0] != n))
        return oar_error(OAR_ERR_SHAPE, "qlinear: expected bias f32 of shape [%lld], got %s of %d dims", (long long)n,
                         oar_dtype_name(b->dtype), b->ndim);
    bool has_y = in[QL_YS] || in[QL_YZP];
    if (is_q8(odt) != has_y || (has_y && (!in[QL_YS] || !in[QL_YZP])))
        return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected y_scale and y_zero_point exactly when the output is "
                                              "u8/i8, got output %s with%s them", oar_dtype_name(odt), has_y ? "" : "out");
    if (has_y && ((st = check_0d("y_scale", in[QL_YS], true)) != OAR_OK ||
                  (st = check_0d("y_zero_point", in[QL_YZP], false)) != OAR_OK))
        return st;
    oar_meta_from(out, x);
    out->shape[out->ndim - 1] = n;
    out->dtype = odt;
    const oar_tensor *r = in[QL_RES];
    if (r && (r->dtype != OAR_F32 || r->ndim != out->ndim ||
              memcmp(r->shape, out->shape, sizeof(int64_t) * (size_t)r->ndim)))
        return oar_error(OAR_ERR_SHAPE, "qlinear: expected residual f32 of the output's shape, got %s of %d dims",
                         oar_dtype_name(r->dtype), r->ndim);
    *n_out = 1;
    return OAR_OK;
}

oar_status oar_qepilogue_init(oar_qepilogue *e, oar_tensor *const *in, oar_tensor *y, const oar_attr *a) {
    memset(e, 0, sizeof *e);
    const oar_tensor *x = in[QL_X], *ws = in[QL_WS];
    int64_t n = in[QL_W]->shape[0];
    int32_t qmin, qmax;
    oar_qrange(x->dtype, &qmin, &qmax);
    double xs = oar_dtypes[in[QL_XS]->dtype].load(oar_tensor_ptr(in[QL_XS]));
    int64_t xzp = oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    if (!((float)xs > 0) || isinf((float)xs) || xzp < qmin || xzp > qmax)
        return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected a positive finite x_scale and x_zero_point in [%d, %d], "
                                              "got %g and %lld", qmin, qmax, xs, (long long)xzp);
    e->act = (int)a[0].i;
    e->out_dtype = y->dtype;
    e->bias = in[QL_BIAS] ? (const float *)oar_tensor_ptr(in[QL_BIAS]) : NULL;
    if (is_q8(y->dtype)) {
        oar_qrange(y->dtype, &e->qmin, &e->qmax);
        double ys = oar_dtypes[in[QL_YS]->dtype].load(oar_tensor_ptr(in[QL_YS]));
        int64_t yzp = oar_dtypes[in[QL_YZP]->dtype].load_i64(oar_tensor_ptr(in[QL_YZP]));
        if (!((float)ys > 0) || isinf((float)ys) || yzp < e->qmin || yzp > e->qmax)
            return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected a positive finite y_scale and y_zero_point in "
                                                  "[%d, %d], got %g and %lld", e->qmin, e->qmax, ys, (long long)yzp);
        e->inv_y = 1.0f / (float)ys;
        e->y_zp = (int32_t)yzp;
    }
    float *comb = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!comb) return oar_error(OAR_ERR_OOM, "qlinear: out of memory for %lld scales", (long long)n);
    const oar_dtype_traits *tw = &oar_dtypes[ws->dtype];
    for (int64_t j = 0; j < n; j++) {
        float s = (float)tw->load(oar_tensor_ptr(ws) + (ws->ndim ? j : 0) * (int64_t)tw->size);
        if (!(s > 0) || isinf(s)) {
            free(comb);
            return oar_error(OAR_ERR_INVALID_ARG, "qlinear: expected positive finite weight scales, got w_scale[%lld] = %g",
                             (long long)j, (double)s);
        }
        comb[j] = (float)xs * s;
    }
    e->comb = comb;
    return OAR_OK;
}

void oar_qepilogue_free(oar_qepilogue *e) { free((void *)e->comb); }

static oar_status qlinear_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                              const oar_attr *a) {
    oar_qepilogue e;
    oar_status st = oar_qepilogue_init(&e, in, out[0], a);
    if (st != OAR_OK) return st;
    const oar_tensor *x = in[QL_X];
    int64_t k = in[QL_W]->shape[1], n = in[QL_W]->shape[0], m = k ? x->numel / k : out[0]->numel / (n ? n : 1);
    int32_t xzp = (int32_t)oar_dtypes[in[QL_XZP]->dtype].load_i64(oar_tensor_ptr(in[QL_XZP]));
    const int8_t *w = (const int8_t *)oar_tensor_ptr(in[QL_W]);
    const float *res = in[QL_RES] ? (const float *)oar_tensor_ptr(in[QL_RES]) : NULL;
    size_t osz = oar_dtypes[out[0]->dtype].size;
    int32_t *acc = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
    if (!acc) {
        oar_qepilogue_free(&e);
        return oar_error(OAR_ERR_OOM, "qlinear: out of memory");
    }
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            uint32_t s = 0; /* int32 accumulation, wrapping as the SIMD kernels do */
            for (int64_t t = 0; t < k; t++) {
                int32_t xv = x->dtype == OAR_U8 ? ((const uint8_t *)oar_tensor_ptr(x))[i * k + t]
                                                : ((const int8_t *)oar_tensor_ptr(x))[i * k + t];
                s += (uint32_t)((xv - xzp) * (int32_t)w[j * k + t]);
            }
            acc[j] = (int32_t)s;
        }
        oar_qepilogue_row(&e, acc, res ? res + i * n : NULL, 0, n, oar_tensor_ptr(out[0]) + (size_t)(i * n) * osz);
    }
    free(acc);
    oar_qepilogue_free(&e);
    return OAR_OK;
}

const oar_op_def oar_opdef_qlinear = {
    .name = "qlinear", .n_inputs = QL_N, .n_outputs = 1, .key_input = QL_X, .n_attrs = 2,
    .attrs = {{"activation", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .optional_inputs = (1u << QL_BIAS) | (1u << QL_YS) | (1u << QL_YZP) | (1u << QL_RES),
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qlinear_infer, .reference = qlinear_ref,
};

/* ---- public functions */

oar_tensor *oar_quantize(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int axis, oar_dtype dtype) {
    oar_tensor *in[3] = {x, scale, zero_point};
    oar_attr at[2] = {oar_attr_int(axis), oar_attr_dtype(dtype)};
    return oar_op_call1(OAR_OP_quantize, in, 3, at);
}

oar_tensor *oar_dequantize(oar_tensor *q, oar_tensor *scale, oar_tensor *zero_point, int axis) {
    oar_tensor *in[3] = {q, scale, zero_point};
    oar_attr at[1] = {oar_attr_int(axis)};
    return oar_op_call1(OAR_OP_dequantize, in, 3, at);
}

oar_tensor *oar_fake_quant(oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point, int axis, int64_t quant_min,
                           int64_t quant_max) {
    oar_tensor *in[3] = {x, scale, zero_point};
    oar_attr at[3] = {oar_attr_int(axis), oar_attr_int(quant_min), oar_attr_int(quant_max)};
    return oar_op_call1(OAR_OP_fake_quant, in, 3, at);
}

oar_tensor *oar_fake_quant_grad(oar_tensor *grad, oar_tensor *x, oar_tensor *scale, oar_tensor *zero_point,
                                int64_t axis, int64_t quant_min, int64_t quant_max) {
    oar_tensor *in[4] = {grad, x, scale, zero_point};
    oar_attr at[3] = {oar_attr_int(axis), oar_attr_int(quant_min), oar_attr_int(quant_max)};
    return oar_op_call1(OAR_OP_fake_quant_grad, in, 4, at);
}

oar_tensor *oar_qlinear(oar_tensor *x, oar_tensor *x_scale, oar_tensor *x_zero_point, oar_tensor *weight,
                        oar_tensor *w_scale, oar_tensor *bias, const oar_qlinear_opts *opts) {
    oar_qlinear_opts o = opts ? *opts : (oar_qlinear_opts){0};
    oar_tensor *in[QL_N] = {x, x_scale, x_zero_point, weight, w_scale, bias, o.y_scale, o.y_zero_point, o.residual};
    oar_attr at[2] = {oar_attr_int(o.relu ? OAR_QACT_RELU : OAR_QACT_NONE), oar_attr_dtype(o.out_dtype)};
    return oar_op_call1(OAR_OP_qlinear, in, QL_N, at);
}

/* ---- choose_qparams: per-tensor scale and zero point from x's range (dynamic quantization) */

static oar_status choose_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float("choose_qparams", in[0], "x");
    if (st != OAR_OK) return st;
    if (!is_q8((oar_dtype)a[0].i))
        return oar_error(OAR_ERR_DTYPE, "choose_qparams: expected dtype u8 or i8, got %s",
                         oar_dtype_name((oar_dtype)a[0].i));
    out[0] = (oar_meta){.dtype = OAR_F32, .ndim = 0};
    out[1] = (oar_meta){.dtype = OAR_I32, .ndim = 0};
    *n_out = 2;
    return OAR_OK;
}

static oar_status choose_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    const oar_tensor *x = in[0];
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype];
    float lo = 0, hi = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        float v = x->dtype == OAR_F32 ? ((const float *)oar_tensor_ptr(x))[i]
                                      : (float)tx->load(oar_tensor_ptr(x) + i * (int64_t)tx->size);
        if (!isfinite(v))
            return oar_error(OAR_ERR_NUMERIC, "choose_qparams: expected finite values, got %g at element %lld; the "
                                              "input to a quantized layer has NaN or Inf", (double)v, (long long)i);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    float s;
    int32_t z;
    oar_qparams_from_range(lo, hi, (oar_dtype)a[0].i, a[1].i != 0, &s, &z);
    *(float *)oar_tensor_ptr(out[0]) = s;
    *(int32_t *)oar_tensor_ptr(out[1]) = z;
    return OAR_OK;
}

const oar_op_def oar_opdef_choose_qparams = {
    .name = "choose_qparams", .n_inputs = 1, .n_outputs = 2, .n_attrs = 2,
    .attrs = {{"dtype", OAR_ATTR_DTYPE}, {"symmetric", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = choose_infer, .reference = choose_ref,
};

oar_status oar_choose_qparams(oar_tensor *x, oar_dtype dtype, bool symmetric, oar_tensor **scale,
                              oar_tensor **zero_point) {
    oar_tensor *out[2];
    int n = 2;
    oar_attr at[2] = {oar_attr_dtype(dtype), oar_attr_int(symmetric)};
    oar_status st = oar_op_call(OAR_OP_choose_qparams, &x, 1, at, out, &n);
    if (st != OAR_OK) return st;
    *scale = oar_track(out[0]); /* like every op's result: owned by the current scope, if any */
    *zero_point = oar_track(out[1]);
    return OAR_OK;
}
