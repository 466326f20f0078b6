/* Quantized ONNX onto oar's int8 ops (quantize, qconv2d, qlinear; docs/onnx.md "Quantized
 * models"). Two forms:
 *  - QDQ (onnxruntime's quantize_static, oar's own export): DequantizeLinear records its
 *    quantized source per value (ox_qval); a Conv, Gemm or MatMul whose input and constant
 *    weight are such values runs as qconv2d/qlinear from the sources (f32 output), and a
 *    QuantizeLinear of that output (through Relu, or Add of a residual) uses oar's quantize, which
 *    the fuse_quant pass folds into the int8 op's epilogue: DQ -> Conv [-> Add] [-> Relu] -> Q
 *    becomes one qconv2d with a u8/i8 output, and the next layer reads those bytes.
 *  - QOperator: QLinearConv, QLinearMatMul (and ConvInteger, MatMulInteger where the sums are
 *    exact in f32) straight onto qconv2d/qlinear.
 * Recognized at import (not by a pass after it): the importer sees the ONNX names, constant
 * weights and zero points before tracing, and the trace then holds what oar's own quantized
 * layers give, so the existing passes (fuse_quant, packed weights) apply unchanged.
 * What the int8 ops cannot express (u8 or non-zero-point weights, per-channel activation
 * parameters, 1-D/3-D or asymmetrically padded convolutions, blocked scales, non-f32 scales)
 * keeps the exact float translation (onnx_ops_quant.c). */
#include "io/onnx/onnx_ops.h"

#include "oar/quant.h"
#include "ops/op.h"
#include "ops/quant_add.h"

#include <math.h>
#include <string.h>

static ox_qval *qv_in(const ox_ctx *c, int k) {
    if (!c->qv || k >= c->n_in || c->node->in[k] < 0) return NULL;
    ox_qval *v = &c->qv[c->node->in[k]];
    return v->q ? v : NULL;
}

static bool qop_in(const ox_ctx *c, int k) {
    return c->qv && k < c->n_in && c->node->in[k] >= 0 && c->qv[c->node->in[k]].qop;
}

static void mark_qop(const ox_ctx *c, int k) {
    if (c->qv && k < c->n_out && c->node->out[k] >= 0) c->qv[c->node->out[k]].qop = true;
}

static bool known(const oar_tensor *t) { return t && t->storage; }
static bool is8(const oar_tensor *t) { return t && (t->dtype == OAR_U8 || t->dtype == OAR_I8); }

/* f(t) with the trace paused, as a constant of the running trace. */
static oar_tensor *paused_cast(oar_tensor *t, oar_dtype dt) {
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *y = oar_contiguous(oar_cast(t, dt));
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

static oar_tensor *paused_scalar(double v, oar_dtype dt) {
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *y = oar_scalar(v, dt);
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

static oar_tensor *paused_zeros(int64_t n, oar_dtype dt) {
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *y = oar_zeros(&n, 1, dt);
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

/* w [a, b] transposed to a contiguous [b, a] constant. */
static oar_tensor *paused_transpose(oar_tensor *w) {
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *y = oar_contiguous(oar_transpose(w, 0, 1));
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

/* A known integer tensor all of whose values are 0 (absent counts as 0). */
static bool all_zero(oar_tensor *t) {
    if (!t) return true;
    if (!known(t)) return false;
    oar_tensor *d = paused_cast(t, OAR_F64);
    if (!d) return false;
    const double *v = oar_data(d);
    for (int64_t i = 0; i < d->numel; i++)
        if (v[i] != 0) return false;
    return true;
}

/* Two known one-element tensors of one value. */
static bool same_value(oar_tensor *a, oar_tensor *b) {
    double x, y;
    return a && b && known(a) && known(b) && a->numel == 1 && b->numel == 1 && oar_item(a, &x) == OAR_OK &&
           oar_item(b, &y) == OAR_OK && x == y;
}

/* A one-element scale or zero point as 0-d; NULL when t has several values. */
static oar_tensor *per_tensor(oar_tensor *t) {
    if (!t || t->numel != 1) return NULL;
    return t->ndim ? oar_reshape(t, NULL, 0) : t;
}

/* ---- QDQ */

bool ox_qdq_dequantize(ox_ctx *c, oar_tensor **y) {
    oar_tensor *x = OX_IN(c, 0), *s = OX_IN(c, 1), *z = OX_IN(c, 2);
    /* scales and zero points are the model's constants (a computed one keeps the float path) */
    if (!c->qv || !is8(x) || !known(s) || s->dtype != OAR_F32 || (z && !known(z)) ||
        ox_attr_int(c, "block_size", 0) > 0)
        return false;
    if (z && (z->dtype != x->dtype || z->numel != s->numel)) return false; /* the float path reports it */
    ox_qval v = {.q = x};
    if (s->numel == 1) {
        v.scale = per_tensor(s);
        v.zero_point = z ? per_tensor(z) : paused_scalar(0, x->dtype);
    } else {
        int64_t a = ox_attr_int(c, "axis", 1);
        if (a < -x->ndim || a >= x->ndim || s->ndim != 1 || (z && z->ndim != 1)) return false;
        v.axis = (int)(a < 0 ? a + x->ndim : a);
        if (s->shape[0] != x->shape[v.axis]) return false;
        v.scale = s, v.zero_point = z ? z : paused_zeros(s->shape[0], x->dtype);
    }
    /* (q - zp) * scale in f32: the product of an integer below 2^9 and a float is ONNX's value */
    *y = v.scale && v.zero_point ? oar_dequantize(x, v.scale, v.zero_point, v.axis) : NULL;
    if (*y && c->node->out[0] >= 0) c->qv[c->node->out[0]] = v;
    return true;
}

bool ox_qdq_quantize(ox_ctx *c, oar_tensor **y) {
    oar_tensor *x = OX_IN(c, 0), *s = per_tensor(OX_IN(c, 1)), *z = OX_IN(c, 2);
    if (!x || x->dtype != OAR_F32 || !s || s->dtype != OAR_F32 || (z && (!is8(z) || z->numel != 1)) ||
        ox_attr_int(c, "output_dtype", 0) || ox_attr_int(c, "block_size", 0) > 0)
        return false;
    if (!known(s) || (z && !known(z))) return false;
    oar_dtype dt = z ? z->dtype : OAR_U8;
    oar_tensor *z0 = z ? per_tensor(z) : paused_scalar(0, OAR_U8);
    ox_qval *src = qv_in(c, 0);
    if (src && src->q->dtype == dt && same_value(src->scale, s) && same_value(src->zero_point, z0)) {
        /* Q(DQ(q)) with DQ's parameters is q: round(fl(fl(k s) / s)) = k for |k| <= 255 (the
         * two roundings move k by less than 255 * 2^-23) */
        *y = src->q;
        return true;
    }
    ox_qval *sum = c->qv && c->node->in[0] >= 0 && c->qv[c->node->in[0]].qadd ? &c->qv[c->node->in[0]] : NULL;
    if (sum) { /* Add [Relu] of two recorded values, quantized: qadd of their bytes, ONNX's float chain */
        ox_qval *a = &c->qv[sum->add_a], *b = &c->qv[sum->add_b];
        oar_tensor *in[QA_N] = {a->q, a->scale, a->zero_point, b->q, b->scale, b->zero_point, s, z0};
        oar_attr at[2] = {oar_attr_int(sum->relu ? OAR_QACT_RELU : OAR_QACT_NONE), oar_attr_dtype(dt)};
        *y = oar_op_call1(OAR_OP_qadd, in, QA_N, at);
        return true;
    }
    if (qop_in(c, 0)) /* the epilogue of the int8 op that made x: x * (1 / s), fused */
        *y = oar_quantize(x, s, z0, 0, dt);
    else /* ONNX's x / s exactly (scale 1 multiplies exactly) */
        *y = oar_quantize(oar_div(x, s), paused_scalar(1.0, OAR_F32), z0, 0, dt);
    return true;
}

/* A constant u8/i8 weight w with zero points wz (absent: 0; one value, or one per index of dim
 * axis) as the symmetric i8 weight oar's int8 ops take: w - wz, exact when every difference lies
 * in [-128, 127] (u8 weights around 128, i8 ones with small zero points), else NULL (the float
 * path). sum_k x_k (w_k - wz) is then the file's product: no correction term is needed. */
static oar_tensor *centred_weight(oar_tensor *w, oar_tensor *wz, int axis) {
    if (!w || !is8(w) || !known(w) || (wz && (!known(wz) || !is8(wz)))) return NULL;
    if (w->dtype == OAR_I8 && all_zero(wz)) return w;
    if (wz && wz->numel > 1 && (axis < 0 || axis >= w->ndim || wz->numel != w->shape[axis])) return NULL;
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *z = NULL, *d = oar_cast(w, OAR_F64);
    if (wz) {
        int64_t shape[OAR_MAX_DIMS];
        for (int i = 0; i < w->ndim; i++) shape[i] = wz->numel > 1 && i == axis ? wz->numel : 1;
        z = oar_cast(oar_reshape(wz, shape, wz->numel > 1 ? w->ndim : 0), OAR_F64);
        d = d && z ? oar_contiguous(oar_sub(d, z)) : NULL;
    }
    bool fits = d != NULL;
    const double *v = d ? oar_data(d) : NULL;
    for (int64_t i = 0; fits && i < d->numel; i++) fits = v[i] >= -128 && v[i] <= 127;
    oar_tensor *y = fits ? oar_contiguous(oar_cast(d, OAR_I8)) : NULL;
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

/* The weight's record when it is a constant 8-bit tensor whose zero points centre it onto i8
 * (centred_weight; *wq the i8 weight), per tensor or per channel along axis. */
static ox_qval *sym_weight(const ox_ctx *c, int k, int axis, oar_tensor **wq) {
    ox_qval *w = qv_in(c, k);
    if (!w || (w->scale->ndim == 1 && w->axis != axis)) return NULL;
    *wq = centred_weight(w->q, w->zero_point, w->scale->ndim == 1 ? w->axis : -1);
    return *wq ? w : NULL;
}

/* An activation's record: per tensor. */
static ox_qval *act(const ox_ctx *c, int k) {
    ox_qval *x = qv_in(c, k);
    return x && x->scale->ndim == 0 ? x : NULL;
}

static bool f32_bias(const oar_tensor *b, int64_t n) {
    return !b || (b->dtype == OAR_F32 && b->ndim == 1 && b->shape[0] == n);
}

bool ox_qdq_conv(ox_ctx *c, oar_tensor **y) {
    oar_tensor *b = OX_IN(c, 2), *wq = NULL;
    ox_qval *x = act(c, 0), *w = x ? sym_weight(c, 1, 0, &wq) : NULL;
    oar_conv_opts o;
    if (!x || !w || !f32_bias(b, wq->shape[0]) || !ox_conv2d_opts(c, x->q, wq, &o)) return false;
    oar_qlinear_opts q = {.out_dtype = OAR_F32};
    *y = oar_qconv2d(x->q, x->scale, x->zero_point, wq, w->scale, b, &o, &q);
    mark_qop(c, 0);
    return true;
}

bool ox_qdq_gemm(ox_ctx *c, bool matmul, oar_tensor **y) {
    ox_qval *x = act(c, 0);
    if (!x || x->q->ndim < 1 || (!matmul && x->q->ndim != 2)) return false;
    bool tb = !matmul && ox_attr_int(c, "transB", 0);
    if (!matmul && (ox_attr_int(c, "transA", 0) || ox_attr_float(c, "alpha", 1.0) != 1.0 ||
                    (OX_IN(c, 2) && ox_attr_float(c, "beta", 1.0) != 1.0)))
        return false;
    oar_tensor *wq = NULL;
    ox_qval *w = sym_weight(c, 1, tb ? 0 : 1, &wq); /* per output feature: N is axis 0 of [N, K], 1 of [K, N] */
    if (!w || wq->ndim != 2) return false;
    int64_t n = wq->shape[tb ? 0 : 1];
    oar_tensor *b = matmul ? NULL : OX_IN(c, 2);
    if (!f32_bias(b, n)) return false;
    oar_tensor *wt = tb ? wq : paused_transpose(wq);
    oar_qlinear_opts q = {.out_dtype = OAR_F32};
    *y = wt ? oar_qlinear(x->q, x->scale, x->zero_point, wt, w->scale, b, &q) : NULL;
    mark_qop(c, 0);
    return true;
}

bool ox_qdq_max_pool(ox_ctx *c, const oar_attr *at, oar_tensor **y) {
    ox_qval *x = act(c, 0);
    if (!x || !OX_IN(c, 0) || OX_IN(c, 0)->dtype != OAR_F32 || x->q->ndim != 4) return false;
    /* max commutes with the monotone dequantize: DQ(qmax_pool2d(q)), recorded for the next layer */
    oar_tensor *q = oar_op_call1(OAR_OP_qmax_pool2d, &x->q, 1, at);
    *y = q ? oar_dequantize(q, x->scale, x->zero_point, 0) : NULL;
    if (*y && c->node->out[0] >= 0) c->qv[c->node->out[0]] = (ox_qval){.q = q, .scale = x->scale, .zero_point = x->zero_point};
    return true;
}

void ox_qdq_after(const ox_ctx *c) {
    if (!c->qv || c->n_out < 1 || !c->out[0]) return;
    const char *op = c->node->op->name;
    /* relu and a residual add stay on an int8 op's output into fuse_quant's epilogue, and a
     * quantize moves above max pooling and reshapes to reach it */
    if ((!strcmp(op, "Relu") || !strcmp(op, "MaxPool") || !strcmp(op, "Reshape") || !strcmp(op, "Flatten")) &&
        qop_in(c, 0) && c->out[0]->dtype == OAR_F32)
        mark_qop(c, 0);
    /* Add of two recorded per-tensor values of one shape (a QDQ residual), then maybe Relu: a
     * QuantizeLinear of it runs qadd on their bytes (the f32 chain stays for other readers) */
    if (!strcmp(op, "Add") && act(c, 0) && act(c, 1) && c->in[0] && c->in[1] && c->in[0]->dtype == OAR_F32 &&
        c->in[1]->dtype == OAR_F32 && c->in[0]->ndim == c->out[0]->ndim && c->in[1]->ndim == c->out[0]->ndim &&
        !memcmp(c->in[0]->shape, c->out[0]->shape, sizeof(int64_t) * (size_t)c->out[0]->ndim) &&
        !memcmp(c->in[1]->shape, c->out[0]->shape, sizeof(int64_t) * (size_t)c->out[0]->ndim) &&
        c->node->out[0] >= 0) {
        c->qv[c->node->out[0]] = (ox_qval){.qadd = true, .add_a = c->node->in[0], .add_b = c->node->in[1]};
        return;
    }
    if (!strcmp(op, "Relu") && c->node->in[0] >= 0 && c->qv[c->node->in[0]].qadd && !c->qv[c->node->in[0]].relu &&
        c->node->out[0] >= 0) {
        ox_qval v = c->qv[c->node->in[0]];
        v.relu = true;
        c->qv[c->node->out[0]] = v;
        return;
    }
    if (!strcmp(op, "Add") && (qop_in(c, 0) || qop_in(c, 1)) && c->in[0] && c->in[1] &&
        c->in[0]->ndim == c->in[1]->ndim && c->in[0]->numel == c->in[1]->numel)
        mark_qop(c, 0);
}

/* ---- QOperator */

/* The per-tensor parameters a, its scale and zero point: 0-d f32 and 0-d of a's dtype. */
static bool act_params(oar_tensor *a, oar_tensor *s, oar_tensor *z, oar_tensor **s0, oar_tensor **z0) {
    if (!is8(a) || !(*s0 = per_tensor(s)) || (*s0)->dtype != OAR_F32) return false;
    if (z && (z->dtype != a->dtype || z->numel != 1)) return false;
    *z0 = z ? per_tensor(z) : paused_scalar(0, a->dtype);
    return *z0 != NULL;
}

static bool out_params(oar_tensor *s, oar_tensor *z, oar_qlinear_opts *q) {
    if (!(q->y_scale = per_tensor(s)) || q->y_scale->dtype != OAR_F32 || (z && (!is8(z) || z->numel != 1)))
        return false;
    q->out_dtype = z ? z->dtype : OAR_U8;
    q->y_zero_point = z ? per_tensor(z) : paused_scalar(0, OAR_U8);
    return q->y_zero_point != NULL;
}

/* A constant 8-bit weight centred onto i8 by its zero points (one, or n along axis), its scale
 * f32 of one or n values: the i8 weight, or NULL. */
static oar_tensor *weight_i8(oar_tensor *w, oar_tensor *ws, oar_tensor *wz, int64_t n, int axis) {
    if (!w || !ws || ws->dtype != OAR_F32 || !(ws->numel == 1 || (ws->ndim == 1 && ws->shape[0] == n))) return NULL;
    if (wz && wz->numel != 1 && !(wz->ndim == 1 && wz->shape[0] == n)) return NULL;
    return centred_weight(w, wz, axis);
}

bool ox_qlinear_conv_int8(ox_ctx *c, oar_tensor **y) {
    oar_tensor *x = OX_IN(c, 0), *w = OX_IN(c, 3), *ws = OX_IN(c, 4), *b = OX_IN(c, 8), *xs0, *xz0;
    oar_qlinear_opts q = {0};
    oar_conv_opts o;
    if (!act_params(x, OX_IN(c, 1), OX_IN(c, 2), &xs0, &xz0) || !w || w->ndim != 4 ||
        !(w = weight_i8(w, ws, OX_IN(c, 5), w->shape[0], 0)) || !out_params(OX_IN(c, 6), OX_IN(c, 7), &q) ||
        (b && (b->dtype != OAR_I32 || b->numel != w->shape[0] || !known(b) || !known(xs0) || !known(ws))) ||
        !ox_conv2d_opts(c, x, w, &o))
        return false;
    oar_tensor *wsv = ws->numel == 1 ? per_tensor(ws) : ws, *bias = NULL;
    if (b) { /* int32 in units of x_scale * w_scale: as f32, the epilogue's fmaf adds it */
        uint64_t tr = oar_active_trace;
        oar_active_trace = 0;
        int64_t n = w->shape[0];
        bias = oar_cast(oar_mul(oar_mul(oar_cast(oar_reshape(b, &n, 1), OAR_F64), oar_cast(xs0, OAR_F64)),
                                oar_cast(wsv, OAR_F64)),
                        OAR_F32);
        oar_active_trace = tr;
        if (!bias || !(bias = ox_as_constant(bias))) {
            *y = NULL;
            return true;
        }
    }
    *y = oar_qconv2d(x, xs0, xz0, w, wsv, bias, &o, &q);
    return true;
}

bool ox_qlinear_matmul_int8(ox_ctx *c, oar_tensor **y) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 3), *bs = OX_IN(c, 4), *as0, *az0;
    oar_qlinear_opts q = {0};
    if (!act_params(a, OX_IN(c, 1), OX_IN(c, 2), &as0, &az0) || a->ndim < 1 || !b || b->ndim != 2 ||
        !(b = weight_i8(b, bs, OX_IN(c, 5), b->shape[1], 1)) || !out_params(OX_IN(c, 6), OX_IN(c, 7), &q))
        return false;
    oar_tensor *wt = paused_transpose(b);
    *y = wt ? oar_qlinear(a, as0, az0, wt, bs->numel == 1 ? per_tensor(bs) : bs, NULL, &q) : NULL;
    return true;
}

/* com.microsoft QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp) with transA = 0,
 * alpha = 1, a constant symmetric i8 B (per tensor or per column) and a known int32 C of N
 * values: qlinear, the bias folded to f32 as QLinearConv's (b[n] a_scale b_scale[n] in double);
 * a u8/i8 output with y_scale, f32 without. */
bool ox_qgemm_int8(ox_ctx *c, oar_tensor **y) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 3), *bs = OX_IN(c, 4), *cb = OX_IN(c, 6), *as0, *az0;
    bool tb = ox_attr_int(c, "transB", 0) != 0;
    oar_qlinear_opts q = {.out_dtype = OAR_F32};
    if (ox_attr_int(c, "transA", 0) || ox_attr_float(c, "alpha", 1.0) != 1.0 ||
        !act_params(a, OX_IN(c, 1), OX_IN(c, 2), &as0, &az0) || a->ndim != 2 || !b || b->ndim != 2)
        return false;
    int64_t n = b->shape[tb ? 0 : 1];
    if (!(b = weight_i8(b, bs, OX_IN(c, 5), n, tb ? 0 : 1)) || (OX_IN(c, 7) && !out_params(OX_IN(c, 7), OX_IN(c, 8), &q)) ||
        (cb && (cb->dtype != OAR_I32 || cb->numel != n || !known(cb) || !known(as0) || !known(bs))))
        return false;
    oar_tensor *wt = tb ? b : paused_transpose(b), *bsv = bs->numel == 1 ? per_tensor(bs) : bs, *bias = NULL;
    if (wt && cb) {
        uint64_t tr = oar_active_trace;
        oar_active_trace = 0;
        bias = oar_cast(oar_mul(oar_mul(oar_cast(oar_reshape(cb, &n, 1), OAR_F64), oar_cast(as0, OAR_F64)),
                                oar_cast(bsv, OAR_F64)),
                        OAR_F32);
        oar_active_trace = tr;
        bias = bias ? ox_as_constant(bias) : NULL;
        if (!bias) wt = NULL;
    }
    *y = wt ? oar_qlinear(a, as0, az0, wt, bsv, bias, &q) : NULL;
    return true;
}

/* com.microsoft DynamicQuantizeMatMul with a constant B that centres onto i8 (b_zero_point per
 * tensor or per column): qlinear of the call's quantized A (scale and zero point of the call) with
 * f32 output, sum * (a_scale * b_scale), then + bias as a separate add: onnxruntime rounds the
 * product and the sum apart (qlinear's fused bias would be one rounding, 1 ulp off its outputs). */
bool ox_dynamic_matmul_int8(ox_ctx *c, oar_tensor *aq, oar_tensor *as, oar_tensor *az, oar_tensor **y) {
    oar_tensor *b = OX_IN(c, 1), *bs = OX_IN(c, 2), *bias = OX_IN(c, 4);
    oar_qlinear_opts q = {.out_dtype = OAR_F32};
    if (!b || b->ndim != 2 || !(b = weight_i8(b, bs, OX_IN(c, 3), b->shape[1], 1))) return false;
    oar_tensor *wt = paused_transpose(b);
    *y = wt ? oar_qlinear(aq, as, az, wt, bs->numel == 1 ? per_tensor(bs) : bs, NULL, &q) : NULL;
    if (*y && bias) *y = oar_add(*y, bias);
    return true;
}

/* ConvInteger / MatMulInteger give the int32 sums: qlinear gives them as its i32 output (any K;
 * int32 sums, exact below 2^31 as the file's), qconv2d with unit scales as f32, exact while every
 * partial sum stays below 2^24 (K * 255 * 128 < 2^24: K <= 514). */
bool ox_integer_int8(ox_ctx *c, bool conv, oar_tensor **y) {
    oar_tensor *x = OX_IN(c, 0), *w = OX_IN(c, 1), *one, *xz0;
    oar_tensor *wz = OX_IN(c, 3);
    if (!is8(x) || !w || !(w->ndim == 4 || w->ndim == 2) ||
        (wz && wz->numel != 1 && !(wz->ndim == 1 && wz->shape[0] == w->shape[conv ? 0 : 1])) ||
        !(w = centred_weight(w, wz, conv ? 0 : 1))) /* per output channel / per column of B */
        return false;
    if (OX_IN(c, 2) && (OX_IN(c, 2)->dtype != x->dtype || OX_IN(c, 2)->numel != 1)) return false;
    int64_t k = 1;
    if (conv) {
        if (w->ndim != 4) return false;
        k = w->shape[1] * w->shape[2] * w->shape[3];
    } else {
        if (w->ndim != 2 || x->ndim < 1) return false;
        k = w->shape[0];
    }
    if (conv && k * 255 * 128 >= (1 << 24)) return false;
    oar_conv_opts o;
    if (conv && !ox_conv2d_opts(c, x, w, &o)) return false;
    if (!(one = paused_scalar(1.0, OAR_F32)) || !act_params(x, one, OX_IN(c, 2), &one, &xz0)) {
        *y = NULL;
        return true;
    }
    oar_qlinear_opts q = {.out_dtype = conv ? OAR_F32 : OAR_I32};
    oar_tensor *f = conv ? oar_qconv2d(x, one, xz0, w, one, NULL, &o, &q)
                         : (w = paused_transpose(w)) ? oar_qlinear(x, one, xz0, w, one, NULL, &q) : NULL;
    *y = f && conv ? oar_cast(f, OAR_I32) : f;
    return true;
}
