/* CPU fast shape and indexing kernels for any dtype: concat, stack and index_select on
 * contiguous inputs move whole rows with memcpy instead of element by element, split into
 * blocks over the thread pool when the copy is large. The reference kernels stay the oracle. */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define BLOCK_BYTES ((int64_t)64 * 1024) /* one task's share of a large copy */

static bool all_contiguous(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *attrs) {
    (void)out; (void)n_out; (void)attrs;
    for (int i = 0; i < n_in; i++)
        if (!in[i] || !in[i]->contiguous) return false;
    return true;
}

/* Runs fn over [0, n) on the pool, in chunks of at least grain items, or serially when the
 * context allows one thread. */
static void run(const oar_kctx *ctx, int64_t n, int64_t grain, oar_range_fn fn, void *job) {
    if (ctx->nthreads > 1) oar_parallel_for(n, grain < 1 ? 1 : grain, fn, job);
    else fn(job, 0, n);
}

/* ---- concat and stack: the output is `outer` rows, each the inputs' rows side by side (an
 * input's row is its numel / outer elements; skipped empty inputs have rows of 0 bytes). */
typedef struct join_job {
    char *dst;
    const char *src[OAR_MAX_INPUTS];
    int64_t row[OAR_MAX_INPUTS]; /* bytes */
    int n;
    int64_t out_row, total;      /* bytes */
} join_job;

/* Copies output blocks [b, e): from the first byte, find the row and the input it
 * falls in, then copy input segments in order until the block ends. */
static void join_blocks(void *ctx, int64_t b, int64_t e) {
    const join_job *j = ctx;
    int64_t pos = b * BLOCK_BYTES, end = e * BLOCK_BYTES < j->total ? e * BLOCK_BYTES : j->total;
    int64_t o = pos / j->out_row, in_off = pos % j->out_row;
    int i = 0;
    while (in_off >= j->row[i]) in_off -= j->row[i++];
    while (pos < end) {
        int64_t len = j->row[i] - in_off;
        if (len > end - pos) len = end - pos;
        memcpy(j->dst + pos, j->src[i] + o * j->row[i] + in_off, (size_t)len);
        pos += len;
        in_off += len;
        if (in_off == j->row[i] && pos < end) {
            in_off = 0;
            do {
                if (++i == j->n) {
                    i = 0;
                    o++;
                }
            } while (j->row[i] == 0);
        }
    }
}

static oar_status join_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int64_t es = (int64_t)oar_dtypes[y->dtype].size;
    int d = (int)(a[0].i < 0 ? a[0].i + y->ndim : a[0].i); /* validated by inference */
    int64_t outer = 1;
    for (int k = 0; k < d; k++) outer *= y->shape[k];
    join_job j = {.dst = oar_tensor_ptr(y), .n = n_in, .out_row = y->numel / outer * es, .total = y->numel * es};
    for (int i = 0; i < n_in; i++) {
        j.row[i] = in[i]->numel / outer * es;
        j.src[i] = in[i]->numel ? oar_tensor_ptr(in[i]) : NULL;
    }
    run(ctx, (j.total + BLOCK_BYTES - 1) / BLOCK_BYTES, 1, join_blocks, &j);
    return OAR_OK;
}

/* ---- index_select: output row (o, k) is input row (o, index[k]); a row is the contiguous
 * block after the selected dim. */
typedef struct take_job {
    char *dst;
    const char *src;
    const void *index;
    bool i32;
    int64_t n_index, size, row; /* row in bytes */
} take_job;

static int64_t index_at(const take_job *j, int64_t k) {
    return j->i32 ? ((const int32_t *)j->index)[k] : ((const int64_t *)j->index)[k];
}

static void take_rows(void *ctx, int64_t b, int64_t e) {
    const take_job *j = ctx;
    for (int64_t r = b; r < e; r++) {
        int64_t o = r / j->n_index, k = r % j->n_index;
        memcpy(j->dst + r * j->row, j->src + (o * j->size + index_at(j, k)) * j->row, (size_t)j->row);
    }
}

static oar_status take_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *idx = in[1];
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int nd = x->ndim ? x->ndim : 1;
    int d = (int)(a[0].i < 0 ? a[0].i + nd : a[0].i);
    take_job j = {.dst = oar_tensor_ptr(y), .src = oar_tensor_ptr(x), .index = oar_tensor_ptr(idx),
                  .i32 = idx->dtype == OAR_I32, .n_index = idx->numel, .size = d < x->ndim ? x->shape[d] : 1,
                  .row = (int64_t)oar_dtypes[x->dtype].size};
    int64_t outer = 1;
    for (int k = 0; k < d; k++) outer *= x->shape[k];
    for (int k = d + 1; k < x->ndim; k++) j.row *= x->shape[k];
    /* every index is checked before any is used */
    for (int64_t k = 0; k < j.n_index; k++) {
        int64_t v = index_at(&j, k);
        if (v < 0 || v >= j.size)
            return oar_error(OAR_ERR_INVALID_ARG, "index_select: expected indices in [0, %lld) for dim %d of size "
                                                  "%lld, got %lld", (long long)j.size, d, (long long)j.size,
                             (long long)v);
    }
    run(ctx, outer * j.n_index, BLOCK_BYTES / j.row, take_rows, &j);
    return OAR_OK;
}

void oar_cpu_register_index(void) {
    oar_kernel_entry join = {.device = OAR_CPU, .dtypes = OAR_BASE_DTYPES, .impl = "memcpy", .priority = 10,
                             .fn = join_kernel, .supports = all_contiguous};
    oar_register_kernel(OAR_OP_concat, join);
    oar_register_kernel(OAR_OP_stack, join);
    oar_kernel_entry take = join;
    take.fn = take_kernel;
    oar_register_kernel(OAR_OP_index_select, take);
}
