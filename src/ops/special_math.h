/* The special functions of the unary ops that C's math library lacks (digamma, polygamma, the
 * Hurwitz zeta behind it, erfinv) and the integer gcd/lcm, in double and int64. The CPU reference
 * and the CUDA kernels compile this one source (OAR_HD), so both compute the same values; the
 * edge values (poles, infinities, NaN) follow torch 1.13. No oar header: nvcc includes it. */
#ifndef OAR_SPECIAL_MATH_H
#define OAR_SPECIAL_MATH_H

#include "ops/hostdev.h"

#include <math.h>
#include <stdint.h>

#define OAR_SM_PI 3.14159265358979323846
#define OAR_SM_MACHEP 1.11022302462515654042e-16

/* psi(x) = d/dx ln Gamma(x). Reflection for x < 0 (tan of the fractional part, which is exact),
 * recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic series
 * ln x - 1/(2x) - sum B_2k / (2k x^2k). Poles: +-inf at 0 (the sign of -x, as torch), NaN at the
 * negative integers. */
OAR_HD static inline double oar_digamma_d(double x) {
    if (x == 0.0) return copysign(INFINITY, -x);
    double acc = 0.0;
    if (x < 0.0) {
        if (x == trunc(x)) return NAN;
        double r = x - trunc(x);
        acc = -OAR_SM_PI / tan(OAR_SM_PI * r);
        x = 1.0 - x;
    }
    while (x < 10.0) {
        acc -= 1.0 / x;
        x += 1.0;
    }
    double series = 0.0;
    if (x < 1e17) {
        double z = 1.0 / (x * x);
        /* B_2k / 2k for k = 7 .. 1, Horner in z */
        series = z * (0.08333333333333333 +
                 z * (-0.008333333333333333 +
                 z * (0.003968253968253968 +
                 z * (-0.004166666666666667 +
                 z * (0.007575757575757576 +
                 z * (-0.021092796092796094 +
                 z * 0.08333333333333333))))));
    }
    return acc + log(x) - 0.5 / x - series;
}

/* The Hurwitz zeta sum_k (k + q)^-s for s > 1: Euler-Maclaurin summation (direct terms until the
 * tail starts at 9 or more, then the Bernoulli corrections (2j)! / B_2j). As torch's zeta: inf at
 * s == 1 and at nonpositive integer q, NaN for s < 1. */
OAR_HD static inline double oar_zeta_d(double s, double q) {
    const double fact_over_bernoulli[12] = {
        12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1892437580.3183792, 74724249600.0,
        -2950130727918.164, 116467828143500.67, -4597978722407473.0, 1.8152105401943546e+17,
        -7.166165256175667e+18};
    if (s == 1.0) return INFINITY;
    if (s < 1.0) return NAN;
    if (q <= 0.0) {
        if (q == floor(q)) return INFINITY;
        if (s != floor(s)) return NAN; /* q^-s undefined */
    }
    double sum = pow(q, -s), a = q, b = 0.0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i++;
        a += 1.0;
        b = pow(a, -s);
        sum += b;
        if (-OAR_SM_MACHEP * sum < b && b < OAR_SM_MACHEP * sum) return sum;
    }
    double w = a, k = 0.0, f = 1.0;
    sum += b * w / (s - 1.0) - 0.5 * b;
    for (int j = 0; j < 12; j++) {
        f *= s + k;
        b /= w;
        double t = f * b / fact_over_bernoulli[j];
        sum += t;
        if (fabs(t / sum) < OAR_SM_MACHEP) return sum;
        k += 1.0;
        f *= s + k;
        b /= w;
        k += 1.0;
    }
    return sum;
}

/* trigamma: reflection below 1/2 (-pi^2 / sin^2(pi x), finite near the poles as torch's), six
 * recurrence steps, then the asymptotic series. */
OAR_HD static inline double oar_trigamma_d(double x) {
    double sign = 1.0, acc = 0.0;
    if (x < 0.5) {
        sign = -1.0;
        double s = sin(OAR_SM_PI * x);
        acc -= OAR_SM_PI * OAR_SM_PI / (s * s);
        x = 1.0 - x;
    }
    for (int i = 0; i < 6; i++) {
        acc += 1.0 / (x * x);
        x += 1.0;
    }
    double z = 1.0 / (x * x);
    acc += (1.0 + 1.0 / (2.0 * x) + z * (1.0 / 6.0 - z * (1.0 / 30.0 - z * (1.0 / 42.0)))) / x;
    return sign * acc;
}

/* The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x); n >= 0 (checked by the op). */
OAR_HD static inline double oar_polygamma_d(int64_t n, double x) {
    if (n == 0) return oar_digamma_d(x);
    if (n == 1) return oar_trigamma_d(x);
    return ((n % 2) ? 1.0 : -1.0) * exp(lgamma((double)n + 1.0)) * oar_zeta_d((double)n + 1.0, x);
}

/* erfinv: Winitzki's closed form (within 2e-3) refined by Newton steps on erf, or on erfc past
 * 1/2 where 1 - |y| is exact and erf would lose the tail. Each step squares the error. */
OAR_HD static inline double oar_erfinv_d(double y) {
    if (y != y || y < -1.0 || y > 1.0) return NAN;
    if (y == 1.0) return INFINITY;
    if (y == -1.0) return -INFINITY;
    if (y == 0.0) return y; /* keeps -0 */
    double t = fabs(y), c = 1.0 - t;
    double l = log(c * (1.0 + t));          /* ln(1 - y^2) */
    double p = 4.330746750799873 + 0.5 * l; /* 2 / (pi a) + l / 2, a = 0.147 */
    double x = sqrt(sqrt(p * p - l / 0.147) - p);
    for (int i = 0; i < 5; i++) {
        double r = t <= 0.5 ? erf(x) - t : c - erfc(x);
        x -= r / (1.1283791670955126 * exp(-x * x));
    }
    return y < 0.0 ? -x : x;
}

/* gcd and lcm of int64 as torch: nonnegative, gcd(0, 0) = 0, lcm(a, 0) = 0; products wrap. */
OAR_HD static inline int64_t oar_gcd_i(int64_t a, int64_t b) {
    uint64_t x = a < 0 ? 0 - (uint64_t)a : (uint64_t)a, y = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
    while (y) {
        uint64_t r = x % y;
        x = y;
        y = r;
    }
    return (int64_t)x;
}
OAR_HD static inline int64_t oar_lcm_i(int64_t a, int64_t b) {
    int64_t g = oar_gcd_i(a, b);
    if (g == 0) return 0;
    int64_t m = (int64_t)((uint64_t)(a / g) * (uint64_t)b);
    return m < 0 ? (int64_t)(0 - (uint64_t)m) : m;
}

#endif
