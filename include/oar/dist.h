/* oar/dist.h — distributed training: process groups, collectives, data parallel.
 * Included by oar.h. Read docs/dist.md for the design and the measurements.
 *
 *   1. The job: oar_dist_init reads the rank and world size from the MPI launcher (`oar launch`,
 *      mpirun) or from Fleet-style variables, starts the liveness channel and the world
 *      communicator; oar_dist_finalize ends it.
 *   2. Collectives on tensors, all asynchronous: each returns a work handle that
 *      oar_dist_wait completes (and frees). A dead peer, a mismatched collective or a timeout
 *      fails the wait with a message naming the rank; nothing waits forever.
 *   3. Data parallel: oar_dist_data_parallel wraps a module's parameters; gradients are
 *      averaged across ranks in fused buckets while backward runs.
 * Without MPI (or outside a launcher) the world has one rank and every call works locally. */
#ifndef OAR_DIST_H
#define OAR_DIST_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- the job */

typedef struct oar_dist_opts {
    int heartbeat_ms;          /* liveness: each rank signals every peer this often; 0 = 100 */
    int peer_timeout_ms;       /* a peer silent this long is reported dead; 0 = 1500 */
    int collective_timeout_ms; /* a collective that makes no progress this long fails naming the
                                * ranks that never joined it; 0 = 300000 (5 minutes) */
} oar_dist_opts;

/* Starts the job's distributed state (idempotent once it succeeded). The world comes from the
 * MPI launcher (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE); PADDLE_TRAINER_ID and
 * PADDLE_TRAINERS_NUM, when set, must agree with it. Environment overrides of opts:
 * OAR_DIST_HEARTBEAT_MS, OAR_DIST_PEER_TIMEOUT_MS, OAR_DIST_COLLECTIVE_TIMEOUT_MS,
 * OAR_DIST_PORT (base port of the liveness listeners; rank r uses base + local rank). */
OAR_API oar_status oar_dist_init(const oar_dist_opts *opts);
/* Ends the job cleanly (a barrier, then MPI_Finalize). After a peer failure it only stops
 * oar's threads and returns the failure: MPI cannot finish with a dead rank. */
OAR_API oar_status oar_dist_finalize(void);
OAR_API bool oar_dist_initialized(void);
OAR_API int oar_dist_rank(void);        /* 0 before init */
OAR_API int oar_dist_world_size(void);  /* 1 before init */
OAR_API int oar_dist_local_rank(void);  /* rank among the processes on this host */
/* The communicator's backend: "mpi", or "local" for a one-process world. */
OAR_API const char *oar_dist_backend(void);
/* The rank that the liveness channel found dead (or unresponsive), -1 while all are alive. */
OAR_API int oar_dist_dead_rank(void);

/* ---------------------------------------------------------------- collectives */

typedef enum oar_dist_op { OAR_DIST_SUM = 0, OAR_DIST_AVG, OAR_DIST_MAX, OAR_DIST_MIN } oar_dist_op;

typedef struct oar_dist_work oar_dist_work;

/* All operate on contiguous CPU tensors (f32, f64, i32, i64), in the world communicator, and
 * must be called in the same order on every rank (as in MPI). They return NULL with an error
 * for bad arguments. The tensors must stay alive and untouched until the wait.
 *   allreduce: t = op over ranks, in place. fixed_order: the sum is taken in rank order
 *     0, 1, ..., N-1 by oar itself (bitwise reproducible, identical on every rank, sizes and
 *     signatures checked across ranks); otherwise MPI's own algorithm runs.
 *   broadcast: t = root's t.   allgather: out = the ranks' in, concatenated along dim 0
 *   (out.numel = N * in.numel).  reduce_scatter: out = rank's block of op over the ranks' in
 *   (in.numel = N * out.numel).  send/recv: to/from peer with a tag >= 0. */
OAR_API oar_dist_work *oar_dist_allreduce(oar_tensor *t, oar_dist_op op, bool fixed_order);
OAR_API oar_dist_work *oar_dist_broadcast(oar_tensor *t, int root);
OAR_API oar_dist_work *oar_dist_allgather(oar_tensor *out, oar_tensor *in);
OAR_API oar_dist_work *oar_dist_reduce_scatter(oar_tensor *out, oar_tensor *in, oar_dist_op op);
OAR_API oar_dist_work *oar_dist_barrier(void);
OAR_API oar_dist_work *oar_dist_send(oar_tensor *t, int peer, int tag);
OAR_API oar_dist_work *oar_dist_recv(oar_tensor *t, int peer, int tag);
/* Waits for w, frees it and returns its status (a NULL w returns the error that made it NULL). */
OAR_API oar_status oar_dist_wait(oar_dist_work *w);
/* Whether w has completed (successfully or not); it still has to be waited for. */
OAR_API bool oar_dist_test(oar_dist_work *w);

/* ---------------------------------------------------------------- process groups */

/* A process group (torch.distributed.new_group): a sub-communicator of some of the world's
 * ranks (an MPI_Comm_split of the world, driven by the same progress thread, with the same
 * liveness and timeout checks). Every rank of the world calls oar_dist_new_group with the same
 * ranks, in the same order as its other new_group calls (as in torch); the ranks are sorted, so
 * group rank k is the k-th smallest world rank. A rank outside the group gets a handle too,
 * whose rank and size are -1, and whose collectives fail with an error saying so. The ranks
 * must lie in [0, world size) without repeats; a rank that asks for other ranks than the
 * others fails new_group on every rank with both lists named. NULL with an error otherwise. */
typedef struct oar_dist_group oar_dist_group;
OAR_API oar_dist_group *oar_dist_new_group(const int *ranks, int n);
OAR_API int oar_dist_group_rank(const oar_dist_group *g);   /* this process's rank in g; -1 outside */
OAR_API int oar_dist_group_size(const oar_dist_group *g);   /* -1 outside g (torch's value) */
OAR_API int oar_dist_group_n_ranks(const oar_dist_group *g); /* members, seen from any rank */
/* World rank of g's rank k (-1 with an error when k is out of range), and g's rank of a world
 * rank (-1 when it is not a member; no error). */
OAR_API int oar_dist_group_global_rank(const oar_dist_group *g, int group_rank);
OAR_API int oar_dist_group_rank_of(const oar_dist_group *g, int global_rank);
/* g's id (> 0; NULL: 0, the world): what the allreduce_sum op's group attribute takes
 * (SyncBatchNorm over a group). Ids count up in creation order on every rank alike. */
OAR_API int oar_dist_group_id(const oar_dist_group *g);
/* Frees g's communicator (a local call on each rank; works on g must have completed) and g. */
OAR_API oar_status oar_dist_group_free(oar_dist_group *g);
/* The collectives above within g (NULL: the world). Ranks (root, peer) are g's ranks. CPU
 * tensors. Every member calls them in the same order; a non-member gets NULL with an error. */
OAR_API oar_dist_work *oar_dist_group_allreduce(const oar_dist_group *g, oar_tensor *t, oar_dist_op op,
                                                bool fixed_order);
/* A fixed-order allreduce that is a step of a protocol (a join context's count of the ranks still
 * training): the label names it in messages and is hashed into the cross-rank check, so it never
 * pairs with a plain allreduce of the same size on another rank but fails as a mismatched
 * collective naming both. */
OAR_API oar_dist_work *oar_dist_group_allreduce_labeled(const oar_dist_group *g, oar_tensor *t, oar_dist_op op,
                                                        const char *label);
OAR_API oar_dist_work *oar_dist_group_broadcast(const oar_dist_group *g, oar_tensor *t, int root);
OAR_API oar_dist_work *oar_dist_group_allgather(const oar_dist_group *g, oar_tensor *out, oar_tensor *in);
OAR_API oar_dist_work *oar_dist_group_reduce_scatter(const oar_dist_group *g, oar_tensor *out, oar_tensor *in,
                                                     oar_dist_op op);
OAR_API oar_dist_work *oar_dist_group_barrier(const oar_dist_group *g);
OAR_API oar_dist_work *oar_dist_group_send(const oar_dist_group *g, oar_tensor *t, int peer, int tag);
OAR_API oar_dist_work *oar_dist_group_recv(const oar_dist_group *g, oar_tensor *t, int peer, int tag);

/* ---------------------------------------------------------------- data parallel */

typedef struct oar_dist_strategy {
    double fuse_grad_size_in_MB; /* bucket capacity; 0 = 32 (Paddle Fleet's default) */
    double first_bucket_MB;      /* the first bucket, small so communication starts early; 0 = 1 */
    bool mpi_allreduce;          /* use MPI's allreduce instead of the fixed rank-order reduction:
                                  * faster on some networks, not bitwise reproducible */
    const oar_dist_group *group; /* data parallel among g's ranks (NULL: the world); g's rank 0
                                  * broadcasts; g must outlive the handle; members only */
} oar_dist_strategy;

typedef struct oar_dist_dp oar_dist_dp;

/* Data parallel over the world: broadcasts every parameter and buffer from rank 0 (a
 * collective: every rank calls it), then groups the trainable parameters, in reverse order,
 * into buckets, and hooks their gradients. During backward each gradient is copied into its
 * bucket as soon as it is final and a full bucket's allreduce starts at once. Parameters must
 * be f32 on the CPU. The module must outlive the handle. */
OAR_API oar_dist_dp *oar_dist_data_parallel(oar_module *m, const oar_dist_strategy *strategy);
/* After backward, before clipping or the optimizer: sends the buckets that are not full (a
 * parameter without a gradient on this rank contributes zeros, so unused parameters never
 * hang), waits for all, and leaves in every parameter's .grad the average over ranks (a view
 * of its bucket). A parameter no rank used keeps no gradient, as in one process. Call
 * oar_optimizer_zero_grad before each backward. */
OAR_API oar_status oar_dist_dp_sync(oar_dist_dp *dp);
/* Gradient accumulation (PyTorch DDP's no_sync): while on, backward adds each rank's local
 * gradients into .grad as without data parallel and oar_dist_dp_sync sends nothing; the first
 * backward after turning it off adds its gradients to the accumulated ones, averages the sums
 * across ranks in the buckets as usual, and leaves them in .grad. So k-1 backward calls under
 * no_sync and one without give the average over ranks of the k-micro-batch sums, one allreduce
 * per step. Eager only (a compiled step starts from zero_grad at every run). */
OAR_API oar_status oar_dist_dp_no_sync(oar_dist_dp *dp, bool on);
/* Uneven inputs (PyTorch DDP's join, torch 1.13's protocol; docs/dist.md): a rank that still
 * has data calls oar_dist_dp_join_notify before each forward; a rank that ran out calls
 * oar_dist_dp_join_shadow repeatedly, each call shadowing one iteration of the others (their
 * buffer broadcast and every gradient bucket, with zeros), until it returns *active == 0 (all
 * joined); then every rank calls oar_dist_dp_join_end, which broadcasts the parameters and
 * buffers of the last rank to join. divide_by_initial_world_size (torch's default): gradients
 * are the sum over the ranks still training divided by the group size; otherwise by the number
 * of ranks still training. throw_on_early_termination: once a rank runs out, every rank fails
 * (the joined rank "exhausted all its inputs", the others "detected at least one rank ...").
 * broadcast_buffers: buffers go from the largest rank still training before each forward.
 * sync_backward: false under no_sync (the joined ranks then shadow no buckets). active (may be
 * NULL): the ranks still training; asking for it waits for the count, which otherwise stays in
 * flight until the sync (overlapping the forward). */
typedef struct oar_dist_dp_join {
    bool divide_by_initial_world_size;
    bool throw_on_early_termination;
    bool broadcast_buffers;
    bool sync_backward;
    /* A join context of several joinables (torch's Join([ddp, ...]); python's
     * oar.distributed.algorithms.Join) counts the ranks still training and checks the early
     * termination with collectives of its own: then notify and shadow skip those two steps and
     * take count from it (the ranks still training; notify: -1 when unknown, which divides by
     * the group size, as torch's DDP does when it is not the first joinable). */
    bool counted_by_context;
    int count;
} oar_dist_dp_join;
OAR_API oar_status oar_dist_dp_join_notify(oar_dist_dp *dp, const oar_dist_dp_join *opts, int *active);
OAR_API oar_status oar_dist_dp_join_shadow(oar_dist_dp *dp, const oar_dist_dp_join *opts, int *active);
OAR_API oar_status oar_dist_dp_join_end(oar_dist_dp *dp, bool last_joiner);
/* A communication hook (PyTorch DDP's register_comm_hook): with one set, data parallel no
 * longer averages the buckets itself but calls hook(dp, i, user) for each bucket i, in bucket
 * order on every rank: during backward as soon as bucket i and every bucket before it are full,
 * and from oar_dist_dp_sync for the rest (their unused parameters' gradients are zeros there).
 * The hook starts the bucket's communication on oar_dist_dp_bucket_buffer(dp, i) (the gradients,
 * not divided by the world size) and its caller must have the final values in that buffer before
 * the optimizer reads .grad (python's DistributedDataParallel waits for the hook's futures right
 * after the sync). The sync itself then only allreduces which parameters got a gradient (one
 * small fixed-order allreduce, started as the last hook returns), so a parameter no rank used
 * still keeps no gradient. A hook's failure (non-OK status) fails the sync. Once per handle, as
 * torch ("can only be called once"), between steps; eager only (a traced step with a hook set
 * fails), and not with the join protocol. */
typedef oar_status (*oar_dist_comm_hook)(oar_dist_dp *dp, int bucket, void *user);
OAR_API oar_status oar_dist_dp_set_comm_hook(oar_dist_dp *dp, oar_dist_comm_hook hook, void *user);
/* Bucket i's gradients as one flat f32 tensor of oar_dist_dp_bucket_numel(dp, i) elements, the
 * parameters' slices one after the other (borrowed; NULL with an error for a bad i). */
OAR_API oar_tensor *oar_dist_dp_bucket_buffer(const oar_dist_dp *dp, int i);
/* The j-th parameter of bucket i (borrowed: the module's tensor); NULL with an error when out of range. */
OAR_API oar_tensor *oar_dist_dp_bucket_param(const oar_dist_dp *dp, int i, int j);
/* oar_backward(loss) followed by oar_dist_dp_sync. */
OAR_API oar_status oar_dist_dp_backward(oar_dist_dp *dp, oar_tensor *loss);

typedef struct oar_dist_dp_stats {
    int n_buckets;
    int64_t steps;                  /* syncs completed */
    int64_t launched_in_backward;   /* bucket allreduces started from a gradient hook (overlap) */
    int64_t launched_at_sync;       /* started by the sync (buckets holding unused parameters) */
    double comm_seconds;            /* summed time from each bucket's launch to its completion */
    double exposed_seconds;         /* time the syncs spent waiting (communication not hidden) */
} oar_dist_dp_stats;
OAR_API oar_status oar_dist_dp_get_stats(const oar_dist_dp *dp, oar_dist_dp_stats *out);
/* Bucket i (0 = the first sent): its element count and the number of parameters in it. */
OAR_API int64_t oar_dist_dp_bucket_numel(const oar_dist_dp *dp, int i);
OAR_API int oar_dist_dp_bucket_params(const oar_dist_dp *dp, int i);
OAR_API void oar_dist_dp_free(oar_dist_dp *dp);

/* SyncBatchNorm (PyTorch's): batch norm over [N, features, ...] f32 inputs whose training
 * statistics (mean, biased variance) cover the global batch of all ranks, so N ranks at batch B
 * normalize, and learn, as one process at batch N*B (to within rounding). Parameters weight,
 * bias and buffers running_mean, running_var, num_batches_tracked as BatchNorm's (checkpoints
 * interchange); evaluation uses the running statistics. Each training forward is a collective:
 * every rank runs it, in the same order. In a one-rank world it is BatchNorm. Eager. */
OAR_API oar_module *oar_dist_sync_batch_norm(int64_t features, double eps, double momentum);
/* The same over process group g's ranks (NULL: the world; torch's process_group=): the
 * statistics cover the batches of g's ranks only. A rank outside g is refused here; g must stay
 * alive while the layer trains (a freed group fails its forward with an error). */
OAR_API oar_module *oar_dist_sync_batch_norm_group(int64_t features, double eps, double momentum,
                                                   const oar_dist_group *g);

/* Compiled data parallel: a training step traced with oar_jit_to_static that calls
 * oar_dist_dp_backward (or oar_backward then oar_dist_dp_sync) records a grad_allreduce node per
 * gradient; the bucketing pass (bucket_allreduce) groups them, in the order backward produces
 * them, into buckets of the strategy's sizes and starts each bucket's allreduce right after its
 * last gradient, waiting only before the first node that reads one (the optimizer), so
 * communication overlaps the rest of backward as in eager mode. The reduction is the same
 * fixed-order average: compiled and eager data parallel give the same bits. These counters
 * cover every bucket that programs ran in this process since the last reset. */
typedef struct oar_dist_program_stats {
    int64_t collectives;      /* bucket allreduces started by program nodes */
    int64_t bytes;            /* their payload */
    double comm_seconds;      /* summed time from each start to its completion */
    double exposed_seconds;   /* time the waiting nodes blocked (communication not hidden) */
} oar_dist_program_stats;
OAR_API oar_status oar_dist_program_stats_get(oar_dist_program_stats *out);
OAR_API void oar_dist_program_stats_reset(void);

/* The loader's share of each epoch for rank `rank` of `count` (set before the first epoch).
 * Global batch k is batch_size * count consecutive samples of the epoch's order (shuffled
 * with the loader's seed and the epoch, as in one process) and rank r takes its r-th part, so
 * every sample is seen once per epoch across ranks and N ranks at batch B see exactly the
 * batches of one process at batch N*B. A last, partial global batch is split as evenly as
 * possible (drop_last drops it). oar_dist_shard_loader uses the world's rank and size. */
OAR_API oar_status oar_loader_set_shard(oar_loader *l, int rank, int count);
OAR_API oar_status oar_dist_shard_loader(oar_loader *l);

#ifdef __cplusplus
}
#endif
#endif /* OAR_DIST_H */
