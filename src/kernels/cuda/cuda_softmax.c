/* CUDA kernels of softmax, log_softmax, softmax_backward and log_softmax_backward (src/ops/
 * nn.c); f32 and f64, contiguous inputs. */
#include "cuda_backend.h"
#include "launch_softmax.h"

#define F32_F64 (OAR_DTYPE_BIT(OAR_F32) | OAR_DTYPE_BIT(OAR_F64))

/* x viewed as [outer, n, inner] around dim (a 0-d tensor is one line of one element). */
static oar_status around(const char *name, const oar_tensor *x, int64_t dim, int64_t *outer, int64_t *n,
                         int64_t *inner) {
    int nd = x->ndim ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim in [%d, %d] for an input with %d dims, got %lld",
                         name, -nd, nd - 1, x->ndim, (long long)dim);
    int d = (int)(dim < 0 ? dim + nd : dim);
    *outer = *inner = 1;
    *n = x->ndim ? x->shape[d] : 1;
    for (int i = 0; i < d && i < x->ndim; i++) *outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++) *inner *= x->shape[i];
    return OAR_OK;
}

static oar_status fwd(const oar_kctx *ctx, bool log_form, oar_tensor *const *in, oar_tensor *const *out,
                      const oar_attr *a) {
    const char *name = log_form ? "log_softmax" : "softmax";
    int64_t outer = 0, n = 0, inner = 0;
    oar_status st = around(name, in[0], a[0].i, &outer, &n, &inner);
    if (st != OAR_OK) return st;
    if (out[0]->numel == 0) return OAR_OK;
    int e = oar_cu_softmax(log_form, (int)in[0]->dtype, oar_tensor_ptr(in[0]), oar_tensor_ptr(out[0]), outer, n,
                           inner, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, name);
}
static oar_status bwd(const oar_kctx *ctx, bool log_form, oar_tensor *const *in, oar_tensor *const *out,
                      const oar_attr *a) {
    const char *name = log_form ? "log_softmax_backward" : "softmax_backward";
    int64_t outer = 0, n = 0, inner = 0;
    oar_status st = around(name, in[0], a[0].i, &outer, &n, &inner);
    if (st != OAR_OK) return st;
    if (out[0]->numel == 0) return OAR_OK;
    int e = oar_cu_softmax_backward(log_form, (int)in[0]->dtype, oar_tensor_ptr(in[0]), oar_tensor_ptr(in[1]),
                                    oar_tensor_ptr(out[0]), outer, n, inner, oar_cuda_stream_of(ctx));
    return oar_cuda_status((cudaError_t)e, name);
}

static oar_status cu_softmax(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return fwd(ctx, false, in, out, a);
}
static oar_status cu_log_softmax(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return fwd(ctx, true, in, out, a);
}
static oar_status cu_softmax_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return bwd(ctx, false, in, out, a);
}
static oar_status cu_log_softmax_backward(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    return bwd(ctx, true, in, out, a);
}

/* Every tensor of the call in the key input's dtype (backward: gradient and output). */
static bool one_dtype(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)a;
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->dtype != in[0]->dtype) return false;
    return n_out >= 1 && out[0]->dtype == in[0]->dtype;
}

void oar_cuda_register_softmax(void) {
    oar_cuda_register(OAR_OP_softmax, F32_F64, cu_softmax, one_dtype);
    oar_cuda_register(OAR_OP_log_softmax, F32_F64, cu_log_softmax, one_dtype);
    oar_cuda_register(OAR_OP_softmax_backward, F32_F64, cu_softmax_backward, one_dtype);
    oar_cuda_register(OAR_OP_log_softmax_backward, F32_F64, cu_log_softmax_backward, one_dtype);
}
