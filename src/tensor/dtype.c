/* The dtype traits table and the half-precision conversions. */
#include "tensor/tensor.h"

#include <math.h>
#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

uint16_t oar_f32_to_f16(float f) {
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7FFFFFFFu;
    if (x >= 0x7F800000u) return (uint16_t)(sign | (x > 0x7F800000u ? 0x7E00u : 0x7C00u));
    if (x >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* rounds past 65504: inf */
    if (x < 0x38800000u) {
        /* Below the smallest normal half: let the FPU round to a multiple of 2^-24 by adding
         * 0.5f, whose float spacing is exactly 2^-24, then read off the mantissa. */
        float r = u2f(x) + 0.5f;
        return (uint16_t)(sign | (f2u(r) - 0x3F000000u));
    }
    uint32_t odd = (x >> 13) & 1u;
    x += 0xC8000FFFu + odd; /* rebias exponent by -112 and round to nearest even */
    return (uint16_t)(sign | (x >> 13));
}

float oar_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-08f; /* m * 2^-24 */
        return u2f(sign | f2u(v));
    }
    if (e == 31) return u2f(sign | 0x7F800000u | (m << 13));
    return u2f(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t oar_f32_to_bf16(float f) {
    uint32_t x = f2u(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x0040u); /* quiet NaN */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float oar_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

/* Float -> integer conversion truncates toward zero like C and torch; out-of-range values
 * and NaN are clamped so the conversion is always defined. */
static inline int64_t clamp_i64(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) return (int64_t)lo;
    if (v > hi) return (int64_t)hi;
    return (int64_t)v;
}

#define DEF_FLOAT(NAME, T)                                                          \
    static double NAME##_load(const void *p) { return (double)*(const T *)p; }      \
    static void NAME##_store(void *p, double v) { *(T *)p = (T)v; }                 \
    static int64_t NAME##_load_i64(const void *p) { return clamp_i64(*(const T *)p, -9.2233720368547758e18, 9.2233720368547748e18); } \
    static void NAME##_store_i64(void *p, int64_t v) { *(T *)p = (T)v; }

DEF_FLOAT(f32, float)
DEF_FLOAT(f64, double)

static double f16_load(const void *p) { return oar_f16_to_f32(*(const uint16_t *)p); }
static void f16_store(void *p, double v) { *(uint16_t *)p = oar_f32_to_f16((float)v); }
static int64_t f16_load_i64(const void *p) { return (int64_t)f16_load(p); }
static void f16_store_i64(void *p, int64_t v) { f16_store(p, (double)v); }
static double bf16_load(const void *p) { return oar_bf16_to_f32(*(const uint16_t *)p); }
static void bf16_store(void *p, double v) { *(uint16_t *)p = oar_f32_to_bf16((float)v); }
static int64_t bf16_load_i64(const void *p) { return (int64_t)bf16_load(p); }
static void bf16_store_i64(void *p, int64_t v) { bf16_store(p, (double)v); }

#define DEF_INT(NAME, T, LO, HI)                                                    \
    static double NAME##_load(const void *p) { return (double)*(const T *)p; }      \
    static void NAME##_store(void *p, double v) { *(T *)p = (T)clamp_i64(v, LO, HI); } \
    static int64_t NAME##_load_i64(const void *p) { return (int64_t)*(const T *)p; } \
    static void NAME##_store_i64(void *p, int64_t v) { *(T *)p = (T)v; }

DEF_INT(i8, int8_t, -128.0, 127.0)
DEF_INT(u8, uint8_t, 0.0, 255.0)
DEF_INT(i32, int32_t, -2147483648.0, 2147483647.0)
DEF_INT(i64, int64_t, -9.2233720368547758e18, 9.2233720368547748e18)
DEF_INT(i16, int16_t, -32768.0, 32767.0)
DEF_INT(u16, uint16_t, 0.0, 65535.0)
DEF_INT(u32, uint32_t, 0.0, 4294967295.0)

/* u64 travels through int64 as its bits (load_i64 of 2^63 is INT64_MIN): wrapping arithmetic,
 * bitwise ops and integer casts stay exact that way; what orders or divides reads it as
 * uint64_t (oar_dtype_bits_u64). Its double conversions are unsigned: NaN and negatives give
 * 0, values from 2^64 on give UINT64_MAX (the clamp every integer dtype has). */
static double u64_load(const void *p) { return (double)*(const uint64_t *)p; }
static void u64_store(void *p, double v) {
    *(uint64_t *)p = !(v > 0) ? 0 : v >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)v;
}
static int64_t u64_load_i64(const void *p) { return (int64_t)*(const uint64_t *)p; }
static void u64_store_i64(void *p, int64_t v) { *(uint64_t *)p = (uint64_t)v; }

static double bool_load(const void *p) { return *(const uint8_t *)p ? 1.0 : 0.0; }
static void bool_store(void *p, double v) { *(uint8_t *)p = v != 0.0; }
static int64_t bool_load_i64(const void *p) { return *(const uint8_t *)p ? 1 : 0; }
static void bool_store_i64(void *p, int64_t v) { *(uint8_t *)p = v != 0; }

/* a low-bit dtype: one byte per element, its access in lowbit.c */
#define LOWBIT_ROW(NAME, FL, SG) {#NAME, 1, FL, SG, oar_##NAME##_load, oar_##NAME##_store, oar_##NAME##_load_i64, oar_##NAME##_store_i64}
#define ROW(NAME, T, FL, SG) {#NAME, sizeof(T), FL, SG, NAME##_load, NAME##_store, NAME##_load_i64, NAME##_store_i64}
const oar_dtype_traits oar_dtypes[OAR_DTYPE_COUNT] = {
    [OAR_F32] = ROW(f32, float, true, true),
    [OAR_F64] = ROW(f64, double, true, true),
    [OAR_F16] = ROW(f16, uint16_t, true, true),
    [OAR_BF16] = ROW(bf16, uint16_t, true, true),
    [OAR_I8] = ROW(i8, int8_t, false, true),
    [OAR_U8] = ROW(u8, uint8_t, false, false),
    [OAR_I32] = ROW(i32, int32_t, false, true),
    [OAR_I64] = ROW(i64, int64_t, false, true),
    [OAR_BOOL] = ROW(bool, uint8_t, false, false),
    [OAR_I16] = ROW(i16, int16_t, false, true),
    [OAR_U16] = ROW(u16, uint16_t, false, false),
    [OAR_U32] = ROW(u32, uint32_t, false, false),
    [OAR_U64] = ROW(u64, uint64_t, false, false),
    [OAR_F8E4M3FN] = LOWBIT_ROW(f8e4m3fn, true, true),
    [OAR_F8E4M3FNUZ] = LOWBIT_ROW(f8e4m3fnuz, true, true),
    [OAR_F8E5M2] = LOWBIT_ROW(f8e5m2, true, true),
    [OAR_F8E5M2FNUZ] = LOWBIT_ROW(f8e5m2fnuz, true, true),
    [OAR_F8E8M0] = LOWBIT_ROW(f8e8m0, true, false),
    [OAR_F4E2M1] = LOWBIT_ROW(f4e2m1, true, true),
    [OAR_I4] = LOWBIT_ROW(i4, false, true),
    [OAR_U4] = LOWBIT_ROW(u4, false, false),
    [OAR_I2] = LOWBIT_ROW(i2, false, true),
    [OAR_U2] = LOWBIT_ROW(u2, false, false),
};
_Static_assert(sizeof oar_dtypes / sizeof oar_dtypes[0] == OAR_DTYPE_COUNT,
               "one traits row per dtype");

bool oar_dtype_valid(oar_dtype dt) { return (unsigned)dt < OAR_DTYPE_COUNT; }
bool oar_dtype_from_name(const char *name, oar_dtype *out) {
    for (int k = 0; name && k < OAR_DTYPE_COUNT; k++)
        if (!strcmp(name, oar_dtypes[k].name)) {
            *out = (oar_dtype)k;
            return true;
        }
    return false;
}
const char *oar_dtype_name(oar_dtype dt) { return oar_dtype_valid(dt) ? oar_dtypes[dt].name : "invalid"; }
size_t oar_dtype_size(oar_dtype dt) { return oar_dtype_valid(dt) ? oar_dtypes[dt].size : 0; }
bool oar_dtype_is_float(oar_dtype dt) { return oar_dtype_valid(dt) && oar_dtypes[dt].is_float; }
