// Normalizations (src/ops/norm.c, norm_backward.c, fused_add_ln.c, fused_bn_act.c). One block
// per row (layer_norm, group_norm) or per channel (batch_norm); statistics in double with
// two passes (mean, then squared deviations) like the reference, combined in a fixed tree.
// Values the reference stores in the dtype before reading them again (the sum of
// add_layer_norm, batch_norm's y before the residual and relu, dx before the residual add)
// are rounded the same way here.
#include "block_reduce.cuh"
#include "cuda_types.cuh"
#include "launch_norm.h"

using namespace oarcu;

namespace {

template <typename T>
__device__ __forceinline__ double in_x(const T *x, const T *x2, int64_t i) {
    return x2 ? (double)(T)((double)x[i] + (double)x2[i]) : (double)x[i];
}

template <typename T>
__global__ void row_norm_kernel(const T *x, const T *x2, T *sum_out, const T *w, const T *b, T *y, T *mean_out,
                                T *rstd_out, int64_t rows, int64_t m, int64_t groups, int64_t s, double eps) {
    __shared__ double sh[32];
    const int64_t cg = groups > 0 ? m / (s ? s : 1) : 0;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *xr = x + r * m;
        const T *x2r = x2 ? x2 + r * m : nullptr;
        double acc = 0;
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            double v = in_x(xr, x2r, i);
            if (sum_out) sum_out[r * m + i] = (T)v;
            acc += v;
        }
        const double mean = m ? block_reduce(acc, AddOp(), 0.0, sh) / (double)m : NAN;
        double q = 0;
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            double d = in_x(xr, x2r, i) - mean;
            q += d * d;
        }
        q = block_reduce(q, AddOp(), 0.0, sh);
        const double var = m ? q / (double)m : NAN;
        const double rstd = 1.0 / sqrt(var + eps);
        if (threadIdx.x == 0) {
            mean_out[r] = (T)mean;
            rstd_out[r] = (T)rstd;
        }
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            int64_t p = groups > 0 ? (r % groups) * cg + i / (s ? s : 1) : i;
            double v = (in_x(xr, x2r, i) - mean) * rstd;
            if (w) v *= (double)w[p];
            if (b) v += (double)b[p];
            y[r * m + i] = (T)v;
        }
    }
}

// dx per row: rstd * (gx - mean(gx) - xhat * mean(gx * xhat)), gx = g * w
template <typename T>
__global__ void ln_backward_dx_kernel(const T *g, const T *x, const T *w, const T *mean_in, const T *rstd_in,
                                      const T *res, T *dx, int64_t rows, int64_t m) {
    __shared__ double sh[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const double mean = (double)mean_in[r], rstd = (double)rstd_in[r];
        const T *gr = g + r * m, *xr = x + r * m;
        double m1 = 0, m2 = 0;
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            double gx = (double)gr[i] * (w ? (double)w[i] : 1.0);
            m1 += gx;
            m2 += gx * ((double)xr[i] - mean) * rstd;
        }
        m1 = block_reduce(m1, AddOp(), 0.0, sh) / (double)m;
        m2 = block_reduce(m2, AddOp(), 0.0, sh) / (double)m;
        for (int64_t i = threadIdx.x; i < m; i += blockDim.x) {
            double gx = (double)gr[i] * (w ? (double)w[i] : 1.0);
            double xh = ((double)xr[i] - mean) * rstd;
            T d = (T)(rstd * (gx - m1 - xh * m2));
            dx[r * m + i] = res ? (T)((double)d + (double)res[r * m + i]) : d;
        }
    }
}

// dw, db per column i: sums over the rows
template <typename T>
__global__ void ln_backward_dwdb_kernel(const T *g, const T *x, const T *mean_in, const T *rstd_in, T *dw, T *db,
                                        int64_t rows, int64_t m) {
    __shared__ double sh[32];
    for (int64_t i = blockIdx.x; i < m; i += gridDim.x) {
        double sw = 0, sb = 0;
        for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
            double gv = (double)g[r * m + i];
            sw += gv * ((double)x[r * m + i] - (double)mean_in[r]) * (double)rstd_in[r];
            sb += gv;
        }
        sw = block_reduce(sw, AddOp(), 0.0, sh);
        sb = block_reduce(sb, AddOp(), 0.0, sh);
        if (threadIdx.x == 0) {
            dw[i] = (T)sw;
            db[i] = (T)sb;
        }
    }
}

// running statistics: any float dtype (they need not follow x's)
__device__ __forceinline__ double ld_any(const void *p, int dt, int64_t i) {
    switch (dt) {
    case F32: return (double)((const float *)p)[i];
    case F16: return (double)__half2float(((const __half *)p)[i]);
    case BF16: return (double)__bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const double *)p)[i];
    }
}
__device__ __forceinline__ void st_any(void *p, int dt, int64_t i, double v) {
    switch (dt) {
    case F32: ((float *)p)[i] = (float)v; break;
    case F16: ((__half *)p)[i] = __float2half_rn((float)v); break;
    case BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn((float)v); break;
    default: ((double *)p)[i] = v; break;
    }
}

// dw, db for many rows: tiles of 32 columns x 8 row lanes, each block summing one chunk of
// rows (loads coalesced along the row), partial sums per (chunk, column) into parts; then one
// thread per column adds the chunks in order.
const int TILE_C = 32, TILE_R = 8;

template <typename T>
__global__ void ln_dwdb_parts_kernel(const T *g, const T *x, const T *mean_in, const T *rstd_in, int64_t rows,
                                     int64_t m, int64_t chunk, double *parts_w, double *parts_b) {
    __shared__ double shw[TILE_R][TILE_C], shb[TILE_R][TILE_C];
    const int cx = threadIdx.x % TILE_C, ry = threadIdx.x / TILE_C;
    const int64_t i = blockIdx.x * (int64_t)TILE_C + cx;
    const int64_t r0 = blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    double sw = 0, sb = 0;
    if (i < m)
        for (int64_t r = r0 + ry; r < r1; r += TILE_R) {
            double gv = (double)g[r * m + i];
            sw += gv * ((double)x[r * m + i] - (double)mean_in[r]) * (double)rstd_in[r];
            sb += gv;
        }
    shw[ry][cx] = sw;
    shb[ry][cx] = sb;
    __syncthreads();
    if (ry == 0 && i < m) {
        for (int k = 1; k < TILE_R; k++) {
            sw += shw[k][cx];
            sb += shb[k][cx];
        }
        parts_w[blockIdx.y * m + i] = sw;
        parts_b[blockIdx.y * m + i] = sb;
    }
}

template <typename T>
__global__ void ln_dwdb_final_kernel(const double *parts_w, const double *parts_b, int64_t nchunks, int64_t m, T *dw,
                                     T *db) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < m; i += (int64_t)gridDim.x * blockDim.x) {
        double sw = 0, sb = 0;
        for (int64_t k = 0; k < nchunks; k++) {
            sw += parts_w[k * m + i];
            sb += parts_b[k * m + i];
        }
        dw[i] = (T)sw;
        db[i] = (T)sb;
    }
}

const int64_t LN_ROW_CHUNK = 64, LN_MAX_CHUNKS = 256;

int64_t ln_chunks(int64_t rows) {
    int64_t c = (rows + LN_ROW_CHUNK - 1) / LN_ROW_CHUNK;
    return c < 1 ? 1 : (c > LN_MAX_CHUNKS ? LN_MAX_CHUNKS : c);
}

__device__ __forceinline__ int64_t load_counter(const void *p, int dt) {
    switch (dt) {
    case I8: return *(const int8_t *)p;
    case U8: return *(const uint8_t *)p;
    case I32: return *(const int32_t *)p;
    default: return *(const int64_t *)p;
    }
}

template <typename T>
__global__ void batch_norm_kernel(const T *x, const T *w, const T *b, const T *res, bool act, T *y, T *mean_out,
                                  T *invstd_out, void *rmean, int rmt, int64_t rms, void *rvar, int rvt, int64_t rvs,
                                  const void *counter,
                                  int counter_dt, int64_t n, int64_t c, int64_t s, bool training, double momentum,
                                  double eps) {
    __shared__ double sh[32];
    const int64_t cnt = n * s;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double mean, invstd;
        if (training) {
            double var = 0;
            mean = 0;
            if (cnt > 0) {
                double acc = 0;
                for (int64_t k = threadIdx.x; k < cnt; k += blockDim.x)
                    acc += (double)x[((k / s) * c + ch) * s + k % s];
                mean = block_reduce(acc, AddOp(), 0.0, sh) / (double)cnt;
                double q = 0;
                for (int64_t k = threadIdx.x; k < cnt; k += blockDim.x) {
                    double d = (double)x[((k / s) * c + ch) * s + k % s] - mean;
                    q += d * d;
                }
                var = block_reduce(q, AddOp(), 0.0, sh) / (double)cnt;
            }
            invstd = 1.0 / sqrt(var + eps);
            if (rmean && cnt > 0 && threadIdx.x == 0) {
                double mom = momentum >= 0 || !counter ? momentum : 1.0 / (double)(load_counter(counter, counter_dt) + 1);
                double unbiased = var * (double)cnt / (double)(cnt - 1);
                st_any(rmean, rmt, ch * rms, (1 - mom) * ld_any(rmean, rmt, ch * rms) + mom * mean);
                st_any(rvar, rvt, ch * rvs, (1 - mom) * ld_any(rvar, rvt, ch * rvs) + mom * unbiased);
            }
        } else {
            mean = ld_any(rmean, rmt, ch * rms);
            invstd = 1.0 / sqrt(ld_any(rvar, rvt, ch * rvs) + eps);
        }
        if (threadIdx.x == 0) {
            mean_out[ch] = (T)mean;
            invstd_out[ch] = (T)invstd;
        }
        const double scale = invstd * (w ? (double)w[ch] : 1.0), shift = b ? (double)b[ch] : 0.0;
        for (int64_t k = threadIdx.x; k < cnt; k += blockDim.x) {
            int64_t at = ((k / s) * c + ch) * s + k % s;
            T v = (T)(((double)x[at] - mean) * scale + shift);
            if (act) {
                double u = (double)v;
                if (res) u += (double)res[at];
                v = (T)(u > 0 || u != u ? u : 0.0);
            }
            y[at] = v;
        }
    }
}

template <typename T>
__global__ void batch_norm_backward_kernel(const T *g, const T *x, const T *w, const T *mean_in, const T *rstd_in,
                                           const T *yact, T *masked, T *dx, T *dw, T *db, int64_t n, int64_t c,
                                           int64_t s) {
    __shared__ double sh[32];
    const int64_t cnt = n * s;
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        const double mean = (double)mean_in[ch], rstd = (double)rstd_in[ch], wv = w ? (double)w[ch] : 1.0;
        double sb = 0, sw = 0;
        for (int64_t k = threadIdx.x; k < cnt; k += blockDim.x) {
            int64_t at = ((k / s) * c + ch) * s + k % s;
            double gv = yact && !((double)yact[at] > 0) ? 0.0 : (double)g[at];
            if (masked) masked[at] = (T)gv;
            sb += gv;
            sw += gv * ((double)x[at] - mean) * rstd;
        }
        sb = block_reduce(sb, AddOp(), 0.0, sh);
        sw = block_reduce(sw, AddOp(), 0.0, sh);
        if (threadIdx.x == 0) {
            dw[ch] = (T)sw;
            db[ch] = (T)sb;
        }
        const double m1 = cnt > 0 ? wv * sb / (double)cnt : 0.0, m2 = cnt > 0 ? wv * sw / (double)cnt : 0.0;
        for (int64_t k = threadIdx.x; k < cnt; k += blockDim.x) {
            int64_t at = ((k / s) * c + ch) * s + k % s;
            double gv = yact && !((double)yact[at] > 0) ? 0.0 : (double)g[at];
            double xh = ((double)x[at] - mean) * rstd;
            dx[at] = (T)(rstd * (gv * wv - m1 - xh * m2));
        }
    }
}

// ---- batch_norm over large channels: each channel's N * spatial values are split into
// chunks, one block per (chunk, channel) writing partial sums to parts[ch * S + chunk]; one
// block per channel folds them in order (the statistics); then one elementwise pass over all
// of x. Same arithmetic as the one-block-per-channel kernels above.
__device__ __forceinline__ int64_t bn_at(int64_t k, int64_t ch, int64_t c, int64_t s) {
    return ((k / s) * c + ch) * s + k % s;
}

// phase 0: sum of x; phase 1: sum of (x - mean)^2 with stats[ch] the mean
template <typename T>
__global__ void bn_parts_kernel(const T *x, int64_t c, int64_t s, int64_t cnt, int64_t chunk, int phase,
                                const double *stats, double *parts) {
    __shared__ double sh[32];
    const int64_t ch = blockIdx.y, S = gridDim.x, k0 = blockIdx.x * chunk;
    const int64_t k1 = k0 + chunk < cnt ? k0 + chunk : cnt;
    const double mean = phase ? stats[ch] : 0.0;
    double acc = 0;
    for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        double v = (double)x[bn_at(k, ch, c, s)];
        acc += phase ? (v - mean) * (v - mean) : v;
    }
    acc = block_reduce(acc, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) parts[ch * S + blockIdx.x] = acc;
}

// one block per channel. phase 0: stats[ch] = mean. phase 1: the variance, then as
// batch_norm_kernel: invstd, the hidden outputs, the running statistics.
template <typename T>
__global__ void bn_stats_kernel(const double *parts, int64_t S, int64_t c, int64_t cnt, int phase, double *stats,
                                T *mean_out, T *invstd_out, void *rmean, int rmt, int64_t rms, void *rvar, int rvt,
                                int64_t rvs, const void *counter, int counter_dt, double momentum, double eps) {
    __shared__ double sh[32];
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double acc = 0;
        for (int64_t k = threadIdx.x; k < S; k += blockDim.x) acc += parts[ch * S + k];
        acc = block_reduce(acc, AddOp(), 0.0, sh);
        if (threadIdx.x != 0) continue;
        if (phase == 0) {
            stats[ch] = acc / (double)cnt;
            continue;
        }
        const double mean = stats[ch], var = acc / (double)cnt, invstd = 1.0 / sqrt(var + eps);
        stats[c + ch] = invstd;
        mean_out[ch] = (T)mean;
        invstd_out[ch] = (T)invstd;
        if (rmean) {
            double mom = momentum >= 0 || !counter ? momentum : 1.0 / (double)(load_counter(counter, counter_dt) + 1);
            double unbiased = var * (double)cnt / (double)(cnt - 1);
            st_any(rmean, rmt, ch * rms, (1 - mom) * ld_any(rmean, rmt, ch * rms) + mom * mean);
            st_any(rvar, rvt, ch * rvs, (1 - mom) * ld_any(rvar, rvt, ch * rvs) + mom * unbiased);
        }
    }
}

// inference: the statistics from the running ones, one thread per channel
template <typename T>
__global__ void bn_eval_stats_kernel(int64_t c, double *stats, T *mean_out, T *invstd_out, const void *rmean, int rmt,
                                     int64_t rms, const void *rvar, int rvt, int64_t rvs, double eps) {
    for (int64_t ch = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; ch < c; ch += (int64_t)gridDim.x * blockDim.x) {
        const double mean = ld_any(rmean, rmt, ch * rms), invstd = 1.0 / sqrt(ld_any(rvar, rvt, ch * rvs) + eps);
        stats[ch] = mean;
        stats[c + ch] = invstd;
        mean_out[ch] = (T)mean;
        invstd_out[ch] = (T)invstd;
    }
}

template <typename T>
__global__ void bn_apply_kernel(const T *x, const T *w, const T *b, const T *res, bool act, T *y, const double *stats,
                                int64_t total, int64_t c, int64_t s) {
    for (int64_t at = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; at < total; at += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = (at / s) % c;
        const double mean = stats[ch], invstd = stats[c + ch];
        const double scale = invstd * (w ? (double)w[ch] : 1.0), shift = b ? (double)b[ch] : 0.0;
        T v = (T)(((double)x[at] - mean) * scale + shift);
        if (act) {
            double u = (double)v;
            if (res) u += (double)res[at];
            v = (T)(u > 0 || u != u ? u : 0.0);
        }
        y[at] = v;
    }
}

// backward: parts[ch * S + k] the sums of g (masked by y > 0 when y is given), parts[(c + ch)
// * S + k] those of g * xhat
template <typename T>
__global__ void bn_bwd_parts_kernel(const T *g, const T *x, const T *mean_in, const T *rstd_in, const T *yact,
                                    int64_t c, int64_t s, int64_t cnt, int64_t chunk, double *parts) {
    __shared__ double sh[32];
    const int64_t ch = blockIdx.y, S = gridDim.x, k0 = blockIdx.x * chunk;
    const int64_t k1 = k0 + chunk < cnt ? k0 + chunk : cnt;
    const double mean = (double)mean_in[ch], rstd = (double)rstd_in[ch];
    double sb = 0, sw = 0;
    for (int64_t k = k0 + threadIdx.x; k < k1; k += blockDim.x) {
        const int64_t at = bn_at(k, ch, c, s);
        double gv = yact && !((double)yact[at] > 0) ? 0.0 : (double)g[at];
        sb += gv;
        sw += gv * ((double)x[at] - mean) * rstd;
    }
    sb = block_reduce(sb, AddOp(), 0.0, sh);
    sw = block_reduce(sw, AddOp(), 0.0, sh);
    if (threadIdx.x == 0) {
        parts[ch * S + blockIdx.x] = sb;
        parts[(c + ch) * S + blockIdx.x] = sw;
    }
}

// one block per channel: dweight, dbias, and m1, m2 of dx into stats[ch], stats[c + ch]
template <typename T>
__global__ void bn_bwd_stats_kernel(const double *parts, int64_t S, int64_t c, int64_t cnt, const T *w, T *dw, T *db,
                                    double *stats) {
    __shared__ double sh[32];
    for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double sb = 0, sw = 0;
        for (int64_t k = threadIdx.x; k < S; k += blockDim.x) {
            sb += parts[ch * S + k];
            sw += parts[(c + ch) * S + k];
        }
        sb = block_reduce(sb, AddOp(), 0.0, sh);
        sw = block_reduce(sw, AddOp(), 0.0, sh);
        if (threadIdx.x == 0) {
            const double wv = w ? (double)w[ch] : 1.0;
            dw[ch] = (T)sw;
            db[ch] = (T)sb;
            stats[ch] = cnt > 0 ? wv * sb / (double)cnt : 0.0;
            stats[c + ch] = cnt > 0 ? wv * sw / (double)cnt : 0.0;
        }
    }
}

template <typename T>
__global__ void bn_bwd_apply_kernel(const T *g, const T *x, const T *w, const T *mean_in, const T *rstd_in,
                                    const T *yact, T *masked, T *dx, const double *stats, int64_t total, int64_t c,
                                    int64_t s) {
    for (int64_t at = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; at < total; at += (int64_t)gridDim.x * blockDim.x) {
        const int64_t ch = (at / s) % c;
        const double mean = (double)mean_in[ch], rstd = (double)rstd_in[ch], wv = w ? (double)w[ch] : 1.0;
        double gv = yact && !((double)yact[at] > 0) ? 0.0 : (double)g[at];
        if (masked) masked[at] = (T)gv;
        double xh = ((double)x[at] - mean) * rstd;
        dx[at] = (T)(rstd * (gv * wv - stats[ch] - xh * stats[c + ch]));
    }
}

const int64_t BN_SPLIT_MIN = 1 << 12, BN_CHUNK = 1 << 11, BN_MAX_PARTS = 256;

// chunks per channel for the split path (0: one block per channel instead)
int64_t bn_parts(int64_t n, int64_t c, int64_t s) {
    const int64_t cnt = n * s;
    if (cnt < BN_SPLIT_MIN || c <= 0 || c > 65535) return 0; // channels index gridDim.y
    int64_t S = (cnt + BN_CHUNK - 1) / BN_CHUNK;
    return S > BN_MAX_PARTS ? BN_MAX_PARTS : S;
}

unsigned grid_for(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

}  // namespace

#define DISPATCH_FLOAT(dtype, CALL)                  \
    do {                                             \
        if ((dtype) == F32) {                        \
            typedef float T;                         \
            CALL;                                    \
        } else if ((dtype) == F64) {                 \
            typedef double T;                        \
            CALL;                                    \
        } else {                                     \
            return (int)cudaErrorInvalidValue;       \
        }                                            \
    } while (0)

extern "C" int oar_cu_row_norm(int dtype, const void *x, const void *x2, void *sum_out, const void *w, const void *b,
                               void *y, void *mean, void *rstd, int64_t rows, int64_t m, int64_t groups, int64_t s,
                               double eps, void *stream) {
    if (rows <= 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    int t = threads_for(m, 512);
    DISPATCH_FLOAT(dtype, (row_norm_kernel<T><<<grid_for(rows), t, 0, st>>>(
                              (const T *)x, (const T *)x2, (T *)sum_out, (const T *)w, (const T *)b, (T *)y, (T *)mean,
                              (T *)rstd, rows, m, groups, s, eps)));
    return (int)cudaGetLastError();
}

extern "C" size_t oar_cu_layer_norm_backward_scratch_bytes(int64_t rows, int64_t m) {
    return rows > LN_ROW_CHUNK && m > 0 ? sizeof(double) * 2 * (size_t)(ln_chunks(rows) * m) : 0;
}

extern "C" int oar_cu_layer_norm_backward(int dtype, const void *g, const void *x, const void *w, const void *mean,
                                          const void *rstd, const void *residual, void *dx, void *dw, void *db,
                                          int64_t rows, int64_t m, void *scratch, void *stream) {
    cudaStream_t st = (cudaStream_t)stream;
    if (m > 0 && scratch && rows > LN_ROW_CHUNK) {
        const int64_t nch = ln_chunks(rows), chunk = (rows + nch - 1) / nch;
        double *pw = (double *)scratch, *pb = pw + nch * m;
        dim3 grid((unsigned)((m + TILE_C - 1) / TILE_C), (unsigned)nch);
        DISPATCH_FLOAT(dtype, (ln_dwdb_parts_kernel<T><<<grid, TILE_C * TILE_R, 0, st>>>(
                                  (const T *)g, (const T *)x, (const T *)mean, (const T *)rstd, rows, m, chunk, pw,
                                  pb)));
        DISPATCH_FLOAT(dtype, (ln_dwdb_final_kernel<T><<<blocks_for(m, 256), 256, 0, st>>>(pw, pb, nch, m, (T *)dw,
                                                                                           (T *)db)));
    } else if (m > 0) {
        DISPATCH_FLOAT(dtype, (ln_backward_dwdb_kernel<T><<<grid_for(m), threads_for(rows, 256), 0, st>>>(
                                  (const T *)g, (const T *)x, (const T *)mean, (const T *)rstd, (T *)dw, (T *)db, rows,
                                  m)));
    }
    if (rows > 0 && m > 0)
        DISPATCH_FLOAT(dtype, (ln_backward_dx_kernel<T><<<grid_for(rows), threads_for(m, 512), 0, st>>>(
                                  (const T *)g, (const T *)x, (const T *)w, (const T *)mean, (const T *)rstd,
                                  (const T *)residual, (T *)dx, rows, m)));
    return (int)cudaGetLastError();
}

extern "C" size_t oar_cu_batch_norm_scratch_bytes(int64_t n, int64_t c, int64_t s) {
    int64_t S = bn_parts(n, c, s);
    return S ? sizeof(double) * (size_t)(2 * c * S + 2 * c) : 0;
}

extern "C" int oar_cu_batch_norm(int dtype, const void *x, const void *w, const void *b, const void *residual, int act,
                                 void *y, void *mean_out, void *invstd_out, void *rmean, int rm_dtype,
                                 int64_t rm_stride, void *rvar, int rv_dtype, int64_t rv_stride, const void *counter,
                                 int counter_dtype, int64_t n, int64_t c, int64_t s, int training, double momentum,
                                 double eps, void *scratch, void *stream) {
    if (c <= 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    const int64_t S = bn_parts(n, c, s), cnt = n * s;
    if (S && scratch) {
        double *parts = (double *)scratch, *stats = parts + 2 * c * S;
        if (training) {
            const int64_t chunk = (cnt + S - 1) / S;
            dim3 grid((unsigned)S, (unsigned)c);
            for (int phase = 0; phase < 2; phase++) {
                DISPATCH_FLOAT(dtype, (bn_parts_kernel<T><<<grid, 256, 0, st>>>((const T *)x, c, s, cnt, chunk, phase,
                                                                                  stats, parts)));
                DISPATCH_FLOAT(dtype, (bn_stats_kernel<T><<<grid_for(c), 256, 0, st>>>(
                                          parts, S, c, cnt, phase, stats, (T *)mean_out, (T *)invstd_out, rmean,
                                          rm_dtype, rm_stride, rvar, rv_dtype, rv_stride, counter, counter_dtype,
                                          momentum, eps)));
            }
        } else {
            DISPATCH_FLOAT(dtype, (bn_eval_stats_kernel<T><<<blocks_for(c, 128), 128, 0, st>>>(
                                      c, stats, (T *)mean_out, (T *)invstd_out, rmean, rm_dtype, rm_stride, rvar,
                                      rv_dtype, rv_stride, eps)));
        }
        const int64_t total = n * c * s;
        DISPATCH_FLOAT(dtype, (bn_apply_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
                                  (const T *)x, (const T *)w, (const T *)b, (const T *)residual, act != 0, (T *)y, stats,
                                  total, c, s)));
        return (int)cudaGetLastError();
    }
    int t = threads_for(n * s, 512);
    DISPATCH_FLOAT(dtype, (batch_norm_kernel<T><<<grid_for(c), t, 0, st>>>(
                              (const T *)x, (const T *)w, (const T *)b, (const T *)residual, act != 0, (T *)y,
                              (T *)mean_out, (T *)invstd_out, rmean, rm_dtype, rm_stride, rvar, rv_dtype, rv_stride,
                              counter, counter_dtype, n, c, s, training != 0, momentum, eps)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_batch_norm_backward(int dtype, const void *g, const void *x, const void *w, const void *mean,
                                          const void *rstd, const void *y, void *masked, void *dx, void *dw, void *db,
                                          int64_t n, int64_t c, int64_t s, void *scratch, void *stream) {
    if (c <= 0) return 0;
    cudaStream_t st = (cudaStream_t)stream;
    const int64_t S = bn_parts(n, c, s), cnt = n * s;
    if (S && scratch) {
        double *parts = (double *)scratch, *stats = parts + 2 * c * S;
        const int64_t chunk = (cnt + S - 1) / S, total = n * c * s;
        dim3 grid((unsigned)S, (unsigned)c);
        DISPATCH_FLOAT(dtype, (bn_bwd_parts_kernel<T><<<grid, 256, 0, st>>>(
                                  (const T *)g, (const T *)x, (const T *)mean, (const T *)rstd, (const T *)y, c, s, cnt,
                                  chunk, parts)));
        DISPATCH_FLOAT(dtype, (bn_bwd_stats_kernel<T><<<grid_for(c), 256, 0, st>>>(parts, S, c, cnt, (const T *)w,
                                                                                   (T *)dw, (T *)db, stats)));
        DISPATCH_FLOAT(dtype, (bn_bwd_apply_kernel<T><<<blocks_for(total, 256), 256, 0, st>>>(
                                  (const T *)g, (const T *)x, (const T *)w, (const T *)mean, (const T *)rstd,
                                  (const T *)y, (T *)masked, (T *)dx, stats, total, c, s)));
        return (int)cudaGetLastError();
    }
    int t = threads_for(n * s, 512);
    DISPATCH_FLOAT(dtype, (batch_norm_backward_kernel<T><<<grid_for(c), t, 0, st>>>(
                              (const T *)g, (const T *)x, (const T *)w, (const T *)mean, (const T *)rstd,
                              (const T *)y, (T *)masked, (T *)dx, (T *)dw, (T *)db, n, c, s)));
    return (int)cudaGetLastError();
}
