/* The static program (IR): SSA values, op nodes from the same registry as eager, nested
 * blocks for control flow, and parameters as named persistent values bound by reference.
 *
 * Everything is addressed by index: values, nodes and blocks live in growable tables of the
 * program, so passes can add and kill entries without invalidating ids. A node's arrays,
 * attributes and names live in the program's arena. Block 0 is the main block: its inputs
 * are the compiled function's arguments, its outputs the function's results. */
#ifndef OAR_GRAPH_IR_H
#define OAR_GRAPH_IR_H

#include "ops/op.h"

typedef enum oar_value_kind {
    OAR_VAL_INPUT = 0, /* an argument of the function (main block) or of a sub-block */
    OAR_VAL_PARAM,     /* a persistent tensor bound by reference: parameters, buffers, optimizer
                          state; read (and for mutating ops written) in place at every run */
    OAR_VAL_CONST,     /* a tensor whose data was fixed at trace time (made inside the function) */
    OAR_VAL_NODE,      /* an output of a node */
} oar_value_kind;

typedef struct oar_value {
    oar_value_kind kind;
    oar_meta meta;       /* dtype and shape (dynamic dims hold the traced size) */
    uint32_t dyn_dims;   /* bit d: dim d may differ between calls (InputSpec -1) */
    int node, out_index; /* OAR_VAL_NODE: producer */
    int block;           /* block where it is defined */
    const char *name;    /* params: dotted path; inputs: "input0"...; NULL otherwise (arena) */
    oar_tensor *tensor;  /* PARAM/CONST: the bound tensor (the program holds a reference) */
} oar_value;

typedef struct oar_node {
    oar_op_id op;
    int n_in, n_out;
    int *in;           /* value ids; -1 for an absent optional input */
    int *out;          /* value ids */
    oar_attr *attrs;   /* the op's n_attrs attributes */
    int n_blocks;
    int *blocks;       /* sub-blocks (control flow), else NULL */
    int block;         /* block that holds the node */
    bool dead;         /* killed by a pass; oar_program_compact drops it from its block */
    bool inplace;      /* set by the in-place pass: output 0 reuses input 0's buffer */
    uint8_t phase;     /* profiler phase it was traced in (forward, backward, optimizer; 0: none,
                          as for nodes passes make): the executor replays it as ranges */
} oar_node;

typedef struct oar_block {
    int parent;           /* enclosing block, -1 for the main block */
    int n_nodes, cap_nodes;
    int *nodes;           /* node ids in execution order */
    int n_in, cap_in;
    int *in;              /* block parameters (OAR_VAL_INPUT values) */
    int n_out, cap_out;
    int *out;             /* values the block yields */
} oar_block;

/* After each run, the value is made the gradient of a parameter (backward in a train step). */
typedef struct oar_grad_write {
    int value;
    oar_tensor *param;    /* a reference */
} oar_grad_write;

typedef struct oar_program {
    oar_arena *arena;
    oar_value *values;
    int n_values, cap_values;
    oar_node *nodes;
    int n_nodes, cap_nodes;
    oar_block *blocks;
    int n_blocks, cap_blocks;
    oar_grad_write *grad_writes;
    int n_grad_writes, cap_grad_writes;
    oar_device device;    /* where its values live (one device per program; 0-d host scalars and
                             ops' host inputs aside, as in eager calls) */
} oar_program;

#define OAR_MAIN_BLOCK 0

/* ---- building (ir.c). Failures set the error and return -1 / NULL. */
oar_program *oar_program_new(void);
void oar_program_free(oar_program *p);
int oar_program_add_block(oar_program *p, int parent);
/* A block parameter (for block 0: a function argument). */
int oar_program_add_input(oar_program *p, int block, const oar_meta *m, const char *name);
/* A persistent (PARAM) or constant (CONST) value bound to t; takes a reference. */
int oar_program_add_tensor(oar_program *p, oar_value_kind kind, oar_tensor *t, const char *name);
/* Appends a node to block; its outputs become new values with metas out_meta. Returns the
 * node id; out_ids (n_out entries) receives the output value ids when not NULL. */
int oar_program_add_node(oar_program *p, int block, oar_op_id op, const int *in, int n_in,
                         const oar_attr *attrs, const oar_meta *out_meta, int n_out, int *out_ids);
oar_status oar_program_add_output(oar_program *p, int block, int value);
oar_status oar_program_add_grad_write(oar_program *p, int value, oar_tensor *param);
const char *oar_program_strdup(oar_program *p, const char *s); /* copied into the arena */
/* A deep copy (bound tensors shared: the copy holds its own references). */
oar_program *oar_program_copy(const oar_program *p);

/* ---- editing (used by passes) */
/* Every use of value `from` (node inputs, block outputs, grad writes) becomes `to`. */
void oar_program_replace_uses(oar_program *p, int from, int to);
/* Drops dead nodes from their blocks. */
void oar_program_compact(oar_program *p);
/* Uses of each value over live nodes, block outputs and grad writes (counts[n_values]). */
void oar_program_use_counts(const oar_program *p, int *counts);
/* Whether a node must run for its effects even when no output is used: it mutates an input
 * in place (optimizer updates, batch-norm running stats) or draws random numbers that later
 * runs must not see again. */
bool oar_node_has_effects(const oar_program *p, const oar_node *n);
/* The inputs node n writes in place: its op's mutated_inputs, except for a batch_norm in
 * inference mode (training = 0), which only reads its running statistics. */
uint32_t oar_node_mutated_inputs(const oar_node *n);

/* ---- checking and printing */
/* Structural checks plus re-inference of every node: ids in range, inputs defined before use
 * and visible from the block, schemas and attribute kinds respected, output metas equal to
 * what inference gives. The message names the node. */
oar_status oar_program_verify(const oar_program *p);
/* Readable text, one node a line ("%7: f32[64, 10] = linear(%0, %1, %2)"); returns the length
 * it needed (like snprintf). */
int oar_program_dump(const oar_program *p, char *buf, size_t size);
void oar_meta_format(const oar_meta *m, uint32_t dyn_dims, char *buf, size_t size); /* f32[?64, 10] */
/* A shell tensor (no data) with the value's meta, for running inference. */
oar_tensor *oar_value_shell(const oar_program *p, int value);

#endif
