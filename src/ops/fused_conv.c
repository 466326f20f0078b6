/* conv2d_act(x, weight, bias?, residual?; stride, padding, dilation, groups, act):
 *     y = act(conv2d(x, weight, bias) + residual)      act: "relu" or "none"
 * The fuse_conv_act pass (inference) makes it from conv2d [+ add] [+ relu] so that the
 * convolution applies its epilogue while the output is still in cache (oneDNN post-ops),
 * instead of two more passes over memory. It is an ordinary op: inference, a reference
 * kernel, and a gradient rule with the conv's own backward ops. */
#include "ops/op.h"

#include <string.h>

enum { ACT_NONE, ACT_RELU, ACT_BAD };

static int act_kind(const oar_attr *a) {
    if (!strcmp(a->s, "relu")) return ACT_RELU;
    if (!strcmp(a->s, "none")) return ACT_NONE;
    return ACT_BAD;
}

static oar_status conv2d_act_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = oar_opdef_conv2d.infer(in, 3, a, out, n_out);
    if (st != OAR_OK) return st;
    if (act_kind(&a[4]) == ACT_BAD)
        return oar_error(OAR_ERR_INVALID_ARG, "conv2d_act: expected act to be relu or none, got '%s'", a[4].s);
    const oar_tensor *r = in[3];
    if (r && (r->dtype != out->dtype || r->ndim != out->ndim ||
              memcmp(r->shape, out->shape, sizeof(int64_t) * (size_t)out->ndim))) {
        char want[128], got[128];
        oar_format_shape(out->shape, out->ndim, want, sizeof want);
        oar_format_shape(r->shape, r->ndim, got, sizeof got);
        return oar_error(OAR_ERR_SHAPE, "conv2d_act: expected residual of the output's dtype %s and shape %s, got "
                                        "%s %s", oar_dtype_name(out->dtype), want, oar_dtype_name(r->dtype), got);
    }
    return OAR_OK;
}

/* The epilogue over y in place: y + residual, then the activation; in double through the
 * dtype traits (the reference's convention). */
static void epilogue(oar_tensor *y, const oar_tensor *res, int act) {
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    const int64_t es = (int64_t)tr->size;
    char *yp = oar_tensor_ptr(y);
    const char *rp = res ? oar_tensor_ptr(res) : NULL;
    for (int64_t i = 0; i < y->numel; i++) {
        double v = tr->load(yp + i * es);
        if (rp) v += tr->load(rp + i * es);
        if (act == ACT_RELU) v = v > 0 ? v : 0.0;
        tr->store(yp + i * es, v);
    }
}

static oar_status conv2d_act_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in;
    oar_status st = oar_opdef_conv2d.reference(ctx, in, 3, out, n_out, a);
    if (st == OAR_OK) epilogue(out[0], in[3], act_kind(&a[4]));
    return st;
}

/* gz = dL/d(conv + residual): gy where the output is positive (relu), else gy. */
static oar_status conv2d_act_grad(oar_grad_ctx *g) {
    oar_tensor *gy = g->gout[0], *x = g->in[0], *w = g->in[1];
    if (gy && !gy->contiguous) gy = oar_contiguous(gy);
    oar_tensor *gz = gy;
    if (act_kind(&g->attrs[4]) == ACT_RELU) {
        oar_tensor *ri[2] = {gy, g->out[0]};
        gz = oar_op_call1(OAR_OP_relu_backward, ri, 2, NULL);
    }
    if (!gz) return oar_last_status();
    oar_attr ga[5] = {oar_attr_ints(x->shape, 4), g->attrs[0], g->attrs[1], g->attrs[2], g->attrs[3]};
    if (g->needs[0]) g->gin[0] = oar_op_call1(OAR_OP_conv2d_grad_input, (oar_tensor *[2]){gz, w}, 2, ga);
    if (g->needs[1]) {
        ga[0] = oar_attr_ints(w->shape, 4);
        g->gin[1] = oar_op_call1(OAR_OP_conv2d_grad_weight, (oar_tensor *[2]){x, gz}, 2, ga);
    }
    if (g->needs[2]) g->gin[2] = oar_sum(gz, (int[]){0, 2, 3}, 3, false);
    if (g->needs[3]) g->gin[3] = gz;
    for (int i = 0; i < 4; i++)
        if (g->needs[i] && g->in[i] && !g->gin[i]) return oar_last_status();
    return OAR_OK;
}

const oar_op_def oar_opdef_conv2d_act = {
    .name = "conv2d_act", .n_inputs = 4, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"dilation", OAR_ATTR_INTS},
              {"groups", OAR_ATTR_INT}, {"act", OAR_ATTR_STR}},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = (1u << 2) | (1u << 3),
    .infer = conv2d_act_infer, .reference = conv2d_act_ref, .grad = conv2d_act_grad,
};
