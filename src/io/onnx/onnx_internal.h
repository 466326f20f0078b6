/* ONNX import, internal: the loaded model (onnx_model.c), tensors from TensorProto
 * (onnx_tensor.c), the operator translations (onnx_ops*.c) and the interpreter that the tracer
 * records into a program (onnx_run.c).
 *
 * Route: the ONNX graph is checked and sorted once at load; a compiled function (oar_jit) whose
 * body interprets the graph node by node with oar's public ops is traced per input signature,
 * so every pass, the planner and the executor apply unchanged. A node whose inputs are all
 * known (initializers, Constant, Shape of a static shape, and whatever is computed from them
 * only) runs eagerly while the trace is paused, its results entering the program as constants:
 * that is the load-time folding of shape arithmetic, general rather than a list of cases. */
#ifndef OAR_IO_ONNX_INTERNAL_H
#define OAR_IO_ONNX_INTERNAL_H

#include "graph/jit.h"
#include "tensor/tensor.h"

#include "onnx.pb-c.h"

#define OX_MAX_IO JIT_MAX_IO
#define OX_MAX_NODE_IO 512 /* inputs or outputs of one node (Concat, Sum, Split) */

#define OX_MAX_DEPTH 16 /* subgraphs nested in subgraphs */

typedef struct ox_node {
    const Onnx__NodeProto *p;
    int n_in, n_out;
    int *in, *out;        /* value ids; -1: an absent optional input/output ("") */
    const struct ox_op *op;
    int n_cap;
    int *cap;             /* values of enclosing graphs its subgraphs read (ONNX's outer scope) */
    int n_sub;
    struct ox_graph *sub[2]; /* If: then_branch, else_branch; Loop: body */
} ox_node;

/* What a graph input or output holds: a tensor, a sequence of tensors, or an optional of either. */
typedef enum ox_kind { OX_TENSOR = 0, OX_SEQ, OX_OPT_TENSOR, OX_OPT_SEQ } ox_kind;

typedef struct ox_io {
    const char *name;
    int value;
    ox_kind kind;
    oar_dtype dtype;      /* OAR_DTYPE_COUNT: not given (of a sequence or optional: its elements') */
    int ndim;
    int64_t shape[OAR_MAX_DIMS]; /* -1: free */
} ox_io;

/* A graph: the model's, or a subgraph of a control-flow node. Value ids are the model's (one
 * space over every graph), so a subgraph reads an outer value as vals[id] like its own. */
typedef struct ox_graph {
    const Onnx__GraphProto *p;
    int n_nodes;
    ox_node *nodes;        /* in a topological order */
    int n_init;
    int *init_value;
    oar_tensor **init;     /* untracked references, one per initializer */
    int n_in, n_out;       /* subgraphs only: the model's are oar_onnx_model.in/out */
    ox_io *in, *out;
} ox_graph;

/* A compiled function for one set of values of the value inputs (all of them when there are none). */
#define OX_MAX_VARIANTS 8
typedef struct ox_variant {
    const struct oar_onnx_model *m;
    oar_tensor *values[OX_MAX_IO]; /* per graph input: its value (untracked) if a value input, else NULL */
    oar_jit *jit;                  /* takes the other inputs, in order (a sequence's elements in its place) */
    uint64_t last_use;
    /* Sequences and optionals at the boundary (oar_onnx_run_values): the jit takes and gives
     * them flattened. Per graph input of such a type: its tensors (-1: an empty optional). Per
     * output: what it was when the variant was first run (probed: run once untraced to learn it). */
    int in_n[OX_MAX_IO];
    ox_kind out_kind[OX_MAX_IO];   /* OX_TENSOR, OX_SEQ, or OX_OPT_TENSOR for an empty optional */
    int out_n[OX_MAX_IO];          /* tensors given for output k */
    bool probing, probed;
} ox_variant;

struct oar_onnx_model {
    Onnx__ModelProto *proto;
    int64_t opset;         /* of the default domain (ai.onnx) */
    int n_values;
    const char **value_names;
    bool *used;            /* per value: some node or graph output reads it */
    ox_graph g;            /* the main graph (its subgraphs hang from its nodes) */
    int n_in, n_out;
    ox_io in[OX_MAX_IO], out[OX_MAX_IO];
    bool value_input[OX_MAX_IO]; /* the graph input feeds an input whose value must be known */
    bool seq_io;           /* an input or output is a sequence or optional (oar_onnx_run_values) */
    bool eager;            /* has operators whose output sizes depend on the data: run node by node */
    int n_value_inputs;
    oar_onnx_opts opts;
    ox_variant variants[OX_MAX_VARIANTS];
    int n_variants;
    uint64_t tick;
    ox_variant *last;      /* of the latest run */
};

/* What the importer knows of a value made by DequantizeLinear (onnx_qdq.c): its quantized source
 * q (u8/i8), f32 scale and integer zero point (0-d per tensor, or 1-d along axis), so that a Conv,
 * Gemm or MatMul reading it can run on the int8 ops from q. qop: the value is the f32 output of
 * qconv2d/qlinear (or of a Relu or Add of one), whose QuantizeLinear fuse_quant folds into the
 * epilogue. One per value id, made per trace (ox_interpret). */
typedef struct ox_qval {
    oar_tensor *q, *scale, *zero_point;
    int axis;
    bool qop;
    /* qadd: the value is Add of the two recorded values add_a and add_b (per tensor, one shape),
     * relu: then Relu of it; a QuantizeLinear of it becomes one qadd of their bytes */
    bool qadd, relu;
    int add_a, add_b;
} ox_qval;

/* A sequence, or an optional with no element (docs/onnx.md "Sequences and optionals"). Beside the
 * tensor table vals[] the interpreter keeps sq[] per value id: a value is a tensor (vals[id]), a
 * sequence (sq[id], !none: n tensors, all of dtype) or an empty optional (sq[id], none). An
 * optional that holds an element is that element. Sequence lengths are known when the program is
 * traced (the elements are values of the trace), so a sequence needs no runtime type: its ops
 * are list operations on the importer's side and tensor ops on the elements. Made from a pool
 * freed after the run (ox_seq_new). */
typedef struct ox_seq {
    bool none;             /* an optional without element */
    bool of_seq;           /* none: the optional's type is a sequence (else a tensor) */
    oar_dtype dtype;       /* the elements'; OAR_DTYPE_COUNT: not known (an empty sequence of no declared type) */
    int n;
    oar_tensor **items;
    struct ox_seq *next;   /* the pool */
} ox_seq;

/* The interpreter's tables during one run (ox_interpret): per value id. */
typedef struct ox_env {
    oar_tensor **vals;
    ox_qval *qv;
    ox_seq **sq;
    ox_seq *pool;
} ox_env;

/* A node being translated: its inputs (NULL for absent optional ones) and the outputs it must
 * write (out[k] NULL where the graph does not use output k; translations may still set it). */
typedef struct ox_ctx {
    const oar_onnx_model *m;
    const ox_node *node;
    int64_t opset;
    oar_tensor **in;
    int n_in;
    oar_tensor **out;
    int n_out;
    bool *want;            /* output k is used by the graph */
    oar_tensor **vals;     /* every value's tensor so far (subgraphs read outer ones here) */
    ox_qval *qv;           /* per value id (may be NULL) */
    ox_env *env;           /* the tables (vals, qv, sq) */
    ox_seq **sin;          /* input k's sequence or empty optional (in[k] is then NULL), else NULL */
    ox_seq **sout;         /* output k's, set by the sequence ops instead of out[k] */
} ox_ctx;

typedef oar_status (*ox_translate_fn)(ox_ctx *c);
typedef struct ox_op {
    const char *name;      /* ONNX op type */
    int since;             /* lowest opset translated (older ones are refused) */
    uint32_t known;        /* inputs whose values must be known at compile time (bit k: input k) */
    ox_translate_fn fn;
} ox_op;

/* The operator table (onnx_ops.c): NULL when op_type is not translated. */
/* The whole file at path (free() it), its size in *size; NULL with an error naming who on a
 * failure to open, read or allocate (never a part of the file). */
uint8_t *ox_read_whole(const char *who, const char *path, size_t *size);
const ox_op *ox_find_op(const char *op_type);
/* The com.microsoft operators oar translates (onnxruntime's int8 ops; onnx_ops_ms.c), or NULL. */
const ox_op *ox_find_ms_op(const char *op_type);
/* "Abs, Add, ..." for messages. */
void ox_list_ops(char *buf, size_t size);

/* Errors naming the node: "onnx: node 'conv1' (Conv, opset 11): <what>". */
oar_status ox_fail(const ox_ctx *c, oar_status s, const char *fmt, ...) OAR_PRINTF(3, 4);
#define ox_unsupported(c, ...) ox_fail((c), OAR_ERR_UNSUPPORTED, __VA_ARGS__)

/* Attributes (absent: the default). */
const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name);
int64_t ox_attr_int(const ox_ctx *c, const char *name, int64_t def);
double ox_attr_float(const ox_ctx *c, const char *name, double def);
const char *ox_attr_str(const ox_ctx *c, const char *name, const char *def, char *buf, size_t size);
/* An ints attribute into buf (at most max); returns the count, 0 when absent, -1 on error. */
int ox_attr_ints(const ox_ctx *c, const char *name, int64_t *buf, int max);
/* Input k as a known int list (its value must not depend on the graph's inputs): the count, or
 * -1 with the error set. */
int ox_known_ints(const ox_ctx *c, int k, int64_t *buf, int max);
/* Input k as a known scalar (double); false with the error set. */
bool ox_known_scalar(const ox_ctx *c, int k, double *out);
/* A dim attribute in [-rank, rank) made non-negative, or -1 with the error set. */
int ox_axis(const ox_ctx *c, int64_t axis, int rank, const char *what);

/* Tensors (onnx_tensor.c). */
bool ox_dtype_from_onnx(int32_t onnx_type, oar_dtype *out);
const char *ox_onnx_type_name(int32_t onnx_type);
/* A TensorProto as a new untracked tensor; dir: where external data files live (NULL: refused).
 * what names it in messages ("initializer 'w'"). steal: the tensor may take raw_data's buffer
 * (the proto's field is emptied) instead of copying it. */
oar_tensor *ox_tensor_from_proto(Onnx__TensorProto *t, const char *dir, const char *what, bool steal);

/* The graph reader (onnx_graph.c): the main graph and its subgraphs checked, sorted and read
 * into m (value names, nodes, initializers, inputs, outputs, m->used). */
oar_status ox_read_model_graph(oar_onnx_model *m, const char *dir);
void ox_graph_free(ox_graph *g);
/* Reads a ValueInfoProto; its type may be left out when optional (io->dtype OAR_DTYPE_COUNT). */
oar_status ox_read_io(const Onnx__ValueInfoProto *v, ox_io *io, const char *what, bool type_optional);

/* The interpreter (onnx_run.c): the traced function's body. */
oar_status ox_interpret(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);
/* Runs g's nodes in order, reading and writing the tables (g's initializers bound first). */
oar_status ox_run_graph(const oar_onnx_model *m, const ox_graph *g, ox_env *env);
/* A sequence of n (NULL) items of dtype dt from env's pool; NULL with the error set. */
ox_seq *ox_seq_new(ox_env *env, oar_dtype dt, int n);
/* Frees env's pool. */
void ox_seq_free_all(ox_env *env);
/* After a node ran: marks which of its outputs are f32 outputs of int8 ops (onnx_qdq.c). */
void ox_qdq_after(const ox_ctx *c);
/* t, made with the trace paused, as a constant of the running trace (if any). */
oar_tensor *ox_as_constant(oar_tensor *t);

#endif
