/* Small helpers shared by the op families: inference patterns, checks, broadcast reduction. */
#include "ops/op.h"

#include <string.h>

void oar_meta_from(oar_meta *m, const oar_tensor *t) {
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

oar_status oar_infer_same_as_input0(oar_tensor *const *in, int n_in, const oar_attr *attrs,
                                    oar_meta *out, int *n_out) {
    (void)n_in;
    (void)attrs;
    oar_meta_from(&out[0], in[0]);
    *n_out = 1;
    return OAR_OK;
}

oar_status oar_infer_broadcast(const char *opname, oar_tensor *const *in, int n_in,
                               oar_dtype out_dtype, oar_meta *out) {
    int nd = in[0]->ndim;
    int64_t shape[OAR_MAX_DIMS];
    memcpy(shape, in[0]->shape, sizeof(int64_t) * (size_t)nd);
    for (int i = 1; i < n_in; i++) {
        int64_t next[OAR_MAX_DIMS];
        int nn;
        if (!oar_broadcast_shapes(shape, nd, in[i]->shape, in[i]->ndim, next, &nn)) {
            char a[128], b[128];
            oar_format_shape(shape, nd, a, sizeof a);
            oar_format_shape(in[i]->shape, in[i]->ndim, b, sizeof b);
            return oar_error(OAR_ERR_SHAPE,
                             "%s: expected shapes that broadcast (equal, or 1, per trailing dim), "
                             "got %s and %s", opname, a, b);
        }
        nd = nn;
        memcpy(shape, next, sizeof(int64_t) * (size_t)nd);
    }
    out->dtype = out_dtype;
    out->ndim = nd;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)nd);
    return OAR_OK;
}

oar_status oar_check_same_dtype(const char *opname, oar_tensor *const *in, int n_in) {
    for (int i = 1; i < n_in; i++) {
        if (in[i]->dtype != in[0]->dtype)
            return oar_error(OAR_ERR_DTYPE,
                             "%s: expected inputs of one dtype, got %s (input 0) and %s (input %d); "
                             "convert one with oar_cast", opname, oar_dtype_name(in[0]->dtype),
                             oar_dtype_name(in[i]->dtype), i);
    }
    return OAR_OK;
}

/* The compute floats only: the low-bit floats (f8, f4) are storage types, floats by their traits
 * but without arithmetic kernels (docs/dtypes.md) */
oar_status oar_check_float(const char *opname, const oar_tensor *t, const char *what) {
    if (OAR_FLOAT_DTYPES & OAR_DTYPE_BIT(t->dtype)) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have a floating dtype (f32, f64, f16, bf16), "
                                    "got %s%s; convert it with oar_cast", opname, what, oar_dtype_name(t->dtype),
                     oar_dtype_is_lowbit(t->dtype) ? " (a storage-only low-bit dtype)" : "");
}

oar_status oar_dims_mask(const char *opname, const oar_attr *dims, int ndim, uint32_t *mask) {
    uint32_t m = 0;
    if (dims->n == 0) {
        *mask = ndim ? (1u << ndim) - 1 : 0;
        return OAR_OK;
    }
    for (int i = 0; i < dims->n; i++) {
        int d = oar_normalize_dim((int)dims->ints[i], ndim);
        if (d < 0 || (ndim == 0 && dims->ints[i] != 0 && dims->ints[i] != -1))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dims in [%d, %d], got %lld", opname,
                             -(ndim ? ndim : 1), (ndim ? ndim : 1) - 1, (long long)dims->ints[i]);
        if (ndim == 0) continue;
        if (m & (1u << d))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: dim %d appears twice in dims", opname, d);
        m |= 1u << d;
    }
    *mask = m;
    return OAR_OK;
}

oar_tensor *oar_sum_to_shape(oar_tensor *g, const int64_t *shape, int ndim) {
    if (!g) return NULL;
    if (g->ndim == ndim && memcmp(g->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0) return g;
    int dims[OAR_MAX_DIMS], n = 0;
    int lead = g->ndim - ndim;
    for (int d = 0; d < g->ndim; d++) {
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1)) dims[n++] = d;
    }
    oar_tensor *s = n ? oar_sum(g, dims, n, true) : g;
    return oar_reshape(s, shape, ndim);
}

int oar_dim_index(int64_t dim, int ndim) {
    if (dim < -OAR_MAX_DIMS - 1 || dim > OAR_MAX_DIMS) return -1; /* keeps the int conversion exact */
    return oar_normalize_dim((int)dim, ndim);
}

oar_status oar_dim_error(const char *opname, int64_t dim, int ndim) {
    int n = ndim ? ndim : 1;
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim in [%d, %d] for a %d-d input, got %lld", opname, -n,
                     n - 1, ndim, (long long)dim);
}
