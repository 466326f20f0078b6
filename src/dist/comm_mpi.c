/* The MPI communicator. One progress thread owns every MPI call after init (MPI is
 * initialised with MPI_THREAD_SERIALIZED): Open MPI advances non-blocking collectives only
 * inside MPI calls, so a thread that polls is what lets an allreduce run while backward
 * computes; and since waiting happens on a condition variable instead of inside MPI, a wait
 * can give up when the liveness channel reports a dead peer. MPI_THREAD_MULTIPLE would let
 * the compute thread call MPI too, but progress would still need a poller, and it costs a
 * lock in every call.
 *
 * A thread blocked in a wait does not sleep while the progress thread works for it: it polls
 * MPI itself (mpi_drive; a mutex keeps the calls serialized), so a collective costs no hand-off
 * at the start and no wake-up at the end, as a blocking MPI call costs none.
 *
 * The fixed-order allreduce (the default for data parallel) is oar's own: after a header
 * exchange that checks that every rank reduces the same thing, rank j receives chunk j of
 * every rank's buffer, folds the contributions in rank order 0..N-1, and sends the result to
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
    int phase;                /* fixed order: 0 header, 1 data (reduce-scatter and allgather) */
    MPI_Request *reqs;
    int *req_peer;            /* for the timeout message */
    bool *req_done;
    int *idx;                 /* MPI_Testsome's completed indices */
    int n_reqs, n_done;
    header mine, *hdrs;
    void *scratch;            /* fixed order: one chunk per rank */
    size_t scratch_size;
    int n_seg;                /* fixed order: segments per chunk */
    int reduced;              /* my chunk's segments reduced (and sent), in order */
    int *arrived;             /* per segment of my chunk: the peers' contributions received */
    int *gather_posted;       /* per peer: receives of its reduced segments posted, in order */
} mpi_work;

#define QUIET_AFTER 200e-6 /* seconds without progress after which the progress thread sleeps */

#define POOL 8 /* scratch buffers kept for reuse: a fresh large malloc page-faults every time */

/* The progress thread and its queue, shared by the world and every sub-communicator made from
 * it (process groups): one thread owns every MPI call, whichever communicator a work runs on. */
typedef struct mpi_engine {
    pthread_t thread;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    oar_dist_work *incoming, *incoming_tail; /* under qmu, as the next two */
    bool stop;
    int drivers;              /* waiters polling MPI themselves (mpi_drive): the thread stands by */
    pthread_mutex_t mpi_mu;   /* held by whoever polls MPI (the thread or a waiter), for the rest */
    oar_dist_work *active;    /* started, not complete */
    double last_progress;
    void *pool[POOL];
    size_t pool_size[POOL];
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
    case OAR_F16: case OAR_BF16: return MPI_UINT16_T; /* moved as bits; oar sums them (fixed order) */
    case OAR_I8: return MPI_INT8_T;                     /* the byte dtypes: moved, never reduced */
    case OAR_U8: case OAR_BOOL: return MPI_UINT8_T;
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

/* The data phase cuts every rank's chunk into the same number of segments (so each (peer,
 * segment) pair exists on both sides): a segment is reduced as soon as every peer's part of it
 * is in and sent on at once, so a large bucket's allgather starts before its whole chunk is
 * reduced. Message boundaries only: each element is the same rank-order fold whatever the
 * segments. Large, since each message is a rendezvous that both sides must poll through, and
 * shared memory's single copy runs on the receiver's core, the one that also reduces: at 2
 * ranks 64 KiB segments cost 10-25% of the bandwidth, and 128 KiB to 1 MiB ones were within
 * the noise of one segment per chunk (docs/dist.md). */
#define SEGMENT_BYTES (1024 * 1024)
#define MAX_SEGMENTS 64

static int n_segments(int64_t most, size_t es) {
    int64_t s = ((int64_t)es * most + SEGMENT_BYTES - 1) / SEGMENT_BYTES;
    return s < 1 ? 1 : s > MAX_SEGMENTS ? MAX_SEGMENTS : (int)s;
}

/* Room for n requests of the current phase, all MPI_REQUEST_NULL. */
static bool phase_reqs(mpi_work *m, int n) {
    free(m->reqs);
    free(m->req_peer);
    free(m->req_done);
    free(m->idx);
    size_t k = (size_t)(n ? n : 1);
    m->reqs = malloc(sizeof(MPI_Request) * k);
    m->req_peer = malloc(sizeof(int) * k);
    m->req_done = calloc(k, sizeof(bool));
    m->idx = malloc(sizeof(int) * k);
    m->n_reqs = 0;
    m->n_done = 0;
    if (!m->reqs || !m->req_peer || !m->req_done || !m->idx) return false;
    for (size_t i = 0; i < k; i++) m->reqs[i] = MPI_REQUEST_NULL, m->req_peer[i] = -1;
    return true;
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
    free(m->idx);
    free(m->hdrs);
    free(m->arrived);
    free(m->gather_posted);
    scratch_put(mc, m->scratch, m->scratch_size);
    m->reqs = NULL;
    m->req_peer = NULL;
    m->req_done = NULL;
    m->idx = NULL;
    m->hdrs = NULL;
    m->arrived = NULL;
    m->gather_posted = NULL;
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

/* A fixed-order allreduce's geometry on one rank. */
typedef struct fixed_geom {
    int n, me, peers, segs;
    size_t es;
    int64_t most;             /* elements of the largest chunk: a scratch slot */
    int tag;                  /* the channel's first tag: +0 header, +1 reduce-scatter, +2 allgather */
    MPI_Datatype t;
} fixed_geom;

static fixed_geom geom(const oar_comm *c, const oar_dist_work *w) {
    const oar_coll_desc *d = &w->d;
    fixed_geom g = {.n = c->size, .me = c->rank, .peers = c->size - 1, .es = oar_dist_dtype_size(d->dtype),
                    .most = (d->count + c->size - 1) / c->size, .tag = TAG_FIXED_BASE + d->tag * 3,
                    .t = mpi_type(d->dtype)};
    g.segs = n_segments(g.most, g.es);
    return g;
}

/* Segment s of chunk j: its first element in the buffer and its length. */
static int64_t seg_start(const fixed_geom *g, int64_t count, int j, int s) {
    int64_t c0 = chunk_start(count, j, g->n), len = chunk_start(count, j + 1, g->n) - c0;
    return c0 + len * s / g->segs;
}
static int seg_len(const fixed_geom *g, int64_t count, int j, int s) {
    int64_t c0 = chunk_start(count, j, g->n), len = chunk_start(count, j + 1, g->n) - c0;
    return (int)(len * (s + 1) / g->segs - len * s / g->segs);
}

/* Request slots of the data phase: kind 0 reduce-scatter in, 1 out, 2 allgather in, 3 out. */
static int slot(const fixed_geom *g, int kind, int p, int s) { return (kind * g->peers + p) * g->segs + s; }
static int peer_rank(const fixed_geom *g, int p) { return p < g->me ? p : p + 1; }

/* Where peer j's part of segment s of my chunk lands (scratch slot j; slot me is the accumulator). */
static char *scratch_at(const fixed_geom *g, mpi_work *m, int64_t count, int j, int s) {
    int64_t off = seg_start(g, count, g->me, s) - chunk_start(count, g->me, g->n);
    return (char *)m->scratch + ((size_t)j * (size_t)g->most + (size_t)off) * g->es;
}

/* Posts the header exchange; returns an MPI error code. */
static int post_headers(oar_comm *c, mpi_comm *mc, oar_dist_work *w) {
    mpi_work *m = w->impl;
    int err = MPI_SUCCESS, tag = TAG_FIXED_BASE + w->d.tag * 3;
    if (!phase_reqs(m, 2 * (c->size - 1))) return MPI_ERR_NO_MEM;
    for (int j = 0; j < c->size && err == MPI_SUCCESS; j++) {
        if (j == c->rank) continue;
        MPI_Request rr, sr;
        err = MPI_Irecv(&m->hdrs[j], sizeof(header), MPI_BYTE, j, tag, mc->comm, &rr);
        if (err == MPI_SUCCESS) add_req(m, rr, j), err = MPI_Isend(&m->mine, sizeof(header), MPI_BYTE, j, tag, mc->comm, &sr);
        if (err == MPI_SUCCESS) add_req(m, sr, -1 - j);
    }
    return err;
}

/* Starts the data phase: every segment of my chunk in from every peer, and every peer's
 * segments out; the allgather's messages follow segment by segment (advance_data). */
static int post_data(oar_comm *c, mpi_comm *mc, oar_dist_work *w) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    fixed_geom g = geom(c, w);
    int err = MPI_SUCCESS;
    m->n_seg = g.segs;
    m->reduced = 0;
    m->arrived = calloc((size_t)g.segs, sizeof(int));
    m->gather_posted = calloc((size_t)g.peers, sizeof(int));
    if (!m->arrived || !m->gather_posted || !phase_reqs(m, 4 * g.peers * g.segs)) return MPI_ERR_NO_MEM;
    m->n_reqs = 4 * g.peers * g.segs;
    for (int p = 0; p < g.peers; p++)
        for (int s = 0; s < g.segs; s++) {
            int j = peer_rank(&g, p);
            m->req_peer[slot(&g, 0, p, s)] = m->req_peer[slot(&g, 2, p, s)] = j;
            m->req_peer[slot(&g, 1, p, s)] = m->req_peer[slot(&g, 3, p, s)] = -1 - j;
        }
    for (int p = 0; p < g.peers && err == MPI_SUCCESS; p++)
        for (int s = 0; s < g.segs && err == MPI_SUCCESS; s++)
            err = MPI_Irecv(scratch_at(&g, m, d->count, peer_rank(&g, p), s), seg_len(&g, d->count, g.me, s), g.t,
                            peer_rank(&g, p), g.tag + 1, mc->comm, &m->reqs[slot(&g, 0, p, s)]);
    for (int p = 0; p < g.peers && err == MPI_SUCCESS; p++)
        for (int s = 0; s < g.segs && err == MPI_SUCCESS; s++) {
            int j = peer_rank(&g, p);
            err = MPI_Isend((char *)d->buf + (size_t)seg_start(&g, d->count, j, s) * g.es, seg_len(&g, d->count, j, s),
                            g.t, j, g.tag + 1, mc->comm, &m->reqs[slot(&g, 1, p, s)]);
        }
    return err;
}

/* Reduces segment s of my chunk: the fold x0 op x1 op ... op x(n-1) in rank order, element by
 * element, written straight into my buffer where possible (the sources: scratch slot j for peer
 * j, my buffer for me; until my own term is consumed the running value lives in my scratch
 * slot), an average's division fused into the last step. */
static void reduce_segment(const fixed_geom *g, oar_dist_work *w, int s) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    int64_t len = seg_len(g, d->count, g->me, s);
    char *own = (char *)d->buf + (size_t)seg_start(g, d->count, g->me, s) * g->es;
    const void *acc = g->me == 0 ? own : scratch_at(g, m, d->count, 0, s);
    for (int j = 1; j < g->n; j++) {
        void *dst = j >= g->me ? own : scratch_at(g, m, d->count, g->me, s);
        const void *x = j == g->me ? own : scratch_at(g, m, d->count, j, s);
        oar_dist_combine(dst, acc, x, len, d->dtype, d->op, j == g->n - 1 ? g->n : 1);
        acc = dst;
    }
}

/* After completions in the data phase: reduce the segments whose parts are all in (in order)
 * and send them to every peer; post the receives of a peer's reduced segments once my own send
 * of that segment completed (the receive overwrites the bytes it sent). */
static int advance_data(oar_comm *c, mpi_comm *mc, oar_dist_work *w) {
    mpi_work *m = w->impl;
    const oar_coll_desc *d = &w->d;
    fixed_geom g = geom(c, w);
    int err = MPI_SUCCESS;
    while (m->reduced < g.segs && m->arrived[m->reduced] == g.peers && err == MPI_SUCCESS) {
        int s = m->reduced++;
        reduce_segment(&g, w, s);
        char *own = (char *)d->buf + (size_t)seg_start(&g, d->count, g.me, s) * g.es;
        for (int p = 0; p < g.peers && err == MPI_SUCCESS; p++)
            err = MPI_Isend(own, seg_len(&g, d->count, g.me, s), g.t, peer_rank(&g, p), g.tag + 2, mc->comm,
                            &m->reqs[slot(&g, 3, p, s)]);
    }
    for (int p = 0; p < g.peers && err == MPI_SUCCESS; p++) {
        int j = peer_rank(&g, p);
        for (int s; (s = m->gather_posted[p]) < g.segs && m->req_done[slot(&g, 1, p, s)] && err == MPI_SUCCESS;
             m->gather_posted[p]++)
            err = MPI_Irecv((char *)d->buf + (size_t)seg_start(&g, d->count, j, s) * g.es, seg_len(&g, d->count, j, s),
                            g.t, j, g.tag + 2, mc->comm, &m->reqs[slot(&g, 2, p, s)]);
    }
    return err;
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
            int64_t most = (d->count + c->size - 1) / c->size;
            m->hdrs = calloc((size_t)c->size, sizeof(header));
            m->scratch = scratch_get(mc, (size_t)c->size * (size_t)most * oar_dist_dtype_size(d->dtype) + 1,
                                     &m->scratch_size);
            if (!m->hdrs || !m->scratch) {
                done(w, OAR_ERR_OOM, "%s: out of memory for its buffers", w->label);
                return false;
            }
            m->mine = (header){.count = d->count, .signature = d->signature, .dtype = d->dtype, .op = d->op};
            memcpy(m->mine.label, w->label, sizeof m->mine.label - 1); /* cut to fit */
            err = post_headers(c, mc, w);
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
    int outcount = 0, err;
    bool fixed = d->kind == OAR_COLL_ALLREDUCE && d->fixed_order;
    MPI_Status st;
    if (m->n_reqs == 1) { /* the other collectives: one request (a receive's status is checked) */
        int flag = 0;
        err = MPI_Test(&m->reqs[0], &flag, &st);
        if (flag) outcount = 1, m->idx[0] = 0;
    } else {
        err = MPI_Testsome(m->n_reqs, m->reqs, &outcount, m->idx, MPI_STATUSES_IGNORE);
        if (outcount == MPI_UNDEFINED) outcount = 0;
    }
    if (err != MPI_SUCCESS) {
        done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
        return true;
    }
    for (int k = 0; k < outcount; k++) {
        m->req_done[m->idx[k]] = true;
        if (fixed && m->phase == 1 && m->idx[k] < (c->size - 1) * m->n_seg) m->arrived[m->idx[k] % m->n_seg]++;
    }
    m->n_done += outcount;
    if (outcount && d->kind == OAR_COLL_RECV) {
        int got = 0;
        MPI_Get_count(&st, mpi_type(d->dtype), &got);
        if (got != d->count) {
            done(w, OAR_ERR_SHAPE, "%s: expected %lld elements from rank %d, got %d",
                                 w->label, (long long)d->count, d->peer, got);
            return true;
        }
    }
    if (outcount > 0) {
        w->t_progress = oar_dist_now();
        *progressed = true;
    }
    if (fixed && m->phase == 1 && outcount > 0) {
        err = advance_data(c, mc, w);
        if (err != MPI_SUCCESS) {
            done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
            return true;
        }
    }
    if (m->n_done < m->n_reqs) return false;
    if (fixed && m->phase == 0) {
        if (!headers_agree(c, w)) return true;
        m->phase = 1;
        err = post_data(c, mc, w);
        if (err != MPI_SUCCESS) {
            done(w, OAR_ERR_IO, "%s: MPI failed: %s", w->label, mpi_message(err, msg));
            return true;
        }
        return false;
    }
    if (d->op == OAR_DIST_AVG && !d->fixed_order &&
        (d->kind == OAR_COLL_ALLREDUCE || d->kind == OAR_COLL_REDUCE_SCATTER))
        oar_dist_scale_avg(d->buf, d->count, d->dtype, c->size);
    done(w, OAR_OK, NULL);
    return true;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* One round, with mpi_mu held: starts the works submitted since the last round (in submission
 * order: collectives must match across ranks), advances every active one. Returns whether
 * anything moved; *waited: whether a thread is blocked on an active work. */
static bool poll_once(mpi_engine *e, bool *waited) {
    pthread_mutex_lock(&e->qmu);
    oar_dist_work *fresh = e->incoming;
    e->incoming = e->incoming_tail = NULL;
    pthread_mutex_unlock(&e->qmu);
    bool progressed = false;
    oar_dist_work **tail = &e->active;
    while (*tail) tail = &(*tail)->next;
    while (fresh) {
        oar_dist_work *w = fresh;
        fresh = fresh->next;
        w->next = NULL;
        progressed = true;
        if (start(w->comm, w->comm->impl, w)) *tail = w, tail = &w->next;
    }
    *waited = false;
    for (oar_dist_work **p = &e->active; *p;) {
        oar_dist_work *w = *p;
        oar_dist_work *next = w->next; /* w may be freed by its waiter once done */
        if (advance(w->comm, w->comm->impl, w, &progressed)) {
            *p = next;
        } else {
            *waited |= atomic_load(&w->waited);
            p = &w->next;
        }
    }
    if (progressed) e->last_progress = oar_dist_now();
    return progressed;
}

/* Between rounds that moved nothing. While a thread is blocked waiting, its rank has nothing
 * else to run: spin (as a blocking MPI call does) for QUIET_AFTER after the last progress, then
 * yield. Otherwise (backward computing beside the collective) yield the core at once. After
 * silence longer than that sleep between rounds, so a long backward (or a rank sharing its core
 * with another) keeps the core. */
static void between_rounds(double last_progress, bool waited) {
    double quiet = oar_dist_now() - last_progress;
    if (waited && quiet < QUIET_AFTER) cpu_relax();
    else if (quiet < (waited ? 10 : 1) * QUIET_AFTER) sched_yield();
    else nanosleep(&(struct timespec){0, 50000}, NULL);
}

static void *progress_main(void *arg) {
    mpi_engine *e = ((mpi_comm *)((oar_comm *)arg)->impl)->e; /* the world's: everyone's engine */
    bool idle = true;
    for (;;) {
        pthread_mutex_lock(&e->qmu);
        if (!e->stop && (e->drivers > 0 || (idle && !e->incoming))) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
            pthread_cond_timedwait(&e->qcv, &e->qmu, &ts);
            idle = false; /* a driver may have left active works: poll before judging again */
        }
        bool stop = e->stop, driven = e->drivers > 0;
        pthread_mutex_unlock(&e->qmu);
        if (stop) break;
        if (driven) continue;
        bool waited;
        pthread_mutex_lock(&e->mpi_mu);
        bool progressed = poll_once(e, &waited);
        double last = e->last_progress;
        idle = !e->active && oar_dist_now() - last > QUIET_AFTER;
        pthread_mutex_unlock(&e->mpi_mu);
        if (!progressed && !idle) between_rounds(last, waited);
    }
    return NULL;
}

/* A waiter polls MPI itself until w completes or `seconds` pass (the common wait then checks
 * for dead peers and the timeout): no hand-off to the thread and no wake-up at the end, which
 * cost about 10 us per collective. The thread stands by meanwhile. */
static void mpi_drive(oar_comm *c, oar_dist_work *w, double seconds) {
    mpi_engine *e = ((mpi_comm *)c->impl)->e;
    pthread_mutex_lock(&e->qmu);
    e->drivers++;
    pthread_mutex_unlock(&e->qmu);
    double until = oar_dist_now() + seconds;
    bool others = false;
    while (!atomic_load(&w->done) && oar_dist_now() < until) {
        bool waited;
        pthread_mutex_lock(&e->mpi_mu);
        bool progressed = poll_once(e, &waited);
        double last = e->last_progress;
        others = e->active != NULL;
        pthread_mutex_unlock(&e->mpi_mu);
        if (!progressed && !atomic_load(&w->done)) between_rounds(last, true);
    }
    pthread_mutex_lock(&e->qmu);
    /* works still active or queued go back to the thread (waking it costs the waiter
     * microseconds, so only then; a later submit wakes it itself) */
    if (--e->drivers == 0 && (others || e->incoming)) pthread_cond_signal(&e->qcv);
    pthread_mutex_unlock(&e->qmu);
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
                                     .shutdown = mpi_shutdown, .split = mpi_split, .drive = mpi_drive};

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
    pthread_mutex_init(&mc->e->mpi_mu, NULL);
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
