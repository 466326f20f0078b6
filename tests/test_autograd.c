/* Eager autograd: accumulation, broadcasting, no-grad, detach, retain_graph, higher-order
 * gradients, hooks, in-place checks, error messages. */
#include "test_util.h"

static oar_tensor *leaf(const double *v, int64_t n) {
    oar_tensor *t = oar_from_data(v, &n, 1, OAR_F64);
    oar_set_requires_grad(t, true);
    return t;
}

static void test_basic_and_accumulate(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){1, 2, 3}, 3);
    /* y = sum(x * exp(x)); dy/dx = exp(x) * (1 + x) */
    oar_tensor *y = oar_sum(oar_mul(x, oar_exp(x)), NULL, 0, false);
    CHECK(oar_backward(y, NULL, true) == OAR_OK);
    for (int i = 0; i < 3; i++) CHECK_NEAR(t_at(oar_grad_get(x), i), exp(i + 1.0) * (i + 2.0), 1e-12);
    CHECK(oar_backward(y, NULL, false) == OAR_OK); /* accumulates */
    for (int i = 0; i < 3; i++) CHECK_NEAR(t_at(oar_grad_get(x), i), 2 * exp(i + 1.0) * (i + 2.0), 1e-12);
    CHECK(oar_backward(y, NULL, false) == OAR_ERR_STATE); /* graph freed */
    CHECK(strstr(oar_last_error(), "retain_graph") != NULL);
    oar_zero_grad(x);
    CHECK(oar_grad_get(x) == NULL);
    oar_scope_end();
}

static void test_diamond_and_broadcast(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){1, 2}, 2);
    oar_tensor *b = oar_from_data((double[]){1, 2, 3, 4, 5, 6}, (int64_t[]){3, 2}, 2, OAR_F64);
    oar_set_requires_grad(b, true);
    /* x used twice and broadcast against b: z = sum((x + b) * x) */
    oar_tensor *z = oar_sum(oar_mul(oar_add(x, b), x), NULL, 0, false);
    CHECK(oar_backward(z, NULL, false) == OAR_OK);
    /* dz/dx_j = sum_i (2 x_j + b_ij) ; dz/db_ij = x_j */
    CHECK_NEAR(t_at(oar_grad_get(x), 0), 2 * 1 * 3 + (1 + 3 + 5), 1e-12);
    CHECK_NEAR(t_at(oar_grad_get(x), 1), 2 * 2 * 3 + (2 + 4 + 6), 1e-12);
    CHECK(oar_numel(oar_grad_get(b)) == 6 && t_at(oar_grad_get(b), 5) == 2);
    oar_scope_end();
}

static void test_no_grad_and_detach(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){1, 2}, 2);
    oar_no_grad_begin();
    oar_tensor *y = oar_mul(x, x);
    oar_no_grad_end();
    CHECK(!oar_requires_grad(y) && oar_is_leaf(y));
    oar_tensor *d = oar_detach(oar_mul(x, x));
    CHECK(!oar_requires_grad(d) && oar_data(d) != NULL);
    oar_tensor *z = oar_sum(oar_mul(x, d), NULL, 0, false); /* d is a constant */
    oar_backward(z, NULL, false);
    CHECK_NEAR(t_at(oar_grad_get(x), 1), 4, 1e-12);
    CHECK(oar_grad_enabled());
    CHECK_ERR(oar_backward(y, NULL, false), "does not require grad");
    oar_tensor *i = oar_zeros((int64_t[]){2}, 1, OAR_I64);
    CHECK(oar_set_requires_grad(i, true) == OAR_ERR_DTYPE);
    CHECK(oar_set_requires_grad(z, false) == OAR_ERR_STATE);
    oar_scope_end();
}

static void test_higher_order(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){0.5, -1.5, 2}, 3);
    /* y = sum(x^3): dy/dx = 3x^2, d2y/dx2 = 6x, d3 = 6 */
    oar_tensor *y = oar_sum(oar_mul(oar_mul(x, x), x), NULL, 0, false);
    oar_tensor *g1, *g2, *g3;
    oar_grad_opts cg = {.create_graph = true};
    CHECK(oar_grad(&y, 1, NULL, &x, 1, &g1, &cg) == OAR_OK);
    CHECK(oar_requires_grad(g1));
    oar_tensor *s1 = oar_sum(g1, NULL, 0, false);
    CHECK(oar_grad(&s1, 1, NULL, &x, 1, &g2, &cg) == OAR_OK);
    oar_tensor *s2 = oar_sum(g2, NULL, 0, false);
    CHECK(oar_grad(&s2, 1, NULL, &x, 1, &g3, NULL) == OAR_OK);
    for (int i = 0; i < 3; i++) {
        double v = t_at(x, i);
        CHECK_NEAR(t_at(g1, i), 3 * v * v, 1e-12);
        CHECK_NEAR(t_at(g2, i), 6 * v, 1e-12);
        CHECK_NEAR(t_at(g3, i), 6, 1e-12);
    }
    CHECK(oar_grad_get(x) == NULL); /* oar_grad leaves .grad alone */
    /* gradient w.r.t. an intermediate, and an unused input */
    oar_tensor *u = leaf((double[]){1}, 1);
    oar_tensor *h = oar_exp(x);
    oar_tensor *z = oar_sum(oar_mul(h, h), NULL, 0, false);
    oar_tensor *wrt[2] = {h, u}, *gs[2];
    CHECK_ERR(oar_grad(&z, 1, NULL, wrt, 2, gs, &(oar_grad_opts){.retain_graph = true}), "was not used");
    CHECK(oar_grad(&z, 1, NULL, wrt, 2, gs, &(oar_grad_opts){.allow_unused = true}) == OAR_OK);
    CHECK(gs[1] == NULL && fabs(t_at(gs[0], 2) - 2 * exp(2.0)) < 1e-9);
    oar_scope_end();
}

static oar_tensor *double_it(oar_tensor *g, void *user) {
    (*(int *)user)++;
    return oar_mul_scalar(g, 2.0);
}

static void test_hooks(void) {
    oar_scope_begin();
    int calls = 0;
    oar_tensor *x = leaf((double[]){1, 2}, 2);
    int h = oar_register_hook(x, double_it, &calls);
    oar_tensor *m = oar_mul(x, x);
    int hm = oar_register_hook(m, double_it, &calls); /* non-leaf hook */
    CHECK(h > 0 && hm > 0);
    oar_backward(oar_sum(m, NULL, 0, false), NULL, false);
    CHECK(calls == 2);
    CHECK_NEAR(t_at(oar_grad_get(x), 1), 2 * 2 * (2 * 2), 1e-12); /* both hooks doubled it */
    CHECK(oar_remove_hook(x, h) == OAR_OK && oar_remove_hook(x, h) == OAR_ERR_INVALID_ARG);
    oar_zero_grad(x);
    oar_backward(oar_sum(oar_mul(x, x), NULL, 0, false), NULL, false);
    CHECK(calls == 2 && t_at(oar_grad_get(x), 1) == 4);
    oar_tensor *c = oar_ones((int64_t[]){2}, 1, OAR_F64);
    CHECK(oar_register_hook(c, double_it, &calls) < 0);
    oar_scope_end();
}

static void test_inplace_check(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){1, 2}, 2);
    oar_tensor *w = oar_from_data((double[]){3, 4}, (int64_t[]){2}, 1, OAR_F64);
    oar_tensor *y = oar_sum(oar_mul(x, w), NULL, 0, false);
    oar_fill_(w, 0); /* w was saved for backward */
    CHECK_ERR(oar_backward(y, NULL, false), "modified in place");
    CHECK(oar_copy_(x, w) == OAR_ERR_STATE); /* leaves that require grad are protected */
    oar_no_grad_begin();
    CHECK(oar_copy_(x, w) == OAR_OK);
    oar_no_grad_end();
    oar_scope_end();
}

static void test_views_grad(void) {
    oar_scope_begin();
    oar_tensor *x = oar_reshape(oar_arange(0, 6, 1, OAR_F64), (int64_t[]){2, 3}, 2);
    oar_tensor *p = oar_clone(x);
    oar_set_requires_grad(p, true);
    /* z = sum(p^T[1:, ::2] * 3) */
    oar_tensor *v = oar_slice(oar_slice(oar_transpose(p, 0, 1), 0, 1, 3, 1), 1, 0, 2, 2);
    oar_backward(oar_sum(oar_mul_scalar(v, 3), NULL, 0, false), NULL, false);
    oar_tensor *g = oar_grad_get(p);
    double want[6] = {0, 3, 3, 0, 0, 0};
    for (int i = 0; i < 6; i++) CHECK(t_at(g, i) == want[i]);
    oar_scope_end();
}

static void test_leaks(void) {
    oar_memory_stats before = oar_memory_stats_get(OAR_CPU);
    test_basic_and_accumulate();
    test_higher_order();
    oar_memory_stats after = oar_memory_stats_get(OAR_CPU);
    CHECK(after.current_bytes == before.current_bytes); /* graphs and grads all freed */
}

/* A gradient rule whose op runs out of memory fails the backward with that error; it is never
 * read as a zero gradient. The memory cap makes the failure happen on demand. */
static void test_rule_failure_is_an_error(void) {
    oar_scope_begin();
    int64_t n = 1 << 20;
    oar_tensor *x = oar_rand(&n, 1, OAR_F32);
    oar_set_requires_grad(x, true);
    oar_tensor *y = oar_sum(oar_exp(x), NULL, 0, false); /* exp's rule allocates n floats */
    int64_t in_use = oar_memory_stats_get(OAR_CPU).current_bytes;
    CHECK(oar_memory_set_limit(OAR_CPU, in_use + (1 << 16)) == OAR_OK);
    CHECK(oar_backward(y, NULL, false) == OAR_ERR_OOM);
    CHECK(strstr(oar_last_error(), "oar_memory_set_limit") != NULL);
    CHECK(oar_grad_get(x) == NULL);
    CHECK(oar_memory_set_limit(OAR_CPU, 0) == OAR_OK);
    CHECK(oar_memory_set_limit(OAR_CPU, -1) == OAR_ERR_INVALID_ARG);
    oar_tensor *y2 = oar_sum(oar_exp(x), NULL, 0, false);
    CHECK(oar_backward(y2, NULL, false) == OAR_OK && oar_grad_get(x) != NULL);
    oar_scope_end();
}

/* Anomaly detection: a rule returning NaN fails the backward, naming the op and its input. */
static void test_detect_anomaly(void) {
    oar_scope_begin();
    oar_tensor *x = leaf((double[]){0, 1}, 2);
    oar_tensor *y = oar_sum(oar_div(x, x), NULL, 0, false); /* d/dy (x / y) = -x / y^2: 0/0 at 0 */
    CHECK(!oar_detect_anomaly_enabled());
    CHECK(oar_backward(y, NULL, true) == OAR_OK && isnan(t_at(oar_grad_get(x), 0))); /* off: NaN flows */
    oar_zero_grad(x);
    oar_set_detect_anomaly(true);
    CHECK(oar_detect_anomaly_enabled());
    CHECK(oar_backward(y, NULL, true) == OAR_ERR_NUMERIC);
    CHECK(strstr(oar_last_error(), "Function 'divBackward' returned nan values in its 1th output.") != NULL);
    oar_tensor *z = oar_sum(oar_mul(x, x), NULL, 0, false); /* finite gradients pass */
    CHECK(oar_backward(z, NULL, false) == OAR_OK && t_at(oar_grad_get(x), 1) == 2.0);
    oar_set_detect_anomaly(false);
    oar_scope_end();
}

int main(void) {
    test_detect_anomaly();
    test_basic_and_accumulate();
    test_diamond_and_broadcast();
    test_no_grad_and_detach();
    test_higher_order();
    test_hooks();
    test_inplace_check();
    test_views_grad();
    test_leaks();
    test_rule_failure_is_an_error();
    return test_summary("test_autograd");
}
