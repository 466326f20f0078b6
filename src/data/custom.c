/* Datasets computed by the caller's function (oar_dataset_custom). The function's message,
 * or failing that the thread's oar error, becomes the status message. */
#include "data/data.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct custom_dataset {
    oar_dataset base;
    oar_dataset_fns fns;
} custom_dataset;

static oar_status custom_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const custom_dataset *s = (const custom_dataset *)d;
    char msg[512] = "";
    oar_clear_error();
    oar_status st = s->fns.get(s->fns.user, i, input, target, msg, sizeof msg);
    if (st == OAR_OK) return OAR_OK;
    msg[sizeof msg - 1] = '\0';
    const char *why = msg[0] ? msg : oar_last_error()[0] ? oar_last_error() : oar_status_name(st);
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", why); /* why may point at the error slot itself */
    return oar_error(st, "dataset: sample %lld: %s", (long long)i, copy);
}

static void custom_destroy(oar_dataset *d) {
    custom_dataset *s = (custom_dataset *)d;
    if (s->fns.free_user) s->fns.free_user(s->fns.user);
    free(s);
}

static const oar_dataset_vt custom_vt = {custom_copy, custom_destroy};

oar_dataset *oar_dataset_custom(const oar_dataset_fns *fns) {
    if (!fns || !fns->get) {
        oar_error(OAR_ERR_INVALID_ARG, "dataset_custom: expected a spec with a get function, got NULL");
        return NULL;
    }
    if (fns->size < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "dataset_custom: expected size >= 0, got %lld", (long long)fns->size);
        return NULL;
    }
    custom_dataset *s = OAR_NEW(custom_dataset);
    if (!s) return NULL;
    s->fns = *fns;
    if (oar_dataset_init(&s->base, &custom_vt, fns->size, fns->input_dtype, fns->input_shape,
                         fns->input_ndim, fns->target_dtype, fns->target_shape, fns->target_ndim) != OAR_OK) {
        free(s); /* the user's data stays with the caller when creation fails */
        return NULL;
    }
    return &s->base;
}
