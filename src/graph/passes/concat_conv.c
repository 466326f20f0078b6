/* Part of conv_nhwc (inference only): a 1x1 convolution reading only a channel concat is the
 * sum of 1x1 convolutions of the concat's inputs, each with its slice of the weight's input
 * channels,
 *     conv(concat(a, b, C), w) = conv(b, w[:, Ca:], bias, residual = conv(a, w[:, :Ca]))
 * and oneDNN adds the residual while writing (the sum post-op of conv2d_act). squeezenet's
 * fire modules concatenate two convs' outputs for the next 1x1 "squeeze" conv: in NHWC the
 * concat interleaves every pixel's channels, a copy of the whole (wide) activation, where the
 * chain reads and writes only the squeeze's narrow output once more. Matched on NHWC
 * conv2d_act (conv_nhwc's layout): 1x1 kernel, stride 1, no padding, dilation 1, one group,
 * no residual of its own, a parameter or constant weight nothing mutates (its slices are
 * nodes reading only it, which the executor hoists: computed once per parameter change); the
 * concat on the channel dim (3), f32, read by this conv only. The summation order changes
 * (two partial sums added), within the tolerances of an unfused conv. */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

static int pos_in_block(const oar_block *b, int id) {
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

static bool ints_are(const oar_attr *a, int64_t v) {
    for (int i = 0; i < a->n; i++)
        if (a->ints[i] != v) return false;
    return true;
}

/* The concat node conv id reads when the pair splits, else -1. uses and mut cover the first
 * nv values: a later one is the output of a node this pass added (not a concat). */
static int splittable(const oar_program *p, int id, const int *uses, const bool *mut, int nv) {
    const oar_node *n = &p->nodes[id];
    if (n->n_in < 2 || n->in[0] < 0 || n->in[0] >= nv || n->in[1] >= nv) return -1;
    if (n->dead || n->op != OAR_OP_conv2d_act || n->block != OAR_MAIN_BLOCK || strcmp(n->attrs[5].s, "nhwc") != 0)
        return -1;
    if ((n->n_in > 3 && n->in[3] >= 0) || n->in[1] < 0 || n->attrs[3].i != 1 || !ints_are(&n->attrs[0], 1) ||
        !ints_are(&n->attrs[1], 0) || !ints_are(&n->attrs[2], 1))
        return -1;
    const oar_value *w = &p->values[n->in[1]], *x = &p->values[n->in[0]];
    if (w->meta.ndim != 4 || w->meta.shape[2] != 1 || w->meta.shape[3] != 1 || w->meta.dtype != OAR_F32) return -1;
    if ((w->kind != OAR_VAL_PARAM && w->kind != OAR_VAL_CONST) || mut[n->in[1]]) return -1;
    if (x->kind != OAR_VAL_NODE || uses[n->in[0]] != 1 || x->meta.dtype != OAR_F32) return -1;
    const oar_node *c = &p->nodes[x->node];
    if (c->dead || c->op != OAR_OP_concat || c->block != OAR_MAIN_BLOCK || c->n_in < 2) return -1;
    if (c->attrs[0].i != 3 && c->attrs[0].i != -1) return -1;
    for (int k = 0; k < c->n_in; k++)
        if (c->in[k] < 0 || p->values[c->in[k]].meta.ndim != 4 || p->values[c->in[k]].meta.shape[3] == 0) return -1;
    return x->node;
}

static oar_status split(oar_program *p, int id, int cat) {
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (pos < 0) return OAR_OK;
    int n_parts = p->nodes[cat].n_in, parts[OAR_MAX_INPUTS];
    memcpy(parts, p->nodes[cat].in, sizeof(int) * (size_t)n_parts);
    int w = p->nodes[id].in[1], b = p->nodes[id].in[2], y = p->nodes[id].out[0];
    oar_attr attrs[6];
    memcpy(attrs, p->nodes[id].attrs, sizeof attrs);
    const oar_attr act = attrs[4]; /* a copy: the attr may hold its text */
    int64_t c0 = 0;
    int acc = -1;
    for (int k = 0; k < n_parts; k++) {
        int64_t c1 = c0 + p->values[parts[k]].meta.shape[3];
        oar_attr sl[4] = {oar_attr_int(1), oar_attr_int(c0), oar_attr_int(c1), oar_attr_int(1)};
        int ws, wc, in_s[1] = {w};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_slice, in_s, 1, sl, &ws) < 0) return oar_last_status();
        in_s[0] = ws;
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_contiguous, in_s, 1, NULL, &wc) < 0)
            return oar_last_status();
        bool last = k == n_parts - 1;
        attrs[4] = last ? act : oar_attr_str("none"); /* the activation after the whole sum */
        int in[4] = {parts[k], wc, last ? b : -1, acc}, out;
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_conv2d_act, in, 4, attrs, &out) < 0)
            return oar_last_status();
        p->values[out].dyn_dims = p->values[y].dyn_dims;
        acc = out;
        c0 = c1;
    }
    oar_program_replace_uses(p, y, acc);
    p->nodes[id].dead = true;
    p->nodes[cat].dead = true;
    return OAR_OK;
}

/* max_pool2d_nhwc(concat(a, b, C)) -> concat(max_pool2d_nhwc(a), max_pool2d_nhwc(b), C): the
 * pooling is per channel, so the same values; the concat copies the pooled (a quarter as large
 * for squeezenet's 3x3 / 2 pools) data, and when a 1x1 conv reads it, split() removes it. */
static oar_status pool_before_concat(oar_program *p, int id, const int *uses, int nv) {
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->op != OAR_OP_max_pool2d_nhwc || n->block != OAR_MAIN_BLOCK) return OAR_OK;
    if (n->in[0] < 0 || n->in[0] >= nv) return OAR_OK; /* a value this pass added: no concat */
    const oar_value *x = &p->values[n->in[0]];
    if (x->kind != OAR_VAL_NODE || uses[n->in[0]] != 1) return OAR_OK;
    int cat = x->node;
    const oar_node *c = &p->nodes[cat];
    if (c->dead || c->op != OAR_OP_concat || c->block != OAR_MAIN_BLOCK || c->n_in < 2 ||
        (c->attrs[0].i != 3 && c->attrs[0].i != -1))
        return OAR_OK;
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id), n_parts = c->n_in, parts[OAR_MAX_INPUTS];
    if (pos < 0) return OAR_OK;
    for (int k = 0; k < n_parts; k++)
        if (c->in[k] < 0 || p->values[c->in[k]].meta.ndim != 4 || p->values[c->in[k]].meta.shape[3] == 0) return OAR_OK;
    memcpy(parts, c->in, sizeof(int) * (size_t)n_parts);
    oar_attr pa[OAR_MAX_ATTRS];
    int n_attrs = oar_op_table[OAR_OP_max_pool2d_nhwc]->n_attrs, y = n->out[0], pooled[OAR_MAX_INPUTS], out;
    memcpy(pa, n->attrs, sizeof(oar_attr) * (size_t)n_attrs);
    for (int k = 0; k < n_parts; k++) {
        int in[1] = {parts[k]};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_max_pool2d_nhwc, in, 1, pa, &pooled[k]) < 0)
            return oar_last_status();
        p->values[pooled[k]].dyn_dims = p->values[y].dyn_dims;
    }
    oar_attr ca = oar_attr_int(3);
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_concat, pooled, n_parts, &ca, &out) < 0)
        return oar_last_status();
    p->values[out].dyn_dims = p->values[y].dyn_dims;
    oar_program_replace_uses(p, y, out);
    p->nodes[id].dead = true;
    p->nodes[cat].dead = true;
    return OAR_OK;
}

oar_status oar_pass_concat_conv_split(oar_program *p) {
    int nn = p->n_nodes, nv = p->n_values;
    int *uses = malloc(sizeof(int) * (size_t)(nv + 1));
    oar_status st = uses ? OAR_OK : oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
    if (st == OAR_OK) oar_program_use_counts(p, uses);
    for (int i = 0; i < nn && st == OAR_OK; i++) st = pool_before_concat(p, i, uses, nv);
    free(uses);
    if (st != OAR_OK) return st;
    nv = p->n_values;
    nn = p->n_nodes;
    uses = malloc(sizeof(int) * (size_t)(nv + 1));
    bool *mut = oar_pass_mutable_values(p);
    st = uses && mut ? OAR_OK : oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
    if (st == OAR_OK) oar_program_use_counts(p, uses);
    for (int i = 0; i < nn && st == OAR_OK; i++) {
        int cat = splittable(p, i, uses, mut, nv);
        if (cat >= 0) st = split(p, i, cat);
    }
    free(uses);
    free(mut);
    return st;
}
