/* Linear solves on LAPACK: solve (gesv), solve_triangular (BLAS trsm: a zero on the diagonal gives
 * inf/nan, as torch), lu_factor (getrf), lu_unpack and lu_solve (getrs). Matrices are batched over
 * leading dims that the operands share (the Python layer broadcasts). The gradients are written with
 * these ops, so they differentiate again. Built only with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])

/* ---- solve: A X = B */
static oar_status solve_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_solve", in[0], "A", true);
    if (st == OAR_OK) st = la_check_matrix("linalg_solve", in[1], "B", false);
    if (st == OAR_OK) st = la_check_pair("linalg_solve", in[0], in[1], "B", true);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status solve_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1), k = (int)DIM(in[1], -1), info = 0;
    if (out[0]->numel == 0) return OAR_OK;
    double *a = la_alloc("linalg_solve", (int64_t)n * n), *x = la_alloc("linalg_solve", (int64_t)n * k);
    int *ipiv = malloc((size_t)n * sizeof *ipiv);
    oar_status st = a && x && ipiv ? OAR_OK : oar_error(OAR_ERR_OOM, "linalg_solve: out of memory");
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        la_load(in[1], b, x, n);
        dgesv_(&n, &k, a, &n, ipiv, x, &n, &info);
        if (info > 0)
            st = oar_error(OAR_ERR_NUMERIC, "linalg_solve: The solver failed because the input matrix is singular "
                                            "(matrix %lld: U[%d, %d] of its LU factorization is zero)",
                           (long long)b, info - 1, info - 1);
        else
            la_store(out[0], b, x, n);
    }
    free(a);
    free(x);
    free(ipiv);
    return st;
}

/* X = A^-1 B: gB = A^-T gX, gA = -gB X^T */
static oar_status solve_grad(oar_grad_ctx *g) {
    oar_tensor *gb = oar_linalg_solve(la_mT(g->in[0]), g->gout[0]);
    g->gin[1] = gb;
    if (g->needs[0]) g->gin[0] = oar_neg(oar_matmul(gb, la_mT(g->out[0])));
    return gb && (!g->needs[0] || g->gin[0]) ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_solve = {
    .name = "linalg_solve", .n_inputs = 2, .n_outputs = 1, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = solve_infer, .reference = solve_ref, .grad = solve_grad,
};

oar_tensor *oar_linalg_solve(oar_tensor *a, oar_tensor *b) {
    oar_tensor *in[2] = {a, b};
    return oar_op_call1(OAR_OP_linalg_solve, in, 2, NULL);
}

/* ---- solve_triangular: A X = B reading one triangle of A */
static oar_status tri_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_solve_triangular", in[0], "A", true);
    if (st == OAR_OK) st = la_check_matrix("linalg_solve_triangular", in[1], "B", false);
    if (st == OAR_OK) st = la_check_pair("linalg_solve_triangular", in[0], in[1], "B", true);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status tri_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int n = (int)DIM(in[0], -1), k = (int)DIM(in[1], -1);
    if (out[0]->numel == 0) return OAR_OK;
    const char *uplo = attrs[0].i ? "U" : "L", *diag = attrs[1].i ? "U" : "N";
    const double one = 1.0;
    double *a = la_alloc("linalg_solve_triangular", (int64_t)n * n);
    double *x = la_alloc("linalg_solve_triangular", (int64_t)n * k);
    oar_status st = a && x ? OAR_OK : oar_last_status();
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        la_load(in[1], b, x, n);
        dtrsm_("L", uplo, "N", diag, &n, &k, &one, a, &n, x, &n);
        la_store(out[0], b, x, n);
    }
    free(a);
    free(x);
    return st;
}

/* gB = A^-T gX (the other triangle of A^T); gA = -gB X^T on A's triangle (without the diagonal
 * when it is taken as ones) */
static oar_status tri_grad(oar_grad_ctx *g) {
    bool upper = g->attrs[0].i, unit = g->attrs[1].i;
    oar_tensor *gb = oar_linalg_solve_triangular(la_mT(g->in[0]), g->gout[0], !upper, unit);
    g->gin[1] = gb;
    if (g->needs[0]) {
        oar_tensor *ga = oar_neg(oar_matmul(gb, la_mT(g->out[0])));
        g->gin[0] = upper ? oar_triu(ga, unit ? 1 : 0) : oar_tril(ga, unit ? -1 : 0);
    }
    return gb && (!g->needs[0] || g->gin[0]) ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_solve_triangular = {
    .name = "linalg_solve_triangular", .n_inputs = 2, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"upper", OAR_ATTR_INT, NULL}, {"unitriangular", OAR_ATTR_INT, "false"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = tri_infer, .reference = tri_ref, .grad = tri_grad,
};

oar_tensor *oar_linalg_solve_triangular(oar_tensor *a, oar_tensor *b, bool upper, bool unitriangular) {
    oar_tensor *in[2] = {a, b};
    oar_attr at[2] = {oar_attr_int(upper), oar_attr_int(unitriangular)};
    return oar_op_call1(OAR_OP_linalg_solve_triangular, in, 2, at);
}

/* ---- lu_factor: P L U = A; outputs LU (L below the diagonal, U on and above), pivots (i32,
 * 1-based rows swapped in turn, LAPACK's) and info (i32 per matrix: i > 0 when U[i-1, i-1] is zero) */
static oar_status luf_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_lu_factor", in[0], "A", false);
    if (st != OAR_OK) return st;
    oar_meta_from(&out[0], in[0]);
    out[1] = out[0];
    out[1].dtype = OAR_I32;
    out[1].ndim -= 1;
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1);
    out[1].shape[out[1].ndim - 1] = m < n ? m : n;
    out[2] = out[0];
    out[2].dtype = OAR_I32;
    out[2].ndim -= 2;
    *n_out = 3;
    return OAR_OK;
}

static oar_status luf_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = m < n ? m : n, info = 0;
    int32_t *piv = (int32_t *)oar_tensor_ptr(out[1]), *inf = (int32_t *)oar_tensor_ptr(out[2]);
    int64_t nb = la_batch(in[0]);
    if (!k) {
        for (int64_t b = 0; b < nb; b++) inf[b] = 0;
        return OAR_OK;
    }
    double *a = la_alloc("linalg_lu_factor", (int64_t)m * n);
    if (!a) return oar_last_status();
    oar_status st = OAR_OK;
    for (int64_t b = 0; b < nb && st == OAR_OK; b++) {
        la_load(in[0], b, a, m);
        dgetrf_(&m, &n, a, &m, piv + b * k, &info);
        inf[b] = info;
        la_store(out[0], b, a, m);
        if (info > 0 && attrs[0].i)
            st = oar_error(OAR_ERR_NUMERIC, "linalg_lu_factor: U[%d,%d] of matrix %lld is zero and using it in "
                                            "lu_solve would divide by zero; to factorize anyway call linalg.lu "
                                            "or linalg.lu_factor_ex", info, info, (long long)b);
    }
    free(a);
    return st;
}

/* Square A = P L U: dL = L tril(M,-1), dU = triu(M) U with M = L^-1 P^T dA U^-1, so
 * gA = P L^-T (tril(L^T gL, -1) + triu(gU U^T)) U^-T */
static oar_tensor *lu_grad_from_lu(oar_tensor *p, oar_tensor *l, oar_tensor *u, oar_tensor *gl, oar_tensor *gu) {
    oar_tensor *phi = oar_add(oar_tril(oar_matmul(la_mT(l), gl), -1), oar_triu(oar_matmul(gu, la_mT(u)), 0));
    oar_tensor *x = oar_linalg_solve_triangular(la_mT(l), phi, true, true);
    oar_tensor *y = la_mT(oar_linalg_solve_triangular(u, la_mT(x), true, false));
    return oar_matmul(p, y);
}

/* Rectangular A reduces to the square rule. Tall, P^T A = [L1; L2] U: dL2 = (dA2 - L2 dU) U^-1, so
 * gA2 = gL2 U^-T and U's gradient loses L2^T gL2 U^-T. Wide, P^T A = L [U1 | U2]: dU2 = L^-1 (P^T dA2 -
 * dL U2), so gA2 = P L^-T gU2 and L's gradient loses L^-T gU2 U2^T. */
static oar_status luf_grad(oar_grad_ctx *g) {
    const oar_tensor *a = g->in[0];
    if (!g->gout[0]) return OAR_OK;
    int64_t m = DIM(a, -2), n = DIM(a, -1), k = m < n ? m : n;
    oar_tensor *plu[3], *in[2] = {g->out[0], g->out[1]};
    oar_status st = la_call(OAR_OP_linalg_lu_unpack, in, 2, NULL, plu, 3);
    if (st != OAR_OK) return st;
    oar_tensor *p = plu[0], *l = plu[1], *u = plu[2], *glu = g->gout[0];
    oar_tensor *gl = oar_tril(oar_slice(glu, -1, 0, k, 1), -1), *gu = oar_triu(oar_slice(glu, -2, 0, k, 1), 0);
    if (m == n) {
        g->gin[0] = lu_grad_from_lu(p, l, u, gl, gu);
    } else if (m > n) {
        oar_tensor *l1 = oar_slice(l, -2, 0, n, 1), *l2 = oar_slice(l, -2, n, m, 1);
        oar_tensor *gl1 = oar_slice(gl, -2, 0, n, 1), *gl2 = oar_slice(gl, -2, n, m, 1);
        oar_tensor *ga2 = la_mT(oar_linalg_solve_triangular(u, la_mT(gl2), true, false)); /* gL2 U^-T */
        oar_tensor *gu2 = oar_sub(gu, oar_matmul(la_mT(l2), ga2));
        oar_tensor *eye = la_eye_like(n, a->dtype), *ga1 = lu_grad_from_lu(eye, l1, u, gl1, gu2);
        oar_tensor *parts[2] = {ga1, ga2};
        g->gin[0] = ga1 && ga2 ? oar_matmul(p, oar_concat(parts, 2, -2)) : NULL;
    } else {
        oar_tensor *u1 = oar_slice(u, -1, 0, m, 1), *u2 = oar_slice(u, -1, m, n, 1);
        oar_tensor *gu1 = oar_slice(gu, -1, 0, m, 1), *gu2 = oar_slice(gu, -1, m, n, 1);
        oar_tensor *lt_gu2 = oar_linalg_solve_triangular(la_mT(l), gu2, true, true); /* L^-T gU2 */
        oar_tensor *gl2 = oar_sub(gl, oar_matmul(lt_gu2, la_mT(u2)));
        oar_tensor *eye = la_eye_like(m, a->dtype), *ga1 = lu_grad_from_lu(eye, l, u1, gl2, gu1);
        oar_tensor *parts[2] = {ga1, lt_gu2};
        g->gin[0] = ga1 && lt_gu2 ? oar_matmul(p, oar_concat(parts, 2, -1)) : NULL;
    }
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_lu_factor = {
    .name = "linalg_lu_factor", .n_inputs = 1, .n_outputs = 3, .n_attrs = 1,
    .attrs = {{"check_errors", OAR_ATTR_INT, "false"}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = luf_infer, .reference = luf_ref, .grad = luf_grad,
};

/* ---- lu_unpack: LU and pivots -> P [m, m], L [m, k] (unit diagonal), U [k, n] */
static oar_status lup_check(const char *op, oar_tensor *const *in) {
    oar_status st = la_check_matrix(op, in[0], "LU", false);
    if (st != OAR_OK) return st;
    const oar_tensor *lu = in[0], *p = in[1];
    int64_t k = DIM(lu, -1) < DIM(lu, -2) ? DIM(lu, -1) : DIM(lu, -2);
    bool ok = p->dtype == OAR_I32 && p->ndim == lu->ndim - 1 && p->shape[p->ndim - 1] == k;
    for (int i = 0; ok && i < p->ndim - 1; i++) ok = p->shape[i] == lu->shape[i];
    if (!ok) {
        char s[128], sl[128];
        oar_format_shape(p->shape, p->ndim, s, sizeof s);
        oar_format_shape(lu->shape, lu->ndim, sl, sizeof sl);
        return oar_error(OAR_ERR_SHAPE, "%s: expected pivots of dtype i32 and shape (..., min(m, n)) matching LU %s, "
                                        "got %s %s; pass linalg_lu_factor's outputs", op, sl,
                         oar_dtype_name(p->dtype), s);
    }
    return OAR_OK;
}

static oar_status lup_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = lup_check("linalg_lu_unpack", in);
    if (st != OAR_OK) return st;
    int64_t m = DIM(in[0], -2), n = DIM(in[0], -1), k = m < n ? m : n;
    int nd = in[0]->ndim;
    for (int i = 0; i < 3; i++) oar_meta_from(&out[i], in[0]);
    out[0].shape[nd - 1] = m;
    out[1].shape[nd - 1] = k;
    out[2].shape[nd - 2] = k;
    *n_out = 3;
    return OAR_OK;
}

static oar_status lup_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int m = (int)DIM(in[0], -2), n = (int)DIM(in[0], -1), k = m < n ? m : n;
    const int32_t *piv = (const int32_t *)oar_tensor_ptr(in[1]);
    double *a = la_alloc("linalg_lu_unpack", (int64_t)m * n), *p = la_alloc("linalg_lu_unpack", (int64_t)m * m);
    double *l = la_alloc("linalg_lu_unpack", (int64_t)m * k), *u = la_alloc("linalg_lu_unpack", (int64_t)k * n);
    int *perm = malloc((size_t)(m ? m : 1) * sizeof *perm);
    oar_status st = a && p && l && u && perm ? OAR_OK : oar_error(OAR_ERR_OOM, "linalg_lu_unpack: out of memory");
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, m ? m : 1);
        for (int i = 0; i < m; i++) perm[i] = i;
        for (int i = 0; i < k && st == OAR_OK; i++) {
            int j = piv[b * k + i] - 1;
            if (j < i || j >= m) {
                st = oar_error(OAR_ERR_INVALID_ARG, "linalg_lu_unpack: expected pivots[%d] of matrix %lld in [%d, %d] "
                                                    "(1-based, LAPACK's), got %d", i, (long long)b, i + 1, m, j + 1);
                break;
            }
            int t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        if (st != OAR_OK) break;
        /* P^T A = L U: row i of P^T A is row perm[i] of A, so P[perm[i], i] = 1 */
        for (int64_t i = 0; i < (int64_t)m * m; i++) p[i] = 0;
        for (int i = 0; i < m; i++) p[perm[i] + (int64_t)i * m] = 1;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < k; j++) l[i + (int64_t)j * m] = i > j ? a[i + (int64_t)j * m] : i == j;
        for (int i = 0; i < k; i++)
            for (int j = 0; j < n; j++) u[i + (int64_t)j * k] = i <= j ? a[i + (int64_t)j * m] : 0;
        la_store(out[0], b, p, m ? m : 1);
        la_store(out[1], b, l, m ? m : 1);
        la_store(out[2], b, u, k ? k : 1);
    }
    free(a);
    free(p);
    free(l);
    free(u);
    free(perm);
    return st;
}

/* gLU: tril(gL, -1) and triu(gU), each padded to LU's m x n */
static oar_status lup_grad(oar_grad_ctx *g) {
    const oar_tensor *lu = g->in[0];
    int64_t m = DIM(lu, -2), n = DIM(lu, -1);
    oar_tensor *gl = g->gout[1] ? oar_tril(g->gout[1], -1) : NULL, *gu = g->gout[2] ? oar_triu(g->gout[2], 0) : NULL;
    if (gl && n > m) gl = oar_pad(gl, (int64_t[]){0, n - m}, 2, OAR_PAD_CONSTANT, 0.0);
    if (gu && m > n) gu = oar_pad(gu, (int64_t[]){0, 0, 0, m - n}, 4, OAR_PAD_CONSTANT, 0.0);
    g->gin[0] = gl && gu ? oar_add(gl, gu) : gl ? gl : gu;
    return g->gin[0] || (!gl && !gu) ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_lu_unpack = {
    .name = "linalg_lu_unpack", .n_inputs = 2, .n_outputs = 3, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = lup_infer, .reference = lup_ref, .grad = lup_grad,
};

/* ---- lu_solve: A X = B (A^T X = B when adjoint) from A's LU factorization */
static oar_status lus_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_lu_solve", in[0], "LU", true);
    if (st == OAR_OK) st = lup_check("linalg_lu_solve", in);
    if (st == OAR_OK) st = la_check_matrix("linalg_lu_solve", in[2], "B", false);
    if (st == OAR_OK) st = la_check_pair("linalg_lu_solve", in[0], in[2], "B", true);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[2]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status lus_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out;
    int n = (int)DIM(in[0], -1), k = (int)DIM(in[2], -1), info = 0;
    if (out[0]->numel == 0) return OAR_OK;
    const int32_t *piv = (const int32_t *)oar_tensor_ptr(in[1]);
    double *a = la_alloc("linalg_lu_solve", (int64_t)n * n), *x = la_alloc("linalg_lu_solve", (int64_t)n * k);
    oar_status st = a && x ? OAR_OK : oar_last_status();
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        la_load(in[2], b, x, n);
        dgetrs_(attrs[0].i ? "T" : "N", &n, &k, a, &n, piv + b * n, x, &n, &info);
        la_store(out[0], b, x, n);
    }
    free(a);
    free(x);
    return st;
}

/* gB = A^-T gX (A^-1 gX when adjoint); gA = -gB X^T (-X gB^T when adjoint), carried to LU through
 * A = P L U: gL = tril(P^T gA U^T, -1), gU = triu(L^T P^T gA) */
static oar_status lus_grad(oar_grad_ctx *g) {
    bool adj = g->attrs[0].i;
    oar_tensor *in[3] = {g->in[0], g->in[1], g->gout[0]}, *gb;
    gb = oar_op_call1(OAR_OP_linalg_lu_solve, in, 3, &(oar_attr){.kind = OAR_ATTR_INT, .i = !adj});
    if (!gb) return oar_last_status();
    g->gin[2] = gb;
    if (!g->needs[0]) return OAR_OK;
    oar_tensor *x = g->out[0], *ga = oar_neg(adj ? oar_matmul(x, la_mT(gb)) : oar_matmul(gb, la_mT(x)));
    oar_tensor *plu[3];
    oar_status st = la_call(OAR_OP_linalg_lu_unpack, in, 2, NULL, plu, 3);
    if (st != OAR_OK) return st;
    oar_tensor *ptga = oar_matmul(la_mT(plu[0]), ga);
    g->gin[0] = oar_add(oar_tril(oar_matmul(ptga, la_mT(plu[2])), -1), oar_triu(oar_matmul(la_mT(plu[1]), ptga), 0));
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_lu_solve = {
    .name = "linalg_lu_solve", .n_inputs = 3, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"adjoint", OAR_ATTR_INT, "false"}}, .key_input = 0,
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = lus_infer, .reference = lus_ref, .grad = lus_grad,
};

oar_status oar_linalg_lu_factor(oar_tensor *a, oar_tensor **lu, oar_tensor **pivots) {
    oar_tensor *o[3];
    oar_attr at = oar_attr_int(1);
    oar_status st = la_call(OAR_OP_linalg_lu_factor, &a, 1, &at, o, 3);
    if (st != OAR_OK) return st;
    *lu = o[0];
    *pivots = o[1];
    return OAR_OK;
}

oar_tensor *oar_linalg_lu_solve(oar_tensor *lu, oar_tensor *pivots, oar_tensor *b, bool adjoint) {
    oar_tensor *in[3] = {lu, pivots, b};
    oar_attr at = oar_attr_int(adjoint);
    return oar_op_call1(OAR_OP_linalg_lu_solve, in, 3, &at);
}
#endif
