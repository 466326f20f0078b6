// fused_elementwise: one thread per output element runs the whole program in registers.
// Each instruction computes in double like the separate op's reference and is rounded to the
// dtype, as the unfused ops would store it, so fused and unfused agree.
#include "cuda_types.cuh"
#include "launch_elementwise.h"
#include "launch_fused_ew.h"

using namespace oarcu;

// The scalar functions of elementwise.cu, shared by including its definitions would couple
// the two files' internals; these are the same formulas for the opcodes fused_elementwise
// takes (add sub mul div neg relu sigmoid tanh exp log sqrt square abs silu gelu, and the
// relu/gelu backward pairs).
namespace {

#define GELU_K 0.7978845608028654
#define GELU_C 0.044715
#define INV_SQRT_2PI 0.3989422804014327

__device__ double sigmoid_d(double x) {
    if (x >= 0) return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

__device__ double unary(int k, double x, double approximate) {
    switch (k) {
    case OAR_CU_NEG: return -x;
    case OAR_CU_RELU: return x < 0 ? 0.0 : x;
    case OAR_CU_SIGMOID: return sigmoid_d(x);
    case OAR_CU_TANH: return tanh(x);
    case OAR_CU_EXP: return exp(x);
    case OAR_CU_LOG: return log(x);
    case OAR_CU_SQRT: return sqrt(x);
    case OAR_CU_SQUARE: return x * x;
    case OAR_CU_ABS: return fabs(x);
    case OAR_CU_SILU: return x / (1.0 + exp(-x));
    case OAR_CU_GELU:
        if (approximate != 0.0) return x / (1.0 + exp(-2.0 * GELU_K * (x + GELU_C * x * x * x)));
        return 0.5 * x * erfc(-x * 0.70710678118654752440);
    }
    return 0;
}

__device__ double binary(int k, double a, double b, double approximate) {
    switch (k) {
    case OAR_CU_ADD: return a + b;
    case OAR_CU_SUB: return a - b;
    case OAR_CU_MUL: return a * b;
    case OAR_CU_DIV: return a / b;
    case OAR_CU_RELU_BACKWARD: return b > 0 ? a : 0.0;
    case OAR_CU_GELU_BACKWARD: {
        double x = b, d;
        if (approximate != 0.0) {
            double t = tanh(GELU_K * (x + GELU_C * x * x * x)), sech2 = 1.0 - t * t;
            d = 0.5 * (1.0 + t) + (sech2 == 0.0 ? 0.0 : 0.5 * x * sech2 * GELU_K * (1.0 + 3.0 * GELU_C * x * x));
        } else {
            d = 0.5 * erfc(-x * 0.70710678118654752440) + x * INV_SQRT_2PI * exp(-0.5 * x * x);
        }
        return a * d;
    }
    }
    return 0;
}

template <typename T> __device__ __forceinline__ double load(const void *p, int64_t i) { return (double)((const T *)p)[i]; }
template <> __device__ __forceinline__ double load<__half>(const void *p, int64_t i) { return (double)__half2float(((const __half *)p)[i]); }
template <> __device__ __forceinline__ double load<__nv_bfloat16>(const void *p, int64_t i) { return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]); }
template <typename T> __device__ __forceinline__ double round_to(double v) { return (double)(T)v; }
template <> __device__ __forceinline__ double round_to<double>(double v) { return v; }
template <> __device__ __forceinline__ double round_to<__half>(double v) { return (double)__half2float(__float2half_rn((float)v)); }
template <> __device__ __forceinline__ double round_to<__nv_bfloat16>(double v) { return (double)__bfloat162float(__float2bfloat16_rn((float)v)); }
template <typename T> __device__ __forceinline__ void store(void *p, int64_t i, double v) { ((T *)p)[i] = (T)v; }
template <> __device__ __forceinline__ void store<__half>(void *p, int64_t i, double v) { ((__half *)p)[i] = __float2half_rn((float)v); }
template <> __device__ __forceinline__ void store<__nv_bfloat16>(void *p, int64_t i, double v) { ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); }

template <typename T>
__global__ void fused_kernel(const oar_cu_few p) {
    double reg[OAR_CU_FEW_MAX_IN + OAR_CU_FEW_MAX_CODE];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < p.n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t idx[OAR_CU_MAX_DIMS], rest = i;
        for (int k = p.ndim - 1; k >= 0; k--) {
            idx[k] = rest % p.shape[k];
            rest /= p.shape[k];
        }
        for (int j = 0; j < p.n_in; j++) {
            int64_t off = 0;
            for (int k = 0; k < p.ndim; k++) off += idx[k] * p.strides[j][k];
            reg[j] = load<T>(p.in[j], off);
        }
        double v = 0;
        for (int c = 0; c < p.n_code; c++) {
            const oar_cu_few_instr I = p.code[c];
            v = I.binary ? binary(I.kind, reg[I.a], reg[I.b], I.attr) : unary(I.kind, reg[I.a], I.attr);
            v = round_to<T>(v);
            reg[p.n_in + c] = v;
        }
        store<T>(p.out, i, v);
    }
}

}  // namespace

extern "C" int oar_cu_fused_ew(const oar_cu_few *p, void *stream) {
    if (p->n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(p->n, 128);
    switch (p->dtype) {
    case F32: fused_kernel<float><<<b, 128, 0, s>>>(*p); break;
    case F64: fused_kernel<double><<<b, 128, 0, s>>>(*p); break;
    case F16: fused_kernel<__half><<<b, 128, 0, s>>>(*p); break;
    default: fused_kernel<__nv_bfloat16><<<b, 128, 0, s>>>(*p); break;
    }
    return (int)cudaGetLastError();
}
