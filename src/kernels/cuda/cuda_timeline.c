/* The profiler's GPU timeline: CUDA events recorded on the current stream around each op's
 * kernels, kept in a pool and resolved only when a summary or trace asks (recording never
 * waits for the GPU). Events are created on first use and reused by later runs. */
#include "cuda_backend.h"

#include <pthread.h>
#include <stdlib.h>

#define MARK_CHUNK 4096
#define MARK_CHUNKS 256 /* 1M marks a run (two per op); later ops keep only their host spans */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t *g_events[MARK_CHUNKS];
static int32_t g_used, g_created; /* marks of this run; events created so far (reused) */
static cudaEvent_t g_base;
static bool g_have_base;

static cudaEvent_t *event_at(int32_t i) { return &g_events[i / MARK_CHUNK][i % MARK_CHUNK]; }

oar_status oar_cuda_timeline_reset(void) {
    pthread_mutex_lock(&g_mu);
    g_used = 0;
    cudaError_t e = cudaSuccess;
    if (!g_have_base && (e = cudaEventCreate(&g_base)) == cudaSuccess) g_have_base = true;
    if (e == cudaSuccess) e = cudaEventRecord(g_base, oar_cuda_current_stream());
    if (e == cudaSuccess) e = cudaEventSynchronize(g_base);
    pthread_mutex_unlock(&g_mu);
    return oar_cuda_status(e, "profiler: the GPU timeline's base event");
}

int32_t oar_cuda_timeline_mark(void) {
    pthread_mutex_lock(&g_mu);
    int32_t id = 0, i = g_used;
    if (g_have_base && i < MARK_CHUNK * MARK_CHUNKS) {
        cudaEvent_t **chunk = &g_events[i / MARK_CHUNK];
        if (!*chunk) *chunk = calloc(MARK_CHUNK, sizeof(cudaEvent_t));
        bool ok = *chunk != NULL;
        if (ok && i == g_created) {
            ok = cudaEventCreate(event_at(i)) == cudaSuccess;
            if (ok) g_created++;
        }
        if (ok && cudaEventRecord(*event_at(i), oar_cuda_current_stream()) == cudaSuccess) id = ++g_used;
        else (void)cudaGetLastError(); /* a span without GPU time, and no error left behind */
    }
    pthread_mutex_unlock(&g_mu);
    return id;
}

int64_t oar_cuda_timeline_ns(int32_t from, int32_t to) {
    pthread_mutex_lock(&g_mu);
    int64_t ns = -1;
    if (from >= 0 && to > 0 && from <= g_used && to <= g_used && (from > 0 || g_have_base)) {
        cudaEvent_t a = from ? *event_at(from - 1) : g_base, b = *event_at(to - 1);
        float ms = 0;
        if (cudaEventSynchronize(b) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess)
            ns = (int64_t)((double)ms * 1e6 + 0.5);
        else (void)cudaGetLastError();
    }
    pthread_mutex_unlock(&g_mu);
    return ns;
}
