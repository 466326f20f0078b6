/* In-memory datasets: sample i is row i of x and of y. Rows are copied straight from the
 * (contiguous) storage into the batch, whatever the dtype. */
#include "data/data.h"

#include <stdlib.h>
#include <string.h>

typedef struct tensors_dataset {
    oar_dataset base;
    oar_tensor *x, *y; /* contiguous references held by the dataset */
} tensors_dataset;

static oar_status tensors_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const tensors_dataset *s = (const tensors_dataset *)d;
    memcpy(input, oar_tensor_ptr(s->x) + (size_t)i * d->in_bytes, d->in_bytes);
    memcpy(target, oar_tensor_ptr(s->y) + (size_t)i * d->tgt_bytes, d->tgt_bytes);
    return OAR_OK;
}

static void tensors_destroy(oar_dataset *d) {
    tensors_dataset *s = (tensors_dataset *)d;
    oar_tensor_unref(s->x);
    oar_tensor_unref(s->y);
    free(s);
}

static const oar_dataset_vt tensors_vt = {tensors_copy, tensors_destroy};

static oar_status check_source(const char *name, const oar_tensor *t) {
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "dataset_tensors: %s is NULL", name);
    if (!t->storage)
        return oar_error(OAR_ERR_STATE, "dataset_tensors: %s is symbolic (being traced) and has no "
                         "data; pass a tensor with values", name);
    if (t->device != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "dataset_tensors: expected %s on the CPU; copy it to "
                         "the host first", name);
    if (t->ndim < 1)
        return oar_error(OAR_ERR_SHAPE, "dataset_tensors: expected %s with at least 1 dim (samples "
                         "along dim 0), got a scalar", name);
    return OAR_OK;
}

/* A reference to t's values in row-major order: t itself when contiguous, else a copy. */
static oar_tensor *hold(oar_tensor *t) {
    if (t->contiguous) {
        __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
        return t;
    }
    return oar_tensor_contiguous_copy(t);
}

oar_dataset *oar_dataset_tensors(oar_tensor *x, oar_tensor *y) {
    OAR_CHECK_HANDLE("dataset_tensors (x)", x, NULL);
    OAR_CHECK_HANDLE("dataset_tensors (y)", y, NULL);
    if (check_source("x", x) != OAR_OK || check_source("y", y) != OAR_OK) return NULL;
    if (x->shape[0] != y->shape[0]) {
        oar_error(OAR_ERR_SHAPE, "dataset_tensors: expected x.shape[0] == y.shape[0], got %lld != %lld",
                  (long long)x->shape[0], (long long)y->shape[0]);
        return NULL;
    }
    tensors_dataset *s = OAR_NEW(tensors_dataset);
    if (!s) return NULL;
    s->x = hold(x);
    s->y = s->x ? hold(y) : NULL;
    oar_status st = s->y ? OAR_OK : oar_last_status();
    if (st == OAR_OK)
        st = oar_dataset_init(&s->base, &tensors_vt, x->shape[0], x->dtype, x->shape + 1, x->ndim - 1,
                              y->dtype, y->shape + 1, y->ndim - 1);
    if (st != OAR_OK) {
        tensors_destroy(&s->base);
        return NULL;
    }
    return &s->base;
}
