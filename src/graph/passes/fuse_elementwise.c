/* Elementwise fusion: a tree of f32 elementwise nodes of the main block (the ops
 * fused_elementwise takes, src/ops/fused_ew.h) becomes one fused_elementwise node, so its
 * intermediates are never written to memory and the executor runs one instruction.
 *
 * Walking the main block backwards, each node not yet taken is the root of a group; a node
 * joins the group of the consumer it feeds when
 *   - its output has exactly one use (that consumer): no other node, block output or gradient
 *     write reads it, so it need not be materialized. In a training step a forward value read
 *     again by the backward has two uses and stays an output (the root of its own group); we
 *     do not add extra outputs to the fused op, which keeps the op single-output and the planner
 *     unchanged, and the backward reads the value from memory instead of recomputing it;
 *   - its output has the root's shape (a node on a smaller, broadcast shape would be computed
 *     once per output element instead of once), and each operand is either of that shape or a
 *     scalar: the fused kernel gathers any other broadcast operand element by element, which
 *     made ResNet-20's batch-norm backward chains slower fused than unfused;
 *   - its output's memory is never mutated, and moving it down to the root does not move a read
 *     past a write: no node between it and the root mutates one of its inputs (through any
 *     alias) or is control flow;
 *   - the fused kernel reproduces it bitwise: its unfused kernel would have been the AVX2 one.
 *     The transcendental ops' AVX2 kernels take only contiguous inputs; a view's output may be
 *     strided and then runs through the reference kernel, so such a node reading a view (or a
 *     non-contiguous bound tensor) is not fused;
 *   - it is at most FUSE_WINDOW nodes before the root, or joining keeps none of its operands
 *     alive longer than before (extends_lifetime): fusion must not grow the arena;
 *   - the group still fits the op: at most OAR_FEW_MAX_INPUTS inputs, OAR_FEW_MAX_CODE
 *     instructions.
 * The root node is rewritten in place into the fused node (its output value, position and
 * dynamic dims stay); the other members are killed. Groups of one node are left alone. */
#include "graph/passes/passes.h"
#include "ops/fused_ew.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct fuse_ctx {
    oar_program *p;
    const int *uses;
    const bool *mutated; /* per value */
    const int *root;     /* per value: memory root */
    int *pos;            /* per node: index in the main block, -1 elsewhere */
    int *opcode;         /* per node: its fused opcode, 0 when not fusable */
    bool *taken;         /* per node: member of an earlier group */
    int *last_read;      /* per value: main-block position of its last reader (INT_MAX: read
                            in a sub-block, by a block output or a gradient write) */
} fuse_ctx;

/* A member at position lo joining a root at hi keeps its operands alive until hi. Across more
 * nodes than this, only when that costs no memory (see extends_lifetime). */
#define FUSE_WINDOW 16

/* Ops whose AVX2 kernel differs from the reference (approximations): fused only on inputs
 * known to be contiguous. */
static bool inexact(int opcode) {
    switch (opcode) {
    case OAR_FEW_SIGMOID: case OAR_FEW_TANH: case OAR_FEW_EXP: case OAR_FEW_LOG: case OAR_FEW_SILU:
    case OAR_FEW_GELU: case OAR_FEW_GELU_TANH: return true;
    default: return false;
    }
}

/* Whether value v is surely contiguous when a node reads it: node outputs of non-view ops and
 * the program's inputs (the executor copies strided arguments) are; bound tensors when they are. */
static bool surely_contiguous(const oar_program *p, int v) {
    const oar_value *val = &p->values[v];
    switch (val->kind) {
    case OAR_VAL_INPUT: return val->block == OAR_MAIN_BLOCK;
    case OAR_VAL_PARAM: case OAR_VAL_CONST: return val->tensor && val->tensor->contiguous;
    case OAR_VAL_NODE: return !(oar_op_table[p->nodes[val->node].op]->flags & OAR_OPF_VIEW);
    }
    return false;
}

static int fusable_opcode(const oar_program *p, const oar_node *n) {
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->n_out != 1 || n->n_blocks) return 0;
    int code = oar_few_opcode_for(n->op, n->attrs);
    if (!code || p->values[n->out[0]].meta.dtype != OAR_F32) return 0;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] < 0 || p->values[n->in[k]].meta.dtype != OAR_F32) return 0;
    if (inexact(code) && !surely_contiguous(p, n->in[0])) return 0;
    const oar_meta *om = &p->values[n->out[0]].meta; /* operands: full shape or a scalar */
    for (int k = 0; k < n->n_in; k++) {
        const oar_meta *im = &p->values[n->in[k]].meta;
        int64_t numel = 1;
        for (int d = 0; d < im->ndim; d++) numel *= im->shape[d];
        bool full = im->ndim == om->ndim && !memcmp(im->shape, om->shape, sizeof(int64_t) * (size_t)om->ndim);
        if (!full && numel != 1) return 0;
    }
    return code;
}

static bool same_shape(const oar_value *a, const oar_value *b) {
    return a->meta.ndim == b->meta.ndim && a->dyn_dims == b->dyn_dims &&
           memcmp(a->meta.shape, b->meta.shape, sizeof(int64_t) * (size_t)a->meta.ndim) == 0;
}

/* Whether a node strictly between main-block positions lo and hi may write the memory of
 * value v (an in-place mutation through any alias, or control flow). */
static bool written_between(const fuse_ctx *c, int v, int lo, int hi) {
    if (!c->mutated[v]) return false;
    const oar_block *mb = &c->p->blocks[OAR_MAIN_BLOCK];
    for (int i = lo + 1; i < hi; i++) {
        const oar_node *n = &c->p->nodes[mb->nodes[i]];
        const oar_op_def *d = oar_op_table[n->op];
        if (n->dead) continue;
        if (d->flags & OAR_OPF_CONTROL) return true;
        for (int k = 0; k < n->n_in && k < 32; k++)
            if (((d->mutated_inputs >> k) & 1u) && n->in[k] >= 0 && c->root[n->in[k]] == c->root[v]) return true;
    }
    return false;
}

typedef struct group {
    int root;
    int members[OAR_FEW_MAX_CODE], n_members;
    int inputs[OAR_FEW_MAX_INPUTS], n_inputs;
    int pending; /* operands of members not yet resolved: each may still become an input */
} group;

/* Operand slots of node n, a value read twice counted once. */
static int distinct_operands(const oar_node *n) { return n->n_in == 2 && n->in[0] == n->in[1] ? 1 : n->n_in; }

static int input_index(const group *g, int v) {
    for (int i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] == v) return i;
    return -1;
}

/* Whether node n joining g would keep an intermediate alive longer: an operand held in the
 * arena (a node output) whose last reader comes before the root, unless its producer is
 * likely to join the group too (then it is never stored at all). In a training step's backward
 * an unbounded chain could otherwise gather gradients of every time step of an RNN at its end. */
static bool extends_lifetime(const fuse_ctx *c, const group *g, const oar_node *n) {
    const oar_program *p = c->p;
    const oar_value *rv = &p->values[p->nodes[g->root].out[0]];
    for (int k = 0; k < n->n_in; k++) {
        int u = n->in[k];
        const oar_value *uv = &p->values[u];
        if (uv->kind != OAR_VAL_NODE || c->last_read[u] >= c->pos[g->root]) continue;
        int m = uv->node;
        bool may_join = c->uses[u] == 1 && !c->mutated[u] && c->opcode[m] && !c->taken[m] && same_shape(uv, rv);
        if (!may_join) return true;
    }
    return false;
}

/* Whether the producer of v may join g, the consumer being a member. */
static bool can_join(const fuse_ctx *c, const group *g, int v) {
    const oar_program *p = c->p;
    const oar_value *val = &p->values[v];
    if (val->kind != OAR_VAL_NODE || c->uses[v] != 1 || c->mutated[v]) return false;
    int m = val->node;
    if (c->taken[m] || !c->opcode[m] || c->pos[m] < 0) return false;
    if (!same_shape(val, &p->values[p->nodes[g->root].out[0]])) return false;
    if (g->n_members >= OAR_FEW_MAX_CODE) return false;
    const oar_node *n = &p->nodes[m];
    if (c->pos[g->root] - c->pos[m] > FUSE_WINDOW && extends_lifetime(c, g, n)) return false;
    for (int k = 0; k < n->n_in; k++)
        if (written_between(c, n->in[k], c->pos[m], c->pos[g->root])) return false;
    /* room for every operand of n to become an input, besides those already pending */
    if (g->n_inputs + g->pending + distinct_operands(n) > OAR_FEW_MAX_INPUTS) return false;
    return g->n_inputs + g->pending + distinct_operands(n) + g->n_members + 1 <= OAR_FEW_MAX_REGS;
}

/* Grows g from the operands of member node m, depth first. A member's output has one use, so
 * each value is reached once, except an input read by several members. */
static void grow(fuse_ctx *c, group *g, int m) {
    const oar_node *n = &c->p->nodes[m];
    for (int k = 0; k < n->n_in; k++) {
        int v = n->in[k];
        if (k == 1 && v == n->in[0]) continue; /* resolved with operand 0 */
        g->pending--;
        if (input_index(g, v) >= 0) continue;
        if (can_join(c, g, v)) {
            int pm = c->p->values[v].node;
            c->taken[pm] = true;
            g->members[g->n_members++] = pm;
            g->pending += distinct_operands(&c->p->nodes[pm]);
            grow(c, g, pm);
        } else if (g->n_inputs < OAR_FEW_MAX_INPUTS) {
            g->inputs[g->n_inputs++] = v; /* can_join kept room for it */
        } else {
            OAR_ASSERT(!"fuse_elementwise: a group outgrew its inputs");
        }
    }
}

/* Rewrites the root node into fused_elementwise over g (members in execution order). */
static oar_status emit(fuse_ctx *c, group *g) {
    oar_program *p = c->p;
    for (int i = 1; i < g->n_members; i++) { /* insertion sort by position: at most 64 */
        int m = g->members[i], j = i - 1;
        while (j >= 0 && c->pos[g->members[j]] > c->pos[m]) {
            g->members[j + 1] = g->members[j];
            j--;
        }
        g->members[j + 1] = m;
    }
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int reg_of_value_node[OAR_FEW_MAX_CODE]; /* member k's output value */
    for (int k = 0; k < g->n_members; k++) reg_of_value_node[k] = p->nodes[g->members[k]].out[0];
    for (int k = 0; k < g->n_members; k++) {
        const oar_node *n = &p->nodes[g->members[k]];
        int regs[2] = {0, 0};
        for (int o = 0; o < n->n_in; o++) {
            int v = n->in[o], r = input_index(g, v);
            for (int q = 0; r < 0 && q < k; q++)
                if (reg_of_value_node[q] == v) r = g->n_inputs + q;
            if (r < 0) return oar_error(OAR_ERR_INTERNAL, "fuse_elementwise: operand %%%d of node %d is not in its group",
                                        v, g->members[k]);
            regs[o] = r;
        }
        code[k] = (oar_few_instr){c->opcode[g->members[k]], regs[0], regs[1]};
    }
    oar_node *root = &p->nodes[g->root];
    int *in = oar_arena_alloc(p->arena, sizeof(int) * (size_t)g->n_inputs);
    oar_attr *attrs = oar_arena_alloc(p->arena, sizeof(oar_attr) * OAR_FEW_CODE_ATTRS);
    if (!in || !attrs) return oar_error(OAR_ERR_OOM, "fuse_elementwise: out of memory");
    oar_status st = oar_few_encode(code, g->n_members, g->n_inputs, attrs);
    if (st != OAR_OK) return st;
    memcpy(in, g->inputs, sizeof(int) * (size_t)g->n_inputs);
    root->op = OAR_OP_fused_elementwise;
    root->in = in;
    root->n_in = g->n_inputs;
    root->attrs = attrs;
    root->inplace = false;
    for (int k = 0; k < g->n_members; k++)
        if (g->members[k] != g->root) p->nodes[g->members[k]].dead = true;
    return OAR_OK;
}

static void last_reads(const oar_program *p, const int *pos, int *last) {
    for (int v = 0; v < p->n_values; v++) last[v] = -1;
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (n->dead) continue;
        int at = n->block == OAR_MAIN_BLOCK ? pos[i] : INT_MAX;
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0 && last[n->in[k]] < at) last[n->in[k]] = at;
    }
    for (int b = 0; b < p->n_blocks; b++)
        for (int k = 0; k < p->blocks[b].n_out; k++) last[p->blocks[b].out[k]] = INT_MAX;
    for (int k = 0; k < p->n_grad_writes; k++) last[p->grad_writes[k].value] = INT_MAX;
}

oar_status oar_pass_fuse_elementwise(oar_program *p) {
    fuse_ctx c = {.p = p};
    int *uses = malloc(sizeof(int) * ((size_t)p->n_values + 1));
    int *root = oar_pass_value_roots(p);
    bool *mut_root = root ? oar_pass_mutable_roots(p, root) : NULL;
    bool *mutated = calloc((size_t)p->n_values + 1, 1);
    c.pos = malloc(sizeof(int) * ((size_t)p->n_nodes + 1));
    c.opcode = calloc((size_t)p->n_nodes + 1, sizeof(int));
    c.taken = calloc((size_t)p->n_nodes + 1, 1);
    c.last_read = malloc(sizeof(int) * ((size_t)p->n_values + 1));
    group *g = malloc(sizeof *g);
    oar_status st = OAR_OK;
    if (!uses || !mut_root || !mutated || !c.pos || !c.opcode || !c.taken || !c.last_read || !g) {
        st = oar_error(OAR_ERR_OOM, "fuse_elementwise: out of memory");
        goto done;
    }
    oar_program_use_counts(p, uses);
    for (int v = 0; v < p->n_values; v++) mutated[v] = mut_root[root[v]];
    c.uses = uses;
    c.mutated = mutated;
    c.root = root;
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < p->n_nodes; i++) c.pos[i] = -1;
    for (int i = 0; i < mb->n_nodes; i++) {
        int id = mb->nodes[i];
        c.pos[id] = i;
        c.opcode[id] = fusable_opcode(p, &p->nodes[id]);
    }
    last_reads(p, c.pos, c.last_read);
    for (int i = mb->n_nodes - 1; i >= 0 && st == OAR_OK; i--) {
        int id = mb->nodes[i];
        if (!c.opcode[id] || c.taken[id]) continue;
        c.taken[id] = true;
        g->root = id;
        g->members[0] = id;
        g->n_members = 1;
        g->n_inputs = 0;
        g->pending = distinct_operands(&p->nodes[id]);
        grow(&c, g, id);
        if (g->n_members > 1) st = emit(&c, g);
    }
done:
    free(uses);
    free(root);
    free(mut_root);
    free(mutated);
    free(c.pos);
    free(c.opcode);
    free(c.taken);
    free(c.last_read);
    free(g);
    return st;
}
