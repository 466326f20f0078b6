/* The low-bit dtypes' bit-level conversions: the float8 formats (e4m3fn, e4m3fnuz, e5m2,
 * e5m2fnuz, e8m0), float4 e2m1, and the 4- and 2-bit integers. Each element is one byte in
 * memory: a float format's code in its low bits, an integer's value as int8/uint8. */
#include "tensor/tensor.h"

#include <math.h>

/* A sign-exponent-mantissa format. The special codes differ per family: fn has one NaN pattern
 * (all ones) and no inf, fnuz has no -0 and uses 0x80 (the "negative zero") as its only NaN,
 * e5m2 is IEEE-like (all-ones exponent: inf or NaN), e2m1 has neither. */
typedef struct minifloat {
    int ebits, mbits, bias;
    enum { MF_FN, MF_FNUZ, MF_IEEE, MF_NONE } special;
    unsigned max_code; /* the largest finite magnitude's code */
    unsigned nan_code; /* the code a NaN is given (ONNX's choice for e2m1: 0x8, the -0 code) */
} minifloat;

static const minifloat *format_of(oar_dtype dt) {
    static const minifloat e4m3fn = {4, 3, 7, MF_FN, 0x7E, 0x7F}, e4m3fnuz = {4, 3, 8, MF_FNUZ, 0x7F, 0x80},
                           e5m2 = {5, 2, 15, MF_IEEE, 0x7B, 0x7F}, e5m2fnuz = {5, 2, 16, MF_FNUZ, 0x7F, 0x80},
                           e2m1 = {2, 1, 1, MF_NONE, 0x7, 0x8};
    switch (dt) {
    case OAR_F8E4M3FN: return &e4m3fn;
    case OAR_F8E4M3FNUZ: return &e4m3fnuz;
    case OAR_F8E5M2: return &e5m2;
    case OAR_F8E5M2FNUZ: return &e5m2fnuz;
    case OAR_F4E2M1: return &e2m1;
    default: return NULL;
    }
}

static double mf_decode(const minifloat *f, unsigned code) {
    unsigned sign_bit = 1u << (f->ebits + f->mbits);
    unsigned mag = code & (sign_bit - 1);
    bool neg = (code & sign_bit) != 0;
    unsigned e = mag >> f->mbits, m = mag & ((1u << f->mbits) - 1);
    unsigned emax = (1u << f->ebits) - 1;
    if (f->special == MF_FNUZ && code == 0x80) return NAN;
    if (f->special == MF_FN && mag == (sign_bit - 1)) return NAN;
    if (f->special == MF_IEEE && e == emax) return m ? NAN : neg ? -INFINITY : INFINITY;
    double v = e == 0 ? ldexp((double)m, 1 - f->bias - f->mbits)
                      : ldexp((double)(m | (1u << f->mbits)), (int)e - f->bias - f->mbits);
    return neg ? -v : v;
}

/* Round |x| to the format: the code of the magnitude, which may exceed max_code (overflow).
 * Subnormal and normal codes are consecutive, so rounding the significand in units of the
 * code's spacing and adding gives the carry into the exponent for free. */
static unsigned mf_round_magnitude(const minifloat *f, double a) {
    int min_exp = 1 - f->bias; /* the smallest normal's exponent */
    if (a < ldexp(1.0, min_exp)) return (unsigned)rint(ldexp(a, f->bias - 1 + f->mbits)); /* subnormal */
    int e;
    double frac = frexp(a, &e); /* a = frac 2^e, frac in [0.5, 1) */
    int biased = e - 1 + f->bias;
    if (biased > (1 << f->ebits)) return f->max_code + 1; /* far beyond the range */
    unsigned units = (unsigned)rint(ldexp(frac, f->mbits + 1)); /* in [2^m, 2^(m+1)] */
    return ((unsigned)(biased - 1) << f->mbits) + units;
}

static uint8_t mf_encode(const minifloat *f, double x, bool saturate) {
    unsigned sign_bit = 1u << (f->ebits + f->mbits);
    if (isnan(x)) return (uint8_t)f->nan_code;
    unsigned sign = signbit(x) ? sign_bit : 0;
    double a = fabs(x);
    unsigned mag = isinf(a) ? f->max_code + 1 : mf_round_magnitude(f, a);
    if (mag > f->max_code) {
        if (saturate || f->special == MF_NONE) mag = f->max_code;
        else if (f->special == MF_IEEE) mag = f->max_code + 1; /* the next code is inf */
        else return (uint8_t)f->nan_code;
    }
    if (mag == 0 && f->special == MF_FNUZ) return 0; /* no negative zero: 0x80 is NaN */
    return (uint8_t)(sign | mag);
}

/* e8m0: an unsigned power of two, 2^(code - 127); 0xFF is NaN; no zero, no sign. */
static double e8m0_decode(unsigned code) { return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127); }

/* Rounds |x| up to a power of two (ONNX's default round_mode "up"); values below 2^-127
 * give the smallest code. */
static uint8_t e8m0_encode(double x, bool saturate) {
    if (isnan(x)) return 0xFF;
    double a = fabs(x);
    if (isinf(a)) return saturate ? 0xFE : 0xFF;
    if (a == 0) return 0;
    int e;
    double frac = frexp(a, &e);
    int p = frac == 0.5 ? e - 1 : e; /* ceil(log2 a) */
    if (p < -127) return 0;
    if (p > 127) return saturate ? 0xFE : 0xFF;
    return (uint8_t)(p + 127);
}

static bool int_range(oar_dtype dt, int *lo, int *hi) {
    switch (dt) {
    case OAR_I4: *lo = -8, *hi = 7; return true;
    case OAR_U4: *lo = 0, *hi = 15; return true;
    case OAR_I2: *lo = -2, *hi = 1; return true;
    case OAR_U2: *lo = 0, *hi = 3; return true;
    default: return false;
    }
}

bool oar_dtype_is_lowbit(oar_dtype dt) { return dt >= OAR_F8E4M3FN && dt <= OAR_U2; }

int oar_dtype_bits(oar_dtype dt) {
    switch (dt) {
    case OAR_F4E2M1: case OAR_I4: case OAR_U4: return 4;
    case OAR_I2: case OAR_U2: return 2;
    default: return (int)oar_dtype_size(dt) * 8;
    }
}

double oar_lowbit_max(oar_dtype dt) {
    const minifloat *f = format_of(dt);
    int lo, hi;
    if (f) return mf_decode(f, f->max_code);
    if (dt == OAR_F8E8M0) return ldexp(1.0, 127);
    return int_range(dt, &lo, &hi) ? hi : 0;
}

double oar_lowbit_decode(oar_dtype dt, uint8_t code) {
    const minifloat *f = format_of(dt);
    if (f) return mf_decode(f, code & ((1u << (f->ebits + f->mbits + 1)) - 1));
    switch (dt) {
    case OAR_F8E8M0: return e8m0_decode(code);
    case OAR_I4: case OAR_I2: return (int8_t)code;
    case OAR_U4: case OAR_U2: return code;
    default: return 0;
    }
}

/* An integer's low bits, sign-extended for the signed types (two's complement wrap). */
static uint8_t wrap_int(oar_dtype dt, int64_t v) {
    int lo, hi;
    int_range(dt, &lo, &hi);
    unsigned bits = (unsigned)(dt == OAR_I4 || dt == OAR_U4 ? 4 : 2), mask = (1u << bits) - 1;
    unsigned u = (unsigned)((uint64_t)v & mask);
    if (lo < 0 && (u >> (bits - 1))) u |= ~mask;
    return (uint8_t)u;
}

uint8_t oar_lowbit_encode(oar_dtype dt, double x, bool saturate) {
    const minifloat *f = format_of(dt);
    if (f) return mf_encode(f, x, saturate);
    if (dt == OAR_F8E8M0) return e8m0_encode(x, saturate);
    int lo, hi;
    if (!int_range(dt, &lo, &hi) || isnan(x)) return 0;
    if (saturate) { /* QuantizeLinear's rule: round half to even, then clip */
        double r = rint(x);
        return (uint8_t)(int8_t)(r < lo ? lo : r > hi ? hi : (int)r);
    }
    /* Cast's (ONNX 1.22's data, NumPy's astype): truncate toward zero, keep the low bits */
    double t = trunc(x);
    return wrap_int(dt, t >= 9.2233720368547748e18 ? INT64_MAX : t <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)t);
}

/* ---- the traits rows' element access (dtype.c): casts do not saturate (torch's rule) */
#define DEF_LOWBIT_FLOAT(NAME, DT)                                                                        \
    double oar_##NAME##_load(const void *p) { return oar_lowbit_decode(DT, *(const uint8_t *)p); }        \
    void oar_##NAME##_store(void *p, double v) { *(uint8_t *)p = oar_lowbit_encode(DT, v, false); }       \
    int64_t oar_##NAME##_load_i64(const void *p) {                                                        \
        double v = oar_##NAME##_load(p);                                                                  \
        return v != v ? 0 : v >= 9.2233720368547748e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN \
                                                                                              : (int64_t)v; \
    }                                                                                                     \
    void oar_##NAME##_store_i64(void *p, int64_t v) { oar_##NAME##_store(p, (double)v); }

DEF_LOWBIT_FLOAT(f8e4m3fn, OAR_F8E4M3FN)
DEF_LOWBIT_FLOAT(f8e4m3fnuz, OAR_F8E4M3FNUZ)
DEF_LOWBIT_FLOAT(f8e5m2, OAR_F8E5M2)
DEF_LOWBIT_FLOAT(f8e5m2fnuz, OAR_F8E5M2FNUZ)
DEF_LOWBIT_FLOAT(f8e8m0, OAR_F8E8M0)
DEF_LOWBIT_FLOAT(f4e2m1, OAR_F4E2M1)

/* The integers wrap like oar's other integer casts (int -> int keeps the low bits) and, from
 * floats, truncate toward zero first: ONNX's Cast to int4/int2 (its conformance data: -9 -> 7). */
#define DEF_LOWBIT_INT(NAME, DT)                                                                          \
    double oar_##NAME##_load(const void *p) { return oar_lowbit_decode(DT, *(const uint8_t *)p); }        \
    void oar_##NAME##_store(void *p, double v) { *(uint8_t *)p = oar_lowbit_encode(DT, v, false); }       \
    int64_t oar_##NAME##_load_i64(const void *p) { return (int64_t)oar_lowbit_decode(DT, *(const uint8_t *)p); } \
    void oar_##NAME##_store_i64(void *p, int64_t v) { *(uint8_t *)p = wrap_int(DT, v); }

DEF_LOWBIT_INT(i4, OAR_I4)
DEF_LOWBIT_INT(u4, OAR_U4)
DEF_LOWBIT_INT(i2, OAR_I2)
DEF_LOWBIT_INT(u2, OAR_U2)
