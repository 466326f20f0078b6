/* Ops along one dim: argmax, argmin, cumsum and topk. cumsum has a reverse attribute (sums
 * from the end), which is its own gradient; topk's gradient is topk_backward (a scatter into
 * zeros), whose gradient is topk_gather, and back. Semantics follow PyTorch. */
#include "ops/reduce_plan.h"

#include <stdlib.h>

static oar_status reject_bool(const char *name, const oar_tensor *x) {
    if (x->dtype != OAR_BOOL) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected a numeric tensor, got bool; cast it with oar_cast first", name);
}

/* Elements along the plan's single inner dim: count and byte stride. */
static int64_t line_stride(const reduce_plan *p) { return p->n_inner ? p->inner_stride[0] : 0; }

/* ---- argmax / argmin: index of the first extreme; NaN counts as the extreme (torch) */
static oar_status arg_infer(const char *name, oar_tensor *const *in, const oar_attr *a, oar_meta *out, int *n_out) {
    const oar_tensor *x = in[0];
    oar_status st = reject_bool(name, x);
    int d;
    if (st != OAR_OK || (st = plan_dim_check(name, x, a[0].i, &d)) != OAR_OK) return st;
    if (x->ndim && x->shape[d] == 0) {
        char s[128];
        oar_format_shape(x->shape, x->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected dim %d to have non-zero size, got an input of shape %s; "
                                        "an empty dim has no index to return", name, d, s);
    }
    out->dtype = OAR_I64;
    out->ndim = 0;
    for (int k = 0; k < x->ndim; k++) {
        if (k != d) out->shape[out->ndim++] = x->shape[k];
        else if (a[1].i) out->shape[out->ndim++] = 1;
    }
    *n_out = 1;
    return OAR_OK;
}

static oar_status arg_ref(bool is_min, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0];
    int d;
    oar_status st = plan_dim_check(is_min ? "argmin" : "argmax", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    reduce_plan p;
    reduce_plan_make(x, dim_mask(d, x->ndim), &p);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    int64_t n = p.inner_numel, stride = line_stride(&p);
    int64_t *y = (int64_t *)oar_tensor_ptr(out[0]);
    const char *base = oar_tensor_ptr(x);
    for (int64_t o = 0; o < p.outer_numel; o++) {
        const char *xo = base + plan_outer_offset(&p, o);
        int64_t best_i = 0;
        if (tr->is_float) {
            double best = tr->load(xo);
            for (int64_t i = 1; i < n && best == best; i++) {
                double v = tr->load(xo + i * stride);
                if (v != v || (is_min ? v < best : v > best)) {
                    best = v;
                    best_i = i;
                }
            }
        } else if (oar_dtype_bits_u64(x->dtype)) { /* u64 compares unsigned (its load_i64 is the bits) */
            uint64_t best = *(const uint64_t *)xo;
            for (int64_t i = 1; i < n; i++) {
                uint64_t v = *(const uint64_t *)(xo + i * stride);
                if (is_min ? v < best : v > best) {
                    best = v;
                    best_i = i;
                }
            }
        } else {
            int64_t best = tr->load_i64(xo);
            for (int64_t i = 1; i < n; i++) {
                int64_t v = tr->load_i64(xo + i * stride);
                if (is_min ? v < best : v > best) {
                    best = v;
                    best_i = i;
                }
            }
        }
        y[o] = best_i;
    }
    return OAR_OK;
}

#define ARG_OP(NAME, IS_MIN)                                                                         \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, \
                                   int *n_out) {                                                     \
        (void)n_in;                                                                                  \
        return arg_infer(#NAME, in, a, out, n_out);                                                  \
    }                                                                                                \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,               \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {             \
        (void)ctx; (void)n_in; (void)n_out;                                                          \
        return arg_ref(IS_MIN, in, out, a);                                                          \
    }                                                                                                \
    const oar_op_def oar_opdef_##NAME = {                                                            \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = 2,                                  \
        .attrs = {{"dim", OAR_ATTR_INT}, {"keepdim", OAR_ATTR_INT}},                                 \
        .flags = OAR_OPF_STRIDED | OAR_OPF_NONDIFF,                                                  \
        .ref_dtypes = OAR_NUMERIC_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),                                     \
        .infer = NAME##_infer, .reference = NAME##_ref,                                              \
    };                                                                                               \
    oar_tensor *oar_##NAME(oar_tensor *x, int dim, bool keepdim) {                                   \
        oar_attr a[2] = {oar_attr_int(dim), oar_attr_int(keepdim)};                                  \
        oar_tensor *in[1] = {x};                                                                     \
        return oar_op_call1(OAR_OP_##NAME, in, 1, a);                                                \
    }

ARG_OP(argmax, false)
ARG_OP(argmin, true)

/* ---- cumsum(x; dim, reverse): integers and bool accumulate in int64 (torch) */
static oar_status cumsum_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    int d;
    oar_status st = plan_dim_check("cumsum", in[0], a[0].i, &d);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    if (!oar_dtypes[in[0]->dtype].is_float) out->dtype = OAR_I64;
    *n_out = 1;
    return OAR_OK;
}

static oar_status cumsum_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    int d;
    oar_status st = plan_dim_check("cumsum", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    reduce_plan px, py;
    reduce_plan_make(x, dim_mask(d, x->ndim), &px);
    reduce_plan_make(y, dim_mask(d, y->ndim), &py);
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype], *ty = &oar_dtypes[y->dtype];
    int64_t n = px.inner_numel, sx = line_stride(&px), sy = line_stride(&py);
    bool rev = a[1].i != 0;
    for (int64_t o = 0; o < px.outer_numel; o++) {
        const char *xo = oar_tensor_ptr(x) + plan_outer_offset(&px, o);
        char *yo = oar_tensor_ptr(y) + plan_outer_offset(&py, o);
        double acc = 0;
        uint64_t iacc = 0; /* wraps like int64 in torch */
        for (int64_t s = 0; s < n; s++) {
            int64_t i = rev ? n - 1 - s : s;
            if (ty->is_float) {
                acc += tx->load(xo + i * sx);
                ty->store(yo + i * sy, acc);
            } else {
                iacc += (uint64_t)tx->load_i64(xo + i * sx);
                ty->store_i64(yo + i * sy, (int64_t)iacc);
            }
        }
    }
    return OAR_OK;
}

static oar_tensor *cumsum_call(oar_tensor *x, int64_t dim, bool reverse) {
    oar_attr a[2] = {oar_attr_int(dim), oar_attr_int(reverse)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_cumsum, in, 1, a);
}

/* d/dx_i of sum_j g_j y_j is the sum of g over the positions that include x_i: the cumsum
 * of g in the other direction. */
static oar_status cumsum_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    g->gin[0] = cumsum_call(g->gout[0], g->attrs[0].i, g->attrs[1].i == 0);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_cumsum = {
    .name = "cumsum", .n_inputs = 1, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"dim", OAR_ATTR_INT}, {"reverse", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_BASE_DTYPES,
    .infer = cumsum_infer, .reference = cumsum_ref, .grad = cumsum_grad,
};

oar_tensor *oar_cumsum(oar_tensor *x, int dim) { return cumsum_call(x, dim, false); }

/* ---- topk(x; k, dim, largest, sorted) -> values, i64 indices */
static oar_status topk_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_status st = reject_bool("topk", x);
    int d;
    if (st != OAR_OK || (st = plan_dim_check("topk", x, a[1].i, &d)) != OAR_OK) return st;
    int64_t n = x->ndim ? x->shape[d] : 1, k = a[0].i;
    if (k < 0 || k > n)
        return oar_error(OAR_ERR_INVALID_ARG, "topk: expected k in [0, %lld] (the size of dim %d), got %lld",
                         (long long)n, d, (long long)k);
    oar_meta_from(&out[0], x);
    if (x->ndim) out[0].shape[d] = k; /* a 0-d input gives 0-d outputs, as in torch */
    out[1] = out[0];
    out[1].dtype = OAR_I64;
    *n_out = 2;
    return OAR_OK;
}

/* Sort keys of one row; NaN ranks above every number (torch). Integers compare exactly. */
typedef struct topk_keys {
    const double *f;
    const int64_t *i;
    bool largest, uns; /* uns: i holds u64 bits, compared as uint64_t */
} topk_keys;

static bool ranks_before(const topk_keys *k, int64_t a, int64_t b) {
    if (k->f) {
        double x = k->f[a], y = k->f[b];
        bool xn = x != x, yn = y != y;
        if (xn || yn) return k->largest ? xn && !yn : !xn && yn;
        return k->largest ? x > y : x < y;
    }
    if (k->uns) {
        uint64_t x = (uint64_t)k->i[a], y = (uint64_t)k->i[b];
        return k->largest ? x > y : x < y;
    }
    return k->largest ? k->i[a] > k->i[b] : k->i[a] < k->i[b];
}

/* Bottom-up merge sort of positions; stable, so ties keep the lowest index first. */
static void sort_positions(const topk_keys *k, int64_t *v, int64_t *tmp, int64_t n) {
    int64_t *src = v, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) dst[o++] = ranks_before(k, src[j], src[i]) ? src[j++] : src[i++];
            while (i < mid) dst[o++] = src[i++];
            while (j < hi) dst[o++] = src[j++];
        }
        int64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, sizeof(int64_t) * (size_t)n);
}

static oar_status topk_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                           int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d;
    oar_status st = plan_dim_check("topk", x, a[1].i, &d);
    if (st != OAR_OK) return st;
    uint32_t mask = dim_mask(d, x->ndim);
    reduce_plan px, pv, pi;
    reduce_plan_make(x, mask, &px);
    reduce_plan_make(out[0], mask, &pv);
    reduce_plan_make(out[1], mask, &pi);
    int64_t n = px.inner_numel, k = pv.inner_numel; /* k: 1 for 0-d outputs */
    if (px.outer_numel == 0 || k == 0) return OAR_OK;
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    size_t es = tr->size;
    /* positions, merge scratch, keys (doubles for floats, int64 for integers) */
    char *work = oar_malloc(sizeof(int64_t) * 3 * (size_t)n);
    if (!work) return OAR_ERR_OOM;
    int64_t *pos = (int64_t *)work, *tmp = pos + n;
    double *fkey = tr->is_float ? (double *)(work + sizeof(int64_t) * 2 * (size_t)n) : NULL;
    int64_t *ikey = tr->is_float ? NULL : tmp + n;
    topk_keys keys = {.f = fkey, .i = ikey, .largest = a[2].i != 0, .uns = oar_dtype_bits_u64(x->dtype)};
    int64_t sx = line_stride(&px), sv = line_stride(&pv), si = line_stride(&pi);
    for (int64_t o = 0; o < px.outer_numel; o++) {
        const char *xo = oar_tensor_ptr(x) + plan_outer_offset(&px, o);
        char *vo = oar_tensor_ptr(out[0]) + plan_outer_offset(&pv, o);
        char *io = oar_tensor_ptr(out[1]) + plan_outer_offset(&pi, o);
        for (int64_t i = 0; i < n; i++) {
            pos[i] = i;
            if (fkey) fkey[i] = tr->load(xo + i * sx);
            else ikey[i] = tr->load_i64(xo + i * sx);
        }
        sort_positions(&keys, pos, tmp, n);
        if (!a[3].i) { /* unsorted: the chosen elements in input order (torch leaves it open) */
            memset(tmp, 0, sizeof(int64_t) * (size_t)n);
            for (int64_t j = 0; j < k; j++) tmp[pos[j]] = 1;
            for (int64_t i = 0, j = 0; i < n; i++)
                if (tmp[i]) pos[j++] = i;
        }
        for (int64_t j = 0; j < k; j++) {
            memcpy(vo + j * sv, xo + pos[j] * sx, es);
            *(int64_t *)(io + j * si) = pos[j];
        }
    }
    free(work);
    return OAR_OK;
}

static oar_tensor *topk_backward_call(oar_tensor *g, oar_tensor *idx, const oar_tensor *like, int64_t dim) {
    oar_attr a[2] = {oar_attr_ints(like->shape, like->ndim), oar_attr_int(dim)};
    oar_tensor *in[2] = {g, idx};
    return oar_op_call1(OAR_OP_topk_backward, in, 2, a);
}

static oar_tensor *topk_gather_call(oar_tensor *x, oar_tensor *idx, int64_t dim) {
    oar_attr a[1] = {oar_attr_int(dim)};
    oar_tensor *in[2] = {x, idx};
    return oar_op_call1(OAR_OP_topk_gather, in, 2, a);
}

static oar_status topk_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    oar_tensor *idx = g->out[1];
    if (!idx) { /* integer outputs are not saved for rules; topk is deterministic, so recompute */
        oar_tensor *o[2];
        int n = 2;
        oar_status st = oar_op_call(OAR_OP_topk, g->in, 1, g->attrs, o, &n);
        if (st != OAR_OK) return st;
        oar_track(o[0]);
        idx = oar_track(o[1]);
    }
    g->gin[0] = topk_backward_call(g->gout[0], idx, g->in[0], g->attrs[1].i);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_topk = {
    .name = "topk", .n_inputs = 1, .n_outputs = 2, .n_attrs = 4,
    .attrs = {{"k", OAR_ATTR_INT}, {"dim", OAR_ATTR_INT}, {"largest", OAR_ATTR_INT}, {"sorted", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_NUMERIC_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = topk_infer, .reference = topk_ref, .grad = topk_grad,
};

oar_status oar_topk(oar_tensor *x, int64_t k, int dim, bool largest, bool sorted, oar_tensor **values,
                    oar_tensor **indices) {
    if (!values || !indices)
        return oar_error(OAR_ERR_INVALID_ARG, "topk: expected non-NULL values and indices pointers, got NULL");
    *values = *indices = NULL;
    oar_attr a[4] = {oar_attr_int(k), oar_attr_int(dim), oar_attr_int(largest), oar_attr_int(sorted)};
    oar_tensor *in[1] = {x}, *o[2];
    int n = 2;
    oar_status st = oar_op_call(OAR_OP_topk, in, 1, a, o, &n);
    if (st != OAR_OK) return st;
    *values = oar_track(o[0]);
    *indices = oar_track(o[1]);
    return OAR_OK;
}

/* ---- the topk_backward / topk_gather pair. Both take (tensor, i64 indices) where the
 * indices have the tensor's shape except along dim. */
static oar_status index_pair_check(const char *name, const oar_tensor *idx, const int64_t *shape, int ndim,
                                   int64_t dim, int *d_out) {
    oar_tensor probe = {.ndim = ndim};
    memcpy(probe.shape, shape, sizeof(int64_t) * (size_t)ndim);
    oar_status st = plan_dim_check(name, &probe, dim, d_out);
    if (st != OAR_OK) return st;
    if (idx->dtype != OAR_I64)
        return oar_error(OAR_ERR_DTYPE, "%s: expected i64 indices, got %s", name, oar_dtype_name(idx->dtype));
    bool ok = idx->ndim == ndim;
    for (int k = 0; ok && k < ndim; k++) ok = k == *d_out || idx->shape[k] == shape[k];
    if (!ok) {
        char a[128], b[128];
        oar_format_shape(shape, ndim, a, sizeof a);
        oar_format_shape(idx->shape, idx->ndim, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected indices of shape %s except along dim %d, got %s", name,
                         a, *d_out, b);
    }
    return OAR_OK;
}

static oar_status index_range_error(const char *name, int64_t v, int64_t n) {
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected indices in [0, %lld), got %lld", name, (long long)n,
                     (long long)v);
}

/* topk_backward(g, idx; shape, dim): zeros of shape with g added at idx along dim. */
static oar_status topk_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                      int *n_out) {
    (void)n_in;
    const oar_tensor *g = in[0];
    int d;
    if (a[0].n > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_INVALID_ARG, "topk_backward: expected at most %d dims in shape, got %d",
                         OAR_MAX_DIMS, a[0].n);
    oar_status st = oar_check_float("topk_backward", g, "the gradient");
    if (st != OAR_OK || (st = index_pair_check("topk_backward", in[1], a[0].ints, a[0].n, a[1].i, &d)) != OAR_OK)
        return st;
    if (g->ndim != in[1]->ndim || memcmp(g->shape, in[1]->shape, sizeof(int64_t) * (size_t)g->ndim)) {
        char s[128], t[128];
        oar_format_shape(g->shape, g->ndim, s, sizeof s);
        oar_format_shape(in[1]->shape, in[1]->ndim, t, sizeof t);
        return oar_error(OAR_ERR_SHAPE, "topk_backward: expected the gradient and the indices to share a "
                                        "shape, got %s and %s", s, t);
    }
    out->dtype = g->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status topk_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                    oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    memset(oar_tensor_ptr(y), 0, (size_t)y->numel * tr->size);
    int d;
    oar_status st = plan_dim_check("topk_backward", y, a[1].i, &d);
    if (st != OAR_OK) return st;
    uint32_t mask = dim_mask(d, y->ndim);
    reduce_plan py, pg, pi;
    reduce_plan_make(y, mask, &py);
    reduce_plan_make(in[0], mask, &pg);
    reduce_plan_make(in[1], mask, &pi);
    int64_t n = py.inner_numel, k = pg.inner_numel;
    int64_t sy = line_stride(&py), sg = line_stride(&pg), si = line_stride(&pi);
    for (int64_t o = 0; o < pg.outer_numel; o++) {
        char *yo = oar_tensor_ptr(y) + plan_outer_offset(&py, o);
        const char *go = oar_tensor_ptr(in[0]) + plan_outer_offset(&pg, o);
        const char *io = oar_tensor_ptr(in[1]) + plan_outer_offset(&pi, o);
        for (int64_t j = 0; j < k; j++) {
            int64_t v = *(const int64_t *)(io + j * si);
            if (v < 0 || v >= n) return index_range_error("topk_backward", v, n);
            tr->store(yo + v * sy, tr->load(yo + v * sy) + tr->load(go + j * sg));
        }
    }
    return OAR_OK;
}

static oar_status topk_backward_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    g->gin[0] = topk_gather_call(g->gout[0], g->in[1], g->attrs[1].i);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_topk_backward = {
    .name = "topk_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"shape", OAR_ATTR_INTS}, {"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = topk_backward_infer, .reference = topk_backward_ref, .grad = topk_backward_grad,
};

/* topk_gather(x, idx; dim): x's elements at idx along dim (shape of idx). */
static oar_status topk_gather_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                    int *n_out) {
    (void)n_in;
    int d;
    oar_status st = index_pair_check("topk_gather", in[1], in[0]->shape, in[0]->ndim, a[0].i, &d);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    out->dtype = in[0]->dtype;
    *n_out = 1;
    return OAR_OK;
}

static oar_status topk_gather_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d;
    oar_status st = plan_dim_check("topk_gather", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    uint32_t mask = dim_mask(d, x->ndim);
    reduce_plan px, py, pi;
    reduce_plan_make(x, mask, &px);
    reduce_plan_make(out[0], mask, &py);
    reduce_plan_make(in[1], mask, &pi);
    int64_t n = px.inner_numel, k = py.inner_numel;
    int64_t sx = line_stride(&px), sy = line_stride(&py), si = line_stride(&pi);
    size_t es = oar_dtypes[x->dtype].size;
    for (int64_t o = 0; o < py.outer_numel; o++) {
        const char *xo = oar_tensor_ptr(x) + plan_outer_offset(&px, o);
        char *yo = oar_tensor_ptr(out[0]) + plan_outer_offset(&py, o);
        const char *io = oar_tensor_ptr(in[1]) + plan_outer_offset(&pi, o);
        for (int64_t j = 0; j < k; j++) {
            int64_t v = *(const int64_t *)(io + j * si);
            if (v < 0 || v >= n) return index_range_error("topk_gather", v, n);
            memcpy(yo + j * sy, xo + v * sx, es);
        }
    }
    return OAR_OK;
}

static oar_status topk_gather_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    g->gin[0] = topk_backward_call(g->gout[0], g->in[1], g->in[0], g->attrs[0].i);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_topk_gather = {
    .name = "topk_gather", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = topk_gather_infer, .reference = topk_gather_ref, .grad = topk_gather_grad,
};
