/* The residual add of a pre-LN transformer fused with the layer_norm that reads it, and the
 * layer_norm backward fused with the add that accumulates its dx into the residual gradient.
 * Both are made by the fuse_add_layer_norm pass (src/graph/passes/fuse_add_layer_norm.c):
 *
 *   add_layer_norm(a, b, weight?, bias?; normalized_ndim, eps) -> sum, y [, mean, rstd]
 *       sum = a + b (same shape, no broadcasting), then (y, mean, rstd) = layer_norm(sum, ...)
 *   layer_norm_backward_add(grad_out, x, weight?, mean, rstd, residual; normalized_ndim)
 *       -> dx + residual, dweight, dbias      (layer_norm_backward's outputs, residual added)
 *
 * Like layer_norm, both take bf16/f16 activations with f32 parameters (autocast's mixed class:
 * add would keep two low operands low, layer_norm takes them with its f32 weight).
 * Each op means exactly its unfused pair: inference, reference kernel and gradient rule call
 * the ops' own definitions (add's rule is the identity to both operands), so every mode of
 * autograd sees the unfused ops. */
#include "ops/op.h"

#include <string.h>

#define ALN "add_layer_norm"
#define LNBA "layer_norm_backward_add"

/* b (or residual) has a's dtype and exactly a's shape: the fusions never broadcast. */
static oar_status check_same(const char *op, const char *what_a, const oar_tensor *a, const char *what_b,
                             const oar_tensor *b) {
    if (b->dtype != a->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype %s (%s's), got %s", op, what_b,
                         oar_dtype_name(a->dtype), what_a, oar_dtype_name(b->dtype));
    if (b->ndim != a->ndim || memcmp(b->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim)) {
        char sa[128], sb[128];
        oar_format_shape(a->shape, a->ndim, sa, sizeof sa);
        oar_format_shape(b->shape, b->ndim, sb, sizeof sb);
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s of %s's shape %s (no broadcasting), got %s", op, what_b,
                         what_a, sa, sb);
    }
    return OAR_OK;
}

/* out = a + b elementwise, in the dtype (one rounding per element, like add). */
static void add_into(const oar_tensor *a, const oar_tensor *b, oar_tensor *out) {
    const oar_dtype_traits *tr = &oar_dtypes[a->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *ap = oar_tensor_ptr(a), *bp = oar_tensor_ptr(b);
    char *op = oar_tensor_ptr(out);
    for (int64_t i = 0; i < a->numel; i++) tr->store(op + i * es, tr->load(ap + i * es) + tr->load(bp + i * es));
}

/* ---- add_layer_norm */

static oar_status aln_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = oar_check_float(ALN, in[0], "a");
    if (st == OAR_OK) st = check_same(ALN, "a", in[0], "b", in[1]);
    if (st != OAR_OK) return st;
    oar_tensor *ln_in[3] = {in[0], in[2], in[3]};
    int n = 3;
    if ((st = oar_opdef_layer_norm.infer(ln_in, 3, a, out + 1, &n)) != OAR_OK) {
        oar_error_prefix(ALN);
        return st;
    }
    oar_meta_from(&out[0], in[0]);
    *n_out = 4;
    return OAR_OK;
}

static oar_status aln_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)n_in; (void)n_out;
    add_into(in[0], in[1], out[0]);
    oar_tensor *ln_in[3] = {out[0], in[2], in[3]};
    return oar_opdef_layer_norm.reference(ctx, ln_in, 3, out + 1, 3, a);
}

/* layer_norm's rule on (sum, weight, bias) gives d sum (plus the affine gradients); the add
 * passes d sum, with the gradient reaching sum directly, to both operands. */
static oar_status aln_grad(oar_grad_ctx *g) {
    oar_tensor *gs = g->gout[0], *s = g->out[0];
    if (gs && g->gout[1] && !g->gout[2] && !g->gout[3] && gs->dtype == s->dtype && gs->ndim == s->ndim &&
        !memcmp(gs->shape, s->shape, sizeof(int64_t) * (size_t)s->ndim)) {
        /* the usual case (y's gradient and the residual stream's): layer_norm's one-op rule
         * with the residual added in the same pass, the bits of that rule and the add below */
        oar_tensor *in[6] = {g->gout[1], s, g->in[2], g->out[2], g->out[3], gs}, *d[3];
        int n = 3;
        oar_status st = oar_op_call(OAR_OP_layer_norm_backward_add, in, 6, g->attrs, d, &n);
        if (st != OAR_OK) return st;
        for (int i = 0; i < 3; i++) oar_track(d[i]);
        if (g->needs[0]) g->gin[0] = d[0];
        if (g->needs[1]) g->gin[1] = d[0];
        if (g->in[2] && g->needs[2]) g->gin[2] = d[1];
        if (g->in[3] && g->needs[3]) g->gin[3] = oar_reshape(d[2], g->in[3]->shape, g->in[3]->ndim);
        return (g->needs[3] && g->in[3] && !g->gin[3]) ? oar_last_status() : OAR_OK;
    }
    oar_tensor *ln_in[3] = {g->out[0], g->in[2], g->in[3]}, *ln_gin[3] = {0};
    bool ln_needs[3] = {g->needs[0] || g->needs[1], g->needs[2], g->needs[3]};
    oar_tensor *dsum = NULL;
    if (g->gout[1] || g->gout[2] || g->gout[3]) {
        oar_grad_ctx lg = {.attrs = g->attrs, .in = ln_in, .n_in = 3, .out = g->out + 1, .n_out = 3,
                           .gout = g->gout + 1, .needs = ln_needs, .gin = ln_gin};
        oar_status st = oar_opdef_layer_norm.grad(&lg);
        if (st != OAR_OK) return st;
        dsum = ln_gin[0];
    }
    if (g->gout[0]) dsum = dsum ? oar_add(g->gout[0], dsum) : g->gout[0];
    if (g->gout[0] && ln_needs[0] && !dsum) return oar_last_status();
    if (g->needs[0]) g->gin[0] = dsum;
    if (g->needs[1]) g->gin[1] = dsum;
    if (g->needs[2]) g->gin[2] = ln_gin[1];
    if (g->needs[3]) g->gin[3] = ln_gin[2];
    return OAR_OK;
}

const oar_op_def oar_opdef_add_layer_norm = {
    .name = ALN, .n_inputs = 4, .n_outputs = 4, .n_visible = 2, .n_attrs = 2,
    .attrs = {{"normalized_ndim", OAR_ATTR_INT}, {"eps", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0xC,
    .infer = aln_infer, .reference = aln_ref, .grad = aln_grad,
};

/* ---- layer_norm_backward_add */

static oar_status lnba_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    int n = 3;
    oar_status st = oar_opdef_layer_norm_backward.infer(in, 5, a, out, &n);
    if (st != OAR_OK) {
        oar_error_prefix(LNBA);
        return st;
    }
    if ((st = check_same(LNBA, "x", in[1], "residual", in[5])) != OAR_OK) return st;
    *n_out = 3;
    return OAR_OK;
}

static oar_status lnba_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)n_in;
    oar_status st = oar_opdef_layer_norm_backward.reference(ctx, in, 5, out, n_out, a);
    if (st == OAR_OK) add_into(out[0], in[5], out[0]);
    return st;
}

/* layer_norm_backward's own rule for its five inputs; the residual reaches dx + residual as is. */
static oar_status lnba_grad(oar_grad_ctx *g) {
    oar_grad_ctx lg = *g;
    lg.n_in = 5;
    oar_status st = oar_opdef_layer_norm_backward.grad(&lg);
    if (st != OAR_OK) return st;
    if (g->needs[5]) g->gin[5] = g->gout[0];
    return OAR_OK;
}

const oar_op_def oar_opdef_layer_norm_backward_add = {
    .name = LNBA, .n_inputs = 6, .n_outputs = 3, .key_input = 1, .n_attrs = 1,
    .attrs = {{"normalized_ndim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x4,
    .infer = lnba_infer, .reference = lnba_ref, .grad = lnba_grad,
};
