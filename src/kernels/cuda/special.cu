// torch.special's functions on the GPU: one grid-stride kernel per float dtype, the function a
// runtime kind, each element computed in double by the same source as the CPU reference
// (src/ops/special_bessel.h, special_igamma.h, special_orth.h, special_math.h).
#include "cuda_types.cuh"
#include "launch_special.h"
#include "ops/special_bessel.h"
#include "ops/special_igamma.h"
#include "ops/special_math.h"
#include "ops/special_orth.h"

using namespace oarcu;

namespace {

struct Sp {
    int ndim, contiguous;
    int64_t shape[OAR_CU_MAX_DIMS];
    int64_t strides[2][OAR_CU_MAX_DIMS];
    const void *in[2];
    void *out;
};

__device__ double special1(int k, double x) {
    switch (k) {
    case OAR_CU_SP_I0: return oar_bessel_i_d(0, x);
    case OAR_CU_SP_I0E: return oar_bessel_ie_d(0, x);
    case OAR_CU_SP_I1: return oar_bessel_i_d(1, x);
    case OAR_CU_SP_I1E: return oar_bessel_ie_d(1, x);
    case OAR_CU_SP_K0: return oar_bessel_k_d(0, x, 0);
    case OAR_CU_SP_K1: return oar_bessel_k_d(1, x, 0);
    case OAR_CU_SP_K0E: return oar_bessel_k_d(0, x, 1);
    case OAR_CU_SP_K1E: return oar_bessel_k_d(1, x, 1);
    case OAR_CU_SP_J0: return oar_bessel_j_d(0, x);
    case OAR_CU_SP_J1: return oar_bessel_j_d(1, x);
    case OAR_CU_SP_Y0: return oar_bessel_y_d(0, x);
    case OAR_CU_SP_Y1: return oar_bessel_y_d(1, x);
    case OAR_CU_SP_SPHERICAL_J0: return oar_spherical_j0_d(x);
    default: return oar_airy_ai_d(x);
    }
}

__device__ double special2(int k, double a, double b) {
    switch (k) {
    case OAR_CU_SP_GAMMAINC: return oar_igamma_d(a, b, 0);
    case OAR_CU_SP_GAMMAINCC: return oar_igamma_d(a, b, 1);
    case OAR_CU_SP_ZETA: return oar_zeta_d(a, b);
    case OAR_CU_SP_CHEB_T: return oar_chebyshev_d(OAR_ORTH_T, a, b);
    case OAR_CU_SP_CHEB_U: return oar_chebyshev_d(OAR_ORTH_U, a, b);
    case OAR_CU_SP_CHEB_V: return oar_chebyshev_d(OAR_ORTH_V, a, b);
    case OAR_CU_SP_CHEB_W: return oar_chebyshev_d(OAR_ORTH_W, a, b);
    case OAR_CU_SP_SCHEB_T: return oar_shifted_chebyshev_d(OAR_ORTH_T, a, b);
    case OAR_CU_SP_SCHEB_U: return oar_shifted_chebyshev_d(OAR_ORTH_U, a, b);
    case OAR_CU_SP_SCHEB_V: return oar_shifted_chebyshev_d(OAR_ORTH_V, a, b);
    case OAR_CU_SP_SCHEB_W: return oar_shifted_chebyshev_d(OAR_ORTH_W, a, b);
    case OAR_CU_SP_HERMITE_H: return oar_hermite_d(1, a, b);
    case OAR_CU_SP_HERMITE_HE: return oar_hermite_d(0, a, b);
    case OAR_CU_SP_LAGUERRE: return oar_laguerre_d(a, b);
    default: return oar_legendre_d(a, b);
    }
}

template <typename T>
__global__ void special_kernel(int k, int n_in, Sp w, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o0 = i, o1 = i;
        if (!w.contiguous) {
            o0 = o1 = 0;
            int64_t r = i;
            for (int d = w.ndim - 1; d >= 0; d--) {
                int64_t idx = r % w.shape[d];
                r /= w.shape[d];
                o0 += idx * w.strides[0][d];
                o1 += idx * w.strides[1][d];
            }
        }
        double a = ld_f64(((const T *)w.in[0])[o0]);
        double y = n_in == 1 ? special1(k, a) : special2(k, a, ld_f64(((const T *)w.in[1])[o1]));
        ((T *)w.out)[i] = st_f64<T>(y);
    }
}

}  // namespace

extern "C" int oar_cu_special(int kind, const oar_cu_ew *e, void *stream) {
    if (e->n <= 0) return 0;
    Sp w;
    w.ndim = e->ndim;
    w.contiguous = e->contiguous;
    for (int d = 0; d < OAR_CU_MAX_DIMS; d++) {
        w.shape[d] = e->shape[d];
        w.strides[0][d] = e->strides[0][d];
        w.strides[1][d] = e->strides[1][d];
    }
    w.in[0] = e->in[0];
    w.in[1] = e->n_in > 1 ? e->in[1] : e->in[0];
    w.out = e->out;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(e->n, 128);
    switch (e->in_dtype) {
    case F32: special_kernel<float><<<b, 128, 0, s>>>(kind, e->n_in, w, e->n); break;
    case F64: special_kernel<double><<<b, 128, 0, s>>>(kind, e->n_in, w, e->n); break;
    case F16: special_kernel<__half><<<b, 128, 0, s>>>(kind, e->n_in, w, e->n); break;
    default: special_kernel<__nv_bfloat16><<<b, 128, 0, s>>>(kind, e->n_in, w, e->n); break;
    }
    return (int)cudaGetLastError();
}
