/* Linear + activation fusion: act(linear(x, W, b)) with act relu or gelu (either form) becomes
 * one linear_act node, whose fast kernel applies the activation right after the GEMM while the
 * output is still in cache, and which saves a node and a buffer.
 *
 * A pair (L = linear, A = activation of L's output z) in the main block, f32, fuses when
 *   - z has no reader besides A, except (for relu) relu_backward nodes reading z as their
 *     second input: relu_backward(g, z) = z > 0 ? g : 0 equals relu_backward(g, relu(z)) in
 *     every case (relu keeps NaN, which fails > 0 either way, and maps z <= 0 to +-0), so those
 *     readers are switched to A's output and z disappears. This is what lets the pass fire in
 *     training steps, whose relu rule reads the pre-activation. gelu's backward needs z itself,
 *     so a gelu pair with a backward reader stays as it is;
 *   - z's memory is never mutated, and moving L down to A moves no read past a write: no node
 *     between them mutates one of L's inputs (through any alias) or is control flow.
 * A is rewritten in place into linear_act (its output value and position stay); L is killed.
 * The activation runs with the same AVX2 helper as the unfused kernel on the same GEMM result,
 * so results are bitwise unchanged. */
#include "graph/passes/passes.h"
#include "ops/fused_ew.h"

#include <stdlib.h>

static int activation_of(const oar_node *a) {
    if (a->op == OAR_OP_relu) return OAR_LINEAR_ACT_RELU;
    if (a->op == OAR_OP_gelu) return a->attrs[0].i ? OAR_LINEAR_ACT_GELU_TANH : OAR_LINEAR_ACT_GELU;
    return OAR_LINEAR_ACT_NONE;
}

/* relu_backward nodes of the main block after position after, reading z as x (input 1) and
 * not as the gradient: those may read relu(z) instead. */
static bool switchable(const oar_node *m, const int *pos, int id, int z, int after) {
    return !m->dead && m->op == OAR_OP_relu_backward && m->in[1] == z && m->in[0] != z && pos[id] > after;
}
static int relu_backward_readers(const oar_program *p, const int *pos, int z, int after) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += switchable(&p->nodes[i], pos, i, z, after);
    return n;
}

static bool written_between(const oar_program *p, const int *root, const bool *mut, int v, int lo, int hi) {
    if (v < 0 || !mut[root[v]]) return false;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = lo + 1; i < hi; i++) {
        const oar_node *n = &p->nodes[mb->nodes[i]];
        const oar_op_def *d = oar_op_table[n->op];
        if (n->dead) continue;
        if (d->flags & OAR_OPF_CONTROL) return true;
        for (int k = 0; k < n->n_in && k < 32; k++)
            if (((d->mutated_inputs >> k) & 1u) && n->in[k] >= 0 && root[n->in[k]] == root[v]) return true;
    }
    return false;
}

oar_status oar_pass_fuse_linear_act(oar_program *p) {
    int *uses = malloc(sizeof(int) * ((size_t)p->n_values + 1));
    int *pos = malloc(sizeof(int) * ((size_t)p->n_nodes + 1));
    int *root = oar_pass_value_roots(p);
    bool *mut = root ? oar_pass_mutable_roots(p, root) : NULL;
    oar_status st = OAR_OK;
    if (!uses || !pos || !mut) {
        st = oar_error(OAR_ERR_OOM, "fuse_linear_act: out of memory");
        goto done;
    }
    oar_program_use_counts(p, uses);
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < p->n_nodes; i++) pos[i] = -1;
    for (int i = 0; i < mb->n_nodes; i++) pos[mb->nodes[i]] = i;
    for (int i = 0; i < mb->n_nodes; i++) {
        oar_node *a = &p->nodes[mb->nodes[i]];
        int kind = activation_of(a);
        if (a->dead || !kind) continue;
        int z = a->in[0];
        const oar_value *zv = &p->values[z];
        if (zv->kind != OAR_VAL_NODE || zv->meta.dtype != OAR_F32 || mut[root[z]]) continue;
        oar_node *l = &p->nodes[zv->node];
        if (l->dead || l->op != OAR_OP_linear || pos[zv->node] < 0) continue;
        int rb = kind == OAR_LINEAR_ACT_RELU ? relu_backward_readers(p, pos, z, i) : 0;
        if (rb && mut[root[a->out[0]]]) continue;
        if (uses[z] != 1 + rb) continue;
        bool moved_past_write = false;
        for (int k = 0; k < l->n_in; k++)
            moved_past_write |= written_between(p, root, mut, l->in[k], pos[zv->node], i);
        if (moved_past_write) continue;
        int y = a->out[0];
        for (int m = 0; rb && m < p->n_nodes; m++) { /* relu_backward(g, z) -> relu_backward(g, y) */
            oar_node *r = &p->nodes[m];
            if (switchable(r, pos, m, z, i)) r->in[1] = y;
        }
        int *in = oar_arena_alloc(p->arena, sizeof(int) * 3);
        oar_attr *attrs = oar_arena_alloc(p->arena, sizeof(oar_attr));
        if (!in || !attrs) {
            st = oar_error(OAR_ERR_OOM, "fuse_linear_act: out of memory");
            goto done;
        }
        in[0] = l->in[0];
        in[1] = l->in[1];
        in[2] = l->n_in > 2 ? l->in[2] : -1;
        attrs[0] = oar_attr_int(kind);
        a->op = OAR_OP_linear_act;
        a->in = in;
        a->n_in = 3;
        a->attrs = attrs;
        a->inplace = false;
        l->dead = true;
    }
done:
    free(uses);
    free(pos);
    free(root);
    free(mut);
    return st;
}
