/* The interpreter of an ONNX graph: the body of the model's compiled function. It runs while
 * the tracer records, so each translated node becomes ops of the program. A node whose inputs
 * are all real tensors (initializers, constants and what is computed from them only, e.g. the
 * Shape -> Gather -> Concat -> Reshape chains of exported models) runs eagerly with the trace
 * paused; its results are marked as made during the trace so they enter the program as
 * constants, and later shape inputs can be read on the host. */
#include "io/onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_real(const oar_tensor *t) { return !t || t->storage; }

/* A real tensor made outside this trace, seen by the program as a constant of it. */
static oar_tensor *as_constant(oar_tensor *t, uint64_t trace) {
    if (!t || !t->storage || t->trace_id == trace) return t;
    oar_tensor *a = oar_tensor_alias(t);
    if (!a) return NULL;
    a->trace_id = trace;
    return oar_track(a);
}

oar_tensor *ox_as_constant(oar_tensor *t) {
    if (t && oar_active_trace) t->trace_id = oar_active_trace;
    return t;
}

ox_seq *ox_seq_new(ox_env *env, oar_dtype dt, int n) {
    ox_seq *q = calloc(1, sizeof *q);
    oar_tensor **items = n > 0 ? calloc((size_t)n, sizeof *items) : NULL;
    if (!q || (n > 0 && !items)) {
        free(q), free(items);
        oar_error(OAR_ERR_OOM, "onnx: out of memory for a sequence of %d tensors", n);
        return NULL;
    }
    q->dtype = dt;
    q->n = n;
    q->items = items;
    q->next = env->pool;
    env->pool = q;
    return q;
}

void ox_seq_free_all(ox_env *env) {
    while (env->pool) {
        ox_seq *q = env->pool;
        env->pool = q->next;
        free(q->items);
        free(q);
    }
}

/* The operators that read or write sequences and optionals (the others take tensors only). */
static bool takes_seq(const char *op) {
    static const char *const ops[] = {"SequenceEmpty", "SequenceConstruct", "SequenceAt", "SequenceInsert",
                                      "SequenceErase", "SequenceLength", "ConcatFromSequence", "SplitToSequence",
                                      "Optional", "OptionalHasElement", "OptionalGetElement", "Identity", "If",
                                      "Loop", "SequenceMap"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(op, ops[i])) return true;
    return false;
}

static bool seq_real(const ox_seq *q) {
    for (int i = 0; q && i < q->n; i++)
        if (!is_real(q->items[i])) return false;
    return true;
}

/* A node runs eagerly (folded) when its inputs and the outer values its subgraphs read are real. */
static oar_status run_node(const oar_onnx_model *m, const ox_node *n, ox_env *env) {
    oar_tensor *in[OX_MAX_NODE_IO] = {0}, *out[OX_MAX_NODE_IO] = {0};
    ox_seq *sin[OX_MAX_NODE_IO] = {0}, *sout[OX_MAX_NODE_IO] = {0};
    bool want[OX_MAX_NODE_IO] = {0};
    bool known = true, seqs = false;
    oar_tensor **vals = env->vals;
    for (int k = 0; k < n->n_in; k++) {
        in[k] = n->in[k] >= 0 ? vals[n->in[k]] : NULL;
        sin[k] = n->in[k] >= 0 ? env->sq[n->in[k]] : NULL;
        known &= is_real(in[k]) && seq_real(sin[k]);
        seqs |= sin[k] != NULL;
    }
    for (int k = 0; k < n->n_cap; k++) known &= is_real(vals[n->cap[k]]) && seq_real(env->sq[n->cap[k]]);
    for (int k = 0; k < n->n_out; k++) want[k] = n->out[k] >= 0 && m->used[n->out[k]];
    ox_ctx c = {.m = m, .node = n, .opset = m->opset, .in = in, .n_in = n->n_in, .out = out, .n_out = n->n_out,
                .want = want, .vals = vals, .qv = env->qv, .env = env, .sin = sin, .sout = sout};
    if (seqs && !takes_seq(n->p->op_type))
        for (int k = 0; k < n->n_in; k++)
            if (sin[k])
                return ox_fail(&c, OAR_ERR_DTYPE, "input %d ('%s') is %s; %s takes tensors (take an element out "
                                                  "first: SequenceAt, OptionalGetElement)", k,
                               m->value_names[n->in[k]], sin[k]->none ? "an optional with no element" : "a sequence",
                               n->p->op_type);
    uint64_t trace = oar_active_trace;
    if (known) oar_active_trace = 0; /* fold: run it now */
    oar_status st = n->op->fn(&c);
    if (known) oar_active_trace = trace;
    if (st != OAR_OK) {
        if (oar_last_status() == OAR_OK || !strstr(oar_last_error(), "onnx: node"))
            ox_fail(&c, st == OAR_OK ? OAR_ERR_INTERNAL : st, "%s", oar_last_status() != OAR_OK ? oar_last_error()
                                                                                              : "failed");
        return oar_last_status();
    }
    for (int k = 0; k < n->n_out; k++) {
        if (n->out[k] < 0) continue;
        if (!out[k] && !sout[k] && want[k])
            return ox_fail(&c, OAR_ERR_UNSUPPORTED, "output %d ('%s') is not produced by oar's translation", k,
                           m->value_names[n->out[k]]);
        if (known && out[k]) out[k]->trace_id = trace;
        for (int i = 0; known && sout[k] && i < sout[k]->n; i++)
            if (sout[k]->items[i]->storage) sout[k]->items[i]->trace_id = trace;
        vals[n->out[k]] = sout[k] ? NULL : out[k];
        env->sq[n->out[k]] = sout[k];
    }
    ox_qdq_after(&c);
    return OAR_OK;
}

oar_status ox_run_graph(const oar_onnx_model *m, const ox_graph *g, ox_env *env) {
    uint64_t trace = oar_active_trace;
    for (int i = 0; i < g->n_init; i++) {
        env->sq[g->init_value[i]] = NULL;
        if (!(env->vals[g->init_value[i]] = as_constant(g->init[i], trace))) return oar_last_status();
    }
    for (int i = 0; i < g->n_nodes; i++) {
        oar_status st = run_node(m, &g->nodes[i], env);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Binds the graph inputs from the jit's (flattened) inputs. */
static oar_status bind_inputs(const ox_variant *var, oar_tensor *const *in, int n_in, ox_env *env, uint64_t trace) {
    const oar_onnx_model *m = var->m;
    for (int i = 0, j = 0; i < m->n_in; i++) {
        const ox_io *io = &m->in[i];
        int v = io->value;
        if (m->value_input[i]) { /* value inputs are constants of this variant */
            if (!(env->vals[v] = as_constant(var->values[i], trace))) return oar_last_status();
            continue;
        }
        int n = io->kind == OX_TENSOR ? 1 : var->in_n[i];
        if (j + (n > 0 ? n : 0) > n_in) return oar_error(OAR_ERR_INTERNAL, "onnx: fewer inputs than the variant's");
        if (io->kind == OX_TENSOR || (io->kind == OX_OPT_TENSOR && n == 1)) {
            env->vals[v] = in[j++];
            continue;
        }
        ox_seq *q = ox_seq_new(env, io->dtype, n > 0 ? n : 0);
        if (!q) return oar_last_status();
        q->none = n < 0;
        q->of_seq = io->kind == OX_OPT_SEQ;
        for (int t = 0; t < n; t++) {
            q->items[t] = in[j++];
            if (q->dtype == OAR_DTYPE_COUNT) q->dtype = q->items[t]->dtype;
        }
        env->sq[v] = q;
    }
    return OAR_OK;
}

/* y as a result of the function: a graph input or a constant passed straight through still gets
 * a node of its own, and no tensor is given twice. */
static oar_tensor *own(oar_tensor *y, oar_tensor *const *in, int n_in, oar_tensor **out, int n_done, uint64_t trace) {
    bool is_input = false;
    for (int i = 0; i < n_in; i++) is_input |= y == in[i];
    if (is_input || y->storage) y = oar_clone(as_constant(y, trace));
    for (int j = 0; j < n_done && y; j++)
        if (out[j] == y) y = oar_clone(y);
    return y;
}

/* The graph outputs into out[] (a sequence's elements in its place). A probing variant records
 * what each output is and gives nothing. */
static oar_status give_outputs(ox_variant *var, ox_env *env, oar_tensor *const *in, int n_in, oar_tensor **out,
                               int n_out, uint64_t trace) {
    const oar_onnx_model *m = var->m;
    int j = 0;
    for (int k = 0; k < m->n_out; k++) {
        int v = m->out[k].value;
        ox_seq *q = env->sq[v];
        oar_tensor *y = env->vals[v];
        if (!q && !y) return oar_error(OAR_ERR_UNSUPPORTED, "onnx: graph output '%s' has no value", m->out[k].name);
        ox_kind kind = q ? (q->none ? OX_OPT_TENSOR : OX_SEQ) : OX_TENSOR;
        int n = q ? (q->none ? 0 : q->n) : 1;
        if (var->probing) {
            var->out_kind[k] = kind;
            var->out_n[k] = n;
            continue;
        }
        if (!m->seq_io && q)
            return oar_error(OAR_ERR_UNSUPPORTED, "onnx: graph output '%s' is %s but its type in the graph is not "
                                                  "given: declare it a sequence or optional type (the output's "
                                                  "ValueInfoProto) to run it with oar_onnx_run_values",
                             m->out[k].name, q->none ? "an optional with no element" : "a sequence");
        if (var->probed && (kind != var->out_kind[k] || n != var->out_n[k]))
            return oar_error(OAR_ERR_UNSUPPORTED, "onnx: graph output '%s' gives %d tensors; the first run of these "
                                                  "inputs gave %d (a sequence's length must not depend on the "
                                                  "inputs' values)", m->out[k].name, n, var->out_n[k]);
        for (int t = 0; t < n; t++, j++) {
            if (j >= n_out) return oar_error(OAR_ERR_INTERNAL, "onnx: more outputs than the variant's");
            if (!(out[j] = own(q ? q->items[t] : y, in, n_in, out, j, trace))) return oar_last_status();
        }
    }
    return OAR_OK;
}

oar_status ox_interpret(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    ox_variant *var = user;
    const oar_onnx_model *m = var->m;
    ox_env env = {.vals = calloc((size_t)m->n_values + 1, sizeof(oar_tensor *)),
                  .qv = calloc((size_t)m->n_values + 1, sizeof(ox_qval)),
                  .sq = calloc((size_t)m->n_values + 1, sizeof(ox_seq *))};
    oar_status st = OAR_OK;
    if (!env.vals || !env.qv || !env.sq) st = OAR_ERR_OOM;
    uint64_t trace = oar_active_trace;
    if (st == OAR_OK) st = bind_inputs(var, in, n_in, &env, trace);
    if (st == OAR_OK) st = ox_run_graph(m, &m->g, &env);
    if (st == OAR_OK) st = give_outputs(var, &env, in, n_in, out, n_out, trace);
    ox_seq_free_all(&env);
    free(env.vals), free(env.qv), free(env.sq);
    return st;
}
