/* standard_gamma and standard_gamma_grad:
 *  - the reparameterization gradient against implicit differentiation of the CDF by finite differences:
 *    dx/da = -(dP/da) / (dP/dx), dP/da by a 4-point difference of oar_gammainc (of gammaincc where the
 *    upper tail is the smaller, so the difference keeps its digits), dP/dx from its closed form; over
 *    every method of the kernel (series, continued fraction, asymptotic), f64 within 1e-6 and f32 within
 *    1e-5 relative;
 *  - autograd through oar_standard_gamma gives standard_gamma_grad at the draws;
 *  - draws: mean a and variance a for small, unit and large a (5-sigma bounds), the same bits at one
 *    and at four threads and after reseeding, and independent successive calls;
 *  - the gradient kernel's threaded contiguous path and its strided walk give the same bits. */
#include "test_util.h"

#include <float.h>

static double cdf(double a, double x, int upper) {
    oar_scope_begin();
    oar_tensor *r = upper ? oar_gammaincc(oar_scalar(a, OAR_F64), oar_scalar(x, OAR_F64))
                          : oar_gammainc(oar_scalar(a, OAR_F64), oar_scalar(x, OAR_F64));
    double v = NAN;
    oar_item(r, &v);
    oar_scope_end();
    return v;
}

/* -(dP/da) / (dP/dx) with dP/da = -dQ/da by finite differences */
static double fd_grad(double a, double x) {
    int upper = cdf(a, x, 1) < 0.5;
    double h = 1e-3 * (a < 1 ? a : sqrt(a)), s = upper ? -1.0 : 1.0;
    double d = s * (-cdf(a + 2 * h, x, upper) + 8 * cdf(a + h, x, upper) - 8 * cdf(a - h, x, upper) +
                    cdf(a - 2 * h, x, upper)) / (12 * h);
    double density = exp((a - 1) * log(x) - x - lgamma(a));
    return -d / density;
}

static double grad_at(double a, double x, oar_dtype dt) {
    oar_scope_begin();
    double v = NAN;
    oar_item(oar_standard_gamma_grad(oar_scalar(a, dt), oar_scalar(x, dt)), &v);
    oar_scope_end();
    return v;
}

static void test_grad_vs_cdf(void) {
    const double as[] = {0.02, 0.3, 0.9, 1.0, 2.5, 7.0, 40.0, 300.0, 2e4};
    const double qs[] = {1e-4, 0.05, 0.4, 0.5, 0.6, 0.95, 0.9999}; /* x at about these quantiles */
    double worst64 = 0, worst32 = 0;
    for (int i = 0; i < (int)(sizeof as / sizeof as[0]); i++)
        for (int j = 0; j < (int)(sizeof qs / sizeof qs[0]); j++) {
            double a = as[i], lo = 0, hi = a + 20 * sqrt(a) + 40;
            for (int it = 0; it < 200; it++) { /* bisect P(a, x) = q on a log scale near 0 */
                double mid = lo == 0 ? hi * 1e-12 : (lo + hi) / 2;
                if (lo == 0 && cdf(a, mid, 0) < qs[j]) lo = mid;
                else if (lo == 0) hi = mid;
                else if (cdf(a, mid, 0) < qs[j]) lo = mid;
                else hi = mid;
                if (lo == 0 && hi < 1e-280) break;
            }
            double x = lo > 0 ? (lo + hi) / 2 : hi;
            if (!(x > 1e-250)) continue; /* a tiny a's lowest quantile underflows: covered by the sweep */
            double want = fd_grad(a, x), got = grad_at(a, x, OAR_F64);
            double e64 = fabs(got - want) / fabs(want);
            double e32 = fabs(grad_at((float)a, (float)x, OAR_F32) - fd_grad((float)a, (float)x)) / fabs(want);
            if (e64 > 1e-6 || e32 > 1e-5)
                fprintf(stderr, "a=%g x=%.17g: dx/da %.17g, by the CDF %.17g (f64 %.2e, f32 %.2e)\n", a, x, got,
                        want, e64, e32);
            if (x > 1e-30) { /* below, f32 has no x */
                worst32 = e32 > worst32 ? e32 : worst32;
            }
            worst64 = e64 > worst64 ? e64 : worst64;
        }
    printf("standard_gamma_grad vs finite differences of the CDF: worst relative %.2e (f64), %.2e (f32)\n",
           worst64, worst32);
    CHECK(worst64 < 1e-6);
    CHECK(worst32 < 1e-5);
    /* edges: x = 0 gives 0, invalid arguments NaN */
    CHECK(grad_at(2.0, 0.0, OAR_F64) == 0.0);
    CHECK(isnan(grad_at(-1.0, 1.0, OAR_F64)));
    CHECK(isnan(grad_at(1.0, -1.0, OAR_F64)));
}

static oar_tensor *filled(int64_t n, double a, oar_dtype dt) {
    int64_t shape[1] = {n};
    return oar_full(shape, 1, a, dt);
}

static void moments(oar_tensor *x, double *mean, double *var) {
    int64_t n = oar_numel(x);
    double *buf = malloc(sizeof(double) * (size_t)n), s = 0, s2 = 0;
    oar_copy_to_buffer(x, buf, sizeof(double) * (size_t)n, OAR_F64);
    for (int64_t i = 0; i < n; i++) s += buf[i];
    *mean = s / n;
    for (int64_t i = 0; i < n; i++) s2 += (buf[i] - *mean) * (buf[i] - *mean);
    *var = s2 / (n - 1);
    free(buf);
}

static void test_draws(void) {
    const int64_t n = 200000;
    const double as[] = {0.05, 0.7, 1.0, 3.3, 250.0};
    for (int i = 0; i < 5; i++)
        for (int d = 0; d < 2; d++) {
            oar_scope_begin();
            double a = as[i], mean, var;
            oar_dtype dt = d ? OAR_F32 : OAR_F64;
            oar_tensor *x = oar_standard_gamma(filled(n, a, dt));
            CHECK(x && oar_dtype_of(x) == dt);
            moments(x, &mean, &var);
            /* sd of the sample mean sqrt(a / n); of the sample variance sqrt((m4 - var^2) / n), m4 = 3a^2 + 6a */
            double sd_var = sqrt((3 * a * a + 6 * a - a * a) / n);
            if (fabs(mean - a) > 5 * sqrt(a / n) || fabs(var - a) > 5 * sd_var)
                fprintf(stderr, "Gamma(%g) %s: mean %g, variance %g\n", a, d ? "f32" : "f64", mean, var);
            CHECK(fabs(mean - a) <= 5 * sqrt(a / n));
            CHECK(fabs(var - a) <= 5 * sd_var);
            double lo = INFINITY;
            double *buf = malloc(sizeof(double) * (size_t)n);
            oar_copy_to_buffer(x, buf, sizeof(double) * (size_t)n, OAR_F64);
            for (int64_t k = 0; k < n; k++) lo = buf[k] < lo ? buf[k] : lo;
            free(buf);
            CHECK(lo >= (d ? FLT_MIN : DBL_MIN)); /* clamped at the smallest normal, never 0 */
            oar_scope_end();
        }
    /* invalid alpha gives NaN */
    oar_scope_begin();
    double v = 0;
    oar_item(oar_standard_gamma(oar_scalar(-1.0, OAR_F64)), &v);
    CHECK(isnan(v));
    oar_scope_end();
}

static void test_determinism(void) {
    oar_scope_begin();
    oar_tensor *alpha = oar_standard_gamma(filled(5000, 1.5, OAR_F64)); /* varied alphas: itself a draw */
    alpha = oar_add_scalar(alpha, 0.01);
    oar_set_num_threads(1);
    oar_manual_seed(123);
    oar_tensor *a = oar_standard_gamma(alpha), *a2 = oar_standard_gamma(alpha);
    oar_set_num_threads(4);
    oar_manual_seed(123);
    oar_tensor *b = oar_standard_gamma(alpha);
    CHECK(t_same_bits(a, b));
    CHECK(!t_same_bits(a, a2)); /* the second call drew fresh counters */
    oar_scope_end();
}

static void test_autograd(void) {
    oar_scope_begin();
    int64_t shape[1] = {6};
    double vals[6] = {0.05, 0.4, 1.0, 2.5, 30.0, 4e4};
    oar_tensor *alpha = oar_from_data(vals, shape, 1, OAR_F64);
    oar_set_requires_grad(alpha, true);
    oar_tensor *x = oar_standard_gamma(alpha);
    CHECK(oar_backward(oar_sum(x, NULL, 0, false), NULL, false) == OAR_OK);
    oar_tensor *g = oar_grad_get(alpha), *want = oar_standard_gamma_grad(alpha, oar_detach(x));
    CHECK(g != NULL && t_same_bits(g, want));
    for (int i = 0; i < 6; i++) CHECK(t_at(g, i) > 0); /* a larger alpha moves every quantile up */
    oar_scope_end();
}

/* the threaded contiguous path and the strided walk (broadcast alpha, transposed draws) agree bit for bit */
static void test_layouts_agree(void) {
    oar_scope_begin();
    int64_t col[2] = {300, 1}, full[2] = {300, 40};
    oar_tensor *alpha = oar_add_scalar(oar_standard_gamma(oar_full(col, 2, 2.0, OAR_F64)), 0.05);
    oar_tensor *alpha_full = oar_contiguous(oar_expand(alpha, full, 2));
    oar_tensor *x = oar_standard_gamma(alpha_full);
    oar_tensor *fast = oar_standard_gamma_grad(alpha_full, x);
    oar_tensor *broadcast = oar_standard_gamma_grad(alpha, x);
    oar_tensor *xt = oar_transpose(oar_contiguous(oar_transpose(x, 0, 1)), 0, 1); /* x's values, strided */
    oar_tensor *strided = oar_standard_gamma_grad(alpha_full, xt);
    CHECK(t_same_bits(fast, broadcast));
    CHECK(t_same_bits(fast, oar_contiguous(strided)));
    oar_scope_end();
}

int main(void) {
    test_layouts_agree();
    test_grad_vs_cdf();
    test_draws();
    test_determinism();
    test_autograd();
    return test_summary("test_standard_gamma");
}
