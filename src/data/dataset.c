/* The dataset interface shared by every reader: sample layout, size, one-sample access. */
#include "data/data.h"

#include <string.h>

static oar_status layout(const char *which, oar_dtype dt, const int64_t *shape, int ndim,
                         int64_t *out_shape, int64_t *numel, size_t *bytes) {
    if (!oar_dtype_valid(dt))
        return oar_error(OAR_ERR_DTYPE, "dataset: expected a valid %s dtype, got %d", which, (int)dt);
    if (ndim < 0 || ndim > OAR_MAX_DIMS - 1)
        return oar_error(OAR_ERR_SHAPE,
                         "dataset: expected %s samples with 0..%d dims (a batch adds one), got %d",
                         which, OAR_MAX_DIMS - 1, ndim);
    int64_t n = 1;
    for (int k = 0; k < ndim; k++) {
        if (shape[k] < 0 || (shape[k] > 0 && n > INT64_MAX / 16 / shape[k]))
            return oar_error(OAR_ERR_SHAPE, "dataset: %s sample dim %d has an invalid size %lld",
                             which, k, (long long)shape[k]);
        out_shape[k] = shape[k];
        n *= shape[k];
    }
    *numel = n;
    *bytes = (size_t)n * oar_dtype_size(dt);
    return OAR_OK;
}

oar_status oar_dataset_init(oar_dataset *d, const oar_dataset_vt *vt, int64_t size,
                            oar_dtype in_dt, const int64_t *in_shape, int in_ndim,
                            oar_dtype tgt_dt, const int64_t *tgt_shape, int tgt_ndim) {
    d->vt = vt;
    d->size = size;
    d->in_dtype = in_dt;
    d->tgt_dtype = tgt_dt;
    d->in_ndim = in_ndim;
    d->tgt_ndim = tgt_ndim;
    oar_status st = layout("input", in_dt, in_shape, in_ndim, d->in_shape, &d->in_numel, &d->in_bytes);
    if (st == OAR_OK)
        st = layout("target", tgt_dt, tgt_shape, tgt_ndim, d->tgt_shape, &d->tgt_numel, &d->tgt_bytes);
    return st;
}

int64_t oar_dataset_size(const oar_dataset *d) { return d ? d->size : -1; }

oar_status oar_dataset_get(oar_dataset *d, int64_t i, oar_tensor **input, oar_tensor **target) {
    if (input) *input = NULL;
    if (target) *target = NULL;
    if (!d || !input || !target)
        return oar_error(OAR_ERR_INVALID_ARG, "dataset_get: expected a dataset and two output "
                                              "pointers, got NULL");
    if (i < 0 || i >= d->size)
        return oar_error(OAR_ERR_INVALID_ARG, "dataset_get: index %lld is out of range for a "
                         "dataset of %lld samples", (long long)i, (long long)d->size);
    oar_tensor *x = oar_tensor_new(d->in_dtype, d->in_shape, d->in_ndim);
    oar_tensor *y = x ? oar_tensor_new(d->tgt_dtype, d->tgt_shape, d->tgt_ndim) : NULL;
    if (!y) {
        oar_tensor_unref(x);
        return oar_last_status();
    }
    /* Outside a loader there is no (seed, epoch): random readers draw as for seed 0, epoch 0. */
    oar_status st = d->vt->copy(d, i, oar_data_epoch_keys(0, 0).sample, oar_tensor_ptr(x),
                                oar_tensor_ptr(y));
    if (st != OAR_OK) {
        oar_tensor_unref(x);
        oar_tensor_unref(y);
        return st;
    }
    *input = oar_track(x);
    *target = oar_track(y);
    return OAR_OK;
}

void oar_dataset_free(oar_dataset *d) {
    if (d) d->vt->destroy(d);
}
