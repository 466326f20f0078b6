// The convolutions' epilogue (launch_conv.h); the convolutions themselves run in cuDNN
// (cuda_conv.c).
#include "cuda_types.cuh"
#include "launch_conv.h"

using namespace oarcu;

namespace {

template <typename T> struct Math { typedef float A; };
template <> struct Math<double> { typedef double A; };

template <typename T>
__global__ void epilogue_k(T *y, const T *bias, const T *res, int64_t n, int64_t channels, int64_t inner, bool relu) {
    typedef typename Math<T>::A A;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        A v = cvt<A>(y[i]);
        if (bias) v += cvt<A>(bias[(i / inner) % channels]);
        if (res) v += cvt<A>(res[i]);
        if (relu) v = v > (A)0 ? v : (A)0;
        y[i] = cvt<T>(v);
    }
}

}  // namespace

extern "C" int oar_cu_conv_epilogue(void *y, const void *bias, const void *residual, int dtype, int64_t n,
                                    int64_t channels, int64_t inner, int relu, void *stream) {
    if (n <= 0) return 0;
    if (channels <= 0 || inner <= 0) return (int)cudaErrorInvalidValue;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(n, 256);
    switch (dtype) {
    case F32:
        epilogue_k<float><<<b, 256, 0, s>>>((float *)y, (const float *)bias, (const float *)residual, n, channels,
                                            inner, relu != 0);
        break;
    case F64:
        epilogue_k<double><<<b, 256, 0, s>>>((double *)y, (const double *)bias, (const double *)residual, n, channels,
                                             inner, relu != 0);
        break;
    case F16:
        epilogue_k<__half><<<b, 256, 0, s>>>((__half *)y, (const __half *)bias, (const __half *)residual, n, channels,
                                             inner, relu != 0);
        break;
    case BF16:
        epilogue_k<__nv_bfloat16><<<b, 256, 0, s>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)bias,
                                                    (const __nv_bfloat16 *)residual, n, channels, inner, relu != 0);
        break;
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}
