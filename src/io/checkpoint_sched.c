/* The LR scheduler in a checkpoint: its kind, step count t, plateau state and every group's
 * base and current lr, as metadata strings. Doubles are written with 17 significant digits,
 * which strtod reads back to the same bits, so a resumed schedule continues exactly. */
#include "io/checkpoint.h"
#include "optim/optim.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* n doubles as "a,b,c" (oar_malloc'd; NULL on OOM). */
static char *join(const double *v, int n) {
    size_t cap = (size_t)(n ? n : 1) * 26 + 1, len = 0;
    char *s = oar_malloc(cap);
    if (!s) return NULL;
    s[0] = '\0';
    for (int i = 0; i < n; i++) len += (size_t)snprintf(s + len, cap - len, "%s%.17g", i ? "," : "", v[i]);
    return s;
}

oar_status oar_ckpt_sched_meta(oar_scheduler *s, char *vals[OAR_CKPT_N_SCHED]) {
    for (int i = 0; i < OAR_CKPT_N_SCHED; i++) vals[i] = NULL;
    oar_status st = oar_sched_see_groups(s);
    if (st != OAR_OK) return st;
    int n = s->n_seen;
    double *lr = oar_malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (!lr) return OAR_ERR_OOM;
    for (int g = 0; g < n; g++) lr[g] = s->o->groups[g]->lr;
    char num[3][40];
    snprintf(num[0], sizeof num[0], "%" PRId64, s->t);
    snprintf(num[1], sizeof num[1], "%.17g", s->best);
    snprintf(num[2], sizeof num[2], "%" PRId64, s->bad_steps);
    vals[0] = oar_io_strdup(oar_sched_name(s->opts.kind));
    vals[1] = oar_io_strdup(num[0]);
    vals[2] = oar_io_strdup(num[1]);
    vals[3] = oar_io_strdup(num[2]);
    vals[4] = join(s->base, n);
    vals[5] = join(lr, n);
    free(lr);
    for (int i = 0; i < OAR_CKPT_N_SCHED; i++)
        if (!vals[i]) return oar_error(OAR_ERR_OOM, "checkpoint_save: out of memory writing the scheduler");
    return OAR_OK;
}

const char *const oar_ckpt_sched_keys[OAR_CKPT_N_SCHED] = {"sched_kind", "sched_t", "sched_best",
                                                            "sched_bad_steps", "sched_base", "sched_lr"};

/* Parses exactly n comma-separated finite doubles. */
static bool parse_list(const char *s, double *out, int n) {
    if (!s) return false;
    for (int i = 0; i < n; i++) {
        char *end = NULL;
        out[i] = strtod(s, &end);
        if (end == s || !isfinite(out[i]) || *end != (i + 1 < n ? ',' : '\0')) return false;
        s = end + (i + 1 < n);
    }
    return n > 0 || *s == '\0';
}

void oar_ckpt_sched_check(oar_tensor_dict *d, oar_scheduler *s, oar_ckpt_meta *meta, oar_ckpt_problems *p) {
    const char *v[OAR_CKPT_N_SCHED];
    for (int i = 0; i < OAR_CKPT_N_SCHED; i++) v[i] = oar_dict_meta(d, oar_ckpt_sched_keys[i]);
    const char *want = oar_sched_name(s->opts.kind);
    if (!v[0]) {
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "the file has no scheduler state but a scheduler was given (save it "
                                            "with oar_checkpoint_save_all, or pass NULL)");
        return;
    }
    if (strcmp(v[0], want) != 0) {
        oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "scheduler: %.40s in the file, %s given", v[0], want);
        return;
    }
    if (oar_sched_see_groups(s) != OAR_OK) { /* here, so that applying cannot fail */
        p->oom = true;
        return;
    }
    int n = s->o->n_groups;
    meta->sched_base = oar_malloc(sizeof(double) * (size_t)(2 * n + 1));
    if (!meta->sched_base) {
        p->oom = true;
        return;
    }
    meta->sched_lr = meta->sched_base + n;
    char *end = NULL;
    meta->sched.t = v[1] ? strtoll(v[1], &end, 10) : -1;
    bool ok = v[1] && *v[1] && !*end && meta->sched.t >= 0;
    meta->sched.best = v[2] ? strtod(v[2], &end) : NAN;
    ok = ok && *v[2] && !*end && !isnan(meta->sched.best);
    meta->sched.bad_steps = v[3] ? strtoll(v[3], &end, 10) : -1;
    ok = ok && *v[3] && !*end && meta->sched.bad_steps >= 0;
    if (!ok)
        oar_ckpt_problem(p, OAR_CKPT_OTHER, "metadata 'sched_t', 'sched_best' or 'sched_bad_steps' is absent or "
                                            "not a number of the right sign");
    if (!parse_list(v[4], meta->sched_base, n) || !parse_list(v[5], meta->sched_lr, n))
        oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "scheduler: 'sched_base' and 'sched_lr' in the file are not %d "
                                               "finite lrs (one per group of the scheduler's optimizer)", n);
    else if (s->opts.kind == OAR_SCHED_ONE_CYCLE && meta->sched.t > s->opts.t_max)
        oar_ckpt_problem(p, OAR_CKPT_MISMATCH, "scheduler: t = %lld in the file is past this OneCycleLR's t_max %lld",
                         (long long)meta->sched.t, (long long)s->opts.t_max);
    meta->has_sched = true;
}

void oar_ckpt_sched_apply(oar_scheduler *s, const oar_ckpt_meta *meta) {
    int n = s->o->n_groups;
    /* the base lrs come from the file, as the run that saved it first saw them (the check
     * made room for every group) */
    for (int g = 0; g < n && g < s->n_seen; g++) {
        s->base[g] = meta->sched_base[g];
        s->o->groups[g]->lr = meta->sched_lr[g];
    }
    s->t = meta->sched.t;
    s->best = meta->sched.best;
    s->bad_steps = meta->sched.bad_steps;
}
