/* Installs the graph layer's hooks into dispatch (the tracer). Kept apart from ir.h so the
 * library's init can include it next to autograd's headers. */
#ifndef OAR_GRAPH_INIT_H
#define OAR_GRAPH_INIT_H

void oar_graph_init(void);

#endif
