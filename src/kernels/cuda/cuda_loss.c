/* CUDA kernels of the loss family (src/ops/loss.c, loss_ce.c): mse_loss, l1_loss,
 * smooth_l1_loss, bce_with_logits, cross_entropy (+ backward), nll_loss (+ backward); f32 and
 * f64 inputs, integer targets (i64, i32, i8, u8). The class-index losses check their targets
 * on the GPU and read the count back (one synchronization), so a bad label is an error like
 * on the CPU. While a CUDA graph records, the count stays on the device (the mean divides by
 * it there) and the targets are not checked, as the index ops' range flag: a compiled step's
 * first run is plain and checks that run's targets; in a later replay a target out of range
 * reads nothing and turns its loss and gradient row into NaN (loss.cu), so the loss shows it. */
#include "cuda_backend.h"
#include "launch_loss.h"

#define F32_F64 (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))
enum { A_REDUCTION, A_IGNORE, A_SMOOTHING };

static oar_status pair(const oar_kctx *ctx, int kind, const char *name, oar_tensor *const *in, oar_tensor *const *out,
                       const oar_attr *a) {
    const oar_tensor *x = in[0], *t = in[1];
    int64_t n = x->numel;
    int r = (int)a[0].i;
    size_t sb = r == OAR_REDUCE_NONE ? 0 : oar_cu_pair_loss_scratch_bytes();
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) return oar_last_status();
    int e = oar_cu_pair_loss(kind, (int)x->dtype, oar_tensor_ptr(x), oar_tensor_ptr(t), oar_tensor_ptr(out[0]), n, r,
                             kind == OAR_CU_L_SMOOTH_L1 ? a[1].f : 0.0, scratch, oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    return oar_cuda_status((cudaError_t)e, name);
}

#define PAIR(NAME, KIND)                                                                                  \
    static oar_status cu_##NAME(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, \
                                int n_out, const oar_attr *a) {                                          \
        (void)n_in; (void)n_out;                                                                         \
        return pair(ctx, KIND, #NAME, in, out, a);                                                       \
    }
PAIR(mse_loss, OAR_CU_L_MSE)
PAIR(l1_loss, OAR_CU_L_L1)
PAIR(smooth_l1_loss, OAR_CU_L_SMOOTH_L1)
PAIR(bce_with_logits, OAR_CU_L_BCE)

/* x as [outer, classes, inner] (class dim 0 for 1-d inputs, else 1) */
static void layout(const oar_tensor *x, int64_t *outer, int64_t *classes, int64_t *inner) {
    *classes = x->shape[x->ndim == 1 ? 0 : 1];
    *outer = x->ndim >= 2 ? x->shape[0] : 1;
    *inner = 1;
    for (int d = 2; d < x->ndim; d++) *inner *= x->shape[d];
}

/* The count of targets != ignore a mean divides by: on the host (host), or, while a CUDA graph
 * records, in device memory (dev, freed by count_done after the launches that read it). */
typedef struct target_count {
    int64_t host;
    int64_t *dev;
} target_count;
#define COUNT_BYTES (2 * sizeof(int64_t))

static void count_done(target_count *c) {
    if (c->dev) oar_cuda_scratch_free(c->dev, COUNT_BYTES);
    c->dev = NULL;
}

/* Counts the targets != ignore; an error like the reference's for one out of range (in a plain
 * call: a recorded one counts on the device and checks nothing). */
static oar_status count_targets(const oar_kctx *ctx, const char *op, const oar_tensor *t, int64_t classes,
                                int64_t ignore, target_count *count) {
    *count = (target_count){0};
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(oar_cuda_stream_of(ctx), &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone) {
        if (!(count->dev = oar_cuda_scratch(COUNT_BYTES))) return oar_last_status();
        int e = oar_cu_count_targets((int)t->dtype, oar_tensor_ptr(t), t->numel, classes, ignore, count->dev,
                                     oar_cuda_stream_of(ctx));
        if (e) count_done(count);
        return oar_cuda_status((cudaError_t)e, op);
    }
    int64_t *scratch = oar_cuda_scratch(COUNT_BYTES);
    if (!scratch) return oar_last_status();
    int64_t got[3] = {0, -1, 0};
    int e = oar_cu_check_targets((int)t->dtype, oar_tensor_ptr(t), t->numel, classes, ignore, scratch, got,
                                 oar_cuda_stream_of(ctx));
    oar_cuda_scratch_free(scratch, COUNT_BYTES);
    if (e) return oar_cuda_status((cudaError_t)e, op);
    if (got[1] >= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected target values in [0, %lld) or equal to "
                                              "ignore_index (%lld), got %lld at flat index %lld of the "
                                              "target; check the labels against the number of classes",
                         op, (long long)classes, (long long)ignore, (long long)got[2], (long long)got[1]);
    count->host = got[0];
    return OAR_OK;
}

static oar_status class_loss(const oar_kctx *ctx, bool is_ce, oar_tensor *const *in, oar_tensor *const *out,
                             const oar_attr *a) {
    const char *name = is_ce ? "cross_entropy" : "nll_loss";
    const oar_tensor *x = in[0], *t = in[1];
    int64_t outer = 0, classes = 0, inner = 0;
    target_count count;
    layout(x, &outer, &classes, &inner);
    oar_status st = count_targets(ctx, name, t, classes, a[A_IGNORE].i, &count);
    if (st != OAR_OK) return st;
    int r = (int)a[A_REDUCTION].i;
    int64_t samples = outer * inner;
    size_t sb = r == OAR_REDUCE_NONE ? 0 : oar_cu_loss_scratch_bytes(samples);
    void *scratch = sb ? oar_cuda_scratch(sb) : NULL;
    if (sb && !scratch) {
        count_done(&count);
        return oar_last_status();
    }
    int e = oar_cu_class_loss(is_ce, (int)x->dtype, oar_tensor_ptr(x), (int)t->dtype, oar_tensor_ptr(t),
                              oar_tensor_ptr(out[0]), is_ce ? (double *)oar_tensor_ptr(out[1]) : NULL, outer, classes,
                              inner, r, a[A_IGNORE].i, a[A_SMOOTHING].f, count.host, count.dev, scratch,
                              oar_cuda_stream_of(ctx));
    if (scratch) oar_cuda_scratch_free(scratch, sb);
    count_done(&count);
    return oar_cuda_status((cudaError_t)e, name);
}

static oar_status cu_cross_entropy(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return class_loss(ctx, true, in, out, a);
}
static oar_status cu_nll_loss(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return class_loss(ctx, false, in, out, a);
}

/* cross_entropy_backward(grad_output, logits, target, lse) */
static oar_status cu_cross_entropy_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                            oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *x = in[1], *t = in[2], *lse = in[3];
    int64_t outer = 0, classes = 0, inner = 0;
    target_count count;
    layout(x, &outer, &classes, &inner);
    oar_status st = count_targets(ctx, "cross_entropy_backward", t, classes, a[A_IGNORE].i, &count);
    if (st != OAR_OK) return st;
    int e = oar_cu_class_loss_backward(1, (int)x->dtype, oar_tensor_ptr(g), oar_tensor_ptr(x), (int)t->dtype,
                                       oar_tensor_ptr(t), (const double *)oar_tensor_ptr(lse), oar_tensor_ptr(out[0]),
                                       outer, classes, inner, (int)a[A_REDUCTION].i, a[A_IGNORE].i,
                                       a[A_SMOOTHING].f, count.host, count.dev, oar_cuda_stream_of(ctx));
    count_done(&count);
    return oar_cuda_status((cudaError_t)e, "cross_entropy_backward");
}

/* nll_loss_backward(grad_output, target; num_classes, reduction, ignore_index, smoothing) */
static oar_status cu_nll_loss_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                       int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *t = in[1];
    const oar_attr *o = a + 1;
    int64_t outer = 0, classes = 0, inner = 0;
    target_count count;
    layout(out[0], &outer, &classes, &inner);
    oar_status st = count_targets(ctx, "nll_loss_backward", t, classes, o[A_IGNORE].i, &count);
    if (st != OAR_OK) return st;
    int e = oar_cu_class_loss_backward(0, (int)g->dtype, oar_tensor_ptr(g), NULL, (int)t->dtype, oar_tensor_ptr(t),
                                       NULL, oar_tensor_ptr(out[0]), outer, classes, inner, (int)o[A_REDUCTION].i,
                                       o[A_IGNORE].i, o[A_SMOOTHING].f, count.host, count.dev,
                                       oar_cuda_stream_of(ctx));
    count_done(&count);
    return oar_cuda_status((cudaError_t)e, "nll_loss_backward");
}

static bool idx_dtype(const oar_tensor *t) {
    return t && (t->dtype == OAR_I64 || t->dtype == OAR_I32 || t->dtype == OAR_I8 || t->dtype == OAR_U8);
}

/* pair losses: target and output of the input's dtype */
static bool pair_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    return in[1]->dtype == in[0]->dtype && n_out >= 1 && out[0]->dtype == in[0]->dtype;
}
/* cross_entropy / nll_loss: integer targets the kernels read */
static bool class_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    return idx_dtype(in[1]) && n_out >= 1 && out[0]->dtype == in[0]->dtype;
}
static bool ceb_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    return in[0]->dtype == in[1]->dtype && idx_dtype(in[2]) && in[3]->dtype == OAR_F64 && n_out >= 1 &&
           out[0]->dtype == in[1]->dtype;
}
static bool nllb_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)a;
    return idx_dtype(in[1]) && n_out >= 1 && out[0]->dtype == in[0]->dtype;
}

void oar_cuda_register_loss(void) {
    oar_cuda_register(OAR_OP_mse_loss, F32_F64, cu_mse_loss, pair_ok);
    oar_cuda_register(OAR_OP_l1_loss, F32_F64, cu_l1_loss, pair_ok);
    oar_cuda_register(OAR_OP_smooth_l1_loss, F32_F64, cu_smooth_l1_loss, pair_ok);
    oar_cuda_register(OAR_OP_bce_with_logits, F32_F64, cu_bce_with_logits, pair_ok);
    oar_cuda_register(OAR_OP_cross_entropy, F32_F64, cu_cross_entropy, class_ok);
    oar_cuda_register(OAR_OP_cross_entropy_backward, F32_F64, cu_cross_entropy_backward, ceb_ok);
    oar_cuda_register(OAR_OP_nll_loss, F32_F64, cu_nll_loss, class_ok);
    oar_cuda_register(OAR_OP_nll_loss_backward, F32_F64, cu_nll_loss_backward, nllb_ok);
}
