/* The shared oneDNN CPU engine and OpenMP setting (dnnl_engine.h). */
#include "kernels/cpu/dnnl_engine.h"

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
#endif
