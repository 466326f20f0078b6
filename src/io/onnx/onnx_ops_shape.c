/* ONNX shape, indexing and constant operators. Shapes, axes, pads and slice bounds given as
 * inputs must be known when the model is compiled (constants, or Shape arithmetic, which the
 * interpreter folds); a value computed from the graph's inputs' data is refused by name. */
#include "io/onnx/onnx_ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

oar_status ox_Identity(ox_ctx *c) {
    if (c->n_in > 0 && c->sin[0] && c->n_out > 0) { /* a sequence or optional (opset 14, 16) */
        c->sout[0] = c->sin[0];
        return OAR_OK;
    }
    return ox_set(c, 0, OX_IN(c, 0));
}

static oar_tensor *from_attr_tensor(ox_ctx *c, const Onnx__TensorProto *t) {
    char what[300];
    snprintf(what, sizeof what, "node '%.200s' (%s): its tensor attribute", c->node->p->name ? c->node->p->name : "",
             c->node->p->op_type);
    oar_tensor *x = ox_tensor_from_proto((Onnx__TensorProto *)t, NULL, what, false);
    return x ? oar_track(x) : NULL;
}

oar_status ox_Constant(ox_ctx *c) {
    const Onnx__AttributeProto *a;
    if ((a = ox_attr(c, "value")) && a->t) return ox_set(c, 0, from_attr_tensor(c, a->t));
    if ((a = ox_attr(c, "value_float")) && a->has_f) return ox_set(c, 0, oar_scalar(a->f, OAR_F32));
    if ((a = ox_attr(c, "value_int")) && a->has_i) return ox_set(c, 0, oar_scalar((double)a->i, OAR_I64));
    if ((a = ox_attr(c, "value_floats"))) {
        int64_t n = (int64_t)a->n_floats;
        return ox_set(c, 0, oar_from_data(a->floats, &n, 1, OAR_F32));
    }
    if ((a = ox_attr(c, "value_ints"))) {
        int64_t n = (int64_t)a->n_ints;
        return ox_set(c, 0, oar_from_data(a->ints, &n, 1, OAR_I64));
    }
    return ox_unsupported(c, "no value, value_float(s) or value_int(s) attribute (sparse and string constants are "
                             "not supported)");
}

oar_status ox_ConstantOfShape(ox_ctx *c) {
    int64_t shape[OAR_MAX_DIMS];
    int n = ox_known_ints(c, 0, shape, OAR_MAX_DIMS);
    if (n < 0) return oar_last_status();
    const Onnx__AttributeProto *a = ox_attr(c, "value");
    oar_tensor *v = a && a->t ? from_attr_tensor(c, a->t) : oar_scalar(0.0, OAR_F32);
    if (!v) return oar_last_status();
    if (v->numel != 1) return ox_fail(c, OAR_ERR_FORMAT, "expected a one-element value, got %lld", (long long)v->numel);
    double x;
    if (oar_item(v, &x) != OAR_OK) return oar_last_status();
    return ox_set(c, 0, oar_full(shape, n, x, v->dtype));
}

oar_status ox_Shape(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t start = ox_attr_int(c, "start", 0), end = ox_attr_int(c, "end", x->ndim);
    if (start < 0) start += x->ndim;
    if (end < 0) end += x->ndim;
    start = start < 0 ? 0 : start > x->ndim ? x->ndim : start;
    end = end < start ? start : end > x->ndim ? x->ndim : end;
    int64_t n = end - start;
    return ox_set(c, 0, oar_from_data(x->shape + start, &n, 1, OAR_I64));
}

oar_status ox_Size(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    return x ? ox_set(c, 0, oar_scalar((double)x->numel, OAR_I64)) : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
}

oar_status ox_Reshape(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t shape[OAR_MAX_DIMS];
    int n = ox_known_ints(c, 1, shape, OAR_MAX_DIMS);
    if (!x || n < 0) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (!ox_attr_int(c, "allowzero", 0))
        for (int d = 0; d < n; d++)
            if (shape[d] == 0) {
                if (d >= x->ndim) return ox_fail(c, OAR_ERR_SHAPE, "shape[%d] = 0 copies a dim the input lacks", d);
                shape[d] = x->shape[d]; /* 0 copies the input's dim */
            }
    return ox_set(c, 0, oar_reshape(x, shape, n));
}

oar_status ox_Flatten(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t axis = ox_attr_int(c, "axis", 1);
    if (axis < 0) axis += x->ndim;
    if (axis < 0 || axis > x->ndim) return ox_fail(c, OAR_ERR_INVALID_ARG, "axis out of range for rank %d", x->ndim);
    int64_t shape[2] = {1, 1};
    for (int d = 0; d < x->ndim; d++) shape[d >= axis] *= x->shape[d];
    return ox_set(c, 0, oar_reshape(x, shape, 2));
}

oar_status ox_Transpose(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t perm[OAR_MAX_DIMS];
    int n = ox_attr_ints(c, "perm", perm, OAR_MAX_DIMS);
    if (n < 0) return oar_last_status();
    int dims[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) dims[d] = n ? (int)perm[d] : x->ndim - 1 - d;
    if (n && n != x->ndim) return ox_fail(c, OAR_ERR_SHAPE, "perm has %d entries for a %d-D input", n, x->ndim);
    return ox_set(c, 0, oar_permute(x, dims, x->ndim));
}

/* Axes from the attribute (before opset 13) or input 1. */
static int read_axes(ox_ctx *c, int64_t *axes) {
    return c->opset < 13 ? ox_attr_ints(c, "axes", axes, OAR_MAX_DIMS) : ox_known_ints(c, 1, axes, OAR_MAX_DIMS);
}

oar_status ox_Squeeze(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t axes[OAR_MAX_DIMS];
    int n = read_axes(c, axes);
    if (!x || n < 0) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    bool drop[OAR_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int a = ox_axis(c, axes[i], x->ndim, "axis");
        if (a < 0) return oar_last_status();
        if (x->shape[a] != 1) return ox_fail(c, OAR_ERR_SHAPE, "dim %d has size %lld; only size-1 dims squeeze", a,
                                            (long long)x->shape[a]);
        drop[a] = true;
    }
    int64_t shape[OAR_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!(n ? drop[d] : x->shape[d] == 1)) shape[k++] = x->shape[d];
    return ox_set(c, 0, oar_reshape(x, shape, k));
}

oar_status ox_Unsqueeze(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t axes[OAR_MAX_DIMS];
    int n = read_axes(c, axes);
    if (!x || n < 0) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int rank = x->ndim + n;
    if (rank > OAR_MAX_DIMS) return ox_unsupported(c, "a result of %d dims; oar supports %d", rank, OAR_MAX_DIMS);
    bool add[OAR_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int a = ox_axis(c, axes[i], rank, "axis");
        if (a < 0) return oar_last_status();
        if (add[a]) return ox_fail(c, OAR_ERR_INVALID_ARG, "axis %d is listed twice", a);
        add[a] = true;
    }
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0, k = 0; d < rank; d++) shape[d] = add[d] ? 1 : x->shape[k++];
    return ox_set(c, 0, oar_reshape(x, shape, rank));
}

oar_status ox_Concat(ox_ctx *c) {
    oar_tensor *xs[OX_MAX_NODE_IO];
    int n = 0;
    for (int k = 0; k < c->n_in; k++)
        if (OX_IN(c, k)) xs[n++] = OX_IN(c, k);
    if (!n) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs");
    int axis = ox_axis(c, ox_attr_int(c, "axis", c->opset < 4 ? 1 : 0), xs[0]->ndim, "axis");
    if (axis < 0) return oar_last_status();
    if (n == 1) return ox_set(c, 0, oar_clone(xs[0]));
    while (n > 64) { /* oar_concat takes at most 64 (OAR_MAX_INPUTS): join groups first, the same bytes */
        int m = 0;
        for (int k = 0; k < n; k += 64) xs[m++] = n - k > 1 ? oar_concat(xs + k, n - k < 64 ? n - k : 64, axis) : xs[k];
        n = m;
    }
    return ox_set(c, 0, oar_concat(xs, n, axis));
}

oar_status ox_Split(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    int64_t sizes[OX_MAX_NODE_IO];
    int n = c->opset < 13 ? ox_attr_ints(c, "split", sizes, OX_MAX_NODE_IO) : ox_known_ints(c, 1, sizes, OX_MAX_NODE_IO);
    if (n < 0) return oar_last_status();
    int64_t size = x->shape[axis];
    if (n == 0) { /* equal parts: num_outputs (opset 18) or the number of outputs; the last may be smaller */
        int parts = (int)ox_attr_int(c, "num_outputs", c->n_out);
        if (parts < 1 || parts != c->n_out)
            return ox_fail(c, OAR_ERR_FORMAT, "num_outputs %d does not match the node's %d outputs", parts, c->n_out);
        int64_t each = (size + parts - 1) / parts;
        for (int k = 0; k < parts; k++) {
            int64_t s = k * each < size ? k * each : size;
            sizes[k] = s + each < size ? each : size - s;
        }
        n = parts;
    }
    if (n != c->n_out) return ox_fail(c, OAR_ERR_FORMAT, "split has %d sizes for %d outputs", n, c->n_out);
    int64_t start = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0 || start + sizes[k] > size)
            return ox_fail(c, OAR_ERR_SHAPE, "split sizes exceed dim %d (size %lld)", axis, (long long)size);
        oar_status st = ox_set(c, k, oar_slice(x, axis, start, start + sizes[k], 1));
        if (st != OAR_OK) return st;
        start += sizes[k];
    }
    if (start != size)
        return ox_fail(c, OAR_ERR_SHAPE, "split sizes sum to %lld, expected dim %d's size %lld", (long long)start, axis,
                       (long long)size);
    return OAR_OK;
}

/* x[start:end:step] along dim with ONNX's clamping; a negative step reads the flipped dim. */
static oar_tensor *slice_dim(oar_tensor *x, int dim, int64_t start, int64_t end, int64_t step) {
    int64_t n = x->shape[dim];
    if (start < 0) start += n;
    if (end < 0) end += n;
    if (step > 0) {
        start = start < 0 ? 0 : start > n ? n : start;
        end = end < 0 ? 0 : end > n ? n : end;
        if (end < start) end = start;
        return oar_slice(x, dim, start, end, step);
    }
    start = start < 0 ? -1 : start > n - 1 ? n - 1 : start;
    end = end < -1 ? -1 : end > n - 1 ? n - 1 : end;
    if (end > start) end = start;
    oar_tensor *f = oar_flip(x, &dim, 1);
    return f ? oar_slice(f, dim, n - 1 - start, n - 1 - end, -step) : NULL;
}

oar_status ox_Slice(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t starts[OAR_MAX_DIMS], ends[OAR_MAX_DIMS], axes[OAR_MAX_DIMS], steps[OAR_MAX_DIMS];
    int ns, ne, na, nst = 0;
    if (c->opset < 10) {
        ns = ox_attr_ints(c, "starts", starts, OAR_MAX_DIMS);
        ne = ox_attr_ints(c, "ends", ends, OAR_MAX_DIMS);
        na = ox_attr_ints(c, "axes", axes, OAR_MAX_DIMS);
    } else {
        ns = ox_known_ints(c, 1, starts, OAR_MAX_DIMS);
        ne = ox_known_ints(c, 2, ends, OAR_MAX_DIMS);
        na = ox_known_ints(c, 3, axes, OAR_MAX_DIMS);
        nst = ox_known_ints(c, 4, steps, OAR_MAX_DIMS);
    }
    if (ns < 0 || ne < 0 || na < 0 || nst < 0) return oar_last_status();
    if (ne != ns || (na && na != ns) || (nst && nst != ns))
        return ox_fail(c, OAR_ERR_FORMAT, "starts, ends, axes and steps differ in length (%d, %d, %d, %d)", ns, ne, na,
                       nst);
    oar_tensor *y = x;
    for (int i = 0; i < ns && y; i++) {
        int dim = ox_axis(c, na ? axes[i] : i, x->ndim, "axis");
        int64_t step = nst ? steps[i] : 1;
        if (dim < 0) return oar_last_status();
        if (step == 0) return ox_fail(c, OAR_ERR_INVALID_ARG, "step 0 on axis %d", dim);
        y = slice_dim(y, dim, starts[i], ends[i], step);
    }
    return ox_set(c, 0, y);
}

/* Indices with negatives counted from the end of a dim of size n. */
static oar_tensor *wrap_indices(oar_tensor *idx, int64_t n) {
    if (idx->dtype != OAR_I64) idx = oar_cast(idx, OAR_I64);
    return idx ? oar_where(oar_lt_scalar(idx, 0.0), oar_add_scalar(idx, (double)n), idx) : NULL;
}

oar_status ox_Gather(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *idx = OX_IN(c, 1);
    if (!x || !idx) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs data and indices");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    if (x->ndim - 1 + idx->ndim > OAR_MAX_DIMS) return ox_unsupported(c, "a result of more than %d dims", OAR_MAX_DIMS);
    int64_t flat = idx->numel, shape[OAR_MAX_DIMS];
    oar_tensor *i = wrap_indices(idx, x->shape[axis]);
    oar_tensor *y = i ? oar_index_select(x, axis, oar_reshape(i, &flat, 1)) : NULL;
    int n = 0;
    for (int d = 0; d < axis; d++) shape[n++] = x->shape[d];
    for (int d = 0; d < idx->ndim; d++) shape[n++] = idx->shape[d];
    for (int d = axis + 1; d < x->ndim; d++) shape[n++] = x->shape[d];
    return ox_set(c, 0, y ? oar_reshape(y, shape, n) : NULL);
}

oar_status ox_GatherElements(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *idx = OX_IN(c, 1);
    if (!x || !idx) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs data and indices");
    int axis = ox_axis(c, ox_attr_int(c, "axis", 0), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    oar_tensor *i = wrap_indices(idx, x->shape[axis]);
    return ox_set(c, 0, i ? oar_gather(x, axis, i) : NULL);
}

/* The broadcast of shapes a and b (right-aligned), or false. */
static bool broadcast_shape(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *n) {
    *n = na > nb ? na : nb;
    if (*n > OAR_MAX_DIMS) return false;
    for (int d = 0; d < *n; d++) {
        int64_t x = d < *n - na ? 1 : a[d - (*n - na)], y = d < *n - nb ? 1 : b[d - (*n - nb)];
        if (x != y && x != 1 && y != 1) return false;
        out[d] = x == 1 ? y : x;
    }
    return true;
}

oar_status ox_Expand(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t shape[OAR_MAX_DIMS], out[OAR_MAX_DIMS];
    int n = ox_known_ints(c, 1, shape, OAR_MAX_DIMS), k;
    if (!x || n < 0) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (!broadcast_shape(x->shape, x->ndim, shape, n, out, &k))
        return ox_fail(c, OAR_ERR_SHAPE, "the input does not broadcast to the requested shape");
    /* a compiled program gets its own buffer; an eager run (data-dependent sizes) keeps the
     * broadcast view, which readers take strided, and ScatterElements sees as one per slice */
    oar_tensor *y = oar_expand(x, out, k);
    return ox_set(c, 0, c->m->eager ? y : oar_contiguous(y));
}

oar_status ox_Tile(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t reps[OAR_MAX_DIMS];
    int n = ox_known_ints(c, 1, reps, OAR_MAX_DIMS);
    if (!x || n < 0) return x ? oar_last_status() : ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    if (n != x->ndim) return ox_fail(c, OAR_ERR_SHAPE, "repeats has %d values for a %d-D input", n, x->ndim);
    if (2 * x->ndim > OAR_MAX_DIMS) return ox_unsupported(c, "tiling a %d-D input (at most %d)", x->ndim, OAR_MAX_DIMS / 2);
    /* [d0, d1] -> [1, d0, 1, d1] expanded to [r0, d0, r1, d1] -> [r0 d0, r1 d1] */
    int64_t s1[OAR_MAX_DIMS], s2[OAR_MAX_DIMS], s3[OAR_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        s1[2 * d] = 1, s1[2 * d + 1] = x->shape[d];
        s2[2 * d] = reps[d], s2[2 * d + 1] = x->shape[d];
        s3[d] = reps[d] * x->shape[d];
    }
    oar_tensor *y = oar_expand(oar_reshape(x, s1, 2 * n), s2, 2 * n);
    return ox_set(c, 0, y ? oar_reshape(y, s3, n) : NULL);
}

oar_status ox_Pad(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    char buf[16];
    const char *mode = ox_attr_str(c, "mode", "constant", buf, sizeof buf);
    oar_pad_mode pm;
    if (!strcmp(mode, "constant")) pm = OAR_PAD_CONSTANT;
    else if (!strcmp(mode, "reflect")) pm = OAR_PAD_REFLECT;
    else if (!strcmp(mode, "edge")) pm = OAR_PAD_REPLICATE;
    else return ox_unsupported(c, "mode='%s'; supported: constant, reflect, edge", mode);
    int64_t pads[2 * OAR_MAX_DIMS], axes[OAR_MAX_DIMS];
    double value = 0;
    int np, na = 0;
    if (c->opset < 11) {
        np = ox_attr_ints(c, "pads", pads, 2 * OAR_MAX_DIMS);
        value = ox_attr_float(c, "value", 0.0);
    } else {
        np = ox_known_ints(c, 1, pads, 2 * OAR_MAX_DIMS);
        if (OX_IN(c, 2) && OX_IN(c, 2)->numel && !ox_known_scalar(c, 2, &value)) return oar_last_status();
        na = ox_known_ints(c, 3, axes, OAR_MAX_DIMS);
    }
    if (np < 0 || na < 0) return oar_last_status();
    int n = na ? na : x->ndim;
    if (np != 2 * n) return ox_fail(c, OAR_ERR_FORMAT, "expected %d pads, got %d", 2 * n, np);
    int64_t before[OAR_MAX_DIMS] = {0}, after[OAR_MAX_DIMS] = {0};
    for (int i = 0; i < n; i++) {
        int d = na ? ox_axis(c, axes[i], x->ndim, "axis") : i;
        if (d < 0) return oar_last_status();
        before[d] = pads[i], after[d] = pads[n + i];
    }
    oar_tensor *y = x;
    int64_t tp[2 * OAR_MAX_DIMS];
    int last = 0; /* oar_pad's pairs start from the last dim; negative pads crop */
    for (int d = x->ndim - 1, j = 0; d >= 0; d--, j++) {
        tp[2 * j] = before[d] > 0 ? before[d] : 0;
        tp[2 * j + 1] = after[d] > 0 ? after[d] : 0;
        if (before[d] || after[d]) last = j + 1;
        if (y && (before[d] < 0 || after[d] < 0))
            y = oar_slice(y, d, before[d] < 0 ? -before[d] : 0, y->shape[d] + (after[d] < 0 ? after[d] : 0), 1);
    }
    bool any = false;
    for (int j = 0; j < 2 * last; j++) any |= tp[j] != 0;
    return ox_set(c, 0, y && any ? oar_pad(y, tp, 2 * last, pm, value) : y ? oar_clone(y) : NULL);
}

oar_status ox_Range(ox_ctx *c) {
    double start, limit, delta;
    if (!ox_known_scalar(c, 0, &start) || !ox_known_scalar(c, 1, &limit) || !ox_known_scalar(c, 2, &delta))
        return oar_last_status();
    return ox_set(c, 0, oar_arange(start, limit, delta, OX_IN(c, 0)->dtype));
}

/* DepthToSpace / SpaceToDepth as reshape -> permute -> reshape. */
oar_status ox_DepthToSpace(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t b = ox_attr_int(c, "blocksize", 0);
    if (!x || x->ndim != 4 || b < 1 || x->shape[1] % (b * b))
        return ox_fail(c, OAR_ERR_SHAPE, "expected a 4-D input with channels divisible by blocksize^2");
    char buf[8];
    bool crd = !strcmp(ox_attr_str(c, "mode", "DCR", buf, sizeof buf), "CRD");
    int64_t N = x->shape[0], C = x->shape[1] / (b * b), H = x->shape[2], W = x->shape[3];
    int64_t dcr[6] = {N, b, b, C, H, W}, crd_s[6] = {N, C, b, b, H, W}, out[4] = {N, C, H * b, W * b};
    int p_dcr[6] = {0, 3, 4, 1, 5, 2}, p_crd[6] = {0, 1, 4, 2, 5, 3};
    oar_tensor *y = oar_permute(oar_reshape(x, crd ? crd_s : dcr, 6), crd ? p_crd : p_dcr, 6);
    return ox_set(c, 0, y ? oar_reshape(y, out, 4) : NULL);
}

oar_status ox_SpaceToDepth(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    int64_t b = ox_attr_int(c, "blocksize", 0);
    if (!x || x->ndim != 4 || b < 1 || x->shape[2] % b || x->shape[3] % b)
        return ox_fail(c, OAR_ERR_SHAPE, "expected a 4-D input with H and W divisible by blocksize");
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2] / b, W = x->shape[3] / b;
    int64_t s[6] = {N, C, H, b, W, b}, out[4] = {N, C * b * b, H, W};
    int p[6] = {0, 3, 5, 1, 2, 4};
    oar_tensor *y = oar_permute(oar_reshape(x, s, 6), p, 6);
    return ox_set(c, 0, y ? oar_reshape(y, out, 4) : NULL);
}
