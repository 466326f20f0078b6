/* Uneven inputs (PyTorch DDP's join): ranks that run out of data shadow the collectives of the
 * ranks still training until every rank has joined, then the model of the last rank to join
 * goes to all. The protocol is torch 1.13's, collective for collective:
 *
 *   training rank, before each forward        joined rank, once per iteration of the others
 *   ------------------------------------      ---------------------------------------------
 *   count += 1   (the ranks still training)   count += 0; count == 0: everyone joined, stop
 *   [throw: flag += 0; flag > 0: raise]       [throw: flag += 1; raise]
 *   [buffers: src = max(rank); broadcast]     [buffers: src = max(-1); broadcast]
 *   sync += 1 (0 under no_sync)               sync += 0; sync > 0: every bucket with zeros
 *   forward, backward: the buckets
 *
 * and at the end: src = max(rank if last to join else -1); every parameter and buffer from src.
 * Under a join context of several joinables (counted_by_context) the first two steps are the
 * context's, and DDP's part is the rest (its join hook's main_hook and post_hook).
 * Each step is a fixed-order allreduce with a label and a signature of its own, so a rank that
 * runs another collective meanwhile (an all_reduce outside DDP while another rank has joined)
 * fails on both sides with "mismatched collective" naming the two, instead of pairing wrongly. */
#include "dist/data_parallel.h"
#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the signatures of the protocol's steps ("join" and a step number) */
#define SIG_COUNT 0x6a6f696e01ull
#define SIG_THROW 0x6a6f696e02ull
#define SIG_RANK 0x6a6f696e03ull
#define SIG_SYNC 0x6a6f696e04ull

static oar_dist_work *join_submit(oar_dist_dp *dp, float *v, oar_dist_op op, uint64_t sig, const char *label) {
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = v, .count = 1, .dtype = OAR_F32, .op = op,
                       .tag = oar_dist_next_channel(dp->c), .fixed_order = true, .signature = sig, .label = label};
    return oar_dist_submit(dp->c, &d);
}

oar_status oar_dp_join_settle(oar_dist_dp *dp) {
    oar_status st = OAR_OK;
    for (int k = 0; k < 2; k++) {
        if (!dp->join_work[k]) continue;
        oar_status s = oar_dist_wait(dp->join_work[k]);
        dp->join_work[k] = NULL;
        if (st == OAR_OK) st = s;
    }
    return st;
}

/* One f32 allreduce of the join protocol: v = op over the group of v. It takes the next user
 * channel, as oar_dist_allreduce does, so a rank running a user collective meanwhile meets it
 * in the header check (mismatched collective) instead of waiting on another channel. */
static oar_status join_reduce(oar_dist_dp *dp, float *v, oar_dist_op op, uint64_t sig, const char *label) {
    return oar_dist_wait(join_submit(dp, v, op, sig, label));
}

static oar_status broadcast_state(oar_dist_dp *dp, int src, bool params) {
    int np = oar_module_num_parameters(dp->m), nbuf = oar_module_num_buffers(dp->m);
    oar_status st = OAR_OK;
    for (int i = params ? 0 : np; st == OAR_OK && i < np + nbuf; i++) {
        const char *name;
        oar_tensor *t = i < np ? oar_module_parameter(dp->m, i, &name) : oar_module_buffer(dp->m, i - np, &name);
        if (!oar_dist_dtype_reduces(t->dtype)) continue;
        oar_coll_desc bd = {.kind = OAR_COLL_BROADCAST, .buf = oar_tensor_ptr(t), .count = t->numel,
                            .dtype = t->dtype, .peer = src, .label = name};
        st = oar_dist_wait(oar_dist_submit(dp->c, &bd));
    }
    return st;
}

/* The rank whose state is authoritative: the largest rank with cond. */
static oar_status common_rank(oar_dist_dp *dp, bool cond, int *out, const char *label) {
    float r = cond ? (float)dp->c->rank : -1.0f;
    oar_status st = join_reduce(dp, &r, OAR_DIST_MAX, SIG_RANK, label);
    if (st == OAR_OK && r < 0)
        st = oar_error(OAR_ERR_INTERNAL, "%s: no rank qualified as the source", label);
    *out = (int)r;
    return st;
}

/* A training rank's step: the count and the backward-sync flag stay in flight (waited by the sync,
 * so they overlap the forward, as torch's work handle does), unless the divisor needs the count
 * now (divide_by_initial_world_size false) or an early termination must be known before forward. */
oar_status oar_dist_dp_join_notify(oar_dist_dp *dp, const oar_dist_dp_join *opts, int *active) {
    if (!dp || !opts) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_join_notify: expected a handle and options");
    if (dp->hook) return oar_error(OAR_ERR_UNSUPPORTED, "dist_dp_join: uneven inputs with a communication hook are "
                                   "not offered (a joined rank would have to run the hook on zeros); train without "
                                   "the hook, or give every rank the same number of batches");
    oar_status st = oar_dp_join_settle(dp); /* a forward without backward left them */
    if (st != OAR_OK) goto out;
    if (opts->counted_by_context) goto counted;
    dp->join_val[0] = 1.0f;
    dp->join_work[0] = join_submit(dp, &dp->join_val[0], OAR_DIST_SUM, SIG_COUNT,
                                   "DistributedDataParallel.join: counting the ranks still training");
    if (!dp->join_work[0]) {
        st = oar_last_status();
        goto out;
    }
    if (opts->throw_on_early_termination) {
        float flag = 0.0f;
        st = join_reduce(dp, &flag, OAR_DIST_SUM, SIG_THROW, "DistributedDataParallel.join: early termination");
        if (st == OAR_OK && flag > 0.0f)
            st = oar_error(OAR_ERR_STATE, "DistributedDataParallel.join: detected at least one rank that exhausted "
                           "its inputs (throw_on_early_termination=True); rank %d stops too",
                           oar_comm_global_rank(dp->c, dp->c->rank));
    }
counted:;
    int src = 0;
    if (st == OAR_OK && opts->broadcast_buffers && oar_module_num_buffers(dp->m) > 0 &&
        (st = common_rank(dp, true, &src, "DistributedDataParallel.join: the rank whose buffers go to all")) == OAR_OK)
        st = broadcast_state(dp, src, false);
    if (st == OAR_OK) {
        dp->join_val[1] = opts->sync_backward ? 1.0f : 0.0f;
        dp->join_work[1] = join_submit(dp, &dp->join_val[1], OAR_DIST_SUM, SIG_SYNC,
                                       "DistributedDataParallel.join: whether backward syncs");
        if (!dp->join_work[1]) st = oar_last_status();
    }
    dp->divisor = 0;
    if (st == OAR_OK && opts->counted_by_context) {
        if (!opts->divide_by_initial_world_size && opts->count > 0 && opts->count != dp->c->size)
            dp->divisor = opts->count;
        if (active) *active = opts->count;
    } else if (st == OAR_OK && (!opts->divide_by_initial_world_size || active)) {
        st = oar_dp_join_settle(dp);
        int n = (int)dp->join_val[0];
        if (st == OAR_OK && !opts->divide_by_initial_world_size && n != dp->c->size) dp->divisor = n;
        if (active) *active = n;
    }
    if (st == OAR_OK) oar_dist_program_join_step(dp); /* a compiled step's buckets are logged */
out:
    if (st != OAR_OK) {
        (void)oar_dp_join_settle(dp);
        oar_error_prefix("dist_dp_join_notify");
    }
    return st;
}

/* The zeros a joined rank contributes to every bucket (its own gradients stay in .grad). */
static oar_status shadow_buckets(oar_dist_dp *dp) {
    int64_t most = 0;
    for (int k = 0; k < dp->nb; k++)
        if (dp->b[k].buf->numel > most) most = dp->b[k].buf->numel;
    float *zeros = calloc((size_t)(dp->nb ? dp->nb : 1) * (size_t)(most ? most : 1), sizeof(float));
    if (!zeros) return oar_error(OAR_ERR_OOM, "DistributedDataParallel.join: out of memory for the zero buckets");
    oar_dist_work **w = calloc((size_t)(dp->nb ? dp->nb : 1), sizeof *w);
    if (!w) {
        free(zeros);
        return oar_error(OAR_ERR_OOM, "DistributedDataParallel.join: out of memory");
    }
    int saved = dp->divisor;
    dp->divisor = 0; /* a joined rank's result is discarded: only the signature must match */
    for (int k = 0; k < dp->nb; k++) {
        oar_coll_desc d = oar_dp_bucket_desc(dp, &dp->b[k], zeros + (size_t)k * (size_t)most);
        d.op = saved > 0 ? OAR_DIST_SUM : OAR_DIST_AVG; /* as the training ranks send it */
        w[k] = oar_dist_submit(dp->c, &d);
    }
    dp->divisor = saved;
    oar_status st = OAR_OK;
    for (int k = 0; k < dp->nb; k++) {
        oar_status s = w[k] ? oar_dist_wait(w[k]) : oar_last_status();
        if (st == OAR_OK) st = s;
    }
    free(w);
    free(zeros);
    return st;
}

oar_status oar_dist_dp_join_shadow(oar_dist_dp *dp, const oar_dist_dp_join *opts, int *active) {
    if (!dp || !opts || !active)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_join_shadow: expected a handle, options and an output");
    if (dp->hook) return oar_error(OAR_ERR_UNSUPPORTED, "dist_dp_join: uneven inputs with a communication hook are "
                                   "not offered (a joined rank would have to run the hook on zeros); train without "
                                   "the hook, or give every rank the same number of batches");
    float count = (float)opts->count;
    oar_status st = OAR_OK;
    if (opts->counted_by_context && opts->count <= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_join_shadow: expected the context's count of the ranks still "
                         "training (> 0), got %d", opts->count);
    if (!opts->counted_by_context)
        st = join_reduce(dp, &count, OAR_DIST_SUM, SIG_COUNT, "DistributedDataParallel.join: counting the ranks still training");
    *active = st == OAR_OK ? (int)count : -1;
    if (st != OAR_OK || count == 0.0f) goto out;
    if (opts->throw_on_early_termination && !opts->counted_by_context) {
        float flag = 1.0f;
        st = join_reduce(dp, &flag, OAR_DIST_SUM, SIG_THROW, "DistributedDataParallel.join: early termination");
        if (st == OAR_OK)
            st = oar_error(OAR_ERR_STATE, "DistributedDataParallel.join: rank %d exhausted all its inputs "
                           "(throw_on_early_termination=True: every rank stops)", oar_comm_global_rank(dp->c, dp->c->rank));
        goto out;
    }
    int src = 0;
    if (opts->broadcast_buffers && oar_module_num_buffers(dp->m) > 0 &&
        (st = common_rank(dp, false, &src, "DistributedDataParallel.join: the rank whose buffers go to all")) == OAR_OK)
        st = broadcast_state(dp, src, false);
    float sync = 0.0f;
    if (st == OAR_OK)
        st = join_reduce(dp, &sync, OAR_DIST_SUM, SIG_SYNC, "DistributedDataParallel.join: whether backward syncs");
    /* the training ranks' divisor (the count) decides their op: sum unless it is the group size */
    int saved = dp->divisor;
    dp->divisor = opts->divide_by_initial_world_size || (int)count == dp->c->size ? 0 : (int)count;
    if (st == OAR_OK && sync > 0.0f) { /* this rank's last step: compiled (its logged buckets) or eager */
        bool compiled = false;
        st = oar_dist_program_join_shadow(dp->divisor, &compiled);
        if (st == OAR_OK && !compiled) st = shadow_buckets(dp);
    }
    dp->divisor = saved;
out:
    if (st != OAR_OK) oar_error_prefix("dist_dp_join_shadow");
    return st;
}

oar_status oar_dist_dp_join_end(oar_dist_dp *dp, bool last_joiner) {
    if (!dp) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_join_end: the handle is NULL");
    int src = 0;
    oar_status st = oar_dp_join_settle(dp);
    oar_dist_program_join_off(dp);
    if (st == OAR_OK) st = common_rank(dp, last_joiner, &src, "DistributedDataParallel.join: the last rank to join");
    if (st == OAR_OK) st = broadcast_state(dp, src, true);
    dp->divisor = 0;
    if (st != OAR_OK) oar_error_prefix("dist_dp_join_end");
    return st;
}
