/* Trains a 2-layer MLP (64-128-10) on the UCI handwritten digits with SGD + momentum, eagerly,
 * and reports test accuracy after each epoch. Data: ../shared/data/sklearn/digits_* (or
 * $OAR_SHARED_DIR/data/...); without it, a synthetic 10-class problem of the same shape.
 *
 *   example_train_mlp [--epochs N] [--lr X] [--seed S]
 */
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEATURES 64
#define HIDDEN 128
#define CLASSES 10

typedef struct dataset {
    float *x;      /* n * FEATURES, scaled to [0, 1] */
    int64_t *y;
    int64_t n;
} dataset;

static bool load_digits(const char *dir, const char *split, dataset *d) {
    char path[1024];
    snprintf(path, sizeof path, "%s/data/sklearn/digits_%s_images.u8", dir, split);
    FILE *fi = fopen(path, "rb");
    snprintf(path, sizeof path, "%s/data/sklearn/digits_%s_labels.u8", dir, split);
    FILE *fl = fopen(path, "rb");
    bool ok = fi && fl;
    if (ok) {
        fseek(fl, 0, SEEK_END);
        d->n = ftell(fl);
        rewind(fl);
        unsigned char *img = malloc((size_t)d->n * FEATURES), *lab = malloc((size_t)d->n);
        ok = fread(img, FEATURES, (size_t)d->n, fi) == (size_t)d->n && fread(lab, 1, (size_t)d->n, fl) == (size_t)d->n;
        d->x = malloc(sizeof(float) * (size_t)d->n * FEATURES);
        d->y = malloc(sizeof(int64_t) * (size_t)d->n);
        for (int64_t i = 0; ok && i < d->n; i++) {
            for (int f = 0; f < FEATURES; f++) d->x[i * FEATURES + f] = img[i * FEATURES + f] / 16.0f;
            d->y[i] = lab[i] < CLASSES ? lab[i] : 0;
        }
        free(img);
        free(lab);
    }
    if (fi) fclose(fi);
    if (fl) fclose(fl);
    return ok;
}

/* Ten Gaussian clusters in 64 dimensions: a stand-in when the real data is absent. */
static void make_synthetic(dataset *d, int64_t n, uint64_t seed) {
    oar_manual_seed(seed);
    int64_t cshape[2] = {CLASSES, FEATURES}, xshape[2] = {n, FEATURES};
    oar_tensor *centers = oar_rand(cshape, 2, OAR_F32), *noise = oar_randn(xshape, 2, OAR_F32);
    const float *c = oar_data(centers), *z = oar_data(noise);
    d->n = n;
    d->x = malloc(sizeof(float) * (size_t)n * FEATURES);
    d->y = malloc(sizeof(int64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        d->y[i] = i % CLASSES;
        for (int f = 0; f < FEATURES; f++) d->x[i * FEATURES + f] = c[d->y[i] * FEATURES + f] + 0.15f * z[i * FEATURES + f];
    }
    oar_release(centers);
    oar_release(noise);
}

static oar_tensor *param(int64_t rows, int64_t cols, double scale) {
    int64_t shape[2] = {rows, cols};
    oar_scope_begin(); /* frees the unscaled draw */
    oar_tensor *p = oar_keep(cols ? oar_mul_scalar(oar_randn(shape, 2, OAR_F32), scale) : oar_zeros(shape, 1, OAR_F32));
    oar_scope_end();
    oar_set_requires_grad(p, true);
    return p;
}

static oar_tensor *forward(oar_tensor *x, oar_tensor **p) {
    return oar_linear(oar_relu(oar_linear(x, p[0], p[1])), p[2], p[3]);
}

static double accuracy(const dataset *d, oar_tensor **p) {
    oar_no_grad_begin();
    oar_scope_begin();
    int64_t shape[2] = {d->n, FEATURES};
    oar_tensor *pred = oar_argmax(forward(oar_from_blob(d->x, shape, 2, OAR_F32, NULL, NULL), p), 1, false);
    const int64_t *yp = pred ? oar_data(pred) : NULL;
    int64_t right = 0;
    for (int64_t i = 0; yp && i < d->n; i++) right += yp[i] == d->y[i];
    oar_scope_end();
    oar_no_grad_end();
    return (double)right / (double)d->n;
}

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int epochs = 30;
    double lr = 0.1, momentum = 0.9;
    uint64_t seed = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--epochs")) epochs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr")) lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(argv[i + 1], NULL, 10);
    }
    const char *shared = getenv("OAR_SHARED_DIR") ? getenv("OAR_SHARED_DIR") : "../shared";
    dataset train = {0}, test = {0};
    if (load_digits(shared, "train", &train) && load_digits(shared, "test", &test)) {
        printf("data: UCI digits from %s/data/sklearn (%lld train, %lld test)\n", shared, (long long)train.n,
               (long long)test.n);
    } else {
        printf("data: %s/data/sklearn not found; using a synthetic 10-class problem\n", shared);
        make_synthetic(&train, 1500, 7);
        make_synthetic(&test, 400, 7);
    }
    oar_manual_seed(seed);
    /* He-style init for the ReLU layer, smaller for the output layer */
    oar_tensor *p[4] = {param(HIDDEN, FEATURES, 0.18), param(HIDDEN, 0, 0), param(CLASSES, HIDDEN, 0.09),
                        param(CLASSES, 0, 0)};
    oar_tensor *vel[4];
    for (int k = 0; k < 4; k++) vel[k] = oar_zeros_like(p[k]);

    const int64_t batch = 64, steps = (train.n + batch - 1) / batch;
    int64_t *order = malloc(sizeof(int64_t) * (size_t)train.n);
    for (int64_t i = 0; i < train.n; i++) order[i] = i;
    int64_t xshape[2] = {train.n, FEATURES};
    oar_tensor *X = oar_from_blob(train.x, xshape, 2, OAR_F32, NULL, NULL);
    oar_tensor *Y = oar_from_blob(train.y, &train.n, 1, OAR_I64, NULL, NULL);
    double t0 = wall_s();
    uint64_t rng = seed * 2654435761u + 1;
    for (int epoch = 1; epoch <= epochs; epoch++) {
        for (int64_t i = train.n - 1; i > 0; i--) { /* shuffle */
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            int64_t j = (int64_t)((rng >> 33) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        double total = 0;
        for (int64_t s = 0; s < steps; s++) {
            oar_scope_begin();
            int64_t nb = s * batch + batch <= train.n ? batch : train.n - s * batch;
            oar_tensor *idx = oar_from_blob(order + s * batch, &nb, 1, OAR_I64, NULL, NULL);
            oar_tensor *loss = oar_cross_entropy(forward(oar_index_select(X, 0, idx), p), oar_index_select(Y, 0, idx), NULL);
            double l;
            if (!loss || oar_backward(loss, NULL, false) != OAR_OK || oar_item(loss, &l) != OAR_OK) {
                fprintf(stderr, "train_mlp: step failed: %s\n", oar_last_error());
                return 1;
            }
            total += l;
            oar_no_grad_begin(); /* SGD with momentum: v = m*v + g; p -= lr*v */
            for (int k = 0; k < 4; k++) {
                oar_copy_(vel[k], oar_add(oar_mul_scalar(vel[k], momentum), oar_grad_get(p[k])));
                oar_copy_(p[k], oar_sub(p[k], oar_mul_scalar(vel[k], lr)));
                oar_zero_grad(p[k]);
            }
            oar_no_grad_end();
            oar_scope_end();
        }
        if (epoch % 5 == 0 || epoch == 1 || epoch == epochs)
            printf("epoch %2d/%d  train loss %.4f  test accuracy %.2f%%  (%.1f s)\n", epoch, epochs, total / steps,
                   100 * accuracy(&test, p), wall_s() - t0);
    }
    double acc = accuracy(&test, p);
    printf("final test accuracy: %.2f%%\n", 100 * acc);
    for (int k = 0; k < 4; k++) {
        oar_release(p[k]);
        oar_release(vel[k]);
    }
    oar_release(X);
    oar_release(Y);
    free(order);
    free(train.x); free(train.y); free(test.x); free(test.y);
    return acc > 0.5 ? 0 : 1;
}
