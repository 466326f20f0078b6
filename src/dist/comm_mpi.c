/* The MPI communicator. One progress thread owns every MPI call after init (MPI is
 * initialised with MPI_THREAD_SERIALIZED): Open MPI advances non-blocking collectives only
 * inside MPI calls, so a thread that polls is what lets an allreduce run while backward
 * computes; and since waiting happens on a condition variable instead of inside MPI, a wait
 * can give up when the liveness channel reports a dead peer. MPI_THREAD_MULTIPLE would let
 * the compute thread call MPI too, but progress would still need a poller, and it costs a
 * lock in every call.
 *
 * The fixed-order allreduce (the default for data parallel) is oar's own: after a header
 * exchange that checks that every rank reduces the same thing, rank j receives chunk j of
 * every rank's buffer, sums the contributions in rank order 0..N-1, and sends the result to
 * all (a reduce-scatter then an allgather over point-to-point, the bytes of a ring
 * allreduce). The sum's order never depends on timing or on the algorithm MPI picks, so a run
 * repeats bit for bit and every rank holds identical values. Each runs on a channel of tags,
 * so buckets may complete in any order. */
#ifdef OAR_HAVE_MPI
#include "dist/comm.h"

#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TAG_FIXED_BASE 32768  /* user send/recv tags stay below */

typedef struct header {       /* what every rank says about a fixed-order allreduce */
    int64_t count;
    uint64_t signature;
    int32_t dtype, op;
    char label[112];
} header;

typedef struct mpi_work {
    int phase;                /* fixed order: 0 header, 1 reduce-scatter, 2 allgather */
    MPI_Request *reqs;
    int *req_peer;            /* for the timeout message */
    bool *req_done;
    int n_reqs, n_done;
    header mine, *hdrs;
    void *scratch;            /* fixed order: one chunk per rank */
    size_t scratch_size;
} mpi_work;

#define POOL 8 /* scratch buffers kept for reuse: a fresh large malloc page-faults every time */

/* The progress thread and its queue, shared by the world and every sub-communicator made from
 * it (process groups): one thread owns every MPI call, whichever communicator a work runs on. */
typedef struct mpi_engine {
    void *pool[POOL];         /* touched by the progress thread only */
    size_t pool_size[POOL];
    pthread_t thread;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    oar_dist_work *incoming, *incoming_tail;
    bool stop;
} mpi_engine;

typedef struct mpi_comm {
    MPI_Comm comm;            /* the world's duplicate, or a group's sub-communicator */
    mpi_engine *e;
    bool is_world;            /* owns e */
} mpi_comm;

static MPI_Datatype mpi_type(oar_dtype dt) {
    switch (dt) {
    case OAR_F32: return MPI_FLOAT;
    case OAR_F64: return MPI_DOUBLE;
    case OAR_I32: return MPI_INT32_T;
    default: return MPI_INT64_T;
    }
}

static MPI_Op mpi_op(oar_dist_op op) {
    return op == OAR_DIST_MAX ? MPI_MAX : op == OAR_DIST_MIN ? MPI_MIN : MPI_SUM;
}

static const char *mpi_message(int err, char *buf) {
    int len = 0;
    if (MPI_Error_string(err, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", err);
    return buf;
}

static int64_t chunk_start(int64_t count, int j, int n) { return count * j / n; }

/* Room for n requests of the current phase. */
static bool phase_reqs(mpi_work *m, int n) {
    free(m->reqs);
    free(m->req_peer);
    free(m->req_done);
    m->reqs = malloc(sizeof(MPI_Request) * (size_t)(n ? n : 1));
    m->req_peer = malloc(sizeof(int) * (size_t)(n ? n : 1));
    m->req_done = calloc((size_t)(n ? n : 1), sizeof(bool));
    m->n_reqs = 0;
    m->n_done = 0;
    return m->reqs && m->req_peer && m->req_done;
}

static void add_req(mpi_work *m, MPI_Request r, int peer) {
    m->req_peer[m->n_reqs] = peer;
    m->reqs[m->n_reqs++] = r;
}

static void *scratch_get(mpi_comm *mc, size_t size, size_t *got) {
    int best = -1;
    for (int k = 0; k < POOL; k++)
        if (mc->e->pool[k] && mc->e->pool_size[k] >= size && (best < 0 || mc->e->pool_size[k] < mc->e->pool_size[best])) best = k;
    if (best >= 0) {
        void *p = mc->e->pool[best];
        *got = mc->e->pool_size[best];
        mc->e->pool[best] = NULL;
        return p;
    }
    *got = size;
    return malloc(size);
}

static void scratch_put(mpi_comm *mc, void *p, size_t size) {
    if (!p) return;
    int slot = -1;
    for (int k = 0; k < POOL && slot < 0; k++)
        if (!mc->e->pool[k]) slot = k;
    if (slot < 0) { /* full: drop the smallest */
        slot = 0;
        for (int k = 1; k < POOL; k++)
            if (mc->e->pool_size[k] < mc->e->pool_size[slot]) slot = k;
        if (mc->e->pool_size[slot] > size) {
            free(p);
            return;
        }
        free(mc->e->pool[slot]);
    }
    mc->e->pool[slot] = p;
    mc->e->pool_size[slot] = size;
}

static void free_impl_parts(mpi_comm *mc, mpi_work *m) {
    free(m->reqs);
    free(m->req_peer);
    free(m->req_done);
    free(m->hdrs);
    scratch_put(mc, m->scratch, m->scratch_size);
    m->reqs = NULL;
    m->req_peer = NULL;
    m->req_done = NULL;
    m->hdrs = NULL;
    m->scratch = NULL;
}

/* Completes w: its buffers are freed first, since the waiter frees w once it is done. */
static void done(oar_dist_work *w, oar_status st, const char *fmt, ...) OAR_PRINTF(3, 4);
static void done(oar_dist_work *w, oar_status st, const char *fmt, ...) {
    char msg[sizeof w->msg] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
    }
    free_impl_parts(((oar_comm *)w->comm)->impl, w->impl);
    oar_dist_work_finish(w, st, "%s", msg);
}

/* Posts the point-to-point traffic of a fixed-order phase; returns an MPI error code. */
static int post_fixed_phase(oar_comm *c, mpi_comm *mc, oar_dist_work *w) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    int n = c->size, me = c->rank, err = MPI_SUCCESS;
    int tag = TAG_FIXED_BASE + d->tag * 3 + m->phase;
    size_t es = oar_dist_dtype_size(d->dtype);
    MPI_Datatype t = mpi_type(d->dtype);
    if (!phase_reqs(m, 2 * (n - 1))) return MPI_ERR_NO_MEM;
    int64_t my0 = chunk_start(d->count, me, n), my_len = chunk_start(d->count, me + 1, n) - my0;
    for (int j = 0; j < n && err == MPI_SUCCESS; j++) {
        if (j == me) continue;
        MPI_Request rr, sr;
        int64_t j0 = chunk_start(d->count, j, n), j_len = chunk_start(d->count, j + 1, n) - j0;
        if (m->phase == 0) {
            err = MPI_Irecv(&m->hdrs[j], sizeof(header), MPI_BYTE, j, tag, mc->comm, &rr);
            if (err == MPI_SUCCESS) add_req(m, rr, j), err = MPI_Isend(&m->mine, sizeof(header), MPI_BYTE, j, tag, mc->comm, &sr);
        } else if (m->phase == 1) { /* my chunk of j's buffer in; j's chunk of mine out */
            err = MPI_Irecv((char *)m->scratch + (size_t)j * (size_t)my_len * es, (int)my_len, t, j, tag, mc->comm, &rr);
            if (err == MPI_SUCCESS) add_req(m, rr, j), err = MPI_Isend((char *)d->buf + (size_t)j0 * es, (int)j_len, t, j, tag, mc->comm, &sr);
        } else {                    /* j's reduced chunk in; my reduced chunk out */
            err = MPI_Irecv((char *)d->buf + (size_t)j0 * es, (int)j_len, t, j, tag, mc->comm, &rr);
            if (err == MPI_SUCCESS) add_req(m, rr, j), err = MPI_Isend((char *)d->buf + (size_t)my0 * es, (int)my_len, t, j, tag, mc->comm, &sr);
        }
        if (err == MPI_SUCCESS) add_req(m, sr, -1 - j);
    }
    return err;
}

static void sum_in_rank_order(oar_comm *c, oar_dist_work *w) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    int n = c->size, me = c->rank;
    size_t es = oar_dist_dtype_size(d->dtype);
    int64_t my0 = chunk_start(d->count, me, n), len = chunk_start(d->count, me + 1, n) - my0;
    char *own = (char *)d->buf + (size_t)my0 * es;
    bool sum = d->op == OAR_DIST_SUM || d->op == OAR_DIST_AVG;
    if (me <= 1 && sum) { /* in place, no copies: x0 + x1 == x1 + x0 exactly (addition commutes; max
                           * and min as written do not, for NaN and signed zeros), then the rest in order */
        for (int j = 0; j < n; j++)
            if (j != me) oar_dist_reduce_into(own, (char *)m->scratch + (size_t)j * (size_t)len * es, len, d->dtype, d->op);
        if (d->op == OAR_DIST_AVG) oar_dist_scale_avg(own, len, d->dtype, n);
        return;
    }
    char *acc = (char *)m->scratch + (size_t)me * (size_t)len * es; /* my slot is free */
    for (int j = 0; j < n; j++) {
        const char *src = j == me ? own : (char *)m->scratch + (size_t)j * (size_t)len * es;
        if (j == 0) memcpy(acc, src, (size_t)len * es);
        else oar_dist_reduce_into(acc, src, len, d->dtype, d->op);
    }
    if (d->op == OAR_DIST_AVG) oar_dist_scale_avg(acc, len, d->dtype, n);
    memcpy(own, acc, (size_t)len * es);
}

static bool headers_agree(oar_comm *c, oar_dist_work *w) {
    mpi_work *m = w->impl;
    for (int j = 0; j < c->size; j++) {
        if (j == c->rank) continue;
        header *h = &m->hdrs[j];
        if (h->count == m->mine.count && h->signature == m->mine.signature && h->dtype == m->mine.dtype &&
            h->op == m->mine.op)
            continue;
        h->label[sizeof h->label - 1] = 0;
        done(w, OAR_ERR_STATE, "dist: mismatched collective: rank %d runs %s with %lld elements of %s "
                             "(signature %016llx), rank %d runs %s with %lld elements of %s (signature %016llx); "
                             "every rank must build the same model and call the same collectives in order",
                             oar_comm_global_rank(c, c->rank), m->mine.label, (long long)m->mine.count,
                             oar_dtype_name((oar_dtype)m->mine.dtype), (unsigned long long)m->mine.signature,
                             oar_comm_global_rank(c, j), h->label, (long long)h->count,
                             oar_dtype_name((oar_dtype)h->dtype), (unsigned long long)h->signature);
        return false;
    }
    return true;
}

/* Issues w's first requests. Returns false when w finished already. */
static bool start(oar_comm *c, mpi_comm *mc, oar_dist_work *w) {
    const oar_coll_desc *d = &w->d;
    mpi_work *m = w->impl;
    MPI_Datatype t = mpi_type(d->dtype);
    char msg[MPI_MAX_ERROR_STRING];
    int err = MPI_SUCCESS;
    MPI_Request r = MPI_REQUEST_NULL;
    if (!phase_reqs(m, 1)) {
        done(w, OAR_ERR_OOM, "%s: out of memory for its requests", w->label);
        return false;
    }
    switch (d->kind) {
    case OAR_COLL_ALLREDUCE:
        if (d->fixed_order) {
            if (c->size == 1) break;
            int64_t most = chunk_start(d->count, 1, c->size) + 1;
            m->hdrs = calloc((size_t)c->size, sizeof(header));
            m->scratch = scratch_get(mc, (size_t)c->size * (size_t)most * oar_dist_dtype_size(d->dtype) + 1,
                                     &m->scratch_size);
            if (!m->hdrs || !m->scratch) {
                done(w, OAR_ERR_OOM, "%s: out of memory for its buffers", w->label);
                return false;
            }
            m->mine = (header){.count = d->count, .signature = d->signature, .dtype = d->dtype, .op = d->op};
            memcpy(m->mine.label, w->label, sizeof m->mine.label - 1); /* cut to fit */
            err = post_fixed_phase(c, mc, w);
            goto posted;
        }
        err = MPI_Iallreduce(MPI_IN_PLACE, d->buf, (int)d->count, t, mpi_op(d->op), mc->comm, &r);
        break;
    case OAR_COLL_BROADCAST: err = MPI_Ibcast(d->buf, (int)d->count, t, d->peer, mc->comm, &r); break;
    case OAR_COLL_ALLGATHER: {
        int each = (int)(d->count / c->size);
        err = MPI_Iallgather(d->in, each, t, d->buf, each, t, mc->comm, &r);
        break;
    }
    case OAR_COLL_REDUCE_SCATTER:
        err = MPI_Ireduce_scatter_block(d->in, d->buf, (int)d->count, t, mpi_op(d->op), mc->comm, &r);
        break;
    case OAR_COLL_BARRIER: err = MPI_Ibarrier(mc->comm, &r); break;
    case OAR_COLL_SEND: err = MPI_Isend(d->buf, (int)d->count, t, d->peer, d->tag, mc->comm, &r); break;
    case OAR_COLL_RECV: err = MPI_Irecv(d->buf, (int)d->count, t, d->peer, d->tag, mc->comm, &r); break;
    case OAR_COLL_SPLIT: { /* blocking, but every rank reaches it right after new_group's agreement check */
        oar_comm_split_out *o = d->buf;
        MPI_Comm sub = MPI_COMM_NULL;
        err = MPI_Comm_split(mc->comm, d->peer >= 0 ? 0 : MPI_UNDEFINED, d->tag, &sub);
        o->rank = o->size = -1;
        if (err == MPI_SUCCESS && sub != MPI_COMM_NULL) {
            MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
            MPI_Comm_rank(sub, &o->rank);
            MPI_Comm_size(sub, &o->size);
        }
        _Static_assert(sizeof sub <= sizeof o->storage, "an MPI_Comm fits the split's storage");
        memcpy(o->storage, &sub, sizeof sub);
        break;
    }
    case OAR_COLL_FREE: err = MPI_Comm_free(&mc->comm); break;
    }
    if (r != MPI_REQUEST_NULL) add_req(m, r, d->kind == OAR_COLL_SEND || d->kind == OAR_COLL_RECV ? d->peer : -100);
posted:
    if (err != MPI_SUCCESS) {
        done(w, OAR_ERR_IO, "%s: MPI failed to start it: %s", w->label, mpi_message(err, msg));
        return false;
    }
    if (m->n_reqs == 0) {
        done(w, OAR_OK, NULL);
        return false;
    }
    return true;
}

/* Tests w's requests; moves phases on; returns true when w finished. */
static bool advance(oar_comm *c, mpi_comm *mc, oar_dist_work *w, bool *progressed) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    char msg[MPI_MAX_ERROR_STRING];
    int idx[64], outcount = 0;
    MPI_Status st[64];
    if (m->n_reqs > 64) { /* large worlds: test in one call, indices unused */
        int flag = 0, err = MPI_Testall(m->n_reqs, m->reqs, &flag, MPI_STATUSES_IGNORE);
        if (err != MPI_SUCCESS) {
            done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
            return true;
        }
        if (flag) m->n_done = m->n_reqs;
    } else {
        int err = MPI_Testsome(m->n_reqs, m->reqs, &outcount, idx, st);
        if (err != MPI_SUCCESS) {
            done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
            return true;
        }
        if (outcount == MPI_UNDEFINED) outcount = 0;
        for (int k = 0; k < outcount; k++) m->req_done[idx[k]] = true;
        m->n_done += outcount;
        if (outcount && d->kind == OAR_COLL_RECV) {
            int got = 0;
            MPI_Get_count(&st[0], mpi_type(d->dtype), &got);
            if (got != d->count) {
                done(w, OAR_ERR_SHAPE, "%s: expected %lld elements from rank %d, got %d",
                                     w->label, (long long)d->count, d->peer, got);
                return true;
            }
        }
    }
    if (m->n_done > 0 && (outcount > 0 || m->n_done == m->n_reqs)) {
        w->t_progress = oar_dist_now();
        *progressed = true;
    }
    if (m->n_done < m->n_reqs) return false;
    if (d->kind == OAR_COLL_ALLREDUCE && d->fixed_order && m->phase < 2) {
        if (m->phase == 0 && !headers_agree(c, w)) return true;
        if (m->phase == 1) sum_in_rank_order(c, w);
        m->phase++;
        int err = post_fixed_phase(c, mc, w);
        if (err != MPI_SUCCESS) {
            done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
            return true;
        }
        return false;
    }
    if (d->op == OAR_DIST_AVG && !d->fixed_order &&
        (d->kind == OAR_COLL_ALLREDUCE || d->kind == OAR_COLL_REDUCE_SCATTER))
        oar_dist_scale_avg(d->buf, d->kind == OAR_COLL_ALLREDUCE ? d->count : d->count, d->dtype, c->size);
    done(w, OAR_OK, NULL);
    return true;
}

static void *progress_main(void *arg) {
    mpi_comm *mc = ((oar_comm *)arg)->impl; /* the world's: its engine is everyone's */
    oar_dist_work *active = NULL, **tail = &active;
    double last_progress = 0;
    for (;;) {
        pthread_mutex_lock(&mc->e->qmu);
        if (!mc->e->incoming && !active && !mc->e->stop) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&mc->e->qcv, &mc->e->qmu, &ts);
        }
        oar_dist_work *fresh = mc->e->incoming;
        mc->e->incoming = mc->e->incoming_tail = NULL;
        bool stop = mc->e->stop;
        pthread_mutex_unlock(&mc->e->qmu);
        if (stop) break;
        bool progressed = false;
        while (fresh) { /* in submission order: MPI collectives must match across ranks */
            oar_dist_work *w = fresh;
            fresh = fresh->next;
            w->next = NULL;
            progressed = true;
            if (start(w->comm, w->comm->impl, w)) *tail = w, tail = &w->next;
        }
        for (oar_dist_work **p = &active; *p;) {
            oar_dist_work *w = *p;
            oar_dist_work *next = w->next; /* w may be freed by its waiter once done */
            if (advance(w->comm, w->comm->impl, w, &progressed)) {
                *p = next;
            } else {
                p = &w->next;
            }
        }
        tail = &active;
        while (*tail) tail = &(*tail)->next;
        /* right after progress, poll again at once (yielding the core): a collective's next
         * message usually follows within microseconds; after 200 us of silence, sleep between
         * polls so a long backward keeps its core */
        if (progressed) last_progress = oar_dist_now();
        if (active && !progressed) {
            if (oar_dist_now() - last_progress < 200e-6) sched_yield();
            else nanosleep(&(struct timespec){0, 50000}, NULL);
        }
    }
    return NULL;
}

static oar_status mpi_submit(oar_comm *c, oar_dist_work *w) {
    mpi_comm *mc = c->impl;
    if (w->d.count > INT_MAX)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: at most %d elements per collective, got %lld; split the tensor",
                         w->label, INT_MAX, (long long)w->d.count);
    if (!(w->impl = OAR_NEW(mpi_work))) return OAR_ERR_OOM;
    pthread_mutex_lock(&mc->e->qmu);
    if (mc->e->incoming_tail) mc->e->incoming_tail->next = w;
    else mc->e->incoming = w;
    mc->e->incoming_tail = w;
    pthread_cond_signal(&mc->e->qcv);
    pthread_mutex_unlock(&mc->e->qmu);
    return OAR_OK;
}

/* Called by a waiter only after w made no progress for the collective timeout, so the progress
 * thread is not changing w's phase (and its request arrays) meanwhile. */
static void mpi_describe_pending(oar_comm *c, oar_dist_work *w, char *buf, size_t size) {
    mpi_work *m = w->impl;
    size_t used = 0;
    buf[0] = 0;
    if (!m || !m->req_done) return;
    for (int k = 0; k < m->n_reqs && used + 16 < size; k++) {
        int peer = m->req_peer[k];
        if (m->req_done[k] || peer < 0) continue; /* receives name the ranks we wait for */
        used += (size_t)snprintf(buf + used, size - used, "%srank %d", used ? ", " : "", oar_comm_global_rank(c, peer));
    }
    if (!used && w->d.kind != OAR_COLL_SEND) snprintf(buf, size, "the other ranks (inside MPI's %s)", w->label);
}

static void mpi_shutdown(oar_comm *c, bool clean) {
    mpi_comm *mc = c->impl;
    if (!mc->is_world) return; /* a group's: freed by an OAR_COLL_FREE work while the engine runs */
    pthread_mutex_lock(&mc->e->qmu);
    mc->e->stop = true;
    pthread_cond_signal(&mc->e->qcv);
    pthread_mutex_unlock(&mc->e->qmu);
    pthread_join(mc->e->thread, NULL);
    for (int k = 0; k < POOL; k++) free(mc->e->pool[k]);
    free(mc->e);
    mc->e = NULL;
    if (clean) MPI_Comm_free(&mc->comm);
}

static oar_comm *mpi_split(oar_comm *c, bool member, int key, oar_status *st);

static const oar_comm_ops mpi_ops = {.name = "mpi", .submit = mpi_submit, .describe_pending = mpi_describe_pending,
                                     .shutdown = mpi_shutdown, .split = mpi_split};

/* MPI_Comm_split on the progress thread (the only one that calls MPI); the new communicator's
 * works go through the same engine. */
static oar_comm *mpi_split(oar_comm *c, bool member, int key, oar_status *st) {
    oar_comm_split_out o = {0};
    oar_coll_desc d = {.kind = OAR_COLL_SPLIT, .buf = &o, .peer = member ? 0 : -1, .tag = key, .label = "new_group"};
    *st = oar_dist_wait(oar_dist_submit(c, &d));
    if (*st != OAR_OK || !member) return NULL;
    oar_comm *g = OAR_NEW(oar_comm);
    mpi_comm *mc = OAR_NEW(mpi_comm);
    if (!g || !mc) {
        free(g);
        free(mc);
        *st = oar_error(OAR_ERR_OOM, "new_group: out of memory");
        return NULL;
    }
    memcpy(&mc->comm, o.storage, sizeof mc->comm);
    mc->e = ((mpi_comm *)c->impl)->e;
    g->ops = &mpi_ops;
    g->impl = mc;
    g->rank = o.rank;
    g->size = o.size;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    return g;
}

oar_comm *oar_comm_mpi_new(void) {
    oar_comm *c = OAR_NEW(oar_comm);
    mpi_comm *mc = OAR_NEW(mpi_comm);
    mpi_engine *e = OAR_NEW(mpi_engine);
    if (!c || !mc || !e) {
        free(c);
        free(mc);
        free(e);
        return NULL;
    }
    mc->e = e;
    mc->is_world = true;
    MPI_Comm_dup(MPI_COMM_WORLD, &mc->comm);
    MPI_Comm_set_errhandler(mc->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(mc->comm, &c->rank);
    MPI_Comm_size(mc->comm, &c->size);
    c->ops = &mpi_ops;
    c->impl = mc;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    pthread_mutex_init(&mc->e->qmu, NULL);
    pthread_cond_init(&mc->e->qcv, NULL);
    if (pthread_create(&mc->e->thread, NULL, progress_main, c) != 0) {
        oar_error(OAR_ERR_INTERNAL, "dist_init: could not start the MPI progress thread");
        MPI_Comm_free(&mc->comm);
        free(e);
        free(mc);
        free(c);
        return NULL;
    }
    return c;
}
#endif
