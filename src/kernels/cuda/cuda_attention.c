/* CUDA fused_attention and attention_backward (attention.cu). f32, f16 and bf16: the five
 * products run as cuBLASLt batched GEMMs (tensor cores for the half types, f32 accumulation,
 * scores and dp kept in f32) and row kernels in f32 do the softmax and ds between them; the
 * probabilities are saved in the input's type as the op defines. f64: straightforward kernels
 * in double, the reference's order (the GPU sweep's exact check). f32 ran those double kernels
 * until an H200 run put a compiled gpt-mini step at 6.3 ms with them, 2.6 ms composed of GEMMs.
 * Strided q, k, v (head views) are copied contiguous first. Scratch (the backward's ds, the
 * GEMM path's scores) is taken for a chunk of batch entries at a time, at most about 256 MiB. */
#include "cuda_glue.h"
#include "launch_attention.h"

#include <string.h>

static int64_t batches(const oar_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim - 2; d++) n *= t->shape[d];
    return n;
}

/* the dtypes whose attention runs as GEMMs and row kernels (f64 keeps the double kernels) */
static bool gemm_path(oar_dtype dt) { return dt == OAR_F32 || dt == OAR_F16 || dt == OAR_BF16; }

/* Batch entries per chunk when each takes per_entry bytes of scratch: about 256 MiB in all. */
static int64_t chunk_of(int64_t nb, size_t per_entry) {
    int64_t c = per_entry ? (int64_t)(((size_t)256 << 20) / per_entry) : nb;
    return c < 1 ? 1 : c > nb ? nb : c;
}

#define AT_B(t, b0, per_b) ((char *)oar_tensor_ptr(t) + (size_t)((b0) * (per_b)) * es)

/* out = softmax(q kᵀ * scale, masked) v, with probs saved: q kᵀ into f32 scores, the row
 * softmax into probs, probs v into out. */
static oar_status gemm_forward(oar_tensor *y, oar_tensor *probs, oar_tensor *q, oar_tensor *k, oar_tensor *v,
                               oar_tensor *mask, const oar_attr *a, cudaStream_t s) {
    const char *op = "fused_attention";
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], D = q->shape[nd - 1], Dv = v->shape[nd - 1];
    int64_t nb = batches(q);
    size_t es = oar_dtypes[q->dtype].size;
    int64_t chunk = chunk_of(nb, sizeof(float) * (size_t)(L * S));
    size_t bytes = sizeof(float) * (size_t)(chunk * L * S);
    float *scores = oar_cuda_scratch(bytes);
    if (!scores) return oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the scores (%zu bytes)", op, bytes);
    oar_status st = OAR_OK;
    for (int64_t b0 = 0; st == OAR_OK && b0 < nb; b0 += chunk) {
        int64_t n = nb - b0 < chunk ? nb - b0 : chunk;
        if (D > 0)
            st = oar_cu_gemm_batched(op, q->dtype, AT_B(q, b0, L * D), false, AT_B(k, b0, S * D), true, scores, true, n,
                                     L, S, D, s);
        else
            st = oar_cuda_status(cudaMemsetAsync(scores, 0, sizeof(float) * (size_t)(n * L * S), s), op);
        if (st == OAR_OK)
            st = oar_cuda_status((cudaError_t)oar_cu_attention_softmax_rows(
                                     AT_B(probs, b0, L * S), scores,
                                     mask ? (const uint8_t *)oar_tensor_ptr(mask) : NULL, q->dtype, n * L, L, S,
                                     a[0].f, (int)a[1].i, s),
                                 op);
        if (st == OAR_OK && Dv > 0)
            st = oar_cu_gemm_batched(op, q->dtype, AT_B(probs, b0, L * S), false, AT_B(v, b0, S * Dv), false,
                                     AT_B(y, b0, L * Dv), false, n, L, Dv, S, s);
    }
    oar_cuda_scratch_free(scores, bytes);
    return st;
}

/* dv = pᵀ g; dp = g vᵀ (f32); ds = scale * p * (dp - rowsum(dp * p)); dq = ds k; dk = dsᵀ q. */
static oar_status gemm_backward(oar_tensor *const *out, oar_tensor *const *c, const oar_attr *a, cudaStream_t s) {
    const char *op = "attention_backward";
    oar_tensor *g = c[0], *q = c[1], *k = c[2], *v = c[3], *p = c[4];
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], D = q->shape[nd - 1], Dv = v->shape[nd - 1];
    int64_t nb = batches(q);
    size_t es = oar_dtypes[q->dtype].size;
    int64_t chunk = chunk_of(nb, (sizeof(float) + es) * (size_t)(L * S));
    size_t dp_bytes = sizeof(float) * (size_t)(chunk * L * S), ds_bytes = es * (size_t)(chunk * L * S);
    float *dp = oar_cuda_scratch(dp_bytes);
    void *ds = dp ? oar_cuda_scratch(ds_bytes) : NULL;
    if (!ds) {
        if (dp) oar_cuda_scratch_free(dp, dp_bytes);
        return oar_error(OAR_ERR_OOM, "%s: out of GPU memory for the scratch (%zu bytes)", op, dp_bytes + ds_bytes);
    }
    oar_status st = OAR_OK;
    for (int64_t b0 = 0; st == OAR_OK && b0 < nb; b0 += chunk) {
        int64_t n = nb - b0 < chunk ? nb - b0 : chunk;
        if (Dv > 0)
            st = oar_cu_gemm_batched(op, q->dtype, AT_B(p, b0, L * S), true, AT_B(g, b0, L * Dv), false,
                                     AT_B(out[2], b0, S * Dv), false, n, S, Dv, L, s);
        if (st == OAR_OK && Dv > 0)
            st = oar_cu_gemm_batched(op, q->dtype, AT_B(g, b0, L * Dv), false, AT_B(v, b0, S * Dv), true, dp, true, n, L,
                                     S, Dv, s);
        else if (st == OAR_OK)
            st = oar_cuda_status(cudaMemsetAsync(dp, 0, sizeof(float) * (size_t)(n * L * S), s), op);
        if (st == OAR_OK)
            st = oar_cuda_status((cudaError_t)oar_cu_attention_ds_rows(ds, dp, AT_B(p, b0, L * S), q->dtype, n * L, S,
                                                                       a[0].f, s),
                                 op);
        if (st == OAR_OK && D > 0)
            st = oar_cu_gemm_batched(op, q->dtype, ds, false, AT_B(k, b0, S * D), false, AT_B(out[0], b0, L * D), false, n,
                                     L, D, S, s);
        if (st == OAR_OK && D > 0)
            st = oar_cu_gemm_batched(op, q->dtype, ds, true, AT_B(q, b0, L * D), false, AT_B(out[1], b0, S * D), false, n,
                                     S, D, L, s);
    }
    oar_cuda_scratch_free(ds, ds_bytes);
    oar_cuda_scratch_free(dp, dp_bytes);
    return st;
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
    if (gemm_path(q->dtype) && L > 0) {
        oar_status st = gemm_forward(y, probs, q, k, v, mask, a, s);
        oar_cu_temps_free(&tmp);
        return st;
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
    /* the double kernel keeps a row of scores in shared memory; the GEMM path streams them */
    return (gemm_path(in[0]->dtype) || in[1]->shape[nd - 2] <= OAR_CU_ATTENTION_MAX_S) && batches(in[0]) * in[0]->shape[nd - 2] <= 0x7fffffffLL;
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
    if (gemm_path(in[1]->dtype) && L > 0 && S > 0) {
        oar_status st = gemm_backward(out, c, a, s);
        oar_cu_temps_free(&tmp);
        return st;
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
