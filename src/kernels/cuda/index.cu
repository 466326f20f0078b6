// Selection by index tensors, masks and positions, and topk (launch_index.h). Every kernel
// checks each index before it touches memory with it; sums fed by several sources run one
// thread per output column, adding in the reference's order (no atomics, deterministic), or
// for embedding_backward one warp per row over the indices stably sorted (the same order).
#include "cuda_types.cuh"
#include "launch_index.h"

#include <cub/device/device_radix_sort.cuh>

using namespace oarcu;

namespace {

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

const int kThreads = 256;

__device__ __forceinline__ int64_t load_index(const void *p, int dt, int64_t i) {
    switch (dt) {
    case I64: return ((const int64_t *)p)[i];
    case I32: return ((const int32_t *)p)[i];
    case I8: return ((const int8_t *)p)[i];
    case U8: return ((const uint8_t *)p)[i];
    default: return -1;
    }
}

__device__ __forceinline__ void flag_bad(unsigned long long *err, int64_t v) {
    err[1] = (unsigned long long)v;
    err[0] = 1ULL;
}

// The element type of each dtype.
template <int D> struct Ty;
template <> struct Ty<F32> { typedef float T; };
template <> struct Ty<F64> { typedef double T; };
template <> struct Ty<F16> { typedef __half T; };
template <> struct Ty<BF16> { typedef __nv_bfloat16 T; };
template <> struct Ty<I8> { typedef int8_t T; };
template <> struct Ty<U8> { typedef uint8_t T; };
template <> struct Ty<I32> { typedef int32_t T; };
template <> struct Ty<I64> { typedef int64_t T; };
template <> struct Ty<BOOL> { typedef uint8_t T; };

// a + b as the reference's add_into: floats add, integers wrap, bools or.
template <int D> __device__ __forceinline__ typename Ty<D>::T addv(typename Ty<D>::T a, typename Ty<D>::T b) {
    typedef typename Ty<D>::T T;
    if constexpr (D == F32 || D == F64) return a + b;
    // the reference adds in double and stores through float: the double sum of two f16/bf16
    // values is exact, so this is the float sum rounded once more, as here
    else if constexpr (D == F16 || D == BF16) return cvt<T>(cvt<float>(a) + cvt<float>(b));
    else if constexpr (D == BOOL) return (T)((a | b) != 0);
    else return (T)(int64_t)((uint64_t)(int64_t)a + (uint64_t)(int64_t)b);
}

template <int S> struct Bits;
template <> struct Bits<1> { typedef uint8_t T; };
template <> struct Bits<2> { typedef uint16_t T; };
template <> struct Bits<4> { typedef uint32_t T; };
template <> struct Bits<8> { typedef uint64_t T; };

// Runs CALL with E the unsigned type of esize bytes.
#define BY_SIZE(esize, ...)                                  \
    switch (esize) {                                          \
    case 1: { typedef Bits<1>::T E; __VA_ARGS__; } break;            \
    case 2: { typedef Bits<2>::T E; __VA_ARGS__; } break;            \
    case 4: { typedef Bits<4>::T E; __VA_ARGS__; } break;            \
    case 8: { typedef Bits<8>::T E; __VA_ARGS__; } break;            \
    default: return (int)cudaErrorInvalidValue;               \
    }

// All bits zero: 0 in every element type.
template <typename T> __device__ __forceinline__ T zero_of() {
    T z;
    memset(&z, 0, sizeof z);
    return z;
}

// Runs CALL with D the dtype, for the dtypes that add (floats, integers, bool).
#define BY_ADD_DTYPE(dt, ...)                                \
    switch (dt) {                                             \
    case F32: { constexpr int D = F32; __VA_ARGS__; } break;         \
    case F64: { constexpr int D = F64; __VA_ARGS__; } break;         \
    case F16: { constexpr int D = F16; __VA_ARGS__; } break;         \
    case BF16: { constexpr int D = BF16; __VA_ARGS__; } break;       \
    case I8: { constexpr int D = I8; __VA_ARGS__; } break;           \
    case U8: { constexpr int D = U8; __VA_ARGS__; } break;           \
    case I32: { constexpr int D = I32; __VA_ARGS__; } break;         \
    case I64: { constexpr int D = I64; __VA_ARGS__; } break;         \
    case BOOL: { constexpr int D = BOOL; __VA_ARGS__; } break;       \
    default: return (int)cudaErrorInvalidValue;               \
    }

// ---------------------------------------------------------------- index_select, embedding

template <typename E>
__global__ void index_select_k(E *y, const E *x, const void *idx, int idt, int64_t size, int64_t inner, int64_t m,
                               int64_t n, unsigned long long *err) {
    GRID_LOOP(t, n) {
        int64_t i = t % inner, r = t / inner, j = r % m, o = r / m;
        int64_t v = load_index(idx, idt, j);
        if (v < 0 || v >= size) {
            flag_bad(err, v);
            y[t] = (E)0;
            continue;
        }
        y[t] = x[(o * size + v) * inner + i];
    }
}

// One thread per column (o, i): adds g's slices in index order.
template <int D>
__global__ void index_add_k(typename Ty<D>::T *y, const typename Ty<D>::T *g, const void *idx, int idt, int64_t size,
                            int64_t inner, int64_t m, int64_t ncols, unsigned long long *err) {
    GRID_LOOP(c, ncols) {
        int64_t i = c % inner, o = c / inner;
        for (int64_t j = 0; j < m; j++) {
            int64_t v = load_index(idx, idt, j);
            if (v < 0 || v >= size) {
                flag_bad(err, v);
                continue;
            }
            typename Ty<D>::T *p = y + (o * size + v) * inner + i;
            *p = addv<D>(*p, g[(o * m + j) * inner + i]);
        }
    }
}

template <typename T> __device__ __forceinline__ double to_double(T v) { return (double)v; }
template <> __device__ __forceinline__ double to_double<__half>(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double to_double<__nv_bfloat16>(__nv_bfloat16 v) {
    return (double)__bfloat162float(v);
}

// embedding_backward, deterministic without float atomics: the (index, position) pairs are
// sorted by index with a stable radix sort (positions ascend within an index), then one warp
// per run of equal indices sums its gradient rows in that order, in double, and stores the
// row once. Rows no index names are zero (a memset).

// keys[i] = idx[i] as int32 (an out-of-range index: flagged, and key num, past every row),
// pos[i] = i.
__global__ void embedding_keys_k(int32_t *keys, int32_t *pos, const void *idx, int idt, int64_t n, int64_t num,
                                 unsigned long long *err) {
    GRID_LOOP(i, n) {
        int64_t v = load_index(idx, idt, i);
        if (v < 0 || v >= num) {
            flag_bad(err, v);
            v = num;
        }
        keys[i] = (int32_t)v;
        pos[i] = (int32_t)i;
    }
}

template <typename T> __device__ __forceinline__ T from_double(double v) { return cvt<T>((float)v); }
template <> __device__ __forceinline__ double from_double<double>(double v) { return v; }

// One warp per sorted slot; the warp of a run's first slot sums the run, lanes over columns.
template <typename T>
__global__ void embedding_runs_k(T *y, const T *g, const int32_t *keys, const int32_t *pos, int64_t n, int64_t num,
                                 int64_t dim) {
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * blockDim.x >> 5;
    for (int64_t s = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; s < n; s += warps) {
        int32_t v = keys[s];
        if (v >= num || (s > 0 && keys[s - 1] == v)) continue; // past the rows, or not a run's first slot
        int64_t e = s + 1;
        while (e < n && keys[e] == v) e++;
        for (int64_t c = lane; c < dim; c += 32) {
            double acc = 0;
            for (int64_t t = s; t < e; t++) acc += to_double(g[(int64_t)pos[t] * dim + c]);
            y[(int64_t)v * dim + c] = from_double<T>(acc);
        }
    }
}

// ---------------------------------------------------------------- gather, scatter_add

struct Geo {
    int ndim, d;
    int64_t ishape[OAR_CU_IDX_DIMS], xstride[OAR_CU_IDX_DIMS], sstride[OAR_CU_IDX_DIMS];
    int64_t xsize_d;
};

template <typename E>
__global__ void gather_k(E *y, const E *x, const void *idx, int idt, Geo g, int64_t n, unsigned long long *err) {
    GRID_LOOP(t, n) {
        int64_t rem = t, off = 0;
        for (int k = g.ndim - 1; k >= 0; k--) {
            int64_t c = rem % g.ishape[k];
            rem /= g.ishape[k];
            if (k != g.d) off += c * g.xstride[k];
        }
        int64_t v = load_index(idx, idt, t);
        if (v < 0 || v >= g.xsize_d) {
            flag_bad(err, v);
            y[t] = (E)0;
            continue;
        }
        y[t] = x[off + v * g.xstride[g.d]];
    }
}

// One thread per column of the index (every position but along d), in index order.
template <int D>
__global__ void scatter_add_k(typename Ty<D>::T *y, const typename Ty<D>::T *src, const void *idx, int idt, Geo g,
                              int64_t ncols, unsigned long long *err) {
    GRID_LOOP(c, ncols) {
        int64_t rem = c, ioff = 0, soff = 0, yoff = 0, istr = 1, istr_d = 0;
        for (int k = g.ndim - 1; k >= 0; k--) {
            if (k == g.d) {
                istr_d = istr;
            } else {
                int64_t cc = rem % g.ishape[k];
                rem /= g.ishape[k];
                ioff += cc * istr;
                soff += cc * g.sstride[k];
                yoff += cc * g.xstride[k];
            }
            istr *= g.ishape[k];
        }
        for (int64_t j = 0; j < g.ishape[g.d]; j++) {
            int64_t v = load_index(idx, idt, ioff + j * istr_d);
            if (v < 0 || v >= g.xsize_d) {
                flag_bad(err, v);
                continue;
            }
            typename Ty<D>::T *p = y + yoff + v * g.xstride[g.d];
            *p = addv<D>(*p, src[soff + j * g.sstride[g.d]]);
        }
    }
}

// ---------------------------------------------------------------- masked_fill, tril/triu, pad

struct Ew {
    int ndim;
    int64_t shape[OAR_CU_IDX_DIMS], a_stride[OAR_CU_IDX_DIMS], b_stride[OAR_CU_IDX_DIMS];
};

template <typename E>
__global__ void masked_fill_k(E *y, const E *x, const uint8_t *mask, uint64_t fill, Ew l, int64_t n) {
    E f;
    memcpy(&f, &fill, sizeof(E));
    GRID_LOOP(t, n) {
        int64_t rem = t, a = 0, b = 0;
        for (int k = l.ndim - 1; k >= 0; k--) {
            int64_t c = rem % l.shape[k];
            rem /= l.shape[k];
            a += c * l.a_stride[k];
            b += c * l.b_stride[k];
        }
        y[t] = mask[b] ? f : x[a];
    }
}

template <typename E>
__global__ void tri_k(E *y, const E *x, int lower, int64_t diagonal, Ew l, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t rem = t, a = 0, row = 0, col = 0;
        for (int k = l.ndim - 1; k >= 0; k--) {
            int64_t c = rem % l.shape[k];
            rem /= l.shape[k];
            a += c * l.a_stride[k];
            if (k == l.ndim - 1) col = c;
            if (k == l.ndim - 2) row = c;
        }
        int64_t off = col - row;
        y[t] = (lower ? off <= diagonal : off >= diagonal) ? x[a] : (E)0;
    }
}

// The modes of oar_pad_mode.
const int kPadConstant = 0, kPadReplicate = 2;

// The input coordinate output coordinate o reads along one dim, or -1 for the fill value (as
// the reference's pad_source).
__device__ __forceinline__ int64_t pad_source(int mode, int64_t o, int64_t before, int64_t size) {
    int64_t c = o - before;
    if (c >= 0 && c < size) return c;
    if (mode == kPadConstant) return -1;
    if (mode == kPadReplicate) return c < 0 ? 0 : size - 1;
    return c < 0 ? -c : 2 * (size - 1) - c;
}

struct PadGeo {
    int64_t xshape[OAR_CU_IDX_DIMS], before[OAR_CU_IDX_DIMS];
};

template <typename E>
__global__ void pad_k(E *y, const E *x, uint64_t fill, int mode, Ew l, PadGeo p, int64_t n) {
    E f;
    memcpy(&f, &fill, sizeof(E));
    GRID_LOOP(t, n) {
        int64_t rem = t, a = 0;
        bool inside = true;
        for (int k = l.ndim - 1; k >= 0; k--) {
            int64_t o = rem % l.shape[k];
            rem /= l.shape[k];
            int64_t c = pad_source(mode, o, p.before[k], p.xshape[k]);
            if (c < 0) inside = false;
            else a += c * l.a_stride[k];
        }
        y[t] = inside ? x[a] : f;
    }
}

// The smallest padded coordinate o > prev in [0, out) that reads input coordinate c, or -1.
__device__ int64_t next_reader(int mode, int64_t c, int64_t before, int64_t size, int64_t out, int64_t prev) {
    int64_t o = prev + 1 < 0 ? 0 : prev + 1;
    if (mode != kPadConstant) { /* the leading border */
        int64_t end = before < out ? before : out;
        for (; o < end; o++)
            if (pad_source(mode, o, before, size) == c) return o;
    }
    int64_t mid = c + before; /* the direct read */
    if (o <= mid) {
        if (mid >= 0 && mid < out) return mid;
        o = mid + 1;
    }
    if (mode != kPadConstant) { /* the trailing border */
        if (o < before + size) o = before + size;
        for (; o < out; o++)
            if (pad_source(mode, o, before, size) == c) return o;
    }
    return -1;
}

struct PadBack {
    int ndim;
    int64_t yshape[OAR_CU_IDX_DIMS], gshape[OAR_CU_IDX_DIMS], gstride[OAR_CU_IDX_DIMS], before[OAR_CU_IDX_DIMS];
};

// One thread per input element: sums the gradient at every padded position that read it, in
// the gradient's row-major order (the reference's).
template <int D>
__global__ void pad_backward_k(typename Ty<D>::T *y, const typename Ty<D>::T *g, int mode, PadBack p, int64_t n) {
    GRID_LOOP(t, n) {
        int64_t c[OAR_CU_IDX_DIMS], o[OAR_CU_IDX_DIMS];
        int64_t rem = t;
        for (int k = p.ndim - 1; k >= 0; k--) {
            c[k] = rem % p.yshape[k];
            rem /= p.yshape[k];
        }
        typename Ty<D>::T acc = zero_of<typename Ty<D>::T>();
        bool any = true;
        for (int k = 0; k < p.ndim && any; k++) {
            o[k] = next_reader(mode, c[k], p.before[k], p.yshape[k], p.gshape[k], -1);
            any = o[k] >= 0;
        }
        while (any) {
            int64_t off = 0;
            for (int k = 0; k < p.ndim; k++) off += o[k] * p.gstride[k];
            acc = addv<D>(acc, g[off]);
            int k = p.ndim - 1;
            for (; k >= 0; k--) {
                o[k] = next_reader(mode, c[k], p.before[k], p.yshape[k], p.gshape[k], o[k]);
                if (o[k] >= 0) break;
                o[k] = next_reader(mode, c[k], p.before[k], p.yshape[k], p.gshape[k], -1);
            }
            if (k < 0) any = false;
        }
        y[t] = acc;
    }
}

// ---------------------------------------------------------------- one_hot

__global__ void one_hot_k(int64_t *y, const void *idx, int idt, int64_t n, int64_t classes,
                          unsigned long long *err) {
    GRID_LOOP(i, n) {
        int64_t v = load_index(idx, idt, i);
        if (v < 0 || v >= classes) {
            flag_bad(err, v);
            continue;
        }
        y[i * classes + v] = 1;
    }
}

__global__ void check_indices_k(const void *idx, int idt, int64_t n, int64_t limit, unsigned long long *err) {
    GRID_LOOP(i, n) {
        int64_t v = load_index(idx, idt, i);
        if (v < 0 || v >= limit) flag_bad(err, v);
    }
}

// ---------------------------------------------------------------- topk

template <int D> struct Key { typedef double K; };
template <> struct Key<I8> { typedef int64_t K; };
template <> struct Key<U8> { typedef int64_t K; };
template <> struct Key<I32> { typedef int64_t K; };
template <> struct Key<I64> { typedef int64_t K; };

template <int D> __device__ __forceinline__ typename Key<D>::K key_of(typename Ty<D>::T v) {
    if constexpr (D == F16 || D == BF16) return (double)cvt<float>(v);
    else return (typename Key<D>::K)v;
}

// a ranks before b (the reference's ranks_before): NaN above every number.
__device__ __forceinline__ bool ranks_before(double x, double y, bool largest) {
    bool xn = x != x, yn = y != y;
    if (xn || yn) return largest ? xn && !yn : !xn && yn;
    return largest ? x > y : x < y;
}
__device__ __forceinline__ bool ranks_before(int64_t x, int64_t y, bool largest) { return largest ? x > y : x < y; }

// Rank of each element in its row under the stable sort: those before it, and its equals
// with a lower index.
template <int D>
__global__ void topk_rank_k(typename Ty<D>::T *values, int64_t *indices, const typename Ty<D>::T *x, int64_t n,
                            int64_t inner, int64_t k, bool largest, bool sorted, int64_t *rank, int64_t total) {
    GRID_LOOP(t, total) {
        int64_t in = t % inner, r = t / inner, i = r % n, o = r / n;
        const typename Ty<D>::T *row = x + o * n * inner + in;
        typename Key<D>::K ki = key_of<D>(row[i * inner]);
        int64_t rk = 0;
        for (int64_t j = 0; j < n; j++) {
            if (j == i) continue;
            typename Key<D>::K kj = key_of<D>(row[j * inner]);
            if (ranks_before(kj, ki, largest) || (j < i && !ranks_before(ki, kj, largest))) rk++;
        }
        if (!sorted) {
            rank[t] = rk;
        } else if (rk < k) {
            values[(o * k + rk) * inner + in] = row[i * inner];
            indices[(o * k + rk) * inner + in] = i;
        }
    }
}

// (ka, ia) before (kb, ib) in the stable sort: by rank, then by index (a strict total order).
template <typename K> __device__ __forceinline__ bool pair_before(K ka, int64_t ia, K kb, int64_t ib, bool largest) {
    return ranks_before(ka, kb, largest) || (!ranks_before(kb, ka, largest) && ia < ib);
}

// Keeps in (bk, bi) the better of it and (ok, oi); an index < 0 is no candidate.
template <typename K> __device__ __forceinline__ void keep_better(K &bk, int64_t &bi, K ok, int64_t oi, bool largest) {
    if (oi >= 0 && (bi < 0 || pair_before(ok, oi, bk, bi, largest))) {
        bk = ok;
        bi = oi;
    }
}

// Rows along the last dim (inner 1) with small k: one block per row picks the k best in k
// rounds, each the best element after the previous pick in the sort's order.
template <int D>
__global__ void topk_select_k(typename Ty<D>::T *values, int64_t *indices, const typename Ty<D>::T *x, int64_t n,
                              int64_t k, bool largest, bool sorted) {
    typedef typename Key<D>::K K;
    __shared__ K s_key[33];
    __shared__ int64_t s_idx[33];
    __shared__ int64_t chosen[OAR_CU_TOPK_SELECT_K];
    const typename Ty<D>::T *row = x + (int64_t)blockIdx.x * n;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    K pk = 0;
    int64_t pi = -1; // the previous pick (none yet)
    for (int64_t r = 0; r < k; r++) {
        K bk = 0;
        int64_t bi = -1;
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
            K kj = key_of<D>(row[j]);
            if (pi >= 0 && !pair_before(pk, pi, kj, j, largest)) continue;
            keep_better(bk, bi, kj, j, largest);
        }
        for (int o = 16; o > 0; o >>= 1) {
            K ok = __shfl_down_sync(0xffffffffu, bk, o);
            int64_t oi = __shfl_down_sync(0xffffffffu, bi, o);
            keep_better(bk, bi, ok, oi, largest);
        }
        if (lane == 0) {
            s_key[wid] = bk;
            s_idx[wid] = bi;
        }
        __syncthreads();
        if (wid == 0) {
            bk = lane < nw ? s_key[lane] : (K)0;
            bi = lane < nw ? s_idx[lane] : -1;
            for (int o = 16; o > 0; o >>= 1) {
                K ok = __shfl_down_sync(0xffffffffu, bk, o);
                int64_t oi = __shfl_down_sync(0xffffffffu, bi, o);
                keep_better(bk, bi, ok, oi, largest);
            }
            if (lane == 0) {
                s_key[32] = bk;
                s_idx[32] = bi;
                chosen[r] = bi;
            }
        }
        __syncthreads();
        pk = s_key[32];
        pi = s_idx[32];
        __syncthreads();
    }
    if (!sorted && threadIdx.x == 0) /* the chosen elements in input order */
        for (int64_t a = 1; a < k; a++) {
            int64_t v = chosen[a], b = a - 1;
            for (; b >= 0 && chosen[b] > v; b--) chosen[b + 1] = chosen[b];
            chosen[b + 1] = v;
        }
    __syncthreads();
    for (int64_t r = threadIdx.x; r < k; r += blockDim.x) {
        values[(int64_t)blockIdx.x * k + r] = row[chosen[r]];
        indices[(int64_t)blockIdx.x * k + r] = chosen[r];
    }
}

// Unsorted: the chosen elements in input order.
template <typename E>
__global__ void topk_place_k(E *values, int64_t *indices, const E *x, const int64_t *rank, int64_t n, int64_t inner,
                             int64_t k, int64_t total) {
    GRID_LOOP(t, total) {
        if (rank[t] >= k) continue;
        int64_t in = t % inner, r = t / inner, i = r % n, o = r / n;
        int64_t pos = 0;
        for (int64_t j = 0; j < i; j++) pos += rank[(o * n + j) * inner + in] < k;
        values[(o * k + pos) * inner + in] = x[t];
        indices[(o * k + pos) * inner + in] = i;
    }
}

Geo geo_of(const oar_cu_gather_geo *g) {
    Geo o;
    o.ndim = g->ndim;
    o.d = g->d;
    o.xsize_d = g->xsize_d;
    for (int k = 0; k < OAR_CU_IDX_DIMS; k++) {
        o.ishape[k] = g->ishape[k];
        o.xstride[k] = g->xstride[k];
        o.sstride[k] = g->sstride[k];
    }
    return o;
}

Ew ew_of(const oar_cu_ew *l) {
    Ew o;
    o.ndim = l->ndim;
    for (int k = 0; k < OAR_CU_IDX_DIMS; k++) {
        o.shape[k] = l->shape[k];
        o.a_stride[k] = l->a_stride[k];
        o.b_stride[k] = l->b_stride[k];
    }
    return o;
}

}  // namespace

extern "C" int oar_cu_index_select(void *y, const void *x, int esize, const void *idx, int idx_dtype, int64_t outer,
                                   int64_t size, int64_t inner, int64_t m, unsigned long long *err, void *stream) {
    int64_t n = outer * m * inner;
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_SIZE(esize, (index_select_k<E><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
                       (E *)y, (const E *)x, idx, idx_dtype, size, inner, m, n, err)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_index_add(void *y, const void *g, int dtype, const void *idx, int idx_dtype, int64_t outer,
                                int64_t size, int64_t inner, int64_t m, unsigned long long *err, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    static const int sizes[] = {4, 8, 2, 2, 1, 1, 4, 8, 1, 2, 2, 4, 8};
    int64_t ny = outer * size * inner;
    if (ny <= 0) return 0;
    cudaError_t e = cudaMemsetAsync(y, 0, (size_t)ny * (size_t)sizes[dtype], s);
    if (e != cudaSuccess) return (int)e;
    int64_t ncols = outer * inner;
    if (m <= 0 || ncols <= 0) return 0;
    BY_ADD_DTYPE(dtype, (index_add_k<D><<<blocks_for(ncols, kThreads), kThreads, 0, s>>>(
                            (typename Ty<D>::T *)y, (const typename Ty<D>::T *)g, idx, idx_dtype, size, inner, m,
                            ncols, err)));
    return (int)cudaGetLastError();
}

static int radix_bits(int64_t num) { // bits of the largest key, num (the out-of-range mark)
    int b = 1;
    while (b < 31 && (num >> b) != 0) b++;
    return b;
}

// Scratch: keys and positions twice (sort in and out), then CUB's temporary storage.
static size_t sort_bytes(int64_t n, int64_t num) {
    size_t cub_bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const int32_t *)nullptr, (int32_t *)nullptr,
                                    (const int32_t *)nullptr, (int32_t *)nullptr, (int)n, 0, radix_bits(num));
    return cub_bytes;
}

extern "C" size_t oar_cu_embedding_backward_scratch(int64_t n, int64_t num) {
    if (n <= 0) return 0;
    return 4 * sizeof(int32_t) * (size_t)n + sort_bytes(n, num) + 256;
}

extern "C" int oar_cu_embedding_backward(void *y, const void *g, int dtype, const void *idx, int idx_dtype, int64_t n,
                                         int64_t num, int64_t dim, void *scratch, unsigned long long *err,
                                         void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    int64_t ny = num * dim;
    if (ny <= 0) return 0;
    if (n > 0x7ffffffeLL || num > 0x7ffffffeLL || (n > 0 && !scratch)) return (int)cudaErrorInvalidValue;
    size_t es = dtype == F64 ? 8 : dtype == F32 ? 4 : 2;
    if (dtype != F64 && dtype != F32 && dtype != F16 && dtype != BF16) return (int)cudaErrorInvalidValue;
    cudaError_t e = cudaMemsetAsync(y, 0, (size_t)ny * es, s);
    if (e != cudaSuccess || n <= 0) return (int)e;
    int32_t *keys = (int32_t *)scratch, *pos = keys + n, *skeys = pos + n, *spos = skeys + n;
    size_t cub_bytes = sort_bytes(n, num);
    void *cub_tmp = (void *)(((uintptr_t)(spos + n) + 255) & ~(uintptr_t)255);
    embedding_keys_k<<<blocks_for(n, kThreads), kThreads, 0, s>>>(keys, pos, idx, idx_dtype, n, num, err);
    e = cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, keys, skeys, pos, spos, (int)n, 0, radix_bits(num), s);
    if (e != cudaSuccess) return (int)e;
    unsigned b = blocks_for(n * 32, kThreads);
    switch (dtype) {
    case F64: embedding_runs_k<double><<<b, kThreads, 0, s>>>((double *)y, (const double *)g, skeys, spos, n, num, dim); break;
    case F32: embedding_runs_k<float><<<b, kThreads, 0, s>>>((float *)y, (const float *)g, skeys, spos, n, num, dim); break;
    case F16: embedding_runs_k<__half><<<b, kThreads, 0, s>>>((__half *)y, (const __half *)g, skeys, spos, n, num, dim); break;
    default:
        embedding_runs_k<__nv_bfloat16><<<b, kThreads, 0, s>>>((__nv_bfloat16 *)y, (const __nv_bfloat16 *)g, skeys,
                                                               spos, n, num, dim);
        break;
    }
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_gather(void *y, const void *x, int esize, const void *idx, int idx_dtype,
                             const oar_cu_gather_geo *g, unsigned long long *err, void *stream) {
    Geo geo = geo_of(g);
    int64_t n = 1;
    for (int k = 0; k < geo.ndim; k++) n *= geo.ishape[k];
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_SIZE(esize, (gather_k<E><<<blocks_for(n, kThreads), kThreads, 0, s>>>((E *)y, (const E *)x, idx, idx_dtype,
                                                                            geo, n, err)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_scatter_add(void *y, const void *src, int dtype, const void *idx, int idx_dtype,
                                  const oar_cu_gather_geo *g, unsigned long long *err, void *stream) {
    Geo geo = geo_of(g);
    int64_t ncols = 1;
    for (int k = 0; k < geo.ndim; k++) ncols *= k == geo.d ? 1 : geo.ishape[k];
    if (ncols <= 0 || geo.ishape[geo.d] <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    BY_ADD_DTYPE(dtype, (scatter_add_k<D><<<blocks_for(ncols, kThreads), kThreads, 0, s>>>(
                            (typename Ty<D>::T *)y, (const typename Ty<D>::T *)src, idx, idx_dtype, geo, ncols, err)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_masked_fill(void *y, const void *x, const void *mask, int esize, uint64_t fill,
                                  const oar_cu_ew *l, int64_t n, void *stream) {
    if (n <= 0) return 0;
    Ew ew = ew_of(l);
    cudaStream_t s = (cudaStream_t)stream;
    BY_SIZE(esize, (masked_fill_k<E><<<blocks_for(n, kThreads), kThreads, 0, s>>>((E *)y, (const E *)x,
                                                                                 (const uint8_t *)mask, fill, ew, n)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_tri(void *y, const void *x, int esize, int lower, int64_t diagonal, const oar_cu_ew *l,
                          int64_t n, void *stream) {
    if (n <= 0) return 0;
    Ew ew = ew_of(l);
    cudaStream_t s = (cudaStream_t)stream;
    BY_SIZE(esize, (tri_k<E><<<blocks_for(n, kThreads), kThreads, 0, s>>>((E *)y, (const E *)x, lower, diagonal, ew,
                                                                         n)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_pad(void *y, const void *x, int esize, uint64_t fill, int mode, const oar_cu_ew *l,
                          const int64_t *xshape, const int64_t *before, int64_t n, void *stream) {
    if (n <= 0) return 0;
    Ew ew = ew_of(l);
    PadGeo p;
    for (int k = 0; k < OAR_CU_IDX_DIMS; k++) {
        p.xshape[k] = k < l->ndim ? xshape[k] : 1;
        p.before[k] = k < l->ndim ? before[k] : 0;
    }
    cudaStream_t s = (cudaStream_t)stream;
    BY_SIZE(esize, (pad_k<E><<<blocks_for(n, kThreads), kThreads, 0, s>>>((E *)y, (const E *)x, fill, mode, ew, p,
                                                                          n)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_pad_backward(void *y, const void *g, int dtype, int mode, int ndim, const int64_t *yshape,
                                   const int64_t *gshape, const int64_t *before, int64_t n, void *stream) {
    if (n <= 0) return 0;
    if (ndim < 0 || ndim > OAR_CU_IDX_DIMS) return (int)cudaErrorInvalidValue;
    PadBack p;
    p.ndim = ndim;
    int64_t st = 1;
    for (int k = OAR_CU_IDX_DIMS - 1; k >= 0; k--) {
        p.yshape[k] = k < ndim ? yshape[k] : 1;
        p.gshape[k] = k < ndim ? gshape[k] : 1;
        p.before[k] = k < ndim ? before[k] : 0;
        p.gstride[k] = st;
        if (k < ndim) st *= gshape[k];
    }
    cudaStream_t s = (cudaStream_t)stream;
    BY_ADD_DTYPE(dtype, (pad_backward_k<D><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
                            (typename Ty<D>::T *)y, (const typename Ty<D>::T *)g, mode, p, n)));
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_one_hot(int64_t *y, const void *idx, int idx_dtype, int64_t n, int64_t classes,
                              unsigned long long *err, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (n * classes > 0) {
        cudaError_t e = cudaMemsetAsync(y, 0, sizeof(int64_t) * (size_t)(n * classes), s);
        if (e != cudaSuccess) return (int)e;
    }
    if (n <= 0) return 0;
    one_hot_k<<<blocks_for(n, kThreads), kThreads, 0, s>>>(y, idx, idx_dtype, n, classes, err);
    return (int)cudaGetLastError();
}

extern "C" int oar_cu_check_indices(const void *idx, int idx_dtype, int64_t n, int64_t limit,
                                    unsigned long long *err, void *stream) {
    if (n <= 0) return 0;
    check_indices_k<<<blocks_for(n, kThreads), kThreads, 0, (cudaStream_t)stream>>>(idx, idx_dtype, n, limit, err);
    return (int)cudaGetLastError();
}

#define BY_TOPK_DTYPE(dt, ...)                               \
    switch (dt) {                                             \
    case F32: { constexpr int D = F32; __VA_ARGS__; } break;         \
    case F64: { constexpr int D = F64; __VA_ARGS__; } break;         \
    case F16: { constexpr int D = F16; __VA_ARGS__; } break;         \
    case BF16: { constexpr int D = BF16; __VA_ARGS__; } break;       \
    case I8: { constexpr int D = I8; __VA_ARGS__; } break;           \
    case U8: { constexpr int D = U8; __VA_ARGS__; } break;           \
    case I32: { constexpr int D = I32; __VA_ARGS__; } break;         \
    case I64: { constexpr int D = I64; __VA_ARGS__; } break;         \
    default: return (int)cudaErrorInvalidValue;               \
    }

extern "C" int oar_cu_topk(void *values, int64_t *indices, const void *x, int dtype, int64_t outer, int64_t n,
                           int64_t inner, int64_t k, int largest, int sorted, int64_t *rank, void *stream) {
    int64_t total = outer * n * inner;
    if (total <= 0 || k <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    if (inner == 1 && k <= OAR_CU_TOPK_SELECT_K && outer <= 0x7fffffffLL) {
        BY_TOPK_DTYPE(dtype, {
            typedef typename Ty<D>::T T;
            topk_select_k<D><<<(unsigned)outer, kThreads, 0, s>>>((T *)values, indices, (const T *)x, n, k,
                                                                 largest != 0, sorted != 0);
        });
        return (int)cudaGetLastError();
    }
    if (!sorted && !rank) return (int)cudaErrorInvalidValue;
    unsigned b = blocks_for(total, kThreads);
    BY_TOPK_DTYPE(dtype, {
        typedef typename Ty<D>::T T;
        topk_rank_k<D><<<b, kThreads, 0, s>>>((T *)values, indices, (const T *)x, n, inner, k, largest != 0,
                                              sorted != 0, rank, total);
        if (!sorted)
            topk_place_k<T><<<b, kThreads, 0, s>>>((T *)values, indices, (const T *)x, rank, n, inner, k, total);
    });
    return (int)cudaGetLastError();
}
