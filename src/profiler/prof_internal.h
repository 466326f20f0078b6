/* Inside the profiler: per-thread span buffers, step records, the run's state. Shared by
 * record.c (the hooks and the run), summary.c (tables) and trace.c (Chrome trace). */
#ifndef OAR_PROF_INTERNAL_H
#define OAR_PROF_INTERNAL_H

#include "base/device.h"
#include "profiler/profiler.h"

#include <pthread.h>

enum { EV_OP = 1, EV_RANGE, EV_READER, EV_SPAN };
enum { PH_NONE = 0, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_DATA };

/* One span. Strings are static (op names, kernel impls) or live in the thread's arena. */
typedef struct prof_event {
    int64_t t0, t1;      /* ns, CLOCK_MONOTONIC */
    int64_t k0, k1;      /* ops: the kernel's part (k0 == 0: none) */
    const char *name, *impl, *args;
    double flops;        /* ops: 0 when unknown */
    int64_t step;        /* the step it was recorded in */
    int32_t g0, g1;      /* ops on a device with a timeline: marks around the kernel (0: none) */
    uint8_t gdev;        /* the device of g0, g1 (oar_device) */
    uint8_t kind;        /* EV_* */
    uint8_t phase;       /* PH_*: ranges that are overview phases, and reader waits */
    uint8_t nested;      /* a phase inside another phase: not counted in the overview */
} prof_event;

#define PROF_CHUNK 2048
typedef struct prof_chunk {
    struct prof_chunk *next;
    prof_event ev[PROF_CHUNK];
} prof_chunk;

typedef struct prof_strs {
    struct prof_strs *next;
    size_t used, cap;
    char data[];
} prof_strs;

#define PROF_STACK 64
#define PROF_NAME 64
typedef struct prof_range {
    char name[PROF_NAME];
    int64_t t0;
    uint8_t phase, nested;
} prof_range;

/* A thread's buffer: written only by its thread; readers see the first `count` events. */
typedef struct prof_thread {
    struct prof_thread *next;  /* registry, append only */
    int tid;
    int dead;                  /* its thread exited (atomic): reusable once its run is over */
    char name[48];
    uint64_t gen;              /* the run its events belong to */
    prof_chunk *first, *cur;
    int cur_used;
    int64_t count;             /* published events (atomic, release) */
    int64_t dropped;
    prof_strs *strs_first, *strs_cur;
    prof_range stack[PROF_STACK];
    int depth, overflow;       /* overflow: pushes beyond PROF_STACK, popped silently */
    int open_phases;
    uint64_t stack_gen;
} prof_thread;

/* One recorded, complete step. */
typedef struct prof_step {
    int64_t index, t0, t1, reader_ns, items;
    int64_t allocs, bytes, peak, current, cached; /* memory: in this step / at its end */
    int tid;                                      /* the thread that marked it */
} prof_step;

/* Running totals over the recorded steps (the timer and memory numbers): constant memory,
 * however long the run. */
typedef struct prof_totals {
    int64_t steps, items, first, last;  /* first, last: step indices */
    double batch_sum, batch_min, batch_max, reader_sum, reader_min, reader_max, ips_sum, ips_min, ips_max;
    double allocs_sum, bytes_sum;
    int64_t max_allocs, max_bytes, peak, current, cached;
} prof_totals;

/* The run (guarded by prof_mu, except where noted). */
typedef struct prof_run {
    oar_profiler_opts opts;
    char unit[32], trace_dir[1024];
    bool running, paused, ever_started;
    uint64_t gen;             /* atomic: increments at each start */
    int64_t origin;           /* ns at start */
    int64_t cur_step, step_t0;
    int64_t reader_ns;        /* atomic: reader time in the current step */
    int64_t max_events;
    prof_totals tot;
    prof_step *steps;         /* full mode: each recorded step, for the trace (capped) */
    int64_t n_steps, cap_steps;
    int64_t alloc_base, bytes_base; /* allocator counters at the current step's start */
    int64_t gpu_base;         /* host ns when the GPU timeline's base mark completed; 0: none */
    int run_number;
} prof_run;

extern pthread_mutex_t prof_mu;
extern prof_run prof;

prof_thread *prof_threads_head(void);
/* Events of t for the current run (0 when t holds an older run's). */
int64_t prof_thread_events(const prof_thread *t);
/* Walks a thread's events: for (prof_iter it = prof_iter_begin(t); prof_iter_ok(&it); prof_iter_next(&it)). */
typedef struct prof_iter {
    const prof_chunk *c;
    int64_t i, n;
    const prof_event *e;
} prof_iter;
static inline prof_iter prof_iter_begin(const prof_thread *t) {
    prof_iter it = {.c = t->first, .i = 0, .n = prof_thread_events(t)};
    it.e = it.n > 0 ? &it.c->ev[0] : NULL;
    return it;
}
static inline bool prof_iter_ok(const prof_iter *it) { return it->i < it->n; }
static inline void prof_iter_next(prof_iter *it) {
    if (++it->i >= it->n) return;
    if (it->i % PROF_CHUNK == 0) it->c = it->c->next;
    it->e = &it->c->ev[it->i % PROF_CHUNK];
}
/* An op's kernel on the device's timeline: [*t0, *t1] in host ns (the base mark placed at
 * prof.gpu_base); false when the op has no device marks or they cannot be resolved. Waits
 * for the marks' work to finish. */
bool prof_device_span(const prof_event *e, int64_t *t0, int64_t *t1);

/* Writes the Chrome trace to path, creating dir first when missing. */
oar_status oar_prof_write_trace_dir(const char *dir, const char *path);

/* The recorded steps' index range [lo, hi], false when there are none (prof_mu held). */
bool prof_recorded_range(int64_t *lo, int64_t *hi);

#endif
