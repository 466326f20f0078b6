// Losses (src/ops/loss.c, loss_ce.c). Per-element or per-sample values are computed in
// double; reductions write them to scratch and sum them in two fixed-order stages (block
// partials, then one block), so results never depend on scheduling.
#include "block_reduce.cuh"
#include "cuda_types.cuh"
#include "launch_loss.h"

#include <string.h>

using namespace oarcu;

namespace {

const int SUM_THREADS = 256;
const int64_t SUM_MAX_BLOCKS = 1024;

int64_t sum_blocks(int64_t n) {
    int64_t b = (n + SUM_THREADS * 4 - 1) / (SUM_THREADS * 4);
    return b < 1 ? 1 : (b > SUM_MAX_BLOCKS ? SUM_MAX_BLOCKS : b);
}

__global__ void partial_sums(const double *v, int64_t n, double *parts) {
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        acc += v[i];
    acc = block_reduce(acc, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = acc;
}

// y[0] = sum(parts) (/ div when mean)
template <typename T>
__global__ void final_sum(const double *parts, int64_t nparts, T *y, bool mean, double div, const int64_t *div_dev) {
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = threadIdx.x; i < nparts; i += blockDim.x) acc += parts[i];
    acc = block_reduce(acc, AddOp(), 0.0, sh);
    if (div_dev) div = (double)*div_dev; // a count made on the device (recorded in a CUDA graph)
    if (threadIdx.x == 0) y[0] = (T)(mean ? acc / div : acc);
}

// Sums v[0..n) into y[0]; scratch holds v's n doubles followed by the partials.
template <typename T>
void launch_sum(const double *v, int64_t n, double *parts, T *y, bool mean, double div, const int64_t *div_dev,
                cudaStream_t s) {
    int64_t b = n > 0 ? sum_blocks(n) : 0;
    if (b) partial_sums<<<(unsigned)b, SUM_THREADS, 0, s>>>(v, n, parts);
    final_sum<T><<<1, SUM_THREADS, 0, s>>>(parts, b, y, mean, div, div_dev);
}

__device__ __forceinline__ double pair_elem(int k, double x, double t, double beta) {
    double d = x - t;
    switch (k) {
    case OAR_CU_L_MSE: return d * d;
    case OAR_CU_L_L1: return fabs(d);
    case OAR_CU_L_SMOOTH_L1: return fabs(d) < beta ? 0.5 * d * d / beta : fabs(d) - 0.5 * beta;
    default: return (x > 0 ? x : 0) - x * t + log1p(exp(-fabs(x)));
    }
}

// reduced pair losses: each block's sum of its elements' losses (grid fixed by n, as
// partial_sums), so the per-element values never go through memory
template <typename T>
__global__ void pair_partial_kernel(int k, const T *x, const T *t, int64_t n, double beta, double *parts) {
    __shared__ double sh[32];
    double acc = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        acc += pair_elem(k, (double)x[i], (double)t[i], beta);
    acc = block_reduce(acc, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = acc;
}

template <typename T>
__global__ void pair_kernel(int k, const T *x, const T *t, T *y, int64_t n, double beta) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (T)pair_elem(k, (double)x[i], (double)t[i], beta);
}

__device__ __forceinline__ int64_t load_target(const void *t, int tdt, int64_t i) {
    switch (tdt) {
    case I8: return ((const int8_t *)t)[i];
    case U8: return ((const uint8_t *)t)[i];
    case I32: return ((const int32_t *)t)[i];
    default: return ((const int64_t *)t)[i];
    }
}

__global__ void check_targets_kernel(int tdt, const void *t, int64_t n, int64_t classes, int64_t ignore,
                                     unsigned long long *out) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t v = load_target(t, tdt, i);
        if (v == ignore) continue;
        if (v < 0 || v >= classes) atomicMin(&out[1], (unsigned long long)i); // integer: order-free
        else atomicAdd(&out[0], 1ull);
    }
}

__device__ __forceinline__ double mix(double nll, double uniform, double eps) {
    return eps > 0 ? (1 - eps) * nll + eps * uniform : nll;
}

__device__ __forceinline__ float exp_of(float v) { return expf(v); }
__device__ __forceinline__ double exp_of(double v) { return exp(v); }

// A running (max, sum of exp(x - max)) pair: x folds in one value, merge another pair. A NaN
// never becomes the max (it turns the sum NaN, as in the reference); equal maxima (both -inf
// or +inf included) add the sums unscaled, so no inf - inf appears where the reference has none.
// The exponentials run in T (f32 logits: expf, about 1 ulp), each term joining a double sum.
template <typename T> struct MaxSum {
    T m;
    double s;
    __device__ __forceinline__ void x(T v) {
        if (v > m) {
            s = s * (double)exp_of(m - v) + 1.0; // m - v < 0, or -inf: never NaN
            m = v;
        } else if (v != -INFINITY || m != -INFINITY) {
            s += (double)exp_of(v - m);
        }
    }
    __device__ __forceinline__ void merge(T om, double os) {
        T mx = om > m ? om : m;
        double a = m == mx ? s : s * (double)exp_of(m - mx), b = om == mx ? os : os * (double)exp_of(om - mx);
        m = mx;
        s = a + b;
    }
};

// The block's pair, in a fixed order; sm: 32 Ts, ss: 32 doubles of shared memory.
template <typename T> __device__ MaxSum<T> block_max_sum(MaxSum<T> p, T *sm, double *ss) {
    for (int o = 16; o > 0; o >>= 1) p.merge(__shfl_down_sync(0xffffffffu, p.m, o), __shfl_down_sync(0xffffffffu, p.s, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sm[w] = p.m, ss[w] = p.s;
    __syncthreads();
    if (w == 0) {
        MaxSum<T> q = {lane < nw ? sm[lane] : (T)-INFINITY, lane < nw ? ss[lane] : 0.0};
        for (int o = 16; o > 0; o >>= 1)
            q.merge(__shfl_down_sync(0xffffffffu, q.m, o), __shfl_down_sync(0xffffffffu, q.s, o));
        if (lane == 0) sm[0] = q.m, ss[0] = q.s;
    }
    __syncthreads();
    return MaxSum<T>{sm[0], ss[0]};
}

// One block per sample: the class line of x at base, stride inner. Cross entropy reads the line
// once: a running max and sum of exponentials per thread, merged across the block. A target out
// of range (possible only in a CUDA graph's replay, where nothing was checked before the launch)
// reads nothing and makes its loss and gradient row NaN, so the step's loss shows it.
template <typename T>
__global__ void class_loss_kernel(bool is_ce, const T *x, int tdt, const void *t, T *y, double *v, double *lse_out,
                                  int64_t outer, int64_t classes, int64_t inner, int64_t ignore, double eps) {
    __shared__ double sh[32];
    __shared__ T sm[32];
    const int64_t samples = outer * inner;
    for (int64_t i = blockIdx.x; i < samples; i += gridDim.x) {
        const T *row = x + (i / inner) * classes * inner + i % inner;
        const int64_t tg = load_target(t, tdt, i);
        double loss = 0;
        if (is_ce) {
            MaxSum<T> p = {(T)-INFINITY, 0.0};
            double sx = 0;
            for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
                T xv = row[c * inner];
                p.x(xv);
                sx += (double)xv;
            }
            p = block_max_sum(p, sm, sh);
            if (eps > 0) sx = block_reduce(sx, AddOp(), 0.0, sh);
            const double lse = (double)p.m + log(p.s);
            if (tg != ignore)
                loss = tg < 0 || tg >= classes ? (double)NAN
                                               : mix(lse - (double)row[tg * inner], lse - sx / (double)classes, eps);
            if (threadIdx.x == 0) lse_out[i] = lse;
        } else if (tg != ignore && (tg < 0 || tg >= classes)) {
            loss = (double)NAN;
        } else if (tg != ignore) {
            double sum = 0;
            if (eps > 0) {
                for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) sum += (double)row[c * inner];
                sum = block_reduce(sum, AddOp(), 0.0, sh);
            }
            loss = mix(-(double)row[tg * inner], -sum / (double)classes, eps);
        }
        if (threadIdx.x == 0) {
            if (y) y[i] = (T)loss;
            else v[i] = loss;
        }
    }
}

// One thread per element of dx.
template <typename T>
__global__ void class_loss_backward_kernel(bool is_ce, const T *g, const T *x, int tdt, const void *t,
                                           const double *lse, T *dx, int64_t outer, int64_t classes, int64_t inner,
                                           int reduction, int64_t ignore, double eps, double count,
                                           const int64_t *count_dev) {
    const int64_t n = outer * classes * inner;
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        const int64_t k = e % inner, c = (e / inner) % classes, o = e / (inner * classes);
        const int64_t i = o * inner + k;
        const int64_t tg = load_target(t, tdt, i);
        double gv = (double)g[reduction == 2 ? i : 0];
        if (reduction == 0) gv /= count_dev ? (double)*count_dev : count;
        const double q = tg == ignore ? 0.0 : (c == tg ? 1 - eps : 0) + eps / (double)classes;
        double d;
        if (tg != ignore && (tg < 0 || tg >= classes)) { // a replay's bad target (class_loss_kernel)
            dx[e] = (T)NAN;
            continue;
        }
        if (is_ce) d = tg != ignore ? gv * ((double)exp_of((T)((double)x[e] - lse[i])) - q) : 0.0;
        else d = q > 0 ? -gv * q : 0.0;
        dx[e] = (T)d;
    }
}

unsigned grid_for(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

}  // namespace

extern "C" size_t oar_cu_pair_loss_scratch_bytes(void) { return sizeof(double) * (size_t)SUM_MAX_BLOCKS; }

extern "C" size_t oar_cu_loss_scratch_bytes(int64_t n) {
    return sizeof(double) * (size_t)((n > 0 ? n : 0) + SUM_MAX_BLOCKS);
}

extern "C" int oar_cu_pair_loss(int kind, int dtype, const void *x, const void *t, void *y, int64_t n, int reduction,
                                double beta, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const bool none = reduction == 2, mean = reduction == 0;
    double *parts = (double *)scratch;
    const unsigned b = blocks_for(n, 256);
    const int64_t nb = n > 0 ? sum_blocks(n) : 0;
    if (dtype == F32) {
        const float *xf = (const float *)x, *tf = (const float *)t;
        if (none) {
            if (n > 0) pair_kernel<float><<<b, 256, 0, s>>>(kind, xf, tf, (float *)y, n, beta);
        } else {
            if (nb) pair_partial_kernel<float><<<(unsigned)nb, SUM_THREADS, 0, s>>>(kind, xf, tf, n, beta, parts);
            final_sum<float><<<1, SUM_THREADS, 0, s>>>(parts, nb, (float *)y, mean, (double)n, nullptr);
        }
    } else if (dtype == F64) {
        const double *xd = (const double *)x, *td = (const double *)t;
        if (none) {
            if (n > 0) pair_kernel<double><<<b, 256, 0, s>>>(kind, xd, td, (double *)y, n, beta);
        } else {
            if (nb) pair_partial_kernel<double><<<(unsigned)nb, SUM_THREADS, 0, s>>>(kind, xd, td, n, beta, parts);
            final_sum<double><<<1, SUM_THREADS, 0, s>>>(parts, nb, (double *)y, mean, (double)n, nullptr);
        }
    } else {
        return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_count_targets(int tdtype, const void *t, int64_t n, int64_t classes, int64_t ignore,
                                    int64_t *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = cudaMemsetAsync(scratch, 0, sizeof(int64_t), s); // count 0
    if (e == cudaSuccess) e = cudaMemsetAsync(scratch + 1, 0xff, sizeof(int64_t), s); // no bad index
    if (e != cudaSuccess) return (int)e;
    if (n > 0)
        check_targets_kernel<<<blocks_for(n, 256), 256, 0, s>>>(tdtype, t, n, classes, ignore,
                                                               (unsigned long long *)scratch);
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_check_targets(int tdtype, const void *t, int64_t n, int64_t classes, int64_t ignore,
                                    int64_t *scratch, int64_t host_out[3], void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    cudaError_t e = (cudaError_t)oar_cu_count_targets(tdtype, t, n, classes, ignore, scratch, stream);
    if (e != cudaSuccess) return (int)e;
    unsigned long long got[2];
    if ((e = cudaMemcpyAsync(got, scratch, sizeof got, cudaMemcpyDeviceToHost, s)) != cudaSuccess) return (int)e;
    if ((e = cudaStreamSynchronize(s)) != cudaSuccess) return (int)e;
    host_out[0] = (int64_t)got[0];
    host_out[1] = got[1] == ~0ull ? -1 : (int64_t)got[1];
    host_out[2] = 0;
    if (host_out[1] >= 0) {
        size_t es = tdtype == I64 ? 8 : tdtype == I32 ? 4 : 1;
        unsigned char raw[8] = {0};
        e = cudaMemcpyAsync(raw, (const char *)t + (size_t)host_out[1] * es, es, cudaMemcpyDeviceToHost, s);
        if (e == cudaSuccess) e = cudaStreamSynchronize(s);
        if (e != cudaSuccess) return (int)e;
        int64_t v64;
        int32_t v32;
        int8_t v8;
        switch (tdtype) {
        case I64: memcpy(&v64, raw, 8); host_out[2] = v64; break;
        case I32: memcpy(&v32, raw, 4); host_out[2] = v32; break;
        case I8: memcpy(&v8, raw, 1); host_out[2] = v8; break;
        default: host_out[2] = raw[0]; break;
        }
    }
    return 0;
}

extern "C" int oar_cu_class_loss(int is_ce, int dtype, const void *x, int tdtype, const void *t, void *y,
                                 double *lse_out, int64_t outer, int64_t classes, int64_t inner, int reduction,
                                 int64_t ignore, double eps, int64_t count, const int64_t *count_dev, void *scratch,
                                 void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t samples = outer * inner;
    bool none = reduction == 2;
    double *v = (double *)scratch, *parts = v + (samples > 0 ? samples : 0);
    int th = threads_for(classes, 256);
    if (dtype == F32) {
        if (samples > 0)
            class_loss_kernel<float><<<grid_for(samples), th, 0, s>>>(is_ce != 0, (const float *)x, tdtype, t,
                                                                      none ? (float *)y : nullptr, v, lse_out, outer,
                                                                      classes, inner, ignore, eps);
        if (!none) launch_sum<float>(v, samples, parts, (float *)y, reduction == 0, (double)count, count_dev, s);
    } else if (dtype == F64) {
        if (samples > 0)
            class_loss_kernel<double><<<grid_for(samples), th, 0, s>>>(is_ce != 0, (const double *)x, tdtype, t,
                                                                       none ? (double *)y : nullptr, v, lse_out,
                                                                       outer, classes, inner, ignore, eps);
        if (!none) launch_sum<double>(v, samples, parts, (double *)y, reduction == 0, (double)count, count_dev, s);
    } else {
        return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_class_loss_backward(int is_ce, int dtype, const void *g, const void *x, int tdtype,
                                          const void *t, const double *lse, void *dx, int64_t outer, int64_t classes,
                                          int64_t inner, int reduction, int64_t ignore, double eps, int64_t count,
                                          const int64_t *count_dev, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    const int64_t n = outer * classes * inner;
    if (n <= 0) return 0;
    unsigned b = blocks_for(n, 256);
    if (dtype == F32)
        class_loss_backward_kernel<float><<<b, 256, 0, s>>>(is_ce != 0, (const float *)g, (const float *)x, tdtype,
                                                            t, lse, (float *)dx, outer, classes, inner, reduction,
                                                            ignore, eps, (double)count, count_dev);
    else if (dtype == F64)
        class_loss_backward_kernel<double><<<b, 256, 0, s>>>(is_ce != 0, (const double *)g, (const double *)x,
                                                             tdtype, t, lse, (double *)dx, outer, classes, inner,
                                                             reduction, ignore, eps, (double)count, count_dev);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}
