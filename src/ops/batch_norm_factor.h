/* The factor batch_norm (and batch_norm_act) blends the running statistics with: the momentum
 * attribute, or, when it is negative and num_batches_tracked is given, the cumulative average
 * 1 / (count + 1) (torch's momentum=None; the increment that follows the op makes the count
 * count + 1). Read from the counter at run time, so a compiled step computes the factor of its
 * own step, in double, exactly as eager mode does. */
#ifndef OAR_OPS_BATCH_NORM_FACTOR_H
#define OAR_OPS_BATCH_NORM_FACTOR_H

#include "tensor/tensor.h"

/* oar_batch_norm with num_batches_tracked (NULL: oar_batch_norm): with a negative momentum the
 * running statistics take the cumulative average; the caller increments the counter after. */
oar_tensor *oar_batch_norm_counted(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, oar_tensor *running_mean,
                                   oar_tensor *running_var, oar_tensor *num_batches_tracked, bool training,
                                   double momentum, double eps);

/* The dtype of batch_norm's per-channel values (weight, bias, the hidden mean and invstd):
 * x's, or f32 for an f16/bf16 x whose first given weight, bias or running_mean is f32. */
oar_dtype oar_batch_norm_param_dtype(const oar_tensor *x, const oar_tensor *w, const oar_tensor *b,
                                     const oar_tensor *rmean);

static inline double oar_batch_norm_factor(double momentum, const oar_tensor *counter) {
    if (momentum >= 0 || !counter) return momentum;
    return 1.0 / (double)(oar_dtypes[counter->dtype].load_i64(oar_tensor_ptr(counter)) + 1);
}

#endif
