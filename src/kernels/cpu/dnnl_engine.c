/* The shared oneDNN engine, OpenMP setting, batch split and error (dnnl_engine.h). */
#include "kernels/cpu/dnnl_engine.h"

#include "kernels/cpu/cpu_kernels.h"

#ifdef OAR_HAVE_ONEDNN
#include <pthread.h>
#ifdef OAR_HAVE_OPENMP
#include <omp.h>
#endif

/* oneDNN's CPU engine is stateless and thread safe, and kernels have no context object to own
 * it, hence one for the process, built once. Streams are made per call (cheap on CPU). */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;

static void engine_init(void) {
    if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_engine = NULL;
}

dnnl_engine_t oar_dnnl_engine(void) {
    pthread_once(&g_once, engine_init);
    return g_engine;
}

/* Letting OpenMP thread oneDNN instead measured up to 8x slower at 2 threads on a busy 2-core
 * machine (ResNet-20 step 2.0 s vs 0.25 s): libgomp's workers spin between calls and starve
 * oar's pool and each other. The OpenMP thread count is per calling thread, hence the check on
 * every thread that runs a part. */
void oar_dnnl_one_omp_thread(void) {
#ifdef OAR_HAVE_OPENMP
    if (omp_get_max_threads() != 1) omp_set_num_threads(1);
#endif
}

oar_dnnl_split oar_dnnl_split_batch(int64_t n, int64_t max_parts) {
    int64_t nt = oar_get_num_threads();
    if (nt > max_parts) nt = max_parts;
#ifndef OAR_HAVE_OPENMP
    nt = 1;
#endif
    oar_dnnl_split s = {.parts = nt < n ? nt : n};
    s.q = n / s.parts, s.r = n % s.parts;
    return s;
}

oar_status oar_dnnl_fail(const char *op, dnnl_status_t st) {
    return oar_error(OAR_ERR_INTERNAL, "%s: oneDNN failed with status %d", op, (int)st);
}
#endif
