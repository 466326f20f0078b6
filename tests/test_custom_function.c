/* Custom autograd functions (oar_custom_function, src/ops/custom_fn.c): the caller's backward
 * gives the gradient (checked against finite differences and the built-in ops' autograd), one
 * call per output reached, release exactly once whatever happens, errors from the backward and
 * wrong gradient shapes reported, and a handle not made by oar_custom_function refused. */
#include "test_util.h"

#include "oar/ops.h"

typedef struct cube_fn {
    oar_tensor *x; /* saved for backward (the caller's reference) */
    int calls, releases;
    int fail;      /* 1: the backward fails; 2: it returns a wrongly shaped gradient */
    int outputs_seen[2];
} cube_fn;

/* y0 = x^3, y1 = 2x: d/dx = 3 x^2 g0 + 2 g1, one output at a time */
static oar_status cube_backward(void *user, int output, oar_tensor *gout, oar_tensor **gin, int n) {
    cube_fn *f = user;
    f->calls++;
    f->outputs_seen[output]++;
    CHECK(n == 1);
    if (f->fail == 1) return oar_set_error(OAR_ERR_INVALID_ARG, "cube: backward refuses");
    if (f->fail == 2) {
        gin[0] = oar_zeros((int64_t[]){7}, 1, OAR_F64);
        oar_keep(gin[0]);
        return OAR_OK;
    }
    oar_scope_begin();
    oar_tensor *g = output == 0 ? oar_mul(oar_mul_scalar(oar_mul(f->x, f->x), 3.0), gout) : oar_mul_scalar(gout, 2.0);
    oar_keep(g);
    oar_scope_end();
    gin[0] = g;
    return g ? OAR_OK : oar_last_status();
}

static void cube_release(void *user) { ((cube_fn *)user)->releases++; }

/* outputs of the custom cube function of x (both, or only y0 when two is false) */
static void cube_apply(cube_fn *f, oar_tensor *x, bool two, oar_tensor **y0, oar_tensor **y1) {
    oar_no_grad_begin();
    oar_tensor *v0 = oar_pow_scalar(x, 3.0), *v1 = oar_mul_scalar(x, 2.0);
    oar_no_grad_end();
    f->x = x;
    *y0 = oar_custom_function(v0, 0, &x, 1, cube_backward, cube_release, f);
    if (two) *y1 = oar_custom_function(v1, 1, &x, 1, cube_backward, cube_release, f);
}

static oar_tensor *leaf(void) {
    oar_tensor *x = oar_from_data((double[]){0.5, -1.25, 2.0}, (int64_t[]){3}, 1, OAR_F64);
    oar_set_requires_grad(x, true);
    return x;
}

static void test_gradient_matches_autograd_and_finite_differences(void) {
    cube_fn f = {0};
    oar_scope_begin();
    oar_tensor *x = leaf(), *w = oar_from_data((double[]){1.0, -2.0, 0.25}, (int64_t[]){3}, 1, OAR_F64), *y0, *y1;
    cube_apply(&f, x, true, &y0, &y1);
    CHECK(oar_requires_grad(y0) && !oar_is_leaf(y0));
    CHECK(t_at(y0, 1) == -1.25 * -1.25 * -1.25 && t_at(y1, 2) == 4.0); /* forward's values, as views */
    /* loss = sum(w * y0) + sum(y1 * y1) */
    oar_tensor *loss = oar_add(oar_sum(oar_mul(w, y0), NULL, 0, false), oar_sum(oar_mul(y1, y1), NULL, 0, false));
    CHECK(oar_backward(loss, NULL, true) == OAR_OK);
    CHECK(f.calls == 2 && f.outputs_seen[0] == 1 && f.outputs_seen[1] == 1);
    /* the same loss through the built-in ops, and central differences of it */
    oar_tensor *x2 = leaf();
    oar_tensor *ref = oar_add(oar_sum(oar_mul(w, oar_pow_scalar(x2, 3.0)), NULL, 0, false),
                              oar_sum(oar_mul(oar_mul_scalar(x2, 2.0), oar_mul_scalar(x2, 2.0)), NULL, 0, false));
    CHECK(oar_backward(ref, NULL, false) == OAR_OK);
    double xs[3] = {0.5, -1.25, 2.0}, ws[3] = {1.0, -2.0, 0.25};
    for (int i = 0; i < 3; i++) {
        CHECK_NEAR(t_at(oar_grad_get(x), i), t_at(oar_grad_get(x2), i), 1e-12);
        double h = 1e-6, lp = 0, lm = 0;
        for (int k = 0; k < 3; k++) {
            double a = xs[k] + (k == i ? h : 0), b = xs[k] - (k == i ? h : 0);
            lp += ws[k] * a * a * a + 4 * a * a;
            lm += ws[k] * b * b * b + 4 * b * b;
        }
        CHECK_NEAR(t_at(oar_grad_get(x), i), (lp - lm) / (2 * h), 1e-6);
    }
    CHECK(f.releases == 0); /* the graph is kept (retain_graph) */
    oar_scope_end();
    CHECK(f.releases == 2); /* once per recorded output, when the last holder went */
    /* without retain_graph, backward frees the graph's saved tensors: the function goes with them */
    cube_fn h = {0};
    oar_scope_begin();
    oar_tensor *z0;
    cube_apply(&h, leaf(), false, &z0, NULL);
    CHECK(oar_backward(oar_sum(z0, NULL, 0, false), NULL, false) == OAR_OK && h.calls == 1 && h.releases == 1);
    oar_scope_end();
    CHECK(h.releases == 1);
}

static void test_release_without_recording_and_on_failure(void) {
    cube_fn f = {0};
    oar_scope_begin();
    oar_tensor *x = oar_from_data((double[]){1, 2}, (int64_t[]){2}, 1, OAR_F64), *y0; /* no grad wanted */
    cube_apply(&f, x, false, &y0, NULL);
    CHECK(y0 && !oar_requires_grad(y0) && f.releases == 1); /* nothing recorded: released at once */
    oar_tensor *bad = oar_custom_function(NULL, 0, &x, 1, cube_backward, cube_release, &f);
    CHECK(!bad && f.releases == 2 && strstr(oar_last_error(), "expected y") != NULL);
    bad = oar_custom_function(x, 0, (oar_tensor *[]){NULL}, 1, cube_backward, cube_release, &f);
    CHECK(!bad && f.releases == 3);
    oar_scope_end();
    CHECK(f.calls == 0);
}

static void test_backward_errors_are_reported(void) {
    for (int mode = 1; mode <= 2; mode++) {
        cube_fn f = {.fail = mode};
        oar_scope_begin();
        oar_tensor *x = leaf(), *y0;
        cube_apply(&f, x, false, &y0, NULL);
        oar_status st = oar_backward(oar_sum(y0, NULL, 0, false), NULL, false);
        CHECK(st != OAR_OK && f.calls == 1);
        CHECK(strstr(oar_last_error(), mode == 1 ? "cube: backward refuses" : "expected the input's [3]") != NULL);
        CHECK(oar_grad_get(x) == NULL);
        oar_scope_end();
        CHECK(f.releases == 1);
    }
}

/* The op called directly, with a handle it did not make: the forward is a view, and a backward
 * through it says the handle names nothing (never reads it as a pointer). */
static void test_foreign_handle_is_refused(void) {
    oar_scope_begin();
    oar_tensor *x = leaf();
    oar_tensor *in[3] = {oar_mul_scalar(x, 1.0), oar_from_data((int64_t[]){123456789}, NULL, 0, OAR_I64), x};
    oar_tensor *out = NULL;
    int n_out = 1;
    CHECK(oar_op_call_named(oar_op_find("custom_function"), in, 3, NULL, 0, &out, &n_out) == OAR_OK);
    CHECK(oar_backward(oar_sum(out, NULL, 0, false), NULL, false) != OAR_OK);
    CHECK(strstr(oar_last_error(), "names no live custom function") != NULL);
    oar_release(out); /* oar_op_call_named's outputs are the caller's, not the scope's */
    in[1] = oar_from_data((double[]){1.0}, NULL, 0, OAR_F64);
    CHECK(oar_op_call_named(oar_op_find("custom_function"), in, 3, NULL, 0, &out, &n_out) != OAR_OK);
    CHECK(strstr(oar_last_error(), "0-d i64 handle") != NULL);
    oar_scope_end();
}

int main(void) {
    test_gradient_matches_autograd_and_finite_differences();
    test_release_without_recording_and_on_failure();
    test_backward_errors_are_reported();
    test_foreign_handle_is_refused();
    return test_summary("test_custom_function");
}
