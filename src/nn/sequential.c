/* Sequential: children "0", "1", ... run in order, each output feeding the next. The
 * container owns its children from the moment they are handed over, even when building it
 * fails, so oar_nn_sequential((oar_module *[]){oar_nn_linear(...), ...}, n) never leaks. */
#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>

static oar_status seq_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    oar_tensor *h = in[0];
    bool own = false; /* h is an intermediate made by a child, ours to release */
    for (int i = 0; i < m->n_children; i++) {
        oar_tensor *y = oar_forward(m->children[i].module, h);
        if (own) oar_release(h);
        if (!y) {
            oar_error_prefix("Sequential (%s)", m->children[i].name);
            return oar_last_status();
        }
        h = y;
        own = true;
    }
    out[0] = own ? h : oar_layer_identity(h); /* empty: the input, as a new handle */
    return out[0] ? OAR_OK : oar_last_status();
}

static const oar_module_ops seq_ops = {"Sequential", seq_forward, NULL, NULL};

/* Frees a child that was handed over but could not be attached; one that already belongs to
 * another module stays with its owner. */
static void drop_child(oar_module *child) {
    if (child && !child->parent) oar_module_free(child);
}

static oar_status append(oar_module *seq, oar_module *child) {
    if (!child) {
        if (oar_last_status() != OAR_OK) return oar_last_status(); /* the child's constructor failed */
        return oar_error(OAR_ERR_INVALID_ARG, "Sequential: expected a module, got NULL");
    }
    if (child == seq || child->parent) {
        return oar_error(OAR_ERR_INVALID_ARG, "Sequential: expected a module that belongs to no other module, got a "
                                              "%s that %s; create a new one", oar_module_type(child),
                         child == seq ? "is this Sequential itself" : "already has a parent");
    }
    char name[24];
    snprintf(name, sizeof name, "%d", seq->n_children);
    return oar_module_add_child(seq, name, child);
}

oar_module *oar_nn_sequential(oar_module *const *children, int n) {
    if (n < 0 || (n > 0 && !children)) {
        oar_error(OAR_ERR_INVALID_ARG, "Sequential: expected n >= 0 children in an array, got n = %d%s", n,
                  children ? "" : " and children NULL");
        return NULL;
    }
    oar_module *seq = oar_module_new(&seq_ops, NULL);
    oar_status st = seq ? OAR_OK : oar_last_status();
    int i = 0;
    for (; st == OAR_OK && i < n; i++)
        if ((st = append(seq, children[i])) != OAR_OK) break;
    if (st == OAR_OK) return seq;
    /* the failed child and the rest were handed over too (each freed once, even if listed twice) */
    for (int j = i; j < n; j++) {
        bool seen = false;
        for (int k = i; k < j; k++) seen = seen || children[k] == children[j];
        if (!seen) drop_child(children[j]);
    }
    oar_module_free(seq); /* and with it the children attached so far */
    return NULL;
}

oar_status oar_nn_sequential_append(oar_module *seq, oar_module *child) {
    if (!seq || seq->ops != &seq_ops) {
        oar_status st = oar_error(OAR_ERR_INVALID_ARG, "Sequential: expected a Sequential to append to, got %s",
                                  seq ? oar_module_type(seq) : "NULL");
        if (child != seq) drop_child(child);
        return st;
    }
    oar_status st = append(seq, child);
    if (st != OAR_OK) drop_child(child);
    return st;
}
