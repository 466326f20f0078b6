/* Small helpers for building zoo models: children kept in the module's state for fast,
 * name-free access in forward. */
#ifndef OAR_ZOO_UTIL_H
#define OAR_ZOO_UTIL_H

#include "oar.h"

#include <stdlib.h>

#define ZOO_MAX_KIDS 48

typedef struct zoo_kids {
    oar_module *k[ZOO_MAX_KIDS]; /* borrowed: the module owns its children */
    int n;
} zoo_kids;

/* Adds child under name and remembers it; a NULL child or a failure clears *ok. */
static inline oar_module *zoo_add(oar_module *m, zoo_kids *s, const char *name, oar_module *child, bool *ok) {
    if (!*ok || !child || s->n == ZOO_MAX_KIDS || oar_module_add_child(m, name, child) != OAR_OK) {
        if (child && *ok) oar_module_free(child);
        *ok = false;
        return NULL;
    }
    s->k[s->n++] = child;
    return child;
}

/* A module with zoo_kids state and the given ops. */
static inline oar_module *zoo_new(const oar_module_ops *ops, zoo_kids **state) {
    *state = calloc(1, sizeof(zoo_kids));
    oar_module *m = *state ? oar_module_new(ops, *state) : NULL;
    if (!m) {
        free(*state);
        oar_set_error(OAR_ERR_OOM, "zoo: out of memory creating a %s", ops->type_name);
    }
    return m;
}

static inline oar_tensor *zoo_run(oar_module *child, oar_tensor *x) { return oar_forward(child, x); }

/* Ends a forward written inside a scope: keeps y for the caller and reports its status. */
static inline oar_status zoo_finish(oar_tensor **out, oar_tensor *y) {
    out[0] = oar_keep(y);
    oar_scope_end();
    return y ? OAR_OK : (oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_INTERNAL);
}

#endif
