/* The executor: a program prepared into a flat list of instructions (kernel pointer, input
 * and output tensor headers pointing into one planned arena, attributes), all resolved when it
 * is created. A run binds the inputs, executes the list and hands out the outputs: no shape
 * inference and no allocation beyond the outputs the caller keeps. */
#ifndef OAR_GRAPH_EXEC_H
#define OAR_GRAPH_EXEC_H

#include "graph/plan.h"
#include "oar/cuda_graphs.h"

typedef struct oar_exec oar_exec;

/* Prepares p, which must stay alive and unchanged while the executor exists. The program's
 * input shapes must be concrete (see oar_program_specialize). */
oar_exec *oar_exec_create(const oar_program *p);
/* Runs once: n_in inputs matching the program's (dtype and shape), n_out new references out. */
oar_status oar_exec_run(oar_exec *e, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);
const oar_memory_plan *oar_exec_plan(const oar_exec *e);
int64_t oar_exec_measured_peak(const oar_exec *e); /* allocator peak over its runs, above the start */
void oar_exec_free(oar_exec *e);
/* Device programs: how many CUDA graphs the executor replays, and a line saying what runs
 * as plain launches and why (the node, its op and the reason). */
int oar_exec_graph_count(const oar_exec *e);
const char *oar_exec_graph_note(const oar_exec *e);

/* Runs a control-flow node (control_run.c): its blocks are interpreted op by op, reading
 * outer values from hdr (per value, as the executor holds them); the results are copied into
 * the node's output headers. */
oar_status oar_run_control(const oar_program *p, const oar_node *n, oar_tensor *const *hdr);

/* A copy of p for other input shapes: the main block's input metas become in[], dims marked
 * dynamic may change, and every node's outputs are inferred again. Fails (error set) when an
 * op refuses the new shapes or an attribute holds a size taken from a dynamic dim (a shape
 * baked in at tracing); the caller then traces again. */
oar_program *oar_program_specialize(const oar_program *p, const oar_meta *in, int n_in);

/* Reshapes recorded at tracing hold the sizes they saw (flatten of a [64, 16, 5, 5] batch records
 * shape=64,400). Where a reshape's shape has no -1 and exactly one entry equal to the traced
 * size of a dynamic dim, that entry becomes -1: at the traced shapes it gives the same size, at
 * others it gives the only size that holds the input's elements (a fixed size would fail), so
 * results never change. Gradient rules reshape with concrete sizes too, so this is what lets a
 * training step serve every batch size. Returns how many changed. */
int oar_program_generalize_reshapes(oar_program *p);

#endif
