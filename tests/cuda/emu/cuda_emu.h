// The few CUDA pieces vision.cu uses, emulated on the host so that its kernels' index logic runs
// in the CPU suite (test_vision_emu.c; emulate_cu.cmake makes the .cpp): each launch is a plain
// call with one block of one thread (grid-stride loops then visit every element in order,
// __syncthreads has nothing to wait for), half types are floats, and CUB's stable radix sort is
// std::stable_sort. It cannot see races or launch limits: the GPU runs of the sweep and
// test_cuda do.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__

struct oar_emu_dim3 {
    long long x;
};
static const oar_emu_dim3 blockIdx{0}, threadIdx{0}, blockDim{1}, gridDim{1};
static inline void __syncthreads() {}
static inline long long __double_as_longlong(double v) {
    long long r;
    memcpy(&r, &v, sizeof r);
    return r;
}

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1 };
typedef void *cudaStream_t;
static inline cudaError_t cudaGetLastError() { return cudaSuccess; }
static inline cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t) {
    memset(p, v, n);
    return cudaSuccess;
}

struct __half {
    float f;
};
struct __nv_bfloat16 {
    float f;
};

namespace oarcu {
enum Dtype { F32 = 0, F64, F16, BF16, I8, U8, I32, I64, BOOL };
template <typename T> inline double ld_f64(T v) { return (double)v; }
template <> inline double ld_f64<__half>(__half v) { return v.f; }
template <> inline double ld_f64<__nv_bfloat16>(__nv_bfloat16 v) { return v.f; }
template <typename T> inline T st_f64(double v) { return (T)v; }
template <> inline __half st_f64<__half>(double v) { return __half{(float)v}; }
template <> inline __nv_bfloat16 st_f64<__nv_bfloat16>(double v) { return __nv_bfloat16{(float)v}; }
static inline unsigned blocks_for(int64_t, int) { return 1; }
} // namespace oarcu

namespace cub {
struct DeviceRadixSort {
    // Fails (2) on a key with bits at or past end_bit, as the real sort would lose them.
    template <class K, class V>
    static cudaError_t SortPairs(void *tmp, size_t &bytes, const K *kin, K *kout, const V *vin, V *vout, int n,
                                 int begin_bit, int end_bit, cudaStream_t = 0) {
        if (!tmp) {
            bytes = 16;
            return cudaSuccess;
        }
        if (begin_bit != 0 || end_bit < 1 || end_bit > 64) return cudaErrorInvalidValue;
        std::vector<std::pair<K, V>> v((size_t)n);
        for (int i = 0; i < n; i++) {
            if (end_bit < 64 && (kin[i] >> end_bit) != 0) return 2;
            v[(size_t)i] = {kin[i], vin[i]};
        }
        std::stable_sort(v.begin(), v.end(),
                         [](const std::pair<K, V> &a, const std::pair<K, V> &b) { return a.first < b.first; });
        for (int i = 0; i < n; i++) kout[i] = v[(size_t)i].first, vout[i] = v[(size_t)i].second;
        return cudaSuccess;
    }
};
} // namespace cub

// nms's marks (shared memory on the GPU); the walk uses at most 6144 words
static unsigned long long gone[6144];
