// The elementwise families' per-element pieces, shared by elementwise.cu and fused_ew.cu:
// loads and stores of each dtype through double (integers clamped as the CPU's dtype table
// does) and the scalar functions of the unary and binary ops, formula for formula as the
// CPU reference kernels (src/ops/unary.c, binary.c, unary_backward.c) write them.
#pragma once
#include "cuda_types.cuh"
#include "launch_elementwise.h"
#include "ops/special_math.h"

#include <math.h>

namespace oarcu {
namespace ew {

template <typename T> __device__ __forceinline__ double ld(const void *p, int64_t i) { return (double)((const T *)p)[i]; }
template <> __device__ __forceinline__ double ld<__half>(const void *p, int64_t i) { return (double)__half2float(((const __half *)p)[i]); }
template <> __device__ __forceinline__ double ld<__nv_bfloat16>(const void *p, int64_t i) { return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]); }

__device__ __forceinline__ int64_t clampi(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) return (int64_t)lo;
    if (v > hi) return (int64_t)hi;
    return (int64_t)v;
}
template <typename T> __device__ __forceinline__ void st(void *p, int64_t i, double v) { ((T *)p)[i] = (T)v; }
template <> __device__ __forceinline__ void st<__half>(void *p, int64_t i, double v) { ((__half *)p)[i] = __float2half_rn((float)v); }
template <> __device__ __forceinline__ void st<__nv_bfloat16>(void *p, int64_t i, double v) { ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); }
template <> __device__ __forceinline__ void st<int8_t>(void *p, int64_t i, double v) { ((int8_t *)p)[i] = (int8_t)clampi(v, -128.0, 127.0); }
template <> __device__ __forceinline__ void st<uint8_t>(void *p, int64_t i, double v) { ((uint8_t *)p)[i] = (uint8_t)clampi(v, 0.0, 255.0); }
template <> __device__ __forceinline__ void st<int32_t>(void *p, int64_t i, double v) { ((int32_t *)p)[i] = (int32_t)clampi(v, -2147483648.0, 2147483647.0); }
template <> __device__ __forceinline__ void st<int64_t>(void *p, int64_t i, double v) { ((int64_t *)p)[i] = clampi(v, -9.2233720368547758e18, 9.2233720368547748e18); }
struct Bool8 { uint8_t v; };  // bool storage: one byte, "not zero"
template <> __device__ __forceinline__ double ld<Bool8>(const void *p, int64_t i) { return ((const uint8_t *)p)[i] ? 1.0 : 0.0; }
template <> __device__ __forceinline__ void st<Bool8>(void *p, int64_t i, double v) { ((uint8_t *)p)[i] = v != 0.0; }

template <typename T> __device__ __forceinline__ int64_t ldi(const void *p, int64_t i) { return (int64_t)((const T *)p)[i]; }
template <> __device__ __forceinline__ int64_t ldi<Bool8>(const void *p, int64_t i) { return ((const uint8_t *)p)[i] ? 1 : 0; }
template <typename T> __device__ __forceinline__ void sti(void *p, int64_t i, int64_t v) { ((T *)p)[i] = (T)v; }
template <> __device__ __forceinline__ void sti<Bool8>(void *p, int64_t i, int64_t v) { ((uint8_t *)p)[i] = v != 0; }

// ---- scalar functions, as the CPU reference writes them
__device__ inline double round_half_even(double x) {
    double r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return r == 0.0 ? copysign(0.0, x) : r;
}
__device__ inline double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}
#define GELU_K 0.7978845608028654
#define GELU_C 0.044715
#define INV_SQRT_2PI 0.3989422804014327
__device__ inline double gelu_d(double x, double approximate) {
    if (approximate != 0.0) return x / (1.0 + exp(-2.0 * GELU_K * (x + GELU_C * x * x * x)));
    return 0.5 * x * erfc(-x * 0.70710678118654752440);
}
__device__ inline double gelu_prime(double x, bool tanh_form) {
    if (tanh_form) {
        double t = tanh(GELU_K * (x + GELU_C * x * x * x)), sech2 = 1.0 - t * t;
        return 0.5 * (1.0 + t) + (sech2 == 0.0 ? 0.0 : 0.5 * x * sech2 * GELU_K * (1.0 + 3.0 * GELU_C * x * x));
    }
    return 0.5 * erfc(-x * 0.70710678118654752440) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
}

__device__ inline double unary_f(int k, double x, double a0, double a1) {
    switch (k) {
    case OAR_CU_NEG: return -x;
    case OAR_CU_ABS: return fabs(x);
    case OAR_CU_EXP: return exp(x);
    case OAR_CU_LOG: return log(x);
    case OAR_CU_LOG1P: return log1p(x);
    case OAR_CU_SQRT: return sqrt(x);
    case OAR_CU_RSQRT: return 1.0 / sqrt(x);
    case OAR_CU_SQUARE: return x * x;
    case OAR_CU_SIN: return sin(x);
    case OAR_CU_COS: return cos(x);
    case OAR_CU_TANH: return tanh(x);
    case OAR_CU_SIGMOID: return sigmoid_d(x);
    case OAR_CU_RELU: return x < 0 ? 0.0 : x;
    case OAR_CU_LEAKY_RELU: return x > 0 ? x : x * a0;
    case OAR_CU_ELU: return x > 0 ? x : a0 * expm1(x);
    case OAR_CU_GELU: return gelu_d(x, a0);
    case OAR_CU_SILU: return x / (1.0 + exp(-x));
    case OAR_CU_SOFTPLUS: {
        double z = x * a0;
        if (z > a1) return x;
        return ((z > 0 ? z : 0.0) + log1p(exp(-fabs(z)))) / a0;
    }
    case OAR_CU_ERF: return erf(x);
    case OAR_CU_CLIP: {
        if (x < a0) x = a0;
        if (x > a1) x = a1;
        return x;
    }
    case OAR_CU_SIGN: return (double)((0 < x) - (x < 0));
    case OAR_CU_FLOOR: return floor(x);
    case OAR_CU_CEIL: return ceil(x);
    case OAR_CU_ROUND: return round_half_even(x);
    case OAR_CU_LOGICAL_NOT: return x == 0;
    case OAR_CU_ERFC: return erfc(x);
    case OAR_CU_ASIN: return asin(x);
    case OAR_CU_ACOS: return acos(x);
    case OAR_CU_ATAN: return atan(x);
    case OAR_CU_SINH: return sinh(x);
    case OAR_CU_ASINH: return asinh(x);
    case OAR_CU_ATANH: return atanh(x);
    case OAR_CU_EXPM1: return expm1(x);
    case OAR_CU_EXP2: return exp2(x);
    case OAR_CU_ACOSH: return acosh(x);
    case OAR_CU_COSH: return cosh(x);
    case OAR_CU_LGAMMA: return lgamma(x);
    case OAR_CU_DIGAMMA: return oar_digamma_d(x);
    case OAR_CU_POLYGAMMA: return oar_polygamma_d((int64_t)a0, x);
    case OAR_CU_ERFINV: return oar_erfinv_d(x);
    }
    return 0;
}

__device__ inline int64_t bound_i64(double v) {
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    return (int64_t)v;
}

__device__ inline int64_t unary_i(int k, int64_t x, double a0, double a1) {
    switch (k) {
    case OAR_CU_NEG: return (int64_t)(0 - (uint64_t)x);
    case OAR_CU_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case OAR_CU_SQUARE: return (int64_t)((uint64_t)x * (uint64_t)x);
    case OAR_CU_RELU: return x < 0 ? 0 : x;
    case OAR_CU_CLIP: {
        int64_t lo = bound_i64(a0), hi = bound_i64(a1);
        if (x < lo) x = lo;
        if (x > hi) x = hi;
        return x;
    }
    case OAR_CU_SIGN: return (0 < x) - (x < 0);
    case OAR_CU_LOGICAL_NOT: return x == 0;
    case OAR_CU_BITWISE_NOT: return ~x;
    default: return x;  // floor, ceil, round: integers are integral
    }
}

__device__ inline double binary_f(int k, double a, double b, double attr) {
    switch (k) {
    case OAR_CU_ADD: return a + b;
    case OAR_CU_SUB: return a - b;
    case OAR_CU_MUL: return a * b;
    case OAR_CU_DIV: return a / b;
    case OAR_CU_POW: return pow(a, b);
    case OAR_CU_MAX: return (a != a || b != b) ? NAN : (a > b ? a : b);
    case OAR_CU_MIN: return (a != a || b != b) ? NAN : (a < b ? a : b);
    case OAR_CU_EQ: return a == b;
    case OAR_CU_NE: return a != b;
    case OAR_CU_LT: return a < b;
    case OAR_CU_LE: return a <= b;
    case OAR_CU_GT: return a > b;
    case OAR_CU_GE: return a >= b;
    case OAR_CU_AND: return (a != 0) && (b != 0);
    case OAR_CU_OR: return (a != 0) || (b != 0);
    case OAR_CU_RELU_BACKWARD: return b > 0 ? a : 0.0;       // (grad, x)
    case OAR_CU_GELU_BACKWARD: return a * gelu_prime(b, attr != 0.0);
    case OAR_CU_ATAN2: return atan2(a, b);
    }
    return 0;
}

__device__ inline int64_t ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    int64_t r = 1;
    while (b) {
        if (b & 1) r = (int64_t)((uint64_t)r * (uint64_t)a);
        a = (int64_t)((uint64_t)a * (uint64_t)a);
        b >>= 1;
    }
    return r;
}

__device__ inline int64_t binary_i(int k, int64_t a, int64_t b) {
    switch (k) {
    case OAR_CU_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case OAR_CU_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case OAR_CU_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case OAR_CU_DIV: return b == 0 ? 0 : (a == INT64_MIN && b == -1) ? a : a / b;
    case OAR_CU_POW: return ipow(a, b);
    case OAR_CU_MAX: return a > b ? a : b;
    case OAR_CU_MIN: return a < b ? a : b;
    case OAR_CU_EQ: return a == b;
    case OAR_CU_NE: return a != b;
    case OAR_CU_LT: return a < b;
    case OAR_CU_LE: return a <= b;
    case OAR_CU_GT: return a > b;
    case OAR_CU_GE: return a >= b;
    case OAR_CU_AND: return a && b;
    case OAR_CU_OR: return a || b;
    case OAR_CU_BITWISE_AND: return a & b;
    case OAR_CU_BITWISE_OR: return a | b;
    case OAR_CU_BITWISE_XOR: return a ^ b;
    case OAR_CU_GCD: return oar_gcd_i(a, b);
    case OAR_CU_LCM: return oar_lcm_i(a, b);
    }
    return 0;
}

}  // namespace ew
}  // namespace oarcu
