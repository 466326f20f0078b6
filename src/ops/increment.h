/* The increment op: adds 1 to every element of an integer tensor in place, as a registered op,
 * so the same call runs eagerly and is recorded by the tracer of the static graph (a host-side
 * store would happen once, at trace time, and never in the compiled program). */
#ifndef OAR_OPS_INCREMENT_H
#define OAR_OPS_INCREMENT_H

#include "tensor/tensor.h"

/* t += 1 in place (integer dtypes, contiguous; wraps like the dtype's two's complement). */
oar_status oar_increment_(oar_tensor *t);

#endif
