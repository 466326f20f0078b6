/* Launchers of loss.cu: elementwise losses (mse, l1, smooth_l1, bce_with_logits) and the
 * class-index losses (cross_entropy, nll_loss) with their backward ops. dtype (of the input)
 * is OAR_F32 or OAR_F64; target index tensors are OAR_I64, OAR_I32, OAR_I8 or OAR_U8
 * (tdtype). reduction is oar_reduction (0 mean, 1 sum, 2 none). Sums run in double in a
 * fixed order. Each returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_LOSS_H
#define OAR_CUDA_LAUNCH_LOSS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { OAR_CU_L_MSE, OAR_CU_L_L1, OAR_CU_L_SMOOTH_L1, OAR_CU_L_BCE };

/* Scratch the class-index launchers need (bytes) for n samples. */
size_t oar_cu_loss_scratch_bytes(int64_t n);
/* Scratch a reduced pair loss needs (bytes; reduction none needs none). */
size_t oar_cu_pair_loss_scratch_bytes(void);

/* y = loss(x, t) elementwise (reduction none) or its sum / mean (y one element). */
int oar_cu_pair_loss(int kind, int dtype, const void *x, const void *t, void *y, int64_t n, int reduction,
                     double beta, void *scratch, void *stream);

/* Targets: counts those != ignore and finds the first out of [0, classes). Writes into
 * host_out[0] the count, host_out[1] the first bad flat index (-1: none), host_out[2] its
 * value; synchronizes the stream. scratch: 2 int64s of device memory. */
int oar_cu_check_targets(int tdtype, const void *t, int64_t n, int64_t classes, int64_t ignore, int64_t *scratch,
                         int64_t host_out[3], void *stream);

/* The same count on the device, unchecked and not read back (a CUDA graph records it):
 * scratch[0] = the count, scratch[1] = the first bad flat index (-1: none). */
int oar_cu_count_targets(int tdtype, const void *t, int64_t n, int64_t classes, int64_t ignore, int64_t *scratch,
                         void *stream);

/* cross_entropy (is_ce: x are logits; lse_out gets each sample's log-sum-exp) or nll_loss (x
 * are log-probabilities; lse_out NULL) over x viewed as [outer, classes, inner]. The mean
 * divides by count, or by *count_dev (device memory) where that is not NULL. */
int oar_cu_class_loss(int is_ce, int dtype, const void *x, int tdtype, const void *t, void *y, double *lse_out,
                      int64_t outer, int64_t classes, int64_t inner, int reduction, int64_t ignore, double eps,
                      int64_t count, const int64_t *count_dev, void *scratch, void *stream);

/* cross_entropy_backward (is_ce; x logits, lse saved) or nll_loss_backward (x, lse NULL):
 * dx of x's layout. */
int oar_cu_class_loss_backward(int is_ce, int dtype, const void *g, const void *x, int tdtype, const void *t,
                               const double *lse, void *dx, int64_t outer, int64_t classes, int64_t inner,
                               int reduction, int64_t ignore, double eps, int64_t count, const int64_t *count_dev,
                               void *stream);

#ifdef __cplusplus
}
#endif
#endif
