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

/* A node runs eagerly (folded) when its inputs and the outer values its subgraphs read are real. */
static oar_status run_node(const oar_onnx_model *m, const ox_node *n, oar_tensor **vals, ox_qval *qv) {
    oar_tensor *in[OX_MAX_NODE_IO] = {0}, *out[OX_MAX_NODE_IO] = {0};
    bool want[OX_MAX_NODE_IO] = {0};
    bool known = true;
    for (int k = 0; k < n->n_in; k++) {
        in[k] = n->in[k] >= 0 ? vals[n->in[k]] : NULL;
        known &= is_real(in[k]);
    }
    for (int k = 0; k < n->n_cap; k++) known &= is_real(vals[n->cap[k]]);
    for (int k = 0; k < n->n_out; k++) want[k] = n->out[k] >= 0 && m->used[n->out[k]];
    ox_ctx c = {.m = m, .node = n, .opset = m->opset, .in = in, .n_in = n->n_in, .out = out, .n_out = n->n_out,
                .want = want, .vals = vals, .qv = qv};
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
        if (!out[k] && want[k])
            return ox_fail(&c, OAR_ERR_UNSUPPORTED, "output %d ('%s') is not produced by oar's translation", k,
                           m->value_names[n->out[k]]);
        if (known && out[k]) out[k]->trace_id = trace;
        vals[n->out[k]] = out[k];
    }
    ox_qdq_after(&c);
    return OAR_OK;
}

oar_status ox_run_graph(const oar_onnx_model *m, const ox_graph *g, oar_tensor **vals, ox_qval *qv) {
    uint64_t trace = oar_active_trace;
    for (int i = 0; i < g->n_init; i++)
        if (!(vals[g->init_value[i]] = as_constant(g->init[i], trace))) return oar_last_status();
    for (int i = 0; i < g->n_nodes; i++) {
        oar_status st = run_node(m, &g->nodes[i], vals, qv);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

oar_status ox_interpret(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const ox_variant *var = user;
    const oar_onnx_model *m = var->m;
    oar_tensor **vals = calloc((size_t)m->n_values + 1, sizeof(oar_tensor *));
    ox_qval *qv = calloc((size_t)m->n_values + 1, sizeof(ox_qval));
    if (!vals || !qv) {
        free(vals), free(qv);
        return OAR_ERR_OOM;
    }
    uint64_t trace = oar_active_trace;
    oar_status st = OAR_OK;
    for (int i = 0, j = 0; i < m->n_in && st == OAR_OK; i++) /* value inputs are constants of this variant */
        if (m->value_input[i]) {
            if (!(vals[m->in[i].value] = as_constant(var->values[i], trace))) st = oar_last_status();
        } else if (j < n_in) vals[m->in[i].value] = in[j++];
    if (st == OAR_OK) st = ox_run_graph(m, &m->g, vals, qv);
    for (int k = 0; k < n_out && st == OAR_OK; k++) {
        oar_tensor *y = vals[m->out[k].value];
        if (!y) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: graph output '%s' has no value", m->out[k].name);
            break;
        }
        /* a graph input or a constant passed straight through still gets a node of its own */
        bool is_input = false;
        for (int i = 0; i < n_in; i++) is_input |= y == in[i];
        if (is_input || y->storage) y = oar_clone(as_constant(y, trace));
        for (int j = 0; j < k && y; j++)
            if (out[j] == y) y = oar_clone(y);
        if (!(out[k] = y)) st = oar_last_status();
    }
    free(vals), free(qv);
    return st;
}
