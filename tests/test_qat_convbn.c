/* ConvBn-fused quantization-aware training (issue 16; src/quant/qat.c, qat_bn.c).
 * - prepare with fuse_bn finds the (conv, BatchNorm2d) pairs: a Sequential's and ResNet-20's;
 * - the fused forward is torch's ConvBn2d: conv(x, fq(w f)) / f + b, then the BN module, with
 *   f = gamma * rsqrt(running_var + eps); checked against the same formula written with ops;
 * - eager fused QAT steps equal compiled ones bit for bit (losses, parameters, BN running
 *   statistics, scale averages), before and after freezing BN statistics;
 * - freezing: the running statistics stop moving, num_batches_tracked stops counting;
 * - convert: the int8 program equals, bit for bit, int8 ops run eagerly on the folded weight
 *   (folded by the fold_conv_bn pass's ops) with the learned scales, i.e. static PTQ of the
 *   folded model given the same scales; and it is close to the fused model's own eval forward;
 * - bad input: fuse_bn with no pair, freeze without fused layers. */
#include "test_util.h"

#include <math.h>
#include <unistd.h>

static char g_dir[256];

/* conv(1->4, 3x3, pad 1, bias) -> bn -> relu -> maxpool 2 -> flatten -> linear(64 -> 10), on 8x8 */
static oar_module *convbn_model(void) {
    oar_conv_opts co = {.padding = {1, 1}};
    oar_pool_opts po = {.kernel = {2, 2}};
    oar_module *c[6] = {oar_nn_conv2d(1, 4, 3, &co, true), oar_nn_batch_norm2d(4, 1e-5, 0.1, true, true),
                        oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_max_pool2d(&po), oar_nn_flatten(1, -1),
                        oar_nn_linear(64, 10, true)};
    return oar_nn_sequential(c, 6);
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

static oar_module *make(const char *zoo) {
    oar_manual_seed(5);
    oar_zoo_opts zo = {.in_channels = 1};
    return zoo ? oar_zoo_create(zoo, &zo) : convbn_model();
}

static void run_init(run *r, const char *zoo, int want_layers) {
    r->m = make(zoo);
    int n = 0;
    CHECK(oar_qat_prepare(r->m, &(oar_qat_opts){.fuse_bn = true}, &n) == OAR_OK);
    CHECK(n == want_layers);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    r->opt = oar_optimizer_for(r->m, &oo);
}

static void run_free(run *r) {
    oar_optimizer_free(r->opt);
    oar_module_free(r->m);
}

static void batch(int64_t n, oar_tensor **x, oar_tensor **y) {
    *x = oar_randn((int64_t[]){n, 1, 8, 8}, 4, OAR_F32);
    *y = oar_randint(0, 10, (int64_t[]){n}, 1, OAR_I64);
}

static void train(run *r, oar_jit *f, int steps, oar_tensor **losses) {
    for (int k = 0; k < steps; k++) {
        oar_tensor *io[2];
        batch(8, &io[0], &io[1]);
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

/* The fold factor as the fold_conv_bn pass computes it: rsqrt(running_var + eps) * gamma. */
static oar_tensor *factor(oar_module *m, const char *bn) {
    char a[128], b[128];
    snprintf(a, sizeof a, "%s.running_var", bn);
    snprintf(b, sizeof b, "%s.weight", bn);
    return oar_mul(oar_rsqrt(oar_add_scalar(oar_module_get(m, a), 1e-5)), oar_module_get(m, b));
}

/* The fused layer's training forward written out: torch's ConvBn2d with the QAT fake quants. */
static void test_forward_formula(void) {
    oar_scope_begin();
    run r;
    run_init(&r, NULL, 2);
    oar_tensor *losses[3];
    oar_manual_seed(11);
    train(&r, NULL, 3, losses); /* scales averaged, running statistics moved */
    oar_module_train(r.m, false);
    oar_tensor *x, *y;
    batch(6, &x, &y);
    oar_module *conv = oar_module_child(r.m, "0");
    oar_tensor *got = oar_forward(conv, x);
    /* by hand: input fake quant with the averaged scale, the folded weight's per-channel scale */
    oar_tensor *xs = oar_div(oar_module_get(r.m, "0.act_scale_sum"), oar_module_get(r.m, "0.act_scale_count"));
    oar_tensor *f = factor(r.m, "1"), *w = oar_module_get(r.m, "0.weight");
    oar_tensor *wf = oar_mul(w, oar_reshape(f, (int64_t[]){4, 1, 1, 1}, 4));
    int dims[3] = {1, 2, 3};
    oar_tensor *ws = oar_maximum_scalar(oar_div_scalar(oar_amax(oar_abs(wf), dims, 3, false), 127.5), 1.1920929e-07);
    oar_tensor *xq = oar_fake_quant(x, xs, oar_scalar(128, OAR_I32), 0, 0, 255);
    oar_tensor *wq = oar_fake_quant(wf, ws, oar_zeros((int64_t[]){4}, 1, OAR_I32), 0, -128, 127);
    oar_conv_opts co = {.padding = {1, 1}};
    oar_tensor *want = oar_div(oar_conv2d(xq, wq, NULL, &co), oar_reshape(f, (int64_t[]){1, 4, 1, 1}, 4));
    want = oar_add(want, oar_reshape(oar_module_get(r.m, "0.bias"), (int64_t[]){1, 4, 1, 1}, 4));
    CHECK(got && want && t_same_bits(got, want));
    printf("  fused forward = conv(x, fq(w f)) / f + b written with ops: %s\n",
           got && want && t_same_bits(got, want) ? "bit for bit" : "DIFFERENT");
    run_free(&r);
    oar_scope_end();
}

/* eager == compiled, bit for bit, before and after freezing the BN statistics */
static void test_eager_equals_compiled(const char *zoo, int want_layers) {
    oar_scope_begin();
    enum { STEPS = 4 };
    run e, s;
    run_init(&e, zoo, want_layers);
    run_init(&s, zoo, want_layers);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.opt};
    oar_jit *f = oar_jit_to_static(step_fn, &s, &jo);
    CHECK(f != NULL);
    oar_tensor *le[2 * STEPS], *ls[2 * STEPS];
    oar_manual_seed(11);
    train(&e, NULL, STEPS, le);
    oar_manual_seed(11);
    train(&s, f, STEPS, ls);
    const char *rv = zoo ? "bn.running_var" : "1.running_var";
    oar_module *fresh = make(zoo);
    CHECK(!t_same_bits(oar_module_get(e.m, rv), oar_module_get(fresh, rv))); /* the statistics moved */
    oar_module_free(fresh);
    int nf = 0, nf2 = 0;
    CHECK(oar_qat_freeze_bn(e.m, &nf) == OAR_OK && oar_qat_freeze_bn(s.m, &nf2) == OAR_OK && nf == nf2);
    oar_jit_free(f);
    f = oar_jit_to_static(step_fn, &s, &jo); /* traced again: the BN ops changed */
    oar_tensor *rv0 = oar_clone(oar_module_get(e.m, rv));
    oar_tensor *nbt0 = oar_clone(oar_module_get(e.m, zoo ? "bn.num_batches_tracked" : "1.num_batches_tracked"));
    oar_manual_seed(12);
    train(&e, NULL, STEPS, le + STEPS);
    oar_manual_seed(12);
    train(&s, f, STEPS, ls + STEPS);
    int loss_diffs = 0;
    for (int k = 0; k < 2 * STEPS; k++) loss_diffs += !t_same_bits(le[k], ls[k]);
    int diffs = state_diffs(e.m, s.m);
    CHECK(loss_diffs == 0 && diffs == 0);
    bool frozen = t_same_bits(rv0, oar_module_get(e.m, rv)) &&
                  t_same_bits(nbt0, oar_module_get(e.m, zoo ? "bn.num_batches_tracked" : "1.num_batches_tracked"));
    CHECK(frozen);
    printf("  %-8s fused QAT eager vs compiled, %d steps + %d with %d BatchNorms frozen: %d losses and %d "
           "parameters/buffers differ; running statistics %s after the freeze (loss %.4f -> %.4f)\n",
           zoo ? zoo : "conv+bn", STEPS, STEPS, nf, loss_diffs, diffs, frozen ? "unchanged" : "MOVED", t_at(le[0], 0),
           t_at(le[2 * STEPS - 1], 0));
    oar_jit_free(f);
    run_free(&e);
    run_free(&s);
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

static oar_tensor *qweight(oar_tensor *w, oar_tensor **ws) {
    oar_observer *o = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                         .per_channel = true, .axis = 0});
    oar_tensor *z = NULL;
    CHECK(oar_observer_observe(o, w) == OAR_OK && oar_observer_qparams(o, ws, &z) == OAR_OK);
    oar_observer_free(o);
    return oar_quantize(w, *ws, z, 0, OAR_I8);
}

/* convert: the int8 program = int8 ops on the folded weight with the learned scales (static PTQ of the
 * folded model given those scales), and close to the fused model's eval forward */
static void test_convert(bool freeze) {
    oar_scope_begin();
    run r;
    run_init(&r, NULL, 2);
    oar_tensor *losses[20];
    oar_manual_seed(11);
    train(&r, NULL, 10, losses);
    if (freeze) CHECK(oar_qat_freeze_bn(r.m, NULL) == OAR_OK);
    train(&r, NULL, 10, losses + 10);
    oar_tensor *cal[1], *y;
    batch(16, &cal[0], &y);
    char path[512];
    snprintf(path, sizeof path, "%s/convbn%d", g_dir, (int)freeze);
    int n = 0;
    CHECK(oar_qat_convert(r.m, cal, 1, path, NULL, NULL, 0, &n) == OAR_OK && n == 2);
    char names[2][128];
    float s[2];
    int ns = 0;
    CHECK(oar_qat_scales(r.m, names, s, 2, &ns) == OAR_OK && ns == 2);
    /* the fold of fold_conv_bn: w' = w * f, b' = (b - mean) * f + beta */
    oar_tensor *f = factor(r.m, "1"), *ws0, *ws1;
    oar_tensor *wf = oar_mul(oar_module_get(r.m, "0.weight"), oar_reshape(f, (int64_t[]){4, 1, 1, 1}, 4));
    oar_tensor *bf = oar_add(oar_mul(oar_sub(oar_module_get(r.m, "0.bias"), oar_module_get(r.m, "1.running_mean")), f),
                             oar_module_get(r.m, "1.bias"));
    oar_tensor *w0 = qweight(wf, &ws0), *w1 = qweight(oar_module_get(r.m, "5.weight"), &ws1);
    oar_tensor *s0 = oar_scalar(s[0], OAR_F32), *s1 = oar_scalar(s[1], OAR_F32), *z = oar_scalar(128, OAR_I32);
    oar_conv_opts co = {.padding = {1, 1}};
    oar_pool_opts po = {.kernel = {2, 2}};
    oar_tensor *x = cal[0];
    oar_tensor *h = oar_qconv2d(oar_quantize(x, s0, z, 0, OAR_U8), s0, z, w0, ws0, bf, &co, NULL);
    h = oar_flatten(oar_max_pool2d(oar_relu(h), &po), 1, -1);
    oar_tensor *want = oar_qlinear(oar_quantize(h, s1, z, 0, OAR_U8), s1, z, w1, ws1, oar_module_get(r.m, "5.bias"),
                                   NULL);
    oar_tensor *got = predict(path, x);
    bool same = want && got && t_same_bits(want, got);
    CHECK(same);
    /* the fused eval forward (fake quant of the same folded weight) computes the same in float */
    oar_module_train(r.m, false);
    oar_tensor *fq = oar_forward(r.m, x);
    double db = 0;
    CHECK(fq && got && oar_sqnr(fq, got, &db) == OAR_OK && db > 60);
    printf("  convert%s: int8 program = int8 ops on the folded weight with the learned scales (%s); fused fake-quant "
           "eval forward vs int8 program %.1f dB\n", freeze ? " (BN frozen after 10 steps)" : "",
           same ? "bit for bit" : "DIFFERENT", db);
    run_free(&r);
    oar_scope_end();
}

static void test_bad_input(void) {
    oar_scope_begin();
    oar_conv_opts co = {.padding = {1, 1}};
    oar_module *c[3] = {oar_nn_conv2d(1, 4, 3, &co, true), oar_nn_activation(OAR_ACT_RELU, 0),
                        oar_nn_batch_norm2d(4, 1e-5, 0.1, true, true)}; /* BN not right after the conv */
    oar_module *m = oar_nn_sequential(c, 3);
    CHECK_ERR(oar_qat_prepare(m, &(oar_qat_opts){.fuse_bn = true}, NULL),
              "qat_prepare: expected (for fuse_bn) a Conv2d followed by a BatchNorm2d of its output channels among "
              "the same parent's children, found none in Sequential (1 layers to quantize); prepare without fuse_bn");
    printf("  fuse_bn without a pair: %s\n", oar_last_error());
    CHECK(oar_module_get(m, "0.act_scale_sum") == NULL); /* unchanged */
    CHECK(oar_qat_prepare(m, NULL, NULL) == OAR_OK);
    CHECK_ERR(oar_qat_freeze_bn(m, NULL), "qat_freeze_bn: expected a module prepared with fuse_bn (conv and BatchNorm "
                                          "fused), got Sequential with 1 QAT layers and no fused BatchNorm");
    CHECK_ERR(oar_qat_freeze_bn(NULL, NULL), "expected a module, got NULL");
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/oar-qat-convbn-XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_forward_formula();
    test_eager_equals_compiled(NULL, 2);
    test_eager_equals_compiled("resnet20", 22);
    test_convert(false);
    test_convert(true);
    test_bad_input();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_summary("test_qat_convbn");
}
