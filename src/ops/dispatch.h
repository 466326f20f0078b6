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
/* copy_ into a symbolic tensor while a trace is active (graph layer: the tensor then stands for a
 * new value); without a tracer installed, the symbolic-read error. */
typedef oar_status (*oar_trace_assign_fn)(oar_tensor *dst, const oar_tensor *src);
void oar_dispatch_set_trace_assign(oar_trace_assign_fn fn);
oar_status oar_dispatch_trace_assign(oar_tensor *dst, const oar_tensor *src);
/* oar_op_infer that accepts symbolic inputs. */
oar_status oar_op_infer_symbolic(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                 oar_meta *out, int *n_out);
void oar_registry_init(void);

/* Autocast's cast policy (src/amp sets it; amp_dispatch.c applies it): while one is installed on
 * the thread, oar_op_call casts an op's inputs per cls[op] (an oar_amp_class) with cast ops
 * before running it. */
typedef struct oar_amp_policy {
    oar_dtype low;                 /* OAR_F16 or OAR_BF16 */
    uint8_t cls[OAR_OP_COUNT];
    /* per op, for LOW ops on CPU tensors: 1 = no cast when every float input is f32 (the op
     * runs in f32), since this CPU has no kernel that runs it in the low dtype for less than
     * f32 costs; an input already low still casts the others down */
    uint8_t cpu_f32[OAR_OP_COUNT];
} oar_amp_policy;
extern _Thread_local const oar_amp_policy *oar_amp_active;
/* Installs p (NULL: none) on this thread; returns the previous one. */
const oar_amp_policy *oar_dispatch_set_amp(const oar_amp_policy *p);
/* The class an op declares (its flags) for a low dtype. */
uint8_t oar_op_amp_class(oar_op_id op, oar_dtype low);
/* oar_op_call under a policy: casts the inputs, then the plain call (amp_dispatch.c). */
oar_status oar_amp_op_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                           oar_tensor **out, int *n_out);
/* oar_op_call without the policy. */
oar_status oar_op_call_plain(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                             oar_tensor **out, int *n_out);

#endif
