/* The profiler's numbers: the timer over recorded steps, and in full mode the overview per
 * phase, the operator and kernel tables and memory per step; and the text summary. */
#include "profiler/prof_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- aggregation */

typedef struct agg_row {
    const char *name, *impl;
    int64_t calls;
    double total, min, max; /* seconds: the whole call (ops) or the kernel (kernels) */
    double kernel_total;    /* ops: kernel seconds, the base of GFLOP/s */
    double flops;
} agg_row;

#define HASH_SLOTS 4096
typedef struct agg_table {
    agg_row *rows;
    int n, cap, sorted_by; /* sorted_by: -1 when unsorted */
    const void *key_a[HASH_SLOTS], *key_b[HASH_SLOTS];
    int idx[HASH_SLOTS];   /* row + 1; 0: empty slot */
} agg_table;

static struct {
    bool valid;
    uint64_t gen;
    int64_t n_events, n_steps;
    agg_table ops, kernels, device; /* device: kernels on a device's timeline (GPU spans) */
    oar_profiler_overview ov;
    int64_t events, dropped;
    int threads;
} g_agg;
static pthread_mutex_t agg_mu = PTHREAD_MUTEX_INITIALIZER;

static uintptr_t hash_pair(const char *name, const char *impl) {
    return ((uintptr_t)name >> 3) * 0x9E3779B1u ^ ((uintptr_t)impl >> 3) * 0x85EBCA77u;
}

static bool same_row(const agg_row *r, const char *name, const char *impl) {
    return !strcmp(r->name, name) && (r->impl == impl || (r->impl && impl && !strcmp(r->impl, impl)));
}

static int table_row(agg_table *t, const char *name, const char *impl) {
    uintptr_t h = hash_pair(name, impl);
    for (int probe = 0; probe < HASH_SLOTS; probe++) {
        int s = (int)((h + (uintptr_t)probe) & (HASH_SLOTS - 1));
        if (!t->idx[s]) {
            /* a new pointer pair: the same strings may already have a row */
            int r = -1;
            for (int k = 0; k < t->n && r < 0; k++)
                if (same_row(&t->rows[k], name, impl)) r = k;
            if (r < 0) {
                if (t->n == t->cap) {
                    int cap = t->cap ? 2 * t->cap : 64;
                    agg_row *rows = realloc(t->rows, sizeof(agg_row) * (size_t)cap);
                    if (!rows) return -1;
                    t->rows = rows;
                    t->cap = cap;
                }
                r = t->n++;
                t->rows[r] = (agg_row){.name = name, .impl = impl, .min = INFINITY};
            }
            t->key_a[s] = name;
            t->key_b[s] = impl;
            t->idx[s] = r + 1;
            return r;
        }
        if (t->key_a[s] == name && t->key_b[s] == impl) return t->idx[s] - 1;
    }
    for (int k = 0; k < t->n; k++) /* the hash is full: many distinct pointers; search */
        if (same_row(&t->rows[k], name, impl)) return k;
    return -1;
}

static void table_reset(agg_table *t) {
    t->n = 0;
    t->sorted_by = -1;
    memset(t->idx, 0, sizeof t->idx);
}

static void row_add(agg_row *r, double dur, double kdur, double flops) {
    r->calls++;
    r->total += dur;
    r->kernel_total += kdur;
    r->min = dur < r->min ? dur : r->min;
    r->max = dur > r->max ? dur : r->max;
    r->flops += flops;
}

static int64_t total_events(void) {
    int64_t n = 0;
    for (prof_thread *t = prof_threads_head(); t; t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE))
        n += prof_thread_events(t);
    return n;
}

/* Brings g_agg up to date (agg_mu held). */
static void aggregate(void) {
    pthread_mutex_lock(&prof_mu);
    uint64_t gen = __atomic_load_n(&prof.gen, __ATOMIC_ACQUIRE);
    int64_t n_steps = prof.tot.steps, lo = 0, hi = -1;
    double step_total = prof.tot.batch_sum;
    prof_recorded_range(&lo, &hi);
    pthread_mutex_unlock(&prof_mu);
    int64_t n_events = total_events();
    if (g_agg.valid && g_agg.gen == gen && g_agg.n_events == n_events && g_agg.n_steps == n_steps) return;
    table_reset(&g_agg.ops);
    table_reset(&g_agg.kernels);
    table_reset(&g_agg.device);
    double phase[PH_DATA + 1] = {0};
    bool forward_seen = false;
    g_agg.events = g_agg.dropped = 0;
    g_agg.threads = 0;
    for (prof_thread *t = prof_threads_head(); t; t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE)) {
        int64_t n = prof_thread_events(t);
        if (n == 0) continue;
        g_agg.threads++;
        g_agg.events += n;
        g_agg.dropped += t->dropped;
        for (prof_iter it = prof_iter_begin(t); prof_iter_ok(&it); prof_iter_next(&it)) {
            const prof_event *e = it.e;
            if (e->step < lo || e->step > hi) continue; /* the unfinished step at stop */
            double dur = 1e-9 * (double)(e->t1 - e->t0);
            if (e->kind == EV_OP) {
                double kdur = e->k0 ? 1e-9 * (double)(e->k1 - e->k0) : 0.0;
                int r = table_row(&g_agg.ops, e->name, NULL);
                if (r >= 0) row_add(&g_agg.ops.rows[r], dur, kdur, e->flops);
                if (e->k0 && (r = table_row(&g_agg.kernels, e->name, e->impl ? e->impl : "?")) >= 0)
                    row_add(&g_agg.kernels.rows[r], kdur, kdur, e->flops);
                int64_t g0, g1;
                if (e->g0 && prof_device_span(e, &g0, &g1) &&
                    (r = table_row(&g_agg.device, e->name, oar_device_name((oar_device)e->gdev))) >= 0) {
                    double gdur = 1e-9 * (double)(g1 - g0);
                    row_add(&g_agg.device.rows[r], gdur, gdur, e->flops);
                }
            } else if ((e->kind == EV_RANGE || e->kind == EV_READER) && e->phase && !e->nested) {
                phase[e->phase] += dur;
                if (e->phase == PH_FORWARD) forward_seen = true;
            }
        }
    }
    oar_profiler_overview *ov = &g_agg.ov;
    *ov = (oar_profiler_overview){.steps = n_steps, .step = step_total, .data = phase[PH_DATA],
                                  .forward = phase[PH_FORWARD], .backward = phase[PH_BACKWARD],
                                  .optimizer = phase[PH_OPTIMIZER]};
    ov->other = step_total - ov->data - ov->forward - ov->backward - ov->optimizer;
    if (!forward_seen) {
        ov->forward_inferred = true;
        ov->forward = ov->other > 0 ? ov->other : 0;
        ov->other -= ov->forward;
    }
    g_agg.valid = true;
    g_agg.gen = gen;
    g_agg.n_events = n_events;
    g_agg.n_steps = n_steps;
}

static int sort_key;
static int cmp_rows(const void *pa, const void *pb) {
    const agg_row *a = pa, *b = pb;
    double x = 0, y = 0;
    switch (sort_key) {
    case OAR_PROFILER_SORT_AVG: x = a->total / (double)a->calls, y = b->total / (double)b->calls; break;
    case OAR_PROFILER_SORT_CALLS: x = (double)a->calls, y = (double)b->calls; break;
    default: x = a->total, y = b->total; break;
    }
    if (x != y) return x < y ? 1 : -1;
    int c = strcmp(a->name, b->name);
    if (c || !a->impl || !b->impl) return c;
    return strcmp(a->impl, b->impl);
}

static void table_sort(agg_table *t, oar_profiler_sort sort) {
    if (t->sorted_by == (int)sort) return;
    sort_key = (int)sort;
    qsort(t->rows, (size_t)t->n, sizeof(agg_row), cmp_rows);
    /* rows moved: the pointer index is stale */
    memset(t->idx, 0, sizeof t->idx);
    for (int r = 0; r < t->n; r++) {
        uintptr_t h = hash_pair(t->rows[r].name, t->rows[r].impl);
        for (int probe = 0; probe < HASH_SLOTS; probe++) {
            int s = (int)((h + (uintptr_t)probe) & (HASH_SLOTS - 1));
            if (!t->idx[s]) {
                t->key_a[s] = t->rows[r].name;
                t->key_b[s] = t->rows[r].impl;
                t->idx[s] = r + 1;
                break;
            }
        }
    }
    t->sorted_by = (int)sort;
}

static void row_out(const agg_row *r, double step_total, oar_profiler_op_row *out) {
    *out = (oar_profiler_op_row){.name = r->name, .impl = r->impl, .calls = r->calls, .total = r->total,
                                 .avg = r->calls ? r->total / (double)r->calls : 0, .min = r->calls ? r->min : 0,
                                 .max = r->max, .step_fraction = step_total > 0 ? r->total / step_total : 0,
                                 .gflops_per_s = r->flops > 0 && r->kernel_total > 0
                                                     ? r->flops / r->kernel_total * 1e-9 : 0};
}

static bool sort_valid(oar_profiler_sort s) {
    return s == OAR_PROFILER_SORT_TOTAL || s == OAR_PROFILER_SORT_AVG || s == OAR_PROFILER_SORT_CALLS;
}

/* ---------------------------------------------------------------- getters */

static oar_status need_run(const char *who) {
    if (!prof.ever_started)
        return oar_error(OAR_ERR_STATE, "%s: the profiler has not run; call oar_profiler_start first", who);
    return OAR_OK;
}

oar_status oar_profiler_timer_get(oar_profiler_timer *out) {
    if (!out) return oar_error(OAR_ERR_INVALID_ARG, "profiler_timer_get: out is NULL");
    *out = (oar_profiler_timer){0};
    pthread_mutex_lock(&prof_mu);
    oar_status st = need_run("profiler_timer_get");
    const prof_totals *t = &prof.tot;
    if (st == OAR_OK && t->steps) {
        double n = (double)t->steps;
        *out = (oar_profiler_timer){.steps = t->steps, .items = t->items,
                                    .reader_avg = t->reader_sum / n, .reader_max = t->reader_max,
                                    .reader_min = t->reader_min, .batch_avg = t->batch_sum / n,
                                    .batch_max = t->batch_max, .batch_min = t->batch_min,
                                    .ips_avg = t->ips_sum / n, .ips_max = t->ips_max, .ips_min = t->ips_min,
                                    .steps_per_s = t->batch_sum > 0 ? n / t->batch_sum : 0,
                                    .items_per_s = t->batch_sum > 0 ? (double)t->items / t->batch_sum : 0,
                                    .reader_ratio = t->batch_sum > 0 ? t->reader_sum / t->batch_sum : 0};
    }
    pthread_mutex_unlock(&prof_mu);
    return st;
}

oar_status oar_profiler_memory_get(oar_profiler_memory *out) {
    if (!out) return oar_error(OAR_ERR_INVALID_ARG, "profiler_memory_get: out is NULL");
    *out = (oar_profiler_memory){0};
    pthread_mutex_lock(&prof_mu);
    oar_status st = need_run("profiler_memory_get");
    if (st == OAR_OK && !prof.opts.record_memory)
        st = oar_error(OAR_ERR_STATE, "profiler_memory_get: the run did not record memory (record_memory)");
    const prof_totals *t = &prof.tot;
    if (st == OAR_OK && t->steps)
        *out = (oar_profiler_memory){.steps = t->steps, .allocs_per_step = t->allocs_sum / (double)t->steps,
                                     .bytes_per_step = t->bytes_sum / (double)t->steps,
                                     .max_allocs = t->max_allocs, .max_bytes = t->max_bytes,
                                     .peak_bytes = t->peak, .current_bytes = t->current,
                                     .cached_bytes = t->cached};
    pthread_mutex_unlock(&prof_mu);
    return st;
}

static oar_status need_full(const char *who) {
    oar_status st = need_run(who);
    if (st == OAR_OK && prof.opts.mode != OAR_PROFILER_FULL)
        st = oar_error(OAR_ERR_STATE, "%s: the last run was in timer mode; operator tables and the overview "
                                      "need OAR_PROFILER_FULL", who);
    return st;
}

oar_status oar_profiler_overview_get(oar_profiler_overview *out) {
    if (!out) return oar_error(OAR_ERR_INVALID_ARG, "profiler_overview_get: out is NULL");
    *out = (oar_profiler_overview){0};
    oar_status st = need_full("profiler_overview_get");
    if (st != OAR_OK) return st;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    *out = g_agg.ov;
    pthread_mutex_unlock(&agg_mu);
    return OAR_OK;
}

int oar_profiler_op_count(bool kernels) {
    if (!prof.ever_started || prof.opts.mode != OAR_PROFILER_FULL) return 0;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    int n = kernels ? g_agg.kernels.n : g_agg.ops.n;
    pthread_mutex_unlock(&agg_mu);
    return n;
}

oar_status oar_profiler_op_at(bool kernels, oar_profiler_sort sort, int i, oar_profiler_op_row *out) {
    if (!out || !sort_valid(sort))
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_op_at: expected a row pointer and a valid sort key");
    oar_status st = need_full("profiler_op_at");
    if (st != OAR_OK) return st;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    agg_table *t = kernels ? &g_agg.kernels : &g_agg.ops;
    if (i < 0 || i >= t->n) {
        st = oar_error(OAR_ERR_INVALID_ARG, "profiler_op_at: expected 0 <= i < %d, got %d", t->n, i);
    } else {
        table_sort(t, sort);
        row_out(&t->rows[i], g_agg.ov.step, out);
        if (!kernels) out->impl = NULL;
    }
    pthread_mutex_unlock(&agg_mu);
    return st;
}

int oar_profiler_device_op_count(void) {
    if (!prof.ever_started || prof.opts.mode != OAR_PROFILER_FULL) return 0;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    int n = g_agg.device.n;
    pthread_mutex_unlock(&agg_mu);
    return n;
}

oar_status oar_profiler_device_op_at(oar_profiler_sort sort, int i, oar_profiler_op_row *out) {
    if (!out || !sort_valid(sort))
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_device_op_at: expected a row pointer and a valid sort key");
    oar_status st = need_full("profiler_device_op_at");
    if (st != OAR_OK) return st;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    if (i < 0 || i >= g_agg.device.n) {
        st = oar_error(OAR_ERR_INVALID_ARG, "profiler_device_op_at: expected 0 <= i < %d, got %d", g_agg.device.n,
                       i);
    } else {
        table_sort(&g_agg.device, sort);
        row_out(&g_agg.device.rows[i], g_agg.ov.step, out);
    }
    pthread_mutex_unlock(&agg_mu);
    return st;
}

oar_status oar_profiler_device_op_find(const char *name, oar_profiler_op_row *out) {
    if (!out || !name)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_device_op_find: expected a name and a row pointer");
    oar_status st = need_full("profiler_device_op_find");
    if (st != OAR_OK) return st;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    int found = -1;
    for (int r = 0; r < g_agg.device.n && found < 0; r++)
        if (!strcmp(g_agg.device.rows[r].name, name)) found = r;
    if (found >= 0) row_out(&g_agg.device.rows[found], g_agg.ov.step, out);
    pthread_mutex_unlock(&agg_mu);
    if (found < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_device_op_find: no op named '%s' ran on a device timeline "
                                              "(GPU spans need a full run and a GPU)", name);
    return OAR_OK;
}

oar_status oar_profiler_op_find(const char *name, oar_profiler_op_row *out) {
    if (!out || !name) return oar_error(OAR_ERR_INVALID_ARG, "profiler_op_find: expected a name and a row pointer");
    oar_status st = need_full("profiler_op_find");
    if (st != OAR_OK) return st;
    pthread_mutex_lock(&agg_mu);
    aggregate();
    int found = -1;
    for (int r = 0; r < g_agg.ops.n && found < 0; r++)
        if (!strcmp(g_agg.ops.rows[r].name, name)) found = r;
    if (found >= 0) {
        row_out(&g_agg.ops.rows[found], g_agg.ov.step, out);
        out->impl = NULL;
    }
    pthread_mutex_unlock(&agg_mu);
    if (found < 0) return oar_error(OAR_ERR_INVALID_ARG, "profiler_op_find: no op named '%s' was recorded", name);
    return OAR_OK;
}

/* ---------------------------------------------------------------- text */

typedef struct text {
    char *buf;
    size_t size, len;
} text;

static void put(text *o, const char *fmt, ...) OAR_PRINTF(2, 3);
static void put(text *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->len += (size_t)n;
}

static const char *sort_name(oar_profiler_sort s) {
    return s == OAR_PROFILER_SORT_AVG ? "avg" : s == OAR_PROFILER_SORT_CALLS ? "calls" : "total";
}

static void put_mib(text *o, double bytes) { put(o, "%10.2f MiB", bytes / (1024.0 * 1024.0)); }

static void timer_table(text *o) {
    oar_profiler_timer tm;
    if (oar_profiler_timer_get(&tm) != OAR_OK) return;
    pthread_mutex_lock(&prof_mu);
    int64_t first = prof.tot.first, last = prof.tot.last;
    const char *unit = tm.items > 0 ? prof.unit : "steps";
    pthread_mutex_unlock(&prof_mu);
    if (!tm.steps) {
        put(o, "oar profiler: no complete step was recorded (mark steps with oar_profiler_step)\n");
        return;
    }
    put(o, "oar profiler: timer over %lld steps (%lld to %lld)\n", (long long)tm.steps, (long long)first,
        (long long)last);
    put(o, "  %-14s %14s %14s %14s\n", "", "avg", "max", "min");
    put(o, "  %-14s %11.3f ms %11.3f ms %11.3f ms\n", "reader_cost", tm.reader_avg * 1e3, tm.reader_max * 1e3,
        tm.reader_min * 1e3);
    put(o, "  %-14s %11.3f ms %11.3f ms %11.3f ms\n", "batch_cost", tm.batch_avg * 1e3, tm.batch_max * 1e3,
        tm.batch_min * 1e3);
    put(o, "  %-14s %14.1f %14.1f %14.1f   %s/s\n", "ips", tm.ips_avg, tm.ips_max, tm.ips_min, unit);
    put(o, "  reader_ratio %.2f%% (time waiting for data / step time)\n", 100.0 * tm.reader_ratio);
    put(o, "  throughput %.2f steps/s", tm.steps_per_s);
    if (tm.items > 0) put(o, ", %.1f %s/s", tm.items_per_s, unit);
    put(o, "\n");
}

static void overview_table(text *o, const oar_profiler_overview *ov) {
    double per = ov->steps ? 1e3 / (double)ov->steps : 0, pct = ov->step > 0 ? 100.0 / ov->step : 0;
    put(o, "\nOverview: %lld steps, %.3f ms in all, %.3f ms per step\n", (long long)ov->steps, ov->step * 1e3,
        ov->step * per);
    put(o, "  %-12s %12s %14s %8s\n", "phase", "total ms", "per step ms", "%");
    const char *names[5] = {"data", "forward", "backward", "optimizer", "other"};
    double v[5] = {ov->data, ov->forward, ov->backward, ov->optimizer, ov->other};
    for (int i = 0; i < 5; i++)
        put(o, "  %-12s %12.3f %14.3f %8.1f\n", names[i], v[i] * 1e3, v[i] * per, v[i] * pct);
    if (ov->forward_inferred)
        put(o, "  (no \"forward\" range was recorded: forward is the rest of each step)\n");
}

static void op_table(text *o, bool kernels, oar_profiler_sort sort, int max_rows, bool device) {
    agg_table *t = device ? &g_agg.device : kernels ? &g_agg.kernels : &g_agg.ops;
    table_sort(t, sort);
    int64_t calls = 0;
    for (int r = 0; r < t->n; r++) calls += t->rows[r].calls;
    if (device)
        put(o, "\nDevice kernels: %d (op, device) pairs, %lld runs, sorted by %s; time on the device's timeline "
               "(CUDA events)\n", t->n, (long long)calls, sort_name(sort));
    else if (kernels)
        put(o, "\nKernels: %d (op, kernel) pairs, %lld runs, sorted by %s; the kernel's time alone\n", t->n,
            (long long)calls, sort_name(sort));
    else
        put(o, "\nOperators: %d ops, %lld calls, sorted by %s; the whole call (dispatch, kernel, autograd)\n",
            t->n, (long long)calls, sort_name(sort));
    put(o, "  %-24s", "name");
    if (kernels) put(o, " %-10s", "kernel");
    put(o, " %8s %11s %10s %10s %10s %7s %9s\n", "calls", "total ms", "avg us", "min us", "max us", "% step",
        "GFLOP/s");
    int shown = t->n < max_rows ? t->n : max_rows;
    for (int r = 0; r < shown; r++) {
        oar_profiler_op_row row;
        row_out(&t->rows[r], g_agg.ov.step, &row);
        put(o, "  %-24.24s", row.name);
        if (kernels) put(o, " %-10.10s", row.impl);
        put(o, " %8lld %11.3f %10.2f %10.2f %10.2f %7.1f", (long long)row.calls, row.total * 1e3, row.avg * 1e6,
            row.min * 1e6, row.max * 1e6, 100.0 * row.step_fraction);
        if (row.gflops_per_s > 0) put(o, " %9.2f\n", row.gflops_per_s);
        else put(o, " %9s\n", "-");
    }
    if (shown < t->n) put(o, "  ... %d more\n", t->n - shown);
}

static void memory_table(text *o) {
    oar_profiler_memory m;
    if (!prof.opts.record_memory || oar_profiler_memory_get(&m) != OAR_OK || !m.steps) return;
    put(o, "\nMemory: CPU allocator, per recorded step\n");
    put(o, "  %-18s %14s %14s\n", "", "avg", "max");
    put(o, "  %-18s %14.1f %14lld\n", "allocations", m.allocs_per_step, (long long)m.max_allocs);
    put(o, "  %-18s ", "bytes allocated");
    put_mib(o, m.bytes_per_step);
    put(o, " ");
    put_mib(o, (double)m.max_bytes);
    put(o, "\n  %-18s %14s ", "peak in tensors", "");
    put_mib(o, (double)m.peak_bytes);
    put(o, "\n  at the end: %.2f MiB in tensors, %.2f MiB cached for reuse\n",
        (double)m.current_bytes / (1024.0 * 1024.0), (double)m.cached_bytes / (1024.0 * 1024.0));
}

/* Each device's allocator as it stands at the summary (every device present). */
static void device_memory_table(text *o) {
    const double mib = 1024.0 * 1024.0;
    put(o, "\nMemory per device, now\n  %-6s %14s %14s %14s %14s %8s %10s %10s\n", "device", "active MiB",
        "peak MiB", "reserved MiB", "cached MiB", "frag %", "allocs", "cache hits");
    for (int d = 0; d < OAR_DEVICE_COUNT; d++) {
        if (!oar_device_get((oar_device)d)) continue;
        oar_memory_stats g = oar_memory_stats_get((oar_device)d);
        put(o, "  %-6s %14.2f %14.2f %14.2f %14.2f %8.1f %10lld %10lld\n", oar_device_name((oar_device)d),
            (double)g.current_bytes / mib, (double)g.peak_bytes / mib, (double)g.reserved_bytes / mib,
            (double)g.cached_bytes / mib, 100.0 * g.fragmentation, (long long)g.n_allocs, (long long)g.n_cache_hits);
    }
}

int oar_profiler_summary(char *buf, size_t size, oar_profiler_sort sort, int max_rows) {
    text o = {buf, buf ? size : 0, 0};
    if (size && buf) buf[0] = '\0';
    if (!sort_valid(sort)) sort = OAR_PROFILER_SORT_TOTAL;
    if (max_rows <= 0) max_rows = 30;
    if (!prof.ever_started) {
        put(&o, "oar profiler: not run\n");
        return (int)o.len;
    }
    timer_table(&o);
    if (prof.opts.mode == OAR_PROFILER_FULL) {
        pthread_mutex_lock(&agg_mu);
        aggregate();
        if (g_agg.ov.steps) {
            overview_table(&o, &g_agg.ov);
            op_table(&o, false, sort, max_rows, false);
            op_table(&o, true, sort, max_rows, false);
            if (g_agg.device.n) op_table(&o, true, sort, max_rows, true);
        }
        put(&o, "\nSpans: %lld on %d threads", (long long)g_agg.events, g_agg.threads);
        if (g_agg.dropped) put(&o, ", %lld dropped (raise max_events)", (long long)g_agg.dropped);
        put(&o, "\n");
        pthread_mutex_unlock(&agg_mu);
    }
    memory_table(&o);
    if (prof.opts.record_memory) device_memory_table(&o);
    return (int)o.len;
}

void oar_profiler_print(oar_profiler_sort sort, int max_rows) {
    int n = oar_profiler_summary(NULL, 0, sort, max_rows);
    char *buf = malloc((size_t)n + 1);
    if (!buf) return;
    oar_profiler_summary(buf, (size_t)n + 1, sort, max_rows);
    fputs(buf, stdout);
    fflush(stdout);
    free(buf);
}
