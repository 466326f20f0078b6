/* A BatchNorm applied twice in one forward pass (shared layer) must still backpropagate:
 * its in-place running-stat updates are not reads the gradient depends on. */
#include "test_util.h"

int main(void) {
    oar_scope_begin();
    oar_manual_seed(1);
    oar_tensor *x = oar_randn((int64_t[]){4, 3}, 2, OAR_F64);
    oar_tensor *w = oar_ones((int64_t[]){3}, 1, OAR_F64), *b = oar_zeros((int64_t[]){3}, 1, OAR_F64);
    oar_tensor *rm = oar_zeros((int64_t[]){3}, 1, OAR_F64), *rv = oar_ones((int64_t[]){3}, 1, OAR_F64);
    oar_set_requires_grad(x, true);
    oar_set_requires_grad(w, true);
    oar_tensor *h = oar_batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    oar_tensor *y = oar_batch_norm(oar_tanh(h), w, b, rm, rv, true, 0.1, 1e-5);
    CHECK(y != NULL);
    CHECK(oar_backward(oar_sum(oar_mul(y, y), NULL, 0, false), NULL, false) == OAR_OK);
    CHECK(oar_grad_get(x) != NULL && oar_grad_get(w) != NULL);
    /* running mean moved twice: 0 -> 0.1*m1 -> 0.9*(0.1*m1) + 0.1*m2 */
    CHECK(t_at(rm, 0) != 0.0);
    oar_scope_end();
    return test_summary("test_batchnorm_twice");
}
