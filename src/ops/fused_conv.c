/* conv2d_act(x, weight, bias?, residual?; stride, padding, dilation, groups, act, layout):
 *     y = act(conv2d(x, weight, bias) + residual)      act: "relu", "relu6" or "none"
 * (relu6: clip to [0, 6] as clip(min=0, max=6), NaN staying NaN; mobilenet_v2's ReLU6 / Clip)
 * layout "nchw": x [N, C, H, W] and y, residual [N, CO, OH, OW], as conv2d; layout "nhwc":
 * x [N, H, W, C] and y, residual [N, OH, OW, CO] (the weight stays [CO, C / groups, kh, kw]),
 * which is oneDNN's own activation layout: consecutive convs then need no conversions.
 * The fuse_conv_act pass (inference) makes it from conv2d [+ add] [+ relu] so that the
 * convolution applies its epilogue while the output is still in cache (oneDNN post-ops),
 * instead of two more passes over memory. It is an ordinary op: inference, a reference
 * kernel, and a gradient rule with the conv's own backward ops. */
#include "ops/op.h"

#include <string.h>

enum { ACT_NONE, ACT_RELU, ACT_RELU6, ACT_BAD };

static const int TO_NCHW[4] = {0, 3, 1, 2}, TO_NHWC[4] = {0, 2, 3, 1};

/* -1: unknown layout */
static int is_nhwc(const oar_attr *a) { return !strcmp(a->s, "nhwc") ? 1 : !strcmp(a->s, "nchw") ? 0 : -1; }

/* t's NHWC data seen as NCHW (a header on the same storage; no copy). */
static oar_tensor nchw_view(const oar_tensor *t) {
    oar_tensor v = *t;
    for (int d = 0; d < 4; d++) v.shape[d] = t->shape[TO_NCHW[d]], v.strides[d] = t->strides[TO_NCHW[d]];
    v.contiguous = false;
    return v;
}

static int act_kind(const oar_attr *a) {
    if (!strcmp(a->s, "relu")) return ACT_RELU;
    if (!strcmp(a->s, "relu6")) return ACT_RELU6;
    if (!strcmp(a->s, "none")) return ACT_NONE;
    return ACT_BAD;
}

static oar_status conv2d_act_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    int nhwc = is_nhwc(&a[5]);
    if (nhwc < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "conv2d_act: expected layout to be nchw or nhwc, got '%s'", a[5].s);
    if (act_kind(&a[4]) == ACT_BAD)
        return oar_error(OAR_ERR_INVALID_ARG, "conv2d_act: expected act to be relu, relu6 or none, got '%s'", a[4].s);
    oar_status st;
    if (nhwc) { /* conv2d's checks on x seen as NCHW */
        if (in[0]->ndim != 4) {
            char got[128];
            oar_format_shape(in[0]->shape, in[0]->ndim, got, sizeof got);
            return oar_error(OAR_ERR_SHAPE, "conv2d_act: expected x to be 4-d [N, H, W, C] (layout nhwc), got shape %s", got);
        }
        int64_t xs[4];
        for (int d = 0; d < 4; d++) xs[d] = in[0]->shape[TO_NCHW[d]];
        oar_tensor *x = oar_tensor_shell(in[0]->dtype, xs, 4);
        if (!x) return oar_last_status();
        st = oar_opdef_conv2d.infer((oar_tensor *[3]){x, in[1], in[2]}, 3, a, out, n_out);
        oar_tensor_unref(x);
        int64_t ys[4];
        memcpy(ys, out->shape, sizeof ys);
        for (int d = 0; d < 4; d++) out->shape[d] = ys[TO_NHWC[d]];
    } else {
        st = oar_opdef_conv2d.infer(in, 3, a, out, n_out);
    }
    if (st != OAR_OK) return st;
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
        if (act == ACT_RELU6) v = v < 0 ? 0.0 : v > 6 ? 6.0 : v; /* clip_d's order: NaN stays */
        tr->store(yp + i * es, v);
    }
}

static oar_status conv2d_act_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in;
    if (!is_nhwc(&a[5])) {
        oar_status st = oar_opdef_conv2d.reference(ctx, in, 3, out, n_out, a);
        if (st == OAR_OK) epilogue(out[0], in[3], act_kind(&a[4]));
        return st;
    }
    /* NHWC: the NCHW computation on converted copies, written back through a view */
    oar_tensor xv = nchw_view(in[0]), yv = nchw_view(out[0]), rv;
    oar_tensor *x = oar_tensor_contiguous_copy(&xv), *y = oar_tensor_new(out[0]->dtype, yv.shape, 4), *r = NULL;
    if (in[3]) rv = nchw_view(in[3]), r = oar_tensor_contiguous_copy(&rv);
    oar_status st = x && y && (!in[3] || r) ? OAR_OK : oar_error(OAR_ERR_OOM, "conv2d_act: out of memory");
    if (st == OAR_OK) st = oar_opdef_conv2d.reference(ctx, (oar_tensor *[3]){x, in[1], in[2]}, 3, &y, 1, a);
    if (st == OAR_OK) {
        epilogue(y, r, act_kind(&a[4]));
        oar_tensor_copy_strided(&yv, y);
    }
    oar_tensor_unref(x);
    oar_tensor_unref(y);
    oar_tensor_unref(r);
    return st;
}

/* gz = dL/d(conv + residual): gy where the output is positive (relu), strictly inside (0, 6)
 * (relu6: as relu, the output cannot tell a bound from beyond it), else gy. */
static oar_status conv2d_act_grad(oar_grad_ctx *g) {
    oar_tensor *gy = g->gout[0], *x = g->in[0], *w = g->in[1], *y = g->out[0];
    bool nhwc = is_nhwc(&g->attrs[5]) == 1;
    if (nhwc) { /* the NCHW rule on permuted views, results permuted back */
        gy = oar_permute(gy, TO_NCHW, 4);
        x = oar_permute(x, TO_NCHW, 4);
        y = oar_permute(y, TO_NCHW, 4);
    }
    if (gy && !gy->contiguous) gy = oar_contiguous(gy);
    oar_tensor *gz = gy;
    if (act_kind(&g->attrs[4]) == ACT_RELU) {
        oar_tensor *ri[2] = {gy, y};
        gz = oar_op_call1(OAR_OP_relu_backward, ri, 2, NULL);
    } else if (act_kind(&g->attrs[4]) == ACT_RELU6) {
        oar_tensor *inside = oar_logical_and(oar_gt_scalar(y, 0.0), oar_lt_scalar(y, 6.0));
        gz = inside ? oar_where(inside, gy, oar_zeros_like(gy)) : NULL;
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
    if (nhwc) {
        if (g->gin[0]) g->gin[0] = oar_permute(g->gin[0], TO_NHWC, 4);
        if (g->gin[3]) g->gin[3] = oar_permute(g->gin[3], TO_NHWC, 4);
    }
    for (int i = 0; i < 4; i++)
        if (g->needs[i] && g->in[i] && !g->gin[i]) return oar_last_status();
    return OAR_OK;
}

const oar_op_def oar_opdef_conv2d_act = {
    .name = "conv2d_act", .n_inputs = 4, .n_outputs = 1, .n_attrs = 6,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"dilation", OAR_ATTR_INTS},
              {"groups", OAR_ATTR_INT}, {"act", OAR_ATTR_STR}, {"layout", OAR_ATTR_STR}},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = (1u << 2) | (1u << 3),
    .infer = conv2d_act_infer, .reference = conv2d_act_ref, .grad = conv2d_act_grad,
};
