// The unary, binary and where families: one kernel each, the op chosen by a uniform runtime
// switch, operands read through strides (0 on broadcast dims), a flat fast path when every
// operand is contiguous. Semantics follow the CPU reference (src/ops/unary.c, binary.c,
// unary_backward.c) formula for formula.
#include "cuda_types.cuh"
#include "ew_math.cuh"
#include "launch_elementwise.h"

#include <math.h>

using namespace oarcu;
using namespace oarcu::ew;

namespace {

struct Ew {
    int ndim, n_in;
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t strides[3][OAR_CU_MAX_DIMS];
    const void *in[3];
    void *out;
    int contiguous;
    double a0, a1;
};

Ew pack(const oar_cu_ew *e) {
    Ew w;
    w.ndim = e->ndim;
    w.n_in = e->n_in;
    for (int k = 0; k < OAR_CU_MAX_DIMS; k++) {
        w.shape[k] = e->shape[k];
        for (int j = 0; j < 3; j++) w.strides[j][k] = e->strides[j][k];
    }
    for (int j = 0; j < 3; j++) w.in[j] = e->in[j];
    w.out = e->out;
    w.contiguous = e->contiguous;
    w.a0 = e->attr[0];
    w.a1 = e->attr[1];
    return w;
}

// Offsets of the inputs for output element i.
template <int N>
__device__ __forceinline__ void in_offsets(const Ew &w, int64_t i, int64_t *off) {
    if (w.contiguous) {
        for (int j = 0; j < N; j++) off[j] = i;
        return;
    }
    for (int j = 0; j < N; j++) off[j] = 0;
    for (int k = w.ndim - 1; k >= 0; k--) {
        int64_t idx = i % w.shape[k];
        i /= w.shape[k];
        for (int j = 0; j < N; j++) off[j] += idx * w.strides[j][k];
    }
}

// value loads and stores per dtype, and the ops' scalar functions: ew_math.cuh

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename TI, typename TO>
__global__ void unary_float(int k, Ew w, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t off[1];
        in_offsets<1>(w, i, off);
        st<TO>(w.out, i, unary_f(k, ld<TI>(w.in[0], off[0]), w.a0, w.a1));
    }
}
template <typename TI, typename TO>
__global__ void unary_int(int k, Ew w, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t off[1];
        in_offsets<1>(w, i, off);
        sti<TO>(w.out, i, unary_i(k, ldi<TI>(w.in[0], off[0]), w.a0, w.a1));
    }
}
template <typename TI, typename TO>
__global__ void binary_float(int k, Ew w, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t off[2];
        in_offsets<2>(w, i, off);
        st<TO>(w.out, i, binary_f(k, ld<TI>(w.in[0], off[0]), ld<TI>(w.in[1], off[1]), w.a0));
    }
}
template <typename TI, typename TO>
__global__ void binary_int(int k, Ew w, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t off[2];
        in_offsets<2>(w, i, off);
        sti<TO>(w.out, i, binary_i(k, ldi<TI>(w.in[0], off[0]), ldi<TI>(w.in[1], off[1])));
    }
}
// Contiguous f32 operands: four elements per thread through 16-byte loads and stores (the
// memory system's natural width), the tail one at a time.
__global__ void unary_f32x4(int k, const float *x, float *y, int64_t n, double a0, double a1) {
    int64_t n4 = n / 4;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 v = reinterpret_cast<const float4 *>(x)[i];
        v.x = (float)unary_f(k, v.x, a0, a1);
        v.y = (float)unary_f(k, v.y, a0, a1);
        v.z = (float)unary_f(k, v.z, a0, a1);
        v.w = (float)unary_f(k, v.w, a0, a1);
        reinterpret_cast<float4 *>(y)[i] = v;
    }
    int64_t t = n4 * 4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t < n) y[t] = (float)unary_f(k, x[t], a0, a1);
}
__global__ void binary_f32x4(int k, const float *a, const float *b, float *y, int64_t n, double attr) {
    int64_t n4 = n / 4;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        float4 u = reinterpret_cast<const float4 *>(a)[i], v = reinterpret_cast<const float4 *>(b)[i];
        u.x = (float)binary_f(k, u.x, v.x, attr);
        u.y = (float)binary_f(k, u.y, v.y, attr);
        u.z = (float)binary_f(k, u.z, v.z, attr);
        u.w = (float)binary_f(k, u.w, v.w, attr);
        reinterpret_cast<float4 *>(y)[i] = u;
    }
    int64_t t = n4 * 4 + blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (t < n) y[t] = (float)binary_f(k, a[t], b[t], attr);
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }
unsigned blocks_x4(int64_t n) {
    int64_t b = (n / 4 + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b > 65535LL * 16 ? 65535LL * 16 : b);
}

template <typename T>
__global__ void where_kernel(Ew w, int64_t n) {
    GRID_LOOP(i, n) {
        int64_t off[3];
        in_offsets<3>(w, i, off);
        bool c = ((const uint8_t *)w.in[0])[off[0]] != 0;
        ((T *)w.out)[i] = c ? ((const T *)w.in[1])[off[1]] : ((const T *)w.in[2])[off[2]];
    }
}

bool is_float_dt(int dt) { return dt <= BF16; }

// Calls F<TI, TO> for the (input, output) dtype pair: TO is TI, or bool for comparisons.
#define DISPATCH_IN(DT, TO_SAME, BODY)                                              \
    switch (DT) {                                                                   \
    case F32: { typedef float TI; BODY; } break;                                    \
    case F64: { typedef double TI; BODY; } break;                                   \
    case F16: { typedef __half TI; BODY; } break;                                   \
    case BF16: { typedef __nv_bfloat16 TI; BODY; } break;                           \
    case I8: { typedef int8_t TI; BODY; } break;                                    \
    case U8: { typedef uint8_t TI; BODY; } break;                                   \
    case I32: { typedef int32_t TI; BODY; } break;                                  \
    case I64: { typedef int64_t TI; BODY; } break;                                  \
    default: { typedef Bool8 TI; BODY; } break;                                     \
    }

}  // namespace

extern "C" int oar_cu_unary(int kind, const oar_cu_ew *e, void *stream) {
    if (e->n <= 0) return 0;
    Ew w = pack(e);
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(e->n, 256);
    bool to_bool = e->out_dtype == BOOL && e->in_dtype != BOOL;
    if (e->contiguous && e->in_dtype == F32 && e->out_dtype == F32 && aligned16(e->in[0]) && aligned16(e->out)) {
        unary_f32x4<<<blocks_x4(e->n), 256, 0, s>>>(kind, (const float *)e->in[0], (float *)e->out, e->n, e->attr[0],
                                                     e->attr[1]);
    } else if (is_float_dt(e->in_dtype)) {
        if (to_bool) { DISPATCH_IN(e->in_dtype, 0, (unary_float<TI, Bool8><<<b, 256, 0, s>>>(kind, w, e->n))) }
        else { DISPATCH_IN(e->in_dtype, 0, (unary_float<TI, TI><<<b, 256, 0, s>>>(kind, w, e->n))) }
    } else {
        if (to_bool) { DISPATCH_IN(e->in_dtype, 0, (unary_int<TI, Bool8><<<b, 256, 0, s>>>(kind, w, e->n))) }
        else { DISPATCH_IN(e->in_dtype, 0, (unary_int<TI, TI><<<b, 256, 0, s>>>(kind, w, e->n))) }
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_binary(int kind, const oar_cu_ew *e, void *stream) {
    if (e->n <= 0) return 0;
    Ew w = pack(e);
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(e->n, 256);
    bool to_bool = e->out_dtype == BOOL && e->in_dtype != BOOL;
    if (e->contiguous && e->in_dtype == F32 && e->out_dtype == F32 && aligned16(e->in[0]) && aligned16(e->in[1]) &&
        aligned16(e->out)) {
        binary_f32x4<<<blocks_x4(e->n), 256, 0, s>>>(kind, (const float *)e->in[0], (const float *)e->in[1],
                                                      (float *)e->out, e->n, e->attr[0]);
    } else if (is_float_dt(e->in_dtype)) {
        if (to_bool) { DISPATCH_IN(e->in_dtype, 0, (binary_float<TI, Bool8><<<b, 256, 0, s>>>(kind, w, e->n))) }
        else { DISPATCH_IN(e->in_dtype, 0, (binary_float<TI, TI><<<b, 256, 0, s>>>(kind, w, e->n))) }
    } else {
        if (to_bool) { DISPATCH_IN(e->in_dtype, 0, (binary_int<TI, Bool8><<<b, 256, 0, s>>>(kind, w, e->n))) }
        else { DISPATCH_IN(e->in_dtype, 0, (binary_int<TI, TI><<<b, 256, 0, s>>>(kind, w, e->n))) }
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_where(const oar_cu_ew *e, void *stream) {
    if (e->n <= 0) return 0;
    Ew w = pack(e);
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(e->n, 256);
    switch (e->in_dtype) {
    case F64: case I64: where_kernel<uint64_t><<<b, 256, 0, s>>>(w, e->n); break;
    case F32: case I32: where_kernel<uint32_t><<<b, 256, 0, s>>>(w, e->n); break;
    case F16: case BF16: where_kernel<uint16_t><<<b, 256, 0, s>>>(w, e->n); break;
    default: where_kernel<uint8_t><<<b, 256, 0, s>>>(w, e->n); break;
    }
    return (int)cudaGetLastError();
}

namespace {
template <typename T>
__global__ void increment_kernel(T *p, int64_t n) {
    GRID_LOOP(i, n) p[i] = (T)((uint64_t)(int64_t)p[i] + 1u);  // wraps like the reference
}
}  // namespace

extern "C" int oar_cu_increment(void *p, int dtype, int64_t n, void *stream) {
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(n, 256);
    switch (dtype) {
    case I8: increment_kernel<int8_t><<<b, 256, 0, s>>>((int8_t *)p, n); break;
    case U8: increment_kernel<uint8_t><<<b, 256, 0, s>>>((uint8_t *)p, n); break;
    case I32: increment_kernel<int32_t><<<b, 256, 0, s>>>((int32_t *)p, n); break;
    default: increment_kernel<int64_t><<<b, 256, 0, s>>>((int64_t *)p, n); break;
    }
    return (int)cudaGetLastError();
}
