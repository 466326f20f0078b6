/* The spans as a Chrome trace (the JSON object format read by chrome://tracing and
 * https://ui.perfetto.dev): {"traceEvents": [...], "displayTimeUnit": "ms"}. One track per
 * thread; ops are "X" events with their kernel as a nested "X" event; steps, ranges and
 * loader waits are "X" events too; memory per step is a counter ("C"); ops that ran on a GPU
 * also appear on the device's track ("cuda stream"), placed by their CUDA events. Times are in
 * microseconds from the start of the run. Written by hand (no dependency), to a temporary
 * file renamed over the target. */
#include "profiler/prof_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
        }
    }
    fputc('"', f);
}

typedef struct writer {
    FILE *f;
    int pid;
    int64_t origin;
    bool first;
} writer;

static void begin_event(writer *w, const char *name, const char *cat, const char *ph, int tid) {
    fputs(w->first ? "\n" : ",\n", w->f);
    w->first = false;
    fputs("{\"name\":", w->f);
    json_str(w->f, name);
    fputs(",\"cat\":", w->f);
    json_str(w->f, cat);
    fprintf(w->f, ",\"ph\":\"%s\",\"pid\":%d,\"tid\":%d", ph, w->pid, tid);
}

static void put_time(writer *w, int64_t t0, int64_t t1) {
    int64_t a = t0 - w->origin, d = t1 - t0;
    if (a < 0) a = 0;
    if (d < 0) d = 0;
    fprintf(w->f, ",\"ts\":%lld.%03lld,\"dur\":%lld.%03lld", (long long)(a / 1000), (long long)(a % 1000),
            (long long)(d / 1000), (long long)(d % 1000));
}

static void write_event(writer *w, const prof_thread *t, const prof_event *e) {
    switch (e->kind) {
    case EV_OP:
        begin_event(w, e->name, "op", "X", t->tid);
        put_time(w, e->t0, e->t1);
        fputs(",\"args\":{\"kernel\":", w->f);
        json_str(w->f, e->k0 ? e->impl : "none (view)");
        fprintf(w->f, ",\"device\":\"%s\"", e->g0 ? oar_device_name((oar_device)e->gdev) : "cpu");
        if (e->args) {
            fputs(",\"inputs\":", w->f);
            json_str(w->f, e->args);
        }
        if (e->flops > 0) fprintf(w->f, ",\"gflop\":%.6g", e->flops * 1e-9);
        fprintf(w->f, ",\"step\":%lld}}", (long long)e->step);
        if (e->k0 && (e->k0 != e->t0 || e->k1 != e->t1)) {
            char name[160];
            snprintf(name, sizeof name, "%s [%s]", e->name, e->impl ? e->impl : "?");
            begin_event(w, name, "kernel", "X", t->tid);
            put_time(w, e->k0, e->k1);
            fputs(",\"args\":{\"impl\":", w->f);
            json_str(w->f, e->impl);
            fputs("}}", w->f);
        }
        break;
    case EV_RANGE:
        begin_event(w, e->name, e->phase ? "phase" : "range", "X", t->tid);
        put_time(w, e->t0, e->t1);
        fprintf(w->f, ",\"args\":{\"step\":%lld}}", (long long)e->step);
        break;
    case EV_READER:
        begin_event(w, e->name, "dataloader", "X", t->tid);
        put_time(w, e->t0, e->t1);
        fprintf(w->f, ",\"args\":{\"step\":%lld}}", (long long)e->step);
        break;
    default:
        begin_event(w, e->name, "span", "X", t->tid);
        put_time(w, e->t0, e->t1);
        fputs("}", w->f);
        break;
    }
}

/* The device track's id: after every thread's. */
#define DEVICE_TID_BASE 100000

/* The ops of t that have device spans, on the device's track. */
static void write_device_events(writer *w, const prof_thread *t, bool *named) {
    for (prof_iter it = prof_iter_begin(t); prof_iter_ok(&it); prof_iter_next(&it)) {
        const prof_event *e = it.e;
        int64_t g0, g1;
        if (!e->g0 || !prof_device_span(e, &g0, &g1)) continue;
        int tid = DEVICE_TID_BASE + e->gdev;
        if (!named[e->gdev]) {
            named[e->gdev] = true;
            char name[48];
            snprintf(name, sizeof name, "%s stream", oar_device_name((oar_device)e->gdev));
            begin_event(w, "thread_name", "__metadata", "M", tid);
            fputs(",\"args\":{\"name\":", w->f);
            json_str(w->f, name);
            fputs("}}", w->f);
            begin_event(w, "thread_sort_index", "__metadata", "M", tid);
            fprintf(w->f, ",\"args\":{\"sort_index\":%d}}", tid);
        }
        begin_event(w, e->name, "device kernel", "X", tid);
        put_time(w, g0, g1);
        fprintf(w->f, ",\"args\":{\"device\":\"%s\",\"host thread\":%d,\"step\":%lld}}",
                oar_device_name((oar_device)e->gdev), t->tid, (long long)e->step);
    }
}

static oar_status write_trace(const char *path) {
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return oar_error(OAR_ERR_IO, "profiler: cannot write the trace to %s: %s", tmp, strerror(errno));
    writer w = {.f = f, .pid = (int)getpid(), .first = true};
    pthread_mutex_lock(&prof_mu);
    w.origin = prof.origin;
    fputs("{\"traceEvents\":[", f);
    begin_event(&w, "process_name", "__metadata", "M", 0);
    fputs(",\"args\":{\"name\":\"oar\"}}", f);
    for (int64_t i = 0; i < prof.n_steps; i++) {
        const prof_step *s = &prof.steps[i];
        char name[48];
        snprintf(name, sizeof name, "ProfileStep#%lld", (long long)s->index);
        begin_event(&w, name, "step", "X", s->tid);
        put_time(&w, s->t0, s->t1);
        fprintf(f, ",\"args\":{\"step\":%lld,\"items\":%lld,\"reader_ms\":%.4f}}", (long long)s->index,
                (long long)s->items, 1e-6 * (double)s->reader_ns);
        if (prof.opts.record_memory) {
            begin_event(&w, "memory (MiB)", "memory", "C", s->tid);
            int64_t a = s->t1 > w.origin ? s->t1 - w.origin : 0;
            fprintf(f, ",\"ts\":%lld.%03lld,\"args\":{\"in tensors\":%.3f,\"cached\":%.3f,\"step peak\":%.3f}}",
                    (long long)(a / 1000), (long long)(a % 1000), (double)s->current / 1048576.0,
                    (double)s->cached / 1048576.0, (double)s->peak / 1048576.0);
        }
    }
    pthread_mutex_unlock(&prof_mu);
    for (prof_thread *t = prof_threads_head(); t; t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE)) {
        if (prof_thread_events(t) == 0) continue;
        begin_event(&w, "thread_name", "__metadata", "M", t->tid);
        fputs(",\"args\":{\"name\":", f);
        json_str(f, t->name);
        fputs("}}", f);
        begin_event(&w, "thread_sort_index", "__metadata", "M", t->tid);
        fprintf(f, ",\"args\":{\"sort_index\":%d}}", t->tid);
        for (prof_iter it = prof_iter_begin(t); prof_iter_ok(&it); prof_iter_next(&it)) write_event(&w, t, it.e);
    }
    bool named[OAR_DEVICE_COUNT] = {false};
    if (__atomic_load_n(&prof.gpu_base, __ATOMIC_ACQUIRE))
        for (prof_thread *t = prof_threads_head(); t; t = __atomic_load_n(&t->next, __ATOMIC_ACQUIRE))
            write_device_events(&w, t, named);
    fputs("\n],\"displayTimeUnit\":\"ms\"}\n", f);
    bool ok = !ferror(f);
    ok = (fflush(f) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return oar_error(OAR_ERR_IO, "profiler: cannot write the trace to %s: %s", path, strerror(err));
    }
    return OAR_OK;
}

oar_status oar_profiler_export_chrome_trace(const char *path) {
    if (!path || !*path) return oar_error(OAR_ERR_INVALID_ARG, "profiler_export_chrome_trace: expected a path");
    if (!prof.ever_started)
        return oar_error(OAR_ERR_STATE, "profiler_export_chrome_trace: the profiler has not run");
    if (strlen(path) > 1200)
        return oar_error(OAR_ERR_INVALID_ARG, "profiler_export_chrome_trace: the path is too long");
    return write_trace(path);
}

oar_status oar_prof_write_trace_dir(const char *dir, const char *path) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return oar_error(OAR_ERR_IO, "profiler: cannot create the trace directory %s: %s", dir, strerror(errno));
    return write_trace(path);
}
