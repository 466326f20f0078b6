/* Golden values from PyTorch (tests/golden/ops.txt, made by gen_golden.py): each case's
 * outputs and input gradients must match torch's within 1e-6 relative. The file is part of
 * the repository, so this test does not need torch. */
#include "ops/op.h"
#include "golden_util.h"
#include "test_util.h"

#include <ctype.h>

#define MAX_LINE (1 << 20)


static bool matches(const char *what, oar_tensor *got, oar_tensor *want) {
    if (!got || got->ndim != want->ndim || memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim)) {
        fprintf(stderr, "%s: shape differs from torch\n", what);
        return false;
    }
    for (int64_t i = 0; i < want->numel; i++) {
        double a = t_at(got, i), b = t_at(want, i);
        if (!(fabs(a - b) <= 1e-6 * (1 + fabs(b))) && !(isnan(a) && isnan(b)) && a != b) {
            fprintf(stderr, "%s: element %lld is %.12g, torch gives %.12g\n", what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

typedef struct gcase {
    char op[64], attrs[512];
    oar_tensor *in[OAR_MAX_INPUTS], *out[OAR_MAX_OUTPUTS], *w[OAR_MAX_OUTPUTS], *grad[OAR_MAX_INPUTS];
    int n_in, n_out;
} gcase;

static void run(gcase *c) {
    int op = oar_op_find(c->op);
    if (op < 0) {
        fprintf(stderr, "golden case for unknown op '%s'\n", c->op);
        CHECK(op >= 0);
        return;
    }
    oar_attr attrs[OAR_MAX_ATTRS];
    CHECK(oar_attrs_parse(oar_op_table[op], c->attrs, attrs) == OAR_OK);
    /* torch has no counterpart for trailing optional inputs oar added later (batch_norm's
     * num_batches_tracked): the cases leave them out, so they are absent */
    const oar_op_def *d = oar_op_table[op];
    while (c->n_in < d->n_inputs && c->n_in < 32 && ((d->optional_inputs >> c->n_in) & 1u)) {
        c->in[c->n_in] = c->grad[c->n_in] = NULL;
        c->n_in++;
    }
    for (int i = 0; i < c->n_in; i++)
        if (c->in[i] && c->grad[i]) oar_set_requires_grad(c->in[i], true);
    oar_tensor *out[OAR_MAX_OUTPUTS];
    int n = OAR_MAX_OUTPUTS;
    if (oar_op_call((oar_op_id)op, c->in, c->n_in, attrs, out, &n) != OAR_OK) {
        fprintf(stderr, "golden %s: %s\n", c->op, oar_last_error());
        CHECK(false);
        return;
    }
    char what[700];
    oar_scope_begin();
    oar_tensor *loss = NULL;
    for (int k = 0; k < c->n_out; k++) {
        snprintf(what, sizeof what, "golden %s(%s) output %d", c->op, c->attrs, k);
        CHECK(k < n && matches(what, out[k], c->out[k]));
        if (k < n && c->w[k]) {
            oar_tensor *term = oar_sum(oar_mul(out[k], c->w[k]), NULL, 0, false);
            loss = loss ? oar_add(loss, term) : term;
        }
    }
    if (loss) {
        oar_tensor *wrt[OAR_MAX_INPUTS], *g[OAR_MAX_INPUTS];
        int idx[OAR_MAX_INPUTS], nw = 0;
        for (int i = 0; i < c->n_in; i++)
            if (c->grad[i]) {
                idx[nw] = i;
                wrt[nw++] = c->in[i];
            }
        CHECK(oar_grad(&loss, 1, NULL, wrt, nw, g, &(oar_grad_opts){.allow_unused = true}) == OAR_OK);
        for (int k = 0; k < nw; k++) {
            snprintf(what, sizeof what, "golden %s(%s) gradient of input %d", c->op, c->attrs, idx[k]);
            if (g[k]) CHECK(matches(what, g[k], c->grad[idx[k]]));
            else CHECK(matches(what, oar_zeros_like(c->grad[idx[k]]), c->grad[idx[k]]));
        }
    }
    oar_scope_end();
    for (int k = 0; k < n; k++) oar_tensor_unref(out[k]);
}

static void clear(gcase *c) {
    for (int i = 0; i < OAR_MAX_INPUTS; i++) {
        oar_tensor_unref(c->in[i]);
        oar_tensor_unref(c->grad[i]);
    }
    for (int k = 0; k < OAR_MAX_OUTPUTS; k++) {
        oar_tensor_unref(c->out[k]);
        oar_tensor_unref(c->w[k]);
    }
    memset(c, 0, sizeof *c);
}

int main(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/ops.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_golden: skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return 0;
    }
    char *line = malloc(MAX_LINE);
    gcase c = {0};
    int n_cases = 0;
    while (fgets(line, MAX_LINE, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "case ", 5) == 0) {
            char *bar = strchr(line, '|');
            *bar = '\0';
            sscanf(line + 5, "%63s", c.op);
            char *a = bar + 1;
            while (*a == ' ') a++;
            snprintf(c.attrs, sizeof c.attrs, "%s", a);
        } else if (strncmp(line, "input ", 6) == 0) {
            c.in[c.n_in++] = strncmp(line + 6, "none", 4) == 0 ? NULL : golden_parse_tensor(line + 6);
        } else if (strncmp(line, "output ", 7) == 0 || strncmp(line, "weight ", 7) == 0 ||
                   strncmp(line, "grad ", 5) == 0) {
            char *p = strchr(line, ' ') + 1;
            int k = (int)strtol(p, &p, 10);
            oar_tensor *t = golden_parse_tensor(p);
            if (line[0] == 'o') {
                c.out[k] = t;
                if (k + 1 > c.n_out) c.n_out = k + 1;
            } else if (line[0] == 'w') {
                c.w[k] = t;
            } else {
                c.grad[k] = t;
            }
        } else if (strcmp(line, "end") == 0) {
            run(&c);
            clear(&c);
            n_cases++;
        }
    }
    fclose(f);
    free(line);
    printf("test_golden: %d cases from torch\n", n_cases);
    CHECK(n_cases > 0);
    return test_summary("test_golden");
}
