/* Quantization-aware training (issue 16; src/quant/qat.c).
 * - the fake-quant weight scale (max|w[c]| / 127.5 by ops) equals the minmax weight observer's,
 *   which the PTQ rewrite uses at convert;
 * - eager QAT training steps equal compiled ones (oar_jit_to_static) bit for bit: losses,
 *   parameters and the moving-average buffers, on LeNet and on a conv + BatchNorm model;
 * - convert: the int8 program in the predictor equals, bit for bit, int8 ops run eagerly with the
 *   learned activation scales and PTQ's weight quantization (what the PTQ rewrite makes given
 *   those scales), and is close to the prepared model's own eval forward (fake quant); with
 *   BatchNorm folded at convert, still close;
 * - LSQ (fake_quant_lsq): the scale gradient against finite differences away from rounding edges,
 *   and a scale learned by SGD;
 * - bad input: convert of a module never prepared, prepare twice, convert before training, NaN
 *   in a training batch (eager and compiled): clear errors, nothing written. */
#include "test_util.h"

#include <math.h>
#include <unistd.h>

static char g_dir[256];

static const char *path_in(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

/* conv(1->4, 3x3, pad 1) -> [bn] -> relu -> maxpool 2 -> flatten -> linear(64 -> 10), on 8x8 images */
static oar_module *small_model(bool bn) {
    oar_conv_opts co = {.padding = {1, 1}};
    oar_pool_opts po = {.kernel = {2, 2}};
    oar_module *c[6];
    int n = 0;
    c[n++] = oar_nn_conv2d(1, 4, 3, &co, true);
    if (bn) c[n++] = oar_nn_batch_norm2d(4, 1e-5, 0.1, true, true);
    c[n++] = oar_nn_activation(OAR_ACT_RELU, 0);
    c[n++] = oar_nn_max_pool2d(&po);
    c[n++] = oar_nn_flatten(1, -1);
    c[n++] = oar_nn_linear(64, 10, true);
    return oar_nn_sequential(c, n);
}

typedef struct run {
    oar_module *m;
    oar_optimizer *opt;
} run;

static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    run *r = user;
    oar_optimizer_zero_grad(r->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(r->m, in[0]), in[1], NULL);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(r->opt);
    out[0] = loss;
    return st;
}

static oar_qat_opts g_qo; /* the options of run_init's prepare */

/* A copy of the f32 scales s times 127.5f / 63.0f in float: the PTQ rewrite's 7-bit weight scales. */
static oar_tensor *scales7(oar_tensor *s) {
    int64_t n = oar_numel(s);
    float *v = malloc(sizeof(float) * (size_t)(n + 1));
    CHECK(v && oar_copy_to_buffer(s, v, sizeof(float) * (size_t)n, OAR_F32) == OAR_OK);
    for (int64_t i = 0; v && i < n; i++) v[i] *= 127.5f / 63.0f;
    oar_tensor *r = v ? oar_from_data(v, oar_shape(s), oar_ndim(s), OAR_F32) : NULL;
    free(v);
    return r;
}

static double amax_of(oar_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < oar_numel(t); i++) m = fmax(m, fabs(t_at(t, i)));
    return m;
}

static void run_init(run *r, const char *zoo, bool bn) {
    oar_manual_seed(5);
    r->m = zoo ? oar_zoo_create(zoo, NULL) : small_model(bn);
    int n = 0;
    CHECK(oar_qat_prepare(r->m, &g_qo, &n) == OAR_OK);
    CHECK(n == (zoo ? 5 : 2));
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    r->opt = oar_optimizer_for(r->m, &oo);
}

static void run_free(run *r) {
    oar_optimizer_free(r->opt);
    oar_module_free(r->m);
}

static void batch(int64_t n, int64_t hw, oar_tensor **x, oar_tensor **y) {
    *x = oar_randn((int64_t[]){n, 1, hw, hw}, 4, OAR_F32);
    *y = oar_randint(0, 10, (int64_t[]){n}, 1, OAR_I64);
}

/* n steps of r on random batches (seeded); compiled through f when f is given. */
static void train(run *r, oar_jit *f, int steps, int64_t n, int64_t hw, oar_tensor **losses) {
    oar_manual_seed(11);
    for (int k = 0; k < steps; k++) {
        oar_tensor *io[2];
        batch(n, hw, &io[0], &io[1]);
        losses[k] = NULL;
        CHECK((f ? oar_jit_call(f, io, 2, &losses[k], 1) : step_fn(r, io, 2, &losses[k], 1)) == OAR_OK);
    }
}

static int state_diffs(oar_module *a, oar_module *b) {
    int d = 0;
    for (int i = 0; i < oar_module_num_parameters(a); i++)
        d += !t_same_bits(oar_module_parameter(a, i, NULL), oar_module_parameter(b, i, NULL));
    for (int i = 0; i < oar_module_num_buffers(a); i++)
        d += !t_same_bits(oar_module_buffer(a, i, NULL), oar_module_buffer(b, i, NULL));
    return d;
}

/* eager QAT steps == compiled QAT steps, bit for bit */
static void test_eager_equals_compiled(const char *zoo, bool bn) {
    oar_scope_begin();
    int64_t hw = zoo ? 28 : 8, n = 8;
    enum { STEPS = 6 };
    run e, s;
    run_init(&e, zoo, bn);
    run_init(&s, zoo, bn);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.opt};
    oar_jit *f = oar_jit_to_static(step_fn, &s, &jo);
    CHECK(f != NULL);
    oar_tensor *le[STEPS], *ls[STEPS];
    train(&e, NULL, STEPS, n, hw, le);
    train(&s, f, STEPS, n, hw, ls);
    int loss_diffs = 0;
    for (int k = 0; k < STEPS; k++) loss_diffs += !t_same_bits(le[k], ls[k]);
    int diffs = state_diffs(e.m, s.m);
    CHECK(loss_diffs == 0);
    CHECK(diffs == 0);
    CHECK(oar_jit_num_traces(f) == 1);
    /* the averages moved: count = sum of 0.9^k over the steps */
    oar_tensor *cnt = oar_module_get(e.m, zoo ? "c1.act_scale_count" : "0.act_scale_count");
    CHECK(cnt && fabs(t_at(cnt, 0) - (1 - pow(0.9, STEPS)) / 0.1) < 1e-5);
    printf("  %-6s eager vs compiled QAT (%d-bit weights%s), %d steps: %d losses and %d parameters/buffers differ "
           "(loss %.4f -> %.4f)\n", zoo ? zoo : bn ? "conv+bn" : "small", g_qo.weight_bits ? g_qo.weight_bits : 8,
           g_qo.reduce_range ? ", reduce_range" : "", STEPS, loss_diffs, diffs, t_at(le[0], 0), t_at(le[STEPS - 1], 0));
    oar_jit_free(f);
    run_free(&e);
    run_free(&s);
    oar_scope_end();
}

/* The weight scale by the ops of the QAT forward equals the minmax weight observer's (PTQ's). */
static void test_weight_scale_formula(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_tensor *w = oar_mul_scalar(oar_randn((int64_t[]){7, 3, 3, 3}, 4, OAR_F32), 0.37);
    int dims[3] = {1, 2, 3};
    oar_tensor *ops = oar_maximum_scalar(oar_div_scalar(oar_amax(oar_abs(w), dims, 3, false), 127.5), 1.1920929e-07);
    oar_observer *o = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                         .per_channel = true, .axis = 0});
    oar_tensor *s = NULL, *z = NULL;
    CHECK(oar_observer_observe(o, w) == OAR_OK && oar_observer_qparams(o, &s, &z) == OAR_OK);
    CHECK(t_same_bits(ops, s));
    /* 7 bits: the QAT forward's mul_scalar by 127.5f / 63.0f equals the rewrite's float product */
    CHECK(t_same_bits(oar_mul_scalar(ops, (double)(127.5f / 63.0f)), scales7(s)));
    oar_observer_free(o);
    oar_scope_end();
}

static oar_tensor *predict(const char *path, oar_tensor *x) {
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p != NULL);
    if (!p) return NULL;
    oar_tensor *y = NULL;
    if (oar_predictor_set_input(p, oar_predictor_input_name(p, 0), x) == OAR_OK && oar_predictor_run(p) == OAR_OK)
        y = oar_predictor_get_output(p, oar_predictor_output_name(p, 0));
    oar_predictor_free(p);
    return y;
}

/* PTQ's weight quantization: i8, symmetric per output channel (minmax); at 7 bits the scale times
 * 127.5 / 63 in float (the rewrite's), so the values lie within [-63, 63]. */
static oar_tensor *qweight(oar_tensor *w, oar_tensor **ws) {
    oar_observer *o = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                         .per_channel = true, .axis = 0});
    oar_tensor *z = NULL;
    CHECK(oar_observer_observe(o, w) == OAR_OK && oar_observer_qparams(o, ws, &z) == OAR_OK);
    oar_observer_free(o);
    if (g_qo.weight_bits == 7) *ws = scales7(*ws);
    return oar_quantize(w, *ws, z, 0, OAR_I8);
}

static double sqnr(oar_tensor *ref, oar_tensor *y) {
    double db = 0;
    CHECK(ref && y && oar_sqnr(ref, y, &db) == OAR_OK);
    return db;
}

/* convert: the int8 program = int8 ops with the learned scales; close to the fake-quant forward */
static void test_convert(void) {
    oar_scope_begin();
    run r;
    run_init(&r, NULL, false);
    oar_tensor *losses[20];
    train(&r, NULL, 20, 16, 8, losses);
    oar_tensor *cal[2], *y;
    batch(16, 8, &cal[0], &y);
    batch(5, 8, &cal[1], &y);
    oar_quant_layer info[4];
    int n = 0;
    const char *path = path_in("small-qat");
    CHECK(oar_qat_convert(r.m, cal, 2, path, NULL, info, 4, &n) == OAR_OK);
    CHECK(n == 2 && !strcmp(info[0].name, "0") && !strcmp(info[0].type, "Conv2d") && !strcmp(info[1].name, "4"));
    char names[4][128];
    float s[4];
    int ns = 0;
    CHECK(oar_qat_scales(r.m, names, s, 4, &ns) == OAR_OK && ns == 2);
    CHECK(info[0].scale_min == s[0] && info[1].scale_min == s[1]); /* the learned scales, not calibrated ones */
    CHECK(oar_module_is_training(r.m));                              /* left as it was */
    /* the same by int8 ops, eagerly */
    oar_tensor *x = cal[1], *ws0, *ws1;
    oar_tensor *w0 = qweight(oar_module_get(r.m, "0.weight"), &ws0);
    oar_tensor *w1 = qweight(oar_module_get(r.m, "4.weight"), &ws1);
    oar_tensor *s0 = oar_scalar(s[0], OAR_F32), *s1 = oar_scalar(s[1], OAR_F32);
    oar_tensor *z = oar_scalar(g_qo.reduce_range ? 64 : 128, OAR_I32);
    if (g_qo.weight_bits == 7) CHECK(amax_of(w0) <= 63 && amax_of(w1) <= 63);
    oar_conv_opts co = {.padding = {1, 1}};
    oar_pool_opts po = {.kernel = {2, 2}};
    oar_tensor *h = oar_qconv2d(oar_quantize(x, s0, z, 0, OAR_U8), s0, z, w0, ws0, oar_module_get(r.m, "0.bias"), &co,
                                NULL);
    h = oar_flatten(oar_max_pool2d(oar_relu(h), &po), 1, -1);
    oar_tensor *want = oar_qlinear(oar_quantize(h, s1, z, 0, OAR_U8), s1, z, w1, ws1, oar_module_get(r.m, "4.bias"),
                                   NULL);
    oar_tensor *got = predict(path, x);
    CHECK(want && got && t_same_bits(want, got));
    /* the prepared model's eval forward (fake quant) is the same computation in float */
    oar_module_train(r.m, false);
    oar_tensor *fq = oar_forward(r.m, x);
    double db = sqnr(fq, got);
    CHECK(db > 60);
    printf("  convert (%d-bit weights%s): int8 program = int8 ops with the learned scales (%s); fake-quant forward vs "
           "int8: %.1f dB; input scales %.4g, %.4g\n", g_qo.weight_bits ? g_qo.weight_bits : 8,
           g_qo.reduce_range ? ", reduce_range" : "", want && got && t_same_bits(want, got) ? "bit for bit" : "DIFFERENT", db,
           (double)s[0], (double)s[1]);
    run_free(&r);
    oar_scope_end();
}

/* BatchNorm folded at convert: the int8 program stays close to the fake-quant forward */
static void test_convert_bn(void) {
    oar_scope_begin();
    run r;
    run_init(&r, NULL, true);
    oar_tensor *losses[20], *cal[1], *y;
    train(&r, NULL, 20, 16, 8, losses);
    batch(16, 8, &cal[0], &y);
    int n = 0;
    CHECK(oar_qat_convert(r.m, cal, 1, path_in("bn-qat"), NULL, NULL, 0, &n) == OAR_OK && n == 2);
    oar_module_train(r.m, false);
    oar_tensor *got = predict(path_in("bn-qat"), cal[0]), *fq = oar_forward(r.m, cal[0]);
    double db = sqnr(fq, got);
    CHECK(db > 30);
    printf("  convert with BatchNorm folded: fake-quant forward vs int8 program %.1f dB\n", db);
    run_free(&r);
    oar_scope_end();
}

/* oar_qat_learn_scales: after QAT steps the input scales become LSQ parameters; eager == compiled
 * still, the scales move, and convert takes the learned values */
static void test_learn_scales(void) {
    oar_scope_begin();
    enum { STEPS = 6 };
    run e, s;
    run_init(&e, NULL, false);
    run_init(&s, NULL, false);
    oar_tensor *l0[STEPS], *l1[STEPS];
    train(&e, NULL, 3, 8, 8, l0);
    train(&s, NULL, 3, 8, 8, l1);
    int n = 0;
    CHECK(oar_qat_learn_scales(e.m, &n) == OAR_OK && n == 2);
    CHECK(oar_qat_learn_scales(s.m, NULL) == OAR_OK);
    CHECK_ERR(oar_qat_learn_scales(e.m, NULL), "already learnable; call it once");
    double init = t_at(oar_module_get(e.m, "0.act_scale"), 0);
    CHECK(init == t_at(oar_module_get(e.m, "0.act_scale_sum"), 0) / t_at(oar_module_get(e.m, "0.act_scale_count"), 0) ||
          fabs(init / (t_at(oar_module_get(e.m, "0.act_scale_sum"), 0) /
                       t_at(oar_module_get(e.m, "0.act_scale_count"), 0)) - 1) < 1e-6);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    oar_optimizer_free(e.opt);
    oar_optimizer_free(s.opt);
    e.opt = oar_optimizer_for(e.m, &oo);
    s.opt = oar_optimizer_for(s.m, &oo);
    oar_jit *f = oar_jit_to_static(step_fn, &s, &(oar_jit_opts){.module = s.m, .optimizer = s.opt});
    train(&e, NULL, STEPS, 8, 8, l0);
    train(&s, f, STEPS, 8, 8, l1);
    int loss_diffs = 0;
    for (int k = 0; k < STEPS; k++) loss_diffs += !t_same_bits(l0[k], l1[k]);
    int diffs = state_diffs(e.m, s.m);
    CHECK(loss_diffs == 0 && diffs == 0);
    double now = t_at(oar_module_get(e.m, "0.act_scale"), 0);
    CHECK(now != init && now > 0);
    oar_tensor *x, *y;
    batch(4, 8, &x, &y);
    oar_quant_layer info[2];
    CHECK(oar_qat_convert(s.m, &x, 1, path_in("lsq-qat"), NULL, info, 2, &n) == OAR_OK && n == 2);
    CHECK(info[0].scale_min == (float)t_at(oar_module_get(s.m, "0.act_scale"), 0));
    oar_module_train(s.m, false);
    double db = sqnr(oar_forward(s.m, x), predict(path_in("lsq-qat"), x));
    CHECK(db > 60);
    printf("  learnable scales (LSQ) after 3 QAT steps: eager vs compiled %d losses and %d parameters/buffers differ; "
           "layer 0's scale %.5g -> %.5g; fake-quant forward vs int8 program %.1f dB\n", loss_diffs, diffs, init, now,
           db);
    oar_jit_free(f);
    run_free(&e);
    run_free(&s);
    oar_module *never = small_model(false);
    CHECK(oar_qat_prepare(never, NULL, NULL) == OAR_OK);
    CHECK_ERR(oar_qat_learn_scales(never, NULL), "never ran in training mode");
    CHECK(oar_module_get(never, "0.act_scale") == NULL);
    oar_module_free(never);
    oar_module *plain = small_model(false);
    CHECK_ERR(oar_qat_learn_scales(plain, NULL), "expected a module prepared");
    oar_module_free(plain);
    oar_scope_end();
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static void test_bad_input(void) {
    oar_scope_begin();
    oar_manual_seed(2);
    oar_module *m = small_model(false);
    oar_tensor *x, *y;
    batch(4, 8, &x, &y);
    /* convert of a module never prepared */
    CHECK_ERR(oar_qat_convert(m, &x, 1, path_in("never"), NULL, NULL, 0, NULL), "expected a module prepared");
    CHECK(!exists(path_in("never.json")));
    /* prepare twice */
    CHECK(oar_qat_prepare(m, NULL, NULL) == OAR_OK);
    CHECK_ERR(oar_qat_prepare(m, NULL, NULL), "already QATConv2d; prepare once");
    CHECK(oar_module_get(m, "0.act_scale_sum") != NULL);
    /* convert before any training step; eval before training */
    CHECK_ERR(oar_qat_convert(m, &x, 1, path_in("untrained"), NULL, NULL, 0, NULL), "never ran in training mode");
    CHECK(!exists(path_in("untrained.json")));
    oar_module_train(m, false);
    CHECK_ERR(oar_forward(m, x), "layer 0: expected a trained activation scale");
    oar_module_train(m, true);
    CHECK_ERR(oar_qat_convert(m, NULL, 0, path_in("nobatch"), NULL, NULL, 0, NULL), "at least one batch");
    oar_module *plain = small_model(false);
    CHECK_ERR(oar_qat_prepare(plain, &(oar_qat_opts){.momentum = 1.5}, NULL), "momentum in (0, 1)");
    CHECK_ERR(oar_qat_prepare(plain, &(oar_qat_opts){.weight_bits = 6}, NULL),
              "qat_prepare: expected weight_bits 8 (or 0) or 7 (CPUs without VNNI), got 6");
    CHECK(oar_module_get(plain, "0.act_scale_sum") == NULL); /* unchanged */
    CHECK_ERR(oar_qat_prepare(m, &(oar_qat_opts){.skip = (const char *const[]){"0", "4", NULL}}, NULL), "already");
    CHECK_ERR(oar_qat_prepare(plain, &(oar_qat_opts){.skip = (const char *const[]){"0", "4", NULL}}, NULL),
              "all kept in fp32");
    CHECK(!strcmp(oar_module_type(oar_module_child(plain, "0")), "Conv2d"));
    oar_module_free(plain);
    /* NaN in a training batch: eager, then compiled; the averages are not touched */
    float buf[4 * 64];
    CHECK(oar_copy_to_buffer(x, buf, sizeof buf, OAR_F32) == OAR_OK);
    buf[37] = NAN;
    oar_tensor *bad = oar_from_data(buf, oar_shape(x), 4, OAR_F32);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    run r = {m, oar_optimizer_for(m, &oo)};
    CHECK(r.opt != NULL);
    oar_tensor *io[2] = {bad, y}, *loss = NULL;
    CHECK_ERR(step_fn(&r, io, 2, &loss, 1), "qat: layer 0");
    CHECK(strstr(oar_last_error(), "finite") != NULL);
    printf("  NaN in a QAT batch, eager: %s\n", oar_last_error());
    CHECK(t_at(oar_module_get(m, "0.act_scale_count"), 0) == 0);
    oar_jit_opts jo = {.module = m, .optimizer = r.opt};
    oar_jit *f = oar_jit_to_static(step_fn, &r, &jo);
    oar_tensor *good[2] = {x, y};
    CHECK(oar_jit_call(f, good, 2, &loss, 1) == OAR_OK);
    CHECK_ERR(oar_jit_call(f, io, 2, &loss, 1), "expected finite values");
    printf("  NaN in a QAT batch, compiled: %s\n", oar_last_error());
    oar_jit_free(f);
    oar_optimizer_free(r.opt);
    oar_module_free(m);
    oar_scope_end();
}

/* LSQ's scale gradient by finite differences (f64, x away from rounding edges): the derivative
 * of sum(g * y) in scale is round(x/s) inside the range and quant_min/max - z where clamped; LSQ's
 * estimator is that minus the straight-through term sum over the range of g * x / s. */
static void test_lsq_finite_differences(void) {
    oar_scope_begin();
    enum { N = 64 };
    double xs[N], gs[N], s = 0.1, z = 2, gf = 0.5;
    oar_manual_seed(9);
    oar_tensor *r = oar_rand((int64_t[]){2 * N}, 1, OAR_F64);
    double u[2 * N];
    CHECK(oar_copy_to_buffer(r, u, sizeof u, OAR_F64) == OAR_OK);
    for (int i = 0; i < N; i++) { /* x / s = k + 0.25 or k - 0.3 (k in [-14, 14]): clamped beyond [-10, 5] */
        double k = floor(u[i] * 29) - 14;
        xs[i] = s * (k + (i % 2 ? 0.25 : -0.3));
        gs[i] = u[N + i] - 0.5;
    }
    int64_t shape = N;
    oar_tensor *x = oar_from_data(xs, &shape, 1, OAR_F64), *g = oar_from_data(gs, &shape, 1, OAR_F64);
    oar_tensor *sc = oar_scalar(s, OAR_F64), *zp = oar_scalar(z, OAR_F64);
    oar_set_requires_grad(sc, true);
    oar_tensor *y = oar_fake_quant_lsq(x, sc, zp, -8, 7, gf), *ds = NULL;
    CHECK(oar_grad(&y, 1, &g, &sc, 1, &ds, NULL) == OAR_OK);
    double h = 1e-7, lp = 0, lm = 0, ste = 0;
    oar_no_grad_begin();
    oar_tensor *yp = oar_fake_quant_lsq(x, oar_scalar(s + h, OAR_F64), zp, -8, 7, gf);
    oar_tensor *ym = oar_fake_quant_lsq(x, oar_scalar(s - h, OAR_F64), zp, -8, 7, gf);
    oar_no_grad_end();
    int inside = 0;
    for (int i = 0; i < N; i++) {
        lp += gs[i] * t_at(yp, i);
        lm += gs[i] * t_at(ym, i);
        double q = nearbyint(xs[i] / s) + z;
        if (q >= -8 && q <= 7) ste += gs[i] * xs[i] / s, inside++;
    }
    double fd = (lp - lm) / (2 * h), want = (fd - ste) * gf;
    CHECK(ds && fabs(t_at(ds, 0) - want) <= 1e-6 * (fabs(want) + 1));
    CHECK(inside > 10 && inside < N - 10); /* both kinds of element are present */
    printf("  lsq: d/dscale %.9g, finite differences minus the straight-through term %.9g (%d of %d in range)\n",
           ds ? t_at(ds, 0) : NAN, want, inside, N);
    oar_scope_end();
}

/* A learnable scale: SGD on the quantization error of N(0, 1) data at 4 bits moves the scale from
 * 1 (too coarse) to where the error is lower, with LSQ's gradient scale 1 / sqrt(numel * qmax). */
static void test_lsq_learns(void) {
    oar_scope_begin();
    oar_manual_seed(4);
    oar_tensor *x = oar_randn((int64_t[]){512}, 1, OAR_F32), *sc = oar_scalar(1.0, OAR_F32);
    oar_tensor *zp = oar_scalar(0, OAR_F32);
    oar_set_requires_grad(sc, true);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 1.0; /* the gradient is scaled down by grad_factor */
    oar_optimizer *opt = oar_optimizer_new(&sc, 1, &oo);
    CHECK(opt != NULL);
    double first = 0, last = 0, gf = 1 / sqrt(512.0 * 7);
    for (int k = 0; k < 200 && opt; k++) {
        oar_scope_begin();
        oar_optimizer_zero_grad(opt);
        oar_tensor *d = oar_sub(oar_fake_quant_lsq(x, sc, zp, -8, 7, gf), x);
        oar_tensor *loss = oar_mean(oar_mul(d, d), NULL, 0, false);
        CHECK(oar_backward(loss, NULL, false) == OAR_OK && oar_optimizer_step(opt) == OAR_OK);
        if (k == 0) first = t_at(loss, 0);
        last = t_at(loss, 0);
        oar_scope_end();
    }
    double s = t_at(sc, 0);
    CHECK(last < 0.5 * first && s > 0.2 && s < 0.6);
    printf("  lsq: learned scale %.4f (from 1), quantization error %.5f -> %.5f\n", s, first, last);
    oar_optimizer_free(opt);
    oar_scope_end();
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/oar-qat-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_weight_scale_formula();
    test_eager_equals_compiled(NULL, false);
    test_eager_equals_compiled(NULL, true);
    test_eager_equals_compiled("lenet", false);
    test_convert();
    test_convert_bn();
    /* 7-bit weights with 7-bit activations (reduce_range): the same equalities */
    g_qo = (oar_qat_opts){.weight_bits = 7, .reduce_range = true};
    test_eager_equals_compiled(NULL, true);
    test_eager_equals_compiled("lenet", false);
    test_convert();
    test_convert_bn();
    g_qo = (oar_qat_opts){0};
    test_bad_input();
    test_lsq_finite_differences();
    test_lsq_learns();
    test_learn_scales();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_summary("test_qat");
}
