/* Modules: a tree of named parameters, buffers and children with a forward function. */
#include "nn/module.h"
#include "base/device.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(offsetof(oar_module, source) == 0, "graph/jit.c reads a module as its state source");

/* The module's state source: its parameters, then its buffers, with their dotted names. */
static int source_count(void *owner) {
    oar_module *m = owner;
    return oar_module_num_parameters(m) + oar_module_num_buffers(m);
}

static oar_tensor *source_tensor(void *owner, int i, const char **name) {
    oar_module *m = owner;
    int np = oar_module_num_parameters(m);
    return i < np ? oar_module_parameter(m, i, name) : oar_module_buffer(m, i - np, name);
}

const oar_state_source *oar_module_state_source(oar_module *m) { return m ? &m->source : NULL; }

oar_module *oar_module_new(const oar_module_ops *ops, void *state) {
    if (!ops || !ops->forward) {
        oar_error(OAR_ERR_INVALID_ARG, "module_new: expected ops with a forward function, got %s",
                  ops ? "forward = NULL" : "NULL");
        return NULL;
    }
    oar_module *m = OAR_NEW(oar_module);
    if (!m) return NULL;
    m->source = (oar_state_source){.owner = m, .count = source_count, .tensor = source_tensor};
    m->ops = ops;
    m->state = state;
    m->training = true;
    return m;
}

/* const in, mutable out (like strchr): describe callbacks get a const module and need the state. */
void *oar_module_state(const oar_module *m) { return m ? m->state : NULL; }
const char *oar_module_type(const oar_module *m) { return m && m->ops->type_name ? m->ops->type_name : "Module"; }

static void invalidate(oar_module *m) {
    for (; m; m = m->parent) m->flat_valid = false;
}

static void free_flat(oar_module *m) {
    for (int i = 0; i < m->n_flat_params; i++) free(m->flat_params[i].name);
    for (int i = 0; i < m->n_flat_buffers; i++) free(m->flat_buffers[i].name);
    free(m->flat_params);
    free(m->flat_buffers);
    m->flat_params = m->flat_buffers = NULL;
    m->n_flat_params = m->n_flat_buffers = 0;
}

void oar_module_free(oar_module *m) {
    if (!m) return;
    for (int i = 0; i < m->n_params; i++) {
        free(m->params[i].name);
        oar_tensor_unref(m->params[i].tensor);
    }
    for (int i = 0; i < m->n_buffers; i++) {
        free(m->buffers[i].name);
        oar_tensor_unref(m->buffers[i].tensor);
    }
    for (int i = 0; i < m->n_children; i++) {
        free(m->children[i].name);
        oar_module_free(m->children[i].module);
    }
    free_flat(m);
    free(m->params);
    free(m->buffers);
    free(m->children);
    if (m->ops->destroy) m->ops->destroy(m->state);
    free(m);
}

static oar_status check_name(const char *who, oar_module *m, const char *name) {
    if (!m || !name || !*name || strchr(name, '.'))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a module and a non-empty name without dots, got %s%s%s",
                         who, m ? "" : "module NULL, ", name ? "name \"" : "name NULL", name ? name : "");
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) goto taken;
    for (int i = 0; i < m->n_buffers; i++)
        if (!strcmp(m->buffers[i].name, name)) goto taken;
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name)) goto taken;
    return OAR_OK;
taken:
    return oar_error(OAR_ERR_INVALID_ARG, "%s: the name '%s' is already used in this %s", who, name, oar_module_type(m));
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = oar_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static oar_status add_named(oar_named **list, int *n, int *cap, const char *name, oar_tensor *t) {
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 4;
        oar_named *l = oar_realloc(*list, sizeof(**list) * (size_t)c);
        if (!l) return OAR_ERR_OOM;
        *list = l;
        *cap = c;
    }
    char *d = dup_str(name);
    if (!d) return OAR_ERR_OOM;
    (*list)[(*n)++] = (oar_named){d, oar_retain(t)};
    return OAR_OK;
}

oar_status oar_module_add_parameter(oar_module *m, const char *name, oar_tensor *t) {
    OAR_CHECK_HANDLE("module_add_parameter", t, oar_last_status());
    oar_status st = check_name("module_add_parameter", m, name);
    if (st != OAR_OK) return st;
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "module_add_parameter: tensor for '%s' is NULL", name);
    if (t->grad_fn)
        return oar_error(OAR_ERR_INVALID_ARG, "module_add_parameter: '%s' must be a leaf tensor; it was "
                                              "computed by an op (use oar_detach)", name);
    if ((st = oar_set_requires_grad(t, true)) != OAR_OK) return st;
    st = add_named(&m->params, &m->n_params, &m->cap_params, name, t);
    invalidate(m);
    return st;
}

oar_status oar_module_add_buffer(oar_module *m, const char *name, oar_tensor *t) {
    OAR_CHECK_HANDLE("module_add_buffer", t, oar_last_status());
    oar_status st = check_name("module_add_buffer", m, name);
    if (st != OAR_OK) return st;
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "module_add_buffer: tensor for '%s' is NULL", name);
    st = add_named(&m->buffers, &m->n_buffers, &m->cap_buffers, name, t);
    invalidate(m);
    return st;
}

/* Removes m's own parameter or buffer name (no dots): for passes that rewrite a layer in place,
 * such as quantization replacing an f32 weight parameter by an i8 buffer. */
oar_status oar_module_remove_local(oar_module *m, const char *name) {
    oar_named *lists[2] = {m->params, m->buffers};
    int *counts[2] = {&m->n_params, &m->n_buffers};
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < *counts[l]; i++)
            if (!strcmp(lists[l][i].name, name)) {
                free(lists[l][i].name);
                oar_tensor_unref(lists[l][i].tensor);
                memmove(&lists[l][i], &lists[l][i + 1], sizeof(oar_named) * (size_t)(*counts[l] - i - 1));
                (*counts[l])--;
                invalidate(m);
                return OAR_OK;
            }
    return oar_error(OAR_ERR_INVALID_ARG, "module_remove_local: %s has no parameter or buffer '%s'", oar_module_type(m),
                     name);
}

oar_status oar_module_add_child(oar_module *m, const char *name, oar_module *child) {
    oar_status st = check_name("module_add_child", m, name);
    if (st != OAR_OK) return st;
    if (!child) return oar_error(OAR_ERR_INVALID_ARG, "module_add_child: child '%s' is NULL", name);
    if (child->parent)
        return oar_error(OAR_ERR_INVALID_ARG, "module_add_child: '%s' already belongs to another module", name);
    if (m->n_children == m->cap_children) {
        int c = m->cap_children ? m->cap_children * 2 : 4;
        oar_named_child *l = oar_realloc(m->children, sizeof(*l) * (size_t)c);
        if (!l) return OAR_ERR_OOM;
        m->children = l;
        m->cap_children = c;
    }
    char *d = dup_str(name);
    if (!d) return OAR_ERR_OOM;
    m->children[m->n_children++] = (oar_named_child){d, child};
    child->parent = m;
    child->training = m->training;
    invalidate(m);
    return OAR_OK;
}

oar_tensor *oar_module_local(oar_module *m, const char *name) {
    for (int i = 0; i < m->n_params; i++)
        if (!strcmp(m->params[i].name, name)) return m->params[i].tensor;
    for (int i = 0; i < m->n_buffers; i++)
        if (!strcmp(m->buffers[i].name, name)) return m->buffers[i].tensor;
    return NULL;
}

/* Walks "a.b.c": returns the module holding the last component and sets *leaf to it. */
static oar_module *resolve(oar_module *m, const char *path, const char **leaf) {
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        if (!dot) {
            *leaf = p;
            return m;
        }
        size_t len = (size_t)(dot - p);
        oar_module *next = NULL;
        for (int i = 0; i < m->n_children; i++)
            if (strlen(m->children[i].name) == len && !strncmp(m->children[i].name, p, len)) next = m->children[i].module;
        if (!next) return NULL;
        m = next;
        p = dot + 1;
    }
}

static oar_named *find_named(oar_module *m, const char *path) {
    const char *leaf;
    oar_module *owner = m && path ? resolve(m, path, &leaf) : NULL;
    if (!owner) return NULL;
    for (int i = 0; i < owner->n_params; i++)
        if (!strcmp(owner->params[i].name, leaf)) return &owner->params[i];
    for (int i = 0; i < owner->n_buffers; i++)
        if (!strcmp(owner->buffers[i].name, leaf)) return &owner->buffers[i];
    return NULL;
}

oar_tensor *oar_module_get(oar_module *m, const char *path) {
    oar_named *n = find_named(m, path);
    if (!n) {
        oar_error(OAR_ERR_INVALID_ARG, "module_get: no parameter or buffer named '%s' in this %s",
                  path ? path : "(null)", oar_module_type(m));
        return NULL;
    }
    return n->tensor;
}

oar_module *oar_module_child(oar_module *m, const char *path) {
    if (!m || !path) return NULL;
    char buf[512];
    snprintf(buf, sizeof buf, "%s.", path); /* resolve walks every component as a child */
    const char *leaf;
    oar_module *c = resolve(m, buf, &leaf);
    if (!c) oar_error(OAR_ERR_INVALID_ARG, "module_child: no child module named '%s' in this %s", path, oar_module_type(m));
    return c;
}

oar_status oar_module_set(oar_module *m, const char *path, oar_tensor *t) {
    OAR_CHECK_HANDLE("module_set", t, oar_last_status());
    oar_named *n = find_named(m, path);
    if (!n)
        return oar_error(OAR_ERR_INVALID_ARG, "module_set: no parameter or buffer named '%s' in this %s",
                         path ? path : "(null)", oar_module_type(m));
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "module_set: tensor for '%s' is NULL", path);
    bool param = n->tensor->requires_grad;
    oar_retain(t);
    oar_tensor_unref(n->tensor);
    n->tensor = t;
    if (param && !t->requires_grad) oar_set_requires_grad(t, true);
    invalidate(m);
    return OAR_OK;
}

/* ---- forward */
oar_status oar_forward_n(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (n_in > 0 && oar_check_handles("forward", "input", in, n_in) != OAR_OK) return oar_last_status();
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "forward: module is NULL");
    for (int i = 0; i < n_out; i++) out[i] = NULL;
    /* The forward runs in a scope of its own: its temporaries go when it returns, whether or
     * not its author opened a scope (a forward called outside any scope would leak them). */
    int64_t scope = oar_scope_enter();
    oar_status st = m->ops->forward(m, in, n_in, out, n_out);
    if (st != OAR_OK) {
        for (int i = 0; i < n_out; i++) {
            oar_release(out[i]);
            out[i] = NULL;
        }
        oar_scope_leave(scope, NULL, 0);
        if (oar_last_status() == OAR_OK) oar_error(st, "%s: forward failed", oar_module_type(m));
        return st;
    }
    oar_scope_leave(scope, out, n_out);
    for (int i = 0; i < n_out; i++) /* freed inside (the forward ended oar's scope): not the caller's */
        if (!OAR_HANDLE_OK(out[i])) {
            oar_handle_error(oar_module_type(m), "forward output", i, out[i]);
            for (int j = 0; j < n_out; j++) {
                if (OAR_HANDLE_OK(out[j])) oar_release(out[j]);
                out[j] = NULL;
            }
            return OAR_ERR_STATE;
        }
    for (int i = 0; i < n_out; i++) oar_track(out[i]);
    return OAR_OK;
}

oar_tensor *oar_forward(oar_module *m, oar_tensor *x) {
    oar_tensor *y = NULL;
    return oar_forward_n(m, &x, 1, &y, 1) == OAR_OK ? y : NULL;
}

/* ---- flattened parameter lists */
static oar_status flatten_into(oar_module *m, const char *prefix, oar_module *root) {
    char name[512];
    for (int i = 0; i < m->n_params; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, m->params[i].name);
        int cap = root->n_flat_params;
        oar_named *l = oar_realloc(root->flat_params, sizeof(*l) * (size_t)(cap + 1));
        if (!l) return OAR_ERR_OOM;
        root->flat_params = l;
        l[root->n_flat_params++] = (oar_named){dup_str(name), m->params[i].tensor};
    }
    for (int i = 0; i < m->n_buffers; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, m->buffers[i].name);
        int cap = root->n_flat_buffers;
        oar_named *l = oar_realloc(root->flat_buffers, sizeof(*l) * (size_t)(cap + 1));
        if (!l) return OAR_ERR_OOM;
        root->flat_buffers = l;
        l[root->n_flat_buffers++] = (oar_named){dup_str(name), m->buffers[i].tensor};
    }
    for (int i = 0; i < m->n_children; i++) {
        snprintf(name, sizeof name, "%s%s.", prefix, m->children[i].name);
        oar_status st = flatten_into(m->children[i].module, name, root);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

static bool ensure_flat(oar_module *m) {
    if (!m) return false;
    if (m->flat_valid) return true;
    free_flat(m);
    if (flatten_into(m, "", m) != OAR_OK) return false;
    m->flat_valid = true;
    return true;
}

int oar_module_num_parameters(oar_module *m) { return ensure_flat(m) ? m->n_flat_params : 0; }
int oar_module_num_buffers(oar_module *m) { return ensure_flat(m) ? m->n_flat_buffers : 0; }

oar_tensor *oar_module_parameter(oar_module *m, int i, const char **name) {
    if (!ensure_flat(m) || i < 0 || i >= m->n_flat_params) return NULL;
    if (name) *name = m->flat_params[i].name;
    return m->flat_params[i].tensor;
}

oar_tensor *oar_module_buffer(oar_module *m, int i, const char **name) {
    if (!ensure_flat(m) || i < 0 || i >= m->n_flat_buffers) return NULL;
    if (name) *name = m->flat_buffers[i].name;
    return m->flat_buffers[i].tensor;
}

int64_t oar_module_count_elements(oar_module *m, bool trainable_only) {
    int64_t n = 0;
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        oar_tensor *t = oar_module_parameter(m, i, NULL);
        if (!trainable_only || t->requires_grad) n += t->numel;
    }
    return n;
}

void oar_module_train(oar_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->n_children; i++) oar_module_train(m->children[i].module, training);
}

bool oar_module_is_training(const oar_module *m) { return m && m->training; }

void oar_module_zero_grad(oar_module *m) {
    for (int i = 0; i < oar_module_num_parameters(m); i++) oar_zero_grad(oar_module_parameter(m, i, NULL));
}

oar_status oar_module_set_requires_grad(oar_module *m, const char *prefix, bool requires_grad) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "module_set_requires_grad: module is NULL");
    size_t pl = prefix ? strlen(prefix) : 0;
    int hit = 0;
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *t = oar_module_parameter(m, i, &name);
        if (pl && strncmp(name, prefix, pl) != 0) continue;
        t->requires_grad = requires_grad;
        if (!requires_grad) oar_zero_grad(t);
        hit++;
    }
    if (pl && !hit)
        return oar_error(OAR_ERR_INVALID_ARG, "module_set_requires_grad: no parameter path starts with '%s'", prefix);
    return OAR_OK;
}

/* ---- printing */
static void format_into(const oar_module *m, int indent, char *buf, size_t size, size_t *n) {
#define PUT(...) *n += (size_t)snprintf(*n < size ? buf + *n : NULL, *n < size ? size - *n : 0, __VA_ARGS__)
    PUT("%s(", oar_module_type(m));
    if (m->ops->describe) {
        char d[256];
        m->ops->describe(m, d, sizeof d);
        PUT("%s", d);
    }
    if (m->n_children) {
        PUT("\n");
        for (int i = 0; i < m->n_children; i++) {
            PUT("%*s(%s): ", indent + 2, "", m->children[i].name);
            format_into(m->children[i].module, indent + 2, buf, size, n);
            PUT("\n");
        }
        PUT("%*s", indent, "");
    }
    PUT(")");
#undef PUT
}

int oar_module_format(const oar_module *m, char *buf, size_t size) {
    size_t n = 0;
    if (size) buf[0] = '\0';
    if (!m) return snprintf(buf, size, "Module(NULL)");
    format_into(m, 0, buf, size, &n);
    return (int)n;
}

void oar_module_print(const oar_module *m) {
    int n = oar_module_format(m, NULL, 0);
    char *buf = malloc((size_t)n + 1);
    if (!buf) return;
    oar_module_format(m, buf, (size_t)n + 1);
    puts(buf);
    free(buf);
}

/* Moves t's data to dev in place: the handle (held by the module, an optimizer, a compiled
 * function) stays the same, its storage is replaced by a contiguous copy on dev, like
 * torch's module.to() replacing param.data. Its gradient moves too. */
static oar_status move_tensor(oar_tensor *t, oar_device dev) {
    if (!t || t->device == dev) return OAR_OK;
    oar_tensor *moved = oar_tensor_new_on(dev, t->dtype, t->shape, t->ndim);
    if (!moved) return oar_last_status();
    oar_status st = oar_tensor_copy_strided(moved, t);
    if (st == OAR_OK && t->grad) st = move_tensor(t->grad, dev);
    if (st != OAR_OK) {
        oar_tensor_unref(moved);
        return st;
    }
    oar_storage *old = t->storage;
    t->storage = moved->storage;
    moved->storage = old; /* released with moved */
    t->device = dev;
    t->offset = 0;
    oar_tensor_set_contiguous_strides(t);
    oar_tensor_refresh(t);
    oar_tensor_unref(moved);
    return OAR_OK;
}

oar_status oar_module_to(oar_module *m, oar_device dev) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "module_to: expected a module, got NULL");
    if (dev != OAR_CPU && !oar_device_use(dev, "module_to")) return oar_last_status();
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        oar_status st = move_tensor(oar_module_parameter(m, i, NULL), dev);
        if (st != OAR_OK) return st;
    }
    for (int i = 0; i < oar_module_num_buffers(m); i++) {
        oar_status st = move_tensor(oar_module_buffer(m, i, NULL), dev);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}
