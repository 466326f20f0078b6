// The loss scaler's ops (launch_amp.h). The flag is only ever set to 1, so concurrent
// writers need no atomics and the result does not depend on scheduling.
#include "cuda_types.cuh"
#include "launch_amp.h"

using namespace oarcu;

// f32 multiplies in f32 (the reference's vectorized loop); the other dtypes in double,
// rounded once to the element type, as the reference's load/store path.
template <typename T> __device__ __forceinline__ T scaled(T v, float inv) { return (T)((double)v * (double)inv); }
template <> __device__ __forceinline__ float scaled<float>(float v, float inv) { return v * inv; }
template <> __device__ __forceinline__ __half scaled<__half>(__half v, float inv) {
    return __double2half((double)__half2float(v) * (double)inv);
}
template <> __device__ __forceinline__ __nv_bfloat16 scaled<__nv_bfloat16>(__nv_bfloat16 v, float inv) {
    return __double2bfloat16((double)__bfloat162float(v) * (double)inv);
}
template <typename T> __device__ __forceinline__ bool finite(T v) { return isfinite((double)v); }
template <> __device__ __forceinline__ bool finite<__half>(__half v) { return isfinite(__half2float(v)); }
template <> __device__ __forceinline__ bool finite<__nv_bfloat16>(__nv_bfloat16 v) {
    return isfinite(__bfloat162float(v));
}

template <typename T> __global__ void unscale_kernel(T *g, int64_t n, const float *inv_scale, float *found) {
    const float inv = *inv_scale;
    bool bad = false;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T v = scaled<T>(g[i], inv);
        g[i] = v;
        bad |= !finite<T>(v);
    }
    if (bad) *found = 1.0f;
}

template <typename T> static cudaError_t unscale(void *g, int64_t n, const float *inv, float *found, cudaStream_t s) {
    const int threads = 256;
    unscale_kernel<T><<<blocks_for(n, threads), threads, 0, s>>>((T *)g, n, inv, found);
    return cudaGetLastError();
}

extern "C" int oar_cu_amp_unscale(int dtype, void *g, int64_t n, const float *inv_scale, float *found, void *stream) {
    if (n <= 0) return cudaSuccess;
    cudaStream_t s = (cudaStream_t)stream;
    switch (dtype) {
    case F32: return unscale<float>(g, n, inv_scale, found, s);
    case F64: return unscale<double>(g, n, inv_scale, found, s);
    case F16: return unscale<__half>(g, n, inv_scale, found, s);
    case BF16: return unscale<__nv_bfloat16>(g, n, inv_scale, found, s);
    default: return cudaErrorInvalidValue;
    }
}

__global__ void update_scale_kernel(float *scale, int64_t *tracker, const float *found, double growth, double backoff,
                                    int64_t interval, double min_scale) {
    if (*found != 0.0f) {
        float s = *scale * (float)backoff, floor = (float)min_scale;
        if (s < floor) s = *scale < floor ? *scale : floor; // a scale set below the floor stays
        *scale = s;
        *tracker = 0;
    } else if (*tracker + 1 >= interval) {
        float s = *scale * (float)growth;
        if (isfinite(s)) *scale = s;
        *tracker = 0;
    } else {
        *tracker += 1;
    }
}

extern "C" int oar_cu_amp_update_scale(float *scale, int64_t *growth_tracker, const float *found,
                                       double growth_factor, double backoff_factor, int64_t growth_interval,
                                       double min_scale, void *stream) {
    update_scale_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(scale, growth_tracker, found, growth_factor, backoff_factor,
                                                           growth_interval, min_scale);
    return cudaGetLastError();
}
