/* The harness of the module golden tests (test_golden_rnn.c, test_golden_transformer.c): a
 * file of cases made by a generator under tests/golden/ (torch's parameters by name, inputs,
 * outputs, the weights w_k and the gradients of sum_k sum(out_k * w_k)); each case is loaded
 * into the module the test builds, in torch's parameter names and order, and its outputs and
 * gradients compared. The test defines build() and forward_inputs() after including this. */
#ifndef OAR_GOLDEN_MODULE_H
#define OAR_GOLDEN_MODULE_H

#include "ops/op.h"
#include "golden_util.h"
#include "test_util.h"

#define MAX_LINE (1 << 20)
#define MAX_NAMED 32

typedef struct named {
    char name[64];
    oar_tensor *t;
} named;

typedef struct gcase {
    char kind[16], attrs[256];
    named params[MAX_NAMED], inputs[4], grads[MAX_NAMED];
    oar_tensor *out[4], *w[4];
    int n_params, n_inputs, n_grads, n_out;
} gcase;

static double worst[2]; /* largest |a - b| / (1 + |b|) seen, per pass */


static bool matches(const char *what, oar_tensor *got, oar_tensor *want, double tol, int pass) {
    if (!got || got->ndim != want->ndim || memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim)) {
        fprintf(stderr, "%s: %s\n", what, got ? "shape differs from torch" : oar_last_error());
        return false;
    }
    int64_t n = want->numel;
    double *a = malloc(sizeof(double) * (size_t)n);
    oar_copy_to_buffer(got, a, sizeof(double) * (size_t)n, OAR_F64);
    const double *b = (const double *)oar_tensor_ptr(want);
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        double err = fabs(a[i] - b[i]) / (1 + fabs(b[i]));
        if (err > worst[pass]) worst[pass] = err;
        if (!(err <= tol)) {
            fprintf(stderr, "%s: element %lld is %.12g, torch gives %.12g\n", what, (long long)i, a[i], b[i]);
            ok = false;
        }
    }
    free(a);
    return ok;
}

static int64_t attr(const gcase *c, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "%s=", key);
    const char *p = strstr(c->attrs, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}


static oar_tensor *input_named(const gcase *c, const char *name, oar_tensor *const *cast) {
    for (int i = 0; i < c->n_inputs; i++)
        if (!strcmp(c->inputs[i].name, name)) return cast[i];
    return NULL;
}


static oar_module *build(const gcase *c);
/* The module's inputs in forward_n order, from the cast copies of the case's inputs. */
static int forward_inputs(const gcase *c, oar_tensor *const *cast, oar_tensor **in);

static void run(const gcase *c, oar_dtype dt, double tol, int pass) {
    char what[512];
    oar_scope_begin();
    oar_module *m = build(c);
    CHECK(m != NULL);
    if (!m) {
        oar_scope_end();
        return;
    }
    /* torch's parameters, by name: oar must have exactly these names and shapes */
    CHECK(oar_module_num_parameters(m) == c->n_params);
    for (int i = 0; i < c->n_params && i < oar_module_num_parameters(m); i++) { /* in torch's order too */
        const char *name = NULL;
        oar_module_parameter(m, i, &name);
        CHECK(name && !strcmp(name, c->params[i].name));
    }
    for (int i = 0; i < c->n_params; i++) {
        oar_tensor *mine = oar_module_get(m, c->params[i].name);
        bool same = mine && oar_ndim(mine) == c->params[i].t->ndim &&
                    !memcmp(oar_shape(mine), c->params[i].t->shape, sizeof(int64_t) * (size_t)oar_ndim(mine));
        if (!same) fprintf(stderr, "golden %s %s: no parameter '%s' of torch's shape\n", c->kind, c->attrs, c->params[i].name);
        CHECK(same);
        CHECK(oar_module_set(m, c->params[i].name, oar_cast(c->params[i].t, dt)) == OAR_OK);
    }
    oar_tensor *cast[4], *in[3] = {NULL, NULL, NULL}, *out[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; i < c->n_inputs; i++) {
        cast[i] = oar_cast(c->inputs[i].t, dt);
        oar_set_requires_grad(cast[i], true);
    }
    int n_in = forward_inputs(c, cast, in);
    CHECK(oar_forward_n(m, in, n_in, out, c->n_out) == OAR_OK);
    oar_tensor *loss = NULL;
    for (int k = 0; k < c->n_out; k++) {
        snprintf(what, sizeof what, "golden %s %s (%s) output %d", c->kind, c->attrs, oar_dtype_name(dt), k);
        CHECK(matches(what, out[k], c->out[k], tol, pass));
        oar_tensor *term = oar_sum(oar_mul(out[k], oar_cast(c->w[k], dt)), NULL, 0, false);
        loss = loss ? oar_add(loss, term) : term;
    }
    oar_tensor *wrt[MAX_NAMED], *g[MAX_NAMED];
    for (int i = 0; i < c->n_grads; i++) {
        wrt[i] = input_named(c, c->grads[i].name, cast);
        if (!wrt[i]) wrt[i] = oar_module_get(m, c->grads[i].name);
    }
    oar_status st = oar_grad(&loss, 1, NULL, wrt, c->n_grads, g, NULL);
    CHECK(st == OAR_OK);
    for (int i = 0; st == OAR_OK && i < c->n_grads; i++) {
        snprintf(what, sizeof what, "golden %s %s (%s) gradient of %s", c->kind, c->attrs, oar_dtype_name(dt),
                 c->grads[i].name);
        CHECK(matches(what, g[i], c->grads[i].t, tol, pass));
        oar_release(g[i]);
    }
    oar_module_free(m);
    oar_scope_end();
}

static void clear(gcase *c) {
    for (int i = 0; i < c->n_params; i++) oar_tensor_unref(c->params[i].t);
    for (int i = 0; i < c->n_inputs; i++) oar_tensor_unref(c->inputs[i].t);
    for (int i = 0; i < c->n_grads; i++) oar_tensor_unref(c->grads[i].t);
    for (int k = 0; k < 4; k++) {
        oar_tensor_unref(c->out[k]);
        oar_tensor_unref(c->w[k]);
    }
    memset(c, 0, sizeof *c);
}

/* "<name> <tensor>" into list (bounded). */
static void add_named(named *list, int *n, int cap, char *rest) {
    if (*n >= cap) return;
    char *sp = strchr(rest, ' ');
    if (!sp) return;
    *sp = '\0';
    snprintf(list[*n].name, sizeof list[*n].name, "%s", rest);
    list[*n].t = golden_parse_tensor(sp + 1);
    if (list[*n].t) (*n)++;
}

/* Reads file (under OAR_SOURCE_DIR), checks every case in f64 and f32, and prints the test's
 * summary; at least min_cases must be there. */
static int golden_module_main(const char *test, const char *file, int min_cases) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/%s", src ? src : ".", file);
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("%s: skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", test, path);
        return 0;
    }
    char *line = malloc(MAX_LINE);
    gcase c = {0};
    int n_cases = 0;
    while (fgets(line, MAX_LINE, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (!strncmp(line, "case ", 5)) {
            int used = 0;
            sscanf(line + 5, "%15s %n", c.kind, &used);
            snprintf(c.attrs, sizeof c.attrs, "%s", line + 5 + used);
        } else if (!strncmp(line, "param ", 6)) {
            add_named(c.params, &c.n_params, MAX_NAMED, line + 6);
        } else if (!strncmp(line, "input ", 6)) {
            add_named(c.inputs, &c.n_inputs, 4, line + 6);
        } else if (!strncmp(line, "grad ", 5)) {
            add_named(c.grads, &c.n_grads, MAX_NAMED, line + 5);
        } else if (!strncmp(line, "output ", 7) || !strncmp(line, "weight ", 7)) {
            char *p = line + 7;
            int k = (int)strtol(p, &p, 10);
            if (k < 0 || k >= 4) continue;
            if (line[0] == 'o') {
                c.out[k] = golden_parse_tensor(p);
                if (k + 1 > c.n_out) c.n_out = k + 1;
            } else {
                c.w[k] = golden_parse_tensor(p);
            }
        } else if (!strcmp(line, "end")) {
            run(&c, OAR_F64, 1e-10, 0);
            run(&c, OAR_F32, 1e-5, 1);
            clear(&c);
            n_cases++;
        }
    }
    fclose(f);
    free(line);
    printf("%s: %d cases from torch; worst error / (1 + |torch|): f64 %.2g, f32 %.2g\n", test, n_cases,
           worst[0], worst[1]);
    CHECK(n_cases >= min_cases);
    return test_summary(test);
}

#endif
