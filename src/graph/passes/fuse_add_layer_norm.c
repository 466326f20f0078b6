/* Residual add + layer_norm fusion, the pre-LN transformer pattern: h = h + sublayer(...) feeds
 * the next layer_norm (and the next residual add). Forward and traced backward:
 *
 *   s = add(a, b); (y, mean, rstd) = layer_norm(s, w, bias)
 *       -> (s, y, mean, rstd) = add_layer_norm(a, b, w, bias)      at the add's position
 *   (dx, dw, db) = layer_norm_backward(g, x, w, mean, rstd); t = add(dx, r)   (or add(r, dx))
 *       -> (t, dw, db) = layer_norm_backward_add(g, x, w, mean, rstd, r)
 *
 * Conditions (main block, f32 or bf16/f16, both add operands of the result's shape and dtype:
 * no broadcasting, so gpt's token + position embedding add stays as it is):
 *   forward: s keeps every other reader (the fused node still yields it); the layer_norm moves
 *     up to the add, so its weight and bias must be defined before the add and not written in
 *     place between the two nodes; s's memory is never mutated.
 *   backward: dx has no reader besides the add (the engine's accumulation of the residual
 *     gradient). The fused node goes to the layer_norm_backward's position when r is already
 *     defined there and not written before the add; otherwise to the add's position when no
 *     node before the add reads dw or db and no input of the backward is written in between.
 * Sound because each fused kernel does the unfused float arithmetic (one rounding for the add,
 * then the layer_norm kernels' own order, see nn_add_layer_norm.c; on bf16/f16 the mixed kernels
 * round the sum and dx where the unfused ops do, and elsewhere add_layer_norm_composed.c runs the
 * unfused ops' kernels): results are bitwise equal. */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

typedef struct fal_ctx {
    oar_program *p;
    int *uses, *pos, *root;
    bool *mut;
} fal_ctx;

/* v is available at main-block position at: an argument, parameter or constant, or made by a
 * node of the main block placed before it. */
static bool defined_before(const fal_ctx *c, int v, int at) {
    if (v < 0) return true;
    const oar_value *val = &c->p->values[v];
    if (val->kind != OAR_VAL_NODE) return val->block == OAR_MAIN_BLOCK;
    return c->pos[val->node] >= 0 && c->pos[val->node] < at;
}

/* Some node strictly between main-block positions lo and hi writes v's memory in place (or is
 * control flow, whose effects we do not look into). */
static bool written_between(const fal_ctx *c, int v, int lo, int hi) {
    const oar_block *mb = &c->p->blocks[OAR_MAIN_BLOCK];
    for (int i = lo + 1; i < hi; i++) {
        const oar_node *n = &c->p->nodes[mb->nodes[i]];
        if (n->dead) continue;
        if (oar_op_table[n->op]->flags & OAR_OPF_CONTROL) return true;
        if (v < 0 || !c->mut[c->root[v]]) continue;
        uint32_t m = oar_node_mutated_inputs(n);
        for (int k = 0; k < n->n_in && k < 32; k++)
            if (((m >> k) & 1u) && n->in[k] >= 0 && c->root[n->in[k]] == c->root[v]) return true;
    }
    return false;
}

/* Some live node other than skip reads v at or before main-block position at (or inside a
 * sub-block, which we do not order). */
static bool read_until(const fal_ctx *c, int v, int at, int skip) {
    for (int i = 0; i < c->p->n_nodes; i++) {
        const oar_node *n = &c->p->nodes[i];
        if (n->dead || i == skip) continue;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] == v && (c->pos[i] < 0 || c->pos[i] <= at)) return true;
    }
    return false;
}

/* An add of two operands of exactly its output's shape and dtype: f32, or bf16/f16 (O2's
 * residual stream, whose fused kernels round where add and layer_norm round). */
static bool plain_add(const oar_program *p, const oar_node *a) {
    if (a->dead || a->op != OAR_OP_add || a->n_in != 2) return false;
    const oar_meta *o = &p->values[a->out[0]].meta;
    if (o->dtype != OAR_F32 && o->dtype != OAR_BF16 && o->dtype != OAR_F16) return false;
    for (int k = 0; k < 2; k++) {
        const oar_meta *m = &p->values[a->in[k]].meta;
        if (m->dtype != o->dtype || m->ndim != o->ndim || memcmp(m->shape, o->shape, sizeof(int64_t) * (size_t)o->ndim))
            return false;
    }
    return true;
}

/* Node id takes the outputs outs[0..n): each value points back to it. */
static int *take_outputs(oar_program *p, int id, const int *outs, int n) {
    int *o = oar_arena_alloc(p->arena, sizeof(int) * (size_t)n);
    if (!o) return NULL;
    for (int k = 0; k < n; k++) {
        o[k] = outs[k];
        p->values[outs[k]].node = id;
        p->values[outs[k]].out_index = k;
    }
    p->nodes[id].out = o;
    p->nodes[id].n_out = n;
    return o;
}

static oar_status fuse_forward(fal_ctx *c, int li) {
    oar_program *p = c->p;
    oar_node *l = &p->nodes[li];
    int s = l->in[0];
    const oar_value *sv = &p->values[s];
    if (sv->kind != OAR_VAL_NODE || c->mut[c->root[s]]) return OAR_OK;
    int ai = sv->node, at = c->pos[ai];
    oar_node *a = &p->nodes[ai];
    if (at < 0 || !plain_add(p, a)) return OAR_OK;
    for (int k = 1; k < 3; k++) {
        int v = l->n_in > k ? l->in[k] : -1;
        if (!defined_before(c, v, at) || (v >= 0 && written_between(c, v, at, c->pos[li]))) return OAR_OK;
    }
    int *in = oar_arena_alloc(p->arena, sizeof(int) * 4);
    oar_attr *attrs = oar_arena_alloc(p->arena, sizeof(oar_attr) * 2);
    int outs[4] = {s, l->out[0], l->out[1], l->out[2]};
    if (!in || !attrs) return oar_error(OAR_ERR_OOM, "fuse_add_layer_norm: out of memory");
    in[0] = a->in[0];
    in[1] = a->in[1];
    in[2] = l->n_in > 1 ? l->in[1] : -1;
    in[3] = l->n_in > 2 ? l->in[2] : -1;
    memcpy(attrs, l->attrs, sizeof(oar_attr) * 2);
    if (!take_outputs(p, ai, outs, 4)) return oar_error(OAR_ERR_OOM, "fuse_add_layer_norm: out of memory");
    a->op = OAR_OP_add_layer_norm;
    a->in = in;
    a->n_in = 4;
    a->attrs = attrs;
    l->dead = true;
    return OAR_OK;
}

static oar_status fuse_backward(fal_ctx *c, int ai) {
    oar_program *p = c->p;
    oar_node *a = &p->nodes[ai];
    if (c->pos[ai] < 0 || !plain_add(p, a)) return OAR_OK;
    for (int side = 0; side < 2; side++) {
        int dx = a->in[side], r = a->in[1 - side];
        const oar_value *dv = &p->values[dx];
        if (dv->kind != OAR_VAL_NODE || dv->out_index != 0 || c->uses[dx] != 1 || r == dx) continue;
        int li = dv->node, lpos = c->pos[li], apos = c->pos[ai];
        oar_node *l = &p->nodes[li];
        if (l->dead || l->op != OAR_OP_layer_norm_backward || lpos < 0) continue;
        int target; /* the node that becomes the fused one */
        if (defined_before(c, r, lpos) && !written_between(c, r, lpos, apos)) {
            target = li;
        } else {
            bool ok = !read_until(c, l->out[1], apos, -1) && !read_until(c, l->out[2], apos, -1);
            for (int k = 0; ok && k < l->n_in; k++) ok = l->in[k] < 0 || !written_between(c, l->in[k], lpos, apos);
            if (!ok) continue;
            target = ai;
        }
        int *in = oar_arena_alloc(p->arena, sizeof(int) * 6);
        oar_attr *attrs = oar_arena_alloc(p->arena, sizeof(oar_attr));
        int outs[3] = {a->out[0], l->out[1], l->out[2]};
        if (!in || !attrs) return oar_error(OAR_ERR_OOM, "fuse_add_layer_norm: out of memory");
        memcpy(in, l->in, sizeof(int) * 5);
        in[5] = r;
        attrs[0] = l->attrs[0];
        if (!take_outputs(p, target, outs, 3)) return oar_error(OAR_ERR_OOM, "fuse_add_layer_norm: out of memory");
        oar_node *t = &p->nodes[target];
        t->op = OAR_OP_layer_norm_backward_add;
        t->in = in;
        t->n_in = 6;
        t->attrs = attrs;
        p->nodes[target == li ? ai : li].dead = true;
        return OAR_OK;
    }
    return OAR_OK;
}

oar_status oar_pass_fuse_add_layer_norm(oar_program *p) {
    fal_ctx c = {p, malloc(sizeof(int) * ((size_t)p->n_values + 1)), malloc(sizeof(int) * ((size_t)p->n_nodes + 1)),
                 oar_pass_value_roots(p), NULL};
    c.mut = c.root ? oar_pass_mutable_roots(p, c.root) : NULL;
    oar_status st = OAR_OK;
    if (!c.uses || !c.pos || !c.mut) {
        st = oar_error(OAR_ERR_OOM, "fuse_add_layer_norm: out of memory");
        goto done;
    }
    oar_program_use_counts(p, c.uses);
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < p->n_nodes; i++) c.pos[i] = -1;
    for (int i = 0; i < mb->n_nodes; i++) c.pos[mb->nodes[i]] = i;
    /* fusions keep node positions and only ever kill nodes, so pos and uses stay valid */
    for (int i = 0; i < mb->n_nodes && st == OAR_OK; i++) {
        int id = mb->nodes[i];
        const oar_node *n = &p->nodes[id];
        if (n->dead) continue;
        if (n->op == OAR_OP_layer_norm) st = fuse_forward(&c, id);
        else if (n->op == OAR_OP_add) st = fuse_backward(&c, id);
    }
done:
    free(c.uses);
    free(c.pos);
    free(c.root);
    free(c.mut);
    return st;
}
