/* ONNX scatter, gather-by-coordinates and index-built tensors (ScatterElements, ScatterND,
 * GatherND, OneHot, EyeLike, Trilu, Hardmax), composed of oar's indexing ops so that indices
 * may be computed from the model's inputs. Negative indices count from the end, as ONNX says. */
#include "io/onnx/onnx_ops.h"

#include <string.h>

/* idx as i64 with negative entries moved into [0, size). */
static oar_tensor *wrap_index(oar_tensor *idx, int64_t size) {
    idx = oar_cast(idx, OAR_I64);
    return idx ? oar_where(oar_lt_scalar(idx, 0.0), oar_add_scalar(idx, (double)size), idx) : NULL;
}

static int64_t prod(const int64_t *d, int from, int to) {
    int64_t p = 1;
    for (int i = from; i < to; i++) p *= d[i];
    return p;
}

/* The reduction attribute of the scatter operators as scatter_reduce's (NULL for none); false
 * (refused) for one ONNX does not define. */
static bool scatter_reduction(ox_ctx *c, const char **reduce) {
    char buf[16];
    const char *r = ox_attr_str(c, "reduction", "none", buf, sizeof buf);
    static const char *const onnx[] = {"none", "add", "mul", "max", "min"};
    static const char *const oar[] = {NULL, "sum", "prod", "amax", "amin"};
    for (int k = 0; k < 5; k++)
        if (r && !strcmp(r, onnx[k])) {
            *reduce = oar[k];
            return true;
        }
    ox_unsupported(c, "reduction '%s'; expected none, add, mul, max or min", r ? r : "?");
    return false;
}

/* data with updates combined by reduce with what index names along dim (one scatter_reduce), or
 * without reduce written there: pos = the position in updates of the last update reaching each
 * element (an amax scatter of their flat positions, -1 where none does), then that update where
 * there is one. A repeated index keeps its last update, as ONNX's reference and onnxruntime do. */
static oar_tensor *scatter(oar_tensor *data, int dim, oar_tensor *index, oar_tensor *updates, const char *reduce) {
    if (reduce) return oar_scatter_reduce(data, dim, index, updates, reduce, true);
    int64_t n = updates->numel, flat = data->numel;
    if (n == 0) return oar_clone(data);
    oar_tensor *at = oar_reshape(oar_arange(0.0, (double)n, 1.0, OAR_I64), updates->shape, updates->ndim);
    oar_tensor *pos = at ? oar_scatter_reduce(oar_full(data->shape, data->ndim, -1.0, OAR_I64), dim, index, at, "amax",
                                              false)
                         : NULL;
    if (!pos) return NULL;
    int64_t all = -1;
    oar_tensor *src = oar_index_select(oar_reshape(updates, &all, 1), 0, oar_reshape(oar_clip(pos, 0.0, (double)(n - 1)), &flat, 1));
    return src ? oar_where(oar_ge_scalar(pos, 0.0), oar_reshape(src, data->shape, data->ndim), data) : NULL;
}

/* Whether idx (and upd, of its shape) covers data's other dims with one index per position along
 * axis: idx the same along every other dim (stride 0, as an eager Expand of [k, 1, ...] gives:
 * torchvision's multi-scale RoIAlign export scatters its levels' rows so). */
static bool scatters_slices(const oar_tensor *data, int axis, const oar_tensor *idx) {
    if (idx->ndim != data->ndim || idx->shape[axis] == 0) return false;
    const int64_t *st = oar_strides(idx);
    for (int d = 0; d < idx->ndim; d++)
        if (d != axis && (idx->shape[d] != data->shape[d] || (st[d] != 0 && idx->shape[d] != 1))) return false;
    return true;
}

/* That scatter without reduction as whole slices: pos[r] = the last j with idx[j] = r (or -1),
 * then data's slice r replaced by upd's slice pos[r] where there is one (a where on a mask of
 * axis's length). Work on the k indices, not on every element; a repeated index keeps its last
 * update, as onnxruntime's sequential writes do. */
static oar_tensor *scatter_slices(oar_tensor *data, int axis, oar_tensor *idx, oar_tensor *upd) {
    int64_t k = idx->shape[axis], rows = data->shape[axis], mask[OAR_MAX_DIMS];
    oar_tensor *i = idx;
    for (int d = 0; d < idx->ndim && i; d++)
        if (d != axis) i = oar_slice(i, d, 0, 1, 1);
    i = i ? wrap_index(oar_reshape(i, &k, 1), rows) : NULL;
    oar_tensor *pos = i ? oar_scatter_reduce(oar_full(&rows, 1, -1.0, OAR_I64), 0, i, oar_arange(0.0, (double)k, 1.0, OAR_I64),
                                             "amax", false)
                        : NULL;
    if (!pos) return NULL;
    for (int d = 0; d < data->ndim; d++) mask[d] = d == axis ? rows : 1;
    oar_tensor *hit = oar_reshape(oar_ge_scalar(pos, 0.0), mask, data->ndim);
    oar_tensor *src = oar_index_select(upd, axis, oar_clip(pos, 0.0, (double)(k - 1)));
    return hit && src ? oar_where(hit, src, data) : NULL;
}

static oar_status scatter_elements(ox_ctx *c, bool has_reduction) {
    oar_tensor *data = OX_IN(c, 0), *idx = OX_IN(c, 1), *upd = OX_IN(c, 2);
    if (!data || !idx || !upd) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs data, indices and updates");
    const char *reduce = NULL;
    if (has_reduction && !scatter_reduction(c, &reduce)) return oar_last_status();
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), data->ndim, "axis");
    if (axis < 0) return oar_last_status();
    if (idx->ndim != upd->ndim || memcmp(idx->shape, upd->shape, sizeof(int64_t) * (size_t)idx->ndim))
        return ox_fail(c, OAR_ERR_SHAPE, "expected indices and updates of one shape");
    if (!reduce && scatters_slices(data, axis, idx)) return ox_set(c, 0, scatter_slices(data, axis, idx, upd));
    return ox_set(c, 0, scatter(data, axis, wrap_index(idx, data->shape[axis]), upd, reduce));
}
oar_status ox_ScatterElements(ox_ctx *c) { return scatter_elements(c, true); }
oar_status ox_Scatter(ox_ctx *c) { return scatter_elements(c, false); } /* opsets 9-10's name */

/* The row of data viewed as [prod(dims b..b+k), rest] that each coordinate tuple (the last dim
 * of idx, k long) names: an i64 tensor of idx's leading shape. */
static oar_tensor *linear_index(ox_ctx *c, const oar_tensor *data, oar_tensor *idx, int b) {
    int k = (int)idx->shape[idx->ndim - 1];
    if (k < 1 || b + k > data->ndim) {
        ox_fail(c, OAR_ERR_SHAPE, "expected the indices' last dim in [1, %d], got %d", data->ndim - b, k);
        return NULL;
    }
    int64_t size[OAR_MAX_DIMS], stride[OAR_MAX_DIMS], one = k;
    for (int j = 0; j < k; j++) size[j] = data->shape[b + j], stride[j] = prod(data->shape, b + j + 1, b + k);
    oar_tensor *sizes = oar_from_data(size, &one, 1, OAR_I64), *strides = oar_from_data(stride, &one, 1, OAR_I64);
    oar_tensor *i = oar_cast(idx, OAR_I64);
    if (!i || !sizes || !strides) return NULL;
    i = oar_where(oar_lt_scalar(i, 0.0), oar_add(i, sizes), i);
    int last = idx->ndim - 1;
    return i ? oar_sum(oar_mul(i, strides), &last, 1, false) : NULL;
}

oar_status ox_ScatterND(ox_ctx *c) {
    oar_tensor *data = OX_IN(c, 0), *idx = OX_IN(c, 1), *upd = OX_IN(c, 2);
    if (!data || !idx || !upd) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs data, indices and updates");
    const char *reduce = NULL;
    if (!scatter_reduction(c, &reduce)) return oar_last_status();
    if (idx->ndim < 1) return ox_fail(c, OAR_ERR_SHAPE, "expected indices of rank >= 1, got a scalar");
    oar_tensor *lin = linear_index(c, data, idx, 0);
    if (!lin) return oar_last_status();
    int k = (int)idx->shape[idx->ndim - 1];
    int64_t m = prod(idx->shape, 0, idx->ndim - 1), rows = prod(data->shape, 0, k);
    int64_t rest = prod(data->shape, k, data->ndim);
    if (upd->numel != m * rest)
        return ox_fail(c, OAR_ERR_SHAPE, "expected %lld updates (indices' leading dims x data's dims from %d), "
                       "got %lld", (long long)(m * rest), k, (long long)upd->numel);
    int64_t d2[2] = {rows, rest}, u2[2] = {m, rest}, l2[2] = {m, 1};
    oar_tensor *index = oar_expand(oar_reshape(lin, l2, 2), u2, 2), *rows2 = oar_reshape(data, d2, 2);
    oar_tensor *upd2 = oar_reshape(upd, u2, 2), *y = NULL;
    if (index && rows2 && upd2) /* whole rows: the slice scatter without reduction */
        y = !reduce && scatters_slices(rows2, 0, index) ? scatter_slices(rows2, 0, index, upd2)
                                                        : scatter(rows2, 0, index, upd2, reduce);
    return ox_set(c, 0, y ? oar_reshape(y, data->shape, data->ndim) : NULL);
}

oar_status ox_GatherND(ox_ctx *c) {
    oar_tensor *data = OX_IN(c, 0), *idx = OX_IN(c, 1);
    if (!data || !idx) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs data and indices");
    int b = (int)ox_attr_int(c, "batch_dims", 0);
    if (idx->ndim < 1 || b < 0 || b >= idx->ndim || b >= data->ndim)
        return ox_fail(c, OAR_ERR_SHAPE, "expected batch_dims in [0, %d), got %d",
                       idx->ndim < data->ndim ? idx->ndim : data->ndim, b);
    for (int d = 0; d < b; d++)
        if (idx->shape[d] != data->shape[d])
            return ox_fail(c, OAR_ERR_SHAPE, "expected indices and data to share their first %d dims", b);
    oar_tensor *lin = linear_index(c, data, idx, b);
    if (!lin) return oar_last_status();
    int k = (int)idx->shape[idx->ndim - 1];
    int64_t batches = prod(data->shape, 0, b), rows = prod(data->shape, b, b + k);
    int64_t rest = prod(data->shape, b + k, data->ndim);
    if (b > 0) { /* each batch's rows follow the previous batches' */
        int64_t bl[2] = {batches, -1}, ob[2] = {batches, 1};
        oar_tensor *offset = oar_reshape(oar_arange(0.0, (double)(batches * rows), (double)rows, OAR_I64), ob, 2);
        lin = offset ? oar_add(oar_reshape(lin, bl, 2), offset) : NULL;
    }
    int64_t d2[2] = {batches * rows, rest}, flat = -1;
    oar_tensor *g = lin ? oar_index_select(oar_reshape(data, d2, 2), 0, oar_reshape(lin, &flat, 1)) : NULL;
    int64_t shape[OAR_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < idx->ndim - 1; d++) shape[n++] = idx->shape[d];
    for (int d = b + k; d < data->ndim && n < OAR_MAX_DIMS; d++) shape[n++] = data->shape[d];
    return ox_set(c, 0, g ? oar_reshape(g, shape, n) : NULL);
}

/* [0, n) shaped to run along dim `axis` of a rank-`rank` tensor. */
static oar_tensor *arange_along(int64_t n, int axis, int rank) {
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < rank; d++) shape[d] = d == axis ? n : 1;
    return oar_reshape(oar_arange(0.0, (double)n, 1.0, OAR_I64), shape, rank);
}

oar_status ox_OneHot(ox_ctx *c) {
    oar_tensor *idx = OX_IN(c, 0), *values = OX_IN(c, 2);
    double depth;
    if (!idx || !values) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs indices, depth and values");
    if (!ox_known_scalar(c, 1, &depth)) return oar_last_status();
    if (depth < 1 || values->numel != 2)
        return ox_fail(c, OAR_ERR_SHAPE, "expected depth >= 1 and two values (off, on), got %g and %lld values", depth,
                       (long long)values->numel);
    int rank = idx->ndim + 1, axis = ox_axis(c, ox_attr_int(c, "axis", -1), rank, "axis");
    if (axis < 0) return oar_last_status();
    int64_t d = (int64_t)depth, one = 1;
    /* an index outside [-depth, depth) matches no class: a row of off values, as the reference */
    oar_tensor *hit = oar_eq(oar_unsqueeze(wrap_index(idx, d), axis), arange_along(d, axis, rank));
    oar_tensor *off = oar_reshape(oar_slice(values, 0, 0, 1, 1), &one, 0);
    oar_tensor *on = oar_reshape(oar_slice(values, 0, 1, 2, 1), &one, 0);
    return ox_set(c, 0, hit ? oar_where(hit, on, off) : NULL);
}

oar_status ox_EyeLike(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (x->ndim != 2) return ox_fail(c, OAR_ERR_SHAPE, "expected a 2-D input, got %d-D", x->ndim);
    oar_dtype dt = x->dtype;
    const Onnx__AttributeProto *a = ox_attr(c, "dtype");
    if (a && !ox_dtype_from_onnx((int32_t)a->i, &dt))
        return ox_unsupported(c, "dtype %s", ox_onnx_type_name((int32_t)a->i));
    int64_t k = ox_attr_int(c, "k", 0);
    oar_tensor *rows = arange_along(x->shape[0], 0, 2), *cols = arange_along(x->shape[1], 1, 2);
    oar_tensor *diag = rows && cols ? oar_eq(oar_add_scalar(rows, (double)k), cols) : NULL;
    return ox_set(c, 0, diag ? oar_cast(diag, dt) : NULL);
}

oar_status ox_Trilu(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    double k = 0.0;
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (OX_IN(c, 1) && !ox_known_scalar(c, 1, &k)) return oar_last_status();
    if (x->ndim < 2) return ox_fail(c, OAR_ERR_SHAPE, "expected an input of rank >= 2, got %d-D", x->ndim);
    return ox_set(c, 0, ox_attr_int(c, "upper", 1) ? oar_triu(x, (int64_t)k) : oar_tril(x, (int64_t)k));
}

/* 1 at the first maximum along axis, 0 elsewhere; before opset 13 over the dims from axis on,
 * flattened to one. */
oar_status ox_Hardmax(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int axis = ox_axis(c, ox_attr_int(c, "axis", c->opset < 13 ? 1 : -1), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    oar_tensor *v = x;
    if (c->opset < 13) {
        int64_t flat[2] = {prod(x->shape, 0, axis), prod(x->shape, axis, x->ndim)};
        v = oar_reshape(x, flat, 2), axis = 1;
    }
    oar_tensor *hit = v ? oar_eq(oar_argmax(v, axis, true), arange_along(v->shape[axis], axis, v->ndim)) : NULL;
    oar_tensor *y = hit ? oar_cast(hit, x->dtype) : NULL;
    return ox_set(c, 0, y ? oar_reshape(y, x->shape, x->ndim) : NULL);
}
