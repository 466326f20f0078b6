/* batch_norm_act and batch_norm_act_backward: what fuse_bn_act makes of ResNet's
 * relu(batch_norm(x)) and relu(batch_norm(x) + residual) and of their traced backward.
 *
 *   batch_norm_act(x, weight?, bias?, running_mean?, running_var?, residual?,
 *                  num_batches_tracked?; training, momentum, eps) -> y, mean, rstd
 *     y = relu(batch_norm(x) [+ residual]); mean and rstd (hidden) and the running statistics
 *     exactly as batch_norm has them.
 *   batch_norm_act_backward(grad_out, x, weight?, mean, rstd, y; masked_out) -> dx, dweight,
 *                           dbias, masked
 *     with gz = y > 0 ? grad_out : 0 (relu_backward on the fused output: y > 0 exactly where
 *     relu's input was), batch_norm_backward(gz, x, weight, mean, rstd); masked = gz when
 *     masked_out (the residual's gradient), else an empty tensor.
 * Both reference kernels run the references of the ops they combine. The gradient rules are
 * those ops' rules in sequence, so double backward works. */
#include "ops/op.h"

#include <math.h>
#include <string.h>

static oar_status same_as_input(const char *op, const char *what, const oar_tensor *x, const oar_tensor *t) {
    if (t->dtype == x->dtype && t->ndim == x->ndim && !memcmp(t->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
        return OAR_OK;
    char a[128], b[128];
    oar_format_shape(x->shape, x->ndim, a, sizeof a);
    oar_format_shape(t->shape, t->ndim, b, sizeof b);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s %s%s (the input's dtype and shape), got %s%s", op, what,
                     oar_dtype_name(x->dtype), a, oar_dtype_name(t->dtype), b);
}

/* ---- batch_norm_act */

/* batch_norm's inputs out of batch_norm_act's: all but the residual (input 5). */
static void bn_inputs(oar_tensor *const *in, oar_tensor **bn) {
    for (int k = 0; k < 5; k++) bn[k] = in[k];
    bn[5] = in[6];
}

static oar_status bn_act_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_tensor *bn[6];
    bn_inputs(in, bn);
    oar_status st = oar_opdef_batch_norm.infer(bn, 6, a, out, n_out);
    if (st != OAR_OK || !in[5]) return st;
    return same_as_input("batch_norm_act", "residual", in[0], in[5]);
}

static oar_status bn_act_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                             const oar_attr *a) {
    (void)n_in;
    oar_tensor *bn[6];
    bn_inputs(in, bn);
    oar_status st = oar_opdef_batch_norm.reference(ctx, bn, 6, out, n_out, a);
    if (st != OAR_OK) return st;
    oar_tensor *y = out[0], *r = in[5] ? (in[5]->contiguous ? oar_retain(in[5]) : oar_tensor_contiguous_copy(in[5])) : NULL;
    if (in[5] && !r) return OAR_ERR_OOM;
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    const int64_t es = (int64_t)tr->size;
    char *yp = oar_tensor_ptr(y);
    const char *rp = r ? oar_tensor_ptr(r) : NULL;
    for (int64_t i = 0; i < y->numel; i++) {
        double v = tr->load(yp + i * es);
        if (rp) v += tr->load(rp + i * es);
        tr->store(yp + i * es, v > 0 || isnan(v) ? v : 0.0); /* relu keeps NaN */
    }
    oar_tensor_unref(r);
    return OAR_OK;
}

/* relu's rule, then add's (the residual gets gz), then batch_norm's on gz. */
static oar_status bn_act_grad(oar_grad_ctx *g) {
    oar_tensor *gz = NULL;
    if (g->gout[0]) {
        oar_tensor *ri[2] = {g->gout[0], g->out[0]};
        if (!(gz = oar_op_call1(OAR_OP_relu_backward, ri, 2, NULL))) return oar_last_status();
    }
    if (g->in[5] && g->needs[5]) g->gin[5] = gz;
    oar_tensor *gout[3] = {gz, g->gout[1], g->gout[2]};
    oar_grad_ctx bg = {g->attrs, g->in, 5, g->out, 3, gout, g->needs, g->gin};
    return oar_opdef_batch_norm.grad(&bg);
}

const oar_op_def oar_opdef_batch_norm_act = {
    .name = "batch_norm_act", .n_inputs = 7, .n_outputs = 3, .n_visible = 1, .n_attrs = 3,
    .attrs = {{"training", OAR_ATTR_INT}, {"momentum", OAR_ATTR_FLOAT}, {"eps", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x7E,
    .unsaved_inputs = 0x58, /* running stats (updated in place) and the counter: never read by the rule */
    .mutated_inputs = 0x18,
    .infer = bn_act_infer, .reference = bn_act_ref, .grad = bn_act_grad,
};

/* ---- batch_norm_act_backward */

static oar_status bn_act_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                        int *n_out) {
    (void)n_in;
    oar_status st = oar_opdef_batch_norm_backward.infer(in, 5, NULL, out, n_out);
    if (st != OAR_OK) return st;
    if ((st = same_as_input("batch_norm_act_backward", "y", in[1], in[5])) != OAR_OK) return st;
    oar_meta_from(&out[3], in[1]);
    if (!a[0].i) {
        out[3].ndim = 1;
        out[3].shape[0] = 0;
    }
    *n_out = 4;
    return OAR_OK;
}

static oar_status bn_act_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *y = in[5];
    oar_tensor *gz = a[0].i ? oar_retain(out[3]) : oar_tensor_new(g->dtype, g->shape, g->ndim);
    if (!gz) return OAR_ERR_OOM;
    const oar_dtype_traits *tr = &oar_dtypes[g->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *gp = oar_tensor_ptr(g), *yp = oar_tensor_ptr(y);
    char *zp = oar_tensor_ptr(gz);
    for (int64_t i = 0; i < g->numel; i++) tr->store(zp + i * es, tr->load(yp + i * es) > 0 ? tr->load(gp + i * es) : 0.0);
    oar_tensor *bin[5] = {gz, in[1], in[2], in[3], in[4]};
    oar_status st = oar_opdef_batch_norm_backward.reference(ctx, bin, 5, out, 3, NULL);
    oar_tensor_unref(gz);
    return st;
}

/* gz = relu_backward(grad_out, y) traced again; batch_norm_backward's rule gives the gradient
 * reaching gz (plus masked's own), which relu_backward's rule passes to grad_out. */
static oar_status bn_act_backward_grad(oar_grad_ctx *g) {
    oar_tensor *ri[2] = {g->in[0], g->in[5]};
    oar_tensor *gz = oar_op_call1(OAR_OP_relu_backward, ri, 2, NULL);
    if (!gz) return oar_last_status();
    oar_tensor *bin[5] = {gz, g->in[1], g->in[2], g->in[3], g->in[4]}, *bgin[5] = {0};
    oar_grad_ctx bg = {NULL, bin, 5, g->out, 3, g->gout, g->needs, bgin};
    oar_status st = oar_opdef_batch_norm_backward.grad(&bg);
    if (st != OAR_OK) return st;
    for (int i = 1; i < 5; i++) g->gin[i] = bgin[i];
    oar_tensor *ugz = bgin[0];
    if (g->attrs[0].i && g->gout[3]) ugz = ugz ? oar_add(ugz, g->gout[3]) : g->gout[3];
    if (ugz && g->needs[0]) {
        oar_tensor *ui[2] = {ugz, g->in[5]};
        if (!(g->gin[0] = oar_op_call1(OAR_OP_relu_backward, ui, 2, NULL))) return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_batch_norm_act_backward = {
    .name = "batch_norm_act_backward", .n_inputs = 6, .n_outputs = 4, .key_input = 1, .n_attrs = 1,
    .attrs = {{"masked_out", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x4,
    .infer = bn_act_backward_infer, .reference = bn_act_backward_ref, .grad = bn_act_backward_grad,
};
