/* Golden values from PyTorch for the loss family (tests/golden/loss.txt, made by
 * tests/golden/gen_loss.py). Each case runs in f64, where output, gradients and the double
 * backward must match torch within 1e-5, and again in f32 (the fast kernels' dtype) within
 * 1e-4: the inputs are f32-exact, but f32 arithmetic rounds at ~1e-7 of logits up to 1000. */
#include "ops/op.h"
#include "golden_util.h"
#include "test_util.h"

#define MAX_LINE (1 << 20)
#define MAX_IN 4

typedef struct gcase {
    char op[64], attrs[512];
    oar_tensor *in[MAX_IN], *grad[MAX_IN];
    oar_tensor *out, *weight, *direction, *grad2;
    int n_in;
} gcase;


static bool matches(const char *what, oar_tensor *got, oar_tensor *want, double tol) {
    if (!got || got->ndim != want->ndim || memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim)) {
        fprintf(stderr, "%s: %s\n", what, got ? "shape differs from torch" : oar_last_error());
        return false;
    }
    for (int64_t i = 0; i < want->numel; i++) {
        double a = t_at(got, i), b = t_at(want, i);
        if (isnan(a) && isnan(b)) continue;
        if (!(fabs(a - b) <= tol * (1 + fabs(b)))) {
            fprintf(stderr, "%s: element %lld is %.12g, torch gives %.12g\n", what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

/* A float golden tensor converted to the pass's dtype (scoped); integers are lent as they are. */
static oar_tensor *as(oar_tensor *t, oar_dtype dt) {
    return t->dtype == OAR_F64 ? oar_cast(t, dt) : t;
}

static void run(const gcase *c, oar_dtype dt, double tol) {
    int op = oar_op_find(c->op);
    CHECK(op >= 0);
    if (op < 0) return;
    oar_attr attrs[OAR_MAX_ATTRS];
    CHECK(oar_attrs_parse(oar_op_table[op], c->attrs, attrs) == OAR_OK);
    char what[700];
    oar_scope_begin();
    oar_tensor *in[MAX_IN], *wrt[MAX_IN], *g[MAX_IN] = {0};
    int idx[MAX_IN], nw = 0;
    for (int i = 0; i < c->n_in; i++) {
        in[i] = as(c->in[i], dt);
        if (in[i]->dtype != dt) continue;
        oar_tensor *leaf = oar_detach(in[i]); /* the cast's result is not a leaf */
        oar_set_requires_grad(leaf, true);
        in[i] = leaf;
        idx[nw] = i;
        wrt[nw++] = leaf;
    }
    oar_tensor *out[OAR_MAX_OUTPUTS];
    int n = OAR_MAX_OUTPUTS;
    if (oar_op_call((oar_op_id)op, in, c->n_in, attrs, out, &n) != OAR_OK) {
        fprintf(stderr, "golden %s(%s): %s\n", c->op, c->attrs, oar_last_error());
        CHECK(false);
        oar_scope_end();
        return;
    }
    for (int k = 0; k < n; k++) oar_track(out[k]); /* released with the scope */
    snprintf(what, sizeof what, "golden %s(%s) %s: output", c->op, c->attrs, oar_dtype_name(dt));
    CHECK(matches(what, out[0], c->out, tol));
    oar_tensor *loss = oar_sum(oar_mul(out[0], as(c->weight, dt)), NULL, 0, false);
    oar_grad_opts first = {.create_graph = true, .allow_unused = true};
    CHECK(oar_grad(&loss, 1, NULL, wrt, nw, g, &first) == OAR_OK);
    for (int k = 0; k < nw; k++) {
        snprintf(what, sizeof what, "golden %s(%s) %s: gradient of input %d", c->op, c->attrs,
                 oar_dtype_name(dt), idx[k]);
        CHECK(matches(what, g[k] ? g[k] : oar_zeros_like(wrt[k]), c->grad[idx[k]], tol));
    }
    /* double backward along a direction v: d/dx0 sum(grad_0 * v) */
    oar_tensor *g2 = NULL;
    if (g[0] && oar_requires_grad(g[0])) {
        oar_tensor *h = oar_sum(oar_mul(g[0], as(c->direction, dt)), NULL, 0, false);
        oar_grad_opts second = {.allow_unused = true};
        CHECK(oar_grad(&h, 1, NULL, &wrt[0], 1, &g2, &second) == OAR_OK);
    }
    snprintf(what, sizeof what, "golden %s(%s) %s: double backward", c->op, c->attrs, oar_dtype_name(dt));
    CHECK(matches(what, g2 ? g2 : oar_zeros_like(wrt[0]), c->grad2, tol));
    oar_scope_end();
}

static void clear(gcase *c) {
    for (int i = 0; i < MAX_IN; i++) {
        oar_tensor_unref(c->in[i]);
        oar_tensor_unref(c->grad[i]);
    }
    oar_tensor_unref(c->out);
    oar_tensor_unref(c->weight);
    oar_tensor_unref(c->direction);
    oar_tensor_unref(c->grad2);
    memset(c, 0, sizeof *c);
}

/* Reads one line of a case; returns true at "end" with a complete case. */
static bool read_line(char *line, gcase *c) {
    line[strcspn(line, "\n")] = '\0';
    char *p = strchr(line, ' ');
    if (strncmp(line, "case ", 5) == 0) {
        char *bar = strchr(line, '|');
        if (!bar) return false;
        *bar = '\0';
        sscanf(line + 5, "%63s", c->op);
        snprintf(c->attrs, sizeof c->attrs, "%s", bar + 1 + (bar[1] == ' '));
    } else if (strncmp(line, "input ", 6) == 0 && c->n_in < MAX_IN) {
        c->in[c->n_in++] = golden_parse_tensor(p + 1);
    } else if (p && (strncmp(line, "output ", 7) == 0 || strncmp(line, "weight ", 7) == 0 ||
                     strncmp(line, "grad ", 5) == 0 || strncmp(line, "direction ", 10) == 0 ||
                     strncmp(line, "grad2 ", 6) == 0)) {
        long k = strtol(p + 1, &p, 10);
        oar_tensor *t = golden_parse_tensor(p);
        oar_tensor **slot = line[0] == 'o' ? &c->out : line[0] == 'w' ? &c->weight : line[0] == 'd' ? &c->direction
                          : line[4] == '2' ? &c->grad2 : (k >= 0 && k < MAX_IN ? &c->grad[k] : NULL);
        if (slot) *slot = t;
        else oar_tensor_unref(t);
    } else if (strcmp(line, "end") == 0) {
        return true;
    }
    return false;
}

static bool complete(const gcase *c) {
    if (!c->n_in || !c->out || !c->weight || !c->direction || !c->grad2) return false;
    for (int i = 0; i < c->n_in; i++)
        if (!c->in[i] || (c->in[i]->dtype == OAR_F64 && !c->grad[i])) return false;
    return true;
}

/* The public entry points agree with the op calls above (defaults, NULL options). */
static void check_public_api(void) {
    oar_ce_opts d = oar_ce_defaults();
    CHECK(d.reduction == OAR_REDUCE_MEAN && d.ignore_index == -100 && d.label_smoothing == 0.0);
    oar_scope_begin();
    float xv[6] = {1.0f, 2.0f, 0.5f, -1.0f, 0.0f, 3.0f};
    int64_t tv[2] = {1, -100}, xs[2] = {2, 3}, ts[1] = {2};
    oar_tensor *x = oar_from_data(xv, xs, 2, OAR_F32), *t = oar_from_data(tv, ts, 1, OAR_I64);
    double a, b;
    CHECK(oar_item(oar_cross_entropy(x, t, NULL), &a) == OAR_OK);
    CHECK(oar_item(oar_cross_entropy(x, t, &d), &b) == OAR_OK);
    /* only the first row counts: lse(1, 2, 0.5) - 2 */
    CHECK_NEAR(a, log(exp(1.0) + exp(2.0) + exp(0.5)) - 2.0, 1e-6);
    CHECK(a == b);
    oar_scope_end();
}

int main(void) {
    check_public_api();
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/loss.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_golden_loss: skipped the torch comparison: %s not found (set OAR_SOURCE_DIR to the "
               "repository, or regenerate with /usr/bin/python3 tests/golden/gen_loss.py)\n", path);
        return test_summary("test_golden_loss");
    }
    char *line = malloc(MAX_LINE);
    gcase c = {0};
    int n_cases = 0;
    while (line && fgets(line, MAX_LINE, f)) {
        if (!read_line(line, &c)) continue;
        CHECK(complete(&c));
        if (complete(&c)) {
            run(&c, OAR_F64, 1e-5);
            run(&c, OAR_F32, 1e-4);
            n_cases++;
        }
        clear(&c);
    }
    fclose(f);
    free(line);
    clear(&c);
    printf("test_golden_loss: %d cases from torch\n", n_cases);
    CHECK(n_cases > 0);
    return test_summary("test_golden_loss");
}
