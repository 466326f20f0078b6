// Scaled dot-product attention (launch_attention.h). f64: a straightforward kernel in double, one
// block per query row for the forward, one thread per output element for the backward; every
// sum runs in the CPU reference's order except the softmax's max and sum (block reductions).
// f32/f16/bf16 take the GEMM path (cuda_attention.c): cuBLASLt products, with the row kernels
// softmax_rows_k and ds_rows_k below between them.
#include "cuda_types.cuh"
#include "launch_attention.h"

using namespace oarcu;

namespace {

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

const int kThreads = 256; // a multiple of 32: every lane of every warp is live in the reductions

template <typename T> __device__ __forceinline__ double ld(T v) { return (double)v; }
template <> __device__ __forceinline__ double ld<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double ld<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <typename T> __device__ __forceinline__ T st(double v) { return (T)v; }
template <> __device__ __forceinline__ __half st<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}

// The block's max (as the reference: a NaN never replaces the running max) or sum of v; red
// holds 33 doubles of shared memory.
__device__ double block_reduce(double v, double *red, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        double w = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? (w > v ? w : v) : v + w;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? red[lane] : (is_max ? -INFINITY : 0.0);
        for (int o = 16; o > 0; o >>= 1) {
            double w = __shfl_down_sync(0xffffffffu, v, o);
            v = is_max ? (w > v ? w : v) : v + w;
        }
        if (lane == 0) red[32] = v;
    }
    __syncthreads();
    double r = red[32];
    __syncthreads();
    return r;
}

template <typename T>
__global__ void forward_k(T *out, T *probs, const T *q, const T *k, const T *v, const uint8_t *mask, int64_t L,
                          int64_t S, int64_t D, int64_t Dv, double scale, bool causal) {
    extern __shared__ double sh[];
    double *row = sh, *red = sh + S;
    int64_t r = blockIdx.x, b = r / L, i = r % L;
    const T *qi = q + r * D, *kb = k + b * S * D, *vb = v + b * S * Dv;
    double mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
        double s = 0;
        for (int64_t d = 0; d < D; d++) s += ld(qi[d]) * ld(kb[j * D + d]);
        bool m = (causal && j > i) || (mask && mask[i * S + j]);
        row[j] = m ? -INFINITY : s * scale;
        if (row[j] > mx) mx = row[j];
    }
    mx = block_reduce(mx, red, true);
    double sum = 0;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
        row[j] = exp(row[j] - mx); // a row with every key masked: NaN, as softmax
        sum += row[j];
    }
    sum = block_reduce(sum, red, false);
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
        row[j] /= sum;
        probs[r * S + j] = st<T>(row[j]);
    }
    __syncthreads();
    for (int64_t e = threadIdx.x; e < Dv; e += blockDim.x) {
        double o = 0;
        for (int64_t j = 0; j < S; j++) o += row[j] * ld(vb[j * Dv + e]);
        out[r * Dv + e] = st<T>(o);
    }
}

// dv[b, j, e] = sum_i p[b, i, j] g[b, i, e]
template <typename T>
__global__ void dv_k(T *dv, const T *g, const T *p, int64_t L, int64_t S, int64_t Dv, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t e = t % Dv, r = t / Dv, j = r % S, b = r / S;
        const T *pb = p + b * L * S, *gb = g + b * L * Dv;
        double s = 0;
        for (int64_t i = 0; i < L; i++) s += ld(pb[i * S + j]) * ld(gb[i * Dv + e]);
        dv[t] = st<T>(s);
    }
}

// One thread per row (b, i): dp, its row sum against p, then ds.
template <typename T>
__global__ void ds_k(double *ds, const T *g, const T *v, const T *p, int64_t L, int64_t S, int64_t Dv, double scale,
                     int64_t n) {
    GRID_LOOP(r, n) {
        int64_t b = r / L;
        const T *gi = g + r * Dv, *vb = v + b * S * Dv, *pi = p + r * S;
        double *dsi = ds + r * S;
        double rs = 0;
        for (int64_t j = 0; j < S; j++) {
            double dp = 0;
            for (int64_t e = 0; e < Dv; e++) dp += ld(gi[e]) * ld(vb[j * Dv + e]);
            dsi[j] = dp;
            rs += dp * ld(pi[j]);
        }
        for (int64_t j = 0; j < S; j++) dsi[j] = scale * ld(pi[j]) * (dsi[j] - rs);
    }
}

// dq[b, i, d] = sum_j ds[b, i, j] k[b, j, d]
template <typename T>
__global__ void dq_k(T *dq, const double *ds, const T *k, int64_t L, int64_t S, int64_t D, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t d = t % D, r = t / D, b = r / L;
        const double *dsi = ds + r * S;
        const T *kb = k + b * S * D;
        double s = 0;
        for (int64_t j = 0; j < S; j++) s += dsi[j] * ld(kb[j * D + d]);
        dq[t] = st<T>(s);
    }
}

// dk[b, j, d] = sum_i ds[b, i, j] q[b, i, d]
template <typename T>
__global__ void dk_k(T *dk, const double *ds, const T *q, int64_t L, int64_t S, int64_t D, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t d = t % D, r = t / D, j = r % S, b = r / S;
        const double *dsb = ds + b * L * S;
        const T *qb = q + b * L * D;
        double s = 0;
        for (int64_t i = 0; i < L; i++) s += dsb[i * S + j] * ld(qb[i * D + d]);
        dk[t] = st<T>(s);
    }
}

// ---- the GEMM path (f32, f16, bf16): the products run in cuBLASLt (the C glue), these kernels
// do the rows between them in f32, one block per row of [rows, S].

template <typename T> __device__ __forceinline__ float lf(T v) { return (float)v; }
template <> __device__ __forceinline__ float lf<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float lf<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T sf(float v) { return (T)v; }
template <> __device__ __forceinline__ __half sf<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 sf<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
// exp of a row entry: the fast intrinsic where the result is rounded to a half type anyway,
// expf's accuracy where f32 probabilities are the output
template <typename T> __device__ __forceinline__ float row_exp(float x) { return __expf(x); }
template <> __device__ __forceinline__ float row_exp<float>(float x) { return expf(x); }

// Block max or sum of v in a fixed order; red: 33 floats of shared memory.
__device__ float block_reduce_f(float v, float *red, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_down_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    if (lane == 0) red[wid] = v;
    __syncthreads();
    if (wid == 0) {
        v = lane < nw ? red[lane] : (is_max ? -INFINITY : 0.0f);
        for (int o = 16; o > 0; o >>= 1) {
            float w = __shfl_down_sync(0xffffffffu, v, o);
            v = is_max ? fmaxf(v, w) : v + w;
        }
        if (lane == 0) red[32] = v;
    }
    __syncthreads();
    float r = red[32];
    __syncthreads();
    return r;
}

// probs[r, :] = softmax(scores[r, :] * scale, masked): row r of batch entry r / L is query r % L.
// A causal row i stops reading at key i (the rest is written 0 without loading scores).
template <typename T>
__global__ void softmax_rows_k(T *probs, const float *scores, const uint8_t *mask, int64_t L, int64_t S, float scale,
                               bool causal) {
    __shared__ float red[33];
    int64_t r = blockIdx.x, i = r % L;
    const float *sr = scores + r * S;
    T *pr = probs + r * S;
    int64_t live = causal ? (i + 1 < S ? i + 1 : S) : S;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < live; j += blockDim.x)
        if (!(mask && mask[i * S + j])) mx = fmaxf(mx, sr[j] * scale);
    mx = block_reduce_f(mx, red, true);
    float sum = 0;
    for (int64_t j = threadIdx.x; j < live; j += blockDim.x)
        if (!(mask && mask[i * S + j])) sum += row_exp<T>(sr[j] * scale - mx);
    sum = block_reduce_f(sum, red, false);
    float inv = 1.0f / sum; // every key masked: mx = -inf, sum = 0, and the row is NaN as softmax's
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) {
        bool m = j >= live || (mask && mask[i * S + j]);
        pr[j] = sf<T>(m ? (mx == -INFINITY ? NAN : 0.0f) : row_exp<T>(sr[j] * scale - mx) * inv);
    }
}

// ds[r, :] = scale * p * (dp - sum_j dp * p) in T, from dp [rows, S] in f32 and p in T.
template <typename T>
__global__ void ds_rows_k(T *ds, const float *dp, const T *p, int64_t S, float scale) {
    __shared__ float red[33];
    int64_t r = blockIdx.x;
    const float *dr = dp + r * S;
    const T *pr = p + r * S;
    T *out = ds + r * S;
    float acc = 0;
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) acc += dr[j] * lf(pr[j]);
    acc = block_reduce_f(acc, red, false);
    for (int64_t j = threadIdx.x; j < S; j += blockDim.x) out[j] = sf<T>(scale * lf(pr[j]) * (dr[j] - acc));
}

#define BY_GEMM_PATH(dt, ...)                                          \
    switch (dt) {                                                      \
    case F32: { typedef float T; __VA_ARGS__; } break;                 \
    case F16: { typedef __half T; __VA_ARGS__; } break;                \
    case BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;        \
    default: return (int)cudaErrorInvalidValue;                        \
    }

#define BY_FLOAT(dt, ...)                                              \
    switch (dt) {                                                      \
    case F32: { typedef float T; __VA_ARGS__; } break;                 \
    case F64: { typedef double T; __VA_ARGS__; } break;                \
    case F16: { typedef __half T; __VA_ARGS__; } break;                \
    case BF16: { typedef __nv_bfloat16 T; __VA_ARGS__; } break;        \
    default: return (int)cudaErrorInvalidValue;                        \
    }

}  // namespace

extern "C" int oar_cu_attention_forward(void *out, void *probs, const void *q, const void *k, const void *v,
                                        const uint8_t *mask, int dtype, int64_t nb, int64_t L, int64_t S, int64_t D,
                                        int64_t Dv, double scale, int causal, void *stream) {
    int64_t rows = nb * L;
    if (rows <= 0) return 0;
    if (S > OAR_CU_ATTENTION_MAX_S || S <= 0 || rows > 0x7fffffffLL) return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    size_t shmem = sizeof(double) * (size_t)(S + 33);
    BY_FLOAT(dtype, forward_k<T><<<(unsigned)rows, kThreads, shmem, s>>>((T *)out, (T *)probs, (const T *)q,
                                                                        (const T *)k, (const T *)v, mask, L, S, D, Dv,
                                                                        scale, causal != 0));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_attention_backward(void *dq, void *dk, void *dv, const void *g, const void *q, const void *k,
                                         const void *v, const void *p, int dtype, int64_t nb, int64_t L, int64_t S,
                                         int64_t D, int64_t Dv, double scale, double *ds, void *stream) {
    if (nb <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int64_t n_dv = nb * S * Dv, n_rows = nb * L, n_dq = nb * L * D, n_dk = nb * S * D;
    BY_FLOAT(dtype, {
        if (n_dv > 0)
            dv_k<T><<<blocks_for(n_dv, kThreads), kThreads, 0, s>>>((T *)dv, (const T *)g, (const T *)p, L, S, Dv,
                                                                   n_dv);
        if (n_rows > 0 && S > 0)
            ds_k<T><<<blocks_for(n_rows, 128), 128, 0, s>>>(ds, (const T *)g, (const T *)v, (const T *)p, L, S, Dv,
                                                           scale, n_rows);
        if (n_dq > 0)
            dq_k<T><<<blocks_for(n_dq, kThreads), kThreads, 0, s>>>((T *)dq, ds, (const T *)k, L, S, D, n_dq);
        if (n_dk > 0)
            dk_k<T><<<blocks_for(n_dk, kThreads), kThreads, 0, s>>>((T *)dk, ds, (const T *)q, L, S, D, n_dk);
    });
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_attention_softmax_rows(void *probs, const float *scores, const uint8_t *mask, int dtype,
                                             int64_t rows, int64_t L, int64_t S, double scale, int causal,
                                             void *stream) {
    if (rows <= 0 || S <= 0) return 0;
    if (rows > 0x7fffffffLL) return (int)cudaErrorInvalidValue;
    BY_GEMM_PATH(dtype, softmax_rows_k<T><<<(unsigned)rows, kThreads, 0, (cudaStream_t)stream>>>(
                       (T *)probs, scores, mask, L, S, (float)scale, causal != 0));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_attention_ds_rows(void *ds, const float *dp, const void *p, int dtype, int64_t rows, int64_t S,
                                        double scale, void *stream) {
    if (rows <= 0 || S <= 0) return 0;
    if (rows > 0x7fffffffLL) return (int)cudaErrorInvalidValue;
    BY_GEMM_PATH(dtype, ds_rows_k<T><<<(unsigned)rows, kThreads, 0, (cudaStream_t)stream>>>((T *)ds, dp, (const T *)p, S,
                                                                                      (float)scale));
    return (int)cudaGetLastError();
}
