/* Elementwise unary ops. Reference kernels compute in double (floats) through the dtype
 * traits, so one kernel serves f32, f64, f16 and bf16. */
#include "ops/op.h"

#include <math.h>

typedef double (*unary_fn)(double x, const oar_attr *a);

static oar_status unary_ref(unary_fn f, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[2] = {y, in[0]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 2);
    const oar_dtype_traits *ti = &oar_dtypes[in[0]->dtype], *to = &oar_dtypes[y->dtype];
    do to->store(it.ptr[0], f(ti->load(it.ptr[1]), a)); while (oar_iter_next(&it));
    return OAR_OK;
}

static oar_status float_infer(const char *name, oar_tensor *const *in, oar_meta *out, int *n_out) {
    oar_status st = oar_check_float(name, in[0], "the input");
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

/* UNARY(name, expression of x and attrs a, grad rule, flags, dtypes, n_attrs, schema...) */
#define UNARY(NAME, EXPR, GRAD, FLAGS, DTYPES, NATTRS, ...)                                     \
    static double NAME##_f(double x, const oar_attr *a) { (void)a; return EXPR; }               \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a,          \
                                   oar_meta *out, int *n_out) {                                 \
        (void)n_in; (void)a;                                                                    \
        if ((DTYPES) == OAR_FLOAT_DTYPES) return float_infer(#NAME, in, out, n_out);            \
        return oar_infer_same_as_input0(in, n_in, a, out, n_out);                               \
    }                                                                                           \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,          \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {        \
        (void)ctx; (void)n_in; (void)n_out;                                                     \
        return unary_ref(NAME##_f, in, out, a);                                                 \
    }                                                                                           \
    const oar_op_def oar_opdef_##NAME = {                                                       \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = NATTRS, .attrs = {__VA_ARGS__}, \
        .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | (FLAGS), .ref_dtypes = (DTYPES),       \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD,                           \
    };

#define NUMERIC_DTYPES (OAR_FLOAT_DTYPES | OAR_INT_DTYPES)

static oar_status neg_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_neg(g->gout[0]);
    return OAR_OK;
}
static oar_status exp_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(g->gout[0], g->out[0]);
    return OAR_OK;
}
static oar_status log_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_div(g->gout[0], g->in[0]);
    return OAR_OK;
}
static oar_status relu_grad(oar_grad_ctx *g) {
    /* where(x > 0, g, 0): built from ops so that double backward works */
    oar_tensor *zero = oar_zeros_like(g->gout[0]);
    g->gin[0] = oar_where(oar_gt(g->in[0], oar_zeros_like(g->in[0])), g->gout[0], zero);
    return OAR_OK;
}

UNARY(neg, -x, neg_grad, OAR_OPF_INPLACE_OK, NUMERIC_DTYPES, 0)
UNARY(exp, exp(x), exp_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_DENY, OAR_FLOAT_DTYPES, 0)
UNARY(log, log(x), log_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_DENY, OAR_FLOAT_DTYPES, 0)
UNARY(relu, x > 0 ? x : (x != x ? x : 0.0), relu_grad, OAR_OPF_INPLACE_OK | OAR_OPF_AMP_ALLOW, NUMERIC_DTYPES, 0)

static oar_tensor *call_unary(oar_op_id op, oar_tensor *x, const oar_attr *a) {
    oar_tensor *in[1] = {x};
    return oar_op_call1(op, in, 1, a);
}
oar_tensor *oar_neg(oar_tensor *x) { return call_unary(OAR_OP_neg, x, NULL); }
oar_tensor *oar_exp(oar_tensor *x) { return call_unary(OAR_OP_exp, x, NULL); }
oar_tensor *oar_log(oar_tensor *x) { return call_unary(OAR_OP_log, x, NULL); }
oar_tensor *oar_relu(oar_tensor *x) { return call_unary(OAR_OP_relu, x, NULL); }
