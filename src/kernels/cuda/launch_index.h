/* Launchers of index.cu: selection by index tensors (index_select, gather, scatter_add,
 * embedding and their backwards), masks and positions (masked_fill, tril/triu, pad and its
 * backward, one_hot) and topk. Plain C; dtypes are oar_dtype values; strides are in elements;
 * each returns a cudaError_t as int. Sums that several sources feed (the backwards,
 * scatter_add) run one thread per output column adding in index order: deterministic, no
 * atomics, the CPU reference's order.
 *
 * Index checks: kernels never touch memory at a bad index; they record it in err (two
 * unsigned long longs on the device, zeroed by the caller: err[0] = 1 when an index was out of
 * range, err[1] = that index) and skip it. */
#ifndef OAR_CUDA_LAUNCH_INDEX_H
#define OAR_CUDA_LAUNCH_INDEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OAR_CU_IDX_DIMS 8

/* y[o, j, i] = x[o, idx[j], i] for x [outer, size, inner] and y [outer, m, inner] (both
 * contiguous); idx has m entries of dtype idx_dtype (any integer type); esize is the element
 * size in bytes (1, 2, 4 or 8). index_select and embedding. */
int oar_cu_index_select(void *y, const void *x, int esize, const void *idx, int idx_dtype, int64_t outer,
                        int64_t size, int64_t inner, int64_t m, unsigned long long *err, void *stream);

/* y [outer, size, inner] = 0, then y[o, idx[j], i] += g[o, j, i] for j in order (g [outer, m,
 * inner]). dtype: a float type or an integer type (wrapping). index_select_backward. */
int oar_cu_index_add(void *y, const void *g, int dtype, const void *idx, int idx_dtype, int64_t outer,
                     int64_t size, int64_t inner, int64_t m, unsigned long long *err, void *stream);

/* embedding_backward: y [num, dim] = for each row, the sum in double, in index order, of g's
 * rows [n, dim] whose index names it, rounded once to dtype (a float type, half types through
 * float); rows no index names are 0. Deterministic: a stable sort of the indices, then one warp
 * per row. scratch: oar_cu_embedding_backward_scratch(n, num) bytes (n, num < 2^31 - 1). */
size_t oar_cu_embedding_backward_scratch(int64_t n, int64_t num);
int oar_cu_embedding_backward(void *y, const void *g, int dtype, const void *idx, int idx_dtype, int64_t n,
                              int64_t num, int64_t dim, void *scratch, unsigned long long *err, void *stream);

/* Gather / scatter geometry: the index tensor (contiguous) has shape ishape (ndim dims, a 0-d
 * index as [1]); the target's element strides along each dim, and its size along dim d. */
typedef struct oar_cu_gather_geo {
    int ndim, d;
    int64_t ishape[OAR_CU_IDX_DIMS];
    int64_t xstride[OAR_CU_IDX_DIMS]; /* the indexed tensor (x for gather, y for scatter) */
    int64_t sstride[OAR_CU_IDX_DIMS]; /* scatter: src's strides */
    int64_t xsize_d;
} oar_cu_gather_geo;

/* y (index's shape, contiguous) = x[p with p[d] = idx[p]]. idx: i64 or i32. */
int oar_cu_gather(void *y, const void *x, int esize, const void *idx, int idx_dtype, const oar_cu_gather_geo *g,
                  unsigned long long *err, void *stream);
/* y (already holding its initial values) [p with p[d] = idx[p]] += src[p], for each column of
 * the index (every position but along d) in index order. dtype: f32, f64, integers, bool (or). */
int oar_cu_scatter_add(void *y, const void *src, int dtype, const void *idx, int idx_dtype,
                       const oar_cu_gather_geo *g, unsigned long long *err, void *stream);

/* Strided elementwise geometry: the output's shape (contiguous output) and up to two inputs'
 * element strides (0 on broadcast dims). */
typedef struct oar_cu_ew {
    int ndim;
    int64_t shape[OAR_CU_IDX_DIMS];
    int64_t a_stride[OAR_CU_IDX_DIMS], b_stride[OAR_CU_IDX_DIMS];
} oar_cu_ew;

/* y = mask ? fill : x; fill holds the fill value's bytes in the element type. */
int oar_cu_masked_fill(void *y, const void *x, const void *mask, int esize, uint64_t fill, const oar_cu_ew *l,
                       int64_t n, void *stream);
/* tril (lower != 0) / triu on the last two dims: y = x where (j - i <= / >= diagonal), else 0. */
int oar_cu_tri(void *y, const void *x, int esize, int lower, int64_t diagonal, const oar_cu_ew *l, int64_t n,
               void *stream);

/* pad: y (contiguous, shape l->shape) reads x at each dim's source coordinate (a_stride:
 * x's strides; xshape: x's shape; before: the leading pad per dim), or fill. mode as oar_pad_mode. */
int oar_cu_pad(void *y, const void *x, int esize, uint64_t fill, int mode, const oar_cu_ew *l,
               const int64_t *xshape, const int64_t *before, int64_t n, void *stream);
/* pad_backward: y (contiguous, shape yshape) = sum of g (contiguous, shape gshape) over the
 * padded positions that read each element, in g's row-major order. dtype: floats, integers. */
int oar_cu_pad_backward(void *y, const void *g, int dtype, int mode, int ndim, const int64_t *yshape,
                        const int64_t *gshape, const int64_t *before, int64_t n, void *stream);

/* one_hot: y i64 [n, classes] = (idx[i] == c). Values < 0 or >= classes are recorded in err. */
int oar_cu_one_hot(int64_t *y, const void *idx, int idx_dtype, int64_t n, int64_t classes,
                   unsigned long long *err, void *stream);

/* Only checks that n indices lie in [0, limit) (for outputs with no elements to write). */
int oar_cu_check_indices(const void *idx, int idx_dtype, int64_t n, int64_t limit, unsigned long long *err,
                         void *stream);

/* topk along the middle dim of x [outer, n, inner] (contiguous): values and i64 indices
 * [outer, k, inner]. NaN ranks above every number; ties keep the lower index first (the
 * reference's stable sort). sorted = 0: the chosen elements in input order. Rows along the
 * last dim (inner 1) with k <= OAR_CU_TOPK_SELECT_K take k selection rounds per row (O(k n));
 * others rank every element against its row (O(n^2)). rank: scratch of outer * n * inner
 * int64 for sorted = 0 on the ranking path (may be NULL otherwise). */
#define OAR_CU_TOPK_SELECT_K 64
int oar_cu_topk(void *values, int64_t *indices, const void *x, int dtype, int64_t outer, int64_t n,
                int64_t inner, int64_t k, int largest, int sorted, int64_t *rank, void *stream);

#ifdef __cplusplus
}
#endif
#endif
