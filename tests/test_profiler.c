/* The profiler: the timer's numbers over the scheduler's steps, the full mode's overview (the
 * phases add up to the step), op and kernel counts for a known program, the Chrome trace
 * (parsed back with cJSON and checked span by span), spans from several threads, memory
 * statistics, and the NaN/Inf check naming the op that made a planted NaN. */
#include "profiler/prof_internal.h"
#include "test_util.h"

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(OAR_HAVE_CJSON)
#include <cjson/cJSON.h>
#endif

static char tmpdir[256];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(double ms) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(ms * 1e6)};
    nanosleep(&ts, NULL);
}

static oar_tensor *vec(const float *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_F32); }

/* ---------------------------------------------------------------- NaN/Inf check */

static void test_nan_check(void) {
    /* main() set OAR_CHECK_NAN_INF=1 before the first call: the check starts on */
    CHECK(oar_check_nan_inf_enabled());
    float xv[3] = {1.0f, -1.0f, 2.0f};
    oar_tensor *x = vec(xv, 3);
    oar_clear_error();
    oar_tensor *y = oar_log(x); /* log(-1) is NaN */
    CHECK(y == NULL);
    CHECK(oar_last_status() == OAR_ERR_NUMERIC);
    const char *msg = oar_last_error();
    CHECK(strstr(msg, "op 'log'") != NULL);
    CHECK(strstr(msg, "1 NaN and 0 Inf in output 0") != NULL);
    CHECK(strstr(msg, "first at element 1") != NULL);
    CHECK(strstr(msg, "input 0 [3] f32: min -1 max 2 mean 0.666667") != NULL);

    float big[2] = {1.0f, 1000.0f};
    oar_tensor *b = vec(big, 2);
    oar_clear_error();
    CHECK(oar_exp(b) == NULL); /* exp(1000) overflows f32 */
    CHECK(strstr(oar_last_error(), "op 'exp' produced 0 NaN and 1 Inf") != NULL);

    /* a NaN planted in a model's input: the first op to see it is named, with input stats */
    oar_manual_seed(7);
    oar_module *net = oar_nn_sequential((oar_module *[]){oar_nn_linear(4, 3, true),
                                                         oar_nn_activation(OAR_ACT_RELU, 0)}, 2);
    float in[8] = {0.5f, 1, 2, 3, NAN, 1, 1, 1};
    oar_tensor *xin = oar_from_data(in, (int64_t[]){2, 4}, 2, OAR_F32);
    oar_clear_error();
    CHECK(oar_forward(net, xin) == NULL);
    CHECK(oar_last_status() == OAR_ERR_NUMERIC);
    CHECK(strstr(oar_last_error(), "op 'linear' produced 3 NaN") != NULL);
    CHECK(strstr(oar_last_error(), "input 0 [2, 4] f32: min 0.5 max 3 mean 1.35714 (1 NaN, 0 Inf)") != NULL);
    CHECK(strstr(oar_last_error(), "input 1 [3, 4] f32") != NULL);

    /* backward ops are checked too: d sqrt(x)/dx at 0 is Inf */
    oar_tensor *z = oar_zeros((int64_t[]){2}, 1, OAR_F32);
    oar_set_requires_grad(z, true);
    oar_scope_begin();
    oar_tensor *s = oar_sum(oar_sqrt(z), NULL, 0, false);
    CHECK(s != NULL);
    oar_clear_error();
    CHECK(oar_backward(s, NULL, false) == OAR_ERR_NUMERIC);
    CHECK(strstr(oar_last_error(), "backward of sqrt: check_nan_inf: op 'div' produced 0 NaN and 2 Inf") != NULL);
    oar_scope_end();

    /* off: NaN flows through */
    oar_set_check_nan_inf(false);
    CHECK(!oar_check_nan_inf_enabled());
    y = oar_log(x);
    CHECK(y != NULL && isnan(t_at(y, 1)));
    oar_release(y);
    oar_release(z);
    oar_release(xin);
    oar_release(b);
    oar_release(x);
    oar_module_free(net);
    oar_clear_error();
}

/* ---------------------------------------------------------------- timer */

static void test_timer(void) {
    oar_profiler_opts o = oar_profiler_defaults(OAR_PROFILER_TIMER);
    o.skip_first = 2;
    oar_tensor *a = oar_randn((int64_t[]){64, 64}, 2, OAR_F32);
    CHECK(oar_profiler_start(&o) == OAR_OK);
    CHECK(oar_profiler_running());
    CHECK(oar_profiler_start(&o) == OAR_ERR_STATE); /* one run at a time */
    double t_begin = 0;
    for (int i = 0; i < 10; i++) {
        if (i == 2) t_begin = now_s(); /* the first recorded step starts at the mark of step 1 */
        sleep_ms(i % 2 ? 2.0 : 1.0);
        oar_scope_begin();
        for (int k = 0; k < 5; k++) oar_matmul(a, a);
        oar_scope_end();
        oar_profiler_step(32);
    }
    double wall = now_s() - t_begin;
    CHECK(oar_profiler_stop() == OAR_OK);
    CHECK(!oar_profiler_running());
    CHECK(oar_profiler_stop() == OAR_ERR_STATE);
    oar_profiler_timer tm;
    CHECK(oar_profiler_timer_get(&tm) == OAR_OK);
    CHECK(tm.steps == 8 && tm.items == 8 * 32);
    /* the steps tile the time between the marks */
    CHECK_NEAR(tm.batch_avg * (double)tm.steps, wall, 0.002 + 0.02 * wall);
    CHECK(tm.batch_min >= 0.0009 && tm.batch_min <= tm.batch_avg && tm.batch_avg <= tm.batch_max);
    CHECK(tm.ips_min <= tm.ips_avg && tm.ips_avg <= tm.ips_max);
    CHECK_NEAR(tm.ips_max, 32.0 / tm.batch_min, 1e-6 * tm.ips_max);
    CHECK_NEAR(tm.items_per_s, 32.0 * tm.steps_per_s, 1e-6 * tm.items_per_s);
    CHECK(tm.reader_avg == 0 && tm.reader_ratio == 0); /* no loader */
    char buf[4096];
    int n = oar_profiler_summary(buf, sizeof buf, OAR_PROFILER_SORT_TOTAL, 0);
    CHECK(n > 0 && n < (int)sizeof buf);
    CHECK(strstr(buf, "reader_cost") && strstr(buf, "batch_cost") && strstr(buf, "ips") &&
          strstr(buf, "reader_ratio") && strstr(buf, "samples/s"));
    CHECK(strstr(buf, "Operators") == NULL); /* timer mode has no op table */
    /* snprintf-style: a short buffer gets the length needed */
    char small[16];
    CHECK(oar_profiler_summary(small, sizeof small, OAR_PROFILER_SORT_TOTAL, 0) == n && strlen(small) == 15);
    oar_profiler_overview ov;
    CHECK_ERR(oar_profiler_overview_get(&ov), "timer mode");
    CHECK(oar_profiler_op_count(false) == 0);

    /* scheduler window [2, 4), pause excludes time, tokens as the unit */
    o = oar_profiler_defaults(OAR_PROFILER_TIMER);
    o.record_begin = 2;
    o.record_end = 4;
    o.items_unit = "tokens";
    CHECK(oar_profiler_start(&o) == OAR_OK);
    for (int i = 0; i < 6; i++) {
        if (i == 3) { /* an evaluation between steps 2 and 3 */
            oar_profiler_pause();
            sleep_ms(30);
            oar_profiler_step(100); /* ignored while paused */
            oar_profiler_resume();
        }
        sleep_ms(1);
        oar_profiler_step(100);
    }
    CHECK(oar_profiler_stop() == OAR_OK);
    CHECK(oar_profiler_timer_get(&tm) == OAR_OK);
    CHECK(tm.steps == 2 && tm.items == 200);
    CHECK(tm.batch_max < 0.025);
    CHECK(oar_profiler_summary(buf, sizeof buf, OAR_PROFILER_SORT_TOTAL, 0) > 0 && strstr(buf, "tokens/s"));
    CHECK(strstr(buf, "over 2 steps (2 to 3)") != NULL);

    /* bad options */
    o = oar_profiler_defaults(OAR_PROFILER_TIMER);
    o.record_begin = 5;
    o.record_end = 3;
    CHECK_ERR(oar_profiler_start(&o), "record_end");
    o = oar_profiler_defaults(OAR_PROFILER_TIMER);
    o.mode = (oar_profiler_mode)7;
    CHECK_ERR(oar_profiler_start(&o), "expected mode");
    CHECK(!oar_profiler_running());
    oar_release(a);
    oar_clear_error();
}

/* ---------------------------------------------------------------- op counts */

static void test_op_counts(void) {
    oar_tensor *a = oar_randn((int64_t[]){32, 48}, 2, OAR_F32), *b = oar_randn((int64_t[]){48, 16}, 2, OAR_F32);
    CHECK(oar_profiler_start(&(oar_profiler_opts){.mode = OAR_PROFILER_FULL, .record_shapes = true}) == OAR_OK);
    oar_scope_begin();
    oar_tensor *c = oar_matmul(a, b);
    for (int i = 0; i < 3; i++) c = oar_add(c, c);
    c = oar_relu(oar_matmul(a, b));
    oar_tensor *v = oar_reshape(c, (int64_t[]){-1}, 1); /* a view: an op without a kernel */
    CHECK(v != NULL);
    oar_scope_end();
    /* an instruction of the static executor, timed with the documented calls */
    oar_tensor *ins[2] = {a, b};
    oar_tensor *out = oar_zeros((int64_t[]){32, 16}, 2, OAR_F32);
    int64_t t0 = oar_prof_spans_on() ? oar_prof_now() : 0;
    CHECK(t0 != 0);
    if (t0) oar_prof_kernel_end("linear_relu", "fused-test", ins, 2, &out, 1, t0);
    CHECK(oar_profiler_stop() == OAR_OK); /* no step marks: start to stop is one step */

    oar_profiler_op_row r;
    CHECK(oar_profiler_op_find("add", &r) == OAR_OK && r.calls == 3 && r.impl == NULL);
    CHECK(r.min <= r.avg && r.avg <= r.max && r.total > 0);
    CHECK(oar_profiler_op_find("matmul", &r) == OAR_OK && r.calls == 2);
    CHECK(r.gflops_per_s > 0); /* 2 * 32 * 16 * 48 FLOPs per call */
    CHECK(oar_profiler_op_find("relu", &r) == OAR_OK && r.calls == 1 && r.gflops_per_s == 0);
    CHECK(oar_profiler_op_find("reshape", &r) == OAR_OK && r.calls == 1);
    CHECK(oar_profiler_op_find("linear_relu", &r) == OAR_OK && r.calls == 1 && r.gflops_per_s > 0);
    CHECK_ERR(oar_profiler_op_find("conv2d", &r), "no op named 'conv2d'");
    int n_ops = oar_profiler_op_count(false), n_k = oar_profiler_op_count(true);
    CHECK(n_ops == 5 && n_k == 4); /* the view has no kernel */
    int64_t calls = 0, kcalls = 0;
    double frac = 0, prev = INFINITY;
    for (int i = 0; i < n_ops; i++) {
        CHECK(oar_profiler_op_at(false, OAR_PROFILER_SORT_CALLS, i, &r) == OAR_OK);
        CHECK((double)r.calls <= prev);
        prev = (double)r.calls;
        calls += r.calls;
        frac += r.step_fraction;
    }
    CHECK(calls == 8);
    CHECK(frac > 0 && frac <= 1.0);
    bool saw_fused = false;
    prev = INFINITY;
    for (int i = 0; i < n_k; i++) {
        CHECK(oar_profiler_op_at(true, OAR_PROFILER_SORT_TOTAL, i, &r) == OAR_OK);
        CHECK(r.impl != NULL && r.total <= prev);
        prev = r.total;
        kcalls += r.calls;
        if (!strcmp(r.name, "linear_relu")) saw_fused = !strcmp(r.impl, "fused-test");
    }
    CHECK(kcalls == 7 && saw_fused);
    CHECK_ERR(oar_profiler_op_at(false, OAR_PROFILER_SORT_TOTAL, n_ops, &r), "expected 0 <= i < 5");
    oar_profiler_overview ov;
    CHECK(oar_profiler_overview_get(&ov) == OAR_OK && ov.steps == 1 && ov.forward_inferred);
    char *buf = malloc(1 << 16);
    oar_profiler_summary(buf, 1 << 16, OAR_PROFILER_SORT_AVG, 0);
    CHECK(strstr(buf, "Operators: 5 ops, 8 calls, sorted by avg") != NULL);
    CHECK(strstr(buf, "Kernels: 4 (op, kernel) pairs, 7 runs") != NULL);
    CHECK(strstr(buf, "Overview: 1 steps") != NULL);
    free(buf);

    /* the cap on spans: later ones are counted as dropped */
    CHECK(oar_profiler_start(&(oar_profiler_opts){.mode = OAR_PROFILER_FULL, .max_events = 4}) == OAR_OK);
    oar_scope_begin();
    for (int i = 0; i < 10; i++) oar_add(a, a);
    oar_scope_end();
    CHECK(oar_profiler_stop() == OAR_OK);
    CHECK(oar_profiler_op_find("add", &r) == OAR_OK && r.calls == 4);
    buf = malloc(1 << 16);
    oar_profiler_summary(buf, 1 << 16, OAR_PROFILER_SORT_TOTAL, 0);
    CHECK(strstr(buf, "6 dropped") != NULL);
    free(buf);
    oar_release(out);
    oar_release(a);
    oar_release(b);
    oar_clear_error();
}

/* ---------------------------------------------------------------- a small model, full mode */

static oar_module *small_net(void) {
    oar_manual_seed(3);
    return oar_nn_sequential((oar_module *[]){oar_nn_linear(8, 16, true), oar_nn_activation(OAR_ACT_RELU, 0),
                                              oar_nn_linear(16, 4, true)}, 3);
}

static oar_dataset *small_data(int64_t n) {
    oar_manual_seed(4);
    oar_tensor *x = oar_randn((int64_t[]){n, 8}, 2, OAR_F32);
    oar_tensor *y = oar_randint(0, 4, &n, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(x, y);
    oar_release(x);
    oar_release(y);
    return d;
}

/* 8 steps of training with a loader (1 worker), steps [1, 6) recorded. */
static void train_small(int workers, const char *trace_dir) {
    oar_module *net = small_net();
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_SGD);
    so.lr = 0.1;
    oar_optimizer *opt = oar_optimizer_for(net, &so);
    oar_dataset *d = small_data(256);
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = 16, .workers = workers});
    oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
    po.skip_first = 1;
    po.record_end = 6;
    po.trace_dir = trace_dir;
    CHECK(oar_profiler_start(&po) == OAR_OK);
    oar_tensor *x, *y;
    int steps = 0;
    while (steps < 8 && oar_loader_next(l, &x, &y, NULL)) {
        oar_scope_begin();
        oar_profiler_range_push("forward");
        oar_tensor *loss = oar_cross_entropy(oar_forward(net, x), y, NULL);
        oar_profiler_range_pop();
        oar_profiler_range_push("user \"range\"\n\t\\"); /* escaped in the trace */
        oar_profiler_range_pop();
        CHECK(oar_backward(loss, NULL, false) == OAR_OK);
        CHECK(oar_optimizer_step(opt) == OAR_OK);
        oar_optimizer_zero_grad(opt);
        oar_scope_end();
        oar_profiler_step(oar_size(x, 0));
        oar_release(x);
        oar_release(y);
        steps++;
    }
    CHECK(oar_profiler_stop() == OAR_OK);
    oar_loader_free(l);
    oar_dataset_free(d);
    oar_optimizer_free(opt);
    oar_module_free(net);
}

static void test_phases(void) {
    train_small(1, NULL);
    oar_profiler_overview ov;
    CHECK(oar_profiler_overview_get(&ov) == OAR_OK);
    CHECK(ov.steps == 5 && !ov.forward_inferred);
    CHECK(ov.data > 0 && ov.forward > 0 && ov.backward > 0 && ov.optimizer > 0);
    /* the parts add up to the step; the phases alone fit inside it, leaving a little "other" */
    CHECK_NEAR(ov.data + ov.forward + ov.backward + ov.optimizer + ov.other, ov.step, 1e-9 * ov.step);
    CHECK(ov.other >= -1e-6 && ov.other < 0.5 * ov.step);
    oar_profiler_timer tm;
    CHECK(oar_profiler_timer_get(&tm) == OAR_OK && tm.steps == 5 && tm.items == 5 * 16);
    CHECK_NEAR(tm.batch_avg * 5, ov.step, 1e-9);
    CHECK_NEAR(tm.reader_avg * 5, ov.data, 1e-6);
    CHECK(tm.reader_ratio > 0 && tm.reader_ratio < 1);
    oar_profiler_op_row r;
    CHECK(oar_profiler_op_find("cross_entropy", &r) == OAR_OK && r.calls == 5);
    CHECK(oar_profiler_op_find("linear", &r) == OAR_OK && r.calls >= 10 && r.gflops_per_s > 0);
    CHECK(oar_profiler_op_find("optimizer_update", &r) == OAR_OK && r.calls == 4 * 5); /* 4 parameters */
    /* op time inside the phases: not more than the steps */
    double total = 0;
    for (int i = 0; i < oar_profiler_op_count(false); i++) {
        CHECK(oar_profiler_op_at(false, OAR_PROFILER_SORT_TOTAL, i, &r) == OAR_OK);
        total += r.total;
    }
    CHECK(total > 0 && total <= ov.step);
    oar_profiler_memory m;
    CHECK(oar_profiler_memory_get(&m) == OAR_OK && m.steps == 5);
    CHECK(m.allocs_per_step > 0 && m.bytes_per_step > 0 && m.peak_bytes > 0 && m.max_allocs >= m.allocs_per_step);
    char *buf = malloc(1 << 16);
    oar_profiler_summary(buf, 1 << 16, OAR_PROFILER_SORT_TOTAL, 5);
    CHECK(strstr(buf, "Overview: 5 steps") && strstr(buf, "backward") && strstr(buf, "optimizer"));
    CHECK(strstr(buf, "Memory: CPU allocator") && strstr(buf, "... "));
    CHECK(strstr(buf, "Memory per device") && strstr(buf, "\n  cpu ")); /* each device present, as it stands */
    CHECK(!strstr(buf, "Device kernels") && oar_profiler_device_op_count() == 0); /* no GPU spans on the host */
    free(buf);
}

/* A compiled step: its nodes carry the phase they were traced in, and the executor replays
 * them as ranges, so the overview splits the step as it does eagerly. */
typedef struct static_step {
    oar_module *net;
    oar_optimizer *opt;
} static_step;

static oar_status static_step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    static_step *s = user;
    oar_optimizer_zero_grad(s->opt);
    oar_profiler_range_push("forward");
    out[0] = oar_cross_entropy(oar_forward(s->net, in[0]), in[1], NULL);
    oar_profiler_range_pop();
    oar_status st = out[0] ? oar_backward(out[0], NULL, false) : oar_last_status();
    return st == OAR_OK ? oar_optimizer_step(s->opt) : st;
}

static void test_static_phases(void) {
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_SGD);
    so.lr = 0.1;
    static_step s = {.net = small_net()};
    s.opt = oar_optimizer_for(s.net, &so);
    oar_jit *f = oar_jit_to_static(static_step_fn, &s, &(oar_jit_opts){.module = s.net, .optimizer = s.opt});
    int64_t n = 16;
    oar_tensor *in[2] = {oar_randn((int64_t[]){n, 8}, 2, OAR_F32), oar_randint(0, 4, &n, 1, OAR_I64)}, *loss[1];
    CHECK(f && oar_jit_call(f, in, 2, loss, 1) == OAR_OK); /* traced here, with the profiler off */
    oar_release(loss[0]);
    CHECK(oar_profiler_start(&(oar_profiler_opts){.mode = OAR_PROFILER_FULL}) == OAR_OK);
    for (int i = 0; i < 4; i++) {
        CHECK(oar_jit_call(f, in, 2, loss, 1) == OAR_OK);
        oar_release(loss[0]);
        oar_profiler_step(n);
    }
    CHECK(oar_profiler_stop() == OAR_OK);
    oar_profiler_overview ov;
    CHECK(oar_profiler_overview_get(&ov) == OAR_OK && ov.steps == 4 && !ov.forward_inferred);
    CHECK(ov.forward > 0 && ov.backward > 0 && ov.optimizer > 0);
    CHECK(ov.forward + ov.backward + ov.optimizer <= ov.step * (1 + 1e-9));
    CHECK(oar_prof_current_phase() == 0); /* every range the executor opened was closed */
    oar_release(in[0]);
    oar_release(in[1]);
    oar_jit_free(f);
    oar_optimizer_free(s.opt);
    oar_module_free(s.net);
}

/* ---------------------------------------------------------------- Chrome trace */

#if defined(OAR_HAVE_CJSON)
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static const char *str_of(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Every event is well formed; counts the spans by name and category. */
static void check_trace(const char *path) {
    char *text = read_file(path);
    CHECK(text != NULL);
    if (!text) return;
    cJSON *root = cJSON_Parse(text);
    free(text);
    CHECK(cJSON_IsObject(root));
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
    CHECK(cJSON_IsArray(events) && cJSON_GetArraySize(events) > 50);
    int bad = 0, linear = 0, kernels = 0, backward = 0, optimizer = 0, forward = 0, data = 0, steps = 0, user = 0,
        loader_spans = 0, counters = 0;
    double main_tid = -1, loader_tid = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *name = str_of(e, "name"), *ph = str_of(e, "ph"), *cat = str_of(e, "cat");
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
        if (!name || !ph || !cat || !cJSON_IsNumber(pid) || !cJSON_IsNumber(tid)) {
            bad++;
            continue;
        }
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (!strcmp(ph, "M")) {
            const char *tn = args ? str_of(args, "name") : NULL;
            if (!strcmp(name, "thread_name") && tn && !strcmp(tn, "main")) main_tid = tid->valuedouble;
            if (!strcmp(name, "thread_name") && tn && !strncmp(tn, "loader worker", 13)) loader_tid = tid->valuedouble;
            continue;
        }
        const cJSON *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
        if (!cJSON_IsNumber(ts) || ts->valuedouble < 0) {
            bad++;
            continue;
        }
        if (!strcmp(ph, "C")) {
            counters += cJSON_IsObject(args);
            continue;
        }
        if (strcmp(ph, "X") != 0 || !cJSON_IsNumber(dur) || dur->valuedouble < 0) {
            bad++;
            continue;
        }
        if (!strcmp(cat, "op") && !strcmp(name, "linear")) {
            const char *inputs = args ? str_of(args, "inputs") : NULL, *kernel = args ? str_of(args, "kernel") : NULL;
            if (inputs && strstr(inputs, "[16, 8] f32, [16, 8] f32, [16] f32") && kernel && *kernel) linear++;
        }
        if (!strcmp(cat, "kernel")) kernels++;
        if (!strcmp(cat, "phase") && !strcmp(name, "backward")) backward++;
        if (!strcmp(cat, "phase") && !strcmp(name, "optimizer")) optimizer++;
        if (!strcmp(cat, "phase") && !strcmp(name, "forward")) forward++;
        if (!strcmp(cat, "dataloader") && !strcmp(name, "dataloader")) data++;
        if (!strcmp(cat, "step") && !strncmp(name, "ProfileStep#", 12)) steps++;
        if (!strcmp(cat, "range") && !strcmp(name, "user \"range\"\n\t\\")) user++;
        if (!strcmp(cat, "span") && !strcmp(name, "loader.batch") && tid->valuedouble == loader_tid) loader_spans++;
    }
    CHECK(bad == 0);
    CHECK(linear == 5); /* the first layer: x [16, 8], weight [16, 8], bias [16], once per recorded step */
    CHECK(kernels > 20);
    CHECK(backward == 5 && optimizer == 5 && forward == 5 && data == 5 && steps == 5 && user == 5 && counters == 5);
    CHECK(main_tid > 0 && loader_tid > 0 && main_tid != loader_tid); /* threads are separate tracks */
    CHECK(loader_spans >= 1);
    cJSON_Delete(root);
}
#endif

static void test_trace(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/oar_test_profiler_XXXXXX");
    CHECK(mkdtemp(tmpdir) != NULL);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/traces", tmpdir); /* created by the profiler */
    train_small(1, dir);
    const char *path = oar_profiler_trace_path();
    CHECK(strncmp(path, dir, strlen(dir)) == 0 && access(path, R_OK) == 0);
    char again[400];
    snprintf(again, sizeof again, "%s/again.json", tmpdir);
    CHECK(oar_profiler_export_chrome_trace(again) == OAR_OK);
#if defined(OAR_HAVE_CJSON)
    check_trace(path);
    check_trace(again);
#else
    printf("test_profiler: trace checks skipped: built without cJSON\n");
#endif
    CHECK_ERR(oar_profiler_export_chrome_trace("/nonexistent-dir/x/trace.json"), "cannot write the trace");
    remove(path);
    remove(again);
    rmdir(dir);
    rmdir(tmpdir);
    oar_clear_error();
}

/* ---------------------------------------------------------------- threads, ranges */

static void *worker(void *arg) {
    oar_tensor *a = arg;
    for (int i = 0; i < 200; i++) oar_release(oar_add(a, a));
    return NULL;
}

static void test_threads_and_ranges(void) {
    oar_tensor *a = oar_randn((int64_t[]){16}, 1, OAR_F32);
    CHECK(oar_profiler_start(&(oar_profiler_opts){.mode = OAR_PROFILER_FULL}) == OAR_OK);
    pthread_t th[3];
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, worker, a);
    worker(a);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    /* deeper than the range stack: the extra pushes pop silently */
    for (int i = 0; i < 100; i++) oar_profiler_range_push("deep");
    for (int i = 0; i < 101; i++) oar_profiler_range_pop();
    oar_profiler_range_push("a name longer than the sixty-three characters that a range keeps, cut");
    oar_profiler_range_pop();
    CHECK(oar_profiler_stop() == OAR_OK);
    oar_profiler_op_row r;
    CHECK(oar_profiler_op_find("add", &r) == OAR_OK && r.calls == 800);
    char *buf = malloc(1 << 16);
    oar_profiler_summary(buf, 1 << 16, OAR_PROFILER_SORT_TOTAL, 0);
    CHECK(strstr(buf, "on 4 threads") != NULL);
    free(buf);
    /* a new run on new threads reuses the buffers of the threads that exited */
    int registered = 0, again = 0;
    for (prof_thread *t = prof_threads_head(); t; t = t->next) registered++;
    CHECK(oar_profiler_start(&(oar_profiler_opts){.mode = OAR_PROFILER_FULL}) == OAR_OK);
    for (int i = 0; i < 3; i++) pthread_create(&th[i], NULL, worker, a);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    CHECK(oar_profiler_stop() == OAR_OK);
    for (prof_thread *t = prof_threads_head(); t; t = t->next) again++;
    CHECK(again == registered);
    CHECK(oar_profiler_op_find("add", &r) == OAR_OK && r.calls == 600);
    /* ranges outside a run, and a pop without a push, do nothing */
    oar_profiler_range_push("outside");
    oar_profiler_range_pop();
    oar_profiler_range_pop();
    oar_profiler_step(1);
    oar_release(a);
}

/* ---------------------------------------------------------------- memory statistics */

static void test_memory_stats(void) {
    oar_memory_stats s0 = oar_memory_stats_get(OAR_CPU);
    oar_tensor *t = oar_empty((int64_t[]){1000}, 1, OAR_F32);
    oar_memory_stats s1 = oar_memory_stats_get(OAR_CPU);
    CHECK(s1.n_allocs == s0.n_allocs + 1 && s1.allocated_bytes >= s0.allocated_bytes + 4000);
    CHECK(s1.current_bytes >= s0.current_bytes + 4000 && s1.peak_bytes >= s1.current_bytes);
    oar_release(t);
    oar_memory_stats s2 = oar_memory_stats_get(OAR_CPU);
    CHECK(s2.n_frees == s1.n_frees + 1 && s2.current_bytes == s0.current_bytes);
    t = oar_empty((int64_t[]){1000}, 1, OAR_F32); /* same size class: from the cache */
    oar_memory_stats s3 = oar_memory_stats_get(OAR_CPU);
    CHECK(s3.n_cache_hits == s2.n_cache_hits + 1 && s3.cached_bytes < s2.cached_bytes);
    oar_release(t);
    oar_memory_stats g = oar_memory_stats_get(OAR_CUDA);
    CHECK(g.n_allocs == 0 && g.current_bytes == 0);
}

int main(void) {
    setenv("OAR_CHECK_NAN_INF", "1", 1); /* read once, at the library's first use */
    test_nan_check();
    test_timer();
    test_op_counts();
    test_phases();
    test_static_phases();
    test_trace();
    test_threads_and_ranges();
    test_memory_stats();
    return test_summary("test_profiler");
}
