/* CUDA kernels of the index family (index.cu): index_select and its backward, gather,
 * scatter_add, masked_fill, tril/triu, concat, stack, flip, pad and its backward,
 * slice_backward, one_hot, embedding and its backward, topk with topk_backward and
 * topk_gather. split and chunk are views (no kernel). Strided inputs are read through their
 * strides where the kernel walks them (masked_fill, tril/triu, pad, flip, concat, stack) and
 * copied contiguous otherwise. A bad index is an error naming it, as on the CPU (the kernels
 * skip it; the check waits for the kernel). */
#include "cuda_glue.h"
#include "launch_index.h"

#include <string.h>

#define SUMS (OAR_FLOAT_DTYPES | OAR_INT_DTYPES)

static int esize_of(const oar_tensor *t) { return (int)oar_dtypes[t->dtype].size; }

/* outer, size and inner of shape around dim d. */
static void split_dims(const int64_t *shape, int nd, int d, int64_t *outer, int64_t *size, int64_t *inner) {
    *outer = *inner = 1;
    *size = nd ? shape[d] : 1;
    for (int k = 0; k < nd; k++) {
        if (k < d) *outer *= shape[k];
        if (k > d) *inner *= shape[k];
    }
}

/* Contiguous element strides of shape (ndim dims, a 0-d shape as [1]). */
static void contig_strides(const oar_tensor *t, int nd, int64_t *st) {
    int64_t s = 1;
    for (int k = nd - 1; k >= 0; k--) {
        st[k] = s;
        s *= oar_cu_size_at(t, k);
    }
}

/* Finishes a launch that checked indices: the launch status, then the flag. */
static oar_status finish_checked(int e, unsigned long long *err, cudaStream_t s, const char *op, bool *bad,
                                 int64_t *v) {
    oar_status st = oar_cuda_status((cudaError_t)e, op);
    if (st != OAR_OK) {
        oar_cuda_scratch_free(err, 2 * sizeof(unsigned long long));
        return st;
    }
    return oar_cu_err_end(err, s, op, bad, v);
}

/* ================================================================ index_select */

static oar_status index_select_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *x = oar_cu_contig(in[0], &tmp), *idx = oar_cu_contig(in[1], &tmp);
    if (!x || !idx) {
        oar_cu_temps_free(&tmp);
        return oar_last_status();
    }
    int d = oar_dim_index(a[0].i, x->ndim);
    int64_t outer, size, inner;
    split_dims(x->shape, x->ndim, d, &outer, &size, &inner);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, "index_select", &st);
    if (!err) {
        oar_cu_temps_free(&tmp);
        return st;
    }
    int e = oar_cu_index_select(oar_tensor_ptr(y), oar_tensor_ptr(x), esize_of(x), oar_tensor_ptr(idx), idx->dtype,
                                outer, size, inner, idx->numel, err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, "index_select", &bad, &v);
    oar_cu_temps_free(&tmp);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "index_select: expected indices in [0, %lld) for dim %d of size %lld, "
                                            "got %lld", (long long)size, d, (long long)size, (long long)v);
    return st;
}

static oar_status index_select_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                             oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *g = oar_cu_contig(in[0], &tmp), *idx = oar_cu_contig(in[1], &tmp);
    if (!g || !idx) {
        oar_cu_temps_free(&tmp);
        return oar_last_status();
    }
    int d = oar_dim_index(a[1].i, y->ndim);
    int64_t outer, size, inner;
    split_dims(y->shape, y->ndim, d, &outer, &size, &inner);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, "index_select_backward", &st);
    if (!err) {
        oar_cu_temps_free(&tmp);
        return st;
    }
    int e = oar_cu_index_add(oar_tensor_ptr(y), g->numel ? oar_tensor_ptr(g) : NULL, y->dtype,
                             idx->numel ? oar_tensor_ptr(idx) : NULL, idx->dtype, outer, size, inner,
                             g->numel ? idx->numel : 0, err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, "index_select_backward", &bad, &v);
    oar_cu_temps_free(&tmp);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "index_select_backward: expected indices in [0, %lld) for dim %d of size "
                                            "%lld, got %lld", (long long)size, d, (long long)size, (long long)v);
    return st;
}

/* ================================================================ gather, scatter_add, topk pair */

/* Geometry of a gather/scatter of idx along d into target (contiguous), with src's strides. */
static void gather_geo(const oar_tensor *target, const oar_tensor *idx, const oar_tensor *src, int d,
                       oar_cu_gather_geo *g) {
    memset(g, 0, sizeof *g);
    int nd = target->ndim ? target->ndim : 1;
    g->ndim = nd;
    g->d = d;
    for (int k = 0; k < nd; k++) g->ishape[k] = oar_cu_size_at(idx, k);
    contig_strides(target, nd, g->xstride);
    if (src) contig_strides(src, nd, g->sstride);
    g->xsize_d = oar_cu_size_at(target, d);
}

/* y = x gathered at idx along dim (gather, topk_gather); name and the index range go into the error. */
static oar_status gather_run(const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *y, int64_t dim,
                             const char *op) {
    if (y->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *x = oar_cu_contig(in[0], &tmp), *idx = oar_cu_contig(in[1], &tmp);
    if (!x || !idx) {
        oar_cu_temps_free(&tmp);
        return oar_last_status();
    }
    int d = oar_dim_index(dim, x->ndim);
    oar_cu_gather_geo geo;
    gather_geo(x, idx, NULL, d, &geo);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, op, &st);
    if (!err) {
        oar_cu_temps_free(&tmp);
        return st;
    }
    int e = oar_cu_gather(oar_tensor_ptr(y), oar_tensor_ptr(x), esize_of(x), oar_tensor_ptr(idx), idx->dtype, &geo,
                          err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, op, &bad, &v);
    oar_cu_temps_free(&tmp);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "%s: expected indices in [0, %lld) for dim %d of size %lld, got %lld", op,
                       (long long)geo.xsize_d, d, (long long)geo.xsize_d, (long long)v);
    return st;
}

static oar_status gather_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return gather_run(ctx, in, out[0], a[0].i, "gather");
}

static oar_status topk_gather_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return gather_run(ctx, in, out[0], a[0].i, "topk_gather");
}

/* y (holding its initial values) += src scattered at idx along dim. */
static oar_status scatter_run(const oar_kctx *ctx, oar_tensor *y, oar_tensor *idx_in, oar_tensor *src_in,
                              int64_t dim, const char *op) {
    if (y->numel == 0 || idx_in->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *idx = oar_cu_contig(idx_in, &tmp), *src = oar_cu_contig(src_in, &tmp);
    if (!idx || !src) {
        oar_cu_temps_free(&tmp);
        return oar_last_status();
    }
    int d = oar_dim_index(dim, y->ndim);
    oar_cu_gather_geo geo;
    gather_geo(y, idx, src, d, &geo);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, op, &st);
    if (!err) {
        oar_cu_temps_free(&tmp);
        return st;
    }
    int e = oar_cu_scatter_add(oar_tensor_ptr(y), oar_tensor_ptr(src), y->dtype, oar_tensor_ptr(idx), idx->dtype,
                               &geo, err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, op, &bad, &v);
    oar_cu_temps_free(&tmp);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "%s: expected indices in [0, %lld) for dim %d of size %lld, got %lld", op,
                       (long long)geo.xsize_d, d, (long long)geo.xsize_d, (long long)v);
    return st;
}

static oar_status scatter_add_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    oar_status st = oar_tensor_copy_strided(y, in[0]);
    if (st != OAR_OK) return st;
    return scatter_run(ctx, y, in[1], in[2], a[0].i, "scatter_add");
}

static oar_status topk_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_status st = oar_cuda_status(
        cudaMemsetAsync(oar_tensor_ptr(y), 0, (size_t)y->numel * oar_dtypes[y->dtype].size, oar_cuda_stream_of(ctx)),
        "topk_backward");
    if (st != OAR_OK) return st;
    return scatter_run(ctx, y, in[1], in[0], a[1].i, "topk_backward");
}

/* ================================================================ masked_fill, tril, triu */

/* Strides of t broadcast to shape (aligned at the last dim; 0 on broadcast dims). */
static void broadcast_strides(const oar_tensor *t, int nd, int64_t *st) {
    int lead = nd - t->ndim;
    for (int k = 0; k < nd; k++) {
        int tk = k - lead;
        st[k] = tk < 0 || t->shape[tk] == 1 ? 0 : t->strides[tk];
    }
}

static oar_status masked_fill_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    if (y->ndim > OAR_CU_IDX_DIMS)
        return oar_error(OAR_ERR_UNSUPPORTED, "masked_fill: expected at most %d dims on the GPU, got %d",
                         OAR_CU_IDX_DIMS, y->ndim);
    oar_cu_ew l;
    memset(&l, 0, sizeof l);
    l.ndim = y->ndim;
    memcpy(l.shape, y->shape, sizeof(int64_t) * (size_t)y->ndim);
    broadcast_strides(in[0], y->ndim, l.a_stride);
    broadcast_strides(in[1], y->ndim, l.b_stride);
    int e = oar_cu_masked_fill(oar_tensor_ptr(y), oar_tensor_ptr(in[0]), oar_tensor_ptr(in[1]), esize_of(y),
                               oar_cu_fill_bits(y->dtype, a[0].f), &l, y->numel, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "masked_fill");
}

static oar_status tri_cuda(const oar_kctx *ctx, oar_tensor *x, oar_tensor *y, bool lower, int64_t diagonal,
                           const char *op) {
    if (y->numel == 0) return OAR_OK;
    oar_cu_ew l;
    memset(&l, 0, sizeof l);
    l.ndim = y->ndim;
    memcpy(l.shape, y->shape, sizeof(int64_t) * (size_t)y->ndim);
    memcpy(l.a_stride, x->strides, sizeof(int64_t) * (size_t)y->ndim);
    int e = oar_cu_tri(oar_tensor_ptr(y), oar_tensor_ptr(x), esize_of(y), lower, diagonal, &l, y->numel,
                       oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, op);
}

static oar_status tril_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)n_in; (void)n_out;
    return tri_cuda(ctx, in[0], out[0], true, a[0].i, "tril");
}

static oar_status triu_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)n_in; (void)n_out;
    return tri_cuda(ctx, in[0], out[0], false, a[0].i, "triu");
}

/* ================================================================ pad, pad_backward */

static void pad_before(const oar_attr *pads, int nd, int64_t *before) {
    for (int d = 0; d < nd; d++) before[d] = 0;
    for (int k = 0; k < pads->n / 2; k++) before[nd - 1 - k] = pads->ints[2 * k];
}

static oar_status pad_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int64_t before[OAR_MAX_DIMS];
    pad_before(&a[0], y->ndim, before);
    oar_cu_ew l;
    memset(&l, 0, sizeof l);
    l.ndim = y->ndim;
    memcpy(l.shape, y->shape, sizeof(int64_t) * (size_t)y->ndim);
    memcpy(l.a_stride, x->strides, sizeof(int64_t) * (size_t)y->ndim);
    /* an empty input (constant mode) is never read */
    const void *xp = x->numel ? oar_tensor_ptr(x) : NULL;
    int e = oar_cu_pad(oar_tensor_ptr(y), xp, esize_of(y), oar_cu_fill_bits(y->dtype, a[2].f), (int)a[1].i, &l,
                       x->shape, before, y->numel, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "pad");
}

static oar_status pad_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    if (in[0]->numel == 0)
        return oar_cuda_status(cudaMemsetAsync(oar_tensor_ptr(y), 0, (size_t)y->numel * oar_dtypes[y->dtype].size, s),
                               "pad_backward");
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *g = oar_cu_contig(in[0], &tmp);
    if (!g) return oar_last_status();
    int64_t before[OAR_MAX_DIMS];
    pad_before(&a[1], y->ndim, before);
    int e = oar_cu_pad_backward(oar_tensor_ptr(y), oar_tensor_ptr(g), y->dtype, (int)a[2].i, y->ndim, y->shape,
                                g->shape, before, y->numel, s);
    oar_cu_temps_free(&tmp);
    return oar_cuda_status((cudaError_t)e, "pad_backward");
}

/* ================================================================ one_hot, embedding */

static oar_status one_hot_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    const oar_tensor *idx = in[0];
    oar_tensor *y = out[0];
    int64_t classes = y->shape[y->ndim - 1];
    if (idx->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, "one_hot", &st);
    if (!err) return st;
    int e = oar_cu_one_hot(y->numel ? (int64_t *)oar_tensor_ptr(y) : NULL, oar_tensor_ptr(idx), idx->dtype,
                           idx->numel, classes, err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, "one_hot", &bad, &v);
    if (st != OAR_OK || !bad) return st;
    if (v < 0) return oar_error(OAR_ERR_INVALID_ARG, "one_hot: expected class values >= 0, got %lld", (long long)v);
    return oar_error(OAR_ERR_INVALID_ARG, "one_hot: class value %lld is out of range; expected values in [0, %lld) "
                                          "for num_classes = %lld", (long long)v, (long long)classes,
                     (long long)classes);
}

static oar_status embedding_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    const oar_tensor *w = in[0], *idx = in[1];
    oar_tensor *y = out[0];
    int64_t num = w->shape[0];
    if (idx->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, "embedding", &st);
    if (!err) return st;
    int e = y->numel ? oar_cu_index_select(oar_tensor_ptr(y), oar_tensor_ptr(w), esize_of(w), oar_tensor_ptr(idx),
                                           idx->dtype, 1, num, w->shape[1], idx->numel, err, s)
                     : oar_cu_check_indices(oar_tensor_ptr(idx), idx->dtype, idx->numel, num, err, s);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, "embedding", &bad, &v);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "embedding: index %lld is out of range; expected indices in [0, %lld) "
                                            "for a weight with %lld rows", (long long)v, (long long)num,
                       (long long)num);
    return st;
}

static oar_status embedding_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *idx = in[1];
    oar_tensor *y = out[0];
    int64_t num = a[0].i, dim = y->shape[1];
    if (y->numel == 0 && idx->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    if (idx->numel > 0x7ffffffeLL || num > 0x7ffffffeLL)
        return oar_error(OAR_ERR_UNSUPPORTED, "embedding_backward: the GPU kernel takes fewer than 2^31 - 1 indices "
                         "and rows, got %lld indices and %lld rows; run it on the CPU", (long long)idx->numel,
                         (long long)num);
    size_t scratch_bytes = y->numel ? oar_cu_embedding_backward_scratch(idx->numel, num) : 0;
    void *scratch = NULL;
    if (scratch_bytes && !(scratch = oar_cuda_scratch(scratch_bytes)))
        return oar_error(OAR_ERR_OOM, "embedding_backward: out of GPU memory for the sort (%zu bytes)", scratch_bytes);
    oar_status st;
    unsigned long long *err = oar_cu_err_begin(s, "embedding_backward", &st);
    if (!err) {
        if (scratch) oar_cuda_scratch_free(scratch, scratch_bytes);
        return st;
    }
    int e = 0;
    if (y->numel)
        e = oar_cu_embedding_backward(oar_tensor_ptr(y), g->numel ? oar_tensor_ptr(g) : NULL, y->dtype,
                                      idx->numel ? oar_tensor_ptr(idx) : NULL, idx->dtype, idx->numel, num, dim,
                                      scratch, err, s);
    else /* nothing to sum into: the indices are still checked */
        e = oar_cu_check_indices(idx->numel ? oar_tensor_ptr(idx) : NULL, idx->dtype, idx->numel, num, err, s);
    if (scratch) oar_cuda_scratch_free(scratch, scratch_bytes);
    bool bad;
    int64_t v;
    st = finish_checked(e, err, s, "embedding_backward", &bad, &v);
    if (st == OAR_OK && bad)
        st = oar_error(OAR_ERR_INVALID_ARG, "embedding_backward: index %lld is out of range; expected indices in "
                                            "[0, %lld) for a weight with %lld rows", (long long)v, (long long)num,
                       (long long)num);
    return st;
}

/* ================================================================ topk */

static oar_status topk_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                            const oar_attr *a) {
    (void)n_in; (void)n_out;
    int64_t k = a[0].i;
    if (out[0]->numel == 0 || k == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *x = oar_cu_contig(in[0], &tmp);
    if (!x) return oar_last_status();
    int d = oar_dim_index(a[1].i, x->ndim);
    int64_t outer, n, inner;
    split_dims(x->shape, x->ndim, d, &outer, &n, &inner);
    bool sorted = a[3].i != 0, selects = inner == 1 && k <= OAR_CU_TOPK_SELECT_K && outer <= 0x7fffffffLL;
    size_t rank_bytes = sorted || selects ? 0 : sizeof(int64_t) * (size_t)x->numel;
    int64_t *rank = NULL;
    if (rank_bytes && !(rank = oar_cuda_scratch(rank_bytes))) {
        oar_cu_temps_free(&tmp);
        return oar_error(OAR_ERR_OOM, "topk: out of GPU memory for the ranks (%zu bytes)", rank_bytes);
    }
    int e = oar_cu_topk(oar_tensor_ptr(out[0]), (int64_t *)oar_tensor_ptr(out[1]), oar_tensor_ptr(x), x->dtype, outer,
                        n, inner, k, a[2].i != 0, sorted, rank, s);
    if (rank) oar_cuda_scratch_free(rank, rank_bytes);
    oar_cu_temps_free(&tmp);
    return oar_cuda_status((cudaError_t)e, "topk");
}

/* ================================================================ registration */

/* Index inputs the kernels read: i64 and i32 (index_select, gather, scatter_add) or any
 * integer type (embedding, one_hot); topk_backward/topk_gather take i64 only (their infer
 * checks it). */
static bool idx_i64_i32(const oar_tensor *t) { return t->dtype == OAR_I64 || t->dtype == OAR_I32; }

static bool index_select_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                  const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    return idx_i64_i32(in[1]);
}

static bool gather_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    return idx_i64_i32(in[1]) && (in[0]->ndim ? in[0]->ndim : 1) <= OAR_CU_IDX_DIMS;
}

void oar_cuda_register_index(void) {
    const uint32_t all = OAR_BASE_DTYPES, no_bool = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL);
    oar_cuda_register(OAR_OP_index_select, all, index_select_cuda, index_select_supports);
    oar_cuda_register(OAR_OP_index_select_backward, SUMS, index_select_backward_cuda, index_select_supports);
    oar_cuda_register(OAR_OP_gather, all, gather_cuda, gather_supports);
    oar_cuda_register(OAR_OP_scatter_add, SUMS | OAR_DTYPE_BIT(OAR_BOOL), scatter_add_cuda, gather_supports);
    oar_cuda_register(OAR_OP_masked_fill, all, masked_fill_cuda, NULL);
    oar_cuda_register(OAR_OP_tril, all, tril_cuda, NULL);
    oar_cuda_register(OAR_OP_triu, all, triu_cuda, NULL);
    /* layout copies: their reference kernels copy through the device table (copy.cu) */
    oar_cuda_register(OAR_OP_concat, all, oar_op_table[OAR_OP_concat]->reference, NULL);
    oar_cuda_register(OAR_OP_stack, all, oar_op_table[OAR_OP_stack]->reference, NULL);
    oar_cuda_register(OAR_OP_flip, all, oar_op_table[OAR_OP_flip]->reference, NULL);
    oar_cuda_register(OAR_OP_slice_backward, all, oar_op_table[OAR_OP_slice_backward]->reference, NULL);
    oar_cuda_register(OAR_OP_pad, all, pad_cuda, NULL);
    oar_cuda_register(OAR_OP_pad_backward, SUMS, pad_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_one_hot, OAR_INT_DTYPES, one_hot_cuda, NULL);
    oar_cuda_register(OAR_OP_embedding, all, embedding_cuda, NULL);
    oar_cuda_register(OAR_OP_embedding_backward, OAR_FLOAT_DTYPES, embedding_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_topk, no_bool, topk_cuda, NULL);
    oar_cuda_register(OAR_OP_topk_backward, OAR_FLOAT_DTYPES, topk_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_topk_gather, all, topk_gather_cuda, gather_supports);
}
