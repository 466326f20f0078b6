/* Helpers of the LAPACK ops (lapack_common.h). */
#ifdef OAR_HAVE_OPENBLAS
#include "ops/lapack_common.h"

#include <stdlib.h>

oar_status la_check_matrix(const char *op, const oar_tensor *t, const char *what, bool square) {
    if (t->dtype != OAR_F32 && t->dtype != OAR_F64)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s to be f32 or f64, got %s; cast with oar_cast", op, what,
                         oar_dtype_name(t->dtype));
    char s[128];
    oar_format_shape(t->shape, t->ndim, s, sizeof s);
    if (t->ndim < 2)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s to have matrices in its last two dims (..., m, n), got %s",
                         op, what, s);
    if (square && t->shape[t->ndim - 1] != t->shape[t->ndim - 2])
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s to be square matrices in the last two dims (..., n, n), "
                                        "got %s", op, what, s);
    if (t->shape[t->ndim - 1] > 46340 || t->shape[t->ndim - 2] > 46340)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s's matrix dims <= 46340 (LAPACK's int indexing), got %s",
                         op, what, s);
    return OAR_OK;
}

oar_status la_check_pair(const char *op, const oar_tensor *a, const oar_tensor *b, const char *what_b, bool rows) {
    char sa[128], sb[128];
    oar_format_shape(a->shape, a->ndim, sa, sizeof sa);
    oar_format_shape(b->shape, b->ndim, sb, sizeof sb);
    if (b->dtype != a->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have the matrix's dtype %s, got %s; cast one", op,
                         what_b, oar_dtype_name(a->dtype), oar_dtype_name(b->dtype));
    bool same = b->ndim == a->ndim;
    for (int i = 0; same && i < a->ndim - 2; i++) same = a->shape[i] == b->shape[i];
    if (!same)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s to have the batch dims of the matrix %s, got %s; broadcast "
                                        "them first (oar_expand)", op, what_b, sa, sb);
    if (rows && b->shape[b->ndim - 2] != a->shape[a->ndim - 2])
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.shape[-2] == A.shape[-2], got %lld != %lld (A is %s, %s is "
                                        "%s)", op, what_b, (long long)b->shape[b->ndim - 2],
                         (long long)a->shape[a->ndim - 2], sa, what_b, sb);
    return OAR_OK;
}

int64_t la_batch(const oar_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim - 2; i++) n *= t->shape[i];
    return n;
}

void la_load(const oar_tensor *t, int64_t b, double *m, int ld) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1], es = (int64_t)tr->size;
    const char *x = oar_tensor_ptr(t) + b * r * c * es;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) m[i + j * ld] = tr->load(x + (i * c + j) * es);
}

void la_store(oar_tensor *t, int64_t b, const double *m, int ld) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    int64_t r = t->shape[t->ndim - 2], c = t->shape[t->ndim - 1], es = (int64_t)tr->size;
    char *y = oar_tensor_ptr(t) + b * r * c * es;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) tr->store(y + (i * c + j) * es, m[i + j * ld]);
}

double *la_alloc(const char *op, int64_t n) {
    double *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    if (!p) oar_error(OAR_ERR_OOM, "%s: out of memory for LAPACK's %lld-element buffer", op, (long long)n);
    return p;
}

oar_status la_call(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor **out, int n) {
    int got = n;
    oar_status st = oar_op_call(op, in, n_in, a, out, &got);
    if (st != OAR_OK) return st;
    for (int i = 0; i < got; i++) oar_track(out[i]);
    return OAR_OK;
}

oar_status la_no_derivative(const char *torch_name) {
    return oar_error(OAR_ERR_UNSUPPORTED, "the derivative for '%s' is not implemented.", torch_name);
}

oar_tensor *la_mT(oar_tensor *x) { return oar_transpose(x, -1, -2); }
oar_tensor *la_eye_like(int64_t k, oar_dtype dt) { return oar_eye(k, k, dt); }
oar_tensor *la_diag_embed(oar_tensor *v) {
    return oar_mul(oar_unsqueeze(v, -1), la_eye_like(v->shape[v->ndim - 1], v->dtype));
}
#endif
