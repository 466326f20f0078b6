// softmax, log_softmax and their backward ops (src/ops/nn.c): one block per line of n
// elements (stride inner), in double like the reference, with fixed-order block reductions.
// A NaN in a line poisons the line (its maximum is NaN).
#include "block_reduce.cuh"
#include "cuda_types.cuh"
#include "launch_softmax.h"

using namespace oarcu;

namespace {

template <typename T>
__global__ void softmax_kernel(const T *x, T *y, int64_t lines, int64_t n, int64_t inner, bool log_form) {
    __shared__ double sh[32];
    for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        const int64_t base = (l / inner) * n * inner + l % inner;
        double m = -INFINITY;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = MaxNanOp()(m, (double)x[base + k * inner]);
        m = block_reduce(m, MaxNanOp(), -INFINITY, sh);
        double s = 0;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) s += exp((double)x[base + k * inner] - m);
        s = block_reduce(s, AddOp(), 0.0, sh);
        const double ls = log(s);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            double v = (double)x[base + k * inner] - m;
            y[base + k * inner] = (T)(log_form ? v - ls : exp(v) / s);
        }
    }
}

template <typename T>
__global__ void softmax_backward_kernel(const T *g, const T *y, T *dx, int64_t lines, int64_t n, int64_t inner,
                                        bool log_form) {
    __shared__ double sh[32];
    for (int64_t l = blockIdx.x; l < lines; l += gridDim.x) {
        const int64_t base = (l / inner) * n * inner + l % inner;
        double s = 0;
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            int64_t at = base + k * inner;
            s += log_form ? (double)g[at] : (double)g[at] * (double)y[at];
        }
        s = block_reduce(s, AddOp(), 0.0, sh);
        for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
            int64_t at = base + k * inner;
            double gv = (double)g[at], yv = (double)y[at];
            dx[at] = (T)(log_form ? gv - exp(yv) * s : yv * (gv - s));
        }
    }
}

unsigned grid_for(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

}  // namespace

extern "C" int oar_cu_softmax(int log_form, int dtype, const void *x, void *y, int64_t outer, int64_t n,
                              int64_t inner, void *stream) {
    int64_t lines = outer * inner;
    if (lines <= 0 || n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int t = threads_for(n, 512);
    if (dtype == F32)
        softmax_kernel<float><<<grid_for(lines), t, 0, s>>>((const float *)x, (float *)y, lines, n, inner, log_form != 0);
    else if (dtype == F64)
        softmax_kernel<double><<<grid_for(lines), t, 0, s>>>((const double *)x, (double *)y, lines, n, inner,
                                                             log_form != 0);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_softmax_backward(int log_form, int dtype, const void *g, const void *y, void *dx,
                                       int64_t outer, int64_t n, int64_t inner, void *stream) {
    int64_t lines = outer * inner;
    if (lines <= 0 || n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int t = threads_for(n, 512);
    if (dtype == F32)
        softmax_backward_kernel<float><<<grid_for(lines), t, 0, s>>>((const float *)g, (const float *)y, (float *)dx,
                                                                     lines, n, inner, log_form != 0);
    else if (dtype == F64)
        softmax_backward_kernel<double><<<grid_for(lines), t, 0, s>>>((const double *)g, (const double *)y,
                                                                      (double *)dx, lines, n, inner, log_form != 0);
    else
        return (int)cudaErrorInvalidValue;
    return (int)cudaGetLastError();
}
