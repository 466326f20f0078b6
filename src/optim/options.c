/* Optimizer options: torch's defaults per kind, how zero fields map to them, and the checks
 * torch makes on hyper-parameters. */
#include "optim/optim.h"

#include <math.h>

#define N_KINDS 6

const char *oar_optim_kind_name(oar_optim_kind kind) {
    static const char *const names[N_KINDS] = {"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "LAMB"};
    return (unsigned)kind < N_KINDS ? names[kind] : "optimizer";
}

oar_optim_opts oar_optim_defaults(oar_optim_kind kind) {
    oar_optim_opts o = {.kind = kind, .explicit_values = true};
    switch (kind) {
    case OAR_OPTIM_SGD: break; /* lr has no default */
    case OAR_OPTIM_ADAMW: o.weight_decay = 1e-2; /* fall through */
    case OAR_OPTIM_ADAM: o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8; break;
    case OAR_OPTIM_RMSPROP: o.lr = 1e-2, o.alpha = 0.99, o.eps = 1e-8; break;
    case OAR_OPTIM_ADAGRAD: o.lr = 1e-2, o.eps = 1e-10; break;
    case OAR_OPTIM_LAMB: o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-6; break;
    }
    return o;
}

static oar_status need(const char *who, bool ok, const char *expected, double got) {
    return ok ? OAR_OK : oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s, got %g", who, expected, got);
}

#define NEED(ok, expected, got)                                         \
    do {                                                                \
        oar_status st_ = need(who, (ok), (expected), (got));            \
        if (st_ != OAR_OK) return st_;                                  \
    } while (0)

static bool nonneg(double x) { return x >= 0 && isfinite(x); }
static bool unit(double x) { return x >= 0 && x < 1; }

oar_status oar_optim_check(const oar_optim_opts *o, bool creating) {
    if ((unsigned)o->kind >= N_KINDS)
        return oar_error(OAR_ERR_INVALID_ARG, "optimizer: expected a kind from OAR_OPTIM_SGD (0) to OAR_OPTIM_LAMB "
                                              "(%d), got %d", N_KINDS - 1, (int)o->kind);
    const char *who = oar_optim_kind_name(o->kind);
    if (creating && o->kind == OAR_OPTIM_SGD && o->lr == 0)
        return oar_error(OAR_ERR_INVALID_ARG, "SGD: expected lr > 0 (SGD has no default learning rate), got 0");
    NEED(nonneg(o->lr), "lr >= 0", o->lr);
    NEED(nonneg(o->weight_decay), "weight_decay >= 0", o->weight_decay);
    switch (o->kind) {
    case OAR_OPTIM_SGD:
        NEED(nonneg(o->momentum), "momentum >= 0", o->momentum);
        NEED(isfinite(o->dampening), "a finite dampening", o->dampening);
        if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
            return oar_error(OAR_ERR_INVALID_ARG, "SGD: expected momentum > 0 and dampening == 0 with nesterov, "
                                                  "got momentum %g and dampening %g", o->momentum, o->dampening);
        break;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW:
    case OAR_OPTIM_LAMB:
        NEED(unit(o->beta1), "0 <= beta1 < 1", o->beta1);
        NEED(unit(o->beta2), "0 <= beta2 < 1", o->beta2);
        NEED(nonneg(o->eps), "eps >= 0", o->eps);
        break;
    case OAR_OPTIM_RMSPROP:
        NEED(nonneg(o->alpha), "alpha >= 0", o->alpha);
        NEED(nonneg(o->momentum), "momentum >= 0", o->momentum);
        NEED(nonneg(o->eps), "eps >= 0", o->eps);
        break;
    case OAR_OPTIM_ADAGRAD:
        NEED(nonneg(o->lr_decay), "lr_decay >= 0", o->lr_decay);
        NEED(nonneg(o->initial_accumulator), "initial_accumulator >= 0", o->initial_accumulator);
        NEED(nonneg(o->eps), "eps >= 0", o->eps);
        break;
    }
    return OAR_OK;
}

oar_status oar_optim_resolve(const oar_optim_opts *in, oar_optim_opts *out, bool creating) {
    oar_optim_opts o = in ? *in : (oar_optim_opts){0};
    if (!o.explicit_values && (unsigned)o.kind < N_KINDS) {
        oar_optim_opts d = oar_optim_defaults(o.kind);
        if (o.lr == 0) o.lr = d.lr;
        if (o.beta1 == 0) o.beta1 = d.beta1;
        if (o.beta2 == 0) o.beta2 = d.beta2;
        if (o.eps == 0) o.eps = d.eps;
        if (o.alpha == 0) o.alpha = d.alpha;
        if (o.weight_decay == 0) o.weight_decay = d.weight_decay;
    }
    o.explicit_values = true;
    oar_status st = oar_optim_check(&o, creating);
    if (st == OAR_OK) *out = o;
    return st;
}

bool oar_optim_slot_used(const oar_optim_opts *o, oar_slot slot) {
    switch (o->kind) {
    case OAR_OPTIM_SGD: return slot == OAR_SLOT_MOMENTUM_BUFFER && o->momentum != 0;
    case OAR_OPTIM_ADAM:
    case OAR_OPTIM_ADAMW:
        return slot == OAR_SLOT_STEP || slot == OAR_SLOT_EXP_AVG || slot == OAR_SLOT_EXP_AVG_SQ ||
               (slot == OAR_SLOT_MAX_EXP_AVG_SQ && o->amsgrad);
    case OAR_OPTIM_RMSPROP:
        return slot == OAR_SLOT_STEP || slot == OAR_SLOT_SQUARE_AVG ||
               (slot == OAR_SLOT_MOMENTUM_BUFFER && o->momentum > 0) || (slot == OAR_SLOT_GRAD_AVG && o->centered);
    case OAR_OPTIM_ADAGRAD: return slot == OAR_SLOT_STEP || slot == OAR_SLOT_SUM;
    case OAR_OPTIM_LAMB:
        return slot == OAR_SLOT_STEP || slot == OAR_SLOT_EXP_AVG || slot == OAR_SLOT_EXP_AVG_SQ;
    }
    return false;
}
