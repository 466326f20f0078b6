/* CUDA kernels of the normalizations (src/ops/norm.c, norm_backward.c, fused_add_ln.c,
 * fused_bn_act.c): layer_norm, group_norm, batch_norm (training and inference; running
 * statistics updated in place where they live), their backward ops, add_layer_norm,
 * layer_norm_backward_add, batch_norm_act and batch_norm_act_backward; f32 and f64, every
 * float tensor of one dtype. */
#include "cuda_backend.h"
#include "launch_norm.h"

#define F32_F64 (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

static int64_t prod(const int64_t *s, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= s[i];
    return n;
}
static void *ptr(const oar_tensor *t) { return t ? oar_tensor_ptr(t) : NULL; }

/* ---- layer_norm, add_layer_norm, group_norm */
static oar_status cu_layer_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int k = (int)a[0].i;
    int64_t m = prod(x->shape, x->ndim - k, x->ndim), rows = prod(x->shape, 0, x->ndim - k);
    int e = oar_cu_row_norm((int)x->dtype, ptr(x), NULL, NULL, ptr(in[1]), ptr(in[2]), ptr(out[0]), ptr(out[1]),
                            ptr(out[2]), rows, m, 0, m, a[1].f, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "layer_norm");
}

/* add_layer_norm(a, b, weight?, bias?) -> sum, y, mean, rstd */
static oar_status cu_add_layer_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int k = (int)a[0].i;
    int64_t m = prod(x->shape, x->ndim - k, x->ndim), rows = prod(x->shape, 0, x->ndim - k);
    int e = oar_cu_row_norm((int)x->dtype, ptr(x), ptr(in[1]), ptr(out[0]), ptr(in[2]), ptr(in[3]), ptr(out[1]),
                            ptr(out[2]), ptr(out[3]), rows, m, 0, m, a[1].f, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "add_layer_norm");
}

static oar_status cu_group_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int64_t groups = a[0].i, n = x->shape[0], c = x->shape[1], s = prod(x->shape, 2, x->ndim);
    int64_t m = c / groups * s;
    int e = oar_cu_row_norm((int)x->dtype, ptr(x), NULL, NULL, ptr(in[1]), ptr(in[2]), ptr(out[0]), ptr(out[1]),
                            ptr(out[2]), n * groups, m, groups, s, a[1].f, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, "group_norm");
}

/* ---- layer_norm_backward(g, x, w?, mean, rstd) and layer_norm_backward_add (+ residual) */
static oar_status ln_backward(const oar_kctx *ctx, const char *name, oar_tensor *const *in, const oar_tensor *residual,
                              oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[1];
    int k = (int)a[0].i;
    int64_t m = prod(x->shape, x->ndim - k, x->ndim), rows = prod(x->shape, 0, x->ndim - k);
    size_t sb = oar_cu_layer_norm_backward_scratch_bytes(rows, m);
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) return oar_last_status();
    int e = oar_cu_layer_norm_backward((int)x->dtype, ptr(in[0]), ptr(x), ptr(in[2]), ptr(in[3]), ptr(in[4]),
                                       ptr(residual), ptr(out[0]), ptr(out[1]), ptr(out[2]), rows, m, scratch,
                                       oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    return oar_cuda_status((cudaError_t)e, name);
}
static oar_status cu_layer_norm_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                         int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return ln_backward(ctx, "layer_norm_backward", in, NULL, out, a);
}
static oar_status cu_layer_norm_backward_add(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                             oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return ln_backward(ctx, "layer_norm_backward_add", in, in[5], out, a);
}

/* ---- batch_norm(x, w?, b?, rmean?, rvar?, counter?) and batch_norm_act(x, w?, b?, rmean?,
 * rvar?, residual?, counter?): STRIDED ops, so x, w, b and the residual are made dense here;
 * the running statistics are written where they live (1-d, any stride). */
static oar_tensor *dense(oar_tensor *t) {
    if (!t) return NULL;
    return t->contiguous ? oar_retain(t) : oar_tensor_contiguous_copy(t);
}

static oar_status bn_forward(const oar_kctx *ctx, const char *name, oar_tensor *const *in, oar_tensor *residual_in,
                             bool act, oar_tensor *counter, oar_tensor *const *out, const oar_attr *a) {
    oar_tensor *x = dense(in[0]), *w = dense(in[1]), *b = dense(in[2]), *r = dense(residual_in);
    oar_tensor *rmean = in[3], *rvar = in[4];
    oar_status st = OAR_OK;
    if (!x || (in[1] && !w) || (in[2] && !b) || (residual_in && !r)) {
        st = oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_OOM;
        goto done;
    }
    const bool training = a[0].i != 0;
    const int64_t n = x->shape[0], c = x->shape[1], s = prod(x->shape, 2, x->ndim);
    size_t sb = oar_cu_batch_norm_scratch_bytes(n, c, s);
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) {
        st = oar_last_status();
        goto done;
    }
    int e = oar_cu_batch_norm((int)x->dtype, ptr(x), ptr(w), ptr(b), ptr(r), act, ptr(out[0]), ptr(out[1]),
                              ptr(out[2]), ptr(rmean), rmean ? (int)rmean->dtype : 0, rmean ? rmean->strides[0] : 0,
                              ptr(rvar), rvar ? (int)rvar->dtype : 0, rvar ? rvar->strides[0] : 0, ptr(counter),
                              counter ? (int)counter->dtype : 0, n, c, s, training, a[1].f, a[2].f, scratch,
                              oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    st = oar_cuda_status((cudaError_t)e, name);
    if (st == OAR_OK && training && rmean && n * s > 0) { /* once per call, so autograd sees the write */
        rmean->storage->version++;
        rvar->storage->version++;
    }
done:
    if (x) oar_tensor_unref(x);
    if (w) oar_tensor_unref(w);
    if (b) oar_tensor_unref(b);
    if (r) oar_tensor_unref(r);
    return st;
}
static oar_status cu_batch_norm(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return bn_forward(ctx, "batch_norm", in, NULL, false, in[5], out, a);
}
static oar_status cu_batch_norm_act(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return bn_forward(ctx, "batch_norm_act", in, in[5], true, in[6], out, a);
}

/* ---- batch_norm_backward(g, x, w?, mean, rstd) and batch_norm_act_backward(..., y; masked_out) */
static oar_status bn_backward(const oar_kctx *ctx, const char *name, oar_tensor *const *in, const oar_tensor *y,
                              oar_tensor *masked, oar_tensor *const *out) {
    const oar_tensor *x = in[1];
    const int64_t n = x->shape[0], c = x->shape[1], s = prod(x->shape, 2, x->ndim);
    size_t sb = oar_cu_batch_norm_scratch_bytes(n, c, s);
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) return oar_last_status();
    int e = oar_cu_batch_norm_backward((int)x->dtype, ptr(in[0]), ptr(x), ptr(in[2]), ptr(in[3]), ptr(in[4]), ptr(y),
                                       ptr(masked), ptr(out[0]), ptr(out[1]), ptr(out[2]), n, c, s, scratch,
                                       oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    return oar_cuda_status((cudaError_t)e, name);
}
static oar_status cu_batch_norm_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                         int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    return bn_backward(ctx, "batch_norm_backward", in, NULL, NULL, out);
}
static oar_status cu_batch_norm_act_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                             oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return bn_backward(ctx, "batch_norm_act_backward", in, in[5], a[0].i ? out[3] : NULL, out);
}

/* ---- supports: every float tensor (inputs and outputs) of x's dtype, except batch_norm's
 * running statistics (any float dtype, like the reference); integer counters. */
static bool float_tensors_like(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, int key,
                               int counter) {
    oar_dtype dt = in[key]->dtype;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) continue;
        if (counter >= 0 && (i == 3 || i == 4)) { /* running statistics: any float dtype, 1-d */
            if (!(OAR_FLOAT_DTYPES & OAR_DTYPE_BIT(in[i]->dtype)) || in[i]->ndim != 1) return false;
            continue;
        }
        if (i == counter) {
            oar_dtype c = in[i]->dtype;
            if (c != OAR_I8 && c != OAR_U8 && c != OAR_I32 && c != OAR_I64) return false;
            continue;
        }
        if (in[i]->dtype != dt) return false;
    }
    for (int i = 0; i < n_out; i++)
        if (out[i]->dtype != dt) return false;
    return true;
}
static bool sup_plain(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)a;
    return float_tensors_like(in, n_in, out, n_out, 0, -1);
}
static bool sup_key1(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)a;
    return float_tensors_like(in, n_in, out, n_out, 1, -1);
}
static bool sup_bn(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)a;
    return float_tensors_like(in, n_in, out, n_out, 0, 5);
}
static bool sup_bn_act(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)a;
    return float_tensors_like(in, n_in, out, n_out, 0, 6);
}

void oar_cuda_register_norm(void) {
    oar_cuda_register(OAR_OP_layer_norm, F32_F64, cu_layer_norm, sup_plain);
    oar_cuda_register(OAR_OP_group_norm, F32_F64, cu_group_norm, sup_plain);
    oar_cuda_register(OAR_OP_batch_norm, F32_F64, cu_batch_norm, sup_bn);
    oar_cuda_register(OAR_OP_layer_norm_backward, F32_F64, cu_layer_norm_backward, sup_key1);
    oar_cuda_register(OAR_OP_batch_norm_backward, F32_F64, cu_batch_norm_backward, sup_key1);
    oar_cuda_register(OAR_OP_add_layer_norm, F32_F64, cu_add_layer_norm, sup_plain);
    oar_cuda_register(OAR_OP_layer_norm_backward_add, F32_F64, cu_layer_norm_backward_add, sup_key1);
    oar_cuda_register(OAR_OP_batch_norm_act, F32_F64, cu_batch_norm_act, sup_bn_act);
    oar_cuda_register(OAR_OP_batch_norm_act_backward, F32_F64, cu_batch_norm_act_backward, sup_key1);
}
