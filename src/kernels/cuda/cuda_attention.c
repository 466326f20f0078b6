/* CUDA fused_attention and attention_backward (attention.cu): straightforward kernels in
 * double, saving the probabilities as the reference does. Strided q, k, v (head views) are
 * copied contiguous first. The backward's ds scratch (L * S doubles per batch entry) is taken
 * for a chunk of batch entries at a time, at most about 256 MiB. */
#include "cuda_glue.h"
#include "launch_attention.h"

#include <string.h>

static int64_t batches(const oar_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim - 2; d++) n *= t->shape[d];
    return n;
}

static oar_status fused_attention_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                       int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "fused_attention";
    oar_tensor *y = out[0], *probs = out[1];
    if (y->numel == 0 && probs->numel == 0) return OAR_OK;
    cudaStream_t s = oar_cuda_stream_of(ctx);
    int nd = in[0]->ndim;
    int64_t L = in[0]->shape[nd - 2], S = in[1]->shape[nd - 2], D = in[0]->shape[nd - 1], Dv = in[2]->shape[nd - 1];
    if (S == 0) /* softmax over no keys: out sums nothing */
        return oar_cuda_status(cudaMemsetAsync(oar_tensor_ptr(y), 0, (size_t)y->numel * oar_dtypes[y->dtype].size, s),
                               op);
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *q = oar_cu_contig(in[0], &tmp), *k = oar_cu_contig(in[1], &tmp), *v = oar_cu_contig(in[2], &tmp);
    oar_tensor *mask = oar_cu_contig(in[3], &tmp);
    if (!q || !k || !v || (in[3] && !mask)) {
        oar_cu_temps_free(&tmp);
        return oar_last_status();
    }
    int e = oar_cu_attention_forward(oar_tensor_ptr(y), oar_tensor_ptr(probs), oar_tensor_ptr(q), oar_tensor_ptr(k),
                                     oar_tensor_ptr(v), mask ? (const uint8_t *)oar_tensor_ptr(mask) : NULL,
                                     q->dtype, batches(q), L, S, D, Dv, a[0].f, (int)a[1].i, s);
    oar_cu_temps_free(&tmp);
    return oar_cuda_status((cudaError_t)e, op);
}

static bool fused_attention_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                     const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    int nd = in[0]->ndim;
    return in[1]->shape[nd - 2] <= OAR_CU_ATTENTION_MAX_S && batches(in[0]) * in[0]->shape[nd - 2] <= 0x7fffffffLL;
}

static oar_status attention_backward_cuda(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out;
    const char *op = "attention_backward";
    cudaStream_t s = oar_cuda_stream_of(ctx);
    int nd = in[1]->ndim;
    int64_t L = in[1]->shape[nd - 2], S = in[2]->shape[nd - 2], D = in[1]->shape[nd - 1], Dv = in[3]->shape[nd - 1];
    int64_t nb = batches(in[1]);
    if (out[0]->numel == 0 && out[1]->numel == 0 && out[2]->numel == 0) return OAR_OK;
    oar_cu_temps tmp = {.n = 0};
    oar_tensor *c[5];
    for (int i = 0; i < 5; i++)
        if (!(c[i] = oar_cu_contig(in[i], &tmp))) {
            oar_cu_temps_free(&tmp);
            return oar_last_status();
        }
    size_t es = oar_dtypes[in[1]->dtype].size;
    int64_t per = L * S, chunk = per ? ((int64_t)256 << 20) / (per * 8) : nb;
    if (chunk < 1) chunk = 1;
    if (chunk > nb) chunk = nb;
    size_t ds_bytes = sizeof(double) * (size_t)(chunk * per);
    double *ds = ds_bytes ? oar_cuda_scratch(ds_bytes) : NULL;
    oar_status st = OAR_OK;
    if (ds_bytes && !ds) st = oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the scratch (%zu bytes)", op, ds_bytes);
    for (int64_t b0 = 0; st == OAR_OK && b0 < nb; b0 += chunk) {
        int64_t n = nb - b0 < chunk ? nb - b0 : chunk;
#define AT(t, per_b) (oar_tensor_ptr(t) + (size_t)(b0 * (per_b)) * es)
        int e = oar_cu_attention_backward(AT(out[0], L * D), AT(out[1], S * D), AT(out[2], S * Dv), AT(c[0], L * Dv),
                                          AT(c[1], L * D), AT(c[2], S * D), AT(c[3], S * Dv), AT(c[4], L * S),
                                          in[1]->dtype, n, L, S, D, Dv, a[0].f, ds, s);
#undef AT
        st = oar_cuda_status((cudaError_t)e, op);
    }
    if (ds) oar_cuda_scratch_free(ds, ds_bytes);
    oar_cu_temps_free(&tmp);
    return st;
}

void oar_cuda_register_attention(void) {
    oar_cuda_register(OAR_OP_fused_attention, OAR_FLOAT_DTYPES, fused_attention_cuda, fused_attention_supports);
    oar_cuda_register(OAR_OP_attention_backward, OAR_FLOAT_DTYPES, attention_backward_cuda, NULL);
}
