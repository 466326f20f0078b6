/* Householder reflectors on LAPACK: geqrf (A = Q R with Q kept as reflectors: v_i below the
 * diagonal of column i with an implicit 1 on it, and tau_i), householder_product (orgqr: the first
 * n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T) and ormqr (Q C, Q^T C, C Q or C Q^T without
 * forming Q). Batched over leading dims that the operands share. Built only with OpenBLAS. */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])
#define LA_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

/* ---- geqrf: a (R on and above the diagonal, the reflectors below) and tau [..., min(m, n)] */
static oar_status geqrf_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_geqrf", in[0], "A", false);
    if (st != OAR_OK) return st;
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1);
    oar_meta_from(&out[0], in[0]);
    out[1] = out[0];
    out[1].ndim -= 1;
    out[1].shape[out[1].ndim - 1] = m < n ? m : n;
    *n_out = 2;
    return OAR_OK;
}

static oar_status geqrf_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = m < n ? m : n, info = 0, lwork = -1;
    if (!k) return OAR_OK;
    double wq = 0, *a = la_alloc("linalg_geqrf", (int64_t)m * n), *tau = la_alloc("linalg_geqrf", k), *work = NULL;
    oar_status st = a && tau ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dgeqrf_(&m, &n, a, &m, tau, &wq, &lwork, &info);
        lwork = (int)wq > 1 ? (int)wq : 1;
        work = la_alloc("linalg_geqrf", lwork);
        if (!work) st = oar_last_status();
    }
    const oar_dtype_traits *t = &oar_dtypes[out[1]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, m);
        dgeqrf_(&m, &n, a, &m, tau, work, &lwork, &info);
        la_store(out[0], b, a, m);
        for (int i = 0; i < k; i++) t->store(oar_tensor_ptr(out[1]) + (b * k + i) * (int64_t)t->size, tau[i]);
    }
    free(a);
    free(tau);
    free(work);
    return st;
}

static oar_status geqrf_grad(oar_grad_ctx *g) {
    (void)g;
    return la_no_derivative("geqrf");
}

const oar_op_def oar_opdef_linalg_geqrf = {
    .name = "linalg_geqrf", .n_inputs = 1, .n_outputs = 2, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES,
    .infer = geqrf_infer, .reference = geqrf_ref, .grad = geqrf_grad,
};

/* A [..., r, c] holding k = tau.shape[-1] reflectors in its first columns (k <= c), tau [..., k]
 * with A's batch dims and dtype; rows: the reflectors' length must reach k (k <= r). */
static oar_status check_reflectors(const char *op, oar_tensor *const *in) {
    oar_status st = la_check_matrix(op, in[0], "input", false);
    if (st != OAR_OK) return st;
    const oar_tensor *a = in[0], *tau = in[1];
    char sa[128], st_[128];
    oar_format_shape(a->shape, a->ndim, sa, sizeof sa);
    oar_format_shape(tau->shape, tau->ndim, st_, sizeof st_);
    if (tau->dtype != a->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected tau to have the input's dtype %s, got %s", op,
                         oar_dtype_name(a->dtype), oar_dtype_name(tau->dtype));
    bool ok = tau->ndim == a->ndim - 1;
    for (int i = 0; ok && i < tau->ndim - 1; i++) ok = tau->shape[i] == a->shape[i];
    if (!ok)
        return oar_error(OAR_ERR_SHAPE, "%s: expected tau of shape (..., k) with the input's batch dims (input %s), "
                                        "got %s", op, sa, st_);
    int64_t k = tau->shape[tau->ndim - 1];
    if (k > DIM(a, -1) || k > DIM(a, -2))
        return oar_error(OAR_ERR_SHAPE, "%s: expected at most min(input.shape[-2], input.shape[-1]) reflectors, got "
                                        "tau %s for input %s", op, st_, sa);
    return OAR_OK;
}

/* ---- householder_product: the first n columns of H_1 ... H_k (input m x n, m >= n >= k) */
static oar_status hp_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = check_reflectors("linalg_householder_product", in);
    if (st != OAR_OK) return st;
    if (DIM(in[0], -2) < DIM(in[0], -1))
        return oar_error(OAR_ERR_SHAPE, "linalg_householder_product: expected input.shape[-2] >= input.shape[-1] "
                                        "(the columns of an m x m product), got %lld < %lld",
                         (long long)DIM(in[0], -2), (long long)DIM(in[0], -1));
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status hp_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = (int)DIM(in[1], -1), info = 0, lwork = -1;
    if (!m || !n) return OAR_OK;
    double wq = 0, *a = la_alloc("linalg_householder_product", (int64_t)m * n);
    double *tau = la_alloc("linalg_householder_product", k), *work = NULL;
    oar_status st = a && tau ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dorgqr_(&m, &n, &k, a, &m, tau, &wq, &lwork, &info);
        lwork = (int)wq > 1 ? (int)wq : 1;
        work = la_alloc("linalg_householder_product", lwork);
        if (!work) st = oar_last_status();
    }
    const oar_dtype_traits *t = &oar_dtypes[in[1]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, m);
        for (int i = 0; i < k; i++) tau[i] = t->load(oar_tensor_ptr(in[1]) + (b * k + i) * (int64_t)t->size);
        dorgqr_(&m, &n, &k, a, &m, tau, work, &lwork, &info);
        la_store(out[0], b, a, m);
    }
    free(a);
    free(tau);
    free(work);
    return st;
}

/* Q = X_0 with X_k = I[:, :n] and X_i = H_i X_(i+1). Going back through X_i = X_(i+1) - tau_i v_i w,
 * w = v_i^T X_(i+1), with G the gradient of X_i and u = v_i^T G: g tau_i = -u . w,
 * g v_i = -tau_i (G w^T + X_(i+1) u^T), and X_(i+1)'s gradient is H_i G. The input's gradient is
 * each g v_i below the diagonal (the 1 on it and the zeros above are not read). */
static oar_status hp_grad(oar_grad_ctx *g) {
    oar_tensor *a = g->in[0], *tau = g->in[1], *gq = g->gout[0];
    int64_t m = DIM(a, -2), n = DIM(a, -1), k = DIM(tau, -1);
    if (!gq || !k) return OAR_OK;
    oar_tensor **x = calloc((size_t)k + 1, sizeof *x), **v = calloc((size_t)k, sizeof *v);
    oar_tensor **t = calloc((size_t)k, sizeof *t), **gv = calloc((size_t)k + 1, sizeof *gv);
    oar_tensor **gt = calloc((size_t)k, sizeof *gt);
    oar_status st = x && v && t && gv && gt ? OAR_OK : oar_error(OAR_ERR_OOM, "linalg_householder_product: out of "
                                                                                "memory for the gradient");
    if (st == OAR_OK) {
        oar_tensor *vs = oar_add(oar_tril(a, -1), oar_eye(m, n, a->dtype));
        x[k] = oar_eye(m, n, a->dtype);
        for (int64_t i = k - 1; i >= 0; i--) {
            v[i] = oar_slice(vs, -1, i, i + 1, 1);
            t[i] = oar_unsqueeze(oar_slice(tau, -1, i, i + 1, 1), -1);
            /* tau scales the 1 x n row, not the m x n product (a broadcast over the matrix costs more) */
            x[i] = oar_sub(x[i + 1], oar_matmul(v[i], oar_mul(t[i], oar_matmul(la_mT(v[i]), x[i + 1]))));
        }
        oar_tensor *gx = gq;
        for (int64_t i = 0; i < k; i++) {
            oar_tensor *w = oar_matmul(la_mT(v[i]), x[i + 1]), *u = oar_matmul(la_mT(v[i]), gx);
            gt[i] = oar_neg(oar_sum(oar_mul(u, w), (int[]){-2, -1}, 2, false));
            oar_tensor *s = oar_add(oar_matmul(gx, la_mT(w)), oar_matmul(x[i + 1], la_mT(u)));
            gv[i] = oar_neg(oar_mul(t[i], s));
            gx = oar_sub(gx, oar_matmul(v[i], oar_mul(t[i], u)));
        }
        int parts = (int)k;
        if (n > k) gv[parts++] = oar_zeros_like(oar_slice(a, -1, k, n, 1));
        if (g->needs[0]) g->gin[0] = oar_tril(oar_concat(gv, parts, -1), -1);
        if (g->needs[1]) {
            for (int64_t i = 0; i < k; i++) gt[i] = oar_unsqueeze(gt[i], -1);
            g->gin[1] = oar_concat(gt, (int)k, -1);
        }
        if ((g->needs[0] && !g->gin[0]) || (g->needs[1] && !g->gin[1])) st = oar_last_status();
    }
    free(x);
    free(v);
    free(t);
    free(gv);
    free(gt);
    return st;
}

const oar_op_def oar_opdef_linalg_householder_product = {
    .name = "linalg_householder_product", .n_inputs = 2, .n_outputs = 1, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = LA_DTYPES, .infer = hp_infer, .reference = hp_ref, .grad = hp_grad,
};

/* ---- ormqr: op(Q) C (left) or C op(Q) (right), op(Q) = Q^T when transpose; Q = H_1 ... H_k is
 * square of C's rows (left) or columns (right), which the input's rows must equal */
static oar_status ormqr_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "linalg_ormqr";
    oar_status st = check_reflectors(op, in);
    if (st == OAR_OK) st = la_check_matrix(op, in[2], "other", false);
    if (st == OAR_OK) st = la_check_pair(op, in[0], in[2], "other", false);
    if (st != OAR_OK) return st;
    bool left = a[0].i;
    int64_t need = left ? DIM(in[2], -2) : DIM(in[2], -1);
    if (DIM(in[0], -2) != need)
        return oar_error(OAR_ERR_SHAPE, "linalg_ormqr: expected input.shape[-2] == other.shape[%d] (Q is square of "
                                        "other's %s), got %lld != %lld", left ? -2 : -1, left ? "rows" : "columns",
                         (long long)DIM(in[0], -2), (long long)need);
    oar_meta_from(out, in[2]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status ormqr_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int r = (int)DIM(in[0], -2), c = (int)DIM(in[0], -1), k = (int)DIM(in[1], -1);
    int m = (int)DIM(in[2], -2), n = (int)DIM(in[2], -1), info = 0, lwork = -1, lda = r ? r : 1;
    if (!m || !n) return OAR_OK;
    const char *side = attrs[0].i ? "L" : "R", *trans = attrs[1].i ? "T" : "N";
    double wq = 0, *a = la_alloc("linalg_ormqr", (int64_t)r * c), *tau = la_alloc("linalg_ormqr", k);
    double *x = la_alloc("linalg_ormqr", (int64_t)m * n), *work = NULL;
    oar_status st = a && tau && x ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dormqr_(side, trans, &m, &n, &k, a, &lda, tau, x, &m, &wq, &lwork, &info);
        lwork = (int)wq > 1 ? (int)wq : 1;
        work = la_alloc("linalg_ormqr", lwork);
        if (!work) st = oar_last_status();
    }
    const oar_dtype_traits *t = &oar_dtypes[in[1]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, lda);
        la_load(in[2], b, x, m);
        for (int i = 0; i < k; i++) tau[i] = t->load(oar_tensor_ptr(in[1]) + (b * k + i) * (int64_t)t->size);
        if (k) dormqr_(side, trans, &m, &n, &k, a, &lda, tau, x, &m, work, &lwork, &info);
        la_store(out[0], b, x, m);
    }
    free(a);
    free(tau);
    free(x);
    free(work);
    return st;
}

static oar_status ormqr_grad(oar_grad_ctx *g) {
    (void)g;
    return la_no_derivative("ormqr");
}

const oar_op_def oar_opdef_linalg_ormqr = {
    .name = "linalg_ormqr", .n_inputs = 3, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"left", OAR_ATTR_INT, "true"}, {"transpose", OAR_ATTR_INT, "false"}}, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = LA_DTYPES, .infer = ormqr_infer, .reference = ormqr_ref, .grad = ormqr_grad,
};

oar_status oar_linalg_geqrf(oar_tensor *a, oar_tensor **qr, oar_tensor **tau) {
    oar_tensor *o[2];
    oar_status st = la_call(OAR_OP_linalg_geqrf, &a, 1, NULL, o, 2);
    if (st != OAR_OK) return st;
    *qr = o[0];
    *tau = o[1];
    return OAR_OK;
}

oar_tensor *oar_linalg_householder_product(oar_tensor *a, oar_tensor *tau) {
    oar_tensor *in[2] = {a, tau};
    return oar_op_call1(OAR_OP_linalg_householder_product, in, 2, NULL);
}

oar_tensor *oar_linalg_ormqr(oar_tensor *a, oar_tensor *tau, oar_tensor *c, bool left, bool transpose) {
    oar_tensor *in[3] = {a, tau, c};
    oar_attr at[2] = {oar_attr_int(left), oar_attr_int(transpose)};
    return oar_op_call1(OAR_OP_linalg_ormqr, in, 3, at);
}
#endif
