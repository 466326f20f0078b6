/* ONNX quantization operators as compositions of oar's ops, computed in double (exact for the
 * 8-bit integer products and sums involved): DequantizeLinear, QuantizeLinear (round half to
 * even, saturate), DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
 * QLinearConv. Scales per tensor, per axis, or per block; int8 and uint8 data, and int16/uint16
 * for QuantizeLinear and DequantizeLinear (the integer products stay 8-bit: oar's quantized
 * kernels are). */
#include "io/onnx/onnx_ops.h"

#include <math.h>
#include <string.h>

/* A scale or zero point laid out to broadcast against x: per tensor as is, per axis as
 * [1.., D, ..1], per block repeated block_size times along axis. */
static oar_tensor *per_axis(ox_ctx *c, oar_tensor *s, const oar_tensor *x, bool blocked_ok) {
    if (!s || s->numel == 1) return s ? oar_reshape(s, NULL, 0) : NULL;
    int axis = ox_axis(c, ox_attr_int(c, "axis", 1), x->ndim, "axis");
    if (axis < 0) return NULL;
    int64_t block = blocked_ok ? ox_attr_int(c, "block_size", 0) : 0;
    if (block > 0) { /* s has x's rank, dim axis of size ceil(D / block) */
        if (s->ndim != x->ndim) {
            ox_fail(c, OAR_ERR_SHAPE, "blocked scale of rank %d for an input of rank %d", s->ndim, x->ndim);
            return NULL;
        }
        int64_t e[OAR_MAX_DIMS + 1], r[OAR_MAX_DIMS];
        int n = 0;
        for (int d = 0; d < s->ndim; d++) {
            e[n++] = s->shape[d];
            if (d == axis) e[n++] = block;
            r[d] = d == axis ? s->shape[d] * block : s->shape[d];
        }
        oar_tensor *rep = oar_reshape(oar_expand(oar_unsqueeze(s, axis + 1), e, n), r, s->ndim);
        return rep ? oar_slice(rep, axis, 0, x->shape[axis], 1) : NULL;
    }
    if (s->ndim != 1 || s->shape[0] != x->shape[axis]) {
        ox_fail(c, OAR_ERR_SHAPE, "expected a scale of one value or of dim %d's size %lld", axis,
                (long long)x->shape[axis]);
        return NULL;
    }
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = d == axis ? s->shape[0] : 1;
    return oar_reshape(s, shape, x->ndim);
}

static oar_tensor *f64(oar_tensor *t) { return t ? oar_cast(t, OAR_F64) : NULL; }

/* x - zero point, in double. */
static oar_tensor *centered(oar_tensor *x, oar_tensor *zp) {
    oar_tensor *d = f64(x);
    return d && zp ? oar_sub(d, f64(zp)) : d;
}

oar_status ox_check_int8(ox_ctx *c, const oar_tensor *t, const char *what) {
    if (t && t->dtype != OAR_I8 && t->dtype != OAR_U8)
        return ox_unsupported(c, "%s of dtype %s; oar's quantized types are int8 and uint8", what,
                              oar_dtype_name(t->dtype));
    return OAR_OK;
}

/* A scale must be positive and finite where it is known (ONNX leaves a zero scale undefined:
 * QuantizeLinear would divide by it). */
oar_status ox_check_scale(ox_ctx *c, oar_tensor *s, const char *what) {
    if (!s) return OAR_OK;
    if (s->dtype != OAR_F32 && s->dtype != OAR_F64 && s->dtype != OAR_F16 && s->dtype != OAR_BF16)
        return ox_fail(c, OAR_ERR_DTYPE, "expected a floating %s, got %s", what, oar_dtype_name(s->dtype));
    if (!s->storage) return OAR_OK;
    uint64_t tr = oar_active_trace; /* read on the host, not traced */
    oar_active_trace = 0;
    oar_tensor *d = oar_contiguous(oar_cast(s, OAR_F64));
    oar_active_trace = tr;
    if (!d) return oar_last_status();
    const double *v = oar_data(d);
    for (int64_t i = 0; i < d->numel; i++)
        if (!(v[i] > 0) || v[i] == (double)INFINITY)
            return ox_fail(c, OAR_ERR_INVALID_ARG, "expected a positive finite %s, got %s[%lld] = %g; the model's "
                           "quantization parameters are broken (re-run its calibration)", what, what, (long long)i, v[i]);
    return OAR_OK;
}

/* A zero point's dtype must be its data's. */
oar_status ox_check_zp(ox_ctx *c, const oar_tensor *x, const oar_tensor *zp, const char *what) {
    size_t n = strcspn(what, "_");
    if (x && zp && zp->dtype != x->dtype)
        return ox_fail(c, OAR_ERR_DTYPE, "expected %s of %.*s's dtype %s, got %s; the two must match", what, (int)n,
                       what, oar_dtype_name(x->dtype), oar_dtype_name(zp->dtype));
    return OAR_OK;
}

/* round half to even, + zero point, saturated to dt's range (u8, i8, u16, i16, i4, u4, i2 or
 * u2), as dt */
oar_tensor *ox_qround(oar_tensor *v, oar_tensor *zp, oar_dtype dt) {
    oar_tensor *q = oar_round(v);
    if (q && zp) q = oar_add(q, f64(zp));
    double lo = dt == OAR_U8 || dt == OAR_U16 || dt == OAR_U4 || dt == OAR_U2 ? 0 : dt == OAR_I16 ? -32768
              : dt == OAR_I4 ? -8 : dt == OAR_I2 ? -2 : -128;
    double hi = dt == OAR_U8 ? 255 : dt == OAR_U16 ? 65535 : dt == OAR_I16 ? 32767 : oar_dtype_is_lowbit(dt)
              ? oar_lowbit_max(dt) : 127;
    if (q) q = oar_clip(q, lo, hi);
    return q ? oar_cast(q, dt) : NULL;
}

static bool qdq_16(oar_dtype dt) { return dt == OAR_I16 || dt == OAR_U16; }
/* float8 (not e8m0, a scale type), float4e2m1, int4/uint4, int2/uint2: opsets 19-25 */
static bool qdq_lowbit(oar_dtype dt) { return oar_dtype_is_lowbit(dt) && dt != OAR_F8E8M0; }
static bool qdq_int_lowbit(oar_dtype dt) { return dt == OAR_I4 || dt == OAR_U4 || dt == OAR_I2 || dt == OAR_U2; }

oar_status ox_DequantizeLinear(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *scale = OX_IN(c, 1), *zp = OX_IN(c, 2);
    if (!x || !scale) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs x and x_scale");
    /* int32: a quantized bias; int16/uint16: 16-bit activations (opset 21) */
    oar_status st = x->dtype == OAR_I32 || qdq_16(x->dtype) || qdq_lowbit(x->dtype) ? OAR_OK : ox_check_int8(c, x, "x");
    if (st == OAR_OK) st = ox_check_zp(c, x, zp, "x_zero_point");
    if (st == OAR_OK) st = ox_check_scale(c, scale, "x_scale");
    if (st != OAR_OK) return st;
    oar_tensor *q = NULL;
    if (ox_qdq_dequantize(c, &q)) return ox_set(c, 0, q);
    oar_tensor *z = zp ? per_axis(c, zp, x, true) : NULL, *s = per_axis(c, scale, x, true);
    if ((zp && !z) || !s) return oar_last_status();
    oar_tensor *y = oar_mul(centered(x, z), f64(s));
    return ox_set(c, 0, y ? oar_cast(y, scale->dtype) : NULL);
}

oar_status ox_QuantizeLinear(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *scale = OX_IN(c, 1), *zp = OX_IN(c, 2);
    if (!x || !scale) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs x and y_scale");
    oar_status st = ox_check_scale(c, scale, "y_scale");
    if (st != OAR_OK) return st;
    oar_tensor *y = NULL;
    if (ox_qdq_quantize(c, &y)) return ox_set(c, 0, y);
    oar_dtype dt = zp ? zp->dtype : OAR_U8;
    int64_t odt = ox_attr_int(c, "output_dtype", 0);
    if (odt && !ox_dtype_from_onnx((int32_t)odt, &dt))
        return ox_unsupported(c, "output_dtype %s; QuantizeLinear gives int8, uint8, int16, uint16, float8, float4, "
                                 "int4, uint4, int2 or uint2 here", ox_onnx_type_name((int32_t)odt));
    if (dt != OAR_U8 && dt != OAR_I8 && !qdq_16(dt) && !qdq_lowbit(dt))
        return ox_unsupported(c, "output dtype %s; QuantizeLinear gives int8, uint8, int16, uint16, float8, float4, "
                                 "int4, uint4, int2 or uint2 here", oar_dtype_name(dt));
    /* x / scale in x's precision, as the reference computes it, then rounded */
    oar_tensor *s = per_axis(c, scale, x, true), *z = zp ? per_axis(c, zp, x, true) : NULL;
    if (!s || (zp && !z)) return oar_last_status();
    oar_tensor *v = oar_div(x, s->dtype == x->dtype ? s : oar_cast(s, x->dtype));
    if (qdq_lowbit(dt) && !qdq_int_lowbit(dt)) { /* a float type: x / scale (+ zero point) converted */
        if (v && z) v = oar_add(f64(v), f64(z));
        return ox_set(c, 0, ox_cast_onnx(v, dt, ox_attr_int(c, "saturate", 1) != 0));
    }
    return ox_set(c, 0, v ? ox_qround(f64(v), z, dt) : NULL);
}

/* DynamicQuantizeLinear's definition (ONNX's reference and onnxruntime's kernel agree): the range
 * of x widened to hold 0, scale = (max - min) / 255 in f32 (1 when x is all zero: the range is
 * empty), zero point = round(clip(-min / scale, 0, 255)), y = saturate(round(x / scale) + zero
 * point), every rounding half to even. Composed of ops, so a compiled model quantizes each call's
 * input with that call's range. */
oar_status ox_dynamic_quantize(ox_ctx *c, oar_tensor *x, oar_tensor **y, oar_tensor **scale, oar_tensor **zp) {
    if (x->dtype != OAR_F32)
        return ox_fail(c, OAR_ERR_DTYPE, "expected x f32 (DynamicQuantizeLinear's T1 is float), got %s",
                       oar_dtype_name(x->dtype));
    if (x->numel == 0) return ox_fail(c, OAR_ERR_SHAPE, "expected x with at least one element: its range sets the scale");
    oar_tensor *hi = oar_maximum_scalar(oar_amax(x, NULL, 0, false), 0.0);
    oar_tensor *lo = oar_minimum_scalar(oar_amin(x, NULL, 0, false), 0.0);
    oar_tensor *range = oar_sub(hi, lo), *one = oar_ones_like(range);
    oar_tensor *s = range && one ? oar_where(oar_eq_scalar(range, 0.0), one, oar_div_scalar(range, 255.0)) : NULL;
    oar_tensor *z0 = s ? oar_neg(oar_div(lo, s)) : NULL; /* qmin - min / scale, qmin = 0 */
    oar_tensor *z = z0 ? oar_cast(oar_round(oar_clip(z0, 0, 255)), OAR_U8) : NULL;
    /* in f32, as exact as in double here: |x / scale| <= 255, so round(x / scale) + zp is an
     * integer below 2^9; f32 lets the elementwise kernels (and the fusion pass) run it */
    oar_tensor *q = s && z ? oar_round(oar_div(x, s)) : NULL;
    q = q ? oar_clip(oar_add(q, oar_cast(z, OAR_F32)), 0, 255) : NULL;
    *y = q ? oar_cast(q, OAR_U8) : NULL;
    *scale = s;
    *zp = z;
    return *y ? OAR_OK : oar_last_status();
}

oar_status ox_DynamicQuantizeLinear(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *y, *s, *z;
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected input x");
    oar_status st = ox_dynamic_quantize(c, x, &y, &s, &z);
    if (st == OAR_OK) st = ox_set(c, 0, y);
    if (st == OAR_OK) st = ox_set(c, 1, s);
    return st == OAR_OK ? ox_set(c, 2, z) : st;
}

/* A zero point of A per row ([M]) or of B per column ([N]) broadcast against the product. */
static oar_tensor *zp_rows(oar_tensor *zp, bool of_a) {
    if (!zp || zp->numel == 1 || zp->ndim != 1) return zp;
    int64_t shape[2] = {zp->shape[0], 1};
    return of_a ? oar_reshape(zp, shape, 2) : zp;
}

oar_status ox_MatMulInteger(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 1);
    if (!a || !b) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs A and B");
    oar_status st = ox_check_int8(c, a, "A");
    if (st == OAR_OK) st = ox_check_int8(c, b, "B");
    if (st == OAR_OK) st = ox_check_zp(c, a, OX_IN(c, 2), "a_zero_point");
    if (st == OAR_OK) st = ox_check_zp(c, b, OX_IN(c, 3), "b_zero_point");
    if (st != OAR_OK) return st;
    oar_tensor *q = NULL;
    if (ox_integer_int8(c, false, &q)) return ox_set(c, 0, q);
    oar_tensor *y = oar_matmul(centered(a, zp_rows(OX_IN(c, 2), true)), centered(b, zp_rows(OX_IN(c, 3), false)));
    return ox_set(c, 0, y ? oar_cast(y, OAR_I32) : NULL);
}

/* A zero point or scale per output channel of W [M, ...], shaped [M, 1, ...]. */
static oar_tensor *per_out_channel(oar_tensor *t, const oar_tensor *w) {
    if (!t || t->numel == 1) return t ? oar_reshape(t, NULL, 0) : NULL;
    int64_t shape[OAR_MAX_DIMS] = {t->numel};
    for (int d = 1; d < w->ndim; d++) shape[d] = 1;
    return oar_reshape(t, shape, w->ndim);
}

oar_status ox_ConvInteger(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *w = OX_IN(c, 1);
    if (!x || !w) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs x and w");
    oar_status st = ox_check_int8(c, x, "x");
    if (st == OAR_OK) st = ox_check_int8(c, w, "w");
    if (st == OAR_OK) st = ox_check_zp(c, x, OX_IN(c, 2), "x_zero_point");
    if (st == OAR_OK) st = ox_check_zp(c, w, OX_IN(c, 3), "w_zero_point");
    if (st != OAR_OK) return st;
    oar_tensor *q = NULL;
    if (ox_integer_int8(c, true, &q)) return ox_set(c, 0, q);
    oar_tensor *xz = OX_IN(c, 2);
    if (xz && xz->numel != 1) return ox_unsupported(c, "x_zero_point with more than one value");
    oar_tensor *y = ox_conv(c, centered(x, xz), centered(w, per_out_channel(OX_IN(c, 3), w)), NULL);
    return ox_set(c, 0, y ? oar_cast(y, OAR_I32) : NULL);
}

oar_status ox_QLinearMatMul(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *as = OX_IN(c, 1), *az = OX_IN(c, 2), *b = OX_IN(c, 3), *bs = OX_IN(c, 4),
               *bz = OX_IN(c, 5), *ys = OX_IN(c, 6), *yz = OX_IN(c, 7);
    if (!a || !as || !b || !bs || !ys) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs a, a_scale, b, b_scale, y_scale");
    oar_status st = ox_check_int8(c, a, "a");
    if (st == OAR_OK) st = ox_check_int8(c, b, "b");
    if (st == OAR_OK) st = ox_check_zp(c, a, az, "a_zero_point");
    if (st == OAR_OK) st = ox_check_zp(c, b, bz, "b_zero_point");
    if (st == OAR_OK) st = ox_check_scale(c, as, "a_scale");
    if (st == OAR_OK) st = ox_check_scale(c, bs, "b_scale");
    if (st == OAR_OK) st = ox_check_scale(c, ys, "y_scale");
    if (st != OAR_OK) return st;
    oar_tensor *q = NULL;
    if (ox_qlinear_matmul_int8(c, &q)) return ox_set(c, 0, q);
    oar_dtype dt = yz ? yz->dtype : OAR_U8;
    /* (a - az) as (b - bz) bs / ys, rounded: the integer product exactly, then one scaling */
    oar_tensor *acc = oar_matmul(oar_mul(centered(a, zp_rows(az, true)), f64(zp_rows(as, true))),
                                 oar_mul(centered(b, zp_rows(bz, false)), f64(zp_rows(bs, false))));
    return ox_set(c, 0, acc ? ox_qround(oar_div(acc, f64(ys)), yz, dt) : NULL);
}

oar_status ox_QLinearConv(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *xs = OX_IN(c, 1), *xz = OX_IN(c, 2), *w = OX_IN(c, 3), *ws = OX_IN(c, 4),
               *wz = OX_IN(c, 5), *ys = OX_IN(c, 6), *yz = OX_IN(c, 7), *b = OX_IN(c, 8);
    if (!x || !xs || !w || !ws || !ys) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs x, x_scale, w, w_scale, y_scale");
    oar_status st = ox_check_int8(c, x, "x");
    if (st == OAR_OK) st = ox_check_int8(c, w, "w");
    if (st == OAR_OK) st = ox_check_zp(c, x, xz, "x_zero_point");
    if (st == OAR_OK) st = ox_check_zp(c, w, wz, "w_zero_point");
    if (st == OAR_OK) st = ox_check_scale(c, xs, "x_scale");
    if (st == OAR_OK) st = ox_check_scale(c, ws, "w_scale");
    if (st == OAR_OK) st = ox_check_scale(c, ys, "y_scale");
    if (st == OAR_OK && ws->numel != 1 && (ws->ndim != 1 || ws->shape[0] != w->shape[0]))
        st = ox_fail(c, OAR_ERR_SHAPE, "expected w_scale of one value or of w's %lld output channels, got %lld values",
                     (long long)w->shape[0], (long long)ws->numel);
    if (st == OAR_OK && b && b->dtype != OAR_I32)
        st = ox_fail(c, OAR_ERR_DTYPE, "expected an int32 bias B, got %s", oar_dtype_name(b->dtype));
    if (st != OAR_OK) return st;
    oar_tensor *q = NULL;
    if (ox_qlinear_conv_int8(c, &q)) return ox_set(c, 0, q);
    if (xz && xz->numel != 1) return ox_unsupported(c, "x_zero_point with more than one value");
    oar_dtype dt = yz ? yz->dtype : OAR_U8;
    oar_tensor *acc = ox_conv(c, centered(x, xz), centered(w, per_out_channel(wz, w)), NULL);
    if (!acc) return oar_last_status();
    if (b) { /* int32 bias in units of x_scale * w_scale */
        int64_t shape[OAR_MAX_DIMS] = {1, b->numel};
        for (int d = 2; d < acc->ndim; d++) shape[d] = 1;
        acc = oar_add(acc, oar_reshape(f64(b), shape, acc->ndim));
    }
    /* per output channel scale: [M] -> [1, M, 1, ...] */
    oar_tensor *s = oar_mul(f64(xs), f64(ws));
    if (s && s->numel > 1) {
        int64_t shape[OAR_MAX_DIMS] = {1, s->numel};
        for (int d = 2; d < acc->ndim; d++) shape[d] = 1;
        s = oar_reshape(s, shape, acc->ndim);
    }
    oar_tensor *v = acc && s ? oar_div(oar_mul(acc, s), f64(ys)) : NULL;
    return ox_set(c, 0, v ? ox_qround(v, yz, dt) : NULL);
}
