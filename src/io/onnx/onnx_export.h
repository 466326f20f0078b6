/* ONNX export, internal: the graph being written (onnx_export.c) and the translation of each oar
 * op into ONNX nodes (onnx_export_ops.c). Every message, node and tensor of the ModelProto lives
 * in one arena, freed once the file is packed. */
#ifndef OAR_IO_ONNX_EXPORT_H
#define OAR_IO_ONNX_EXPORT_H

#include "graph/ir.h"

#include "onnx.pb-c.h"

#define OXE_OPSET 17
/* The opset of a program with integer bitwise ops (BitwiseAnd/Or/Xor/Not are opset 18): its
 * reductions then take their axes as an input (oxe_opset_needed). */
#define OXE_OPSET_BITWISE 18

typedef struct oxe_graph {
    oar_arena *arena;
    const oar_program *p;
    const char **name;            /* per value id: its ONNX name (NULL until defined) */
    Onnx__NodeProto **nodes;
    size_t n_nodes, cap_nodes;
    Onnx__TensorProto **inits;
    size_t n_inits, cap_inits;
    int n_tmp;                    /* temporaries made so far ("t12") */
    int cur;                      /* the oar node being translated (messages) */
    const char **retired;         /* names of values written twice (a loop's condition): their first names, still taken */
    int n_retired;
    int opset;                    /* OXE_OPSET, or OXE_OPSET_BITWISE where the program needs it */
} oxe_graph;

/* Memory that lives until the model is written (zeroed); NULL sets OAR_ERR_OOM. */
void *oxe_alloc(oxe_graph *g, size_t n);
const char *oxe_strdup(oxe_graph *g, const char *s);

/* Names. oxe_in: the name of value v (an input of the node), "" for an absent optional input.
 * oxe_out: the name node output v gets. oxe_tmp: a fresh intermediate name. */
const char *oxe_in(oxe_graph *g, int v);
const char *oxe_out(oxe_graph *g, int v);
const char *oxe_tmp(oxe_graph *g);

/* Appends a node; NULL on OOM. Attributes are added to it afterwards. */
Onnx__NodeProto *oxe_node(oxe_graph *g, const char *op_type, const char *const *in, int n_in,
                          const char *const *out, int n_out);
/* Shorthands: one output, one or two inputs. */
Onnx__NodeProto *oxe_node1(oxe_graph *g, const char *op_type, const char *in, const char *out);
Onnx__NodeProto *oxe_node2(oxe_graph *g, const char *op_type, const char *a, const char *b, const char *out);
bool oxe_attr_int(oxe_graph *g, Onnx__NodeProto *n, const char *name, int64_t v);
bool oxe_attr_float(oxe_graph *g, Onnx__NodeProto *n, const char *name, double v);
bool oxe_attr_ints(oxe_graph *g, Onnx__NodeProto *n, const char *name, const int64_t *v, int count);
bool oxe_attr_str(oxe_graph *g, Onnx__NodeProto *n, const char *name, const char *v);

/* Initializers: a tensor's elements (any strides) as raw_data under name; an int64 vector; a
 * scalar of dtype dt. The last two return the new initializer's name, NULL on error. */
bool oxe_init_tensor(oxe_graph *g, const char *name, const oar_tensor *t);
const char *oxe_const_ints(oxe_graph *g, const int64_t *v, int n);
const char *oxe_const_scalar(oxe_graph *g, double v, oar_dtype dt);

/* ONNX's TensorProto data type for an oar dtype; 0 when ONNX has none. */
int32_t oxe_onnx_dtype(oar_dtype dt);

/* Writes node id of the program as ONNX nodes; an op without a mapping is refused with
 * OAR_ERR_UNSUPPORTED naming it and what is supported. */
oar_status oxe_translate(oxe_graph *g, int node);
/* The opset program p is written at: OXE_OPSET_BITWISE when a node is a bitwise op on integers. */
int oxe_opset_needed(const oar_program *p); /* 17, 18 (bitwise ops), or 19-25 (the low-bit dtypes) */
int oxe_ir_version(int opset);
/* "abs, add, ..." : the ops that have a mapping, for messages. */
void oxe_list_ops(char *buf, size_t size);

#endif
