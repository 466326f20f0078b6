/* The model files of an exported program (docs/model-format.md): `path.json` holds the program
 * (versioned, readable: inputs and outputs with names, dtypes and shapes, parameters and
 * constants by name, the metas of every other value, and the blocks with their nodes: op names,
 * value ids, attributes by name) and `path.safetensors` the tensors of its parameters and
 * constants. Both files are written atomically (temporary file, fsync, rename).
 *
 * Loading trusts nothing in either file: every field is checked (format and version, ids,
 * op names, attribute kinds against the op's schema, dtypes, ranks, sizes), every parameter
 * must be in the weights with its dtype and shape (all differences reported in one message),
 * and the program must pass oar_program_verify, which re-runs inference on every node.
 * Messages name the file and say what was expected and what was found. Everything needs cJSON:
 * without it these calls fail with OAR_ERR_UNSUPPORTED. */
#ifndef OAR_GRAPH_SERIALIZE_H
#define OAR_GRAPH_SERIALIZE_H

#include "graph/ir.h"

#define OAR_PROGRAM_FORMAT "oar.program"
#define OAR_PROGRAM_VERSION 1
/* The largest program file read (the weights file has safetensors' own limits). */
#define OAR_PROGRAM_MAX_JSON_BYTES (1ull << 30)

/* Saves the program's live part: the main block's inputs and outputs, the nodes reachable from
 * the main block (dead nodes are skipped), and the parameters and constants they use (a tensor
 * bound to two values is stored once). Value ids are renumbered densely in their original order,
 * so a program without dead values keeps its ids. Gradient writes (training programs) are not
 * saved. input_names / output_names give one name per main-block input / output; NULL uses the
 * inputs' own names (else "input<i>") and "output<i>". Names must be non-empty, distinct and
 * valid UTF-8. The program must verify. Writes the weights first, then the program. The
 * "closure" attribute of control flow (state of the tracing process) is saved as 0. */
oar_status oar_program_save(const oar_program *p, const char *path, const char *const *input_names,
                            const char *const *output_names);

/* The names a loaded program was saved with, in main-block order. The arrays and strings live in
 * the program's arena (freed with it); input i's name is also the name of its value. */
typedef struct oar_program_io {
    int n_inputs, n_outputs;
    const char *const *input_names;
    const char *const *output_names;
} oar_program_io;

/* Loads path.json and path.safetensors; NULL with the error set on any problem. */
oar_program *oar_program_load(const char *path);
/* The same from memory (the fuzzer's entry point): the bytes of the two files. weights NULL
 * with weights_len 0 stands for no weights at all (a program without parameters). */
oar_program *oar_program_load_buffers(const char *json, size_t json_len, const void *weights, size_t weights_len);
/* Both also give the input and output names when io is not NULL. */
oar_program *oar_program_load_io(const char *path, oar_program_io *io);
oar_program *oar_program_load_buffers_io(const char *json, size_t json_len, const void *weights,
                                         size_t weights_len, oar_program_io *io);

/* A model path in either form a user gives ("dir/model", "dir/model.json" or
 * "dir/model.safetensors"): the length of its stem ("dir/model"), and the stem with suffix
 * appended (malloc'd; NULL when out of memory). */
size_t oar_model_stem_len(const char *path);
char *oar_model_file(const char *path, const char *suffix);

#endif
