/* Which nodes the executor computes once (see hoist.h): one walk of the main block in order. */
#include "graph/hoist.h"

#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

/* One walk in order: a node is hoisted when its inputs are stable and it is allowed; its
 * outputs then become stable. */
static void walk(const oar_program *p, const int *root, const bool *mut, const bool *pinned, const bool *blocked,
                 bool *stable, bool *hoisted) {
    for (int v = 0; v < p->n_values; v++) {
        oar_value_kind k = p->values[v].kind;
        stable[v] = (k == OAR_VAL_PARAM || k == OAR_VAL_CONST) && !mut[root[v]];
    }
    memset(hoisted, 0, (size_t)p->n_nodes + 1);
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < mb->n_nodes; i++) {
        int id = mb->nodes[i];
        const oar_node *n = &p->nodes[id];
        const oar_op_def *d = oar_op_table[n->op];
        bool ok = !n->dead && !blocked[id] && n->n_in > 0 && !oar_node_mutated_inputs(n) &&
                  !(d->flags & (OAR_OPF_CONTROL | OAR_OPF_RANDOM));
        for (int k = 0; ok && k < n->n_in; k++) ok = n->in[k] < 0 || stable[n->in[k]];
        for (int o = 0; ok && o < n->n_out; o++) ok = !pinned[root[n->out[o]]] && !mut[root[n->out[o]]];
        if (!ok) continue;
        hoisted[id] = true;
        for (int o = 0; o < n->n_out; o++) stable[n->out[o]] = true;
    }
}

bool *oar_program_hoisted_nodes(const oar_program *p) {
    int nv = p->n_values;
    bool *hoisted = calloc((size_t)p->n_nodes + 1, 1);
    bool *blocked = calloc((size_t)p->n_nodes + 1, 1);
    bool *stable = calloc((size_t)nv + 1, 1);   /* per value: same data at every run */
    bool *pinned = calloc((size_t)nv + 1, 1);   /* per root: an output or a gradient */
    int *root = oar_pass_value_roots(p);
    bool *mut = root ? oar_pass_mutable_roots(p, root) : NULL;
    if (!hoisted || !blocked || !stable || !pinned || !root || !mut) {
        free(hoisted);
        hoisted = NULL;
        oar_error(OAR_ERR_OOM, "executor: out of memory");
        goto done;
    }
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int k = 0; k < mb->n_out; k++) pinned[root[mb->out[k]]] = true;
    for (int k = 0; k < p->n_grad_writes; k++) pinned[root[p->grad_writes[k].value]] = true;
    /* A node marked in place that runs every time must not overwrite a computed-once value:
     * the producer of its input 0 then runs every time too (which may unhoist more). */
    for (bool changed = true; changed;) {
        changed = false;
        walk(p, root, mut, pinned, blocked, stable, hoisted);
        for (int i = 0; i < mb->n_nodes; i++) {
            const oar_node *n = &p->nodes[mb->nodes[i]];
            if (n->dead || !n->inplace || hoisted[mb->nodes[i]] || n->n_in < 1 || n->in[0] < 0) continue;
            const oar_value *x = &p->values[n->in[0]];
            if (x->kind == OAR_VAL_NODE && hoisted[x->node]) blocked[x->node] = changed = true;
        }
    }
done:
    free(blocked);
    free(stable);
    free(pinned);
    free(root);
    free(mut);
    return hoisted;
}
