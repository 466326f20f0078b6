/* The f32 GEMM backends behind oar_gemm (OpenBLAS, oneDNN's dnnl_sgemm, oar's kernel in
 * AVX2 and AVX-512 tiles), each forced in turn: every transpose combination, odd sizes around
 * the kernel's tile and block edges (6 x 16 / 6 x 32 tiles, K blocks of 256), beta 0 / 1 /
 * other, padded leading dimensions (whose padding must stay untouched), K = 0, at 1 and 2
 * threads, against a float64 reference. Then the choice of backend: a pure function of the
 * shape (the same on every call, cache or no cache); oar's kernel bitwise the same however
 * the pool splits the product, in both tile widths, and equal to its written-out arithmetic
 * (oar_sgemm_plain). Matmul, linear, einsum and conv through the public API with each backend
 * forced are the op sweep's cases (ctest runs `sweep OP --gemm-backend NAME`). */
#include "base/base.h"
#include "kernels/cpu/gemm_avx2.h"
#include "kernels/cpu/gemm_blas.h"
#include "kernels/cpu/gemm_select.h"
#include "test_util.h"

#include <stdint.h>

#ifdef OAR_HAVE_OPENBLAS
#define PAD 3              /* extra columns in every leading dimension */
#define SENTINEL 12345.0f  /* in C's padding: a backend must never write there */

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float urand(void) { /* uniform in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(g_rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* op(X)[i][j] of a stored matrix with leading dimension ld */
static double at(const float *x, int64_t ld, bool t, int64_t i, int64_t j) { return t ? x[j * ld + i] : x[i * ld + j]; }

typedef struct problem {
    bool ta, tb;
    int64_t m, n, k, lda, ldb, ldc;
    float *A, *B, *C0; /* C0: C before the call */
    float beta;
} problem;

static void problem_make(problem *p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float beta) {
    *p = (problem){.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .beta = beta};
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    p->lda = ac + PAD, p->ldb = bc + PAD, p->ldc = n + PAD;
    p->A = malloc(sizeof(float) * (size_t)(ar * p->lda + 1));
    p->B = malloc(sizeof(float) * (size_t)(br * p->ldb + 1));
    p->C0 = malloc(sizeof(float) * (size_t)(m * p->ldc + 1));
    for (int64_t i = 0; i < ar * p->lda; i++) p->A[i] = urand();
    for (int64_t i = 0; i < br * p->ldb; i++) p->B[i] = urand();
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < p->ldc; j++)
            /* beta 0 must not read C: NaN there would show */
            p->C0[i * p->ldc + j] = j >= n ? SENTINEL : beta == 0.0f ? NAN : urand();
    p->C0[m * p->ldc] = SENTINEL;
}

static void problem_free(problem *p) {
    free(p->A);
    free(p->B);
    free(p->C0);
}

/* Runs oar_gemm on a copy of C0 and checks it against float64 within a bound on the rounding
 * of a k-term f32 sum: |error| <= (k + 2) u sum |a b| (+ |beta c|), u = 2^-24, doubled. */
static bool check_problem(const problem *p, const char *what) {
    size_t cn = (size_t)(p->m * p->ldc + 1);
    float *C = malloc(sizeof(float) * cn);
    memcpy(C, p->C0, sizeof(float) * cn);
    oar_gemm(OAR_F32, p->ta, p->tb, p->m, p->n, p->k, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc);
    bool ok = true;
    for (int64_t i = 0; i < p->m && ok; i++)
        for (int64_t j = 0; j < p->ldc && ok; j++) {
            float got = C[i * p->ldc + j];
            if (j >= p->n) {
                if (!(ok = got == SENTINEL))
                    fprintf(stderr, "%s: wrote C[%lld][%lld], past n\n", what, (long long)i, (long long)j);
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t q = 0; q < p->k; q++) {
                double t = at(p->A, p->lda, p->ta, i, q) * at(p->B, p->ldb, p->tb, q, j);
                ref += t;
                mag += fabs(t);
            }
            if (p->beta != 0.0f) {
                ref += (double)p->beta * p->C0[i * p->ldc + j];
                mag += fabs((double)p->beta * p->C0[i * p->ldc + j]);
            }
            double tol = 2.0 * (double)(p->k + 2) * 0x1p-24 * mag + 1e-30;
            ok = isfinite(got) && fabs(got - ref) <= tol;
            if (!ok)
                fprintf(stderr, "%s: %c%c m=%lld n=%lld k=%lld beta=%g: C[%lld][%lld] = %.9g, expected %.9g "
                                "(tol %.3g)\n",
                        what, p->ta ? 'T' : 'N', p->tb ? 'T' : 'N', (long long)p->m, (long long)p->n, (long long)p->k,
                        (double)p->beta, (long long)i, (long long)j, (double)got, ref, tol);
        }
    if (ok && C[p->m * p->ldc] != SENTINEL) { /* the float past the end */
        fprintf(stderr, "%s: wrote past the end of C\n", what);
        ok = false;
    }
    free(C);
    return ok;
}

static const int64_t SIZES[] = {1, 7, 17, 63, 65, 129};
static const int64_t KS[] = {0, 1, 7, 17, 65, 300}; /* 300: two K blocks */
#define NSIZES (int)(sizeof SIZES / sizeof SIZES[0])

/* Every backend, every transpose pair, the size grid, at the current thread count. */
static void check_backends(void) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int im = 0; im < NSIZES; im++)
                for (int in = 0; in < NSIZES; in++)
                    for (int ik = 0; ik < NSIZES; ik++) {
                        /* beta 0 everywhere; 1 and 0.5 on a third of the grid */
                        float betas[3] = {0.0f, 1.0f, 0.5f};
                        int nbeta = (im + in + ik) % 3 == 0 ? 3 : 1;
                        for (int bi = 0; bi < nbeta; bi++) {
                            problem p;
                            problem_make(&p, ta, tb, SIZES[im], SIZES[in], KS[ik], betas[bi]);
                            for (int be = OAR_GEMM_AUTO; be < OAR_GEMM_BACKEND_COUNT; be++) {
                                if (oar_gemm_force_backend((oar_gemm_backend)be) < 0) continue;
                                CHECK(check_problem(&p, oar_gemm_backend_name((oar_gemm_backend)be)));
                            }
                            oar_gemm_force_backend(OAR_GEMM_AUTO);
                            problem_free(&p);
                        }
                    }
}

/* Larger shapes: many row and column panels, a partial K block, columns past 2048. */
static void check_large_shapes(void) {
    const int64_t shapes[][3] = {{200, 33, 70}, {5, 2100, 40}, {97, 2049, 257}};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++) {
            problem p;
            problem_make(&p, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], t == 3 ? 1.0f : 0.0f);
            for (int be = OAR_GEMM_AUTO + 1; be < OAR_GEMM_BACKEND_COUNT; be++) {
                if (oar_gemm_force_backend((oar_gemm_backend)be) < 0) continue;
                CHECK(check_problem(&p, oar_gemm_backend_name((oar_gemm_backend)be)));
            }
            oar_gemm_force_backend(OAR_GEMM_AUTO);
            problem_free(&p);
        }
}

/* The rule is a pure function: choose (cached) always answers what the rule says, for more
 * shapes than the cache holds, asked twice and in another order. */
static void check_choice_deterministic(void) {
    bool ok = true;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < 3000; i++) {
            int64_t x = pass ? 2999 - i : i;
            int64_t m = 1 + x % 37 * 29, n = 1 + x / 37 % 11 * 97, k = 1 + x % 7 * 151;
            bool ta = x & 1, tb = x >> 1 & 1;
            for (int nt = 1; nt <= 2; nt++)
                ok = ok && oar_gemm_choose(ta, tb, m, n, k, nt) == oar_gemm_rule(ta, tb, m, n, k, nt) &&
                     oar_gemm_backend_available(oar_gemm_rule(ta, tb, m, n, k, nt));
        }
    CHECK(ok);
    /* forcing wins over the rule and AUTO restores it */
    if (oar_gemm_force_backend(OAR_GEMM_OPENBLAS) >= 0) {
        CHECK(oar_gemm_choose(false, false, 32, 64, 64, 1) == OAR_GEMM_OPENBLAS);
        CHECK(oar_gemm_force_backend(OAR_GEMM_AUTO) == OAR_GEMM_OPENBLAS);
    }
    CHECK(oar_gemm_choose(false, false, 32, 64, 64, 1) == oar_gemm_rule(false, false, 32, 64, 64, 1));
    CHECK(oar_gemm_force_backend((oar_gemm_backend)99) == -1);
    CHECK(oar_gemm_backend_from_name("avx2") == OAR_GEMM_AVX2 && oar_gemm_backend_from_name("nope") == -1);
}

/* oar's kernel's results do not depend on how the pool splits a product (rows at 2 threads,
 * nothing at 1), on the call, nor on the tile width: bitwise equal. */
static void check_avx2_split_invariant(void) {
    if (oar_gemm_force_backend(OAR_GEMM_AVX2) < 0) return;
    const int64_t shapes[][3] = {{301, 47, 290}, {23, 517, 129}};
    for (int s = 0; s < 2; s++)
        for (int t = 0; t < 4; t++) {
            problem p;
            problem_make(&p, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], 0.0f);
            size_t cn = (size_t)(p.m * p.ldc);
            float *c1 = malloc(sizeof(float) * cn), *c2 = malloc(sizeof(float) * cn), *c3 = malloc(sizeof(float) * cn);
            oar_set_num_threads(1);
            oar_gemm(OAR_F32, p.ta, p.tb, p.m, p.n, p.k, p.A, p.lda, p.B, p.ldb, 0.0, c1, p.ldc);
            oar_set_num_threads(2);
            CHECK(oar_gemm_splits(p.m, p.n, p.k));
            oar_gemm(OAR_F32, p.ta, p.tb, p.m, p.n, p.k, p.A, p.lda, p.B, p.ldb, 0.0, c2, p.ldc);
            /* one tile-misaligned piece at a time, as a split might cut it */
            oar_sgemm_avx2(p.ta, p.tb, 13, p.n, p.k, p.A, p.lda, p.B, p.ldb, 0.0f, c3, p.ldc);
            oar_sgemm_avx2(p.ta, p.tb, p.m - 13, p.n, p.k, p.ta ? p.A + 13 : p.A + 13 * p.lda, p.lda, p.B, p.ldb, 0.0f,
                           c3 + 13 * p.ldc, p.ldc);
            bool same = true;
            for (int64_t i = 0; i < p.m; i++)
                same = same && !memcmp(c1 + i * p.ldc, c2 + i * p.ldc, sizeof(float) * (size_t)p.n) &&
                       !memcmp(c1 + i * p.ldc, c3 + i * p.ldc, sizeof(float) * (size_t)p.n);
            CHECK(same);
            /* the 512-bit tiles do the same arithmetic as the 256-bit ones */
            if (oar_gemm_backend_available(OAR_GEMM_AVX512)) {
                oar_sgemm_avx512(p.ta, p.tb, p.m, p.n, p.k, p.A, p.lda, p.B, p.ldb, 0.0f, c3, p.ldc);
                for (int64_t i = 0; i < p.m; i++)
                    same = same && !memcmp(c1 + i * p.ldc, c3 + i * p.ldc, sizeof(float) * (size_t)p.n);
                CHECK(same);
            }
            free(c1);
            free(c2);
            free(c3);
            problem_free(&p);
        }
    oar_gemm_force_backend(OAR_GEMM_AUTO);
}

/* oar's kernel does exactly the arithmetic oar_sgemm_plain writes out (two K blocks, partial
 * tiles, beta 0 / 1 / 0.5): bitwise equal, in both tile widths. */
static void check_avx2_is_plain(void) {
    if (!oar_gemm_backend_available(OAR_GEMM_AVX2)) return;
    const int64_t shapes[][3] = {{13, 37, 300}, {6, 16, 5}, {31, 70, 257}, {7, 9, 1}};
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < 4; t++)
            for (int bi = 0; bi < 3; bi++) {
                float beta = bi == 0 ? 0.0f : bi == 1 ? 1.0f : 0.5f;
                problem p;
                problem_make(&p, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], beta);
                size_t cn = (size_t)(p.m * p.ldc);
                float *ref = malloc(sizeof(float) * cn), *got = malloc(sizeof(float) * cn);
                memcpy(ref, p.C0, sizeof(float) * cn);
                oar_sgemm_plain(p.ta, p.tb, p.m, p.n, p.k, p.A, p.lda, p.B, p.ldb, beta, ref, p.ldc);
                for (int wide = 0; wide < 2; wide++) {
                    if (wide && !oar_gemm_backend_available(OAR_GEMM_AVX512)) continue;
                    memcpy(got, p.C0, sizeof(float) * cn);
                    (wide ? oar_sgemm_avx512 : oar_sgemm_avx2)(p.ta, p.tb, p.m, p.n, p.k, p.A, p.lda, p.B, p.ldb, beta,
                                                              got, p.ldc);
                    bool same = true;
                    for (int64_t i = 0; i < p.m; i++)
                        same = same && !memcmp(ref + i * p.ldc, got + i * p.ldc, sizeof(float) * (size_t)p.n);
                    CHECK(same);
                }
                free(ref);
                free(got);
                problem_free(&p);
            }
}

int main(void) {
    oar_init();
    CHECK(oar_gemm_backend_available(OAR_GEMM_OPENBLAS));
    for (int nt = 1; nt <= 2; nt++) {
        CHECK(oar_set_num_threads(nt) == OAR_OK);
        check_backends();
        check_large_shapes();
    }
    check_choice_deterministic();
    check_avx2_split_invariant();
    check_avx2_is_plain();
    return test_summary("test_gemm");
}
#else
/* oar_gemm and its backends exist only in builds with OpenBLAS; without it the matmul kernels
 * are the portable reference ones, which the op sweep checks. */
int main(void) {
    printf("test_gemm: skipped (built without OpenBLAS)\n");
    return 0;
}
#endif
