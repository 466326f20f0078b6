/* oar_optimizer_step: check everything, make missing state, then call the optimizer_update op
 * once per parameter that has a gradient. Eagerly the op runs at once; while a step is traced
 * (oar_jit_to_static) it is recorded, and run hooks keep the host side in step with the
 * program: before every run the hyper tensors are refreshed from the groups' options (so edits
 * and schedulers take effect), after it the step counter advances by the steps the program
 * made. */
#include "graph/trace.h"
#include "optim/optim.h"
#include "profiler/profiler.h"

#include <stdlib.h>
#include <string.h>

static oar_status check_grad(const oar_optimizer *o, int i) {
    const char *who = oar_optim_kind_name(o->kind);
    const oar_tensor *p = o->params[i].t, *g = p->grad;
    if (!g->storage && (!oar_active_trace || g->trace_id != oar_active_trace))
        return oar_error(OAR_ERR_STATE, "%s: expected the gradient of parameter %d to hold data, got a symbolic "
                                        "tensor of %s", who, i,
                         oar_active_trace ? "another trace" : "a trace (step inside the traced function)");
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

/* Reads metadata only: while tracing, gradients are symbolic. */
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

/* Makes missing state and, eagerly, contiguous copies of strided gradients, before anything
 * changes (the op would copy them too, but a step that fails must change nothing). */
static oar_status prepare(oar_optimizer *o, bool traced) {
    for (int i = 0; i < o->n_params; i++) {
        oar_optim_param *p = &o->params[i];
        if (!p->t->grad) continue;
        oar_status st = oar_optim_ensure_state(o, i, &p->made_momentum);
        if (st != OAR_OK) return st;
        if (!traced && !p->t->grad->contiguous && !(p->grad_copy = oar_tensor_contiguous_copy(p->t->grad)))
            return oar_last_status();
    }
    return OAR_OK;
}

/* After a step (or a failed prepare, which also drops momentum buffers it made). */
static void release_copies(oar_optimizer *o, bool failed) {
    for (int i = 0; i < o->n_params; i++) {
        if (failed && o->params[i].made_momentum) {
            oar_tensor_unref(o->params[i].slot[OAR_SLOT_MOMENTUM_BUFFER]);
            o->params[i].slot[OAR_SLOT_MOMENTUM_BUFFER] = NULL;
            o->state_dirty = true;
        }
        oar_tensor_unref(o->params[i].grad_copy);
        o->params[i].grad_copy = NULL;
        o->params[i].made_momentum = false;
    }
}

static void refresh_hyper(oar_optimizer *o, int i) {
    oar_optim_param *p = &o->params[i];
    oar_optim_write_hyper((double *)oar_tensor_ptr(p->hyper), o->groups[p->group]);
}

/* Run hooks of a compiled program (user: its oar_optim_traced). The record outlives whichever
 * of the optimizer and the program lets go of it first: an optimizer freed before the compiled
 * function leaves the record with o = NULL, and the next run is refused instead of reading the
 * freed optimizer. */
static oar_status before_run(void *user) {
    oar_optimizer *o = ((oar_optim_traced *)user)->o;
    if (!o)
        return oar_error(OAR_ERR_STATE, "jit_call: the optimizer this function steps was freed (oar_optimizer_free) "
                                        "while the compiled function still uses it; free the compiled function first "
                                        "(oar_jit_free), or keep the optimizer until then");
    for (int i = 0; i < o->n_params; i++) refresh_hyper(o, i);
    return OAR_OK;
}

static void after_run(void *user) {
    oar_optim_traced *r = user;
    if (r->o) r->o->steps += r->steps;
}

void oar_optim_traced_release(oar_optim_traced *r) {
    if (r && __atomic_sub_fetch(&r->refs, 1, __ATOMIC_ACQ_REL) == 0) free(r);
}

static void release_record(void *user) { oar_optim_traced_release(user); }

oar_optim_traced *oar_optim_traced_hold(oar_optimizer *o) {
    for (int k = o ? o->n_traced - 1 : -1; k >= 0; k--)
        if (o->traced[k]->trace == oar_active_trace) {
            __atomic_add_fetch(&o->traced[k]->refs, 1, __ATOMIC_ACQ_REL);
            return o->traced[k];
        }
    return NULL;
}

/* The record of the trace running now, made (with its hooks registered) at its first step. */
static oar_optim_traced *traced_record(oar_optimizer *o) {
    for (int k = o->n_traced - 1; k >= 0; k--)
        if (o->traced[k]->trace == oar_active_trace) return o->traced[k];
    oar_optim_traced **list = oar_realloc(o->traced, sizeof *list * (size_t)(o->n_traced + 1));
    if (!list) return NULL;
    o->traced = list;
    oar_optim_traced *r = OAR_NEW(oar_optim_traced);
    if (!r) return NULL;
    *r = (oar_optim_traced){.o = o, .trace = oar_active_trace, .refs = 2}; /* the optimizer and the hooks */
    if (oar_trace_add_run_hook(before_run, after_run, release_record, r) != OAR_OK) {
        free(r);
        return NULL;
    }
    o->traced[o->n_traced++] = r;
    return r;
}

oar_status oar_optimizer_step(oar_optimizer *o) {
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "optimizer_step: expected an optimizer, got NULL");
    oar_prof_push("optimizer");
    bool traced = oar_active_trace != 0;
    oar_status st = check(o);
    oar_optim_traced *rec = NULL;
    if (st == OAR_OK && traced && !(rec = traced_record(o))) st = OAR_ERR_OOM;
    if (st == OAR_OK && (st = prepare(o, traced)) != OAR_OK) release_copies(o, true);
    if (st != OAR_OK) {
        oar_prof_pop();
        return st;
    }
    oar_no_grad_begin();
    for (int i = 0; i < o->n_params && st == OAR_OK; i++) {
        oar_optim_param *p = &o->params[i];
        if (!p->t->grad) continue;
        refresh_hyper(o, i); /* traced: before_run refreshes it again before every run */
        st = oar_optim_update_call(o->kind, p->t, p->grad_copy ? p->grad_copy : p->t->grad, p->hyper, p->slot);
    }
    oar_no_grad_end();
    release_copies(o, false);
    if (st == OAR_OK) { /* traced: after_run counts the runs */
        if (traced) rec->steps++;
        else o->steps++;
    }
    oar_prof_pop();
    return st;
}
