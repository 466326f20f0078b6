/* Golden values from PyTorch for optimizers and lr schedules (tests/golden/optim.txt, made by
 * gen_optim.py; the test does not need torch). Each optimizer case sets the recorded gradients
 * through backward, steps, and compares the parameters after every step and the final state
 * by name; each schedule case compares every group's lr after creation and after each step.
 *
 * Tolerance. oar runs torch's operations in torch's order with torch's scalars rounded to the
 * parameter's dtype, so the two differ only by rounding: torch's vectorized kernels fuse some
 * multiply-adds and LAMB's norms are summed in another order. Rounding errors are relative to
 * the terms combined, which are as large as the tensor's values even where an element is
 * near zero by cancellation (e.g. exp_avg), so an element may differ by 1e-6 (f32; 1e-12 for
 * f64) times the larger of its magnitude and half the tensor's largest magnitude. The worst
 * seen is 3.3e-7 of the value (f32, after 5 steps: a few ulp), leaving a margin of 2.5x or
 * more; any change of formula moves values by ~lr * 1e-2 or more. Schedules are double closed
 * forms against torch's chainable forms: 1e-9 relative. */
#include "test_util.h"
#include "golden_util.h"

#include <stddef.h>

#define MAX_LINE (1 << 16)
#define MAX_PARAMS 4
#define MAX_STEPS 8
#define MAX_SCHED 16


/* Compares got with want elementwise; on failure prints the first bad element. */
static bool close_to(const char *what, oar_tensor *got, oar_tensor *want) {
    if (!got || oar_ndim(got) != oar_ndim(want) || oar_numel(got) != oar_numel(want) ||
        oar_dtype_of(got) != oar_dtype_of(want)) {
        fprintf(stderr, "%s: shape or dtype differs from torch\n", what);
        return false;
    }
    int64_t n = oar_numel(want);
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    oar_copy_to_buffer(got, a, sizeof(double) * (size_t)n, OAR_F64);
    oar_copy_to_buffer(want, b, sizeof(double) * (size_t)n, OAR_F64);
    double rel = oar_dtype_of(want) == OAR_F64 ? 1e-12 : oar_dtype_of(want) == OAR_F32 ? 1e-6 : 0, big = 0;
    for (int64_t i = 0; i < n; i++) big = fmax(big, fabs(b[i]));
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++)
        if (!(fabs(a[i] - b[i]) <= rel * fmax(fabs(b[i]), 0.5 * big))) {
            fprintf(stderr, "%s: element %lld is %.9g, torch gives %.9g\n", what, (long long)i, a[i], b[i]);
            ok = false;
        }
    free(a);
    free(b);
    return ok;
}

/* ---- "key=value" options */
typedef enum { F_DOUBLE, F_I64, F_INT, F_BOOL, F_ENUM, F_LIST } ftype;
typedef struct field { const char *key; size_t off; ftype type; } field;

static const field OPTIM_FIELDS[] = {
    {"kind", offsetof(oar_optim_opts, kind), F_ENUM},
    {"lr", offsetof(oar_optim_opts, lr), F_DOUBLE},
    {"momentum", offsetof(oar_optim_opts, momentum), F_DOUBLE},
    {"dampening", offsetof(oar_optim_opts, dampening), F_DOUBLE},
    {"nesterov", offsetof(oar_optim_opts, nesterov), F_BOOL},
    {"weight_decay", offsetof(oar_optim_opts, weight_decay), F_DOUBLE},
    {"beta1", offsetof(oar_optim_opts, beta1), F_DOUBLE},
    {"beta2", offsetof(oar_optim_opts, beta2), F_DOUBLE},
    {"eps", offsetof(oar_optim_opts, eps), F_DOUBLE},
    {"amsgrad", offsetof(oar_optim_opts, amsgrad), F_BOOL},
    {"alpha", offsetof(oar_optim_opts, alpha), F_DOUBLE},
    {"centered", offsetof(oar_optim_opts, centered), F_BOOL},
    {"lr_decay", offsetof(oar_optim_opts, lr_decay), F_DOUBLE},
    {"initial_accumulator", offsetof(oar_optim_opts, initial_accumulator), F_DOUBLE},
    {"maximize", offsetof(oar_optim_opts, maximize), F_BOOL},
    {"rho", offsetof(oar_optim_opts, rho), F_DOUBLE},
    {"momentum_decay", offsetof(oar_optim_opts, momentum_decay), F_DOUBLE},
    {"lambd", offsetof(oar_optim_opts, lambd), F_DOUBLE},
    {"t0", offsetof(oar_optim_opts, t0), F_DOUBLE},
    {"etaminus", offsetof(oar_optim_opts, etaminus), F_DOUBLE},
    {"etaplus", offsetof(oar_optim_opts, etaplus), F_DOUBLE},
    {"step_size_min", offsetof(oar_optim_opts, step_size_min), F_DOUBLE},
    {"step_size_max", offsetof(oar_optim_opts, step_size_max), F_DOUBLE},
    {"explicit_values", offsetof(oar_optim_opts, explicit_values), F_BOOL},
    {NULL, 0, F_INT},
};

static const field SCHED_FIELDS[] = {
    {"kind", offsetof(oar_sched_opts, kind), F_ENUM},
    {"step_size", offsetof(oar_sched_opts, step_size), F_I64},
    {"t_max", offsetof(oar_sched_opts, t_max), F_I64},
    {"warmup", offsetof(oar_sched_opts, warmup), F_I64},
    {"patience", offsetof(oar_sched_opts, patience), F_I64},
    {"milestones", offsetof(oar_sched_opts, milestones), F_LIST},
    {"n_milestones", offsetof(oar_sched_opts, n_milestones), F_INT},
    {"gamma", offsetof(oar_sched_opts, gamma), F_DOUBLE},
    {"eta_min", offsetof(oar_sched_opts, eta_min), F_DOUBLE},
    {"max_lr", offsetof(oar_sched_opts, max_lr), F_DOUBLE},
    {"pct_start", offsetof(oar_sched_opts, pct_start), F_DOUBLE},
    {"div_factor", offsetof(oar_sched_opts, div_factor), F_DOUBLE},
    {"final_div_factor", offsetof(oar_sched_opts, final_div_factor), F_DOUBLE},
    {"threshold", offsetof(oar_sched_opts, threshold), F_DOUBLE},
    {"mode_max", offsetof(oar_sched_opts, mode_max), F_BOOL},
    {"explicit_values", offsetof(oar_sched_opts, explicit_values), F_BOOL},
    {NULL, 0, F_INT},
};

/* Parses the "key=value ..." after '|' into the struct at base; false on an unknown key. */
static bool parse_fields(const char *s, const field *fields, void *base) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) {
        char *eq = strchr(tok, '=');
        if (!eq) return false;
        *eq = '\0';
        const field *f = fields;
        while (f->key && strcmp(f->key, tok)) f++;
        if (!f->key) {
            fprintf(stderr, "golden optim: unknown option '%s'\n", tok);
            return false;
        }
        char *at = (char *)base + f->off, *v = eq + 1;
        switch (f->type) {
        case F_DOUBLE: *(double *)at = strtod(v, NULL); break;
        case F_I64: *(int64_t *)at = strtoll(v, NULL, 10); break;
        case F_INT: *(int *)at = atoi(v); break;
        case F_ENUM: *(int *)at = atoi(v); break; /* both kind enums are int-sized */
        case F_BOOL: *(bool *)at = atoi(v) != 0; break;
        case F_LIST:
            for (int k = 0; *v && k < 16; k++) {
                ((int64_t *)at)[k] = strtoll(v, &v, 10);
                if (*v == ',') v++;
            }
            break;
        }
    }
    return true;
}

/* ---- optimizer cases */
typedef struct ocase {
    char label[64];
    oar_optim_opts opts;
    oar_tensor *init[MAX_PARAMS], *grad[MAX_STEPS][MAX_PARAMS], *after[MAX_STEPS][MAX_PARAMS];
    char *state_names[32];
    oar_tensor *state[32];
    int n_params, n_steps, n_state;
} ocase;

static void set_grad(oar_tensor *p, oar_tensor *g) {
    oar_zero_grad(p);
    if (!g) return;
    oar_scope_begin(); /* d/dp sum(p * g) = g exactly */
    oar_tensor *loss = oar_sum(oar_mul(p, g), NULL, 0, false);
    CHECK(oar_backward(loss, NULL, false) == OAR_OK);
    oar_scope_end();
}

static void run_optim(ocase *c) {
    char what[160];
    oar_tensor *params[MAX_PARAMS];
    for (int i = 0; i < c->n_params; i++) {
        params[i] = oar_clone(c->init[i]);
        oar_set_requires_grad(params[i], true);
    }
    oar_optimizer *o = oar_optimizer_new(params, c->n_params, &c->opts);
    CHECK(o != NULL);
    for (int s = 0; o && s < c->n_steps; s++) {
        for (int i = 0; i < c->n_params; i++) set_grad(params[i], c->grad[s][i]);
        CHECK(oar_optimizer_step(o) == OAR_OK);
        for (int i = 0; i < c->n_params; i++) {
            snprintf(what, sizeof what, "golden optim %s: parameter %d after step %d", c->label, i, s);
            CHECK(close_to(what, params[i], c->after[s][i]));
        }
    }
    if (o) {
        CHECK(oar_optimizer_num_state(o) == c->n_state);
        for (int k = 0; k < c->n_state; k++) {
            oar_tensor *got = NULL;
            for (int j = 0; j < oar_optimizer_num_state(o) && !got; j++) {
                const char *name;
                oar_tensor *t = oar_optimizer_state(o, j, &name);
                if (!strcmp(name, c->state_names[k])) got = t;
            }
            snprintf(what, sizeof what, "golden optim %s: state %s", c->label, c->state_names[k]);
            if (!got) fprintf(stderr, "%s: missing\n", what);
            CHECK(got && close_to(what, got, c->state[k]));
        }
    }
    oar_optimizer_free(o);
    for (int i = 0; i < c->n_params; i++) oar_release(params[i]);
}

static void clear_optim(ocase *c) {
    for (int i = 0; i < MAX_PARAMS; i++) {
        oar_release(c->init[i]);
        for (int s = 0; s < MAX_STEPS; s++) {
            oar_release(c->grad[s][i]);
            oar_release(c->after[s][i]);
        }
    }
    for (int k = 0; k < c->n_state; k++) {
        free(c->state_names[k]);
        oar_release(c->state[k]);
    }
    memset(c, 0, sizeof *c);
}

/* ---- schedule cases */
typedef struct scase {
    char label[64];
    oar_sched_opts opts;
    double metrics[MAX_SCHED], lrs[2][MAX_SCHED + 1];
    int n_lrs;
} scase;

static int parse_doubles(const char *s, double *out, int max) {
    int n = 0;
    char *p = (char *)s;
    while (n < max) {
        char *end;
        double v = strtod(p, &end);
        if (end == p) break;
        out[n++] = v;
        p = end;
    }
    return n;
}

static void run_sched(scase *c) {
    int64_t shape[1] = {1};
    oar_tensor *p0 = oar_zeros(shape, 1, OAR_F32), *p1 = oar_zeros(shape, 1, OAR_F32);
    oar_optim_opts sgd = oar_optim_defaults(OAR_OPTIM_SGD);
    sgd.lr = 0.1;
    oar_optimizer *o = oar_optimizer_new(&p0, 1, &sgd);
    sgd.lr = 0.05;
    CHECK(oar_optimizer_add_group(o, &p1, 1, &sgd) == 1);
    oar_scheduler *s = oar_scheduler_new(o, &c->opts);
    CHECK(s != NULL);
    for (int t = 0; s && t < c->n_lrs; t++) {
        if (t > 0) CHECK(oar_scheduler_step(s, c->metrics[t - 1]) == OAR_OK);
        for (int g = 0; g < 2; g++) {
            double got = oar_scheduler_lr(s, g), want = c->lrs[g][t];
            bool ok = fabs(got - want) <= 1e-9 * fabs(want) + 1e-15;
            if (!ok)
                fprintf(stderr, "golden sched %s: group %d lr at t=%d is %.15g, torch gives %.15g\n", c->label, g, t,
                        got, want);
            CHECK(ok);
        }
    }
    oar_scheduler_free(s);
    oar_optimizer_free(o);
    oar_release(p0);
    oar_release(p1);
}

int main(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/optim.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_golden_optim: skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return 0;
    }
    char *line = malloc(MAX_LINE);
    ocase oc = {0};
    scase sc = {0};
    bool in_sched = false;
    int n_optim = 0, n_sched = 0;
    while (fgets(line, MAX_LINE, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *bar = strchr(line, '|');
        if (!strncmp(line, "optim ", 6) && bar) {
            sscanf(line + 6, "%63s", oc.label);
            CHECK(parse_fields(bar + 1, OPTIM_FIELDS, &oc.opts));
            in_sched = false;
        } else if (!strncmp(line, "sched ", 6) && bar) {
            memset(&sc, 0, sizeof sc);
            sscanf(line + 6, "%63s", sc.label);
            CHECK(parse_fields(bar + 1, SCHED_FIELDS, &sc.opts));
            in_sched = true;
        } else if (!strncmp(line, "param ", 6)) {
            int i = atoi(line + 6);
            if (i < MAX_PARAMS) {
                oc.init[i] = golden_parse_tensor(strchr(line + 6, ' ') + 1);
                if (i + 1 > oc.n_params) oc.n_params = i + 1;
            }
        } else if (!strncmp(line, "grad ", 5) || !strncmp(line, "after ", 6)) {
            char *p = strchr(line, ' ') + 1;
            int s = (int)strtol(p, &p, 10), i = (int)strtol(p, &p, 10);
            if (s < MAX_STEPS && i < MAX_PARAMS) {
                oar_tensor *t = strstr(p, "none") ? NULL : golden_parse_tensor(p + 1);
                if (line[0] == 'g') oc.grad[s][i] = t;
                else oc.after[s][i] = t;
                if (s + 1 > oc.n_steps) oc.n_steps = s + 1;
            }
        } else if (!strncmp(line, "state ", 6) && oc.n_state < 32) {
            char name[64];
            sscanf(line + 6, "%63s", name);
            oc.state_names[oc.n_state] = strdup(name);
            oc.state[oc.n_state++] = golden_parse_tensor(line + 6 + strlen(name) + 1);
        } else if (!strncmp(line, "metrics", 7) && bar) {
            parse_doubles(bar + 1, sc.metrics, MAX_SCHED);
        } else if (!strncmp(line, "lrs ", 4) && bar) {
            int g = atoi(line + 4);
            if (g < 2) sc.n_lrs = parse_doubles(bar + 1, sc.lrs[g], MAX_SCHED + 1);
        } else if (!strcmp(line, "end")) {
            if (in_sched) {
                run_sched(&sc);
                n_sched++;
            } else {
                run_optim(&oc);
                clear_optim(&oc);
                n_optim++;
            }
        }
    }
    fclose(f);
    free(line);
    printf("test_golden_optim: %d optimizer and %d schedule cases from torch\n", n_optim, n_sched);
    CHECK(n_optim >= 20 && n_sched >= 8);
    return test_summary("test_golden_optim");
}
