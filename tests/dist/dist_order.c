/* The fixed-order allreduce's result, element by element (tests/dist/order.sh runs this under
 * mpirun with 2, 3 and 4 ranks; docs/dist.md, "A deterministic reduction of our own"): every
 * rank must hold exactly the rank-order fold x0 op x1 op ... op x(N-1) (divided by N for AVG),
 * whichever rank owns the element's chunk and whatever segment carried it. Each rank can make
 * every rank's input (a hash of the element and the rank), so it computes that fold itself
 * and compares bits. The inputs make order visible: floats of exponents 2^-20..2^20 (at 3 or
 * more ranks a sum in another order rounds differently), and for MAX and MIN some NaNs and
 * signed zeros (the rule "b > a ? b : a" is not symmetric in them, so 2 ranks see order too).
 * Several allreduces run at once on their own channels, as data parallel's buckets do. */
#include "oar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Rank r's value at element i of case k: in [-1, 1) times 2^-20..2^20 (floats), or times
 * scale (integers, which then stay far from overflow). */
static double value(int k, int64_t i, int r, bool specials, double scale) {
    uint64_t h = mix(mix((uint64_t)k * 1000003u + (uint64_t)i) ^ (uint64_t)r * 0x632be59bd9b4e019ull);
    if (specials && h % 7 == 0) return (h >> 8) % 3 == 0 ? NAN : (h >> 8) % 3 == 1 ? 0.0 : -0.0;
    double unit = (double)(h >> 11) / 9007199254740992.0 * 2.0 - 1.0;
    return scale > 0 ? unit * scale : ldexp(unit, (int)((h >> 3) % 41) - 20);
}

typedef struct test_case {
    int64_t count;
    oar_dtype dtype;
    oar_dist_op op;
} test_case;

static void fill(const test_case *tc, int k, int r, void *out) {
    bool specials = tc->op == OAR_DIST_MAX || tc->op == OAR_DIST_MIN;
    for (int64_t i = 0; i < tc->count; i++) {
        switch (tc->dtype) {
        case OAR_F32: ((float *)out)[i] = (float)value(k, i, r, specials, 0); break;
        case OAR_F64: ((double *)out)[i] = value(k, i, r, specials, 0); break;
        case OAR_I32: ((int32_t *)out)[i] = (int32_t)value(k, i, r, false, 1e8); break;
        default: ((int64_t *)out)[i] = (int64_t)value(k, i, r, false, 1e15); break;
        }
    }
}

/* The rank-order fold of every rank's input, as the documentation defines it. */
#define FOLD(T)                                                                                     \
    do {                                                                                            \
        T *acc = want, *x = tmp;                                                                    \
        fill(tc, k, 0, acc);                                                                        \
        for (int r = 1; r < n; r++) {                                                               \
            fill(tc, k, r, x);                                                                      \
            for (int64_t i = 0; i < tc->count; i++)                                                 \
                acc[i] = tc->op == OAR_DIST_MAX ? (x[i] > acc[i] ? x[i] : acc[i])                   \
                       : tc->op == OAR_DIST_MIN ? (x[i] < acc[i] ? x[i] : acc[i]) : (T)(acc[i] + x[i]); \
        }                                                                                           \
        if (tc->op == OAR_DIST_AVG)                                                                 \
            for (int64_t i = 0; i < tc->count; i++) acc[i] /= (T)n;                                 \
    } while (0)

static void fold(const test_case *tc, int k, int n, void *want, void *tmp) {
    switch (tc->dtype) {
    case OAR_F32: FOLD(float); break;
    case OAR_F64: FOLD(double); break;
    case OAR_I32: FOLD(int32_t); break;
    default: FOLD(int64_t); break;
    }
}

static const char *op_name(oar_dist_op op) {
    return op == OAR_DIST_SUM ? "SUM" : op == OAR_DIST_AVG ? "AVG" : op == OAR_DIST_MAX ? "MAX" : "MIN";
}

int main(void) {
    oar_set_num_threads(1);
    if (oar_dist_init(NULL) != OAR_OK) {
        fprintf(stderr, "dist_order: %s\n", oar_last_error());
        return 1;
    }
    int n = oar_dist_world_size(), me = oar_dist_rank(), failures = 0;
    /* sizes: fewer elements than ranks (empty chunks), odd counts, one segment, and several
     * (over 128 KiB per chunk), up to 4 MiB of f32 */
    const test_case cases[] = {
        {1, OAR_F32, OAR_DIST_SUM},       {2, OAR_F32, OAR_DIST_AVG},       {7, OAR_F32, OAR_DIST_MAX},
        {1000, OAR_F32, OAR_DIST_SUM},    {1000, OAR_F64, OAR_DIST_AVG},    {1001, OAR_I32, OAR_DIST_AVG},
        {1003, OAR_I64, OAR_DIST_SUM},    {4099, OAR_F32, OAR_DIST_MIN},    {100003, OAR_F32, OAR_DIST_SUM},
        {100003, OAR_F32, OAR_DIST_AVG},  {100003, OAR_F32, OAR_DIST_MAX},  {65537, OAR_F64, OAR_DIST_MIN},
        {1048579, OAR_F32, OAR_DIST_AVG}, {1048579, OAR_F32, OAR_DIST_SUM}, {262147, OAR_F64, OAR_DIST_SUM},
    };
    enum { N_CASES = sizeof cases / sizeof *cases };
    oar_tensor *t[N_CASES];
    oar_dist_work *w[N_CASES];
    for (int k = 0; k < N_CASES; k++) { /* all in flight at once */
        t[k] = oar_zeros((int64_t[]){cases[k].count}, 1, cases[k].dtype);
        fill(&cases[k], k, me, oar_data(t[k]));
        w[k] = oar_dist_allreduce(t[k], cases[k].op, true);
    }
    for (int k = 0; k < N_CASES; k++) {
        const test_case *tc = &cases[k];
        if (oar_dist_wait(w[k]) != OAR_OK) {
            fprintf(stderr, "rank %d: FAILED case %d: %s\n", me, k, oar_last_error());
            failures++;
            continue;
        }
        size_t es = tc->dtype == OAR_F64 || tc->dtype == OAR_I64 ? 8 : 4;
        char *want = malloc(es * (size_t)tc->count), *tmp = malloc(es * (size_t)tc->count);
        fold(tc, k, n, want, tmp);
        const char *got = oar_data(t[k]);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < tc->count; i++)
            if (memcmp(got + (size_t)i * es, want + (size_t)i * es, es)) bad++, first = first < 0 ? i : first;
        if (bad) {
            failures++;
            double g = tc->dtype == OAR_F32 ? ((const float *)got)[first] : tc->dtype == OAR_F64 ? ((const double *)got)[first] : 0;
            double e = tc->dtype == OAR_F32 ? ((float *)want)[first] : tc->dtype == OAR_F64 ? ((double *)want)[first] : 0;
            fprintf(stderr, "rank %d: FAILED %s of %lld %s: %lld elements differ from the rank-order fold, the first "
                    "at %lld (%.9g, expected %.9g)\n", me, op_name(tc->op), (long long)tc->count,
                    oar_dtype_name(tc->dtype), (long long)bad, (long long)first, g, e);
        }
        free(want);
        free(tmp);
        oar_release(t[k]);
    }
    if (!failures) printf("rank %d of %d: %d fixed-order allreduces equal the rank-order fold bit for bit\n", me, n, N_CASES);
    fflush(stdout);
    if (oar_dist_finalize() != OAR_OK) failures++;
    return failures ? 1 : 0;
}
