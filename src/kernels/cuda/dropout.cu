// dropout with the CPU's counter-based generator (base/rng.c: Philox-4x32-10, ten rounds, the
// key bumped after each; the uniform is 53 bits of words 0 and 1).
#include "cuda_types.cuh"
#include "launch_dropout.h"

using namespace oarcu;

namespace {

__device__ __forceinline__ void philox(uint64_t seed, uint64_t counter, uint32_t &w0, uint32_t &w1) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
    for (int r = 0; r < 10; r++) {
        uint32_t lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        uint32_t lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    w0 = c0;
    w1 = c1;
}

__device__ __forceinline__ double uniform(uint64_t seed, uint64_t counter) {
    uint32_t w0, w1;
    philox(seed, counter, w0, w1);
    uint64_t bits = ((uint64_t)w0 << 21) ^ (uint64_t)w1;
    return (double)(bits & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

// x * m rounded once to T (the reference multiplies in double; products of two f32, f16 or
// bf16 values are exact in double and in float respectively, so one rounding matches).
template <typename T> __device__ __forceinline__ T mul(T x, T m) { return x * m; }
template <> __device__ __forceinline__ __half mul<__half>(__half x, __half m) {
    return __float2half_rn(__half2float(x) * __half2float(m));
}
template <> __device__ __forceinline__ __nv_bfloat16 mul<__nv_bfloat16>(__nv_bfloat16 x, __nv_bfloat16 m) {
    return __float2bfloat16_rn(__bfloat162float(x) * __bfloat162float(m));
}

template <typename T, typename Bits>
__global__ void dropout_k(T *y, T *mask, const T *x, int64_t n, double p, Bits scale_bits, uint64_t seed,
                          uint64_t offset, const uint64_t *rng_dev) {
    if (rng_dev) seed = rng_dev[0], offset = rng_dev[1]; // this run's counters (a replayed CUDA graph)
    T scale, zero;
    Bits zb = 0;
    memcpy(&scale, &scale_bits, sizeof(T));
    memcpy(&zero, &zb, sizeof(T));
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        T m = uniform(seed, offset + (uint64_t)i) >= p ? scale : zero;
        mask[i] = m;
        y[i] = mul<T>(x[i], m);
    }
}

}  // namespace

extern "C" int oar_cu_dropout(void *y, void *mask, const void *x, int dtype, int64_t n, double p, uint64_t scale_bits,
                              uint64_t seed, uint64_t offset, const uint64_t *rng_dev, void *stream) {
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(n, 256);
    switch (dtype) {
    case F32:
        dropout_k<float, uint32_t><<<b, 256, 0, s>>>((float *)y, (float *)mask, (const float *)x, n, p,
                                                     (uint32_t)scale_bits, seed, offset, rng_dev);
        break;
    case F64:
        dropout_k<double, uint64_t><<<b, 256, 0, s>>>((double *)y, (double *)mask, (const double *)x, n, p, scale_bits,
                                                      seed, offset, rng_dev);
        break;
    case F16:
        dropout_k<__half, uint16_t><<<b, 256, 0, s>>>((__half *)y, (__half *)mask, (const __half *)x, n, p,
                                                      (uint16_t)scale_bits, seed, offset, rng_dev);
        break;
    case BF16:
        dropout_k<__nv_bfloat16, uint16_t><<<b, 256, 0, s>>>((__nv_bfloat16 *)y, (__nv_bfloat16 *)mask,
                                                             (const __nv_bfloat16 *)x, n, p, (uint16_t)scale_bits,
                                                             seed, offset, rng_dev);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
