/* The shared oneDNN engine, OpenMP setting, batch split and error (dnnl_engine.h). */
#include "kernels/cpu/dnnl_engine.h"

#include "kernels/cpu/cpu_kernels.h"

#ifdef OAR_HAVE_ONEDNN
#include <pthread.h>
#include <stdlib.h>
#ifdef OAR_HAVE_OPENMP
#include <omp.h>
#endif

/* oneDNN's CPU engine is stateless and thread safe, and kernels have no context object to own
 * it, hence one for the process, built once. Streams are made per call (cheap on CPU). */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t g_engine;

static oar_cpu_isa g_dnnl_level;

/* oar's ISA as oneDNN's: its AVX2 kernels for avx2, SSE4.1 (the lowest it has) for generic,
 * the CPU's best for avx512. */
static dnnl_cpu_isa_t to_dnnl(oar_cpu_isa isa) {
    return isa == OAR_CPU_ISA_GENERIC ? dnnl_cpu_isa_sse41 : isa == OAR_CPU_ISA_AVX2 ? dnnl_cpu_isa_avx2 : dnnl_cpu_isa_all;
}

static oar_cpu_isa from_dnnl(dnnl_cpu_isa_t isa) {
    if ((isa & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core) return OAR_CPU_ISA_AVX512;
    if ((isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2) return OAR_CPU_ISA_AVX2;
    return OAR_CPU_ISA_GENERIC;
}

static void engine_init(void) {
    const char *env = getenv("ONEDNN_MAX_CPU_ISA"), *env_old = getenv("DNNL_MAX_CPU_ISA");
    /* Fails (harmlessly) when something called oneDNN before oar did: its cap is fixed then. */
    if (!(env && *env) && !(env_old && *env_old)) (void)dnnl_set_max_cpu_isa(to_dnnl(oar_get_cpu_isa()));
    g_dnnl_level = from_dnnl(dnnl_get_effective_cpu_isa());
    if (dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_engine = NULL;
}

bool oar_dnnl_usable(void) {
    pthread_once(&g_once, engine_init);
    return g_engine && oar_get_cpu_isa() >= g_dnnl_level;
}

oar_cpu_isa oar_dnnl_isa(void) {
    pthread_once(&g_once, engine_init);
    return g_dnnl_level;
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
