// grid_sample, roi_align and nms on the GPU (launch_vision.h). One thread per grid point or per
// output element, the host's own geometry functions (ops/*_geom.h, *_sample.h, nms_iou.h built
// for the device), sums in double in the reference's order. This file is compiled with
// --fmad=false (CMakeLists.txt): a fused multiply-add rounds once where the reference rounds
// twice, and the results would drift from the reference's bits.
#include "cuda_types.cuh"
#include "launch_vision.h"
#include "ops/nms_iou.h"

#include <cub/device/device_radix_sort.cuh>

using namespace oarcu;

namespace {

#define GRID_LOOP(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)
// Returns the error of the launch just made, if any.
#define RETURN_IF_FAILED()                          \
    do {                                            \
        cudaError_t e_ = cudaGetLastError();        \
        if (e_ != cudaSuccess) return e_;           \
    } while (0)

const int kThreads = 256;

// Calls f<T>(args) for the float dtype.
#define BY_FLOAT(dtype, f, ...)                                      \
    switch (dtype) {                                                 \
    case F32: return (int)f<float>(__VA_ARGS__);                     \
    case F64: return (int)f<double>(__VA_ARGS__);                    \
    case F16: return (int)f<__half>(__VA_ARGS__);                    \
    case BF16: return (int)f<__nv_bfloat16>(__VA_ARGS__);            \
    default: return (int)cudaErrorInvalidValue;                      \
    }

// ---------------------------------------------------------------- the sorted scatter
// An input gradient dx [n, c, vol] receives, for each entry (an output point and one of its
// taps), w * (gy[src + ch * gstride] / div) at key = b * vol + position (key none: the tap
// reads nothing). The entries' order (seq) is the reference's order of addition; a stable radix
// sort by key keeps it within each key, and one thread per element of dx adds its run.
struct Entries {
    uint64_t *key, *skey; // as made, and sorted
    int64_t *seq, *sseq;  // entry numbers, moved with the keys
    double *w, *div;      // by entry number
    int64_t *src;
};

// Bits of the largest key (none).
int key_bits(uint64_t none) {
    int b = 1;
    while (b < 64 && (none >> b) != 0) b++;
    return b;
}

size_t sort_temp_bytes(int64_t m, uint64_t none) {
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                    (const int64_t *)nullptr, (int64_t *)nullptr, (int)m, 0, key_bits(none));
    return bytes;
}

// Scratch: the seven arrays of m entries (8 bytes each), then CUB's storage at 256 bytes.
size_t scatter_bytes(int64_t m, uint64_t none) {
    if (m <= 0) return 0;
    return 7 * 8 * (size_t)m + 256 + sort_temp_bytes(m, none);
}

Entries entries_in(void *scratch, int64_t m) {
    char *p = (char *)scratch;
    size_t a = 8 * (size_t)m;
    Entries e;
    e.key = (uint64_t *)p;
    e.skey = (uint64_t *)(p + a);
    e.seq = (int64_t *)(p + 2 * a);
    e.sseq = (int64_t *)(p + 3 * a);
    e.w = (double *)(p + 4 * a);
    e.div = (double *)(p + 5 * a);
    e.src = (int64_t *)(p + 6 * a);
    return e;
}

void *cub_temp_in(void *scratch, int64_t m) { return (void *)(((uintptr_t)scratch + 7 * 8 * (size_t)m + 255) & ~(uintptr_t)255); }

template <typename T>
__global__ void gather_sorted_k(T *dx, const T *gy, Entries e, int64_t m, int64_t c, int64_t vol, int64_t gstride,
                                int64_t total) {
    GRID_LOOP(o, total) {
        int64_t b = o / (c * vol), ch = (o / vol) % c, at = o % vol;
        uint64_t key = (uint64_t)(b * vol + at);
        int64_t lo = 0, hi = m; // the first sorted entry with a key >= key
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (e.skey[mid] < key) lo = mid + 1;
            else hi = mid;
        }
        double acc = 0;
        for (int64_t i = lo; i < m && e.skey[i] == key; i++) {
            int64_t j = e.sseq[i];
            acc += e.w[j] * (ld_f64(gy[e.src[j] + ch * gstride]) / e.div[j]);
        }
        dx[o] = st_f64<T>(acc);
    }
}

// Sorts the m entries made (if any) and writes all of dx [n, c, vol].
template <typename T>
cudaError_t scatter_sorted(T *dx, const T *gy, Entries e, int64_t m, uint64_t none, int64_t c, int64_t vol,
                           int64_t gstride, int64_t total, void *scratch, cudaStream_t s) {
    if (m > 0) {
        size_t bytes = sort_temp_bytes(m, none);
        cudaError_t err = cub::DeviceRadixSort::SortPairs(cub_temp_in(scratch, m), bytes, e.key, e.skey, e.seq, e.sseq,
                                                          (int)m, 0, key_bits(none), s);
        if (err != cudaSuccess) return err;
    }
    gather_sorted_k<T><<<blocks_for(total, kThreads), kThreads, 0, s>>>(dx, gy, e, m, c, vol, gstride, total);
    return cudaGetLastError();
}

// ---------------------------------------------------------------- grid_sample

// The taps of grid point bp (batch element bp / np).
template <typename T>
__device__ __forceinline__ void point_taps(const T *grid, const gs_geom *geo, const gs_opts *o, int64_t bp,
                                           gs_taps *t) {
    double gv[3] = {0, 0, 0};
    for (int d = 0; d < geo->dims; d++) gv[d] = ld_f64(grid[bp * geo->dims + d]);
    gs_taps_of(gv, geo, o, t);
}

template <typename T> __global__ void grid_sample_k(T *y, const T *x, const T *grid, oar_cu_grid a) {
    gs_geom geo = a.geom;
    gs_opts o = a.opts;
    GRID_LOOP(bp, a.n * a.np) {
        int64_t b = bp / a.np, p = bp % a.np;
        gs_taps t;
        point_taps(grid, &geo, &o, bp, &t);
        for (int64_t ch = 0; ch < a.c; ch++) {
            const T *plane = x + (b * a.c + ch) * a.vol;
            double acc = 0;
            for (int k = 0; k < t.n; k++)
                if (t.at[k] >= 0) acc += t.w[k] * ld_f64(plane[t.at[k]]);
            y[(b * a.c + ch) * a.np + p] = st_f64<T>(acc);
        }
    }
}

// The grid's gradient, one thread per grid point: channels, then taps, as the reference.
template <typename T>
__global__ void grid_sample_dgrid_k(T *dgrid, const T *gy, const T *x, const T *grid, oar_cu_grid a) {
    gs_geom geo = a.geom;
    gs_opts o = a.opts;
    GRID_LOOP(bp, a.n * a.np) {
        int64_t b = bp / a.np, p = bp % a.np;
        gs_taps t;
        point_taps(grid, &geo, &o, bp, &t);
        double gc[3] = {0, 0, 0}; // d loss / d pixel coordinates
        for (int64_t ch = 0; ch < a.c; ch++) {
            double go = ld_f64(gy[(b * a.c + ch) * a.np + p]);
            const T *plane = x + (b * a.c + ch) * a.vol;
            for (int k = 0; k < t.n; k++) {
                if (t.at[k] < 0) continue;
                double v = ld_f64(plane[t.at[k]]);
                for (int d = 0; d < geo.dims; d++) gc[d] += t.dw[d][k] * v * go;
            }
        }
        for (int d = 0; d < geo.dims; d++) dgrid[bp * geo.dims + d] = st_f64<T>(gc[d] * t.dc[d]);
    }
}

// The input gradient's entries: `taps` per grid point, numbered in the reference's order (point,
// then tap); its gradient is gy[(b * c + ch) * np + p], so src = b * c * np + p, gstride np.
template <typename T> __global__ void grid_sample_entries_k(Entries e, const T *grid, oar_cu_grid a, int taps) {
    gs_geom geo = a.geom;
    gs_opts o = a.opts;
    uint64_t none = (uint64_t)(a.n * a.vol);
    GRID_LOOP(bp, a.n * a.np) {
        int64_t b = bp / a.np, p = bp % a.np;
        gs_taps t;
        point_taps(grid, &geo, &o, bp, &t);
        for (int k = 0; k < taps; k++) {
            int64_t i = bp * taps + k;
            bool in = k < t.n && t.at[k] >= 0;
            e.key[i] = in ? (uint64_t)(b * a.vol + t.at[k]) : none;
            e.seq[i] = i;
            e.w[i] = in ? t.w[k] : 0;
            e.div[i] = 1;
            e.src[i] = b * a.c * a.np + p;
        }
    }
}

template <typename T>
cudaError_t grid_sample_run(void *y, const void *x, const void *grid, const oar_cu_grid *g, cudaStream_t s) {
    int64_t points = g->n * g->np;
    if (points <= 0 || g->c <= 0) return cudaSuccess;
    grid_sample_k<T><<<blocks_for(points, kThreads), kThreads, 0, s>>>((T *)y, (const T *)x, (const T *)grid, *g);
    return cudaGetLastError();
}

template <typename T>
cudaError_t grid_sample_backward_run(void *dx, void *dgrid, const void *gy, const void *x, const void *grid,
                                     const oar_cu_grid *g, void *scratch, cudaStream_t s) {
    int taps = oar_cu_grid_taps(g);
    int64_t points = g->n * g->np, m = points * taps, total = g->n * g->c * g->vol;
    if (points > 0) {
        grid_sample_dgrid_k<T><<<blocks_for(points, kThreads), kThreads, 0, s>>>(
            (T *)dgrid, (const T *)gy, (const T *)x, (const T *)grid, *g);
        RETURN_IF_FAILED();
    }
    if (total <= 0) return cudaSuccess;
    if (m > 0 && !scratch) return cudaErrorInvalidValue;
    Entries e = entries_in(scratch, m);
    uint64_t none = (uint64_t)(g->n * g->vol);
    if (m > 0) {
        grid_sample_entries_k<T><<<blocks_for(points, kThreads), kThreads, 0, s>>>(e, (const T *)grid, *g, taps);
        RETURN_IF_FAILED();
    }
    return scatter_sorted<T>((T *)dx, (const T *)gy, e, m, none, g->c, g->vol, g->np, total, scratch, s);
}

// ---------------------------------------------------------------- roi_align

// One thread per output element (box, channel, bin): its samples in the reference's order.
template <typename T> __global__ void roi_align_k(T *y, const T *x, const oar_cu_roi_box *boxes, oar_cu_roi a) {
    GRID_LOOP(o, a.k * a.c * a.ph * a.pw) {
        int64_t px = o % a.pw, py = (o / a.pw) % a.ph, ch = (o / (a.pw * a.ph)) % a.c, k = o / (a.pw * a.ph * a.c);
        roi_geom r = boxes[k].r;
        double count = (double)(r.gh * r.gw > 0 ? r.gh * r.gw : 1);
        const T *plane = x + (r.batch * a.c + ch) * a.h * a.w;
        double acc = 0;
        for (int64_t iy = 0; iy < r.gh; iy++) {
            double sy = roi_sample_at(r.y0, r.bin_h, py, iy, r.gh);
            for (int64_t ix = 0; ix < r.gw; ix++) {
                double sx = roi_sample_at(r.x0, r.bin_w, px, ix, r.gw);
                int64_t at[4];
                double wt[4];
                roi_sample_taps(sy, sx, a.h, a.w, at, wt);
                if (at[0] < 0) continue;
                double v = 0;
                for (int t = 0; t < 4; t++) v += wt[t] * ld_f64(plane[at[t]]);
                acc += v / count;
            }
        }
        y[o] = st_f64<T>(acc);
    }
}

// The input gradient's entries: 4 per sample, samples numbered box by box, each box's by bin
// (row-major), then sample row, then column (the reference's order). Sample sg belongs to the
// last box whose first sample is <= sg (a box without samples shares its first with the next).
// Its gradient is gy[(k * c + ch) * ph * pw + bin] / count.
__global__ void roi_align_entries_k(Entries e, const oar_cu_roi_box *boxes, oar_cu_roi a) {
    uint64_t none = (uint64_t)(a.n * a.h * a.w);
    int64_t bins = a.ph * a.pw;
    GRID_LOOP(sg, a.samples) {
        int64_t lo = 0, hi = a.k; // the first box whose first sample is > sg
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (boxes[mid].first <= sg) lo = mid + 1;
            else hi = mid;
        }
        int64_t k = lo - 1; // >= 0: box 0's first sample is 0
        roi_geom r = boxes[k].r;
        int64_t local = sg - boxes[k].first;
        int64_t ix = local % r.gw, iy = (local / r.gw) % r.gh, bin = local / (r.gw * r.gh);
        int64_t px = bin % a.pw, py = bin / a.pw;
        double sy = roi_sample_at(r.y0, r.bin_h, py, iy, r.gh), sx = roi_sample_at(r.x0, r.bin_w, px, ix, r.gw);
        int64_t at[4];
        double wt[4];
        roi_sample_taps(sy, sx, a.h, a.w, at, wt);
        double count = (double)(r.gh * r.gw > 0 ? r.gh * r.gw : 1);
        for (int t = 0; t < 4; t++) {
            int64_t i = sg * 4 + t;
            bool in = at[0] >= 0;
            e.key[i] = in ? (uint64_t)(r.batch * a.h * a.w + at[t]) : none;
            e.seq[i] = i;
            e.w[i] = wt[t];
            e.div[i] = count;
            e.src[i] = k * a.c * bins + bin;
        }
    }
}

template <typename T>
cudaError_t roi_align_run(void *y, const void *x, const oar_cu_roi_box *boxes, const oar_cu_roi *g, cudaStream_t s) {
    int64_t n = g->k * g->c * g->ph * g->pw;
    if (n <= 0) return cudaSuccess;
    roi_align_k<T><<<blocks_for(n, kThreads), kThreads, 0, s>>>((T *)y, (const T *)x, boxes, *g);
    return cudaGetLastError();
}

template <typename T>
cudaError_t roi_align_backward_run(void *dx, const void *gy, const oar_cu_roi_box *boxes, const oar_cu_roi *g,
                                   void *scratch, cudaStream_t s) {
    int64_t total = g->n * g->c * g->h * g->w, m = 4 * g->samples;
    if (total <= 0) return cudaSuccess;
    if (m > 0 && !scratch) return cudaErrorInvalidValue;
    Entries e = entries_in(scratch, m);
    uint64_t none = (uint64_t)(g->n * g->h * g->w);
    if (m > 0) {
        roi_align_entries_k<<<blocks_for(g->samples, kThreads), kThreads, 0, s>>>(e, boxes, *g);
        RETURN_IF_FAILED();
    }
    return scatter_sorted<T>((T *)dx, (const T *)gy, e, m, none, g->c, g->h * g->w, g->ph * g->pw, total, scratch, s);
}

// ---------------------------------------------------------------- nms

// The sort key of a score: ascending keys are the reference's order (decreasing score, NaN
// last; -0 ties with 0, and ties keep the index order through the stable sort).
__device__ __forceinline__ uint64_t rank_key(double v) {
    if (v != v) return ~0ULL;
    v = v == 0 ? 0.0 : v;
    uint64_t b = (uint64_t)__double_as_longlong(v);
    uint64_t up = (b >> 63) ? ~b : (b | 0x8000000000000000ULL); // ascending with v
    return ~up;
}

template <typename S> __global__ void nms_keys_k(uint64_t *key, int64_t *idx, const S *scores, int64_t n) {
    GRID_LOOP(i, n) {
        key[i] = rank_key(ld_f64(scores[i]));
        idx[i] = i;
    }
}

// sb[r] = the box of rank r as (x1, y1, x2, y2, area) in double.
template <typename B> __global__ void nms_boxes_k(double *sb, const int64_t *sidx, const B *boxes, int64_t n) {
    GRID_LOOP(r, n) {
        int64_t i = sidx[r];
        for (int k = 0; k < 4; k++) sb[r * 5 + k] = ld_f64(boxes[i * 4 + k]);
        sb[r * 5 + 4] = nms_area(sb + r * 5);
    }
}

// mask[r * words + w] bit j: rank r would suppress the later rank w * 64 + j.
__global__ void nms_mask_k(uint64_t *mask, const double *sb, int64_t n, int64_t words, double thr) {
    GRID_LOOP(t, n * words) {
        int64_t r = t / words, w = t % words;
        uint64_t bits = 0;
        for (int j = 0; j < 64; j++) {
            int64_t q = w * 64 + j;
            if (q > r && q < n && nms_iou_above(sb + r * 5, sb + q * 5, thr)) bits |= 1ULL << j;
        }
        mask[t] = bits;
    }
}

// One block walks the ranks in order: a rank not yet marked is kept and marks its row's ranks.
// The marks (words of them) are in shared memory; every thread reads the same mark, so all take
// the same branch and count the same kept boxes.
__global__ void nms_walk_k(int64_t *keep, int64_t *count, const int64_t *sidx, const uint64_t *mask, int64_t n,
                           int64_t words) {
    extern __shared__ unsigned long long gone[];
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) gone[w] = 0;
    __syncthreads();
    int64_t kept = 0;
    for (int64_t r = 0; r < n; r++) {
        bool marked = (gone[r >> 6] >> (r & 63)) & 1ULL;
        __syncthreads(); // every thread has read the mark before this round writes
        if (!marked) {
            if (threadIdx.x == 0) keep[kept] = sidx[r];
            kept++;
            const uint64_t *row = mask + r * words;
            for (int64_t w = (r >> 6) + threadIdx.x; w < words; w += blockDim.x) gone[w] |= row[w];
        }
        __syncthreads();
    }
    for (int64_t i = kept + threadIdx.x; i < n; i += blockDim.x) keep[i] = -1;
    if (threadIdx.x == 0) *count = kept;
}

struct NmsScratch {
    uint64_t *key, *skey, *mask;
    int64_t *idx, *sidx;
    double *sb;
    void *cub;
};

int64_t nms_words(int64_t n) { return (n + 63) / 64; }

size_t nms_sort_bytes(int64_t n) {
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint64_t *)nullptr, (uint64_t *)nullptr,
                                    (const int64_t *)nullptr, (int64_t *)nullptr, (int)n, 0, 64);
    return bytes;
}

// keys and indices twice (4n), the boxes (5n), the mask (n * words) in 8-byte words, then CUB's.
size_t nms_fixed_bytes(int64_t n) { return 8 * ((size_t)n * 9 + (size_t)n * (size_t)nms_words(n)); }

NmsScratch nms_scratch_in(void *scratch, int64_t n) {
    char *p = (char *)scratch;
    size_t a = 8 * (size_t)n;
    NmsScratch k;
    k.key = (uint64_t *)p;
    k.skey = (uint64_t *)(p + a);
    k.idx = (int64_t *)(p + 2 * a);
    k.sidx = (int64_t *)(p + 3 * a);
    k.sb = (double *)(p + 4 * a);
    k.mask = (uint64_t *)(p + 9 * a);
    k.cub = (void *)(((uintptr_t)p + nms_fixed_bytes(n) + 255) & ~(uintptr_t)255);
    return k;
}

template <typename S> cudaError_t nms_keys(NmsScratch k, const void *scores, int64_t n, cudaStream_t s) {
    nms_keys_k<S><<<blocks_for(n, kThreads), kThreads, 0, s>>>(k.key, k.idx, (const S *)scores, n);
    return cudaGetLastError();
}

template <typename B> cudaError_t nms_boxes(NmsScratch k, const void *boxes, int64_t n, cudaStream_t s) {
    nms_boxes_k<B><<<blocks_for(n, kThreads), kThreads, 0, s>>>(k.sb, k.sidx, (const B *)boxes, n);
    return cudaGetLastError();
}

int nms_keys_by(int dtype, NmsScratch k, const void *scores, int64_t n, cudaStream_t s) {
    BY_FLOAT(dtype, nms_keys, k, scores, n, s);
}

int nms_boxes_by(int dtype, NmsScratch k, const void *boxes, int64_t n, cudaStream_t s) {
    BY_FLOAT(dtype, nms_boxes, k, boxes, n, s);
}

} // namespace

// ---------------------------------------------------------------- launchers

extern "C" int oar_cu_grid_taps(const oar_cu_grid *g) {
    return g->opts.mode == GS_NEAREST ? 1 : g->opts.mode == GS_BICUBIC ? 16 : 1 << g->geom.dims;
}

extern "C" int oar_cu_grid_sample(void *y, const void *x, const void *grid, int dtype, const oar_cu_grid *g,
                                  void *stream) {
    BY_FLOAT(dtype, grid_sample_run, y, x, grid, g, (cudaStream_t)stream);
}

extern "C" size_t oar_cu_grid_sample_backward_scratch(const oar_cu_grid *g) {
    int64_t m = g->n * g->np * oar_cu_grid_taps(g);
    if (g->n * g->c * g->vol <= 0 || m > OAR_CU_VISION_MAX_ENTRIES) return 0;
    return scatter_bytes(m, (uint64_t)(g->n * g->vol));
}

extern "C" int oar_cu_grid_sample_backward(void *dx, void *dgrid, const void *gy, const void *x, const void *grid,
                                           int dtype, const oar_cu_grid *g, void *scratch, void *stream) {
    if (g->n * g->np * oar_cu_grid_taps(g) > OAR_CU_VISION_MAX_ENTRIES) return (int)cudaErrorInvalidValue;
    BY_FLOAT(dtype, grid_sample_backward_run, dx, dgrid, gy, x, grid, g, scratch, (cudaStream_t)stream);
}

extern "C" int oar_cu_roi_align(void *y, const void *x, int dtype, const oar_cu_roi_box *boxes, const oar_cu_roi *g,
                                void *stream) {
    BY_FLOAT(dtype, roi_align_run, y, x, boxes, g, (cudaStream_t)stream);
}

extern "C" size_t oar_cu_roi_align_backward_scratch(const oar_cu_roi *g) {
    if (g->n * g->c * g->h * g->w <= 0 || g->samples > OAR_CU_VISION_MAX_ENTRIES / 4) return 0;
    return scatter_bytes(4 * g->samples, (uint64_t)(g->n * g->h * g->w));
}

extern "C" int oar_cu_roi_align_backward(void *dx, const void *gy, int dtype, const oar_cu_roi_box *boxes,
                                         const oar_cu_roi *g, void *scratch, void *stream) {
    if (g->samples > OAR_CU_VISION_MAX_ENTRIES / 4) return (int)cudaErrorInvalidValue;
    BY_FLOAT(dtype, roi_align_backward_run, dx, gy, boxes, g, scratch, (cudaStream_t)stream);
}

extern "C" size_t oar_cu_nms_scratch(int64_t n) {
    if (n <= 0 || n > OAR_CU_NMS_MAX_BOXES) return 0;
    return nms_fixed_bytes(n) + 256 + nms_sort_bytes(n);
}

extern "C" int oar_cu_nms(int64_t *keep, int64_t *count, const void *boxes, int box_dtype, const void *scores,
                          int score_dtype, int64_t n, double iou_threshold, void *scratch, void *stream) {
    cudaStream_t s = (cudaStream_t)stream;
    if (n <= 0) return (int)cudaMemsetAsync(count, 0, sizeof(int64_t), s);
    if (n > OAR_CU_NMS_MAX_BOXES || !scratch) return (int)cudaErrorInvalidValue;
    NmsScratch k = nms_scratch_in(scratch, n);
    int64_t words = nms_words(n);
    int e = nms_keys_by(score_dtype, k, scores, n, s);
    if (e != 0) return e;
    size_t bytes = nms_sort_bytes(n);
    cudaError_t err = cub::DeviceRadixSort::SortPairs(k.cub, bytes, k.key, k.skey, k.idx, k.sidx, (int)n, 0, 64, s);
    if (err != cudaSuccess) return (int)err;
    e = nms_boxes_by(box_dtype, k, boxes, n, s);
    if (e != 0) return e;
    nms_mask_k<<<blocks_for(n * words, kThreads), kThreads, 0, s>>>(k.mask, k.sb, n, words, iou_threshold);
    err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
    nms_walk_k<<<1, kThreads, (size_t)words * sizeof(unsigned long long), s>>>(keep, count, k.sidx, k.mask, n, words);
    return (int)cudaGetLastError();
}
