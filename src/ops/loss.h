/* Helpers shared by the loss ops (loss.c, loss_ce.c) and their fast kernels (cpu_loss.c). */
#ifndef OAR_LOSS_H
#define OAR_LOSS_H

#include "ops/op.h"

/* Checks a reduction attribute (mean, sum, none). */
oar_status oar_loss_check_reduction(const char *op, int64_t r);
/* Counts targets != ignore_index and checks that they lie in [0, classes); the reference and
 * fast kernels report a bad target in the same words. target must be contiguous. */
oar_status oar_loss_count_targets(const char *op, const oar_tensor *target, int64_t classes,
                                  int64_t ignore_index, int64_t *count);

#endif
