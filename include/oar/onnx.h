/* ONNX import (src/io/onnx, docs/onnx.md): a model file from PyTorch or another framework runs
 * as an oar program, compiled by the static-graph machinery (passes, memory planner, executor).
 * Built when protobuf-c is found; without it every function here fails with
 * OAR_ERR_UNSUPPORTED and says so. */
#ifndef OAR_ONNX_H
#define OAR_ONNX_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oar_onnx_model oar_onnx_model;

typedef struct oar_onnx_opts {
    oar_build_strategy strategy; /* passes run on each compiled program; zeroed: the defaults */
} oar_onnx_opts;

/* Loads and checks a model: the protobuf, the graph (every value defined once, no cycles), the
 * initializers (raw_data, typed fields or external data files next to the model), and every
 * operator against what oar supports at the model's opset. When the inputs' shapes are all
 * static the model is also compiled at once, so shape errors and unsupported attribute values
 * are reported here. Errors name the node, its op type and opset, and what is supported:
 * OAR_ERR_UNSUPPORTED for what oar lacks, OAR_ERR_FORMAT for a malformed file. NULL on error;
 * opts may be NULL. */
OAR_API oar_onnx_model *oar_onnx_load(const char *path, const oar_onnx_opts *opts);
/* The same from memory; external data files are looked up in dir (NULL: refused). */
OAR_API oar_onnx_model *oar_onnx_load_buffer(const void *data, size_t size, const char *dir,
                                             const oar_onnx_opts *opts);
OAR_API void oar_onnx_free(oar_onnx_model *m);

/* The graph's inputs (initializers excluded) and outputs. Input i's spec: name, dtype and
 * shape, -1 for a dim the file leaves free (dim_param or no dim_value). */
OAR_API int oar_onnx_num_inputs(const oar_onnx_model *m);
OAR_API int oar_onnx_num_outputs(const oar_onnx_model *m);
OAR_API oar_status oar_onnx_input_spec(const oar_onnx_model *m, int i, oar_input_spec *out);
OAR_API const char *oar_onnx_output_name(const oar_onnx_model *m, int k); /* borrowed; NULL past the end */

/* Runs the model: in holds one tensor per input in order, out receives n_out new references.
 * Each set of input shapes is compiled once (Shape arithmetic folded for those sizes) and
 * cached, as oar_jit_call does. */
OAR_API oar_status oar_onnx_run(oar_onnx_model *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out);

/* Sequences and optionals (docs/onnx.md "Sequences and optionals"): a model whose inputs or
 * outputs include a sequence of tensors or an optional runs through oar_onnx_run_values (which
 * runs any model); oar_onnx_run refuses it. A value is a tensor, a sequence (n elements of one
 * dtype; lengths are part of what a compiled program is made for, like shapes), or an optional
 * with no element (an optional that holds one is that tensor or sequence). */
typedef enum oar_onnx_kind { OAR_ONNX_TENSOR = 0, OAR_ONNX_SEQUENCE, OAR_ONNX_NONE } oar_onnx_kind;
typedef struct oar_onnx_value {
    oar_onnx_kind kind;
    oar_tensor *tensor;   /* OAR_ONNX_TENSOR */
    int n;                /* OAR_ONNX_SEQUENCE: the length */
    oar_tensor **items;   /* its elements; in outputs an array for oar_onnx_value_clear to free */
} oar_onnx_value;
/* The inputs' and outputs' tensors together (a sequence counts its elements) must be at most 16.
 * The output tensors are new references, as oar_onnx_run's. */
OAR_API oar_status oar_onnx_run_values(oar_onnx_model *m, const oar_onnx_value *in, int n_in, oar_onnx_value *out,
                                       int n_out);
/* Drops an output value's references and array; v is then empty. */
OAR_API void oar_onnx_value_clear(oar_onnx_value *v);
/* What graph input i or output k is declared as: 0 tensor (or not given), 1 sequence, 2 optional
 * of a tensor, 3 optional of a sequence; -1 past the end. */
OAR_API int oar_onnx_input_kind(const oar_onnx_model *m, int i);
OAR_API int oar_onnx_output_kind(const oar_onnx_model *m, int k);
/* An ONNX test data file as a value of the kind above (0: a TensorProto, 1: a SequenceProto of
 * tensors, 2 or 3: an OptionalProto); its tensors are new references, clear it with
 * oar_onnx_value_clear. */
OAR_API oar_status oar_onnx_value_load(const char *path, int kind, oar_onnx_value *out);

/* The model as text: producer, IR version, opsets, inputs and outputs, operators used (count
 * per op type). snprintf-style. */
OAR_API int oar_onnx_describe(const oar_onnx_model *m, char *buf, size_t size);
/* The compiled program of the latest run (or of the load-time compile), as oar_jit_dump. */
OAR_API int oar_onnx_dump(const oar_onnx_model *m, char *buf, size_t size);
/* Saves that program as an oar model (path.json + path.safetensors, as oar_jit_save), which
 * oar_predictor_create loads. Shapes are those of the latest run. */
OAR_API oar_status oar_onnx_save_program(oar_onnx_model *m, const char *path);

/* A TensorProto file (ONNX test data: input_0.pb, output_0.pb) as a new tensor. */
OAR_API oar_tensor *oar_onnx_tensor_load(const char *path);

/* ---- export (src/io/onnx/onnx_export*.c) */
typedef struct oar_onnx_save_opts {
    const char *producer_version; /* NULL: oar's version */
    const char *dim_param;        /* name of the dynamic dims (dim_param); NULL: "batch" */
} oar_onnx_save_opts;

/* Writes the compiled function's program (the signature of its latest call) as an ONNX model,
 * opset 17: parameters and constants as raw_data initializers, inputs and outputs with the
 * function's names, dtypes and dims (dims declared -1 in the input specs as dim_param). The
 * function is traced again with only the export-safe passes (dead code, common subexpressions,
 * constant folding, redundant casts, conv + batch-norm folding, elementwise fusion, whose chains
 * are written as their ops), so no fused op of oar's reaches the file: a runtime fuses for
 * itself, and oar_onnx_load re-fuses it with the same passes.
 * Inference programs only. An op without an ONNX mapping is refused naming the op and the
 * supported ones. The file is written atomically (a temporary renamed over path). opts may be
 * NULL. */
OAR_API oar_status oar_onnx_save(oar_jit *f, const char *path, const oar_onnx_save_opts *opts);
/* The same for an oar model file (model_path.json + .safetensors, as oar_jit_save writes and the
 * predictor loads); fused ops in it are written as their ONNX decomposition. */
OAR_API oar_status oar_onnx_save_model(const char *model_path, const char *path, const oar_onnx_save_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* OAR_ONNX_H */
