/* Automatic mixed precision: the class table, autocast regions (casts, nesting, disabling,
 * custom lists, gradient dtypes), the GradScaler against golden values from the algorithm of
 * torch's GradScaler (tests/golden/amp_scaler.txt), its floor, static mode and warning, and O2's
 * low-precision parameters with f32 masters. */
#include "test_util.h"

#include <unistd.h>

static oar_tensor *mat(int64_t r, int64_t c, double a, double b, bool grad) {
    int64_t s[2] = {r, c};
    float *v = malloc(sizeof(float) * (size_t)(r * c));
    for (int64_t i = 0; i < r * c; i++) v[i] = (float)(sin(a * (double)i + b) * 0.5);
    oar_tensor *t = oar_from_data(v, s, 2, OAR_F32);
    free(v);
    if (grad) oar_set_requires_grad(t, true);
    return t;
}

/* The class table as declared, on every CPU (test_amp_cpu_policy checks the CPU policy). */
static bool begin(bool enabled, oar_dtype dt) {
    oar_autocast_opts o = oar_autocast_defaults();
    o.cpu_policy = OAR_AMP_CPU_TABLE;
    o.enabled = enabled;
    o.dtype = dt;
    return oar_autocast_begin(&o) == OAR_OK;
}

static void test_class_table(void) {
    CHECK(oar_amp_op_class("matmul", OAR_BF16) == OAR_AMP_LOW);
    CHECK(oar_amp_op_class("linear", OAR_F16) == OAR_AMP_LOW);
    CHECK(oar_amp_op_class("conv2d", OAR_BF16) == OAR_AMP_LOW);
    CHECK(oar_amp_op_class("fused_attention", OAR_BF16) == OAR_AMP_LOW);
    CHECK(oar_amp_op_class("softmax", OAR_BF16) == OAR_AMP_FP32);
    CHECK(oar_amp_op_class("layer_norm", OAR_F16) == OAR_AMP_FOLLOW); /* takes a low x with f32 weights */
    CHECK(oar_amp_op_class("cross_entropy", OAR_BF16) == OAR_AMP_FP32);
    CHECK(oar_amp_op_class("sum", OAR_BF16) == OAR_AMP_FP32);
    /* fp16's range: exp is fp32 under f16 and follows under bf16 */
    CHECK(oar_amp_op_class("exp", OAR_F16) == OAR_AMP_FP32);
    CHECK(oar_amp_op_class("exp", OAR_BF16) == OAR_AMP_FOLLOW);
    CHECK(oar_amp_op_class("pow", OAR_F16) == OAR_AMP_FP32);
    CHECK(oar_amp_op_class("pow", OAR_BF16) == OAR_AMP_PROMOTE);
    CHECK(oar_amp_op_class("concat", OAR_BF16) == OAR_AMP_PROMOTE);
    CHECK(oar_amp_op_class("add", OAR_BF16) == OAR_AMP_PROMOTE);
    CHECK(oar_amp_op_class("relu", OAR_BF16) == OAR_AMP_FOLLOW);
    CHECK(oar_amp_op_class("reshape", OAR_F16) == OAR_AMP_FOLLOW);
    CHECK(strcmp(oar_amp_class_name(OAR_AMP_PROMOTE), "promote") == 0);
    CHECK_ERR(oar_amp_op_class("no_such_op", OAR_BF16), "oar_amp_op_class: expected an op name, got 'no_such_op'");
    CHECK_ERR(oar_amp_op_class("matmul", OAR_F32), "oar_amp_op_class: expected dtype f16 or bf16, got f32");
}

/* Each class casts as declared; the autocast outputs match the f32 ones at bf16's tolerance. */
static void test_casts(void) {
    oar_scope_begin();
    oar_tensor *x = mat(4, 8, 0.37, 0.1, false), *w = mat(8, 3, 0.21, 0.5, false);
    int64_t n3 = 3;
    oar_tensor *b = oar_full(&n3, 1, 0.25, OAR_F32);
    oar_tensor *ref = oar_matmul(x, w);
    CHECK(begin(true, OAR_BF16));
    CHECK(oar_autocast_enabled() && oar_autocast_dtype() == OAR_BF16);
    oar_tensor *y = oar_matmul(x, w);
    CHECK(y && oar_dtype_of(y) == OAR_BF16);
    for (int i = 0; i < 12; i++) CHECK_NEAR(t_at(y, i), t_at(ref, i), 1.6e-2 * (1 + fabs(t_at(ref, i))));
    CHECK(oar_dtype_of(oar_relu(y)) == OAR_BF16);             /* follow */
    CHECK(oar_dtype_of(oar_softmax(y, -1)) == OAR_F32);        /* fp32 */
    CHECK(oar_dtype_of(oar_exp(y)) == OAR_BF16);               /* follows under bf16 */
    CHECK(oar_dtype_of(oar_add(y, b)) == OAR_F32);             /* promote to the widest */
    CHECK(oar_dtype_of(oar_mul(y, oar_scalar(2.0, OAR_F32))) == OAR_BF16); /* 0-d follows */
    oar_tensor *cat_in[2] = {y, oar_cast(y, OAR_F32)};
    CHECK(oar_dtype_of(oar_concat(cat_in, 2, 0)) == OAR_F32);
    /* integers are never cast */
    oar_tensor *idx = oar_arange(0, 3, 1, OAR_I64);
    CHECK(oar_dtype_of(oar_index_select(y, 1, idx)) == OAR_BF16);
    oar_autocast_end();
    CHECK(!oar_autocast_enabled() && oar_autocast_dtype() == OAR_F32);
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F32);
    /* f16: exp of a low tensor is computed in f32 */
    CHECK(begin(true, OAR_F16));
    oar_tensor *h = oar_matmul(x, w);
    CHECK(oar_dtype_of(h) == OAR_F16 && oar_dtype_of(oar_exp(h)) == OAR_F32);
    oar_autocast_end();
    oar_scope_end();
}

static int n_warnings;
static char last_warning[256];
static void on_warning(const char *m, void *u) {
    (void)u;
    n_warnings++;
    snprintf(last_warning, sizeof last_warning, "%s", m);
}

static void test_nesting(void) {
    oar_scope_begin();
    oar_tensor *x = mat(2, 4, 0.3, 0.0, false), *w = mat(4, 2, 0.7, 0.2, false);
    CHECK(begin(true, OAR_BF16));
    CHECK(begin(true, OAR_F16));
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F16);
    CHECK(begin(false, OAR_BF16));
    CHECK(!oar_autocast_enabled());
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F32);
    oar_autocast_end();
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F16);
    oar_autocast_end();
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_BF16);
    oar_autocast_end();
    CHECK(oar_dtype_of(oar_matmul(x, w)) == OAR_F32);
    /* an unmatched end warns and changes nothing */
    oar_set_warning_handler(on_warning, NULL);
    n_warnings = 0;
    oar_autocast_end();
    CHECK(n_warnings == 1 && strstr(last_warning, "oar_autocast_end: no autocast region is open"));
    oar_set_warning_handler(NULL, NULL);
    /* bad options */
    oar_autocast_opts o = oar_autocast_defaults();
    o.dtype = OAR_F64;
    CHECK_ERR(oar_autocast_begin(&o), "oar_autocast_begin: expected dtype f16 or bf16, got f64");
    CHECK(!oar_autocast_enabled());
    oar_scope_end();
}

static void test_custom_lists(void) {
    oar_scope_begin();
    oar_tensor *x = mat(2, 4, 0.3, 0.0, false), *w = mat(4, 2, 0.7, 0.2, false);
    const char *fp32[] = {"matmul"}, *low[] = {"softmax"}, *follow[] = {"sum"};
    oar_autocast_opts o = oar_autocast_defaults();
    o.custom_fp32 = fp32, o.n_custom_fp32 = 1;
    o.custom_low = low, o.n_custom_low = 1;
    o.custom_follow = follow, o.n_custom_follow = 1;
    CHECK(oar_autocast_begin(&o) == OAR_OK);
    CHECK(oar_amp_op_class("matmul", OAR_BF16) == OAR_AMP_FP32);
    CHECK(oar_amp_op_class("matmul", OAR_F16) == OAR_AMP_LOW); /* another dtype: the declared class */
    oar_tensor *y = oar_matmul(oar_cast(x, OAR_BF16), w);
    CHECK(oar_dtype_of(y) == OAR_F32);
    CHECK(oar_dtype_of(oar_softmax(y, -1)) == OAR_BF16);
    CHECK(oar_dtype_of(oar_sum(oar_cast(y, OAR_BF16), NULL, 0, false)) == OAR_BF16);
    oar_autocast_end();
    CHECK(oar_amp_op_class("matmul", OAR_BF16) == OAR_AMP_LOW);
    const char *bad[] = {"matmull"};
    o = oar_autocast_defaults();
    o.custom_low = bad, o.n_custom_low = 1;
    CHECK_ERR(oar_autocast_begin(&o), "oar_autocast_begin: custom_low[0] is 'matmull', not an op");
    CHECK(!oar_autocast_enabled());
    oar_scope_end();
}

/* Gradients reach every parameter in its own dtype, also when backward runs inside the region,
 * and match the f32 gradients at bf16's tolerance. */
static void test_grad_dtypes(void) {
    oar_scope_begin();
    oar_tensor *x = mat(4, 8, 0.37, 0.1, false), *w = mat(8, 3, 0.21, 0.5, true);
    int64_t n3 = 3;
    oar_tensor *b = oar_full(&n3, 1, 0.1, OAR_F32);
    oar_set_requires_grad(b, true);
    oar_tensor *wl = t_leaf_copy(oar_cast(w, OAR_BF16)); /* an O2-style low parameter */
    oar_tensor *loss32 = oar_sum(oar_softmax(oar_add(oar_matmul(x, w), b), -1), NULL, 0, false);
    oar_tensor *lossw = oar_sum(oar_square(oar_add(oar_matmul(x, w), b)), NULL, 0, false);
    CHECK(oar_backward(lossw, NULL, false) == OAR_OK);
    oar_tensor *gw32 = oar_clone(oar_grad_get(w));
    oar_zero_grad(w);
    oar_zero_grad(b);
    (void)loss32;
    for (int inside = 0; inside < 2; inside++) {
        CHECK(begin(true, OAR_BF16));
        oar_tensor *loss = oar_sum(oar_square(oar_add(oar_matmul(x, w), b)), NULL, 0, false);
        oar_tensor *lossl = oar_sum(oar_matmul(x, wl), NULL, 0, false);
        CHECK(oar_dtype_of(loss) == OAR_F32);
        if (!inside) oar_autocast_end();
        CHECK(oar_backward(loss, NULL, false) == OAR_OK);
        CHECK(oar_backward(lossl, NULL, false) == OAR_OK);
        if (inside) oar_autocast_end();
        oar_tensor *gw = oar_grad_get(w), *gb = oar_grad_get(b), *gl = oar_grad_get(wl);
        CHECK(gw && oar_dtype_of(gw) == OAR_F32);
        CHECK(gb && oar_dtype_of(gb) == OAR_F32);
        CHECK(gl && oar_dtype_of(gl) == OAR_BF16);
        for (int i = 0; gw && i < 24; i++) CHECK_NEAR(t_at(gw, i), t_at(gw32, i), 3e-2 * (1 + fabs(t_at(gw32, i))));
        oar_zero_grad(w);
        oar_zero_grad(b);
        oar_zero_grad(wl);
    }
    oar_scope_end();
}

/* ---- GradScaler against tests/golden/amp_scaler.txt */
static int read_vals(char *line, float *v, int cap) {
    char *bar = strchr(line, '|');
    int n = 0;
    for (char *p = bar ? bar + 1 : line, *e; n < cap; p = e) {
        double d = strtod(p, &e);
        if (e == p) break;
        v[n++] = (float)d;
    }
    return n;
}

static void test_scaler_golden(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/amp_scaler.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_amp: scaler golden skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return;
    }
    oar_scope_begin();
    char line[8192];
    float xv[24], wv[12], tv[18];
    int plant[64] = {0}; /* 1 inf, 2 nan */
    oar_grad_scaler_opts so = oar_grad_scaler_defaults();
    so.growth_interval = 3;
    oar_grad_scaler *sc = oar_grad_scaler_new(&so);
    oar_tensor *x = NULL, *w = NULL, *t = NULL;
    oar_optimizer *opt = NULL;
    int steps = 0;
    while (fgets(line, sizeof line, f)) {
        int k;
        char kind[8];
        if (!strncmp(line, "x ", 2)) read_vals(line, xv, 24);
        else if (!strncmp(line, "w ", 2)) read_vals(line, wv, 12);
        else if (!strncmp(line, "t ", 2)) read_vals(line, tv, 18);
        else if (sscanf(line, "plant %d %7s", &k, kind) == 2 && k < 64) plant[k] = strcmp(kind, "inf") ? 2 : 1;
        else if (!strncmp(line, "step ", 5)) {
            if (!opt) {
                int64_t sx[2] = {6, 4}, sw[2] = {4, 3}, st[2] = {6, 3};
                x = oar_from_data(xv, sx, 2, OAR_F32);
                w = oar_from_data(wv, sw, 2, OAR_F32);
                t = oar_from_data(tv, st, 2, OAR_F32);
                oar_set_requires_grad(w, true);
                oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
                oo.lr = 0.05;
                oo.momentum = 0.9;
                opt = oar_optimizer_new(&w, 1, &oo);
            }
            int skipped_want, tracker_want;
            double scale_want;
            float want[12];
            CHECK(sscanf(line, "step %d skipped %d scale %lf tracker %d", &k, &skipped_want, &scale_want,
                         &tracker_want) == 4);
            read_vals(line, want, 12);
            oar_optimizer_zero_grad(opt);
            oar_tensor *loss = oar_mean(oar_square(oar_sub(oar_matmul(x, w), t)), NULL, 0, false);
            CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
            if (plant[k]) ((float *)oar_data(oar_grad_get(w)))[0] = plant[k] == 1 ? INFINITY : NAN;
            bool skipped = false;
            CHECK(oar_grad_scaler_step(sc, opt, &skipped) == OAR_OK);
            CHECK(oar_grad_scaler_update(sc) == OAR_OK);
            CHECK(skipped == (skipped_want != 0));
            CHECK(oar_grad_scaler_get_scale(sc) == scale_want);
            CHECK(oar_grad_scaler_growth_tracker(sc) == tracker_want);
            for (int i = 0; i < 12; i++) CHECK_NEAR(t_at(w, i), want[i], 2e-6 * (1 + fabs(want[i])));
            steps++;
        }
    }
    fclose(f);
    CHECK(steps == 14);
    CHECK(oar_grad_scaler_skipped(sc) == 5);
    /* unscale once per step; the state round-trips */
    oar_tensor *loss = oar_mean(oar_square(oar_sub(oar_matmul(x, w), t)), NULL, 0, false);
    oar_optimizer_zero_grad(opt);
    CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
    CHECK(oar_grad_scaler_unscale(sc, opt) == OAR_OK);
    CHECK_ERR(oar_grad_scaler_unscale(sc, opt), "oar_grad_scaler_unscale: this optimizer's gradients were already unscaled");
    CHECK(oar_grad_scaler_num_state(sc) == 3);
    const char *name;
    oar_tensor *st = oar_grad_scaler_state(sc, 0, &name);
    CHECK(st && !strcmp(name, "scale"));
    oar_grad_scaler *sc2 = oar_grad_scaler_new(NULL);
    for (int i = 0; i < 3; i++) {
        oar_tensor *v = oar_grad_scaler_state(sc, i, &name);
        CHECK(oar_grad_scaler_load_state(sc2, name, v) == OAR_OK);
    }
    CHECK(oar_grad_scaler_get_scale(sc2) == oar_grad_scaler_get_scale(sc));
    CHECK(oar_grad_scaler_growth_tracker(sc2) == oar_grad_scaler_growth_tracker(sc));
    CHECK(oar_grad_scaler_skipped(sc2) == 5);
    CHECK_ERR(oar_grad_scaler_load_state(sc2, "scal", st), "expected one of scale, growth_tracker, skipped, got 'scal'");
    CHECK_ERR(oar_grad_scaler_load_state(sc2, "scale", oar_scalar(1, OAR_F64)), "expected 'scale' to be a 0-d f32 tensor");
    oar_grad_scaler_free(sc2);
    oar_optimizer_free(opt);
    oar_grad_scaler_free(sc);
    oar_scope_end();
}

/* The floor, static mode and the warning on a streak of skipped steps; a gradient list longer
 * than one amp_unscale call. */
static void test_scaler_floor_static(void) {
    oar_scope_begin();
    enum { NP = 70 };
    oar_tensor *p[NP];
    for (int i = 0; i < NP; i++) p[i] = mat(2, 2, 0.1 * i, 0.3, true);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    oar_optimizer *opt = oar_optimizer_new(p, NP, &oo);
    for (int dynamic = 1; dynamic >= 0; dynamic--) {
        oar_grad_scaler_opts so = oar_grad_scaler_defaults();
        so.init_scale = 8.0;
        so.dynamic = dynamic;
        so.warn_after = 5;
        oar_grad_scaler *sc = oar_grad_scaler_new(&so);
        oar_set_warning_handler(on_warning, NULL);
        n_warnings = 0;
        for (int step = 0; step < 8; step++) {
            oar_optimizer_zero_grad(opt);
            oar_tensor *loss = oar_scalar(0, OAR_F32);
            for (int i = 0; i < NP; i++) loss = oar_add(loss, oar_sum(oar_square(p[i]), NULL, 0, false));
            CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
            /* only the last parameter's gradient (in the third amp_unscale call) is bad */
            ((float *)oar_data(oar_grad_get(p[NP - 1])))[3] = NAN;
            bool skipped = false;
            CHECK(oar_grad_scaler_step(sc, opt, &skipped) == OAR_OK && skipped);
            CHECK(oar_grad_scaler_update(sc) == OAR_OK);
        }
        CHECK(oar_grad_scaler_get_scale(sc) == (dynamic ? 1.0 : 8.0)); /* 8, 4, 2, then the floor of 1 */
        CHECK(oar_grad_scaler_skip_streak(sc) == 8);
        CHECK(n_warnings == 1 && strstr(last_warning, "5 steps in a row skipped"));
        oar_set_warning_handler(NULL, NULL);
        /* a good step after the streak: the gradients are the true ones (2p) */
        oar_optimizer_zero_grad(opt);
        oar_tensor *loss = oar_sum(oar_square(p[0]), NULL, 0, false);
        double before = t_at(p[0], 1);
        CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
        CHECK(oar_grad_scaler_unscale(sc, opt) == OAR_OK);
        CHECK_NEAR(t_at(oar_grad_get(p[0]), 1), 2 * before, 1e-6);
        bool skipped = true;
        CHECK(oar_grad_scaler_step(sc, opt, &skipped) == OAR_OK && !skipped);
        CHECK_NEAR(t_at(p[0], 1), before - 0.1 * 2 * before, 1e-6);
        CHECK(oar_grad_scaler_update(sc) == OAR_OK && oar_grad_scaler_skip_streak(sc) == 0);
        oar_grad_scaler_free(sc);
    }
    oar_grad_scaler_opts bad = oar_grad_scaler_defaults();
    bad.backoff_factor = 2;
    CHECK_ERR(oar_grad_scaler_new(&bad), "oar_grad_scaler_new: expected init_scale > 0");
    oar_optimizer_free(opt);
    oar_scope_end();
}

/* O2: an MLP with a LayerNorm in bf16 with f32 masters trains, and the parameters are the
 * masters rounded. */
static void test_o2(void) {
    oar_scope_begin();
    int64_t ln_shape[1] = {16};
    oar_module *layers[4] = {oar_nn_linear(8, 16, true), oar_nn_layer_norm(ln_shape, 1, 1e-5, true),
                             oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_linear(16, 1, true)};
    oar_module *m = oar_nn_sequential(layers, 4);
    oar_tensor *x = mat(32, 8, 0.13, 0.4, false);
    oar_tensor *y = oar_sum(oar_sin(x), (int[]){1}, 1, true);
    oar_amp_masters *w = oar_amp_decorate(m, NULL);
    CHECK(w && oar_amp_masters_count(w) == 6);
    CHECK(oar_dtype_of(oar_module_get(m, "0.weight")) == OAR_BF16);
    CHECK(oar_dtype_of(oar_module_get(m, "1.weight")) == OAR_F32); /* the norm keeps f32 */
    CHECK(oar_dtype_of(oar_module_get(m, "3.bias")) == OAR_BF16);
    const char *name;
    CHECK(oar_dtype_of(oar_amp_master(w, 0, &name)) == OAR_F32 && !strcmp(name, "0.weight"));
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
    oo.lr = 0.01;
    oar_optimizer *opt = oar_amp_masters_optimizer(w, &oo);
    oar_grad_scaler *sc = oar_grad_scaler_new(NULL);
    double first = 0, last = 0;
    for (int step = 0; step < 60; step++) {
        oar_scope_begin();
        oar_optimizer_zero_grad(opt);
        oar_autocast_opts ac = oar_autocast_defaults();
        ac.level = OAR_AMP_O2;
        CHECK(oar_autocast_begin(&ac) == OAR_OK);
        oar_tensor *out = oar_forward(m, x);
        oar_tensor *loss = oar_mse_loss(out, y, OAR_REDUCE_MEAN);
        oar_autocast_end();
        CHECK(oar_dtype_of(loss) == OAR_F32);
        double l = t_at(loss, 0);
        if (step == 0) first = l;
        last = l;
        CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
        bool skipped;
        CHECK(oar_amp_masters_step(w, opt, sc, &skipped) == OAR_OK);
        CHECK(oar_grad_scaler_update(sc) == OAR_OK);
        oar_scope_end();
    }
    CHECK(last < 0.3 * first);
    /* each low parameter holds its master rounded to bf16 */
    oar_tensor *m0 = oar_amp_master(w, 0, NULL), *p0 = oar_module_get(m, "0.weight");
    CHECK(t_same_bits(oar_cast(m0, OAR_BF16), p0));
    CHECK_ERR(oar_amp_decorate(m, NULL), "oar_amp_decorate: expected f32 parameters, got bf16");
    oar_grad_scaler_free(sc);
    oar_optimizer_free(opt);
    oar_amp_masters_free(w);
    oar_module_free(m);
    oar_scope_end();
}

/* O2 over a parameter list (oar.amp.decorate from Python): kept parameters are their own masters,
 * an SGD-with-momentum step runs on the f32 masters and rounds them into the f16 parameters,
 * and refusals (a second decorate, an integer parameter, a repeat) convert nothing. */
static void test_o2_params(void) {
    oar_scope_begin();
    oar_tensor *w = mat(4, 3, 0.3, 0.2, true), *b = mat(1, 3, 0.7, 0.1, true), *g = mat(1, 3, 0.5, 0.9, true);
    oar_tensor *ps[3] = {w, b, g};
    const char *names[3] = {"fc.weight", "fc.bias", "norm.weight"};
    bool keep[3] = {false, false, true};
    oar_tensor *w0 = oar_detach(oar_clone(w));
    oar_amp_masters *am = oar_amp_decorate_params(ps, names, keep, 3, OAR_F16);
    CHECK(am && oar_amp_masters_count(am) == 3);
    CHECK(oar_dtype_of(w) == OAR_F16 && oar_dtype_of(b) == OAR_F16 && oar_dtype_of(g) == OAR_F32);
    const char *name;
    oar_tensor *mw = oar_amp_master(am, 0, &name);
    CHECK(oar_dtype_of(mw) == OAR_F32 && !strcmp(name, "fc.weight") && t_same_bits(mw, w0));
    CHECK(oar_amp_master(am, 2, &name) == g && !strcmp(name, "norm.weight"));
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    oo.momentum = 0.9;
    oar_optimizer *opt = oar_amp_masters_optimizer(am, &oo);
    oar_tensor *x = mat(2, 4, 0.9, 0.3, false);
    for (int step = 0; step < 3; step++) {
        oar_scope_begin();
        oar_optimizer_zero_grad(opt);
        oar_autocast_opts ac = oar_autocast_defaults();
        ac.level = OAR_AMP_O2;
        ac.dtype = OAR_F16;
        CHECK(oar_autocast_begin(&ac) == OAR_OK);
        oar_tensor *y = oar_add(oar_mul(oar_add(oar_matmul(x, w), b), g), b);
        oar_autocast_end();
        CHECK(oar_backward(oar_sum(oar_cast(y, OAR_F32), NULL, 0, false), NULL, false) == OAR_OK);
        CHECK(oar_amp_masters_step(am, opt, NULL, NULL) == OAR_OK);
        CHECK(!oar_grad_get(w) && oar_grad_get(mw) && oar_dtype_of(oar_grad_get(mw)) == OAR_F32);
        oar_scope_end();
    }
    CHECK(!t_same_bits(mw, w0));                       /* the masters moved */
    /* two backward passes with a sync between them: the master's gradient is their sum in f32 */
    oar_optimizer_zero_grad(opt);
    oar_tensor *g1 = NULL;
    for (int pass = 0; pass < 2; pass++) {
        oar_tensor *y = oar_matmul(oar_cast(x, OAR_F16), w);
        CHECK(oar_backward(oar_sum(oar_cast(y, OAR_F32), NULL, 0, false), NULL, false) == OAR_OK);
        if (pass == 0) g1 = oar_cast(oar_grad_get(w), OAR_F32);
        CHECK(oar_amp_masters_sync_grads(am) == OAR_OK);
    }
    CHECK(t_same_bits(oar_grad_get(mw), oar_add(g1, g1)));
    oar_optimizer_zero_grad(opt);
    CHECK(t_same_bits(oar_cast(mw, OAR_F16), w));       /* and the parameters are them rounded */
    CHECK_ERR(oar_amp_decorate_params(ps, names, NULL, 3, OAR_BF16),
              "oar_amp_decorate_params: expected f32 parameters, got f16 for 'fc.weight'; decorate a module once");
    oar_tensor *f = mat(2, 2, 0.1, 0.1, true), *ids = oar_cast(mat(2, 2, 0.1, 0.1, false), OAR_I64);
    oar_tensor *bad[2] = {f, ids};
    CHECK_ERR(oar_amp_decorate_params(bad, NULL, NULL, 2, OAR_BF16), "got i64 for '1' (not a floating-point");
    CHECK(oar_dtype_of(f) == OAR_F32); /* nothing converted */
    oar_tensor *twice[2] = {f, f};
    CHECK_ERR(oar_amp_decorate_params(twice, NULL, NULL, 2, OAR_BF16), "parameter '1' is listed twice (at 0 and 1)");
    CHECK(oar_dtype_of(f) == OAR_F32);
    CHECK_ERR(oar_amp_decorate_params(bad, NULL, NULL, 1, OAR_F32), "expected dtype f16 or bf16, got f32");
    oar_optimizer_free(opt);
    oar_amp_masters_free(am);
    oar_scope_end();
}

/* ---- an O2 f16 run with a scaler resumes from its checkpoint bit for bit */
typedef struct o2_run {
    oar_module *m;
    oar_amp_masters *w;
    oar_optimizer *o;
    oar_grad_scaler *sc;
} o2_run;

static oar_module *mlp(void);

static o2_run o2_new(void) {
    o2_run r = {mlp()};
    oar_amp_decorate_opts d = oar_amp_decorate_defaults();
    d.dtype = OAR_F16;
    r.w = oar_amp_decorate(r.m, &d);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
    oo.lr = 0.02;
    r.o = oar_amp_masters_optimizer(r.w, &oo);
    oar_grad_scaler_opts so = oar_grad_scaler_defaults();
    so.growth_interval = 2;
    r.sc = oar_grad_scaler_new(&so);
    return r;
}

static void o2_free(o2_run *r) {
    oar_grad_scaler_free(r->sc);
    oar_optimizer_free(r->o);
    oar_amp_masters_free(r->w);
    oar_module_free(r->m);
}

static void o2_steps(o2_run *r, int n, oar_tensor *x, oar_tensor *y) {
    for (int i = 0; i < n; i++) {
        oar_scope_begin();
        oar_optimizer_zero_grad(r->o);
        oar_autocast_opts ac = oar_autocast_defaults();
        ac.level = OAR_AMP_O2, ac.dtype = OAR_F16;
        CHECK(oar_autocast_begin(&ac) == OAR_OK);
        oar_tensor *loss = oar_mse_loss(oar_forward(r->m, x), y, OAR_REDUCE_MEAN);
        oar_autocast_end();
        CHECK(oar_backward(oar_grad_scaler_scale(r->sc, loss), NULL, false) == OAR_OK);
        CHECK(oar_amp_masters_step(r->w, r->o, r->sc, NULL) == OAR_OK);
        CHECK(oar_grad_scaler_update(r->sc) == OAR_OK);
        oar_scope_end();
    }
}

static void test_resume(void) {
    oar_scope_begin();
    oar_tensor *x = mat(32, 8, 0.13, 0.4, false), *y = mat(32, 4, 0.29, 0.1, false);
    char path[256];
    snprintf(path, sizeof path, "test_amp_resume_%d.safetensors", (int)getpid());
    o2_run a = o2_new(), b = o2_new();
    o2_steps(&a, 3, x, y);
    CHECK(oar_amp_checkpoint_save(path, a.m, a.o, NULL, a.w, a.sc, 3) == OAR_OK);
    CHECK(oar_dtype_of(oar_module_get(a.m, "0.weight")) == OAR_F16); /* the low parameters are back */
    o2_steps(&a, 4, x, y);
    int64_t step = 0;
    CHECK(oar_amp_checkpoint_load(path, b.m, b.o, NULL, b.w, b.sc, &step) == OAR_OK && step == 3);
    o2_steps(&b, 4, x, y);
    CHECK(oar_grad_scaler_get_scale(a.sc) == oar_grad_scaler_get_scale(b.sc));
    CHECK(oar_grad_scaler_growth_tracker(a.sc) == oar_grad_scaler_growth_tracker(b.sc));
    for (int i = 0; i < oar_amp_masters_count(a.w); i++) {
        const char *name;
        CHECK(t_same_bits(oar_amp_master(a.w, i, &name), oar_amp_master(b.w, i, NULL)));
        CHECK(t_same_bits(oar_module_get(a.m, name), oar_module_get(b.m, name)));
    }
    /* the file holds the f32 masters */
    oar_tensor_dict *d = oar_safetensors_load(path);
    CHECK(d && oar_dict_get(d, "model.0.weight") && oar_dtype_of(oar_dict_get(d, "model.0.weight")) == OAR_F32);
    oar_dict_free(d);
    char sp[300];
    snprintf(sp, sizeof sp, "%s.scaler", path);
    remove(sp);
    CHECK_ERR(oar_amp_checkpoint_load(path, b.m, b.o, NULL, b.w, b.sc, &step),
              "oar_amp_checkpoint_load: expected the loss scaler's state in");
    remove(path);
    o2_free(&a);
    o2_free(&b);
    oar_scope_end();
}

/* ---- compiled AMP steps: the program holds the casts as nodes and gives eager's bits */
typedef struct amp_step {
    oar_module *m;
    oar_optimizer *o;
    oar_dtype dt;
} amp_step;

static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    amp_step *s = user;
    oar_optimizer_zero_grad(s->o);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.dtype = s->dt;
    ac.cpu_policy = OAR_AMP_CPU_TABLE; /* casts on every CPU */
    oar_status st = oar_autocast_begin(&ac);
    if (st != OAR_OK) return st;
    oar_tensor *loss = oar_mse_loss(oar_forward(s->m, in[0]), in[1], OAR_REDUCE_MEAN);
    oar_autocast_end();
    if (!loss) return oar_last_status();
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    if ((st = oar_optimizer_step(s->o)) != OAR_OK) return st;
    out[0] = loss;
    return OAR_OK;
}

static oar_module *mlp(void) {
    oar_manual_seed(11);
    int64_t ln_shape[1] = {16};
    oar_module *layers[5] = {oar_nn_linear(8, 16, true), oar_nn_activation(OAR_ACT_GELU, 0),
                             oar_nn_layer_norm(ln_shape, 1, 1e-5, true), oar_nn_linear(16, 4, true),
                             oar_nn_activation(OAR_ACT_TANH, 0)};
    return oar_nn_sequential(layers, 5);
}

static void test_compiled(oar_dtype dt) {
    oar_scope_begin();
    oar_module *me = mlp(), *mc = mlp();
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAM);
    oo.lr = 0.01;
    amp_step se = {me, oar_optimizer_for(me, &oo), dt}, sc = {mc, oar_optimizer_for(mc, &oo), dt};
    oar_jit_opts jo = {.module = mc, .optimizer = sc.o};
    oar_jit *f = oar_jit_to_static(step_fn, &sc, &jo);
    CHECK(f != NULL);
    oar_tensor *x = mat(32, 8, 0.13, 0.4, false), *y = mat(32, 4, 0.29, 0.1, false);
    oar_tensor *in[2] = {x, y};
    bool same_loss = true;
    for (int step = 0; step < 5; step++) {
        oar_tensor *le = NULL, *lc = NULL;
        CHECK(step_fn(&se, in, 2, &le, 1) == OAR_OK);
        CHECK(oar_jit_call(f, in, 2, &lc, 1) == OAR_OK);
        same_loss &= t_same_bits(le, lc);
        oar_release(le);
        oar_release(lc);
    }
    CHECK(same_loss);
    for (int i = 0; i < oar_module_num_parameters(me); i++) {
        const char *name;
        oar_tensor *a = oar_module_parameter(me, i, &name), *b = oar_module_parameter(mc, i, NULL);
        if (!t_same_bits(a, b)) fprintf(stderr, "compiled AMP step (%s): parameter %s differs\n", oar_dtype_name(dt), name);
        CHECK(t_same_bits(a, b));
    }
    /* the casts are nodes of the program */
    static char dump[1 << 18];
    CHECK(oar_jit_dump(f, 0, dump, sizeof dump) > 0);
    if (getenv("TEST_AMP_DUMP")) fputs(dump, stderr); /* to look at the program */
    int casts = 0;
    for (const char *p = dump; (p = strstr(p, "cast")) != NULL; p++) casts++;
    CHECK(casts >= 4);
    oar_jit_free(f);
    oar_optimizer_free(se.o);
    oar_optimizer_free(sc.o);
    oar_module_free(me);
    oar_module_free(mc);
    oar_scope_end();
}

/* The amp_casts pass drops a lossless round trip (bf16 -> f32 -> bf16) and keeps eager's bits;
 * a rounding pair (f32 -> bf16 -> f32) stays. */
static oar_status round_trip_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    oar_tensor *low = oar_cast(in[0], OAR_BF16);
    oar_tensor *back = oar_cast(oar_cast(low, OAR_F32), OAR_BF16);  /* the identity */
    oar_tensor *rounded = oar_cast(oar_cast(in[0], OAR_BF16), OAR_F32); /* not the identity */
    out[0] = oar_add(oar_cast(oar_relu(back), OAR_F32), rounded);
    return out[0] ? OAR_OK : oar_last_status();
}

static int count_casts(oar_jit *f) {
    static char dump[1 << 16];
    int casts = 0;
    if (oar_jit_dump(f, 0, dump, sizeof dump) > 0)
        for (const char *p = dump; (p = strstr(p, "= cast(")) != NULL; p++) casts++;
    return casts;
}

static void test_cast_pass(void) {
    oar_scope_begin();
    oar_tensor *x = mat(5, 7, 0.77, 0.3, false), *want = NULL, *got = NULL, *got_off = NULL;
    CHECK(round_trip_fn(NULL, &x, 1, &want, 1) == OAR_OK);
    oar_jit *f = oar_jit_to_static(round_trip_fn, NULL, NULL);
    oar_jit_opts off = {0};
    CHECK(oar_build_strategy_set(&off.strategy, "amp_casts", false) == OAR_OK);
    oar_jit *g = oar_jit_to_static(round_trip_fn, NULL, &off);
    CHECK(oar_jit_call(f, &x, 1, &got, 1) == OAR_OK && oar_jit_call(g, &x, 1, &got_off, 1) == OAR_OK);
    CHECK(t_same_bits(want, got) && t_same_bits(want, got_off));
    /* cse merges the casts of x to bf16 and of that to f32 (which `rounded` still reads);
     * amp_casts removes the cast back to bf16: 4 casts become 3 */
    CHECK(count_casts(g) == 4 && count_casts(f) == 3);
    oar_release(want);
    oar_release(got);
    oar_release(got_off);
    oar_jit_free(f);
    oar_jit_free(g);
    oar_scope_end();
}

int main(void) {
    test_class_table();
    test_casts();
    test_nesting();
    test_custom_lists();
    test_grad_dtypes();
    test_scaler_golden();
    test_scaler_floor_static();
    test_o2();
    test_o2_params();
    test_compiled(OAR_BF16);
    test_compiled(OAR_F16);
    test_cast_pass();
    test_resume();
    return test_summary("test_amp");
}
