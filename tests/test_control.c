/* oar_cond and oar_while: eager and compiled runs agree on values and on gradients, including
 * a loop whose trip count depends on the data and parameters read from inside the blocks. */
#include "test_util.h"

static double max_abs_diff(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return INFINITY;
    double m = 0;
    for (int64_t i = 0; i < oar_numel(a); i++) m = fmax(m, fabs(t_at(a, i) - t_at(b, i)));
    return m;
}

/* ---- cond: then relu(x * w) * 2, else exp(x) * w, on the sign of sum(x) */
static oar_tensor *g_w; /* a parameter the branches read from outside */

static oar_status then_fn(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_mul_scalar(oar_relu(oar_mul(in[0], g_w)), 2.0);
    return out[0] ? OAR_OK : oar_last_status();
}
static oar_status else_fn(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_mul(oar_exp(in[0]), g_w);
    return out[0] ? OAR_OK : oar_last_status();
}

/* loss = sum(cond(sum(x) > 0, x)); backward; returns the loss and the cond's value */
static oar_status cond_step(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_zero_grad(g_w);
    oar_tensor *pred = oar_gt(oar_sum(in[0], NULL, 0, false), oar_scalar(0, OAR_F64));
    oar_tensor *y[1] = {0};
    oar_status st = oar_cond(pred, then_fn, else_fn, NULL, in, 1, y, 1);
    if (st != OAR_OK) return st;
    oar_tensor *loss = oar_sum(oar_square(y[0]), NULL, 0, false);
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    out[0] = loss;
    out[1] = y[0];
    return OAR_OK;
}

static double cond_loss(oar_tensor *x) {
    oar_no_grad_begin();
    oar_tensor *pred = oar_gt(oar_sum(x, NULL, 0, false), oar_scalar(0, OAR_F64)), *y[1] = {0};
    double v = NAN;
    if (oar_cond(pred, then_fn, else_fn, NULL, &x, 1, y, 1) == OAR_OK)
        oar_item(oar_sum(oar_square(y[0]), NULL, 0, false), &v);
    oar_no_grad_end();
    return v;
}

static void test_cond(void) {
    oar_scope_begin();
    oar_manual_seed(2);
    g_w = oar_keep(oar_randn((int64_t[]){3, 4}, 2, OAR_F64));
    oar_set_requires_grad(g_w, true);
    oar_jit *f = oar_jit_to_static(cond_step, NULL, NULL);
    for (int sign = 0; sign < 2; sign++) { /* both branches, one program */
        oar_tensor *x = oar_add_scalar(oar_rand((int64_t[]){3, 4}, 2, OAR_F64), sign ? -0.9 : 0.1);
        oar_tensor *e[2] = {0}, *s[2] = {0};
        CHECK(cond_step(NULL, &x, 1, e, 2) == OAR_OK);
        oar_tensor *ge = oar_clone(oar_grad_get(g_w));
        CHECK(oar_jit_call(f, &x, 1, s, 2) == OAR_OK);
        CHECK(max_abs_diff(e[1], s[1]) < 1e-12);
        CHECK(max_abs_diff(e[0], s[0]) < 1e-9);
        CHECK(max_abs_diff(ge, oar_grad_get(g_w)) < 1e-9);
        /* and the compiled gradient against finite differences on one weight */
        double *w = oar_data(g_w), h = 1e-6, l0 = t_at(oar_grad_get(g_w), 5);
        w[5] += h;
        double lp = cond_loss(x);
        w[5] -= 2 * h;
        double lm = cond_loss(x);
        w[5] += h;
        CHECK_NEAR(l0, (lp - lm) / (2 * h), 1e-5 * fmax(1, fabs(l0)));
    }
    CHECK(oar_jit_num_traces(f) == 1);
    char text[1 << 15];
    oar_jit_dump(f, 0, text, sizeof text);
    CHECK(strstr(text, "= cond(") != NULL);
    oar_jit_free(f);
    oar_release(g_w);
    oar_scope_end();
}

/* ---- while: x = x * 1.5 + w until sum(x) >= limit; the trip count depends on x */
static oar_status loop_cond(void *u, oar_tensor *const *v, int n, oar_tensor **out, int n_out) {
    out[0] = oar_lt(oar_sum(v[0], NULL, 0, false), oar_scalar(40.0, OAR_F64));
    return out[0] ? OAR_OK : oar_last_status();
}
static oar_status loop_body(void *u, oar_tensor *const *v, int n, oar_tensor **out, int n_out) {
    out[0] = oar_add(oar_mul_scalar(v[0], 1.5), g_w);
    out[1] = oar_add_scalar(v[1], 1.0); /* a counter carried along */
    return out[0] && out[1] ? OAR_OK : oar_last_status();
}
static oar_status while_step(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_zero_grad(g_w);
    oar_tensor *vars[2] = {oar_tanh(in[0]), oar_zeros((int64_t[]){1}, 1, OAR_F64)}, *res[2] = {0};
    oar_status st = oar_while(loop_cond, loop_body, NULL, vars, 2, res);
    if (st != OAR_OK) return st;
    oar_tensor *loss = oar_sum(oar_mul(res[0], res[0]), NULL, 0, false);
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    out[0] = loss;
    out[1] = res[1];
    return OAR_OK;
}

static void test_while(void) {
    oar_scope_begin();
    oar_manual_seed(4);
    g_w = oar_keep(oar_mul_scalar(oar_rand((int64_t[]){2, 3}, 2, OAR_F64), 0.5));
    oar_set_requires_grad(g_w, true);
    oar_jit *f = oar_jit_to_static(while_step, NULL, NULL);
    double trips[3];
    for (int k = 0; k < 3; k++) {
        oar_tensor *x = oar_mul_scalar(oar_randn((int64_t[]){2, 3}, 2, OAR_F64), 0.5 + 2.0 * k);
        oar_tensor *e[2] = {0}, *s[2] = {0};
        CHECK(while_step(NULL, &x, 1, e, 2) == OAR_OK);
        oar_tensor *ge = oar_clone(oar_grad_get(g_w));
        CHECK(oar_jit_call(f, &x, 1, s, 2) == OAR_OK);
        trips[k] = s[1] ? t_at(s[1], 0) : -1;
        CHECK(max_abs_diff(e[1], s[1]) == 0);
        CHECK(max_abs_diff(e[0], s[0]) < 1e-9 * fmax(1, fabs(t_at(e[0], 0))));
        CHECK(max_abs_diff(ge, oar_grad_get(g_w)) < 1e-8 * fmax(1, fabs(t_at(ge, 0))));
    }
    printf("  while: trip counts %g, %g, %g from one program\n", trips[0], trips[1], trips[2]);
    CHECK(trips[0] != trips[2]);
    CHECK(oar_jit_num_traces(f) == 1);
    oar_jit_free(f);
    oar_release(g_w);
    oar_scope_end();
}

/* ---- errors */
static oar_status bad_else(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    out[0] = oar_sum(in[0], NULL, 0, false);
    return OAR_OK;
}
static oar_status mismatched(void *u, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return oar_cond(oar_gt(oar_sum(in[0], NULL, 0, false), oar_scalar(0, OAR_F64)), then_fn, bad_else, NULL, in, 1,
                    out, 1);
}

static void test_errors(void) {
    oar_scope_begin();
    g_w = oar_keep(oar_ones((int64_t[]){3, 4}, 2, OAR_F64));
    oar_tensor *x = oar_ones((int64_t[]){3, 4}, 2, OAR_F64), *y[1];
    oar_jit *f = oar_jit_to_static(mismatched, NULL, NULL);
    CHECK_ERR(oar_jit_call(f, &x, 1, y, 1), "cond: expected then_fn and else_fn to give the same dtype and shape");
    oar_jit_free(f);
    CHECK_ERR(oar_cond(oar_ones((int64_t[]){2}, 1, OAR_F32), then_fn, else_fn, NULL, &x, 1, y, 1),
              "expected a one-element predicate");
    oar_release(g_w);
    oar_scope_end();
}

int main(void) {
    test_cond();
    test_while();
    test_errors();
    return test_summary("test_control");
}
