/* A batch of size 0 through every zoo model: eagerly, compiled (a forward and a whole training
 * step) and in the predictor. An inference server gets empty requests; each path must return the
 * empty result ([0, classes] logits) rather than crash, and a compiled program must keep serving
 * other sizes afterwards. The training step's loss is the mean of nothing, NaN as in PyTorch, and
 * compiled it equals the eager step bit for bit (the parameters too). */
#include "zoo_step_util.h"

#include <unistd.h>

static char g_dir[] = "/tmp/oar-zero-batch-XXXXXX";

typedef struct fwd {
    oar_module *m;
    bool stateful; /* forward_n(x, h, c) -> (logits, h, c) */
} fwd;

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    fwd *c = user;
    oar_module *m = c->m;
    if (c->stateful) {
        oar_tensor *args[3] = {in[0], NULL, NULL}, *o[3];
        if (oar_forward_n(m, args, 3, o, 3) != OAR_OK) return oar_last_status();
        out[0] = o[0];
        return OAR_OK;
    }
    out[0] = oar_forward(m, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* The model's input spec with its batch dim dynamic (dim 1 for the [T, N] LSTM). */
static oar_input_spec spec_for(const oar_zoo_info *info) {
    int64_t t = info->context < 16 ? info->context : 16;
    switch (info->input) {
    case OAR_ZOO_FEATURES: return (oar_input_spec){OAR_F32, 2, {-1, info->in_channels}, "x"};
    case OAR_ZOO_TOKENS: return (oar_input_spec){OAR_I64, 2, {-1, t}, "x"};
    case OAR_ZOO_TOKENS_STATEFUL: return (oar_input_spec){OAR_I64, 2, {t, -1}, "x"};
    default: break;
    }
    int64_t hw = info->in_channels == 3 ? 32 : 28;
    return (oar_input_spec){OAR_F32, 4, {-1, info->in_channels, hw, hw}, "x"};
}

static int batch_dim(const oar_zoo_info *info) { return info->input == OAR_ZOO_TOKENS_STATEFUL ? 1 : 0; }

/* An output of the right empty shape: the batch dim is 0, the others are the batch-2 ones. */
static bool empty_like(oar_tensor *y, oar_tensor *y2, int bd) {
    if (!y || !y2 || oar_ndim(y) != oar_ndim(y2) || oar_numel(y) != 0) return false;
    for (int d = 0; d < oar_ndim(y); d++)
        if (oar_size(y, d) != (d == bd ? 0 : oar_size(y2, d))) return false;
    return true;
}

/* The inference passes that change rounding (checked within tolerances in test_fusion_conv)
 * are off, so compiled and eager agree bit for bit. */
static oar_build_strategy exact_strategy(void) {
    oar_build_strategy s = {0};
    oar_build_strategy_set(&s, "fold_conv_bn", false);
    oar_build_strategy_set(&s, "fuse_conv_act", false);
    oar_build_strategy_set(&s, "conv_nhwc", false);
    oar_clear_error(); /* a pass this build lacks needs no switching off */
    return s;
}

static void check_forward(const oar_zoo_info *info) {
    oar_scope_begin();
    oar_manual_seed(5);
    oar_module *m = oar_zoo_create(info->name, NULL);
    oar_module_train(m, false);
    fwd c = {m, info->input == OAR_ZOO_TOKENS_STATEFUL};
    oar_input_spec spec = spec_for(info);
    int bd = batch_dim(info);
    oar_tensor *x0, *x2, *y0u, *y2u;
    zoo_batch(info, 0, 16, &x0, &y0u);
    zoo_batch(info, 2, 16, &x2, &y2u);
    oar_tensor *e0[1] = {0}, *e2[1] = {0};
    CHECK(forward_fn(&c, &x0, 1, e0, 1) == OAR_OK);
    CHECK(forward_fn(&c, &x2, 1, e2, 1) == OAR_OK);
    CHECK(empty_like(e0[0], e2[0], bd));

    /* compiled: traced at 0, then 2 (a new size), then 0 again (the specialized program) */
    const char *names[] = {"logits"};
    oar_jit_opts o = {.specs = &spec, .n_specs = 1, .module = m, .output_names = names, .n_output_names = 1,
                      .strategy = exact_strategy()};
    oar_jit *f = oar_jit_to_static(forward_fn, &c, &o);
    oar_tensor *s[1] = {0};
    oar_status st = oar_jit_call(f, &x0, 1, s, 1);
    CHECK(st == OAR_OK && empty_like(s[0], e2[0], bd));
    if (st != OAR_OK) printf("  %s: compiled batch 0 (traced): %s\n", info->name, oar_last_error());
    st = oar_jit_call(f, &x2, 1, s, 1);
    CHECK(st == OAR_OK && t_same_bits(s[0], e2[0]));
    if (st != OAR_OK || !t_same_bits(s[0], e2[0]))
        printf("  %s: compiled batch 2 after batch 0 differs from eager: %s\n", info->name, oar_last_error());
    CHECK(oar_jit_call(f, &x0, 1, s, 1) == OAR_OK && empty_like(s[0], e2[0], bd));
    oar_jit_free(f);
    f = oar_jit_to_static(forward_fn, &c, &o);
    CHECK(oar_jit_call(f, &x2, 1, s, 1) == OAR_OK);
    st = oar_jit_call(f, &x0, 1, s, 1); /* traced at 2, run at 0 */
    CHECK(st == OAR_OK && empty_like(s[0], e2[0], bd));
    if (st != OAR_OK) printf("  %s: compiled batch 0 (specialized): %s\n", info->name, oar_last_error());

    /* the predictor, exported at batch 2, run at 0 and at 2 again */
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, info->name);
    CHECK(oar_jit_save(f, path) == OAR_OK);
    oar_jit_free(f);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p != NULL);
    if (p) {
        st = oar_predictor_set_input(p, "x", x0);
        if (st == OAR_OK) st = oar_predictor_run(p);
        CHECK(st == OAR_OK);
        if (st != OAR_OK) printf("  %s: predictor batch 0: %s\n", info->name, oar_last_error());
        oar_tensor *y = st == OAR_OK ? oar_predictor_get_output(p, "logits") : NULL;
        CHECK(empty_like(y, e2[0], bd));
        oar_release(y);
        CHECK(oar_predictor_set_input(p, "x", x2) == OAR_OK && oar_predictor_run(p) == OAR_OK);
        y = oar_predictor_get_output(p, "logits");
        CHECK(y && oar_numel(y) == oar_numel(e2[0]));
        oar_release(y);
        oar_predictor_free(p);
    }
    char file[600];
    snprintf(file, sizeof file, "%s.json", path);
    unlink(file);
    snprintf(file, sizeof file, "%s.safetensors", path);
    unlink(file);
    oar_module_free(m);
    oar_scope_end();
}

/* A training step on an empty batch, eager and compiled: the loss is NaN, the parameters after
 * the step agree bit for bit, and the compiled function still trains on a real batch after. */
static void check_train_step(const oar_zoo_info *info) {
    oar_scope_begin();
    zoo_run e, s;
    zoo_run_init_sgd(&e, info->name, 9);
    zoo_run_init_sgd(&s, info->name, 9);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.opt};
    oar_jit *f = oar_jit_to_static(zoo_step_fn, &s, &jo);
    oar_tensor *io0[2], *io2[2];
    zoo_batch(info, 0, 16, &io0[0], &io0[1]);
    zoo_batch(info, 2, 16, &io2[0], &io2[1]);
    for (int k = 0; k < 3; k++) {
        oar_tensor **io = k == 1 ? io2 : io0;
        oar_rng_state rs = oar_rng_get_state();
        oar_tensor *le[1] = {0}, *ls[1] = {0};
        oar_status se = zoo_step_fn(&e, io, 2, le, 1);
        oar_rng_set_state(rs);
        oar_status ss = oar_jit_call(f, io, 2, ls, 1);
        CHECK(se == OAR_OK && ss == OAR_OK);
        if (ss != OAR_OK) printf("  %s: compiled training step at batch %d: %s\n", info->name, k == 1 ? 2 : 0, oar_last_error());
        if (k != 1) CHECK(le[0] && isnan(t_at(le[0], 0)));
        CHECK(t_same_bits(le[0], ls[0]));
    }
    int diffs = 0, nonfinite = 0;
    for (int i = 0; i < oar_module_num_parameters(e.m); i++) {
        oar_tensor *pe = oar_module_parameter(e.m, i, NULL);
        diffs += !t_same_bits(pe, oar_module_parameter(s.m, i, NULL));
        for (int64_t j = 0; j < oar_numel(pe) && j < 4; j++) nonfinite += !isfinite(t_at(pe, j));
    }
    CHECK(diffs == 0);
    CHECK(nonfinite == 0); /* an empty batch contributes zero gradients, not NaN */
    printf("  %-9s batch 0: eager, compiled and predictor forward; training step (%d parameters differ)\n",
           info->name, diffs);
    oar_jit_free(f);
    oar_optimizer_free(e.opt);
    oar_optimizer_free(s.opt);
    oar_module_free(e.m);
    oar_module_free(s.m);
    oar_scope_end();
}

int main(void) {
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int i = 0; oar_zoo_info_at(i); i++) {
        check_forward(oar_zoo_info_at(i));
        check_train_step(oar_zoo_info_at(i));
    }
    rmdir(g_dir);
    return test_summary("test_zero_batch");
}
