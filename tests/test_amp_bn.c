/* batch_norm on f16/bf16 inputs with f32 parameters (AMP, issue 15): golden values from torch
 * 1.13 (tests/golden/amp_bn.txt: its own bf16 CPU kernel; f16 computed in f32 and rounded),
 * the forward and the gradients of batch_norm (training, inference), layer_norm and group_norm
 * against the f64 op on the same low-precision grid values (forward rounded once; gradients by
 * finite differences; double backward against f64's), autocast passing a bf16
 * convolution output straight into batch_norm (no casts), and a compiled O2 bf16 step over a
 * conv -> batch_norm -> relu model giving the eager step's bits. */
#include "test_util.h"
#include "amp_o2_util.h"

#include "golden_util.h"

static oar_tensor *filled(const int64_t *shape, int nd, double a, double b, double scale, double shift) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (float)(sin(a * (double)i + b) * scale + shift);
    oar_tensor *t = oar_from_data(v, shape, nd, OAR_F32);
    free(v);
    return t;
}

static double max_abs(oar_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < oar_numel(t); i++) m = fmax(m, fabs(t_at(t, i)));
    return m;
}

/* every element of got within tol_rel * |want| + tol_abs of want */
static bool close_all(const char *what, oar_tensor *got, oar_tensor *want, double tol_rel, double tol_abs) {
    if (!got || !want || oar_numel(got) != oar_numel(want)) {
        fprintf(stderr, "%s: missing or of another size\n", what);
        return false;
    }
    for (int64_t i = 0; i < oar_numel(want); i++) {
        double a = t_at(got, i), b = t_at(want, i);
        if (!(fabs(a - b) <= tol_rel * fabs(b) + tol_abs)) {
            fprintf(stderr, "%s: element %lld is %.9g, expected %.9g\n", what, (long long)i, a, b);
            return false;
        }
    }
    return true;
}

/* ---- golden values */

enum { G_X, G_W, G_B, G_RM, G_RV, G_GO, G_Y, G_RM2, G_RV2, G_DX, G_DW, G_DB, G_N };
static const char *const g_keys[G_N] = {"x", "weight", "bias", "running_mean", "running_var", "grad_out", "y",
                                        "running_mean_after", "running_var_after", "dx", "dweight", "dbias"};

static void run_golden_case(const char *name, oar_dtype dt, bool training, double momentum, double eps,
                            oar_tensor **t) {
    oar_scope_begin();
    oar_tensor *x = oar_cast(t[G_X], dt), *w = oar_clone(t[G_W]), *b = oar_clone(t[G_B]);
    oar_tensor *rm = oar_clone(t[G_RM]), *rv = oar_clone(t[G_RV]), *go = oar_cast(t[G_GO], dt);
    oar_set_requires_grad(x, true);
    oar_set_requires_grad(w, true);
    oar_set_requires_grad(b, true);
    oar_tensor *y = oar_batch_norm(x, w, b, rm, rv, training, momentum, eps);
    CHECK(y && oar_dtype_of(y) == dt);
    CHECK(oar_dtype_of(rm) == OAR_F32 && oar_dtype_of(rv) == OAR_F32);
    /* one rounding of the same f32/double value: equal or one unit in the last place apart */
    double ulp = dt == OAR_BF16 ? 1.0 / 128 : 1.0 / 1024;
    char what[128];
    snprintf(what, sizeof what, "%s: y", name);
    CHECK(close_all(what, y, t[G_Y], ulp, 1e-6));
    snprintf(what, sizeof what, "%s: running_mean", name);
    CHECK(close_all(what, rm, t[G_RM2], 1e-5, 1e-6));
    snprintf(what, sizeof what, "%s: running_var", name);
    CHECK(close_all(what, rv, t[G_RV2], 1e-5, 1e-6));
    CHECK(oar_backward(y, go, false) == OAR_OK);
    oar_tensor *dx = oar_grad_get(x), *dw = oar_grad_get(w), *db = oar_grad_get(b);
    CHECK(dx && oar_dtype_of(dx) == dt && dw && oar_dtype_of(dw) == OAR_F32 && db && oar_dtype_of(db) == OAR_F32);
    /* dx: torch sums in f32, oar in double, then both round; a unit in the last place of the
     * largest value covers the cancellation in gxhat - mean(gxhat) - xhat * mean(gxhat * xhat) */
    snprintf(what, sizeof what, "%s: dx", name);
    CHECK(close_all(what, dx, t[G_DX], ulp, ulp * max_abs(t[G_DX])));
    snprintf(what, sizeof what, "%s: dweight", name);
    CHECK(close_all(what, dw, t[G_DW], 1e-4, 1e-5));
    snprintf(what, sizeof what, "%s: dbias", name);
    CHECK(close_all(what, db, t[G_DB], 1e-4, 1e-5));
    oar_scope_end();
}

static void test_golden(void) {
    const char *src = getenv("OAR_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/golden/amp_bn.txt", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f) {
        printf("test_amp_bn: golden skipped: %s not found (set OAR_SOURCE_DIR to the repository)\n", path);
        return;
    }
    static char line[1 << 16];
    char name[64] = "", dts[32] = "";
    int training = 0, cases = 0;
    double momentum = 0, eps = 0;
    oar_tensor *t[G_N] = {0};
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "case %63s %31s training=%d momentum=%lf eps=%lf", name, dts, &training, &momentum, &eps) == 5)
            continue;
        if (!strncmp(line, "end", 3)) {
            bool all = true;
            for (int k = 0; k < G_N; k++) all &= t[k] != NULL;
            CHECK(all);
            if (all) run_golden_case(name, strcmp(dts, "bfloat16") ? OAR_F16 : OAR_BF16, training != 0, momentum, eps, t);
            for (int k = 0; k < G_N; k++) {
                oar_release(t[k]);
                t[k] = NULL;
            }
            cases++;
            continue;
        }
        for (int k = 0; k < G_N; k++) {
            size_t n = strlen(g_keys[k]);
            if (!strncmp(line, g_keys[k], n) && line[n] == ' ') {
                oar_release(t[k]);
                t[k] = golden_parse_tensor(line + n + 1);
            }
        }
    }
    fclose(f);
    CHECK(cases == 4);
}

/* ---- gradients by finite differences: the mixed op's gradients are those of the function it
 * rounds, batch_norm in f64 on the same (low-precision grid) values */

typedef enum { K_BN_TRAIN, K_BN_EVAL, K_LN, K_GN } norm_kind;
static const char *const kind_names[] = {"batch_norm training", "batch_norm inference", "layer_norm", "group_norm"};

/* x [3, 4, 5]: batch_norm over channels, layer_norm over the last dim, group_norm in 2 groups */
static oar_tensor *apply(norm_kind k, oar_tensor *x, oar_tensor *w, oar_tensor *b, oar_tensor *rm, oar_tensor *rv) {
    switch (k) {
    case K_BN_TRAIN: return oar_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    case K_BN_EVAL: return oar_batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5);
    case K_LN: return oar_layer_norm(x, 1, w, b, 1e-5);
    default: return oar_group_norm(x, 2, w, b, 1e-5);
    }
}

typedef struct fd_case {
    oar_tensor *x64, *w64, *b64, *rm, *rv, *go64;
    norm_kind kind;
} fd_case;

static double loss64(const fd_case *c) {
    oar_tensor *rm = oar_cast(c->rm, OAR_F64), *rv = oar_cast(c->rv, OAR_F64); /* fresh: training updates them */
    oar_tensor *y = apply(c->kind, c->x64, c->w64, c->b64, rm, rv);
    oar_tensor *l = oar_sum(oar_mul(y, c->go64), NULL, 0, false);
    double v = t_at(l, 0);
    oar_release(l);
    oar_release(y);
    oar_release(rm);
    oar_release(rv);
    return v;
}

static void fd_grad(fd_case *c, oar_tensor *p, oar_tensor *out) {
    bool prev = oar_set_grad_enabled(false);
    double *pv = oar_data(p), *ov = oar_data(out);
    for (int64_t i = 0; i < oar_numel(p); i++) {
        double keep = pv[i], h = 1e-6 * fmax(1.0, fabs(keep));
        pv[i] = keep + h;
        double lp = loss64(c);
        pv[i] = keep - h;
        double lm = loss64(c);
        pv[i] = keep;
        ov[i] = (lp - lm) / (2 * h);
    }
    oar_set_grad_enabled(prev);
}

static void test_finite_differences(oar_dtype dt, norm_kind kind) {
    oar_scope_begin();
    int64_t sx[3] = {3, 4, 5}, sc[1] = {kind == K_LN ? 5 : 4};
    oar_tensor *x = oar_cast(filled(sx, 3, 0.61, 0.2, 1.3, 0.4), dt); /* the grid values */
    oar_tensor *go = oar_cast(filled(sx, 3, 0.37, 1.1, 1.0, 0.0), dt);
    oar_tensor *w = filled(sc, 1, 0.9, 0.3, 0.4, 1.0), *b = filled(sc, 1, 1.7, 0.5, 0.3, 0.0);
    oar_tensor *rm = filled(sc, 1, 0.5, 0.1, 0.2, 0.1), *rv = filled(sc, 1, 0.8, 0.2, 0.3, 1.0);
    fd_case c = {oar_cast(x, OAR_F64), oar_cast(w, OAR_F64), oar_cast(b, OAR_F64), rm, rv, oar_cast(go, OAR_F64),
                 kind};
    const bool training = kind != K_BN_EVAL;
    oar_tensor *xl = oar_clone(x), *wl = oar_clone(w), *bl = oar_clone(b);
    oar_tensor *rm1 = oar_clone(rm), *rv1 = oar_clone(rv);
    oar_set_requires_grad(xl, true);
    oar_set_requires_grad(wl, true);
    oar_set_requires_grad(bl, true);
    oar_tensor *y = apply(kind, xl, wl, bl, rm1, rv1);
    /* the forward: the f64 op on the same values, rounded once */
    oar_tensor *rm0 = oar_cast(rm, OAR_F64), *rv0 = oar_cast(rv, OAR_F64);
    oar_tensor *y64 = apply(kind, c.x64, c.w64, c.b64, rm0, rv0);
    char what[96];
    double ulp = dt == OAR_BF16 ? 1.0 / 128 : 1.0 / 1024;
    snprintf(what, sizeof what, "%s %s: y", oar_dtype_name(dt), kind_names[kind]);
    CHECK(y && oar_dtype_of(y) == dt && close_all(what, y, y64, ulp, 1e-6));
    oar_tensor *in[3] = {xl, wl, bl}, *g[3] = {0};
    oar_grad_opts go_opts = {.create_graph = true};
    CHECK(oar_grad(&y, 1, &go, in, 3, g, &go_opts) == OAR_OK);
    CHECK(g[0] && oar_dtype_of(g[0]) == dt && g[1] && oar_dtype_of(g[1]) == OAR_F32);
    oar_tensor *n[3] = {oar_zeros_like(c.x64), oar_zeros_like(c.w64), oar_zeros_like(c.b64)};
    fd_grad(&c, c.x64, n[0]);
    fd_grad(&c, c.w64, n[1]);
    fd_grad(&c, c.b64, n[2]);
    snprintf(what, sizeof what, "%s %s: dx", oar_dtype_name(dt), kind_names[kind]);
    CHECK(close_all(what, g[0], n[0], ulp, ulp * max_abs(n[0]) + 1e-6));
    snprintf(what, sizeof what, "%s %s: dweight", oar_dtype_name(dt), kind_names[kind]);
    CHECK(close_all(what, g[1], n[1], 1e-4, 1e-5));
    snprintf(what, sizeof what, "%s %s: dbias", oar_dtype_name(dt), kind_names[kind]);
    CHECK(close_all(what, g[2], n[2], 1e-4, 1e-5));
    /* double backward: d/dx and d/dweight of sum(dx * u), against the same in f64 */
    oar_tensor *u = oar_cast(filled(sx, 3, 0.23, 0.7, 1.0, 0.0), dt);
    oar_tensor *s = oar_sum(oar_cast(oar_mul(g[0], u), OAR_F64), NULL, 0, false);
    oar_tensor *in2[2] = {xl, wl}, *g2[2] = {0};
    oar_grad_opts plain = {.allow_unused = true};
    CHECK(oar_grad(&s, 1, NULL, in2, 2, g2, &plain) == OAR_OK);
    oar_tensor *x64 = oar_clone(c.x64), *w64 = oar_clone(c.w64), *b64 = oar_clone(c.b64);
    oar_set_requires_grad(x64, true);
    oar_set_requires_grad(w64, true);
    oar_tensor *rm64 = oar_cast(rm, OAR_F64), *rv64 = oar_cast(rv, OAR_F64);
    oar_tensor *z64 = apply(kind, x64, w64, b64, rm64, rv64);
    oar_tensor *in64[1] = {x64}, *g64[1] = {0};
    CHECK(oar_grad(&z64, 1, &c.go64, in64, 1, g64, &go_opts) == OAR_OK);
    oar_tensor *s64 = oar_sum(oar_mul(g64[0], oar_cast(u, OAR_F64)), NULL, 0, false);
    oar_tensor *in64b[2] = {x64, w64}, *h64[2] = {0};
    CHECK(oar_grad(&s64, 1, NULL, in64b, 2, h64, &plain) == OAR_OK);
    /* in inference dx = grad_out * weight * invstd does not depend on x */
    CHECK((training ? g2[0] != NULL : true) && (!g2[0] || oar_dtype_of(g2[0]) == dt));
    CHECK(g2[1] && oar_dtype_of(g2[1]) == OAR_F32);
    /* the first gradient was rounded to dt before the product: tolerances of a few units */
    snprintf(what, sizeof what, "%s %s: double backward dx", oar_dtype_name(dt), kind_names[kind]);
    if (h64[0]) CHECK(close_all(what, g2[0], h64[0], 4 * ulp, 4 * ulp * max_abs(h64[0]) + 1e-6));
    else CHECK(g2[0] == NULL || max_abs(g2[0]) == 0);
    snprintf(what, sizeof what, "%s %s: double backward dweight", oar_dtype_name(dt), kind_names[kind]);
    CHECK(h64[1] && close_all(what, g2[1], h64[1], 4 * ulp, 4 * ulp * max_abs(h64[1]) + 1e-6));
    oar_scope_end();
}

/* ---- autocast: a bf16 conv output goes into batch_norm as it is */

static void test_autocast(oar_dtype dt) {
    oar_scope_begin();
    int64_t sx[4] = {2, 3, 6, 6}, sw[4] = {5, 3, 3, 3}, sc[1] = {5};
    oar_tensor *x = filled(sx, 4, 0.31, 0.2, 1.0, 0.0), *cw = filled(sw, 4, 0.77, 0.9, 0.3, 0.0);
    oar_tensor *w = filled(sc, 1, 0.9, 0.3, 0.4, 1.0), *b = filled(sc, 1, 1.7, 0.5, 0.3, 0.0);
    oar_tensor *rm_a = oar_zeros(sc, 1, OAR_F32), *rv_a = oar_ones(sc, 1, OAR_F32);
    oar_tensor *rm_b = oar_zeros(sc, 1, OAR_F32), *rv_b = oar_ones(sc, 1, OAR_F32);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.dtype = dt;
    CHECK(oar_autocast_begin(&ac) == OAR_OK);
    oar_tensor *h = oar_conv2d(x, cw, NULL, NULL);
    oar_tensor *y = oar_batch_norm(h, w, b, rm_a, rv_a, true, 0.1, 1e-5);
    oar_autocast_end();
    CHECK(h && oar_dtype_of(h) == dt && y && oar_dtype_of(y) == dt);
    /* the same as the mixed op called directly on the conv's low output */
    oar_tensor *want = oar_batch_norm(oar_conv2d(oar_cast(x, dt), oar_cast(cw, dt), NULL, NULL), w, b, rm_b, rv_b,
                                      true, 0.1, 1e-5);
    CHECK(t_same_bits(y, want));
    CHECK(t_same_bits(rm_a, rm_b) && t_same_bits(rv_a, rv_b));
    /* batch_norm follows (it takes the low input), listed as such */
    CHECK(oar_amp_op_class("batch_norm", dt) == OAR_AMP_FOLLOW);
    CHECK(oar_amp_op_class("layer_norm", dt) == OAR_AMP_FOLLOW);
    CHECK(oar_amp_op_class("group_norm", dt) == OAR_AMP_FOLLOW);
    CHECK(oar_amp_op_class("softmax", dt) == OAR_AMP_FP32);
    /* bad input: low x with f32 weight and a low bias */
    CHECK_ERR(oar_batch_norm(h, w, oar_cast(b, dt), NULL, NULL, true, 0.1, 1e-5),
              "expected bias of dtype f32");
    oar_scope_end();
}

/* ---- a compiled O2 bf16 step over conv -> batch_norm -> relu gives the eager step's bits */

static oar_module *convnet(void) {
    oar_manual_seed(7);
    oar_conv_opts co = {.padding = {1, 1}};
    oar_module *layers[5] = {oar_nn_conv2d(3, 8, 3, &co, false), oar_nn_batch_norm2d(8, 1e-5, 0.1, true, true),
                             oar_nn_activation(OAR_ACT_RELU, 0), oar_nn_flatten(1, -1), oar_nn_linear(8 * 6 * 6, 4, true)};
    return oar_nn_sequential(layers, 5);
}

typedef struct o2_run {
    oar_module *m;
    oar_amp_masters *w;
    oar_optimizer *o;
} o2_run;

static oar_tensor *o2_loss(void *user, oar_tensor *const *in) {
    o2_run *r = user;
    return oar_mse_loss(oar_forward(r->m, in[0]), in[1], OAR_REDUCE_MEAN);
}

static oar_status o2_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    o2_run *r = user;
    return amp_o2_step(r->o, r->w, o2_loss, r, in, out);
}

static void o2_init(o2_run *r) {
    r->m = convnet();
    oar_amp_decorate_opts d = oar_amp_decorate_defaults();
    r->w = oar_amp_decorate(r->m, &d);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    r->o = oar_amp_masters_optimizer(r->w, &oo);
}

static void o2_free(o2_run *r) {
    oar_optimizer_free(r->o);
    oar_amp_masters_free(r->w);
    oar_module_free(r->m);
}

static void test_compiled_o2(void) {
    oar_scope_begin();
    o2_run e, c;
    o2_init(&e);
    o2_init(&c);
    const oar_state_source *src[1] = {oar_amp_masters_state_source(c.w)};
    oar_jit_opts jo = {.module = c.m, .optimizer = c.o, .state_sources = src, .n_state_sources = 1};
    oar_jit *f = oar_jit_to_static(o2_step, &c, &jo);
    CHECK(f != NULL);
    int64_t sx[4] = {4, 3, 6, 6}, sy[2] = {4, 4};
    oar_tensor *x = filled(sx, 4, 0.13, 0.4, 1.0, 0.2), *y = filled(sy, 2, 0.29, 0.1, 0.5, 0.0);
    oar_tensor *in[2] = {x, y};
    bool same = true;
    for (int step = 0; step < 4; step++) {
        oar_tensor *le = NULL, *lc = NULL;
        CHECK(o2_step(&e, in, 2, &le, 1) == OAR_OK);
        CHECK(f && oar_jit_call(f, in, 2, &lc, 1) == OAR_OK);
        same &= t_same_bits(le, lc);
        oar_release(le);
        oar_release(lc);
    }
    CHECK(same);
    for (int i = 0; i < oar_module_num_parameters(e.m); i++) {
        const char *name;
        oar_tensor *a = oar_module_parameter(e.m, i, &name), *b = oar_module_parameter(c.m, i, NULL);
        if (!t_same_bits(a, b)) fprintf(stderr, "compiled O2 bf16 step: parameter %s differs\n", name);
        CHECK(t_same_bits(a, b));
    }
    for (int i = 0; i < oar_module_num_buffers(e.m); i++) {
        const char *name;
        oar_tensor *a = oar_module_buffer(e.m, i, &name), *b = oar_module_buffer(c.m, i, NULL);
        if (!t_same_bits(a, b)) fprintf(stderr, "compiled O2 bf16 step: buffer %s differs\n", name);
        CHECK(t_same_bits(a, b));
    }
    /* batch_norm reads the convolution's bf16 output: no cast node feeds it. In the dump a
     * node is "%N: type = op(%A, ...)"; find batch_norm's first argument's line and its op. */
    static char dump[1 << 18];
    CHECK(f && oar_jit_dump(f, 0, dump, sizeof dump) > 0);
    if (getenv("TEST_AMP_DUMP")) fputs(dump, stderr);
    int bn_nodes = 0, bn_after_cast = 0, bn_from_conv = 0;
    for (const char *p = dump; (p = strstr(p, "= batch_norm")) != NULL; p++) {
        if (p[12] != '(' && strncmp(p + 12, "_act(", 5) != 0) continue;
        const char *arg = strchr(p, '(') + 1, *end = arg;
        while (*end && *end != ',' && *end != ')') end++;
        char def[64];
        int len = (int)(end - arg);
        if (len <= 0 || len > 40) continue;
        snprintf(def, sizeof def, "\n  %.*s: ", len, arg);
        const char *d = strstr(dump, def);
        bn_nodes++;
        if (!d) continue;
        const char *eol = strchr(d + 1, '\n'), *eq = strstr(d, " = ");
        if (!eq || (eol && eq > eol)) continue;
        bn_after_cast += !strncmp(eq, " = cast(", 8);
        bn_from_conv += !strncmp(eq, " = conv2d(", 10);
    }
    CHECK(bn_from_conv == bn_nodes);
    CHECK(bn_nodes >= 1);
    CHECK(bn_after_cast == 0);
    oar_jit_free(f);
    o2_free(&e);
    o2_free(&c);
    oar_scope_end();
}

int main(void) {
    test_golden();
    for (int k = K_BN_TRAIN; k <= K_GN; k++) {
        test_finite_differences(OAR_BF16, (norm_kind)k);
        test_finite_differences(OAR_F16, (norm_kind)k);
    }
    test_autocast(OAR_BF16);
    test_autocast(OAR_F16);
    test_compiled_o2();
    return test_summary("test_amp_bn");
}
