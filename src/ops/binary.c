/* Elementwise binary ops with NumPy broadcasting. The reference kernels walk any strides
 * (broadcast dims have stride 0), computing floats in double, integers in int64 (u64 in uint64,
 * apply_u). pow, atan2, gcd and lcm refuse the interchange integers (i16, u16, u32, u64). */
#include "ops/op.h"
#include "ops/special_math.h"

#include <math.h>
#include <string.h>

typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN, B_ATAN2, B_BAND, B_BOR, B_BXOR,
               B_GCD, B_LCM, B_TDIV, B_FDIV, B_EQ, B_NE, B_LT, B_LE, B_GT, B_GE,
               B_AND, B_OR } bin_kind; /* comparisons last: is_compare */

static inline double apply_f(bin_kind k, double a, double b) {
    switch (k) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MAX: return (a != a || b != b) ? NAN : (a > b ? a : b); /* NaN propagates, like torch */
    case B_MIN: return (a != a || b != b) ? NAN : (a < b ? a : b);
    case B_ATAN2: return atan2(a, b);
    case B_BAND: case B_BOR: case B_BXOR: case B_GCD: case B_LCM: return 0; /* integers only (binary_infer) */
    case B_TDIV: return trunc(a / b);
    case B_FDIV: return floor(a / b);
    case B_EQ: return a == b;
    case B_NE: return a != b;
    case B_LT: return a < b;
    case B_LE: return a <= b;
    case B_GT: return a > b;
    case B_GE: return a >= b;
    case B_AND: return (a != 0) && (b != 0);
    case B_OR: return (a != 0) || (b != 0);
    }
    return 0;
}

static inline int64_t ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    int64_t r = 1;
    while (b) {
        if (b & 1) r *= a;
        a *= a;
        b >>= 1;
    }
    return r;
}

static inline int64_t apply_i(bin_kind k, int64_t a, int64_t b) {
    switch (k) {
    case B_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case B_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case B_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case B_DIV: return b == 0 ? 0 : (a == INT64_MIN && b == -1) ? a : a / b; /* guarded, never traps */
    case B_POW: return ipow(a, b);
    case B_MAX: return a > b ? a : b;
    case B_MIN: return a < b ? a : b;
    case B_ATAN2: return 0; /* refused by binary_infer: floats only */
    case B_BAND: return a & b;
    case B_BOR: return a | b;
    case B_BXOR: return a ^ b;
    case B_GCD: return oar_gcd_i(a, b);
    case B_LCM: return oar_lcm_i(a, b);
    case B_TDIV: /* x / 0 is 0 (NumPy's value: programs run on placeholder zeros when loaded and
                  * traced, so it cannot fail); INT64_MIN / -1 wraps, as torch */
    case B_FDIV: {
        if (b == 0) return 0;
        if (a == INT64_MIN && b == -1) return a;
        int64_t q = a / b;
        return k == B_FDIV && a % b != 0 && (a < 0) != (b < 0) ? q - 1 : q;
    }
    case B_EQ: return a == b;
    case B_NE: return a != b;
    case B_LT: return a < b;
    case B_LE: return a <= b;
    case B_GT: return a > b;
    case B_GE: return a >= b;
    case B_AND: return a && b;
    case B_OR: return a || b;
    }
    return 0;
}

/* u64 in uint64_t arithmetic: the int64 evaluator would order 2^63 below 0 and divide it as a
 * negative number. Only the kinds u64 takes (bitwise, arithmetic, max/min, comparisons). */
static inline uint64_t apply_u(bin_kind k, uint64_t a, uint64_t b) {
    switch (k) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: case B_TDIV: case B_FDIV: return b == 0 ? 0 : a / b;
    case B_MAX: return a > b ? a : b;
    case B_MIN: return a < b ? a : b;
    case B_BAND: return a & b;
    case B_BOR: return a | b;
    case B_BXOR: return a ^ b;
    case B_EQ: return a == b;
    case B_NE: return a != b;
    case B_LT: return a < b;
    case B_LE: return a <= b;
    case B_GT: return a > b;
    case B_GE: return a >= b;
    case B_AND: return a && b;
    case B_OR: return a || b;
    default: return 0; /* pow, atan2, gcd, lcm: not registered for u64 */
    }
}

static oar_status binary_ref(bin_kind k, oar_tensor *const *in, oar_tensor *const *out) {
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[3] = {y, in[0], in[1]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 3);
    const oar_dtype_traits *ti = &oar_dtypes[in[0]->dtype], *to = &oar_dtypes[y->dtype];
    if (ti->is_float) {
        do to->store(it.ptr[0], apply_f(k, ti->load(it.ptr[1]), ti->load(it.ptr[2])));
        while (oar_iter_next(&it));
    } else if (oar_dtype_bits_u64(in[0]->dtype)) {
        do to->store_i64(it.ptr[0], (int64_t)apply_u(k, *(const uint64_t *)it.ptr[1], *(const uint64_t *)it.ptr[2]));
        while (oar_iter_next(&it));
    } else {
        do to->store_i64(it.ptr[0], apply_i(k, ti->load_i64(it.ptr[1]), ti->load_i64(it.ptr[2])));
        while (oar_iter_next(&it));
    }
    return OAR_OK;
}

static bool is_compare(bin_kind k) { return k >= B_EQ; }

static oar_status binary_infer(const char *name, bin_kind k, oar_tensor *const *in, oar_meta *out, int *n_out) {
    oar_status st = oar_check_same_dtype(name, in, 2);
    if (st != OAR_OK) return st;
    if (k == B_POW || k == B_DIV) {
        /* integer pow with negative exponents and integer division are ill-defined for users
         * coming from torch; ask for floats explicitly */
        if (!oar_dtypes[in[0]->dtype].is_float && k == B_DIV)
            return oar_error(OAR_ERR_DTYPE, "div: expected floating inputs (true division), got %s; "
                                            "cast with oar_cast", oar_dtype_name(in[0]->dtype));
    }
    if (k == B_ATAN2 && !oar_dtypes[in[0]->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "atan2: expected floating inputs, got %s; cast with oar_cast",
                         oar_dtype_name(in[0]->dtype));
    bool bitwise = k == B_BAND || k == B_BOR || k == B_BXOR;
    if ((bitwise || k == B_GCD || k == B_LCM) && oar_dtypes[in[0]->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "%s: expected integer or bool inputs, got %s; it is defined on the bits "
                                        "of integers only", name, oar_dtype_name(in[0]->dtype));
    if (in[0]->dtype == OAR_BOOL && !is_compare(k) && k != B_MAX && k != B_MIN && !bitwise)
        return oar_error(OAR_ERR_DTYPE, "%s: expected numeric inputs, got bool; use logical_and/or for "
                                        "booleans", name);
    *n_out = 1;
    return oar_infer_broadcast(name, in, 2, is_compare(k) ? OAR_BOOL : in[0]->dtype, out);
}

/* Gradient helpers shared by the rules below. */
#define GRAD_TO(i, expr) \
    do { if (g->needs[i]) g->gin[i] = oar_sum_to_shape((expr), g->in[i]->shape, g->in[i]->ndim); } while (0)

static oar_status add_grad(oar_grad_ctx *g) {
    GRAD_TO(0, g->gout[0]);
    GRAD_TO(1, g->gout[0]);
    return OAR_OK;
}
static oar_status sub_grad(oar_grad_ctx *g) {
    GRAD_TO(0, g->gout[0]);
    GRAD_TO(1, oar_neg(g->gout[0]));
    return OAR_OK;
}
static oar_status mul_grad(oar_grad_ctx *g) {
    GRAD_TO(0, oar_mul(g->gout[0], g->in[1]));
    GRAD_TO(1, oar_mul(g->gout[0], g->in[0]));
    return OAR_OK;
}
static oar_status div_grad(oar_grad_ctx *g) {
    GRAD_TO(0, oar_div(g->gout[0], g->in[1]));
    /* d(a/b)/db = -a/b^2 = -(a/b)/b */
    GRAD_TO(1, oar_neg(oar_div(oar_mul(g->gout[0], g->out[0]), g->in[1])));
    return OAR_OK;
}
static oar_status pow_grad(oar_grad_ctx *g) {
    oar_tensor *a = g->in[0], *b = g->in[1];
    /* d/da = b * a^(b-1); d/db = a^b * log(a), taken as 0 where a == 0 (torch's convention) */
    GRAD_TO(0, oar_mul(g->gout[0], oar_mul(b, oar_pow(a, oar_add_scalar(b, -1.0)))));
    if (g->needs[1]) {
        oar_tensor *zero = oar_zeros_like(a);
        oar_tensor *safe_log = oar_where(oar_eq(a, zero), zero, oar_log(a));
        GRAD_TO(1, oar_mul(g->gout[0], oar_mul(g->out[0], safe_log)));
    }
    return OAR_OK;
}
/* atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2) */
static oar_status atan2_grad(oar_grad_ctx *g) {
    oar_tensor *y = g->in[0], *x = g->in[1];
    oar_tensor *r2 = oar_add(oar_square(x), oar_square(y));
    GRAD_TO(0, oar_div(oar_mul(g->gout[0], x), r2));
    GRAD_TO(1, oar_neg(oar_div(oar_mul(g->gout[0], y), r2)));
    return OAR_OK;
}
/* max/min: the gradient goes to the selected input; ties split it evenly, like torch. */
static oar_status maxmin_grad(oar_grad_ctx *g) {
    oar_tensor *a = g->in[0], *b = g->in[1];
    oar_tensor *y = g->out[0];
    oar_tensor *wa = oar_cast(oar_eq(a, y), a->dtype), *wb = oar_cast(oar_eq(b, y), a->dtype);
    oar_tensor *tie = oar_add(wa, wb);
    GRAD_TO(0, oar_div(oar_mul(g->gout[0], wa), tie));
    GRAD_TO(1, oar_div(oar_mul(g->gout[0], wb), tie));
    return OAR_OK;
}

#define BINARY(NAME, KIND, GRAD, FLAGS, DTYPES)                                                 \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a,          \
                                   oar_meta *out, int *n_out) {                                 \
        (void)n_in; (void)a;                                                                    \
        return binary_infer(#NAME, KIND, in, out, n_out);                                       \
    }                                                                                           \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,          \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {        \
        (void)ctx; (void)n_in; (void)n_out; (void)a;                                            \
        return binary_ref(KIND, in, out);                                                       \
    }                                                                                           \
    const oar_op_def oar_opdef_##NAME = {                                                       \
        .name = #NAME, .n_inputs = 2, .n_outputs = 1,                                           \
        .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | (FLAGS), .ref_dtypes = (DTYPES),         \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD,                           \
    };                                                                                          \
    oar_tensor *oar_##NAME(oar_tensor *a, oar_tensor *b) {                                      \
        oar_tensor *in[2] = {a, b};                                                             \
        return oar_op_call1(OAR_OP_##NAME, in, 2, NULL);                                        \
    }

BINARY(add, B_ADD, add_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(sub, B_SUB, sub_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(mul, B_MUL, mul_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(div, B_DIV, div_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(pow, B_POW, pow_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_DENY_F16 | OAR_OPF_AMP_PROMOTE, OAR_BASE_DTYPES)
BINARY(maximum, B_MAX, maxmin_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(minimum, B_MIN, maxmin_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(atan2, B_ATAN2, atan2_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_PROMOTE, OAR_BASE_DTYPES)
BINARY(bitwise_and, B_BAND, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_NUMERIC_DTYPES)
BINARY(bitwise_or, B_BOR, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_NUMERIC_DTYPES)
BINARY(bitwise_xor, B_BXOR, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_NUMERIC_DTYPES)
BINARY(gcd, B_GCD, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_BASE_DTYPES)
BINARY(lcm, B_LCM, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_BASE_DTYPES)
BINARY(div_trunc, B_TDIV, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_NUMERIC_DTYPES)
BINARY(div_floor, B_FDIV, NULL, OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK, OAR_NUMERIC_DTYPES)
BINARY(eq, B_EQ, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(ne, B_NE, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(lt, B_LT, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(le, B_LE, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(gt, B_GT, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(ge, B_GE, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(logical_and, B_AND, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)
BINARY(logical_or, B_OR, NULL, OAR_OPF_NONDIFF | OAR_OPF_AMP_PROMOTE, OAR_NUMERIC_DTYPES)

/* ---- logical_not */
static oar_status not_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    oar_infer_same_as_input0(in, n_in, a, out, n_out);
    out->dtype = OAR_BOOL;
    return OAR_OK;
}
static oar_status not_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    if (out[0]->numel == 0) return OAR_OK;
    oar_tensor *ops[2] = {out[0], in[0]};
    oar_iter it;
    oar_iter_init(&it, out[0]->shape, out[0]->ndim, ops, 2);
    const oar_dtype_traits *ti = &oar_dtypes[in[0]->dtype];
    do *(uint8_t *)it.ptr[0] = ti->load(it.ptr[1]) == 0.0; while (oar_iter_next(&it));
    return OAR_OK;
}
const oar_op_def oar_opdef_logical_not = {
    .name = "logical_not", .n_inputs = 1, .n_outputs = 1,
    .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_NONDIFF, .ref_dtypes = OAR_NUMERIC_DTYPES,
    .infer = not_infer, .reference = not_ref,
};
oar_tensor *oar_logical_not(oar_tensor *x) {
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_logical_not, in, 1, NULL);
}

/* ---- where(cond, a, b) */
static oar_status where_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    if (in[0]->dtype != OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "where: expected cond to be bool, got %s; build it with a "
                                        "comparison such as oar_gt", oar_dtype_name(in[0]->dtype));
    oar_status st = oar_check_same_dtype("where", in + 1, 2);
    if (st != OAR_OK) return st;
    *n_out = 1;
    return oar_infer_broadcast("where", in, 3, in[1]->dtype, out);
}
static oar_status where_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                            int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[4] = {y, in[0], in[1], in[2]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 4);
    size_t es = oar_dtypes[y->dtype].size;
    do memcpy(it.ptr[0], *(const uint8_t *)it.ptr[1] ? it.ptr[2] : it.ptr[3], es); while (oar_iter_next(&it));
    return OAR_OK;
}
static oar_status where_grad(oar_grad_ctx *g) {
    oar_tensor *zero = oar_zeros_like(g->gout[0]);
    GRAD_TO(1, oar_where(g->in[0], g->gout[0], zero));
    GRAD_TO(2, oar_where(g->in[0], zero, g->gout[0]));
    return OAR_OK;
}
const oar_op_def oar_opdef_where = {
    .name = "where", .n_inputs = 3, .n_outputs = 1, .key_input = 1,
    .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_AMP_PROMOTE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = where_infer, .reference = where_ref, .grad = where_grad,
};
oar_tensor *oar_where(oar_tensor *cond, oar_tensor *a, oar_tensor *b) {
    oar_tensor *in[3] = {cond, a, b};
    return oar_op_call1(OAR_OP_where, in, 3, NULL);
}
