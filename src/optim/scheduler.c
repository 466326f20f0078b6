/* Learning-rate schedules (torch.optim.lr_scheduler), as closed forms of the step count t from
 * each group's base lr; ReduceLROnPlateau keeps its own state. The formulas are in oar.h. */
#include "optim/optim.h"

#include <math.h>
#include <stdlib.h>

#define N_SCHED_KINDS 7

const char *oar_sched_name(oar_sched_kind k) {
    static const char *const names[N_SCHED_KINDS] = {"StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR",
                                                     "WarmupCosineLR", "OneCycleLR", "ReduceLROnPlateau"};
    return (unsigned)k < N_SCHED_KINDS ? names[k] : "scheduler";
}

oar_sched_opts oar_sched_defaults(oar_sched_kind kind) {
    oar_sched_opts o = {.kind = kind, .explicit_values = true};
    switch (kind) {
    case OAR_SCHED_STEP:
    case OAR_SCHED_MULTISTEP: o.gamma = 0.1; break;
    case OAR_SCHED_ONE_CYCLE: o.pct_start = 0.3, o.div_factor = 25, o.final_div_factor = 1e4; break;
    case OAR_SCHED_PLATEAU: o.gamma = 0.1, o.patience = 10, o.threshold = 1e-4; break;
    default: break;
    }
    return o;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static oar_status check(const oar_sched_opts *s) {
    const char *who = oar_sched_name(s->kind);
#define NEED(ok, fmt, ...) \
    if (!(ok)) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected " fmt, who, __VA_ARGS__)
    NEED((unsigned)s->kind < N_SCHED_KINDS, "a kind from OAR_SCHED_STEP (0) to OAR_SCHED_PLATEAU (%d), got %d",
         N_SCHED_KINDS - 1, (int)s->kind);
    NEED(isfinite(s->eta_min) && s->eta_min >= 0, "eta_min >= 0, got %g", s->eta_min);
    switch (s->kind) {
    case OAR_SCHED_STEP:
        NEED(s->step_size >= 1, "step_size >= 1, got %lld", (long long)s->step_size);
        NEED(isfinite(s->gamma) && s->gamma >= 0, "gamma >= 0, got %g", s->gamma);
        break;
    case OAR_SCHED_MULTISTEP:
        NEED(s->n_milestones >= 0 && s->n_milestones <= 16, "0 <= n_milestones <= 16, got %d", s->n_milestones);
        for (int i = 0; i < s->n_milestones; i++)
            NEED(s->milestones[i] >= 0, "milestones >= 0, got milestones[%d] = %lld", i, (long long)s->milestones[i]);
        NEED(isfinite(s->gamma) && s->gamma >= 0, "gamma >= 0, got %g", s->gamma);
        break;
    case OAR_SCHED_EXPONENTIAL:
        NEED(isfinite(s->gamma) && s->gamma > 0, "gamma > 0 (ExponentialLR has no default), got %g", s->gamma);
        break;
    case OAR_SCHED_COSINE: NEED(s->t_max >= 1, "t_max >= 1, got %lld", (long long)s->t_max); break;
    case OAR_SCHED_WARMUP_COSINE:
        NEED(s->warmup >= 0 && s->warmup < s->t_max, "0 <= warmup < t_max, got warmup %lld and t_max %lld",
             (long long)s->warmup, (long long)s->t_max);
        break;
    case OAR_SCHED_ONE_CYCLE: {
        NEED(s->t_max >= 1, "t_max (total steps) >= 1, got %lld", (long long)s->t_max);
        NEED(s->pct_start > 0 && s->pct_start < 1, "0 < pct_start < 1, got %g", s->pct_start);
        NEED(isfinite(s->max_lr) && s->max_lr >= 0, "max_lr >= 0, got %g", s->max_lr);
        NEED(isfinite(s->div_factor) && s->div_factor > 0, "div_factor > 0, got %g", s->div_factor);
        NEED(isfinite(s->final_div_factor) && s->final_div_factor > 0, "final_div_factor > 0, got %g",
             s->final_div_factor);
        double up_end = s->pct_start * (double)s->t_max - 1, down_end = (double)s->t_max - 1;
        NEED(up_end > 0 && down_end > up_end, "phases of positive length (pct_start * t_max > 1 and "
             "pct_start < 1), got pct_start %g and t_max %lld", s->pct_start, (long long)s->t_max);
        break;
    }
    case OAR_SCHED_PLATEAU:
        NEED(s->gamma >= 0 && s->gamma < 1, "0 <= gamma < 1 (the factor), got %g", s->gamma);
        NEED(s->patience >= 0, "patience >= 0, got %lld", (long long)s->patience);
        NEED(isfinite(s->threshold) && s->threshold >= 0, "threshold >= 0, got %g", s->threshold);
        break;
    }
#undef NEED
    return OAR_OK;
}

static oar_status resolve(const oar_sched_opts *in, oar_sched_opts *out) {
    if (!in) return oar_error(OAR_ERR_INVALID_ARG, "scheduler_new: expected options (at least the kind), got NULL");
    oar_sched_opts s = *in;
    if (!s.explicit_values && (unsigned)s.kind < N_SCHED_KINDS) {
        oar_sched_opts d = oar_sched_defaults(s.kind);
        if (s.gamma == 0) s.gamma = d.gamma;
        if (s.pct_start == 0) s.pct_start = d.pct_start;
        if (s.div_factor == 0) s.div_factor = d.div_factor;
        if (s.final_div_factor == 0) s.final_div_factor = d.final_div_factor;
        if (s.patience == 0) s.patience = d.patience;
        if (s.threshold == 0) s.threshold = d.threshold;
    }
    s.explicit_values = true;
    oar_status st = check(&s);
    if (st != OAR_OK) return st;
    qsort(s.milestones, (size_t)s.n_milestones, sizeof(int64_t), cmp_i64);
    *out = s;
    return OAR_OK;
}

/* torch's _annealing_cos: from start (pct 0) to end (pct 1). */
static double anneal_cos(double start, double end, double pct) {
    return end + (start - end) / 2.0 * (cos(M_PI * pct) + 1);
}

static double one_cycle(const oar_sched_opts *s, double base, double t) {
    double max_lr = s->max_lr > 0 ? s->max_lr : base;
    double initial = max_lr / s->div_factor, min_lr = initial / s->final_div_factor;
    double up_end = s->pct_start * (double)s->t_max - 1, down_end = (double)s->t_max - 1;
    if (t <= up_end) return anneal_cos(initial, max_lr, t / up_end);
    return anneal_cos(max_lr, min_lr, (t - up_end) / (down_end - up_end));
}

static double closed_form(const oar_sched_opts *s, double base, int64_t t) {
    double td = (double)t;
    switch (s->kind) {
    case OAR_SCHED_STEP: return base * pow(s->gamma, (double)(t / s->step_size));
    case OAR_SCHED_MULTISTEP: {
        int k = 0;
        while (k < s->n_milestones && s->milestones[k] <= t) k++;
        return base * pow(s->gamma, k);
    }
    case OAR_SCHED_EXPONENTIAL: return base * pow(s->gamma, td);
    case OAR_SCHED_COSINE: return s->eta_min + (base - s->eta_min) * (1 + cos(M_PI * td / (double)s->t_max)) / 2;
    case OAR_SCHED_WARMUP_COSINE:
        if (t < s->warmup) return base * td / (double)s->warmup;
        if (t > s->t_max) return s->eta_min;
        return s->eta_min + (base - s->eta_min) *
                                (1 + cos(M_PI * (td - (double)s->warmup) / (double)(s->t_max - s->warmup))) / 2;
    case OAR_SCHED_ONE_CYCLE: return one_cycle(s, base, td);
    case OAR_SCHED_PLATEAU: break;
    }
    return base;
}

/* Records the base lr of groups added since the last call. */
oar_status oar_sched_see_groups(oar_scheduler *s) {
    int n = s->o->n_groups;
    if (n <= s->n_seen) return OAR_OK;
    double *b = oar_realloc(s->base, sizeof(double) * (size_t)n);
    if (!b) return OAR_ERR_OOM;
    s->base = b;
    for (int g = s->n_seen; g < n; g++) b[g] = s->o->groups[g]->lr;
    s->n_seen = n;
    return OAR_OK;
}

static void set_lrs(oar_scheduler *s) {
    for (int g = 0; g < s->n_seen; g++) s->o->groups[g]->lr = closed_form(&s->opts, s->base[g], s->t);
}

oar_scheduler *oar_scheduler_new(oar_optimizer *o, const oar_sched_opts *opts) {
    if (!o) {
        oar_error(OAR_ERR_INVALID_ARG, "scheduler_new: expected an optimizer, got NULL");
        return NULL;
    }
    oar_sched_opts resolved;
    if (resolve(opts, &resolved) != OAR_OK) return NULL;
    oar_scheduler *s = OAR_NEW(oar_scheduler);
    if (!s) return NULL;
    s->o = o;
    s->opts = resolved;
    s->best = resolved.mode_max ? -INFINITY : INFINITY;
    if (oar_sched_see_groups(s) != OAR_OK) {
        oar_scheduler_free(s);
        return NULL;
    }
    if (resolved.kind != OAR_SCHED_PLATEAU) set_lrs(s);
    return s;
}

static void plateau_step(oar_scheduler *s, double metric) {
    const oar_sched_opts *p = &s->opts;
    bool better = p->mode_max ? metric > s->best * (1 + p->threshold) : metric < s->best * (1 - p->threshold);
    if (better) {
        s->best = metric;
        s->bad_steps = 0;
    } else {
        s->bad_steps++;
    }
    if (s->bad_steps <= p->patience) return;
    for (int g = 0; g < s->n_seen; g++) {
        double old_lr = s->o->groups[g]->lr, new_lr = fmax(old_lr * p->gamma, p->eta_min);
        if (old_lr - new_lr > 1e-8) s->o->groups[g]->lr = new_lr;
    }
    s->bad_steps = 0;
}

oar_status oar_scheduler_step(oar_scheduler *s, double metric) {
    if (!s) return oar_error(OAR_ERR_INVALID_ARG, "scheduler_step: expected a scheduler, got NULL");
    const char *who = oar_sched_name(s->opts.kind);
    if (s->opts.kind == OAR_SCHED_ONE_CYCLE && s->t + 1 > s->opts.t_max)
        return oar_error(OAR_ERR_STATE, "%s: expected at most t_max = %lld steps (the total), got step %lld", who,
                         (long long)s->opts.t_max, (long long)(s->t + 1));
    oar_status st = oar_sched_see_groups(s);
    if (st != OAR_OK) return st;
    s->t++;
    if (s->opts.kind == OAR_SCHED_PLATEAU) plateau_step(s, metric);
    else set_lrs(s);
    return OAR_OK;
}

double oar_scheduler_lr(const oar_scheduler *s, int group) {
    if (!s || group < 0 || group >= s->o->n_groups) {
        oar_error(OAR_ERR_INVALID_ARG, "scheduler_lr: expected a group in [0, %d), got %d", s ? s->o->n_groups : 0,
                  group);
        return NAN;
    }
    return s->o->groups[group]->lr;
}

int64_t oar_scheduler_t(const oar_scheduler *s) { return s ? s->t : 0; }

oar_status oar_scheduler_next(oar_scheduler *s) {
    if (s && s->opts.kind == OAR_SCHED_PLATEAU)
        return oar_error(OAR_ERR_INVALID_ARG, "ReduceLROnPlateau: expected oar_scheduler_step(s, metric): it "
                                              "needs the metric, got oar_scheduler_next");
    return oar_scheduler_step(s, 0);
}

oar_sched_state oar_scheduler_get_state(const oar_scheduler *s) {
    oar_sched_state st = {0};
    if (s) st = (oar_sched_state){.t = s->t, .best = s->best, .bad_steps = s->bad_steps};
    return st;
}

oar_status oar_scheduler_set_state(oar_scheduler *s, const oar_sched_state *st) {
    if (!s || !st)
        return oar_error(OAR_ERR_INVALID_ARG, "scheduler_set_state: expected a scheduler and a state, got %s",
                         s ? "a NULL state" : "a NULL scheduler");
    const char *who = oar_sched_name(s->opts.kind);
    if (st->t < 0) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected t >= 0, got %lld", who, (long long)st->t);
    if (s->opts.kind == OAR_SCHED_ONE_CYCLE && st->t > s->opts.t_max)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected t <= t_max = %lld, got %lld", who,
                         (long long)s->opts.t_max, (long long)st->t);
    if (st->bad_steps < 0 || isnan(st->best))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected bad_steps >= 0 and a best metric that is not NaN, got "
                         "%lld and %g", who, (long long)st->bad_steps, st->best);
    oar_status rc = oar_sched_see_groups(s);
    if (rc != OAR_OK) return rc;
    s->t = st->t;
    s->best = st->best;
    s->bad_steps = st->bad_steps;
    /* the closed forms are functions of t: the lr is what t steps would have set; the plateau's
     * lr is history, kept in the optimizer's options */
    if (s->opts.kind != OAR_SCHED_PLATEAU) set_lrs(s);
    return OAR_OK;
}

void oar_scheduler_free(oar_scheduler *s) {
    if (!s) return;
    free(s->base);
    free(s);
}
