/* Internal loader state, shared by the API (loader.c), the batch builder (batch.c) and the
 * prefetching workers (workers.c). */
#ifndef OAR_DATA_LOADER_H
#define OAR_DATA_LOADER_H

#include "data/data.h"

#include <pthread.h>

#define OAR_LOADER_MSG_CAP 1024

/* One entry of the bounded queue: batch k lives in slot k % prefetch until it is taken. */
typedef struct loader_slot {
    int64_t batch;
    bool ready;
    oar_tensor *input, *target;
    oar_status status;
    char msg[OAR_LOADER_MSG_CAP];
} loader_slot;

struct oar_loader {
    oar_dataset *d;
    int64_t batch_size, n_batches;
    int shard_rank, shard_count; /* this loader's part of each global batch (1 part: no sharding) */
    bool shuffle, drop_last;
    uint64_t seed;
    oar_transform *tf;
    int n_tf;
    int workers, prefetch;
    float *scratch;        /* one sample per builder (caller first, then each worker); NULL if unused */

    /* The epoch. Workers read these only while they hold a claimed batch, and
     * oar_loader_start_epoch changes them only after every claimed batch is finished. */
    int64_t *order;        /* the epoch's sample order; NULL when not shuffling */
    uint64_t sample_key;   /* keys per-sample draws (transforms, random text windows) */
    bool started;
    double wait_s;
    oar_status failed;     /* sticky until the next epoch: the batch that failed */
    char failed_msg[OAR_LOADER_MSG_CAP];

    /* Batch counters and the queue, under mu when workers exist. */
    int64_t next_deliver;  /* the next batch handed to the caller */
    int64_t next_claim;    /* the next batch a worker will build */
    pthread_t *threads;
    void *worker_args;        /* one per thread, freed with the loader */
    int n_threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;   /* workers: a batch may be claimed, or shut down */
    pthread_cond_t ready_cv;  /* caller: a batch was finished */
    pthread_cond_t idle_cv;   /* start_epoch: no batch is being built */
    loader_slot *slots;
    uint64_t generation;      /* bumped per epoch: stale results are dropped */
    int busy;                 /* batches being built right now */
    bool active, halted, shutdown;
};

/* batch.c: builds batch k of the current epoch (new, untracked tensors). On failure the
 * thread's error says which batch and sample. */
oar_status oar_loader_build(const oar_loader *l, int64_t k, float *scratch, oar_tensor **input,
                            oar_tensor **target);

/* workers.c */
oar_status oar_loader_workers_start(oar_loader *l);
void oar_loader_workers_stop(oar_loader *l);       /* joins; drops batches still queued */
void oar_loader_workers_quiesce(oar_loader *l);    /* stops claims, waits for busy builders */
void oar_loader_workers_activate(oar_loader *l);   /* begins the epoch set up meanwhile */
/* Waits for the next batch in order; on a worker's failure copies its message into msg. */
oar_status oar_loader_workers_take(oar_loader *l, oar_tensor **input, oar_tensor **target, char *msg);

#endif
