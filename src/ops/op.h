/* The operator contract. Every operator is one oar_op_def (schema, shape/dtype inference,
 * reference kernel, gradient rule, flags), listed once in ops.def. Fast kernels for an op
 * are registered separately by backends and checked against the reference by the sweep. */
#ifndef OAR_OP_H
#define OAR_OP_H

#include "tensor/tensor.h"

/* ---- attributes: typed values, positional per the op's schema */
#define OAR_MAX_ATTRS 8
#define OAR_ATTR_MAX_INTS 16
#define OAR_ATTR_STR_CAP 64

typedef enum oar_attr_kind {
    OAR_ATTR_NONE = 0,
    OAR_ATTR_INT,     /* also bools and dtypes */
    OAR_ATTR_FLOAT,
    OAR_ATTR_INTS,    /* up to OAR_ATTR_MAX_INTS */
    OAR_ATTR_STR,
    OAR_ATTR_DTYPE,   /* an oar_dtype in .i; written by name ("f32") in text and model files */
} oar_attr_kind;

typedef struct oar_attr {
    oar_attr_kind kind;
    int n; /* OAR_ATTR_INTS: entries used */
    union {
        int64_t i;
        double f;
        int64_t ints[OAR_ATTR_MAX_INTS];
        char s[OAR_ATTR_STR_CAP];
    };
} oar_attr;

/* def: the default as attribute text ("1e-05", "1,1", "zeros", "true"), NULL when the
 * attribute must be given. The one source of the defaults every front end shows (docs/adding-ops.md). */
typedef struct oar_attr_schema {
    const char *name;
    oar_attr_kind kind;
    const char *def;
} oar_attr_schema;

oar_attr oar_attr_int(int64_t v);
oar_attr oar_attr_float(double v);
oar_attr oar_attr_ints(const int64_t *v, int n);   /* n > OAR_ATTR_MAX_INTS is truncated: check first */
oar_attr oar_attr_dims(const int *dims, int n);
oar_attr oar_attr_str(const char *s);
oar_attr oar_attr_dtype(oar_dtype dt);

/* ---- metadata produced by inference */
typedef struct oar_meta {
    oar_dtype dtype;
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
} oar_meta;

#define OAR_MAX_OUTPUTS 64 /* for variadic outputs (split, chunk) */
#define OAR_MAX_INPUTS 64  /* for variadic inputs (concat, stack) */

/* ---- per-run values of a device kernel replayed in a graph. A device kernel of an op with
 * host_inputs reads them on the host when launched, and a random op's kernel takes the
 * generator counters reserved for its call; a replay would repeat them. So the executor calls
 * such a kernel (its entry's graph_params) in two phases: PREPARE does the host side of one run
 * (reads and updates the host inputs; a random op's counters are reserved in ctx->rng) and
 * writes the values its launches need into host[0, cap), setting used, with no launch; LAUNCH
 * (while recording) launches reading those values from dev, where the executor copies host
 * before every replay, and leaves the host inputs alone. */
typedef enum oar_kparams_phase { OAR_KPARAMS_PREPARE = 1, OAR_KPARAMS_LAUNCH } oar_kparams_phase;
typedef struct oar_kparams {
    oar_kparams_phase phase;
    void *host;         /* host memory, cap bytes */
    void *dev;          /* device memory, cap bytes, at a fixed address */
    /* cap: OAR_KPARAMS_PER_INPUT bytes per input of the op */
    size_t cap, used;
} oar_kparams;
#define OAR_KPARAMS_PER_INPUT 256

/* ---- kernel context: everything a kernel may use besides its tensors (no globals) */
typedef struct oar_kctx {
    int nthreads;
    oar_rng_state rng;  /* counters reserved for this call (random ops) */
    oar_device device;  /* where the kernel runs (its key input's device) */
    void *stream;       /* that device's stream to launch on (a cudaStream_t; NULL on the CPU) */
    oar_kparams *params; /* NULL: a plain call; else a graph's phase (device kernels of host_inputs ops) */
} oar_kctx;

typedef oar_status (*oar_infer_fn)(oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                   oar_meta *out, int *n_out);
/* Outputs are allocated contiguous from inference; inputs are contiguous unless the op is
 * OAR_OPF_STRIDED. */
typedef oar_status (*oar_kernel_fn)(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                    oar_tensor *const *out, int n_out, const oar_attr *attrs);
/* View ops fill out's shape, strides and offset; out already shares in[0]'s storage. */
typedef oar_status (*oar_view_fn)(oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                  oar_tensor *const *out, int n_out);
typedef bool (*oar_supports_fn)(oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *attrs);

/* ---- gradient rules: written with public op calls so they serve eager, graph and
 * higher-order gradients alike. They run inside a scope: temporaries need no release, and
 * the tensors stored in gin[] are borrowed (the engine takes its own reference). */
typedef struct oar_grad_ctx {
    const oar_attr *attrs;
    oar_tensor *const *in;   /* the op's inputs */
    int n_in;
    oar_tensor *const *out;  /* the op's outputs (differentiable aliases) */
    int n_out;
    oar_tensor *const *gout; /* gradient of each output; NULL where none flowed */
    const bool *needs;       /* needs[i]: input i wants a gradient */
    oar_tensor **gin;        /* rule writes gradients here (NULL means zero) */
} oar_grad_ctx;
typedef oar_status (*oar_grad_fn)(oar_grad_ctx *g);

/* ---- flags */
enum {
    OAR_OPF_ELEMENTWISE = 1u << 0,
    OAR_OPF_INPLACE_OK = 1u << 1,   /* output may reuse input 0's buffer */
    OAR_OPF_RANDOM = 1u << 2,       /* draws from the generator: ctx->rng */
    OAR_OPF_VIEW = 1u << 3,         /* output aliases input 0 (view fn, no kernel) */
    OAR_OPF_NONDIFF = 1u << 4,      /* not differentiable by nature (comparisons, argmax...) */
    OAR_OPF_STRIDED = 1u << 5,      /* reference kernel reads inputs of any strides */
    /* AMP class (include/oar/amp.h); none of the three: follow the inputs' dtype */
    OAR_OPF_AMP_ALLOW = 1u << 6,    /* autocast runs it in f16/bf16 (matmul, conv...) */
    OAR_OPF_AMP_DENY = 1u << 7,     /* autocast runs it in fp32 (reductions, norms, losses) */
    OAR_OPF_AMP_PROMOTE = 1u << 8,  /* autocast runs it in the widest input type (concat, add) */
    OAR_OPF_QUANTIZABLE = 1u << 9,
    OAR_OPF_CONTROL = 1u << 10,     /* control flow (cond, while_loop): a program node with sub-blocks,
                                       made by oar_cond/oar_while, never called through dispatch */
    OAR_OPF_TO_DEVICE = 1u << 11,   /* outputs go to the device named by attribute 0 (to_device);
                                       its reference kernel serves every device */
    OAR_OPF_AMP_DENY_F16 = 1u << 12,/* keep in fp32 under f16 only (overflows f16's range; bf16 has
                                       f32's): exp, log, pow... follow under bf16 */
    OAR_OPF_AMP_MIXED = 1u << 13,   /* follow: takes an f16/bf16 input with f32 parameters and statistics
                                       (batch_norm); fp32 for inputs on a device whose kernels do not
                                       yet (CUDA), where autocast casts as for AMP_DENY */
    OAR_OPF_CALLBACK = 1u << 14,    /* its gradient calls a front end's function (custom_function):
                                       random inputs cannot make one, tests/test_custom_function.c does */
};

typedef struct oar_op_def {
    const char *name;
    int n_inputs;       /* -1: variadic (1..OAR_MAX_INPUTS) */
    int n_outputs;      /* -1: decided by inference */
    int n_visible;      /* outputs returned to users (the rest are saved for backward); 0 = all */
    int key_input;      /* input whose dtype selects the kernel */
    int n_attrs;
    oar_attr_schema attrs[OAR_MAX_ATTRS];
    unsigned flags;
    uint32_t ref_dtypes; /* dtypes (of the key input) the reference kernel handles */
    uint32_t optional_inputs; /* bit i: input i may be NULL (e.g. a bias) */
    uint32_t unsaved_inputs;  /* bit i: the rule never reads input i (e.g. running stats
                                 updated in place): not kept for backward, not version-checked */
    uint32_t mutated_inputs;  /* bit i: the kernel writes input i in place (running stats,
                                 optimizer state); programs keep such nodes and order them */
    uint32_t host_inputs;     /* bit i: input i stays in host memory whatever the device (small
                                 hyper-parameter tensors the launching code reads) */
    oar_infer_fn infer;
    oar_kernel_fn reference;
    oar_view_fn view;
    oar_grad_fn grad;
    /* OAR_OPF_RANDOM: how many generator counters the kernel uses for these outputs; NULL means
     * one per element of output 0. A call that draws nothing (dropout in evaluation) must report
     * 0, or it would advance the generator and change every later random op (resume, eval). */
    int64_t (*draws)(oar_tensor *const *out, int n_out, const oar_attr *attrs);
} oar_op_def;

/* Attributes as text (attr_text.c): "dims=0,2 keepdim=1 eps=1e-05 equation=ij,jk->ik". */
oar_status oar_attrs_parse(const oar_op_def *d, const char *text, oar_attr *out);
int oar_attrs_format(const oar_op_def *d, const oar_attr *a, char *buf, size_t size);
/* Attribute i's default from its schema (an error where it has none). */
oar_status oar_attr_default(const oar_op_def *d, int i, oar_attr *out);

/* ---- the table (generated from ops.def) */
typedef enum oar_op_id {
#define OAR_OP(name) OAR_OP_##name,
#include "ops/ops.def"
#undef OAR_OP
    OAR_OP_COUNT
} oar_op_id;

#define OAR_OP(name) extern const oar_op_def oar_opdef_##name;
#include "ops/ops.def"
#undef OAR_OP

extern const oar_op_def *const oar_op_table[OAR_OP_COUNT];
int oar_op_find(const char *name); /* -1 if unknown */

/* ---- kernels registered by backends */
typedef struct oar_kernel_entry {
    oar_device device;
    uint32_t dtypes;        /* OAR_DTYPE_BIT mask of the key input's dtype */
    const char *impl;       /* "reference", "avx2", "openblas", "onednn", ... */
    int priority;           /* higher wins; reference is 0 */
    oar_kernel_fn fn;
    oar_supports_fn supports; /* NULL: supports every input the dtype mask admits */
    bool graph_params;        /* a device kernel of a host_inputs or random op that honors
                                 ctx->params, so graphs record it (oar_kparams) */
} oar_kernel_entry;
oar_status oar_register_kernel(oar_op_id op, oar_kernel_entry e);
/* Kernels of op, best first (reference included). */
int oar_op_kernels(oar_op_id op, const oar_kernel_entry **out);
/* The same during registration (from an init function: no oar_init). */
int oar_op_kernels_so_far(oar_op_id op, const oar_kernel_entry **out);
/* Selects the kernel dispatch would use, or NULL (error set). */
const oar_kernel_entry *oar_select_kernel(oar_op_id op, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *attrs);

/* The device a call runs on: the first input's that is not the host, else the host. A 0-d
 * host tensor may join a call on another device (a scalar, as in torch): dispatch copies it
 * over; other inputs must all be on the call's device (except an op's host_inputs). */
static inline oar_device oar_call_device(oar_tensor *const *in, int n_in) {
    for (int i = 0; i < n_in; i++)
        if (in[i] && in[i]->device != OAR_CPU) return in[i]->device;
    return OAR_CPU;
}

/* ---- calling ops */
/* The full eager path: validate, infer, allocate (or view), dispatch, record for autograd.
 * out receives *n_out new, untracked references; *n_out is capacity on entry. */
oar_status oar_op_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                       oar_tensor **out, int *n_out);
/* Convenience for single-result ops: the first output, tracked in the current scope. */
oar_tensor *oar_op_call1(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs);
/* Validates inputs against the schema and runs inference only. */
oar_status oar_op_infer(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *attrs,
                        oar_meta *out, int *n_out);
/* Runs one specific kernel on prepared outputs (the sweep compares kernels with this). */
oar_status oar_op_run_kernel(oar_op_id op, const oar_kernel_entry *k, oar_tensor *const *in,
                             int n_in, oar_tensor *const *out, int n_out, const oar_attr *attrs);

/* ---- helpers for op families */
/* Error in the house style: "<op>: expected ..., got ...". */
#define OAR_FAIL(status, opname, ...) oar_error(status, opname ": " __VA_ARGS__)
/* Reduces a broadcast gradient back to shape (sums the broadcast dims). */
oar_tensor *oar_sum_to_shape(oar_tensor *g, const int64_t *shape, int ndim);
/* Common inference: output like input 0 / broadcast of all inputs. */
oar_status oar_infer_same_as_input0(oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                    oar_meta *out, int *n_out);
oar_status oar_infer_broadcast(const char *opname, oar_tensor *const *in, int n_in,
                               oar_dtype out_dtype, oar_meta *out);
/* Checks all inputs have one dtype. */
oar_status oar_check_same_dtype(const char *opname, oar_tensor *const *in, int n_in);
oar_status oar_check_float(const char *opname, const oar_tensor *t, const char *what);
/* Normalizes a list of dims (negative allowed) into a bitmask; error names the op. */
oar_status oar_dims_mask(const char *opname, const oar_attr *dims, int ndim, uint32_t *mask);
/* A dim attribute normalized against ndim (a 0-d tensor accepts 0 and -1, like torch); -1 when
 * out of range. oar_dim_error reports it in the house style. */
int oar_dim_index(int64_t dim, int ndim);
oar_status oar_dim_error(const char *opname, int64_t dim, int ndim);
/* Sets meta from a tensor. */
void oar_meta_from(oar_meta *m, const oar_tensor *t);

#endif
