/* Sweep cases for standard_gamma and standard_gamma_grad. Draws are compared across kernels and
 * passes (the sweep resets the generator before each run). The sample path of a draw is not the
 * reparameterization derivative (that holds the quantile fixed, not the uniforms), so standard_gamma's
 * rule is checked against finite differences of the CDF in tests/test_standard_gamma.c instead;
 * standard_gamma_grad has no derivative (as in torch) and a bad case asserts the refusal. */
#include "sweep.h"

const sweep_case sweep_cases_random_gamma[] = {
    /* alpha >= 1 (Marsaglia-Tsang), alpha < 1 (the boost), alpha large, invalid alpha (NaN) */
    {"standard_gamma", "p:3x4", "", SWEEP_NO_GRAD},
    {"standard_gamma", "c0.01,0.3,0.99,1,2.5,40,1e5,0,-1:9", "", SWEEP_NO_GRAD},
    {"standard_gamma", "p:", "", SWEEP_NO_GRAD},
    {"standard_gamma", "p:0x3", "", SWEEP_NO_GRAD},
    {"standard_gamma", "p:70x33", "", SWEEP_NO_GRAD}, /* several chunks of the parallel loop */
    /* the series (log x <= psi(a + 1)), the continued fraction above, the asymptotic form past 1e4 */
    {"standard_gamma_grad", "p:3x4;p:3x4", "", SWEEP_NO_GRAD},
    {"standard_gamma_grad", "c0.01,0.3,1,2.5,40,2e4,3e6,0.5:8;c1e-30,2,0.01,9,30,2.01e4,2.99e6,0:8", "",
     SWEEP_NO_GRAD},
    {"standard_gamma_grad", "p:3x1;p:4", "", SWEEP_NO_GRAD},
    {0},
};

static bool bad_gamma_int(void) {
    int64_t shape[1] = {3};
    return oar_standard_gamma(oar_zeros(shape, 1, OAR_I64)) != NULL;
}
static bool bad_gamma_f16(void) {
    int64_t shape[1] = {3};
    return oar_standard_gamma(oar_zeros(shape, 1, OAR_F16)) != NULL;
}
static bool bad_gamma_grad_mixed(void) {
    int64_t shape[1] = {3};
    return oar_standard_gamma_grad(oar_zeros(shape, 1, OAR_F32), oar_zeros(shape, 1, OAR_F64)) != NULL;
}
/* a second derivative through a draw is refused with the reason */
static bool grad_of_grad(void) {
    oar_scope_begin();
    oar_tensor *a = oar_scalar(1.5, OAR_F64), *x = oar_scalar(0.75, OAR_F64), *g = NULL;
    oar_set_requires_grad(x, true);
    oar_tensor *y = oar_standard_gamma_grad(a, x);
    oar_grad_opts o = {0};
    bool ok = y && oar_grad(&y, 1, NULL, &x, 1, &g, &o) == OAR_OK;
    oar_release(g);
    oar_scope_end();
    return ok;
}

const sweep_bad sweep_bad_random_gamma[] = {
    {"standard_gamma of an i64 tensor", bad_gamma_int, "standard_gamma: expected alpha of dtype f32 or f64, got i64"},
    {"standard_gamma of an f16 tensor", bad_gamma_f16, "standard_gamma: expected alpha of dtype f32 or f64, got f16"},
    {"standard_gamma_grad of f32 and f64", bad_gamma_grad_mixed, "got f32 (input 0) and f64 (input 1)"},
    {"standard_gamma_grad's derivative", grad_of_grad, "standard_gamma_grad: its derivative is not implemented"},
    {0},
};
