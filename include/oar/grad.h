/* Setting a leaf's accumulated gradient (torch's `p.grad = g`): optimizers and gradient
 * surgery written by front ends assign gradients they computed themselves. Included by oar.h. */
#ifndef OAR_GRAD_H
#define OAR_GRAD_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Makes grad (same shape, dtype and device as t; NULL drops the gradient, like oar_zero_grad)
 * the accumulated gradient of the leaf t. t keeps a reference to grad itself, so a later
 * backward adds into grad's storage, as torch does; a non-contiguous grad is copied first.
 * Refused while tracing (the assignment would happen once, at tracing, not at every run). */
OAR_API oar_status oar_grad_set(oar_tensor *t, oar_tensor *grad);

#ifdef __cplusplus
}
#endif

#endif /* OAR_GRAD_H */
