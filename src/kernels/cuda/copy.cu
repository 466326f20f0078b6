// Strided copies with dtype conversion (contiguous, cast, every layout change on the GPU)
// and fills. Conversions follow the CPU's dtype table exactly: integers to integers through
// int64 with C's wrap-around, anything else through double; floats to integers truncate
// toward zero and clamp to the type's range (NaN gives 0); to bool means "not zero".
#include "cuda_types.cuh"
#include "launch_copy.h"

using namespace oarcu;

namespace {

struct Layout {
    int ndim;
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t dst_strides[OAR_CU_MAX_DIMS], src_strides[OAR_CU_MAX_DIMS];
};

__device__ __forceinline__ void offsets(const Layout &l, int64_t i, int64_t *d, int64_t *s) {
    int64_t od = 0, os = 0;
    for (int k = l.ndim - 1; k >= 0; k--) {
        int64_t idx = i % l.shape[k];
        i /= l.shape[k];
        od += idx * l.dst_strides[k];
        os += idx * l.src_strides[k];
    }
    *d = od;
    *s = os;
}

__device__ __forceinline__ bool is_int(int dt) { return dt >= I8; }

__device__ __forceinline__ double load_f(const void *p, int dt, int64_t i) {
    switch (dt) {
    case F32: return (double)((const float *)p)[i];
    case F64: return ((const double *)p)[i];
    case F16: return (double)__half2float(((const __half *)p)[i]);
    case BF16: return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case I8: return (double)((const int8_t *)p)[i];
    case U8: return (double)((const uint8_t *)p)[i];
    case I32: return (double)((const int32_t *)p)[i];
    case I64: return (double)((const int64_t *)p)[i];
    case I16: return (double)((const int16_t *)p)[i];
    case U16: return (double)((const uint16_t *)p)[i];
    case U32: return (double)((const uint32_t *)p)[i];
    case U64: return (double)((const uint64_t *)p)[i];
    default: return ((const uint8_t *)p)[i] ? 1.0 : 0.0;
    }
}

__device__ __forceinline__ int64_t load_i(const void *p, int dt, int64_t i) {
    switch (dt) {
    case I8: return ((const int8_t *)p)[i];
    case U8: return ((const uint8_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I64: return ((const int64_t *)p)[i];
    case I16: return ((const int16_t *)p)[i];
    case U16: return ((const uint16_t *)p)[i];
    case U32: return ((const uint32_t *)p)[i];
    case U64: return (int64_t)((const uint64_t *)p)[i]; // the bits, as the CPU's load_i64
    default: return ((const uint8_t *)p)[i] ? 1 : 0;
    }
}

__device__ __forceinline__ int64_t clamp_i64(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) return (int64_t)lo;
    if (v > hi) return (int64_t)hi;
    return (int64_t)v;
}

__device__ __forceinline__ void store_f(void *p, int dt, int64_t i, double v) {
    switch (dt) {
    case F32: ((float *)p)[i] = (float)v; break;
    case F64: ((double *)p)[i] = v; break;
    case F16: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    case I8: ((int8_t *)p)[i] = (int8_t)clamp_i64(v, -128.0, 127.0); break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)clamp_i64(v, 0.0, 255.0); break;
    case I32: ((int32_t *)p)[i] = (int32_t)clamp_i64(v, -2147483648.0, 2147483647.0); break;
    case I64: ((int64_t *)p)[i] = clamp_i64(v, -9.2233720368547758e18, 9.2233720368547748e18); break;
    case I16: ((int16_t *)p)[i] = (int16_t)clamp_i64(v, -32768.0, 32767.0); break;
    case U16: ((uint16_t *)p)[i] = (uint16_t)clamp_i64(v, 0.0, 65535.0); break;
    case U32: ((uint32_t *)p)[i] = (uint32_t)clamp_i64(v, 0.0, 4294967295.0); break;
    case U64: ((uint64_t *)p)[i] = !(v > 0) ? 0 : v >= 18446744073709551616.0 ? ~0ull : (uint64_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0.0; break;
    }
}

__device__ __forceinline__ void store_i(void *p, int dt, int64_t i, int64_t v) {
    switch (dt) {
    case I8: ((int8_t *)p)[i] = (int8_t)v; break;
    case U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case I32: ((int32_t *)p)[i] = (int32_t)v; break;
    case I64: ((int64_t *)p)[i] = v; break;
    case I16: ((int16_t *)p)[i] = (int16_t)v; break;
    case U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
    default: ((uint8_t *)p)[i] = v != 0; break;
    }
}

__global__ void convert_kernel(void *dst, int ddt, const void *src, int sdt, Layout l, int64_t n) {
    bool ints = is_int(ddt) && is_int(sdt);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t od, os;
        offsets(l, i, &od, &os);
        if (ints) store_i(dst, ddt, od, load_i(src, sdt, os));
        else store_f(dst, ddt, od, load_f(src, sdt, os));
    }
}

// Same dtype: moves elements of one size, no conversion.
template <typename T>
__global__ void move_kernel(T *dst, const T *src, Layout l, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t od, os;
        offsets(l, i, &od, &os);
        dst[od] = src[os];
    }
}

template <typename T>
__global__ void fill_kernel(T *dst, T v, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = v;
}

__global__ void fill_convert_kernel(void *dst, int dt, double v, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_f(dst, dt, i, v);
}

int dtype_size(int dt) {
    static const int sizes[] = {4, 8, 2, 2, 1, 1, 4, 8, 1, 2, 2, 4, 8};
    return sizes[dt];
}

}  // namespace

extern "C" int oar_cu_copy_strided(void *dst, int dst_dtype, const void *src, int src_dtype,
                                   const oar_cu_strided *layout, int64_t n, void *stream) {
    if (n <= 0) return 0;
    Layout l;
    l.ndim = layout->ndim;
    for (int k = 0; k < l.ndim; k++) {
        l.shape[k] = layout->shape[k];
        l.dst_strides[k] = layout->dst_strides[k];
        l.src_strides[k] = layout->src_strides[k];
    }
    cudaStream_t s = (cudaStream_t)stream;
    unsigned blocks = blocks_for(n, 256);
    if (dst_dtype == src_dtype) {
        switch (dtype_size(dst_dtype)) {
        case 1: move_kernel<uint8_t><<<blocks, 256, 0, s>>>((uint8_t *)dst, (const uint8_t *)src, l, n); break;
        case 2: move_kernel<uint16_t><<<blocks, 256, 0, s>>>((uint16_t *)dst, (const uint16_t *)src, l, n); break;
        case 4: move_kernel<uint32_t><<<blocks, 256, 0, s>>>((uint32_t *)dst, (const uint32_t *)src, l, n); break;
        default: move_kernel<uint64_t><<<blocks, 256, 0, s>>>((uint64_t *)dst, (const uint64_t *)src, l, n); break;
        }
    } else {
        convert_kernel<<<blocks, 256, 0, s>>>(dst, dst_dtype, src, src_dtype, l, n);
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_fill(void *dst, int dtype, int64_t n, double value, void *stream) {
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned blocks = blocks_for(n, 256);
    if (value == 0.0) return (int)cudaMemsetAsync(dst, 0, (size_t)n * (size_t)dtype_size(dtype), s);
    switch (dtype) {
    case F32: fill_kernel<float><<<blocks, 256, 0, s>>>((float *)dst, (float)value, n); break;
    case F64: fill_kernel<double><<<blocks, 256, 0, s>>>((double *)dst, value, n); break;
    default: fill_convert_kernel<<<blocks, 256, 0, s>>>(dst, dtype, value, n); break;
    }
    return (int)cudaGetLastError();
}
