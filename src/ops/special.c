/* torch.special's Bessel functions, Airy's Ai, the regularized incomplete gamma functions, Hurwitz's
 * zeta and the orthogonal polynomials (x and the degree n, both tensors). The scalar functions live
 * in special_bessel.h, special_igamma.h, special_orth.h and special_math.h (zeta), which the CUDA
 * kernels compile too; the reference kernels here compute them in double through the dtype traits.
 * Floats only: the front ends promote integers as torch does. Gradients where torch 1.13 defines
 * them (i0, i0e, i1, i1e; gammainc/gammaincc and zeta in their second input); the rest are not
 * differentiable, as in torch, where their outputs do not require grad. */
#include "ops/op.h"
#include "ops/special_bessel.h"
#include "ops/special_igamma.h"
#include "ops/special_math.h"
#include "ops/special_orth.h"

#include <math.h>

typedef double (*special1_f)(double x);
typedef double (*special2_f)(double a, double b);

static oar_status special_ref(oar_tensor *const *in, int n_in, oar_tensor *const *out, special1_f f1,
                              special2_f f2) {
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[3] = {y, in[0], n_in > 1 ? in[1] : NULL};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, n_in + 1);
    const oar_dtype_traits *ti = &oar_dtypes[in[0]->dtype], *to = &oar_dtypes[y->dtype];
    if (n_in == 1) {
        do to->store(it.ptr[0], f1(ti->load(it.ptr[1]))); while (oar_iter_next(&it));
    } else {
        do to->store(it.ptr[0], f2(ti->load(it.ptr[1]), ti->load(it.ptr[2]))); while (oar_iter_next(&it));
    }
    return OAR_OK;
}

static oar_status special_infer(const char *name, oar_tensor *const *in, int n_in, oar_meta *out, int *n_out) {
    oar_status st = n_in == 2 ? oar_check_same_dtype(name, in, 2) : OAR_OK;
    if (st != OAR_OK) return st;
    if ((st = oar_check_float(name, in[0], n_in == 2 ? "the inputs" : "the input")) != OAR_OK) return st;
    *n_out = 1;
    return oar_infer_broadcast(name, in, n_in, in[0]->dtype, out);
}

/* ---- gradient rules */
#define GOUT g->gout[0]
#define GRAD_TO(i, expr) \
    do { if (g->needs[i]) g->gin[i] = oar_sum_to_shape((expr), g->in[i]->shape, g->in[i]->ndim); } while (0)

static oar_status i0_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_mul(GOUT, oar_i1(g->in[0]));
    return OAR_OK;
}
/* d/dx e^-|x| I0 = i1e(x) - sgn(x) i0e(x) */
static oar_status i0e_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0];
    g->gin[0] = oar_mul(GOUT, oar_sub(oar_i1e(x), oar_mul(oar_sign(x), g->out[0])));
    return OAR_OK;
}
/* d/dx I1 = I0 - I1/x, 1/2 at 0; d/dx e^-|x| I1 = i0e - i1e (sgn x + 1/x), 1/2 at 0 (torch's rules) */
static oar_status i1_grads(oar_grad_ctx *g, int scaled) {
    oar_tensor *x = g->in[0], *y = g->out[0];
    oar_tensor *zero = oar_eq(x, oar_zeros_like(x));
    oar_tensor *xs = oar_where(zero, oar_add_scalar(oar_zeros_like(x), 1.0), x); /* no 1/0 off the selected side */
    oar_tensor *d = oar_sub(scaled ? oar_i0e(x) : oar_i0(x), oar_div(y, xs));
    if (scaled) d = oar_sub(d, oar_mul(y, oar_sign(x)));
    g->gin[0] = oar_mul(GOUT, oar_where(zero, oar_add_scalar(oar_zeros_like(x), 0.5), d));
    return OAR_OK;
}
static oar_status i1_grad(oar_grad_ctx *g) { return i1_grads(g, 0); }
static oar_status i1e_grad(oar_grad_ctx *g) { return i1_grads(g, 1); }

static oar_status not_implemented(const char *op, const char *what) {
    return oar_error(OAR_ERR_UNSUPPORTED, "%s: the derivative with respect to %s (input 0) is not implemented, "
                                          "as in torch 1.13; detach that input (only input 1 has a gradient)",
                     op, what);
}
/* d/dx P(a, x) = e^-x x^(a-1) / Gamma(a) = -d/dx Q(a, x); none in a */
static oar_status igamma_grads(oar_grad_ctx *g, const char *op, double sign) {
    if (g->needs[0]) return not_implemented(op, "a");
    oar_tensor *a = g->in[0], *x = g->in[1];
    oar_tensor *e = oar_exp(oar_sub(oar_sub(oar_mul(oar_add_scalar(a, -1.0), oar_log(x)), x), oar_lgamma(a)));
    GRAD_TO(1, oar_mul_scalar(oar_mul(GOUT, e), sign));
    return OAR_OK;
}
static oar_status gammainc_grad(oar_grad_ctx *g) { return igamma_grads(g, "gammainc", 1.0); }
static oar_status gammaincc_grad(oar_grad_ctx *g) { return igamma_grads(g, "gammaincc", -1.0); }
/* d/dq zeta(x, q) = -x zeta(x + 1, q); none in x */
static oar_status zeta_grad(oar_grad_ctx *g) {
    if (g->needs[0]) return not_implemented("zeta", "x");
    oar_tensor *x = g->in[0], *q = g->in[1];
    GRAD_TO(1, oar_neg(oar_mul(GOUT, oar_mul(x, oar_zeta(oar_add_scalar(x, 1.0), q)))));
    return OAR_OK;
}

/* ---- the scalar functions */
static double i0_d(double x) { return oar_bessel_i_d(0, x); }
static double i1_d(double x) { return oar_bessel_i_d(1, x); }
static double i0e_d(double x) { return oar_bessel_ie_d(0, x); }
static double i1e_d(double x) { return oar_bessel_ie_d(1, x); }
static double k0_d(double x) { return oar_bessel_k_d(0, x, 0); }
static double k1_d(double x) { return oar_bessel_k_d(1, x, 0); }
static double k0e_d(double x) { return oar_bessel_k_d(0, x, 1); }
static double k1e_d(double x) { return oar_bessel_k_d(1, x, 1); }
static double j0_d(double x) { return oar_bessel_j_d(0, x); }
static double j1_d(double x) { return oar_bessel_j_d(1, x); }
static double y0_d(double x) { return oar_bessel_y_d(0, x); }
static double y1_d(double x) { return oar_bessel_y_d(1, x); }
static double gammainc_d(double a, double x) { return oar_igamma_d(a, x, 0); }
static double gammaincc_d(double a, double x) { return oar_igamma_d(a, x, 1); }
static double cheb_t(double x, double n) { return oar_chebyshev_d(OAR_ORTH_T, x, n); }
static double cheb_u(double x, double n) { return oar_chebyshev_d(OAR_ORTH_U, x, n); }
static double cheb_v(double x, double n) { return oar_chebyshev_d(OAR_ORTH_V, x, n); }
static double cheb_w(double x, double n) { return oar_chebyshev_d(OAR_ORTH_W, x, n); }
static double scheb_t(double x, double n) { return oar_shifted_chebyshev_d(OAR_ORTH_T, x, n); }
static double scheb_u(double x, double n) { return oar_shifted_chebyshev_d(OAR_ORTH_U, x, n); }
static double scheb_v(double x, double n) { return oar_shifted_chebyshev_d(OAR_ORTH_V, x, n); }
static double scheb_w(double x, double n) { return oar_shifted_chebyshev_d(OAR_ORTH_W, x, n); }
static double hermite_h(double x, double n) { return oar_hermite_d(1, x, n); }
static double hermite_he(double x, double n) { return oar_hermite_d(0, x, n); }

/* SPECIAL1 / SPECIAL2(name, scalar function, gradient rule, flags) */
#define SPECIAL_DEF(NAME, NIN, GRAD, FLAGS)                                                      \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a,            \
                                   oar_meta *out, int *n_out) {                                   \
        (void)a;                                                                                  \
        return special_infer(#NAME, in, n_in, out, n_out);                                        \
    }                                                                                             \
    const oar_op_def oar_opdef_##NAME = {                                                         \
        .name = #NAME, .n_inputs = NIN, .n_outputs = 1,                                           \
        .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_INPLACE_OK | OAR_OPF_AMP_DENY_F16 | (FLAGS), \
        .ref_dtypes = OAR_FLOAT_DTYPES, .infer = NAME##_infer, .reference = NAME##_ref, .grad = GRAD, \
    };
#define SPECIAL1(NAME, FN, GRAD, FLAGS)                                                           \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,            \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {          \
        (void)ctx; (void)n_out; (void)a;                                                          \
        return special_ref(in, n_in, out, FN, NULL);                                              \
    }                                                                                             \
    SPECIAL_DEF(NAME, 1, GRAD, FLAGS)
#define SPECIAL2(NAME, FN, GRAD, FLAGS)                                                           \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,            \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {          \
        (void)ctx; (void)n_out; (void)a;                                                          \
        return special_ref(in, n_in, out, NULL, FN);                                              \
    }                                                                                             \
    SPECIAL_DEF(NAME, 2, GRAD, FLAGS)

#define NONDIFF OAR_OPF_NONDIFF
SPECIAL1(i0, i0_d, i0_grad, 0)
SPECIAL1(i0e, i0e_d, i0e_grad, 0)
SPECIAL1(i1, i1_d, i1_grad, 0)
SPECIAL1(i1e, i1e_d, i1e_grad, 0)
/* torch.special's modified_bessel_* are separate functions without a gradient (i0 and i1 have one) */
SPECIAL1(modified_bessel_i0, i0_d, NULL, NONDIFF)
SPECIAL1(modified_bessel_i1, i1_d, NULL, NONDIFF)
SPECIAL1(modified_bessel_k0, k0_d, NULL, NONDIFF)
SPECIAL1(modified_bessel_k1, k1_d, NULL, NONDIFF)
SPECIAL1(scaled_modified_bessel_k0, k0e_d, NULL, NONDIFF)
SPECIAL1(scaled_modified_bessel_k1, k1e_d, NULL, NONDIFF)
SPECIAL1(bessel_j0, j0_d, NULL, NONDIFF)
SPECIAL1(bessel_j1, j1_d, NULL, NONDIFF)
SPECIAL1(bessel_y0, y0_d, NULL, NONDIFF)
SPECIAL1(bessel_y1, y1_d, NULL, NONDIFF)
SPECIAL1(spherical_bessel_j0, oar_spherical_j0_d, NULL, NONDIFF)
SPECIAL1(airy_ai, oar_airy_ai_d, NULL, NONDIFF)
SPECIAL2(gammainc, gammainc_d, gammainc_grad, 0)
SPECIAL2(gammaincc, gammaincc_d, gammaincc_grad, 0)
SPECIAL2(zeta, oar_zeta_d, zeta_grad, 0)
SPECIAL2(chebyshev_polynomial_t, cheb_t, NULL, NONDIFF)
SPECIAL2(chebyshev_polynomial_u, cheb_u, NULL, NONDIFF)
SPECIAL2(chebyshev_polynomial_v, cheb_v, NULL, NONDIFF)
SPECIAL2(chebyshev_polynomial_w, cheb_w, NULL, NONDIFF)
SPECIAL2(shifted_chebyshev_polynomial_t, scheb_t, NULL, NONDIFF)
SPECIAL2(shifted_chebyshev_polynomial_u, scheb_u, NULL, NONDIFF)
SPECIAL2(shifted_chebyshev_polynomial_v, scheb_v, NULL, NONDIFF)
SPECIAL2(shifted_chebyshev_polynomial_w, scheb_w, NULL, NONDIFF)
SPECIAL2(hermite_polynomial_h, hermite_h, NULL, NONDIFF)
SPECIAL2(hermite_polynomial_he, hermite_he, NULL, NONDIFF)
SPECIAL2(laguerre_polynomial_l, oar_laguerre_d, NULL, NONDIFF)
SPECIAL2(legendre_polynomial_p, oar_legendre_d, NULL, NONDIFF)

/* ---- public functions */
#define PUBLIC1(NAME)                                 \
    oar_tensor *oar_##NAME(oar_tensor *x) {           \
        oar_tensor *in[1] = {x};                      \
        return oar_op_call1(OAR_OP_##NAME, in, 1, NULL); \
    }
#define PUBLIC2(NAME)                                       \
    oar_tensor *oar_##NAME(oar_tensor *a, oar_tensor *b) {  \
        oar_tensor *in[2] = {a, b};                         \
        return oar_op_call1(OAR_OP_##NAME, in, 2, NULL);    \
    }
PUBLIC1(i0) PUBLIC1(i0e) PUBLIC1(i1) PUBLIC1(i1e) PUBLIC1(modified_bessel_i0) PUBLIC1(modified_bessel_i1)
PUBLIC1(modified_bessel_k0) PUBLIC1(modified_bessel_k1) PUBLIC1(scaled_modified_bessel_k0)
PUBLIC1(scaled_modified_bessel_k1) PUBLIC1(bessel_j0) PUBLIC1(bessel_j1) PUBLIC1(bessel_y0) PUBLIC1(bessel_y1)
PUBLIC1(spherical_bessel_j0) PUBLIC1(airy_ai)
PUBLIC2(gammainc) PUBLIC2(gammaincc) PUBLIC2(zeta)
PUBLIC2(chebyshev_polynomial_t) PUBLIC2(chebyshev_polynomial_u) PUBLIC2(chebyshev_polynomial_v)
PUBLIC2(chebyshev_polynomial_w) PUBLIC2(shifted_chebyshev_polynomial_t) PUBLIC2(shifted_chebyshev_polynomial_u)
PUBLIC2(shifted_chebyshev_polynomial_v) PUBLIC2(shifted_chebyshev_polynomial_w) PUBLIC2(hermite_polynomial_h)
PUBLIC2(hermite_polynomial_he) PUBLIC2(laguerre_polynomial_l) PUBLIC2(legendre_polynomial_p)
