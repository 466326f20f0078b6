/*
 * oar/ops.h — the op table, readable and callable at run time (included by oar.h).
 *
 * Every operator oar has is one entry of a table (src/ops/ops.def). Front ends that are
 * generated rather than written op by op (the Python bindings, docs, importers) read the
 * table here: each op's name, inputs, outputs and typed attributes, and its flags; and call
 * any op by id with its attributes given by name.
 *
 * An attribute may carry a default in the table (oar_op_attr_default; the values of the API
 * the op mirrors, torch's for most): front ends take their defaults from here, and
 * oar_op_call_named fills an attribute left out with it. Ids are stable within one build only:
 * look ops up by name.
 */
#ifndef OAR_OPS_H
#define OAR_OPS_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How many ops the table has; ids run from 0 to count - 1. */
OAR_API int oar_op_count(void);
/* The id of the op called name, or -1 (no error is set: probing is not a failure). */
OAR_API int oar_op_find(const char *name);

/* Flags, as in the table (an op may have several). */
enum {
    OAR_OP_ELEMENTWISE = 1u << 0,
    OAR_OP_INPLACE_OK = 1u << 1,   /* its output may reuse input 0's buffer */
    OAR_OP_RANDOM = 1u << 2,       /* draws from the global generator */
    OAR_OP_VIEW = 1u << 3,         /* its output shares input 0's storage */
    OAR_OP_NONDIFF = 1u << 4,      /* no gradient by nature (comparisons, argmax, floor) */
    OAR_OP_STRIDED = 1u << 5,      /* reads inputs of any layout without a copy */
    OAR_OP_AMP_ALLOW = 1u << 6,    /* autocast: safe and fast in f16/bf16 */
    OAR_OP_AMP_DENY = 1u << 7,     /* autocast: kept in f32 */
    OAR_OP_AMP_PROMOTE = 1u << 8,  /* autocast: runs in the widest input type */
    OAR_OP_QUANTIZABLE = 1u << 9,
    OAR_OP_CONTROL = 1u << 10,     /* control flow (cond, while_loop): made by oar_cond/oar_while,
                                      not callable through oar_op_call_named */
    OAR_OP_TO_DEVICE = 1u << 11,   /* outputs go to the device named by attribute 0 */
    OAR_OP_CALLBACK = 1u << 14,    /* its gradient calls a front end's function: made by
                                      oar_custom_function only */
};

/* Attribute kinds. */
typedef enum oar_op_attr_kind {
    OAR_OP_ATTR_INT = 1,   /* integers and bools */
    OAR_OP_ATTR_FLOAT,
    OAR_OP_ATTR_INTS,      /* a list of at most OAR_OP_MAX_INTS integers */
    OAR_OP_ATTR_STR,       /* at most OAR_OP_MAX_STR - 1 bytes */
    OAR_OP_ATTR_DTYPE      /* an oar_dtype */
} oar_op_attr_kind;
#define OAR_OP_MAX_INTS 16
#define OAR_OP_MAX_STR 64

typedef struct oar_op_schema {
    const char *name;            /* "conv2d" (static storage) */
    int n_inputs;                /* -1: variadic, 1 to OAR_OP_MAX_INPUTS tensors */
    int n_outputs;               /* -1: decided by the call (split, chunk, dropout) */
    int n_visible;               /* outputs returned to users; the others are kept for backward
                                    (dropout's mask); -1 where n_outputs is -1 and all are */
    int n_attrs;
    unsigned flags;              /* OAR_OP_* */
    uint32_t optional_inputs;    /* bit i: input i may be NULL (a bias) */
    uint32_t mutated_inputs;     /* bit i: the op writes input i in place (running statistics,
                                    optimizer state) */
    bool differentiable;         /* has a gradient rule */
} oar_op_schema;
#define OAR_OP_MAX_INPUTS 64

/* The schema of op id; OAR_ERR_INVALID_ARG for an id out of range. */
OAR_API oar_status oar_op_schema_get(int op, oar_op_schema *out);
/* Attribute i of op id: its name (static storage) and kind; NULL / 0 (error set) when out of
 * range. */
OAR_API const char *oar_op_attr_name(int op, int i);
OAR_API oar_op_attr_kind oar_op_attr_kind_of(int op, int i);
/* Attribute i's default as attribute text ("1e-05", "1,1" for ints, "true"/"false" or a number
 * for an int, a word for a string, "f32" for a dtype; static storage), or NULL: it has none and
 * must be given. NULL with an error set when out of range (oar_last_status tells). */
OAR_API const char *oar_op_attr_default(int op, int i);

/* One attribute by name, for oar_op_call_named. Set the field its kind reads. An INT is
 * accepted for a FLOAT attribute, and an integral FLOAT for an INT one; a list for INTS. */
typedef struct oar_op_attr_value {
    const char *name;
    oar_op_attr_kind kind;
    int64_t i;                   /* INT, DTYPE */
    double f;                    /* FLOAT */
    const int64_t *ints;         /* INTS: n_ints entries */
    int n_ints;
    const char *s;               /* STR */
} oar_op_attr_value;

/* Calls op id eagerly (recorded by autograd as any op call, traced while tracing): in has the
 * op's inputs (NULL for an absent optional one), attrs the attributes of its schema by name,
 * in any order (every one without a default; one left out takes its default). out receives the visible outputs as new references the caller owns (not
 * tracked by an open scope); *n_out is out's capacity on entry and the count on return.
 * Errors name the op: an unknown or missing attribute (listing the schema), a value of the
 * wrong kind, the op's own shape and dtype checks. */
OAR_API oar_status oar_op_call_named(int op, oar_tensor *const *in, int n_in, const oar_op_attr_value *attrs,
                                     int n_attrs, oar_tensor **out, int *n_out);

#ifdef __cplusplus
}
#endif
#endif /* OAR_OPS_H */
