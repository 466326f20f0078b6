/* Internal view of modules, for the built-in layers. */
#ifndef OAR_MODULE_H
#define OAR_MODULE_H

#include "ops/op.h"

typedef struct oar_named {
    char *name;
    oar_tensor *tensor;
} oar_named;

typedef struct oar_named_child {
    char *name;
    oar_module *module;
} oar_named_child;

/* The state source comes first: the compiler reads opts.module as its source (graph/jit.c). */
struct oar_module {
    oar_state_source source;
    const oar_module_ops *ops;
    void *state;
    bool training;
    oar_named *params, *buffers;
    int n_params, n_buffers, cap_params, cap_buffers;
    oar_named_child *children;
    int n_children, cap_children;
    /* flattened views of the whole tree, rebuilt when the structure changes */
    oar_named *flat_params, *flat_buffers;
    int n_flat_params, n_flat_buffers;
    bool flat_valid;
    oar_module *parent;
};

/* Borrowed direct parameter/buffer by local name (no dots), for layers' forward functions. */
oar_tensor *oar_module_local(oar_module *m, const char *name);
/* Removes a direct parameter or buffer (rewriting a layer in place, e.g. quantization). */
oar_status oar_module_remove_local(oar_module *m, const char *name);

#endif
