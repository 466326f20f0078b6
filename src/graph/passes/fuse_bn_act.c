/* fuse_bn_act: ResNet's batch norm + (residual add +) relu as one node, forward and backward.
 *
 * Forward, in the main block, f32, or bf16/f16 activations with f32 parameters (autocast's
 * mixed batch norm; the fused kernel then rounds after the normalization and after the add, as
 * batch_norm and add do):
 *     y = batch_norm(x, w, b, rm, rv, n?)     ->  r, mean, rstd = batch_norm_act(x, w, b, rm, rv,
 *    [z = add(y, other)]  (either order)                                         other?, n?)
 *     r = relu(z or y)
 * where y (and z) have no reader but the next node of the chain, except that the pre-relu
 * value may be read by relu_backward nodes as their second input: relu_backward(g, z) =
 * z > 0 ? g : 0 equals relu_backward(g, relu(z)) in every case (relu keeps NaN, which fails
 * > 0 either way, and maps z <= 0 to +-0), so those readers switch to r. The fused node takes
 * the relu's place; batch_norm moves down to it, which is sound when nothing in between
 * writes x, w, b or other, touches the running statistics or the counter (momentum=None's
 * increment right after batch_norm keeps such a pair unfused), or reads mean and rstd.
 *
 * Backward (the traced training step), once the forward is fused:
 *     gz = relu_backward(g, r)                ->  dx, dw, db, gz' = batch_norm_act_backward(
 *     dx, dw, db = batch_norm_backward(gz, x, w, mean, rstd)              g, x, w, mean, rstd, r)
 * with mean, rstd, x and w those of the batch_norm_act node that made r. gz may have other
 * readers (the residual's gradient, from add's rule): they read gz' (masked_out = 1); without
 * them the fused node writes no mask. The node takes relu_backward's place; batch_norm_backward
 * moves up to it, sound when nothing in between writes x, w, mean or rstd.
 *
 * The fused kernels run the unfused fast kernels' float operations in the same order
 * (normalization fma, then one add, then max(0, .); the same masked gradient into the same
 * channel sums), so results are bitwise those of the unfused program and of eager mode. */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct bna_ctx {
    oar_program *p;
    int *uses, *pos, *root;
    bool *mut;
} bna_ctx;

static void release(bna_ctx *c) {
    free(c->uses);
    free(c->pos);
    free(c->root);
    free(c->mut);
    c->uses = c->pos = c->root = NULL;
    c->mut = NULL;
}

static oar_status refresh(bna_ctx *c) {
    oar_program *p = c->p;
    release(c);
    c->uses = malloc(sizeof(int) * ((size_t)p->n_values + 1));
    c->pos = malloc(sizeof(int) * ((size_t)p->n_nodes + 1));
    c->root = oar_pass_value_roots(p);
    c->mut = c->root ? oar_pass_mutable_roots(p, c->root) : NULL;
    if (!c->uses || !c->pos || !c->mut) return oar_error(OAR_ERR_OOM, "fuse_bn_act: out of memory");
    oar_program_use_counts(p, c->uses);
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < p->n_nodes; i++) c->pos[i] = -1;
    for (int i = 0; i < mb->n_nodes; i++) c->pos[mb->nodes[i]] = i;
    return OAR_OK;
}

/* The live main-block node of op that made v as its output 0 (any output: index < 0), or NULL. */
static oar_node *producer(const bna_ctx *c, int v, oar_op_id op, int index) {
    if (v < 0) return NULL;
    const oar_value *val = &c->p->values[v];
    if (val->kind != OAR_VAL_NODE || val->node < 0 || c->pos[val->node] < 0) return NULL;
    if (index >= 0 && val->out_index != index) return NULL;
    oar_node *n = &c->p->nodes[val->node];
    return !n->dead && n->op == op ? n : NULL;
}

/* Whether v has like's shape and dtype, f32, bf16 or f16. */
static bool float_like(const oar_program *p, int v, int like) {
    const oar_meta *a = &p->values[v].meta, *b = &p->values[like].meta;
    return (a->dtype == OAR_F32 || a->dtype == OAR_BF16 || a->dtype == OAR_F16) && a->dtype == b->dtype &&
           a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* A bf16/f16 batch norm is fused only in its mixed form (f32 parameters, so f32 mean): the
 * fused CPU kernel for it rounds where the unfused ops round (nn_norm.c); with parameters in
 * the low dtype too only the reference would run the fused node. */
static bool fusable_bn(const oar_program *p, const oar_node *l) {
    return p->values[l->in[0]].meta.dtype == OAR_F32 || p->values[l->out[1]].meta.dtype == OAR_F32;
}

/* Whether a live main-block node strictly between positions lo and hi mutates v's memory
 * (or is control flow), or, with any_touch, reads or writes it at all. */
static bool touched_between(const bna_ctx *c, int v, int lo, int hi, bool any_touch) {
    if (v < 0) return false;
    if (!any_touch && !c->mut[c->root[v]]) return false;
    const oar_block *mb = &c->p->blocks[OAR_MAIN_BLOCK];
    for (int i = lo + 1; i < hi; i++) {
        const oar_node *n = &c->p->nodes[mb->nodes[i]];
        if (n->dead) continue;
        if (oar_op_table[n->op]->flags & OAR_OPF_CONTROL) return true;
        uint32_t m = oar_node_mutated_inputs(n);
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && c->root[n->in[k]] == c->root[v] && (any_touch || (k < 32 && ((m >> k) & 1u))))
                return true;
    }
    return false;
}

/* Whether every reader of v sits after position at (main block; nothing elsewhere reads it). */
static bool read_only_after(const bna_ctx *c, int v, int at) {
    int seen = 0;
    const oar_block *mb = &c->p->blocks[OAR_MAIN_BLOCK];
    for (int i = at + 1; i < mb->n_nodes; i++) {
        const oar_node *n = &c->p->nodes[mb->nodes[i]];
        for (int k = 0; !n->dead && k < n->n_in; k++) seen += n->in[k] == v;
    }
    for (int k = 0; k < mb->n_out; k++) seen += mb->out[k] == v;
    for (int k = 0; k < c->p->n_grad_writes; k++) seen += c->p->grad_writes[k].value == v;
    return seen == c->uses[v];
}

/* relu_backward nodes after position after reading z as x (input 1), not as the gradient. */
static bool switchable(const bna_ctx *c, int id, int z, int after) {
    const oar_node *m = &c->p->nodes[id];
    return !m->dead && m->op == OAR_OP_relu_backward && m->in[1] == z && m->in[0] != z && c->pos[id] > after;
}

/* Forward: relu node at position i. Returns 1 if fused, 0 if not, -1 on error. */
static int fuse_forward(bna_ctx *c, int i) {
    oar_program *p = c->p;
    const int aid = p->blocks[OAR_MAIN_BLOCK].nodes[i];
    oar_node *a = &p->nodes[aid];
    if (a->dead || a->op != OAR_OP_relu) return 0;
    int z = a->in[0], other = -1, bny = z;
    if (!float_like(p, z, z) || c->mut[c->root[z]]) return 0;
    oar_node *l = producer(c, z, OAR_OP_batch_norm, 0), *d = NULL;
    if (!l && (d = producer(c, z, OAR_OP_add, 0)) && d->in[0] != d->in[1]) {
        for (int k = 0; k < 2 && !l; k++) {
            oar_node *cand = producer(c, d->in[k], OAR_OP_batch_norm, 0);
            if (cand && c->uses[d->in[k]] == 1 && float_like(p, d->in[k], z) && float_like(p, d->in[1 - k], z)) {
                l = cand;
                bny = d->in[k];
                other = d->in[1 - k];
            }
        }
    }
    if (!l || !float_like(p, bny, z) || c->mut[c->root[bny]] || !fusable_bn(p, l)) return 0;
    int rb = 0;
    for (int m = 0; m < p->n_nodes; m++) rb += switchable(c, m, z, i);
    if (c->uses[z] != 1 + rb || (rb && c->mut[c->root[a->out[0]]])) return 0;
    const int lpos = c->pos[l - p->nodes];
    for (int k = 0; k < 3; k++)
        if (touched_between(c, l->in[k], lpos, i, false)) return 0;
    for (int k = 3; k < 6; k++) /* the running statistics and the counter (read for the factor) */
        if (k < l->n_in && touched_between(c, l->in[k], lpos, i, true)) return 0;
    if (d && touched_between(c, other, c->pos[d - p->nodes], i, false)) return 0;
    if (!read_only_after(c, l->out[1], i) || !read_only_after(c, l->out[2], i)) return 0;
    int in[7] = {l->in[0], l->in[1], l->in[2], l->in[3], l->in[4], other, l->in[5]}, out[3];
    oar_attr attrs[3] = {l->attrs[0], l->attrs[1], l->attrs[2]};
    const int r_old = a->out[0], mean_old = l->out[1], rstd_old = l->out[2];
    int id = oar_pass_insert_node(p, OAR_MAIN_BLOCK, i, OAR_OP_batch_norm_act, in, 7, attrs, out);
    if (id < 0) return -1;
    a = &p->nodes[aid]; /* the node array may have moved */
    l = &p->nodes[p->values[mean_old].node];
    d = d ? &p->nodes[p->values[z].node] : NULL;
    p->values[out[0]].dyn_dims = p->values[r_old].dyn_dims;
    p->values[out[1]].dyn_dims = p->values[mean_old].dyn_dims;
    p->values[out[2]].dyn_dims = p->values[rstd_old].dyn_dims;
    for (int m = 0; m < p->n_nodes; m++)
        if (m != id && !p->nodes[m].dead && p->nodes[m].op == OAR_OP_relu_backward && p->nodes[m].in[1] == z &&
            p->nodes[m].in[0] != z)
            p->nodes[m].in[1] = out[0];
    oar_program_replace_uses(p, r_old, out[0]);
    oar_program_replace_uses(p, mean_old, out[1]);
    oar_program_replace_uses(p, rstd_old, out[2]);
    a->dead = l->dead = true;
    if (d) d->dead = true;
    return 1;
}

/* Backward: relu_backward node at position i. Returns 1 if fused, 0 if not, -1 on error. */
static int fuse_backward(bna_ctx *c, int i) {
    oar_program *p = c->p;
    const int rid = p->blocks[OAR_MAIN_BLOCK].nodes[i];
    const oar_node *r = &p->nodes[rid];
    if (r->dead || r->op != OAR_OP_relu_backward) return 0;
    const int g = r->in[0], y = r->in[1], gz = r->out[0];
    const oar_node *f = producer(c, y, OAR_OP_batch_norm_act, 0);
    if (!f || g == gz || !float_like(p, gz, y) || c->mut[c->root[gz]]) return 0;
    const int x = f->in[0], w = f->in[1], mean = f->out[1], rstd = f->out[2];
    int bid = -1, readers = 0;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int k = i + 1; k < mb->n_nodes; k++) {
        const oar_node *b = &p->nodes[mb->nodes[k]];
        if (b->dead || b->op != OAR_OP_batch_norm_backward || b->in[0] != gz) continue;
        if (b->in[1] == x && b->in[2] == w && b->in[3] == mean && b->in[4] == rstd) {
            bid = mb->nodes[k];
            break;
        }
    }
    if (bid < 0) return 0;
    for (int k = 0; k < p->nodes[bid].n_in; k++) readers += p->nodes[bid].in[k] == gz;
    if (readers != 1) return 0;
    const int moved[4] = {x, w, mean, rstd}; /* read earlier than before: nothing in between may write them */
    for (int k = 0; k < 4; k++)
        if (touched_between(c, moved[k], i, c->pos[bid], false)) return 0;
    const bool masked = c->uses[gz] > 1;
    int in[6] = {g, x, w, mean, rstd, y}, out[4];
    oar_attr attr = oar_attr_int(masked);
    int id = oar_pass_insert_node(p, OAR_MAIN_BLOCK, i, OAR_OP_batch_norm_act_backward, in, 6, &attr, out);
    if (id < 0) return -1;
    oar_node *b = &p->nodes[bid];
    for (int o = 0; o < 3; o++) {
        p->values[out[o]].dyn_dims = p->values[b->out[o]].dyn_dims;
        oar_program_replace_uses(p, b->out[o], out[o]);
    }
    if (masked) {
        p->values[out[3]].dyn_dims = p->values[gz].dyn_dims;
        oar_program_replace_uses(p, gz, out[3]);
    }
    p->nodes[rid].dead = b->dead = true;
    return 1;
}

oar_status oar_pass_fuse_bn_act(oar_program *p) {
    bna_ctx c = {p, NULL, NULL, NULL, NULL};
    oar_status st = refresh(&c);
    for (int phase = 0; phase < 2 && st == OAR_OK; phase++) {
        for (int i = 0; i < p->blocks[OAR_MAIN_BLOCK].n_nodes && st == OAR_OK; i++) {
            int done = phase == 0 ? fuse_forward(&c, i) : fuse_backward(&c, i);
            if (done < 0) st = oar_last_status();
            else if (done) {
                i++; /* the fused node took position i; the killed node follows it */
                st = refresh(&c);
            }
        }
    }
    release(&c);
    return st;
}
