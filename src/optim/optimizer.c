/* Optimizers: creation over tensors or a module, parameter groups, gradients, counters. */
#include "nn/module.h"
#include "optim/optim.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static oar_status check_param(const oar_optimizer *o, oar_tensor *const *params, int i, int index) {
    const char *who = oar_optim_kind_name(o->kind);
    oar_tensor *t = params[i];
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected parameter %d to be a tensor, got NULL", who, index);
    if (!t->storage)
        return oar_error(OAR_ERR_STATE, "%s: expected parameter %d to hold data, got a symbolic tensor", who, index);
    if (t->dtype != OAR_F32 && t->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "%s: expected parameter %d to be f32 or f64, got %s", who, index,
                         oar_dtype_name(t->dtype));
    if (t->grad_fn)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected parameter %d to be a leaf tensor, got one computed "
                                              "by an op (use oar_detach)", who, index);
    if (t->device != OAR_CPU && oar_optim_kind_cpu_only(o->kind))
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected parameter %d on the CPU (%s has no kernels on other "
                                              "devices yet), got one on another device; move it with oar_to(t, "
                                              "OAR_CPU) or use SGD, Adam, AdamW, RMSprop, Adagrad or LAMB",
                         who, index, who);
    if (!t->contiguous)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected parameter %d to be contiguous, got a strided view "
                                              "(optimize the tensor it views, or a contiguous copy)", who, index);
    for (int k = 0; k < o->n_params; k++)
        if (o->params[k].t == t)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected distinct parameters, got parameter %d == "
                                                  "parameter %d", who, index, k);
    for (int k = 0; k < i; k++)
        if (params[k] == t)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected distinct parameters, got parameter %d == "
                                                  "parameter %d", who, index, o->n_params + k);
    return OAR_OK;
}

/* A parameter's hyper tensor (optim.h), made with the optimizer so that it exists before any
 * trace of a step and is bound by reference like the parameters. */
static oar_tensor *new_hyper(const oar_optim_opts *opts) {
    int64_t n = OAR_HYPER_COUNT;
    oar_tensor *h = oar_tensor_new(OAR_F64, &n, 1);
    if (!h) return NULL;
    h->trace_id = 0;
    double *d = (double *)oar_tensor_ptr(h);
    for (int k = 0; k < OAR_HYPER_COUNT; k++) d[k] = 0;
    oar_optim_write_hyper(d, opts);
    return h;
}

/* Appends a group with resolved options; on failure the optimizer is unchanged. */
static int append_group(oar_optimizer *o, oar_tensor *const *params, int n, const oar_optim_opts *opts) {
    const char *who = oar_optim_kind_name(o->kind);
    if (n <= 0 || !params)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a non-empty list of parameters, got %s", who,
                         params ? "n <= 0" : "NULL"), -1;
    if (opts->kind != o->kind)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected every group to have kind %s, got %s", who, who,
                         oar_optim_kind_name(opts->kind)), -1;
    for (int i = 0; i < n; i++)
        if (check_param(o, params, i, o->n_params + i) != OAR_OK) return -1;
    oar_optim_opts *g = OAR_NEW(oar_optim_opts);
    oar_optim_opts **groups = g ? oar_realloc(o->groups, sizeof(*groups) * (size_t)(o->n_groups + 1)) : NULL;
    if (!groups) {
        free(g);
        return -1;
    }
    o->groups = groups;
    oar_optim_param *ps = oar_realloc(o->params, sizeof(*ps) * (size_t)(o->n_params + n));
    if (!ps) {
        free(g);
        return -1;
    }
    o->params = ps;
    for (int i = 0; i < n; i++) {
        memset(&ps[o->n_params + i], 0, sizeof *ps);
        ps[o->n_params + i].t = params[i];
        ps[o->n_params + i].group = o->n_groups;
        if (!(ps[o->n_params + i].hyper = new_hyper(opts))) {
            for (int k = 0; k < i; k++) oar_tensor_unref(ps[o->n_params + k].hyper);
            free(g);
            return -1;
        }
    }
    *g = *opts;
    o->groups[o->n_groups] = g;
    o->n_params += n;
    return o->n_groups++;
}

_Static_assert(offsetof(oar_optimizer, source) == 0, "graph/jit.c reads an optimizer as its state source");

static int source_count(void *owner) { return oar_optimizer_num_state(owner); }
static oar_tensor *source_tensor(void *owner, int i, const char **name) {
    return oar_optimizer_state(owner, i, name);
}

const oar_state_source *oar_optimizer_state_source(oar_optimizer *o) { return o ? &o->source : NULL; }

oar_optimizer *oar_optimizer_new(oar_tensor *const *params, int n, const oar_optim_opts *opts) {
    if (n > 0 && oar_check_handles("optimizer_new", "parameter", params, n) != OAR_OK) return NULL;
    oar_optim_opts resolved;
    if (oar_optim_resolve(opts, &resolved, true) != OAR_OK) return NULL;
    oar_optimizer *o = OAR_NEW(oar_optimizer);
    if (!o) return NULL;
    o->source = (oar_state_source){.owner = o, .count = source_count, .tensor = source_tensor, .prefix = "optim."};
    o->kind = resolved.kind;
    if (append_group(o, params, n, &resolved) < 0) {
        oar_optimizer_free(o);
        return NULL;
    }
    return o;
}

oar_optimizer *oar_optimizer_for(oar_module *m, const oar_optim_opts *opts) {
    if (!m) {
        oar_error(OAR_ERR_INVALID_ARG, "optimizer_for: expected a module, got NULL");
        return NULL;
    }
    int total = oar_module_num_parameters(m), n = 0;
    oar_tensor **list = oar_malloc(sizeof(*list) * (size_t)(total > 0 ? total : 1));
    if (!list) return NULL;
    for (int i = 0; i < total; i++) {
        oar_tensor *t = oar_module_parameter(m, i, NULL);
        bool seen = false;
        for (int k = 0; k < n && !seen; k++) seen = list[k] == t;
        if (t && t->requires_grad && !seen) list[n++] = t; /* shared parameters once, as torch */
    }
    oar_optimizer *o = NULL;
    if (n == 0)
        oar_error(OAR_ERR_INVALID_ARG, "optimizer_for: expected a module with trainable parameters, got %s",
                  total ? "only frozen ones (requires_grad false)" : "none");
    else
        o = oar_optimizer_new(list, n, opts);
    free(list);
    return o;
}

int oar_optimizer_add_group(oar_optimizer *o, oar_tensor *const *params, int n, const oar_optim_opts *opts) {
    if (n > 0 && oar_check_handles("optimizer_add_group", "parameter", params, n) != OAR_OK) return -1;
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "optimizer_add_group: expected an optimizer, got NULL"), -1;
    oar_optim_opts resolved;
    if (oar_optim_resolve(opts ? opts : o->groups[0], &resolved, opts != NULL) != OAR_OK) return -1;
    return append_group(o, params, n, &resolved);
}

int oar_optimizer_num_groups(const oar_optimizer *o) { return o ? o->n_groups : 0; }

oar_optim_opts *oar_optimizer_group_opts(oar_optimizer *o, int group) {
    if (!o || group < 0 || group >= o->n_groups) {
        oar_error(OAR_ERR_INVALID_ARG, "optimizer_group_opts: expected a group in [0, %d), got %d",
                  o ? o->n_groups : 0, group);
        return NULL;
    }
    return o->groups[group];
}

void oar_optimizer_free(oar_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_params; i++) {
        for (int s = 0; s < OAR_SLOT_COUNT; s++) oar_tensor_unref(o->params[i].slot[s]);
        oar_tensor_unref(o->params[i].hyper);
    }
    for (int k = 0; k < o->n_traced; k++) { /* compiled functions may still hold these */
        o->traced[k]->o = NULL;
        oar_optim_traced_release(o->traced[k]);
    }
    free(o->traced);
    for (int g = 0; g < o->n_groups; g++) free(o->groups[g]);
    free(o->groups);
    free(o->params);
    free(o->state_index);
    free(o);
}

void oar_optimizer_zero_grad(oar_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n_params; i++) oar_zero_grad(o->params[i].t);
}

int64_t oar_optimizer_steps(const oar_optimizer *o) { return o ? o->steps : 0; }

oar_status oar_optimizer_set_steps(oar_optimizer *o, int64_t steps) {
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "optimizer_set_steps: expected an optimizer, got NULL");
    if (steps < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected steps >= 0, got %lld", oar_optim_kind_name(o->kind),
                         (long long)steps);
    o->steps = steps;
    return OAR_OK;
}
