/* O2: a module's parameters in f16/bf16 with f32 master copies. The parameter handles stay the
 * module's (their data is converted in place), so the model code is unchanged; the optimizer
 * runs on the masters, in f32, and the masters are rounded back into the parameters after each
 * step. Norm layers (and any prefix the user names) keep f32 parameters, which are their own
 * masters. */
#include "amp/amp.h"
#include "ops/op.h"
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct oar_amp_masters {
    int n;
    oar_dtype dtype;
    oar_tensor **param;   /* retained */
    oar_tensor **master;  /* owned (the parameter itself, retained, when it stays f32) */
    char **name;
    oar_state_source source; /* "master.<name>" */
};

static int source_count(void *owner);
static oar_tensor *source_tensor(void *owner, int i, const char **name);

oar_amp_decorate_opts oar_amp_decorate_defaults(void) {
    return (oar_amp_decorate_opts){.dtype = OAR_BF16, .keep_norm_fp32 = true};
}

/* Whether the parameter at path belongs to a normalization layer (BatchNorm*, LayerNorm, GroupNorm). */
static bool in_norm_layer(oar_module *m, const char *path) {
    const char *dot = strrchr(path, '.');
    oar_module *owner = m;
    if (dot) {
        char prefix[256];
        size_t n = (size_t)(dot - path);
        if (n >= sizeof prefix) return false;
        memcpy(prefix, path, n);
        prefix[n] = '\0';
        owner = oar_module_child(m, prefix);
        oar_clear_error();
    }
    const char *type = owner ? oar_module_type(owner) : NULL;
    return type && strstr(type, "Norm") != NULL;
}

static bool kept(const oar_amp_decorate_opts *o, oar_module *m, const char *path) {
    if (o->keep_norm_fp32 && in_norm_layer(m, path)) return true;
    for (int i = 0; i < o->n_keep_fp32; i++)
        if (o->keep_fp32[i] && strncmp(path, o->keep_fp32[i], strlen(o->keep_fp32[i])) == 0) return true;
    return false;
}

/* Converts t's data to dt in place: a new storage, the same handle. */
static oar_status convert_in_place(oar_tensor *t, oar_dtype dt) {
    oar_tensor *c = oar_tensor_new_on(t->device, dt, t->shape, t->ndim);
    if (!c) return oar_last_status();
    oar_status st = oar_copy_(c, t);
    if (st == OAR_OK) {
        oar_storage *old = t->storage;
        t->storage = c->storage;
        c->storage->refcount++;
        oar_storage_release(old);
        t->dtype = dt;
        t->offset = 0;
        memcpy(t->strides, c->strides, sizeof(int64_t) * (size_t)t->ndim);
        oar_tensor_refresh(t);
        oar_tensor_unref(t->grad);
        t->grad = NULL;
    }
    oar_tensor_unref(c);
    return st;
}

void oar_amp_masters_free(oar_amp_masters *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        oar_tensor_unref(w->param[i]);
        oar_tensor_unref(w->master[i]);
        free(w->name[i]);
    }
    free(w->param);
    free(w->master);
    free(w->name);
    free(w);
}

static oar_amp_masters *masters_alloc(int n, oar_dtype dtype) {
    oar_amp_masters *w = calloc(1, sizeof *w);
    if (w) {
        w->dtype = dtype;
        w->source = (oar_state_source){.owner = w, .count = source_count, .tensor = source_tensor, .prefix = "master."};
        w->param = calloc((size_t)n + 1, sizeof *w->param);
        w->master = calloc((size_t)n + 1, sizeof *w->master);
        w->name = calloc((size_t)n + 1, sizeof *w->name);
    }
    if (!w || !w->param || !w->master || !w->name) {
        oar_amp_masters_free(w);
        oar_error(OAR_ERR_OOM, "oar_amp_decorate: out of memory");
        return NULL;
    }
    return w;
}

/* Whether p can be decorated: checked for every parameter before any is converted, so a refusal
 * leaves them all as they were. */
static oar_status masters_check(const oar_tensor *p, const char *path, const char *fn) {
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a tensor, got NULL for '%s'", fn, path);
    if (p->dtype != OAR_F32) {
        if (p->dtype == OAR_F16 || p->dtype == OAR_BF16)
            return oar_error(OAR_ERR_DTYPE, "%s: expected f32 parameters, got %s for '%s'; decorate a module once", fn,
                             oar_dtype_name(p->dtype), path);
        if (oar_dtype_is_float(p->dtype))
            return oar_error(OAR_ERR_DTYPE, "%s: expected f32 parameters, got %s for '%s' (make it f32 first, or "
                             "keep it out)", fn, oar_dtype_name(p->dtype), path);
        return oar_error(OAR_ERR_DTYPE, "%s: expected f32 parameters, got %s for '%s' (not a floating-point "
                         "parameter: leave it out or make it f32)", fn, oar_dtype_name(p->dtype), path);
    }
    return OAR_OK;
}

/* Adds p to w: converted to w->dtype with an f32 master, or its own master when keep. */
static oar_status masters_add(oar_amp_masters *w, oar_tensor *p, const char *path, bool keep, const char *fn) {
    int k = w->n;
    char *name = strdup(path);
    if (!name) return oar_error(OAR_ERR_OOM, "%s: out of memory", fn);
    oar_tensor *master = keep ? oar_retain(p) : oar_tensor_contiguous_copy(p);
    if (!master) {
        free(name);
        return oar_last_status();
    }
    w->param[k] = oar_retain(p);
    w->master[k] = master;
    w->name[k] = name;
    w->n++;
    if (keep) return OAR_OK;
    master->requires_grad = true;
    return convert_in_place(p, w->dtype);
}

oar_amp_masters *oar_amp_decorate(oar_module *m, const oar_amp_decorate_opts *opts) {
    oar_init();
    oar_amp_decorate_opts o = opts ? *opts : oar_amp_decorate_defaults();
    if (!m) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_amp_decorate: expected a module, got NULL");
        return NULL;
    }
    if (o.dtype != OAR_F16 && o.dtype != OAR_BF16) {
        oar_error(OAR_ERR_DTYPE, "oar_amp_decorate: expected dtype f16 or bf16, got %s", oar_dtype_name(o.dtype));
        return NULL;
    }
    int np = oar_module_num_parameters(m);
    for (int i = 0; i < np; i++) {
        const char *path = NULL;
        oar_tensor *p = oar_module_parameter(m, i, &path);
        if (p && p->requires_grad && masters_check(p, path ? path : "", "oar_amp_decorate") != OAR_OK) return NULL;
    }
    oar_amp_masters *w = masters_alloc(np, o.dtype);
    for (int i = 0; w && i < np; i++) {
        const char *path = NULL;
        oar_tensor *p = oar_module_parameter(m, i, &path);
        if (!p || !p->requires_grad) continue;
        if (masters_add(w, p, path ? path : "", kept(&o, m, path ? path : ""), "oar_amp_decorate") != OAR_OK) {
            oar_amp_masters_free(w);
            return NULL;
        }
    }
    return w;
}

oar_amp_masters *oar_amp_decorate_params(oar_tensor *const *params, const char *const *names, const bool *keep, int n,
                                         oar_dtype dtype) {
    oar_init();
    const char *fn = "oar_amp_decorate_params";
    if (n < 0 || (n > 0 && !params)) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected n >= 0 parameters, got n = %d with params %s", fn, n,
                  params ? "given" : "NULL");
        return NULL;
    }
    if (dtype != OAR_F16 && dtype != OAR_BF16) {
        oar_error(OAR_ERR_DTYPE, "%s: expected dtype f16 or bf16, got %s", fn, oar_dtype_name(dtype));
        return NULL;
    }
    char fallback[32];
    for (int i = 0; i < n; i++) {
        snprintf(fallback, sizeof fallback, "%d", i);
        const char *path = names && names[i] ? names[i] : fallback;
        if (masters_check(params[i], path, fn) != OAR_OK) return NULL;
        for (int j = 0; j < i; j++)
            if (params[j] == params[i]) {
                oar_error(OAR_ERR_INVALID_ARG, "%s: parameter '%s' is listed twice (at %d and %d); list each once", fn,
                          path, j, i);
                return NULL;
            }
    }
    oar_amp_masters *w = masters_alloc(n, dtype);
    for (int i = 0; w && i < n; i++) {
        snprintf(fallback, sizeof fallback, "%d", i);
        if (masters_add(w, params[i], names && names[i] ? names[i] : fallback, keep && keep[i], fn) != OAR_OK) {
            oar_amp_masters_free(w);
            return NULL;
        }
    }
    return w;
}

int oar_amp_masters_count(const oar_amp_masters *w) { return w ? w->n : 0; }

/* Compiled steps bind the masters kept apart from their parameters (the others are the module's). */
static int source_count(void *owner) { return owner ? ((oar_amp_masters *)owner)->n : 0; }
static oar_tensor *source_tensor(void *owner, int i, const char **name) {
    oar_amp_masters *w = owner;
    if (name) *name = w->name[i];
    return w->param[i] == w->master[i] ? NULL : w->master[i];
}

const oar_state_source *oar_amp_masters_state_source(oar_amp_masters *w) { return w ? &w->source : NULL; }

oar_tensor *oar_amp_master(oar_amp_masters *w, int i, const char **name) {
    if (!w || i < 0 || i >= w->n) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_amp_master: expected an index in [0, %d), got %d", w ? w->n : 0, i);
        return NULL;
    }
    if (name) *name = w->name[i];
    return w->master[i];
}

oar_optimizer *oar_amp_masters_optimizer(oar_amp_masters *w, const oar_optim_opts *opts) {
    if (!w) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_amp_masters_optimizer: expected the masters of oar_amp_decorate, got NULL");
        return NULL;
    }
    return oar_optimizer_new(w->master, w->n, opts);
}

oar_status oar_amp_masters_sync_grads(oar_amp_masters *w) {
    if (!w) return oar_error(OAR_ERR_INVALID_ARG, "oar_amp_masters_sync_grads: expected masters, got NULL");
    for (int i = 0; i < w->n; i++) {
        oar_tensor *p = w->param[i], *m = w->master[i];
        if (p == m || !p->grad) continue;
        /* traced, the gradient is a value of the program and its f32 cast another; eagerly the
         * cast op's vectorized kernel as well (oar_copy_'s element-by-element conversion was 4%
         * of an eager O2 gpt-mini step); widening is exact either way */
        bool scoped = !oar_active_trace; /* eagerly the cast's own reference goes with the scope */
        if (scoped) oar_scope_begin();
        oar_no_grad_begin();
        oar_tensor *c = oar_cast(p->grad, OAR_F32);
        /* a master holding a gradient not yet stepped on (a sync earlier this step, for another
         * optimizer or before more backward passes) adds the new one, in f32, as leaves do */
        if (c && m->grad) c = oar_add(m->grad, c);
        oar_no_grad_end();
        if (c) {
            oar_tensor_unref(m->grad);
            m->grad = oar_retain(c);
        }
        if (scoped) oar_scope_end();
        if (!c) return oar_last_status();
        /* the low gradient is consumed: the master's is the one the optimizer reads and zeroes */
        oar_tensor_unref(p->grad);
        p->grad = NULL;
    }
    return OAR_OK;
}

oar_status oar_amp_masters_sync_params(oar_amp_masters *w) {
    if (!w) return oar_error(OAR_ERR_INVALID_ARG, "oar_amp_masters_sync_params: expected masters, got NULL");
    oar_status st = OAR_OK;
    oar_no_grad_begin(); /* an update, as the optimizer's */
    for (int i = 0; i < w->n && st == OAR_OK; i++) {
        if (w->param[i] == w->master[i]) continue;
        /* traced, a write the program makes; eagerly on the CPU the op's vectorized kernel too
         * (oar_copy_'s element-by-element rounding was 3% of an eager O2 gpt-mini step): the
         * same rounding as oar_copy_'s */
        if (oar_active_trace || oar_device_of(w->param[i]) == OAR_CPU) {
            oar_tensor *in[2] = {w->param[i], w->master[i]}, *none[1];
            int n_out = 1;
            st = oar_op_call(OAR_OP_amp_sync_param, in, 2, NULL, none, &n_out);
        } else {
            st = oar_copy_(w->param[i], w->master[i]);
        }
    }
    oar_no_grad_end();
    return st;
}

oar_status oar_amp_masters_step(oar_amp_masters *w, oar_optimizer *o, oar_grad_scaler *s, bool *skipped) {
    if (skipped) *skipped = false;
    oar_status st = oar_amp_masters_sync_grads(w);
    if (st != OAR_OK) return st;
    bool skip = false;
    st = s ? oar_grad_scaler_step(s, o, &skip) : oar_optimizer_step(o);
    if (st != OAR_OK) return st;
    if (skipped) *skipped = skip;
    /* traced, a skip is decided in the program: the sync runs and rounds the unchanged masters to
     * the parameters' own bits */
    return skip ? OAR_OK : oar_amp_masters_sync_params(w);
}

oar_status oar_amp_masters_swap(oar_amp_masters *w, oar_module *m, bool masters_in) {
    oar_status st = OAR_OK;
    for (int i = 0; w && i < w->n; i++) {
        if (w->param[i] == w->master[i]) continue;
        oar_status s = oar_module_set(m, w->name[i], masters_in ? w->master[i] : w->param[i]);
        if (st == OAR_OK) st = s; /* put every parameter back even after a failure */
    }
    return st;
}
