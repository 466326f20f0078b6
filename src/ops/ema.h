/* The ema_update op: a running average updated in place, as a registered op, so the same call
 * runs eagerly and is recorded by the tracer (a host-side copy_ into a buffer cannot be traced:
 * it would happen once, at trace time). SyncBatchNorm's running statistics use it. */
#ifndef OAR_OPS_EMA_H
#define OAR_OPS_EMA_H

#include "tensor/tensor.h"

/* avg = avg * (1 - momentum) + value * (momentum * scale), in place; f32, the same number of
 * elements (value's shape may differ, e.g. [1, C, 1] for a [C] average), avg contiguous. */
oar_status oar_ema_update_(oar_tensor *avg, oar_tensor *value, double momentum, double scale);

#endif
