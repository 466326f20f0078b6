/* Dynamic to static: the same C function run eagerly and compiled gives the same results;
 * signatures are cached, dynamic dims serve every size with one trace, data reads while
 * tracing are reported by op, and gradients of a traced backward land on the parameters. */
#include "test_util.h"

static bool bitwise_equal(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b) || oar_dtype_of(a) != oar_dtype_of(b)) return false;
    size_t n = (size_t)oar_numel(a) * oar_dtype_size(oar_dtype_of(a));
    void *x = malloc(n + 1), *y = malloc(n + 1);
    oar_copy_to_buffer(a, x, n, oar_dtype_of(a));
    oar_copy_to_buffer(b, y, n, oar_dtype_of(b));
    bool same = memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

/* ---- a module forward */
static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_forward_equivalence(const char *model, int64_t batch, oar_zoo_input kind) {
    oar_scope_begin();
    oar_manual_seed(11);
    oar_module *m = oar_zoo_create(model, NULL);
    CHECK(m != NULL);
    if (!m) {
        oar_scope_end();
        return;
    }
    oar_module_train(m, false);
    const oar_zoo_info *info = oar_zoo_find(model);
    oar_tensor *x;
    if (kind == OAR_ZOO_IMAGE) x = oar_randn((int64_t[]){batch, info->in_channels, 28, 28}, 4, OAR_F32);
    else if (kind == OAR_ZOO_TOKENS) x = oar_randint(0, info->num_classes, (int64_t[]){batch, 16}, 2, OAR_I64);
    else x = oar_randn((int64_t[]){batch, info->in_channels}, 2, OAR_F32);
    oar_tensor *eager = oar_forward(m, x);
    oar_jit_opts o = {.module = m};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *stat[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, stat, 1) == OAR_OK);
    CHECK(bitwise_equal(eager, stat[0]));
    if (!bitwise_equal(eager, stat[0])) printf("  %s: eager and static differ\n", model);
    /* a second call runs the cached program */
    oar_tensor *again[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, again, 1) == OAR_OK);
    CHECK(bitwise_equal(eager, again[0]));
    CHECK(oar_jit_num_traces(f) == 1);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- dynamic batch: one trace serves every batch size */
static oar_status mlp_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor **w = user;
    out[0] = oar_softmax(oar_relu(oar_linear(in[0], w[0], w[1])), -1);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_dynamic_batch(void) {
    oar_scope_begin();
    oar_tensor *w[2] = {oar_randn((int64_t[]){5, 3}, 2, OAR_F32), oar_randn((int64_t[]){5}, 1, OAR_F32)};
    oar_input_spec spec = {OAR_F32, 2, {-1, 3}, "x"};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1};
    CHECK(oar_build_strategy_set(&o.strategy, "fuse_linear_act", false) == OAR_OK); /* keep a linear node to count */
    oar_jit *f = oar_jit_to_static(mlp_fn, w, &o);
    int64_t sizes[3] = {8, 5, 8};
    for (int k = 0; k < 3; k++) {
        oar_tensor *x = oar_randn((int64_t[]){sizes[k], 3}, 2, OAR_F32), *y[1] = {0};
        CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
        oar_tensor *want = oar_softmax(oar_relu(oar_linear(x, w[0], w[1])), -1);
        CHECK(y[0] && oar_size(y[0], 0) == sizes[k]);
        CHECK(bitwise_equal(want, y[0]));
    }
    CHECK(oar_jit_num_traces(f) == 1);
    CHECK(oar_jit_num_programs(f) == 1);
    /* the profiler sees the executor's instructions: one linear per call */
    oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
    CHECK(oar_profiler_start(&po) == OAR_OK);
    for (int k = 0; k < 3; k++) {
        oar_tensor *x = oar_randn((int64_t[]){4, 3}, 2, OAR_F32), *y[1] = {0};
        CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
        oar_profiler_step(4);
    }
    oar_profiler_op_row row;
    CHECK(oar_profiler_op_find("linear", &row) == OAR_OK && row.calls == 3);
    CHECK(oar_profiler_op_find("softmax", &row) == OAR_OK && row.calls == 3);
    oar_profiler_stop();
    /* the spec is enforced */
    oar_tensor *bad = oar_randn((int64_t[]){4, 7}, 2, OAR_F32), *y[1] = {0};
    CHECK_ERR(oar_jit_call(f, &bad, 1, y, 1), "expected input 0 to match its spec f32[-1, 3]");
    char text[4096];
    CHECK(oar_jit_dump(f, 0, text, sizeof text) > 0);
    CHECK(strstr(text, "linear(") && strstr(text, "f32[?8, 3]"));
    oar_jit_free(f);
    oar_scope_end();
}

/* ---- without specs, a new shape is a new signature: traced again, both kept */
static void test_retrace(void) {
    oar_scope_begin();
    oar_tensor *w[2] = {oar_randn((int64_t[]){5, 3}, 2, OAR_F32), oar_randn((int64_t[]){5}, 1, OAR_F32)};
    oar_jit_opts o = {.cache_capacity = 2};
    oar_jit *f = oar_jit_to_static(mlp_fn, w, &o);
    int64_t sizes[4] = {2, 3, 2, 4};
    for (int k = 0; k < 4; k++) {
        oar_tensor *x = oar_randn((int64_t[]){sizes[k], 3}, 2, OAR_F32), *y[1] = {0};
        CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK);
        CHECK(bitwise_equal(oar_softmax(oar_relu(oar_linear(x, w[0], w[1])), -1), y[0]));
    }
    CHECK(oar_jit_num_traces(f) == 3);  /* 2, 3, then 4 (2 was cached) */
    CHECK(oar_jit_num_programs(f) == 2); /* bounded: the least recent went */
    oar_jit_free(f);
    oar_scope_end();
}

/* ---- reading data while tracing is an error naming the op */
static oar_status reads_item(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor *s = oar_sum(in[0], NULL, 0, false);
    double v;
    oar_status st = oar_item(s, &v);
    if (st != OAR_OK) return st;
    out[0] = v > 0 ? oar_relu(in[0]) : oar_neg(in[0]);
    return OAR_OK;
}

static oar_status reads_data(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor *e = oar_exp(in[0]);
    if (!oar_data(e)) return oar_last_status();
    out[0] = e;
    return OAR_OK;
}

/* The user's mistake of issue 13: the status of oar_item is ignored, so v keeps its initial
 * value at tracing and the "sum" would be frozen into the program. */
static oar_status ignores_item_error(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    double v = 123;
    (void)oar_item(oar_sum(in[0], NULL, 0, false), &v);
    out[0] = oar_scalar(v, OAR_F32);
    return OAR_OK;
}

/* The same, and the function even clears the error slot before returning OK. */
static oar_status hides_item_error(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    double v = 0;
    if (oar_item(in[0], &v) != OAR_OK) oar_clear_error();
    out[0] = oar_add_scalar(in[0], v);
    return OAR_OK;
}

static void test_ignored_trace_errors(void) {
    oar_scope_begin();
    oar_tensor *x = oar_full((int64_t[]){4}, 1, 4.0, OAR_F32), *y[1] = {0};
    oar_jit *f = oar_jit_to_static(ignores_item_error, NULL, NULL);
    oar_clear_error();
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_ERR_STATE);
    CHECK(y[0] == NULL);
    CHECK(strstr(oar_last_error(), "returned OK, but a call inside it failed"));
    CHECK(strstr(oar_last_error(), "item: this tensor is symbolic: it was made by 'sum'"));
    /* and again: nothing was cached from the failed trace */
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_ERR_STATE);
    CHECK(oar_jit_num_programs(f) == 0);
    oar_jit_free(f);
    f = oar_jit_to_static(hides_item_error, NULL, NULL);
    CHECK_ERR(oar_jit_call(f, &x, 1, y, 1), "item: this tensor is symbolic");
    CHECK(y[0] == NULL);
    oar_jit_free(f);
    CHECK(!oar_is_tracing());
    /* eager, the same function gives the real answer */
    CHECK(ignores_item_error(NULL, &x, 1, y, 1) == OAR_OK && y[0] && t_at(y[0], 0) == 16.0);
    oar_scope_end();
}

static void test_trace_errors(void) {
    oar_scope_begin();
    oar_tensor *x = oar_randn((int64_t[]){4}, 1, OAR_F32), *y[1] = {0};
    oar_jit *f = oar_jit_to_static(reads_item, NULL, NULL);
    oar_clear_error();
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_ERR_STATE);
    CHECK(strstr(oar_last_error(), "item: this tensor is symbolic: it was made by 'sum'"));
    CHECK(strstr(oar_last_error(), "oar_cond/oar_while"));
    oar_jit_free(f);
    f = oar_jit_to_static(reads_data, NULL, NULL);
    CHECK_ERR(oar_jit_call(f, &x, 1, y, 1), "data: this tensor is symbolic: it was made by 'exp'");
    oar_jit_free(f);
    CHECK(!oar_is_tracing()); /* a failed trace leaves nothing behind */
    oar_tensor *z = oar_exp(x);  /* and eager works after it */
    CHECK(z && oar_data(z));
    oar_scope_end();
}

/* ---- backward inside the compiled function: gradients reach the parameters */
typedef struct step_ctx {
    oar_module *m;
} step_ctx;

static oar_status loss_and_grad(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    step_ctx *c = user;
    oar_module_zero_grad(c->m);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->m, in[0]), in[1], NULL);
    if (!loss) return oar_last_status();
    oar_status st = oar_backward(loss, NULL, false);
    out[0] = loss;
    return st;
}

static void test_backward(void) {
    oar_scope_begin();
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("mlp", NULL);
    const oar_zoo_info *info = oar_zoo_find("mlp");
    oar_tensor *x = oar_randn((int64_t[]){16, info->in_channels, 28, 28}, 4, OAR_F32);
    oar_tensor *y = oar_randint(0, info->num_classes, (int64_t[]){16}, 1, OAR_I64);
    step_ctx c = {m};
    oar_tensor *io[2] = {x, y}, *eager_loss[1] = {0};
    CHECK(loss_and_grad(&c, io, 2, eager_loss, 1) == OAR_OK);
    int np = oar_module_num_parameters(m);
    oar_tensor **eager_grads = malloc(sizeof(oar_tensor *) * (size_t)np);
    for (int i = 0; i < np; i++) eager_grads[i] = oar_clone(oar_grad_get(oar_module_parameter(m, i, NULL)));
    oar_jit_opts o = {.module = m};
    oar_jit *f = oar_jit_to_static(loss_and_grad, &c, &o);
    for (int rep = 0; rep < 2; rep++) {
        oar_tensor *loss[1] = {0};
        CHECK(oar_jit_call(f, io, 2, loss, 1) == OAR_OK);
        CHECK(bitwise_equal(eager_loss[0], loss[0]));
        for (int i = 0; i < np; i++) {
            const char *name;
            oar_tensor *p = oar_module_parameter(m, i, &name);
            bool same = bitwise_equal(eager_grads[i], oar_grad_get(p));
            CHECK(same);
            if (!same) printf("  grad of %s differs\n", name);
        }
    }
    char text[1 << 16];
    oar_jit_dump(f, 0, text, sizeof text);
    CHECK(strstr(text, "param \"fc1.weight\"") || strstr(text, "param \"0.weight\"") || strstr(text, ".weight\""));
    CHECK(strstr(text, "grad(%"));
    oar_program_memory_stats ms;
    CHECK(oar_program_memory_stats_get(f, 0, &ms) == OAR_OK);
    CHECK(ms.planned_arena_bytes > 0 && ms.planned_arena_bytes <= ms.naive_bytes);
    printf("  mlp loss+backward: planned arena %lld bytes (no reuse: %lld), measured peak %lld\n",
           (long long)ms.planned_arena_bytes, (long long)ms.naive_bytes, (long long)ms.measured_peak_bytes);
    free(eager_grads);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    test_forward_equivalence("tiny", 8, OAR_ZOO_FEATURES);
    test_forward_equivalence("mlp", 8, OAR_ZOO_IMAGE);
    test_forward_equivalence("lenet", 4, OAR_ZOO_IMAGE);
    test_dynamic_batch();
    test_retrace();
    test_trace_errors();
    test_ignored_trace_errors();
    test_backward();
    return test_summary("test_jit");
}
