/* The thread pool: loops cover every index once at any thread count, and the pool can grow
 * and shrink between loops (new workers must not re-run an old loop). GEMMs large enough to be
 * split over the pool (row or column blocks, batch items) match a float64 reference, with
 * transposed, packed and broadcast operands. */
#include "base/base.h"
#include "test_util.h"

static void mark(void *ctx, int64_t b, int64_t e) {
    int *hits = ctx;
    for (int64_t i = b; i < e; i++) __atomic_add_fetch(&hits[i], 1, __ATOMIC_RELAXED);
}

static double *values(oar_tensor *t) {
    double *v = malloc(sizeof(double) * (size_t)oar_numel(t));
    oar_copy_to_buffer(t, v, sizeof(double) * (size_t)oar_numel(t), OAR_F64);
    return v;
}

/* y[batch, m, n] against a[batch or 1, m, k]·b[batch or 1, k, n] (+ bias[n]), in float64. */
static void check_product(oar_tensor *y, oar_tensor *a, oar_tensor *b, oar_tensor *bias, int64_t batch, int64_t m,
                          int64_t k, int64_t n, double tol) {
    CHECK(y != NULL && oar_numel(y) == batch * m * n);
    if (!y) return;
    double *yv = values(y), *av = values(a), *bv = values(b), *cv = bias ? values(bias) : NULL, worst = 0;
    int64_t as = oar_numel(a) == m * k ? 0 : m * k, bs = oar_numel(b) == k * n ? 0 : k * n;
    for (int64_t p = 0; p < batch; p++)
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = cv ? cv[j] : 0;
                for (int64_t q = 0; q < k; q++) s += av[p * as + i * k + q] * bv[p * bs + q * n + j];
                double d = fabs(s - yv[(p * m + i) * n + j]);
                worst = d > worst ? d : worst;
            }
    CHECK(worst <= tol);
    free(yv), free(av), free(bv), free(cv);
}

/* A [rows, cols] operand, stored transposed when trans (BLAS gets the Trans flag). */
static oar_tensor *operand(int64_t rows, int64_t cols, bool trans, oar_dtype dt) {
    int64_t shape[2] = {trans ? cols : rows, trans ? rows : cols};
    oar_tensor *t = oar_randn(shape, 2, dt);
    if (!trans) return t;
    oar_tensor *v = oar_transpose(t, 0, 1);
    oar_release(t);
    return v;
}

static void check_gemms(void) {
    /* m < n splits columns, m > n rows; every layout of both */
    const int64_t mkn[][3] = {{72, 150, 300}, {300, 100, 40}, {257, 33, 97}};
    for (int s = 0; s < 3; s++)
        for (int l = 0; l < 4; l++) {
            int64_t m = mkn[s][0], k = mkn[s][1], n = mkn[s][2];
            oar_tensor *a = operand(m, k, l & 1, OAR_F32), *b = operand(k, n, l & 2, OAR_F32);
            oar_tensor *y = oar_matmul(a, b);
            check_product(y, a, b, NULL, 1, m, k, n, 1e-3);
            oar_release(y), oar_release(a), oar_release(b);
        }
    /* f64, and linear with a bias (the split GEMM adds onto C) */
    oar_tensor *a = operand(190, 120, false, OAR_F64), *b = operand(120, 170, true, OAR_F64);
    oar_tensor *y = oar_matmul(a, b);
    check_product(y, a, b, NULL, 1, 190, 120, 170, 1e-9);
    oar_release(y), oar_release(a), oar_release(b);
    int64_t xs[2] = {257, 130}, ws[2] = {190, 130}, bs[1] = {190};
    oar_tensor *x = oar_randn(xs, 2, OAR_F32), *w = oar_randn(ws, 2, OAR_F32), *bias = oar_randn(bs, 1, OAR_F32);
    oar_tensor *wt = oar_transpose(w, 0, 1);
    y = oar_linear(x, w, bias);
    check_product(y, x, wt, bias, 1, 257, 130, 190, 1e-3);
    oar_release(y), oar_release(x), oar_release(w), oar_release(wt), oar_release(bias);
    /* batched: by batch item, with a packed operand (every other column) and a broadcast one */
    int64_t as[3] = {7, 64, 192}, bshape[3] = {7, 96, 80}, b2[2] = {96, 80};
    oar_tensor *full = oar_randn(as, 3, OAR_F32), *bb = oar_randn(bshape, 3, OAR_F32), *bm = oar_randn(b2, 2, OAR_F32);
    oar_tensor *ap = oar_slice(full, 2, 0, 192, 2); /* [7, 64, 96], column stride 2: packed */
    y = oar_matmul(ap, bb);
    check_product(y, ap, bb, NULL, 7, 64, 96, 80, 1e-3);
    oar_release(y);
    y = oar_matmul(ap, bm);
    check_product(y, ap, bm, NULL, 7, 64, 96, 80, 1e-3);
    oar_release(y), oar_release(ap), oar_release(full), oar_release(bb), oar_release(bm);
}

int main(void) {
    enum { N = 100000 };
    static int hits[N];
    const int counts[] = {1, 4, 2, 8, 1, 3, 3, 6};
    for (int round = 0; round < 50; round++) {
        CHECK(oar_set_num_threads(counts[round % 8]) == OAR_OK);
        memset(hits, 0, sizeof hits);
        oar_parallel_for(N, 1000, mark, hits);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += hits[i] != 1;
        CHECK(bad == 0);
    }
    CHECK(oar_get_num_threads() == counts[49 % 8]);
    oar_manual_seed(1);
    const int gemm_counts[] = {1, 2, 3};
    for (int i = 0; i < 3; i++) {
        CHECK(oar_set_num_threads(gemm_counts[i]) == OAR_OK);
        check_gemms();
    }
    return test_summary("test_threads");
}
