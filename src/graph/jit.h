/* Internal layout of a compiled function (jit.c) for the files around it (export, stats). */
#ifndef OAR_GRAPH_JIT_H
#define OAR_GRAPH_JIT_H

#include "graph/exec.h"
#include "graph/trace.h"

#define JIT_MAX_IO 16      /* inputs and outputs of a compiled function */
#define JIT_MAX_ENTRIES 64 /* programs cached */
#define JIT_MAX_EXECS 4    /* concrete shapes prepared per program */
#define JIT_MAX_SOURCES 16 /* owners of persistent tensors (oar_state_source) */

typedef struct jit_exec {
    oar_meta meta[JIT_MAX_IO];
    oar_program *program;  /* the entry's program, or a specialization of it */
    oar_exec *exec;
} jit_exec;

typedef struct jit_entry {
    int n_in, n_out;
    oar_meta meta[JIT_MAX_IO];   /* signature as traced */
    uint32_t dyn[JIT_MAX_IO];    /* dims that may vary */
    oar_device device;           /* where the inputs were (the program's device) */
    oar_program *program;        /* after passes */
    oar_run_hooks hooks;
    bool *grad_cleared;          /* per gradient write: the function clears that gradient first */
    oar_tensor **clears;         /* gradients the function leaves cleared */
    int n_clears;
    jit_exec execs[JIT_MAX_EXECS];
    int n_execs;
    uint64_t last_use;
} jit_entry;

struct oar_jit {
    oar_static_fn fn;
    void *user;
    oar_jit_opts opts;
    oar_input_spec specs[JIT_MAX_IO];
    int n_specs;
    char input_names[JIT_MAX_IO][64];
    char output_names[JIT_MAX_IO][64];
    uint64_t mask;               /* passes to run */
    jit_entry entries[JIT_MAX_ENTRIES];
    int n_entries;
    int64_t n_traces;
    uint64_t tick;
    jit_entry *last;             /* the entry of the latest call (exported by oar_jit_save) */
    const oar_state_source *sources[JIT_MAX_SOURCES];
    int n_sources;
};

#endif
