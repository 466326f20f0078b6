/* The deterministic switch: kernels whose sums split work by the thread count decline while it
 * is on, so results do not depend on how many threads ran them (docs/determinism.md). */
#include "base.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static int g_mode = -1; /* -1: not read from the environment yet */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void read_env(void) {
    const char *e = getenv("OAR_DETERMINISTIC");
    int v = e && *e && strcmp(e, "0") != 0;
    int unset = -1;
    __atomic_compare_exchange_n(&g_mode, &unset, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

void oar_set_deterministic(bool on) {
    pthread_once(&g_once, read_env);
    __atomic_store_n(&g_mode, on ? 1 : 0, __ATOMIC_RELAXED);
}

bool oar_get_deterministic(void) {
    pthread_once(&g_once, read_env);
    return __atomic_load_n(&g_mode, __ATOMIC_RELAXED) == 1;
}
