/* Eager autograd: the tape is a DAG of nodes hanging off tensors' grad_fn. */
#ifndef OAR_AUTOGRAD_H
#define OAR_AUTOGRAD_H

#include "ops/op.h"

typedef struct oar_node oar_node;

/* Where an input's gradient goes: the node that produced it, or the leaf itself. */
typedef struct oar_edge {
    oar_node *node;
    int output_nr;
    oar_tensor *leaf;
} oar_edge;

struct oar_node {
    oar_node_header h;       /* first member: tensors hold nodes through it */
    oar_op_id op;
    int n_in, n_out, n_attrs;
    oar_attr *attrs;
    oar_tensor **saved_in;   /* the inputs (retained) */
    uint32_t *in_version;    /* their storage versions when recorded */
    oar_tensor **saved_out;  /* data-only aliases of the outputs (no grad_fn: no cycle) */
    oar_meta *out_meta;
    oar_edge *edges;         /* one per input */
    oar_hook_entry **out_hooks;
    uint64_t seq;            /* creation order */
    bool released;           /* saved tensors freed after a backward without retain_graph */
    void *run;               /* engine bookkeeping during one backward pass */
};

void oar_node_release_saved(oar_node *n);

/* Installed into dispatch by oar_init(). */
oar_status oar_autograd_record(oar_op_id op, oar_tensor *const *in, int n_in,
                               const oar_attr *attrs, oar_tensor *const *out, int n_out);

#endif
