/* Selection by index tensors, masks and position: index_select (with index_select_backward,
 * its adjoint), gather, scatter_add, scatter_reduce, masked_fill, tril and triu. Indices are i64 or i32; the
 * kernels check every index before using it, so a bad one is an error naming it, never a
 * wild memory access. As in torch, a 0-d tensor reads as shape [1] where dims are matched. */
#include "ops/op.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Size and stride of dim d, with a 0-d tensor read as shape [1]. */
static int64_t size_at(const oar_tensor *t, int d) { return (unsigned)d < (unsigned)t->ndim ? t->shape[d] : 1; }
static int64_t stride_at(const oar_tensor *t, int d) { return (unsigned)d < (unsigned)t->ndim ? t->strides[d] : 0; }
static int ndim1(const oar_tensor *t) { return t->ndim ? t->ndim : 1; }

static oar_status check_index(const char *op, const oar_tensor *idx) {
    if (idx->dtype == OAR_I64 || idx->dtype == OAR_I32) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected index of dtype i64 or i32, got %s; convert it with oar_cast", op,
                     oar_dtype_name(idx->dtype));
}

static oar_status range_error(const char *op, int64_t v, int d, int64_t size) {
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected indices in [0, %lld) for dim %d of size %lld, got %lld", op,
                     (long long)size, d, (long long)size, (long long)v);
}

/* dst += src for one element; integers wrap, bools become a logical or. */
static void add_into(const oar_dtype_traits *tr, char *dst, const char *src) {
    if (tr->is_float) tr->store(dst, tr->load(dst) + tr->load(src));
    else tr->store_i64(dst, (int64_t)((uint64_t)tr->load_i64(dst) + (uint64_t)tr->load_i64(src)));
}

/* t seen at shape (ndim dims) with its own strides, except stride 0 along dim d, where an index
 * supplies the position: one iterator then walks t, the index and the output together. */
static oar_tensor index_view(const oar_tensor *t, const int64_t *shape, int ndim, int d) {
    oar_tensor v = *t;
    v.ndim = ndim;
    for (int k = 0; k < ndim; k++) {
        v.shape[k] = shape[k];
        v.strides[k] = k == d ? 0 : stride_at(t, k);
    }
    return v;
}

/* ================================================================ index_select */

/* 1-d index (or 0-d, one index) picks positions along dim: out.shape[dim] = index.numel. */
static oar_status select_shape(const char *op, const int64_t *shape, int nd, const oar_tensor *idx, int64_t dim,
                               oar_meta *out) {
    oar_status st = check_index(op, idx);
    if (st != OAR_OK) return st;
    if (idx->ndim > 1) {
        char s[128];
        oar_format_shape(idx->shape, idx->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected a 1-d index, got shape %s; flatten it with oar_flatten", op, s);
    }
    int d = oar_dim_index(dim, nd);
    if (d < 0) return oar_dim_error(op, dim, nd);
    if (nd == 0 && idx->numel != 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected one index for a 0-d input, got %lld", op,
                         (long long)idx->numel);
    out->ndim = nd;
    memcpy(out->shape, shape, sizeof(int64_t) * (size_t)nd);
    if (nd) out->shape[d] = idx->numel;
    return OAR_OK;
}

static oar_status index_select_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    out->dtype = in[0]->dtype;
    *n_out = 1;
    return select_shape("index_select", in[0]->shape, in[0]->ndim, in[1], a[0].i, out);
}

/* Walks `walk` (the tensor shaped like the selection) with the full tensor and the index seen
 * at its shape; fn gets the full tensor's element for each walked element. */
typedef struct select_walk {
    oar_iter it;
    int64_t size, step; /* the full tensor's dim size and byte stride along dim */
    const oar_dtype_traits *ti;
} select_walk;

static void select_walk_init(select_walk *w, oar_tensor *walk, const oar_tensor *full, const oar_tensor *idx, int d,
                             oar_tensor *fv, oar_tensor *iv) {
    *fv = index_view(full, walk->shape, walk->ndim, d);
    *iv = *idx;
    iv->ndim = walk->ndim;
    for (int k = 0; k < walk->ndim; k++) {
        iv->shape[k] = k == d ? walk->shape[k] : 1;
        iv->strides[k] = k == d ? stride_at(idx, 0) : 0;
    }
    oar_tensor *ops[3] = {walk, fv, iv};
    oar_iter_init(&w->it, walk->shape, walk->ndim, ops, 3);
    w->size = size_at(full, d);
    w->step = stride_at(full, d) * (int64_t)oar_dtypes[full->dtype].size;
    w->ti = &oar_dtypes[idx->dtype];
}

static oar_status index_select_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int d = oar_dim_index(a[0].i, in[0]->ndim);
    size_t es = oar_dtypes[y->dtype].size;
    oar_tensor xv, iv;
    select_walk w;
    select_walk_init(&w, y, in[0], in[1], d, &xv, &iv);
    do {
        int64_t v = w.ti->load_i64(w.it.ptr[2]);
        if (v < 0 || v >= w.size) return range_error("index_select", v, d, w.size);
        memcpy(w.it.ptr[0], w.it.ptr[1] + v * w.step, es);
    } while (oar_iter_next(&w.it));
    return OAR_OK;
}

static oar_status index_select_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    oar_attr a[2] = {oar_attr_ints(x->shape, x->ndim), g->attrs[0]};
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_index_select_backward, in, 2, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_index_select = {
    .name = "index_select", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = index_select_infer, .reference = index_select_ref, .grad = index_select_grad,
};

/* index_select_backward(g, index; shape, dim): zeros of shape with each slice of g added at its
 * index (repeated indices accumulate) — the adjoint of index_select. */
static oar_status isb_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *g = in[0];
    if (g->dtype == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "index_select_backward: expected a numeric gradient, got bool");
    if (a[0].n > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "index_select_backward: expected a shape of at most %d dims, got %d",
                         OAR_MAX_DIMS, a[0].n);
    oar_meta sel;
    oar_status st = select_shape("index_select_backward", a[0].ints, a[0].n, in[1], a[1].i, &sel);
    if (st != OAR_OK) return st;
    if (sel.ndim != g->ndim || memcmp(sel.shape, g->shape, sizeof(int64_t) * (size_t)g->ndim)) {
        char want[128], got[128];
        oar_format_shape(sel.shape, sel.ndim, want, sizeof want);
        oar_format_shape(g->shape, g->ndim, got, sizeof got);
        return oar_error(OAR_ERR_SHAPE, "index_select_backward: expected the gradient to have the selection's "
                                        "shape %s, got %s", want, got);
    }
    out->dtype = g->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status isb_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *g = in[0], *y = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    if (y->numel) memset(oar_tensor_ptr(y), 0, (size_t)y->numel * tr->size);
    if (g->numel == 0) return OAR_OK;
    int d = oar_dim_index(a[1].i, y->ndim);
    oar_tensor yv, iv;
    select_walk w;
    select_walk_init(&w, g, y, in[1], d, &yv, &iv);
    do {
        int64_t v = w.ti->load_i64(w.it.ptr[2]);
        if (v < 0 || v >= w.size) return range_error("index_select_backward", v, d, w.size);
        add_into(tr, w.it.ptr[1] + v * w.step, w.it.ptr[0]);
    } while (oar_iter_next(&w.it));
    return OAR_OK;
}

/* Linear in g: its gradient selects again. */
static oar_status isb_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_index_select(g->gout[0], (int)g->attrs[1].i, g->in[1]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_index_select_backward = {
    .name = "index_select_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 2,
    .attrs = {{"shape", OAR_ATTR_INTS}, {"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_NUMERIC_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = isb_infer, .reference = isb_ref, .grad = isb_grad,
};

/* ================================================================ gather, scatter_add */

/* index must have x's number of dims and fit inside x in every dim but d ("input" below), and
 * inside src in every dim when there is one. */
static oar_status check_fits(const char *op, const oar_tensor *x, const oar_tensor *idx, const oar_tensor *src,
                             int d) {
    for (int k = 0; k < ndim1(x); k++) {
        if (src && size_at(idx, k) > size_at(src, k))
            return oar_error(OAR_ERR_SHAPE, "%s: expected index.shape[%d] <= src.shape[%d], got %lld > %lld", op, k,
                             k, (long long)size_at(idx, k), (long long)size_at(src, k));
        if (k != d && size_at(idx, k) > size_at(x, k))
            return oar_error(OAR_ERR_SHAPE, "%s: expected index.shape[%d] <= input.shape[%d] (only dim %d may be "
                                            "larger), got %lld > %lld", op, k, k, d, (long long)size_at(idx, k),
                             (long long)size_at(x, k));
    }
    return OAR_OK;
}

static oar_status gather_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0], *idx = in[1];
    oar_status st = check_index("gather", idx);
    if (st != OAR_OK) return st;
    if (ndim1(idx) != ndim1(x))
        return oar_error(OAR_ERR_SHAPE, "gather: expected index to have as many dims as the input (%d), got %d",
                         x->ndim, idx->ndim);
    int d = oar_dim_index(a[0].i, x->ndim);
    if (d < 0) return oar_dim_error("gather", a[0].i, x->ndim);
    if ((st = check_fits("gather", x, idx, NULL, d)) != OAR_OK) return st;
    oar_meta_from(out, idx);
    out->dtype = x->dtype;
    *n_out = 1;
    return OAR_OK;
}

/* out[p] = x[p with p[d] replaced by index[p]] */
static oar_status gather_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int d = oar_dim_index(a[0].i, x->ndim);
    int64_t size = size_at(x, d), step = stride_at(x, d) * (int64_t)oar_dtypes[x->dtype].size;
    size_t es = oar_dtypes[y->dtype].size;
    const oar_dtype_traits *ti = &oar_dtypes[in[1]->dtype];
    oar_tensor xv = index_view(x, y->shape, y->ndim, d);
    oar_tensor *ops[3] = {y, in[1], &xv};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 3);
    do {
        int64_t v = ti->load_i64(it.ptr[1]);
        if (v < 0 || v >= size) return range_error("gather", v, d, size);
        memcpy(it.ptr[0], it.ptr[2] + v * step, es);
    } while (oar_iter_next(&it));
    return OAR_OK;
}

static oar_status gather_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_scatter_add(oar_zeros_like(g->in[0]), (int)g->attrs[0].i, g->in[1], g->gout[0]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_gather = {
    .name = "gather", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = gather_infer, .reference = gather_ref, .grad = gather_grad,
};

static oar_status scatter_add_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0], *idx = in[1], *src = in[2];
    oar_status st = check_index("scatter_add", idx);
    if (st != OAR_OK) return st;
    if (src->dtype != x->dtype)
        return oar_error(OAR_ERR_DTYPE, "scatter_add: expected src to have the input's dtype %s, got %s; convert "
                                        "it with oar_cast", oar_dtype_name(x->dtype), oar_dtype_name(src->dtype));
    if (ndim1(idx) != ndim1(x) || ndim1(src) != ndim1(x))
        return oar_error(OAR_ERR_SHAPE, "scatter_add: expected index and src to have as many dims as the input "
                                        "(%d), got %d and %d", x->ndim, idx->ndim, src->ndim);
    int d = oar_dim_index(a[0].i, x->ndim);
    if (d < 0) return oar_dim_error("scatter_add", a[0].i, x->ndim);
    if ((st = check_fits("scatter_add", x, idx, src, d)) != OAR_OK) return st;
    oar_meta_from(out, x);
    *n_out = 1;
    return OAR_OK;
}

/* out = x; then out[p with p[d] replaced by index[p]] += src[p] for every p of index. */
static oar_status scatter_add_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0], *idx = in[1];
    oar_tensor_copy_strided(y, in[0]);
    if (idx->numel == 0) return OAR_OK;
    int d = oar_dim_index(a[0].i, y->ndim);
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype], *ti = &oar_dtypes[idx->dtype];
    int64_t size = size_at(y, d), step = stride_at(y, d) * (int64_t)tr->size;
    oar_tensor yv = index_view(y, idx->shape, idx->ndim, d);
    oar_tensor sv = index_view(in[2], idx->shape, idx->ndim, -1);
    oar_tensor *ops[3] = {idx, &sv, &yv};
    oar_iter it;
    oar_iter_init(&it, idx->shape, idx->ndim, ops, 3);
    do {
        int64_t v = ti->load_i64(it.ptr[0]);
        if (v < 0 || v >= size) return range_error("scatter_add", v, d, size);
        add_into(tr, it.ptr[2] + v * step, it.ptr[1]);
    } while (oar_iter_next(&it));
    return OAR_OK;
}

/* src's gradient is g gathered at index; src elements beyond index's extent were never
 * added, so they get zeros (torch rejects such shapes in backward; padding is the answer). */
static oar_tensor *src_grad(oar_tensor *gout, int d, oar_tensor *idx, const oar_tensor *src) {
    oar_tensor *s = oar_gather(gout, d, idx);
    int nd = ndim1(src);
    int64_t ishape[OAR_MAX_DIMS], pads[2 * OAR_MAX_DIMS];
    bool fits = true;
    for (int k = 0; k < nd; k++) {
        ishape[k] = size_at(idx, k);
        int64_t extra = size_at(src, k) - ishape[k];
        pads[2 * (nd - 1 - k)] = 0;
        pads[2 * (nd - 1 - k) + 1] = extra;
        fits &= extra == 0;
    }
    if (fits) return src->ndim == idx->ndim ? s : oar_reshape(s, src->shape, src->ndim);
    if (idx->ndim != nd) s = oar_reshape(s, ishape, nd);
    s = oar_pad(s, pads, 2 * nd, OAR_PAD_CONSTANT, 0.0);
    return src->ndim == nd ? s : oar_reshape(s, src->shape, src->ndim);
}

static oar_status scatter_add_grad(oar_grad_ctx *g) {
    if (g->needs[0]) g->gin[0] = g->gout[0];
    if (g->needs[2] && !(g->gin[2] = src_grad(g->gout[0], (int)g->attrs[0].i, g->in[1], g->in[2])))
        return oar_last_status();
    return OAR_OK;
}

const oar_op_def oar_opdef_scatter_add = {
    .name = "scatter_add", .n_inputs = 3, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_PROMOTE, .ref_dtypes = OAR_NUMERIC_DTYPES,
    .infer = scatter_add_infer, .reference = scatter_add_ref, .grad = scatter_add_grad,
};

/* ================================================================ scatter_reduce */

/* torch.scatter_reduce's reductions; include_self false: a slot that src reaches starts from its
 * first src element instead of the input's value. */
typedef enum { SR_SUM, SR_PROD, SR_MEAN, SR_AMAX, SR_AMIN, SR_COUNT } sr_kind;
static const char *const sr_names[SR_COUNT] = {"sum", "prod", "mean", "amax", "amin"};

static int sr_kind_of(const char *s) {
    for (int k = 0; k < SR_COUNT; k++)
        if (strcmp(s, sr_names[k]) == 0) return k;
    return -1;
}

static oar_status scatter_reduce_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                       int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0], *idx = in[1], *src = in[2];
    oar_status st = check_index("scatter_reduce", idx);
    if (st != OAR_OK) return st;
    if (sr_kind_of(a[1].s) < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "scatter_reduce: expected reduce to be one of sum, prod, mean, amax, "
                                              "amin, got '%s'", a[1].s);
    if (src->dtype != x->dtype || x->dtype == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "scatter_reduce: expected src of the input's dtype %s (numeric), got %s; "
                                        "convert it with oar_cast", oar_dtype_name(x->dtype), oar_dtype_name(src->dtype));
    bool same = ndim1(idx) == ndim1(src) && ndim1(idx) == ndim1(x);
    for (int k = 0; same && k < ndim1(idx); k++) same = size_at(idx, k) == size_at(src, k);
    if (!same) {
        char si[128], ss[128];
        oar_format_shape(idx->shape, idx->ndim, si, sizeof si);
        oar_format_shape(src->shape, src->ndim, ss, sizeof ss);
        return oar_error(OAR_ERR_SHAPE, "scatter_reduce: expected index and src of one shape with the input's %d "
                                        "dims, got %s and %s; narrow src to the index's shape", x->ndim, si, ss);
    }
    int d = oar_dim_index(a[0].i, x->ndim);
    if (d < 0) return oar_dim_error("scatter_reduce", a[0].i, x->ndim);
    if ((st = check_fits("scatter_reduce", x, idx, NULL, d)) != OAR_OK) return st;
    oar_meta_from(out, x);
    *n_out = 1;
    return OAR_OK;
}

/* NaN wins max and min, as torch's */
static double sr_combine_f(sr_kind k, double acc, double v) {
    switch (k) {
    case SR_PROD: return acc * v;
    case SR_AMAX: return (acc != acc || v != v) ? NAN : (v > acc ? v : acc);
    case SR_AMIN: return (acc != acc || v != v) ? NAN : (v < acc ? v : acc);
    default: return acc + v;
    }
}
static int64_t sr_combine_i(sr_kind k, int64_t acc, int64_t v) {
    switch (k) {
    case SR_PROD: return (int64_t)((uint64_t)acc * (uint64_t)v);
    case SR_AMAX: return v > acc ? v : acc;
    case SR_AMIN: return v < acc ? v : acc;
    default: return (int64_t)((uint64_t)acc + (uint64_t)v);
    }
}
static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* out = x; each slot index reaches combines its src elements (in index order) into it; mean
 * divides by the slot's count (floor division for integers, as torch). */
static oar_status scatter_reduce_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                     int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0], *idx = in[1];
    oar_tensor_copy_strided(y, in[0]);
    if (idx->numel == 0) return OAR_OK;
    sr_kind kind = (sr_kind)sr_kind_of(a[1].s);
    bool include_self = a[2].i != 0;
    int d = oar_dim_index(a[0].i, y->ndim);
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype], *ti = &oar_dtypes[idx->dtype];
    int64_t size = size_at(y, d), step = stride_at(y, d) * (int64_t)tr->size;
    int64_t *count = calloc((size_t)(y->numel ? y->numel : 1), sizeof *count); /* src elements per slot of the contiguous y */
    if (!count) return oar_error(OAR_ERR_OOM, "scatter_reduce: out of memory for %lld counters", (long long)y->numel);
    oar_tensor yv = index_view(y, idx->shape, idx->ndim, d);
    oar_tensor sv = index_view(in[2], idx->shape, idx->ndim, -1);
    oar_tensor *ops[3] = {idx, &sv, &yv};
    oar_iter it;
    oar_iter_init(&it, idx->shape, idx->ndim, ops, 3);
    char *base = oar_tensor_ptr(y);
    do {
        int64_t v = ti->load_i64(it.ptr[0]);
        if (v < 0 || v >= size) {
            free(count);
            return range_error("scatter_reduce", v, d, size);
        }
        char *dst = it.ptr[2] + v * step;
        int64_t slot = (dst - base) / (int64_t)tr->size;
        bool first = count[slot]++ == 0 && !include_self;
        if (tr->is_float) tr->store(dst, first ? tr->load(it.ptr[1]) : sr_combine_f(kind, tr->load(dst), tr->load(it.ptr[1])));
        else tr->store_i64(dst, first ? tr->load_i64(it.ptr[1])
                                      : sr_combine_i(kind, tr->load_i64(dst), tr->load_i64(it.ptr[1])));
    } while (oar_iter_next(&it));
    if (kind == SR_MEAN)
        for (int64_t k = 0; k < y->numel; k++) {
            if (!count[k]) continue;
            int64_t n = count[k] + include_self;
            char *p = base + k * (int64_t)tr->size;
            if (tr->is_float) tr->store(p, tr->load(p) / (double)n);
            else tr->store_i64(p, floor_div(tr->load_i64(p), n));
        }
    free(count);
    return OAR_OK;
}

static oar_tensor *sr_call(oar_tensor *x, int dim, oar_tensor *index, oar_tensor *src, const char *reduce,
                           bool include_self) {
    oar_attr a[3] = {oar_attr_int(dim), oar_attr_str(reduce), oar_attr_int(include_self)};
    oar_tensor *in[3] = {x, index, src};
    return oar_op_call1(OAR_OP_scatter_reduce, in, 3, a);
}

/* Gradients in public ops (so double backward works). hit: slots src reaches; a slot without
 * include_self gives its input no gradient. prod: the product of everything else in the slot,
 * with zeros handled by counting them (the division only where the slot has none). amax/amin:
 * the gradient is split evenly among the elements equal to the result, as torch. */
static oar_status scatter_reduce_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *idx = g->in[1], *src = g->in[2], *y = g->out[0], *go = g->gout[0];
    int d = (int)g->attrs[0].i;
    sr_kind kind = (sr_kind)sr_kind_of(g->attrs[1].s);
    bool inc = g->attrs[2].i != 0;
    oar_tensor *zeros = oar_zeros_like(x), *ones = oar_ones_like(x), *src_ones = oar_ones_like(src);
    oar_tensor *n_src = oar_scatter_add(zeros, d, idx, src_ones);
    oar_tensor *hit = oar_gt(n_src, zeros);
    /* 1 where the input takes part in its slot's result */
    oar_tensor *x_in = inc ? ones : oar_where(hit, zeros, ones);
    oar_tensor *gx = NULL, *gs = NULL;
    switch (kind) {
    case SR_SUM:
        gx = oar_mul(go, x_in);
        gs = oar_gather(go, d, idx);
        break;
    case SR_MEAN: {
        oar_tensor *per = oar_div(go, oar_add(n_src, x_in));
        gx = oar_mul(per, x_in);
        gs = oar_gather(per, d, idx);
        break;
    }
    case SR_AMAX:
    case SR_AMIN: {
        oar_tensor *x_at = oar_mul(oar_cast(oar_eq(x, y), x->dtype), x_in);
        oar_tensor *s_at = oar_cast(oar_eq(src, oar_gather(y, d, idx)), x->dtype);
        oar_tensor *n = oar_maximum(oar_scatter_add(x_at, d, idx, s_at), ones);
        oar_tensor *per = oar_div(go, n);
        gx = oar_mul(per, x_at);
        gs = oar_mul(oar_gather(per, d, idx), s_at);
        break;
    }
    default: { /* SR_PROD */
        gx = oar_mul(oar_mul(go, x_in), oar_where(hit, sr_call(ones, d, idx, src, "prod", true), ones));
        oar_tensor *s_zero = oar_eq(src, oar_zeros_like(src));
        oar_tensor *nonzero = oar_where(s_zero, src_ones, src);
        oar_tensor *n_zero = oar_scatter_add(zeros, d, idx, oar_cast(s_zero, x->dtype));
        oar_tensor *p_nonzero = sr_call(inc ? x : ones, d, idx, nonzero, "prod", true);
        oar_tensor *pz = oar_gather(p_nonzero, d, idx), *nz = oar_gather(n_zero, d, idx);
        oar_tensor *s_zeros = oar_zeros_like(src);
        oar_tensor *others = oar_where(s_zero, oar_where(oar_eq(nz, src_ones), pz, s_zeros),
                                       oar_where(oar_eq(nz, s_zeros), oar_div(pz, nonzero), s_zeros));
        gs = oar_mul(oar_gather(go, d, idx), others);
        break;
    }
    }
    if (g->needs[0]) g->gin[0] = gx;
    if (g->needs[2]) g->gin[2] = gs;
    return (g->needs[0] && !gx) || (g->needs[2] && !gs) ? oar_last_status() : OAR_OK;
}

const oar_op_def oar_opdef_scatter_reduce = {
    .name = "scatter_reduce", .n_inputs = 3, .n_outputs = 1, .n_attrs = 3,
    .attrs = {{"dim", OAR_ATTR_INT}, {"reduce", OAR_ATTR_STR}, {"include_self", OAR_ATTR_INT, "1"}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_PROMOTE, .ref_dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
    .infer = scatter_reduce_infer, .reference = scatter_reduce_ref, .grad = scatter_reduce_grad,
};

oar_tensor *oar_scatter_reduce(oar_tensor *x, int dim, oar_tensor *index, oar_tensor *src, const char *reduce,
                               bool include_self) {
    return sr_call(x, dim, index, src, reduce, include_self);
}

/* ================================================================ masked_fill */

/* Like torch's out-of-place masked_fill, x and mask broadcast together. */
static oar_status masked_fill_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    if (in[1]->dtype != OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "masked_fill: expected mask to be bool, got %s; build it with a comparison "
                                        "such as oar_gt", oar_dtype_name(in[1]->dtype));
    *n_out = 1;
    return oar_infer_broadcast("masked_fill", in, 2, in[0]->dtype, out);
}

static oar_status masked_fill_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    const oar_dtype_traits *tr = &oar_dtypes[y->dtype];
    char fill[16];
    tr->store(fill, a[0].f);
    oar_tensor *ops[3] = {y, in[0], in[1]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 3);
    do memcpy(it.ptr[0], *(const uint8_t *)it.ptr[2] ? fill : it.ptr[1], tr->size);
    while (oar_iter_next(&it));
    return OAR_OK;
}

static oar_status masked_fill_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0];
    oar_tensor *kept = oar_where(g->in[1], oar_scalar(0.0, g->gout[0]->dtype), g->gout[0]);
    g->gin[0] = oar_sum_to_shape(kept, x->shape, x->ndim);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_masked_fill = {
    .name = "masked_fill", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"value", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_ELEMENTWISE, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = masked_fill_infer, .reference = masked_fill_ref, .grad = masked_fill_grad,
};

/* ================================================================ tril, triu */

static oar_status tri_infer(const char *op, const oar_tensor *x, oar_meta *out, int *n_out) {
    if (x->ndim < 2) {
        char s[128];
        oar_format_shape(x->shape, x->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected a tensor with at least 2 dims (a matrix or a batch of them), "
                                        "got shape %s", op, s);
    }
    oar_meta_from(out, x);
    *n_out = 1;
    return OAR_OK;
}

/* Keeps element (i, j) of each matrix where j - i <= diagonal (tril) or >= diagonal (triu). */
static oar_status tri_ref(bool lower, oar_tensor *x, oar_tensor *y, int64_t diagonal) {
    if (y->numel == 0) return OAR_OK;
    size_t es = oar_dtypes[y->dtype].size;
    int r = y->ndim - 2, c = y->ndim - 1;
    oar_tensor *ops[2] = {y, x};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 2);
    do {
        int64_t off = it.idx[c] - it.idx[r];
        if (lower ? off <= diagonal : off >= diagonal) memcpy(it.ptr[0], it.ptr[1], es);
        else memset(it.ptr[0], 0, es);
    } while (oar_iter_next(&it));
    return OAR_OK;
}

#define TRI_OP(NAME, LOWER)                                                                                  \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,        \
                                   int *n_out) {                                                            \
        (void)n_in; (void)a;                                                                                \
        return tri_infer(#NAME, in[0], out, n_out);                                                         \
    }                                                                                                       \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,                       \
                                 oar_tensor *const *out, int n_out, const oar_attr *a) {                    \
        (void)ctx; (void)n_in; (void)n_out;                                                                 \
        return tri_ref(LOWER, in[0], out[0], a[0].i);                                                       \
    }                                                                                                       \
    static oar_status NAME##_grad(oar_grad_ctx *g) {                                                        \
        g->gin[0] = oar_##NAME(g->gout[0], g->attrs[0].i);                                                  \
        return g->gin[0] ? OAR_OK : oar_last_status();                                                      \
    }                                                                                                       \
    const oar_op_def oar_opdef_##NAME = {                                                                   \
        .name = #NAME, .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"diagonal", OAR_ATTR_INT}},  \
        .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_BASE_DTYPES,                                             \
        .infer = NAME##_infer, .reference = NAME##_ref, .grad = NAME##_grad,                                 \
    };                                                                                                      \
    oar_tensor *oar_##NAME(oar_tensor *x, int64_t diagonal) {                                               \
        oar_attr a = oar_attr_int(diagonal);                                                                \
        oar_tensor *in[1] = {x};                                                                            \
        return oar_op_call1(OAR_OP_##NAME, in, 1, &a);                                                      \
    }

TRI_OP(tril, true)
TRI_OP(triu, false)

/* ================================================================ public API */

static oar_tensor *with_dim(oar_op_id op, oar_tensor *const *in, int n, int dim) {
    oar_attr a = oar_attr_int(dim);
    return oar_op_call1(op, in, n, &a);
}

oar_tensor *oar_index_select(oar_tensor *x, int dim, oar_tensor *index) {
    oar_tensor *in[2] = {x, index};
    return with_dim(OAR_OP_index_select, in, 2, dim);
}

oar_tensor *oar_gather(oar_tensor *x, int dim, oar_tensor *index) {
    oar_tensor *in[2] = {x, index};
    return with_dim(OAR_OP_gather, in, 2, dim);
}

oar_tensor *oar_scatter_add(oar_tensor *x, int dim, oar_tensor *index, oar_tensor *src) {
    oar_tensor *in[3] = {x, index, src};
    return with_dim(OAR_OP_scatter_add, in, 3, dim);
}

oar_tensor *oar_masked_fill(oar_tensor *x, oar_tensor *mask, double value) {
    oar_attr a = oar_attr_float(value);
    oar_tensor *in[2] = {x, mask};
    return oar_op_call1(OAR_OP_masked_fill, in, 2, &a);
}
