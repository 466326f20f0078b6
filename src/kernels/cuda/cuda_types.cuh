// Device-side helpers shared by the .cu files: oar's dtypes as C++ types, conversions
// through float/double, and grid sizing. oar's dtype numbering (oar.h): f32 f64 f16 bf16 i8
// u8 i32 i64 bool i16 u16 u32 u64.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace oarcu {

enum Dtype { F32 = 0, F64, F16, BF16, I8, U8, I32, I64, BOOL, I16, U16, U32, U64 };

template <typename T> struct Acc { typedef float type; };   // the type arithmetic runs in
template <> struct Acc<double> { typedef double type; };
template <> struct Acc<int64_t> { typedef int64_t type; };
template <> struct Acc<int32_t> { typedef int64_t type; };
template <> struct Acc<int8_t> { typedef int64_t type; };
template <> struct Acc<uint8_t> { typedef int64_t type; };
template <> struct Acc<bool> { typedef int64_t type; };

template <typename To, typename From> __device__ __forceinline__ To cvt(From v) { return (To)v; }
template <> __device__ __forceinline__ __half cvt<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 cvt<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ float cvt<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float cvt<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// A value as double and back, as the CPU's dtype traits load and store it (half types through
// float), for kernels that compute in double like the reference.
template <typename T> __device__ __forceinline__ double ld_f64(T v) { return (double)v; }
template <> __device__ __forceinline__ double ld_f64<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double ld_f64<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T st_f64(double v) { return (T)v; }
template <> __device__ __forceinline__ __half st_f64<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 st_f64<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}

// Grid for n elements, one per thread with grid-stride loops past the cap.
static inline unsigned blocks_for(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b > 65535LL * 8) b = 65535LL * 8;
    return (unsigned)(b < 1 ? 1 : b);
}

}  // namespace oarcu
