/* NCCL behind the communicator interface: collectives on GPU buffers, issued on oar's CUDA
 * stream (the device table's), so kernels queued after a collective on that stream see its
 * result and a work is complete at submission, as far as the stream is concerned; a host
 * read waits for the stream like any copy. A barrier also waits for the stream. The
 * ncclUniqueId is made by rank 0 and broadcast over the world communicator (MPI, or the
 * one-rank local one). One GPU per process: device 0, as the rest of the CUDA backend.
 * Reductions run in NCCL's order, which is fixed for a given world and topology (fixed_order
 * asks for nothing more here). */
#include "dist/comm.h"
#include "dist/comm_nccl.h"
#include "base/device.h"

#include <nccl.h>
#include <stdlib.h>
#include <string.h>

typedef struct nccl_impl {
    ncclComm_t comm;
    float *one; /* a device float for barriers */
} nccl_impl;

static bool nccl_dtype(oar_dtype dt, ncclDataType_t *out) {
    switch (dt) {
    case OAR_F32: *out = ncclFloat32; return true;
    case OAR_F64: *out = ncclFloat64; return true;
    case OAR_F16: *out = ncclFloat16; return true;
    case OAR_BF16: *out = ncclBfloat16; return true;
    case OAR_I32: *out = ncclInt32; return true;
    case OAR_I64: *out = ncclInt64; return true;
    case OAR_I8: *out = ncclInt8; return true;
    case OAR_U8: *out = ncclUint8; return true;
    default: return false;
    }
}

static ncclRedOp_t nccl_op(oar_dist_op op) {
    switch (op) {
    case OAR_DIST_AVG: return ncclAvg;
    case OAR_DIST_MAX: return ncclMax;
    case OAR_DIST_MIN: return ncclMin;
    default: return ncclSum;
    }
}

static oar_status nccl_submit(oar_comm *c, oar_dist_work *w) {
    nccl_impl *m = c->impl;
    const oar_coll_desc *d = &w->d;
    const oar_device_ops *gpu = oar_device_get(OAR_CUDA);
    if (!gpu) {
        oar_dist_work_finish(w, OAR_ERR_UNSUPPORTED, "%s: the NCCL backend needs a GPU", w->label);
        return OAR_OK;
    }
    cudaStream_t s = (cudaStream_t)gpu->stream();
    if (d->kind == OAR_COLL_SPLIT || d->kind == OAR_COLL_FREE) { /* groups run on MPI (CPU tensors) for now */
        oar_dist_work_finish(w, OAR_ERR_UNSUPPORTED, "%s: process groups are not supported on the NCCL backend yet; "
                                                     "use the MPI backend (CPU tensors) for new_group", w->label);
        return OAR_OK;
    }
    ncclDataType_t dt = ncclFloat32;
    if (d->kind != OAR_COLL_BARRIER && !nccl_dtype(d->dtype, &dt)) {
        oar_dist_work_finish(w, OAR_ERR_DTYPE, "%s: NCCL has no %s type", w->label, oar_dtype_name(d->dtype));
        return OAR_OK;
    }
    size_t n = (size_t)d->count;
    ncclResult_t r = ncclSuccess;
    switch (d->kind) {
    case OAR_COLL_ALLREDUCE: r = ncclAllReduce(d->buf, d->buf, n, dt, nccl_op(d->op), m->comm, s); break;
    case OAR_COLL_BROADCAST: r = ncclBroadcast(d->buf, d->buf, n, dt, d->peer, m->comm, s); break;
    case OAR_COLL_ALLGATHER: r = ncclAllGather(d->in, d->buf, n / (size_t)c->size, dt, m->comm, s); break;
    case OAR_COLL_REDUCE_SCATTER: r = ncclReduceScatter(d->in, d->buf, n, dt, nccl_op(d->op), m->comm, s); break;
    case OAR_COLL_SEND: r = ncclSend(d->buf, n, dt, d->peer, m->comm, s); break;
    case OAR_COLL_RECV: r = ncclRecv(d->buf, n, dt, d->peer, m->comm, s); break;
    case OAR_COLL_BARRIER: r = ncclAllReduce(m->one, m->one, 1, ncclFloat32, ncclSum, m->comm, s); break;
    case OAR_COLL_SPLIT:
    case OAR_COLL_FREE: break; /* answered above */
    }
    if (r != ncclSuccess) {
        oar_dist_work_finish(w, OAR_ERR_IO, "%s: NCCL error %d: %s", w->label, (int)r, ncclGetErrorString(r));
        return OAR_OK;
    }
    oar_status st = d->kind == OAR_COLL_BARRIER ? gpu->synchronize() : OAR_OK;
    if (st != OAR_OK) oar_dist_work_finish(w, st, "%s: %s", w->label, oar_last_error());
    else oar_dist_work_finish(w, OAR_OK, NULL);
    return OAR_OK;
}

static void nccl_shutdown(oar_comm *c, bool clean) {
    nccl_impl *m = c->impl;
    if (!m) return;
    if (clean) ncclCommDestroy(m->comm);
    else ncclCommAbort(m->comm);
    const oar_device_ops *gpu = oar_device_get(OAR_CUDA);
    if (gpu && m->one) gpu->free(m->one, sizeof(float));
    m->one = NULL;
}

static const oar_comm_ops nccl_ops = {.name = "nccl", .submit = nccl_submit, .shutdown = nccl_shutdown};

oar_comm *oar_comm_nccl_new(oar_comm *boot) {
    const oar_device_ops *gpu = oar_device_use(OAR_CUDA, "dist (NCCL)");
    if (!gpu) return NULL;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = boot->rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (r != ncclSuccess) {
        oar_error(OAR_ERR_IO, "dist (NCCL): ncclGetUniqueId failed: %s", ncclGetErrorString(r));
        return NULL;
    }
    /* the id's bytes, as i64 words, from rank 0 to every rank over the bootstrap communicator */
    int64_t words[(sizeof id + 7) / 8];
    memset(words, 0, sizeof words);
    memcpy(words, &id, sizeof id);
    oar_coll_desc d = {.kind = OAR_COLL_BROADCAST, .buf = words, .count = (int64_t)(sizeof words / 8),
                       .dtype = OAR_I64, .peer = 0, .label = "dist (NCCL): the ncclUniqueId broadcast"};
    if (boot->size > 1 && oar_dist_wait(oar_dist_submit(boot, &d)) != OAR_OK) return NULL;
    memcpy(&id, words, sizeof id);
    oar_comm *c = OAR_NEW(oar_comm);
    nccl_impl *m = OAR_NEW(nccl_impl);
    float *one = gpu->alloc(sizeof(float));
    if (!c || !m || !one) {
        free(c);
        free(m);
        if (one) gpu->free(one, sizeof(float));
        oar_error(OAR_ERR_OOM, "dist (NCCL): out of memory making the communicator");
        return NULL;
    }
    if ((r = ncclCommInitRank(&m->comm, boot->size, id, boot->rank)) != ncclSuccess) {
        free(c);
        free(m);
        gpu->free(one, sizeof(float));
        oar_error(OAR_ERR_IO, "dist (NCCL): ncclCommInitRank (rank %d of %d) failed: %s", boot->rank, boot->size,
                  ncclGetErrorString(r));
        return NULL;
    }
    m->one = one;
    c->ops = &nccl_ops;
    c->rank = boot->rank;
    c->size = boot->size;
    c->impl = m;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    return c;
}
