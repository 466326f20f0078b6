/* Optimizer options: torch's defaults per kind, how zero fields map to them, and the checks
 * torch makes on hyper-parameters. */
#include "optim/optim.h"

#include <math.h>

#define N_KINDS (OAR_OPTIM_RPROP + 1)

const char *oar_optim_kind_name(oar_optim_kind kind) {
    static const char *const names[N_KINDS] = {"SGD",     "Adam",   "AdamW", "RMSprop", "Adagrad", "LAMB",
                                               "Adadelta", "Adamax", "NAdam", "RAdam",   "ASGD",    "Rprop"};
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
    case OAR_OPTIM_ADADELTA: o.lr = 1.0, o.rho = 0.9, o.eps = 1e-6; break;
    case OAR_OPTIM_NADAM: o.momentum_decay = 4e-3; /* fall through */
    case OAR_OPTIM_ADAMAX: o.lr = 2e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8; break;
    case OAR_OPTIM_RADAM: o.lr = 1e-3, o.beta1 = 0.9, o.beta2 = 0.999, o.eps = 1e-8; break;
    case OAR_OPTIM_ASGD: o.lr = 1e-2, o.lambd = 1e-4, o.alpha = 0.75, o.t0 = 1e6; break;
    case OAR_OPTIM_RPROP:
        o.lr = 1e-2, o.etaminus = 0.5, o.etaplus = 1.2, o.step_size_min = 1e-6, o.step_size_max = 50;
        break;
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
static bool has_maximize(oar_optim_kind k) {
    return k == OAR_OPTIM_ADADELTA || k == OAR_OPTIM_ADAMAX || k == OAR_OPTIM_ASGD || k == OAR_OPTIM_RPROP;
}

oar_status oar_optim_check(const oar_optim_opts *o, bool creating) {
    if ((unsigned)o->kind >= N_KINDS)
        return oar_error(OAR_ERR_INVALID_ARG, "optimizer: expected a kind from OAR_OPTIM_SGD (0) to OAR_OPTIM_RPROP "
                                              "(%d), got %d", N_KINDS - 1, (int)o->kind);
    const char *who = oar_optim_kind_name(o->kind);
    if (creating && o->kind == OAR_OPTIM_SGD && o->lr == 0)
        return oar_error(OAR_ERR_INVALID_ARG, "SGD: expected lr > 0 (SGD has no default learning rate), got 0");
    NEED(nonneg(o->lr), "lr >= 0", o->lr);
    NEED(nonneg(o->weight_decay), "weight_decay >= 0", o->weight_decay);
    if (o->maximize && !has_maximize(o->kind))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected maximize false, got true (oar offers maximize for "
                                              "Adadelta, Adamax, ASGD and Rprop%s); minimize the negated loss instead",
                         who,
                         o->kind == OAR_OPTIM_NADAM || o->kind == OAR_OPTIM_RADAM ? "; torch 1.13's has none" : "");
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
    case OAR_OPTIM_ADADELTA:
        NEED(o->rho >= 0 && o->rho <= 1, "0 <= rho <= 1", o->rho);
        NEED(nonneg(o->eps), "eps >= 0", o->eps);
        break;
    case OAR_OPTIM_NADAM:
        NEED(nonneg(o->momentum_decay), "momentum_decay >= 0", o->momentum_decay);
        /* fall through */
    case OAR_OPTIM_ADAMAX:
    case OAR_OPTIM_RADAM:
        NEED(unit(o->beta1), "0 <= beta1 < 1", o->beta1);
        NEED(unit(o->beta2), "0 <= beta2 < 1", o->beta2);
        NEED(nonneg(o->eps), "eps >= 0", o->eps);
        break;
    case OAR_OPTIM_ASGD: /* torch checks none of these; NaN would only spread */
        NEED(isfinite(o->lambd), "a finite lambd", o->lambd);
        NEED(isfinite(o->alpha), "a finite alpha", o->alpha);
        NEED(!isnan(o->t0), "t0 not NaN", o->t0);
        break;
    case OAR_OPTIM_RPROP:
        NEED(o->weight_decay == 0, "weight_decay 0 (torch 1.13's Rprop has none)", o->weight_decay);
        NEED(o->etaminus > 0 && o->etaminus < 1, "0 < etaminus < 1", o->etaminus);
        NEED(o->etaplus > 1 && isfinite(o->etaplus), "a finite etaplus > 1", o->etaplus);
        NEED(!isnan(o->step_size_min), "step_size_min not NaN", o->step_size_min);
        NEED(!isnan(o->step_size_max), "step_size_max not NaN", o->step_size_max);
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
        if (o.rho == 0) o.rho = d.rho;
        if (o.momentum_decay == 0) o.momentum_decay = d.momentum_decay;
        if (o.lambd == 0) o.lambd = d.lambd;
        if (o.t0 == 0) o.t0 = d.t0;
        if (o.etaminus == 0) o.etaminus = d.etaminus;
        if (o.etaplus == 0) o.etaplus = d.etaplus;
        if (o.step_size_min == 0) o.step_size_min = d.step_size_min;
        if (o.step_size_max == 0) o.step_size_max = d.step_size_max;
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
    case OAR_OPTIM_RADAM:
        return slot == OAR_SLOT_STEP || slot == OAR_SLOT_EXP_AVG || slot == OAR_SLOT_EXP_AVG_SQ;
    default: return oar_optim_kind_slot(o->kind, slot);
    }
    return false;
}

bool oar_optim_kind_slot(oar_optim_kind kind, oar_slot s) {
    switch (kind) {
    case OAR_OPTIM_ADADELTA: return s == OAR_SLOT_STEP || s == OAR_SLOT_SQUARE_AVG || s == OAR_SLOT_ACC_DELTA;
    case OAR_OPTIM_ADAMAX: return s == OAR_SLOT_STEP || s == OAR_SLOT_EXP_AVG || s == OAR_SLOT_EXP_INF;
    case OAR_OPTIM_NADAM:
        return s == OAR_SLOT_STEP || s == OAR_SLOT_EXP_AVG || s == OAR_SLOT_EXP_AVG_SQ || s == OAR_SLOT_MU_PRODUCT;
    case OAR_OPTIM_RADAM: return s == OAR_SLOT_STEP || s == OAR_SLOT_EXP_AVG || s == OAR_SLOT_EXP_AVG_SQ;
    case OAR_OPTIM_ASGD: return s == OAR_SLOT_STEP || s == OAR_SLOT_ETA || s == OAR_SLOT_MU || s == OAR_SLOT_AX;
    case OAR_OPTIM_RPROP: return s == OAR_SLOT_STEP || s == OAR_SLOT_PREV || s == OAR_SLOT_STEP_SIZE;
    default: return false;
    }
}

double oar_optim_slot_init(const oar_optim_opts *o, oar_slot s) {
    switch (s) {
    case OAR_SLOT_SUM: return o->initial_accumulator;
    case OAR_SLOT_MU_PRODUCT:
    case OAR_SLOT_MU: return 1.0;
    case OAR_SLOT_ETA:
    case OAR_SLOT_STEP_SIZE: return o->lr;
    default: return 0.0;
    }
}

bool oar_optim_kind_cpu_only(oar_optim_kind kind) { return kind >= OAR_OPTIM_ADADELTA; }
