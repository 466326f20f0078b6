/* In-place reuse: a node of the main block whose op may write its output over input 0
 * (OAR_OPF_INPLACE_OK) is marked to do so when that is invisible to everything else:
 *   - input 0 is an intermediate of the main block (not an input, parameter or constant, which
 *     the caller or the program keeps), made by a non-view node (so it owns its whole buffer,
 *     contiguous);
 *   - input 0 and output 0 have the same dtype, shape and dynamic dims;
 *   - input 0 has exactly one use, this node's slot 0: no other node (before or after), no
 *     block output and no gradient write reads it. A view of it would be such a use, so no view
 *     of it exists either; and if its producer was itself marked, that producer's input had a
 *     single use too, so no other name for the buffer exists.
 * Marks are recomputed from scratch, so the pass is idempotent. It runs last: passes that add
 * uses afterwards must clear marks they invalidate (cse does). The planner makes the output
 * share input 0's buffer; nodes inside sub-blocks are never marked (a loop body would
 * overwrite a value the next iteration reads). */
#include "graph/passes/passes.h"

#include <stdlib.h>
#include <string.h>

static bool meta_equal(const oar_value *a, const oar_value *b) {
    return a->meta.dtype == b->meta.dtype && a->meta.ndim == b->meta.ndim && a->dyn_dims == b->dyn_dims &&
           memcmp(a->meta.shape, b->meta.shape, sizeof(int64_t) * (size_t)a->meta.ndim) == 0;
}

static bool can_reuse(const oar_program *p, const oar_node *n, const int *uses) {
    const oar_op_def *d = oar_op_table[n->op];
    if (n->dead || !(d->flags & OAR_OPF_INPLACE_OK) || (d->flags & OAR_OPF_VIEW)) return false;
    if (n->n_blocks || d->mutated_inputs || oar_node_has_effects(p, n)) return false;
    if (n->n_in < 1 || n->n_out < 1 || n->in[0] < 0) return false;
    int x = n->in[0];
    const oar_value *xv = &p->values[x];
    if (xv->kind != OAR_VAL_NODE || xv->block != OAR_MAIN_BLOCK || xv->node < 0) return false;
    const oar_node *prod = &p->nodes[xv->node];
    if (prod->dead || prod->block != OAR_MAIN_BLOCK || (oar_op_table[prod->op]->flags & OAR_OPF_VIEW))
        return false;
    if (uses[x] != 1) return false;
    return meta_equal(xv, &p->values[n->out[0]]);
}

oar_status oar_pass_inplace(oar_program *p) {
    for (int i = 0; i < p->n_nodes; i++) p->nodes[i].inplace = false;
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    if (!uses) return oar_error(OAR_ERR_OOM, "inplace: out of memory");
    oar_program_use_counts(p, uses);
    const oar_block *mb = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < mb->n_nodes; i++) {
        oar_node *n = &p->nodes[mb->nodes[i]];
        if (can_reuse(p, n, uses)) n->inplace = true;
    }
    free(uses);
    return OAR_OK;
}
