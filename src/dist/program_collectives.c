/* The collectives of compiled programs (ops/collective.h): the backend that the allreduce
 * ops of a traced data-parallel step call (and SyncBatchNorm's allreduce_sum, in either mode). A bucket's allreduce is started on the world
 * communicator when its node runs and completed by the node that waits for it, so the progress
 * thread moves it while the executor runs the rest of backward. The works in flight are keyed
 * by channel (each program bucket has its own).
 *
 * Uneven inputs (DDP.join, dp_join.c) in compiled steps: while a join is on, the bucket
 * allreduces of the rank's latest step are logged, so that once it runs out of data it can shadow
 * the others' steps with the same collectives (sizes, channels, signatures, labels) on zeros; and
 * divide_by_initial_world_size=False turns the average into a sum divided by the ranks still
 * training, as eager buckets do. */
#include "dist/data_parallel.h"
#include "ops/collective.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct inflight {
    int channel;
    oar_dist_work *w;
    double t_start;
    float *buf;
    int64_t count;
    int divisor; /* > 0: summed, then divided by it at the wait (join's effective world size) */
    struct inflight *next;
} inflight;

typedef struct logged { /* a bucket allreduce of the latest compiled step, for a joined rank's shadow */
    int64_t count;
    int channel;
    uint64_t signature;
    bool fixed_order, average;
    char label[96];
} logged;

static struct {
    inflight *head;
    oar_dist_program_stats stats;
    const oar_dist_dp *join; /* the data parallel in a join (set by its training rank's notify) */
    logged *log;
    int n_log, cap_log;
} P;

static oar_status log_step(int64_t count, int channel, uint64_t signature, bool fixed_order, bool average,
                           const char *label) {
    for (int k = 0; k < P.n_log; k++) /* a channel seen again: a new step began without a notify */
        if (P.log[k].channel == channel) {
            P.n_log = 0;
            break;
        }
    if (P.n_log == P.cap_log) {
        int cap = P.cap_log ? 2 * P.cap_log : 16;
        logged *l = realloc(P.log, sizeof *l * (size_t)cap);
        if (!l) return oar_error(OAR_ERR_OOM, "allreduce_start: out of memory for the join's log of the step");
        P.log = l;
        P.cap_log = cap;
    }
    logged *e = &P.log[P.n_log++];
    *e = (logged){count, channel, signature, fixed_order, average, ""};
    snprintf(e->label, sizeof e->label, "%s", label ? label : "");
    return OAR_OK;
}

static oar_status start(void *user, float *buf, int64_t count, int channel, uint64_t signature, bool fixed_order,
                        bool average, const char *label) {
    (void)user;
    oar_comm *c = oar_dist_world_comm();
    if (!c) return oar_error(OAR_ERR_STATE, "allreduce_start: the distributed runtime has ended (oar_dist_finalize); "
                                            "run compiled data-parallel steps between oar_dist_init and finalize");
    for (inflight *f = P.head; f; f = f->next)
        if (f->channel == channel)
            return oar_error(OAR_ERR_STATE, "allreduce_start: channel %d already has an allreduce in flight (%s); a "
                                            "program's bucket must be waited for before it starts again", channel,
                             f->w->label);
    if (P.join) {
        oar_status st = log_step(count, channel, signature, fixed_order, average, label);
        if (st != OAR_OK) return st;
    }
    inflight *f = calloc(1, sizeof *f);
    if (!f) return oar_error(OAR_ERR_OOM, "allreduce_start: out of memory");
    f->divisor = average && P.join && P.join->divisor > 0 ? P.join->divisor : 0;
    f->buf = buf;
    f->count = count;
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = buf, .count = count, .dtype = OAR_F32,
                       .op = average && !f->divisor ? OAR_DIST_AVG : OAR_DIST_SUM,
                       .tag = channel, .fixed_order = fixed_order, .signature = signature, .label = label};
    f->channel = channel;
    f->t_start = oar_dist_now();
    if (!(f->w = oar_dist_submit(c, &d))) {
        free(f);
        return oar_last_status();
    }
    f->next = P.head;
    P.head = f;
    P.stats.collectives++;
    P.stats.bytes += count * (int64_t)sizeof(float);
    return OAR_OK;
}

static oar_status wait(void *user, int channel) {
    (void)user;
    inflight **pf = &P.head;
    while (*pf && (*pf)->channel != channel) pf = &(*pf)->next;
    if (!*pf) return oar_error(OAR_ERR_STATE, "allreduce_wait: no allreduce in flight on channel %d (its "
                                              "allreduce_start did not run)", channel);
    inflight *f = *pf;
    *pf = f->next;
    double t0 = oar_dist_now(), t_done = t0;
    oar_status st = oar_dist_wait_timed(f->w, &t_done);
    if (st == OAR_OK) {
        P.stats.comm_seconds += t_done - f->t_start;
        P.stats.exposed_seconds += oar_dist_now() - t0;
        if (f->divisor) oar_dist_scale_avg(f->buf, f->count, OAR_F32, f->divisor);
    }
    free(f);
    return st;
}

void oar_dist_program_join_step(const oar_dist_dp *dp) {
    P.join = dp;
    P.n_log = 0;
}

void oar_dist_program_join_off(const oar_dist_dp *dp) {
    if (dp && P.join != dp) return;
    P.join = NULL;
    P.n_log = 0;
}

oar_status oar_dist_program_join_shadow(int divisor, bool *shadowed) {
    int n = P.n_log;
    *shadowed = n > 0;
    if (n <= 0) return OAR_OK;
    oar_comm *c = oar_dist_world_comm();
    if (!c) return oar_error(OAR_ERR_STATE, "DistributedDataParallel.join: the distributed runtime has ended");
    int64_t most = 1;
    for (int k = 0; k < n; k++)
        if (P.log[k].count > most) most = P.log[k].count;
    float *zeros = calloc((size_t)n * (size_t)most, sizeof(float));
    oar_dist_work **w = calloc((size_t)n, sizeof *w);
    if (!zeros || !w) {
        free(zeros);
        free(w);
        return oar_error(OAR_ERR_OOM, "DistributedDataParallel.join: out of memory for the zero buckets");
    }
    for (int k = 0; k < n; k++) { /* the training ranks' step, in its order, as they send it */
        const logged *e = &P.log[k];
        oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = zeros + (size_t)k * (size_t)most, .count = e->count,
                           .dtype = OAR_F32, .op = e->average && !divisor ? OAR_DIST_AVG : OAR_DIST_SUM,
                           .tag = e->channel, .fixed_order = e->fixed_order, .signature = e->signature,
                           .label = e->label};
        w[k] = oar_dist_submit(c, &d);
    }
    oar_status st = OAR_OK;
    for (int k = 0; k < n; k++) {
        oar_status s = w[k] ? oar_dist_wait(w[k]) : oar_last_status();
        if (st == OAR_OK) st = s;
    }
    free(w);
    free(zeros);
    return st;
}

/* allreduce_sum within a process group: a synchronous fixed-order sum on its communicator. */
static oar_status group_sum(void *user, int group, float *buf, int64_t count, int channel, uint64_t signature,
                           const char *label) {
    (void)user;
    oar_comm *c = oar_dist_group_comm_by_id(group, "allreduce_sum");
    if (!c) return oar_last_status();
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = buf, .count = count, .dtype = OAR_F32, .op = OAR_DIST_SUM,
                       .tag = channel, .fixed_order = true, .signature = signature, .label = label};
    return oar_dist_wait(oar_dist_submit(c, &d));
}

void oar_dist_program_collectives_install(bool on) {
    if (on) {
        oar_collective_backend b = {.start = start, .wait = wait, .group_sum = group_sum};
        oar_collective_set_backend(&b);
        return;
    }
    oar_collective_set_backend(NULL);
    oar_dist_program_join_off(NULL);
    free(P.log);
    P.log = NULL;
    P.cap_log = 0;
    while (P.head) { /* never free a buffer the progress thread still writes: complete them */
        inflight *f = P.head;
        P.head = f->next;
        oar_dist_wait(f->w);
        free(f);
    }
}

oar_status oar_dist_program_stats_get(oar_dist_program_stats *out) {
    if (!out) return oar_error(OAR_ERR_INVALID_ARG, "dist_program_stats_get: expected an output, got NULL");
    *out = P.stats;
    return OAR_OK;
}

void oar_dist_program_stats_reset(void) { P.stats = (oar_dist_program_stats){0}; }
