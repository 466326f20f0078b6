/* CUDA pooling (pool.cu): max_pool2d with its backward and gather (the argmax recomputed from
 * x into scratch, then gathered per input element), avg_pool2d and adaptive_avg_pool2d with
 * their backwards. f32, f64, f16, bf16; inputs are contiguous (the ops are not strided). The
 * attributes were checked by inference; the geometry here follows src/ops/pool.c. */
#include "cuda_glue.h"
#include "launch_pool.h"

#include <string.h>

/* Planes, height and width of a [C, H, W] or [N, C, H, W] shape. */
static void planes_of(const int64_t *shape, int nd, oar_cu_pool *g) {
    g->planes = 1;
    for (int i = 0; i < nd - 2; i++) g->planes *= shape[i];
    g->h = shape[nd - 2];
    g->w = shape[nd - 1];
}

/* kernel, stride, padding (and dilation when dil) from the attributes; output size from the
 * pooled tensor. */
static void window_of(const oar_attr *ker, const oar_attr *str, const oar_attr *pad, const oar_attr *dil,
                      const oar_tensor *pooled, oar_cu_pool *g) {
    g->kh = ker->ints[0], g->kw = ker->ints[1];
    g->sh = str->ints[0], g->sw = str->ints[1];
    g->ph = pad->ints[0], g->pw = pad->ints[1];
    g->dh = dil ? dil->ints[0] : 1, g->dw = dil ? dil->ints[1] : 1;
    g->oh = pooled->shape[pooled->ndim - 2];
    g->ow = pooled->shape[pooled->ndim - 1];
}

static oar_status zero(oar_tensor *t, cudaStream_t s, const char *op) {
    if (!t->numel) return OAR_OK;
    return oar_cuda_status(cudaMemsetAsync(oar_tensor_ptr(t), 0, (size_t)t->numel * oar_dtypes[t->dtype].size, s), op);
}

/* ---- max pooling: attrs kernel, stride, padding, dilation, ceil_mode */

static oar_status max_pool_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_cu_pool g = {0};
    planes_of(in[0]->shape, in[0]->ndim, &g);
    window_of(&a[0], &a[1], &a[2], &a[3], out[0], &g);
    int e = oar_cu_max_pool2d(oar_tensor_ptr(out[0]), NULL, oar_tensor_ptr(in[0]), in[0]->dtype, &g,
                              oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "max_pool2d");
}

/* The argmax of each window of x (in[1]) into scratch; *bytes receives its size. */
static int64_t *argmax_of(const oar_kctx *ctx, const oar_tensor *x, const oar_cu_pool *g, size_t *bytes,
                          const char *op, oar_status *st) {
    *bytes = sizeof(int64_t) * (size_t)(g->planes * g->oh * g->ow);
    int64_t *am = oar_cuda_scratch(*bytes ? *bytes : 8);
    if (!am) {
        *st = oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the argmax (%zu bytes)", op, *bytes);
        return NULL;
    }
    *st = oar_cuda_status((cudaError_t)oar_cu_max_pool2d_argmax(am, oar_tensor_ptr(x), x->dtype, g,
                                                                oar_cuda_stream_of(ctx)), op);
    if (*st != OAR_OK) {
        oar_cuda_scratch_free(am, *bytes ? *bytes : 8);
        return NULL;
    }
    return am;
}

static oar_status max_pool_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "max_pool2d_backward";
    oar_cu_pool g = {0};
    planes_of(in[1]->shape, in[1]->ndim, &g);
    window_of(&a[0], &a[1], &a[2], &a[3], in[0], &g);
    size_t bytes;
    oar_status st;
    int64_t *am = argmax_of(ctx, in[1], &g, &bytes, op, &st);
    if (!am) return st;
    int e = oar_cu_max_pool2d_backward(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), am, in[1]->dtype, &g,
                                       oar_cuda_stream_of(ctx));
    oar_cuda_scratch_free(am, bytes ? bytes : 8);
    return oar_cuda_status((cudaError_t)e, op);
}

static oar_status max_pool_gather_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                       oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "max_pool2d_gather";
    oar_cu_pool g = {0};
    planes_of(in[1]->shape, in[1]->ndim, &g);
    window_of(&a[0], &a[1], &a[2], &a[3], out[0], &g);
    size_t bytes;
    oar_status st;
    int64_t *am = argmax_of(ctx, in[1], &g, &bytes, op, &st);
    if (!am) return st;
    int e = oar_cu_max_pool2d_gather(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), am, in[1]->dtype, &g,
                                     oar_cuda_stream_of(ctx));
    oar_cuda_scratch_free(am, bytes ? bytes : 8);
    return oar_cuda_status((cudaError_t)e, op);
}

/* ---- average pooling: attrs kernel, stride, padding, ceil_mode, count_include_pad */

static oar_status avg_pool_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_cu_pool g = {0};
    planes_of(in[0]->shape, in[0]->ndim, &g);
    window_of(&a[0], &a[1], &a[2], NULL, out[0], &g);
    g.include_pad = a[4].i != 0;
    int e = oar_cu_avg_pool2d(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), in[0]->dtype, &g,
                              oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "avg_pool2d");
}

/* attrs: input_shape, then avg_pool2d's */
static oar_status avg_pool_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    oar_cu_pool g = {0};
    planes_of(out[0]->shape, out[0]->ndim, &g);
    window_of(&a[1], &a[2], &a[3], NULL, in[0], &g);
    g.include_pad = a[5].i != 0;
    int e = oar_cu_avg_pool2d_backward(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), in[0]->dtype, &g,
                                       oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "avg_pool2d_backward");
}

/* ---- adaptive average pooling */

static oar_status adaptive_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    oar_cu_pool g = {0};
    planes_of(in[0]->shape, in[0]->ndim, &g);
    g.oh = out[0]->shape[out[0]->ndim - 2];
    g.ow = out[0]->shape[out[0]->ndim - 1];
    int e = oar_cu_adaptive_avg_pool2d(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), in[0]->dtype, &g,
                                       oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "adaptive_avg_pool2d");
}

static oar_status adaptive_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    const char *op = "adaptive_avg_pool2d_backward";
    oar_cu_pool g = {0};
    planes_of(out[0]->shape, out[0]->ndim, &g);
    g.oh = in[0]->shape[in[0]->ndim - 2];
    g.ow = in[0]->shape[in[0]->ndim - 1];
    if (g.oh == 0 || g.ow == 0) return zero(out[0], oar_cuda_stream_of(ctx), op); /* no bins: no gradient */
    int e = oar_cu_adaptive_avg_pool2d_backward(oar_tensor_ptr(out[0]), oar_tensor_ptr(in[0]), in[0]->dtype, &g,
                                                oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, op);
}

void oar_cuda_register_pool(void) {
    oar_cuda_register(OAR_OP_max_pool2d, OAR_FLOAT_DTYPES, max_pool_cuda, NULL);
    oar_cuda_register(OAR_OP_max_pool2d_backward, OAR_FLOAT_DTYPES, max_pool_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_max_pool2d_gather, OAR_FLOAT_DTYPES, max_pool_gather_cuda, NULL);
    oar_cuda_register(OAR_OP_avg_pool2d, OAR_FLOAT_DTYPES, avg_pool_cuda, NULL);
    oar_cuda_register(OAR_OP_avg_pool2d_backward, OAR_FLOAT_DTYPES, avg_pool_backward_cuda, NULL);
    oar_cuda_register(OAR_OP_adaptive_avg_pool2d, OAR_FLOAT_DTYPES, adaptive_cuda, NULL);
    oar_cuda_register(OAR_OP_adaptive_avg_pool2d_backward, OAR_FLOAT_DTYPES, adaptive_backward_cuda, NULL);
}
