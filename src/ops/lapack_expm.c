/* matrix_exp by scaling and squaring with a Padé approximant (Higham, "The scaling and squaring
 * method for the matrix exponential revisited", 2005): the smallest degree 3, 5, 7, 9 whose bound
 * theta covers the 1-norm, else degree 13 on A / 2^s and s squarings. Products are BLAS dgemm, the
 * rational step a LAPACK gesv. The gradient uses the block identity
 * exp([[A^T, G], [0, A^T]]) = [[exp(A^T), gA], [0, exp(A^T)]], so it is matrix_exp again and
 * differentiates further. Built only with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])

static const double theta[5] = {1.495585217958292e-2, 2.539398330063230e-1, 9.504178996162932e-1,
                                2.097847961257068e0, 5.371920351148152e0};
static const double pade3[] = {120., 60., 12., 1.};
static const double pade5[] = {30240., 15120., 3360., 420., 30., 1.};
static const double pade7[] = {17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.};
static const double pade9[] = {17643225600., 8821612800., 2075673600., 302702400., 30270240.,
                               2162160., 110880., 3960., 90., 1.};
static const double pade13[] = {64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
                                129060195264000., 10559470521600., 670442572800., 33522128640.,
                                1323241920., 40840800., 960960., 16380., 182., 1.};

static void gemm(int n, const double *x, const double *y, double *z) {
    const double one = 1.0, zero = 0.0;
    dgemm_("N", "N", &n, &n, &n, &one, x, &n, y, &n, &zero, z, &n);
}

/* z = sum_i c[i] p[i] + c0 I over nn = n*n entries (p[i] may be NULL: skipped) */
static void lincomb(int n, double *z, double c0, int np, const double *c, double *const *p) {
    int64_t nn = (int64_t)n * n;
    for (int64_t e = 0; e < nn; e++) {
        double v = e % (n + 1) == 0 ? c0 : 0.0;
        for (int i = 0; i < np; i++) v += c[i] * p[i][e];
        z[e] = v;
    }
}

/* exp(a) into a (n x n, column-major); w: workspace of 8 n^2 doubles, ipiv n ints. False: gesv
 * found V - U singular (only for inf/nan input). */
static bool expm_one(int n, double *a, double *w, int *ipiv) {
    int64_t nn = (int64_t)n * n;
    double *a2 = w, *a4 = w + nn, *a6 = w + 2 * nn, *u = w + 3 * nn, *v = w + 4 * nn, *t = w + 5 * nn;
    double *q = w + 6 * nn, *r = w + 7 * nn;
    double norm = 0;
    for (int j = 0; j < n; j++) {
        double c = 0;
        for (int i = 0; i < n; i++) c += fabs(a[i + (int64_t)j * n]);
        if (c > norm || isnan(c)) norm = c;
    }
    int s = 0;
    gemm(n, a, a, a2);
    if (norm <= theta[0]) {
        lincomb(n, t, pade3[1], 1, (double[]){pade3[3]}, (double *[]){a2});
        lincomb(n, v, pade3[0], 1, (double[]){pade3[2]}, (double *[]){a2});
    } else if (norm <= theta[1]) {
        gemm(n, a2, a2, a4);
        lincomb(n, t, pade5[1], 2, (double[]){pade5[3], pade5[5]}, (double *[]){a2, a4});
        lincomb(n, v, pade5[0], 2, (double[]){pade5[2], pade5[4]}, (double *[]){a2, a4});
    } else if (norm <= theta[2]) {
        gemm(n, a2, a2, a4);
        gemm(n, a4, a2, a6);
        lincomb(n, t, pade7[1], 3, (double[]){pade7[3], pade7[5], pade7[7]}, (double *[]){a2, a4, a6});
        lincomb(n, v, pade7[0], 3, (double[]){pade7[2], pade7[4], pade7[6]}, (double *[]){a2, a4, a6});
    } else if (norm <= theta[3]) {
        gemm(n, a2, a2, a4);
        gemm(n, a4, a2, a6);
        gemm(n, a6, a2, q); /* A^8 */
        lincomb(n, t, pade9[1], 4, (double[]){pade9[3], pade9[5], pade9[7], pade9[9]}, (double *[]){a2, a4, a6, q});
        lincomb(n, v, pade9[0], 4, (double[]){pade9[2], pade9[4], pade9[6], pade9[8]}, (double *[]){a2, a4, a6, q});
    } else {
        if (norm > theta[4]) s = (int)ceil(log2(norm / theta[4]));
        if (s > 0) {
            double sc = ldexp(1.0, -s), sc2 = sc * sc;
            for (int64_t e = 0; e < nn; e++) a[e] *= sc, a2[e] *= sc2;
        }
        gemm(n, a2, a2, a4);
        gemm(n, a4, a2, a6);
        const double *b = pade13;
        /* U = A [A6 (b13 A6 + b11 A4 + b9 A2) + b7 A6 + b5 A4 + b3 A2 + b1 I], V likewise with even b */
        lincomb(n, q, 0, 3, (double[]){b[13], b[11], b[9]}, (double *[]){a6, a4, a2});
        gemm(n, a6, q, r);
        lincomb(n, t, b[1], 4, (double[]){1.0, b[7], b[5], b[3]}, (double *[]){r, a6, a4, a2});
        lincomb(n, q, 0, 3, (double[]){b[12], b[10], b[8]}, (double *[]){a6, a4, a2});
        gemm(n, a6, q, r);
        lincomb(n, v, b[0], 4, (double[]){1.0, b[6], b[4], b[2]}, (double *[]){r, a6, a4, a2});
    }
    gemm(n, a, t, u);
    /* (V - U) X = V + U */
    for (int64_t e = 0; e < nn; e++) {
        double uu = u[e];
        u[e] = v[e] - uu;
        v[e] = v[e] + uu;
    }
    int info = 0;
    dgesv_(&n, &n, u, &n, ipiv, v, &n, &info);
    if (info > 0) return false;
    for (; s > 0; s--) {
        gemm(n, v, v, t);
        memcpy(v, t, sizeof *v * (size_t)nn);
    }
    memcpy(a, v, sizeof *a * (size_t)nn);
    return true;
}

static oar_status expm_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_matrix_exp", in[0], "A", true);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status expm_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1);
    if (!out[0]->numel) return OAR_OK;
    double *a = la_alloc("linalg_matrix_exp", (int64_t)n * n), *w = la_alloc("linalg_matrix_exp", 8 * (int64_t)n * n);
    int *ipiv = malloc((size_t)n * sizeof *ipiv);
    oar_status st = a && w && ipiv ? OAR_OK : oar_error(OAR_ERR_OOM, "linalg_matrix_exp: out of memory");
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        if (!expm_one(n, a, w, ipiv))
            for (int64_t e = 0; e < (int64_t)n * n; e++) a[e] = NAN; /* inf/nan input: nan out, as torch */
        la_store(out[0], b, a, n);
    }
    free(a);
    free(w);
    free(ipiv);
    return st;
}

static oar_status expm_grad(oar_grad_ctx *g) {
    oar_tensor *at = la_mT(g->in[0]);
    int64_t n = DIM(g->in[0], -1);
    oar_tensor *top[2] = {at, g->gout[0]}, *bot[2] = {oar_zeros_like(at), at};
    oar_tensor *rows[2] = {oar_concat(top, 2, -1), oar_concat(bot, 2, -1)};
    oar_tensor *e = oar_linalg_matrix_exp(oar_concat(rows, 2, -2));
    g->gin[0] = oar_slice(oar_slice(e, -2, 0, n, 1), -1, n, 2 * n, 1);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_matrix_exp = {
    .name = "linalg_matrix_exp", .n_inputs = 1, .n_outputs = 1, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
    .infer = expm_infer, .reference = expm_ref, .grad = expm_grad,
};

oar_tensor *oar_linalg_matrix_exp(oar_tensor *a) { return oar_op_call1(OAR_OP_linalg_matrix_exp, &a, 1, NULL); }
#endif
