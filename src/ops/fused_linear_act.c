/* linear_act(x, weight, bias?; activation) = act(x·Wᵀ + b), made by the fuse_linear_act pass
 * (src/graph/passes/fuse_linear_act.c). activation: 0 none, 1 relu, 2 gelu (erf), 3 gelu (tanh).
 *
 * The op means exactly linear followed by the activation op: the reference runs linear's
 * reference kernel and then the activation's reference kernel over the result in place, and the
 * gradient rule recomputes the pre-activation with oar_linear and chains the two ops' own
 * rules, so every mode of autograd sees the unfused pair. */
#include "ops/fused_ew.h"

#define LA "linear_act"

/* The activation op of kind k (with its attributes), false for none. */
static bool act_op(int64_t k, oar_op_id *op, oar_attr *a) {
    a[0] = oar_attr_int(k == OAR_LINEAR_ACT_GELU_TANH);
    switch (k) {
    case OAR_LINEAR_ACT_RELU: *op = OAR_OP_relu; return true;
    case OAR_LINEAR_ACT_GELU: case OAR_LINEAR_ACT_GELU_TANH: *op = OAR_OP_gelu; return true;
    default: return false;
    }
}

static oar_status la_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    int64_t k = a[0].i;
    if (k < OAR_LINEAR_ACT_NONE || k > OAR_LINEAR_ACT_GELU_TANH)
        return oar_error(OAR_ERR_INVALID_ARG, LA ": expected activation 0 (none), 1 (relu), 2 (gelu) or 3 "
                                              "(gelu, tanh form), got %lld", (long long)k);
    oar_status st = oar_opdef_linear.infer(in, n_in, NULL, out, n_out);
    if (st != OAR_OK) {
        oar_error_prefix(LA);
        return st;
    }
    if (k >= OAR_LINEAR_ACT_GELU) return oar_check_float(LA, in[0], "x (gelu)");
    return OAR_OK;
}

static oar_status la_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    oar_status st = oar_opdef_linear.reference(ctx, in, n_in, out, n_out, NULL);
    oar_op_id op;
    oar_attr aa[1];
    if (st != OAR_OK || !act_op(a[0].i, &op, aa) || out[0]->numel == 0) return st;
    oar_tensor *y = out[0];
    return oar_op_table[op]->reference(ctx, &y, 1, &y, 1, aa); /* elementwise: in place is fine */
}

/* dz = act'(z) gout by the activation's rule, then linear's rule on dz. */
static oar_status la_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    oar_tensor *gz = g->gout[0];
    oar_op_id op;
    oar_attr aa[1];
    if (act_op(g->attrs[0].i, &op, aa)) {
        oar_tensor *z = oar_linear(g->in[0], g->in[1], g->n_in > 2 ? g->in[2] : NULL);
        if (!z) return oar_last_status();
        oar_tensor *ins[1] = {z}, *outs[1] = {g->out[0]}, *gouts[1] = {gz}, *gins[1] = {NULL};
        bool needs[1] = {true};
        oar_grad_ctx ac = {.attrs = aa, .in = ins, .n_in = 1, .out = outs, .n_out = 1,
                           .gout = gouts, .needs = needs, .gin = gins};
        oar_status st = oar_op_table[op]->grad(&ac);
        if (st != OAR_OK) return st;
        if (!(gz = gins[0])) return OAR_OK;
    }
    oar_tensor *gouts[1] = {gz};
    oar_grad_ctx lc = *g;
    lc.attrs = NULL;
    lc.gout = gouts;
    return oar_opdef_linear.grad(&lc);
}

const oar_op_def oar_opdef_linear_act = {
    .name = LA, .n_inputs = 3, .n_outputs = 1, .optional_inputs = 1u << 2, .n_attrs = 1,
    .attrs = {{"activation", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = la_infer, .reference = la_ref, .grad = la_grad,
};
