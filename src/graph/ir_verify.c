/* The verifier: structure (ids, definition before use, block scoping, schemas) and types (each
 * node's output metas equal what its op's inference gives for its input metas). Passes and the
 * loader run it, so a bad program is reported by node instead of crashing the executor. */
#include "graph/ir.h"

#include <stdlib.h>
#include <string.h>

typedef struct verifier {
    const oar_program *p;
    char *defined; /* per value: defined so far, in a block visible from here */
} verifier;

static oar_status node_error(const oar_program *p, int node, const char *what) {
    const char *name = oar_op_table[p->nodes[node].op]->name;
    return oar_error(OAR_ERR_FORMAT, "program: node %d (%s): %s", node, name, what);
}

static bool same_meta(const oar_meta *a, const oar_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) == 0;
}

/* cond: both branches take the inputs after the predicate and yield the outputs' metas;
 * while_loop: both blocks take the loop variables, the body yields them back, and the outputs
 * are the variables plus an i64 trip count. */
static oar_status check_control(const oar_program *p, int id) {
    const oar_node *n = &p->nodes[id];
    int n_vars = (int)n->attrs[1].i, first = n->op == OAR_OP_cond ? 1 : 0;
    bool is_cond = n->op == OAR_OP_cond;
    if (n->n_blocks != 2 || n_vars < 0 || first + n_vars > n->n_in ||
        n->n_out != (is_cond ? p->blocks[n->blocks[0]].n_out : n_vars + 1))
        return node_error(p, id, "its blocks, inputs and outputs do not fit together");
    if (!is_cond) { /* the executor writes the trip count there */
        const oar_meta *m = &p->values[n->out[n_vars]].meta;
        if (m->dtype != OAR_I64 || m->ndim != 0) return node_error(p, id, "its last output must be an i64 scalar (the trip count)");
    }
    for (int k = 0; k < 2; k++) {
        const oar_block *b = &p->blocks[n->blocks[k]];
        if (b->n_in != n_vars) return node_error(p, id, "a block takes a different number of inputs");
        for (int i = 0; i < n_vars; i++)
            if (!same_meta(&p->values[b->in[i]].meta, &p->values[n->in[first + i]].meta))
                return node_error(p, id, "a block input differs from the node input it stands for");
        const int *want = is_cond ? n->out : (k == 0 ? NULL : n->out);
        int n_want = is_cond ? n->n_out : (k == 0 ? 1 : n_vars);
        if (b->n_out != n_want) return node_error(p, id, "a block yields the wrong number of values");
        for (int o = 0; want && o < n_want; o++)
            if (!same_meta(&p->values[b->out[o]].meta, &p->values[want[o]].meta))
                return node_error(p, id, "a block yields a value unlike the node output it stands for");
    }
    return OAR_OK;
}

/* Re-runs inference on shells of the inputs and compares with the recorded outputs. */
static oar_status check_types(const oar_program *p, int id) {
    const oar_node *n = &p->nodes[id];
    const oar_op_def *d = oar_op_table[n->op];
    oar_tensor *in[OAR_MAX_INPUTS] = {0};
    oar_status st = OAR_OK;
    for (int k = 0; k < n->n_in; k++) {
        if (n->in[k] < 0) continue;
        if (!(in[k] = oar_value_shell(p, n->in[k]))) {
            st = oar_last_status();
            goto done;
        }
    }
    for (int k = 0; k < d->n_attrs; k++)
        if (n->attrs[k].kind != d->attrs[k].kind) {
            st = node_error(p, id, "an attribute has the wrong kind");
            goto done;
        }
    if (d->flags & OAR_OPF_CONTROL) { /* the blocks' yields give the outputs */
        st = check_control(p, id);
        goto done;
    }
    if (!d->infer) goto done;
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n_out = d->n_outputs >= 0 ? d->n_outputs : OAR_MAX_OUTPUTS;
    st = d->infer(in, n->n_in, n->attrs, meta, &n_out);
    if (st != OAR_OK) {
        oar_error_prefix("program: node %d (%s)", id, d->name);
        goto done;
    }
    if (n_out != n->n_out) {
        st = node_error(p, id, "its number of outputs differs from what inference gives");
        goto done;
    }
    for (int o = 0; o < n_out; o++) {
        if (!same_meta(&meta[o], &p->values[n->out[o]].meta)) {
            char want[200], got[200];
            oar_meta_format(&meta[o], 0, want, sizeof want);
            oar_meta_format(&p->values[n->out[o]].meta, 0, got, sizeof got);
            st = oar_error(OAR_ERR_FORMAT, "program: node %d (%s): expected output %d to be %s as inference "
                                           "gives, got %s", id, d->name, o, want, got);
            goto done;
        }
    }
done:
    for (int k = 0; k < n->n_in; k++) oar_tensor_unref(in[k]);
    return st;
}

static oar_status verify_block(verifier *v, int b, int depth) {
    const oar_program *p = v->p;
    if (depth > 64) return oar_error(OAR_ERR_FORMAT, "program: blocks nest deeper than 64");
    const oar_block *bl = &p->blocks[b];
    for (int i = 0; i < bl->n_in; i++) {
        int id = bl->in[i];
        if (id < 0 || id >= p->n_values || p->values[id].kind != OAR_VAL_INPUT)
            return oar_error(OAR_ERR_FORMAT, "program: block %d parameter %d is not an input value", b, i);
        v->defined[id] = 1;
    }
    for (int i = 0; i < bl->n_nodes; i++) {
        int id = bl->nodes[i];
        if (id < 0 || id >= p->n_nodes) return oar_error(OAR_ERR_FORMAT, "program: block %d lists node %d, which does not exist", b, id);
        const oar_node *n = &p->nodes[id];
        const oar_op_def *d = oar_op_table[n->op];
        if (n->dead) continue;
        if (d->n_inputs >= 0 ? n->n_in != d->n_inputs : (n->n_in < 1 || n->n_in > OAR_MAX_INPUTS))
            return node_error(p, id, "wrong number of inputs for its op");
        if (n->n_out < 0 || n->n_out > OAR_MAX_OUTPUTS) return node_error(p, id, "wrong number of outputs");
        for (int k = 0; k < n->n_in; k++) {
            int x = n->in[k];
            if (x < 0) {
                if (!(k < 32 && (d->optional_inputs >> k) & 1u)) return node_error(p, id, "a required input is absent");
                continue;
            }
            if (x >= p->n_values) return node_error(p, id, "an input refers to a value that does not exist");
            if (!v->defined[x]) return node_error(p, id, "an input is used before it is defined, or outside its block");
        }
        for (int k = 0; k < n->n_blocks; k++) {
            int sb = n->blocks[k];
            if (sb <= 0 || sb >= p->n_blocks || p->blocks[sb].parent != b)
                return node_error(p, id, "a sub-block is not a child of the node's block");
            oar_status st = verify_block(v, sb, depth + 1);
            if (st != OAR_OK) return st;
        }
        oar_status st = check_types(p, id);
        if (st != OAR_OK) return st;
        for (int o = 0; o < n->n_out; o++) {
            int x = n->out[o];
            if (x < 0 || x >= p->n_values || p->values[x].node != id || p->values[x].out_index != o)
                return node_error(p, id, "an output does not point back to the node");
            v->defined[x] = 1;
        }
    }
    for (int k = 0; k < bl->n_out; k++) {
        int x = bl->out[k];
        if (x < 0 || x >= p->n_values || !v->defined[x])
            return oar_error(OAR_ERR_FORMAT, "program: block %d yields value %d, which is not defined there", b, x);
    }
    /* values defined inside this block are not visible after it */
    if (b != OAR_MAIN_BLOCK) {
        for (int i = 0; i < bl->n_in; i++) v->defined[bl->in[i]] = 0;
        for (int i = 0; i < bl->n_nodes; i++) {
            const oar_node *n = &p->nodes[bl->nodes[i]];
            for (int o = 0; o < n->n_out; o++) v->defined[n->out[o]] = 0;
        }
    }
    return OAR_OK;
}

oar_status oar_program_verify(const oar_program *p) {
    if (!p || p->n_blocks < 1) return oar_error(OAR_ERR_FORMAT, "program: expected a main block, got none");
    verifier v = {p, calloc((size_t)p->n_values + 1, 1)};
    if (!v.defined) return oar_error(OAR_ERR_OOM, "program: out of memory while verifying");
    for (int x = 0; x < p->n_values; x++) {
        const oar_value *val = &p->values[x];
        if (val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST) {
            if (!val->tensor) {
                free(v.defined);
                return oar_error(OAR_ERR_FORMAT, "program: value %d is a parameter without a tensor", x);
            }
            v.defined[x] = 1;
        }
        if (val->meta.ndim < 0 || val->meta.ndim > OAR_MAX_DIMS || !oar_dtype_valid(val->meta.dtype)) {
            free(v.defined);
            return oar_error(OAR_ERR_FORMAT, "program: value %d has an invalid dtype or rank", x);
        }
    }
    oar_status st = verify_block(&v, OAR_MAIN_BLOCK, 0);
    for (int k = 0; st == OAR_OK && k < p->n_grad_writes; k++) {
        int x = p->grad_writes[k].value;
        if (x < 0 || x >= p->n_values || !v.defined[x])
            st = oar_error(OAR_ERR_FORMAT, "program: gradient write %d refers to an undefined value", k);
    }
    free(v.defined);
    return st;
}
