/* Golden values from PyTorch for TransformerEncoderLayer and TransformerDecoderLayer
 * (tests/golden/transformer.txt, made by tests/golden/gen_transformer.py with torch 1.13):
 * post-norm and norm_first, relu and gelu, batch_first and sequence-first, causal self-
 * attention, unbatched inputs. torch's parameters are loaded by name (so oar must register
 * torch's names and shapes), then the output and the gradients of sum(out * w) w.r.t. every
 * input and parameter must match torch: f64 to 1e-10 relative (only summation order differs),
 * f32 to 1e-5 of (1 + |value|) (inputs are f32-exact; two layer norms, two attention softmaxes
 * and dot products of at most 16 terms; a wrong residual, norm placement or mask moves values
 * by 1e-2 or more). */
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

static oar_module *build(const gcase *c) {
    oar_transformer_opts o = oar_transformer_defaults(attr(c, "d_model"), attr(c, "nhead"));
    o.dim_feedforward = attr(c, "dim_feedforward");
    o.dropout = 0.0; /* torch ran with dropout 0 in training mode */
    o.activation = strstr(c->attrs, "activation=gelu") ? OAR_ACT_GELU : OAR_ACT_RELU;
    o.batch_first = attr(c, "batch_first");
    o.norm_first = attr(c, "norm_first");
    o.causal = attr(c, "causal");
    return !strcmp(c->kind, "encoder") ? oar_nn_transformer_encoder_layer(&o) : oar_nn_transformer_decoder_layer(&o);
}

static oar_tensor *input_named(const gcase *c, const char *name, oar_tensor *const *cast) {
    for (int i = 0; i < c->n_inputs; i++)
        if (!strcmp(c->inputs[i].name, name)) return cast[i];
    return NULL;
}

/* The module's inputs in forward_n order: src, or tgt and memory. */
static int forward_inputs(const gcase *c, oar_tensor *const *cast, oar_tensor **in) {
    if (!strcmp(c->kind, "encoder")) {
        in[0] = input_named(c, "src", cast);
        return 1;
    }
    in[0] = input_named(c, "tgt", cast);
    in[1] = input_named(c, "memory", cast);
    return 2;
}

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

int main(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/transformer.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_golden_transformer: skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
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
    printf("test_golden_transformer: %d cases from torch; worst error / (1 + |torch|): f64 %.2g, f32 %.2g\n", n_cases,
           worst[0], worst[1]);
    CHECK(n_cases >= 8);
    return test_summary("test_golden_transformer");
}
