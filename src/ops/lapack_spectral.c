/* Decompositions on LAPACK: eigh (syevd), svd (gesdd), qr (geqrf + orgqr), batched over leading dims.
 * Eigen- and singular vectors, and Q's columns, are unique only up to sign: these return LAPACK's
 * choice, which moves smoothly with the input, and the gradient rules (torch's, derived from the
 * decompositions' differentials) hold for losses that do not depend on that choice. */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>
#include <string.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])
#define LA_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

/* ---- eigh: A = V diag(L) V^T for symmetric A, reading its lower (upper=0) or upper triangle */
static oar_status eigh_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_eigh", in[0], "A", true);
    if (st != OAR_OK) return st;
    oar_meta_from(&out[0], in[0]);
    out[0].ndim -= 1;
    oar_meta_from(&out[1], in[0]);
    *n_out = 2;
    return OAR_OK;
}

static oar_status eigh_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int n = (int)DIM(in[0], -1), info = 0, lwork = -1, liwork = -1, iq = 0;
    if (!n) return OAR_OK;
    double wq = 0, *a = la_alloc("linalg_eigh", (int64_t)n * n), *w = la_alloc("linalg_eigh", n), *work = NULL;
    int *iwork = NULL;
    const char *uplo = attrs[0].i ? "U" : "L";
    oar_status st = a && w ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dsyevd_("V", uplo, &n, a, &n, w, &wq, &lwork, &iq, &liwork, &info);
        lwork = (int)wq;
        liwork = iq;
        work = la_alloc("linalg_eigh", lwork);
        iwork = malloc((size_t)liwork * sizeof *iwork);
        if (!work || !iwork) st = oar_error(OAR_ERR_OOM, "linalg_eigh: out of memory for LAPACK's workspace");
    }
    const oar_dtype_traits *t = &oar_dtypes[out[0]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        dsyevd_("V", uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, &info);
        if (info > 0) {
            st = oar_error(OAR_ERR_NUMERIC, "linalg_eigh: the algorithm failed to converge on matrix %lld (%d "
                                            "off-diagonal elements did not converge); check it for inf or nan",
                           (long long)b, info);
            break;
        }
        for (int i = 0; i < n; i++) t->store(oar_tensor_ptr(out[0]) + (b * n + i) * (int64_t)t->size, w[i]);
        la_store(out[1], b, a, n);
    }
    free(a);
    free(w);
    free(work);
    free(iwork);
    return st;
}

/* gA = V (diag(gL) + F o (V^T gV)) V^T, F_ij = 1 / (L_j - L_i) off the diagonal, then symmetrized:
 * A is symmetric, so only the symmetric part of a direction is meaningful (torch's rule) */
static oar_status eigh_grad(oar_grad_ctx *g) {
    oar_tensor *l = g->out[0], *v = g->out[1], *inner = NULL;
    if (g->gout[1]) {
        int64_t n = DIM(l, -1);
        oar_tensor *e = oar_sub(oar_unsqueeze(l, -2), oar_unsqueeze(l, -1));
        oar_tensor *eye = la_eye_like(n, l->dtype);
        e = oar_add(e, eye); /* the diagonal, zero in e, is masked below */
        oar_tensor *f = oar_mul(oar_div(oar_matmul(la_mT(v), g->gout[1]), e), oar_rsub_scalar(eye, 1.0));
        inner = f;
    }
    if (g->gout[0]) inner = inner ? oar_add(inner, la_diag_embed(g->gout[0])) : la_diag_embed(g->gout[0]);
    if (!inner) return OAR_OK;
    oar_tensor *ga = oar_matmul(oar_matmul(v, inner), la_mT(v));
    g->gin[0] = oar_mul_scalar(oar_add(ga, la_mT(ga)), 0.5);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_eigh = {
    .name = "linalg_eigh", .n_inputs = 1, .n_outputs = 2, .n_attrs = 1, .attrs = {{"upper", OAR_ATTR_INT, "false"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES, .infer = eigh_infer, .reference = eigh_ref,
    .grad = eigh_grad,
};

/* ---- svd: A = U diag(S) Vh, S descending; U [m, m] and Vh [n, n] with full_matrices, else
 * [m, k] and [k, n], k = min(m, n) */
static oar_status svd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = la_check_matrix("linalg_svd", in[0], "A", false);
    if (st != OAR_OK) return st;
    int nd = in[0]->ndim;
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1), k = m < n ? m : n;
    for (int i = 0; i < 3; i++) oar_meta_from(&out[i], in[0]);
    out[0].shape[nd - 1] = a[0].i ? m : k;
    out[1].ndim -= 1;
    out[1].shape[nd - 2] = k;
    out[2].shape[nd - 2] = a[0].i ? n : k;
    *n_out = 3;
    return OAR_OK;
}

static oar_status svd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = m < n ? m : n, info = 0, lwork = -1;
    int ucols = (int)DIM(out[0], -1), vrows = (int)DIM(out[2], -2);
    int64_t nb = la_batch(in[0]);
    if (!k) { /* no singular values: the full factors are identities, as torch */
        for (int64_t b = 0; b < nb; b++) {
            double *e = la_alloc("linalg_svd", (int64_t)(m > n ? m : n) * (m > n ? m : n));
            if (!e) return oar_last_status();
            int d = m > n ? m : n;
            for (int64_t i = 0; i < (int64_t)d * d; i++) e[i] = i % (d + 1) == 0;
            la_store(out[0], b, e, d);
            la_store(out[2], b, e, d);
            free(e);
        }
        return OAR_OK;
    }
    const char *jobz = attrs[0].i ? "A" : "S";
    double wq = 0, *a = la_alloc("linalg_svd", (int64_t)m * n), *s = la_alloc("linalg_svd", k);
    double *u = la_alloc("linalg_svd", (int64_t)m * ucols), *vt = la_alloc("linalg_svd", (int64_t)vrows * n), *work = NULL;
    int *iwork = malloc((size_t)8 * k * sizeof *iwork);
    oar_status st = a && s && u && vt && iwork ? OAR_OK : oar_error(OAR_ERR_OOM, "linalg_svd: out of memory");
    if (st == OAR_OK) {
        dgesdd_(jobz, &m, &n, a, &m, s, u, &m, vt, &vrows, &wq, &lwork, iwork, &info);
        lwork = (int)wq;
        work = la_alloc("linalg_svd", lwork);
        if (!work) st = oar_last_status();
    }
    const oar_dtype_traits *t = &oar_dtypes[out[1]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < nb; b++) {
        la_load(in[0], b, a, m);
        dgesdd_(jobz, &m, &n, a, &m, s, u, &m, vt, &vrows, work, &lwork, iwork, &info);
        if (info > 0) {
            st = oar_error(OAR_ERR_NUMERIC, "linalg_svd: the algorithm failed to converge on matrix %lld; check it "
                                            "for inf or nan", (long long)b);
            break;
        }
        la_store(out[0], b, u, m);
        for (int i = 0; i < k; i++) t->store(oar_tensor_ptr(out[1]) + (b * k + i) * (int64_t)t->size, s[i]);
        la_store(out[2], b, vt, vrows);
    }
    free(a);
    free(s);
    free(u);
    free(vt);
    free(work);
    free(iwork);
    return st;
}

/* torch's rule, real case, on the first k columns of U and rows of Vh (the rest of full factors are
 * not determined by A): with E_ij = S_j^2 - S_i^2 and skew(X) = X - X^T,
 * gA = U [(skew(U^T gU) S + S skew(Vh gVh^T)) / E + diag(gS)] Vh
 *    + (I - U U^T) gU S^-1 Vh (m > k) + U S^-1 gVh (I - Vh^T Vh) (n > k) */
static oar_status svd_grad(oar_grad_ctx *g) {
    const oar_tensor *a = g->in[0];
    int64_t m = DIM(a, -2), n = DIM(a, -1), k = m < n ? m : n;
    oar_tensor *u = oar_slice(g->out[0], -1, 0, k, 1), *s = g->out[1], *vh = oar_slice(g->out[2], -2, 0, k, 1);
    oar_tensor *gu = g->gout[0] ? oar_slice(g->gout[0], -1, 0, k, 1) : NULL;
    oar_tensor *gvh = g->gout[2] ? oar_slice(g->gout[2], -2, 0, k, 1) : NULL, *inner = NULL;
    if (gu || gvh) {
        oar_tensor *s2 = oar_mul(s, s), *eye = la_eye_like(k, s->dtype);
        oar_tensor *e = oar_add(oar_sub(oar_unsqueeze(s2, -2), oar_unsqueeze(s2, -1)), eye);
        oar_tensor *num = NULL;
        if (gu) {
            oar_tensor *x = oar_matmul(la_mT(u), gu);
            num = oar_mul(oar_sub(x, la_mT(x)), oar_unsqueeze(s, -2));
        }
        if (gvh) {
            oar_tensor *x = oar_matmul(vh, la_mT(gvh));
            x = oar_mul(oar_unsqueeze(s, -1), oar_sub(x, la_mT(x)));
            num = num ? oar_add(num, x) : x;
        }
        inner = oar_div(num, e);
    }
    if (g->gout[1]) inner = inner ? oar_add(inner, la_diag_embed(g->gout[1])) : la_diag_embed(g->gout[1]);
    oar_tensor *ga = inner ? oar_matmul(oar_matmul(u, inner), vh) : NULL;
    if (gu && m > k) {
        oar_tensor *proj = oar_sub(gu, oar_matmul(u, oar_matmul(la_mT(u), gu)));
        oar_tensor *x = oar_matmul(oar_div(proj, oar_unsqueeze(s, -2)), vh);
        ga = ga ? oar_add(ga, x) : x;
    }
    if (gvh && n > k) {
        oar_tensor *proj = oar_sub(gvh, oar_matmul(oar_matmul(gvh, la_mT(vh)), vh));
        oar_tensor *x = oar_matmul(oar_div(u, oar_unsqueeze(s, -2)), proj);
        ga = ga ? oar_add(ga, x) : x;
    }
    g->gin[0] = ga;
    return ga || (!inner && !gu && !gvh) ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_svd = {
    .name = "linalg_svd", .n_inputs = 1, .n_outputs = 3, .n_attrs = 1,
    .attrs = {{"full_matrices", OAR_ATTR_INT, "true"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES, .infer = svd_infer, .reference = svd_ref, .grad = svd_grad,
};

/* ---- qr: A = Q R, mode "reduced" (Q [m, k], R [k, n]), "complete" (Q [m, m], R [m, n]) or "r"
 * (R [k, n] only; Q is empty, as torch) */
typedef enum { QR_REDUCED, QR_COMPLETE, QR_R } qr_mode;
static int qr_mode_of(const oar_attr *a) {
    return !strcmp(a->s, "reduced") ? QR_REDUCED : !strcmp(a->s, "complete") ? QR_COMPLETE : !strcmp(a->s, "r") ? QR_R : -1;
}

static oar_status qr_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = la_check_matrix("linalg_qr", in[0], "A", false);
    if (st != OAR_OK) return st;
    int mode = qr_mode_of(&a[0]), nd = in[0]->ndim;
    if (mode < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "linalg_qr: expected mode 'reduced', 'complete' or 'r', got '%s'", a[0].s);
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1), k = m < n ? m : n;
    oar_meta_from(&out[0], in[0]);
    oar_meta_from(&out[1], in[0]);
    if (mode == QR_R) {
        out[0].ndim = 1;
        out[0].shape[0] = 0;
    } else {
        out[0].shape[nd - 1] = mode == QR_COMPLETE ? m : k;
    }
    out[1].shape[nd - 2] = mode == QR_COMPLETE ? m : k;
    *n_out = 2;
    return OAR_OK;
}

static oar_status qr_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int mode = qr_mode_of(&attrs[0]), m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = m < n ? m : n, info = 0;
    int qc = mode == QR_COMPLETE ? m : k, rr = (int)DIM(out[1], -2), ld = m ? m : 1;
    int lwork = -1, nmax = n > qc ? n : qc;
    int64_t nb = la_batch(in[0]);
    double wq = 0, wq2 = 0, *a = la_alloc("linalg_qr", (int64_t)ld * nmax), *tau = la_alloc("linalg_qr", k);
    double *r = la_alloc("linalg_qr", (int64_t)(rr ? rr : 1) * n), *work = NULL;
    oar_status st = a && tau && r ? OAR_OK : oar_last_status();
    if (st == OAR_OK && m && n) {
        dgeqrf_(&m, &n, a, &ld, tau, &wq, &lwork, &info);
        if (mode != QR_R && qc) dorgqr_(&m, &qc, &k, a, &ld, tau, &wq2, &lwork, &info);
        lwork = (int)(wq > wq2 ? wq : wq2);
        work = la_alloc("linalg_qr", lwork);
        if (!work) st = oar_last_status();
    }
    for (int64_t b = 0; st == OAR_OK && b < nb; b++) {
        la_load(in[0], b, a, ld);
        if (m && n) dgeqrf_(&m, &n, a, &ld, tau, work, &lwork, &info);
        for (int i = 0; i < rr; i++)
            for (int j = 0; j < n; j++) r[i + (int64_t)j * rr] = i <= j ? a[i + (int64_t)j * ld] : 0;
        if (rr) la_store(out[1], b, r, rr);
        if (mode == QR_R || !m) continue;
        if (k) dorgqr_(&m, &qc, &k, a, &ld, tau, work, &lwork, &info);
        else /* no reflectors (n == 0): Q is the identity */
            for (int i = 0; i < m; i++)
                for (int j = 0; j < qc; j++) a[i + (int64_t)j * ld] = i == j;
        la_store(out[0], b, a, ld);
    }
    free(a);
    free(tau);
    free(r);
    free(work);
    return st;
}

/* torch's rule for m >= n: with M = R gR^T - gQ^T Q and copyltu(M) = tril(M) + tril(M, -1)^T,
 * gA = (gQ + Q copyltu(M)) R^-T. For m < n, A = [X | Y] with X = Q U square and Y = Q V: the rule
 * above on X with gQ + Y gV^T, and gY = Q gV. */
static oar_tensor *qr_grad_tall(oar_tensor *q, oar_tensor *r, oar_tensor *gq, oar_tensor *gr) {
    oar_tensor *mm = NULL;
    if (gr) mm = oar_matmul(r, la_mT(gr));
    if (gq) mm = mm ? oar_sub(mm, oar_matmul(la_mT(gq), q)) : oar_neg(oar_matmul(la_mT(gq), q));
    oar_tensor *cl = oar_add(oar_tril(mm, 0), la_mT(oar_tril(mm, -1)));
    oar_tensor *b = oar_matmul(q, cl);
    if (gq) b = oar_add(b, gq);
    /* b R^-T: R X^T = b^T */
    return la_mT(oar_linalg_solve_triangular(r, la_mT(b), true, false));
}

static oar_status qr_grad(oar_grad_ctx *g) {
    const oar_tensor *a = g->in[0];
    int mode = qr_mode_of(&g->attrs[0]);
    int64_t m = DIM(a, -2), n = DIM(a, -1);
    if (!g->gout[0] && !g->gout[1]) return OAR_OK;
    if (mode == QR_R)
        return oar_error(OAR_ERR_UNSUPPORTED, "linalg_qr: the derivative depends on Q, which mode='r' does not "
                                              "compute; use mode='reduced' to differentiate");
    if (mode == QR_COMPLETE && m > n)
        return oar_error(OAR_ERR_UNSUPPORTED, "linalg_qr: the decomposition is not differentiable when "
                                              "mode='complete' and m > n (got %lld > %lld); use mode='reduced'",
                         (long long)m, (long long)n);
    oar_tensor *q = g->out[0], *r = g->out[1], *gq = g->gout[0], *gr = g->gout[1];
    if (m >= n) {
        g->gin[0] = qr_grad_tall(q, r, gq, gr);
    } else {
        oar_tensor *u = oar_slice(r, -1, 0, m, 1), *y = oar_slice((oar_tensor *)a, -1, m, n, 1);
        oar_tensor *gu = gr ? oar_slice(gr, -1, 0, m, 1) : NULL, *gv = gr ? oar_slice(gr, -1, m, n, 1) : NULL;
        oar_tensor *gq2 = gv ? (gq ? oar_add(gq, oar_matmul(y, la_mT(gv))) : oar_matmul(y, la_mT(gv))) : gq;
        oar_tensor *gx = qr_grad_tall(q, u, gq2, gu);
        oar_tensor *gy = gv ? oar_matmul(q, gv) : oar_zeros_like(y);
        oar_tensor *parts[2] = {gx, gy};
        g->gin[0] = gx && gy ? oar_concat(parts, 2, -1) : NULL;
    }
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_qr = {
    .name = "linalg_qr", .n_inputs = 1, .n_outputs = 2, .n_attrs = 1, .attrs = {{"mode", OAR_ATTR_STR, "reduced"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES, .infer = qr_infer, .reference = qr_ref, .grad = qr_grad,
};

oar_status oar_linalg_eigh(oar_tensor *a, bool upper, oar_tensor **eigenvalues, oar_tensor **eigenvectors) {
    oar_tensor *o[2];
    oar_attr at = oar_attr_int(upper);
    oar_status st = la_call(OAR_OP_linalg_eigh, &a, 1, &at, o, 2);
    if (st != OAR_OK) return st;
    *eigenvalues = o[0];
    *eigenvectors = o[1];
    return OAR_OK;
}

oar_status oar_linalg_svd(oar_tensor *a, bool full_matrices, oar_tensor **u, oar_tensor **s, oar_tensor **vh) {
    oar_tensor *o[3];
    oar_attr at = oar_attr_int(full_matrices);
    oar_status st = la_call(OAR_OP_linalg_svd, &a, 1, &at, o, 3);
    if (st != OAR_OK) return st;
    *u = o[0];
    *s = o[1];
    *vh = o[2];
    return OAR_OK;
}

oar_status oar_linalg_qr(oar_tensor *a, const char *mode, oar_tensor **q, oar_tensor **r) {
    oar_tensor *o[2];
    oar_attr at = oar_attr_str(mode ? mode : "reduced");
    oar_status st = la_call(OAR_OP_linalg_qr, &a, 1, &at, o, 2);
    if (st != OAR_OK) return st;
    *q = o[0];
    *r = o[1];
    return OAR_OK;
}
#endif
