/* The classical orthogonal polynomials of torch.special, p_n(x) with the degree n a tensor: Chebyshev
 * T, U, V, W (and the shifted ones on [0, 1], p_n(2x - 1)), Hermite H (physicists') and He
 * (probabilists'), Laguerre L and Legendre P. Each by its three-term recurrence (A&S 22.7); for
 * Chebyshev inside (-1, 1) past degree 6 by the trigonometric forms (A&S 22.3.15-16, and
 * cos((n+1/2)t)/cos(t/2), sin((n+1/2)t)/sin(t/2) for V and W), whose error does not grow with n.
 * As torch 1.13: n is truncated to an integer, p_n = 0 for n < 0, p_0 = 1 whatever x, and the
 * values at x = +-1 are the exact integers. A NaN degree gives NaN (torch's cast of NaN to int64
 * is undefined). Chebyshev outside [-1, 1] past degree 64 uses the hyperbolic forms (cosh(n a),
 * a = acosh|x|), so no degree costs more than 64 steps; Hermite's recurrence ends at its overflow
 * (within a few hundred steps); Legendre and Laguerre, bounded on their intervals, have no such
 * end: degrees above OAR_ORTH_MAX_STEPS give NaN rather than run for seconds per element (torch
 * loops). OAR_HD: shared with the CUDA kernels; no oar header. */
#ifndef OAR_SPECIAL_ORTH_H
#define OAR_SPECIAL_ORTH_H

#include "ops/hostdev.h"

#include <math.h>
#include <stdint.h>

enum { OAR_ORTH_T, OAR_ORTH_U, OAR_ORTH_V, OAR_ORTH_W };
#define OAR_ORTH_MAX_STEPS 1e7

/* torch's degree: truncated toward zero (-0.5 is degree 0) */
OAR_HD static inline double oar_orth_degree(double n) { return trunc(n); }
/* p_n(+-inf) for degree n >= 1 whose leading coefficient has sign lead: infinite, of the sign of
 * lead x^n */
OAR_HD static inline double oar_orth_at_inf(double x, double n, double lead) {
    double s = (x < 0.0 && fmod(n, 2.0) != 0.0) ? -lead : lead;
    return s > 0.0 ? INFINITY : -INFINITY;
}

/* Chebyshev polynomial of the kind (T, U, V, W) */
OAR_HD static inline double oar_chebyshev_d(int kind, double x, double nd) {
    if (nd != nd) return nd;
    double n = oar_orth_degree(nd);
    if (n < 0.0) return 0.0;
    if (n == 0.0) return 1.0;
    if (fabs(x) == INFINITY) return oar_orth_at_inf(x, n, 1.0);
    double odd = fmod(n, 2.0) != 0.0 ? -1.0 : 1.0; /* (-1)^n */
    if (x == 1.0) return kind == OAR_ORTH_T || kind == OAR_ORTH_V ? 1.0 : kind == OAR_ORTH_U ? n + 1.0 : 2.0 * n + 1.0;
    if (x == -1.0) return kind == OAR_ORTH_T || kind == OAR_ORTH_W ? odd : kind == OAR_ORTH_U ? odd * (n + 1.0)
                                                                                             : odd * (2.0 * n + 1.0);
    if (n > 6.0 && fabs(x) < 1.0) {
        double t = acos(x);
        switch (kind) {
        case OAR_ORTH_T: return cos(n * t);
        case OAR_ORTH_U: return sin((n + 1.0) * t) / sin(t);
        case OAR_ORTH_V: return cos((n + 0.5) * t) / cos(0.5 * t);
        default: return sin((n + 0.5) * t) / sin(0.5 * t);
        }
    }
    if (n > 64.0 && x == x) {
        /* |x| > 1: T(x) = cosh(n a), U = sinh((n+1)a)/sinh a, V = cosh((n+1/2)a)/cosh(a/2),
         * W = sinh((n+1/2)a)/sinh(a/2), a = acosh x; for x < -1, T and U take (-1)^n and V and W
         * swap (V_n(-x) = (-1)^n W_n(x)) */
        double a = acosh(fabs(x)), sg = x < 0.0 ? odd : 1.0;
        int k = kind;
        if (x < 0.0 && (k == OAR_ORTH_V || k == OAR_ORTH_W)) k = k == OAR_ORTH_V ? OAR_ORTH_W : OAR_ORTH_V;
        switch (k) {
        case OAR_ORTH_T: return sg * cosh(n * a);
        case OAR_ORTH_U: return sg * sinh((n + 1.0) * a) / sinh(a);
        case OAR_ORTH_V: return sg * cosh((n + 0.5) * a) / cosh(0.5 * a);
        default: return sg * sinh((n + 0.5) * a) / sinh(0.5 * a);
        }
    }
    double p = 1.0, q = kind == OAR_ORTH_T ? x : kind == OAR_ORTH_U ? 2.0 * x : kind == OAR_ORTH_V ? 2.0 * x - 1.0
                                                                                                   : 2.0 * x + 1.0;
    for (double k = 1.0; k < n && isfinite(q); k += 1.0) {
        double r = 2.0 * x * q - p;
        p = q;
        q = r;
    }
    return q;
}

OAR_HD static inline double oar_shifted_chebyshev_d(int kind, double x, double n) {
    return oar_chebyshev_d(kind, x + x - 1.0, n);
}

/* Hermite H (phys = 1: H_k+1 = 2x H_k - 2k H_k-1) or He (He_k+1 = x He_k - k He_k-1) */
OAR_HD static inline double oar_hermite_d(int phys, double x, double nd) {
    if (nd != nd) return nd;
    double n = oar_orth_degree(nd);
    if (n < 0.0) return 0.0;
    if (n == 0.0) return 1.0;
    if (fabs(x) == INFINITY) return oar_orth_at_inf(x, n, 1.0);
    double c = phys ? 2.0 : 1.0, p = 1.0, q = c * x;
    if (x == 0.0) {
        /* the odd ones vanish; the even ones follow p_k+2(0) = -c (k+1) p_k(0), to the overflow */
        if (fmod(n, 2.0) != 0.0) return 0.0;
        for (double k = 2.0; k <= n; k += 2.0) {
            p *= -c * (k - 1.0);
            if (!isfinite(p)) return fmod(n, 4.0) == 0.0 ? INFINITY : -INFINITY;
        }
        return p;
    }
    for (double k = 1.0; k < n && isfinite(q); k += 1.0) {
        double r = c * (x * q - k * p);
        p = q;
        q = r;
    }
    return q;
}

/* Laguerre: (k+1) L_k+1 = (2k + 1 - x) L_k - k L_k-1 */
OAR_HD static inline double oar_laguerre_d(double x, double nd) {
    if (nd != nd) return nd;
    double n = oar_orth_degree(nd);
    if (n < 0.0) return 0.0;
    if (n == 0.0 || x == 0.0) return 1.0;
    if (fabs(x) == INFINITY) return oar_orth_at_inf(x, n, fmod(n, 2.0) != 0.0 ? -1.0 : 1.0);
    if (n > OAR_ORTH_MAX_STEPS) return NAN;
    double p = 1.0, q = 1.0 - x;
    for (double k = 1.0; k < n && isfinite(q); k += 1.0) {
        double r = ((2.0 * k + 1.0 - x) * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}

/* Legendre: (k+1) P_k+1 = (2k+1) x P_k - k P_k-1; P_n(+-1) = (+-1)^n */
OAR_HD static inline double oar_legendre_d(double x, double nd) {
    if (nd != nd) return nd;
    double n = oar_orth_degree(nd);
    if (n < 0.0) return 0.0;
    if (n == 0.0) return 1.0;
    if (fabs(x) == INFINITY) return oar_orth_at_inf(x, n, 1.0);
    if (n > OAR_ORTH_MAX_STEPS) return NAN;
    if (fabs(x) == 1.0) return (x > 0.0 || fmod(n, 2.0) == 0.0) ? 1.0 : -1.0;
    double p = 1.0, q = x;
    for (double k = 1.0; k < n && isfinite(q); k += 1.0) {
        double r = ((2.0 * k + 1.0) * x * q - k * p) / (k + 1.0);
        p = q;
        q = r;
    }
    return q;
}

#endif
