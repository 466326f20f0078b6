/* Optimizer state: lazily made slots, named listing, loading with validation. */
#include "optim/optim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const oar_slot_names[OAR_SLOT_COUNT] = {
    "step", "momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "grad_avg", "sum",
    "acc_delta", "exp_inf", "mu_product", "eta", "mu", "ax", "prev", "step_size",
};

/* State is made with real data even while a step is being traced (the update op then binds it
 * by reference, like the parameters), and belongs to no trace. */
static oar_tensor *make_slot(const oar_optimizer *o, const oar_optim_param *p, oar_slot s) {
    const oar_optim_opts *opts = o->groups[p->group];
    if (s == OAR_SLOT_STEP) {
        oar_tensor *t = oar_tensor_new(OAR_I64, NULL, 0);
        if (t) *(int64_t *)oar_tensor_ptr(t) = 0;
        if (t) t->trace_id = 0;
        return t;
    }
    double v = oar_optim_slot_init(opts, s);
    if (oar_slot_is_scalar(s)) { /* f32, on the host with the step count */
        oar_tensor *t = oar_tensor_new(OAR_F32, NULL, 0);
        if (t) *(float *)oar_tensor_ptr(t) = (float)v, t->trace_id = 0;
        return t;
    }
    /* the slots live with their parameter (the update kernels run on its device); the step
     * count and the hyper tensor stay on the host, where the launching code reads them */
    oar_tensor *t = oar_tensor_new_on(p->t->device, p->t->dtype, p->t->shape, p->t->ndim);
    if (!t) return NULL;
    t->trace_id = 0;
    /* SGD's momentum buffer is then filled by its first update (OAR_HYPER_FRESH_MOMENTUM) */
    if (t->device != OAR_CPU) {
        if (oar_tensor_fill(t, v) != OAR_OK) {
            oar_tensor_unref(t);
            return NULL;
        }
    } else if (t->dtype == OAR_F32) {
        float *d = (float *)oar_tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) d[i] = (float)v;
    } else {
        double *d = (double *)oar_tensor_ptr(t);
        for (int64_t i = 0; i < t->numel; i++) d[i] = v;
    }
    return t;
}

oar_status oar_optim_ensure_state(oar_optimizer *o, int param, bool *made_momentum) {
    oar_optim_param *p = &o->params[param];
    const oar_optim_opts *opts = o->groups[p->group];
    if (made_momentum) *made_momentum = false;
    for (int s = 0; s < OAR_SLOT_COUNT; s++) {
        if (p->slot[s] || !oar_optim_slot_used(opts, (oar_slot)s)) continue;
        p->slot[s] = make_slot(o, p, (oar_slot)s);
        if (!p->slot[s]) return oar_last_status();
        snprintf(p->name[s], sizeof p->name[s], "%d.%s", param, oar_slot_names[s]);
        o->state_dirty = true;
        if (o->kind == OAR_OPTIM_SGD) {
            ((double *)oar_tensor_ptr(p->hyper))[OAR_HYPER_FRESH_MOMENTUM] = 1;
            if (made_momentum) *made_momentum = true;
        }
    }
    return OAR_OK;
}

/* The slots keep their tensor objects: a compiled step binds them by reference, so dropping
 * them would leave its program updating tensors the optimizer no longer lists. Values as
 * make_slot gives them are what "no state" means to the next update: step 0, zero moments,
 * Adagrad's initial accumulator, and SGD's buffer to be filled by the next update. */
void oar_optim_reset_state(oar_optimizer *o, int param) {
    oar_optim_param *p = &o->params[param];
    const oar_optim_opts *opts = o->groups[p->group];
    for (int s = 0; s < OAR_SLOT_COUNT; s++) {
        if (!p->slot[s]) continue;
        oar_tensor_fill(p->slot[s], oar_optim_slot_init(opts, (oar_slot)s)); /* on its device */
        p->slot[s]->storage->version++;
    }
    if (p->slot[OAR_SLOT_MOMENTUM_BUFFER] && o->kind == OAR_OPTIM_SGD)
        ((double *)oar_tensor_ptr(p->hyper))[OAR_HYPER_FRESH_MOMENTUM] = 1;
}

bool oar_optim_state_is_empty(const oar_optimizer *o, int param) {
    const oar_optim_param *p = &o->params[param];
    if (p->slot[OAR_SLOT_STEP]) return *(const int64_t *)oar_tensor_ptr(p->slot[OAR_SLOT_STEP]) == 0;
    if (p->slot[OAR_SLOT_MOMENTUM_BUFFER] && o->kind == OAR_OPTIM_SGD)
        return ((const double *)oar_tensor_ptr(p->hyper))[OAR_HYPER_FRESH_MOMENTUM] != 0;
    for (int s = 0; s < OAR_SLOT_COUNT; s++)
        if (p->slot[s]) return false;
    return true;
}

static oar_status rebuild_index(oar_optimizer *o) {
    if (!o->state_dirty) return OAR_OK;
    int n = 0;
    for (int i = 0; i < o->n_params; i++)
        for (int s = 0; s < OAR_SLOT_COUNT; s++) n += o->params[i].slot[s] != NULL;
    if (n > o->cap_state) {
        int *idx = oar_realloc(o->state_index, sizeof(int) * (size_t)n);
        if (!idx) return OAR_ERR_OOM;
        o->state_index = idx;
        o->cap_state = n;
    }
    n = 0;
    for (int i = 0; i < o->n_params; i++)
        for (int s = 0; s < OAR_SLOT_COUNT; s++)
            if (o->params[i].slot[s]) o->state_index[n++] = i * OAR_SLOT_COUNT + s;
    o->n_state = n;
    o->state_dirty = false;
    return OAR_OK;
}

int oar_optimizer_num_state(oar_optimizer *o) {
    if (!o || rebuild_index(o) != OAR_OK) return 0;
    return o->n_state;
}

oar_tensor *oar_optimizer_state(oar_optimizer *o, int i, const char **name) {
    if (name) *name = NULL;
    if (!o || rebuild_index(o) != OAR_OK) return NULL;
    if (i < 0 || i >= o->n_state) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected a state index in [0, %d), got %d", oar_optim_kind_name(o->kind),
                  o->n_state, i);
        return NULL;
    }
    oar_optim_param *p = &o->params[o->state_index[i] / OAR_SLOT_COUNT];
    int s = o->state_index[i] % OAR_SLOT_COUNT;
    if (name) *name = p->name[s];
    return p->slot[s];
}

/* Appends the slots the parameter's options use, comma separated, to buf. */
static void list_slots(const oar_optim_opts *opts, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int s = 0; s < OAR_SLOT_COUNT; s++)
        if (oar_optim_slot_used(opts, (oar_slot)s) && len < size) {
            int k = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", oar_slot_names[s]);
            len += k > 0 ? (size_t)k : 0;
        }
    if (!buf[0]) snprintf(buf, size, "none (no state with these options)");
}

static oar_status parse_name(oar_optimizer *o, const char *name, int *param, int *slot) {
    const char *who = oar_optim_kind_name(o->kind);
    char *end = NULL;
    long i = name ? strtol(name, &end, 10) : -1;
    bool ok = name && end != name && *end == '.' && name[0] >= '0' && name[0] <= '9' && i < o->n_params;
    if (!ok)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a state name '<param index>.<slot>' with an index in "
                                              "[0, %d), got '%s'", who, o->n_params, name ? name : "(NULL)");
    const oar_optim_opts *opts = o->groups[o->params[i].group];
    for (int s = 0; s < OAR_SLOT_COUNT; s++)
        if (!strcmp(end + 1, oar_slot_names[s]) && (oar_optim_slot_used(opts, (oar_slot)s) || o->params[i].slot[s])) {
            *param = (int)i;
            *slot = s;
            return OAR_OK;
        }
    char slots[200];
    list_slots(opts, slots, sizeof slots);
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a slot of parameter %ld to be one of %s, got '%s'", who, i,
                     slots, name);
}

oar_status oar_optimizer_load_state(oar_optimizer *o, const char *name, const oar_tensor *value) {
    OAR_CHECK_HANDLE("optimizer_load_state", value, oar_last_status());
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "optimizer_load_state: expected an optimizer, got NULL");
    const char *who = oar_optim_kind_name(o->kind);
    int i = 0, s = 0;
    oar_status st = parse_name(o, name, &i, &s);
    if (st != OAR_OK) return st;
    oar_tensor *p = o->params[i].t;
    oar_dtype want_dt = oar_optim_slot_dtype(s, p->dtype);
    int want_nd = oar_slot_is_scalar(s) ? 0 : p->ndim;
    char want[160], got[160];
    oar_format_shape(p->shape, want_nd, want, sizeof want);
    if (!value || !value->storage)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected '%s' to be %s %s, got %s", who, name,
                         oar_dtype_name(want_dt), want, value ? "a symbolic tensor" : "NULL");
    oar_format_shape(value->shape, value->ndim, got, sizeof got);
    if (value->dtype != want_dt || value->ndim != want_nd ||
        memcmp(value->shape, p->shape, sizeof(int64_t) * (size_t)want_nd))
        return oar_error(s == OAR_SLOT_STEP || value->dtype == want_dt ? OAR_ERR_SHAPE : OAR_ERR_DTYPE,
                         "%s: expected '%s' to be %s %s (%s), got %s %s", who, name, oar_dtype_name(want_dt), want,
                         s == OAR_SLOT_STEP          ? "a step count"
                         : oar_slot_is_scalar(s) ? "a scalar"
                                                 : "like its parameter",
                         oar_dtype_name(value->dtype), got);
    if (s == OAR_SLOT_STEP) { /* the step count is read on the host, wherever the value lives */
        int64_t step = 0;
        if (value->device == OAR_CPU) {
            step = *(const int64_t *)oar_tensor_ptr(value);
        } else {
            oar_tensor *h = oar_tensor_new(OAR_I64, NULL, 0);
            if (!h) return oar_last_status();
            st = oar_tensor_copy_strided(h, value);
            if (st == OAR_OK) step = *(const int64_t *)oar_tensor_ptr(h);
            oar_tensor_unref(h);
            if (st != OAR_OK) return st;
        }
        if (step < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected '%s' >= 0, got %lld", who, name, (long long)step);
    }
    if ((st = oar_optim_ensure_state(o, i, NULL)) != OAR_OK) return st;
    oar_tensor *dst = o->params[i].slot[s];
    oar_tensor_copy_strided(dst, value);
    dst->storage->version++;
    if (o->kind == OAR_OPTIM_SGD && s == OAR_SLOT_MOMENTUM_BUFFER) /* a loaded buffer is a filled one */
        ((double *)oar_tensor_ptr(o->params[i].hyper))[OAR_HYPER_FRESH_MOMENTUM] = 0;
    return OAR_OK;
}
