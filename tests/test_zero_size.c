/* What an empty input gives, op by op, against PyTorch's answers (the op sweep checks that
 * every kernel agrees with the reference and crashes on none; this checks the reference means
 * the right thing): a reduction over nothing is its identity (sum 0, prod 1, norm 0,
 * logsumexp -inf) or NaN where it divides by the count (mean, var, std, mean losses); amax and
 * argmax over nothing have no value and fail; products with an empty inner dim are zeros; layers
 * on an empty batch give empty outputs and zero weight gradients; batch norm in training on an
 * empty batch leaves its running statistics alone (PyTorch returns early there too). */
#include "test_util.h"

static oar_tensor *empty(int64_t a, int64_t b) { return oar_randn((int64_t[]){a, b}, 2, OAR_F32); }

/* x has the shape s (ndim n) and every element equals v (NaN matches NaN). */
static bool all_equal(oar_tensor *x, const int64_t *s, int n, double v) {
    if (!x || oar_ndim(x) != n) return false;
    for (int d = 0; d < n; d++)
        if (oar_size(x, d) != s[d]) return false;
    for (int64_t i = 0; i < oar_numel(x); i++) {
        double e = t_at(x, i);
        if (isnan(v) ? !isnan(e) : e != v) return false;
    }
    return true;
}

static void test_reductions(void) {
    oar_scope_begin();
    oar_tensor *x = empty(0, 3);
    int d0 = 0, d1 = 1;
    /* over the empty dim: one value per column */
    CHECK(all_equal(oar_sum(x, &d0, 1, false), (int64_t[]){3}, 1, 0.0));
    CHECK(all_equal(oar_mean(x, &d0, 1, false), (int64_t[]){3}, 1, NAN));
    CHECK(all_equal(oar_prod(x, &d0, 1, false), (int64_t[]){3}, 1, 1.0));
    CHECK(all_equal(oar_var(x, &d0, 1, 1, false), (int64_t[]){3}, 1, NAN));
    CHECK(all_equal(oar_std(x, &d0, 1, 0, false), (int64_t[]){3}, 1, NAN));
    CHECK(all_equal(oar_norm(x, 2, &d0, 1, false), (int64_t[]){3}, 1, 0.0));
    CHECK(all_equal(oar_logsumexp(x, &d0, 1, false), (int64_t[]){3}, 1, -INFINITY));
    CHECK(all_equal(oar_sum(x, &d0, 1, true), (int64_t[]){1, 3}, 2, 0.0));
    /* over all dims: a scalar */
    CHECK(all_equal(oar_sum(x, NULL, 0, false), NULL, 0, 0.0));
    CHECK(all_equal(oar_mean(x, NULL, 0, false), NULL, 0, NAN));
    /* over a dim that is not empty: an empty result */
    CHECK(all_equal(oar_sum(x, &d1, 1, false), (int64_t[]){0}, 1, 0.0));
    CHECK(all_equal(oar_mean(x, &d1, 1, false), (int64_t[]){0}, 1, 0.0));
    CHECK(all_equal(oar_amax(x, &d1, 1, false), (int64_t[]){0}, 1, 0.0));
    CHECK(all_equal(oar_argmax(x, 1, false), (int64_t[]){0}, 1, 0.0));
    /* integers sum to an i64 0 */
    oar_tensor *xi = oar_zeros((int64_t[]){0, 2}, 2, OAR_I32), *si = oar_sum(xi, &d0, 1, false);
    CHECK(si && oar_dtype_of(si) == OAR_I64 && all_equal(si, (int64_t[]){2}, 1, 0.0));
    /* no value to take: refused with a message, never a crash */
    CHECK_ERR(oar_amax(x, &d0, 1, false), "expected reduced dims of non-zero size");
    CHECK_ERR(oar_argmax(x, 0, false), "empty");
    oar_scope_end();
}

static void test_products_and_losses(void) {
    oar_scope_begin();
    /* an empty inner dim: the sum of no products, 0 */
    CHECK(all_equal(oar_matmul(empty(2, 0), empty(0, 3)), (int64_t[]){2, 3}, 2, 0.0));
    oar_tensor *w = empty(4, 0), *b = oar_full((int64_t[]){4}, 1, 0.5, OAR_F32);
    CHECK(all_equal(oar_linear(empty(3, 0), w, b), (int64_t[]){3, 4}, 2, 0.5));
    /* an empty batch */
    CHECK(all_equal(oar_matmul(empty(0, 5), empty(5, 3)), (int64_t[]){0, 3}, 2, 0.0));
    oar_tensor *logits = empty(0, 10), *target = oar_zeros((int64_t[]){0}, 1, OAR_I64);
    CHECK(all_equal(oar_cross_entropy(logits, target, NULL), NULL, 0, NAN)); /* mean over none */
    oar_ce_opts sum = oar_ce_defaults();
    sum.reduction = OAR_REDUCE_SUM;
    CHECK(all_equal(oar_cross_entropy(logits, target, &sum), NULL, 0, 0.0));
    sum.reduction = OAR_REDUCE_NONE;
    CHECK(all_equal(oar_cross_entropy(logits, target, &sum), (int64_t[]){0}, 1, 0.0));
    CHECK(all_equal(oar_mse_loss(empty(0, 2), empty(0, 2), OAR_REDUCE_MEAN), NULL, 0, NAN));
    CHECK(all_equal(oar_mse_loss(empty(0, 2), empty(0, 2), OAR_REDUCE_SUM), NULL, 0, 0.0));
    CHECK(all_equal(oar_softmax(empty(0, 4), -1), (int64_t[]){0, 4}, 2, 0.0));
    CHECK(all_equal(oar_softmax(empty(4, 0), -1), (int64_t[]){4, 0}, 2, 0.0));
    oar_scope_end();
}

static void test_layers(void) {
    oar_scope_begin();
    oar_tensor *x = oar_randn((int64_t[]){0, 4, 6, 6}, 4, OAR_F32);
    /* conv and group norm: the layers of issue 13's crash, with gradients */
    oar_tensor *w = oar_randn((int64_t[]){8, 4, 3, 3}, 4, OAR_F32), *gw = oar_ones((int64_t[]){4}, 1, OAR_F32);
    oar_set_requires_grad(w, true);
    oar_set_requires_grad(gw, true);
    oar_tensor *y = oar_conv2d(oar_group_norm(x, 2, gw, NULL, 1e-5), w, NULL,
                               &(oar_conv_opts){.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1});
    CHECK(all_equal(y, (int64_t[]){0, 8, 6, 6}, 4, 0.0));
    oar_tensor *loss = oar_sum(y, NULL, 0, false);
    CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
    CHECK(all_equal(oar_grad_get(w), (int64_t[]){8, 4, 3, 3}, 4, 0.0));
    CHECK(all_equal(oar_grad_get(gw), (int64_t[]){4}, 1, 0.0));
    CHECK(all_equal(oar_max_pool2d(x, &(oar_pool_opts){.kernel = {2, 2}, .stride = {2, 2}}), (int64_t[]){0, 4, 3, 3}, 4, 0));
    CHECK(all_equal(oar_layer_norm(empty(0, 6), 1, NULL, NULL, 1e-5), (int64_t[]){0, 6}, 2, 0.0));
    /* batch norm, training: empty output, running statistics untouched */
    oar_tensor *rm = oar_full((int64_t[]){4}, 1, 0.25, OAR_F32), *rv = oar_full((int64_t[]){4}, 1, 2.0, OAR_F32);
    CHECK(all_equal(oar_batch_norm(x, NULL, NULL, rm, rv, true, 0.1, 1e-5), (int64_t[]){0, 4, 6, 6}, 4, 0.0));
    CHECK(all_equal(rm, (int64_t[]){4}, 1, 0.25));
    CHECK(all_equal(rv, (int64_t[]){4}, 1, 2.0));
    CHECK(all_equal(oar_batch_norm(x, NULL, NULL, rm, rv, false, 0.1, 1e-5), (int64_t[]){0, 4, 6, 6}, 4, 0.0));
    oar_scope_end();
}

int main(void) {
    test_reductions();
    test_products_and_losses();
    test_layers();
    return test_summary("test_zero_size");
}
