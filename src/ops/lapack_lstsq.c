/* Least squares on LAPACK: min ||A X - B|| (the minimum-norm X when A is rank-deficient or wide) by
 * torch's four CPU drivers: gelsy (complete orthogonal factorization with column pivoting,
 * rank-revealing; torch's default), gelsd (SVD by divide and conquer) and gelss (SVD), both
 * rank-revealing with singular values, or gels (QR/LQ, full rank only). Outputs: the solution, the
 * squared residual norms per column (computed as |B - A X|^2; torch shows them only for tall
 * full-rank A), the rank (i64; mn for gels) and the singular values (gelsd, gelss; zeros otherwise).
 * Built only with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>
#include <string.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])

enum { GELS, GELSY, GELSD, GELSS };

static int lstsq_driver(const char *name) {
    static const char *const names[] = {"gels", "gelsy", "gelsd", "gelss"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

/* One call of the driver (lwork -1: the workspace query, its size in work[0]). */
static void lstsq_lapack(int drv, int m, int n, int k, double *a, int lda, double *b, int ldb, double *s,
                         double rcond, int *rank, int *jpvt, double *work, int lwork, int *iwork, int *info) {
    switch (drv) {
    case GELSY: dgelsy_(&m, &n, &k, a, &lda, b, &ldb, jpvt, &rcond, rank, work, &lwork, info); break;
    case GELSD: dgelsd_(&m, &n, &k, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, info); break;
    case GELSS: dgelss_(&m, &n, &k, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, info); break;
    default: dgels_("N", &m, &n, &k, a, &lda, b, &ldb, work, &lwork, info);
    }
}

static oar_status lstsq_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = la_check_matrix("linalg_lstsq", in[0], "A", false);
    if (st == OAR_OK) st = la_check_matrix("linalg_lstsq", in[1], "B", false);
    if (st == OAR_OK) st = la_check_pair("linalg_lstsq", in[0], in[1], "B", true);
    if (st != OAR_OK) return st;
    if (lstsq_driver(a[0].s) < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "linalg_lstsq: expected driver 'gels', 'gelsy', 'gelsd' or 'gelss', got "
                         "'%s'", a[0].s);
    int nd = in[0]->ndim;
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1), k = DIM(in[1], -1);
    for (int i = 0; i < 4; i++) oar_meta_from(&out[i], in[1]);
    out[0].shape[nd - 2] = n;
    out[1].ndim = nd - 1;
    out[1].shape[nd - 2] = k;
    out[2].ndim = nd - 2;
    out[2].dtype = OAR_I64;
    out[3].ndim = nd - 1;
    out[3].shape[nd - 2] = m < n ? m : n;
    *n_out = 4;
    return OAR_OK;
}

static oar_status lstsq_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = (int)DIM(in[1], -1), mn = m < n ? m : n;
    int lda = m ? m : 1, ldb = m > n ? m : n, rank = 0, info = 0, lwork = -1, iq = 0;
    int drv = lstsq_driver(attrs[0].s);
    double rcond = attrs[1].f, wq = 0;
    if (!ldb) ldb = 1;
    int64_t nb = la_batch(in[0]);
    double *a = la_alloc("linalg_lstsq", (int64_t)lda * n), *b = la_alloc("linalg_lstsq", (int64_t)ldb * k);
    double *a0 = la_alloc("linalg_lstsq", (int64_t)lda * n), *b0 = la_alloc("linalg_lstsq", (int64_t)lda * k);
    double *s = la_alloc("linalg_lstsq", mn), *work = NULL;
    int *iwork = NULL, *jpvt = malloc((size_t)(n > 1 ? n : 1) * sizeof *jpvt);
    oar_status st = a && b && a0 && b0 && s ? OAR_OK : oar_last_status();
    if (st == OAR_OK && !jpvt) st = oar_error(OAR_ERR_OOM, "linalg_lstsq: out of memory for the column pivots");
    if (st == OAR_OK && mn && k) {
        lstsq_lapack(drv, m, n, k, a, lda, b, ldb, s, rcond, &rank, jpvt, &wq, -1, &iq, &info);
        lwork = (int)wq;
        work = la_alloc("linalg_lstsq", lwork > 1 ? lwork : 1);
        iwork = malloc((size_t)(iq > 1 ? iq : 1) * sizeof *iwork);
        if (!work || !iwork) st = oar_error(OAR_ERR_OOM, "linalg_lstsq: out of memory for LAPACK's workspace");
    }
    const oar_dtype_traits *t = &oar_dtypes[out[1]->dtype];
    for (int64_t bi = 0; st == OAR_OK && bi < nb; bi++) {
        la_load(in[0], bi, a, lda);
        memcpy(a0, a, sizeof *a * (size_t)lda * n);
        for (int64_t i = 0; i < (int64_t)ldb * k; i++) b[i] = 0;
        la_load(in[1], bi, b, ldb);
        la_load(in[1], bi, b0, lda);
        rank = mn;
        for (int i = 0; i < mn; i++) s[i] = 0;
        if (mn && k) {
            for (int c = 0; c < n; c++) jpvt[c] = 0; /* gelsy: every column free to move */
            lstsq_lapack(drv, m, n, k, a, lda, b, ldb, s, rcond, &rank, jpvt, work, lwork, iwork, &info);
            if (info > 0) {
                st = oar_error(OAR_ERR_NUMERIC, drv == GELS ? "linalg_lstsq: matrix %lld is rank-deficient, which the "
                                                              "driver gels cannot solve; use driver 'gelsy' or 'gelsd'"
                                                            : "linalg_lstsq: the SVD failed to converge on matrix "
                                                              "%lld; check it for inf or nan",
                               (long long)bi);
                break;
            }
        } else if (!mn) {
            for (int64_t i = 0; i < (int64_t)ldb * k; i++) b[i] = 0; /* no equations or no unknowns: X = 0 */
        }
        la_store(out[0], bi, b, ldb);
        /* |B - A X|^2 per column, from the inputs kept aside */
        for (int j = 0; j < k; j++) {
            double r2 = 0;
            for (int i = 0; i < m; i++) {
                double r = b0[i + (int64_t)j * lda];
                for (int c = 0; c < n; c++) r -= a0[i + (int64_t)c * lda] * b[c + (int64_t)j * ldb];
                r2 += r * r;
            }
            t->store(oar_tensor_ptr(out[1]) + (bi * k + j) * (int64_t)t->size, r2);
        }
        ((int64_t *)oar_tensor_ptr(out[2]))[bi] = rank;
        for (int i = 0; i < mn; i++) t->store(oar_tensor_ptr(out[3]) + (bi * mn + i) * (int64_t)t->size, s[i]);
    }
    free(a);
    free(b);
    free(a0);
    free(b0);
    free(s);
    free(work);
    free(iwork);
    free(jpvt);
    return st;
}

/* For full-rank A. Tall (m >= n), X = (A^T A)^-1 A^T B: with Z = (A^T A)^-1 gX and R = B - A X,
 * gB = A Z, gA = R Z^T - A Z X^T. Wide, X = A^T (A A^T)^-1 B: with W = (A A^T)^-1 A gX and
 * Y = (A A^T)^-1 B, gB = W, gA = Y gX^T - W X^T - Y W^T A. The squared residuals r_j = |B_j - A X_j|^2
 * add 2 R diag(g) to gB and its negative times X^T to gA (A^T R = 0 removes the dX term); gelsd's
 * singular values add svd's U diag(gS) Vh. */
static oar_status lstsq_grad(oar_grad_ctx *g) {
    oar_tensor *a = g->in[0], *b = g->in[1], *x = g->out[0], *gx = g->gout[0], *gr = g->gout[1];
    int64_t m = DIM(a, -2), n = DIM(a, -1);
    oar_tensor *ga = NULL, *gb = NULL;
    if (gx && m >= n) {
        oar_tensor *z = oar_linalg_solve(oar_matmul(la_mT(a), a), gx), *az = oar_matmul(a, z);
        gb = az;
        ga = oar_sub(oar_matmul(oar_sub(b, oar_matmul(a, x)), la_mT(z)), oar_matmul(az, la_mT(x)));
    } else if (gx) {
        oar_tensor *h = oar_matmul(a, la_mT(a));
        oar_tensor *w = oar_linalg_solve(h, oar_matmul(a, gx)), *y = oar_linalg_solve(h, b);
        gb = w;
        ga = oar_sub(oar_sub(oar_matmul(y, la_mT(gx)), oar_matmul(w, la_mT(x))),
                     oar_matmul(oar_matmul(y, la_mT(w)), a));
    }
    if (gr) {
        oar_tensor *rg = oar_mul_scalar(oar_mul(oar_sub(b, oar_matmul(a, x)), oar_unsqueeze(gr, -2)), 2.0);
        gb = gb ? oar_add(gb, rg) : rg;
        oar_tensor *d = oar_neg(oar_matmul(rg, la_mT(x)));
        ga = ga ? oar_add(ga, d) : d;
    }
    int drv = lstsq_driver(g->attrs[0].s);
    if (g->gout[3] && (drv == GELSD || drv == GELSS)) { /* singular values: as svd's, U diag(gS) Vh */
        oar_tensor *usv[3];
        oar_attr full = oar_attr_int(0);
        oar_status st = la_call(OAR_OP_linalg_svd, &a, 1, &full, usv, 3);
        if (st != OAR_OK) return st;
        oar_tensor *d = oar_matmul(oar_mul(usv[0], oar_unsqueeze(g->gout[3], -2)), usv[2]);
        ga = ga ? oar_add(ga, d) : d;
    }
    if ((gx || gr || g->gout[3]) && !ga) return oar_last_status();
    if ((gx || gr) && !gb) return oar_last_status();
    g->gin[0] = ga;
    g->gin[1] = gb;
    return OAR_OK;
}

const oar_op_def oar_opdef_linalg_lstsq = {
    .name = "linalg_lstsq", .n_inputs = 2, .n_outputs = 4, .n_attrs = 2,
    .attrs = {{"driver", OAR_ATTR_STR, "gelsy"}, {"rcond", OAR_ATTR_FLOAT, "-1"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = lstsq_infer, .reference = lstsq_ref, .grad = lstsq_grad,
};

oar_tensor *oar_linalg_lstsq(oar_tensor *a, oar_tensor *b, const char *driver) {
    oar_tensor *in[2] = {a, b}, *o[4];
    oar_attr at[2] = {oar_attr_str(driver ? driver : "gelsy"), oar_attr_float(-1)};
    return la_call(OAR_OP_linalg_lstsq, in, 2, at, o, 4) == OAR_OK ? o[0] : NULL;
}
#endif
