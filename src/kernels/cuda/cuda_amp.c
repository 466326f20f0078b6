/* CUDA kernels of the loss scaler's ops (src/ops/amp.c): amp_unscale over f32/f64/f16/bf16
 * gradients and amp_update_scale. The scaler keeps its state on the gradients' device
 * (src/amp/scaler.c), so a step unscales, checks and updates without a host round trip
 * until the optimizer step reads the flag. */
#include "cuda_backend.h"
#include "launch_amp.h"

#define ON_DEVICE(t) ((t)->device == OAR_CUDA)

static oar_status cu_amp_unscale(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)out, (void)n_out, (void)a;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    float *found = (void *)oar_tensor_ptr(in[0]);
    const float *inv = (const void *)oar_tensor_ptr(in[1]);
    for (int i = 2; i < n_in; i++) {
        oar_tensor *g = in[i];
        oar_status st = oar_cuda_status(
            (cudaError_t)oar_cu_amp_unscale((int)g->dtype, oar_tensor_ptr(g), g->numel, inv, found, s), "amp_unscale");
        if (st != OAR_OK) return st;
        g->storage->version++;
    }
    in[0]->storage->version++;
    return OAR_OK;
}

/* Every input in GPU memory: dispatch would copy a 0-d host tensor over, and the in-place
 * writes would land in the copy (the scaler moves its state to the gradients' device). */
static bool all_on_device(oar_tensor *const *in, int n_in, const char *op) {
    for (int i = 0; i < n_in; i++)
        if (!ON_DEVICE(in[i])) {
            oar_error(OAR_ERR_INVALID_ARG, "%s: expected input %d in GPU memory like the others (it is written in "
                                           "place), got it on the host; move it with oar_to first", op, i);
            return false;
        }
    return true;
}

static bool unscale_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out, (void)n_out, (void)a;
    for (int i = 2; i < n_in; i++)
        if (in[i]->dtype != OAR_F32 && in[i]->dtype != OAR_F64 && in[i]->dtype != OAR_F16 && in[i]->dtype != OAR_BF16) {
            oar_error(OAR_ERR_DTYPE, "amp_unscale: the CUDA kernel takes f32, f64, f16 and bf16 gradients, got %s "
                                     "(gradient %d)", oar_dtype_name(in[i]->dtype), i - 2);
            return false;
        }
    return all_on_device(in, n_in, "amp_unscale");
}

static oar_status cu_amp_update_scale(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)n_in, (void)out, (void)n_out;
    oar_status st = oar_cuda_status(
        (cudaError_t)oar_cu_amp_update_scale((void *)oar_tensor_ptr(in[0]), (void *)oar_tensor_ptr(in[1]),
                                             (const void *)oar_tensor_ptr(in[2]),
                                             a[0].f, a[1].f, a[2].i, a[3].f, oar_cuda_stream_of(ctx)),
        "amp_update_scale");
    if (st != OAR_OK) return st;
    in[0]->storage->version++;
    in[1]->storage->version++;
    return OAR_OK;
}

static bool update_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)out, (void)n_out, (void)a;
    return all_on_device(in, n_in, "amp_update_scale");
}

void oar_cuda_register_amp(void) {
    oar_cuda_register(OAR_OP_amp_unscale, OAR_DTYPE_BIT(OAR_F32), cu_amp_unscale, unscale_supports);
    oar_cuda_register(OAR_OP_amp_update_scale, OAR_DTYPE_BIT(OAR_F32), cu_amp_update_scale, update_supports);
}
