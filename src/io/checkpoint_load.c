/* Loading a checkpoint: read and validate the file, check it against the module and the
 * optimizer (collecting every problem), and only when nothing is wrong copy the values into
 * the existing tensors, restore the optimizer's state and step count and the generator. */
#include "io/checkpoint.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>

/* Copies src into the module's tensor in place: the optimizer and any user keep pointing at
 * the same tensor object. */
static void copy_into(oar_tensor *dst, const oar_tensor *src) {
    oar_tensor_copy_strided(dst, src);
    dst->storage->version++;
}

static oar_status apply(oar_tensor_dict *d, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                        const oar_ckpt_meta *meta) {
    if (o) {
        /* parameters without state in the file go back to no state (the file was saved before
         * their first update); the others are overwritten below */
        for (int i = 0; i < o->n_params; i++) {
            char key[64];
            snprintf(key, sizeof key, "optim.%d.%s", i, oar_slot_names[OAR_SLOT_STEP]);
            bool in_file = oar_dict_get(d, key) != NULL;
            for (int s = 1; s < OAR_SLOT_COUNT && !in_file; s++) {
                snprintf(key, sizeof key, "optim.%d.%s", i, oar_slot_names[s]);
                in_file = oar_dict_get(d, key) != NULL;
            }
            if (!in_file) oar_optim_reset_state(o, i);
        }
        for (int i = 0; i < d->n; i++) {
            if (strncmp(d->names[i], "optim.", 6) != 0) continue;
            oar_status st = oar_optimizer_load_state(o, d->names[i] + 6, d->tensors[i]);
            if (st != OAR_OK) {
                oar_error_prefix("checkpoint_load: restoring %.200s failed after the checks passed", d->names[i]);
                return st;
            }
        }
        oar_status st = oar_optimizer_set_steps(o, meta->optim_steps);
        if (st != OAR_OK) return st;
    }
    char key[600];
    for (int i = 0, np = oar_module_num_parameters(m), nb = oar_module_num_buffers(m); i < np + nb; i++) {
        const char *name;
        oar_tensor *t = i < np ? oar_module_parameter(m, i, &name) : oar_module_buffer(m, i - np, &name);
        snprintf(key, sizeof key, "model.%s", name);
        copy_into(t, oar_dict_get(d, key));
    }
    if (s && meta->has_sched) oar_ckpt_sched_apply(s, meta);
    oar_rng_set_state(meta->rng);
    return OAR_OK;
}

oar_status oar_checkpoint_load_all(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                   int64_t *step) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "checkpoint_load: expected a module, got NULL");
    oar_tensor_dict *d = oar_safetensors_load(path);
    if (!d) {
        oar_error_prefix("checkpoint_load");
        return oar_last_status();
    }
    oar_ckpt_meta meta;
    oar_ckpt_problems problems = {0};
    oar_status st = oar_ckpt_check(d, m, o, s, &meta, &problems);
    if (st == OAR_OK && (problems.n || problems.oom)) st = oar_ckpt_problems_report(&problems, path);
    if (st == OAR_OK) st = apply(d, m, o, s, &meta);
    if (st == OAR_OK && step) *step = meta.step;
    free(meta.sched_base);
    oar_ckpt_problems_free(&problems);
    oar_dict_free(d);
    return st;
}

oar_status oar_checkpoint_load(const char *path, oar_module *m, oar_optimizer *o, int64_t *step) {
    return oar_checkpoint_load_all(path, m, o, NULL, step);
}
