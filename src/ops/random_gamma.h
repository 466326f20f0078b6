/* The scalar work of standard_gamma and standard_gamma_grad (random_gamma.c), in double.
 *
 * Sampling: Marsaglia and Tsang (2000), "A simple method for generating gamma variables": for
 * alpha >= 1, d = alpha - 1/3, c = 1/sqrt(9d), draw z ~ N(0,1) and u ~ U(0,1) until v = (1 + cz)^3 > 0
 * passes the squeeze u < 1 - 0.0331 z^4 or the full test log u < z^2/2 + d (1 - v + log v); the sample
 * is d v. For alpha < 1, a Gamma(alpha + 1) sample times U^(1/alpha) (their boost), taken in logs so a
 * tiny alpha underflows to 0 (which the kernel clamps) instead of producing NaN.
 *
 * Gradient: the reparameterization derivative dx/dalpha at a fixed quantile, by implicit
 * differentiation of the CDF P(alpha, x): dx/da = -(dP/da) / (dP/dx). With
 * Gamma(a) dP/da = int_0^x (log t - psi(a)) t^(a-1) e^-t dt, each of two forms is free of cancellation
 * on its side of log x = psi(a + 1):
 *   - below, the positive-term series P = x^a e^-x sum_k x^k / Gamma(a + k + 1) differentiated term by
 *     term: dx/da = x sum_k t_k (psi(a + k + 1) - log x), t_k = x^k Gamma(a) / Gamma(a + k + 1), every
 *     term positive;
 *   - above, the upper tail Gamma(a, x) = e^-x x^a / f with Legendre's continued fraction f, evaluated
 *     backward as in special_igamma.h while carrying its derivative g = df/da:
 *     dx/da = x ((log x - psi(a)) / f - g / f^2), both parts positive there.
 * Both agree with mpmath to 3e-13 relative (a from 1e-3 to 1e4, x over 12 decades). For a > 1e4 both
 * need O(sqrt a) terms, and Temme's uniform expansion to leading order, P ~ Phi(eta sqrt a),
 * differentiated at fixed eta sqrt a gives dx/da = lambda log(lambda) / (lambda - 1), lambda = x / a;
 * its relative error is 1/(6a) + O(a^-3/2), so the 1/(6a) is put back: within 2e-9 at a = 1e4.
 * Include after ops/op.h, which declares oar_philox. */
#ifndef OAR_RANDOM_GAMMA_H
#define OAR_RANDOM_GAMMA_H

#include "ops/special_igamma.h"
#include "ops/special_math.h"

#include <math.h>
#include <stdint.h>

#define OAR_GAMMA_ASYMPTOTIC_ALPHA 1e4
#define OAR_GAMMA_MAX_TERMS 2000000

/* dx/da by the positive-term series (log x <= psi(a + 1)) */
static inline double oar_gamma_grad_series(double a, double x) {
    double lx = log(x), psi = oar_digamma_d(a + 1.0), t = 1.0 / a;
    double s = t * (psi - lx);
    for (int k = 1; k < OAR_GAMMA_MAX_TERMS; k++) {
        psi += 1.0 / (a + k);
        t *= x / (a + k);
        double term = t * (psi - lx);
        s += term;
        if (term < 1e-17 * s) break;
    }
    return x * s;
}

/* dx/da by the continued fraction of the upper tail (log x > psi(a + 1), so x > 0.56). Lentz's
 * forward pass only finds the depth n at which it converges; the fraction and its derivative are then
 * taken backward from depth 2n + 40 (special_igamma.h explains why). */
static inline double oar_gamma_grad_cf(double a, double x) {
    int depth = 2 * oar_igammac_cf_depth(a, x) + 40;
    double f = x + 2.0 * depth + 1.0 - a, g = -1.0;
    for (int i = depth; i >= 1; i--) {
        double an = i * (i - a);
        double fn = (x + 2.0 * (i - 1) + 1.0 - a) - an / f;
        g = -1.0 + i / f + an * g / (f * f); /* d/da of the step, f and g of the deeper level */
        f = fn;
    }
    return x * ((log(x) - oar_digamma_d(a)) / f - g / (f * f));
}

/* dx/da of a Gamma(a, 1) sample x at its quantile; NaN outside a > 0, x >= 0 */
static inline double oar_gamma_sample_grad_d(double a, double x) {
    if (!(a > 0.0) || !(x >= 0.0) || isinf(a) || isinf(x)) return NAN;
    if (x == 0.0) return 0.0; /* x (psi - log x) / a -> 0 */
    if (a > OAR_GAMMA_ASYMPTOTIC_ALPHA) {
        double t = x / a - 1.0;
        double lead = t == 0.0 ? 1.0 : (1.0 + t) * log1p(t) / t;
        return lead * (1.0 + 1.0 / (6.0 * a));
    }
    if (log(x) <= oar_digamma_d(a + 1.0)) return oar_gamma_grad_series(a, x);
    return oar_gamma_grad_cf(a, x);
}

/* Philox words for attempt j of an element whose counters start at base: SLOTS counters per element,
 * slot 0 for the boost's uniform, slots 1.. for attempts; attempts past those (rare: each is accepted
 * with probability above 0.95) continue under a key derived from the round, so no counter is shared. */
#define OAR_GAMMA_SLOTS 8
static inline void oar_gamma_words(uint64_t seed, uint64_t base, int j, uint32_t w[4]) {
    int per = OAR_GAMMA_SLOTS - 1, round = j / per;
    uint64_t key = round ? seed ^ (0x9E3779B97F4A7C15ULL * (uint64_t)round) : seed;
    oar_philox(key, base + 1 + (uint64_t)(j % per), w);
}

/* One Gamma(alpha, 1) draw from the element's counters. NaN for alpha <= 0 or NaN. */
static inline double oar_gamma_draw(uint64_t seed, uint64_t base, double alpha) {
    if (!(alpha > 0.0)) return NAN;
    if (isinf(alpha)) return INFINITY;
    double log_boost = 0.0, a = alpha;
    uint32_t w[4];
    if (a < 1.0) {
        oar_philox(seed, base, w);
        double u = ((double)w[0] + 1.0) * (1.0 / 4294967296.0); /* (0, 1] */
        log_boost = log(u) / a;
        a += 1.0;
    }
    double d = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (int j = 0;; j++) {
        oar_gamma_words(seed, base, j, w);
        double u1 = ((double)w[2] + 1.0) * (1.0 / 4294967296.0), u2 = (double)w[3] * (1.0 / 4294967296.0);
        double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
        double v = 1.0 + c * z;
        if (v <= 0.0) continue;
        v = v * v * v;
        double u = ((double)w[0] + 0.5) * (1.0 / 4294967296.0); /* (0, 1) */
        double z2 = z * z;
        if (u < 1.0 - 0.0331 * z2 * z2 || log(u) < 0.5 * z2 + d * (1.0 - v + log(v))) {
            double x = d * v;
            return log_boost == 0.0 ? x : exp(log(x) + log_boost);
        }
    }
}

#endif
