/* The one-rank communicator: every collective is complete at submission (a reduction over
 * one rank is the identity, a gather is a copy). It lets data-parallel code run unchanged in
 * a plain process and in builds without MPI. */
#include "dist/comm.h"

#include <stdlib.h>
#include <string.h>

static oar_status local_submit(oar_comm *c, oar_dist_work *w) {
    const oar_coll_desc *d = &w->d;
    size_t bytes = (size_t)d->count * oar_dist_dtype_size(d->dtype);
    if ((d->kind == OAR_COLL_ALLGATHER || d->kind == OAR_COLL_REDUCE_SCATTER) && d->buf != d->in)
        memcpy(d->buf, d->in, bytes);
    if (d->kind == OAR_COLL_SEND || d->kind == OAR_COLL_RECV) {
        oar_dist_work_finish(w, OAR_ERR_UNSUPPORTED, "%s: a one-rank world has no peer to talk to", w->label);
        return OAR_OK;
    }
    (void)c;
    oar_dist_work_finish(w, OAR_OK, NULL);
    return OAR_OK;
}

static void local_shutdown(oar_comm *c, bool clean) { (void)c, (void)clean; }

static oar_comm *local_split(oar_comm *c, bool member, int key, oar_status *st) {
    (void)c, (void)key;
    *st = OAR_OK;
    if (!member) return NULL;
    oar_comm *g = oar_comm_local_new();
    if (!g) *st = oar_error(OAR_ERR_OOM, "new_group: out of memory");
    return g;
}

static const oar_comm_ops local_ops = {.name = "local", .submit = local_submit, .shutdown = local_shutdown,
                                       .split = local_split};

oar_comm *oar_comm_local_new(void) {
    oar_comm *c = OAR_NEW(oar_comm);
    if (!c) return NULL;
    c->ops = &local_ops;
    c->rank = 0;
    c->size = 1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}
