/* Work handles and the public collectives: tensors are checked and turned into raw-buffer
 * descriptions for the backend; waiting is common to every backend, so a dead peer (from the
 * liveness channel) or a collective that stops progressing fails every wait the same way. */
#include "dist/comm_nccl.h"
#include "base/device.h"
#include "kernels/cpu/cpu_kernels.h"
#include "dist/liveness.h"
#include "tensor/tensor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double oar_dist_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

size_t oar_dist_dtype_size(oar_dtype dt) {
    switch (dt) {
    case OAR_F32: case OAR_I32: return 4;
    case OAR_F64: case OAR_I64: return 8;
    case OAR_F16: case OAR_BF16: return 2; /* summed in f32, rounded back after each rank's add */
    case OAR_I8: case OAR_U8: case OAR_BOOL: return 1; /* moved, never reduced */
    default: return 0;
    }
}

bool oar_dist_dtype_reduces(oar_dtype dt) {
    return oar_dist_dtype_size(dt) > 1;
}

/* dst = a op b elementwise (a: the contributions so far, b: the next rank's, as the rank-order
 * fold needs; max and min as written do not commute for NaN and signed zeros), then, when
 * divide_by > 1 (an average's last step), divided: one pass where a sum and a scale took two,
 * with the same operations per element and so the same bits (dividing a float by a power of
 * two N is multiplying by 1/N, which is exact: both round the same real number, so it is the
 * same bits at a fraction of a division's cost). dst may be a or b. */
#define COMBINE_LOOP(T, FLOATING)                                                              \
    do {                                                                                       \
        T *o = dst;                                                                            \
        const T *x = a, *y = b;                                                                \
        T dv = (T)divide_by, inv = (T)(FLOATING ? 1.0 / divide_by : 0);                        \
        switch (op) {                                                                          \
        case OAR_DIST_SUM: case OAR_DIST_AVG:                                                  \
            if (divide_by > 1 && FLOATING && !(divide_by & (divide_by - 1)))                   \
                for (int64_t i = 0; i < n; i++) o[i] = (T)(x[i] + y[i]) * inv;                 \
            else if (divide_by > 1) for (int64_t i = 0; i < n; i++) o[i] = (T)(x[i] + y[i]) / dv; \
            else for (int64_t i = 0; i < n; i++) o[i] = x[i] + y[i];                           \
            break;                                                                             \
        case OAR_DIST_MAX:                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = y[i] > x[i] ? y[i] : x[i];                  \
            break;                                                                             \
        case OAR_DIST_MIN:                                                                     \
            for (int64_t i = 0; i < n; i++) o[i] = y[i] < x[i] ? y[i] : x[i];                  \
            break;                                                                             \
        }                                                                                      \
    } while (0)

/* Half precision (a DDP compression hook's payload): each element is widened to f32, combined
 * as f32 is, and rounded back (nearest even) once, so a sum over ranks rounds after every rank's
 * add, as gloo's half sum does (at 2 ranks: the exact sum rounded once). The conversions are the
 * cast op's vector loops, on chunks small enough to stay on this (the progress) thread. */
#define HALF_CHUNK 1024
static void combine_half(uint16_t *o, const uint16_t *x, const uint16_t *y, int64_t n, oar_dtype dt, oar_dist_op op,
                         int divide_by) {
    float a[HALF_CHUNK], b[HALF_CHUNK];
    for (int64_t s = 0; s < n; s += HALF_CHUNK) {
        int64_t k = n - s < HALF_CHUNK ? n - s : HALF_CHUNK;
        oar_cpu_half_to_f32(a, x + s, k, dt);
        if (y) oar_cpu_half_to_f32(b, y + s, k, dt);
        if (y) oar_dist_combine(a, a, b, k, OAR_F32, op, divide_by);
        else oar_dist_scale_avg(a, k, OAR_F32, divide_by);
        oar_cpu_f32_to_half(o + s, a, k, dt);
    }
}

void oar_dist_combine(void *dst, const void *a, const void *b, int64_t n, oar_dtype dt, oar_dist_op op, int divide_by) {
    if (op != OAR_DIST_AVG) divide_by = 1;
    switch (dt) {
    case OAR_F32: COMBINE_LOOP(float, 1); break;
    case OAR_F64: COMBINE_LOOP(double, 1); break;
    case OAR_I32: COMBINE_LOOP(int32_t, 0); break;
    case OAR_I64: COMBINE_LOOP(int64_t, 0); break;
    case OAR_F16: case OAR_BF16: combine_half(dst, a, b, n, dt, op, divide_by); break;
    default: break;
    }
}

void oar_dist_scale_avg(void *buf, int64_t n, oar_dtype dt, int size) {
    switch (dt) { /* a division, as a mean over N*B samples divides once */
    case OAR_F32: for (int64_t i = 0; i < n; i++) ((float *)buf)[i] /= (float)size; break;
    case OAR_F64: for (int64_t i = 0; i < n; i++) ((double *)buf)[i] /= (double)size; break;
    case OAR_I32: for (int64_t i = 0; i < n; i++) ((int32_t *)buf)[i] /= size; break;
    case OAR_I64: for (int64_t i = 0; i < n; i++) ((int64_t *)buf)[i] /= size; break;
    case OAR_F16: case OAR_BF16: combine_half(buf, buf, NULL, n, dt, OAR_DIST_AVG, size); break;
    default: break;
    }
}

void oar_dist_work_finish(oar_dist_work *w, oar_status st, const char *fmt, ...) {
    w->status = st;
    if (st != OAR_OK && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
    }
    w->t_done = oar_dist_now();
    pthread_mutex_lock(&w->comm->mu);
    atomic_store(&w->done, 1);
    pthread_cond_broadcast(&w->comm->cv);
    pthread_mutex_unlock(&w->comm->mu);
}

oar_dist_work *oar_dist_submit(oar_comm *c, const oar_coll_desc *d) {
    oar_dist_work *w = OAR_NEW(oar_dist_work);
    if (!w) return NULL;
    w->comm = c;
    w->d = *d;
    snprintf(w->label, sizeof w->label, "%s", d->label ? d->label : "collective");
    w->d.label = w->label;
    w->t_submit = w->t_progress = oar_dist_now();
    if (c->ops->submit(c, w) != OAR_OK) {
        free(w);
        return NULL;
    }
    return w;
}

bool oar_dist_test(oar_dist_work *w) { return w && atomic_load(&w->done); }

oar_status oar_dist_wait(oar_dist_work *w) { return oar_dist_wait_timed(w, NULL); }

oar_status oar_dist_wait_timed(oar_dist_work *w, double *t_done) {
    if (!w) return oar_last_status() != OAR_OK ? oar_last_status()
                                               : oar_error(OAR_ERR_INVALID_ARG, "dist_wait: the work is NULL");
    oar_comm *c = w->comm;
    double timeout = oar_dist_collective_timeout();
    char why[320];
    atomic_store(&w->waited, 1);
    pthread_mutex_lock(&c->mu);
    while (!atomic_load(&w->done)) {
        int dead = oar_liveness_dead(why, sizeof why);
        double stalled = oar_dist_now() - w->t_progress;
        if (dead >= 0 || stalled > timeout) {
            pthread_mutex_unlock(&c->mu);
            oar_status st;
            if (dead >= 0) {
                st = oar_error(OAR_ERR_IO, "dist: %s; rank %d stops %s", why, oar_comm_global_rank(c, c->rank), w->label);
            } else {
                char pending[160] = "";
                if (c->ops->describe_pending) c->ops->describe_pending(c, w, pending, sizeof pending);
                st = oar_error(OAR_ERR_IO, "dist: %s made no progress for %.0f s on rank %d%s%s (a rank that "
                               "skipped it or called a different collective; the limit is "
                               "OAR_DIST_COLLECTIVE_TIMEOUT_MS)", w->label, stalled, oar_comm_global_rank(c, c->rank),
                               pending[0] ? ": still waiting for " : "", pending);
            }
            return st; /* w stays with the backend: it may still touch its buffers */
        }
        if (c->ops->drive) { /* the dead-peer and stall checks above every 20 ms */
            pthread_mutex_unlock(&c->mu);
            c->ops->drive(c, w, 0.02);
            pthread_mutex_lock(&c->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    oar_status st = w->status;
    if (st != OAR_OK) oar_error(st, "%s", w->msg);
    if (t_done) *t_done = w->t_done;
    free(w->impl);
    free(w);
    return st;
}

/* ---- the public collectives on tensors */

/* reduces: the collective sums (or maxes...) the tensor, which the byte dtypes do not take. */
static bool check_tensor(const char *who, const char *what, const oar_tensor *t, bool reduces) {
    if (!OAR_HANDLE_OK(t)) return oar_handle_error(who, what, -1, t), false;
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: %s is NULL", who, what), false;
    if (!t->storage) return oar_error(OAR_ERR_STATE, "%s: %s is symbolic (tracing); collectives in compiled "
                                                     "programs are not supported yet", who, what), false;
    if (!t->contiguous) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s contiguous; use oar_contiguous",
                                         who, what), false;
    if (t->device == OAR_CPU && reduces && !oar_dist_dtype_reduces(t->dtype)) /* device tensors: NCCL checks */
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype f32, f64, i32, i64, f16 or bf16 (the dtypes "
                         "oar reduces), got %s", who, what, oar_dtype_name(t->dtype)), false;
    if (t->device == OAR_CPU && !oar_dist_dtype_size(t->dtype))
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype f32, f64, f16, bf16, i8, u8, i32, i64 or bool, "
                         "got %s", who, what, oar_dtype_name(t->dtype)), false;
    return true;
}

/* The communicator for a collective of g (NULL: the world) on a tensor of device dev: the world's
 * MPI or NCCL by device; a group's is on the host. */
static oar_comm *comm_for(const oar_dist_group *g, oar_device dev, const char *who) {
    if (!g) return oar_dist_device_comm(dev, who); /* NCCL for GPU tensors */
    oar_comm *c = oar_dist_group_comm(g, who);
    if (c && dev != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: process groups run on host tensors, got a %s tensor; copy it "
                         "with oar_to(t, OAR_CPU) or use the world", who, oar_device_name(dev)), NULL;
    return c;
}

/* MPI has no half-precision sum: halves on the host reduce only in oar's fixed order. */
static bool check_half_reduce(const char *who, const oar_tensor *t, bool fixed_order) {
    if (fixed_order || !t || t->device != OAR_CPU || (t->dtype != OAR_F16 && t->dtype != OAR_BF16)) return true;
    oar_error(OAR_ERR_DTYPE, "%s: %s tensors are reduced in oar's fixed rank order only (MPI has no half-precision "
              "sum); use the fixed-order allreduce, or reduce in f32", who, oar_dtype_name(t->dtype));
    return false;
}

static oar_dist_work *submit_tensor(const oar_dist_group *g, const char *who, oar_coll_desc d, oar_tensor *t) {
    if (!oar_dist_group_comm(g, who) || !check_tensor(who, "the tensor", t, d.kind == OAR_COLL_ALLREDUCE)) return NULL;
    if (d.kind == OAR_COLL_ALLREDUCE && !check_half_reduce(who, t, d.fixed_order)) return NULL;
    oar_comm *c = comm_for(g, t->device, who);
    if (!c) return NULL;
    d.buf = oar_tensor_ptr(t);
    d.count = t->numel;
    d.dtype = t->dtype;
    d.label = who;
    return oar_dist_submit(c, &d);
}

static bool check_op(const char *who, oar_dist_op op) {
    if (op >= OAR_DIST_SUM && op <= OAR_DIST_MIN) return true;
    oar_error(OAR_ERR_INVALID_ARG, "%s: expected a reduce op (SUM, AVG, MAX, MIN), got %d", who, (int)op);
    return false;
}

static bool check_rank(const oar_dist_group *g, const char *who, const char *what, int r) {
    oar_comm *c = oar_dist_group_comm(g, who);
    if (!c) return false;
    if (r >= 0 && r < c->size) return true;
    oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0 <= %s < %d (the %s size), got %d", who, what, c->size,
              g ? "group's" : "world", r);
    return false;
}

oar_dist_work *oar_dist_group_allreduce(const oar_dist_group *g, oar_tensor *t, oar_dist_op op, bool fixed_order) {
    if (!check_op("dist_allreduce", op)) return NULL;
    oar_comm *c = oar_dist_group_comm(g, "dist_allreduce");
    if (!c) return NULL;
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .op = op, .fixed_order = fixed_order};
    if (fixed_order) {
        d.tag = oar_dist_next_channel(c);
        if (t) d.signature = ((uint64_t)t->numel << 8) ^ ((uint64_t)t->dtype << 4) ^ (uint64_t)op;
    }
    return submit_tensor(g, "dist_allreduce", d, t);
}

oar_dist_work *oar_dist_group_allreduce_labeled(const oar_dist_group *g, oar_tensor *t, oar_dist_op op,
                                                const char *label) {
    if (!label || !label[0]) return oar_error(OAR_ERR_INVALID_ARG, "dist_allreduce_labeled: expected a label"), NULL;
    if (!check_op(label, op)) return NULL;
    oar_comm *c = oar_dist_group_comm(g, label);
    if (!c || !check_tensor(label, "the tensor", t, true) || !(c = comm_for(g, t->device, label))) return NULL;
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the label, so another step's check fails */
    for (const char *p = label; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .op = op, .fixed_order = true, .tag = oar_dist_next_channel(c),
                       .buf = oar_tensor_ptr(t), .count = t->numel, .dtype = t->dtype, .label = label,
                       .signature = h ^ ((uint64_t)t->numel << 8) ^ ((uint64_t)t->dtype << 4) ^ (uint64_t)op};
    return oar_dist_submit(c, &d);
}

oar_dist_work *oar_dist_group_broadcast(const oar_dist_group *g, oar_tensor *t, int root) {
    if (!check_rank(g, "dist_broadcast", "root", root)) return NULL;
    return submit_tensor(g, "dist_broadcast", (oar_coll_desc){.kind = OAR_COLL_BROADCAST, .peer = root}, t);
}

static oar_dist_work *two_tensor(const oar_dist_group *g, const char *who, oar_coll_kind kind, oar_tensor *out,
                                 oar_tensor *in, oar_dist_op op) {
    oar_comm *c = oar_dist_group_comm(g, who);
    bool reduces = kind == OAR_COLL_REDUCE_SCATTER;
    if (!c || !check_tensor(who, "out", out, reduces) || !check_tensor(who, "in", in, reduces)) return NULL;
    if (out->dtype != in->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected out and in of one dtype, got %s and %s", who,
                         oar_dtype_name(out->dtype), oar_dtype_name(in->dtype)), NULL;
    if (out->device != in->device)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected out and in on one device, got %s and %s", who,
                         oar_device_name(out->device), oar_device_name(in->device)), NULL;
    if (!(c = comm_for(g, out->device, who))) return NULL;
    if (kind == OAR_COLL_REDUCE_SCATTER && !check_half_reduce(who, in, false)) return NULL;
    int64_t big = kind == OAR_COLL_ALLGATHER ? out->numel : in->numel;
    int64_t small = kind == OAR_COLL_ALLGATHER ? in->numel : out->numel;
    if (big != small * c->size)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.numel == %d (%s size) * %s.numel, got %lld and %lld",
                         who, kind == OAR_COLL_ALLGATHER ? "out" : "in", c->size, g ? "the group's" : "world",
                         kind == OAR_COLL_ALLGATHER ? "in" : "out", (long long)big, (long long)small), NULL;
    oar_coll_desc d = {.kind = kind, .buf = oar_tensor_ptr(out), .in = oar_tensor_ptr(in), .count = out->numel,
                       .dtype = out->dtype, .op = op, .label = who};
    return oar_dist_submit(c, &d);
}

oar_dist_work *oar_dist_group_allgather(const oar_dist_group *g, oar_tensor *out, oar_tensor *in) {
    return two_tensor(g, "dist_allgather", OAR_COLL_ALLGATHER, out, in, OAR_DIST_SUM);
}

oar_dist_work *oar_dist_group_reduce_scatter(const oar_dist_group *g, oar_tensor *out, oar_tensor *in,
                                             oar_dist_op op) {
    if (!check_op("dist_reduce_scatter", op)) return NULL;
    return two_tensor(g, "dist_reduce_scatter", OAR_COLL_REDUCE_SCATTER, out, in, op);
}

oar_dist_work *oar_dist_group_barrier(const oar_dist_group *g) {
    oar_comm *c = oar_dist_group_comm(g, "dist_barrier");
    if (!c) return NULL;
    return oar_dist_submit(c, &(oar_coll_desc){.kind = OAR_COLL_BARRIER, .label = "dist_barrier"});
}

static oar_dist_work *p2p(const oar_dist_group *g, const char *who, oar_coll_kind kind, oar_tensor *t, int peer,
                          int tag) {
    if (!check_rank(g, who, "peer", peer)) return NULL;
    if (tag < 0 || tag > 30000)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0 <= tag <= 30000, got %d", who, tag), NULL;
    return submit_tensor(g, who, (oar_coll_desc){.kind = kind, .peer = peer, .tag = tag}, t);
}

oar_dist_work *oar_dist_group_send(const oar_dist_group *g, oar_tensor *t, int peer, int tag) {
    return p2p(g, "dist_send", OAR_COLL_SEND, t, peer, tag);
}
oar_dist_work *oar_dist_group_recv(const oar_dist_group *g, oar_tensor *t, int peer, int tag) {
    return p2p(g, "dist_recv", OAR_COLL_RECV, t, peer, tag);
}

int oar_dist_next_channel(oar_comm *c) {
    int ch = OAR_DIST_USER_CHANNEL + c->next_channel;
    c->next_channel = (c->next_channel + 1) % (OAR_DIST_CHANNELS - OAR_DIST_USER_CHANNEL);
    return ch;
}

/* The world's (include/oar/dist.h's first collectives). */
oar_dist_work *oar_dist_allreduce(oar_tensor *t, oar_dist_op op, bool fixed_order) {
    return oar_dist_group_allreduce(NULL, t, op, fixed_order);
}
oar_dist_work *oar_dist_broadcast(oar_tensor *t, int root) { return oar_dist_group_broadcast(NULL, t, root); }
oar_dist_work *oar_dist_allgather(oar_tensor *out, oar_tensor *in) { return oar_dist_group_allgather(NULL, out, in); }
oar_dist_work *oar_dist_reduce_scatter(oar_tensor *out, oar_tensor *in, oar_dist_op op) {
    return oar_dist_group_reduce_scatter(NULL, out, in, op);
}
oar_dist_work *oar_dist_barrier(void) { return oar_dist_group_barrier(NULL); }
oar_dist_work *oar_dist_send(oar_tensor *t, int peer, int tag) { return oar_dist_group_send(NULL, t, peer, tag); }
oar_dist_work *oar_dist_recv(oar_tensor *t, int peer, int tag) { return oar_dist_group_recv(NULL, t, peer, tag); }
