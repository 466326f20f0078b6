/* onnxruntime's com.microsoft int8 operators, which its quantizer writes in the QOperator format
 * (quantize_static with QuantFormat.QOperator): QLinearAdd, QLinearMul, QLinearGlobalAveragePool,
 * QLinearAveragePool, QLinearConcat, QLinearSigmoid, QLinearLeakyRelu, QGemm (schemas of
 * onnxruntime 1.16.3's contrib ops). Scales and zero points per tensor (QGemm's b per column).
 *
 * QLinearAdd of two tensors of one shape runs oar's qadd (f32 dequantize, add, divide by the
 * output scale, round half to even: bit for bit the float definition). The others run an exact
 * float path, the definition "dequantize -> op -> quantize":
 *  - elementwise (Add with broadcasting, Mul, Sigmoid, LeakyRelu) and Concat: DequantizeLinear's
 *    f32 values ((x - zp) * scale), the f32 op, then y / y_scale in f32, rounded half to even,
 *    + zero point, saturated (ONNX's QuantizeLinear); Sigmoid and LeakyRelu with known
 *    parameters evaluate that chain once on the 256 codes and run qlut's byte lookup;
 *  - average pooling: the pooled means of the centred integers (x - zp) in double (the sums are
 *    exact), times x_scale, divided by y_scale, rounded half to even (the real value's rounding
 *    but at an exact tie or within 2^-50 of one);
 *  - QGemm: on qlinear where B is a constant symmetric i8 (transA = 0, alpha = 1: onnx_qdq.c,
 *    rounded as QLinearConv's epilogue), else the integer product (A - a_zp)(B - b_zp) + C in
 *    double (exact below 2^53), times alpha a_scale b_scale, then quantized as above or f32.
 * onnxruntime's own kernels round their fused float scales differently (QLinearAdd's u8 kernel,
 * the average pools), so their codes can be one step away from the definition: docs/onnx.md
 * counts them per case. DynamicQuantizeMatMul quantizes A as DynamicQuantizeLinear does (the
 * same arithmetic in onnxruntime's kernel), then runs qlinear with A's scale and zero point of the
 * call where B is a constant that centres onto i8, else the exact integer product in double;
 * either way y = sum * (a_scale * b_scale) + bias in f32. */
#include "io/onnx/onnx_ops.h"

#include "ops/quant.h"
#include "ops/quant_add.h"

#include <stdio.h>
#include <string.h>

/* A per-tensor scale: one positive finite f32 value, 0-d. */
static oar_tensor *scale_of(ox_ctx *c, oar_tensor *s, const char *what) {
    if (!s) {
        ox_fail(c, OAR_ERR_FORMAT, "expected input %s", what);
        return NULL;
    }
    if (s->numel != 1 || s->dtype != OAR_F32) {
        ox_unsupported(c, "%s of %lld values of %s; expected one f32 value (per tensor)", what, (long long)s->numel,
                       oar_dtype_name(s->dtype));
        return NULL;
    }
    if (ox_check_scale(c, s, what) != OAR_OK) return NULL;
    return s->ndim ? oar_reshape(s, NULL, 0) : s;
}

/* v of dtype dt as a constant of the running trace. */
static oar_tensor *const_scalar(double v, oar_dtype dt) {
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    oar_tensor *y = oar_scalar(v, dt);
    oar_active_trace = tr;
    return y ? ox_as_constant(y) : NULL;
}

/* A per-tensor zero point of x's dtype (absent: 0), 0-d. */
static oar_tensor *zp_of(ox_ctx *c, const oar_tensor *x, oar_tensor *z, const char *what) {
    if (ox_check_zp(c, x, z, what) != OAR_OK) return NULL;
    if (!z) return const_scalar(0, x->dtype);
    if (z->numel != 1) {
        ox_unsupported(c, "%s of %lld values; expected one (per tensor)", what, (long long)z->numel);
        return NULL;
    }
    return z->ndim ? oar_reshape(z, NULL, 0) : z;
}

/* A quantized input k with its scale (input ks) and zero point (input kz): checked. */
typedef struct qin {
    oar_tensor *x, *s, *z;
} qin;

static bool read_q(ox_ctx *c, int k, int ks, int kz, const char *name, qin *q) {
    char sn[64], zn[64];
    snprintf(sn, sizeof sn, "%s_scale", name);
    snprintf(zn, sizeof zn, "%s_zero_point", name);
    q->x = OX_IN(c, k);
    if (!q->x) {
        ox_fail(c, OAR_ERR_FORMAT, "expected input %s", name);
        return false;
    }
    if (ox_check_int8(c, q->x, name) != OAR_OK) return false;
    return (q->s = scale_of(c, OX_IN(c, ks), sn)) && (q->z = zp_of(c, q->x, kz >= 0 ? OX_IN(c, kz) : NULL, zn));
}

/* DequantizeLinear's f32 value: (x - zp) * scale, the difference exact, the product rounded once. */
static oar_tensor *deq(const qin *q) {
    oar_tensor *d = oar_sub(oar_cast(q->x, OAR_F32), oar_cast(q->z, OAR_F32));
    return d ? oar_mul(d, q->s) : NULL;
}

/* QuantizeLinear of f32 v: v / scale in f32, rounded half to even, + zero point, saturated. */
static oar_tensor *requant(oar_tensor *v, const qin *y) {
    oar_tensor *t = v ? oar_div(v, y->s) : NULL;
    return t ? ox_qround(oar_cast(t, OAR_F64), y->z, y->z->dtype) : NULL;
}

/* The output's scale and zero point (inputs ks, kz), its dtype that of x (the schemas' one T). */
static bool read_out(ox_ctx *c, const oar_tensor *x, int ks, int kz, qin *y) {
    y->x = NULL;
    return (y->s = scale_of(c, OX_IN(c, ks), "y_scale")) && (y->z = zp_of(c, x, OX_IN(c, kz), "y_zero_point"));
}

static bool same_shape(const oar_tensor *a, const oar_tensor *b) {
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static oar_status binary(ox_ctx *c, bool mul) {
    qin a, b, y;
    if (!read_q(c, 0, 1, 2, "A", &a) || !read_q(c, 3, 4, 5, "B", &b) || !read_out(c, a.x, 6, 7, &y))
        return oar_last_status();
    if (b.x->dtype != a.x->dtype)
        return ox_fail(c, OAR_ERR_DTYPE, "expected B of A's dtype %s, got %s", oar_dtype_name(a.x->dtype),
                       oar_dtype_name(b.x->dtype));
    if (!mul && same_shape(a.x, b.x)) { /* qadd: the same arithmetic, one pass over the bytes */
        oar_tensor *in[QA_N] = {a.x, a.s, a.z, b.x, b.s, b.z, y.s, y.z};
        oar_attr at[2] = {oar_attr_int(OAR_QACT_NONE), oar_attr_dtype(a.x->dtype)};
        return ox_set(c, 0, oar_op_call1(OAR_OP_qadd, in, QA_N, at));
    }
    oar_tensor *fa = deq(&a), *fb = deq(&b);
    return ox_set(c, 0, fa && fb ? requant(mul ? oar_mul(fa, fb) : oar_add(fa, fb), &y) : NULL);
}

oar_status ox_ms_QLinearAdd(ox_ctx *c) { return binary(c, false); }
oar_status ox_ms_QLinearMul(ox_ctx *c) { return binary(c, true); }

/* dequantize -> sigmoid or leaky_relu -> quantize of x (the float definition) */
static oar_tensor *unary_chain(ox_ctx *c, bool sigmoid, const qin *x, const qin *y) {
    oar_tensor *f = deq(x);
    if (f) f = sigmoid ? oar_sigmoid(f) : oar_leaky_relu(f, ox_attr_float(c, "alpha", 0.01));
    return requant(f, y);
}

/* The chain is a function of x's byte alone: with every parameter known it is evaluated once on
 * the 256 codes (the trace paused: the same kernels, the same bytes) and runs as qlut's lookup. */
static oar_status unary(ox_ctx *c, bool sigmoid) {
    qin x, y;
    if (!read_q(c, 0, 1, 2, "X", &x) || !read_out(c, x.x, 3, 4, &y)) return oar_last_status();
    if (!x.s->storage || !x.z->storage || !y.s->storage || !y.z->storage) return ox_set(c, 0, unary_chain(c, sigmoid, &x, &y));
    uint64_t tr = oar_active_trace;
    oar_active_trace = 0;
    bool u8 = x.x->dtype == OAR_U8;
    qin codes = x;
    codes.x = oar_cast(oar_arange(u8 ? 0 : -128, u8 ? 256 : 128, 1, OAR_I64), x.x->dtype); /* entry k: code k (- 128) */
    oar_tensor *table = codes.x ? unary_chain(c, sigmoid, &codes, &y) : NULL;
    oar_active_trace = tr;
    return ox_set(c, 0, table ? oar_qlut(x.x, ox_as_constant(table)) : NULL);
}

oar_status ox_ms_QLinearSigmoid(ox_ctx *c) { return unary(c, true); }
oar_status ox_ms_QLinearLeakyRelu(ox_ctx *c) { return unary(c, false); }

/* NHWC <-> NCHW for channels_last = 1 (dims 1..n-2 spatial, C last). */
static oar_tensor *move_channels(oar_tensor *x, bool to_first) {
    int perm[OAR_MAX_DIMS], n = x->ndim;
    perm[0] = 0;
    for (int d = 1; d < n; d++) perm[d] = to_first ? (d == 1 ? n - 1 : d - 1) : (d == n - 1 ? 1 : d + 1);
    return oar_permute(x, perm, n);
}

/* Average pooling on the centred integers in double, through the float translation of
 * fn (AveragePool or GlobalAveragePool) with this node's attributes, then scaled and quantized. */
static oar_status avg_pool(ox_ctx *c, ox_translate_fn fn) {
    qin x, y;
    if (!read_q(c, 0, 1, 2, "X", &x) || !read_out(c, x.x, 3, 4, &y)) return oar_last_status();
    if (x.x->ndim < 3) return ox_fail(c, OAR_ERR_SHAPE, "expected X of rank 3 or more, got rank %d", x.x->ndim);
    bool last = ox_attr_int(c, "channels_last", 0) != 0;
    oar_tensor *t = oar_sub(oar_cast(x.x, OAR_F64), oar_cast(x.z, OAR_F64));
    if (t && last) t = move_channels(t, true);
    if (!t) return oar_last_status();
    oar_tensor *in1[1] = {t}, *out1[1] = {NULL};
    bool want = true;
    ox_ctx sub = *c;
    sub.in = in1, sub.n_in = 1, sub.out = out1, sub.n_out = 1, sub.want = &want, sub.qv = NULL;
    oar_status st = fn(&sub);
    if (st != OAR_OK) return st;
    oar_tensor *m = out1[0];
    if (m && last) m = move_channels(m, false);
    oar_tensor *v = m ? oar_div(oar_mul(m, oar_cast(x.s, OAR_F64)), oar_cast(y.s, OAR_F64)) : NULL;
    return ox_set(c, 0, v ? ox_qround(v, y.z, y.z->dtype) : NULL);
}

/* The global mean from the integer sums: in f32 they are exact while H W 255 < 2^24 (and in any
 * order), then (S - H W zp) / (H W) x_scale / y_scale in double, as avg_pool's. A sixth of the
 * time of the double pooling on ResNet-20's last features (the u8 -> f64 cast and subtraction). */
oar_status ox_ms_QLinearGlobalAveragePool(ox_ctx *c) {
    qin x, y;
    if (!read_q(c, 0, 1, 2, "X", &x) || !read_out(c, x.x, 3, 4, &y)) return oar_last_status();
    if (x.x->ndim < 3) return ox_fail(c, OAR_ERR_SHAPE, "expected X of rank 3 or more, got rank %d", x.x->ndim);
    bool last = ox_attr_int(c, "channels_last", 0) != 0;
    int dims[OAR_MAX_DIMS], n = 0;
    int64_t count = 1;
    for (int d = last ? 1 : 2; d < (last ? x.x->ndim - 1 : x.x->ndim); d++) dims[n++] = d, count *= x.x->shape[d];
    if (count * 255 >= (1 << 24)) return avg_pool(c, ox_GlobalAveragePool);
    oar_tensor *sum = oar_sum(oar_cast(x.x, OAR_F32), dims, n, true), *cnt = const_scalar((double)count, OAR_F64);
    oar_tensor *v = sum && cnt ? oar_sub(oar_cast(sum, OAR_F64), oar_mul(oar_cast(x.z, OAR_F64), cnt)) : NULL;
    if (v) v = oar_div(oar_mul(oar_div(v, cnt), oar_cast(x.s, OAR_F64)), oar_cast(y.s, OAR_F64));
    return ox_set(c, 0, v ? ox_qround(v, y.z, y.z->dtype) : NULL);
}
oar_status ox_ms_QLinearAveragePool(ox_ctx *c) { return avg_pool(c, ox_AveragePool); }

/* Two known one-value parameters of one value and dtype. */
static bool same_params(oar_tensor *a, oar_tensor *b) {
    double x, y;
    return a->storage && b->storage && a->dtype == b->dtype && a->numel == 1 && b->numel == 1 &&
           oar_item(a, &x) == OAR_OK && oar_item(b, &y) == OAR_OK && x == y;
}

/* QLinearConcat(Y_scale, Y_zero_point, (X, X_scale, X_zero_point)...; axis) */
oar_status ox_ms_QLinearConcat(ox_ctx *c) {
    int n = (c->n_in - 2) / 3;
    if (n < 1 || c->n_in != 2 + 3 * n)
        return ox_fail(c, OAR_ERR_FORMAT, "expected Y_scale, Y_zero_point and triples (X, X_scale, X_zero_point), "
                                          "got %d inputs", c->n_in);
    qin xs[OX_MAX_NODE_IO], y;
    oar_tensor *fs[OX_MAX_NODE_IO];
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "X%d", i);
        if (!read_q(c, 2 + 3 * i, 3 + 3 * i, 4 + 3 * i, name, &xs[i])) return oar_last_status();
        if (xs[i].x->dtype != xs[0].x->dtype)
            return ox_fail(c, OAR_ERR_DTYPE, "expected every X of X0's dtype %s, got %s for X%d",
                           oar_dtype_name(xs[0].x->dtype), oar_dtype_name(xs[i].x->dtype), i);
    }
    if (!read_out(c, xs[0].x, 0, 1, &y)) return oar_last_status();
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), xs[0].x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    /* every input at the output's scale and zero point: the bytes themselves (quantizing a
     * dequantized code with its own parameters gives the code back, as in onnx_qdq.c) */
    bool same = true;
    for (int i = 0; i < n && same; i++) same = same_params(xs[i].s, y.s) && same_params(xs[i].z, y.z);
    if (same) {
        oar_tensor *qs[OX_MAX_NODE_IO];
        for (int i = 0; i < n; i++) qs[i] = xs[i].x;
        return ox_set(c, 0, n == 1 ? oar_clone(qs[0]) : oar_concat(qs, n, axis));
    }
    for (int i = 0; i < n; i++)
        if (!(fs[i] = deq(&xs[i]))) return oar_last_status();
    return ox_set(c, 0, requant(n == 1 ? fs[0] : oar_concat(fs, n, axis), &y));
}

/* B's scale and zero point (QGemm, DynamicQuantizeMatMul): one f32 value, or one per column of
 * B's n; the zero point of as many values. */
static oar_status per_column(ox_ctx *c, const oar_tensor *bs, const oar_tensor *bz, int64_t n) {
    if (bs->dtype != OAR_F32 || (bs->numel != 1 && (bs->ndim != 1 || bs->shape[0] != n)))
        return ox_fail(c, OAR_ERR_SHAPE, "expected b_scale one f32 value or %lld (per column), got %lld of %s",
                       (long long)n, (long long)bs->numel, oar_dtype_name(bs->dtype));
    if (bz && bz->numel != bs->numel)
        return ox_fail(c, OAR_ERR_SHAPE, "expected b_zero_point of b_scale's %lld values, got %lld",
                       (long long)bs->numel, (long long)bz->numel);
    return OAR_OK;
}

/* QGemm(A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp; alpha, transA, transB): b_scale and
 * b_zero_point per tensor or per column of op(B); C int32 with scale alpha a_scale b_scale. */
oar_status ox_ms_QGemm(ox_ctx *c) {
    qin a;
    oar_tensor *b = OX_IN(c, 3), *bs = OX_IN(c, 4), *bz = OX_IN(c, 5), *bias = OX_IN(c, 6);
    if (!read_q(c, 0, 1, 2, "A", &a)) return oar_last_status();
    if (!b || !bs) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs B and b_scale");
    oar_status st = ox_check_int8(c, b, "B");
    if (st == OAR_OK) st = ox_check_zp(c, b, bz, "b_zero_point");
    if (st == OAR_OK) st = ox_check_scale(c, bs, "b_scale");
    if (st != OAR_OK) return st;
    if (a.x->ndim != 2 || b->ndim != 2)
        return ox_fail(c, OAR_ERR_SHAPE, "expected A and B 2-D, got ranks %d and %d", a.x->ndim, b->ndim);
    oar_tensor *yq = NULL;
    bool ta = ox_attr_int(c, "transA", 0) != 0, tb = ox_attr_int(c, "transB", 0) != 0;
    int64_t k = ta ? a.x->shape[0] : a.x->shape[1], kb = tb ? b->shape[1] : b->shape[0];
    int64_t n = tb ? b->shape[0] : b->shape[1];
    if (k != kb)
        return ox_fail(c, OAR_ERR_SHAPE, "expected op(A)'s %lld columns to match op(B)'s %lld rows", (long long)k,
                       (long long)kb);
    if ((st = per_column(c, bs, bz, n)) != OAR_OK) return st;
    if (bias && bias->dtype != OAR_I32)
        return ox_fail(c, OAR_ERR_DTYPE, "expected C int32 (scale alpha * a_scale * b_scale), got %s",
                       oar_dtype_name(bias->dtype));
    if (ox_qgemm_int8(c, &yq)) return ox_set(c, 0, yq);
    oar_tensor *fa = oar_sub(oar_cast(a.x, OAR_F64), oar_cast(a.z, OAR_F64)), *fb = oar_cast(b, OAR_F64);
    if (fa && ta) fa = oar_transpose(fa, 0, 1);
    if (fb && tb) fb = oar_transpose(fb, 0, 1);
    if (fb && bz) fb = oar_sub(fb, oar_cast(bz->numel == 1 ? oar_reshape(bz, NULL, 0) : bz, OAR_F64));
    oar_tensor *acc = fa && fb ? oar_matmul(fa, fb) : NULL; /* exact: integers below 2^53 */
    if (acc && bias) acc = oar_add(acc, oar_cast(bias, OAR_F64));
    oar_tensor *sc = oar_mul(oar_cast(a.s, OAR_F64), oar_cast(bs->numel == 1 ? oar_reshape(bs, NULL, 0) : bs, OAR_F64));
    if (sc) sc = oar_mul(sc, const_scalar(ox_attr_float(c, "alpha", 1.0), OAR_F64));
    oar_tensor *v = acc && sc ? oar_mul(acc, sc) : NULL;
    if (!OX_IN(c, 7)) return ox_set(c, 0, v ? oar_cast(v, OAR_F32) : NULL); /* float output */
    /* y's dtype is y_zero_point's (u8 without one), independent of A's */
    oar_tensor *yz = OX_IN(c, 8), *ys = scale_of(c, OX_IN(c, 7), "y_scale");
    if (!ys) return oar_last_status();
    if (yz && ox_check_int8(c, yz, "y_zero_point") != OAR_OK) return oar_last_status();
    if (yz && yz->numel != 1)
        return ox_unsupported(c, "y_zero_point of %lld values; expected one (per tensor)", (long long)yz->numel);
    oar_tensor *z = yz ? (yz->ndim ? oar_reshape(yz, NULL, 0) : yz) : const_scalar(0, OAR_U8);
    return ox_set(c, 0, v && z ? ox_qround(oar_div(v, oar_cast(ys, OAR_F64)), z, z->dtype) : NULL);
}

/* DynamicQuantizeMatMul(A f32, B u8/i8, b_scale, b_zero_point?, bias?): A quantized per call to u8
 * (DynamicQuantizeLinear), y = (A_q - a_zp)(B - b_zp) * (a_scale * b_scale) + bias, f32; B 2-D,
 * b_scale and b_zero_point per tensor or per column, bias [N]. */
oar_status ox_ms_DynamicQuantizeMatMul(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 1), *bs = OX_IN(c, 2), *bz = OX_IN(c, 3), *bias = OX_IN(c, 4);
    if (!a || !b || !bs) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs A, B and b_scale");
    oar_status st = ox_check_int8(c, b, "B");
    if (st == OAR_OK) st = ox_check_zp(c, b, bz, "b_zero_point");
    if (st == OAR_OK) st = ox_check_scale(c, bs, "b_scale");
    if (st != OAR_OK) return st;
    if (a->ndim < 1 || b->ndim != 2 || a->shape[a->ndim - 1] != b->shape[0])
        return ox_fail(c, OAR_ERR_SHAPE, "expected A [..., K] and a 2-D B [K, N] with A's last dim K, got ranks %d "
                       "and %d (A's last dim %lld, B's rows %lld)", a->ndim, b->ndim,
                       (long long)(a->ndim ? a->shape[a->ndim - 1] : 0), (long long)b->shape[0]);
    int64_t n = b->shape[1];
    if ((st = per_column(c, bs, bz, n)) != OAR_OK) return st;
    if (bias && (bias->dtype != OAR_F32 || bias->ndim != 1 || bias->shape[0] != n))
        return ox_fail(c, OAR_ERR_SHAPE, "expected bias f32 of shape [%lld], got %s of %d dims", (long long)n,
                       oar_dtype_name(bias->dtype), bias->ndim);
    oar_tensor *aq, *as, *az, *y = NULL;
    if ((st = ox_dynamic_quantize(c, a, &aq, &as, &az)) != OAR_OK) return st;
    if (ox_dynamic_matmul_int8(c, aq, as, az, &y)) return ox_set(c, 0, y);
    /* the exact integer product in double (below 2^53), then the f32 scale and bias */
    oar_tensor *fa = oar_sub(oar_cast(aq, OAR_F64), oar_cast(az, OAR_F64)), *fb = oar_cast(b, OAR_F64);
    if (fb && bz) fb = oar_sub(fb, oar_cast(bz->numel == 1 ? oar_reshape(bz, NULL, 0) : bz, OAR_F64));
    oar_tensor *acc = fa && fb ? oar_cast(oar_matmul(fa, fb), OAR_F32) : NULL;
    oar_tensor *sc = oar_mul(as, bs->numel == 1 ? oar_reshape(bs, NULL, 0) : bs);
    y = acc && sc ? oar_mul(acc, sc) : NULL;
    return ox_set(c, 0, y && bias ? oar_add(y, bias) : y);
}
