/* Eager data parallel's state, shared by data_parallel.c (buckets, hooks, sync) and dp_join.c
 * (uneven inputs: the shadow of a rank that ran out of data). */
#ifndef OAR_DIST_DATA_PARALLEL_H
#define OAR_DIST_DATA_PARALLEL_H

#include "dist/comm.h"

typedef struct dp_param {
    struct oar_dist_dp *dp;
    oar_tensor *p;        /* borrowed from the module */
    const char *name;
    int bucket, slot;     /* slot: its index in the bucket (its used flag) */
    oar_tensor *view;     /* its slice of the bucket, shaped like p */
    bool ready;
    int hook;
} dp_param;

typedef struct dp_bucket {
    oar_tensor *buf;      /* f32 [numel + n_params]: gradients, then the used flags */
    oar_tensor *grads;    /* a view of buf's first numel: what a communication hook gets */
    int64_t numel;
    int n_params, first, n_ready;
    uint64_t signature;
    char label[160];
    oar_dist_work *work;
    double t_launch;
} dp_bucket;

struct oar_dist_dp {
    oar_module *m;
    oar_comm *c;
    oar_dist_strategy s;
    dp_param *params;     /* bucket order */
    int n;
    dp_bucket *b;
    int nb;
    oar_status err;       /* raised in a hook, reported by sync */
    char err_msg[512];
    oar_dist_dp_stats stats;
    double first_cap, cap; /* bucket capacities in bytes */
    bool no_sync;          /* backward accumulates local gradients in .grad; nothing is sent */
    bool accumulated;      /* some backward ran under no_sync since the last sync */
    int divisor;           /* > 0: buckets are summed and divided by it (join's effective world
                            * size); 0: averaged over the group */
    oar_dist_work *join_work[2]; /* a training rank's join counts in flight (waited at the sync) */
    float join_val[2];
    oar_dist_comm_hook hook;     /* set: buckets go to it, in order, instead of the built-in average */
    void *hook_user;
    int next_hook;               /* the next bucket whose hook runs this step */
    oar_tensor *flags;           /* hook mode: f32 [n], every parameter's used flag, summed over ranks */
    oar_dist_work *flags_work;
    uint64_t flags_sig;
};

/* Waits for the join counts a training rank left in flight (dp_join.c); their error, if any. */
oar_status oar_dp_join_settle(oar_dist_dp *dp);

/* The description of bucket b's allreduce on buf (its own, or a joined rank's zeros). */
oar_coll_desc oar_dp_bucket_desc(const oar_dist_dp *dp, const dp_bucket *b, void *buf);

/* Compiled steps inside a join (program_collectives.c): a training rank's notify starts a new
 * step of dp's (the program's bucket allreduces are logged, and summed then divided by
 * dp->divisor when it is set); join_off ends dp's join (NULL: any); a joined rank's shadow replays the latest
 * logged step on zeros with the training ranks' divisor (*shadowed false: no compiled step was
 * logged, so its eager buckets are the shadow). */
void oar_dist_program_join_step(const oar_dist_dp *dp);
void oar_dist_program_join_off(const oar_dist_dp *dp);
oar_status oar_dist_program_join_shadow(int divisor, bool *shadowed);

#endif
