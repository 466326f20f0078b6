/* CPU fast kernel for embedding_backward (f32 and f64 gradients): the reference's sums, in
 * double and in index order, with direct loads instead of a dtype call per element, split over
 * column ranges on the thread pool. Every output element still adds the same values in the
 * same order as the reference, so results are bitwise equal to it at any thread count. */
#include "kernels/cpu/cpu_kernels.h"

#include <stdlib.h>

#define COL_GRAIN 64 /* columns per task: a cache line or more of each accumulator row */

typedef struct emb_job {
    const char *g;
    const int64_t *rows; /* the validated indices */
    double *acc;
    char *y;
    int64_t n, dim;
    bool f64;
} emb_job;

static void emb_columns(void *ctx, int64_t k0, int64_t k1) {
    const emb_job *j = ctx;
    for (int64_t i = 0; i < j->n; i++) {
        double *a = j->acc + j->rows[i] * j->dim;
        if (j->f64) {
            const double *g = (const double *)j->g + i * j->dim;
            for (int64_t k = k0; k < k1; k++) a[k] += g[k];
        } else {
            const float *g = (const float *)j->g + i * j->dim;
            for (int64_t k = k0; k < k1; k++) a[k] += (double)g[k];
        }
    }
}

/* Rounds the sums into the output, one column range of every row. */
static void emb_store(const emb_job *j, int64_t num, int64_t k0, int64_t k1) {
    for (int64_t r = 0; r < num; r++) {
        const double *a = j->acc + r * j->dim;
        if (j->f64) {
            double *y = (double *)j->y + r * j->dim;
            for (int64_t k = k0; k < k1; k++) y[k] = a[k];
        } else {
            float *y = (float *)j->y + r * j->dim;
            for (int64_t k = k0; k < k1; k++) y[k] = (float)a[k];
        }
    }
}

typedef struct emb_task {
    emb_job *job;
    int64_t num;
} emb_task;

static void emb_range(void *ctx, int64_t b, int64_t e) {
    const emb_task *t = ctx;
    int64_t k0 = b * COL_GRAIN, k1 = e * COL_GRAIN < t->job->dim ? e * COL_GRAIN : t->job->dim;
    emb_columns(t->job, k0, k1);
    emb_store(t->job, t->num, k0, k1);
}

static int64_t index_at(const oar_tensor *idx, int64_t i) {
    const char *p = oar_tensor_ptr(idx);
    switch (idx->dtype) {
    case OAR_I64: return ((const int64_t *)p)[i];
    case OAR_I32: return ((const int32_t *)p)[i];
    case OAR_I8: return ((const int8_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

static oar_status embedding_backward_kernel(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                            oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *idx = in[1];
    oar_tensor *y = out[0];
    int64_t num = a[0].i, dim = y->shape[1];
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(idx->numel ? idx->numel : 1));
    double *acc = oar_malloc(sizeof(double) * (size_t)(y->numel ? y->numel : 1)); /* zeroed */
    oar_status st = rows && acc ? OAR_OK : OAR_ERR_OOM;
    if (st != OAR_OK) oar_error(st, "embedding_backward: out of memory for the sums");
    for (int64_t i = 0; st == OAR_OK && i < idx->numel; i++) { /* every index checked before any sum */
        rows[i] = index_at(idx, i);
        if (rows[i] < 0 || rows[i] >= num)
            st = oar_error(OAR_ERR_INVALID_ARG, "embedding_backward: index %lld is out of range; expected indices "
                                                "in [0, %lld) for a weight with %lld rows",
                           (long long)rows[i], (long long)num, (long long)num);
    }
    if (st == OAR_OK && y->numel) {
        emb_job j = {.g = oar_tensor_ptr(g), .rows = rows, .acc = acc, .y = oar_tensor_ptr(y), .n = idx->numel,
                     .dim = dim, .f64 = g->dtype == OAR_F64};
        emb_task t = {.job = &j, .num = num};
        int64_t chunks = (dim + COL_GRAIN - 1) / COL_GRAIN;
        /* threads pay off once the sums are a few hundred thousand adds */
        if (ctx->nthreads > 1 && chunks > 1 && (idx->numel + num) * dim >= 65536)
            oar_parallel_for(chunks, 1, emb_range, &t);
        else emb_range(&t, 0, chunks);
    }
    free(rows);
    free(acc);
    return st;
}

static bool int_indices(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    oar_dtype d = in[1]->dtype;
    return d == OAR_I64 || d == OAR_I32 || d == OAR_I8 || d == OAR_U8;
}

void oar_cpu_register_embedding_backward(void) {
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64),
                          .impl = "columns", .priority = 10, .fn = embedding_backward_kernel, .supports = int_indices};
    oar_register_kernel(OAR_OP_embedding_backward, e);
}
