/* One thread pool for every parallel loop in oar. A loop is cut into at most one chunk per
 * thread (the cut depends only on n, grain and the thread count, so results do not depend on
 * who runs which chunk); the caller and the workers claim chunks from a shared counter, and
 * the loop ends when every chunk is done. A worker that the OS has not scheduled yet (a busy
 * machine) therefore never holds the loop up: the caller runs its chunk instead. Between
 * loops workers poll for SPIN_NS, then sleep on a condition variable. Nested loops run
 * serially, so a kernel called from a worker never oversubscribes the cores. The libraries oar
 * calls are told the thread count through a hook (OpenBLAS is kept at one thread and oar splits
 * GEMMs itself), so there is one budget of threads. */
#include "base.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* A training step issues loops microseconds apart, and waking a sleeping worker costs tens of
 * microseconds each time: with sleeping-only workers resnet20 ran 2x slower at 2 threads.
 * Polling this long first makes most wake-ups free (batch-1 inference has gaps of 30-200 us
 * between its split convolutions: docs/architecture.md); the bound keeps an idle worker's
 * cost small (OpenBLAS's workers spin for ~0.1 s, which is what this replaces). */
#define SPIN_NS 200000

#define MAX_THREADS 256

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    pthread_t threads[MAX_THREADS];
    int n_workers;           /* threads besides the caller */
    uint64_t generation;     /* bumped for each loop; read without the lock while polling */
    uint64_t start_generation; /* the generation when the workers were started */
    /* the next chunk to claim: (generation << 32) | (n_chunks << 16) | index, low 32 bits of
     * the generation. The tag keeps a late worker from claiming a chunk of a loop it did not
     * see start; the chunk count travels in the same word so a claimer reads no other field
     * before its claim succeeds. */
    uint64_t claim;
    int done;                /* chunks of the current loop finished; polled like generation */
    bool stop;               /* polled likewise */
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
/* SPIN_NS, or 0 when there are more threads than cores: a polling thread would then hold a
 * core that a thread with work needs. Written before workers start, under g_config_mu. */
static int64_t g_spin_ns;
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

/* Claims and runs chunks of loop g until none is left. The loop's fields are read only after
 * a successful claim: the loop cannot end (and the next one cannot overwrite them) before that
 * chunk is done. */
static void run_claimed(uint64_t g) {
    uint64_t c = __atomic_load_n(&P.claim, __ATOMIC_ACQUIRE);
    for (;;) {
        if ((uint32_t)(c >> 32) != (uint32_t)g) return; /* another loop's counter */
        int n_chunks = (int)((c >> 16) & 0xffff), idx = (int)(c & 0xffff);
        if (idx >= n_chunks) return;
        if (!__atomic_compare_exchange_n(&P.claim, &c, c + 1, true, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
        run_chunk(idx);
        /* release: the caller reads this chunk's results once it sees every chunk done */
        if (__atomic_add_fetch(&P.done, 1, __ATOMIC_ACQ_REL) == n_chunks) {
            pthread_mutex_lock(&P.mu);
            pthread_cond_signal(&P.done_cv);
            pthread_mutex_unlock(&P.mu);
        }
        c = __atomic_load_n(&P.claim, __ATOMIC_ACQUIRE);
    }
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* A bounded poll: each step is a pause; the clock is read only every 64 steps. Whoever polls
 * rechecks under the lock before sleeping, so polling only ever saves a sleep. */
typedef struct spin {
    int steps;
    int64_t deadline;
} spin;

static bool spin_more(spin *s) {
    if (!g_spin_ns) return false;
    cpu_relax();
    if (++s->steps % 64) return true;
    int64_t t = now_ns();
    if (!s->deadline) s->deadline = t + g_spin_ns;
    return t <= s->deadline;
}

static void *worker_main(void *arg) {
    (void)arg; /* workers are interchangeable: they claim chunks, none is assigned one */
    /* loops issued before this worker existed are not its to run; written before the thread
     * was created, and no loop can start until the pool is configured */
    uint64_t seen = P.start_generation;
    tl_in_parallel = true;
    for (;;) {
        /* the loop's fields were written before the generation's release store, and stay put
         * until this worker has finished it, so a polling worker reads them without the lock */
        uint64_t g;
        for (spin sp = {0}; (g = __atomic_load_n(&P.generation, __ATOMIC_ACQUIRE)) == seen &&
                            !__atomic_load_n(&P.stop, __ATOMIC_ACQUIRE) && spin_more(&sp);) {
        }
        if (g == seen) {
            pthread_mutex_lock(&P.mu);
            while (!P.stop && (g = __atomic_load_n(&P.generation, __ATOMIC_ACQUIRE)) == seen)
                pthread_cond_wait(&P.work_cv, &P.mu);
            pthread_mutex_unlock(&P.mu);
        }
        if (__atomic_load_n(&P.stop, __ATOMIC_ACQUIRE)) break;
        seen = g;
        run_claimed(g);
    }
    return NULL;
}

static void pool_stop(void) {
    pthread_mutex_lock(&P.mu);
    __atomic_store_n(&P.stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&P.work_cv);
    pthread_mutex_unlock(&P.mu);
    for (int i = 0; i < P.n_workers; i++) pthread_join(P.threads[i], NULL);
    P.n_workers = 0;
    __atomic_store_n(&P.stop, false, __ATOMIC_RELAXED);
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
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    g_spin_ns = cores > 0 && nthreads > cores ? 0 : SPIN_NS;
    for (int i = 1; i < nthreads; i++) {
        if (pthread_create(&P.threads[P.n_workers], NULL, worker_main, (void *)(intptr_t)i) != 0)
            break; /* fewer workers is still correct */
        P.n_workers++;
    }
}

/* fork (Python's DataLoader workers, multiprocessing): the child has none of the workers, and a
 * lock a worker held at the fork would stay held. The pool's locks are taken around the fork, so
 * the child starts with them free, and the child runs serially (one thread per process, as
 * torch's workers do) until it calls oar_set_num_threads. */
static void fork_prepare(void) {
    pthread_mutex_lock(&g_config_mu);
    pthread_mutex_lock(&P.mu);
}
static void fork_parent(void) {
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&g_config_mu);
}
static void fork_child(void) {
    pthread_cond_init(&P.work_cv, NULL); /* the parent's sleeping workers are not waiters here */
    pthread_cond_init(&P.done_cv, NULL);
    P.n_workers = 0;
    if (g_nthreads) g_nthreads = 1;
    pthread_mutex_unlock(&P.mu);
    pthread_mutex_unlock(&g_config_mu);
}

static void ensure_configured(void) {
    if (__atomic_load_n(&g_nthreads, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&g_config_mu);
    if (!g_nthreads) {
        static bool fork_handlers;
        if (!fork_handlers) fork_handlers = pthread_atfork(fork_prepare, fork_parent, fork_child) == 0;
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
    __atomic_store_n(&P.done, 0, __ATOMIC_RELAXED);
    uint64_t g = P.generation + 1;
    __atomic_store_n(&P.claim, g << 32 | (uint64_t)n_chunks << 16, __ATOMIC_RELAXED);
    /* release: a worker that sees the new generation reads the fields above without the
     * lock; the lock itself is for workers that went to sleep (no lost wake-up) */
    __atomic_store_n(&P.generation, g, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&P.work_cv); /* no system call when every worker is polling */
    pthread_mutex_unlock(&P.mu);

    tl_in_parallel = true;
    run_claimed(g);
    tl_in_parallel = false;

    for (spin sp = {0}; __atomic_load_n(&P.done, __ATOMIC_ACQUIRE) < n_chunks && spin_more(&sp);) {
    }
    if (__atomic_load_n(&P.done, __ATOMIC_ACQUIRE) < n_chunks) {
        pthread_mutex_lock(&P.mu);
        while (__atomic_load_n(&P.done, __ATOMIC_ACQUIRE) < n_chunks) pthread_cond_wait(&P.done_cv, &P.mu);
        pthread_mutex_unlock(&P.mu);
    }
    pthread_mutex_unlock(&g_config_mu);
}
