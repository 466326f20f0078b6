/* Reductions over a set of dims with keepdim: sum, mean, amax, amin, prod, var, std,
 * logsumexp, norm. One reference driver gathers each reduced group into a buffer (double for
 * floating results, int64 for integer ones) and applies the op's group function; the
 * semantics (dtypes, empty groups, NaN) follow PyTorch. */
#include "ops/reduce_plan.h"

#include <math.h>
#include <stdlib.h>

typedef enum { R_SUM, R_MEAN, R_AMAX, R_AMIN, R_PROD, R_VAR, R_STD, R_LSE, R_NORM } rkind;

static const char *const rname[] = {"sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp", "norm"};

/* Attribute positions: norm's p comes first; var/std's correction sits between dims and keepdim. */
static const oar_attr *dims_of(rkind k, const oar_attr *a) { return k == R_NORM ? &a[1] : &a[0]; }
static bool keepdim_of(rkind k, const oar_attr *a) {
    return (k == R_VAR || k == R_STD || k == R_NORM ? a[2].i : a[1].i) != 0;
}

typedef struct rparams {
    rkind kind;
    double p;           /* norm */
    int64_t correction; /* var, std */
} rparams;

static rparams params_of(rkind k, const oar_attr *a) {
    rparams r = {.kind = k};
    if (k == R_NORM) r.p = a[0].f;
    if (k == R_VAR || k == R_STD) r.correction = a[1].i;
    return r;
}

/* torch: integer and bool sums/products accumulate in int64; logsumexp of integers gives the
 * default float dtype; everything else keeps the input dtype. u16/u32/u64 sum to u64 (NumPy's
 * rule; torch has no sum of them), so a u64 total above INT64_MAX keeps its value. */
static oar_dtype out_dtype(rkind k, oar_dtype dt) {
    if (oar_dtypes[dt].is_float) return dt;
    if ((k == R_SUM || k == R_PROD) && (dt == OAR_U16 || dt == OAR_U32 || dt == OAR_U64)) return OAR_U64;
    if (k == R_SUM || k == R_PROD) return OAR_I64;
    if (k == R_LSE) return OAR_F32;
    return dt;
}

/* ---- inference */
static oar_status reduce_infer(const char *name, const oar_tensor *x, const oar_attr *dims, bool keepdim,
                               oar_dtype out_dt, oar_meta *out, uint32_t *mask_out) {
    uint32_t mask;
    oar_status st = oar_dims_mask(name, dims, x->ndim, &mask);
    if (st != OAR_OK) return st;
    out->dtype = out_dt;
    out->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask & (1u << d)) {
            if (keepdim) out->shape[out->ndim++] = 1;
        } else {
            out->shape[out->ndim++] = x->shape[d];
        }
    }
    if (mask_out) *mask_out = mask;
    return OAR_OK;
}

static oar_status red_infer(rkind k, oar_tensor *const *in, const oar_attr *a, oar_meta *out, int *n_out) {
    const oar_tensor *x = in[0];
    const char *name = rname[k];
    oar_status st;
    if (k == R_MEAN || k == R_VAR || k == R_STD || k == R_NORM) {
        if ((st = oar_check_float(name, x, "the input")) != OAR_OK) return st;
    }
    if (k == R_NORM && !(a[0].f > 0)) /* also rejects NaN */
        return oar_error(OAR_ERR_UNSUPPORTED, "norm: expected p > 0 (INFINITY for the max norm), got %g; "
                                              "p <= 0 is not supported", a[0].f);
    uint32_t mask;
    st = reduce_infer(name, x, dims_of(k, a), keepdim_of(k, a), out_dtype(k, x->dtype), out, &mask);
    if (st != OAR_OK) return st;
    if (k == R_AMAX || k == R_AMIN) { /* the max of nothing has no value (torch raises too) */
        for (int d = 0; d < x->ndim; d++) {
            if ((mask & (1u << d)) && x->shape[d] == 0) {
                char s[128];
                oar_format_shape(x->shape, x->ndim, s, sizeof s);
                return oar_error(OAR_ERR_SHAPE, "%s: expected reduced dims of non-zero size, got dim %d of "
                                                "size 0 in an input of shape %s; reduce over other dims",
                                 name, d, s);
            }
        }
    }
    *n_out = 1;
    return OAR_OK;
}

/* ---- group functions (the definition of each op) */
static double extreme(const double *v, int64_t n, bool is_min) {
    double m = is_min ? INFINITY : -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (v[i] != v[i]) return NAN; /* NaN propagates, as in torch */
        if (is_min ? v[i] < m : v[i] > m) m = v[i];
    }
    return m;
}

static double dsum(const double *v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    return s;
}

/* Two passes in double; the divisor is max(n - correction, 0), so var of too few elements
 * is inf (or nan for 0/0), as in torch. */
static double variance(const double *v, int64_t n, int64_t correction) {
    double mean = dsum(v, n) / (double)n, m2 = 0;
    for (int64_t i = 0; i < n; i++) m2 += (v[i] - mean) * (v[i] - mean);
    double div = (double)n - (double)correction;
    return m2 / (div > 0 ? div : 0.0);
}

/* log(sum(exp(v - m))) + m with m the max; an infinite max is replaced by 0 so that rows of
 * -inf give -inf and rows with +inf give +inf (torch's convention). Empty: -inf. */
static double lse(const double *v, int64_t n) {
    double m = extreme(v, n, false);
    if (m != m) return NAN;
    if (isinf(m)) m = 0;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp(v[i] - m);
    return log(s) + m;
}

static double pnorm(const double *v, int64_t n, double p) {
    double s = 0;
    if (isinf(p)) {
        for (int64_t i = 0; i < n; i++) {
            if (v[i] != v[i]) return NAN;
            if (fabs(v[i]) > s) s = fabs(v[i]);
        }
        return s; /* 0 for an empty group, like torch.norm */
    }
    if (p == 1) {
        for (int64_t i = 0; i < n; i++) s += fabs(v[i]);
        return s;
    }
    if (p == 2) {
        for (int64_t i = 0; i < n; i++) s += v[i] * v[i];
        return sqrt(s);
    }
    for (int64_t i = 0; i < n; i++) s += pow(fabs(v[i]), p);
    return pow(s, 1.0 / p);
}

static double group_f(const rparams *r, const double *v, int64_t n) {
    switch (r->kind) {
    case R_SUM: return dsum(v, n);
    case R_MEAN: return dsum(v, n) / (double)n; /* nan when empty, like torch */
    case R_AMAX: return extreme(v, n, false);
    case R_AMIN: return extreme(v, n, true);
    case R_PROD: {
        double acc = 1;
        for (int64_t i = 0; i < n; i++) acc *= v[i];
        return acc;
    }
    case R_VAR: return variance(v, n, r->correction);
    case R_STD: return sqrt(variance(v, n, r->correction));
    case R_LSE: return lse(v, n);
    case R_NORM: return pnorm(v, n, r->p);
    }
    return NAN;
}

/* Integer results: sums and products wrap like int64 arithmetic in torch. uns: v holds u64
 * bits (dtype.c), so the extremes compare as uint64_t. */
static int64_t group_i(rkind k, const int64_t *v, int64_t n, bool uns) {
    uint64_t acc = k == R_PROD ? 1 : 0;
    int64_t m = n ? v[0] : 0;
    for (int64_t i = 0; i < n; i++) {
        bool above = uns ? (uint64_t)v[i] > (uint64_t)m : v[i] > m;
        bool below = uns ? (uint64_t)v[i] < (uint64_t)m : v[i] < m;
        switch (k) {
        case R_SUM: acc += (uint64_t)v[i]; break;
        case R_PROD: acc *= (uint64_t)v[i]; break;
        case R_AMAX: m = above ? v[i] : m; break;
        case R_AMIN: m = below ? v[i] : m; break;
        default: break;
        }
    }
    return k == R_SUM || k == R_PROD ? (int64_t)acc : m;
}

/* ---- the reference driver */
static oar_status reduce_run(const rparams *rp, const oar_tensor *x, uint32_t mask, oar_tensor *y) {
    reduce_plan p;
    reduce_plan_make(x, mask, &p);
    if (p.outer_numel == 0) return OAR_OK;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype], *ty = &oar_dtypes[y->dtype];
    bool as_int = !ty->is_float;
    void *buf = oar_malloc((size_t)(p.inner_numel ? p.inner_numel : 1) * 8);
    if (!buf) return OAR_ERR_OOM;
    const char *base = oar_tensor_ptr(x);
    char *yp = oar_tensor_ptr(y);
    for (int64_t o = 0; o < p.outer_numel; o++) {
        const char *xo = base + plan_outer_offset(&p, o);
        space_walk w;
        space_walk_init(&w, &p);
        if (as_int) {
            int64_t *b = buf;
            for (int64_t i = 0; i < p.inner_numel; i++, space_walk_next(&w)) b[i] = tx->load_i64(xo + w.off);
            int64_t r = group_i(rp->kind, b, p.inner_numel, oar_dtype_bits_u64(x->dtype));
            ty->store_i64(yp + o * (int64_t)ty->size, r);
        } else {
            double *b = buf;
            for (int64_t i = 0; i < p.inner_numel; i++, space_walk_next(&w)) b[i] = tx->load(xo + w.off);
            ty->store(yp + o * (int64_t)ty->size, group_f(rp, b, p.inner_numel));
        }
    }
    free(buf);
    return OAR_OK;
}

static oar_status red_ref(rkind k, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    uint32_t mask;
    oar_status st = oar_dims_mask(rname[k], dims_of(k, a), in[0]->ndim, &mask);
    if (st != OAR_OK) return st;
    rparams rp = params_of(k, a);
    return reduce_run(&rp, in[0], mask, out[0]);
}

/* ---- gradients, written with public ops */
typedef struct rgrad {
    oar_tensor *x;  /* the input */
    oar_tensor *g;  /* the output gradient, reshaped to keepdim form */
    oar_tensor *y;  /* the output, in keepdim form (NULL when not saved) */
    int dims[OAR_MAX_DIMS], n_dims;
    int64_t kshape[OAR_MAX_DIMS];
    double count;   /* elements per reduced group */
} rgrad;

static oar_status rgrad_init(rkind k, oar_grad_ctx *g, rgrad *r) {
    r->x = g->in[0];
    uint32_t mask;
    oar_status st = oar_dims_mask(rname[k], dims_of(k, g->attrs), r->x->ndim, &mask);
    if (st != OAR_OK) return st;
    r->n_dims = 0;
    r->count = 1;
    for (int d = 0; d < r->x->ndim; d++) {
        bool red = (mask >> d) & 1u;
        r->kshape[d] = red ? 1 : r->x->shape[d];
        if (red) {
            r->dims[r->n_dims++] = d;
            r->count *= (double)r->x->shape[d];
        }
    }
    r->g = oar_reshape(g->gout[0], r->kshape, r->x->ndim);
    r->y = g->out[0] ? oar_reshape(g->out[0], r->kshape, r->x->ndim) : NULL;
    return r->g ? OAR_OK : oar_last_status();
}

static oar_tensor *rsum(const rgrad *r, oar_tensor *t) { return oar_sum(t, r->dims, r->n_dims, true); }
static oar_tensor *scalar_like(const oar_tensor *x, double v) { return oar_scalar(v, x->dtype); }

#define GRAD_BEGIN(KIND)                                  \
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;       \
    rgrad r;                                              \
    oar_status st_ = rgrad_init(KIND, g, &r);             \
    if (st_ != OAR_OK) return st_
#define GRAD_END(EXPR)                                    \
    g->gin[0] = (EXPR);                                   \
    return g->gin[0] ? OAR_OK : oar_last_status()

static oar_status sum_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_SUM);
    GRAD_END(oar_expand(r.g, r.x->shape, r.x->ndim));
}

static oar_status mean_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_MEAN);
    GRAD_END(oar_mul_scalar(oar_expand(r.g, r.x->shape, r.x->ndim), 1.0 / r.count));
}

/* amax/amin: ties share the gradient evenly, like torch. */
static oar_status extreme_grad(oar_grad_ctx *g, rkind k) {
    GRAD_BEGIN(k);
    oar_tensor *hit = oar_cast(oar_eq(r.x, r.y), r.x->dtype);
    GRAD_END(oar_mul(oar_div(r.g, rsum(&r, hit)), hit));
}
static oar_status amax_grad(oar_grad_ctx *g) { return extreme_grad(g, R_AMAX); }
static oar_status amin_grad(oar_grad_ctx *g) { return extreme_grad(g, R_AMIN); }

/* prod: g times the product of the other elements, without dividing by zeros. With xs = x
 * where zeros become 1, P = prod(xs) and m = the sum of the zero entries (0 in value, but it
 * carries the derivative with respect to each zero, so second derivatives hold too):
 * no zero -> P / x; one zero -> P at the zero, (P / x) * m elsewhere; two zeros -> at each
 * zero P * (m - x) (the other zero times P), 0 elsewhere; more -> 0. */
static oar_status prod_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_PROD);
    oar_tensor *zero = scalar_like(r.x, 0), *one = scalar_like(r.x, 1);
    oar_tensor *z = oar_eq(r.x, zero);
    oar_tensor *nz = rsum(&r, oar_cast(z, r.x->dtype));
    oar_tensor *xs = oar_where(z, one, r.x);
    oar_tensor *P = oar_prod(xs, r.dims, r.n_dims, true);
    oar_tensor *m = rsum(&r, oar_where(z, r.x, zero));
    oar_tensor *none = oar_div(P, xs);
    oar_tensor *one_zero = oar_where(z, P, oar_mul(none, m));
    oar_tensor *two_zeros = oar_where(z, oar_mul(P, oar_sub(m, r.x)), zero);
    oar_tensor *others = oar_where(oar_eq(nz, zero), none,
                                   oar_where(oar_eq(nz, one), one_zero,
                                             oar_where(oar_eq(nz, scalar_like(r.x, 2)), two_zeros, zero)));
    GRAD_END(oar_mul(r.g, others));
}

/* var: 2 (x - mean) / (N - correction), torch's formula (inf/nan where N <= correction). */
static oar_tensor *var_backward(const rgrad *r, oar_tensor *gk, int64_t correction) {
    oar_tensor *mu = oar_mean(r->x, r->dims, r->n_dims, true);
    return oar_mul_scalar(oar_mul(gk, oar_sub(r->x, mu)), 2.0 / (r->count - (double)correction));
}
static oar_status var_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_VAR);
    GRAD_END(var_backward(&r, r.g, g->attrs[1].i));
}
/* std: g / (2 std) through var's rule; 0 where std == 0 (torch), with a safe denominator so
 * the masked branch stays finite for double backward. */
static oar_status std_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_STD);
    oar_tensor *zero = scalar_like(r.x, 0), *one = scalar_like(r.x, 1);
    oar_tensor *is0 = oar_eq(r.y, zero);
    oar_tensor *gv = oar_where(is0, zero, oar_div(r.g, oar_mul_scalar(oar_where(is0, one, r.y), 2.0)));
    GRAD_END(var_backward(&r, gv, g->attrs[1].i));
}

static oar_status logsumexp_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_LSE);
    GRAD_END(oar_mul(r.g, oar_exp(oar_sub(r.x, r.y))));
}

/* norm, following torch's norm_backward: p = inf shares g among the maxima of |x| (and NaNs);
 * p < 1 masks x == 0; other p scale by g / y^(p-1), masked to 0 where the norm is 0. */
static oar_status norm_grad(oar_grad_ctx *g) {
    GRAD_BEGIN(R_NORM);
    double p = g->attrs[0].f;
    oar_tensor *x = r.x, *zero = scalar_like(x, 0), *one = scalar_like(x, 1);
    oar_tensor *sgn = oar_sign(x), *ax = oar_abs(x);
    if (isinf(p)) {
        oar_tensor *hit = oar_cast(oar_logical_or(oar_eq(ax, r.y), oar_ne(x, x)), x->dtype);
        GRAD_END(oar_mul(sgn, oar_mul(oar_div(r.g, rsum(&r, hit)), hit)));
    }
    if (p == 1) {
        GRAD_END(oar_mul(sgn, r.g));
    }
    if (p < 1) {
        oar_tensor *x0 = oar_eq(x, zero);
        oar_tensor *scaled = oar_where(x0, zero, oar_mul(sgn, oar_pow_scalar(oar_where(x0, one, ax), p - 1)));
        GRAD_END(oar_mul(oar_mul(scaled, r.g), oar_pow_scalar(r.y, 1 - p)));
    }
    oar_tensor *y0 = oar_eq(r.y, zero);
    oar_tensor *ys = oar_where(y0, one, r.y);
    oar_tensor *scale = oar_where(y0, zero, oar_div(r.g, p == 2 ? ys : oar_pow_scalar(ys, p - 1)));
    oar_tensor *scaled = p == 2 ? x : p < 2 ? oar_mul(sgn, oar_pow_scalar(ax, p - 1))
                                          : oar_mul(x, oar_pow_scalar(ax, p - 2));
    GRAD_END(oar_mul(scaled, scale));
}

/* ---- op definitions */
#define REDUCTION(NAME, KIND, REF_DTYPES, FLAGS, ...)                                               \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, \
                                   int *n_out) {                                                    \
        (void)n_in;                                                                                 \
        return red_infer(KIND, in, a, out, n_out);                                                  \
    }                                                                                               \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,              \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {            \
        (void)ctx; (void)n_in; (void)n_out;                                                         \
        return red_ref(KIND, in, out, a);                                                           \
    }                                                                                               \
    const oar_op_def oar_opdef_##NAME = {                                                           \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1,                                               \
        .n_attrs = (int)(sizeof((oar_attr_schema[]){__VA_ARGS__}) / sizeof(oar_attr_schema)),       \
        .attrs = {__VA_ARGS__}, .flags = OAR_OPF_STRIDED | (FLAGS), .ref_dtypes = (REF_DTYPES),     \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = NAME##_grad,                        \
    };

/* torch's defaults: keepdim false, var/std unbiased (correction 1), norm's p 2 (Frobenius) */
#define DIMS_KEEPDIM {"dims", OAR_ATTR_INTS}, {"keepdim", OAR_ATTR_INT, "false"}

REDUCTION(sum, R_SUM, OAR_NUMERIC_DTYPES, OAR_OPF_AMP_DENY, DIMS_KEEPDIM)
REDUCTION(mean, R_MEAN, OAR_FLOAT_DTYPES, OAR_OPF_AMP_DENY, DIMS_KEEPDIM)
REDUCTION(amax, R_AMAX, OAR_NUMERIC_DTYPES, 0, DIMS_KEEPDIM)
REDUCTION(amin, R_AMIN, OAR_NUMERIC_DTYPES, 0, DIMS_KEEPDIM)
REDUCTION(prod, R_PROD, OAR_BASE_DTYPES, OAR_OPF_AMP_DENY, DIMS_KEEPDIM)
REDUCTION(var, R_VAR, OAR_FLOAT_DTYPES, OAR_OPF_AMP_DENY, {"dims", OAR_ATTR_INTS}, {"correction", OAR_ATTR_INT, "1"},
          {"keepdim", OAR_ATTR_INT, "false"})
REDUCTION(std, R_STD, OAR_FLOAT_DTYPES, OAR_OPF_AMP_DENY, {"dims", OAR_ATTR_INTS}, {"correction", OAR_ATTR_INT, "1"},
          {"keepdim", OAR_ATTR_INT, "false"})
REDUCTION(logsumexp, R_LSE, OAR_BASE_DTYPES, OAR_OPF_AMP_DENY, DIMS_KEEPDIM)
REDUCTION(norm, R_NORM, OAR_FLOAT_DTYPES, OAR_OPF_AMP_DENY, {"p", OAR_ATTR_FLOAT, "2"}, {"dims", OAR_ATTR_INTS},
          {"keepdim", OAR_ATTR_INT, "false"})

/* ---- public API */
/* Packs dims (NULL: all) at attrs[at]; false (error set) when there are too many. */
static bool pack_dims(const char *name, const int *dims, int n_dims, oar_attr *attrs, int at) {
    if (!dims) n_dims = 0;
    if (n_dims < 0 || n_dims > OAR_MAX_DIMS) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0..%d dims, got %d", name, OAR_MAX_DIMS, n_dims);
        return false;
    }
    attrs[at] = oar_attr_dims(dims, n_dims);
    return true;
}

static oar_tensor *reduce_call(oar_op_id op, oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    oar_attr a[2];
    if (!pack_dims(oar_op_table[op]->name, dims, n_dims, a, 0)) return NULL;
    a[1] = oar_attr_int(keepdim);
    oar_tensor *in[1] = {x};
    return oar_op_call1(op, in, 1, a);
}

oar_tensor *oar_sum(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_sum, x, dims, n_dims, keepdim);
}
oar_tensor *oar_mean(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_mean, x, dims, n_dims, keepdim);
}
oar_tensor *oar_amax(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_amax, x, dims, n_dims, keepdim);
}
oar_tensor *oar_amin(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_amin, x, dims, n_dims, keepdim);
}
oar_tensor *oar_prod(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_prod, x, dims, n_dims, keepdim);
}
oar_tensor *oar_logsumexp(oar_tensor *x, const int *dims, int n_dims, bool keepdim) {
    return reduce_call(OAR_OP_logsumexp, x, dims, n_dims, keepdim);
}

static oar_tensor *moment_call(oar_op_id op, oar_tensor *x, const int *dims, int n_dims, int correction,
                               bool keepdim) {
    oar_attr a[3];
    if (!pack_dims(oar_op_table[op]->name, dims, n_dims, a, 0)) return NULL;
    a[1] = oar_attr_int(correction);
    a[2] = oar_attr_int(keepdim);
    oar_tensor *in[1] = {x};
    return oar_op_call1(op, in, 1, a);
}
oar_tensor *oar_var(oar_tensor *x, const int *dims, int n_dims, int correction, bool keepdim) {
    return moment_call(OAR_OP_var, x, dims, n_dims, correction, keepdim);
}
oar_tensor *oar_std(oar_tensor *x, const int *dims, int n_dims, int correction, bool keepdim) {
    return moment_call(OAR_OP_std, x, dims, n_dims, correction, keepdim);
}

oar_tensor *oar_norm(oar_tensor *x, double p, const int *dims, int n_dims, bool keepdim) {
    oar_attr a[3];
    a[0] = oar_attr_float(p);
    if (!pack_dims("norm", dims, n_dims, a, 1)) return NULL;
    a[2] = oar_attr_int(keepdim);
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_norm, in, 1, a);
}
