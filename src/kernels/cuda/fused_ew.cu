// fused_elementwise: one thread per output element runs the whole program in registers.
// Each instruction computes in double like the separate op's reference and is rounded to the
// dtype, as the unfused ops would store it, so fused and unfused agree.
#include "cuda_types.cuh"
#include "ew_math.cuh"
#include "launch_elementwise.h"
#include "launch_fused_ew.h"

using namespace oarcu;

namespace {

template <typename T> __device__ __forceinline__ double round_to(double v) { return (double)(T)v; }
template <> __device__ __forceinline__ double round_to<double>(double v) { return v; }
template <> __device__ __forceinline__ double round_to<__half>(double v) { return (double)__half2float(__float2half_rn((float)v)); }
template <> __device__ __forceinline__ double round_to<__nv_bfloat16>(double v) { return (double)__bfloat162float(__float2bfloat16_rn((float)v)); }

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
            reg[j] = ew::ld<T>(p.in[j], off);
        }
        double v = 0;
        for (int c = 0; c < p.n_code; c++) {
            const oar_cu_few_instr I = p.code[c];
            v = I.binary ? ew::binary_f(I.kind, reg[I.a], reg[I.b], I.attr) : ew::unary_f(I.kind, reg[I.a], I.attr, 0);
            v = round_to<T>(v);
            reg[p.n_in + c] = v;
        }
        ew::st<T>(p.out, i, v);
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
