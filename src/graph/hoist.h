/* Nodes computed once from parameters and constants (hoist.c). A main-block node whose inputs
 * are all parameters, constants or outputs of such nodes gives the same results at every run
 * as long as those parameters keep their data, so the executor runs it once and again only
 * after a parameter changed (its storage or the storage's version). Folded conv + batch-norm
 * weights are the case this is for: the pass emits ordinary nodes and they cost nothing per
 * run. The planner keeps the outputs of such nodes out of the arena (class persistent). */
#ifndef OAR_GRAPH_HOIST_H
#define OAR_GRAPH_HOIST_H

#include "graph/ir.h"

/* Per node (n_nodes entries, malloc'd; NULL with the error set on OOM): whether it is computed
 * once. Excluded: control flow, random and mutating ops, nodes reading a parameter some node of
 * the program mutates, nodes whose outputs (through any alias) are block outputs or gradient
 * writes or are overwritten in place by a node that is not computed once, and nodes with no
 * inputs (constant folding's business). */
bool *oar_program_hoisted_nodes(const oar_program *p);

#endif
