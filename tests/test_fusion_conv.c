/* The inference passes for convolution networks: fold_conv_bn (batch_norm folded into the
 * conv before it, the folded weights computed once per parameter change) and fuse_conv_act
 * (conv + residual add + relu into conv2d_act). Checked on compiled eval-mode programs:
 * node counts per pass setting, results against eager and against the unfused program within
 * a tolerance, training mode untouched, parameter changes between runs picked up, passes
 * switched by name, and the exported predictor.
 *
 * Tolerance: folding rounds w * gamma / sqrt(var + eps) once per weight (relative error
 * ~6e-8) and moves the affine step into the conv's f32 accumulation; over ResNet-20's 19
 * layers of 144..576-term dot products such differences stay near 1e-6 relative to the
 * logits' scale. 1e-4 relative to max(1, max |reference|) leaves ~100x margin while any real
 * error (a wrong channel, a stale weight, a missing epsilon) is far larger. */
#include "test_util.h"

#include "ops/op.h"

#include <unistd.h>

#define TOL 1e-4

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* max |a - b| <= TOL * max(1, max |b|); loud: print the difference when it is not */
static bool within(oar_tensor *a, oar_tensor *b, bool loud) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return false;
    size_t n = (size_t)oar_numel(a);
    double *x = malloc(sizeof(double) * (n + 1)), *y = malloc(sizeof(double) * (n + 1));
    oar_copy_to_buffer(a, x, sizeof(double) * n, OAR_F64);
    oar_copy_to_buffer(b, y, sizeof(double) * n, OAR_F64);
    double scale = 1, diff = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(y[i]) > scale) scale = fabs(y[i]);
        if (!(fabs(x[i] - y[i]) <= diff)) diff = isnan(x[i] - y[i]) ? INFINITY : fabs(x[i] - y[i]);
    }
    free(x);
    free(y);
    if (loud && diff > TOL * scale) printf("  max diff %g (scale %g)\n", diff, scale);
    return diff <= TOL * scale;
}

static bool near(oar_tensor *a, oar_tensor *b) { return within(a, b, true); }
static bool apart(oar_tensor *a, oar_tensor *b) { return a && b && !within(a, b, false); }

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

/* Batch-norm parameters and statistics away from their identity defaults, so a fold that
 * dropped or misplaced any of them would show. */
static void randomize_bn(oar_module *m) {
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *t = oar_module_parameter(m, i, &name);
        if (oar_ndim(t) != 1) continue;
        if (ends_with(name, "weight")) oar_init_uniform_(t, 0.5, 1.5);
        else oar_init_uniform_(t, -0.3, 0.3);
    }
    for (int i = 0; i < oar_module_num_buffers(m); i++) {
        const char *name;
        oar_tensor *t = oar_module_buffer(m, i, &name);
        if (ends_with(name, "running_mean")) oar_init_uniform_(t, -0.3, 0.3);
        else if (ends_with(name, "running_var")) oar_init_uniform_(t, 0.5, 2.0);
    }
}

/* Nodes of op in the dump of the compiled function's program: " = op(" or " = op[inplace](". */
static int count_op(oar_jit *f, const char *op) {
    static char text[1 << 18];
    if (oar_jit_dump(f, 0, text, sizeof text) < 0) return -1;
    char pat[64];
    snprintf(pat, sizeof pat, " = %s", op);
    int n = 0;
    for (const char *s = strstr(text, pat); s; s = strstr(s + 1, pat)) n += s[strlen(pat)] == '(' || s[strlen(pat)] == '[';
    return n;
}

/* Whether the dump of the compiled function's program holds text. */
static bool dump_has(oar_jit *f, const char *text) {
    static char dump[1 << 18];
    return oar_jit_dump(f, 0, dump, sizeof dump) >= 0 && strstr(dump, text) != NULL;
}

/* Compiled with the passes named in off (comma-separated) switched off. */
/* The generic elementwise fusion is off here (it has its own tests): the counts below are of
 * what the convolution passes leave. */
static oar_jit *compile(oar_module *m, const char *off) {
    oar_jit_opts o = {.module = m};
    CHECK(oar_build_strategy_set(&o.strategy, "fuse_elementwise", false) == OAR_OK);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", off ? off : "");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        CHECK(oar_build_strategy_set(&o.strategy, t, false) == OAR_OK);
    return oar_jit_to_static(forward_fn, m, &o);
}

/* conv_nhwc runs only where oneDNN runs conv2d_act */
static bool have_onednn(void) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(OAR_OP_conv2d_act, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, "onednn")) return true;
    return false;
}

static oar_tensor *run(oar_jit *f, oar_tensor *x) {
    oar_tensor *y[1] = {0};
    return oar_jit_call(f, &x, 1, y, 1) == OAR_OK ? y[0] : NULL;
}

static oar_module *resnet(void) {
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    randomize_bn(m);
    oar_module_train(m, false);
    return m;
}

/* ResNet-20 has 21 conv + batch_norm pairs, 19 relus and 9 residual adds; its two 1x1
 * projection shortcuts end in an add whose other side fuses first, so they stay conv2d until
 * conv_nhwc makes every conv a conv2d_act on NHWC data: one conversion at the input, and the
 * global average pool becomes a mean over the NHWC data. */
static void test_counts_and_results(void) {
    oar_scope_begin();
    oar_module *m = resnet();
    oar_tensor *x = oar_randn((int64_t[]){3, 3, 32, 32}, 4, OAR_F32);
    oar_tensor *eager = oar_forward(m, x);
    oar_jit *all = compile(m, NULL), *both = compile(m, "conv_nhwc"), *fold = compile(m, "fuse_conv_act,conv_nhwc");
    oar_jit *none = compile(m, "fuse_conv_act,fold_conv_bn,conv_nhwc,fuse_bn_act");
    oar_jit *layout = compile(m, "fuse_conv_act,fold_conv_bn,fuse_bn_act");
    oar_tensor *y_both = run(both, x), *y_fold = run(fold, x), *y_none = run(none, x), *y_all = run(all, x);
    oar_tensor *y_layout = run(layout, x);
    CHECK(y_both && y_fold && y_none && y_all && y_layout);

    CHECK(count_op(none, "batch_norm") == 21 && count_op(none, "conv2d") == 21);
    CHECK(count_op(none, "conv2d_act") == 0 && count_op(none, "relu") == 19 && count_op(none, "add") == 9);
    CHECK(count_op(fold, "batch_norm") == 0 && count_op(fold, "conv2d") == 21);
    CHECK(count_op(fold, "rsqrt") == 21 && count_op(fold, "relu") == 19); /* the folded weights' nodes */
    CHECK(count_op(both, "batch_norm") == 0 && count_op(both, "relu") == 0);
    CHECK(count_op(both, "conv2d_act") == 19 && count_op(both, "conv2d") == 2);
    if (have_onednn()) {
        CHECK(count_op(all, "conv2d_act") == 21 && count_op(all, "conv2d") == 0 && count_op(all, "batch_norm") == 0);
        CHECK(count_op(all, "permute") == 1 && count_op(all, "contiguous") == 1);
        CHECK(count_op(all, "adaptive_avg_pool2d") == 0 && count_op(all, "mean") == 1);
        CHECK(count_op(layout, "conv2d_act") == 21 && count_op(layout, "batch_norm") == 21 && count_op(layout, "relu") == 19);
    } else { /* no NHWC convolution to run: the pass leaves the program alone */
        CHECK(count_op(all, "conv2d_act") == 19 && count_op(all, "permute") == 0);
    }

    /* the folded weights are computed once and kept outside the arena (all ~270k weights) */
    oar_program_memory_stats ms_both, ms_none;
    CHECK(oar_program_memory_stats_get(both, 0, &ms_both) == OAR_OK && ms_both.persistent_bytes > 1000000);
    CHECK(oar_program_memory_stats_get(none, 0, &ms_none) == OAR_OK && ms_none.persistent_bytes == 0);
    int64_t bytes = 0;
    for (int k = 0; k < oar_numel(y_none); k++) bytes += t_at(y_none, k) == t_at(eager, k);
    CHECK(bytes == oar_numel(eager)); /* without the folds the program is eager's, value for value */
    CHECK(near(y_fold, eager));
    CHECK(near(y_both, eager));
    CHECK(near(y_both, y_none));
    CHECK(near(y_all, eager) && near(y_all, y_both) && near(y_layout, y_none));
    /* and with every default pass, the elementwise fusion included */
    oar_jit *dflt = oar_jit_to_static(forward_fn, m, &(oar_jit_opts){.module = m});
    oar_tensor *y_dflt = dflt ? run(dflt, x) : NULL;
    CHECK(y_dflt && near(y_dflt, eager));
    oar_jit_free(dflt);
    /* a second run takes the computed-once weights from the first */
    oar_tensor *again = run(both, x);
    CHECK(again && near(again, y_both));
    for (int k = 0; again && k < oar_numel(again); k++)
        if (t_at(again, k) != t_at(y_both, k)) {
            CHECK(!"a second run differs from the first");
            break;
        }
    oar_jit_free(all);
    oar_jit_free(both);
    oar_jit_free(fold);
    oar_jit_free(none);
    oar_jit_free(layout);
    oar_module_free(m);
    oar_scope_end();
}

/* Parameters are bound by reference: changes between runs reach the folded weights. */
static void test_parameter_changes(void) {
    oar_scope_begin();
    oar_module *m = resnet();
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 32, 32}, 4, OAR_F32);
    oar_jit *f = compile(m, NULL);
    oar_tensor *first = run(f, x);
    CHECK(first && near(first, oar_forward(m, x)));
    const char *names[3] = {"bn.weight", "conv.weight", "layers.4.bn2.bias"};
    for (int k = 0; k < 3; k++) {
        oar_tensor *p = NULL;
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            const char *nm;
            oar_tensor *t = oar_module_parameter(m, i, &nm);
            if (!strcmp(nm, names[k])) p = t;
        }
        CHECK(p != NULL);
        if (!p) continue;
        oar_no_grad_begin();
        CHECK(oar_init_uniform_(p, 0.2, 0.9) == OAR_OK);
        oar_no_grad_end();
        oar_tensor *y = run(f, x), *want = oar_forward(m, x);
        CHECK(y && near(y, want));
        CHECK(apart(y, first)); /* the change matters, so a stale fold would fail above */
        first = y;
    }
    /* running statistics (buffers) too, and a copy into them */
    for (int i = 0; i < oar_module_num_buffers(m); i++) {
        const char *nm;
        oar_tensor *t = oar_module_buffer(m, i, &nm);
        if (!strcmp(nm, "layers.8.bn1.running_var")) CHECK(oar_fill_(t, 3.0) == OAR_OK);
        if (!strcmp(nm, "layers.0.bn2.running_mean")) CHECK(oar_copy_(t, oar_full((int64_t[]){16}, 1, 0.7, OAR_F32)) == OAR_OK);
    }
    oar_tensor *y = run(f, x);
    CHECK(y && near(y, oar_forward(m, x)) && apart(y, first));
    CHECK(oar_jit_num_traces(f) == 1);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* Training mode: batch_norm uses batch statistics and updates the running ones, so neither
 * pass applies (inference_only), and the compiled forward is eager's bit for bit. */
static void test_training_untouched(void) {
    oar_scope_begin();
    oar_module *m = resnet();
    oar_module_train(m, true);
    oar_tensor *x = oar_randn((int64_t[]){4, 3, 32, 32}, 4, OAR_F32);
    oar_jit *f = compile(m, "fuse_bn_act"); /* (fuse_bn_act, which does apply, is tested in test_fusion_bn_act) */
    oar_tensor *y = run(f, x);
    CHECK(y != NULL);
    CHECK(count_op(f, "batch_norm") == 21 && count_op(f, "conv2d_act") == 0 && count_op(f, "relu") == 19);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* A conv with a bias and a batch_norm without affine parameters; a relu the conv does not
 * feed alone stays. */
static void test_small_net(void) {
    oar_scope_begin();
    oar_manual_seed(9);
    oar_conv_opts co = {.stride = {1, 1}, .padding = {1, 1}};
    oar_module *kids[3] = {oar_nn_conv2d(3, 8, 3, &co, true), oar_nn_batch_norm2d(8, 1e-3, 0.1, false, true),
                           oar_nn_activation(OAR_ACT_RELU, 0)};
    oar_module *m = oar_nn_sequential(kids, 3);
    CHECK(m != NULL);
    randomize_bn(m);
    oar_module_train(m, false);
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 9, 9}, 4, OAR_F32);
    oar_jit *f = compile(m, NULL);
    oar_tensor *y = run(f, x);
    CHECK(y && near(y, oar_forward(m, x)));
    CHECK(count_op(f, "batch_norm") == 0 && count_op(f, "conv2d_act") == 1 && count_op(f, "conv2d") == 0);
    CHECK(count_op(f, "permute") == (have_onednn() ? 2 : 0)); /* in and out of NHWC */
    CHECK(count_op(f, "neg") == 0 && count_op(f, "sub") == 1); /* (bias - mean) * scale, no beta */
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

/* conv, clip (ReLU6, as mobilenet_v2 exports it), concat with another conv (squeezenet's fire
 * module), conv: conv_nhwc runs the clip and the concat on the NHWC data, so the last conv reads
 * it with no conversion (one permute in, one out). */
static oar_status relu6_net(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor **w = user;
    oar_conv_opts co = {.stride = {1, 1}, .padding = {1, 1}};
    oar_tensor *h = oar_clip(oar_conv2d(in[0], w[0], NULL, &co), 0.0, 6.0);
    oar_tensor *cat[2] = {h, oar_conv2d(in[0], w[2], NULL, &co)};
    out[0] = oar_conv2d(oar_concat(cat, 2, 1), w[1], NULL, &co);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_relu6_nhwc(void) {
    oar_scope_begin();
    oar_manual_seed(11);
    oar_tensor *w[3] = {oar_randn((int64_t[]){16, 3, 3, 3}, 4, OAR_F32), oar_randn((int64_t[]){8, 24, 3, 3}, 4, OAR_F32),
                        oar_randn((int64_t[]){8, 3, 3, 3}, 4, OAR_F32)};
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 10, 10}, 4, OAR_F32);
    oar_tensor *eager = NULL;
    CHECK(relu6_net(w, &x, 1, &eager, 1) == OAR_OK);
    oar_jit_opts o = {0}, off = {0};
    CHECK(oar_build_strategy_set(&off.strategy, "conv_nhwc", false) == OAR_OK);
    oar_jit *f = oar_jit_to_static(relu6_net, w, &o), *g = oar_jit_to_static(relu6_net, w, &off);
    oar_tensor *y = run(f, x), *y_off = run(g, x);
    CHECK(y && y_off && near(y, eager) && near(y, y_off));
    /* the clip became the first conv's relu6 epilogue (fuse_conv_act) */
    CHECK(count_op(f, "clip") == 0 && count_op(f, "conv2d_act") == 3 && count_op(f, "concat") == 1);
    CHECK(dump_has(f, "relu6"));
    if (have_onednn()) CHECK(count_op(f, "permute") == 2 && count_op(f, "contiguous") == 1);
    oar_jit_free(f);
    oar_jit_free(g);
    /* without fuse_conv_act the clip stays (and runs on the NHWC data) */
    oar_jit_opts nf = {0};
    CHECK(oar_build_strategy_set(&nf.strategy, "fuse_conv_act", false) == OAR_OK);
    f = oar_jit_to_static(relu6_net, w, &nf);
    y = run(f, x);
    CHECK(y && near(y, eager) && count_op(f, "clip") == 1 && !dump_has(f, "relu6"));
    oar_jit_free(f);
    oar_scope_end();
}

/* A clip to other bounds than [0, 6] is not a relu6: it stays a clip after the conv. */
static oar_status clip4_net(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor **w = user;
    oar_conv_opts co = {.stride = {1, 1}, .padding = {1, 1}};
    out[0] = oar_clip(oar_conv2d(in[0], w[0], NULL, &co), 0.0, 4.0);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_clip_other_bounds(void) {
    oar_scope_begin();
    oar_manual_seed(12);
    oar_tensor *w[1] = {oar_randn((int64_t[]){16, 3, 3, 3}, 4, OAR_F32)};
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 10, 10}, 4, OAR_F32), *eager = NULL;
    CHECK(clip4_net(w, &x, 1, &eager, 1) == OAR_OK);
    oar_jit_opts o = {0};
    oar_jit *f = oar_jit_to_static(clip4_net, w, &o);
    oar_tensor *y = run(f, x);
    CHECK(y && near(y, eager) && count_op(f, "clip") == 1 && !dump_has(f, "relu6"));
    oar_jit_free(f);
    oar_scope_end();
}

/* squeezenet's fire module: a 1x1 "squeeze" conv, two "expand" convs (1x1 and 3x3) whose
 * outputs are concatenated on channels, the next 1x1 squeeze conv with relu. With oneDNN,
 * conv_nhwc splits that conv over the concat's inputs (concat_conv.c: the second part adds the
 * first as its residual) and no concat is left; with the concat read twice (also returned) it
 * stays. Both equal eager within the tolerance. With a max pooling between the concat and the
 * conv, the pooling runs on each part first (then the split applies the same way). */
static oar_status fire_net(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_tensor **w = user;
    oar_conv_opts one = {.stride = {1, 1}}, three = {.stride = {1, 1}, .padding = {1, 1}};
    oar_tensor *s = oar_relu(oar_conv2d(in[0], w[0], w[1], &one));
    oar_tensor *cat[2] = {oar_relu(oar_conv2d(s, w[2], NULL, &one)), oar_relu(oar_conv2d(s, w[3], w[4], &three))};
    oar_tensor *c = oar_concat(cat, 2, 1);
    if (w[7]) { /* squeezenet's max pooling between fire modules: pooled per part, no concat */
        oar_pool_opts pool = {.kernel = {3, 3}, .stride = {2, 2}, .ceil_mode = true};
        c = oar_max_pool2d(c, &pool);
    }
    /* a conv reading the split's result (a value the pass added; ASAN checks its bookkeeping) */
    out[0] = oar_conv2d(oar_relu(oar_conv2d(c, w[5], w[6], &one)), w[8], NULL, &one);
    if (n_out > 1) out[1] = c;
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_fire_concat(bool pool) {
    oar_scope_begin();
    oar_manual_seed(13);
    oar_tensor *w[9] = {oar_randn((int64_t[]){8, 16, 1, 1}, 4, OAR_F32), oar_randn((int64_t[]){8}, 1, OAR_F32),
                        oar_randn((int64_t[]){16, 8, 1, 1}, 4, OAR_F32), oar_randn((int64_t[]){24, 8, 3, 3}, 4, OAR_F32),
                        oar_randn((int64_t[]){24}, 1, OAR_F32), oar_randn((int64_t[]){12, 40, 1, 1}, 4, OAR_F32),
                        oar_randn((int64_t[]){12}, 1, OAR_F32), NULL,
                        oar_randn((int64_t[]){4, 12, 1, 1}, 4, OAR_F32)};
    w[7] = pool ? w[0] : NULL; /* only a flag for fire_net: pool between the concat and the conv */
    oar_tensor *x = oar_randn((int64_t[]){3, 16, 9, 9}, 4, OAR_F32), *eager[2] = {0};
    CHECK(fire_net(w, &x, 1, eager, 2) == OAR_OK);
    oar_jit_opts o = {0};
    oar_jit *f = oar_jit_to_static(fire_net, w, &o);
    oar_tensor *y[2] = {0};
    CHECK(oar_jit_call(f, &x, 1, y, 1) == OAR_OK && near(y[0], eager[0]));
    CHECK(count_op(f, "concat") == (have_onednn() ? 0 : 1));
    if (have_onednn()) CHECK(count_op(f, "conv2d_act") == 6 && count_op(f, "slice") == 2);
    /* a second call: the weight slices were hoisted, the result the same */
    oar_tensor *y2[1] = {0};
    CHECK(oar_jit_call(f, &x, 1, y2, 1) == OAR_OK && near(y2[0], y[0]));
    oar_jit_free(f);
    /* the concat also returned: it stays, the conv reads it */
    o = (oar_jit_opts){0};
    f = oar_jit_to_static(fire_net, w, &o);
    oar_tensor *z[2] = {0};
    CHECK(oar_jit_call(f, &x, 1, z, 2) == OAR_OK && near(z[0], eager[0]) && near(z[1], eager[1]));
    CHECK(count_op(f, "concat") == 1 && count_op(f, "slice") == 0);
    oar_jit_free(f);
    oar_scope_end();
}

static int pass_index(const char *name) {
    for (int i = 0; oar_pass_name(i); i++)
        if (!strcmp(oar_pass_name(i), name)) return i;
    return -1;
}

static void test_switches(void) {
    int a = pass_index("fold_conv_bn"), b = pass_index("fuse_conv_act"), c = pass_index("conv_nhwc");
    CHECK(a >= 0 && b > a && c > b && c < pass_index("inplace")); /* fold, fuse, then the layout */
    oar_build_strategy s = {0};
    CHECK(oar_build_strategy_set(&s, "fold_conv_bn", false) == OAR_OK);
    CHECK(oar_build_strategy_set(&s, "fuse_conv_act", false) == OAR_OK);
    CHECK(a >= 0 && b >= 0 && s.disable == ((1ull << a) | (1ull << b)));
    CHECK(oar_build_strategy_set(&s, "fold_conv_bn", true) == OAR_OK && s.disable == 1ull << b);
}

/* The exported model runs the same passes in the predictor. */
static void test_predictor(void) {
    oar_scope_begin();
    oar_module *m = resnet();
    oar_input_spec spec = {OAR_F32, 4, {-1, 3, 32, 32}, "image"};
    const char *out_names[] = {"logits"};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .output_names = out_names, .n_output_names = 1, .module = m};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &o);
    oar_tensor *x = oar_randn((int64_t[]){2, 3, 32, 32}, 4, OAR_F32), *x5 = oar_randn((int64_t[]){5, 3, 32, 32}, 4, OAR_F32);
    CHECK(run(f, x) != NULL);
    char dir[] = "/tmp/oar-fusion-XXXXXX", path[600];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/resnet20", dir);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p != NULL);
    for (int k = 0; p && k < 2; k++) {
        oar_tensor *in = k ? x5 : x;
        CHECK(oar_predictor_set_input(p, "image", in) == OAR_OK && oar_predictor_run(p) == OAR_OK);
        oar_tensor *y = oar_predictor_get_output(p, "logits");
        CHECK(y && near(y, oar_forward(m, in)));
        oar_release(y);
    }
    oar_predictor_free(p);
    char f1[700];
    snprintf(f1, sizeof f1, "%s.json", path);
    unlink(f1);
    snprintf(f1, sizeof f1, "%s.safetensors", path);
    unlink(f1);
    rmdir(dir);
    oar_jit_free(f);
    oar_module_free(m);
    oar_scope_end();
}

int main(void) {
    oar_no_grad_begin();
    test_counts_and_results();
    test_parameter_changes();
    test_training_untouched();
    test_small_net();
    test_relu6_nhwc();
    test_clip_other_bounds();
    test_fire_concat(false);
    test_fire_concat(true);
    test_predictor();
    oar_no_grad_end();
    test_switches();
    return test_summary("test_fusion_conv");
}
