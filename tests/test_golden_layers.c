/* Golden values from PyTorch for the built-in layers (tests/golden/layers.txt, made by
 * tests/golden/gen_layers.py). Each block builds the oar layer from its spec, checks that its
 * parameter and buffer names follow torch's, loads torch's values into them with
 * oar_module_set, runs forward and backward in the block's mode and compares the output, the
 * gradients of sum(output * w) for the input and every parameter, the buffers after the step
 * (batch norm's running statistics and counter) and the printed form.
 *
 * Tolerance: |oar - torch| <= 1e-5 * (1 + |torch|). Both run in f32 (unit roundoff 6e-8) on
 * the same f32 inputs; they differ only in summation order and in oar's reference kernels
 * accumulating in double, over at most a few hundred O(1) terms, which stays below ~1e-6.
 * A semantic difference (a wrong window, a missing eps, biased vs unbiased variance) shows up
 * at 1e-3 or more, so 1e-5 separates the two with margin on both sides. */
#include "ops/op.h"
#include "golden_util.h"
#include "test_util.h"

#define MAX_LINE (1 << 20)
#define MAX_NAMED 32
#ifndef TOL
#define TOL 1e-5 /* see above; -DTOL=... to probe the actual differences */
#endif

typedef struct named {
    char name[64];
    oar_tensor *t;
} named;

typedef struct block {
    char spec[256], mode[16], repr[2048];
    named params[MAX_NAMED], buffers[MAX_NAMED], grads[MAX_NAMED], after[MAX_NAMED];
    int n_params, n_buffers, n_grads, n_after;
    oar_tensor *input, *output, *weight, *gradin;
} block;


/* "<path> <tensor>" into list. */
static void parse_named(char *s, named *list, int *n) {
    if (*n >= MAX_NAMED) return;
    int used = 0;
    sscanf(s, "%63s %n", list[*n].name, &used);
    list[*n].t = golden_parse_tensor(s + used);
    (*n)++;
}

static bool matches(const char *what, oar_tensor *got, oar_tensor *want) {
    if (!got || got->ndim != want->ndim || memcmp(got->shape, want->shape, sizeof(int64_t) * (size_t)want->ndim)) {
        fprintf(stderr, "%s: %s\n", what, got ? "shape differs from torch" : oar_last_error());
        return false;
    }
    for (int64_t i = 0; i < want->numel; i++) {
        double a = t_at(got, i), b = t_at(want, i);
        if (!(fabs(a - b) <= TOL * (1 + fabs(b)))) {
            fprintf(stderr, "%s: element %lld is %.9g, torch gives %.9g\n", what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

/* ---- building a layer from "kind key=value ..." */

static double kv(const char *spec, const char *key, double def) {
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(spec, pat);
    return p ? strtod(p + strlen(pat), NULL) : def;
}

/* "key=a,b" (or "key=a") into v[0..], returns how many. */
static int kv_ints(const char *spec, const char *key, int64_t *v, int max) {
    char pat[40];
    snprintf(pat, sizeof pat, " %s=", key);
    const char *p = strstr(spec, pat);
    int n = 0;
    if (!p) return 0;
    char *s = (char *)p + strlen(pat);
    while (n < max) {
        v[n++] = strtoll(s, &s, 10);
        if (*s != ',') break;
        s++;
    }
    return n;
}

static bool is(const char *spec, const char *kind) {
    size_t n = strlen(kind);
    return strncmp(spec, kind, n) == 0 && (spec[n] == ' ' || spec[n] == '\0');
}

static oar_module *build(const char *s) {
    int64_t in = (int64_t)kv(s, "in", 0), out = (int64_t)kv(s, "out", 0), k = (int64_t)kv(s, "k", 0);
    bool bias = kv(s, "bias", 1) != 0;
    if (is(s, "linear")) return oar_nn_linear(in, out, bias);
    if (is(s, "conv1d") || is(s, "conv2d") || is(s, "conv_transpose2d")) {
        oar_conv_opts o = {.groups = (int64_t)kv(s, "groups", 1)};
        for (int i = 0; i < 2; i++) {
            o.stride[i] = (int64_t)kv(s, "stride", 1);
            o.padding[i] = (int64_t)kv(s, "padding", 0);
            o.dilation[i] = (int64_t)kv(s, "dilation", 1);
            o.output_padding[i] = (int64_t)kv(s, "output_padding", 0);
        }
        if (is(s, "conv1d")) return oar_nn_conv1d(in, out, k, &o, bias);
        if (is(s, "conv2d")) return oar_nn_conv2d(in, out, k, &o, bias);
        return oar_nn_conv_transpose2d(in, out, k, &o, bias);
    }
    if (is(s, "batch_norm1d") || is(s, "batch_norm2d")) {
        oar_module *(*make)(int64_t, double, double, bool, bool) =
            is(s, "batch_norm1d") ? oar_nn_batch_norm1d : oar_nn_batch_norm2d;
        return make((int64_t)kv(s, "features", 0), kv(s, "eps", 0), kv(s, "momentum", 0), kv(s, "affine", 1) != 0,
                    kv(s, "track", 1) != 0);
    }
    if (is(s, "layer_norm")) {
        int64_t shape[OAR_MAX_DIMS];
        int nd = kv_ints(s, "shape", shape, OAR_MAX_DIMS);
        return oar_nn_layer_norm(shape, nd, kv(s, "eps", 0), kv(s, "affine", 1) != 0);
    }
    if (is(s, "group_norm"))
        return oar_nn_group_norm((int64_t)kv(s, "groups", 0), (int64_t)kv(s, "channels", 0), kv(s, "eps", 0),
                                 kv(s, "affine", 1) != 0);
    if (is(s, "dropout")) return oar_nn_dropout(kv(s, "p", 0));
    if (is(s, "embedding")) return oar_nn_embedding((int64_t)kv(s, "num", 0), (int64_t)kv(s, "dim", 0));
    if (is(s, "max_pool2d") || is(s, "avg_pool2d")) {
        oar_pool_opts o = {.ceil_mode = kv(s, "ceil", 0) != 0, .exclude_pad = kv(s, "count_include_pad", 1) == 0};
        kv_ints(s, "k", o.kernel, 2);
        kv_ints(s, "stride", o.stride, 2);
        kv_ints(s, "padding", o.padding, 2);
        kv_ints(s, "dilation", o.dilation, 2);
        return is(s, "max_pool2d") ? oar_nn_max_pool2d(&o) : oar_nn_avg_pool2d(&o);
    }
    if (is(s, "adaptive_avg_pool2d")) return oar_nn_adaptive_avg_pool2d((int64_t)kv(s, "h", 0), (int64_t)kv(s, "w", 0));
    if (is(s, "flatten")) return oar_nn_flatten((int)kv(s, "start", 1), (int)kv(s, "end", -1));
    if (is(s, "activation")) return oar_nn_activation((oar_activation)kv(s, "kind", 0), kv(s, "param", 0));
    if (is(s, "cnn")) { /* conv-bn-relu-pool-flatten-linear, as gen_layers.py builds it */
        oar_module *seq = oar_nn_sequential((oar_module *[]){oar_nn_conv2d(3, 4, 3, &(oar_conv_opts){.padding = {1, 1}},
                                                                           true),
                                                             oar_nn_batch_norm2d(4, 1e-5, 0.1, true, true)},
                                            2);
        oar_nn_sequential_append(seq, oar_nn_activation(OAR_ACT_RELU, 0));
        oar_nn_sequential_append(seq, oar_nn_max_pool2d(&(oar_pool_opts){.kernel = {2, 2}}));
        oar_nn_sequential_append(seq, oar_nn_flatten(1, -1));
        if (oar_nn_sequential_append(seq, oar_nn_linear(36, 5, true)) != OAR_OK) {
            oar_module_free(seq);
            return NULL;
        }
        return seq;
    }
    fprintf(stderr, "golden layers: unknown layer spec '%s'\n", s);
    return NULL;
}

/* ---- one block */

static void unescape(char *s) { /* "\n" written as two characters by the generator */
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] == 'n') {
            *w++ = '\n';
            r++;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
}

static void run(block *b) {
    char what[512];
    oar_module *m = build(b->spec);
    if (!m) {
        fprintf(stderr, "golden %s: cannot build: %s\n", b->spec, oar_last_error());
        CHECK(false);
        return;
    }
    bool train = strcmp(b->mode, "train") == 0;
    snprintf(what, sizeof what, "golden %s [%s]", b->spec, b->mode);

    /* the same names, in the same order, as torch's named_parameters / named_buffers */
    CHECK(oar_module_num_parameters(m) == b->n_params && oar_module_num_buffers(m) == b->n_buffers);
    CHECK(b->n_grads == b->n_params && b->n_after == b->n_buffers);
    for (int i = 0; i < b->n_params && i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        if (strcmp(name, b->params[i].name) != 0)
            fprintf(stderr, "%s: parameter %d is '%s', torch has '%s'\n", what, i, name, b->params[i].name);
        CHECK(strcmp(name, b->params[i].name) == 0);
        CHECK(oar_ndim(p) == oar_ndim(b->params[i].t) &&
              !memcmp(oar_shape(p), oar_shape(b->params[i].t), sizeof(int64_t) * (size_t)oar_ndim(p)));
    }
    for (int i = 0; i < b->n_buffers && i < oar_module_num_buffers(m); i++) {
        const char *name;
        oar_tensor *t = oar_module_buffer(m, i, &name);
        CHECK(strcmp(name, b->buffers[i].name) == 0 && oar_dtype_of(t) == oar_dtype_of(b->buffers[i].t));
    }
    for (int i = 0; i < b->n_params; i++) CHECK(oar_module_set(m, b->params[i].name, b->params[i].t) == OAR_OK);
    for (int i = 0; i < b->n_buffers; i++) CHECK(oar_module_set(m, b->buffers[i].name, b->buffers[i].t) == OAR_OK);

    /* printing, in torch's words */
    int need = oar_module_format(m, NULL, 0);
    char *printed = malloc((size_t)need + 1);
    oar_module_format(m, printed, (size_t)need + 1);
    if (strcmp(printed, b->repr) != 0) fprintf(stderr, "%s: prints\n%s\ntorch prints\n%s\n", what, printed, b->repr);
    CHECK(strcmp(printed, b->repr) == 0);
    free(printed);

    oar_module_train(m, train);
    oar_scope_begin();
    oar_tensor *x = oar_detach(b->input); /* a leaf of our own, so its gradient starts empty */
    bool float_in = oar_dtype_is_float(oar_dtype_of(x));
    if (float_in) oar_set_requires_grad(x, true);
    oar_tensor *y = oar_forward(m, x);
    char w2[600];
    snprintf(w2, sizeof w2, "%s output", what);
    CHECK(matches(w2, y, b->output));
    if (y && oar_backward(oar_sum(oar_mul(y, b->weight), NULL, 0, false), NULL, false) == OAR_OK) {
        if (float_in && b->gradin) {
            snprintf(w2, sizeof w2, "%s gradient of the input", what);
            CHECK(matches(w2, oar_grad_get(x), b->gradin));
        }
        for (int i = 0; i < b->n_grads; i++) {
            oar_tensor *p = oar_module_get(m, b->grads[i].name), *g = p ? oar_grad_get(p) : NULL;
            snprintf(w2, sizeof w2, "%s gradient of %s", what, b->grads[i].name);
            CHECK(matches(w2, g ? g : oar_zeros_like(b->grads[i].t), b->grads[i].t));
        }
    } else {
        fprintf(stderr, "%s: backward failed: %s\n", what, oar_last_error());
        CHECK(false);
    }
    for (int i = 0; i < b->n_after; i++) {
        snprintf(w2, sizeof w2, "%s %s after the step", what, b->after[i].name);
        CHECK(matches(w2, oar_module_get(m, b->after[i].name), b->after[i].t));
    }
    oar_scope_end();
    oar_module_free(m);
}

static void clear(block *b) {
    named *lists[4] = {b->params, b->buffers, b->grads, b->after};
    int counts[4] = {b->n_params, b->n_buffers, b->n_grads, b->n_after};
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < counts[l]; i++) oar_tensor_unref(lists[l][i].t);
    oar_tensor_unref(b->input);
    oar_tensor_unref(b->output);
    oar_tensor_unref(b->weight);
    oar_tensor_unref(b->gradin);
    memset(b, 0, sizeof *b);
}

static bool starts(const char *line, const char *word, char **rest) {
    size_t n = strlen(word);
    if (strncmp(line, word, n) != 0 || line[n] != ' ') return false;
    *rest = (char *)line + n + 1;
    return true;
}

int main(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/golden/layers.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_golden_layers: skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return 0;
    }
    char *line = malloc(MAX_LINE), *rest;
    block *b = calloc(1, sizeof *b);
    int n_blocks = 0;
    while (fgets(line, MAX_LINE, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (starts(line, "case", &rest)) snprintf(b->spec, sizeof b->spec, "%s", rest);
        else if (starts(line, "mode", &rest)) snprintf(b->mode, sizeof b->mode, "%s", rest);
        else if (starts(line, "repr", &rest)) {
            snprintf(b->repr, sizeof b->repr, "%s", rest);
            unescape(b->repr);
        } else if (starts(line, "param", &rest)) parse_named(rest, b->params, &b->n_params);
        else if (starts(line, "buffer", &rest)) parse_named(rest, b->buffers, &b->n_buffers);
        else if (starts(line, "grad", &rest)) parse_named(rest, b->grads, &b->n_grads);
        else if (starts(line, "after", &rest)) parse_named(rest, b->after, &b->n_after);
        else if (starts(line, "input", &rest)) b->input = golden_parse_tensor(rest);
        else if (starts(line, "output", &rest)) b->output = golden_parse_tensor(rest);
        else if (starts(line, "weight", &rest)) b->weight = golden_parse_tensor(rest);
        else if (starts(line, "gradin", &rest)) b->gradin = golden_parse_tensor(rest);
        else if (strcmp(line, "end") == 0) {
            run(b);
            clear(b);
            n_blocks++;
        }
    }
    fclose(f);
    free(line);
    free(b);
    printf("test_golden_layers: %d layer blocks from torch\n", n_blocks);
    CHECK(n_blocks > 0);
    return test_summary("test_golden_layers");
}
