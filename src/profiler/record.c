/* The profiler's run and its hooks: start/stop, the step scheduler, the timer's per-step
 * numbers, and the spans other layers record into per-thread buffers.
 *
 * Hot paths take no lock: a thread appends to its own chunked buffer (chunks never move, so
 * a reader may walk the first `count` events while the thread goes on) and publishes the new
 * count with a release store. The lock (prof_mu) is taken by start/stop/step/pause, once per
 * step, and when a thread records its first span. */
#include "profiler/prof_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int oar_prof_level;
int oar_prof_nan_check;
int oar_prof_hooks;

pthread_mutex_t prof_mu = PTHREAD_MUTEX_INITIALIZER;
prof_run prof;

static prof_thread *g_threads;     /* registry head (atomic) */
static prof_thread **g_threads_tail = &g_threads;
static int g_next_tid = 1;
static int g_stacks_on;            /* a full run is active: ranges keep their stacks */
static _Thread_local prof_thread *tl_thread;
static char g_trace_path[1200];

#define DEFAULT_MAX_EVENTS (4LL << 20)
#define STRS_CHUNK (64 * 1024)

prof_thread *prof_threads_head(void) { return __atomic_load_n(&g_threads, __ATOMIC_ACQUIRE); }

int64_t prof_thread_events(const prof_thread *t) {
    if (t->gen != __atomic_load_n(&prof.gen, __ATOMIC_ACQUIRE)) return 0;
    return __atomic_load_n(&t->count, __ATOMIC_ACQUIRE);
}

/* ---------------------------------------------------------------- per-thread buffers */

/* A thread's exit marks its buffer for reuse by a later thread, after the run it recorded. */
static pthread_key_t g_exit_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;
static void thread_exit(void *p) { __atomic_store_n(&((prof_thread *)p)->dead, 1, __ATOMIC_RELEASE); }
static void make_key(void) { pthread_key_create(&g_exit_key, thread_exit); }

/* A dead thread's buffer whose events belong to an older run (prof_mu held). */
static prof_thread *reuse_locked(void) {
    for (prof_thread *t = g_threads; t; t = t->next) {
        if (__atomic_load_n(&t->dead, __ATOMIC_ACQUIRE) && t->gen != prof.gen) {
            t->dead = 0;
            t->depth = t->overflow = t->open_phases = 0;
            snprintf(t->name, sizeof t->name, "thread %d", t->tid);
            return t;
        }
    }
    return NULL;
}

static prof_thread *thread_get(void) {
    prof_thread *t = tl_thread;
    if (OAR_LIKELY(t != NULL)) return t;
    pthread_once(&g_key_once, make_key);
    pthread_mutex_lock(&prof_mu);
    t = reuse_locked();
    pthread_mutex_unlock(&prof_mu);
    if (t) {
        tl_thread = t;
        pthread_setspecific(g_exit_key, t);
        return t;
    }
    t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->first = t->cur = calloc(1, sizeof(prof_chunk));
    if (!t->first) {
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&prof_mu);
    t->tid = g_next_tid++;
    snprintf(t->name, sizeof t->name, "thread %d", t->tid);
    t->gen = prof.gen;
    t->stack_gen = prof.gen;
    __atomic_store_n(g_threads_tail, t, __ATOMIC_RELEASE);
    g_threads_tail = &t->next;
    pthread_mutex_unlock(&prof_mu);
    tl_thread = t;
    pthread_setspecific(g_exit_key, t);
    return t;
}

/* A buffer holding an older run's events starts over (only its own thread does this). */
static void sync_gen(prof_thread *t) {
    uint64_t g = __atomic_load_n(&prof.gen, __ATOMIC_ACQUIRE);
    if (t->gen == g) return;
    t->cur = t->first;
    t->cur_used = 0;
    t->dropped = 0;
    for (prof_strs *s = t->strs_first; s; s = s->next) s->used = 0;
    t->strs_cur = t->strs_first;
    __atomic_store_n(&t->count, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&t->gen, g, __ATOMIC_RELEASE);
}

static prof_event *ev_new(prof_thread *t) {
    sync_gen(t);
    if (t->count >= prof.max_events) {
        t->dropped++;
        return NULL;
    }
    if (t->cur_used == PROF_CHUNK) {
        if (!t->cur->next) {
            prof_chunk *c = calloc(1, sizeof *c);
            if (!c) {
                t->dropped++;
                return NULL;
            }
            __atomic_store_n(&t->cur->next, c, __ATOMIC_RELEASE);
        }
        t->cur = t->cur->next;
        t->cur_used = 0;
    }
    prof_event *e = &t->cur->ev[t->cur_used];
    memset(e, 0, sizeof *e);
    e->step = __atomic_load_n(&prof.cur_step, __ATOMIC_RELAXED);
    return e;
}

static void ev_commit(prof_thread *t) {
    t->cur_used++;
    __atomic_store_n(&t->count, t->count + 1, __ATOMIC_RELEASE);
}

/* Room for n bytes in the thread's string arena (chunks never move). */
static char *strs_alloc(prof_thread *t, size_t n) {
    prof_strs *s = t->strs_cur;
    while (s && s->used + n > s->cap) {
        s = s->next;
        if (s) t->strs_cur = s;
    }
    if (!s) {
        size_t cap = n > STRS_CHUNK ? n : STRS_CHUNK;
        s = malloc(sizeof(prof_strs) + cap);
        if (!s) return NULL;
        s->next = NULL;
        s->used = 0;
        s->cap = cap;
        if (t->strs_cur) {
            while (t->strs_cur->next) t->strs_cur = t->strs_cur->next;
            t->strs_cur->next = s;
        } else {
            t->strs_first = s;
        }
        t->strs_cur = s;
    }
    char *p = s->data + s->used;
    s->used += n;
    return p;
}

static const char *strs_dup(prof_thread *t, const char *src) {
    size_t n = strlen(src) + 1;
    char *p = strs_alloc(t, n);
    if (p) memcpy(p, src, n);
    return p;
}

/* ---------------------------------------------------------------- op spans */

static char *put_i64(char *p, int64_t v) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    if (v < 0) *p++ = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n) *p++ = tmp[--n];
    return p;
}

/* "[64, 1, 28, 28] f32, [6, 1, 5, 5] f32, -" (at most 16 inputs, then "..."). */
static const char *format_inputs(prof_thread *t, oar_tensor *const *in, int n_in) {
    int shown = n_in < 16 ? n_in : 16;
    size_t cap = (size_t)shown * (OAR_MAX_DIMS * 22 + 16) + 8;
    char *buf = strs_alloc(t, cap), *p = buf;
    if (!buf) return NULL;
    for (int i = 0; i < shown; i++) {
        if (i) {
            *p++ = ',';
            *p++ = ' ';
        }
        const oar_tensor *x = in[i];
        if (!x) {
            *p++ = '-';
            continue;
        }
        *p++ = '[';
        for (int d = 0; d < x->ndim; d++) {
            if (d) {
                *p++ = ',';
                *p++ = ' ';
            }
            p = put_i64(p, x->shape[d]);
        }
        *p++ = ']';
        *p++ = ' ';
        const char *dn = oar_dtype_name(x->dtype);
        size_t l = strlen(dn);
        memcpy(p, dn, l);
        p += l;
    }
    if (shown < n_in) {
        memcpy(p, ", ...", 5);
        p += 5;
    }
    *p++ = '\0';
    /* give back what was not used */
    prof_strs *s = t->strs_cur;
    if (s && buf >= s->data && buf + cap == s->data + s->used) s->used -= cap - (size_t)(p - buf);
    return buf;
}

/* Records an op span; g0, g1: device marks around its kernel on device gdev (0: none). */
static void record_op(const char *name, const char *impl, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                      int n_out, int64_t t0, int64_t k0, int64_t k1, int64_t t1, int32_t g0, int32_t g1,
                      oar_device gdev) {
    prof_thread *t = thread_get();
    if (!t) return;
    prof_event *e = ev_new(t);
    if (!e) return;
    e->kind = EV_OP;
    e->t0 = t0;
    e->t1 = t1;
    e->k0 = k0;
    e->k1 = k0 ? k1 : 0;
    e->name = name;
    e->impl = impl;
    if (g0 && g1) {
        e->g0 = g0;
        e->g1 = g1;
        e->gdev = (uint8_t)gdev;
    }
    e->flops = k0 ? oar_prof_flops(name, in, n_in, out, n_out) : 0.0;
    if (prof.opts.record_shapes) e->args = format_inputs(t, in, n_in);
    ev_commit(t);
}

void oar_prof_op(const char *name, const char *impl, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                 int n_out, int64_t t0, int64_t k0, int64_t k1, int64_t t1) {
    record_op(name, impl, in, n_in, out, n_out, t0, k0, k1, t1, 0, 0, OAR_CPU);
}

/* The device's timeline marks, when it has one and this run started it. */
static const oar_device_ops *timeline_of(oar_device dev) {
    if (dev == OAR_CPU || !__atomic_load_n(&prof.gpu_base, __ATOMIC_ACQUIRE)) return NULL;
    const oar_device_ops *ops = oar_device_get(dev);
    return ops && ops->mark ? ops : NULL;
}

bool prof_device_span(const prof_event *e, int64_t *t0, int64_t *t1) {
    if (e->kind != EV_OP || !e->g0 || !e->g1) return false;
    const oar_device_ops *ops = timeline_of((oar_device)e->gdev);
    if (!ops) return false;
    int64_t at = ops->mark_ns(0, e->g0), dur = ops->mark_ns(e->g0, e->g1);
    if (at < 0 || dur < 0) return false;
    *t0 = prof.gpu_base + at;
    *t1 = *t0 + dur;
    return true;
}

/* The eager dispatch's frames: one per op call in progress on the thread. */
#define CALL_DEPTH 16
typedef struct call_frame {
    int64_t t0, k0, k1;
    const char *impl;
    const oar_device_ops *timeline; /* the kernel's device, when it has a timeline */
    oar_device dev;
    int32_t g0, g1;                 /* its marks around the kernel */
} call_frame;
static _Thread_local call_frame tl_calls[CALL_DEPTH];
static _Thread_local int tl_call_depth;

void oar_prof_call_begin(void) {
    int d = tl_call_depth++;
    if (d < CALL_DEPTH) tl_calls[d] = (call_frame){.t0 = oar_prof_spans_on() ? oar_prof_now() : 0};
}

void oar_prof_call_kernel_begin(const char *impl, oar_device dev) {
    int d = tl_call_depth - 1;
    if (d < 0 || d >= CALL_DEPTH || !tl_calls[d].t0) return;
    call_frame *f = &tl_calls[d];
    f->impl = impl;
    f->dev = dev;
    f->timeline = timeline_of(dev);
    if (f->timeline) f->g0 = f->timeline->mark();
    f->k0 = oar_prof_now();
}

oar_status oar_prof_call_kernel_end(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                    int n_out, oar_status st) {
    int d = tl_call_depth - 1;
    if (d >= 0 && d < CALL_DEPTH && tl_calls[d].k0) {
        call_frame *f = &tl_calls[d];
        f->k1 = oar_prof_now();
        if (f->timeline && f->g0) f->g1 = f->timeline->mark();
    }
    if (st == OAR_OK && oar_prof_check_on()) st = oar_check_outputs(name, in, n_in, out, n_out);
    return st;
}

void oar_prof_call_end(const char *name, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                       bool ok) {
    int d = --tl_call_depth;
    if (!ok || d < 0 || d >= CALL_DEPTH || !tl_calls[d].t0) return;
    const call_frame *f = &tl_calls[d];
    record_op(name, f->impl, in, n_in, out, n_out, f->t0, f->k0, f->k1, oar_prof_now(), f->g0, f->g1, f->dev);
}

void oar_prof_kernel_end(const char *name, const char *impl, oar_tensor *const *in, int n_in,
                         oar_tensor *const *out, int n_out, int64_t t0) {
    int64_t t1 = oar_prof_now();
    oar_prof_op(name, impl, in, n_in, out, n_out, t0, t0, t1, t1);
}

/* ---------------------------------------------------------------- ranges and spans */

static uint8_t phase_of(const char *name) {
    if (!name) return PH_NONE;
    if (!strcmp(name, "forward")) return PH_FORWARD;
    if (!strcmp(name, "backward")) return PH_BACKWARD;
    if (!strcmp(name, "optimizer")) return PH_OPTIMIZER;
    return PH_NONE;
}

/* Phases of the ranges open on this thread, profiler on or off (a few pushes per step) */
#define PHASE_STACK 16
static _Thread_local uint8_t tl_phase[PHASE_STACK];
static _Thread_local int tl_phase_depth;

uint8_t oar_prof_current_phase(void) {
    int d = tl_phase_depth < PHASE_STACK ? tl_phase_depth : PHASE_STACK;
    return d > 0 ? tl_phase[d - 1] : PH_NONE;
}

const char *oar_prof_phase_name(uint8_t phase) {
    switch (phase) {
    case PH_FORWARD: return "forward";
    case PH_BACKWARD: return "backward";
    case PH_OPTIMIZER: return "optimizer";
    default: return NULL;
    }
}

bool oar_prof_ranges_on(void) { return __atomic_load_n(&g_stacks_on, __ATOMIC_RELAXED) != 0; }

void oar_prof_push(const char *name) {
    int d = tl_phase_depth++;
    if (d < PHASE_STACK) {
        uint8_t ph = phase_of(name);
        tl_phase[d] = ph ? ph : d > 0 ? tl_phase[d - 1] : PH_NONE; /* other ranges keep the phase */
    }
    if (!__atomic_load_n(&g_stacks_on, __ATOMIC_RELAXED)) return;
    prof_thread *t = thread_get();
    if (!t) return;
    uint64_t g = __atomic_load_n(&prof.gen, __ATOMIC_ACQUIRE);
    if (t->stack_gen != g) { /* ranges left open by an earlier run */
        t->depth = t->overflow = t->open_phases = 0;
        t->stack_gen = g;
    }
    if (t->depth == PROF_STACK) {
        t->overflow++;
        return;
    }
    prof_range *r = &t->stack[t->depth++];
    snprintf(r->name, sizeof r->name, "%s", name ? name : "(null)");
    r->phase = phase_of(r->name);
    r->nested = r->phase && t->open_phases > 0;
    if (r->phase) t->open_phases++;
    r->t0 = oar_prof_now();
}

void oar_prof_pop(void) {
    if (tl_phase_depth > 0) tl_phase_depth--;
    if (!__atomic_load_n(&g_stacks_on, __ATOMIC_RELAXED)) return;
    prof_thread *t = thread_get();
    if (!t || t->stack_gen != __atomic_load_n(&prof.gen, __ATOMIC_ACQUIRE)) return;
    if (t->overflow) {
        t->overflow--;
        return;
    }
    if (t->depth == 0) return; /* pushed before the run started */
    prof_range *r = &t->stack[--t->depth];
    if (r->phase) t->open_phases--;
    if (!oar_prof_spans_on()) return;
    int64_t t1 = oar_prof_now();
    prof_event *e = ev_new(t);
    if (!e) return;
    e->kind = EV_RANGE;
    e->t0 = r->t0;
    e->t1 = t1;
    e->phase = r->phase;
    e->nested = r->nested;
    e->name = strs_dup(t, r->name);
    if (!e->name) e->name = "range";
    ev_commit(t);
}

void oar_profiler_range_push(const char *name) { oar_prof_push(name); }
void oar_profiler_range_pop(void) { oar_prof_pop(); }

void oar_prof_reader(int64_t t0, int64_t t1) {
    if (!oar_prof_active()) return;
    __atomic_add_fetch(&prof.reader_ns, t1 - t0, __ATOMIC_RELAXED);
    if (!oar_prof_spans_on()) return;
    prof_thread *t = thread_get();
    prof_event *e = t ? ev_new(t) : NULL;
    if (!e) return;
    e->kind = EV_READER;
    e->t0 = t0;
    e->t1 = t1;
    e->name = "dataloader";
    e->phase = PH_DATA;
    e->nested = t->open_phases > 0;
    ev_commit(t);
}

void oar_prof_span(const char *name, int64_t t0, int64_t t1) {
    if (!oar_prof_spans_on()) return;
    prof_thread *t = thread_get();
    prof_event *e = t ? ev_new(t) : NULL;
    if (!e) return;
    e->kind = EV_SPAN;
    e->t0 = t0;
    e->t1 = t1;
    e->name = name;
    ev_commit(t);
}

void oar_prof_thread_name(const char *name) {
    prof_thread *t = thread_get();
    if (t && strncmp(t->name, name, sizeof t->name - 1) != 0) snprintf(t->name, sizeof t->name, "%s", name);
}

/* ---------------------------------------------------------------- the run */

static bool step_recorded(int64_t i) {
    const oar_profiler_opts *o = &prof.opts;
    return i >= o->skip_first && i >= o->record_begin && (o->record_end <= 0 || i < o->record_end);
}

/* The level for the current step (prof_mu held). */
static void set_level_locked(void) {
    int level = OAR_PROF_OFF;
    if (prof.running && !prof.paused)
        level = prof.opts.mode == OAR_PROFILER_FULL && step_recorded(prof.cur_step) ? OAR_PROF_FULL : OAR_PROF_TIMER;
    __atomic_store_n(&oar_prof_level, level, __ATOMIC_RELEASE);
    if (level == OAR_PROF_FULL) __atomic_or_fetch(&oar_prof_hooks, 1, __ATOMIC_ACQ_REL);
    else __atomic_and_fetch(&oar_prof_hooks, ~1, __ATOMIC_ACQ_REL);
}

/* A step starts at `now`; m: the allocator then, its window peak just reset (prof_mu held). */
static void step_begin_locked(int64_t now, const oar_memory_stats *m) {
    prof.step_t0 = now;
    __atomic_store_n(&prof.reader_ns, 0, __ATOMIC_RELAXED);
    if (m) {
        prof.alloc_base = m->n_allocs;
        prof.bytes_base = m->allocated_bytes;
    }
}

/* The allocator's statistics and step peak, the peak reset for the next step; NULL when the
 * run does not record memory. */
static const oar_memory_stats *memory_mark(oar_memory_stats *m, int64_t *peak) {
    if (!prof.opts.record_memory) return NULL;
    *peak = oar_alloc_window_peak(m, true);
    return m;
}

/* Records the current step as complete at `now` (prof_mu held); m, peak: from memory_mark. */
static void step_end_locked(int64_t now, int64_t items, const oar_memory_stats *m, int64_t peak) {
    int64_t reader = __atomic_exchange_n(&prof.reader_ns, 0, __ATOMIC_RELAXED);
    if (!step_recorded(prof.cur_step)) return;
    prof_totals *t = &prof.tot;
    double batch = 1e-9 * (double)(now - prof.step_t0), rd = 1e-9 * (double)reader;
    double ips = batch > 0 ? (items > 0 ? (double)items : 1.0) / batch : 0;
    if (t->steps == 0) {
        t->first = prof.cur_step;
        t->batch_min = t->batch_max = batch;
        t->reader_min = t->reader_max = rd;
        t->ips_min = t->ips_max = ips;
    }
    t->steps++;
    t->last = prof.cur_step;
    t->items += items;
    t->batch_sum += batch;
    t->reader_sum += rd;
    t->ips_sum += ips;
    t->batch_min = batch < t->batch_min ? batch : t->batch_min;
    t->batch_max = batch > t->batch_max ? batch : t->batch_max;
    t->reader_min = rd < t->reader_min ? rd : t->reader_min;
    t->reader_max = rd > t->reader_max ? rd : t->reader_max;
    t->ips_min = ips < t->ips_min ? ips : t->ips_min;
    t->ips_max = ips > t->ips_max ? ips : t->ips_max;
    if (m) {
        int64_t allocs = m->n_allocs - prof.alloc_base, bytes = m->allocated_bytes - prof.bytes_base;
        t->allocs_sum += (double)allocs;
        t->bytes_sum += (double)bytes;
        t->max_allocs = allocs > t->max_allocs ? allocs : t->max_allocs;
        t->max_bytes = bytes > t->max_bytes ? bytes : t->max_bytes;
        t->peak = peak > t->peak ? peak : t->peak;
        t->current = m->current_bytes;
        t->cached = m->cached_bytes;
    }
    /* the trace shows each step: kept in full mode only, as many as spans are kept */
    if (prof.opts.mode != OAR_PROFILER_FULL || prof.n_steps >= prof.max_events) return;
    if (prof.n_steps == prof.cap_steps) {
        int64_t cap = prof.cap_steps ? 2 * prof.cap_steps : 256;
        prof_step *s = realloc(prof.steps, sizeof(prof_step) * (size_t)cap);
        if (!s) return;
        prof.steps = s;
        prof.cap_steps = cap;
    }
    prof_step *s = &prof.steps[prof.n_steps++];
    memset(s, 0, sizeof *s);
    s->index = prof.cur_step;
    s->t0 = prof.step_t0;
    s->t1 = now;
    s->reader_ns = reader;
    s->items = items;
    s->tid = tl_thread ? tl_thread->tid : 0;
    if (m) {
        s->allocs = m->n_allocs - prof.alloc_base;
        s->bytes = m->allocated_bytes - prof.bytes_base;
        s->peak = peak;
        s->current = m->current_bytes;
        s->cached = m->cached_bytes;
    }
}

oar_profiler_opts oar_profiler_defaults(oar_profiler_mode mode) {
    return (oar_profiler_opts){.mode = mode, .record_shapes = true, .record_memory = true};
}

oar_status oar_profiler_start(const oar_profiler_opts *opts) {
    oar_init();
    oar_profiler_opts o = opts ? *opts : oar_profiler_defaults(OAR_PROFILER_TIMER);
    if (o.mode != OAR_PROFILER_TIMER && o.mode != OAR_PROFILER_FULL)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_start: expected mode OAR_PROFILER_TIMER or "
                                              "OAR_PROFILER_FULL, got %d", (int)o.mode);
    if (o.skip_first < 0 || o.record_begin < 0 || o.record_end < 0 ||
        (o.record_end > 0 && o.record_end <= o.record_begin) || o.max_events < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_start: expected skip_first >= 0, 0 <= record_begin < "
                         "record_end (or record_end 0) and max_events >= 0, got %lld, [%lld, %lld), %lld",
                         (long long)o.skip_first, (long long)o.record_begin, (long long)o.record_end,
                         (long long)o.max_events);
    if (o.items_unit && strlen(o.items_unit) >= sizeof prof.unit)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_start: items_unit is longer than %zu characters",
                         sizeof prof.unit - 1);
    if (o.trace_dir && strlen(o.trace_dir) >= sizeof prof.trace_dir - 64)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_start: trace_dir is too long");
    pthread_mutex_lock(&prof_mu);
    if (prof.running) {
        pthread_mutex_unlock(&prof_mu);
        return oar_error(OAR_ERR_STATE, "profiler_start: the profiler is already running; call "
                                        "oar_profiler_stop first");
    }
    /* a full run places its GPU spans against a base mark recorded (and waited for) now */
    __atomic_store_n(&prof.gpu_base, 0, __ATOMIC_RELEASE);
    const oar_device_ops *gpu = o.mode == OAR_PROFILER_FULL ? oar_device_get(OAR_CUDA) : NULL;
    if (gpu && gpu->timeline_reset && gpu->timeline_reset() == OAR_OK)
        __atomic_store_n(&prof.gpu_base, oar_prof_now(), __ATOMIC_RELEASE);
    else if (gpu) oar_clear_error();
    prof.opts = o;
    snprintf(prof.unit, sizeof prof.unit, "%s", o.items_unit && *o.items_unit ? o.items_unit : "samples");
    snprintf(prof.trace_dir, sizeof prof.trace_dir, "%s", o.trace_dir ? o.trace_dir : "");
    prof.opts.items_unit = prof.unit;
    prof.opts.trace_dir = o.trace_dir ? prof.trace_dir : NULL;
    prof.max_events = o.max_events ? o.max_events : DEFAULT_MAX_EVENTS;
    prof.n_steps = 0;
    memset(&prof.tot, 0, sizeof prof.tot);
    prof.cur_step = 0;
    prof.paused = false;
    prof.running = true;
    prof.ever_started = true;
    prof.run_number++;
    __atomic_add_fetch(&prof.gen, 1, __ATOMIC_ACQ_REL);
    prof.origin = oar_prof_now();
    oar_memory_stats m;
    int64_t peak;
    step_begin_locked(prof.origin, memory_mark(&m, &peak));
    __atomic_store_n(&g_stacks_on, o.mode == OAR_PROFILER_FULL, __ATOMIC_RELEASE);
    set_level_locked();
    pthread_mutex_unlock(&prof_mu);
    oar_prof_thread_name("main");
    return OAR_OK;
}

oar_status oar_profiler_stop(void) {
    pthread_mutex_lock(&prof_mu);
    if (!prof.running) {
        pthread_mutex_unlock(&prof_mu);
        return oar_error(OAR_ERR_STATE, "profiler_stop: the profiler is not running");
    }
    /* a run without step marks is one step, from start to stop */
    if (prof.cur_step == 0 && prof.tot.steps == 0 && !prof.paused) {
        oar_memory_stats m;
        int64_t peak = 0;
        const oar_memory_stats *mp = memory_mark(&m, &peak);
        step_end_locked(oar_prof_now(), 0, mp, peak);
    }
    prof.running = false;
    __atomic_store_n(&g_stacks_on, 0, __ATOMIC_RELEASE);
    set_level_locked();
    bool full = prof.opts.mode == OAR_PROFILER_FULL, print = prof.opts.print_at_stop;
    char path[sizeof g_trace_path] = "";
    if (full && prof.trace_dir[0])
        snprintf(path, sizeof path, "%s/oar-trace-%d-%d.json", prof.trace_dir, (int)getpid(), prof.run_number);
    g_trace_path[0] = '\0';
    pthread_mutex_unlock(&prof_mu);
    oar_status st = OAR_OK;
    if (path[0]) {
        st = oar_prof_write_trace_dir(prof.trace_dir, path);
        if (st == OAR_OK) {
            memcpy(g_trace_path, path, sizeof path);
            if (print) printf("trace: %s\n", path);
        }
    }
    if (print) oar_profiler_print(OAR_PROFILER_SORT_TOTAL, 0);
    return st;
}

const char *oar_profiler_trace_path(void) { return g_trace_path; }

bool oar_profiler_running(void) {
    pthread_mutex_lock(&prof_mu);
    bool r = prof.running;
    pthread_mutex_unlock(&prof_mu);
    return r;
}

void oar_profiler_step(int64_t items) {
    if (!oar_prof_active()) return; /* off, or paused */
    int64_t now = oar_prof_now();
    pthread_mutex_lock(&prof_mu);
    if (prof.running && !prof.paused) {
        oar_memory_stats m;
        int64_t peak = 0;
        const oar_memory_stats *mp = memory_mark(&m, &peak);
        step_end_locked(now, items, mp, peak);
        __atomic_store_n(&prof.cur_step, prof.cur_step + 1, __ATOMIC_RELAXED);
        step_begin_locked(now, mp);
        set_level_locked();
    }
    pthread_mutex_unlock(&prof_mu);
}

void oar_profiler_pause(void) {
    pthread_mutex_lock(&prof_mu);
    if (prof.running) {
        prof.paused = true;
        set_level_locked();
    }
    pthread_mutex_unlock(&prof_mu);
}

void oar_profiler_resume(void) {
    pthread_mutex_lock(&prof_mu);
    if (prof.running && prof.paused) {
        prof.paused = false;
        oar_memory_stats m;
        int64_t peak;
        step_begin_locked(oar_prof_now(), memory_mark(&m, &peak));
        set_level_locked();
    }
    pthread_mutex_unlock(&prof_mu);
}

bool prof_recorded_range(int64_t *lo, int64_t *hi) {
    if (prof.tot.steps == 0) return false;
    *lo = prof.tot.first;
    *hi = prof.tot.last;
    return true;
}

/* ---------------------------------------------------------------- NaN/Inf flag */

void oar_set_check_nan_inf(bool on) {
    oar_init(); /* reads the environment first, so an explicit call wins */
    __atomic_store_n(&oar_prof_nan_check, on ? 1 : 0, __ATOMIC_RELEASE);
    if (on) __atomic_or_fetch(&oar_prof_hooks, 2, __ATOMIC_ACQ_REL);
    else __atomic_and_fetch(&oar_prof_hooks, ~2, __ATOMIC_ACQ_REL);
}

bool oar_check_nan_inf_enabled(void) {
    oar_init();
    return oar_prof_check_on();
}

void oar_prof_init_from_env(void) {
    const char *v = getenv("OAR_CHECK_NAN_INF");
    if (v && *v && strcmp(v, "0") != 0 && strcmp(v, "false") != 0 && strcmp(v, "off") != 0) {
        __atomic_store_n(&oar_prof_nan_check, 1, __ATOMIC_RELEASE);
        __atomic_or_fetch(&oar_prof_hooks, 2, __ATOMIC_ACQ_REL);
    }
}
