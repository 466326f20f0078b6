/* The communicator interface: what a backend (MPI here; NCCL later, on device buffers)
 * implements, and the work handles every collective returns. A backend only issues and
 * advances requests; waiting, timeouts and the dead-peer check are common (work.c), so every
 * backend fails the same way when a peer dies. */
#ifndef OAR_DIST_COMM_H
#define OAR_DIST_COMM_H

#include "base/base.h"

#include <pthread.h>
#include <stdatomic.h>

typedef enum oar_coll_kind {
    OAR_COLL_ALLREDUCE, OAR_COLL_BROADCAST, OAR_COLL_ALLGATHER, OAR_COLL_REDUCE_SCATTER,
    OAR_COLL_BARRIER, OAR_COLL_SEND, OAR_COLL_RECV,
    OAR_COLL_SPLIT,   /* a sub-communicator of the ranks with peer >= 0, ordered by tag (buf: oar_comm_split_out) */
    OAR_COLL_FREE     /* frees the communicator the work runs on (a group's, at oar_dist_group_free) */
} oar_coll_kind;

typedef struct oar_comm_split_out {
    unsigned char storage[16]; /* the backend's new communicator (MPI: an MPI_Comm's bytes) */
    int rank, size;   /* in the new communicator; -1 outside it */
} oar_comm_split_out;

/* One collective, described by raw buffers so that device pointers fit too. */
typedef struct oar_coll_desc {
    oar_coll_kind kind;
    void *buf;            /* allreduce/broadcast: in place; allgather/reduce_scatter: the output;
                           * send/recv: the message */
    const void *in;       /* allgather/reduce_scatter: the input */
    int64_t count;        /* elements of buf */
    oar_dtype dtype;
    oar_dist_op op;
    int peer;             /* broadcast root, send/recv peer */
    int tag;              /* send/recv tag; fixed-order allreduce: its channel (see below) */
    bool fixed_order;     /* allreduce summed in rank order by oar, with a cross-rank check */
    uint64_t signature;   /* fixed order: must be equal on every rank (names, shapes, sizes) */
    const char *label;    /* for messages: "gradient bucket 2 (fc.weight, fc.bias)" */
} oar_coll_desc;

/* Fixed-order allreduces run on a tagged channel, so several may be in flight in any order:
 * data parallel uses channel = bucket index (< OAR_DIST_USER_CHANNEL); other callers get
 * channels from a counter above it. */
#define OAR_DIST_USER_CHANNEL 100000
#define OAR_DIST_CHANNELS 200000

struct oar_dist_work {
    struct oar_comm *comm;
    oar_coll_desc d;
    char label[160];
    atomic_int done;            /* set last by the backend, after status and msg */
    atomic_int waited;          /* a thread is blocked in its wait: the backend may poll without
                                 * yielding, since that thread's rank has nothing else to run */
    oar_status status;
    char msg[640];
    double t_submit, t_done;    /* monotonic seconds */
    double t_progress;          /* the last time a request of it completed */
    void *impl;                 /* the backend's state */
    struct oar_dist_work *next; /* the backend's queue */
};

typedef struct oar_comm oar_comm;
typedef struct oar_comm_ops {
    const char *name;
    /* Starts w (its d filled in); completion is reported through oar_dist_work_finish. */
    oar_status (*submit)(oar_comm *c, oar_dist_work *w);
    /* Which ranks a pending w still waits for, for a timeout message ("ranks 1, 2"). */
    void (*describe_pending)(oar_comm *c, oar_dist_work *w, char *buf, size_t size);
    /* Stops the backend's threads; clean: also shut the library down (all ranks are here). */
    void (*shutdown)(oar_comm *c, bool clean);
    /* A sub-communicator over the same transport (process groups): a collective over c's ranks;
     * member false on the ranks outside it, which get NULL and OAR_OK. key orders the ranks. */
    oar_comm *(*split)(oar_comm *c, bool member, int key, oar_status *st);
    /* Optional: the waiting thread advances the backend itself until w completes or `seconds`
     * pass (a backend without it completes works on its own thread; the waiter sleeps). */
    void (*drive)(oar_comm *c, oar_dist_work *w, double seconds);
} oar_comm_ops;

struct oar_comm {
    const oar_comm_ops *ops;
    int rank, size;
    void *impl;
    pthread_mutex_t mu;   /* guards the completion condition */
    pthread_cond_t cv;
    int next_channel;     /* user fixed-order allreduces: the next channel */
    const int *global;    /* a group's: the world rank of each of its ranks (NULL: the world) */
};

/* The world rank of c's rank r, for messages. */
static inline int oar_comm_global_rank(const oar_comm *c, int r) { return c->global && r >= 0 ? c->global[r] : r; }

/* work.c */
double oar_dist_now(void);
/* Called by a backend (any thread) when w is complete; st != OAR_OK with a message. */
void oar_dist_work_finish(oar_dist_work *w, oar_status st, const char *fmt, ...) OAR_PRINTF(3, 4);
/* Creates and submits a work on c for d (label copied). NULL with the error set. */
oar_dist_work *oar_dist_submit(oar_comm *c, const oar_coll_desc *d);
/* The next channel of c's user fixed-order allreduces (every rank counts the same calls). */
int oar_dist_next_channel(oar_comm *c);
/* oar_dist_wait that also says when w completed (oar_dist_now's clock). */
oar_status oar_dist_wait_timed(oar_dist_work *w, double *t_done);
/* The elementwise reduction used by backends that reduce themselves: dst = a op b, divided by
 * divide_by when op is AVG and divide_by > 1 (the last step of an average); dst may be a or b. */
void oar_dist_combine(void *dst, const void *a, const void *b, int64_t n, oar_dtype dt, oar_dist_op op, int divide_by);
void oar_dist_scale_avg(void *buf, int64_t n, oar_dtype dt, int size);
size_t oar_dist_dtype_size(oar_dtype dt);
/* whether collectives may reduce dt (the byte dtypes i8/u8/bool are only moved) */
bool oar_dist_dtype_reduces(oar_dtype dt);

/* init.c: the world communicator (NULL before init); the collective timeout in seconds. */
oar_comm *oar_dist_world_comm(void);
double oar_dist_collective_timeout(void);

/* group.c: the groups still alive end with the world (finalize calls it before the world's
 * shutdown; clean: their communicators are freed too). */
void oar_dist_groups_end(bool clean);
/* The communicator of g for a collective named who: NULL with an error outside the group. */
oar_comm *oar_dist_group_comm(const struct oar_dist_group *g, const char *who);
/* The same for a group named by its id (oar_dist_group_id; 0: the world), as the compiled ops do. */
oar_comm *oar_dist_group_comm_by_id(int id, const char *who);

/* program_collectives.c: the backend of the compiled allreduce ops (ops/collective.h), installed
 * by init while the world exists (on), removed by finalize after its works completed (off). */
void oar_dist_program_collectives_install(bool on);

/* Backends. */
oar_comm *oar_comm_local_new(void);           /* one rank: collectives are copies */
#ifdef OAR_HAVE_MPI
/* The MPI world (MPI initialised by the caller); progress runs on a thread of its own. */
oar_comm *oar_comm_mpi_new(void);
#endif

#endif
