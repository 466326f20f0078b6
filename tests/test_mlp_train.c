/* The pieces fit together: a 2-layer MLP trained eagerly on a fixed synthetic problem (XOR
 * of quadrants, which no linear model can fit) must reach a low loss and high accuracy. */
#include "test_util.h"

int main(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    const int64_t n = 256;
    int64_t xs[2] = {n, 2};
    oar_tensor *x = oar_sub(oar_mul_scalar(oar_rand(xs, 2, OAR_F32), 2.0), oar_ones((int64_t[]){1}, 1, OAR_F32));
    const float *xp = oar_data(x);
    int64_t *labels = malloc(sizeof(int64_t) * n);
    for (int64_t i = 0; i < n; i++) labels[i] = (xp[2 * i] > 0) != (xp[2 * i + 1] > 0);
    oar_tensor *y = oar_from_data(labels, &n, 1, OAR_I64);
    free(labels);

    oar_tensor *p[4] = {oar_mul_scalar(oar_randn((int64_t[]){32, 2}, 2, OAR_F32), 0.7),
                        oar_zeros((int64_t[]){32}, 1, OAR_F32),
                        oar_mul_scalar(oar_randn((int64_t[]){2, 32}, 2, OAR_F32), 0.2),
                        oar_zeros((int64_t[]){2}, 1, OAR_F32)};
    oar_tensor *vel[4];
    for (int k = 0; k < 4; k++) {
        oar_set_requires_grad(p[k], true);
        vel[k] = oar_zeros_like(p[k]);
    }
    double first = 0, last = 0;
    for (int step = 0; step < 400; step++) {
        oar_scope_begin();
        oar_tensor *logits = oar_linear(oar_tanh(oar_linear(x, p[0], p[1])), p[2], p[3]);
        oar_tensor *loss = oar_cross_entropy(logits, y, NULL);
        CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
        if (!loss) break;
        oar_item(loss, step ? &last : &first);
        oar_no_grad_begin();
        for (int k = 0; k < 4; k++) {
            oar_copy_(vel[k], oar_add(oar_mul_scalar(vel[k], 0.9), oar_grad_get(p[k])));
            oar_copy_(p[k], oar_sub(p[k], oar_mul_scalar(vel[k], 0.1)));
            oar_zero_grad(p[k]);
        }
        oar_no_grad_end();
        oar_scope_end();
    }
    oar_tensor *pred = oar_argmax(oar_linear(oar_tanh(oar_linear(x, p[0], p[1])), p[2], p[3]), 1, false);
    int64_t right = 0;
    for (int64_t i = 0; pred && i < n; i++) right += ((int64_t *)oar_data(pred))[i] == ((int64_t *)oar_data(y))[i];
    printf("mlp: loss %.4f -> %.4f, accuracy %.1f%%\n", first, last, 100.0 * right / n);
    CHECK(first > 0.6);          /* started near chance (ln 2) */
    CHECK(last < 0.15);          /* and learned the non-linear boundary */
    CHECK(right >= n * 95 / 100);
    oar_release(pred);
    for (int k = 0; k < 4; k++) {
        oar_release(p[k]);
        oar_release(vel[k]);
    }
    oar_release(x);
    oar_release(y);
    oar_scope_end();
    return test_summary("test_mlp_train");
}
