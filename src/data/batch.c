/* Builds one batch: the samples are written by the dataset straight into the contiguous batch
 * buffers (no per-sample tensors), then transformed in place. */
#include "data/loader.h"

#include <string.h>

oar_status oar_loader_build(const oar_loader *l, int64_t k, float *scratch, oar_tensor **input,
                            oar_tensor **target) {
    const oar_dataset *d = l->d;
    /* global batch k holds batch_size * shard_count samples; this shard takes its part */
    int64_t global = l->batch_size * l->shard_count, start = k * global;
    int64_t len = d->size - start < global ? d->size - start : global;
    int64_t first = start + l->shard_rank * len / l->shard_count;
    int64_t b = start + (l->shard_rank + 1) * len / l->shard_count - first;
    int64_t shape[OAR_MAX_DIMS];
    shape[0] = b;
    memcpy(shape + 1, d->in_shape, sizeof(int64_t) * (size_t)d->in_ndim);
    oar_tensor *x = oar_tensor_new(d->in_dtype, shape, d->in_ndim + 1);
    memcpy(shape + 1, d->tgt_shape, sizeof(int64_t) * (size_t)d->tgt_ndim);
    oar_tensor *y = x ? oar_tensor_new(d->tgt_dtype, shape, d->tgt_ndim + 1) : NULL;
    if (!y) {
        oar_tensor_unref(x);
        oar_error_prefix("loader: batch %lld", (long long)k);
        return oar_last_status();
    }
    char *xp = oar_tensor_ptr(x), *yp = oar_tensor_ptr(y);
    for (int64_t j = 0; j < b; j++) {
        int64_t i = l->order ? l->order[first + j] : first + j;
        char *xs = xp + (size_t)j * d->in_bytes;
        oar_status st = d->vt->copy(d, i, l->sample_key, xs, yp + (size_t)j * d->tgt_bytes);
        if (st != OAR_OK) {
            oar_tensor_unref(x);
            oar_tensor_unref(y);
            oar_error_prefix("loader: batch %lld", (long long)k);
            return st;
        }
        if (l->n_tf) oar_transforms_apply(l->tf, l->n_tf, d, (float *)xs, scratch, l->sample_key, i);
    }
    *input = x;
    *target = y;
    return OAR_OK;
}
