/* Factorizations of symmetric matrices on LAPACK, each reading A's lower triangle as torch's:
 * cholesky_ex (potrf; info per matrix instead of an error), ldl_factor (sytrf, Bunch-Kaufman:
 * LD packs unit-lower L and the 1x1/2x2 blocks of D, pivots in LAPACK's convention, negative for
 * a 2x2 block) and ldl_solve (sytrs). Batched over leading dims; the Python layer broadcasts and
 * raises torch's messages from info. Built only with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])
#define LA_DTYPES (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

/* outputs: the factor (A's shape), then the i32 info per matrix; with_pivots puts i32 pivots
 * [..., n] between them */
static oar_status factor_infer(const char *op, oar_tensor *const *in, oar_meta *out, int *n_out, bool with_pivots) {
    oar_status st = la_check_matrix(op, in[0], "A", true);
    if (st != OAR_OK) return st;
    oar_meta_from(&out[0], in[0]);
    int k = 1;
    if (with_pivots) {
        out[k] = out[0];
        out[k].dtype = OAR_I32;
        out[k++].ndim -= 1;
    }
    out[k] = out[0];
    out[k].dtype = OAR_I32;
    out[k++].ndim -= 2;
    *n_out = k;
    return OAR_OK;
}

/* ---- cholesky_ex: L (lower, zeros above) and info (k > 0: the leading minor of order k is not
 * positive-definite; L then holds what potrf reached: the failing diagonal's value and A below it) */
static oar_status chol_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    return factor_infer("linalg_cholesky_ex", in, out, n_out, false);
}

static oar_status chol_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1), info = 0;
    int32_t *inf = (int32_t *)oar_tensor_ptr(out[1]);
    double *a = la_alloc("linalg_cholesky_ex", (int64_t)n * n);
    if (!a) return oar_last_status();
    for (int64_t b = 0; b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n ? n : 1);
        if (n) dpotrf_("L", &n, a, &n, &info);
        inf[b] = info;
        for (int j = 1; j < n; j++)
            for (int i = 0; i < j; i++) a[i + (int64_t)j * n] = 0;
        if (n) la_store(out[0], b, a, n);
    }
    free(a);
    return OAR_OK;
}

static oar_status chol_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    g->gin[0] = la_cholesky_grad(g->out[0], g->gout[0]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_cholesky_ex = {
    .name = "linalg_cholesky_ex", .n_inputs = 1, .n_outputs = 2, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES,
    .infer = chol_infer, .reference = chol_ref, .grad = chol_grad,
};

/* ---- ldl_factor: LD (tril(A) factorized in place by sytrf; zeros above), pivots, info (k > 0:
 * D[k-1, k-1] is exactly zero, so D is singular) */
static oar_status ldl_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    return factor_infer("linalg_ldl_factor", in, out, n_out, true);
}

static oar_status ldl_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1), info = 0, lwork = -1;
    int64_t nb = la_batch(in[0]);
    int32_t *piv = (int32_t *)oar_tensor_ptr(out[1]), *inf = (int32_t *)oar_tensor_ptr(out[2]);
    if (!n) {
        for (int64_t b = 0; b < nb; b++) inf[b] = 0;
        return OAR_OK;
    }
    double wq = 0, *a = la_alloc("linalg_ldl_factor", (int64_t)n * n), *work = NULL;
    oar_status st = a ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dsytrf_("L", &n, a, &n, piv, &wq, &lwork, &info);
        lwork = (int)wq > 1 ? (int)wq : 1;
        work = la_alloc("linalg_ldl_factor", lwork);
        if (!work) st = oar_last_status();
    }
    for (int64_t b = 0; st == OAR_OK && b < nb; b++) {
        la_load(in[0], b, a, n);
        for (int j = 1; j < n; j++)
            for (int i = 0; i < j; i++) a[i + (int64_t)j * n] = 0;
        dsytrf_("L", &n, a, &n, piv + b * n, work, &lwork, &info);
        inf[b] = info;
        la_store(out[0], b, a, n);
    }
    free(a);
    free(work);
    return st;
}

static oar_status ldl_grad(oar_grad_ctx *g) {
    (void)g;
    return oar_error(OAR_ERR_UNSUPPORTED, "derivative for aten::linalg_ldl_factor_ex is not implemented");
}

const oar_op_def oar_opdef_linalg_ldl_factor = {
    .name = "linalg_ldl_factor", .n_inputs = 1, .n_outputs = 3, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES,
    .infer = ldl_infer, .reference = ldl_ref, .grad = ldl_grad,
};

/* ---- ldl_solve: A X = B from ldl_factor's LD and pivots */
static oar_status ldls_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    const char *op = "linalg_ldl_solve";
    oar_status st = la_check_matrix(op, in[0], "LD", true);
    if (st == OAR_OK) st = la_check_matrix(op, in[2], "B", false);
    if (st == OAR_OK) st = la_check_pair(op, in[0], in[2], "B", true);
    if (st != OAR_OK) return st;
    const oar_tensor *ld = in[0], *p = in[1];
    bool ok = p->dtype == OAR_I32 && p->ndim == ld->ndim - 1;
    for (int i = 0; ok && i < p->ndim; i++) ok = p->shape[i] == ld->shape[i];
    if (!ok) {
        char s[128], sl[128];
        oar_format_shape(p->shape, p->ndim, s, sizeof s);
        oar_format_shape(ld->shape, ld->ndim, sl, sizeof sl);
        return oar_error(OAR_ERR_SHAPE, "%s: expected pivots of dtype i32 and shape (..., n) matching LD %s, got %s "
                                        "%s; pass linalg_ldl_factor's outputs", op, sl, oar_dtype_name(p->dtype), s);
    }
    oar_meta_from(out, in[2]);
    *n_out = 1;
    return OAR_OK;
}

/* sytrs trusts the pivots; a wrong one would index outside the matrix */
static bool ldl_pivots_valid(const int32_t *p, int n) {
    for (int i = 0; i < n; i++) {
        int v = p[i] < 0 ? -p[i] : p[i];
        if (v < 1 || v > n) return false;
        if (p[i] < 0) { /* a 2x2 block: both rows carry the same negative pivot */
            if (i + 1 >= n || p[i + 1] != p[i]) return false;
            i++;
        }
    }
    return true;
}

static oar_status ldls_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1), k = (int)DIM(in[2], -1), info = 0;
    if (out[0]->numel == 0) return OAR_OK;
    const int32_t *piv = (const int32_t *)oar_tensor_ptr(in[1]);
    double *a = la_alloc("linalg_ldl_solve", (int64_t)n * n), *x = la_alloc("linalg_ldl_solve", (int64_t)n * k);
    oar_status st = a && x ? OAR_OK : oar_last_status();
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        if (!ldl_pivots_valid(piv + b * n, n)) {
            st = oar_error(OAR_ERR_INVALID_ARG, "linalg_ldl_solve: the pivots of matrix %lld are not sytrf's (each "
                                                "in [1, %d], or a pair of equal negatives for a 2x2 block); pass "
                                                "linalg_ldl_factor's outputs", (long long)b, n);
            break;
        }
        la_load(in[0], b, a, n);
        la_load(in[2], b, x, n);
        dsytrs_("L", &n, &k, a, &n, piv + b * n, x, &n, &info);
        la_store(out[0], b, x, n);
    }
    free(a);
    free(x);
    return st;
}

static oar_status ldls_grad(oar_grad_ctx *g) {
    (void)g;
    return oar_error(OAR_ERR_UNSUPPORTED, "derivative for aten::linalg_ldl_solve is not implemented");
}

const oar_op_def oar_opdef_linalg_ldl_solve = {
    .name = "linalg_ldl_solve", .n_inputs = 3, .n_outputs = 1, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = LA_DTYPES,
    .infer = ldls_infer, .reference = ldls_ref, .grad = ldls_grad,
};

oar_status oar_linalg_cholesky_ex(oar_tensor *a, oar_tensor **l, oar_tensor **info) {
    oar_tensor *o[2];
    oar_status st = la_call(OAR_OP_linalg_cholesky_ex, &a, 1, NULL, o, 2);
    if (st != OAR_OK) return st;
    *l = o[0];
    *info = o[1];
    return OAR_OK;
}

oar_status oar_linalg_ldl_factor(oar_tensor *a, oar_tensor **ld, oar_tensor **pivots, oar_tensor **info) {
    oar_tensor *o[3];
    oar_status st = la_call(OAR_OP_linalg_ldl_factor, &a, 1, NULL, o, 3);
    if (st != OAR_OK) return st;
    *ld = o[0];
    *pivots = o[1];
    *info = o[2];
    return OAR_OK;
}

oar_tensor *oar_linalg_ldl_solve(oar_tensor *ld, oar_tensor *pivots, oar_tensor *b) {
    oar_tensor *in[3] = {ld, pivots, b};
    return oar_op_call1(OAR_OP_linalg_ldl_solve, in, 3, NULL);
}
#endif
