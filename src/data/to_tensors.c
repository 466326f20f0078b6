/* A whole dataset as two tensors, for data that fits in memory and code that wants X and y
 * without a loader (scikit-learn style: a CSV read once, split and indexed by hand). */
#include "data/data.h"

#include <string.h>

oar_status oar_dataset_to_tensors(oar_dataset *d, oar_tensor **inputs, oar_tensor **targets) {
    if (inputs) *inputs = NULL;
    if (targets) *targets = NULL;
    if (!d || !inputs || !targets)
        return oar_error(OAR_ERR_INVALID_ARG, "dataset_to_tensors: expected a dataset and two output pointers, "
                                              "got NULL");
    int64_t shape[OAR_MAX_DIMS];
    shape[0] = d->size;
    memcpy(shape + 1, d->in_shape, sizeof(int64_t) * (size_t)d->in_ndim);
    oar_tensor *x = oar_tensor_new(d->in_dtype, shape, d->in_ndim + 1);
    memcpy(shape + 1, d->tgt_shape, sizeof(int64_t) * (size_t)d->tgt_ndim);
    oar_tensor *y = x ? oar_tensor_new(d->tgt_dtype, shape, d->tgt_ndim + 1) : NULL;
    if (!y) {
        oar_tensor_unref(x);
        oar_error_prefix("dataset_to_tensors: %lld samples", (long long)d->size);
        return oar_last_status();
    }
    /* outside a loader there is no (seed, epoch): random readers draw as oar_dataset_get does */
    uint64_t key = oar_data_epoch_keys(0, 0).sample;
    char *xp = oar_tensor_ptr(x), *yp = oar_tensor_ptr(y);
    for (int64_t i = 0; i < d->size; i++) {
        oar_status st = d->vt->copy(d, i, key, xp + (size_t)i * d->in_bytes, yp + (size_t)i * d->tgt_bytes);
        if (st != OAR_OK) {
            oar_tensor_unref(x);
            oar_tensor_unref(y);
            oar_error_prefix("dataset_to_tensors: sample %lld", (long long)i);
            return st;
        }
    }
    *inputs = oar_track(x);
    *targets = oar_track(y);
    return OAR_OK;
}
