/* Elementwise losses of an input against a target of the same shape: mse, l1, smooth_l1 and
 * bce_with_logits, each reduced by mean, sum or none as in torch. The reference kernels
 * compute in double; the gradient rules are op calls, so double backward works. */
#include "ops/loss.h"

#include <math.h>

oar_status oar_loss_check_reduction(const char *op, int64_t r) {
    if (r == OAR_REDUCE_MEAN || r == OAR_REDUCE_SUM || r == OAR_REDUCE_NONE) return OAR_OK;
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected reduction OAR_REDUCE_MEAN (0), OAR_REDUCE_SUM (1) "
                                          "or OAR_REDUCE_NONE (2), got %lld", op, (long long)r);
}

typedef enum { L_MSE, L_L1, L_SMOOTH_L1, L_BCE } loss_kind;

static inline double loss_elem(loss_kind k, double x, double t, double beta) {
    double d = x - t;
    switch (k) {
    case L_MSE: return d * d;
    case L_L1: return fabs(d);
    case L_SMOOTH_L1: /* beta == 0 falls through to |d|: torch's L1 special case */
        return fabs(d) < beta ? 0.5 * d * d / beta : fabs(d) - 0.5 * beta;
    case L_BCE: /* max(x, 0) - x t + log(1 + e^-|x|): never overflows */
        return (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
    }
    return 0;
}

static oar_status pair_infer(const char *op, const char *what, oar_tensor *const *in, const oar_attr *a,
                             oar_meta *out, int *n_out) {
    const oar_tensor *x = in[0], *t = in[1];
    oar_status st = oar_loss_check_reduction(op, a[0].i);
    if (st == OAR_OK) st = oar_check_float(op, x, what);
    if (st != OAR_OK) return st;
    if (t->dtype != x->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected target of dtype %s (like the %s), got %s; convert it "
                                        "with oar_cast", op, oar_dtype_name(x->dtype), what,
                         oar_dtype_name(t->dtype));
    bool same = t->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = t->shape[d] == x->shape[d];
    if (!same) {
        /* torch broadcasts here (with a warning that it is likely a bug); we have no warnings,
         * so a mismatch is an error */
        char xs[128], ts[128];
        oar_format_shape(x->shape, x->ndim, xs, sizeof xs);
        oar_format_shape(t->shape, t->ndim, ts, sizeof ts);
        return oar_error(OAR_ERR_SHAPE, "%s: expected target of shape %s (the %s's shape), got %s; reshape "
                                        "or expand the target explicitly", op, xs, what, ts);
    }
    out->dtype = x->dtype;
    out->ndim = 0;
    if (a[0].i == OAR_REDUCE_NONE) oar_meta_from(out, x);
    *n_out = 1;
    return OAR_OK;
}

static oar_status pair_ref(loss_kind k, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0], *t = in[1];
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t es = (int64_t)tr->size;
    const char *xp = oar_tensor_ptr(x), *tp = oar_tensor_ptr(t);
    char *yp = oar_tensor_ptr(out[0]);
    double beta = k == L_SMOOTH_L1 ? a[1].f : 0.0, acc = 0.0;
    bool none = a[0].i == OAR_REDUCE_NONE;
    for (int64_t i = 0; i < x->numel; i++) {
        double v = loss_elem(k, tr->load(xp + i * es), tr->load(tp + i * es), beta);
        if (none) tr->store(yp + i * es, v);
        else acc += v;
    }
    /* the mean of no elements is 0/0 = NaN, as in torch */
    if (!none) tr->store(yp, a[0].i == OAR_REDUCE_MEAN ? acc / (double)x->numel : acc);
    return OAR_OK;
}

/* ---- gradient rules: dL/dx = dloss/dx * s, where s is gout (none, sum) or gout / n (mean) */
static oar_tensor *reduction_scale(oar_grad_ctx *g) {
    if (g->attrs[0].i != OAR_REDUCE_MEAN) return g->gout[0];
    return oar_mul_scalar(g->gout[0], 1.0 / (double)g->in[0]->numel);
}

/* sign(d) with sign(0) = 0, like torch's l1 gradient; built from comparisons (no gradient). */
static oar_tensor *sign_of(oar_tensor *d) {
    oar_tensor *zero = oar_scalar(0.0, d->dtype);
    return oar_sub(oar_cast(oar_gt(d, zero), d->dtype), oar_cast(oar_lt(d, zero), d->dtype));
}

/* Gives dx to the input and -dx to the target (losses of x - t). */
static oar_status diff_grads(oar_grad_ctx *g, oar_tensor *dx) {
    if (!dx) return oar_last_status();
    if (g->needs[0]) g->gin[0] = dx;
    if (g->needs[1]) g->gin[1] = oar_neg(dx);
    return OAR_OK;
}

static oar_status mse_grad(oar_grad_ctx *g) {
    oar_tensor *d = oar_sub(g->in[0], g->in[1]);
    return diff_grads(g, oar_mul(oar_mul_scalar(d, 2.0), reduction_scale(g)));
}

static oar_status l1_grad(oar_grad_ctx *g) {
    return diff_grads(g, oar_mul(sign_of(oar_sub(g->in[0], g->in[1])), reduction_scale(g)));
}

static oar_status smooth_l1_grad(oar_grad_ctx *g) {
    double beta = g->attrs[1].f;
    oar_tensor *d = oar_sub(g->in[0], g->in[1]);
    oar_tensor *slope = sign_of(d);
    if (beta > 0) { /* d / beta inside (-beta, beta), sign(d) outside */
        oar_tensor *inside = oar_logical_and(oar_lt(d, oar_scalar(beta, d->dtype)),
                                             oar_gt(d, oar_scalar(-beta, d->dtype)));
        slope = oar_where(inside, oar_mul_scalar(d, 1.0 / beta), slope);
    }
    return diff_grads(g, oar_mul(slope, reduction_scale(g)));
}

/* sigmoid from ops: both branches use e = exp(-|x|) <= 1, so neither overflows (nor does
 * either branch's own gradient in double backward). |x| is taken with where rather than
 * maximum(x, -x), whose tie at 0 would give the smooth sigmoid a zero slope there. */
static oar_tensor *stable_sigmoid(oar_tensor *x) {
    oar_tensor *nonneg = oar_ge(x, oar_scalar(0.0, x->dtype));
    oar_tensor *e = oar_exp(oar_neg(oar_where(nonneg, x, oar_neg(x))));
    oar_tensor *den = oar_add_scalar(e, 1.0);
    oar_tensor *pos = oar_div(oar_scalar(1.0, x->dtype), den), *neg = oar_div(e, den);
    return oar_where(nonneg, pos, neg);
}

static oar_status bce_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *s = reduction_scale(g);
    /* d/dx = sigmoid(x) - t, d/dt = -x */
    if (g->needs[0]) g->gin[0] = oar_mul(oar_sub(stable_sigmoid(x), g->in[1]), s);
    if (g->needs[1]) g->gin[1] = oar_mul(oar_neg(x), s);
    return OAR_OK;
}

/* ---- definitions */
/* PAIR_LOSS(name, kind, what the input is called, extra attribute check, rule, n_attrs, schema) */
#define PAIR_LOSS(NAME, KIND, WHAT, CHECK, GRAD, NATTRS, ...)                                   \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a,          \
                                   oar_meta *out, int *n_out) {                                 \
        (void)n_in;                                                                             \
        oar_status st = CHECK(a);                                                               \
        return st != OAR_OK ? st : pair_infer(#NAME, WHAT, in, a, out, n_out);                  \
    }                                                                                           \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,          \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {        \
        (void)ctx; (void)n_in; (void)n_out;                                                     \
        return pair_ref(KIND, in, out, a);                                                      \
    }                                                                                           \
    const oar_op_def oar_opdef_##NAME = {                                                       \
        .name = #NAME, .n_inputs = 2, .n_outputs = 1, .n_attrs = NATTRS, .attrs = {__VA_ARGS__}, \
        .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,                              \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD,                           \
    };

static oar_status no_check(const oar_attr *a) { (void)a; return OAR_OK; }
static oar_status beta_check(const oar_attr *a) {
    if (a[1].f >= 0) return OAR_OK; /* also refuses NaN */
    return oar_error(OAR_ERR_INVALID_ARG, "smooth_l1_loss: expected beta >= 0, got %g; beta = 0 gives "
                                          "the L1 loss", a[1].f);
}

PAIR_LOSS(mse_loss, L_MSE, "input", no_check, mse_grad, 1, {"reduction", OAR_ATTR_INT})
PAIR_LOSS(l1_loss, L_L1, "input", no_check, l1_grad, 1, {"reduction", OAR_ATTR_INT})
PAIR_LOSS(smooth_l1_loss, L_SMOOTH_L1, "input", beta_check, smooth_l1_grad, 2, {"reduction", OAR_ATTR_INT},
          {"beta", OAR_ATTR_FLOAT, "1"})
PAIR_LOSS(bce_with_logits, L_BCE, "logits", no_check, bce_grad, 1, {"reduction", OAR_ATTR_INT})

/* ---- public API */
static oar_tensor *pair_call(oar_op_id op, oar_tensor *x, oar_tensor *t, oar_reduction r, double beta) {
    oar_attr a[2] = {oar_attr_int(r), oar_attr_float(beta)};
    oar_tensor *in[2] = {x, t};
    return oar_op_call1(op, in, 2, a);
}
oar_tensor *oar_mse_loss(oar_tensor *input, oar_tensor *target, oar_reduction r) {
    return pair_call(OAR_OP_mse_loss, input, target, r, 0.0);
}
oar_tensor *oar_l1_loss(oar_tensor *input, oar_tensor *target, oar_reduction r) {
    return pair_call(OAR_OP_l1_loss, input, target, r, 0.0);
}
oar_tensor *oar_smooth_l1_loss(oar_tensor *input, oar_tensor *target, oar_reduction r, double beta) {
    return pair_call(OAR_OP_smooth_l1_loss, input, target, r, beta);
}
oar_tensor *oar_bce_with_logits(oar_tensor *logits, oar_tensor *target, oar_reduction r) {
    return pair_call(OAR_OP_bce_with_logits, logits, target, r, 0.0);
}
