/* Saving a checkpoint: the module's parameters and buffers, the optimizer's state, and the
 * counters a resumed run needs (step, generator, optimizer step count) as metadata, in one
 * safetensors file written atomically. */
#include "io/checkpoint.h"
#include "optim/optim.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define N_META 9

oar_status oar_checkpoint_save_all(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *sched,
                                   int64_t step) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "checkpoint_save: expected a module, got NULL");
    char *sched_vals[OAR_CKPT_N_SCHED] = {0};
    int np = oar_module_num_parameters(m), nb = oar_module_num_buffers(m), ns = o ? oar_optimizer_num_state(o) : 0;
    int n = np + nb + ns;
    char **names = calloc((size_t)(n ? n : 1), sizeof(char *));
    oar_tensor **tensors = calloc((size_t)(n ? n : 1), sizeof(oar_tensor *));
    oar_status st = names && tensors ? OAR_OK : oar_error(OAR_ERR_OOM, "checkpoint_save: out of memory");
    int k = 0; /* entries written so far */
    for (int i = 0; i < n && st == OAR_OK; i++) {
        const char *name = NULL;
        const char *prefix = i < np + nb ? "model." : "optim.";
        /* state as before a parameter's first update (e.g. after rewinding) is saved as none,
         * so the file says what a fresh optimizer would: SGD's unfilled buffer is not a filled one */
        if (i >= np + nb && oar_optim_state_is_empty(o, o->state_index[i - np - nb] / OAR_SLOT_COUNT)) continue;
        tensors[k] = i < np ? oar_module_parameter(m, i, &name)
                   : i < np + nb ? oar_module_buffer(m, i - np, &name) : oar_optimizer_state(o, i - np - nb, &name);
        if (!tensors[k] || !name) {
            st = oar_error(OAR_ERR_INTERNAL, "checkpoint_save: tensor %d of the module/optimizer is missing", i);
            break;
        }
        size_t len = strlen(prefix) + strlen(name) + 1;
        names[k] = malloc(len);
        if (!names[k]) {
            st = oar_error(OAR_ERR_OOM, "checkpoint_save: out of memory");
            break;
        }
        snprintf(names[k++], len, "%s%s", prefix, name);
    }
    if (st == OAR_OK) {
        oar_rng_state rng = oar_rng_get_state();
        char v_step[24], v_seed[24], v_off[24], v_osteps[24], v_oparams[24];
        snprintf(v_step, sizeof v_step, "%" PRId64, step);
        snprintf(v_seed, sizeof v_seed, "%" PRIu64, rng.seed);
        snprintf(v_off, sizeof v_off, "%" PRIu64, rng.offset);
        snprintf(v_osteps, sizeof v_osteps, "%" PRId64, o ? oar_optimizer_steps(o) : 0);
        snprintf(v_oparams, sizeof v_oparams, "%d", o ? o->n_params : 0);
        const char *keys[N_META + OAR_CKPT_N_SCHED] = {OAR_CKPT_K_FORMAT, OAR_CKPT_K_VERSION, OAR_CKPT_K_OAR,
                                                       OAR_CKPT_K_STEP, OAR_CKPT_K_SEED, OAR_CKPT_K_OFFSET,
                                                       OAR_CKPT_K_OPTIM, OAR_CKPT_K_OSTEPS, OAR_CKPT_K_OPARAMS};
        const char *vals[N_META + OAR_CKPT_N_SCHED] = {OAR_CKPT_FORMAT, OAR_CKPT_VERSION, oar_version(), v_step,
                                                       v_seed, v_off, o ? oar_ckpt_optim_name(o->kind) : NULL,
                                                       v_osteps, v_oparams};
        int n_meta = o ? N_META : N_META - 3;
        if (sched) {
            st = oar_ckpt_sched_meta(sched, sched_vals);
            for (int i = 0; i < OAR_CKPT_N_SCHED; i++) {
                keys[n_meta] = oar_ckpt_sched_keys[i];
                vals[n_meta++] = sched_vals[i];
            }
        }
        if (st == OAR_OK)
            st = oar_safetensors_save(path, (const char *const *)names, tensors, k, keys, vals, n_meta);
        if (st != OAR_OK) oar_error_prefix("checkpoint_save");
    }
    for (int i = 0; i < OAR_CKPT_N_SCHED; i++) free(sched_vals[i]);
    for (int i = 0; i < n && names; i++) free(names[i]);
    free(names);
    free(tensors);
    return st;
}

oar_status oar_checkpoint_save(const char *path, oar_module *m, oar_optimizer *o, int64_t step) {
    return oar_checkpoint_save_all(path, m, o, NULL, step);
}
