/* Launchers of norm.cu: layer_norm / group_norm (contiguous rows), batch_norm (per channel),
 * their backward ops and the fused variants (add + layer_norm, layer_norm backward + residual
 * add, batch_norm + residual + relu and its backward). Statistics in double, in a fixed
 * order; dtype is OAR_F32 or OAR_F64 for every float tensor; NULL marks an absent optional
 * tensor. Each returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_NORM_H
#define OAR_CUDA_LAUNCH_NORM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rows of m contiguous values of x (x + x2 rounded to the dtype when x2 is given; the sums go
 * to sum_out). groups == 0: layer_norm (w, b indexed by position in the row); groups > 0:
 * group_norm (row r, position i -> channel (r % groups) * (m / s) + i / s, s the spatial
 * size). mean and rstd get one value per row. */
int oar_cu_row_norm(int dtype, const void *x, const void *x2, void *sum_out, const void *w, const void *b, void *y,
                    void *mean, void *rstd, int64_t rows, int64_t m, int64_t groups, int64_t s, double eps,
                    void *stream);
/* Device scratch layer_norm_backward wants for many rows (0: none needed). */
size_t oar_cu_layer_norm_backward_scratch_bytes(int64_t rows, int64_t m);
/* layer_norm_backward: dx (+ residual when given, rounded like a separate add), dw, db.
 * scratch: its scratch bytes of device memory (NULL works too, more slowly). */
int oar_cu_layer_norm_backward(int dtype, const void *g, const void *x, const void *w, const void *mean,
                               const void *rstd, const void *residual, void *dx, void *dw, void *db, int64_t rows,
                               int64_t m, void *scratch, void *stream);
/* Device scratch batch_norm and batch_norm_backward want for large channels (0: none); with
 * it, each channel's values are split over several blocks (without, one block per channel). */
size_t oar_cu_batch_norm_scratch_bytes(int64_t n, int64_t c, int64_t s);
/* batch_norm over x [n, c, s] (contiguous). rmean/rvar: running statistics (NULL: none) of
 * any float dtype (rm_dtype, rv_dtype) with element strides; counter (NULL: none) an integer
 * scalar of counter_dtype that turns a negative momentum into 1 / (count + 1). residual/act:
 * batch_norm_act's relu(y + residual). */
int oar_cu_batch_norm(int dtype, const void *x, const void *w, const void *b, const void *residual, int act, void *y,
                      void *mean_out, void *invstd_out, void *rmean, int rm_dtype, int64_t rm_stride, void *rvar,
                      int rv_dtype, int64_t rv_stride, const void *counter, int counter_dtype, int64_t n, int64_t c,
                      int64_t s, int training, double momentum, double eps, void *scratch, void *stream);
/* batch_norm_backward (y NULL) or batch_norm_act_backward (gradient masked by y > 0, written
 * to masked when not NULL). */
int oar_cu_batch_norm_backward(int dtype, const void *g, const void *x, const void *w, const void *mean,
                               const void *rstd, const void *y, void *masked, void *dx, void *dw, void *db, int64_t n,
                               int64_t c, int64_t s, void *scratch, void *stream);

#ifdef __cplusplus
}
#endif
#endif
