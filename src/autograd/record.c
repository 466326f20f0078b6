/* Recording: after an op ran with grad mode on and some input requiring grad, a node keeps
 * what the gradient rule needs and the outputs point back at it. */
#include "autograd/autograd.h"

#include <stdlib.h>
#include <string.h>

static _Thread_local bool tl_no_grad; /* inverted so the zero-initialised default is "on" */
static uint64_t g_seq;

bool oar_grad_enabled(void) { return !tl_no_grad; }
bool oar_set_grad_enabled(bool enabled) {
    bool prev = !tl_no_grad;
    tl_no_grad = !enabled;
    return prev;
}
static _Thread_local int tl_no_grad_depth;
static _Thread_local bool tl_no_grad_saved[64];
void oar_no_grad_begin(void) {
    bool prev = oar_set_grad_enabled(false);
    if (tl_no_grad_depth < 64) tl_no_grad_saved[tl_no_grad_depth] = prev;
    tl_no_grad_depth++;
}
void oar_no_grad_end(void) {
    if (tl_no_grad_depth == 0) return;
    tl_no_grad_depth--;
    oar_set_grad_enabled(tl_no_grad_depth < 64 ? tl_no_grad_saved[tl_no_grad_depth] : false);
}

void oar_node_release_saved(oar_node *n) {
    for (int i = 0; i < n->n_in; i++) {
        oar_tensor_unref(n->saved_in[i]);
        n->saved_in[i] = NULL;
    }
    for (int i = 0; i < n->n_out; i++) {
        oar_tensor_unref(n->saved_out[i]);
        n->saved_out[i] = NULL;
    }
    n->released = true;
}

static void node_destroy(oar_node_header *h) {
    oar_node *n = (oar_node *)h;
    oar_node_release_saved(n);
    for (int i = 0; i < n->n_in; i++) {
        oar_node_header_release(n->edges[i].node ? &n->edges[i].node->h : NULL);
        oar_tensor_unref(n->edges[i].leaf);
    }
    for (int o = 0; o < n->n_out; o++) {
        for (oar_hook_entry *e = n->out_hooks[o]; e;) {
            oar_hook_entry *next = e->next;
            free(e);
            e = next;
        }
    }
    free(n);
}

static bool differentiable_dtype(oar_dtype dt) { return oar_dtypes[dt].is_float; }

oar_status oar_autograd_record(oar_op_id op, oar_tensor *const *in, int n_in,
                               const oar_attr *attrs, oar_tensor *const *out, int n_out) {
    if (tl_no_grad) return OAR_OK;
    const oar_op_def *d = oar_op_table[op];
    /* one block: node, attrs, saved inputs/outputs, versions, metas, edges, hooks */
    size_t sz = sizeof(oar_node) + sizeof(oar_attr) * (size_t)d->n_attrs +
                (sizeof(oar_tensor *) + sizeof(uint32_t) + sizeof(oar_edge)) * (size_t)n_in +
                (sizeof(oar_tensor *) + sizeof(oar_meta) + sizeof(oar_hook_entry *)) * (size_t)n_out + 64;
    oar_node *n = oar_malloc(sz);
    if (!n) return OAR_ERR_OOM;
    char *p = (char *)(n + 1);
#define CARVE(field, T, count) (n->field = (T *)p, p += sizeof(T) * (size_t)(count))
    CARVE(attrs, oar_attr, d->n_attrs);
    CARVE(edges, oar_edge, n_in);
    CARVE(out_meta, oar_meta, n_out);
    CARVE(saved_in, oar_tensor *, n_in);
    CARVE(saved_out, oar_tensor *, n_out);
    CARVE(out_hooks, oar_hook_entry *, n_out);
    CARVE(in_version, uint32_t, n_in);
#undef CARVE
    n->h.destroy = node_destroy;
    n->op = op;
    n->n_in = n_in;
    n->n_out = n_out;
    n->n_attrs = d->n_attrs;
    if (d->n_attrs) memcpy(n->attrs, attrs, sizeof(oar_attr) * (size_t)d->n_attrs);
    n->seq = __atomic_add_fetch(&g_seq, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < n_in; i++) {
        oar_tensor *x = in[i];
        if (!x) continue;
        if (!(i < 32 && (d->unsaved_inputs >> i) & 1u)) {
            n->saved_in[i] = oar_retain(x);
            n->in_version[i] = x->storage ? x->storage->version : 0; /* symbolic: never written */
        }
        if (!x->requires_grad) continue;
        if (x->grad_fn) {
            n->edges[i].node = (oar_node *)x->grad_fn;
            n->edges[i].output_nr = x->output_nr;
            oar_node_header_retain(x->grad_fn);
        } else {
            n->edges[i].leaf = oar_retain(x);
        }
    }
    for (int o = 0; o < n_out; o++) {
        oar_meta_from(&n->out_meta[o], out[o]);
        /* integer outputs (indices) are kept for the rule too, but never carry gradients */
        n->saved_out[o] = oar_tensor_alias(out[o]);
        if (!n->saved_out[o]) {
            node_destroy(&n->h);
            return OAR_ERR_OOM;
        }
        if (!differentiable_dtype(out[o]->dtype)) continue;
        out[o]->requires_grad = true;
        out[o]->grad_fn = &n->h;
        out[o]->output_nr = o;
        n->h.refcount++;
    }
    if (n->h.refcount == 0) node_destroy(&n->h); /* no differentiable output: nothing to record */
    return OAR_OK;
}

/* ---- public tensor-level autograd API */

oar_status oar_set_requires_grad(oar_tensor *t, bool requires_grad) {
    OAR_CHECK_HANDLE("set_requires_grad", t, oar_last_status());
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "set_requires_grad: tensor is NULL");
    if (t->grad_fn)
        return oar_error(OAR_ERR_STATE, "set_requires_grad: only leaf tensors can change requires_grad; "
                                        "this tensor was computed by an op (use oar_detach first)");
    if (requires_grad && !differentiable_dtype(t->dtype))
        return oar_error(OAR_ERR_DTYPE, "set_requires_grad: expected a floating dtype, got %s; only "
                                        "floating tensors can require gradients",
                         oar_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return OAR_OK;
}

bool oar_requires_grad(const oar_tensor *t) {
    OAR_CHECK_HANDLE("requires_grad", t, false);
    return t && t->requires_grad;
}
bool oar_is_leaf(const oar_tensor *t) {
    OAR_CHECK_HANDLE("is_leaf", t, false);
    return t && !t->grad_fn;
}
oar_tensor *oar_grad_get(oar_tensor *t) {
    OAR_CHECK_HANDLE("grad_get", t, NULL);
    return t ? t->grad : NULL;
}

void oar_zero_grad(oar_tensor *t) {
    OAR_CHECK_HANDLE("zero_grad", t, );
    if (!t) return;
    oar_tensor_unref(t->grad);
    t->grad = NULL;
    if (oar_active_trace) t->grad_cleared_in = oar_active_trace; /* the compiled step clears it too */
}

oar_tensor *oar_detach(oar_tensor *t) {
    OAR_CHECK_HANDLE("detach", t, NULL);
    if (!t) return NULL;
    oar_tensor *a = oar_tensor_alias(t);
    return oar_track(a);
}

static int g_hook_handle;

int oar_register_hook(oar_tensor *t, oar_grad_hook hook, void *user) {
    OAR_CHECK_HANDLE("register_hook", t, -1);
    if (!t || !hook) {
        oar_error(OAR_ERR_INVALID_ARG, "register_hook: expected a tensor and a hook, got NULL");
        return -1;
    }
    if (!t->requires_grad) {
        oar_error(OAR_ERR_STATE, "register_hook: the tensor does not require grad, so no gradient "
                                 "will reach the hook; call oar_set_requires_grad first");
        return -1;
    }
    oar_hook_entry *e = OAR_NEW(oar_hook_entry);
    if (!e) return -1;
    e->fn = hook;
    e->user = user;
    e->handle = __atomic_add_fetch(&g_hook_handle, 1, __ATOMIC_RELAXED);
    oar_hook_entry **list = t->grad_fn ? &((oar_node *)t->grad_fn)->out_hooks[t->output_nr] : &t->hooks;
    while (*list) list = &(*list)->next; /* hooks run in registration order */
    *list = e;
    return e->handle;
}

oar_status oar_remove_hook(oar_tensor *t, int handle) {
    OAR_CHECK_HANDLE("remove_hook", t, oar_last_status());
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "remove_hook: tensor is NULL");
    oar_hook_entry **list = t->grad_fn ? &((oar_node *)t->grad_fn)->out_hooks[t->output_nr] : &t->hooks;
    for (; *list; list = &(*list)->next) {
        if ((*list)->handle == handle) {
            oar_hook_entry *e = *list;
            *list = e->next;
            free(e);
            return OAR_OK;
        }
    }
    return oar_error(OAR_ERR_INVALID_ARG, "remove_hook: no hook with handle %d on this tensor", handle);
}
