/* oar_optimizer_step: check everything, make missing state, then run one fused update per
 * parameter that has a gradient. */
#include "optim/optim.h"

#include <string.h>

static oar_status check_grad(const oar_optimizer *o, int i) {
    const char *who = oar_optim_kind_name(o->kind);
    const oar_tensor *p = o->params[i].t, *g = p->grad;
    if (!g->storage)
        return oar_error(OAR_ERR_STATE, "%s: expected the gradient of parameter %d to hold data, got a symbolic "
                                        "tensor", who, i);
    if (g->device != p->device)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected the gradient of parameter %d on its parameter's device, "
                                              "got another", who, i);
    if (g->dtype != p->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected the gradient of parameter %d to be %s like the parameter, "
                                        "got %s", who, i, oar_dtype_name(p->dtype), oar_dtype_name(g->dtype));
    if (g->ndim != p->ndim || memcmp(g->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim)) {
        char want[160], got[160];
        oar_format_shape(p->shape, p->ndim, want, sizeof want);
        oar_format_shape(g->shape, g->ndim, got, sizeof got);
        return oar_error(OAR_ERR_SHAPE, "%s: expected the gradient of parameter %d to have the parameter's shape "
                                        "%s, got %s", who, i, want, got);
    }
    return OAR_OK;
}

static oar_status check(const oar_optimizer *o) {
    for (int k = 0; k < o->n_groups; k++) {
        if (o->groups[k]->kind != o->kind)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected group %d to keep kind %s, got %s",
                             oar_optim_kind_name(o->kind), k, oar_optim_kind_name(o->kind),
                             oar_optim_kind_name(o->groups[k]->kind));
        oar_status st = oar_optim_check(o->groups[k], false);
        if (st != OAR_OK) {
            oar_error_prefix("group %d", k);
            return st;
        }
    }
    for (int i = 0; i < o->n_params; i++) {
        if (!o->params[i].t->grad) continue;
        oar_status st = check_grad(o, i);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Makes missing state and contiguous copies of strided gradients, before anything changes. */
static oar_status prepare(oar_optimizer *o) {
    for (int i = 0; i < o->n_params; i++) {
        oar_optim_param *p = &o->params[i];
        if (!p->t->grad) continue;
        oar_status st = oar_optim_ensure_state(o, i, &p->fresh_momentum);
        if (st != OAR_OK) return st;
        if (!p->t->grad->contiguous && !(p->grad_copy = oar_tensor_contiguous_copy(p->t->grad)))
            return oar_last_status();
    }
    return OAR_OK;
}

/* After a step (or a failed prepare, which also drops momentum buffers it made and did not fill). */
static void release_copies(oar_optimizer *o, bool failed) {
    for (int i = 0; i < o->n_params; i++) {
        if (failed && o->params[i].fresh_momentum) {
            oar_tensor_unref(o->params[i].slot[OAR_SLOT_MOMENTUM_BUFFER]);
            o->params[i].slot[OAR_SLOT_MOMENTUM_BUFFER] = NULL;
            o->state_dirty = true;
        }
        oar_tensor_unref(o->params[i].grad_copy);
        o->params[i].grad_copy = NULL;
        o->params[i].fresh_momentum = false;
    }
}

static void update(oar_optimizer *o, int i) {
    oar_optim_param *p = &o->params[i];
    oar_tensor *g = p->grad_copy ? p->grad_copy : p->t->grad;
    oar_optim_update u = {.o = o->groups[p->group], .n = p->t->numel, .p = oar_tensor_ptr(p->t),
                          .g = oar_tensor_ptr(g), .fresh_momentum = p->fresh_momentum};
    for (int s = 0; s < OAR_SLOT_COUNT; s++) u.s[s] = p->slot[s] ? oar_tensor_ptr(p->slot[s]) : NULL;
    if (p->slot[OAR_SLOT_STEP]) {
        int64_t *step = (int64_t *)oar_tensor_ptr(p->slot[OAR_SLOT_STEP]);
        u.t = ++*step;
    }
    if (p->t->dtype == OAR_F32) oar_optim_update_f32(&u);
    else oar_optim_update_f64(&u);
    p->t->storage->version++; /* an in-place write, as torch's param.add_ */
}

oar_status oar_optimizer_step(oar_optimizer *o) {
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "optimizer_step: expected an optimizer, got NULL");
    oar_status st = check(o);
    if (st != OAR_OK) return st;
    if ((st = prepare(o)) != OAR_OK) {
        release_copies(o, true);
        return st;
    }
    oar_no_grad_begin();
    for (int i = 0; i < o->n_params; i++)
        if (o->params[i].t->grad) update(o, i);
    oar_no_grad_end();
    release_copies(o, false);
    o->steps++;
    return OAR_OK;
}
