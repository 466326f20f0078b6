/* Library initialisation: the op registry, the kernels of each backend, the autograd
 * recorder, and the shared thread budget. Runs once, on first use. */
#include "autograd/autograd.h"
#include "graph/graph_init.h"
#include "kernels/cpu/cpu_kernels.h"
#ifdef OAR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include "ops/dispatch.h"
#include "profiler/profiler.h"

#include <pthread.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ready;

static void init_once(void) {
    oar_registry_init();
    oar_cpu_kernels_init();
#ifdef OAR_HAVE_CUDA
    oar_cuda_backend_init();
#endif
    oar_dispatch_set_recorder(oar_autograd_record);
    oar_prof_init_from_env();
    oar_graph_init();
    __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

void oar_init(void) {
    if (OAR_LIKELY(__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))) return;
    pthread_once(&g_once, init_once);
}
