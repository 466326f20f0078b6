/* Index plans shared by the reduction family (reduce.c, reduce_dim.c, scan.c): a tensor's dims are
 * split into kept (outer) and reduced (inner) index spaces, each walked with byte strides,
 * so the reference kernels read any layout. */
#ifndef OAR_REDUCE_PLAN_H
#define OAR_REDUCE_PLAN_H

#include "ops/op.h"

#include <string.h>

typedef struct reduce_plan {
    int n_outer, n_inner;
    int64_t outer_shape[OAR_MAX_DIMS], outer_stride[OAR_MAX_DIMS]; /* strides in bytes */
    int64_t inner_shape[OAR_MAX_DIMS], inner_stride[OAR_MAX_DIMS];
    int64_t outer_numel, inner_numel;
} reduce_plan;

/* Dims in mask go to the inner space, the others to the outer one (both in dim order). */
static inline void reduce_plan_make(const oar_tensor *t, uint32_t mask, reduce_plan *p) {
    memset(p, 0, sizeof *p);
    p->outer_numel = p->inner_numel = 1;
    int64_t es = (int64_t)oar_dtypes[t->dtype].size;
    for (int d = 0; d < t->ndim; d++) {
        if (mask & (1u << d)) {
            p->inner_shape[p->n_inner] = t->shape[d];
            p->inner_stride[p->n_inner++] = t->strides[d] * es;
            p->inner_numel *= t->shape[d];
        } else {
            p->outer_shape[p->n_outer] = t->shape[d];
            p->outer_stride[p->n_outer++] = t->strides[d] * es;
            p->outer_numel *= t->shape[d];
        }
    }
}

/* Byte offset of the i-th element (row-major order) of an index space. */
static inline int64_t space_offset(int n, const int64_t *shape, const int64_t *stride, int64_t i) {
    int64_t off = 0;
    for (int d = n - 1; d >= 0; d--) {
        off += (i % shape[d]) * stride[d];
        i /= shape[d];
    }
    return off;
}

static inline int64_t plan_outer_offset(const reduce_plan *p, int64_t o) {
    return space_offset(p->n_outer, p->outer_shape, p->outer_stride, o);
}

/* Walks the inner space in row-major order without divisions: call next() after each element. */
typedef struct space_walk {
    const reduce_plan *p;
    int64_t idx[OAR_MAX_DIMS];
    int64_t off; /* byte offset of the current element */
} space_walk;

static inline void space_walk_init(space_walk *w, const reduce_plan *p) {
    memset(w, 0, sizeof *w);
    w->p = p;
}

static inline void space_walk_next(space_walk *w) {
    const reduce_plan *p = w->p;
    for (int d = p->n_inner - 1; d >= 0; d--) {
        w->off += p->inner_stride[d];
        if (++w->idx[d] < p->inner_shape[d]) return;
        w->off -= p->inner_stride[d] * p->inner_shape[d];
        w->idx[d] = 0;
    }
}

/* Normalizes dim for x (a 0-d tensor accepts 0 and -1, like torch). */
static inline oar_status plan_dim_check(const char *name, const oar_tensor *x, int64_t dim, int *out) {
    int nd = x->ndim ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim in [%d, %d], got %lld", name, -nd, nd - 1,
                         (long long)dim);
    *out = x->ndim ? (int)(dim < 0 ? dim + nd : dim) : 0;
    return OAR_OK;
}

/* Mask of a single dim (none for a 0-d tensor, whose one element is its own "row"). */
static inline uint32_t dim_mask(int dim, int ndim) { return ndim ? 1u << dim : 0; }

#endif
