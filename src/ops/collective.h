/* Collective ops: how a compiled data-parallel step averages gradients across ranks without
 * the graph or ops layers knowing the communicator. The distributed runtime (src/dist) installs
 * a backend (oar_collective_set_backend) when the job starts; without one the world has one
 * rank and an average over it is the value itself.
 *
 *   grad_allreduce(g; name, channel, bucket_bytes, first_bucket_bytes, fixed_order)
 *       the average of g over the ranks, synchronously. Data parallel records one per parameter
 *       gradient when a training step is traced; the attributes carry the parameter's name and
 *       the bucket capacities for the bucketing pass (graph/passes/bucket_allreduce.c), which
 *       replaces groups of them by the asynchronous pair below.
 *   allreduce_start(g1, ..., gk; channel, signature, fixed_order, label)
 *       packs the gradients into one flat f32 bucket (its output) and starts its in-place
 *       average; the bucket must not be read or written until the matching wait.
 *   allreduce_wait(bucket; channel)
 *       waits for the average started on channel; its output is the averaged bucket (in place
 *       when the planner lets it, otherwise a copy).
 *   allreduce_sum(x; channel, group)
 *       the sum of x over the ranks, synchronously and differentiable: every rank's output is
 *       the same sum, so the gradient of an input is the sum over ranks of the outputs'
 *       gradients (allreduce_sum again). SyncBatchNorm's statistics (dist/sync_batch_norm.c).
 *       group: 0 the world, else a process group's id (oar_dist_group_id), summed over its ranks. */
#ifndef OAR_OPS_COLLECTIVE_H
#define OAR_OPS_COLLECTIVE_H

#include "tensor/tensor.h"

typedef struct oar_collective_backend {
    /* Starts the in-place average (or sum) of count f32 values at buf across the ranks on
     * channel (one collective in flight per channel). signature and label must agree across
     * ranks (checked when fixed_order). OAR_OK, or the error set. */
    oar_status (*start)(void *user, float *buf, int64_t count, int channel, uint64_t signature, bool fixed_order,
                        bool average, const char *label);
    /* Completes the collective in flight on channel. */
    oar_status (*wait)(void *user, int channel);
    /* allreduce_sum within process group `group` (> 0, oar_dist_group_id): the in-place sum of
     * count f32 values across the group's ranks on channel, synchronously. */
    oar_status (*group_sum)(void *user, int group, float *buf, int64_t count, int channel, uint64_t signature,
                            const char *label);
    void *user;
} oar_collective_backend;

/* Installs b (copied), or with NULL the one-rank identity. Called by the distributed runtime. */
void oar_collective_set_backend(const oar_collective_backend *b);

/* Channels of the collective ops (above data parallel's eager buckets, below the
 * communicator's user channels): bucket k of a program uses OAR_COLLECTIVE_BUCKET_CHANNEL + k,
 * the unbucketed grad_allreduce of parameter i OAR_COLLECTIVE_GRAD_CHANNEL + i, allreduce_sum
 * OAR_COLLECTIVE_SUM_CHANNEL + its channel attribute. */
#define OAR_COLLECTIVE_BUCKET_CHANNEL 40000
#define OAR_COLLECTIVE_GRAD_CHANNEL 60000
#define OAR_COLLECTIVE_SUM_CHANNEL 80000
#define OAR_COLLECTIVE_MAX_CHANNEL 20000 /* per kind */

/* The op calls (eager or traced). grad_allreduce: name (<= 63 chars kept), the parameter's index
 * (its channel), the bucket capacities in bytes (0: defaults of 32 MiB and 1 MiB). */
oar_tensor *oar_grad_allreduce(oar_tensor *g, const char *name, int index, int64_t bucket_bytes,
                               int64_t first_bucket_bytes, bool fixed_order);
oar_tensor *oar_allreduce_sum(oar_tensor *x, int channel, int group);

#endif
