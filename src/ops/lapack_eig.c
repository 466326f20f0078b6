/* The general eigenproblem on LAPACK (geev): A V = V diag(L) for real square A, batched over leading
 * dims. Eigenvalues and vectors are complex; oar has no complex dtype in C, so the op returns their
 * real and imaginary parts as four real tensors (Python's ComplexTensor is such a pair). Order and
 * normalization are LAPACK's, as torch's: each vector has unit 2-norm and, when complex, a real
 * largest component; a pair of conjugate eigenvalues comes positive imaginary part first. Built only
 * with OpenBLAS (lapack.def). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <math.h>
#include <stdlib.h>

#define DIM(t, i) ((t)->shape[(t)->ndim + (i)])

static oar_status eig_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    oar_status st = la_check_matrix("linalg_eig", in[0], "A", true);
    if (st != OAR_OK) return st;
    for (int i = 0; i < 4; i++) oar_meta_from(&out[i], in[0]);
    out[0].ndim -= 1;
    out[1].ndim -= 1;
    *n_out = 4;
    return OAR_OK;
}

static oar_status eig_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *attrs) {
    (void)ctx; (void)n_in; (void)n_out; (void)attrs;
    int n = (int)DIM(in[0], -1), one = 1, info = 0, lwork = -1;
    if (!n) return OAR_OK;
    double wq = 0, dummy = 0, *a = la_alloc("linalg_eig", (int64_t)n * n), *w = la_alloc("linalg_eig", 2 * (int64_t)n);
    double *vr = la_alloc("linalg_eig", (int64_t)n * n), *vre = la_alloc("linalg_eig", (int64_t)n * n);
    double *vim = la_alloc("linalg_eig", (int64_t)n * n), *work = NULL;
    oar_status st = a && w && vr && vre && vim ? OAR_OK : oar_last_status();
    if (st == OAR_OK) {
        dgeev_("N", "V", &n, a, &n, w, w + n, &dummy, &one, vr, &n, &wq, &lwork, &info);
        lwork = (int)wq > 1 ? (int)wq : 1;
        work = la_alloc("linalg_eig", lwork);
        if (!work) st = oar_last_status();
    }
    const oar_dtype_traits *t = &oar_dtypes[out[0]->dtype];
    for (int64_t b = 0; st == OAR_OK && b < la_batch(in[0]); b++) {
        la_load(in[0], b, a, n);
        for (int64_t i = 0; i < (int64_t)n * n; i++)
            if (!isfinite(a[i])) {
                st = oar_error(OAR_ERR_NUMERIC, "linalg_eig: input tensor should not contain infs or NaNs (matrix %lld)",
                               (long long)b);
                break;
            }
        if (st != OAR_OK) break;
        dgeev_("N", "V", &n, a, &n, w, w + n, &dummy, &one, vr, &n, work, &lwork, &info);
        if (info > 0) {
            st = oar_error(OAR_ERR_NUMERIC, "linalg_eig: the QR algorithm failed to compute all eigenvalues of "
                                            "matrix %lld (%d did not converge)", (long long)b, info);
            break;
        }
        /* geev's real form: a conjugate pair j, j+1 shares columns j (real) and j+1 (imaginary) */
        for (int j = 0; j < n; j++) {
            double *re = vre + (int64_t)j * n, *im = vim + (int64_t)j * n;
            const double *c = vr + (int64_t)j * n;
            if (w[n + j] > 0 && j + 1 < n) {
                for (int i = 0; i < n; i++) {
                    re[i] = re[i + n] = c[i];
                    im[i] = c[i + n];
                    im[i + n] = -c[i + n];
                }
                j++;
            } else {
                for (int i = 0; i < n; i++) re[i] = c[i], im[i] = 0;
            }
        }
        for (int i = 0; i < n; i++) {
            t->store(oar_tensor_ptr(out[0]) + (b * n + i) * (int64_t)t->size, w[i]);
            t->store(oar_tensor_ptr(out[1]) + (b * n + i) * (int64_t)t->size, w[n + i]);
        }
        la_store(out[2], b, vre, n);
        la_store(out[3], b, vim, n);
    }
    free(a);
    free(w);
    free(vr);
    free(vre);
    free(vim);
    free(work);
    return st;
}

/* ---- complex matrices as (re, im) pairs of real tensors, for the gradient */
typedef struct {
    oar_tensor *re, *im;
} cx;

static cx cx_mm(cx a, cx b) {
    return (cx){oar_sub(oar_matmul(a.re, b.re), oar_matmul(a.im, b.im)),
                oar_add(oar_matmul(a.re, b.im), oar_matmul(a.im, b.re))};
}
static cx cx_sub(cx a, cx b) { return (cx){oar_sub(a.re, b.re), oar_sub(a.im, b.im)}; }
static cx cx_H(cx a) { return (cx){la_mT(a.re), oar_neg(la_mT(a.im))}; } /* conjugate transpose */
static cx cx_div(cx a, cx b) {
    oar_tensor *den = oar_add(oar_mul(b.re, b.re), oar_mul(b.im, b.im));
    return (cx){oar_div(oar_add(oar_mul(a.re, b.re), oar_mul(a.im, b.im)), den),
                oar_div(oar_sub(oar_mul(a.im, b.re), oar_mul(a.re, b.im)), den)};
}
/* the real part of M^-1 B, solved as the real system [[Mr, -Mi], [Mi, Mr]] [Xr; Xi] = [Br; Bi] */
static oar_tensor *cx_solve_re(cx m, cx b) {
    int64_t n = DIM(m.re, -1);
    oar_tensor *top[2] = {m.re, oar_neg(m.im)}, *bot[2] = {m.im, m.re};
    oar_tensor *rows[2] = {oar_concat(top, 2, -1), oar_concat(bot, 2, -1)}, *rhs[2] = {b.re, b.im};
    return oar_slice(oar_linalg_solve(oar_concat(rows, 2, -2), oar_concat(rhs, 2, -2)), -2, 0, n, 1);
}
static oar_tensor *diag_of(oar_tensor *x, oar_tensor *eye) {
    return oar_sum(oar_mul(x, eye), (int[]){-1}, 1, false);
}

/* torch's phase check: a loss that depends on the phase of a complex eigenvector (which LAPACK
 * fixes by a convention) has no gradient; Im(diag(V^H gV)) vanishes for the losses that do not */
static oar_status phase_check(oar_tensor *x) { /* x: a fresh (contiguous) sum */
    if (!x) return oar_last_status();
    if (oar_is_tracing() || !x->storage || x->device != OAR_CPU) return OAR_OK;
    const oar_dtype_traits *t = &oar_dtypes[x->dtype];
    for (int64_t i = 0; i < x->numel; i++)
        if (fabs(t->load(oar_tensor_ptr(x) + i * (int64_t)t->size)) > 1e-2)
            return oar_error(OAR_ERR_NUMERIC, "linalg_eig_backward: The eigenvectors in the complex case are "
                                              "specified up to multiplication by e^{i phi}. The specified loss "
                                              "function depends on this quantity, so it is ill-defined.");
    return OAR_OK;
}

/* torch's rule, for real A (the real part of its complex gradient), with E_ij = L_j - L_i:
 * gA = Re(V^-H (diag(gL) + offdiag((V^H gV - V^H V diag(Re diag(V^H gV))) / conj(E))) V^H);
 * the diagonal term keeps each vector's unit norm */
static oar_status eig_grad(oar_grad_ctx *g) {
    oar_tensor *const *o = g->out, *const *go = g->gout;
    bool gl = go[0] || go[1], gv = go[2] || go[3];
    if (!gl && !gv) return OAR_OK;
    int64_t n = DIM(o[2], -1);
    oar_tensor *eye = la_eye_like(n, o[0]->dtype);
    cx v = {o[2], o[3]}, vh = cx_H(v);
    cx dl = {go[0] ? go[0] : oar_zeros_like(o[0]), go[1] ? go[1] : oar_zeros_like(o[1])};
    cx inner;
    if (!gv) {
        inner = (cx){la_diag_embed(dl.re), la_diag_embed(dl.im)};
    } else {
        cx dv = {go[2] ? go[2] : oar_zeros_like(o[2]), go[3] ? go[3] : oar_zeros_like(o[3])};
        cx vhgv = cx_mm(vh, dv);
        oar_status st = phase_check(diag_of(vhgv.im, eye));
        if (st != OAR_OK) return st;
        oar_tensor *d = oar_unsqueeze(diag_of(vhgv.re, eye), -2);
        cx r = cx_sub(vhgv, cx_mm(vh, (cx){oar_mul(v.re, d), oar_mul(v.im, d)}));
        /* conj(E), with ones on the diagonal (masked below) */
        cx e = {oar_add(oar_sub(oar_unsqueeze(o[0], -2), oar_unsqueeze(o[0], -1)), eye),
                oar_sub(oar_unsqueeze(o[1], -1), oar_unsqueeze(o[1], -2))};
        cx q = cx_div(r, e);
        oar_tensor *off = oar_rsub_scalar(eye, 1.0);
        inner = (cx){oar_add(oar_mul(q.re, off), la_diag_embed(dl.re)),
                     oar_add(oar_mul(q.im, off), la_diag_embed(dl.im))};
    }
    g->gin[0] = cx_solve_re(vh, cx_mm(inner, vh));
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_linalg_eig = {
    .name = "linalg_eig", .n_inputs = 1, .n_outputs = 4, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64), .infer = eig_infer, .reference = eig_ref,
    .grad = eig_grad,
};

oar_status oar_linalg_eig(oar_tensor *a, oar_tensor **l_re, oar_tensor **l_im, oar_tensor **v_re,
                          oar_tensor **v_im) {
    oar_tensor *o[4];
    oar_status st = la_call(OAR_OP_linalg_eig, &a, 1, NULL, o, 4);
    if (st != OAR_OK) return st;
    *l_re = o[0];
    *l_im = o[1];
    *v_re = o[2];
    *v_im = o[3];
    return OAR_OK;
}
#endif
