/* Timing helpers shared by the benchmarks (oar bench workloads, bench/dnnl_pool_bn.c). */
#ifndef OAR_BENCH_UTIL_H
#define OAR_BENCH_UTIL_H

#include <time.h>

/* Monotonic seconds. */
static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* qsort order for doubles (medians of timings). */
static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
