/* oar_jit_save: exports the program of a compiled function's latest call (serialize_write.c
 * writes the files). Only inference programs are exported: a program that writes gradients or
 * updates state in place is a training step, which a predictor cannot run. */
#include "graph/export.h"

#include "graph/jit.h"
#include "graph/serialize.h"

#include "graph/exec.h"
#include "base/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oar_program_state_writer(const oar_program *p) {
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        const oar_op_def *d = oar_op_table[n->op];
        if (n->dead || !d->mutated_inputs) continue;
        if ((n->op == OAR_OP_batch_norm || n->op == OAR_OP_batch_norm_act) && n->attrs[0].i == 0) continue; /* eval: reads the statistics */
        for (int k = 0; k < n->n_in && k < 32; k++)
            if (((d->mutated_inputs >> k) & 1u) && n->in[k] >= 0) return i;
    }
    return -1;
}

/* Runs a trial of p at other sizes of its dynamic dims (twice the traced ones, so sizes that
 * divide the traced ones still divide) and marks every value whose dims follow them. */
static oar_status mark_dynamic(oar_program *p, const char *const *in_names) {
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    oar_meta *metas = oar_malloc(sizeof(oar_meta) * (size_t)(main->n_in + 1));
    if (!metas) return OAR_ERR_OOM;
    char dims[256] = "";
    size_t n = 0;
    for (int i = 0; i < main->n_in; i++) {
        const oar_value *v = &p->values[main->in[i]];
        metas[i] = v->meta;
        for (int d = 0; d < v->meta.ndim && d < 32; d++)
            if ((v->dyn_dims >> d) & 1u) {
                metas[i].shape[d] = v->meta.shape[d] > 0 ? 2 * v->meta.shape[d] : 1;
                if (n < sizeof dims)
                    n += (size_t)snprintf(dims + n, sizeof dims - n, "%sinput '%s' dim %d", n ? ", " : "",
                                          in_names[i], d);
            }
    }
    oar_program *trial = oar_program_specialize(p, metas, main->n_in);
    free(metas);
    if (!trial) {
        char why[1024];
        snprintf(why, sizeof why, "%s", oar_last_error());
        return oar_error(OAR_ERR_UNSUPPORTED, "jit_save: the input spec declares %s dynamic (-1), but the program "
                                              "cannot run at other sizes: %s; write such sizes as -1 in reshapes "
                                              "(or compute them from the input's shape), or declare the dim fixed",
                         dims, why);
    }
    for (int v = 0; v < p->n_values && v < trial->n_values; v++) p->values[v].dyn_dims |= trial->values[v].dyn_dims;
    oar_program_free(trial);
    return OAR_OK;
}

oar_status oar_jit_save(oar_jit *f, const char *path) {
    if (!f) return oar_error(OAR_ERR_INVALID_ARG, "jit_save: expected a compiled function, got NULL");
    if (!path || !*path)
        return oar_error(OAR_ERR_INVALID_ARG, "jit_save: expected a path (\"dir/model\" for dir/model.json and "
                                              "dir/model.safetensors), got %s", path ? "\"\"" : "NULL");
    const jit_entry *en = f->last;
    if (!en || !en->program)
        return oar_error(OAR_ERR_STATE, "jit_save: the function has no program yet; call it once with oar_jit_call "
                                        "(an example batch) and then save");
    const oar_program *p = en->program;
    if (p->n_grad_writes)
        return oar_error(OAR_ERR_UNSUPPORTED,
                         "jit_save: expected an inference program, got a training step (it computes the gradients "
                         "of %d parameters); export a forward function with the model in eval mode instead",
                         p->n_grad_writes);
    int w = oar_program_state_writer(p);
    if (w >= 0) {
        const oar_node *n = &p->nodes[w];
        const char *what = NULL; /* the state it writes, named when the module named it */
        for (int k = 0; k < n->n_in && k < 32 && !what; k++)
            if (((oar_node_mutated_inputs(n) >> k) & 1u) && n->in[k] >= 0) what = p->values[n->in[k]].name;
        return oar_error(OAR_ERR_UNSUPPORTED,
                         "jit_save: expected an inference program, got one that updates state in place (node %d, "
                         "%s%s%s: an optimizer step, or batch norm in training mode); export a forward function "
                         "with the model in eval mode (oar_module_train(m, false)) instead",
                         w, oar_op_table[n->op]->name, what ? " writing " : "", what ? what : "");
    }
    if (p->device != OAR_CPU) /* the file holds host data: its weights would be read from device memory */
        return oar_error(OAR_ERR_UNSUPPORTED, "jit_save: expected a host program, got one on %s; compile the function "
                                              "on the host (oar_module_to(m, OAR_CPU) and host inputs) and save that",
                         oar_device_name(p->device));
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    if (main->n_in > JIT_MAX_IO || main->n_out > JIT_MAX_IO)
        return oar_error(OAR_ERR_INTERNAL, "jit_save: the program has %d inputs and %d outputs, above %d", main->n_in,
                         main->n_out, JIT_MAX_IO);
    char in_buf[JIT_MAX_IO][64], out_buf[JIT_MAX_IO][64];
    const char *in_names[JIT_MAX_IO + 1], *out_names[JIT_MAX_IO + 1];
    for (int i = 0; i < main->n_in; i++) {
        if (f->input_names[i][0]) snprintf(in_buf[i], sizeof in_buf[i], "%s", f->input_names[i]);
        else snprintf(in_buf[i], sizeof in_buf[i], "input%d", i);
        in_names[i] = in_buf[i];
    }
    for (int k = 0; k < main->n_out; k++) {
        if (f->output_names[k][0]) snprintf(out_buf[k], sizeof out_buf[k], "%s", f->output_names[k]);
        else snprintf(out_buf[k], sizeof out_buf[k], "output%d", k);
        out_names[k] = out_buf[k];
    }
    /* dims declared dynamic stay dynamic in the file: reshapes get their -1 back, and a trial at
     * other sizes checks that they can vary and marks the values that vary with them */
    oar_program *copy = NULL;
    bool dynamic = false;
    for (int i = 0; i < p->blocks[OAR_MAIN_BLOCK].n_in; i++) dynamic |= p->values[p->blocks[OAR_MAIN_BLOCK].in[i]].dyn_dims != 0;
    if (dynamic) {
        if (!(copy = oar_program_copy(p))) return oar_last_status();
        oar_program_generalize_reshapes(copy);
        oar_status st = mark_dynamic(copy, in_names);
        if (st != OAR_OK) {
            oar_program_free(copy);
            return st;
        }
    }
    oar_status st = oar_program_save(copy ? copy : p, path, in_names, out_names);
    if (st != OAR_OK) oar_error_prefix("jit_save");
    oar_program_free(copy);
    return st;
}
