/* CUDA dropout (dropout.cu): the CPU's Philox stream, element i at counter ctx->rng.offset + i
 * under key ctx->rng.seed, so the same seed gives the CPU's mask bit for bit. Without a mask
 * (eval, p = 0, or p = 1) the output is a copy or zeros. In a CUDA graph (ctx->params) the
 * counters are read from device memory the executor refreshes before each replay, so every
 * replay draws the mask an eager call would. */
#include "cuda_glue.h"
#include "launch_dropout.h"

static oar_status dropout_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    oar_kparams *kp = ctx->params;
    bool draws = y->numel > 0 && n_out >= 2;
    if (kp && kp->phase == OAR_KPARAMS_PREPARE) { /* this run's counters, for the launch to read */
        if (draws && kp->cap < sizeof ctx->rng)
            return oar_error(OAR_ERR_INTERNAL, "dropout: the executor gave %zu bytes for the generator counters, "
                                               "%zu needed; this is a bug in the executor", kp->cap, sizeof ctx->rng);
        if (draws) memcpy(kp->host, &ctx->rng, sizeof ctx->rng);
        kp->used = draws ? sizeof ctx->rng : 0;
        return OAR_OK;
    }
    if (y->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    size_t bytes = (size_t)y->numel * oar_dtypes[y->dtype].size;
    if (n_out < 2) {
        cudaError_t e = a[1].i && a[0].f >= 1 ? cudaMemsetAsync(oar_tensor_ptr(y), 0, bytes, s)
                                              : cudaMemcpyAsync(oar_tensor_ptr(y), oar_tensor_ptr(x), bytes,
                                                                cudaMemcpyDeviceToDevice, s);
        return oar_cuda_status(e, "dropout");
    }
    double p = a[0].f, scale = 1.0 / (1.0 - p);
    int e = oar_cu_dropout(oar_tensor_ptr(y), oar_tensor_ptr(out[1]), oar_tensor_ptr(x), x->dtype, y->numel, p,
                           oar_cu_fill_bits(x->dtype, scale), ctx->rng.seed, ctx->rng.offset,
                           kp ? (const uint64_t *)kp->dev : NULL, s);
    return oar_cuda_status((cudaError_t)e, "dropout");
}

void oar_cuda_register_dropout(void) {
    oar_cuda_register_graphed(OAR_OP_dropout, OAR_FLOAT_DTYPES, dropout_cuda, NULL);
}
