/* The public C functions of linear algebra on LAPACK (include/oar.h, 6.4): each result checked by
 * the identity that defines it (A X = B, P L U = A, A V = V diag(L), U diag(S) Vh = A, Q R = A, the
 * normal equations, exp of a rotation generator, L L^T = A, the LDL solve, A V = V diag(L) in complex
 * parts), and their outputs borrowed from the scope. In
 * builds without OpenBLAS each refuses with the message naming the remedy. */
#include "test_util.h"

static oar_tensor *mat(const double *v, int64_t r, int64_t c) {
    return oar_from_data(v, (int64_t[]){r, c}, 2, OAR_F64);
}

/* max |x - y| over all elements; a NaN anywhere is infinitely far (fmax would drop it) */
static double max_diff(oar_tensor *x, oar_tensor *y) {
    double m = 0;
    oar_tensor *d = oar_abs(oar_sub(x, y));
    if (!d) return INFINITY;
    for (int64_t i = 0; i < oar_numel(d); i++) {
        double v = t_at(d, i);
        if (isnan(v)) return INFINITY;
        m = fmax(m, v);
    }
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

/* cholesky_ex (L L^T = A; info 2 where the order-2 minor fails), ldl (its solve), geqrf with
 * householder_product (Q R = A) and ormqr (Q^T B from Q), eig (A V = V diag(L) on the parts) */
static void test_later_factorizations(void) {
    oar_tensor *a = mat(A3, 3, 3), *b = mat(B3, 3, 2), *l = NULL, *info = NULL, *ld = NULL, *piv = NULL;
    CHECK(oar_linalg_cholesky_ex(a, &l, &info) == OAR_OK);
    CHECK(l && info && max_diff(oar_matmul(l, oar_transpose(l, 0, 1)), a) < 1e-12 && t_at(info, 0) == 0);
    double bad[4] = {1, 2, 2, 1};
    CHECK(oar_linalg_cholesky_ex(mat(bad, 2, 2), &l, &info) == OAR_OK && t_at(info, 0) == 2);
    double ind[9] = {0, 1, 2, 1, 0, 3, 2, 3, 1}; /* indefinite, a zero diagonal: 2x2 pivots */
    oar_tensor *s = mat(ind, 3, 3);
    CHECK(oar_linalg_ldl_factor(s, &ld, &piv, &info) == OAR_OK && oar_dtype_of(piv) == OAR_I32 && t_at(piv, 0) < 0);
    oar_tensor *x = ld ? oar_linalg_ldl_solve(ld, piv, b) : NULL;
    CHECK(x && max_diff(oar_matmul(s, x), b) < 1e-12);
    oar_tensor *n = mat(N3, 3, 3), *qr = NULL, *tau = NULL;
    CHECK(oar_linalg_geqrf(n, &qr, &tau) == OAR_OK && oar_shape(tau)[0] == 3);
    oar_tensor *q = qr ? oar_linalg_householder_product(qr, tau) : NULL;
    CHECK(q && max_diff(oar_matmul(q, oar_triu(qr, 0)), n) < 1e-12);
    oar_tensor *qtb = q ? oar_linalg_ormqr(qr, tau, b, true, true) : NULL;
    CHECK(qtb && max_diff(qtb, oar_matmul(oar_transpose(q, 0, 1), b)) < 1e-12);
    double rot[9] = {0, -1, 0, 1, 0, 0, 0, 0, 2}; /* eigenvalues +-i and 2 */
    oar_tensor *r = mat(rot, 3, 3), *lr = NULL, *li = NULL, *vr = NULL, *vi = NULL;
    CHECK(oar_linalg_eig(r, &lr, &li, &vr, &vi) == OAR_OK);
    if (lr && li && vr && vi) { /* (A - L_j) v_j = 0 on the parts: A vr - vr Lr + vi Li and A vi - vi Lr - vr Li */
        oar_tensor *ur = oar_unsqueeze(lr, 0), *ui = oar_unsqueeze(li, 0);
        oar_tensor *re = oar_add(oar_sub(oar_matmul(r, vr), oar_mul(vr, ur)), oar_mul(vi, ui));
        oar_tensor *im = oar_sub(oar_sub(oar_matmul(r, vi), oar_mul(vi, ur)), oar_mul(vr, ui));
        oar_tensor *zero = oar_zeros_like(re);
        CHECK(max_diff(re, zero) < 1e-12 && max_diff(im, zero) < 1e-12);
        double im_max = fmax(fabs(t_at(li, 0)), fmax(fabs(t_at(li, 1)), fabs(t_at(li, 2))));
        CHECK(fabs(im_max - 1) < 1e-12); /* the pair +-i */
    }
    double nan_m[4] = {1, NAN, 0, 1};
    CHECK_ERR(oar_linalg_eig(mat(nan_m, 2, 2), &lr, &li, &vr, &vi), "should not contain infs or NaNs");
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
    CHECK_ERR(oar_linalg_cholesky_ex(a, &p, &q), why);
    CHECK_ERR(oar_linalg_ldl_factor(a, &p, &q, &r), why);
    CHECK_ERR(oar_linalg_ldl_solve(a, a, b), why);
    CHECK_ERR(oar_linalg_geqrf(a, &p, &q), why);
    CHECK_ERR(oar_linalg_householder_product(a, b), why);
    CHECK_ERR(oar_linalg_ormqr(a, b, a, true, false), why);
    CHECK_ERR(oar_linalg_eig(a, &p, &q, &r, &p), why);
}
#endif

int main(void) {
    oar_scope_begin();
#ifdef OAR_HAVE_OPENBLAS
    test_solves();
    test_decompositions();
    test_lstsq_and_exp();
    test_later_factorizations();
#else
    test_refusals();
#endif
    oar_scope_end();
    return test_summary("test_linalg_api");
}
