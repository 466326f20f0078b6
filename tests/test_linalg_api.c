/* The public C functions of linear algebra on LAPACK (include/oar.h, 6.4): each result checked by
 * the identity that defines it (A X = B, P L U = A, A V = V diag(L), U diag(S) Vh = A, Q R = A, the
 * normal equations, exp of a rotation generator), and their outputs borrowed from the scope. In
 * builds without OpenBLAS each refuses with the message naming the remedy. */
#include "test_util.h"

static oar_tensor *mat(const double *v, int64_t r, int64_t c) {
    return oar_from_data(v, (int64_t[]){r, c}, 2, OAR_F64);
}

/* max |x - y| over all elements */
static double max_diff(oar_tensor *x, oar_tensor *y) {
    double m = 0;
    oar_tensor *d = oar_abs(oar_sub(x, y));
    if (!d) return INFINITY;
    for (int64_t i = 0; i < oar_numel(d); i++) m = fmax(m, t_at(d, i));
    return m;
}

static const double A3[9] = {4, 1, -2, 1, 3, 0.5, -2, 0.5, 5}; /* symmetric, positive-definite */
static const double B3[6] = {1, 2, -1, 0.5, 3, -2};
static const double N3[9] = {2, 1, 0, -1, 3, 1, 0.5, 0, 4}; /* not symmetric: A^T X = B differs */

#ifdef OAR_HAVE_OPENBLAS
static void test_solves(void) {
    oar_tensor *a = mat(A3, 3, 3), *b = mat(B3, 3, 2);
    oar_tensor *x = oar_linalg_solve(a, b);
    CHECK(x && max_diff(oar_matmul(a, x), b) < 1e-12);
    oar_tensor *u = oar_triu(a, 0), *xt = oar_linalg_solve_triangular(u, b, true, false);
    CHECK(xt && max_diff(oar_matmul(u, xt), b) < 1e-12);
    oar_tensor *n = mat(N3, 3, 3), *lu = NULL, *piv = NULL;
    CHECK(oar_linalg_lu_factor(n, &lu, &piv) == OAR_OK && oar_dtype_of(piv) == OAR_I32);
    oar_tensor *xl = oar_linalg_lu_solve(lu, piv, b, false), *xa = oar_linalg_lu_solve(lu, piv, b, true);
    CHECK(xl && max_diff(oar_matmul(n, xl), b) < 1e-12);
    CHECK(xa && max_diff(oar_matmul(oar_transpose(n, 0, 1), xa), b) < 1e-12);
    double sing[4] = {1, 2, 2, 4};
    CHECK_ERR(oar_linalg_solve(mat(sing, 2, 2), mat(B3, 2, 1)), "The solver failed because the input matrix is singular");
    CHECK(oar_last_status() == OAR_ERR_NUMERIC);
    CHECK_ERR(oar_linalg_lu_factor(mat(sing, 2, 2), &lu, &piv), "linalg_lu_factor: U[2,2] of matrix 0 is zero");
}

static void test_decompositions(void) {
    oar_tensor *a = mat(A3, 3, 3), *l = NULL, *v = NULL;
    CHECK(oar_linalg_eigh(a, false, &l, &v) == OAR_OK);
    CHECK(l && v && max_diff(oar_matmul(a, v), oar_mul(v, oar_unsqueeze(l, 0))) < 1e-12);
    CHECK(l && t_at(l, 0) <= t_at(l, 1) && t_at(l, 1) <= t_at(l, 2)); /* ascending */
    double w[6] = {1, 2, 3, -1, 0.5, 2};
    oar_tensor *m = mat(w, 2, 3), *u = NULL, *s = NULL, *vh = NULL, *q = NULL, *r = NULL;
    CHECK(oar_linalg_svd(m, false, &u, &s, &vh) == OAR_OK);
    CHECK(u && s && vh && max_diff(oar_matmul(oar_mul(u, oar_unsqueeze(s, 0)), vh), m) < 1e-12);
    CHECK(s && t_at(s, 0) >= t_at(s, 1));
    CHECK(oar_linalg_svd(m, true, &u, &s, &vh) == OAR_OK && oar_shape(vh)[0] == 3);
    CHECK(oar_linalg_qr(oar_transpose(m, 0, 1), NULL, &q, &r) == OAR_OK);
    CHECK(q && r && max_diff(oar_matmul(q, r), oar_transpose(m, 0, 1)) < 1e-12 && oar_shape(q)[1] == 2);
    CHECK(r && t_at(r, 2) == 0.0); /* R[1, 0]: upper triangular */
    CHECK_ERR(oar_linalg_qr(m, "full", &q, &r), "linalg_qr: expected mode 'reduced', 'complete' or 'r', got 'full'");
}

static void test_lstsq_and_exp(void) {
    double t[8] = {1, 0, 1, 1, 1, 2, 1, 3}, y[4] = {1, 2, 2, 4};
    oar_tensor *a = mat(t, 4, 2), *b = mat(y, 4, 1), *at = oar_transpose(a, 0, 1);
    oar_tensor *x = oar_linalg_lstsq(a, b, NULL), *xq = oar_linalg_lstsq(a, b, "gels");
    oar_tensor *xd = oar_linalg_lstsq(a, b, "gelsd"), *xs = oar_linalg_lstsq(a, b, "gelss");
    /* the normal equations A^T (A x - b) = 0 */
    CHECK(x && max_diff(oar_matmul(at, oar_matmul(a, x)), oar_matmul(at, b)) < 1e-12);
    CHECK(xq && max_diff(xq, x) < 1e-12 && xd && max_diff(xd, x) < 1e-12 && xs && max_diff(xs, x) < 1e-12);
    CHECK_ERR(oar_linalg_lstsq(a, b, "gelsx"),
              "linalg_lstsq: expected driver 'gels', 'gelsy', 'gelsd' or 'gelss', got 'gelsx'");
    double g[4] = {0, -1, 1, 0};
    oar_tensor *e = oar_linalg_matrix_exp(mat(g, 2, 2));
    CHECK(e && fabs(t_at(e, 0) - cos(1.0)) < 1e-14 && fabs(t_at(e, 2) - sin(1.0)) < 1e-14);
}
#else
static void test_refusals(void) {
    oar_tensor *a = mat(A3, 3, 3), *b = mat(B3, 3, 2), *p = NULL, *q = NULL, *r = NULL;
    const char *why = "this build has no LAPACK; rebuild with OpenBLAS";
    CHECK_ERR(oar_linalg_solve(a, b), why);
    CHECK_ERR(oar_linalg_solve_triangular(a, b, true, false), why);
    CHECK_ERR(oar_linalg_lu_factor(a, &p, &q), why);
    CHECK_ERR(oar_linalg_lu_solve(a, a, b, false), why);
    CHECK_ERR(oar_linalg_eigh(a, false, &p, &q), why);
    CHECK_ERR(oar_linalg_svd(a, false, &p, &q, &r), why);
    CHECK_ERR(oar_linalg_qr(a, NULL, &p, &q), why);
    CHECK_ERR(oar_linalg_lstsq(a, b, NULL), why);
    CHECK_ERR(oar_linalg_matrix_exp(a), why);
}
#endif

int main(void) {
    oar_scope_begin();
#ifdef OAR_HAVE_OPENBLAS
    test_solves();
    test_decompositions();
    test_lstsq_and_exp();
#else
    test_refusals();
#endif
    oar_scope_end();
    return test_summary("test_linalg_api");
}
