/* Bessel functions of orders 0 and 1 (J, Y, I, K and the exponentially scaled I and K), the
 * spherical j0 and Airy's Ai, in double, written from their classical expansions:
 *   - ascending power series (Abramowitz & Stegun 9.1.10-11, 9.6.10-11, 10.4.2-3), summed in
 *     double-double where the terms alternate (special_dd.h) so the cancellation costs nothing;
 *   - Hankel's asymptotic expansions (A&S 9.2.5-10, 9.7.1-2, 10.4.60) past the point where their
 *     smallest term is below double precision (|x| > 25 for J/Y, x > 30 for I);
 *   - K_nu(x) = int_0^inf e^(-x cosh t) cosh(nu t) dt (A&S 9.6.24) by the trapezoid rule, which
 *     converges geometrically on this even, entire integrand; it serves K0, K1 for x > 1 and
 *     Ai(x) = sqrt(x/3)/pi K_1/3(2/3 x^3/2) for x > 1 (A&S 10.4.14).
 * The CPU reference and the CUDA kernels compile this one source (OAR_HD); no oar header. Edge
 * values follow torch 1.13 (tests/python check them). */
#ifndef OAR_SPECIAL_BESSEL_H
#define OAR_SPECIAL_BESSEL_H

#include "ops/special_dd.h"

#define OAR_SB_EULER_HI 0.5772156649015329 /* Euler's gamma as a double-double */
#define OAR_SB_EULER_LO -4.942915152430645e-18
#define OAR_SB_2_PI_HI 0.6366197723675814  /* 2 / pi */
#define OAR_SB_2_PI_LO -3.935735335036497e-17
#define OAR_SB_INV_SQRT_PI 0.5641895835477563
#define OAR_SB_INV_SQRT_2PI 0.3989422804014327
#define OAR_SB_INV_PI 0.3183098861837907

/* ---- modified Bessel functions of the first kind */

/* sum_k q^k / (k! (k+n)!), q = x^2/4, n = 0 or 1: positive terms, double-double so the ~50 terms
 * near x = 30 round once. I_n(x) = (x/2)^n times this. */
OAR_HD static inline double oar_bessel_i_series(int n, double x) {
    oar_dd q = oar_dd_two_prod(0.5 * x, 0.5 * x), t = oar_dd_from(1.0), s = t;
    for (int k = 1; k < 300; k++) {
        t = oar_dd_div_d(oar_dd_mul(t, q), (double)k * (double)(k + n));
        s = oar_dd_add(s, t);
        if (t.hi <= 1e-34 * s.hi) break;
    }
    return n ? oar_dd_mul_d(s, 0.5 * x).hi : s.hi;
}

/* e^-x I_n(x) for x >= 30: (2 pi x)^-1/2 sum_k (-1)^k a_k(n) / x^k with
 * a_k = prod_j<=k (4n^2 - (2j-1)^2) / (k! 8^k), stopped at its smallest term (below 1e-20 here). */
OAR_HD static inline double oar_bessel_i_asym_scaled(int n, double x) {
    double mu = 4.0 * n * n, t = 1.0, s = 0.0; /* s: the terms after the leading 1, added to it last */
    for (int k = 1; k < 100; k++) {
        double tn = -t * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * x);
        if (fabs(tn) >= fabs(t)) break;
        t = tn;
        s += t;
        if (fabs(t) < 1e-20) break;
    }
    return (1.0 + s) * OAR_SB_INV_SQRT_2PI / sqrt(x);
}

/* e^-|x| I_n(x); odd for n = 1 */
OAR_HD static inline double oar_bessel_ie_d(int n, double x) {
    if (x != x) return x;
    double ax = fabs(x), r;
    if (ax <= 30.0) r = oar_bessel_i_series(n, ax) * exp(-ax);
    else r = oar_bessel_i_asym_scaled(n, ax);
    return (n && x < 0) ? -r : r;
}
OAR_HD static inline double oar_bessel_i_d(int n, double x) {
    if (x != x) return x;
    double ax = fabs(x), r;
    if (ax <= 30.0) r = oar_bessel_i_series(n, ax);
    else if (ax > 714.0) r = INFINITY;
    else {
        double e = exp(0.5 * ax); /* e^x in two halves: finite up to I's own overflow at 713.98 */
        r = oar_bessel_i_asym_scaled(n, ax) * e * e;
    }
    return (n && x < 0) ? -r : r;
}

/* ---- modified Bessel functions of the second kind */

/* e^x K_nu(x) = int_0^inf e^(-x (cosh t - 1)) cosh(nu t) dt by the trapezoid rule. The integrand
 * is even and entire, so the error is about e^(x (1 - cos d) - 2 pi d / h) for any strip
 * |Im t| < d < pi/2: h = min(0.1, 0.6 / sqrt(x)) keeps it under 1e-20 for every x >= 0.5 (d = 1.4
 * below x = 36, d = 10.5 / sqrt(x) above). cosh t - 1 = 2 sinh^2(t/2) has no cancellation.
 * About 20-60 terms. */
OAR_HD static inline double oar_bessel_k_scaled_quad(double nu, double x) {
    double h = 0.6 / sqrt(x);
    if (h > 0.1) h = 0.1;
    oar_dd s = oar_dd_from(0.5); /* compensated: ~40 terms of similar size */
    for (int k = 1; k < 4000; k++) {
        double t = k * h, sh = sinh(0.5 * t), e = 2.0 * x * sh * sh;
        if (e - nu * t > 50.0) break;
        s = oar_dd_add(s, oar_dd_from(exp(-e) * cosh(nu * t)));
    }
    return s.hi * h;
}

/* K0 and K1 for 0 < x <= 1 from the ascending series (A&S 9.6.13, 9.6.11 with psi(k+1) =
 * H_k - gamma): K0 = -(ln(x/2) + gamma) I0(x) + sum_k>=1 H_k q^k/(k!)^2, both parts positive below
 * x = 1.12; K1 = 1/x + (ln(x/2) + gamma) I1(x) - (x/4) sum_k>=0 (H_k + H_k+1) q^k/(k!(k+1)!). */
OAR_HD static inline double oar_bessel_k_series(int n, double x) {
    double q = 0.25 * x * x, l = log(0.5 * x) + OAR_SB_EULER_HI, t = 1.0, s = 1.0, h = 0.0, w;
    if (n == 0) {
        w = 0.0;
        for (int k = 1; k < 60; k++) {
            t *= q / ((double)k * k);
            h += 1.0 / k;
            s += t;
            w += h * t;
            if (t < 1e-18 * s) break;
        }
        return -l * s + w;
    }
    w = 1.0; /* k = 0: H_0 + H_1 = 1 */
    for (int k = 1; k < 60; k++) {
        t *= q / ((double)k * (k + 1));
        h += 1.0 / k;
        s += t;
        w += (2.0 * h + 1.0 / (k + 1)) * t;
        if (t < 1e-18 * s) break;
    }
    return 1.0 / x + l * (0.5 * x * s) - 0.25 * x * w;
}

/* K_n(x) (scaled: e^x K_n(x)); +inf at 0, NaN below 0, as torch */
OAR_HD static inline double oar_bessel_k_d(int n, double x, int scaled) {
    if (x != x) return x;
    if (x < 0.0) return NAN;
    if (x == 0.0) return INFINITY;
    if (x == INFINITY) return 0.0;
    if (x <= 1.0) return scaled ? oar_bessel_k_series(n, x) * exp(x) : oar_bessel_k_series(n, x);
    double s = oar_bessel_k_scaled_quad((double)n, x);
    return scaled ? s : s * exp(-x);
}

/* ---- Bessel functions of the first and second kind */

/* J_n(x), n = 0, 1, |x| <= 25: (x/2)^n sum_k (-q)^k / (k! (k+n)!) in double-double. The terms
 * reach ~1e10 at x = 25 while J stays below 1: double-double leaves 20 digits. */
OAR_HD static inline oar_dd oar_bessel_j_series_dd(int n, double x) {
    oar_dd mq = oar_dd_neg(oar_dd_two_prod(0.5 * x, 0.5 * x)), t = oar_dd_from(1.0), s = t;
    double big = 1.0;
    for (int k = 1; k < 300; k++) {
        t = oar_dd_div_d(oar_dd_mul(t, mq), (double)k * (double)(k + n));
        s = oar_dd_add(s, t);
        double a = fabs(t.hi);
        if (a > big) big = a;
        else if (a < 1e-36 * big) break; /* past the peak the terms only shrink */
    }
    return n ? oar_dd_mul_d(s, 0.5 * x) : s;
}

/* Y_n(x), n = 0, 1, 0 < x <= 25 (A&S 9.1.13, 9.1.11): with t_k = (-q)^k / (k! (k+n)!),
 *   Y0 = (2/pi) [(ln(x/2) + gamma) J0 - sum_k>=1 H_k t_k]
 *   Y1 = (2/pi) [-1/x + (ln(x/2) + gamma) J1 - (x/4) sum_k>=0 (H_k + H_k+1) t_k]
 * every sum in double-double. */
OAR_HD static inline double oar_bessel_y_series(int n, double x) {
    oar_dd mq = oar_dd_neg(oar_dd_two_prod(0.5 * x, 0.5 * x)), t = oar_dd_from(1.0), s = t;
    oar_dd h = oar_dd_from(0.0), w = oar_dd_from(n ? 1.0 : 0.0);
    double big = 1.0;
    for (int k = 1; k < 300; k++) {
        t = oar_dd_div_d(oar_dd_mul(t, mq), (double)k * (double)(k + n));
        h = oar_dd_add(h, oar_dd_div_d(oar_dd_from(1.0), (double)k));
        s = oar_dd_add(s, t);
        oar_dd hw = n ? oar_dd_add(oar_dd_mul_d(h, 2.0), oar_dd_div_d(oar_dd_from(1.0), (double)(k + 1))) : h;
        w = oar_dd_add(w, oar_dd_mul(hw, t));
        double a = fabs(t.hi);
        if (a > big) big = a;
        else if (a < 1e-36 * big) break;
    }
    oar_dd l = oar_dd_add(oar_dd_log(0.5 * x), oar_dd_make(OAR_SB_EULER_HI, OAR_SB_EULER_LO)), r;
    if (n == 0) {
        r = oar_dd_add(oar_dd_mul(l, s), oar_dd_neg(w));
    } else {
        oar_dd j1 = oar_dd_mul_d(s, 0.5 * x);
        r = oar_dd_add(oar_dd_div_d(oar_dd_from(-1.0), x), oar_dd_mul(l, j1));
        r = oar_dd_add(r, oar_dd_neg(oar_dd_mul_d(w, 0.25 * x)));
    }
    return oar_dd_mul(r, oar_dd_make(OAR_SB_2_PI_HI, OAR_SB_2_PI_LO)).hi;
}

/* Hankel's P and Q for order n (A&S 9.2.9-10): P = sum (-1)^k a_2k / x^2k, Q = sum (-1)^k
 * a_2k+1 / x^2k+1, a_k = prod_j<=k (4n^2 - (2j-1)^2) / (k! 8^k); for x > 25 the smallest term is
 * below 1e-20. */
OAR_HD static inline void oar_bessel_hankel_pq(int n, double x, double *p, double *q) {
    double mu = 4.0 * n * n, t = 1.0, pp = 0.0, qq = 0.0; /* pp: P - 1, so the 1 is added last */
    for (int k = 1; k < 100; k++) {
        double tn = t * (mu - (2.0 * k - 1) * (2.0 * k - 1)) / (8.0 * k * x);
        if (k > 1 && fabs(tn) >= fabs(t)) break;
        t = tn;
        switch (k & 3) {
        case 1: qq += t; break;
        case 2: pp -= t; break;
        case 3: qq -= t; break;
        default: pp += t; break;
        }
        if (fabs(t) < 1e-20) break;
    }
    *p = 1.0 + pp;
    *q = qq;
}

/* J_n (first kind, second = 0) or Y_n (second = 1) for x > 25: sqrt(2/(pi x)) times
 * P cos chi - Q sin chi (J) or P sin chi + Q cos chi (Y), chi = x - (n/2 + 1/4) pi, with cos chi and
 * sin chi from the library's sin x and cos x (exactly reduced) rather than from a rounded chi. */
OAR_HD static inline double oar_bessel_jy_asym(int n, int second, double x) {
    double p, q, s = sin(x), c = cos(x), a = OAR_SB_INV_SQRT_PI / sqrt(x);
    oar_bessel_hankel_pq(n, x, &p, &q);
    if (n == 0) return second ? a * (p * (s - c) + q * (c + s)) : a * (p * (c + s) - q * (s - c));
    return second ? a * (q * (s - c) - p * (s + c)) : a * (p * (s - c) + q * (s + c));
}

/* J0 (even) and J1 (odd) */
OAR_HD static inline double oar_bessel_j_d(int n, double x) {
    if (x != x) return x;
    double ax = fabs(x), r;
    if (ax == INFINITY) return 0.0;
    if (ax <= 25.0) r = oar_bessel_j_series_dd(n, ax).hi;
    else r = oar_bessel_jy_asym(n, 0, ax);
    return (n && x < 0) ? -r : r;
}
/* Y0 and Y1: -inf at 0, NaN below, as torch */
OAR_HD static inline double oar_bessel_y_d(int n, double x) {
    if (x != x) return x;
    if (x < 0.0) return NAN;
    if (x == 0.0) return -INFINITY;
    if (x == INFINITY) return 0.0;
    return x <= 25.0 ? oar_bessel_y_series(n, x) : oar_bessel_jy_asym(n, 1, x);
}

/* sin(x)/x, 1 at 0, 0 at +-inf */
OAR_HD static inline double oar_spherical_j0_d(double x) {
    if (x != x) return x;
    if (fabs(x) == INFINITY) return 0.0;
    return x == 0.0 ? 1.0 : sin(x) / x;
}

/* ---- Airy's Ai */

/* 2/3 |x|^3/2 in double-double: the exponent and the phase of Ai, where the last bit of a rounded
 * zeta would cost zeta ulps */
OAR_HD static inline oar_dd oar_airy_zeta(double z) {
    double s = sqrt(z);
    oar_dd r = oar_dd_fast_sum(s, fma(-s, s, z) / (2.0 * s));
    return oar_dd_mul(oar_dd_mul_d(r, z), oar_dd_make(0.6666666666666666, 3.700743415417188e-17));
}

/* Ai(x) = Ai(0) f(x) + Ai'(0) g(x) with f = sum x^3k prod(3j+1)/(3k)!, g = sum x^3k+1 prod(3j+2)/(3k+1)!
 * (A&S 10.4.2-3), in double-double: for -10 <= x <= 1 the terms reach ~1e9 while Ai ~ 0.1. */
OAR_HD static inline double oar_airy_series(double x) {
    oar_dd x3 = oar_dd_mul_d(oar_dd_two_prod(x, x), x), f = oar_dd_from(1.0), g = oar_dd_from(x);
    oar_dd sf = f, sg = g;
    double big = 1.0;
    for (int k = 1; k < 200; k++) {
        f = oar_dd_div_d(oar_dd_mul(f, x3), (3.0 * k - 1.0) * (3.0 * k));
        g = oar_dd_div_d(oar_dd_mul(g, x3), (3.0 * k) * (3.0 * k + 1.0));
        sf = oar_dd_add(sf, f);
        sg = oar_dd_add(sg, g);
        double a = fabs(f.hi) > fabs(g.hi) ? fabs(f.hi) : fabs(g.hi);
        if (a > big) big = a;
        else if (a < 1e-36 * big) break;
    }
    oar_dd r = oar_dd_add(oar_dd_mul(sf, oar_dd_make(0.3550280538878172, 2.05233632436212e-17)),
                          oar_dd_neg(oar_dd_mul(sg, oar_dd_make(0.2588194037928068, -2.522243111610832e-17))));
    return r.hi;
}

/* Ai(-z), z > 10 (A&S 10.4.60): pi^-1/2 z^-1/4 [sin(zeta + pi/4) P - cos(zeta + pi/4) Q] with
 * P = sum (-1)^k c_2k zeta^-2k, Q = sum (-1)^k c_2k+1 zeta^-2k-1,
 * c_k = c_k-1 (6k-5)(6k-3)(6k-1) / (216 k (2k-1)); zeta carried in double-double into the phase. */
OAR_HD static inline double oar_airy_neg_asym(double z) {
    oar_dd zeta = oar_airy_zeta(z);
    double t = 1.0, p = 0.0, q = 0.0, zi = 1.0 / zeta.hi; /* p: P - 1 */
    for (int k = 1; k < 100; k++) {
        double tn = t * (6.0 * k - 5.0) * (6.0 * k - 3.0) * (6.0 * k - 1.0) / (216.0 * k * (2.0 * k - 1.0)) * zi;
        if (k > 1 && fabs(tn) >= fabs(t)) break;
        t = tn;
        switch (k & 3) {
        case 1: q += t; break;
        case 2: p -= t; break;
        case 3: q -= t; break;
        default: p += t; break;
        }
        if (fabs(t) < 1e-20) break;
    }
    p += 1.0;
    double sh = sin(zeta.hi), ch = cos(zeta.hi);
    double s = sh + ch * zeta.lo, c = ch - sh * zeta.lo; /* sin, cos of hi + lo */
    /* sin(zeta + pi/4) = (s + c)/sqrt2, cos(zeta + pi/4) = (c - s)/sqrt2 */
    return OAR_SB_INV_SQRT_PI * 0.70710678118654752 / sqrt(sqrt(z)) * (p * (s + c) - q * (c - s));
}

OAR_HD static inline double oar_airy_ai_d(double x) {
    if (x != x) return x;
    if (fabs(x) == INFINITY) return 0.0;
    if (x < -10.0) return oar_airy_neg_asym(-x);
    if (x <= 1.0) return oar_airy_series(x);
    if (x > 110.0) return 0.0; /* below the smallest subnormal */
    oar_dd zeta = oar_airy_zeta(x);
    double k = oar_bessel_k_scaled_quad(1.0 / 3.0, zeta.hi);
    return OAR_SB_INV_PI * sqrt(x / 3.0) * k * exp(-zeta.hi) * (1.0 - zeta.lo);
}

#endif
