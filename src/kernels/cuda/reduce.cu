// Reductions (sum, mean, amax, amin, prod, var, std, logsumexp, norm), argmax/argmin and
// cumsum. One block per output group; each thread folds its strided share of the group in
// double, then the block combines the threads' values in a fixed tree (block_reduce.cuh).
// Reductions over leading dims (many outputs adjacent in memory, their groups strided) use
// one thread per output instead, so loads coalesce across the warp; a few outputs of large
// groups split each group over several blocks (partials, then a fixed-order fold).
// Semantics follow the reference (src/ops/reduce.c, reduce_dim.c): NaN propagates through
// max/min, empty groups give sum 0, prod 1, mean nan, logsumexp -inf, norm 0.
#include "block_reduce.cuh"
#include "cuda_types.cuh"
#include "launch_reduce.h"

using namespace oarcu;

namespace {

struct Plan {
    int no, ni;
    int64_t osh[OAR_CU_RPLAN_DIMS], ost[OAR_CU_RPLAN_DIMS], ish[OAR_CU_RPLAN_DIMS], ist[OAR_CU_RPLAN_DIMS];
    int64_t onum, inum;
};

Plan to_plan(const oar_cu_rplan *p) {
    Plan q;
    q.no = p->n_outer;
    q.ni = p->n_inner;
    for (int d = 0; d < OAR_CU_RPLAN_DIMS; d++) {
        q.osh[d] = d < q.no ? p->outer_shape[d] : 1;
        q.ost[d] = d < q.no ? p->outer_stride[d] : 0;
        q.ish[d] = d < q.ni ? p->inner_shape[d] : 1;
        q.ist[d] = d < q.ni ? p->inner_stride[d] : 0;
    }
    q.onum = p->outer_numel;
    q.inum = p->inner_numel;
    return q;
}

__device__ __forceinline__ int64_t inner_off(const Plan &p, int64_t i) {
    if (p.ni == 1) return i * p.ist[0];
    return space_off(p.ni, p.ish, p.ist, i);
}

// Folds f(x) over the group with op, then across the block.
template <typename T, typename F, typename Op>
__device__ __forceinline__ double fold(const T *xo, const Plan &p, F f, Op op, double ident, double *sh) {
    double acc = ident;
    for (int64_t i = threadIdx.x; i < p.inum; i += blockDim.x) acc = op(acc, f(to_d(xo[inner_off(p, i)])));
    return block_reduce(acc, op, ident, sh);
}

template <typename T>
__global__ void reduce_kernel(const T *x, T *y, Plan p, int kind, double pn, double corr) {
    __shared__ double sh[32];
    const double n = (double)p.inum;
    for (int64_t o = blockIdx.x; o < p.onum; o += gridDim.x) {
        const T *xo = x + space_off(p.no, p.osh, p.ost, o);
        double r = 0;
        switch (kind) {
        case OAR_CU_R_SUM: r = fold(xo, p, [](double v) { return v; }, AddOp(), 0.0, sh); break;
        case OAR_CU_R_MEAN: r = fold(xo, p, [](double v) { return v; }, AddOp(), 0.0, sh) / n; break;
        case OAR_CU_R_AMAX: r = fold(xo, p, [](double v) { return v; }, MaxNanOp(), -INFINITY, sh); break;
        case OAR_CU_R_AMIN: r = fold(xo, p, [](double v) { return v; }, MinNanOp(), INFINITY, sh); break;
        case OAR_CU_R_PROD: r = fold(xo, p, [](double v) { return v; }, MulOp(), 1.0, sh); break;
        case OAR_CU_R_VAR:
        case OAR_CU_R_STD: {
            double mean = fold(xo, p, [](double v) { return v; }, AddOp(), 0.0, sh) / n;
            double m2 = fold(xo, p, [mean](double v) { return (v - mean) * (v - mean); }, AddOp(), 0.0, sh);
            double div = n - corr;
            r = m2 / (div > 0 ? div : 0.0);
            if (kind == OAR_CU_R_STD) r = sqrt(r);
            break;
        }
        case OAR_CU_R_LSE: {
            double m = fold(xo, p, [](double v) { return v; }, MaxNanOp(), -INFINITY, sh);
            if (m != m) {
                r = m;
                break;
            }
            if (isinf(m)) m = 0;
            double s = fold(xo, p, [m](double v) { return exp(v - m); }, AddOp(), 0.0, sh);
            r = log(s) + m;
            break;
        }
        case OAR_CU_R_NORM:
            if (isinf(pn)) {
                r = fold(xo, p, [](double v) { return fabs(v); }, MaxNanOp(), 0.0, sh);
            } else if (pn == 1) {
                r = fold(xo, p, [](double v) { return fabs(v); }, AddOp(), 0.0, sh);
            } else if (pn == 2) {
                r = sqrt(fold(xo, p, [](double v) { return v * v; }, AddOp(), 0.0, sh));
            } else {
                r = pow(fold(xo, p, [pn](double v) { return pow(fabs(v), pn); }, AddOp(), 0.0, sh), 1.0 / pn);
            }
            break;
        default: break;
        }
        if (threadIdx.x == 0) y[o] = from_d<T>(r);
    }
}

// One thread per output, folding its group in order (the reference's order): for groups
// whose elements are far apart in memory while neighbouring outputs are adjacent (reductions
// over leading dims), so a warp's loads are coalesced.
template <typename T>
__device__ double seq_fold(const T *xo, const Plan &p, int kind, double pn, double corr) {
    const int64_t n = p.inum;
    switch (kind) {
    case OAR_CU_R_SUM:
    case OAR_CU_R_MEAN: {
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += to_d(xo[inner_off(p, i)]);
        return kind == OAR_CU_R_MEAN ? s / (double)n : s;
    }
    case OAR_CU_R_AMAX:
    case OAR_CU_R_AMIN: {
        double m = kind == OAR_CU_R_AMAX ? -INFINITY : INFINITY;
        for (int64_t i = 0; i < n; i++) {
            double v = to_d(xo[inner_off(p, i)]);
            m = kind == OAR_CU_R_AMAX ? MaxNanOp()(m, v) : MinNanOp()(m, v);
        }
        return m;
    }
    case OAR_CU_R_PROD: {
        double a = 1;
        for (int64_t i = 0; i < n; i++) a *= to_d(xo[inner_off(p, i)]);
        return a;
    }
    case OAR_CU_R_VAR:
    case OAR_CU_R_STD: {
        double s = 0, m2 = 0;
        for (int64_t i = 0; i < n; i++) s += to_d(xo[inner_off(p, i)]);
        const double mean = s / (double)n;
        for (int64_t i = 0; i < n; i++) {
            double d = to_d(xo[inner_off(p, i)]) - mean;
            m2 += d * d;
        }
        const double div = (double)n - corr;
        const double r = m2 / (div > 0 ? div : 0.0);
        return kind == OAR_CU_R_STD ? sqrt(r) : r;
    }
    case OAR_CU_R_LSE: {
        double m = -INFINITY;
        for (int64_t i = 0; i < n; i++) m = MaxNanOp()(m, to_d(xo[inner_off(p, i)]));
        if (m != m) return m;
        if (isinf(m)) m = 0;
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += exp(to_d(xo[inner_off(p, i)]) - m);
        return log(s) + m;
    }
    case OAR_CU_R_NORM: {
        double s = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = to_d(xo[inner_off(p, i)]);
            if (isinf(pn)) s = MaxNanOp()(s, fabs(v));
            else if (pn == 1) s += fabs(v);
            else if (pn == 2) s += v * v;
            else s += pow(fabs(v), pn);
        }
        return isinf(pn) || pn == 1 ? s : pn == 2 ? sqrt(s) : pow(s, 1.0 / pn);
    }
    default: return 0;
    }
}

template <typename T>
__global__ void reduce_cols_kernel(const T *x, T *y, Plan p, int kind, double pn, double corr) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < p.onum; o += (int64_t)gridDim.x * blockDim.x)
        y[o] = from_d<T>(seq_fold(x + space_off(p.no, p.osh, p.ost, o), p, kind, pn, corr));
}

// Columns: the reduced elements are strided while neighbouring outputs sit next to each
// other (or the groups are short), and there are outputs enough to fill warps.
bool use_cols(const Plan &q) {
    if (q.ni == 0 || q.no == 0 || q.onum < 64) return false;
    if (q.inum <= 16) return true; // short groups: a block each would idle most of its threads
    int64_t inner_step = q.ist[q.ni - 1], outer_step = q.ost[q.no - 1];
    return (inner_step > 1 || inner_step < -1) && (outer_step == 1 || outer_step == -1);
}

// ---- tiled columns, for sum and mean (a bias gradient: [rows, features] summed over rows).
// One thread per output leaves most of the GPU idle when outputs are a few hundred and groups
// thousands long, so a block of 32 x 8 threads takes 32 neighbouring outputs (coalesced
// loads) and a chunk of rows: thread (c, r) adds rows r, r + 8, ... of its chunk, the 8
// partials of a column are added in order through shared memory, and the chunks' partials
// are added in order by a second kernel. A fixed split, so the order never depends on timing.
const int64_t TILE_ROWS = 512; // rows per chunk
const int64_t TILE_MIN_ROWS = 256;

bool use_tiles(const Plan &q, int kind) {
    return (kind == OAR_CU_R_SUM || kind == OAR_CU_R_MEAN) && use_cols(q) && q.inum >= TILE_MIN_ROWS;
}
int64_t tile_chunks(const Plan &q) { return (q.inum + TILE_ROWS - 1) / TILE_ROWS; }

template <typename T>
__global__ void tile_cols_kernel(const T *x, Plan p, double *parts) {
    __shared__ double sh[8][33];
    int64_t o = blockIdx.x * 32LL + threadIdx.x, c = blockIdx.y;
    double acc = 0;
    if (o < p.onum) {
        const T *xo = x + space_off(p.no, p.osh, p.ost, o);
        int64_t end = (c + 1) * TILE_ROWS < p.inum ? (c + 1) * TILE_ROWS : p.inum;
        for (int64_t i = c * TILE_ROWS + threadIdx.y; i < end; i += 8) acc += to_d(xo[inner_off(p, i)]);
    }
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && o < p.onum) {
        double s = 0;
        for (int r = 0; r < 8; r++) s += sh[r][threadIdx.x];
        parts[c * p.onum + o] = s;
    }
}

template <typename T>
__global__ void tile_final_kernel(const double *parts, int64_t chunks, Plan p, bool mean, T *y) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < p.onum; o += (int64_t)gridDim.x * blockDim.x) {
        double s = 0;
        for (int64_t c = 0; c < chunks; c++) s += parts[c * p.onum + o];
        y[o] = from_d<T>(mean ? s / (double)p.inum : s);
    }
}

template <typename T>
void launch_tiles(const T *x, T *y, const Plan &q, int kind, double *parts, cudaStream_t s) {
    int64_t chunks = tile_chunks(q);
    dim3 grid((unsigned)((q.onum + 31) / 32), (unsigned)chunks), block(32, 8);
    tile_cols_kernel<T><<<grid, block, 0, s>>>(x, q, parts);
    tile_final_kernel<T><<<blocks_for(q.onum, 256), 256, 0, s>>>(parts, chunks, q, kind == OAR_CU_R_MEAN, y);
}

// ---- split groups: few outputs with large groups get several blocks per group. Each block
// folds a fixed chunk of its group into parts[o * S + s]; one block per output then folds the
// S parts in order. Ops that read their group twice (var, std: the mean; logsumexp: the max)
// run two such passes, the first leaving its per-output value in aux.
__device__ __forceinline__ bool two_pass(int kind) {
    return kind == OAR_CU_R_VAR || kind == OAR_CU_R_STD || kind == OAR_CU_R_LSE;
}

// The fold of (kind, phase): 0 add, 1 max (NaN wins), 2 min (NaN wins), 3 multiply.
__device__ __forceinline__ int split_op(int kind, int phase, double pn) {
    if (phase == 1) return 0;
    switch (kind) {
    case OAR_CU_R_AMAX:
    case OAR_CU_R_LSE: return 1;
    case OAR_CU_R_AMIN: return 2;
    case OAR_CU_R_PROD: return 3;
    case OAR_CU_R_NORM: return isinf(pn) ? 1 : 0;
    default: return 0;
    }
}
__device__ __forceinline__ double split_ident(int op) {
    return op == 1 ? -INFINITY : op == 2 ? INFINITY : op == 3 ? 1.0 : 0.0;
}
__device__ __forceinline__ double split_apply(int op, double a, double b) {
    return op == 1 ? MaxNanOp()(a, b) : op == 2 ? MinNanOp()(a, b) : op == 3 ? a * b : a + b;
}
// The term an element adds in (kind, phase); aux: the first pass's value.
__device__ __forceinline__ double split_term(int kind, int phase, double v, double pn, double aux) {
    if (phase == 1) return kind == OAR_CU_R_LSE ? exp(v - aux) : (v - aux) * (v - aux);
    if (kind != OAR_CU_R_NORM) return v;
    if (isinf(pn) || pn == 1) return fabs(v);
    return pn == 2 ? v * v : pow(fabs(v), pn);
}
__device__ __forceinline__ double split_block(double v, int op, double *sh) {
    switch (op) {
    case 1: return block_reduce(v, MaxNanOp(), -INFINITY, sh);
    case 2: return block_reduce(v, MinNanOp(), INFINITY, sh);
    case 3: return block_reduce(v, MulOp(), 1.0, sh);
    default: return block_reduce(v, AddOp(), 0.0, sh);
    }
}

// grid (S, outputs)
template <typename T>
__global__ void split_pass_kernel(const T *x, Plan p, int kind, int phase, double pn, int64_t chunk,
                                  const double *aux, double *parts) {
    __shared__ double sh[32];
    const int64_t o = blockIdx.y, sidx = blockIdx.x, S = gridDim.x;
    const T *xo = x + space_off(p.no, p.osh, p.ost, o);
    const int op = split_op(kind, phase, pn);
    const double a = phase == 1 ? aux[o] : 0.0;
    const int64_t begin = sidx * chunk, end = begin + chunk < p.inum ? begin + chunk : p.inum;
    double acc = split_ident(op);
    for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
        acc = split_apply(op, acc, split_term(kind, phase, to_d(xo[inner_off(p, i)]), pn, a));
    acc = split_block(acc, op, sh);
    if (threadIdx.x == 0) parts[o * S + sidx] = acc;
}

// one block per output: folds its S parts; phase 0 of a two-pass op leaves aux, else y.
template <typename T>
__global__ void split_final_kernel(const double *parts, int64_t S, int64_t onum, int64_t inum, int kind, int phase,
                                   double pn, double corr, double *aux, T *y) {
    __shared__ double sh[32];
    const int op = split_op(kind, phase, pn);
    const double n = (double)inum;
    for (int64_t o = blockIdx.x; o < onum; o += gridDim.x) {
        double acc = split_ident(op);
        for (int64_t k = threadIdx.x; k < S; k += blockDim.x) acc = split_apply(op, acc, parts[o * S + k]);
        acc = split_block(acc, op, sh);
        if (threadIdx.x != 0) continue;
        double r = acc;
        if (phase == 0 && two_pass(kind)) {
            double v = kind == OAR_CU_R_LSE ? (isinf(acc) ? 0.0 : acc) : acc / n; // the max (NaN stays), or the mean
            aux[o] = v;
            continue;
        }
        switch (kind) {
        case OAR_CU_R_MEAN: r = acc / n; break;
        case OAR_CU_R_VAR:
        case OAR_CU_R_STD: {
            double div = n - corr;
            r = acc / (div > 0 ? div : 0.0);
            if (kind == OAR_CU_R_STD) r = sqrt(r);
            break;
        }
        case OAR_CU_R_LSE: r = log(acc) + aux[o]; break;
        case OAR_CU_R_NORM: r = isinf(pn) || pn == 1 ? acc : pn == 2 ? sqrt(acc) : pow(acc, 1.0 / pn); break;
        default: break;
        }
        y[o] = from_d<T>(r);
    }
}

const int64_t SPLIT_MIN_INNER = 1 << 14, SPLIT_MAX_OUTER = 256, SPLIT_CHUNK = 1 << 12, SPLIT_MAX_PARTS = 512;

int64_t split_parts(const Plan &q) {
    if (q.onum > SPLIT_MAX_OUTER || q.inum < SPLIT_MIN_INNER) return 0;
    int64_t S = (q.inum + SPLIT_CHUNK - 1) / SPLIT_CHUNK;
    return S > SPLIT_MAX_PARTS ? SPLIT_MAX_PARTS : S;
}

template <typename T>
void launch_split(const T *x, T *y, const Plan &q, int kind, double pn, double corr, int64_t S, double *scratch,
                  cudaStream_t s) {
    double *parts = scratch, *aux = scratch + q.onum * S;
    const int64_t chunk = (q.inum + S - 1) / S;
    dim3 grid((unsigned)S, (unsigned)q.onum);
    split_pass_kernel<T><<<grid, 256, 0, s>>>(x, q, kind, 0, pn, chunk, aux, parts);
    split_final_kernel<T><<<(unsigned)q.onum, 256, 0, s>>>(parts, S, q.onum, q.inum, kind, 0, pn, corr, aux, y);
    if (kind == OAR_CU_R_VAR || kind == OAR_CU_R_STD || kind == OAR_CU_R_LSE) {
        split_pass_kernel<T><<<grid, 256, 0, s>>>(x, q, kind, 1, pn, chunk, aux, parts);
        split_final_kernel<T><<<(unsigned)q.onum, 256, 0, s>>>(parts, S, q.onum, q.inum, kind, 1, pn, corr, aux, y);
    }
}

// (value, index) pairs: the extreme wins, NaN beats any number, ties go to the lower index.
__device__ __forceinline__ bool arg_better(double vb, int64_t ib, double va, int64_t ia, bool is_min) {
    bool an = va != va, bn = vb != vb;
    if (an || bn) return an && bn ? ib < ia : bn;
    if (vb == va) return ib < ia;
    return is_min ? vb < va : vb > va;
}

template <typename T>
__global__ void argext_kernel(const T *x, int64_t *y, Plan p, bool is_min) {
    __shared__ double shv[32];
    __shared__ int64_t shi[32];
    for (int64_t o = blockIdx.x; o < p.onum; o += gridDim.x) {
        const T *xo = x + space_off(p.no, p.osh, p.ost, o);
        double bv = is_min ? INFINITY : -INFINITY;
        int64_t bi = INT64_MAX;
        for (int64_t i = threadIdx.x; i < p.inum; i += blockDim.x) {
            double v = to_d(xo[inner_off(p, i)]);
            if (arg_better(v, i, bv, bi, is_min)) {
                bv = v;
                bi = i;
            }
        }
        for (int s = 16; s > 0; s >>= 1) {
            double v = __shfl_down_sync(0xffffffffu, bv, s);
            int64_t i = __shfl_down_sync(0xffffffffu, bi, s);
            if (arg_better(v, i, bv, bi, is_min)) {
                bv = v;
                bi = i;
            }
        }
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        __syncthreads();
        if (lane == 0) {
            shv[w] = bv;
            shi[w] = bi;
        }
        __syncthreads();
        if (w == 0) {
            bv = lane < nw ? shv[lane] : (is_min ? INFINITY : -INFINITY);
            bi = lane < nw ? shi[lane] : INT64_MAX;
            for (int s = 16; s > 0; s >>= 1) {
                double v = __shfl_down_sync(0xffffffffu, bv, s);
                int64_t i = __shfl_down_sync(0xffffffffu, bi, s);
                if (arg_better(v, i, bv, bi, is_min)) {
                    bv = v;
                    bi = i;
                }
            }
            if (lane == 0) y[o] = bi;
        }
    }
}

// One thread per line, summing in order in double like the reference (lines short or many).
template <typename T>
__global__ void cumsum_kernel(const T *x, T *y, Plan px, Plan py, bool rev) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < px.onum;
         o += (int64_t)gridDim.x * blockDim.x) {
        const T *xo = x + space_off(px.no, px.osh, px.ost, o);
        T *yo = y + space_off(py.no, py.osh, py.ost, o);
        const int64_t n = px.inum, sx = px.ni ? px.ist[0] : 0, sy = py.ni ? py.ist[0] : 0;
        double acc = 0;
        for (int64_t s = 0; s < n; s++) {
            int64_t i = rev ? n - 1 - s : s;
            acc += to_d(xo[i * sx]);
            yo[i * sy] = from_d<T>(acc);
        }
    }
}

// Long lines (few of them): one block per line, walking it in tiles of blockDim elements; each
// tile is scanned in double (warp shuffles, then the warps' totals) and offset by the sum of
// the tiles before it. A fixed order, so the result does not depend on scheduling.
template <typename T>
__global__ void cumsum_long_kernel(const T *x, T *y, Plan px, Plan py, bool rev) {
    __shared__ double warp_tot[32];
    __shared__ double carry_sh;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    for (int64_t o = blockIdx.x; o < px.onum; o += gridDim.x) {
        const T *xo = x + space_off(px.no, px.osh, px.ost, o);
        T *yo = y + space_off(py.no, py.osh, py.ost, o);
        const int64_t n = px.inum, sx = px.ni ? px.ist[0] : 0, sy = py.ni ? py.ist[0] : 0;
        double carry = 0;
        for (int64_t t0 = 0; t0 < n; t0 += blockDim.x) {
            const int64_t sidx = t0 + threadIdx.x; // position in summation order
            const int64_t i = rev ? n - 1 - sidx : sidx;
            double v = sidx < n ? to_d(xo[i * sx]) : 0.0;
            for (int d = 1; d < 32; d <<= 1) { // inclusive scan within the warp
                double u = __shfl_up_sync(0xffffffffu, v, d);
                if (lane >= d) v += u;
            }
            if (lane == 31) warp_tot[w] = v;
            __syncthreads();
            if (w == 0) { // scan of the warps' totals
                double t = lane < nw ? warp_tot[lane] : 0.0;
                for (int d = 1; d < 32; d <<= 1) {
                    double u = __shfl_up_sync(0xffffffffu, t, d);
                    if (lane >= d) t += u;
                }
                if (lane < nw) warp_tot[lane] = t;
            }
            __syncthreads();
            const double before = w ? warp_tot[w - 1] : 0.0;
            if (sidx < n) yo[i * sy] = from_d<T>(carry + before + v);
            if (threadIdx.x == 0) carry_sh = carry + warp_tot[nw - 1];
            __syncthreads();
            carry = carry_sh;
            __syncthreads(); // warp_tot and carry_sh are rewritten by the next tile
        }
    }
}

bool use_long_scan(const Plan &px) { return px.onum < 128 && px.inum >= 2048; }

// ---- integer inputs (i8 u8 i32 i64 bool): sums and products wrap like int64 (accumulated as
// uint64), max/min exact; argmax/argmin compare exactly; cumsum gives int64.
__device__ __forceinline__ int64_t ld_i(const void *x, int dt, int64_t i) {
    switch (dt) {
    case I8: return ((const int8_t *)x)[i];
    case U8: return ((const uint8_t *)x)[i];
    case I32: return ((const int32_t *)x)[i];
    case I64: return ((const int64_t *)x)[i];
    default: return ((const uint8_t *)x)[i] ? 1 : 0;
    }
}
__device__ __forceinline__ void st_i(void *y, int dt, int64_t i, int64_t v) {
    switch (dt) {
    case I8: ((int8_t *)y)[i] = (int8_t)v; break;
    case U8: ((uint8_t *)y)[i] = (uint8_t)v; break;
    case I32: ((int32_t *)y)[i] = (int32_t)v; break;
    case I64: ((int64_t *)y)[i] = v; break;
    default: ((uint8_t *)y)[i] = v != 0; break;
    }
}

// op: 0 add, 1 multiply (both wrapping), 2 max, 3 min
__device__ __forceinline__ uint64_t iop(int op, uint64_t a, uint64_t b) {
    switch (op) {
    case 0: return a + b;
    case 1: return a * b;
    case 2: return (int64_t)b > (int64_t)a ? b : a;
    default: return (int64_t)b < (int64_t)a ? b : a;
    }
}

__device__ __forceinline__ uint64_t block_reduce_i(uint64_t v, int op, uint64_t ident, uint64_t *sh) {
    for (int o = 16; o > 0; o >>= 1) v = iop(op, v, __shfl_down_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = lane < nw ? sh[lane] : ident;
        for (int o = 16; o > 0; o >>= 1) v = iop(op, v, __shfl_down_sync(0xffffffffu, v, o));
        if (lane == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

// y: int64 for sum/prod, x's dtype for amax/amin (y_dt)
__global__ void reduce_int_kernel(const void *x, int x_dt, void *y, int y_dt, Plan p, int op) {
    __shared__ uint64_t sh[32];
    const uint64_t ident = op == 0 ? 0 : op == 1 ? 1 : op == 2 ? (uint64_t)INT64_MIN : (uint64_t)INT64_MAX;
    for (int64_t o = blockIdx.x; o < p.onum; o += gridDim.x) {
        const int64_t base = space_off(p.no, p.osh, p.ost, o);
        uint64_t acc = ident;
        for (int64_t i = threadIdx.x; i < p.inum; i += blockDim.x)
            acc = iop(op, acc, (uint64_t)ld_i(x, x_dt, base + inner_off(p, i)));
        acc = block_reduce_i(acc, op, ident, sh);
        if (threadIdx.x == 0) st_i(y, y_dt, o, (int64_t)acc);
    }
}

__global__ void argext_int_kernel(const void *x, int x_dt, int64_t *y, Plan p, bool is_min) {
    __shared__ int64_t shv[32], shi[32];
    const int64_t worst = is_min ? INT64_MAX : INT64_MIN;
    for (int64_t o = blockIdx.x; o < p.onum; o += gridDim.x) {
        const int64_t base = space_off(p.no, p.osh, p.ost, o);
        int64_t bv = worst, bi = INT64_MAX;
        for (int64_t i = threadIdx.x; i < p.inum; i += blockDim.x) {
            int64_t v = ld_i(x, x_dt, base + inner_off(p, i));
            bool better = v == bv ? i < bi : (is_min ? v < bv : v > bv);
            if (better) bv = v, bi = i;
        }
        for (int s = 16; s > 0; s >>= 1) {
            int64_t v = __shfl_down_sync(0xffffffffu, bv, s), i = __shfl_down_sync(0xffffffffu, bi, s);
            if (v == bv ? i < bi : (is_min ? v < bv : v > bv)) bv = v, bi = i;
        }
        const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
        __syncthreads();
        if (lane == 0) shv[w] = bv, shi[w] = bi;
        __syncthreads();
        if (w == 0) {
            bv = lane < nw ? shv[lane] : worst;
            bi = lane < nw ? shi[lane] : INT64_MAX;
            for (int s = 16; s > 0; s >>= 1) {
                int64_t v = __shfl_down_sync(0xffffffffu, bv, s), i = __shfl_down_sync(0xffffffffu, bi, s);
                if (v == bv ? i < bi : (is_min ? v < bv : v > bv)) bv = v, bi = i;
            }
            if (lane == 0) y[o] = bi;
        }
    }
}

__global__ void cumsum_int_kernel(const void *x, int x_dt, int64_t *y, Plan px, Plan py, bool rev) {
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < px.onum;
         o += (int64_t)gridDim.x * blockDim.x) {
        const int64_t xo = space_off(px.no, px.osh, px.ost, o);
        int64_t *yo = y + space_off(py.no, py.osh, py.ost, o);
        const int64_t n = px.inum, sx = px.ni ? px.ist[0] : 0, sy = py.ni ? py.ist[0] : 0;
        uint64_t acc = 0;
        for (int64_t s = 0; s < n; s++) {
            int64_t i = rev ? n - 1 - s : s;
            acc += (uint64_t)ld_i(x, x_dt, xo + i * sx);
            yo[i * sy] = (int64_t)acc;
        }
    }
}

bool is_int_dt(int dt) { return dt >= I8 && dt <= BOOL; }

// Runs CALL with T the C++ type of a float dtype; false for other dtypes.
#define FLOAT_TYPES(dtype, CALL)                                  \
    ((dtype) == F32    ? ([&] { typedef float T; CALL; }(), true)          \
     : (dtype) == F64  ? ([&] { typedef double T; CALL; }(), true)         \
     : (dtype) == F16  ? ([&] { typedef __half T; CALL; }(), true)         \
     : (dtype) == BF16 ? ([&] { typedef __nv_bfloat16 T; CALL; }(), true)  \
                       : false)

unsigned grid_for(int64_t n) { return (unsigned)(n < (1 << 20) ? (n < 1 ? 1 : n) : (1 << 20)); }

}  // namespace

extern "C" size_t oar_cu_reduce_scratch_bytes(int kind, const oar_cu_rplan *plan) {
    Plan q = to_plan(plan);
    if (use_tiles(q, kind)) return sizeof(double) * (size_t)(q.onum * tile_chunks(q));
    if (use_cols(q)) return 0;
    int64_t S = split_parts(q);
    return S ? sizeof(double) * (size_t)(q.onum * S + q.onum) : 0;
}

extern "C" int oar_cu_reduce(int kind, int dtype, const void *x, void *y, const oar_cu_rplan *plan, double p,
                             int64_t correction, void *scratch, void *stream) {
    Plan q = to_plan(plan);
    if (q.onum <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const double corr = (double)correction;
    if (is_int_dt(dtype)) {
        int op = kind == OAR_CU_R_SUM ? 0 : kind == OAR_CU_R_PROD ? 1 : kind == OAR_CU_R_AMAX ? 2
               : kind == OAR_CU_R_AMIN ? 3 : -1;
        if (op < 0) return (int)cudaErrorInvalidValue;
        int y_dt = op <= 1 ? (int)I64 : dtype;
        reduce_int_kernel<<<grid_for(q.onum), threads_for(q.inum, 512), 0, s>>>(x, dtype, y, y_dt, q, op);
        return (int)cudaGetLastError();
    }
    bool ok;
    int64_t S = use_cols(q) ? 0 : split_parts(q);
    if (use_tiles(q, kind) && scratch) {
        ok = FLOAT_TYPES(dtype, launch_tiles<T>((const T *)x, (T *)y, q, kind, (double *)scratch, s));
    } else if (S && scratch) {
        ok = FLOAT_TYPES(dtype, launch_split<T>((const T *)x, (T *)y, q, kind, p, corr, S, (double *)scratch, s));
    } else if (use_cols(q)) {
        unsigned b = blocks_for(q.onum, 128);
        ok = FLOAT_TYPES(dtype, (reduce_cols_kernel<T><<<b, 128, 0, s>>>((const T *)x, (T *)y, q, kind, p, corr)));
    } else {
        int t = threads_for(q.inum, 512);
        ok = FLOAT_TYPES(dtype,
                         (reduce_kernel<T><<<grid_for(q.onum), t, 0, s>>>((const T *)x, (T *)y, q, kind, p, corr)));
    }
    return ok ? (int)cudaGetLastError() : (int)cudaErrorInvalidValue;
}

extern "C" int oar_cu_argext(int is_min, int dtype, const void *x, int64_t *y, const oar_cu_rplan *plan,
                             void *stream) {
    Plan q = to_plan(plan);
    if (q.onum <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    int t = threads_for(q.inum, 512);
    if (is_int_dt(dtype)) {
        argext_int_kernel<<<grid_for(q.onum), t, 0, s>>>(x, dtype, y, q, is_min != 0);
        return (int)cudaGetLastError();
    }
    bool ok = FLOAT_TYPES(dtype, (argext_kernel<T><<<grid_for(q.onum), t, 0, s>>>((const T *)x, y, q, is_min != 0)));
    return ok ? (int)cudaGetLastError() : (int)cudaErrorInvalidValue;
}

extern "C" int oar_cu_cumsum(int dtype, const void *x, void *y, const oar_cu_rplan *plan_x,
                             const oar_cu_rplan *plan_y, int reverse, void *stream) {
    Plan px = to_plan(plan_x), py = to_plan(plan_y);
    if (px.onum <= 0 || px.inum <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    unsigned b = blocks_for(px.onum, 128);
    if (is_int_dt(dtype)) {
        cumsum_int_kernel<<<b, 128, 0, s>>>(x, dtype, (int64_t *)y, px, py, reverse != 0);
        return (int)cudaGetLastError();
    }
    bool ok;
    if (use_long_scan(px))
        ok = FLOAT_TYPES(dtype, (cumsum_long_kernel<T><<<(unsigned)px.onum, 1024, 0, s>>>((const T *)x, (T *)y, px, py,
                                                                                         reverse != 0)));
    else
        ok = FLOAT_TYPES(dtype, (cumsum_kernel<T><<<b, 128, 0, s>>>((const T *)x, (T *)y, px, py, reverse != 0)));
    return ok ? (int)cudaGetLastError() : (int)cudaErrorInvalidValue;
}
