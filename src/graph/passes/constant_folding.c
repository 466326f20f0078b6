/* Constant folding: a node whose inputs are all constants (OAR_VAL_CONST, fixed at tracing;
 * never parameters, which change between runs) is run once now, eagerly, and its outputs
 * become constants. Chains fold in one sweep: results are kept aside while the blocks are
 * walked in order, and only those still used afterwards (by a node that did not fold, a block
 * output or a gradient write) become constant values, so the exported model holds no
 * intermediate constants.
 *
 * Not folded: nodes with effects (random draws, in-place mutations, control flow), nodes
 * reading a constant some node mutates, outputs over FOLD_MAX_NUMEL elements (folding would
 * bloat the model with data cheaper to recompute), and nodes whose op refuses to run (the
 * executor reports that error at run time instead). Views are folded into contiguous copies
 * so each constant owns exactly its data. */
#include "graph/passes/passes.h"

#include <stdio.h>
#include <stdlib.h>

#define FOLD_MAX_NUMEL (1 << 20)

typedef struct folder {
    oar_program *p;
    const bool *mut;
    oar_tensor **val; /* per value: the folded result, or NULL */
} folder;

static int64_t meta_numel(const oar_meta *m) {
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++) n *= m->shape[d];
    return n;
}

static bool same_meta(const oar_meta *a, const oar_tensor *t) {
    if (a->dtype != t->dtype || a->ndim != t->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != t->shape[d]) return false;
    return true;
}

/* The input tensor a foldable node reads at slot k (NULL for an absent optional input). */
static bool const_input(const folder *f, int x, oar_tensor **t) {
    if (x < 0) {
        *t = NULL;
        return true;
    }
    const oar_value *v = &f->p->values[x];
    if (f->val[x]) {
        *t = f->val[x];
        return true;
    }
    if (v->kind == OAR_VAL_CONST && v->tensor && !f->mut[x]) {
        *t = v->tensor;
        return true;
    }
    return false;
}

static oar_status try_fold(folder *f, int id) {
    oar_program *p = f->p;
    oar_node *n = &p->nodes[id];
    const oar_op_def *d = oar_op_table[n->op];
    if (n->dead || n->n_blocks || (d->flags & OAR_OPF_RANDOM) || oar_node_has_effects(p, n)) return OAR_OK;
    if (n->n_out < 1 || n->n_out > OAR_MAX_OUTPUTS || n->n_in > OAR_MAX_INPUTS) return OAR_OK;
    oar_tensor *in[OAR_MAX_INPUTS];
    for (int k = 0; k < n->n_in; k++)
        if (!const_input(f, n->in[k], &in[k])) return OAR_OK;
    for (int o = 0; o < n->n_out; o++) {
        const oar_value *v = &p->values[n->out[o]];
        if (v->dyn_dims || meta_numel(&v->meta) > FOLD_MAX_NUMEL) return OAR_OK;
    }
    oar_tensor *out[OAR_MAX_OUTPUTS];
    int n_out = OAR_MAX_OUTPUTS;
    bool grad = oar_set_grad_enabled(false);
    oar_status st = oar_op_call(n->op, in, n->n_in, n->attrs, out, &n_out);
    oar_set_grad_enabled(grad);
    if (st != OAR_OK) {
        oar_clear_error(); /* left to run time, which reports it with the program's context */
        return OAR_OK;
    }
    bool ok = n_out == n->n_out;
    for (int o = 0; ok && o < n_out; o++) {
        ok = same_meta(&p->values[n->out[o]].meta, out[o]);
        if (ok && ((d->flags & OAR_OPF_VIEW) || !out[o]->contiguous)) {
            oar_tensor *c = oar_tensor_contiguous_copy(out[o]);
            oar_tensor_unref(out[o]);
            out[o] = c;
            if (!c) {
                for (int k = o + 1; k < n_out; k++) oar_tensor_unref(out[k]);
                for (int k = 0; k < o; k++) oar_tensor_unref(out[k]);
                return oar_error(OAR_ERR_OOM, "constant_folding: out of memory copying a folded view");
            }
        }
    }
    if (!ok) { /* inference disagrees with the program: keep the node, the verifier speaks */
        for (int o = 0; o < n_out; o++) oar_tensor_unref(out[o]);
        return OAR_OK;
    }
    for (int o = 0; o < n_out; o++) f->val[n->out[o]] = out[o];
    n->dead = true;
    return OAR_OK;
}

static oar_status fold_block(folder *f, int b, int depth) {
    if (depth > 64) return OAR_OK;
    for (int i = 0; i < f->p->blocks[b].n_nodes; i++) {
        int id = f->p->blocks[b].nodes[i];
        const oar_node *n = &f->p->nodes[id];
        if (n->dead) continue;
        for (int k = 0; k < n->n_blocks; k++) {
            oar_status st = fold_block(f, f->p->nodes[id].blocks[k], depth + 1);
            if (st != OAR_OK) return st;
        }
        oar_status st = try_fold(f, id);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

oar_status oar_pass_constant_folding(oar_program *p) {
    int nv = p->n_values; /* values added below are the new constants */
    folder f = {p, oar_pass_mutable_values(p), calloc((size_t)nv + 1, sizeof(oar_tensor *))};
    int *uses = malloc(sizeof(int) * (size_t)(nv + 1));
    oar_status st = OAR_OK;
    if (!f.mut || !f.val || !uses) {
        st = oar_error(OAR_ERR_OOM, "constant_folding: out of memory");
        goto done;
    }
    st = fold_block(&f, OAR_MAIN_BLOCK, 0);
    if (st != OAR_OK) goto done;
    oar_program_use_counts(p, uses); /* folded nodes are dead now: only real uses remain */
    for (int v = 0; v < nv; v++) {
        if (!f.val[v] || uses[v] == 0) continue;
        char name[48];
        snprintf(name, sizeof name, "const.%d", v);
        int c = oar_program_add_tensor(p, OAR_VAL_CONST, f.val[v], name);
        if (c < 0) {
            st = oar_last_status() != OAR_OK ? oar_last_status()
                                              : oar_error(OAR_ERR_OOM, "constant_folding: out of memory");
            goto done;
        }
        oar_program_replace_uses(p, v, c);
    }
done:
    if (f.val)
        for (int v = 0; v < nv; v++) oar_tensor_unref(f.val[v]);
    free(f.val);
    free((void *)f.mut);
    free(uses);
    return st;
}
