/* Sweep cases for torch.special's Bessel functions, Airy's Ai, the incomplete gamma functions,
 * zeta and the orthogonal polynomials: each method's range and the boundaries between them
 * (series / quadrature / asymptotic), both signs, the poles, broadcasting. Gradients by finite
 * differences where the ops have them; the rest are NONDIFF as in torch. */
#include "sweep.h"

#include <math.h>

#define NOT_IN0 SWEEP_GRAD_NOT_IN0

const sweep_case sweep_cases_special[] = {
    /* I0, I1 and their scaled forms: the series up to 30, the asymptotic series beyond, both signs */
    {"i0", "n:3x4", ""},
    {"i0", "c-12,-2.5,0,0.75,3,9:6", ""},
    {"i0", "c29.5,-31,33:3", ""}, /* the gradient across the switch to the asymptotic series */
    {"i0", "c-35,-2.5,0,0.75,29.5,31,-80,12:8", "", SWEEP_NO_GRAD}, /* magnitudes apart: values only */
    {"i0e", "n:3x4", ""},
    {"i0e", "c-35,-2.5,0.5,0.75,29.5,31,-80,400:8", ""},
    {"i1", "n:3x4", ""},
    {"i1", "c-12,-2.5,0,0.75,3,9:6", ""},
    {"i1", "c29.5,-31,33:3", ""},
    {"i1", "c-35,-2.5,0,0.75,29.5,31,-80,12:8", "", SWEEP_NO_GRAD},
    {"i1e", "n:3x4", ""},
    {"i1e", "c-35,-2.5,0,0.75,29.5,31,-80,400:8", ""},
    {"modified_bessel_i0", "c-35,-2.5,0,0.75,29.5,31,-80,12:2x4", ""},
    {"modified_bessel_i1", "n:3x4", ""},
    /* K: the series to 1, the trapezoid rule beyond (its step shrinks past 36), 0 and negatives */
    {"modified_bessel_k0", "p:3x4", ""},
    {"modified_bessel_k0", "c0,0.25,0.9,1.1,3.5,30,120,800,-1:9", ""},
    {"modified_bessel_k1", "p:3x4", ""},
    {"modified_bessel_k1", "c0,0.25,0.9,1.1,3.5,30,120,800,-1:9", ""},
    {"scaled_modified_bessel_k0", "c0.25,0.9,1.1,3.5,30,120,800,1e6:8", ""},
    {"scaled_modified_bessel_k1", "p:2x3", ""},
    {"scaled_modified_bessel_k1", "c0.25,0.9,1.1,3.5,30,120,800,1e6:8", ""},
    /* J and Y: the double-double series to 25 (a zero of J0 inside), Hankel's expansion beyond */
    {"bessel_j0", "n:3x4", ""},
    {"bessel_j0", "c0,2.404825557695773,-7.5,24.9,25.1,-80,1e4,0.001:8", ""},
    {"bessel_j1", "n:3x4", ""},
    {"bessel_j1", "c0,3.8317059702075125,-7.5,24.9,25.1,-80,1e4,0.001:8", ""},
    {"bessel_y0", "p:3x4", ""},
    {"bessel_y0", "c0,0.001,0.8935769662791675,7.5,24.9,25.1,80,1e4,-1:9", ""},
    {"bessel_y1", "p:3x4", ""},
    {"bessel_y1", "c0,0.001,2.197141326031017,7.5,24.9,25.1,80,1e4,-1:9", ""},
    {"spherical_bessel_j0", "n:3x4", ""},
    {"spherical_bessel_j0", "c0,1e-8,-3.14159,50,-1e3:5", ""},
    /* Ai: the asymptotic expansion below -10, the series on [-10, 1], K_1/3 above */
    {"airy_ai", "n:3x4", ""},
    {"airy_ai", "c-50,-10.5,-9.5,-2.338107410459767,0,0.5,1.5,8,60,-1e3:10", ""},
    /* P(a, x) and Q: the series (x < a), the continued fraction (x >= a), the small-a form; the
     * gradient in x (none in a, as torch) */
    {"gammainc", "p:3x4;p:3x4", "", NOT_IN0},
    {"gammainc", "c0.3,2.5,12,40,0.05,7:6;c0.2,1.7,30,38,1.2,0.5:6", "", NOT_IN0},
    {"gammainc", "p:3x1;p:4", "", NOT_IN0},
    {"gammaincc", "p:3x4;p:3x4", "", NOT_IN0},
    {"gammaincc", "c0.3,2.5,12,40,0.05,7:6;c0.2,1.7,30,38,1.2,0.5:6", "", NOT_IN0},
    {"gammaincc", "p:;p:2x3", "", NOT_IN0},
    /* Hurwitz zeta, broadcast; differentiable in q */
    {"zeta", "c1.5,2,3.5,7:4;p:3x4", "", NOT_IN0},
    {"zeta", "c2,3,4.5:3;c0.5,1.5,9.5:3", "", NOT_IN0},
    /* the polynomials: degrees 0..70 (the trigonometric and hyperbolic forms past 6 and 64), negative
     * and fractional degrees, x inside and outside [-1, 1] */
    {"chebyshev_polynomial_t", "u:3x4;c0,1,2,3,5,8,13,30,-1,4.5,64,70:3x4", ""},
    {"chebyshev_polynomial_t", "c1.5,-1.2,3,-0.5,1,-1:6;c70,71,80,66,9,9:6", ""},
    {"chebyshev_polynomial_u", "u:3x4;c0,1,2,3,5,8,13,30,-1,4.5,64,70:3x4", ""},
    {"chebyshev_polynomial_u", "c1.5,-1.2,3,-0.5,1,-1:6;c70,71,80,66,9,9:6", ""},
    {"chebyshev_polynomial_v", "u:3x4;c0,1,2,3,5,8,13,30,-1,4.5,64,70:3x4", ""},
    {"chebyshev_polynomial_v", "c1.5,-1.2,3,-0.5,1,-1:6;c70,71,80,66,9,9:6", ""},
    {"chebyshev_polynomial_w", "u:3x4;c0,1,2,3,5,8,13,30,-1,4.5,64,70:3x4", ""},
    {"chebyshev_polynomial_w", "c1.5,-1.2,3,-0.5,1,-1:6;c70,71,80,66,9,9:6", ""},
    {"shifted_chebyshev_polynomial_t", "c0.1,0.5,0.9,1.3,-0.2,0.75:6;c0,1,5,9,70,3:6", ""},
    {"shifted_chebyshev_polynomial_u", "c0.1,0.5,0.9,1.3,-0.2,0.75:6;c0,1,5,9,70,3:6", ""},
    {"shifted_chebyshev_polynomial_v", "c0.1,0.5,0.9,1.3,-0.2,0.75:6;c0,1,5,9,70,3:6", ""},
    {"shifted_chebyshev_polynomial_w", "u:2x3;c0,1,5,9,70,3:3", ""},
    {"hermite_polynomial_h", "n:3x4;c0,1,2,3,4,5,6,7,10,20,-2,1.5:3x4", ""},
    {"hermite_polynomial_h", "c0,0,0.5:3;c7,8,40:3", ""},
    {"hermite_polynomial_he", "n:3x4;c0,1,2,3,4,5,6,7,10,20,-2,1.5:3x4", ""},
    {"hermite_polynomial_he", "n:2x1;c0,3,9:3", ""},
    {"laguerre_polynomial_l", "p:3x4;c0,1,2,3,4,5,6,7,10,20,-2,1.5:3x4", ""},
    {"laguerre_polynomial_l", "c0,-1.5,30:3;c9,9,50:3", ""},
    {"legendre_polynomial_p", "u:3x4;c0,1,2,3,4,5,6,7,10,20,-2,1.5:3x4", ""},
    {"legendre_polynomial_p", "c1,-1,0.3,2.5:4;c7,7,50,9:4", ""},
    {0},
};

static oar_tensor *vec(oar_dtype dt) {
    int64_t shape[1] = {3};
    return oar_zeros(shape, 1, dt);
}
static bool bad_i0_int(void) { return oar_i0(vec(OAR_I64)) != NULL; }
static bool bad_zeta_mixed(void) { return oar_zeta(vec(OAR_F32), vec(OAR_F64)) != NULL; }
static bool bad_legendre_shape(void) {
    int64_t a[1] = {3}, b[1] = {4};
    return oar_legendre_polynomial_p(oar_zeros(a, 1, OAR_F32), oar_zeros(b, 1, OAR_F32)) != NULL;
}
/* the derivative torch does not define is refused, with the reason */
static bool grad_in0(oar_tensor *(*f)(oar_tensor *, oar_tensor *)) {
    oar_scope_begin();
    oar_tensor *a = oar_scalar(1.5, OAR_F64), *x = oar_scalar(0.75, OAR_F64), *g = NULL;
    oar_set_requires_grad(a, true);
    oar_tensor *y = f(a, x);
    oar_grad_opts o = {0};
    bool ok = y && oar_grad(&y, 1, NULL, &a, 1, &g, &o) == OAR_OK;
    oar_release(g);
    oar_scope_end();
    return ok;
}
static bool grad_gammainc_a(void) { return grad_in0(oar_gammainc); }
static bool grad_gammaincc_a(void) { return grad_in0(oar_gammaincc); }
static bool grad_zeta_x(void) { return grad_in0(oar_zeta); }

const sweep_bad sweep_bad_special[] = {
    {"i0 of an i64 tensor", bad_i0_int, "i0: expected the input to have a floating dtype"},
    {"zeta of f32 and f64", bad_zeta_mixed, "got f32 (input 0) and f64 (input 1)"},
    {"legendre_polynomial_p of shapes [3] and [4]", bad_legendre_shape, "legendre_polynomial_p"},
    {"gammainc's derivative in a", grad_gammainc_a,
     "gammainc: the derivative with respect to a (input 0) is not implemented, as in torch 1.13"},
    {"gammaincc's derivative in a", grad_gammaincc_a,
     "gammaincc: the derivative with respect to a (input 0) is not implemented"},
    {"zeta's derivative in x", grad_zeta_x, "zeta: the derivative with respect to x (input 0) is not implemented"},
    {0},
};
