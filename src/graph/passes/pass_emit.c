/* Helpers for passes that add nodes (fusions, folding): a node placed at a given position of
 * its block with output metas inferred from its inputs, and a scalar constant. */
#include "graph/passes/passes.h"
#include "ops/dispatch.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int oar_pass_insert_node(oar_program *p, int block, int pos, oar_op_id op, const int *in, int n_in,
                         const oar_attr *attrs, int *out_ids) {
    oar_tensor *shell[OAR_MAX_INPUTS] = {0};
    oar_meta meta[OAR_MAX_OUTPUTS];
    int n_out = OAR_MAX_OUTPUTS;
    oar_status st = n_in <= OAR_MAX_INPUTS ? OAR_OK
                                          : oar_error(OAR_ERR_INVALID_ARG, "pass: a node with %d inputs", n_in);
    for (int k = 0; k < n_in && st == OAR_OK; k++)
        if (in[k] >= 0 && !(shell[k] = oar_value_shell(p, in[k]))) st = oar_last_status();
    if (st == OAR_OK) st = oar_op_infer_symbolic(op, shell, n_in, attrs, meta, &n_out);
    for (int k = 0; k < n_in; k++) oar_tensor_unref(shell[k]);
    if (st != OAR_OK) return -1;
    int id = oar_program_add_node(p, block, op, in, n_in, attrs, meta, n_out, out_ids);
    if (id < 0) {
        oar_error(OAR_ERR_OOM, "pass: out of memory");
        return -1;
    }
    oar_block *b = &p->blocks[block]; /* appended last: move it to pos */
    if (pos >= 0 && pos < b->n_nodes - 1) {
        memmove(&b->nodes[pos + 1], &b->nodes[pos], sizeof(int) * (size_t)(b->n_nodes - 1 - pos));
        b->nodes[pos] = id;
        p->nodes[id].phase = p->nodes[b->nodes[pos + 1]].phase; /* the profiler's phase there */
    }
    return id;
}

int oar_pass_scalar_const(oar_program *p, double value, oar_dtype dt) {
    oar_tensor *host = oar_tensor_new(dt, NULL, 0);
    if (!host) return -1;
    oar_dtypes[dt].store(oar_tensor_ptr(host), value);
    oar_tensor *t = host; /* a GPU program's kernels read device memory: the constant lives there */
    if (p->device != OAR_CPU) {
        t = oar_tensor_new_on(p->device, dt, NULL, 0);
        if (!t || oar_tensor_copy_strided(t, host) != OAR_OK) {
            oar_tensor_unref(t);
            oar_tensor_unref(host);
            return -1;
        }
        oar_tensor_unref(host);
    }
    char name[48];
    snprintf(name, sizeof name, "const.%d", p->n_values); /* the id it gets, as constant_folding names */
    int v = oar_program_add_tensor(p, OAR_VAL_CONST, t, name);
    oar_tensor_unref(t);
    return v;
}

double oar_pass_const_value(const oar_program *p, int v) {
    const oar_value *val = &p->values[v];
    if (val->kind != OAR_VAL_CONST || !val->tensor || val->tensor->numel != 1) return NAN;
    const oar_tensor *t = val->tensor;
    if (!oar_dtypes[t->dtype].is_float) return NAN;
    if (t->device == OAR_CPU) return oar_dtypes[t->dtype].load(oar_tensor_ptr(t));
    double x; /* a device constant (a GPU program's scale): its pointer is not the host's */
    return oar_copy_to_buffer(t, &x, sizeof x, OAR_F64) == OAR_OK ? x : NAN;
}
