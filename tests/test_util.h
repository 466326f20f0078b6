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

static inline int test_summary(const char *name) {
    printf("%s: %d passed, %d failed\n", name, t_passed, t_failed);
    return t_failed ? 1 : 0;
}

#endif
