/* Minimal test helpers: CHECK records a failure and continues; TEST_MAIN_END prints the
 * "N passed, N failed" line and sets the exit status. */
#ifndef OAR_TEST_UTIL_H
#define OAR_TEST_UTIL_H

#include "oar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        if (cond) t_passed++;                                                       \
        else {                                                                      \
            t_failed++;                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, \
                    __LINE__, #cond, oar_last_error());                             \
        }                                                                           \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECK(fabs((double)(a) - (double)(b)) <= (tol))
#define CHECK_ERR(expr, substr) \
    do { oar_clear_error(); (void)(expr); CHECK(strstr(oar_last_error(), substr) != NULL); } while (0)

static inline double t_at(oar_tensor *t, int64_t i) { /* i-th element in row-major order */
    double *buf = malloc(sizeof(double) * (size_t)oar_numel(t));
    oar_copy_to_buffer(t, buf, sizeof(double) * (size_t)oar_numel(t), OAR_F64);
    double v = buf[i];
    free(buf);
    return v;
}

/* Whether a and b hold the same dtype, count and bytes (any layout). */
static inline bool t_same_bits(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b) || oar_dtype_of(a) != oar_dtype_of(b)) return false;
    size_t n = (size_t)oar_numel(a) * oar_dtype_size(oar_dtype_of(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    oar_copy_to_buffer(a, x, n, oar_dtype_of(a));
    oar_copy_to_buffer(b, y, n, oar_dtype_of(b));
    bool same = !memcmp(x, y, n);
    free(x);
    free(y);
    return same;
}

/* A new leaf parameter with p's values. */
static inline oar_tensor *t_leaf_copy(oar_tensor *p) {
    oar_tensor *d = oar_detach(p), *t = oar_clone(d);
    oar_release(d);
    oar_set_requires_grad(t, true);
    return t;
}

/* Gives p the gradient g (d/dp sum(p * g) = g), replacing any earlier one. */
static inline void t_give_grad(oar_tensor *p, oar_tensor *g) {
    oar_zero_grad(p);
    oar_scope_begin();
    if (oar_backward(oar_sum(oar_mul(p, g), NULL, 0, false), NULL, false) != OAR_OK) {
        t_failed++;
        fprintf(stderr, "t_give_grad: backward failed: %s\n", oar_last_error());
    }
    oar_scope_end();
}

static inline int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
    return t_failed ? 1 : 0;
}

#endif
