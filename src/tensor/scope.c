/* Scopes: a per-thread stack of tensor lists. Tensors handed to the user inside a scope are
 * recorded in it and released together at oar_scope_end(), so a training step written in C
 * does not need one oar_release() per temporary. */
#include "tensor/tensor.h"

#include <stdlib.h>

typedef struct oar_scope {
    oar_tensor **items;
    int64_t n, cap;
    struct oar_scope *parent;
} oar_scope;

static _Thread_local oar_scope *tl_top;
static _Thread_local int64_t tl_unallocated; /* scopes begun without memory for them */

void oar_scope_begin(void) {
    oar_scope *s = tl_unallocated ? NULL : OAR_NEW(oar_scope);
    if (!s) {
        /* out of memory: tensors stay with the enclosing scope (or the caller); the matching
         * end must then close nothing, so count it */
        tl_unallocated++;
        return;
    }
    s->parent = tl_top;
    tl_top = s;
}

static bool scope_add(oar_scope *s, oar_tensor *t) {
    if (s->n == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 64;
        oar_tensor **items = oar_realloc(s->items, sizeof(*items) * (size_t)cap);
        if (!items) return false;
        s->items = items;
        s->cap = cap;
    }
    t->scope = s;
    t->scope_slot = s->n;
    s->items[s->n++] = t;
    return true;
}

oar_tensor *oar_track(oar_tensor *t) {
    if (t && tl_top && !t->scope) scope_add(tl_top, t);
    return t;
}

void oar_scope_forget(oar_tensor *t) {
    oar_scope *s = t->scope;
    if (!s) return;
    s->items[t->scope_slot] = NULL;
    t->scope = NULL;
    t->scope_slot = -1;
}

void oar_scope_end(void) {
    if (tl_unallocated) {
        tl_unallocated--;
        return;
    }
    oar_scope *s = tl_top;
    if (!s) return;
    tl_top = s->parent;
    oar_freed_how prev = oar_release_how_begin(OAR_FREED_SCOPE);
    for (int64_t i = 0; i < s->n; i++) {
        oar_tensor *t = s->items[i];
        if (!t) continue;
        t->scope = NULL;
        t->scope_slot = -1;
        oar_tensor_unref(t);
    }
    oar_release_how_end(prev);
    free(s->items);
    free(s);
}

oar_tensor *oar_keep(oar_tensor *t) {
    OAR_CHECK_HANDLE("keep", t, NULL);
    if (!t || !t->scope) return t;
    oar_scope *parent = t->scope->parent;
    oar_scope_forget(t);
    if (parent) scope_add(parent, t);
    return t;
}
