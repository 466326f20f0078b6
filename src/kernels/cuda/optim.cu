// Optimizer updates and vector_norm on the GPU. Each update kernel is the loop of
// src/optim/update_impl.h for one element, with the scalars rounded to the element type first
// (as the CPU loops do). LAMB's norms and vector_norm sum in double: block partials over a
// grid fixed by n, then one block, so results never depend on scheduling.
#include "block_reduce.cuh"
#include "cuda_types.cuh"
#include "launch_optim.h"

using namespace oarcu;

namespace {

const int THREADS = 256;
const int MAX_PARTS = 1024;

struct Opt {
    int64_t n;
    double lr_neg, wd, k1, k1c, k2, k2c, eps, scale, bc1, bc2, lr;
    bool wd_on, flag1, flag2, flag3;
};

__device__ __forceinline__ float dsqrt(float v) { return sqrtf(v); }
__device__ __forceinline__ double dsqrt(double v) { return sqrt(v); }

// The scalars a kernel uses: its launch arguments, or the run's device copy (graph replays).
__device__ __forceinline__ Opt at_run(Opt o, const oar_cu_optim_vals *dv) {
    if (dv) {
        o.lr_neg = dv->lr_neg, o.wd = dv->wd, o.k1 = dv->k1, o.k1c = dv->k1c, o.k2 = dv->k2, o.k2c = dv->k2c;
        o.eps = dv->eps, o.scale = dv->scale, o.bc1 = dv->bc1, o.bc2 = dv->bc2, o.lr = dv->lr;
        o.wd_on = dv->wd_on != 0, o.flag1 = dv->flag1 != 0, o.flag2 = dv->flag2 != 0, o.flag3 = dv->flag3 != 0;
    }
    return o;
}

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

template <typename T>
__global__ void sgd_kernel(T *p, const T *g, T *buf, Opt o, const oar_cu_optim_vals *dv) {
    o = at_run(o, dv);
    const T lr_neg = (T)o.lr_neg, wd = (T)o.wd, mom = (T)o.k1, damp_c = (T)o.k1c;
    GRID_LOOP(i, o.n) {
        T d = g[i];
        if (o.wd_on) d = d + wd * p[i];
        if (o.flag1) {
            T bi = o.flag2 ? d : buf[i] * mom + damp_c * d;
            buf[i] = bi;
            d = o.flag3 ? d + mom * bi : bi;
        }
        p[i] = p[i] + lr_neg * d;
    }
}

template <typename T>
__global__ void adam_kernel(T *p, const T *g, T *m, T *v, T *vmax, Opt o, const oar_cu_optim_vals *dv) {
    o = at_run(o, dv);
    const T step_neg = (T)o.lr_neg, wd = (T)o.wd, b1 = (T)o.k1, b1c = (T)o.k1c;
    const T b2 = (T)o.k2, b2c = (T)o.k2c, eps = (T)o.eps, bc2_sqrt = (T)o.scale;
    GRID_LOOP(i, o.n) {
        T gi = g[i], pi = p[i];
        if (o.wd_on) gi = gi + wd * pi;
        if (o.flag1) pi = pi * wd;
        T mi = m[i] * b1 + b1c * gi;
        T vi = v[i] * b2 + b2c * gi * gi;
        m[i] = mi;
        v[i] = vi;
        if (o.flag2) {
            T mx = vmax[i];
            mx = (vi > mx || vi != vi) ? vi : mx;
            vmax[i] = mx;
            vi = mx;
        }
        T denom = dsqrt(vi) / bc2_sqrt + eps;
        p[i] = pi + step_neg * mi / denom;
    }
}

template <typename T>
__global__ void rmsprop_kernel(T *p, const T *g, T *sq, T *ga, T *buf, Opt o, const oar_cu_optim_vals *dv) {
    o = at_run(o, dv);
    const T lr_neg = (T)o.lr_neg, wd = (T)o.wd, al = (T)o.k1, alc = (T)o.k1c, mom = (T)o.k2, eps = (T)o.eps;
    GRID_LOOP(i, o.n) {
        T gi = g[i];
        if (o.wd_on) gi = gi + wd * p[i];
        T si = sq[i] * al + alc * gi * gi;
        sq[i] = si;
        T avg;
        if (o.flag1) {
            T gai = ga[i] * al + alc * gi;
            ga[i] = gai;
            avg = dsqrt(si + (T)-1 * gai * gai);
        } else {
            avg = dsqrt(si);
        }
        avg = avg + eps;
        if (o.flag2) {
            T bi = buf[i] * mom + gi / avg;
            buf[i] = bi;
            p[i] = p[i] + lr_neg * bi;
        } else {
            p[i] = p[i] + lr_neg * gi / avg;
        }
    }
}

template <typename T>
__global__ void adagrad_kernel(T *p, const T *g, T *sum, Opt o, const oar_cu_optim_vals *dv) {
    o = at_run(o, dv);
    const T lr_neg = (T)o.lr_neg, wd = (T)o.wd, eps = (T)o.eps;
    GRID_LOOP(i, o.n) {
        T gi = g[i];
        if (o.wd_on) gi = gi + wd * p[i];
        T si = sum[i] + gi * gi;
        sum[i] = si;
        p[i] = p[i] + lr_neg * gi / (dsqrt(si) + eps);
    }
}

template <typename T>
__device__ __forceinline__ T lamb_u(T mi, T vi, T pi, T bc1, T bc2, T eps, T wd) {
    return mi / bc1 / (dsqrt(vi / bc2) + eps) + wd * pi;
}

// LAMB pass 1: moments, and per-block partial squared norms of p and u (parts[0..grid) and
// parts[MAX_PARTS..MAX_PARTS + grid)).
template <typename T>
__global__ void lamb_moments_kernel(const T *p, const T *g, T *m, T *v, Opt o, const oar_cu_optim_vals *dv,
                                    double *parts) {
    __shared__ double sh[32];
    o = at_run(o, dv);
    const T b1 = (T)o.k1, b1c = (T)o.k1c, b2 = (T)o.k2, b2c = (T)o.k2c;
    const T bc1 = (T)o.bc1, bc2 = (T)o.bc2, eps = (T)o.eps, wd = (T)o.wd;
    double sp = 0, su = 0;
    GRID_LOOP(i, o.n) {
        T gi = g[i];
        T mi = m[i] * b1 + b1c * gi;
        T vi = v[i] * b2 + b2c * gi * gi;
        m[i] = mi;
        v[i] = vi;
        T u = lamb_u(mi, vi, p[i], bc1, bc2, eps, wd);
        sp += (double)p[i] * (double)p[i];
        su += (double)u * (double)u;
    }
    sp = block_reduce(sp, AddOp(), 0.0, sh);
    su = block_reduce(su, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) {
        parts[blockIdx.x] = sp;
        parts[MAX_PARTS + blockIdx.x] = su;
    }
}

// LAMB: the step -lr * ||p|| / ||u|| (1 when either norm is 0) into parts[2 * MAX_PARTS].
__global__ void lamb_trust_kernel(double *parts, int nparts, double lr, const oar_cu_optim_vals *dv) {
    if (dv) lr = dv->lr;
    __shared__ double sh[32];
    double sp = 0, su = 0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x) {
        sp += parts[k];
        su += parts[MAX_PARTS + k];
    }
    sp = sqrt(block_reduce(sp, AddOp(), 0.0, sh));
    su = sqrt(block_reduce(su, AddOp(), 0.0, sh));
    if (threadIdx.x == 0) parts[2 * MAX_PARTS] = -lr * (sp > 0 && su > 0 ? sp / su : 1.0);
}

template <typename T>
__global__ void lamb_apply_kernel(T *p, const T *m, const T *v, Opt o, const oar_cu_optim_vals *dv,
                                  const double *parts) {
    o = at_run(o, dv);
    const T bc1 = (T)o.bc1, bc2 = (T)o.bc2, eps = (T)o.eps, wd = (T)o.wd;
    const T step = (T)parts[2 * MAX_PARTS];
    GRID_LOOP(i, o.n) {
        T pi = p[i];
        p[i] = pi + step * lamb_u(m[i], v[i], pi, bc1, bc2, eps, wd);
    }
}

unsigned parts_for(int64_t n) {
    int64_t b = (n + THREADS * 8 - 1) / (THREADS * 8);
    return (unsigned)(b < 1 ? 1 : (b > MAX_PARTS ? MAX_PARTS : b));
}

template <typename T>
int run_update(const oar_cu_optim *u, double *scratch, cudaStream_t s) {
    Opt o;
    o.n = u->n;
    const oar_cu_optim_vals *dv = u->v_dev, *hv = &u->v;
    o.lr_neg = hv->lr_neg, o.wd = hv->wd, o.k1 = hv->k1, o.k1c = hv->k1c, o.k2 = hv->k2, o.k2c = hv->k2c;
    o.eps = hv->eps, o.scale = hv->scale, o.bc1 = hv->bc1, o.bc2 = hv->bc2, o.lr = hv->lr;
    o.wd_on = hv->wd_on != 0, o.flag1 = hv->flag1 != 0, o.flag2 = hv->flag2 != 0, o.flag3 = hv->flag3 != 0;
    T *p = (T *)u->p, *a = (T *)u->a, *b = (T *)u->b, *c = (T *)u->c;
    const T *g = (const T *)u->g;
    unsigned blocks = blocks_for(u->n, THREADS);
    switch (u->kind) {
    case OAR_CU_OPT_SGD: sgd_kernel<T><<<blocks, THREADS, 0, s>>>(p, g, a, o, dv); break;
    case OAR_CU_OPT_ADAM: adam_kernel<T><<<blocks, THREADS, 0, s>>>(p, g, a, b, c, o, dv); break;
    case OAR_CU_OPT_RMSPROP: rmsprop_kernel<T><<<blocks, THREADS, 0, s>>>(p, g, a, b, c, o, dv); break;
    case OAR_CU_OPT_ADAGRAD: adagrad_kernel<T><<<blocks, THREADS, 0, s>>>(p, g, a, o, dv); break;
    case OAR_CU_OPT_LAMB: {
        unsigned np = parts_for(u->n);
        lamb_moments_kernel<T><<<np, THREADS, 0, s>>>(p, g, a, b, o, dv, scratch);
        lamb_trust_kernel<<<1, THREADS, 0, s>>>(scratch, (int)np, hv->lr, dv);
        lamb_apply_kernel<T><<<blocks, THREADS, 0, s>>>(p, a, b, o, dv, scratch);
        break;
    }
    default: return (int)cudaErrorInvalidValue;
    }
    return (int)cudaGetLastError();
}

// vector_norm: mode 0 inf, 1 l1, 2 l2, 3 general p
__device__ __forceinline__ double norm_term(double a, int mode, double p) {
    a = fabs(a);
    return mode == 1 ? a : mode == 2 ? a * a : pow(a, p);
}

template <typename T>
__global__ void norm_parts_kernel(const T *x, int64_t n, int mode, double p, double *parts) {
    __shared__ double sh[32];
    double acc = 0;
    GRID_LOOP(i, n) {
        double v = (double)x[i];
        acc = mode == 0 ? MaxNanOp()(acc, fabs(v)) : acc + norm_term(v, mode, p);
    }
    acc = mode == 0 ? block_reduce(acc, MaxNanOp(), 0.0, sh) : block_reduce(acc, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) parts[blockIdx.x] = acc;
}

__global__ void norm_final_kernel(const double *parts, int nparts, int mode, double p, double *y) {
    __shared__ double sh[32];
    double acc = 0;
    for (int k = threadIdx.x; k < nparts; k += blockDim.x)
        acc = mode == 0 ? MaxNanOp()(acc, parts[k]) : acc + parts[k];
    acc = mode == 0 ? block_reduce(acc, MaxNanOp(), 0.0, sh) : block_reduce(acc, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) *y = mode == 0 || mode == 1 ? acc : mode == 2 ? sqrt(acc) : pow(acc, 1 / p);
}

}  // namespace

extern "C" size_t oar_cu_optim_scratch_bytes(void) { return sizeof(double) * (2 * MAX_PARTS + 1); }

extern "C" int oar_cu_optim_update(const oar_cu_optim *u, void *scratch, void *stream) {
    if (u->n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (u->dtype == F32) return run_update<float>(u, (double *)scratch, s);
    if (u->dtype == F64) return run_update<double>(u, (double *)scratch, s);
    return (int)cudaErrorInvalidValue;
}

extern "C" int oar_cu_vector_norm(int dtype, const void *x, int64_t n, double p, double *y, void *scratch,
                                  void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int mode = isinf(p) ? 0 : p == 1 ? 1 : p == 2 ? 2 : 3;
    double *parts = (double *)scratch;
    unsigned np = n > 0 ? parts_for(n) : 0;
    if (np) {
        if (dtype == F32) norm_parts_kernel<float><<<np, THREADS, 0, s>>>((const float *)x, n, mode, p, parts);
        else if (dtype == F64) norm_parts_kernel<double><<<np, THREADS, 0, s>>>((const double *)x, n, mode, p, parts);
        else return (int)cudaErrorInvalidValue;
    }
    norm_final_kernel<<<1, THREADS, 0, s>>>(parts, (int)np, mode, p, y);
    return (int)cudaGetLastError();
}
