/* Dead code: a node none of whose outputs is used, transitively, is removed unless it has
 * effects (it mutates an input, draws random numbers, or holds control flow). One worklist
 * sweep reaches the fixpoint: killing a node lowers its inputs' use counts, which may make
 * their producers dead in turn. Block outputs and gradient writes count as uses. */
#include "graph/passes/passes.h"

#include <stdlib.h>

static bool all_unused(const oar_program *p, const oar_node *n, const int *uses) {
    for (int o = 0; o < n->n_out; o++)
        if (uses[n->out[o]] > 0) return false;
    (void)p;
    return true;
}

oar_status oar_pass_dead_code(oar_program *p) {
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    int *stack = malloc(sizeof(int) * (size_t)(p->n_nodes + 1));
    if (!uses || !stack) {
        free(uses);
        free(stack);
        return oar_error(OAR_ERR_OOM, "dead_code: out of memory");
    }
    oar_program_use_counts(p, uses);
    int top = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (!n->dead && !oar_node_has_effects(p, n) && all_unused(p, n, uses)) stack[top++] = i;
    }
    /* each node is pushed at most once: when pushed it is dead-to-be, and a node is only pushed
     * again if still live, which it no longer is once popped */
    while (top > 0) {
        oar_node *n = &p->nodes[stack[--top]];
        if (n->dead) continue;
        n->dead = true;
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k];
            if (x < 0) continue;
            if (--uses[x] > 0) continue;
            const oar_value *v = &p->values[x];
            if (v->kind != OAR_VAL_NODE || v->node < 0) continue;
            const oar_node *prod = &p->nodes[v->node];
            if (!prod->dead && !oar_node_has_effects(p, prod) && all_unused(p, prod, uses)) {
                /* a producer feeding several inputs of n reaches 0 once; a node with several
                 * outputs may be pushed once per output reaching 0, the dead check skips it */
                if (top < p->n_nodes) stack[top++] = v->node;
            }
        }
    }
    free(uses);
    free(stack);
    return OAR_OK;
}
