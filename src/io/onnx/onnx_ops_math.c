/* ONNX elementwise operators, reductions and matrix products, translated to oar's ops. */
#include "io/onnx/onnx_ops.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- binary: NumPy broadcasting (opset >= 7), or the old broadcast/axis attributes */
static oar_tensor *align_old_broadcast(ox_ctx *c, oar_tensor *a, oar_tensor *b) {
    if (c->opset >= 7 || !ox_attr_int(c, "broadcast", 0) || !ox_attr(c, "axis") || !b) return b;
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), a->ndim, "axis");
    if (axis < 0) return NULL;
    int64_t shape[OAR_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < axis; d++) shape[n++] = 1;
    for (int d = 0; d < b->ndim && n < OAR_MAX_DIMS; d++) shape[n++] = b->shape[d];
    while (n < a->ndim) shape[n++] = 1;
    return oar_reshape(b, shape, n);
}

typedef oar_tensor *(*binary_fn)(oar_tensor *, oar_tensor *);

static oar_status binary(ox_ctx *c, binary_fn f) {
    oar_tensor *a = OX_IN(c, 0), *b = align_old_broadcast(c, a, OX_IN(c, 1));
    if (!a || !b) return a ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
    if (a->dtype != b->dtype)
        return ox_fail(c, OAR_ERR_DTYPE, "expected inputs of one dtype, got %s and %s", oar_dtype_name(a->dtype),
                       oar_dtype_name(b->dtype));
    return ox_set(c, 0, f(a, b));
}

oar_status ox_Add(ox_ctx *c) { return binary(c, oar_add); }
oar_status ox_Sub(ox_ctx *c) { return binary(c, oar_sub); }
oar_status ox_Mul(ox_ctx *c) { return binary(c, oar_mul); }
oar_status ox_Equal(ox_ctx *c) { return binary(c, oar_eq); }
oar_status ox_Less(ox_ctx *c) { return binary(c, oar_lt); }
oar_status ox_Greater(ox_ctx *c) { return binary(c, oar_gt); }
oar_status ox_LessOrEqual(ox_ctx *c) { return binary(c, oar_le); }
oar_status ox_GreaterOrEqual(ox_ctx *c) { return binary(c, oar_ge); }
oar_status ox_And(ox_ctx *c) { return binary(c, oar_logical_and); }
oar_status ox_Or(ox_ctx *c) { return binary(c, oar_logical_or); }

/* Integer division truncates toward zero in ONNX (C semantics), exactly in every width. */
static oar_tensor *div_trunc(oar_tensor *a, oar_tensor *b) {
    return oar_dtype_is_float(a->dtype) ? oar_div(a, b) : oar_div_trunc(a, b);
}
oar_status ox_Div(ox_ctx *c) { return binary(c, div_trunc); }

oar_status ox_Pow(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = align_old_broadcast(c, a, OX_IN(c, 1));
    if (!a || !b) return a ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
    if (!oar_dtype_is_float(a->dtype)) { /* integer bases: computed in double, as the reference does */
        oar_tensor *y = oar_pow(oar_cast(a, OAR_F64), oar_cast(b, OAR_F64));
        return ox_set(c, 0, y ? oar_cast(y, a->dtype) : NULL);
    }
    if (b->dtype != a->dtype) b = oar_cast(b, a->dtype); /* the exponent may have another type */
    return ox_set(c, 0, b ? oar_pow(a, b) : NULL);
}

static oar_status variadic(ox_ctx *c, binary_fn f, bool mean) {
    oar_tensor *y = NULL;
    for (int k = 0; k < c->n_in; k++) {
        oar_tensor *x = OX_IN(c, k);
        if (!x) continue;
        if (y && x->dtype != y->dtype)
            return ox_fail(c, OAR_ERR_DTYPE, "expected inputs of one dtype, got %s and %s", oar_dtype_name(y->dtype),
                           oar_dtype_name(x->dtype));
        y = y ? f(y, x) : x;
        if (!y) return oar_last_status();
    }
    if (!y) return ox_fail(c, OAR_ERR_FORMAT, "expected at least one input");
    if (mean) y = oar_div_scalar(y, (double)c->n_in);
    else if (c->n_in == 1) y = oar_clone(y);
    return ox_set(c, 0, y);
}
oar_status ox_Max(ox_ctx *c) { return variadic(c, oar_maximum, false); }
oar_status ox_Min(ox_ctx *c) { return variadic(c, oar_minimum, false); }
oar_status ox_Sum(ox_ctx *c) { return variadic(c, oar_add, false); }
oar_status ox_Mean(ox_ctx *c) { return variadic(c, oar_add, true); }

oar_status ox_Where(ox_ctx *c) {
    oar_tensor *cond = OX_IN(c, 0), *a = OX_IN(c, 1), *b = OX_IN(c, 2);
    if (!cond || !a || !b) return ox_fail(c, OAR_ERR_FORMAT, "expected three inputs");
    return ox_set(c, 0, oar_where(cond, a, b));
}

/* ---- unary */
#define UNARY(onnx, fn)                                                                              \
    oar_status ox_##onnx(ox_ctx *c) {                                                                \
        oar_tensor *x = OX_IN(c, 0);                                                                 \
        return x ? ox_set(c, 0, fn(x)) : ox_fail(c, OAR_ERR_FORMAT, "expected an input");           \
    }
UNARY(Neg, oar_neg)
UNARY(Abs, oar_abs)
UNARY(Exp, oar_exp)
UNARY(Log, oar_log)
UNARY(Sqrt, oar_sqrt)
UNARY(Sin, oar_sin)
UNARY(Cos, oar_cos)
UNARY(Tanh, oar_tanh)
UNARY(Sigmoid, oar_sigmoid)
UNARY(Relu, oar_relu)
UNARY(Erf, oar_erf)
UNARY(Floor, oar_floor)
UNARY(Ceil, oar_ceil)
UNARY(Round, oar_round)
UNARY(Sign, oar_sign)
UNARY(Not, oar_logical_not)
UNARY(Asin, oar_asin)
UNARY(Acos, oar_acos)
UNARY(Atan, oar_atan)
UNARY(Sinh, oar_sinh)
UNARY(Asinh, oar_asinh)
UNARY(Atanh, oar_atanh)
UNARY(Cosh, oar_cosh)
UNARY(Acosh, oar_acosh)
UNARY(BitwiseNot, oar_bitwise_not)
UNARY(Det, oar_linalg_det) /* [..., M, M] -> [...]; on OpenBLAS's LAPACK (refused, saying so, in builds without) */

/* The ones without an op of their own, composed of those that exist. */
static oar_tensor *tan_of(oar_tensor *x) { return oar_div(oar_sin(x), oar_cos(x)); }
static oar_tensor *isnan_of(oar_tensor *x) { return oar_ne(x, x); }
static oar_tensor *hardswish_of(oar_tensor *x) { /* x max(0, min(1, x/6 + 1/2)) */
    return oar_mul(x, oar_clip(oar_add_scalar(oar_div_scalar(x, 6.0), 0.5), 0.0, 1.0));
}
UNARY(Tan, tan_of)
UNARY(IsNaN, isnan_of)
UNARY(HardSwish, hardswish_of)
#undef UNARY

oar_status ox_IsInf(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    bool pos = ox_attr_int(c, "detect_positive", 1) != 0, neg = ox_attr_int(c, "detect_negative", 1) != 0;
    if (!pos && !neg) return ox_set(c, 0, oar_zeros(x->shape, x->ndim, OAR_BOOL));
    oar_tensor *p = pos ? oar_eq_scalar(x, INFINITY) : NULL, *n = neg ? oar_eq_scalar(x, -INFINITY) : NULL;
    return ox_set(c, 0, p && n ? oar_logical_or(p, n) : p ? p : n);
}

oar_status ox_Xor(ox_ctx *c) { return binary(c, oar_ne); } /* on bools, != is exclusive or */
oar_status ox_BitwiseAnd(ox_ctx *c) { return binary(c, oar_bitwise_and); }
oar_status ox_BitwiseOr(ox_ctx *c) { return binary(c, oar_bitwise_or); }
oar_status ox_BitwiseXor(ox_ctx *c) { return binary(c, oar_bitwise_xor); }

/* BitShift (unsigned types in ONNX): direction LEFT or RIGHT, required. */
oar_status ox_BitShift(ox_ctx *c) {
    char buf[16];
    const char *dir = ox_attr_str(c, "direction", "", buf, sizeof buf);
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
        return ox_fail(c, OAR_ERR_FORMAT, "expected attribute direction \"LEFT\" or \"RIGHT\", got \"%s\"", dir);
    oar_tensor *a = OX_IN(c, 0);
    /* the signed types are not in BitShift's schema: their shifts differ */
    if (a && a->dtype != OAR_U8 && a->dtype != OAR_U16 && a->dtype != OAR_U32 && a->dtype != OAR_U64)
        return ox_fail(c, OAR_ERR_DTYPE, "expected unsigned integer inputs (uint8 to uint64), got %s",
                       oar_dtype_name(a->dtype));
    return binary(c, strcmp(dir, "LEFT") ? oar_bitwise_right_shift : oar_bitwise_left_shift);
}

/* Mod: fmod = 1 truncates (C's fmod, the sign of a); 0 floors (Python's %, the sign of b, integers
 * only). Integers: a - q b with the rounded integer quotient, exact in every width; floats in
 * double, as the reference's fmod to rounding. */
static oar_tensor *mod_of(oar_tensor *a, oar_tensor *b, bool trunc) {
    oar_dtype dt = a->dtype;
    if (!oar_dtype_is_float(dt)) {
        oar_tensor *q = trunc ? oar_div_trunc(a, b) : oar_div_floor(a, b);
        return q ? oar_sub(a, oar_mul(q, b)) : NULL;
    }
    oar_tensor *x = oar_cast(a, OAR_F64), *y = oar_cast(b, OAR_F64);
    oar_tensor *q = oar_div(x, y);
    if (q) q = trunc ? oar_mul(oar_sign(q), oar_floor(oar_abs(q))) : oar_floor(q);
    oar_tensor *r = q ? oar_sub(x, oar_mul(q, y)) : NULL;
    return r ? oar_cast(r, dt) : NULL;
}
oar_status ox_Mod(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 1);
    if (!a || !b) return ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
    if (a->dtype != b->dtype)
        return ox_fail(c, OAR_ERR_DTYPE, "expected inputs of one dtype, got %s and %s", oar_dtype_name(a->dtype),
                       oar_dtype_name(b->dtype));
    bool fmod = ox_attr_int(c, "fmod", 0) != 0;
    if (!fmod && oar_dtype_is_float(a->dtype))
        return ox_fail(c, OAR_ERR_INVALID_ARG, "fmod = 0 on %s inputs; ONNX requires fmod = 1 for floating types",
                       oar_dtype_name(a->dtype));
    return ox_set(c, 0, mod_of(a, b, fmod));
}

static oar_tensor *reciprocal(oar_tensor *x) { return oar_rdiv_scalar(x, 1.0); }
static oar_tensor *softsign(oar_tensor *x) { return oar_div(x, oar_add_scalar(oar_abs(x), 1.0)); }
oar_status ox_Reciprocal(ox_ctx *c) { return OX_IN(c, 0) ? ox_set(c, 0, reciprocal(OX_IN(c, 0))) : OAR_ERR_FORMAT; }
oar_status ox_Softsign(ox_ctx *c) { return OX_IN(c, 0) ? ox_set(c, 0, softsign(OX_IN(c, 0))) : OAR_ERR_FORMAT; }

oar_status ox_LeakyRelu(ox_ctx *c) { return ox_set(c, 0, oar_leaky_relu(OX_IN(c, 0), ox_attr_float(c, "alpha", 0.01))); }
oar_status ox_Elu(ox_ctx *c) { return ox_set(c, 0, oar_elu(OX_IN(c, 0), ox_attr_float(c, "alpha", 1.0))); }
oar_status ox_Softplus(ox_ctx *c) { return ox_set(c, 0, oar_softplus(OX_IN(c, 0), 1.0, INFINITY)); }

oar_status ox_Celu(ox_ctx *c) { /* alpha elu(x / alpha) */
    double alpha = ox_attr_float(c, "alpha", 1.0);
    if (!OX_IN(c, 0)) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (alpha == 0.0) return ox_fail(c, OAR_ERR_INVALID_ARG, "expected a nonzero alpha, got 0");
    return ox_set(c, 0, oar_mul_scalar(oar_elu(oar_div_scalar(OX_IN(c, 0), alpha), 1.0), alpha));
}

oar_status ox_ThresholdedRelu(ox_ctx *c) { /* x where x > alpha, else 0 */
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    return ox_set(c, 0, oar_masked_fill(x, oar_le_scalar(x, ox_attr_float(c, "alpha", 1.0)), 0.0));
}

oar_status ox_Shrink(ox_ctx *c) { /* x + bias below -lambd, x - bias above lambd, 0 between */
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    double lambd = ox_attr_float(c, "lambd", 0.5), bias = ox_attr_float(c, "bias", 0.0);
    oar_tensor *lo = oar_lt_scalar(x, -lambd), *hi = oar_gt_scalar(x, lambd);
    oar_tensor *y = oar_where(lo, oar_add_scalar(x, bias), oar_zeros_like(x));
    return ox_set(c, 0, y ? oar_where(hi, oar_sub_scalar(x, bias), y) : NULL);
}

oar_status ox_Selu(ox_ctx *c) {
    double alpha = ox_attr_float(c, "alpha", 1.67326319217681884765625), gamma = ox_attr_float(c, "gamma", 1.05070102214813232421875);
    return ox_set(c, 0, oar_mul_scalar(oar_elu(OX_IN(c, 0), alpha), gamma));
}

oar_status ox_HardSigmoid(ox_ctx *c) {
    double alpha = ox_attr_float(c, "alpha", 0.2), beta = ox_attr_float(c, "beta", 0.5);
    return ox_set(c, 0, oar_clip(oar_add_scalar(oar_mul_scalar(OX_IN(c, 0), alpha), beta), 0.0, 1.0));
}

oar_status ox_PRelu(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *slope = OX_IN(c, 1);
    if (!x || !slope) return ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
    oar_tensor *neg = oar_lt_scalar(x, 0.0);
    return ox_set(c, 0, oar_where(neg, oar_mul(x, slope), x));
}

oar_status ox_Gelu(ox_ctx *c) {
    char buf[32];
    const char *a = ox_attr_str(c, "approximate", "none", buf, sizeof buf);
    if (strcmp(a, "none") && strcmp(a, "tanh"))
        return ox_unsupported(c, "attribute approximate='%s'; supported: none, tanh", a);
    return ox_set(c, 0, oar_gelu(OX_IN(c, 0), !strcmp(a, "tanh")));
}

oar_status ox_Clip(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (c->opset < 11)
        return ox_set(c, 0, oar_clip(x, ox_attr_float(c, "min", -INFINITY), ox_attr_float(c, "max", INFINITY)));
    oar_tensor *lo = OX_IN(c, 1), *hi = OX_IN(c, 2);
    if ((!lo || lo->storage) && (!hi || hi->storage)) { /* known bounds: one op */
        double l = -INFINITY, h = INFINITY;
        if ((lo && oar_item(lo, &l) != OAR_OK) || (hi && oar_item(hi, &h) != OAR_OK)) return oar_last_status();
        return ox_set(c, 0, oar_clip(x, l, h));
    }
    oar_tensor *y = x;
    if (lo && y) y = oar_maximum(y, lo);
    if (hi && y) y = oar_minimum(y, hi);
    return ox_set(c, 0, y);
}

/* ONNX's conversion to dt: oar's cast, which gives overflow to a float8 inf or NaN (torch's
 * rule), is ONNX's saturate=0; saturate=1 (the default) clips to the format's largest finite
 * value first (so inf gives it too), NaN staying NaN. float4e2m1 and the integers always
 * saturate; a float8 source is widened to f32 (exactly) for the clip, which takes no low-bit
 * types. */
oar_tensor *ox_cast_onnx(oar_tensor *x, oar_dtype dt, bool saturate) {
    if (!x) return NULL;
    bool f8 = dt == OAR_F8E4M3FN || dt == OAR_F8E4M3FNUZ || dt == OAR_F8E5M2 || dt == OAR_F8E5M2FNUZ || dt == OAR_F8E8M0;
    if (!f8 || !saturate || x->dtype == dt || x->dtype == OAR_BOOL) return oar_cast(x, dt);
    double m = oar_lowbit_max(dt);
    if (oar_dtype_is_lowbit(x->dtype)) x = oar_cast(x, OAR_F32);
    if (!oar_dtype_is_float(x->dtype) && m > 9.2e18) m = 9.2e18; /* an integer's bound within int64 */
    return x ? oar_cast(oar_clip(x, -m, m), dt) : NULL;
}

static oar_status cast_to(ox_ctx *c, oar_tensor *x, oar_dtype dt) {
    bool saturate = ox_attr_int(c, "saturate", 1) != 0;
    char mode[16];
    const char *round = ox_attr_str(c, "round_mode", "up", mode, sizeof mode);
    if (dt == OAR_F8E8M0 && round && strcmp(round, "up"))
        return ox_unsupported(c, "round_mode '%s' to float8e8m0; oar rounds up (ONNX's default)", round);
    return ox_set(c, 0, ox_cast_onnx(x, dt, saturate));
}

oar_status ox_Cast(ox_ctx *c) {
    int64_t to = ox_attr_int(c, "to", 0);
    oar_dtype dt;
    if (!ox_dtype_from_onnx((int32_t)to, &dt))
        return ox_unsupported(c, "cast to %s; oar supports float, double, float16, bfloat16, the float8 and float4 "
                                 "types, int8/16/32/64, uint8/16/32/64, int4, uint4, int2, uint2 and bool",
                              ox_onnx_type_name((int32_t)to));
    oar_tensor *x = OX_IN(c, 0);
    return x ? cast_to(c, x, dt) : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
}

oar_status ox_CastLike(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *like = OX_IN(c, 1);
    return x && like ? cast_to(c, x, like->dtype) : ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
}

/* ---- softmax: before opset 13 over the dims from axis on, as one flattened dim */
static oar_status softmax_like(ox_ctx *c, oar_tensor *(*f)(oar_tensor *, int)) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int axis = ox_axis(c, ox_attr_int(c, "axis", c->opset < 13 ? 1 : -1), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    if (c->opset >= 13 || axis == x->ndim - 1) return ox_set(c, 0, f(x, axis));
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < x->ndim; d++) *(d < axis ? &rows : &cols) *= x->shape[d];
    int64_t flat[2] = {rows, cols};
    oar_tensor *y = f(oar_reshape(x, flat, 2), 1);
    return ox_set(c, 0, y ? oar_reshape(y, x->shape, x->ndim) : NULL);
}
oar_status ox_Softmax(ox_ctx *c) { return softmax_like(c, oar_softmax); }
oar_status ox_LogSoftmax(ox_ctx *c) { return softmax_like(c, oar_log_softmax); }

/* ---- reductions: axes as an attribute, or (ReduceSum from 13, the rest from 18) an input */
typedef enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L1, R_L2, R_LSE, R_LOGSUM, R_SUMSQ } reduce_kind;

static oar_status reduce(ox_ctx *c, reduce_kind kind, int axes_input_since) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t axes[OAR_MAX_DIMS];
    int n = c->opset >= axes_input_since ? ox_known_ints(c, 1, axes, OAR_MAX_DIMS)
                                         : ox_attr_ints(c, "axes", axes, OAR_MAX_DIMS);
    if (n < 0) return oar_last_status();
    bool keep = ox_attr_int(c, "keepdims", 1) != 0;
    if (n == 0 && c->opset >= axes_input_since && ox_attr_int(c, "noop_with_empty_axes", 0))
        return ox_set(c, 0, oar_clone(x));
    int dims[OAR_MAX_DIMS];
    for (int i = 0; i < n; i++)
        if ((dims[i] = ox_axis(c, axes[i], x->ndim, "axis")) < 0) return oar_last_status();
    if (n == 0) /* all dims */
        for (int d = 0; d < x->ndim; d++) dims[n++] = d;
    int64_t reduced = 1;
    for (int i = 0; i < n; i++) reduced *= x->shape[dims[i]];
    if (reduced == 0 && x->numel == 0 && kind != R_MEAN) { /* an empty set: the reduction's identity */
        int64_t shape[OAR_MAX_DIMS];
        int k = 0;
        for (int d = 0; d < x->ndim; d++) {
            bool r = false;
            for (int i = 0; i < n; i++) r |= dims[i] == d;
            if (!r) shape[k++] = x->shape[d];
            else if (keep) shape[k++] = 1;
        }
        bool lowest = kind == R_MAX || kind == R_LSE || kind == R_LOGSUM;
        double id = lowest ? -INFINITY : kind == R_MIN ? INFINITY : kind == R_PROD ? 1.0 : 0.0;
        return ox_set(c, 0, oar_full(shape, k, id, x->dtype));
    }
    oar_tensor *y;
    switch (kind) {
    case R_SUM: y = oar_sum(x, dims, n, keep); break;
    case R_MEAN: y = oar_mean(x, dims, n, keep); break;
    case R_MAX: y = oar_amax(x, dims, n, keep); break;
    case R_MIN: y = oar_amin(x, dims, n, keep); break;
    case R_PROD: y = oar_prod(x, dims, n, keep); break;
    case R_L1: y = oar_sum(oar_abs(x), dims, n, keep); break;
    case R_L2: y = oar_norm(x, 2.0, dims, n, keep); break;
    case R_LOGSUM: y = oar_log(oar_sum(x, dims, n, keep)); break;
    case R_LSE: y = oar_logsumexp(x, dims, n, keep); break;
    default: y = oar_sum(oar_square(x), dims, n, keep); break;
    }
    if (y && y->dtype != x->dtype) y = oar_cast(y, x->dtype); /* oar sums integers in i64 */
    return ox_set(c, 0, y);
}
oar_status ox_ReduceSum(ox_ctx *c) { return reduce(c, R_SUM, 13); }
oar_status ox_ReduceMean(ox_ctx *c) { return reduce(c, R_MEAN, 18); }
oar_status ox_ReduceMax(ox_ctx *c) { return reduce(c, R_MAX, 18); }
oar_status ox_ReduceMin(ox_ctx *c) { return reduce(c, R_MIN, 18); }
oar_status ox_ReduceProd(ox_ctx *c) { return reduce(c, R_PROD, 18); }
oar_status ox_ReduceL1(ox_ctx *c) { return reduce(c, R_L1, 18); }
oar_status ox_ReduceL2(ox_ctx *c) { return reduce(c, R_L2, 18); }
oar_status ox_ReduceLogSum(ox_ctx *c) { return reduce(c, R_LOGSUM, 18); }
oar_status ox_ReduceLogSumExp(ox_ctx *c) { return reduce(c, R_LSE, 18); }
oar_status ox_ReduceSumSquare(ox_ctx *c) { return reduce(c, R_SUMSQ, 18); }

static oar_status arg_extreme(ox_ctx *c, oar_tensor *(*f)(oar_tensor *, int, bool)) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    bool keep = ox_attr_int(c, "keepdims", 1) != 0;
    if (!ox_attr_int(c, "select_last_index", 0)) return ox_set(c, 0, f(x, axis, keep));
    /* the last extreme: the first one of the flipped input, counted from the end */
    oar_tensor *i = f(oar_flip(x, &axis, 1), axis, keep);
    return ox_set(c, 0, i ? oar_rsub_scalar(i, (double)(x->shape[axis] - 1)) : NULL);
}
oar_status ox_ArgMax(ox_ctx *c) { return arg_extreme(c, oar_argmax); }
oar_status ox_ArgMin(ox_ctx *c) { return arg_extreme(c, oar_argmin); }

oar_status ox_CumSum(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    double a;
    if (!x || !ox_known_scalar(c, 1, &a)) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int axis = ox_axis(c, (int64_t)a, x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    bool reverse = ox_attr_int(c, "reverse", 0) != 0, exclusive = ox_attr_int(c, "exclusive", 0) != 0;
    oar_tensor *v = reverse ? oar_flip(x, &axis, 1) : x;
    oar_tensor *y = v ? oar_cumsum(v, axis) : NULL;
    if (y && y->dtype != x->dtype) y = oar_cast(y, x->dtype);
    if (y && exclusive) y = oar_sub(y, v);
    if (y && reverse) y = oar_flip(y, &axis, 1);
    return ox_set(c, 0, y);
}

oar_status ox_TopK(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    double k;
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (c->opset < 10) k = (double)ox_attr_int(c, "k", 1);
    else if (!ox_known_scalar(c, 1, &k)) return oar_last_status();
    int axis = ox_axis(c, ox_attr_int(c, "axis", -1), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    oar_tensor *v = NULL, *i = NULL;
    oar_status st = oar_topk(x, (int64_t)k, axis, ox_attr_int(c, "largest", 1) != 0, true, &v, &i);
    if (st != OAR_OK) return st;
    oar_track(v), oar_track(i); /* oar_topk hands back references; the trace's scope owns them now */
    c->out[0] = v;
    if (c->n_out > 1) c->out[1] = i;
    return OAR_OK;
}

/* ---- products */
oar_status ox_MatMul(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 1), *y = NULL;
    if (ox_qdq_gemm(c, true, &y)) return ox_set(c, 0, y);
    return a && b ? ox_set(c, 0, oar_matmul(a, b)) : ox_fail(c, OAR_ERR_FORMAT, "expected two inputs");
}

oar_status ox_Gemm(ox_ctx *c) {
    oar_tensor *a = OX_IN(c, 0), *b = OX_IN(c, 1), *bias = OX_IN(c, 2), *q = NULL;
    if (!a || !b) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs A and B");
    if (ox_qdq_gemm(c, false, &q)) return ox_set(c, 0, q);
    if (a->ndim != 2 || b->ndim != 2)
        return ox_fail(c, OAR_ERR_SHAPE, "expected 2-D A and B, got %d-D and %d-D", a->ndim, b->ndim);
    double alpha = ox_attr_float(c, "alpha", 1.0), beta = ox_attr_float(c, "beta", 1.0);
    bool ta = ox_attr_int(c, "transA", 0), tb = ox_attr_int(c, "transB", 0);
    if (ta) a = oar_transpose(a, 0, 1);
    /* the common Linear layer: A Bᵀ + bias as one linear op (fusable with its activation) */
    if (tb && alpha == 1.0 && (!bias || (beta == 1.0 && bias->ndim == 1 && bias->shape[0] == b->shape[0])))
        return ox_set(c, 0, oar_linear(a, b, bias));
    oar_tensor *y = oar_matmul(a, tb ? oar_transpose(b, 0, 1) : b);
    if (y && alpha != 1.0) y = oar_mul_scalar(y, alpha);
    if (y && bias) y = oar_add(y, beta == 1.0 ? bias : oar_mul_scalar(bias, beta));
    return ox_set(c, 0, y);
}

oar_status ox_Einsum(ox_ctx *c) {
    char eq[128];
    const char *e = ox_attr_str(c, "equation", NULL, eq, sizeof eq);
    if (!e) return ox_fail(c, OAR_ERR_FORMAT, "expected the attribute equation");
    if (c->n_in < 1 || c->n_in > 2) return ox_unsupported(c, "%d operands; oar's einsum takes one or two", c->n_in);
    char compact[128];
    size_t n = 0;
    for (const char *p = e; *p && n + 1 < sizeof compact; p++)
        if (*p != ' ') compact[n++] = *p;
    compact[n] = '\0';
    return ox_set(c, 0, oar_einsum(compact, OX_IN(c, 0), OX_IN(c, 1)));
}
