// Block-wide reductions in a fixed order (warp shuffles, then one warp over the warps'
// results), so a result never depends on scheduling. blockDim.x must be a multiple of 32
// (at most 1024); every thread of the block must call, and every thread gets the result.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

namespace oarcu {

// Float elements to double and back (half types through float, as the CPU's dtype table).
__device__ __forceinline__ double to_d(float v) { return (double)v; }
__device__ __forceinline__ double to_d(double v) { return v; }
__device__ __forceinline__ double to_d(__half v) { return (double)__half2float(v); }
__device__ __forceinline__ double to_d(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_d(double v) { return (T)v; }
template <> __device__ __forceinline__ __half from_d<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_d<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}

struct AddOp {
    __device__ __forceinline__ double operator()(double a, double b) const { return a + b; }
};
struct MulOp {
    __device__ __forceinline__ double operator()(double a, double b) const { return a * b; }
};
// max / min where a NaN wins (NaN propagates, as in torch)
struct MaxNanOp {
    __device__ __forceinline__ double operator()(double a, double b) const {
        return a != a ? a : (b != b || b > a ? b : a);
    }
};
struct MinNanOp {
    __device__ __forceinline__ double operator()(double a, double b) const {
        return a != a ? a : (b != b || b < a ? b : a);
    }
};

// sh: __shared__ double[32] of the caller.
template <typename Op>
__device__ __forceinline__ double block_reduce(double v, Op op, double ident, double *sh) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads(); // the previous call's readers of sh[0] are done
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : ident;
        for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// Threads for a block reducing n elements: a power of two in [32, cap].
static inline int threads_for(int64_t n, int cap) {
    int t = 32;
    while (t < n && t < cap) t *= 2;
    return t;
}

// Index-space helpers: the byte-free (element) offset of the i-th element, row-major.
__device__ __forceinline__ int64_t space_off(int n, const int64_t *shape, const int64_t *stride, int64_t i) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        int64_t s = shape[d];
        off += (i % s) * stride[d];
        i /= s;
    }
    return off;
}

}  // namespace oarcu
