/* The collectives of compiled programs (ops/collective.h): the backend that the allreduce
 * ops of a traced data-parallel step call (and SyncBatchNorm's allreduce_sum, in either mode). A bucket's allreduce is started on the world
 * communicator when its node runs and completed by the node that waits for it, so the progress
 * thread moves it while the executor runs the rest of backward. The works in flight are keyed
 * by channel (each program bucket has its own). */
#include "dist/comm.h"
#include "ops/collective.h"

#include <stdlib.h>

typedef struct inflight {
    int channel;
    oar_dist_work *w;
    double t_start;
    struct inflight *next;
} inflight;

static struct {
    inflight *head;
    oar_dist_program_stats stats;
} P;

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
    inflight *f = calloc(1, sizeof *f);
    if (!f) return oar_error(OAR_ERR_OOM, "allreduce_start: out of memory");
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = buf, .count = count, .dtype = OAR_F32,
                       .op = average ? OAR_DIST_AVG : OAR_DIST_SUM,
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
    }
    free(f);
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
