/* The regularized incomplete gamma functions P(a, x) = gamma(a, x) / Gamma(a) (torch.special.gammainc,
 * torch.igamma) and Q = 1 - P (gammaincc, igammac), in double. Each is computed where it is the
 * smaller one and the other as 1 minus it, so neither loses digits to cancellation:
 *   - P by its power series x^a e^-x / Gamma(a+1) sum_k x^k / ((a+1)...(a+k)) (A&S 6.5.29) for x < a;
 *   - Q by Legendre's continued fraction for Gamma(a, x) (A&S 6.5.31), evaluated by the modified
 *     Lentz method, for x >= a;
 *   - for a < 1 and x < 0.75, where P is near 1, Q = 1 - x^a / Gamma(a+1) - (x^a / Gamma(a)) sum_k>=1
 *     (-x)^k / (k! (a+k)) from the series of gamma(a, x), with 1 - x^a / Gamma(a+1) as an expm1.
 * The factor x^a e^-x / Gamma(a) is taken for a >= 10 from Stirling's series as
 * sqrt(a / 2pi) exp(-a (t - log1p t) - omega(a)), t = x/a - 1, so large a loses nothing to the
 * cancellation in a ln x - x - lnGamma(a). The iterations grow as sqrt(a) near x = a: a above 1e12
 * is not accurate (torch uses Temme's uniform expansion there). Edge values as torch 1.13. OAR_HD:
 * shared with the CUDA kernels; no oar header. */
#ifndef OAR_SPECIAL_IGAMMA_H
#define OAR_SPECIAL_IGAMMA_H

#include "ops/hostdev.h"

#include <math.h>

#define OAR_IGAMMA_MAX_ITER 2000000

/* ln Gamma(1 + z) for |z| <= 1/2: z (1 - gamma) - log1p(z) + sum_k>=2 (-1)^k (zeta(k) - 1) z^k / k
 * (the Taylor series of ln Gamma about 1 with ln(1 + z)'s part summed in closed form; zeta(k) - 1
 * below computed with mpmath) */
OAR_HD static inline double oar_lgamma1p_small(double z) {
    const double zm1[39] = {
        0.6449340668482264, 0.2020569031595943, 0.08232323371113819, 0.03692775514336993, 0.01734306198444914,
        0.008349277381922827, 0.00407735619794434, 0.0020083928260822143, 0.0009945751278180853,
        0.0004941886041194645, 0.0002460865533080483, 0.00012271334757848915, 6.124813505870483e-05,
        3.058823630702049e-05, 1.528225940865187e-05, 7.637197637899763e-06, 3.81729326499984e-06,
        1.908212716553939e-06, 9.539620338727962e-07, 4.769329867878064e-07, 2.38450502727733e-07,
        1.1921992596531106e-07, 5.960818905125948e-08, 2.980350351465228e-08, 1.4901554828365043e-08,
        7.45071178983543e-09, 3.725334024788457e-09, 1.862659723513049e-09, 9.313274324196682e-10,
        4.656629065033784e-10, 2.3283118336765053e-10, 1.164155017270052e-10, 5.820772087902701e-11,
        2.9103850444971e-11, 1.4551921891041985e-11, 7.275959835057482e-12, 3.637979547378651e-12,
        1.818989650307066e-12, 9.094947840263888e-13};
    double s = 0.0, p = -z;
    for (int k = 2; k <= 40; k++) {
        p *= -z; /* (-z)^k */
        s += zm1[k - 2] * p / k;
    }
    return z * 0.42278433509846713 - log1p(z) + s;
}
/* ln Gamma(1 + a) for 0 <= a < 1: the series above, shifted by ln a for a >= 1/2 */
OAR_HD static inline double oar_lgamma1p(double a) {
    return a <= 0.5 ? oar_lgamma1p_small(a) : oar_lgamma1p_small(a - 1.0) + log(a);
}

/* t - log1p(t), by its series for |t| <= 1/2 (t^2/2 - t^3/3 + ...) */
OAR_HD static inline double oar_log1pmx_neg(double t, double ratio) {
    if (fabs(t) > 0.5) return t - log(ratio); /* ratio = 1 + t, rounded once (1 + t would lose it near -1) */
    double s = 0.0, p = t * t;
    for (int k = 2; k < 80; k++) {
        double term = p / k;
        s += term;
        if (fabs(term) < 1e-18 * s) break;
        p *= -t;
    }
    return s;
}

/* x^a e^-x / Gamma(a) */
OAR_HD static inline double oar_igamma_factor(double a, double x) {
    if (a < 10.0) {
        if (x < 700.0) {
            double p = pow(x, a);
            if (p > 1e-300 && p < 1e300) return p * exp(-x) / tgamma(a);
        }
        return exp(a * log(x) - x - lgamma(a));
    }
    /* Stirling: ln Gamma(a) = (a - 1/2) ln a - a + ln(2 pi)/2 + omega(a), omega by its series
     * sum B_2k / (2k (2k-1) a^(2k-1)), eight terms, below 1e-17 for a >= 10 */
    double r = 1.0 / (a * a);
    double omega = (1.0 / 12 + r * (-1.0 / 360 + r * (1.0 / 1260 + r * (-1.0 / 1680 + r * (1.0 / 1188 +
                    r * (-691.0 / 360360 + r * (1.0 / 156 + r * (-3617.0 / 122400)))))))) / a;
    return sqrt(a * 0.15915494309189535) * exp(-a * oar_log1pmx_neg((x - a) / a, x / a) - omega);
}

/* P by the series (x < a, or a < 1 and x < 0.75) */
OAR_HD static inline double oar_igamma_series(double a, double x) {
    double t = 1.0, s = 1.0;
    for (int k = 1; k < OAR_IGAMMA_MAX_ITER; k++) {
        t *= x / (a + k);
        s += t;
        if (t < 1e-17 * s) break;
    }
    return oar_igamma_factor(a, x) / a * s;
}

/* The depth n at which Lentz's forward evaluation of the upper-tail fraction below stops (a step's
 * factor rounds to 1): the fraction itself is then taken backward from a deeper start (why: below).
 * random_gamma.h's reparameterization gradient differentiates the same fraction. */
OAR_HD static inline int oar_igammac_cf_depth(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b;
    int n = 1;
    for (; n < OAR_IGAMMA_MAX_ITER; n++) {
        double an = -n * (n - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1.0 / d;
        if (fabs(d * c - 1.0) < 1e-16) break;
    }
    return n;
}

/* Q by the continued fraction (x >= a): Gamma(a, x) = e^-x x^a / (x + 1 - a - 1(1-a) / (x + 3 - a - ...)).
 * Lentz's forward evaluation stops once a step's factor rounds to 1, which near x = 1 is long before
 * the fraction has converged (the remaining factors, each within an ulp of 1, still move it by 1e-14);
 * so Lentz only measures the depth n, and the fraction is evaluated backward from depth 2n + 20,
 * where it agrees with mpmath to an ulp over the range tried (a from 1e-4 to 1e4). */
OAR_HD static inline double oar_igammac_cf(double a, double x) {
    int depth = 2 * oar_igammac_cf_depth(a, x) + 20;
    double f = x + 2.0 * depth + 1.0 - a;
    for (int i = depth; i >= 1; i--) f = (x + 2.0 * (i - 1) + 1.0 - a) - i * (i - a) / f;
    return oar_igamma_factor(a, x) / f;
}

/* Q for a < 1, x < 0.75 (past it the two parts cancel):
 * 1 - x^a/Gamma(a+1) - a x^a/Gamma(a+1) sum_k>=1 (-x)^k / (k! (a+k)) */
OAR_HD static inline double oar_igammac_small_a(double a, double x) {
    double e = a * log(x) - oar_lgamma1p(a);
    double s = 0.0, t = 1.0;
    for (int k = 1; k < 60; k++) {
        t *= -x / k;
        double term = t / (a + k);
        s += term;
        if (fabs(term) < 1e-18 * fabs(s)) break;
    }
    return -expm1(e) - a * exp(e) * s;
}

/* upper = 0: P(a, x); upper = 1: Q(a, x). torch 1.13's edges: NaN for a < 0 or x < 0; a = 0 gives
 * P = 1 (Q = 0) for x > 0 and NaN at x = 0; x = 0 gives P = 0; a = inf gives P = 0 unless x is inf
 * too (NaN); x = inf gives P = 1. */
OAR_HD static inline double oar_igamma_d(double a, double x, int upper) {
    if (a != a || x != x) return a + x;
    if (a < 0.0 || x < 0.0) return NAN;
    if (a == 0.0) return x > 0.0 ? (upper ? 0.0 : 1.0) : NAN;
    if (x == 0.0) return upper ? 1.0 : 0.0;
    if (a == INFINITY) return x == INFINITY ? NAN : (upper ? 1.0 : 0.0);
    if (x == INFINITY) return upper ? 0.0 : 1.0;
    if (a < 1.0 && x < 0.75) {
        if (upper) return oar_igammac_small_a(a, x);
        return oar_igamma_series(a, x);
    }
    if (x < a) {
        double p = oar_igamma_series(a, x);
        return upper ? 1.0 - p : p;
    }
    double q = oar_igammac_cf(a, x);
    return upper ? q : 1.0 - q;
}

#endif
