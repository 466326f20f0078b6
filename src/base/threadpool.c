/* One thread pool for every parallel loop in oar. The caller runs a share of the work itself;
 * workers sleep on a condition variable between loops. Nested loops run serially, so a kernel
 * called from a worker never oversubscribes the cores. The libraries oar calls (OpenBLAS,
 * oneDNN) are told the same thread count through a hook, so there is one budget of threads. */
#include "base.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t threads[MAX_THREADS];
    int n_workers;           /* threads besides the caller */
    uint64_t generation;     /* bumped for each loop */
    uint64_t start_generation; /* the generation when the workers were started */
    int pending;             /* workers still running the current loop */
    bool stop;
    /* the current loop */
    oar_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int n_chunks;
} pool;

static pool P = {.mu = PTHREAD_MUTEX_INITIALIZER,
                 .work_cv = PTHREAD_COND_INITIALIZER,
                 .done_cv = PTHREAD_COND_INITIALIZER};
static int g_nthreads = 0;        /* 0: not decided yet */
static pthread_mutex_t g_config_mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local bool tl_in_parallel;
#define MAX_LIBRARY_HOOKS 4
static void (*g_library_hooks[MAX_LIBRARY_HOOKS])(int);
static int g_n_library_hooks;

static void call_library_hooks(int n) {
    for (int i = 0; i < g_n_library_hooks; i++) g_library_hooks[i](n);
}

static void run_chunk(int idx) {
    int64_t b = (int64_t)idx * P.chunk;
    int64_t e = b + P.chunk < P.n ? b + P.chunk : P.n;
    if (b < e) P.fn(P.ctx, b, e);
}

static void *worker_main(void *arg) {
    int id = (int)(intptr_t)arg; /* 1..n_workers; the caller is 0 */
    /* loops issued before this worker existed are not its to run; written before the thread
     * was created, and no loop can start until the pool is configured */
    uint64_t seen = P.start_generation;
    tl_in_parallel = true;
    pthread_mutex_lock(&P.mu);
    for (;;) {
        while (!P.stop && P.generation == seen) pthread_cond_wait(&P.work_cv, &P.mu);
        if (P.stop) break;
        seen = P.generation;
        int n_chunks = P.n_chunks;
        pthread_mutex_unlock(&P.mu);
        if (id < n_chunks) run_chunk(id);
        pthread_mutex_lock(&P.mu);
        if (--P.pending == 0) pthread_cond_signal(&P.done_cv);
    }
    pthread_mutex_unlock(&P.mu);
    return NULL;
}

static void pool_stop(void) {
    pthread_mutex_lock(&P.mu);
    P.stop = true;
    pthread_cond_broadcast(&P.work_cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < P.n_workers; i++) pthread_join(P.threads[i], NULL);
    P.n_workers = 0;
    P.stop = false;
}

static int default_threads(void) {
    const char *env = getenv("OAR_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env) > MAX_THREADS ? MAX_THREADS : atoi(env);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)(n > MAX_THREADS ? MAX_THREADS : n) : 1;
}

static void pool_start(int nthreads) {
    P.n_workers = 0;
    P.start_generation = P.generation;
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&P.threads[P.n_workers], NULL, worker_main, (void *)(intptr_t)i) != 0)
            break; /* fewer workers is still correct */
        P.n_workers++;
    }
}

static void ensure_configured(void) {
    if (__atomic_load_n(&g_nthreads, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_config_mu);
    if (!g_nthreads) {
        int n = default_threads();
        pool_start(n);
        call_library_hooks(n);
        __atomic_store_n(&g_nthreads, n, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_config_mu);
}

void oar_threads_add_library_hook(void (*hook)(int nthreads)) {
    if (!hook) return;
    pthread_mutex_lock(&g_config_mu);
    OAR_ASSERT(g_n_library_hooks < MAX_LIBRARY_HOOKS);
    g_library_hooks[g_n_library_hooks++] = hook;
    int n = g_nthreads;
    pthread_mutex_unlock(&g_config_mu);
    if (n) hook(n); /* threads were configured before the hook arrived */
}

oar_status oar_set_num_threads(int n) {
    if (n < 1 || n > MAX_THREADS)
        return oar_error(OAR_ERR_INVALID_ARG,
                         "oar_set_num_threads: expected 1 <= n <= %d, got %d", MAX_THREADS, n);
    if (tl_in_parallel)
        return oar_error(OAR_ERR_STATE, "oar_set_num_threads: cannot be called inside a parallel loop");
    ensure_configured();
    pthread_mutex_lock(&g_config_mu);
    if (n != g_nthreads) {
        pool_stop();
        pool_start(n);
        __atomic_store_n(&g_nthreads, n, __ATOMIC_RELEASE);
    }
    call_library_hooks(n);
    pthread_mutex_unlock(&g_config_mu);
    return OAR_OK;
}

int oar_get_num_threads(void) {
    ensure_configured();
    return g_nthreads;
}

void oar_parallel_for(int64_t n, int64_t grain, oar_range_fn fn, void *ctx) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    ensure_configured();
    int nt = P.n_workers + 1;
    if (tl_in_parallel || nt == 1 || n <= grain) {
        fn(ctx, 0, n);
        return;
    }
    int64_t max_chunks = (n + grain - 1) / grain;
    int n_chunks = max_chunks < nt ? (int)max_chunks : nt;
    /* One loop at a time uses the pool; a second caller thread runs its loop serially. */
    if (pthread_mutex_trylock(&g_config_mu) != 0) {
        fn(ctx, 0, n);
        return;
    }
    pthread_mutex_lock(&P.mu);
    P.fn = fn;
    P.ctx = ctx;
    P.n = n;
    P.n_chunks = n_chunks;
    P.chunk = (n + n_chunks - 1) / n_chunks;
    P.pending = P.n_workers;
    P.generation++;
    pthread_cond_broadcast(&P.work_cv);
    pthread_mutex_unlock(&P.mu);

    tl_in_parallel = true;
    run_chunk(0);
    tl_in_parallel = false;

    pthread_mutex_lock(&P.mu);
    while (P.pending > 0) pthread_cond_wait(&P.done_cv, &P.mu);
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&g_config_mu);
}
