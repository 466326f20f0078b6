/* Hooks the layers above ops install into the eager call path. */
#ifndef OAR_DISPATCH_H
#define OAR_DISPATCH_H

#include "ops/op.h"

/* Called after a successful op when grad mode is on and an input requires grad; autograd
 * installs it. It records the node and marks the outputs. */
typedef oar_status (*oar_record_fn)(oar_op_id op, oar_tensor *const *in, int n_in,
                                    const oar_attr *attrs, oar_tensor *const *out, int n_out);
void oar_dispatch_set_recorder(oar_record_fn fn);
void oar_registry_init(void);

#endif
