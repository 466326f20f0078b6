/* Double-double arithmetic (a value as an unevaluated sum hi + lo, about 32 digits) for the power
 * series of the special functions whose terms cancel (J0, J1, Y0, Y1 and Airy's Ai on the
 * negative axis): summed in double-double, a series that loses ten digits to cancellation still
 * leaves twenty. Error-free transformations: Knuth's two-sum and the fma two-product. OAR_HD: the
 * CPU reference and the CUDA kernels compile it; no oar header (nvcc includes it). */
#ifndef OAR_SPECIAL_DD_H
#define OAR_SPECIAL_DD_H

#include "ops/hostdev.h"

#include <math.h>

typedef struct oar_dd {
    double hi, lo;
} oar_dd;

OAR_HD static inline oar_dd oar_dd_make(double hi, double lo) {
    oar_dd r;
    r.hi = hi;
    r.lo = lo;
    return r;
}
/* a + b exactly, |a| >= |b| not required */
OAR_HD static inline oar_dd oar_dd_two_sum(double a, double b) {
    double s = a + b, bb = s - a;
    return oar_dd_make(s, (a - (s - bb)) + (b - bb));
}
/* a + b exactly when |a| >= |b| */
OAR_HD static inline oar_dd oar_dd_fast_sum(double a, double b) {
    double s = a + b;
    return oar_dd_make(s, b - (s - a));
}
OAR_HD static inline oar_dd oar_dd_two_prod(double a, double b) {
    double p = a * b;
    return oar_dd_make(p, fma(a, b, -p));
}
OAR_HD static inline oar_dd oar_dd_add(oar_dd a, oar_dd b) {
    oar_dd s = oar_dd_two_sum(a.hi, b.hi), t = oar_dd_two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = oar_dd_fast_sum(s.hi, s.lo);
    s.lo += t.lo;
    return oar_dd_fast_sum(s.hi, s.lo);
}
OAR_HD static inline oar_dd oar_dd_neg(oar_dd a) { return oar_dd_make(-a.hi, -a.lo); }
OAR_HD static inline oar_dd oar_dd_mul(oar_dd a, oar_dd b) {
    oar_dd p = oar_dd_two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return oar_dd_fast_sum(p.hi, p.lo);
}
OAR_HD static inline oar_dd oar_dd_mul_d(oar_dd a, double b) {
    oar_dd p = oar_dd_two_prod(a.hi, b);
    p.lo += a.lo * b;
    return oar_dd_fast_sum(p.hi, p.lo);
}
/* a / b: the quotient, then one correction from the exact remainder */
OAR_HD static inline oar_dd oar_dd_div_d(oar_dd a, double b) {
    double q1 = a.hi / b;
    oar_dd p = oar_dd_two_prod(q1, b);
    double r = ((a.hi - p.hi) - p.lo) + a.lo;
    return oar_dd_fast_sum(q1, r / b);
}
OAR_HD static inline oar_dd oar_dd_from(double a) { return oar_dd_make(a, 0.0); }
/* a / b: three quotient digits from exact remainders */
OAR_HD static inline oar_dd oar_dd_div(oar_dd a, oar_dd b) {
    double q1 = a.hi / b.hi;
    oar_dd r = oar_dd_add(a, oar_dd_neg(oar_dd_mul_d(b, q1)));
    double q2 = r.hi / b.hi;
    r = oar_dd_add(r, oar_dd_neg(oar_dd_mul_d(b, q2)));
    return oar_dd_add(oar_dd_fast_sum(q1, q2), oar_dd_from(r.hi / b.hi));
}
/* ln y for finite y > 0: y = m 2^k with m in [sqrt(1/2), sqrt 2), ln m = 2 atanh(s) = 2 (s + s^3/3 +
 * ...) with s = (m - 1)/(m + 1), |s| < 0.172, and k ln 2 (ln 2 as a double-double) */
OAR_HD static inline oar_dd oar_dd_log(double y) {
    int k;
    double m = frexp(y, &k);
    if (m < 0.70710678118654752) {
        m *= 2.0;
        k--;
    }
    oar_dd sv = oar_dd_div(oar_dd_from(m - 1.0), oar_dd_two_sum(m, 1.0)), s2 = oar_dd_mul(sv, sv);
    oar_dd p = sv, sum = sv;
    for (int j = 3; j < 80; j += 2) {
        p = oar_dd_mul(p, s2);
        oar_dd t = oar_dd_div_d(p, (double)j);
        sum = oar_dd_add(sum, t);
        if (fabs(t.hi) <= 1e-34 * fabs(sum.hi)) break;
    }
    oar_dd kl = oar_dd_add(oar_dd_two_prod((double)k, 0.6931471805599453),
                           oar_dd_from((double)k * 2.3190468138462996e-17));
    return oar_dd_add(kl, oar_dd_mul_d(sum, 2.0));
}

#endif
