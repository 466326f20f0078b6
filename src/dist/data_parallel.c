/* Eager data parallel: gradient buckets filled from gradient hooks and averaged across ranks
 * while backward continues (docs/dist.md).
 *
 * Each trainable parameter owns a slice of one bucket (reverse parameter order, since
 * backward produces the last layers' gradients first). When its gradient is final the hook
 * copies it into the slice and hands autograd a view of that slice as the parameter's .grad,
 * so the averaged values land in .grad with no copy back. A bucket whose every parameter is
 * in starts its allreduce at once. A bucket also carries one "used" flag per parameter:
 * sync sends the buckets still open with zeros for parameters this rank did not use, so an
 * unused parameter never hangs the job, and the averaged flag says whether any rank used it
 * (if none did, the parameter keeps no gradient, exactly as in one process). No graph walk.
 *
 * While a step is traced (oar_jit_to_static) the hook records a grad_allreduce node instead,
 * carrying the parameter's name and the bucket sizes; the bucketing pass of the compiler
 * (graph/passes/bucket_allreduce.c) groups those into buckets in production order. */
#include "dist/data_parallel.h"
#include "ops/collective.h"
#include "tensor/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static void hook_error(oar_dist_dp *dp, oar_status st, const char *fmt, const char *name) {
    if (dp->err != OAR_OK) return;
    dp->err = st;
    snprintf(dp->err_msg, sizeof dp->err_msg, fmt, name);
}

oar_coll_desc oar_dp_bucket_desc(const oar_dist_dp *dp, const dp_bucket *b, void *buf) {
    return (oar_coll_desc){.kind = OAR_COLL_ALLREDUCE, .buf = buf, .count = b->buf->numel, .dtype = OAR_F32,
                           .op = dp->divisor > 0 ? OAR_DIST_SUM : OAR_DIST_AVG, .tag = (int)(b - dp->b),
                           .fixed_order = !dp->s.mpi_allreduce, .signature = b->signature, .label = b->label};
}

static void launch(oar_dist_dp *dp, dp_bucket *b, bool from_hook) {
    oar_coll_desc d = oar_dp_bucket_desc(dp, b, oar_tensor_ptr(b->buf));
    b->t_launch = oar_dist_now();
    b->work = oar_dist_submit(dp->c, &d);
    if (!b->work) {
        hook_error(dp, oar_last_status(), "data_parallel: could not start a bucket's allreduce: %s", oar_last_error());
        return;
    }
    if (from_hook) dp->stats.launched_in_backward++;
    else dp->stats.launched_at_sync++;
}

static float *used_flags(dp_bucket *b) { return (float *)oar_tensor_ptr(b->buf) + b->numel; }

/* Hook mode: every parameter's used flag, summed over ranks on a channel after the buckets'. */
static void launch_flags(oar_dist_dp *dp) {
    float *f = (float *)oar_tensor_ptr(dp->flags);
    for (int k = 0; k < dp->n; k++) f[k] = used_flags(&dp->b[dp->params[k].bucket])[dp->params[k].slot];
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = f, .count = dp->n, .dtype = OAR_F32, .op = OAR_DIST_SUM,
                       .tag = dp->nb, .fixed_order = true, .signature = dp->flags_sig,
                       .label = "data_parallel: which parameters got a gradient (communication hook mode)"};
    dp->flags_work = oar_dist_submit(dp->c, &d);
    if (!dp->flags_work)
        hook_error(dp, oar_last_status(), "data_parallel: could not start the used-flags allreduce: %s",
                   oar_last_error());
}

/* Hook mode: runs the hooks of the buckets from next_hook on, in order, while they are full (all
 * of them at the sync, which filled the rest), so every rank calls them in one order. */
static void run_hooks(oar_dist_dp *dp, bool from_hook) {
    while (dp->next_hook < dp->nb && dp->err == OAR_OK) {
        dp_bucket *b = &dp->b[dp->next_hook];
        if (from_hook && b->n_ready < b->n_params) return;
        int k = dp->next_hook++;
        b->t_launch = oar_dist_now();
        oar_status st = dp->hook(dp, k, dp->hook_user);
        if (st != OAR_OK) {
            char why[400];
            snprintf(why, sizeof why, "%d: %s", k, oar_last_error());
            hook_error(dp, st, "data_parallel: the communication hook failed on bucket %s", why);
            return;
        }
        if (from_hook) dp->stats.launched_in_backward++;
        else dp->stats.launched_at_sync++;
    }
    if (dp->next_hook == dp->nb && !dp->flags_work && dp->err == OAR_OK) launch_flags(dp);
}

/* A full bucket: its allreduce (built-in), or the hooks now due. */
static void bucket_full(oar_dist_dp *dp, dp_bucket *b, bool from_hook) {
    if (dp->hook) run_hooks(dp, from_hook);
    else launch(dp, b, from_hook);
}

static oar_tensor *grad_ready(oar_tensor *g, void *user) {
    dp_param *q = user;
    oar_dist_dp *dp = q->dp;
    dp_bucket *b = &dp->b[q->bucket];
    if (dp->err != OAR_OK) return NULL;
    if (dp->no_sync && oar_is_tracing()) {
        hook_error(dp, OAR_ERR_STATE, "data_parallel: a step is traced while no_sync is on, so its gradient of '%s' "
                   "would never be averaged; turn no_sync off before compiling the step", q->name);
        return NULL;
    }
    if (dp->no_sync) { /* autograd adds it to .grad, as without data parallel */
        dp->accumulated = true;
        return NULL;
    }
    if (oar_is_tracing()) { /* a compiled step: a node per gradient, bucketed by the compiler */
        if (dp->hook) {
            hook_error(dp, OAR_ERR_UNSUPPORTED, "data_parallel: a step is traced (the gradient of '%s') but a "
                       "communication hook is registered, and hooks run eagerly; run this step eagerly", q->name);
            return NULL;
        }
        if (dp->s.group) { /* the compiled allreduce ops run on the world's communicator */
            hook_error(dp, OAR_ERR_UNSUPPORTED, "data_parallel: a step over a process group is traced (the gradient "
                       "of '%s'), but compiled data parallel averages over the whole world; run this step "
                       "eagerly, or use data parallel over the world", q->name);
            return NULL;
        }
        if (q->ready) {
            hook_error(dp, OAR_ERR_STATE, "data_parallel: parameter '%s' got a second gradient in the traced step; "
                       "one backward per step", q->name);
            return NULL;
        }
        q->ready = true;
        oar_tensor *avg = oar_grad_allreduce(g, q->name, (int)(q - dp->params), (int64_t)dp->cap,
                                             (int64_t)dp->first_cap, !dp->s.mpi_allreduce);
        if (!avg && dp->err == OAR_OK) {
            dp->err = oar_last_status();
            snprintf(dp->err_msg, sizeof dp->err_msg, "data_parallel: recording the allreduce of '%s' failed: %s",
                     q->name, oar_last_error());
        }
        return avg;
    }
    if (!q->ready && q->p->grad && dp->accumulated) { /* the step after no_sync: local sum, then send */
        oar_tensor *acc = q->p->grad;
        q->p->grad = NULL;
        oar_tensor *sum = oar_add(acc, g); /* in the order autograd's .grad += g adds */
        oar_status st = sum ? oar_tensor_copy_strided(q->view, sum) : oar_last_status();
        oar_tensor_unref(acc);
        if (st != OAR_OK || !sum) {
            hook_error(dp, OAR_ERR_STATE, "data_parallel: adding the gradient of '%s' to the one accumulated under "
                       "no_sync failed", q->name);
            return NULL;
        }
        q->ready = true;
        used_flags(b)[q->slot] = 1.0f;
        if (++b->n_ready == b->n_params) bucket_full(dp, b, true);
        return oar_track(oar_tensor_alias(q->view));
    }
    if (q->ready || q->p->grad) {
        hook_error(dp, OAR_ERR_STATE, "data_parallel: parameter '%s' got a second gradient before the sync (it "
                   "already holds one); call oar_optimizer_zero_grad before each backward and oar_dist_dp_sync "
                   "after it (to accumulate over several backward calls, run all but the last under oar_dist_dp_no_sync)", q->name);
        return NULL;
    }
    if (!g->storage || oar_tensor_copy_strided(q->view, g) != OAR_OK) {
        hook_error(dp, OAR_ERR_STATE, "data_parallel: the gradient of '%s' could not be copied into its bucket "
                   "(a compiled step? data parallel runs eagerly for now)", q->name);
        return NULL;
    }
    q->ready = true;
    used_flags(b)[q->slot] = 1.0f;
    if (++b->n_ready == b->n_params) bucket_full(dp, b, true);
    return oar_track(oar_tensor_alias(q->view)); /* .grad becomes the bucket's slice */
}

/* Every rank must hold the same parameters: one fixed-order allreduce whose signature covers
 * every name and shape fails, naming both sides, if any differ. Then rank 0's values. */
static oar_status agree_and_broadcast(oar_dist_dp *dp, uint64_t model_sig, int64_t total) {
    int np = oar_module_num_parameters(dp->m), nbuf = oar_module_num_buffers(dp->m);
    oar_tensor *probe = oar_tensor_new(OAR_F32, (int64_t[]){1}, 1);
    if (!probe) return oar_last_status();
    char label[160];
    snprintf(label, sizeof label, "data_parallel: the model (%d parameters, %d buffers, %lld trainable elements)",
             np, nbuf, (long long)total);
    oar_coll_desc d = {.kind = OAR_COLL_ALLREDUCE, .buf = oar_tensor_ptr(probe), .count = 1, .dtype = OAR_F32,
                       .op = OAR_DIST_SUM, .tag = OAR_DIST_USER_CHANNEL - 1, .fixed_order = true,
                       .signature = model_sig, .label = label};
    oar_status st = oar_dist_wait(oar_dist_submit(dp->c, &d));
    oar_tensor_unref(probe);
    for (int i = 0; st == OAR_OK && i < np + nbuf; i++) {
        const char *name;
        oar_tensor *t = i < np ? oar_module_parameter(dp->m, i, &name) : oar_module_buffer(dp->m, i - np, &name);
        if (!oar_dist_dtype_reduces(t->dtype)) continue; /* bool/u8 buffers: flags, not learned state */
        oar_coll_desc bd = {.kind = OAR_COLL_BROADCAST, .buf = oar_tensor_ptr(t), .count = t->numel,
                            .dtype = t->dtype, .peer = 0, .label = name};
        st = oar_dist_wait(oar_dist_submit(dp->c, &bd));
    }
    if (st != OAR_OK) oar_error_prefix("data_parallel");
    return st;
}

static oar_status check_param(const char *name, const oar_tensor *p) {
    if (p->dtype != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "data_parallel: expected f32 parameters, got %s for '%s'",
                         oar_dtype_name(p->dtype), name);
    if (p->device != OAR_CPU || !p->contiguous || !p->storage)
        return oar_error(OAR_ERR_UNSUPPORTED, "data_parallel: expected '%s' contiguous on the CPU (NCCL for "
                                              "CUDA tensors is not there yet)", name);
    return OAR_OK;
}

/* Cuts the trainable parameters, last first, into buckets of the configured capacities. */
static oar_status plan_buckets(oar_dist_dp *dp, uint64_t *model_sig, int64_t *total) {
    int np = oar_module_num_parameters(dp->m);
    dp->params = calloc((size_t)(np ? np : 1), sizeof(dp_param));
    dp->b = calloc((size_t)(np ? np : 1), sizeof(dp_bucket));
    if (!dp->params || !dp->b) return oar_error(OAR_ERR_OOM, "data_parallel: out of memory");
    double first_cap = (dp->s.first_bucket_MB > 0 ? dp->s.first_bucket_MB : 1.0) * 1048576.0;
    double cap = (dp->s.fuse_grad_size_in_MB > 0 ? dp->s.fuse_grad_size_in_MB : 32.0) * 1048576.0;
    dp->first_cap = first_cap;
    dp->cap = cap;
    *model_sig = 14695981039346656037ull;
    *total = 0;
    for (int i = np - 1; i >= 0; i--) {
        const char *name;
        oar_tensor *p = oar_module_parameter(dp->m, i, &name);
        *model_sig = fnv(fnv(*model_sig, name, strlen(name)), p->shape, sizeof(int64_t) * (size_t)p->ndim);
        if (!oar_requires_grad(p)) continue;
        bool seen = false;
        for (int k = 0; k < dp->n; k++) seen |= dp->params[k].p == p;
        if (seen) continue; /* a shared parameter is reduced once */
        oar_status st = check_param(name, p);
        if (st != OAR_OK) return st;
        dp_bucket *b = dp->nb ? &dp->b[dp->nb - 1] : NULL;
        double limit = dp->nb == 1 ? first_cap : cap;
        if (!b || (b->n_params > 0 && 4.0 * (double)(b->numel + p->numel) > limit)) {
            b = &dp->b[dp->nb++];
            b->first = dp->n;
        }
        dp->params[dp->n] = (dp_param){.dp = dp, .p = p, .name = name, .bucket = dp->nb - 1, .slot = b->n_params};
        b->n_params++;
        b->numel += p->numel;
        *total += p->numel;
        dp->n++;
    }
    return OAR_OK;
}

static oar_status build_buckets(oar_dist_dp *dp) {
    for (int k = 0; k < dp->nb; k++) {
        dp_bucket *b = &dp->b[k];
        b->buf = oar_tensor_new(OAR_F32, (int64_t[]){b->numel + b->n_params}, 1);
        if (!b->buf || oar_tensor_fill(b->buf, 0.0) != OAR_OK) return oar_last_status();
        b->signature = 14695981039346656037ull;
        int used = snprintf(b->label, sizeof b->label, "gradient bucket %d (", k);
        int64_t off = 0;
        for (int j = 0; j < b->n_params; j++) {
            dp_param *q = &dp->params[b->first + j];
            b->signature = fnv(fnv(b->signature, q->name, strlen(q->name) + 1), q->p->shape,
                               sizeof(int64_t) * (size_t)q->p->ndim);
            if (used < (int)sizeof b->label)
                used += snprintf(b->label + used, sizeof b->label - (size_t)used, "%s%s", j ? ", " : "", q->name);
            q->view = oar_tensor_alias(b->buf);
            if (!q->view) return oar_last_status();
            q->view->offset = off;
            q->view->ndim = q->p->ndim;
            memcpy(q->view->shape, q->p->shape, sizeof(int64_t) * (size_t)q->p->ndim);
            oar_tensor_set_contiguous_strides(q->view);
            oar_tensor_refresh(q->view);
            off += q->p->numel;
        }
        if (used < (int)sizeof b->label) snprintf(b->label + used, sizeof b->label - (size_t)used, ")");
        else memcpy(b->label + sizeof b->label - 5, "...)", 5);
        if (!(b->grads = oar_tensor_alias(b->buf))) return oar_last_status();
        b->grads->shape[0] = b->numel;
        oar_tensor_set_contiguous_strides(b->grads);
        oar_tensor_refresh(b->grads);
    }
    if (!(dp->flags = oar_tensor_new(OAR_F32, (int64_t[]){dp->n ? dp->n : 1}, 1))) return oar_last_status();
    dp->flags_sig = fnv(14695981039346656037ull, "used flags", 10);
    for (int k = 0; k < dp->nb; k++) dp->flags_sig = fnv(dp->flags_sig, &dp->b[k].signature, sizeof(uint64_t));
    for (int k = 0; k < dp->n; k++) {
        dp_param *q = &dp->params[k];
        if ((q->hook = oar_register_hook(q->p, grad_ready, q)) < 0) return oar_last_status();
    }
    dp->stats.n_buckets = dp->nb;
    return OAR_OK;
}

oar_dist_dp *oar_dist_data_parallel(oar_module *m, const oar_dist_strategy *strategy) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "data_parallel: the module is NULL"), NULL;
    if (!oar_dist_world_comm()) return oar_error(OAR_ERR_STATE, "data_parallel: call oar_dist_init first"), NULL;
    oar_dist_strategy s = strategy ? *strategy : (oar_dist_strategy){0};
    oar_comm *c = oar_dist_group_comm(s.group, "data_parallel"); /* the group's, or the world's */
    if (!c) return NULL;
    if (s.fuse_grad_size_in_MB < 0 || s.first_bucket_MB < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "data_parallel: expected bucket sizes >= 0 MB (0 means the default), "
                         "got fuse_grad_size_in_MB %g, first_bucket_MB %g", s.fuse_grad_size_in_MB,
                         s.first_bucket_MB), NULL;
    oar_dist_dp *dp = OAR_NEW(oar_dist_dp);
    if (!dp) return NULL;
    dp->m = m;
    dp->c = c;
    dp->s = s;
    uint64_t sig = 0;
    int64_t total = 0;
    oar_status st = plan_buckets(dp, &sig, &total);
    if (st == OAR_OK) st = agree_and_broadcast(dp, sig, total);
    if (st == OAR_OK) st = build_buckets(dp);
    if (st != OAR_OK) {
        oar_dist_dp_free(dp);
        return NULL;
    }
    return dp;
}

static void reset_step(oar_dist_dp *dp) {
    dp->accumulated = false;
    for (int k = 0; k < dp->n; k++) dp->params[k].ready = false;
    for (int k = 0; k < dp->nb; k++) {
        dp->b[k].n_ready = 0;
        memset(used_flags(&dp->b[k]), 0, sizeof(float) * (size_t)dp->b[k].n_params);
    }
    dp->next_hook = 0;
    dp->err = OAR_OK;
}

/* A bucket not sent during backward: its parameters without a gradient of this backward get
 * their no_sync sum (flag 1) or zeros (flag 0). */
static void fill_unready(oar_dist_dp *dp, dp_bucket *b) {
    for (int j = 0; j < b->n_params; j++) {
        dp_param *q = &dp->params[b->first + j];
        if (q->ready) continue;
        if (q->p->grad && dp->accumulated) { /* used only in the no_sync backward calls */
            oar_tensor *acc = q->p->grad;
            q->p->grad = NULL;
            if (oar_tensor_copy_strided(q->view, acc) != OAR_OK)
                hook_error(dp, OAR_ERR_STATE, "dist_dp_sync: copying the accumulated gradient of '%s' failed",
                           q->name);
            oar_tensor_unref(acc);
            used_flags(b)[j] = 1.0f;
            continue;
        }
        if (q->p->grad)
            hook_error(dp, OAR_ERR_STATE, "dist_dp_sync: parameter '%s' holds a gradient from before this "
                       "backward; call oar_optimizer_zero_grad before each backward", q->name);
        oar_tensor_fill(q->view, 0.0);
    }
}

/* Every parameter some rank used gets .grad (a view of its bucket); used(k): the summed flag. */
static oar_status give_grads(oar_dist_dp *dp, bool summed_flags) {
    const float *summed = summed_flags ? (const float *)oar_tensor_ptr(dp->flags) : NULL;
    for (int k = 0; k < dp->n; k++) {
        dp_param *q = &dp->params[k];
        bool anyone = (summed ? summed[k] : used_flags(&dp->b[q->bucket])[q->slot]) > 0.0f;
        if (anyone && !q->p->grad && !(q->p->grad = oar_tensor_alias(q->view))) return oar_last_status();
    }
    return OAR_OK;
}

/* Hook mode's sync: the hooks still due, then the used flags (the hooks' futures are the caller's). */
static oar_status sync_hooked(oar_dist_dp *dp, double t0) {
    for (int k = dp->next_hook; k < dp->nb; k++) fill_unready(dp, &dp->b[k]);
    run_hooks(dp, false);
    if (!dp->flags_work) launch_flags(dp); /* even after a failed hook: the other ranks send theirs */
    oar_status st = dp->flags_work ? oar_dist_wait(dp->flags_work) : oar_last_status();
    dp->flags_work = NULL;
    if (dp->err != OAR_OK) st = oar_error(dp->err, "%s", dp->err_msg);
    if (st == OAR_OK) st = give_grads(dp, true);
    reset_step(dp);
    if (st != OAR_OK) return st;
    dp->stats.exposed_seconds += oar_dist_now() - t0;
    dp->stats.steps++;
    return OAR_OK;
}

oar_status oar_dist_dp_sync(oar_dist_dp *dp) {
    if (!dp) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_sync: the handle is NULL");
    if (oar_is_tracing()) { /* the program's allreduce nodes do the work at every run */
        oar_status st = dp->err != OAR_OK ? oar_error(dp->err, "%s", dp->err_msg) : OAR_OK;
        reset_step(dp);
        return st;
    }
    if (dp->no_sync) return OAR_OK; /* gradients stay local until a sync outside no_sync */
    double t0 = oar_dist_now();
    if (dp->hook) return sync_hooked(dp, t0);
    oar_status join_st = oar_dp_join_settle(dp); /* join's counts of this step, sent before forward */
    /* every bucket is sent, even after an error here: the other ranks send theirs, and the
     * buckets of later steps must pair with the same step's */
    for (int k = 0; k < dp->nb; k++) {
        dp_bucket *b = &dp->b[k];
        if (b->work) continue;
        fill_unready(dp, b);
        launch(dp, b, false);
    }
    oar_status st = OAR_OK;
    for (int k = 0; k < dp->nb; k++) { /* wait for every launched bucket, even after an error */
        dp_bucket *b = &dp->b[k];
        if (!b->work) continue;
        double t_done = 0;
        oar_status s = oar_dist_wait_timed(b->work, &t_done);
        b->work = NULL;
        if (s != OAR_OK) {
            reset_step(dp);
            return s; /* the first failure (a dead peer fails them all alike) */
        }
        dp->stats.comm_seconds += t_done - b->t_launch;
        if (dp->divisor > 0) oar_dist_scale_avg(oar_tensor_ptr(b->buf), b->numel, OAR_F32, dp->divisor);
    }
    if (dp->err != OAR_OK) {
        st = oar_error(dp->err, "%s", dp->err_msg);
        reset_step(dp);
        return st;
    }
    if (join_st != OAR_OK) {
        reset_step(dp);
        return join_st;
    }
    st = give_grads(dp, false);
    reset_step(dp);
    if (st != OAR_OK) return st;
    dp->stats.exposed_seconds += oar_dist_now() - t0;
    dp->stats.steps++;
    return OAR_OK;
}

oar_status oar_dist_dp_set_comm_hook(oar_dist_dp *dp, oar_dist_comm_hook hook, void *user) {
    if (!dp || !hook) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_set_comm_hook: expected a handle and a hook");
    if (dp->hook)
        return oar_error(OAR_ERR_STATE, "register_comm_hook or register_builtin_comm_hook can only be called once.");
    bool mid_step = dp->accumulated;
    for (int k = 0; k < dp->n; k++) mid_step |= dp->params[k].ready;
    if (mid_step)
        return oar_error(OAR_ERR_STATE, "dist_dp_set_comm_hook: a backward ran since the last sync (or under "
                         "no_sync); register the hook between steps");
    dp->hook = hook;
    dp->hook_user = user;
    return OAR_OK;
}

oar_tensor *oar_dist_dp_bucket_buffer(const oar_dist_dp *dp, int i) {
    if (!dp || i < 0 || i >= dp->nb)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_bucket_buffer: expected 0 <= i < %d, got %d", dp ? dp->nb : 0,
                         i), NULL;
    return dp->b[i].grads;
}

oar_tensor *oar_dist_dp_bucket_param(const oar_dist_dp *dp, int i, int j) {
    if (!dp || i < 0 || i >= dp->nb || j < 0 || j >= dp->b[i].n_params)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_bucket_param: expected a bucket in [0, %d) and a parameter "
                         "of it, got bucket %d, parameter %d", dp ? dp->nb : 0, i, j), NULL;
    return dp->params[dp->b[i].first + j].p;
}

oar_status oar_dist_dp_no_sync(oar_dist_dp *dp, bool on) {
    if (!dp) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_no_sync: the handle is NULL");
    if (on && oar_is_tracing())
        return oar_error(OAR_ERR_UNSUPPORTED, "dist_dp_no_sync: gradients cannot accumulate across calls of a compiled "
                                              "step (each run starts from zero_grad); accumulate eagerly, or trace "
                                              "one step over the whole batch");
    dp->no_sync = on;
    return OAR_OK;
}

oar_status oar_dist_dp_backward(oar_dist_dp *dp, oar_tensor *loss) {
    if (!dp) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_backward: the handle is NULL");
    oar_status st = oar_backward(loss, NULL, false);
    return st == OAR_OK ? oar_dist_dp_sync(dp) : st;
}

oar_status oar_dist_dp_get_stats(const oar_dist_dp *dp, oar_dist_dp_stats *out) {
    if (!dp || !out) return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_get_stats: expected a handle and an output");
    *out = dp->stats;
    return OAR_OK;
}

int64_t oar_dist_dp_bucket_numel(const oar_dist_dp *dp, int i) {
    if (!dp || i < 0 || i >= dp->nb)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_bucket_numel: expected 0 <= i < %d, got %d", dp ? dp->nb : 0, i), -1;
    return dp->b[i].numel;
}

int oar_dist_dp_bucket_params(const oar_dist_dp *dp, int i) {
    if (!dp || i < 0 || i >= dp->nb)
        return oar_error(OAR_ERR_INVALID_ARG, "dist_dp_bucket_params: expected 0 <= i < %d, got %d", dp ? dp->nb : 0, i), -1;
    return dp->b[i].n_params;
}

void oar_dist_dp_free(oar_dist_dp *dp) {
    if (!dp) return;
    (void)oar_dp_join_settle(dp); /* never free what MPI still writes */
    oar_dist_program_join_off(dp);
    for (int k = 0; k < dp->n; k++) {
        dp_param *q = &dp->params[k];
        if (q->hook > 0) oar_remove_hook(q->p, q->hook);
        oar_tensor_unref(q->view);
    }
    for (int k = 0; k < dp->nb; k++) {
        if (dp->b[k].work) oar_dist_wait(dp->b[k].work); /* never free a buffer MPI still reads */
        oar_tensor_unref(dp->b[k].grads);
        oar_tensor_unref(dp->b[k].buf);
    }
    if (dp->flags_work) oar_dist_wait(dp->flags_work);
    oar_tensor_unref(dp->flags);
    free(dp->params);
    free(dp->b);
    free(dp);
}
