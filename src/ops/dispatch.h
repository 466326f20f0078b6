/* Hooks the layers above ops install into the eager call path. */
#ifndef OAR_DISPATCH_H
#define OAR_DISPATCH_H

#include "ops/op.h"

/* Called after a successful op when grad mode is on and an input requires grad; autograd
 * installs it. It records the node and marks the outputs. */
typedef oar_status (*oar_record_fn)(oar_op_id op, oar_tensor *const *in, int n_in,
                                    const oar_attr *attrs, oar_tensor *const *out, int n_out);
void oar_dispatch_set_recorder(oar_record_fn fn);
/* Runs the recorder for an op call that just made out[] (the tracer calls it for symbols). */
oar_status oar_dispatch_record(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                               oar_tensor *const *out, int n_out);
/* Called instead of the kernel path while a trace is active on the thread (graph layer). */
typedef oar_status (*oar_trace_fn)(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                   oar_tensor **out, int *n_out);
void oar_dispatch_set_tracer(oar_trace_fn fn);
/* oar_op_infer that accepts symbolic inputs. */
oar_status oar_op_infer_symbolic(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                 oar_meta *out, int *n_out);
void oar_registry_init(void);

#endif
