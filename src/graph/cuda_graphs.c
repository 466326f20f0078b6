/* The CUDA graphs switch (see oar/cuda_graphs.h) and what compiled functions report. The
 * recording and replay live in the executor (exec.c), which reaches the GPU through the
 * device table's graph entries. */
#include "graph/exec.h"
#include "graph/jit.h"

#include <stdlib.h>
#include <string.h>

#ifdef OAR_HAVE_CUDA
#define BUILT_WITH_CUDA true
#else
#define BUILT_WITH_CUDA false
#endif

static int g_enabled = -1; /* -1: not decided yet (read the environment) */

bool oar_cuda_graphs_enabled(void) {
    int on = __atomic_load_n(&g_enabled, __ATOMIC_RELAXED);
    if (on < 0) {
        const char *env = getenv("OAR_CUDA_GRAPHS");
        on = BUILT_WITH_CUDA && !(env && strcmp(env, "0") == 0);
        __atomic_store_n(&g_enabled, on, __ATOMIC_RELAXED);
    }
    return on;
}

oar_status oar_cuda_graphs_set_enabled(bool on) {
    if (on && !BUILT_WITH_CUDA)
        return oar_error(OAR_ERR_UNSUPPORTED, "oar_cuda_graphs_set_enabled: this build has no CUDA, so there are "
                                              "no CUDA graphs to switch on; rebuild with the CUDA toolkit "
                                              "(OAR_WITH_CUDA=ON)");
    __atomic_store_n(&g_enabled, on ? 1 : 0, __ATOMIC_RELAXED);
    return OAR_OK;
}

static const oar_exec *newest_exec(const oar_jit *f, int i) {
    if (!f || i < 0 || i >= f->n_entries || !f->entries[i].n_execs) return NULL;
    return f->entries[i].execs[f->entries[i].n_execs - 1].exec;
}

int oar_jit_cuda_graph_count(const oar_jit *f, int i) {
    const oar_exec *e = newest_exec(f, i);
    if (!e) return f && i >= 0 && i < f->n_entries ? 0 : -1;
    return oar_exec_graph_count(e);
}

const char *oar_jit_cuda_graph_note(const oar_jit *f, int i) {
    const oar_exec *e = newest_exec(f, i);
    if (!e) return f && i >= 0 && i < f->n_entries ? "not run yet" : "no such program";
    return oar_exec_graph_note(e);
}
