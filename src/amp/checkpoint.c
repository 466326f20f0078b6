/* Checkpoints of mixed-precision runs. With O2 masters the module is saved with its f32 masters
 * in place of the low parameters (swapped in for the save), so the file is an ordinary f32
 * checkpoint and a load restores the masters exactly, then rounds them into the parameters.
 * The scaler's state goes to a small safetensors file beside it (<path>.scaler). */
#include "amp/amp.h"

#include <stdio.h>

static void scaler_path(const char *path, char *buf, size_t size) { snprintf(buf, size, "%s.scaler", path); }

oar_status oar_amp_checkpoint_save(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                   oar_amp_masters *w, oar_grad_scaler *sc, int64_t step) {
    if (!path || !m) return oar_error(OAR_ERR_INVALID_ARG, "oar_amp_checkpoint_save: expected a path and a module, got NULL");
    oar_status st = oar_amp_masters_swap(w, m, true);
    if (st == OAR_OK) st = oar_checkpoint_save_all(path, m, o, s, step);
    oar_status back = oar_amp_masters_swap(w, m, false);
    if (st == OAR_OK) st = back;
    if (st != OAR_OK || !sc) return st;
    const char *names[8];
    oar_tensor *tensors[8];
    int k = oar_grad_scaler_num_state(sc);
    for (int i = 0; i < k && i < 8; i++) tensors[i] = oar_grad_scaler_state(sc, i, &names[i]);
    char sp[1024];
    scaler_path(path, sp, sizeof sp);
    return oar_safetensors_save(sp, names, tensors, k, NULL, NULL, 0);
}

oar_status oar_amp_checkpoint_load(const char *path, oar_module *m, oar_optimizer *o, oar_scheduler *s,
                                   oar_amp_masters *w, oar_grad_scaler *sc, int64_t *step) {
    if (!path || !m) return oar_error(OAR_ERR_INVALID_ARG, "oar_amp_checkpoint_load: expected a path and a module, got NULL");
    oar_tensor_dict *d = NULL;
    if (sc) { /* read the scaler's file first: nothing changes when it is missing */
        char sp[1024];
        scaler_path(path, sp, sizeof sp);
        if (!(d = oar_safetensors_load(sp))) {
            char why[512];
            snprintf(why, sizeof why, "%s", oar_last_error());
            return oar_error(oar_last_status(), "oar_amp_checkpoint_load: expected the loss scaler's state in %s "
                                                "(written by oar_amp_checkpoint_save with a scaler): %s", sp, why);
        }
    }
    oar_status st = oar_amp_masters_swap(w, m, true);
    if (st == OAR_OK) st = oar_checkpoint_load_all(path, m, o, s, step);
    oar_status back = oar_amp_masters_swap(w, m, false);
    if (st == OAR_OK) st = back;
    if (st == OAR_OK && w) st = oar_amp_masters_sync_params(w);
    for (int i = 0; st == OAR_OK && d && i < oar_dict_size(d); i++) {
        const char *name;
        oar_tensor *t = oar_dict_at(d, i, &name);
        st = oar_grad_scaler_load_state(sc, name, t);
    }
    oar_dict_free(d);
    return st;
}
