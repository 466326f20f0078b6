/* Export and the predictor: every zoo model (but lstm-lm) compiled with a dynamic batch, saved
 * with oar_jit_save and run by a predictor at the traced batch and at another one gives the
 * eager forward's results bit for bit (the passes do not change the arithmetic), as do clones,
 * also on two threads at once. Bad inputs, missing files and training programs are refused
 * with messages that say what was expected. */
#include "graph_test_util.h"
#include "graph/serialize.h"

#include <pthread.h>
#include <unistd.h>

/* cond holds, and the error message it left contains substr */
#define CHECK_MSG(cond, substr)                                                  \
    do {                                                                         \
        oar_clear_error();                                                       \
        CHECK(cond);                                                             \
        CHECK(strstr(oar_last_error(), substr) != NULL);                         \
    } while (0)

static char g_dir[] = "/tmp/oar-predictor-XXXXXX";

static bool bitwise_equal(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_ndim(a) != oar_ndim(b) || oar_dtype_of(a) != oar_dtype_of(b)) return false;
    for (int d = 0; d < oar_ndim(a); d++)
        if (oar_size(a, d) != oar_size(b, d)) return false;
    size_t n = (size_t)oar_numel(a) * oar_dtype_size(oar_dtype_of(a));
    void *x = malloc(n + 1), *y = malloc(n + 1);
    oar_copy_to_buffer(a, x, n, oar_dtype_of(a));
    oar_copy_to_buffer(b, y, n, oar_dtype_of(b));
    bool same = memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

static void model_path(const char *name, char *buf, size_t size) { snprintf(buf, size, "%s/%s", g_dir, name); }

static void remove_model(const char *path) {
    char f[600];
    snprintf(f, sizeof f, "%s.json", path);
    unlink(f);
    snprintf(f, sizeof f, "%s.safetensors", path);
    unlink(f);
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* The input spec of a zoo model, batch dynamic; gpt-mini on 16 tokens. */
static oar_input_spec spec_for(const char *model) {
    const oar_zoo_info *info = oar_zoo_find(model);
    if (info->input == OAR_ZOO_TOKENS) return (oar_input_spec){OAR_I64, 2, {-1, 16}, "tokens"};
    if (info->input == OAR_ZOO_FEATURES) return (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}, "features"};
    int64_t s = !strcmp(model, "resnet20") ? 32 : 28;
    return (oar_input_spec){OAR_F32, 4, {-1, info->in_channels, s, s}, "images"};
}

static oar_tensor *example(const char *model, const oar_input_spec *spec, int64_t batch) {
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, spec->shape, sizeof shape);
    shape[0] = batch;
    if (spec->dtype == OAR_I64) return oar_randint(0, oar_zoo_find(model)->num_classes, shape, spec->ndim, OAR_I64);
    return oar_randn(shape, spec->ndim, OAR_F32);
}

/* Runs p on x and returns the output (a new reference), NULL on failure. */
static oar_tensor *predict(oar_predictor *p, oar_tensor *x) {
    if (oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x) != OAR_OK) return NULL;
    if (oar_predictor_run(p) != OAR_OK) return NULL;
    return oar_predictor_get_output(p, "logits");
}

/* Runs p on x and returns the output named out (a new reference), NULL on failure. */
static oar_tensor *predict_named(oar_predictor *p, oar_tensor *x, const char *out) {
    if (oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x) != OAR_OK) return NULL;
    if (oar_predictor_run(p) != OAR_OK) return NULL;
    return oar_predictor_get_output(p, out);
}

/* Whether a and b agree within tol relative to b (and tol absolute near 0). */
static bool near_equal(oar_tensor *a, oar_tensor *b, double tol) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return false;
    size_t n = (size_t)oar_numel(a);
    double *x = malloc(sizeof(double) * (n + 1)), *y = malloc(sizeof(double) * (n + 1));
    oar_copy_to_buffer(a, x, sizeof(double) * n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * n, OAR_F64);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) ok = fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i]));
    free(x);
    free(y);
    return ok;
}

/* ---- two clones on two threads at once. Two threads share one pool: a parallel loop that
 * finds it busy runs serially, in one chunk. GEMM results depend on how oar splits the product
 * over the pool (OpenBLAS blocks the parts differently), so with several threads a concurrent
 * run agrees with eager to rounding (tol), and with one thread (every loop serial) bit for bit. */
typedef struct worker {
    oar_predictor *p;
    oar_tensor *x[2], *want[2];
    double tol; /* 0: bitwise */
    int runs, mismatches, failures;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    for (int r = 0; r < w->runs; r++) {
        int k = r % 2;
        oar_tensor *y = predict(w->p, w->x[k]);
        if (!y) w->failures++;
        else if (w->tol ? !near_equal(y, w->want[k], w->tol) : !bitwise_equal(y, w->want[k])) w->mismatches++;
        oar_release(y);
    }
    return NULL;
}

/* Runs clones of p on two threads at once, each alternating between x[0] and x[1]. */
static void run_concurrently(const char *model, oar_predictor *p, oar_tensor **x, oar_tensor **want, double tol) {
    oar_predictor *c[2] = {oar_predictor_clone(p), oar_predictor_clone(p)};
    CHECK(c[0] && c[1]);
    worker w[2] = {{c[0], {x[0], x[1]}, {want[0], want[1]}, tol, 4, 0, 0},
                   {c[1], {x[1], x[0]}, {want[1], want[0]}, tol, 4, 0, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, worker_main, &w[i]) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK(w[i].failures == 0);
        CHECK(w[i].mismatches == 0);
        if (w[i].failures || w[i].mismatches)
            printf("  %s (%s): thread %d: %d of %d runs failed, %d differ from eager\n", model,
                   tol ? "pool threads" : "one thread", i, w[i].failures, w[i].runs, w[i].mismatches);
        oar_predictor_free(c[i]);
    }
}

/* Bitwise equality with eager holds with the passes that keep every rounding; the inference
 * passes for convs (fold_conv_bn, fuse_conv_act, conv_nhwc) may change it and are checked within a tolerance in
 * test_fusion_conv.c. */
static oar_build_strategy exact_strategy(void) {
    oar_build_strategy s = {0};
    oar_build_strategy_set(&s, "fold_conv_bn", false);
    oar_build_strategy_set(&s, "fuse_conv_act", false);
    oar_build_strategy_set(&s, "conv_nhwc", false);
    oar_clear_error(); /* a pass this build lacks needs no switching off */
    return s;
}

static void test_model(const char *model) {
    oar_scope_begin();
    oar_manual_seed(21);
    oar_module *m = oar_zoo_create(model, NULL);
    CHECK(m != NULL);
    if (!m) {
        oar_scope_end();
        return;
    }
    oar_module_train(m, false);
    oar_input_spec spec = spec_for(model);
    const char *out_names[] = {"logits", NULL};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .output_names = out_names, .n_output_names = 1, .module = m,
                      .strategy = exact_strategy()};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *x2 = example(model, &spec, 2), *x3 = example(model, &spec, 3);
    oar_tensor *eager2 = oar_forward(m, x2), *eager3 = oar_forward(m, x3), *y[1] = {0};
    CHECK(oar_jit_call(f, &x2, 1, y, 1) == OAR_OK);
    CHECK(bitwise_equal(eager2, y[0]));
    char path[512];
    model_path(model, path, sizeof path);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_jit_free(f); /* the predictor needs neither the function nor the model code */

    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path, .strategy = exact_strategy()});
    CHECK(p != NULL);
    if (!p) {
        printf("  %s: %s\n", model, oar_last_error());
        oar_module_free(m);
        oar_scope_end();
        return;
    }
    CHECK(oar_predictor_num_inputs(p) == 1 && oar_predictor_num_outputs(p) == 1);
    CHECK(oar_predictor_input_name(p, 0) && !strcmp(oar_predictor_input_name(p, 0), spec.name));
    CHECK(oar_predictor_output_name(p, 0) && !strcmp(oar_predictor_output_name(p, 0), "logits"));
    CHECK(oar_predictor_input_name(p, 1) == NULL);
    oar_tensor *p2 = predict(p, x2), *p3 = predict(p, x3);
    bool same2 = bitwise_equal(eager2, p2), same3 = bitwise_equal(eager3, p3);
    CHECK(same2);
    CHECK(same3); /* the dynamic batch */
    if (!same2 || !same3)
        printf("  %s: predictor and eager differ (batch 2: %s, batch 3: %s) %s\n", model, same2 ? "same" : "differ",
               same3 ? "same" : "differ", oar_last_error());
    /* an earlier output is not overwritten by later runs */
    oar_tensor *again = predict(p, x2);
    CHECK(bitwise_equal(eager3, p3) && bitwise_equal(eager2, again));

    /* clones share the weights and run on their own, also concurrently */
    oar_predictor *c = oar_predictor_clone(p);
    CHECK(c != NULL);
    CHECK(bitwise_equal(eager3, predict(c, x3)));
    oar_predictor_free(p); /* the clone keeps the model alive */
    oar_tensor *xs[2] = {x2, x3}, *want[2] = {eager2, eager3};
    run_concurrently(model, c, xs, want, 1e-4);
    int threads = oar_get_num_threads();
    oar_set_num_threads(1);
    oar_tensor *want1[2] = {oar_forward(m, x2), oar_forward(m, x3)};
    run_concurrently(model, c, xs, want1, 0);
    oar_set_num_threads(threads);
    oar_predictor_free(c);
    oar_module_free(m);
    remove_model(path);
    oar_scope_end();
}

/* ---- errors */
static void test_input_errors(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_module *m = oar_zoo_create("lenet", NULL);
    oar_module_train(m, false);
    oar_input_spec spec = spec_for("lenet");
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .module = m};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    char path[512];
    model_path("errors", path, sizeof path);
    /* nothing to save before the first call */
    CHECK(oar_jit_save(f, path) == OAR_ERR_STATE);
    CHECK(strstr(oar_last_error(), "oar_jit_call") != NULL);
    oar_tensor *x = example("lenet", &spec, 2), *y[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    CHECK(oar_jit_save(f, NULL) == OAR_ERR_INVALID_ARG);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p != NULL);
    /* default names: "output0" (no output names given) */
    CHECK(p && !strcmp(oar_predictor_output_name(p, 0), "output0"));
    /* running before binding, reading before running */
    CHECK_MSG(oar_predictor_run(p) == OAR_ERR_STATE, "input 'images' is not set");
    CHECK_MSG(oar_predictor_get_output(p, "output0") == NULL, "call oar_predictor_run first");
    /* unknown names */
    CHECK_MSG(oar_predictor_set_input(p, "image", x) == OAR_ERR_INVALID_ARG, "no input named 'image'");
    CHECK(strstr(oar_last_error(), "'images'") != NULL); /* lists the real names */
    /* wrong dtype */
    oar_tensor *x64 = oar_randn((int64_t[]){2, 1, 28, 28}, 4, OAR_F64);
    CHECK_MSG(oar_predictor_set_input(p, "images", x64) == OAR_ERR_DTYPE, "expects f32[?, 1, 28, 28]");
    CHECK(strstr(oar_last_error(), "f64") != NULL);
    /* a fixed dim that differs (any batch is fine) */
    oar_tensor *xc = oar_randn((int64_t[]){5, 3, 28, 28}, 4, OAR_F32);
    CHECK_MSG(oar_predictor_set_input(p, "images", xc) == OAR_ERR_SHAPE, "input 'images' expects");
    CHECK(strstr(oar_last_error(), "dim 1 is 3, expected 1") != NULL);
    oar_tensor *xr = oar_randn((int64_t[]){2, 28, 28}, 3, OAR_F32);
    CHECK_MSG(oar_predictor_set_input(p, "images", xr) == OAR_ERR_SHAPE, "3 dims, expected 4");
    CHECK_MSG(oar_predictor_set_input(p, "images", NULL) == OAR_ERR_INVALID_ARG, "expected a tensor");
    /* nothing was bound by the failed calls; a good input still runs */
    CHECK(oar_predictor_run(p) == OAR_ERR_STATE);
    CHECK(oar_predictor_set_input(p, "images", x) == OAR_OK);
    CHECK(oar_predictor_run(p) == OAR_OK);
    oar_tensor *out = oar_predictor_get_output(p, "output0");
    CHECK(bitwise_equal(out, y[0]));
    CHECK_MSG(oar_predictor_get_output(p, "logits") == NULL, "no output named 'logits'");
    /* the predictor keeps its input: the caller's reference may go */
    oar_tensor *x5 = oar_randn((int64_t[]){5, 1, 28, 28}, 4, OAR_F32);
    CHECK(oar_predictor_set_input(p, "images", x5) == OAR_OK);
    oar_release(x5);
    CHECK(oar_predictor_run(p) == OAR_OK);
    oar_tensor *y5 = oar_predictor_get_output(p, "output0");
    CHECK(y5 && oar_size(y5, 0) == 5 && oar_size(y5, 1) == 10);
    oar_predictor_free(p);
    /* the path in each form a user types: "dir/model", "dir/model.json", "dir/model.safetensors" */
    const char *forms[] = {".json", ".safetensors", ""};
    for (int k = 0; k < 3; k++) {
        char form[600];
        snprintf(form, sizeof form, "%s%s", path, forms[k]);
        oar_predictor *pf = oar_predictor_create(&(oar_predictor_config){.model_path = form});
        CHECK(pf != NULL);
        if (!pf) printf("  model path '%s': %s\n", form, oar_last_error());
        oar_tensor *yf = pf ? predict_named(pf, x, "output0") : NULL;
        CHECK(bitwise_equal(yf, y[0]));
        oar_release(yf);
        oar_predictor_free(pf);
    }
    /* saving to "dir/model.json" writes dir/model.json and dir/model.safetensors, not .json.json */
    char json_form[600], doubled[700];
    snprintf(json_form, sizeof json_form, "%s.json", path);
    snprintf(doubled, sizeof doubled, "%s.json.json", path);
    remove_model(path);
    CHECK(oar_jit_save(f, json_form) == OAR_OK);
    CHECK(access(json_form, F_OK) == 0 && access(doubled, F_OK) != 0);
    snprintf(doubled, sizeof doubled, "%s.safetensors", path);
    CHECK(access(doubled, F_OK) == 0);
    /* NULLs */
    CHECK(oar_predictor_create(NULL) == NULL);
    CHECK(oar_predictor_clone(NULL) == NULL);
    CHECK(oar_predictor_num_inputs(NULL) == 0);
    oar_predictor_free(NULL);

    /* missing files: the program, then only the weights */
    char missing[512];
    model_path("nope", missing, sizeof missing);
    CHECK_MSG(oar_predictor_create(&(oar_predictor_config){.model_path = missing}) == NULL, "nope.json");
    char weights[600];
    snprintf(weights, sizeof weights, "%s.safetensors", path);
    CHECK(unlink(weights) == 0);
    CHECK_MSG(oar_predictor_create(&(oar_predictor_config){.model_path = path}) == NULL, "errors.safetensors");
    remove_model(path);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- training programs are not exported */
typedef struct step_ctx {
    oar_module *m;
} step_ctx;

static oar_status train_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    step_ctx *c = user;
    oar_module_zero_grad(c->m);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->m, in[0]), in[1], NULL);
    if (!loss) return oar_last_status();
    out[0] = loss;
    return oar_backward(loss, NULL, false);
}

static void test_training_refused(void) {
    oar_scope_begin();
    oar_manual_seed(4);
    char path[512];
    model_path("train", path, sizeof path);
    /* a step with backward */
    oar_module *m = oar_zoo_create("tiny", NULL);
    step_ctx c = {m};
    oar_jit_opts o = {.module = m};
    oar_jit *f = oar_jit_to_static(train_step, &c, &o);
    oar_tensor *io[2] = {oar_randn((int64_t[]){8, 64}, 2, OAR_F32), oar_randint(0, 10, (int64_t[]){8}, 1, OAR_I64)};
    oar_tensor *loss[1] = {0};
    CHECK(oar_jit_call(f, io, 2, loss, 1) == OAR_OK);
    CHECK_MSG(oar_jit_save(f, path) == OAR_ERR_UNSUPPORTED, "got a training step");
    CHECK(strstr(oar_last_error(), "eval mode") != NULL);
    char json[600];
    snprintf(json, sizeof json, "%s.json", path);
    CHECK(access(json, F_OK) != 0); /* nothing written */
    oar_jit_free(f);
    oar_module_free(m);
    /* a forward in training mode: batch norm updates its running statistics */
    m = oar_zoo_create("resnet20", NULL);
    oar_module_train(m, true);
    o = (oar_jit_opts){.module = m};
    f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 32, 32}, 4, OAR_F32), *y[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
    CHECK_MSG(oar_jit_save(f, path) == OAR_ERR_UNSUPPORTED, "updates state in place");
    /* the first writer: batch_norm(_act) of the running statistics or increment of the counter */
    CHECK(strstr(oar_last_error(), "batch_norm") != NULL || strstr(oar_last_error(), "num_batches_tracked") != NULL);
    CHECK(access(json, F_OK) != 0);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- a size the program cannot make symbolic */
static oar_status fixed_reshape_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    /* [B, 4] -> [B, 2, 2] with the batch read at tracing: traced at 2, three entries could be it */
    int64_t b = oar_size(in[0], 0);
    out[0] = oar_reshape(in[0], (int64_t[]){b, 2, 2}, 3);
    return out[0] ? OAR_OK : oar_last_status();
}

static oar_status flatten_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_relu(oar_flatten(in[0], 1, -1)); /* traced as reshape shape=2,8: exported as -1,8 */
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_dynamic_sizes(void) {
    oar_scope_begin();
    char path[512];
    model_path("fixed", path, sizeof path);
    /* refused at export, naming the dim and the node */
    oar_input_spec spec = {OAR_F32, 2, {-1, 4}, "x"};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1};
    oar_jit *f = oar_jit_to_static(fixed_reshape_fn, NULL, &o);
    oar_tensor *x2 = oar_randn((int64_t[]){2, 4}, 2, OAR_F32), *y[1] = {0};
    CHECK(oar_jit_call(f, &x2, 1, y, 1) == OAR_OK);
    CHECK_MSG(oar_jit_save(f, path) == OAR_ERR_UNSUPPORTED, "declares input 'x' dim 0 dynamic");
    CHECK(strstr(oar_last_error(), "reshape") && strstr(oar_last_error(), "shape[0] = 2"));
    oar_jit_free(f);
    /* the same traced at a size no other entry has: fine, and the file says which values vary */
    f = oar_jit_to_static(fixed_reshape_fn, NULL, &o);
    oar_tensor *x5 = oar_randn((int64_t[]){5, 4}, 2, OAR_F32), *x3 = oar_randn((int64_t[]){3, 4}, 2, OAR_F32);
    CHECK(oar_jit_call(f, &x5, 1, y, 1) == OAR_OK);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_jit_free(f);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p && oar_predictor_set_input(p, "x", x3) == OAR_OK && oar_predictor_run(p) == OAR_OK);
    oar_tensor *out = p ? oar_predictor_get_output(p, "output0") : NULL;
    CHECK(bitwise_equal(out, oar_reshape(x3, (int64_t[]){3, 2, 2}, 3)));
    oar_predictor_free(p);
    char json[600], *text = NULL;
    snprintf(json, sizeof json, "%s.json", path);
    FILE *fp = fopen(json, "rb");
    if (fp) {
        text = calloc(1, 1 << 16);
        if (fread(text, 1, (1 << 16) - 1, fp) == 0) text[0] = 0;
        fclose(fp);
    }
    CHECK(text && strstr(text, "\"shape\": [-1, 2, 2]")); /* the output's batch is dynamic in the file */
    free(text);
    /* flatten: a reshape written with the traced batch becomes -1 */
    spec = (oar_input_spec){OAR_F32, 3, {-1, 2, 4}, "x"};
    f = oar_jit_to_static(flatten_fn, NULL, &o);
    oar_tensor *a2 = oar_randn((int64_t[]){2, 2, 4}, 3, OAR_F32), *a7 = oar_randn((int64_t[]){7, 2, 4}, 3, OAR_F32);
    CHECK(oar_jit_call(f, &a2, 1, y, 1) == OAR_OK);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_jit_free(f);
    p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p && oar_predictor_set_input(p, "x", a7) == OAR_OK && oar_predictor_run(p) == OAR_OK);
    out = p ? oar_predictor_get_output(p, "output0") : NULL;
    CHECK(bitwise_equal(out, oar_relu(oar_flatten(a7, 1, -1))));
    oar_predictor_free(p);
    remove_model(path);

    /* a file written by hand with such a reshape: the predictor refuses other sizes at run time */
    oar_program *prog = oar_program_new();
    int in = gt_input(prog, (int64_t[]){2, 4}, 2);
    prog->values[in].dyn_dims = 1;
    int r = GT_OP(prog, reshape, "shape=2,2,2", in);
    CHECK(r >= 0 && oar_program_add_output(prog, GT_MAIN, r) == OAR_OK);
    CHECK(oar_program_save(prog, path, (const char *[]){"x"}, NULL) == OAR_OK);
    oar_program_free(prog);
    p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p && oar_predictor_set_input(p, "x", x2) == OAR_OK && oar_predictor_run(p) == OAR_OK);
    CHECK(p && oar_predictor_set_input(p, "x", x3) == OAR_OK);
    CHECK_MSG(oar_predictor_run(p) == OAR_ERR_SHAPE, "cannot run at inputs x f32[3, 4]");
    CHECK(strstr(oar_last_error(), "reshape") != NULL);
    oar_predictor_free(p);
    remove_model(path);
    oar_scope_end();
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    const char *models[] = {"tiny", "mlp", "lenet", "resnet20", "mobilenet", "gpt-mini"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) test_model(models[i]);
    test_input_errors();
    test_training_refused();
    test_dynamic_sizes();
    rmdir(g_dir);
    return test_summary("test_predictor");
}
