/* Launchers of attention.cu: scaled dot-product attention and its backward over nb batch
 * entries of contiguous q [L, D], k [S, D], v [S, Dv] (and g [L, Dv], p [L, S]), in double
 * like the CPU reference, each sum in the reference's order (f64 calls them; every float dtype
 * is taken), and the GEMM path's row kernels. Plain C; dtype is an oar_dtype; each returns a
 * cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_ATTENTION_H
#define OAR_CUDA_LAUNCH_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most keys (S) the forward kernel takes: a row of scores lives in shared memory. */
#define OAR_CU_ATTENTION_MAX_S 6000

/* out [nb, L, Dv] = probs v, probs [nb, L, S] = softmax(q kᵀ * scale masked to -inf where
 * mask [L, S] (bool, or NULL) is set or, when causal, j > i). One block per row. */
int oar_cu_attention_forward(void *out, void *probs, const void *q, const void *k, const void *v,
                             const uint8_t *mask, int dtype, int64_t nb, int64_t L, int64_t S, int64_t D, int64_t Dv,
                             double scale, int causal, void *stream);

/* dv = pᵀ g; dp = g vᵀ; ds = scale * p * (dp - rowsum(dp * p)); dq = ds k; dk = dsᵀ q.
 * ds: nb * L * S doubles of scratch. */
int oar_cu_attention_backward(void *dq, void *dk, void *dv, const void *g, const void *q, const void *k,
                              const void *v, const void *p, int dtype, int64_t nb, int64_t L, int64_t S, int64_t D,
                              int64_t Dv, double scale, double *ds, void *stream);

/* The rows between the GEMM path's products (dtype f32, f16 or bf16), one block per row:
 * probs [rows, S] = softmax(scores * scale) masked as the forward above (query i = row % L), from
 * f32 scores; and ds [rows, S] = scale * p * (dp - rowsum(dp * p)) from f32 dp. */
int oar_cu_attention_softmax_rows(void *probs, const float *scores, const uint8_t *mask, int dtype, int64_t rows,
                                  int64_t L, int64_t S, double scale, int causal, void *stream);
int oar_cu_attention_ds_rows(void *ds, const float *dp, const void *p, int dtype, int64_t rows, int64_t S,
                             double scale, void *stream);

#ifdef __cplusplus
}
#endif
#endif
