/* Shared by export (export.c) and the predictor (predictor.c): what makes a program unfit for
 * export and for running from several threads at once. */
#ifndef OAR_GRAPH_EXPORT_H
#define OAR_GRAPH_EXPORT_H

#include "graph/ir.h"

/* The first live node that writes persistent state when it runs (an input its op mutates in
 * place is present: optimizer updates, batch norm in training mode updating its running
 * statistics), or -1. Batch norm outside training only reads its running statistics. */
int oar_program_state_writer(const oar_program *p);


#endif
