/* Background prefetch: worker threads claim batches in increasing order, at most `prefetch`
 * ahead of the caller, and park each finished batch in its queue slot; the caller takes them
 * strictly in order. A batch is a pure function of (seed, epoch, batch index), so which
 * worker builds it, and when, never changes the result. */
#include "data/loader.h"
#include "profiler/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct worker_arg {
    oar_loader *l;
    int id;
} worker_arg;

static bool can_claim(const oar_loader *l) {
    return l->active && !l->halted && !l->shutdown && l->next_claim < l->n_batches &&
           l->next_claim < l->next_deliver + l->prefetch;
}

static void *worker_main(void *p) {
    worker_arg *a = p;
    oar_loader *l = a->l;
    float *scratch = l->scratch ? l->scratch + (size_t)(a->id + 1) * (size_t)l->d->in_numel : NULL;
    pthread_mutex_lock(&l->mu);
    while (!l->shutdown) {
        if (!can_claim(l)) {
            pthread_cond_wait(&l->work_cv, &l->mu);
            continue;
        }
        int64_t k = l->next_claim++;
        uint64_t gen = l->generation;
        l->busy++;
        pthread_mutex_unlock(&l->mu);

        oar_tensor *x = NULL, *y = NULL;
        int64_t b0 = oar_prof_spans_on() ? oar_prof_now() : 0;
        oar_status st = oar_loader_build(l, k, scratch, &x, &y);
        if (b0) {
            char name[32];
            snprintf(name, sizeof name, "loader worker %d", a->id);
            oar_prof_thread_name(name);
            oar_prof_span("loader.batch", b0, oar_prof_now());
        }

        pthread_mutex_lock(&l->mu);
        if (--l->busy == 0) pthread_cond_broadcast(&l->idle_cv);
        if (gen != l->generation || l->shutdown) { /* the epoch was restarted or the loader freed */
            oar_tensor_unref(x);
            oar_tensor_unref(y);
            continue;
        }
        loader_slot *s = &l->slots[k % l->prefetch];
        s->batch = k;
        s->input = x;
        s->target = y;
        s->status = st;
        if (st != OAR_OK) {
            snprintf(s->msg, sizeof s->msg, "%s", oar_last_error());
            l->halted = true; /* later batches would be dropped anyway; the epoch ends here */
        }
        s->ready = true;
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void drop_queued(oar_loader *l) {
    for (int q = 0; q < l->prefetch; q++) {
        loader_slot *s = &l->slots[q];
        if (!s->ready) continue;
        oar_tensor_unref(s->input);
        oar_tensor_unref(s->target);
        s->input = s->target = NULL;
        s->ready = false;
    }
}

oar_status oar_loader_workers_start(oar_loader *l) {
    worker_arg *args = oar_malloc(sizeof(worker_arg) * (size_t)l->workers);
    l->threads = oar_malloc(sizeof(pthread_t) * (size_t)l->workers);
    if (!args || !l->threads) {
        free(args);
        return OAR_ERR_OOM;
    }
    for (int w = 0; w < l->workers; w++) {
        args[w].l = l;
        args[w].id = w;
    }
    l->worker_args = args;
    for (int w = 0; w < l->workers; w++) {
        int rc = pthread_create(&l->threads[w], NULL, worker_main, &args[w]);
        if (rc != 0) {
            oar_loader_workers_stop(l);
            return oar_error(OAR_ERR_STATE, "loader: could not start worker thread %d of %d: %s; "
                             "use fewer workers", w + 1, l->workers, strerror(rc));
        }
        l->n_threads++;
    }
    return OAR_OK;
}

void oar_loader_workers_stop(oar_loader *l) {
    pthread_mutex_lock(&l->mu);
    l->shutdown = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    for (int w = 0; w < l->n_threads; w++) pthread_join(l->threads[w], NULL);
    l->n_threads = 0;
    drop_queued(l);
}

void oar_loader_workers_quiesce(oar_loader *l) {
    pthread_mutex_lock(&l->mu);
    l->active = false;
    l->generation++;
    while (l->busy > 0) pthread_cond_wait(&l->idle_cv, &l->mu);
    drop_queued(l);
    pthread_mutex_unlock(&l->mu);
}

void oar_loader_workers_activate(oar_loader *l) {
    pthread_mutex_lock(&l->mu);
    l->next_claim = 0;
    l->next_deliver = 0;
    l->halted = false;
    l->active = true;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
}

oar_status oar_loader_workers_take(oar_loader *l, oar_tensor **input, oar_tensor **target, char *msg) {
    pthread_mutex_lock(&l->mu);
    int64_t k = l->next_deliver;
    loader_slot *s = &l->slots[k % l->prefetch];
    while (!(s->ready && s->batch == k)) pthread_cond_wait(&l->ready_cv, &l->mu);
    oar_status st = s->status;
    *input = s->input;
    *target = s->target;
    if (st != OAR_OK) memcpy(msg, s->msg, OAR_LOADER_MSG_CAP);
    s->input = s->target = NULL;
    s->ready = false;
    l->next_deliver = k + 1;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    return st;
}
