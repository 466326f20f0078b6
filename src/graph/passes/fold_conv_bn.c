/* fold_conv_bn (inference only): conv2d(x, w, b?) followed by batch_norm in inference mode
 * (running statistics) becomes one conv2d(x, w', b') with
 *     scale = gamma * rsqrt(running_var + eps)          [C]
 *     w'    = w * scale (per output channel)
 *     b'    = (b - running_mean) * scale + beta          (b = 0 when the conv has none)
 * which equals batch_norm(conv2d(x, w, b)) in exact arithmetic since both are affine per
 * channel. Parameters are bound by reference and may change between runs (a checkpoint load,
 * training between evaluations), so w' and b' are not computed here: the pass emits ordinary
 * nodes for them, which read only parameters and constants. The executor runs such nodes once
 * and again only when a parameter's storage or version changes (graph/hoist.h), so per run
 * the fold costs nothing and is never stale.
 *
 * Matched in the main block: the conv's output has exactly one use (the batch_norm), the
 * batch_norm's statistics outputs are unused, training = 0, running statistics are present,
 * and the weights, bias and statistics are parameters or constants no node mutates (so the
 * emitted nodes are computed once). Folding changes rounding (w * scale is rounded once, and
 * the affine step moves into the conv's accumulation): tests compare within a tolerance. */
#include "graph/passes/passes.h"

#include <stdlib.h>

/* A parameter or constant nothing in the program writes; absent (-1) counts when optional. */
static bool fixed_value(const oar_program *p, const bool *mut, int v, bool optional) {
    if (v < 0) return optional;
    oar_value_kind k = p->values[v].kind;
    return (k == OAR_VAL_PARAM || k == OAR_VAL_CONST) && !mut[v];
}

/* The conv node feeding batch_norm node bn when the pair folds, else -1. */
static int foldable(const oar_program *p, const oar_node *bn, const bool *mut, const int *uses) {
    if (bn->dead || bn->op != OAR_OP_batch_norm || bn->block != OAR_MAIN_BLOCK || bn->attrs[0].i != 0) return -1;
    if (bn->n_in < 5 || bn->in[3] < 0 || bn->in[4] < 0 || bn->in[0] < 0) return -1;
    for (int k = 1; k < 5; k++)
        if (!fixed_value(p, mut, bn->in[k], true)) return -1;
    for (int o = 1; o < bn->n_out; o++)
        if (uses[bn->out[o]] != 0) return -1;
    const oar_value *x = &p->values[bn->in[0]];
    if (x->kind != OAR_VAL_NODE || uses[bn->in[0]] != 1) return -1;
    const oar_node *conv = &p->nodes[x->node];
    if (conv->dead || conv->op != OAR_OP_conv2d || conv->block != OAR_MAIN_BLOCK) return -1;
    /* the emitted nodes combine the conv's weight with batch_norm's vectors: one dtype for all
     * (a bf16 conv feeding a batch_norm with f32 parameters stays unfolded) */
    if (conv->in[1] < 0) return -1;
    oar_dtype wdt = p->values[conv->in[1]].meta.dtype;
    for (int k = 1; k < 5; k++)
        if (bn->in[k] >= 0 && p->values[bn->in[k]].meta.dtype != wdt) return -1;
    if (!fixed_value(p, mut, conv->in[1], false) || !fixed_value(p, mut, conv->in[2], true)) return -1;
    return x->node;
}

static int pos_in_block(const oar_block *b, int id) {
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

/* Emits the nodes computing w' and b' just before the conv (at *pos, which advances). */
static oar_status emit_fold(oar_program *p, int bn_id, int conv_id, int *pos, int *w_out, int *b_out) {
    const oar_node *bn = &p->nodes[bn_id];
    int gamma = bn->in[1], beta = bn->in[2], rm = bn->in[3], rv = bn->in[4];
    int w = p->nodes[conv_id].in[1], b = p->nodes[conv_id].in[2];
    double eps = bn->attrs[2].f;
    oar_dtype dt = p->values[w].meta.dtype;
    int64_t co = p->values[w].meta.shape[0];
    int eps_c = oar_pass_scalar_const(p, eps, dt);
    if (eps_c < 0) return oar_last_status();
#define EMIT(dst, op, n, attrs, ...)                                                                  \
    do {                                                                                              \
        int in_[] = {__VA_ARGS__};                                                                    \
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, (*pos)++, op, in_, n, attrs, &(dst)) < 0)         \
            return oar_last_status();                                                                 \
    } while (0)
    int t, inv, scale, s4, shifted, bias;
    EMIT(t, OAR_OP_add, 2, NULL, rv, eps_c);
    EMIT(inv, OAR_OP_rsqrt, 1, NULL, t);
    scale = inv;
    if (gamma >= 0) EMIT(scale, OAR_OP_mul, 2, NULL, inv, gamma);
    int64_t shape4[4] = {co, 1, 1, 1};
    oar_attr rs = oar_attr_ints(shape4, 4);
    EMIT(s4, OAR_OP_reshape, 1, &rs, scale);
    EMIT(*w_out, OAR_OP_mul, 2, NULL, w, s4);
    if (b >= 0) EMIT(shifted, OAR_OP_sub, 2, NULL, b, rm);
    else EMIT(shifted, OAR_OP_neg, 1, NULL, rm);
    EMIT(bias, OAR_OP_mul, 2, NULL, shifted, scale);
    if (beta >= 0) EMIT(bias, OAR_OP_add, 2, NULL, bias, beta);
#undef EMIT
    *b_out = bias;
    return OAR_OK;
}

oar_status oar_pass_fold_conv_bn(oar_program *p) {
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    bool *mut = oar_pass_mutable_values(p);
    oar_status st = uses && mut ? OAR_OK : oar_error(OAR_ERR_OOM, "fold_conv_bn: out of memory");
    if (st == OAR_OK) oar_program_use_counts(p, uses);
    int n_nodes = p->n_nodes; /* nodes added below are the fold's own */
    for (int id = 0; id < n_nodes && st == OAR_OK; id++) {
        int conv = foldable(p, &p->nodes[id], mut, uses);
        if (conv < 0) continue;
        int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], conv), w2, b2;
        if (pos < 0) continue;
        if ((st = emit_fold(p, id, conv, &pos, &w2, &b2)) != OAR_OK) break;
        oar_node *c = &p->nodes[conv], *bn = &p->nodes[id]; /* the tables may have moved */
        c->in[1] = w2;
        c->in[2] = b2;
        p->values[c->out[0]].dyn_dims = p->values[bn->out[0]].dyn_dims;
        oar_program_replace_uses(p, bn->out[0], c->out[0]);
        bn->dead = true;
    }
    free(uses);
    free(mut);
    return st;
}
