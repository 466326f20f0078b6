/* The tracer: while a trace is active on a thread, every op call records a node into a program
 * instead of running a kernel. Its outputs are symbolic tensors (shape and dtype, no storage)
 * that remember the value they stand for; real tensors reaching an op are captured as bound
 * PARAM values (made before the trace: parameters, buffers, user data) or CONST values (made
 * during it). Autograd records symbolic tensors like real ones, so oar_backward inside a trace
 * runs the ops' gradient rules and they are traced too: graph autodiff is the eager engine
 * run on symbols. */
#ifndef OAR_GRAPH_TRACE_H
#define OAR_GRAPH_TRACE_H

#include "graph/ir.h"

typedef struct oar_trace oar_trace;

/* Code that must run around every execution of a traced program, registered while tracing
 * (the optimizer refreshes its hyperparameter tensors before a run and advances its host step
 * counter after one). Registering the same (fn, user) twice keeps one. A pre hook may refuse
 * the run (its object is gone: an optimizer freed before the compiled function) with an error.
 * release (may be NULL) runs on user when the hooks are freed: the program's hold on it ends. */
typedef oar_status (*oar_run_pre_hook)(void *user);
typedef void (*oar_run_hook)(void *user);
typedef struct oar_run_hooks {
    int n, cap;
    struct oar_run_hook_entry {
        oar_run_pre_hook pre;
        oar_run_hook post, release;
        void *user;
    } *items;
} oar_run_hooks;
void oar_run_hooks_free(oar_run_hooks *h);

/* Starts tracing on this thread into a new program; traces do not nest. The sources (borrowed
 * until the trace ends) name the persistent tensors the trace binds. */
oar_trace *oar_trace_begin(const oar_state_source *const *sources, int n_sources);
/* The device of the program being traced (taken from the function's inputs; without inputs,
 * from the first tensor the function reads). Call before oar_trace_input. */
void oar_trace_set_device(oar_trace *t, oar_device dev);
/* A symbolic input of the main block, for the function's argument. */
oar_tensor *oar_trace_input(oar_trace *t, const oar_meta *m, uint32_t dyn_dims, const char *name);
/* The value standing for tensor x (capturing it if it is real); -1 with the error set when x
 * is a symbolic tensor of another trace. */
int oar_trace_value(oar_trace *t, oar_tensor *x);
/* Ends the trace: records the outputs and the gradient writes, restores parameters' .grad
 * and hands over the program and the run hooks. On failure (status != OAR_OK) everything is
 * discarded. */
oar_status oar_trace_end(oar_trace *t, oar_status status, oar_tensor *const *outputs, int n_out,
                         oar_program **program, oar_run_hooks *hooks);
/* While tracing, registers hooks around every run of the program being traced. */
oar_status oar_trace_add_run_hook(oar_run_pre_hook pre, oar_run_hook post, oar_run_hook release, void *user);
/* The trace active on this thread, or NULL. */
oar_trace *oar_trace_current(void);

/* Block scoping for control flow: ops recorded go to block b until the matching pop. */
int oar_trace_push_block(oar_trace *t);
void oar_trace_pop_block(oar_trace *t);
oar_program *oar_trace_program(oar_trace *t);
int oar_trace_block(oar_trace *t);

/* For control flow (control.c): a parameter of block b as a symbolic tensor; the tensor that
 * stands for value v (borrowed; NULL when gone); a node with sub-blocks whose outputs have the
 * given metas, recorded for autograd like an op call; memory that lives as long as the trace. */
oar_tensor *oar_trace_block_input(oar_trace *t, int block, const oar_meta *m, const char *name);
oar_tensor *oar_trace_tensor_of(oar_trace *t, int v);
oar_status oar_trace_emit(oar_trace *t, oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                          const oar_meta *meta, int n_out, const int *blocks, int n_blocks, oar_tensor **out);
void *oar_trace_alloc(oar_trace *t, size_t nbytes);

/* The dispatch hook (installed at init): records op instead of running it. */
oar_status oar_trace_op(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                        oar_tensor **out, int *n_out);

#endif
