/* Helpers for tests of graph passes and the memory planner: building programs by hand, and a
 * tiny reference interpreter that runs a program's main block node by node with real tensors.
 * In planned mode it runs the program the way an executor would: arena intermediates live at
 * their planned offsets in one buffer (poisoned at the start and after each root's last use),
 * views alias, and nodes marked in place write into their input 0. Results equal to the plain
 * interpretation mean the passes and the plan are sound for that program. Test-only code. */
#ifndef OAR_GRAPH_TEST_UTIL_H
#define OAR_GRAPH_TEST_UTIL_H

#include "test_util.h"

#include "graph/ir.h"
#include "graph/passes/passes.h"
#include "graph/plan.h"

#define GT_MAIN OAR_MAIN_BLOCK

/* Adds a node of op to block with attributes as text ("dims=1 keepdim=0") and outputs from
 * inference. Returns the node id (-1 on error, which is printed); outs receives the outputs. */
static inline int gt_node(oar_program *p, int block, oar_op_id op, const char *attrs, const int *in, int n_in, int *outs,
                   int *n_outs) {
    const oar_op_def *d = oar_op_table[op];
    oar_attr a[OAR_MAX_ATTRS + 1];
    memset(a, 0, sizeof a);
    if (d->n_attrs && oar_attrs_parse(d, attrs, a) != OAR_OK) {
        fprintf(stderr, "gt_node: %s\n", oar_last_error());
        return -1;
    }
    oar_tensor *sh[OAR_MAX_INPUTS] = {0};
    for (int k = 0; k < n_in; k++)
        if (in[k] >= 0) sh[k] = oar_value_shell(p, in[k]);
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n = d->n_outputs >= 0 ? d->n_outputs : OAR_MAX_OUTPUTS;
    oar_status st = d->infer(sh, n_in, a, meta, &n);
    for (int k = 0; k < n_in; k++) oar_tensor_unref(sh[k]);
    if (st != OAR_OK) {
        fprintf(stderr, "gt_node: %s: %s\n", d->name, oar_last_error());
        return -1;
    }
    int tmp[OAR_MAX_OUTPUTS];
    int id = oar_program_add_node(p, block, op, in, n_in, a, meta, n, outs ? outs : tmp);
    if (n_outs) *n_outs = n;
    return id;
}

/* The first output of a new node in block. */
static inline int gt_op_in(oar_program *p, int block, oar_op_id op, const char *attrs, const int *in, int n_in) {
    int outs[OAR_MAX_OUTPUTS];
    return gt_node(p, block, op, attrs, in, n_in, outs, NULL) < 0 ? -1 : outs[0];
}
#define GT_OP(p, op, attrs, ...)                                                                  \
    gt_op_in((p), GT_MAIN, OAR_OP_##op, (attrs), (const int[]){__VA_ARGS__},                      \
             (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))
#define GT_OPB(p, block, op, attrs, ...)                                                          \
    gt_op_in((p), (block), OAR_OP_##op, (attrs), (const int[]){__VA_ARGS__},                      \
             (int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

static inline int gt_input(oar_program *p, const int64_t *shape, int ndim) {
    oar_meta m = {.dtype = OAR_F32, .ndim = ndim};
    memcpy(m.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return oar_program_add_input(p, GT_MAIN, &m, NULL);
}

/* A value bound to a new random tensor (kind PARAM or CONST); the program holds it. */
static inline int gt_tensor(oar_program *p, oar_value_kind kind, const int64_t *shape, int ndim, const char *name) {
    oar_tensor *t = oar_randn(shape, ndim, OAR_F32);
    int id = oar_program_add_tensor(p, kind, t, name);
    oar_release(t);
    return id;
}

/* Attaches a sub-block to node (as control flow would); returns the block id. */
static inline int gt_attach_block(oar_program *p, int node) {
    int b = oar_program_add_block(p, p->nodes[node].block);
    oar_node *n = &p->nodes[node];
    int *blocks = oar_arena_alloc(p->arena, sizeof(int));
    blocks[0] = b;
    n->blocks = blocks;
    n->n_blocks = 1;
    return b;
}

static inline int gt_live_nodes(const oar_program *p, int block) {
    int n = 0;
    for (int i = 0; i < p->blocks[block].n_nodes; i++) n += !p->nodes[p->blocks[block].nodes[i]].dead;
    return n;
}

static inline int gt_count_op(const oar_program *p, oar_op_id op) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead && p->nodes[i].op == op;
    return n;
}

static inline void gt_poison(char *arena, const oar_memory_plan *plan, int r) {
    if (plan->cls[r] == OAR_BUF_ARENA && plan->nbytes[r] > 0) memset(arena + plan->offset[r], 0xFF, (size_t)plan->nbytes[r]);
}

/* Runs p's main block on in[] (n_in = the main block's inputs) and writes new references to
 * the main block's outputs into out[]. plan == NULL: every node through the eager path (the
 * reference). With a plan: as described at the top. Random ops draw from seed 1234 in both. */
static inline oar_status gt_eval(const oar_program *p, const oar_memory_plan *plan, oar_tensor *const *in, int n_in,
                          oar_tensor **out) {
    const oar_block *mb = &p->blocks[GT_MAIN];
    if (n_in != mb->n_in) return oar_error(OAR_ERR_INVALID_ARG, "gt_eval: expected %d inputs", mb->n_in);
    oar_tensor **val = calloc((size_t)p->n_values + 1, sizeof(oar_tensor *));
    char *arena = NULL;
    oar_status st = OAR_OK;
    if (plan) {
        arena = aligned_alloc(64, (size_t)((plan->arena_bytes + 64) / 64 * 64));
        memset(arena, 0xFF, (size_t)((plan->arena_bytes + 64) / 64 * 64));
    }
    for (int k = 0; k < n_in; k++) val[mb->in[k]] = oar_retain(in[k]);
    for (int v = 0; v < p->n_values; v++)
        if (p->values[v].kind == OAR_VAL_PARAM || p->values[v].kind == OAR_VAL_CONST) val[v] = oar_retain(p->values[v].tensor);
    oar_manual_seed(1234);
    bool grad = oar_set_grad_enabled(false);
    for (int s = 0; s < mb->n_nodes && st == OAR_OK; s++) {
        const oar_node *n = &p->nodes[mb->nodes[s]];
        const oar_op_def *d = oar_op_table[n->op];
        if (n->n_blocks) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "gt_eval: control flow is not interpreted");
            break;
        }
        oar_tensor *args[OAR_MAX_INPUTS] = {0};
        for (int k = 0; k < n->n_in; k++) args[k] = n->in[k] >= 0 ? val[n->in[k]] : NULL;
        oar_tensor *res[OAR_MAX_OUTPUTS] = {0};
        int nr = OAR_MAX_OUTPUTS;
        if (!plan || (d->flags & OAR_OPF_VIEW)) {
            st = oar_op_call(n->op, args, n->n_in, n->attrs, res, &nr);
        } else {
            nr = n->n_out;
            for (int o = 0; o < nr; o++) {
                int v = n->out[o], r = plan->root[v];
                const oar_meta *m = &p->values[v].meta;
                if (o == 0 && n->inplace) res[o] = oar_retain(args[0]);
                else if (plan->cls[r] == OAR_BUF_ARENA)
                    res[o] = oar_from_blob(arena + plan->offset[r], m->shape, m->ndim, m->dtype, NULL, NULL);
                else res[o] = oar_empty(m->shape, m->ndim, m->dtype);
            }
            const oar_kernel_entry *k = oar_select_kernel(n->op, args, n->n_in, res, nr, n->attrs);
            st = k ? oar_op_run_kernel(n->op, k, args, n->n_in, res, nr, n->attrs) : oar_last_status();
        }
        for (int o = 0; o < n->n_out && o < nr; o++) val[n->out[o]] = res[o];
        if (plan) /* buffers whose last use was this step: later reads would see NaNs */
            for (int v = 0; v < p->n_values; v++)
                if (plan->root[v] == v && plan->cls[v] == OAR_BUF_ARENA && plan->last[v] == s) gt_poison(arena, plan, v);
    }
    oar_set_grad_enabled(grad);
    for (int k = 0; k < mb->n_out; k++) {
        int v = mb->out[k];
        out[k] = st == OAR_OK && val[v] ? oar_contiguous(val[v]) : NULL;
    }
    for (int v = 0; v < p->n_values; v++) oar_release(val[v]);
    free(val);
    free(arena);
    return st;
}

/* Equal shapes and every element within tol (relative to max(1, |a|)). */
static inline bool gt_close(oar_tensor *a, oar_tensor *b, double tol) {
    if (!a || !b || oar_ndim(a) != oar_ndim(b) || oar_numel(a) != oar_numel(b)) return false;
    for (int d = 0; d < oar_ndim(a); d++)
        if (oar_shape(a)[d] != oar_shape(b)[d]) return false;
    int64_t n = oar_numel(a);
    double *x = malloc(sizeof(double) * (size_t)(n + 1)), *y = malloc(sizeof(double) * (size_t)(n + 1));
    oar_copy_to_buffer(a, x, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * (size_t)n, OAR_F64);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double s = fabs(x[i]) > 1 ? fabs(x[i]) : 1;
        ok = fabs(x[i] - y[i]) <= tol * s;
    }
    free(x);
    free(y);
    return ok;
}

/* Runs both programs on the same inputs and compares every output. */
static inline bool gt_same_results(const oar_program *a, const oar_memory_plan *plan_a, const oar_program *b,
                            const oar_memory_plan *plan_b, oar_tensor *const *in, int n_in) {
    int na = a->blocks[GT_MAIN].n_out;
    if (na != b->blocks[GT_MAIN].n_out || na > 16) return false;
    oar_tensor *oa[16] = {0}, *ob[16] = {0};
    bool ok = gt_eval(a, plan_a, in, n_in, oa) == OAR_OK && gt_eval(b, plan_b, in, n_in, ob) == OAR_OK;
    for (int k = 0; k < na && ok; k++) ok = gt_close(oa[k], ob[k], 1e-6);
    for (int k = 0; k < na; k++) {
        oar_release(oa[k]);
        oar_release(ob[k]);
    }
    return ok;
}

/* A deep copy of a program (values share the bound tensors), so a test can compare a program
 * before and after passes. */
static inline oar_program *gt_clone(const oar_program *p) {
    oar_program *q = oar_program_new();
    for (int b = 1; b < p->n_blocks; b++) oar_program_add_block(q, p->blocks[b].parent);
    /* values and nodes keep their ids: rebuild the tables directly */
    q->values = realloc(q->values, sizeof(oar_value) * (size_t)(p->n_values + 1));
    memcpy(q->values, p->values, sizeof(oar_value) * (size_t)p->n_values);
    q->n_values = q->cap_values = p->n_values;
    for (int v = 0; v < p->n_values; v++) {
        q->values[v].name = oar_program_strdup(q, p->values[v].name);
        if (q->values[v].tensor) oar_retain(q->values[v].tensor);
    }
    q->nodes = realloc(q->nodes, sizeof(oar_node) * (size_t)(p->n_nodes + 1));
    q->n_nodes = q->cap_nodes = p->n_nodes;
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *s = &p->nodes[i];
        oar_node *d = &q->nodes[i];
        *d = *s;
        int na = oar_op_table[s->op]->n_attrs;
        d->in = oar_arena_alloc(q->arena, sizeof(int) * (size_t)(s->n_in + 1));
        d->out = oar_arena_alloc(q->arena, sizeof(int) * (size_t)(s->n_out + 1));
        d->attrs = oar_arena_alloc(q->arena, sizeof(oar_attr) * (size_t)(na + 1));
        d->blocks = s->n_blocks ? oar_arena_alloc(q->arena, sizeof(int) * (size_t)s->n_blocks) : NULL;
        memcpy(d->in, s->in, sizeof(int) * (size_t)s->n_in);
        memcpy(d->out, s->out, sizeof(int) * (size_t)s->n_out);
        if (na) memcpy(d->attrs, s->attrs, sizeof(oar_attr) * (size_t)na);
        if (s->n_blocks) memcpy(d->blocks, s->blocks, sizeof(int) * (size_t)s->n_blocks);
    }
    for (int b = 0; b < p->n_blocks; b++) {
        const oar_block *s = &p->blocks[b];
        oar_block *d = &q->blocks[b];
        d->parent = s->parent;
        d->n_nodes = d->cap_nodes = s->n_nodes;
        d->n_in = d->cap_in = s->n_in;
        d->n_out = d->cap_out = s->n_out;
        d->nodes = malloc(sizeof(int) * (size_t)(s->n_nodes + 1));
        d->in = malloc(sizeof(int) * (size_t)(s->n_in + 1));
        d->out = malloc(sizeof(int) * (size_t)(s->n_out + 1));
        memcpy(d->nodes, s->nodes, sizeof(int) * (size_t)s->n_nodes);
        memcpy(d->in, s->in, sizeof(int) * (size_t)s->n_in);
        memcpy(d->out, s->out, sizeof(int) * (size_t)s->n_out);
    }
    for (int k = 0; k < p->n_grad_writes; k++) oar_program_add_grad_write(q, p->grad_writes[k].value, p->grad_writes[k].param);
    return q;
}

#endif
