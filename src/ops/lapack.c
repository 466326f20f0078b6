/* Linear algebra on LAPACK (the one OpenBLAS ships): det, slogdet, inv and cholesky of square
 * matrices batched over leading dims, in f32 and f64 (factorized in double). LAPACK reads
 * column-major data: the row-major buffer is the transpose, so inv and det need no copy back
 * (inv(A^T) = inv(A)^T, det(A^T) = det(A)) and cholesky asks for the upper factor of A^T = A,
 * which is the lower factor read row-major. The gradients are written in these ops and matmul,
 * so they differentiate again. Built only with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dgetri_(const int *n, double *a, const int *lda, const int *ipiv, double *work, const int *lwork, int *info);

typedef enum { LA_DET, LA_SLOGDET, LA_INV, LA_CHOLESKY } la_kind;
static const char *const la_names[] = {"linalg_det", "linalg_slogdet", "linalg_inv", "linalg_cholesky"};

static oar_status square_infer(la_kind k, oar_tensor *const *in, oar_meta *out, int *n_out) {
    const oar_tensor *a = in[0];
    const char *name = la_names[k];
    oar_status st = oar_check_float(name, a, "the input");
    if (st != OAR_OK) return st;
    if (a->dtype != OAR_F32 && a->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "%s: expected f32 or f64, got %s; cast with oar_cast", name,
                         oar_dtype_name(a->dtype));
    if (a->ndim < 2 || a->shape[a->ndim - 1] != a->shape[a->ndim - 2]) {
        char s[128];
        oar_format_shape(a->shape, a->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected square matrices in the last two dims (..., n, n), got %s",
                         name, s);
    }
    if (a->shape[a->ndim - 1] > 46340)
        return oar_error(OAR_ERR_SHAPE, "%s: expected n <= 46340 (LAPACK's int indexing), got %lld", name,
                         (long long)a->shape[a->ndim - 1]);
    oar_meta_from(out, a);
    if (k == LA_DET || k == LA_SLOGDET) out->ndim -= 2;
    *n_out = k == LA_SLOGDET ? 2 : 1;
    if (k == LA_SLOGDET) out[1] = out[0];
    return OAR_OK;
}

/* One matrix (n x n doubles, row-major) through LAPACK; the outputs of this matrix written. */
static oar_status la_one(la_kind k, double *m, int n, int *ipiv, int64_t b, oar_tensor *const *out) {
    const oar_dtype_traits *t = &oar_dtypes[out[0]->dtype];
    size_t es = t->size;
    int info = 0;
    if (k == LA_CHOLESKY) {
        dpotrf_("U", &n, m, &n, &info);
        if (info > 0)
            return oar_error(OAR_ERR_NUMERIC, "linalg_cholesky: the input is not positive-definite (the leading "
                                              "minor of order %d of matrix %lld is not); check it is symmetric "
                                              "with positive eigenvalues", info, (long long)b);
        char *y = oar_tensor_ptr(out[0]) + b * (int64_t)n * n * (int64_t)es;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) t->store(y + ((int64_t)i * n + j) * (int64_t)es, j <= i ? m[(int64_t)i * n + j] : 0.0);
        return OAR_OK;
    }
    if (n) dgetrf_(&n, &n, m, &n, ipiv, &info);
    if (k == LA_INV) {
        if (info > 0)
            return oar_error(OAR_ERR_NUMERIC, "linalg_inv: matrix %lld is singular (U[%d, %d] of its LU "
                                              "factorization is zero), so it has no inverse", (long long)b,
                             info - 1, info - 1);
        int lwork = n ? 64 * n : 1;
        double *work = malloc((size_t)lwork * sizeof *work);
        if (!work) return oar_error(OAR_ERR_OOM, "linalg_inv: out of memory for LAPACK's workspace");
        if (n) dgetri_(&n, m, &n, ipiv, work, &lwork, &info);
        free(work);
        char *y = oar_tensor_ptr(out[0]) + b * (int64_t)n * n * (int64_t)es;
        for (int64_t i = 0; i < (int64_t)n * n; i++) t->store(y + i * (int64_t)es, m[i]);
        return OAR_OK;
    }
    /* det = prod diag(U) times the permutation's sign; slogdet sums logs so it cannot overflow */
    double perm = 1.0, sign = 1.0, logabs = 0.0, det = 1.0;
    for (int i = 0; i < n; i++) {
        double u = m[(int64_t)i * n + i];
        if (ipiv[i] != i + 1) perm = -perm;
        det *= u;
        if (u < 0) sign = -sign;
        logabs += log(fabs(u));
    }
    if (k == LA_DET) {
        t->store(oar_tensor_ptr(out[0]) + b * (int64_t)es, det * perm);
    } else {
        bool zero = isinf(logabs) && logabs < 0;
        t->store(oar_tensor_ptr(out[0]) + b * (int64_t)es, zero ? 0.0 : sign * perm);
        t->store(oar_tensor_ptr(out[1]) + b * (int64_t)es, logabs);
    }
    return OAR_OK;
}

static oar_status la_ref(la_kind k, oar_tensor *const *in, oar_tensor *const *out) {
    const oar_tensor *a = in[0];
    int n = (int)a->shape[a->ndim - 1];
    int64_t mats = n ? a->numel / ((int64_t)n * n) : 1;
    if (!n) mats = 0;
    const oar_dtype_traits *t = &oar_dtypes[a->dtype];
    size_t es = t->size;
    double *m = malloc((size_t)(n ? (int64_t)n * n : 1) * sizeof *m);
    int *ipiv = malloc((size_t)(n ? n : 1) * sizeof *ipiv);
    if (!m || !ipiv) {
        free(m);
        free(ipiv);
        return oar_error(OAR_ERR_OOM, "%s: out of memory for a %d x %d matrix", la_names[k], n, n);
    }
    if (!n && (k == LA_DET || k == LA_SLOGDET)) { /* the empty matrix: det 1, as torch */
        const oar_dtype_traits *to = &oar_dtypes[out[0]->dtype];
        for (int64_t b = 0; b < out[0]->numel; b++) {
            to->store(oar_tensor_ptr(out[0]) + b * (int64_t)es, 1.0);
            if (k == LA_SLOGDET) to->store(oar_tensor_ptr(out[1]) + b * (int64_t)es, 0.0);
        }
    }
    oar_status st = OAR_OK;
    const char *x = oar_tensor_ptr(a);
    for (int64_t b = 0; b < mats && st == OAR_OK; b++) {
        for (int64_t i = 0; i < (int64_t)n * n; i++) m[i] = t->load(x + (b * (int64_t)n * n + i) * (int64_t)es);
        st = la_one(k, m, n, ipiv, b, out);
    }
    free(m);
    free(ipiv);
    return st;
}

/* ---- gradients */
static oar_tensor *mT(oar_tensor *x) { return oar_transpose(x, -1, -2); }
static oar_tensor *as_matrix(oar_tensor *v) { return oar_unsqueeze(oar_unsqueeze(v, -1), -1); }

/* d det / dA = det inv(A)^T (the matrices must be invertible) */
static oar_status det_grad(oar_grad_ctx *g) {
    oar_tensor *inv_t = mT(oar_linalg_inv(g->in[0]));
    g->gin[0] = oar_mul(as_matrix(oar_mul(g->gout[0], g->out[0])), inv_t);
    return g->gin[0] ? OAR_OK : oar_last_status();
}
/* d log|det| / dA = inv(A)^T; the sign has no gradient */
static oar_status slogdet_grad(oar_grad_ctx *g) {
    if (!g->gout[1]) return OAR_OK;
    g->gin[0] = oar_mul(as_matrix(g->gout[1]), mT(oar_linalg_inv(g->in[0])));
    return g->gin[0] ? OAR_OK : oar_last_status();
}
/* d inv(A) = -inv(A) dA inv(A): gA = -Y^T gY Y^T */
static oar_status inv_grad(oar_grad_ctx *g) {
    oar_tensor *yt = mT(g->out[0]);
    g->gin[0] = oar_neg(oar_matmul(oar_matmul(yt, g->gout[0]), yt));
    return g->gin[0] ? OAR_OK : oar_last_status();
}
/* torch's rule: S = L^-T phi(L^T gL) L^-1, phi keeping the lower triangle with the diagonal
 * halved; gA = (S + S^T) / 2 */
oar_tensor *la_cholesky_grad(oar_tensor *l, oar_tensor *gl) {
    oar_tensor *x = oar_matmul(mT(l), gl);
    oar_tensor *phi = oar_mul_scalar(oar_add(oar_tril(x, 0), oar_tril(x, -1)), 0.5);
    oar_tensor *linv = oar_linalg_inv(l);
    oar_tensor *s = oar_matmul(oar_matmul(mT(linv), phi), linv);
    return oar_mul_scalar(oar_add(s, mT(s)), 0.5);
}
static oar_status cholesky_grad(oar_grad_ctx *g) {
    g->gin[0] = la_cholesky_grad(g->out[0], g->gout[0]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

#define LA_OP(NAME, KIND, NOUT, GRAD)                                                                    \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,    \
                                   int *n_out) {                                                         \
        (void)n_in; (void)a;                                                                             \
        return square_infer(KIND, in, out, n_out);                                                       \
    }                                                                                                    \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                   \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {                 \
        (void)ctx; (void)n_in; (void)n_out; (void)a;                                                     \
        return la_ref(KIND, in, out);                                                                    \
    }                                                                                                    \
    const oar_op_def oar_opdef_##NAME = {                                                                \
        .name = #NAME, .n_inputs = 1, .n_outputs = NOUT, .flags = OAR_OPF_AMP_DENY,                      \
        .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),                                    \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD,                                    \
    };
LA_OP(linalg_det, LA_DET, 1, det_grad)
LA_OP(linalg_slogdet, LA_SLOGDET, 2, slogdet_grad)
LA_OP(linalg_inv, LA_INV, 1, inv_grad)
LA_OP(linalg_cholesky, LA_CHOLESKY, 1, cholesky_grad)

oar_tensor *oar_linalg_det(oar_tensor *a) { return oar_op_call1(OAR_OP_linalg_det, &a, 1, NULL); }
oar_tensor *oar_linalg_inv(oar_tensor *a) { return oar_op_call1(OAR_OP_linalg_inv, &a, 1, NULL); }
oar_tensor *oar_linalg_cholesky(oar_tensor *a) { return oar_op_call1(OAR_OP_linalg_cholesky, &a, 1, NULL); }
#else
#include "ops/op.h"

static oar_tensor *no_lapack(const char *name) {
    oar_error(OAR_ERR_UNSUPPORTED, "%s: this build has no LAPACK; rebuild with OpenBLAS (libopenblas-dev, "
                                   "-DOAR_WITH_OPENBLAS=ON)", name);
    return NULL;
}
oar_tensor *oar_linalg_det(oar_tensor *a) { (void)a; return no_lapack("linalg_det"); }
oar_tensor *oar_linalg_inv(oar_tensor *a) { (void)a; return no_lapack("linalg_inv"); }
oar_tensor *oar_linalg_cholesky(oar_tensor *a) { (void)a; return no_lapack("linalg_cholesky"); }
oar_tensor *oar_linalg_solve(oar_tensor *a, oar_tensor *b) { (void)a; (void)b; return no_lapack("linalg_solve"); }
oar_tensor *oar_linalg_solve_triangular(oar_tensor *a, oar_tensor *b, bool upper, bool unitriangular) {
    (void)a; (void)b; (void)upper; (void)unitriangular;
    return no_lapack("linalg_solve_triangular");
}
oar_status oar_linalg_lu_factor(oar_tensor *a, oar_tensor **lu, oar_tensor **pivots) {
    (void)a; (void)lu; (void)pivots;
    no_lapack("linalg_lu_factor");
    return oar_last_status();
}
oar_tensor *oar_linalg_lu_solve(oar_tensor *lu, oar_tensor *pivots, oar_tensor *b, bool adjoint) {
    (void)lu; (void)pivots; (void)b; (void)adjoint;
    return no_lapack("linalg_lu_solve");
}
oar_status oar_linalg_eigh(oar_tensor *a, bool upper, oar_tensor **eigenvalues, oar_tensor **eigenvectors) {
    (void)a; (void)upper; (void)eigenvalues; (void)eigenvectors;
    no_lapack("linalg_eigh");
    return oar_last_status();
}
oar_status oar_linalg_svd(oar_tensor *a, bool full_matrices, oar_tensor **u, oar_tensor **s, oar_tensor **vh) {
    (void)a; (void)full_matrices; (void)u; (void)s; (void)vh;
    no_lapack("linalg_svd");
    return oar_last_status();
}
oar_status oar_linalg_qr(oar_tensor *a, const char *mode, oar_tensor **q, oar_tensor **r) {
    (void)a; (void)mode; (void)q; (void)r;
    no_lapack("linalg_qr");
    return oar_last_status();
}
oar_tensor *oar_linalg_lstsq(oar_tensor *a, oar_tensor *b, const char *driver) {
    (void)a; (void)b; (void)driver;
    return no_lapack("linalg_lstsq");
}
oar_tensor *oar_linalg_matrix_exp(oar_tensor *a) { (void)a; return no_lapack("linalg_matrix_exp"); }
oar_status oar_linalg_cholesky_ex(oar_tensor *a, oar_tensor **l, oar_tensor **info) {
    (void)a; (void)l; (void)info;
    no_lapack("linalg_cholesky_ex");
    return oar_last_status();
}
oar_status oar_linalg_ldl_factor(oar_tensor *a, oar_tensor **ld, oar_tensor **pivots, oar_tensor **info) {
    (void)a; (void)ld; (void)pivots; (void)info;
    no_lapack("linalg_ldl_factor");
    return oar_last_status();
}
oar_tensor *oar_linalg_ldl_solve(oar_tensor *ld, oar_tensor *pivots, oar_tensor *b) {
    (void)ld; (void)pivots; (void)b;
    return no_lapack("linalg_ldl_solve");
}
oar_status oar_linalg_geqrf(oar_tensor *a, oar_tensor **qr, oar_tensor **tau) {
    (void)a; (void)qr; (void)tau;
    no_lapack("linalg_geqrf");
    return oar_last_status();
}
oar_tensor *oar_linalg_householder_product(oar_tensor *a, oar_tensor *tau) {
    (void)a; (void)tau;
    return no_lapack("linalg_householder_product");
}
oar_tensor *oar_linalg_ormqr(oar_tensor *a, oar_tensor *tau, oar_tensor *c, bool left, bool transpose) {
    (void)a; (void)tau; (void)c; (void)left; (void)transpose;
    return no_lapack("linalg_ormqr");
}
oar_status oar_linalg_eig(oar_tensor *a, oar_tensor **l_re, oar_tensor **l_im, oar_tensor **v_re,
                          oar_tensor **v_im) {
    (void)a; (void)l_re; (void)l_im; (void)v_re; (void)v_im;
    no_lapack("linalg_eig");
    return oar_last_status();
}
#endif
