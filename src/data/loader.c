/* The batching loader: options, epochs (order from (seed, epoch)), and handing batches to the
 * caller, built inline (workers == 0) or taken from the prefetch queue (workers.c). Either
 * way batch k of an epoch is the same tensor, and errors surface at the same batch. */
#include "data/loader.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_WORKERS 256
#define MAX_PREFETCH 4096

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static oar_status check_opts(const oar_dataset *d, const oar_loader_opts *o) {
    if (!d) return oar_error(OAR_ERR_INVALID_ARG, "loader_new: the dataset is NULL");
    if (o->batch_size < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "loader_new: expected batch_size >= 0 (0 means 1), got %lld",
                         (long long)o->batch_size);
    if (o->workers < 0 || o->workers > MAX_WORKERS)
        return oar_error(OAR_ERR_INVALID_ARG, "loader_new: expected 0 <= workers <= %d, got %d",
                         MAX_WORKERS, o->workers);
    if (o->prefetch < 0 || o->prefetch > MAX_PREFETCH)
        return oar_error(OAR_ERR_INVALID_ARG, "loader_new: expected 0 <= prefetch <= %d (0 means 2 "
                         "per worker), got %d", MAX_PREFETCH, o->prefetch);
    return oar_transforms_check(o->transforms, o->n_transforms, d);
}

static bool needs_scratch(const oar_loader *l) {
    for (int k = 0; k < l->n_tf; k++)
        if (l->tf[k].kind == OAR_TF_RANDOM_CROP) return true;
    return false;
}

/* Everything but the threads: sized buffers and the synchronisation objects. */
static oar_status setup(oar_loader *l, const oar_loader_opts *o) {
    if (l->n_tf) {
        l->tf = oar_malloc(sizeof(oar_transform) * (size_t)l->n_tf);
        if (!l->tf) return OAR_ERR_OOM;
        memcpy(l->tf, o->transforms, sizeof(oar_transform) * (size_t)l->n_tf);
        for (int k = 0; k < l->n_tf; k++) { /* the loader's own copy of long mean/std lists */
            oar_transform *t = &l->tf[k];
            if (!t->means) continue;
            size_t nc = (size_t)(t->n_channels > 0 ? t->n_channels : 1);
            double *both = oar_malloc(sizeof(double) * 2 * nc);
            if (!both) {
                for (int j = k; j < l->n_tf; j++) l->tf[j].means = l->tf[j].stds = NULL; /* not ours to free */
                return OAR_ERR_OOM;
            }
            memcpy(both, t->means, sizeof(double) * nc);
            memcpy(both + nc, t->stds, sizeof(double) * nc);
            t->means = both;
            t->stds = both + nc;
        }
    }
    if (l->shuffle && !(l->order = oar_malloc(sizeof(int64_t) * (size_t)l->d->size)))
        return OAR_ERR_OOM;
    if (needs_scratch(l) &&
        !(l->scratch = oar_malloc(l->d->in_bytes * (size_t)(l->workers + 1))))
        return OAR_ERR_OOM;
    if (l->workers == 0) return OAR_OK;
    if (!(l->slots = oar_malloc(sizeof(loader_slot) * (size_t)l->prefetch))) return OAR_ERR_OOM;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->work_cv, NULL);
    pthread_cond_init(&l->ready_cv, NULL);
    pthread_cond_init(&l->idle_cv, NULL);
    return oar_loader_workers_start(l);
}

oar_loader *oar_loader_new(oar_dataset *d, const oar_loader_opts *opts) {
    oar_loader_opts defaults = {0};
    const oar_loader_opts *o = opts ? opts : &defaults;
    if (check_opts(d, o) != OAR_OK) return NULL;
    oar_loader *l = OAR_NEW(oar_loader);
    if (!l) return NULL;
    l->d = d;
    l->batch_size = o->batch_size ? o->batch_size : 1;
    l->shuffle = o->shuffle;
    l->drop_last = o->drop_last;
    l->seed = o->seed;
    l->n_tf = o->n_transforms;
    l->workers = o->workers;
    l->prefetch = o->prefetch ? o->prefetch : 2 * o->workers;
    l->shard_count = 1;
    l->n_batches = l->drop_last ? d->size / l->batch_size
                                : d->size / l->batch_size + (d->size % l->batch_size != 0);
    if (setup(l, o) != OAR_OK) {
        oar_error_prefix("loader_new");
        oar_loader_free(l);
        return NULL;
    }
    return l;
}

int64_t oar_loader_num_batches(const oar_loader *l) { return l ? l->n_batches : -1; }

oar_status oar_loader_set_shard(oar_loader *l, int rank, int count) {
    if (!l) return oar_error(OAR_ERR_INVALID_ARG, "loader_set_shard: the loader is NULL");
    if (count < 1 || rank < 0 || rank >= count)
        return oar_error(OAR_ERR_INVALID_ARG, "loader_set_shard: expected 0 <= rank < count, got rank %d of "
                         "count %d", rank, count);
    if (l->started)
        return oar_error(OAR_ERR_STATE, "loader_set_shard: the loader has started an epoch; set the shard "
                                        "right after oar_loader_new");
    int64_t global = l->batch_size * count;
    l->shard_rank = rank;
    l->shard_count = count;
    l->n_batches = l->drop_last ? l->d->size / global : l->d->size / global + (l->d->size % global != 0);
    return OAR_OK;
}

oar_status oar_loader_start_epoch(oar_loader *l, int64_t epoch) {
    if (!l) return oar_error(OAR_ERR_INVALID_ARG, "loader_start_epoch: the loader is NULL");
    if (epoch < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "loader_start_epoch: expected epoch >= 0, got %lld",
                         (long long)epoch);
    if (l->workers) oar_loader_workers_quiesce(l); /* from here no worker reads the epoch */
    oar_epoch_keys keys = oar_data_epoch_keys(l->seed, epoch);
    if (l->shuffle) oar_data_permutation(keys.shuffle, l->order, l->d->size);
    l->sample_key = keys.sample;
    l->started = true;
    l->failed = OAR_OK;
    l->wait_s = 0.0;
    if (l->workers) oar_loader_workers_activate(l);
    else l->next_deliver = 0;
    return OAR_OK;
}

static bool finish(oar_status *status, oar_status st) {
    if (status) *status = st;
    return false;
}

bool oar_loader_next(oar_loader *l, oar_tensor **inputs, oar_tensor **targets, oar_status *status) {
    if (inputs) *inputs = NULL;
    if (targets) *targets = NULL;
    if (!l || !inputs || !targets)
        return finish(status, oar_error(OAR_ERR_INVALID_ARG, "loader_next: expected a loader and "
                                                             "two output pointers, got NULL"));
    if (!l->started) { /* a first epoch the caller did not start explicitly is epoch 0 */
        oar_status st = oar_loader_start_epoch(l, 0);
        if (st != OAR_OK) return finish(status, st);
    }
    if (l->failed != OAR_OK)
        return finish(status, oar_error(l->failed, "%s", l->failed_msg));
    /* workers only write next_deliver inside take(), which this thread calls: no race here */
    if (l->next_deliver >= l->n_batches) return finish(status, OAR_OK);
    double t0 = now_seconds();
    int64_t p0 = oar_prof_active() ? oar_prof_now() : 0; /* the profiler's reader_cost */
    oar_tensor *x = NULL, *y = NULL;
    oar_status st;
    if (l->workers) {
        st = oar_loader_workers_take(l, &x, &y, l->failed_msg);
    } else {
        st = oar_loader_build(l, l->next_deliver++, l->scratch, &x, &y);
        if (st != OAR_OK) snprintf(l->failed_msg, sizeof l->failed_msg, "%s", oar_last_error());
    }
    l->wait_s += now_seconds() - t0;
    if (p0) oar_prof_reader(p0, oar_prof_now());
    if (st != OAR_OK) {
        l->failed = st;
        return finish(status, oar_error(st, "%s", l->failed_msg));
    }
    *inputs = oar_track(x);
    *targets = oar_track(y);
    if (status) *status = OAR_OK;
    return true;
}

double oar_loader_wait_seconds(const oar_loader *l) { return l ? l->wait_s : 0.0; }

void oar_loader_free(oar_loader *l) {
    if (!l) return;
    if (l->slots) { /* the synchronisation objects exist exactly when the slots do */
        oar_loader_workers_stop(l);
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->work_cv);
        pthread_cond_destroy(&l->ready_cv);
        pthread_cond_destroy(&l->idle_cv);
    }
    free(l->slots);
    free(l->threads);
    free(l->worker_args);
    free(l->scratch);
    free(l->order);
    for (int k = 0; l->tf && k < l->n_tf; k++) free((void *)l->tf[k].means); /* means and stds: one block */
    free(l->tf);
    free(l);
}
