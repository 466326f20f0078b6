/* Elementwise unary ops. Reference kernels compute floats in double through the dtype traits
 * (one kernel serves f32, f64, f16 and bf16) and integers in int64, so wide integers stay
 * exact. Semantics follow torch, NaN and signed-zero handling included. */
#include "ops/op.h"
#include "ops/special_math.h"

#include <math.h>

typedef double (*unary_f)(double x, const oar_attr *a);
/* uns: the dtype is unsigned (x then holds a u64 above INT64_MAX as its bits, see dtype.c) */
typedef int64_t (*unary_i)(int64_t x, const oar_attr *a, bool uns);
/* Extra attribute checks of an op (NULL: none), run after the dtype check. */
typedef oar_status (*unary_check)(const oar_tensor *x, const oar_attr *a);

static oar_status unary_ref(unary_f f, unary_i fi, oar_tensor *const *in, oar_tensor *const *out,
                            const oar_attr *a) {
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[2] = {y, in[0]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 2);
    const oar_dtype_traits *ti = &oar_dtypes[in[0]->dtype], *to = &oar_dtypes[y->dtype];
    if (ti->is_float) {
        do to->store(it.ptr[0], f(ti->load(it.ptr[1]), a)); while (oar_iter_next(&it));
    } else {
        bool uns = !ti->is_signed;
        do to->store_i64(it.ptr[0], fi(ti->load_i64(it.ptr[1]), a, uns)); while (oar_iter_next(&it));
    }
    return OAR_OK;
}

static oar_status unary_infer(const char *name, uint32_t dtypes, unary_check check, oar_tensor *const *in,
                              const oar_attr *a, oar_meta *out, int *n_out) {
    oar_dtype dt = in[0]->dtype;
    if (!(dtypes & OAR_DTYPE_BIT(dt))) {
        if (dtypes == OAR_FLOAT_DTYPES) return oar_check_float(name, in[0], "the input"); /* fails: dt is not one */
        if (!(dtypes & OAR_FLOAT_DTYPES))
            return oar_error(OAR_ERR_DTYPE, "%s: expected an integer tensor, got %s; bitwise ops take no floats "
                                            "(logical_not for bool)", name, oar_dtype_name(dt));
        if (OAR_EXT_INT_DTYPES & OAR_DTYPE_BIT(dt))
            return oar_error(OAR_ERR_DTYPE, "%s: takes no %s tensors (i16, u16, u32 and u64 reach the ops "
                                            "docs/dtypes.md lists); convert it with oar_cast to i32, i64 or a float",
                             name, oar_dtype_name(dt));
        return oar_error(OAR_ERR_DTYPE, "%s: expected a numeric tensor (float or integer), got %s; "
                                        "convert it with oar_cast", name, oar_dtype_name(dt));
    }
    if (check) {
        oar_status st = check(in[0], a);
        if (st != OAR_OK) return st;
    }
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

/* UNARY(name, float expression of x and attrs a, int64 expression of x, a and uns (0 if float
 *       only), attr check, grad rule, flags, dtypes, n_attrs, schema...) */
#define UNARY(NAME, FEXPR, IEXPR, CHECK, GRAD, FLAGS, DTYPES, NATTRS, ...)                      \
    static double NAME##_f(double x, const oar_attr *a) { (void)a; return FEXPR; }               \
    static int64_t NAME##_i(int64_t x, const oar_attr *a, bool uns) {                            \
        (void)a; (void)x; (void)uns;                                                             \
        return IEXPR;                                                                            \
    }                                                                                            \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a,           \
                                   oar_meta *out, int *n_out) {                                  \
        (void)n_in;                                                                              \
        return unary_infer(#NAME, DTYPES, CHECK, in, a, out, n_out);                             \
    }                                                                                            \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,           \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {         \
        (void)ctx; (void)n_in; (void)n_out;                                                      \
        return unary_ref(NAME##_f, NAME##_i, in, out, a);                                        \
    }                                                                                            \
    const oar_op_def oar_opdef_##NAME = {                                                        \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = NATTRS, .attrs = {__VA_ARGS__},  \
        .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_INPLACE_OK | (FLAGS),           \
        .ref_dtypes = (DTYPES), .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD,    \
    };

#define NUMERIC_DTYPES (OAR_FLOAT_DTYPES | OAR_INT_DTYPES)
#define FLOAT_ATTR(name) {name, OAR_ATTR_FLOAT}

/* ---- scalar definitions */

/* Negation wraps for integers (as torch): done in unsigned arithmetic so INT64_MIN is defined. */
static inline int64_t ineg(int64_t x) { return (int64_t)(0 - (uint64_t)x); }

/* Round half to even, keeping the sign of zero (torch.round(-0.4) is -0). */
static double round_half_even(double x) {
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return r == 0.0 ? copysign(0.0, x) : r;
}

static double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x); /* no overflow for very negative x */
    return e / (1.0 + e);
}

#define GELU_TANH_K 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_TANH_C 0.044715

/* gelu, tanh form: 0.5 x (1 + tanh(u)) written as x * sigmoid(2u), the same value without the
 * cancellation of 1 + tanh(u) for negative x. The erf form uses erfc for the same reason. */
double oar_gelu_ref(double x, bool tanh_form) {
    if (tanh_form) return x / (1.0 + exp(-2.0 * GELU_TANH_K * (x + GELU_TANH_C * x * x * x)));
    return 0.5 * x * erfc(-x * M_SQRT1_2);
}
static double gelu_d(double x, const oar_attr *a) { return oar_gelu_ref(x, a[0].i != 0); }

/* torch: z = beta x; z > threshold ? x : log1p(exp(z)) / beta, with log1p(exp(z)) evaluated
 * as max(z, 0) + log1p(exp(-|z|)) so it never overflows. */
static double softplus_d(double x, const oar_attr *a) {
    double z = x * a[0].f;
    if (z > a[1].f) return x;
    return ((z > 0 ? z : 0.0) + log1p(exp(-fabs(z)))) / a[0].f;
}

/* clamp as torch: NaN stays NaN, a NaN bound is ignored, min > max gives max. */
static double clip_d(double x, const oar_attr *a) {
    if (x < a[0].f) x = a[0].f;
    if (x > a[1].f) x = a[1].f;
    return x;
}
/* Integer bounds were checked by clip_check: integral or infinite, inside the dtype's range. */
static int64_t bound_i64(double v) {
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return (int64_t)v;
}
static int64_t clip_int(int64_t x, const oar_attr *a) {
    int64_t lo = bound_i64(a[0].f), hi = bound_i64(a[1].f);
    if (x < lo) x = lo;
    if (x > hi) x = hi;
    return x;
}

/* ---- attribute checks */
static oar_status gelu_check(const oar_tensor *x, const oar_attr *a) {
    (void)x;
    if (a[0].i == 0 || a[0].i == 1) return OAR_OK;
    return oar_error(OAR_ERR_INVALID_ARG, "gelu: expected approximate 0 (exact, erf) or 1 (tanh), got %lld",
                     (long long)a[0].i);
}

static oar_status softplus_check(const oar_tensor *x, const oar_attr *a) {
    (void)x;
    if (a[0].f != 0.0 && !isnan(a[0].f)) return OAR_OK;
    return oar_error(OAR_ERR_INVALID_ARG, "softplus: expected a nonzero beta (the result is divided by "
                                          "it), got %g; torch's default is 1", a[0].f);
}

static void int_range(oar_dtype dt, double *lo, double *hi) {
    switch (dt) {
    case OAR_I8: *lo = -128.0; *hi = 127.0; return;
    case OAR_U8: *lo = 0.0; *hi = 255.0; return;
    case OAR_I32: *lo = -2147483648.0; *hi = 2147483647.0; return;
    default: *lo = -9223372036854775808.0; *hi = 9223372036854775807.0; return;
    }
}

/* Integer tensors keep their dtype, so their bounds must be integers they can hold (torch would
 * promote to float for a fractional bound). Infinite bounds mean "no bound". */
static oar_status clip_check(const oar_tensor *x, const oar_attr *a) {
    if (oar_dtypes[x->dtype].is_float) return OAR_OK;
    double lo, hi;
    int_range(x->dtype, &lo, &hi);
    for (int k = 0; k < 2; k++) {
        double v = a[k].f;
        const char *which = k ? "max" : "min";
        if (isinf(v)) continue;
        if (v != floor(v))
            return oar_error(OAR_ERR_INVALID_ARG, "clip: expected integer bounds for integer dtype %s, got %s=%g; "
                                                  "cast the tensor to a float dtype with oar_cast",
                             oar_dtype_name(x->dtype), which, v);
        if (v < lo || v > hi)
            return oar_error(OAR_ERR_INVALID_ARG, "clip: expected bounds within the range of %s [%.0f, %.0f], "
                                                  "got %s=%.0f", oar_dtype_name(x->dtype), lo, hi, which, v);
    }
    return OAR_OK;
}

static oar_status polygamma_check(const oar_tensor *x, const oar_attr *a) {
    (void)x;
    if (a[0].i >= 0) return OAR_OK;
    return oar_error(OAR_ERR_INVALID_ARG, "polygamma: expected n >= 0 (the order of the derivative of digamma), "
                                          "got %lld", (long long)a[0].i);
}

/* ---- gradient rules (public ops only, so double backward works) */
#define GOUT g->gout[0]
#define X g->in[0]
#define Y g->out[0]

static oar_tensor *positive_mask(oar_tensor *x) { return oar_gt(x, oar_zeros_like(x)); }

static oar_status neg_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_neg(GOUT);
    return OAR_OK;
}
static oar_status abs_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_sign(X)); /* 0 at x == 0, like torch */
    return OAR_OK;
}
static oar_status exp_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, Y);
    return OAR_OK;
}
static oar_status log_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, X);
    return OAR_OK;
}
static oar_status log1p_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_add_scalar(X, 1.0));
    return OAR_OK;
}
static oar_status sqrt_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_mul_scalar(Y, 2.0));
    return OAR_OK;
}
static oar_status rsqrt_grad(oar_grad_ctx *g) {
    /* d(x^-1/2) = -x^-3/2 / 2 = -y^3 / 2 */
    g->gin[0] = oar_mul(GOUT, oar_mul_scalar(oar_mul(Y, oar_square(Y)), -0.5));
    return OAR_OK;
}
static oar_status square_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_mul_scalar(X, 2.0));
    return OAR_OK;
}
static oar_status sin_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_cos(X));
    return OAR_OK;
}
static oar_status cos_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_neg(oar_mul(GOUT, oar_sin(X)));
    return OAR_OK;
}
static oar_status tanh_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_add_scalar(oar_neg(oar_square(Y)), 1.0));
    return OAR_OK;
}
static oar_status sigmoid_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_mul(Y, oar_add_scalar(oar_neg(Y), 1.0)));
    return OAR_OK;
}
static oar_status relu_grad(oar_grad_ctx *g) {
    oar_tensor *in[2] = {GOUT, X}; /* one registered op (unary_backward.c): x > 0 ? g : 0 */
    g->gin[0] = oar_op_call1(OAR_OP_relu_backward, in, 2, NULL);
    return OAR_OK;
}
static oar_status leaky_relu_grad(oar_grad_ctx *g) {
    /* torch: x > 0 ? g : g * slope (the slope side includes 0) */
    g->gin[0] = oar_where(positive_mask(X), GOUT, oar_mul_scalar(GOUT, g->attrs[0].f));
    return OAR_OK;
}
static oar_status elu_grad(oar_grad_ctx *g) {
    /* x <= 0: alpha e^x. The exponent only sees the negative part, so no inf appears in the
     * unused branch (which would turn into NaN under double backward). */
    oar_tensor *pos = positive_mask(X);
    oar_tensor *neg_part = oar_where(pos, oar_zeros_like(X), X);
    oar_tensor *slope = oar_mul_scalar(oar_exp(neg_part), g->attrs[0].f);
    g->gin[0] = oar_where(pos, GOUT, oar_mul(GOUT, slope));
    return OAR_OK;
}
/* one registered op (unary_backward.c): a single pass instead of a dozen elementwise ops */
static oar_status gelu_grad(oar_grad_ctx *g) {
    oar_tensor *in[2] = {GOUT, X};
    g->gin[0] = oar_op_call1(OAR_OP_gelu_backward, in, 2, g->attrs);
    return OAR_OK;
}
static oar_status silu_grad(oar_grad_ctx *g) {
    /* d(x s)/dx = s (1 + x (1 - s)), s = sigmoid(x) */
    oar_tensor *s = oar_sigmoid(X);
    oar_tensor *inner = oar_add_scalar(oar_mul(X, oar_add_scalar(oar_neg(s), 1.0)), 1.0);
    g->gin[0] = oar_mul(GOUT, oar_mul(s, inner));
    return OAR_OK;
}
static oar_status softplus_grad(oar_grad_ctx *g) {
    /* torch: beta x > threshold ? g : g sigmoid(beta x) */
    oar_tensor *z = oar_mul_scalar(X, g->attrs[0].f);
    oar_tensor *linear = oar_gt(z, oar_scalar(g->attrs[1].f, z->dtype));
    g->gin[0] = oar_where(linear, GOUT, oar_mul(GOUT, oar_sigmoid(z)));
    return OAR_OK;
}
static oar_status erf_grad(oar_grad_ctx *g) {
    /* 2/sqrt(pi) e^(-x^2) */
    oar_tensor *d = oar_mul_scalar(oar_exp(oar_neg(oar_square(X))), 1.1283791670955126);
    g->gin[0] = oar_mul(GOUT, d);
    return OAR_OK;
}
static oar_status asin_grad(oar_grad_ctx *g) {
    /* 1 / sqrt(1 - x^2) */
    g->gin[0] = oar_div(GOUT, oar_sqrt(oar_add_scalar(oar_neg(oar_square(X)), 1.0)));
    return OAR_OK;
}
static oar_status acos_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_neg(oar_div(GOUT, oar_sqrt(oar_add_scalar(oar_neg(oar_square(X)), 1.0))));
    return OAR_OK;
}
static oar_status atan_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_add_scalar(oar_square(X), 1.0));
    return OAR_OK;
}
static oar_status sinh_grad(oar_grad_ctx *g) {
    /* cosh x = (e^x + e^-x) / 2 */
    oar_tensor *cosh = oar_mul_scalar(oar_add(oar_exp(X), oar_exp(oar_neg(X))), 0.5);
    g->gin[0] = oar_mul(GOUT, cosh);
    return OAR_OK;
}
static oar_status asinh_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_sqrt(oar_add_scalar(oar_square(X), 1.0)));
    return OAR_OK;
}
static oar_status atanh_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_add_scalar(oar_neg(oar_square(X)), 1.0));
    return OAR_OK;
}
static oar_status expm1_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_add_scalar(Y, 1.0));
    return OAR_OK;
}
static oar_status exp2_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_mul_scalar(Y, 0.6931471805599453));
    return OAR_OK;
}
static oar_status erfc_grad(oar_grad_ctx *g) {
    /* -2/sqrt(pi) e^(-x^2) */
    oar_tensor *d = oar_mul_scalar(oar_exp(oar_neg(oar_square(X))), -1.1283791670955126);
    g->gin[0] = oar_mul(GOUT, d);
    return OAR_OK;
}
static oar_status acosh_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(GOUT, oar_sqrt(oar_add_scalar(oar_square(X), -1.0)));
    return OAR_OK;
}
static oar_status cosh_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_sinh(X));
    return OAR_OK;
}
static oar_status lgamma_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_digamma(X));
    return OAR_OK;
}
static oar_status digamma_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_polygamma(1, X));
    return OAR_OK;
}
static oar_status polygamma_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_polygamma(g->attrs[0].i + 1, X));
    return OAR_OK;
}
static oar_status erfinv_grad(oar_grad_ctx *g) {
    /* sqrt(pi)/2 e^(y^2) */
    g->gin[0] = oar_mul(GOUT, oar_mul_scalar(oar_exp(oar_square(Y)), 0.88622692545275801));
    return OAR_OK;
}
static oar_status clip_grad(oar_grad_ctx *g) {
    /* torch.clamp: the gradient passes where min <= x <= max (bounds included) */
    oar_tensor *x = X;
    oar_tensor *inside = oar_logical_and(oar_ge(x, oar_scalar(g->attrs[0].f, x->dtype)),
                                         oar_le(x, oar_scalar(g->attrs[1].f, x->dtype)));
    g->gin[0] = oar_where(inside, GOUT, oar_zeros_like(GOUT));
    return OAR_OK;
}

/* ---- the ops */
/* AMP: activations follow their input's dtype (0); F16_FP32 marks the ops fp16's range cannot hold
 * (fp32 under f16 autocast, follow under bf16, whose range is f32's) */
#define F16_FP32 OAR_OPF_AMP_DENY_F16
#define NONDIFF OAR_OPF_NONDIFF

/* neg wraps unsigned values (NumPy's -x of a uint); abs of an unsigned value is the value */
UNARY(neg, -x, ineg(x), NULL, neg_grad, 0, NUMERIC_DTYPES | OAR_EXT_INT_DTYPES, 0)
UNARY(abs, fabs(x), uns || x >= 0 ? x : ineg(x), NULL, abs_grad, 0, NUMERIC_DTYPES | OAR_EXT_INT_DTYPES, 0)
UNARY(exp, exp(x), 0, NULL, exp_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(log, log(x), 0, NULL, log_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(log1p, log1p(x), 0, NULL, log1p_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(sqrt, sqrt(x), 0, NULL, sqrt_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(rsqrt, 1.0 / sqrt(x), 0, NULL, rsqrt_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(square, x * x, (int64_t)((uint64_t)x * (uint64_t)x), NULL, square_grad, F16_FP32, NUMERIC_DTYPES, 0)
UNARY(sin, sin(x), 0, NULL, sin_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(cos, cos(x), 0, NULL, cos_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(tanh, tanh(x), 0, NULL, tanh_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(sigmoid, sigmoid_d(x), 0, NULL, sigmoid_grad, 0, OAR_FLOAT_DTYPES, 0)
/* x < 0 ? 0 : x keeps NaN and -0.0 as torch.relu does */
UNARY(relu, x < 0 ? 0.0 : x, x < 0 ? 0 : x, NULL, relu_grad, 0, NUMERIC_DTYPES, 0)
UNARY(leaky_relu, x > 0 ? x : x * a[0].f, 0, NULL, leaky_relu_grad, 0, OAR_FLOAT_DTYPES, 1,
      {"negative_slope", OAR_ATTR_FLOAT, "0.01"})
UNARY(elu, x > 0 ? x : a[0].f * expm1(x), 0, NULL, elu_grad, 0, OAR_FLOAT_DTYPES, 1, {"alpha", OAR_ATTR_FLOAT, "1"})
UNARY(gelu, gelu_d(x, a), 0, gelu_check, gelu_grad, 0, OAR_FLOAT_DTYPES, 1, {"approximate", OAR_ATTR_INT})
UNARY(silu, x / (1.0 + exp(-x)), 0, NULL, silu_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(softplus, softplus_d(x, a), 0, softplus_check, softplus_grad, F16_FP32, OAR_FLOAT_DTYPES, 2,
      {"beta", OAR_ATTR_FLOAT, "1"}, {"threshold", OAR_ATTR_FLOAT, "20"})
UNARY(erf, erf(x), 0, NULL, erf_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(erfc, erfc(x), 0, NULL, erfc_grad, 0, OAR_FLOAT_DTYPES, 0)
/* the inverse trigonometric and the hyperbolic functions, and the exponentials torch lists apart */
UNARY(asin, asin(x), 0, NULL, asin_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(acos, acos(x), 0, NULL, acos_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(atan, atan(x), 0, NULL, atan_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(sinh, sinh(x), 0, NULL, sinh_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(asinh, asinh(x), 0, NULL, asinh_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(atanh, atanh(x), 0, NULL, atanh_grad, 0, OAR_FLOAT_DTYPES, 0)
UNARY(expm1, expm1(x), 0, NULL, expm1_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(exp2, exp2(x), 0, NULL, exp2_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(acosh, acosh(x), 0, NULL, acosh_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(cosh, cosh(x), 0, NULL, cosh_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
/* the gamma family (special_math.h); lgamma is C's, +inf at the poles as torch */
UNARY(lgamma, lgamma(x), 0, NULL, lgamma_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(digamma, oar_digamma_d(x), 0, NULL, digamma_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
UNARY(polygamma, oar_polygamma_d(a[0].i, x), 0, polygamma_check, polygamma_grad, F16_FP32, OAR_FLOAT_DTYPES, 1,
      {"n", OAR_ATTR_INT})
UNARY(erfinv, oar_erfinv_d(x), 0, NULL, erfinv_grad, F16_FP32, OAR_FLOAT_DTYPES, 0)
/* integers only: a bool's bitwise not is logical_not (~1 is not a bool) */
UNARY(bitwise_not, 0.0, ~x, NULL, NULL, NONDIFF, OAR_INT_DTYPES | OAR_EXT_INT_DTYPES, 0)
UNARY(clip, clip_d(x, a), clip_int(x, a), clip_check, clip_grad, 0, NUMERIC_DTYPES, 2, FLOAT_ATTR("min"),
      FLOAT_ATTR("max"))
/* sign(NaN) is 0 in torch 1.13 ((0 < x) - (x < 0)); sign of a bool is itself */
UNARY(sign, (double)((0 < x) - (x < 0)), (0 < x) - (x < 0), NULL, NULL, NONDIFF,
      NUMERIC_DTYPES | OAR_DTYPE_BIT(OAR_BOOL), 0)
/* integers are already integral: floor, ceil and round return them unchanged, as torch */
UNARY(floor, floor(x), x, NULL, NULL, NONDIFF, NUMERIC_DTYPES, 0)
UNARY(ceil, ceil(x), x, NULL, NULL, NONDIFF, NUMERIC_DTYPES, 0)
UNARY(round, round_half_even(x), x, NULL, NULL, NONDIFF, NUMERIC_DTYPES, 0)

/* ---- public functions */
static oar_tensor *call_unary(oar_op_id op, oar_tensor *x, const oar_attr *a) {
    oar_tensor *in[1] = {x};
    return oar_op_call1(op, in, 1, a);
}

#define PUBLIC0(NAME) \
    oar_tensor *oar_##NAME(oar_tensor *x) { return call_unary(OAR_OP_##NAME, x, NULL); }
PUBLIC0(neg)
PUBLIC0(abs)
PUBLIC0(exp)
PUBLIC0(log)
PUBLIC0(log1p)
PUBLIC0(sqrt)
PUBLIC0(rsqrt)
PUBLIC0(square)
PUBLIC0(sin)
PUBLIC0(cos)
PUBLIC0(tanh)
PUBLIC0(sigmoid)
PUBLIC0(relu)
PUBLIC0(silu)
PUBLIC0(erf)
PUBLIC0(erfc)
PUBLIC0(asin)
PUBLIC0(acos)
PUBLIC0(atan)
PUBLIC0(sinh)
PUBLIC0(asinh)
PUBLIC0(atanh)
PUBLIC0(expm1)
PUBLIC0(exp2)
PUBLIC0(acosh)
PUBLIC0(cosh)
PUBLIC0(lgamma)
PUBLIC0(digamma)
PUBLIC0(erfinv)
PUBLIC0(bitwise_not)
PUBLIC0(sign)
PUBLIC0(floor)
PUBLIC0(ceil)
PUBLIC0(round)

oar_tensor *oar_polygamma(int64_t n, oar_tensor *x) {
    oar_attr a[1] = {oar_attr_int(n)};
    return call_unary(OAR_OP_polygamma, x, a);
}
oar_tensor *oar_leaky_relu(oar_tensor *x, double negative_slope) {
    oar_attr a[1] = {oar_attr_float(negative_slope)};
    return call_unary(OAR_OP_leaky_relu, x, a);
}
oar_tensor *oar_elu(oar_tensor *x, double alpha) {
    oar_attr a[1] = {oar_attr_float(alpha)};
    return call_unary(OAR_OP_elu, x, a);
}
oar_tensor *oar_gelu(oar_tensor *x, bool tanh_approximation) {
    oar_attr a[1] = {oar_attr_int(tanh_approximation ? 1 : 0)};
    return call_unary(OAR_OP_gelu, x, a);
}
oar_tensor *oar_softplus(oar_tensor *x, double beta, double threshold) {
    oar_attr a[2] = {oar_attr_float(beta), oar_attr_float(threshold)};
    return call_unary(OAR_OP_softplus, x, a);
}
oar_tensor *oar_clip(oar_tensor *x, double min, double max) {
    oar_attr a[2] = {oar_attr_float(min), oar_attr_float(max)};
    return call_unary(OAR_OP_clip, x, a);
}
