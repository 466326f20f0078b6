/* Re-specializing a program to new input shapes without tracing again: metas are inferred
 * anew node by node. An op attribute holding the traced size of a dynamic dim (a reshape to
 * [64, -1] written with the batch size read at tracing) would silently keep the old size, so
 * such programs are refused and the caller traces again. */
#include "graph/exec.h"
#include "graph/passes/passes.h"

#include <string.h>

/* Sizes the dynamic dims had at tracing and no longer have. */
typedef struct changed_sizes {
    int n;
    int64_t sizes[64];
} changed_sizes;

/* Whether attribute k of op d holds sizes (a shape): "shape", "input_shape", "output_size";
 * other integer lists (dims, paddings, permutations) may equal a batch size by chance. */
static bool is_size_attr(const oar_op_def *d, int k) {
    const char *name = d->attrs[k].name;
    size_t n = strlen(name);
    return d->attrs[k].kind == OAR_ATTR_INTS &&
           ((n >= 5 && !strcmp(name + n - 5, "shape")) || (n >= 4 && !strcmp(name + n - 4, "size")));
}

/* The index of an entry of a holding a size that changed, or -1. */
static int changed_size_at(const oar_attr *a, const changed_sizes *c) {
    if (a->kind != OAR_ATTR_INTS) return -1;
    for (int k = 0; k < a->n; k++)
        for (int j = 0; j < c->n; j++)
            if (a->ints[k] == c->sizes[j]) return k;
    return -1;
}

static oar_status infer_block(oar_program *p, int b, const changed_sizes *changed);

static oar_status infer_control(oar_program *p, oar_node *n, const changed_sizes *changed) {
    int n_vars = (int)n->attrs[1].i, first = n->op == OAR_OP_cond ? 1 : 0;
    for (int k = 0; k < n->n_blocks; k++) {
        oar_block *b = &p->blocks[n->blocks[k]];
        for (int i = 0; i < n_vars && i < b->n_in; i++) p->values[b->in[i]].meta = p->values[n->in[first + i]].meta;
        oar_status st = infer_block(p, n->blocks[k], changed);
        if (st != OAR_OK) return st;
    }
    const oar_block *yields = &p->blocks[n->blocks[n->op == OAR_OP_cond ? 0 : 1]];
    for (int o = 0; o < n->n_out && o < yields->n_out; o++) p->values[n->out[o]].meta = p->values[yields->out[o]].meta;
    return OAR_OK;
}

static oar_status infer_block(oar_program *p, int b, const changed_sizes *changed) {
    oar_block *bl = &p->blocks[b];
    for (int i = 0; i < bl->n_nodes; i++) {
        oar_node *n = &p->nodes[bl->nodes[i]];
        const oar_op_def *d = oar_op_table[n->op];
        for (int k = 0; k < d->n_attrs; k++) {
            int e = is_size_attr(d, k) ? changed_size_at(&n->attrs[k], changed) : -1;
            if (e >= 0)
                return oar_error(OAR_ERR_SHAPE, "specialize: node %d (%s) has %s[%d] = %lld, the size of a dynamic "
                                                "dim as traced; this program serves that size only",
                                 bl->nodes[i], d->name, d->attrs[k].name, e, (long long)n->attrs[k].ints[e]);
        }
        if (d->flags & OAR_OPF_CONTROL) { /* blocks take the node's inputs; outputs follow them */
            oar_status st = infer_control(p, n, changed);
            if (st != OAR_OK) return st;
            continue;
        }
        oar_tensor *in[OAR_MAX_INPUTS] = {0};
        oar_status st = OAR_OK;
        for (int k = 0; k < n->n_in && st == OAR_OK; k++)
            if (n->in[k] >= 0 && !(in[k] = oar_value_shell(p, n->in[k]))) st = oar_last_status();
        oar_meta meta[OAR_MAX_OUTPUTS];
        int n_out = d->n_outputs >= 0 ? d->n_outputs : OAR_MAX_OUTPUTS;
        if (st == OAR_OK) st = d->infer(in, n->n_in, n->attrs, meta, &n_out);
        for (int k = 0; k < n->n_in; k++) oar_tensor_unref(in[k]);
        if (st != OAR_OK) {
            oar_error_prefix("specialize: node %d (%s)", bl->nodes[i], d->name);
            return st;
        }
        if (n_out != n->n_out)
            return oar_error(OAR_ERR_SHAPE, "specialize: node %d (%s) gives %d outputs at the new shapes, %d as "
                                            "traced", bl->nodes[i], d->name, n_out, n->n_out);
        for (int o = 0; o < n_out; o++) {
            oar_value *v = &p->values[n->out[o]];
            uint32_t dyn = 0;
            for (int dd = 0; dd < meta[o].ndim && dd < v->meta.ndim; dd++)
                if (meta[o].shape[dd] != v->meta.shape[dd]) dyn |= 1u << dd;
            v->dyn_dims |= dyn;
            v->meta = meta[o];
        }
    }
    return OAR_OK;
}

oar_program *oar_program_specialize(const oar_program *src, const oar_meta *in, int n_in) {
    const oar_block *main = &src->blocks[OAR_MAIN_BLOCK];
    if (n_in != main->n_in) {
        oar_error(OAR_ERR_INVALID_ARG, "specialize: expected %d inputs, got %d", main->n_in, n_in);
        return NULL;
    }
    changed_sizes changed = {0};
    for (int i = 0; i < n_in; i++) {
        const oar_value *v = &src->values[main->in[i]];
        bool ok = in[i].dtype == v->meta.dtype && in[i].ndim == v->meta.ndim;
        for (int d = 0; ok && d < v->meta.ndim; d++) {
            if (in[i].shape[d] == v->meta.shape[d]) continue;
            if (!((v->dyn_dims >> d) & 1u)) ok = false;
            else if (v->meta.shape[d] > 1 && changed.n < 64) changed.sizes[changed.n++] = v->meta.shape[d];
        }
        if (!ok) {
            char want[200], got[200];
            oar_meta_format(&v->meta, v->dyn_dims, want, sizeof want);
            oar_meta_format(&in[i], 0, got, sizeof got);
            oar_error(OAR_ERR_SHAPE, "specialize: expected input %d to be %s (\"?\" dims may vary), got %s", i, want,
                      got);
            return NULL;
        }
    }
    oar_program *p = oar_program_copy(src);
    if (!p) return NULL;
    for (int i = 0; i < n_in; i++) p->values[main->in[i]].meta = in[i];
    if (infer_block(p, OAR_MAIN_BLOCK, &changed) != OAR_OK) {
        oar_program_free(p);
        return NULL;
    }
    /* in-place reuse was decided for the traced shapes (a broadcast may now differ): decide again */
    bool had_inplace = false;
    for (int i = 0; i < p->n_nodes; i++) {
        had_inplace |= p->nodes[i].inplace;
        p->nodes[i].inplace = false;
    }
    if (had_inplace && oar_pass_inplace(p) != OAR_OK) {
        oar_program_free(p);
        return NULL;
    }
    return p;
}

/* The sizes the dynamic dims of the main block's inputs had at tracing. */
static int traced_sizes(const oar_program *p, int64_t *sizes, int cap) {
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    int n = 0;
    for (int i = 0; i < main->n_in; i++) {
        const oar_value *v = &p->values[main->in[i]];
        for (int d = 0; d < v->meta.ndim && d < 32 && n < cap; d++)
            if (((v->dyn_dims >> d) & 1u) && v->meta.shape[d] > 0) sizes[n++] = v->meta.shape[d];
    }
    return n;
}

/* A reshape traced inside the function holds the sizes it was traced at: flatten(x, 1, -1) on a
 * [4, 16, 5, 5] batch records shape=4,400, which serves batch 4 only. When the new shape has no
 * -1 and exactly one entry equal to the traced size of a dynamic dim, that entry becomes -1:
 * at the traced shapes it resolves to the same size, and at other sizes a fixed shape could not
 * hold the input's elements anyway, so this only turns a certain failure into the reshape the
 * function meant. Ambiguous shapes (two candidate entries, or a -1 already) are left alone, and
 * the trial run of mark_dynamic refuses them. Returns the count. */
int oar_program_generalize_reshapes(oar_program *p) {
    int64_t sizes[64];
    int n_sizes = traced_sizes(p, sizes, 64), changed = 0;
    for (int i = 0; n_sizes && i < p->n_nodes; i++) {
        oar_node *n = &p->nodes[i];
        if (n->dead || n->op != OAR_OP_reshape || n->attrs[0].kind != OAR_ATTR_INTS) continue;
        oar_attr *a = &n->attrs[0];
        int at = -1, hits = 0;
        for (int d = 0; d < a->n; d++) {
            if (a->ints[d] < 0) hits = 2; /* a -1 already: leave it */
            for (int k = 0; k < n_sizes && hits < 2; k++)
                if (a->ints[d] == sizes[k]) {
                    at = d;
                    hits++;
                    break;
                }
        }
        if (hits == 1) {
            a->ints[at] = -1;
            changed++;
        }
    }
    return changed;
}
