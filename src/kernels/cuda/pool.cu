// 2-d pooling (launch_pool.h), following src/ops/pool.c element for element: windows, divisors
// and argmax choice as the reference computes them, sums in double in its order.
#include "cuda_types.cuh"
#include "launch_pool.h"

using namespace oarcu;

namespace {

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

const int kThreads = 256;

template <typename T> __device__ __forceinline__ double ld(T v) { return (double)v; }
template <> __device__ __forceinline__ double ld<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double ld<__nv_bfloat16>(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
// double -> T as the CPU stores it (half types through float).
template <typename T> __device__ __forceinline__ T st(double v) { return (T)v; }
template <> __device__ __forceinline__ __half st<__half>(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 st<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}

struct Geo {
    int64_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
    bool include_pad;
};

// Index in the plane of the window's maximum: the first largest, and any NaN (the last one)
// winning, as the reference's window_argmax; -1 for an empty window.
template <typename T>
__device__ int64_t window_argmax(const Geo &g, const T *plane, int64_t oy, int64_t ox) {
    int64_t best_i = -1;
    double best = -INFINITY;
    for (int64_t ky = 0; ky < g.kh; ky++) {
        int64_t iy = oy * g.sh - g.ph + ky * g.dh;
        if (iy < 0 || iy >= g.h) continue;
        for (int64_t kx = 0; kx < g.kw; kx++) {
            int64_t ix = ox * g.sw - g.pw + kx * g.dw;
            if (ix < 0 || ix >= g.w) continue;
            double v = ld(plane[iy * g.w + ix]);
            if (best_i < 0 || v > best || v != v) {
                best = v;
                best_i = iy * g.w + ix;
            }
        }
    }
    return best_i;
}

template <typename T>
__global__ void max_pool_k(T *y, int64_t *argmax, const T *x, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ox = t % g.ow, r = t / g.ow, oy = r % g.oh, p = r / g.oh;
        const T *plane = x + p * g.h * g.w;
        int64_t i = window_argmax(g, plane, oy, ox);
        if (y) y[t] = i < 0 ? st<T>(-INFINITY) : plane[i];
        if (argmax) argmax[t] = i;
    }
}

__device__ __forceinline__ int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Gather form: input element (p, iy, ix) sums gy over the windows whose argmax it is, in
// output order (the order the reference adds them).
template <typename T>
__global__ void max_pool_backward_k(T *dx, const T *gy, const int64_t *argmax, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ix = t % g.w, r = t / g.w, iy = r % g.h, p = r / g.h;
        int64_t me = iy * g.w + ix;
        // windows covering iy: oy*sh - ph <= iy <= oy*sh - ph + (kh-1)*dh (widened by one; checked exactly below)
        int64_t oy0 = floor_div(iy + g.ph - (g.kh - 1) * g.dh, g.sh), oy1 = floor_div(iy + g.ph, g.sh) + 1;
        int64_t ox0 = floor_div(ix + g.pw - (g.kw - 1) * g.dw, g.sw), ox1 = floor_div(ix + g.pw, g.sw) + 1;
        if (oy0 < 0) oy0 = 0;
        if (ox0 < 0) ox0 = 0;
        if (oy1 > g.oh - 1) oy1 = g.oh - 1;
        if (ox1 > g.ow - 1) ox1 = g.ow - 1;
        double acc = 0;
        for (int64_t oy = oy0; oy <= oy1; oy++)
            for (int64_t ox = ox0; ox <= ox1; ox++) {
                int64_t o = (p * g.oh + oy) * g.ow + ox;
                if (argmax[o] == me) acc += ld(gy[o]);
            }
        dx[t] = st<T>(acc);
    }
}

template <typename T>
__global__ void max_pool_gather_k(T *y, const T *v, const int64_t *argmax, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t p = t / (g.oh * g.ow), i = argmax[t];
        y[t] = i < 0 ? st<T>(0.0) : v[p * g.h * g.w + i];
    }
}

// The reference's avg_window: the window clipped to the input and its divisor.
__device__ __forceinline__ bool avg_window(const Geo &g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1,
                                           int64_t *x0, int64_t *x1, double *divisor) {
    int64_t hs = oy * g.sh - g.ph, ws = ox * g.sw - g.pw;
    int64_t he = hs + g.kh < g.h + g.ph ? hs + g.kh : g.h + g.ph;
    int64_t we = ws + g.kw < g.w + g.pw ? ws + g.kw : g.w + g.pw;
    int64_t padded = (he - hs) * (we - ws);
    *y0 = hs > 0 ? hs : 0;
    *x0 = ws > 0 ? ws : 0;
    *y1 = he < g.h ? he : g.h;
    *x1 = we < g.w ? we : g.w;
    if (*y0 >= *y1 || *x0 >= *x1) return false;
    *divisor = (double)(g.include_pad ? padded : (*y1 - *y0) * (*x1 - *x0));
    return true;
}

template <typename T>
__global__ void avg_pool_k(T *y, const T *x, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ox = t % g.ow, r = t / g.ow, oy = r % g.oh, p = r / g.oh;
        int64_t y0, y1, x0, x1;
        double div, acc = 0;
        if (avg_window(g, oy, ox, &y0, &y1, &x0, &x1, &div)) {
            for (int64_t iy = y0; iy < y1; iy++)
                for (int64_t ix = x0; ix < x1; ix++) acc += ld(x[(p * g.h + iy) * g.w + ix]);
            acc /= div;
        }
        y[t] = st<T>(acc);
    }
}

template <typename T>
__global__ void avg_pool_backward_k(T *dx, const T *gy, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ix = t % g.w, r = t / g.w, iy = r % g.h, p = r / g.h;
        // windows starting at or before iy and ending after it (widened by one; checked exactly)
        int64_t oy0 = floor_div(iy + g.ph - g.kh, g.sh), oy1 = floor_div(iy + g.ph, g.sh) + 1;
        int64_t ox0 = floor_div(ix + g.pw - g.kw, g.sw), ox1 = floor_div(ix + g.pw, g.sw) + 1;
        if (oy0 < 0) oy0 = 0;
        if (ox0 < 0) ox0 = 0;
        if (oy1 > g.oh - 1) oy1 = g.oh - 1;
        if (ox1 > g.ow - 1) ox1 = g.ow - 1;
        double acc = 0;
        for (int64_t oy = oy0; oy <= oy1; oy++)
            for (int64_t ox = ox0; ox <= ox1; ox++) {
                int64_t y0, y1, x0, x1;
                double div;
                if (!avg_window(g, oy, ox, &y0, &y1, &x0, &x1, &div)) continue;
                if (iy < y0 || iy >= y1 || ix < x0 || ix >= x1) continue;
                acc += ld(gy[(p * g.oh + oy) * g.ow + ox]) / div;
            }
        dx[t] = st<T>(acc);
    }
}

__device__ __forceinline__ int64_t bin_start(int64_t i, int64_t s, int64_t n) { return i * s / n; }
__device__ __forceinline__ int64_t bin_end(int64_t i, int64_t s, int64_t n) { return ((i + 1) * s + n - 1) / n; }

template <typename T>
__global__ void adaptive_k(T *y, const T *x, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ox = t % g.ow, r = t / g.ow, oy = r % g.oh, p = r / g.oh;
        int64_t y0 = bin_start(oy, g.h, g.oh), y1 = bin_end(oy, g.h, g.oh);
        int64_t x0 = bin_start(ox, g.w, g.ow), x1 = bin_end(ox, g.w, g.ow);
        double div = (double)((y1 - y0) * (x1 - x0)), acc = 0;
        for (int64_t iy = y0; iy < y1; iy++)
            for (int64_t ix = x0; ix < x1; ix++) acc += ld(x[(p * g.h + iy) * g.w + ix]);
        y[t] = st<T>(acc / div);
    }
}

template <typename T>
__global__ void adaptive_backward_k(T *dx, const T *gy, Geo g, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t ix = t % g.w, r = t / g.w, iy = r % g.h, p = r / g.h;
        double acc = 0;
        for (int64_t oy = 0; oy < g.oh; oy++) {
            int64_t y0 = bin_start(oy, g.h, g.oh), y1 = bin_end(oy, g.h, g.oh);
            if (y0 > iy) break;
            if (iy >= y1) continue;
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t x0 = bin_start(ox, g.w, g.ow), x1 = bin_end(ox, g.w, g.ow);
                if (x0 > ix) break;
                if (ix >= x1) continue;
                double div = (double)((y1 - y0) * (x1 - x0));
                acc += ld(gy[(p * g.oh + oy) * g.ow + ox]) / div;
            }
        }
        dx[t] = st<T>(acc);
    }
}

Geo geo_of(const oar_cu_pool *p) {
    Geo g;
    g.planes = p->planes, g.h = p->h, g.w = p->w, g.oh = p->oh, g.ow = p->ow;
    g.kh = p->kh, g.kw = p->kw, g.sh = p->sh, g.sw = p->sw, g.ph = p->ph, g.pw = p->pw, g.dh = p->dh, g.dw = p->dw;
    g.include_pad = p->include_pad != 0;
    return g;
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

extern "C" int oar_cu_max_pool2d(void *y, int64_t *argmax, const void *x, int dtype, const oar_cu_pool *p,
                                 void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.oh * g.ow;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, max_pool_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)y, argmax, (const T *)x, g, n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_max_pool2d_argmax(int64_t *argmax, const void *x, int dtype, const oar_cu_pool *p,
                                        void *stream) {
    return oar_cu_max_pool2d(NULL, argmax, x, dtype, p, stream);
}

extern "C" int oar_cu_max_pool2d_backward(void *dx, const void *gy, const int64_t *argmax, int dtype,
                                          const oar_cu_pool *p, void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.h * g.w;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, max_pool_backward_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)dx, (const T *)gy,
                                                                                       argmax, g, n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_max_pool2d_gather(void *y, const void *v, const int64_t *argmax, int dtype,
                                        const oar_cu_pool *p, void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.oh * g.ow;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, max_pool_gather_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)y, (const T *)v, argmax,
                                                                                     g, n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_avg_pool2d(void *y, const void *x, int dtype, const oar_cu_pool *p, void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.oh * g.ow;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, avg_pool_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)y, (const T *)x, g, n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_avg_pool2d_backward(void *dx, const void *gy, int dtype, const oar_cu_pool *p, void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.h * g.w;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, avg_pool_backward_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)dx, (const T *)gy, g,
                                                                                       n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_adaptive_avg_pool2d(void *y, const void *x, int dtype, const oar_cu_pool *p, void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.oh * g.ow;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, adaptive_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)y, (const T *)x, g, n));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_adaptive_avg_pool2d_backward(void *dx, const void *gy, int dtype, const oar_cu_pool *p,
                                                   void *stream) {
    Geo g = geo_of(p);
    int64_t n = g.planes * g.h * g.w;
    if (n <= 0) return 0;
    if (g.oh <= 0 || g.ow <= 0) return (int)cudaErrorInvalidValue; /* the caller zeroes dx */
    cudaStream_t s = (cudaStream_t)stream;
    BY_FLOAT(dtype, adaptive_backward_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)dx, (const T *)gy, g,
                                                                                       n));
    return (int)cudaGetLastError();
}
