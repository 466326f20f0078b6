/* Running cond and while_loop nodes: their blocks are interpreted op by op through eager
 * dispatch (the data decides which block runs and how often, so they are not planned), and the
 * results are copied into the node's output buffers, which the planner did place. */
#include "graph/exec.h"

#include <stdlib.h>
#include <string.h>

typedef struct env {
    const oar_program *p;
    oar_tensor **val; /* per value: its tensor now (outer ones borrowed) */
    bool *owned;      /* val[v] is a reference this run holds */
} env;

static void set_value(env *E, int v, oar_tensor *t, bool owned) {
    if (E->owned[v]) oar_tensor_unref(E->val[v]);
    E->val[v] = t;
    E->owned[v] = owned;
}

static oar_status run_node(env *E, const oar_node *n);

/* Runs block b on args; yields[] are borrowed from the environment. */
static oar_status run_block(env *E, int b, oar_tensor *const *args, oar_tensor **yields) {
    const oar_block *bl = &E->p->blocks[b];
    for (int i = 0; i < bl->n_in; i++) set_value(E, bl->in[i], args[i], false);
    for (int i = 0; i < bl->n_nodes; i++) {
        oar_status st = run_node(E, &E->p->nodes[bl->nodes[i]]);
        if (st != OAR_OK) return st;
    }
    for (int k = 0; k < bl->n_out; k++) yields[k] = E->val[bl->out[k]];
    return OAR_OK;
}

static oar_status run_node(env *E, const oar_node *n) {
    const oar_op_def *d = oar_op_table[n->op];
    if (d->flags & OAR_OPF_CONTROL) { /* nested: outputs are made here, then filled */
        for (int o = 0; o < n->n_out; o++) {
            const oar_meta *m = &E->p->values[n->out[o]].meta;
            oar_tensor *t = oar_tensor_new(m->dtype, m->shape, m->ndim);
            if (!t) return OAR_ERR_OOM;
            set_value(E, n->out[o], t, true);
        }
        return oar_run_control(E->p, n, E->val);
    }
    oar_tensor *in[OAR_MAX_INPUTS], *out[OAR_MAX_OUTPUTS];
    for (int k = 0; k < n->n_in; k++) in[k] = n->in[k] >= 0 ? E->val[n->in[k]] : NULL;
    int n_out = OAR_MAX_OUTPUTS;
    oar_status st = oar_op_call(n->op, in, n->n_in, n->attrs, out, &n_out);
    if (st != OAR_OK) return st;
    for (int o = 0; o < n_out && o < n->n_out; o++) set_value(E, n->out[o], out[o], true);
    for (int o = n->n_out; o < n_out; o++) oar_tensor_unref(out[o]);
    return OAR_OK;
}

static oar_status truth(const oar_tensor *pred, bool *taken) {
    double v = 0;
    oar_status st = oar_item(pred, &v);
    *taken = v != 0;
    return st;
}

oar_status oar_run_control(const oar_program *p, const oar_node *n, oar_tensor *const *hdr) {
    env E = {p, oar_malloc(sizeof(oar_tensor *) * (size_t)(p->n_values + 1)),
             oar_malloc(sizeof(bool) * (size_t)(p->n_values + 1))};
    if (!E.val || !E.owned) {
        free(E.val);
        free(E.owned);
        return OAR_ERR_OOM;
    }
    memcpy(E.val, hdr, sizeof(oar_tensor *) * (size_t)p->n_values);
    int n_vars = (int)n->attrs[1].i;
    oar_tensor *res[OAR_MAX_OUTPUTS] = {0}, *carried[OAR_MAX_OUTPUTS] = {0};
    oar_status st = OAR_OK;
    int64_t trips = 0;
    if (n->op == OAR_OP_cond) {
        bool taken = false;
        oar_tensor *args[OAR_MAX_INPUTS];
        for (int i = 0; i < n_vars; i++) args[i] = E.val[n->in[1 + i]];
        st = truth(E.val[n->in[0]], &taken);
        if (st == OAR_OK) st = run_block(&E, n->blocks[taken ? 0 : 1], args, res);
    } else { /* while_loop: carried variables live as references across iterations */
        for (int i = 0; i < n_vars; i++) carried[i] = oar_retain(E.val[n->in[i]]);
        for (;;) {
            oar_tensor *pred[1];
            bool taken = false;
            st = run_block(&E, n->blocks[0], carried, pred);
            if (st == OAR_OK) st = truth(pred[0], &taken);
            if (st != OAR_OK || !taken) break;
            oar_tensor *next[OAR_MAX_OUTPUTS];
            if ((st = run_block(&E, n->blocks[1], carried, next)) != OAR_OK) break;
            for (int i = 0; i < n_vars; i++) oar_retain(next[i]);
            for (int i = 0; i < n_vars; i++) {
                oar_tensor_unref(carried[i]);
                carried[i] = next[i];
            }
            trips++;
        }
        memcpy(res, carried, sizeof(oar_tensor *) * (size_t)n_vars);
    }
    for (int k = 0; st == OAR_OK && k < n_vars && n->op != OAR_OP_cond; k++) st = oar_copy_(hdr[n->out[k]], res[k]);
    for (int k = 0; st == OAR_OK && n->op == OAR_OP_cond && k < n->n_out; k++) st = oar_copy_(hdr[n->out[k]], res[k]);
    if (st == OAR_OK && n->op == OAR_OP_while_loop) *(int64_t *)oar_data(hdr[n->out[n_vars]]) = trips;
    for (int i = 0; i < n_vars && n->op == OAR_OP_while_loop; i++) oar_tensor_unref(carried[i]);
    for (int v = 0; v < p->n_values; v++)
        if (E.owned[v]) oar_tensor_unref(E.val[v]);
    free(E.val);
    free(E.owned);
    if (st != OAR_OK) oar_error_prefix("%s", oar_op_table[n->op]->name);
    return st;
}
