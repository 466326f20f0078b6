/* View ops: reshape, permute, slice, expand, squeeze, unsqueeze, as_strided. They change only shape,
 * strides and offset; slice_backward is the (copying) gradient of slice. */
#include "ops/op.h"

#include <stdlib.h>
#include <string.h>

static oar_status shape_error(const char *op, const char *what, const oar_tensor *x) {
    char s[128];
    oar_format_shape(x->shape, x->ndim, s, sizeof s);
    return oar_error(OAR_ERR_SHAPE, "%s: %s, got input of shape %s", op, what, s);
}

/* ---- reshape */
/* Strides for viewing (shape, strides) as new_shape without copying, when possible: each
 * run of dims that is contiguous in memory must be re-split exactly by the new dims. */
static bool view_strides(const oar_tensor *x, const int64_t *ns, int nn, int64_t *nst) {
    if (x->numel == 0 || x->ndim == 0) {
        int64_t st = 1;
        for (int d = nn - 1; d >= 0; d--) {
            nst[d] = st;
            st *= ns[d] ? ns[d] : 1;
        }
        return true;
    }
    int vd = nn - 1;
    int64_t base = x->strides[x->ndim - 1], tnum = 1, vnum = 1;
    for (int td = x->ndim - 1; td >= 0; td--) {
        tnum *= x->shape[td];
        if (td == 0 || (x->shape[td - 1] != 1 && x->strides[td - 1] != tnum * base)) {
            while (vd >= 0 && (vnum < tnum || ns[vd] == 1)) {
                nst[vd] = vnum * base;
                vnum *= ns[vd];
                vd--;
            }
            if (vnum != tnum) return false;
            if (td > 0) {
                base = x->strides[td - 1];
                tnum = vnum = 1;
            }
        }
    }
    return vd == -1;
}

static oar_status reshape_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int nd = a[0].n, infer_at = -1;
    int64_t known = 1;
    if (nd > OAR_MAX_DIMS) return shape_error("reshape", "expected at most 8 dims", x);
    for (int d = 0; d < nd; d++) {
        int64_t s = a[0].ints[d];
        if (s == -1) {
            if (infer_at >= 0) return shape_error("reshape", "expected at most one -1 in the new shape", x);
            infer_at = d;
        } else if (s < 0) {
            return shape_error("reshape", "expected sizes >= 0 or -1 in the new shape", x);
        } else if (__builtin_mul_overflow(known, s, &known)) {
            return shape_error("reshape", "expected a new shape whose element count fits in 64 bits", x);
        }
        out->shape[d] = s;
    }
    if (infer_at >= 0) {
        if (known == 0 || x->numel % known != 0) {
            char s[128];
            oar_format_shape(x->shape, x->ndim, s, sizeof s);
            return oar_error(OAR_ERR_SHAPE, "reshape: cannot infer the -1 dim: %lld elements of shape %s "
                                            "do not divide into blocks of %lld", (long long)x->numel, s,
                             (long long)known);
        }
        out->shape[infer_at] = x->numel / known;
        known *= out->shape[infer_at];
    }
    if (known != x->numel) {
        char s[128], t[128];
        oar_format_shape(x->shape, x->ndim, s, sizeof s);
        oar_format_shape(a[0].ints, nd, t, sizeof t);
        return oar_error(OAR_ERR_SHAPE, "reshape: expected the new shape to hold %lld elements like "
                                        "the input's %s, got %s (%lld elements)", (long long)x->numel, s, t,
                         (long long)known);
    }
    out->ndim = nd;
    out->dtype = x->dtype;
    *n_out = 1;
    return OAR_OK;
}

static oar_status reshape_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)a; (void)n_out;
    if (!view_strides(in[0], out[0]->shape, out[0]->ndim, out[0]->strides))
        return shape_error("reshape", "this layout cannot be viewed with the new shape without a copy; "
                                      "call oar_reshape (which copies when needed) or oar_contiguous first", in[0]);
    return OAR_OK;
}

static oar_status reshape_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_reshape(g->gout[0], g->in[0]->shape, g->in[0]->ndim);
    return OAR_OK;
}

const oar_op_def oar_opdef_reshape = {
    .name = "reshape", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"shape", OAR_ATTR_INTS}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = reshape_infer, .view = reshape_view, .grad = reshape_grad,
};

/* ---- permute */
static oar_status permute_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    if (a[0].n != x->ndim) return shape_error("permute", "expected one entry in dims per input dim", x);
    uint32_t seen = 0;
    for (int d = 0; d < x->ndim; d++) {
        int s = oar_normalize_dim((int)a[0].ints[d], x->ndim);
        if (s < 0 || (seen & (1u << s)))
            return shape_error("permute", "expected dims to be a permutation of 0..ndim-1", x);
        seen |= 1u << s;
        out->shape[d] = x->shape[s];
    }
    out->ndim = x->ndim;
    out->dtype = x->dtype;
    *n_out = 1;
    return OAR_OK;
}

static oar_status permute_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)n_out;
    for (int d = 0; d < in[0]->ndim; d++)
        out[0]->strides[d] = in[0]->strides[oar_normalize_dim((int)a[0].ints[d], in[0]->ndim)];
    return OAR_OK;
}

static oar_status permute_grad(oar_grad_ctx *g) {
    int nd = g->in[0]->ndim, inv[OAR_MAX_DIMS];
    for (int d = 0; d < nd; d++) inv[oar_normalize_dim((int)g->attrs[0].ints[d], nd)] = d;
    g->gin[0] = oar_permute(g->gout[0], inv, nd);
    return OAR_OK;
}

const oar_op_def oar_opdef_permute = {
    .name = "permute", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"dims", OAR_ATTR_INTS}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = permute_infer, .view = permute_view, .grad = permute_grad,
};

/* ---- slice: Python-style clamping of start/end, positive step */
static void slice_bounds(int64_t size, int64_t *start, int64_t *end, int64_t step, int64_t *len) {
    int64_t s = *start, e = *end;
    if (s < 0) s += size;
    if (e < 0) e += size;
    s = s < 0 ? 0 : s > size ? size : s;
    e = e < s ? s : e > size ? size : e;
    *start = s;
    *end = e;
    *len = e == s ? 0 : (e - s - 1) / step + 1; /* no overflow for any step */
}

static oar_status slice_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim);
    if (d < 0 || x->ndim == 0)
        return oar_error(OAR_ERR_INVALID_ARG, "slice: expected dim in [%d, %d], got %lld", -x->ndim,
                         x->ndim - 1, (long long)a[0].i);
    if (a[3].i <= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "slice: expected step > 0, got %lld; use oar_flip to "
                                              "reverse", (long long)a[3].i);
    oar_meta_from(out, x);
    int64_t s = a[1].i, e = a[2].i, len;
    slice_bounds(x->shape[d], &s, &e, a[3].i, &len);
    out->shape[d] = len;
    *n_out = 1;
    return OAR_OK;
}

static oar_status slice_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim);
    int64_t s = a[1].i, e = a[2].i, len;
    slice_bounds(x->shape[d], &s, &e, a[3].i, &len);
    memcpy(out[0]->strides, x->strides, sizeof x->strides);
    out[0]->strides[d] = x->strides[d] * a[3].i;
    out[0]->offset = x->offset + (len ? s * x->strides[d] : 0);
    return OAR_OK;
}

static oar_status slice_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    oar_attr attrs[5] = {oar_attr_ints(x->shape, x->ndim), g->attrs[0], g->attrs[1], g->attrs[2], g->attrs[3]};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_slice_backward, in, 1, attrs);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_slice = {
    .name = "slice", .n_inputs = 1, .n_outputs = 1, .n_attrs = 4,
    .attrs = {{"dim", OAR_ATTR_INT}, {"start", OAR_ATTR_INT}, {"end", OAR_ATTR_INT}, {"step", OAR_ATTR_INT}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = slice_infer, .view = slice_view, .grad = slice_grad,
};

/* ---- as_strided(x; size, stride, storage_offset): torch's view of x's storage at any sizes and
 * nonnegative strides; storage_offset -1 keeps x's own. Its gradient (as torch's) adds each
 * element's gradient to the input element at its storage position, so it needs a contiguous
 * input and a view inside the input's elements. */
static oar_status as_strided_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    if (a[0].n != a[1].n)
        return shape_error("as_strided", "expected one stride per size (mismatch in length of sizes and strides)", x);
    int64_t off = a[2].i < 0 ? x->offset : a[2].i, last = off;
    for (int d = 0; d < a[0].n; d++) {
        if (a[0].ints[d] < 0 || a[1].ints[d] < 0)
            return shape_error("as_strided", "expected nonnegative sizes and strides", x);
        if (a[0].ints[d] == 0) last = -1;
        if (last >= 0) last += (a[0].ints[d] - 1) * a[1].ints[d];
        out->shape[d] = a[0].ints[d];
    }
    size_t es = oar_dtypes[x->dtype].size;
    if (x->storage && last >= 0 && (uint64_t)last >= x->storage->nbytes / es)
        return oar_error(OAR_ERR_SHAPE, "as_strided: expected the view inside the storage of %zu elements, but it "
                                        "reaches element %lld; check the sizes, strides and storage_offset",
                         x->storage->nbytes / es, (long long)last);
    out->ndim = a[0].n;
    out->dtype = x->dtype;
    *n_out = 1;
    return OAR_OK;
}

static oar_status as_strided_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out,
                                  int n_out) {
    (void)n_in; (void)n_out;
    for (int d = 0; d < a[1].n; d++) out[0]->strides[d] = a[1].ints[d];
    out[0]->offset = a[2].i < 0 ? in[0]->offset : a[2].i;
    return OAR_OK;
}

static oar_status as_strided_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0], *y = g->out[0];
    if (!x->contiguous)
        return oar_error(OAR_ERR_UNSUPPORTED, "as_strided: the gradient through a view of a non-contiguous input "
                                              "is not offered; call .contiguous() on the input first");
    int64_t *pos = malloc((size_t)(y->numel ? y->numel : 1) * sizeof *pos);
    if (!pos) return oar_error(OAR_ERR_OOM, "as_strided: out of memory for %lld positions", (long long)y->numel);
    int64_t off = (g->attrs[2].i < 0 ? x->offset : g->attrs[2].i) - x->offset;
    for (int64_t i = 0; i < y->numel; i++) {
        int64_t r = i, p = off;
        for (int d = y->ndim - 1; d >= 0; d--) {
            p += (r % y->shape[d]) * g->attrs[1].ints[d];
            r /= y->shape[d];
        }
        if (p < 0 || p >= x->numel) {
            free(pos);
            return oar_error(OAR_ERR_UNSUPPORTED, "as_strided: the gradient needs the view inside the input's "
                                                  "elements, but element %lld reads storage position %lld of %lld",
                             (long long)i, (long long)(p + x->offset), (long long)x->numel);
        }
        pos[i] = p;
    }
    int64_t n = y->numel, nx = x->numel;
    oar_tensor *idx = oar_to(oar_from_data(pos, &n, 1, OAR_I64), g->gout[0]->device);
    free(pos);
    oar_tensor *flat = oar_zeros(&nx, 1, g->gout[0]->dtype);
    flat = oar_to(flat, g->gout[0]->device);
    oar_tensor *sum = oar_scatter_add(flat, 0, idx, oar_reshape(g->gout[0], &n, 1));
    g->gin[0] = sum ? oar_reshape(sum, x->shape, x->ndim) : NULL;
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_as_strided = {
    .name = "as_strided", .n_inputs = 1, .n_outputs = 1, .n_attrs = 3,
    .attrs = {{"size", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"storage_offset", OAR_ATTR_INT, "-1"}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = as_strided_infer, .view = as_strided_view, .grad = as_strided_grad,
};

/* slice_backward(g; shape, dim, start, end, step): zeros of shape with g written at the slice. */
static oar_status slice_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    if (a[0].n < 0 || a[0].n > OAR_MAX_DIMS) return shape_error("slice_backward", "expected a shape of at most 8 dims", in[0]);
    for (int d = 0; d < a[0].n; d++)
        if (a[0].ints[d] < 0) return shape_error("slice_backward", "expected sizes >= 0 in the shape", in[0]);
    out->dtype = in[0]->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    oar_tensor probe = {.ndim = out->ndim, .dtype = out->dtype};
    memcpy(probe.shape, out->shape, sizeof probe.shape);
    oar_tensor *pin[1] = {&probe};
    oar_meta sm;
    int n;
    oar_status st = slice_infer(pin, 1, a + 1, &sm, &n);
    if (st != OAR_OK) return st;
    if (sm.ndim != in[0]->ndim || memcmp(sm.shape, in[0]->shape, sizeof(int64_t) * (size_t)sm.ndim))
        return shape_error("slice_backward", "expected the gradient to have the slice's shape", in[0]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status slice_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                     oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *y = out[0];
    /* fill and copy go through the device table: the GPU's kernel too */
    oar_status st = oar_tensor_fill(y, 0.0);
    if (st != OAR_OK || in[0]->numel == 0) return st;
    oar_tensor *window = oar_tensor_alias(y);
    if (!window) return OAR_ERR_OOM;
    oar_tensor *pin[1] = {y};
    oar_tensor *pout[1] = {window};
    slice_view(pin, 1, a + 1, pout, 1);
    memcpy(window->shape, in[0]->shape, sizeof window->shape);
    oar_tensor_refresh(window);
    st = oar_tensor_copy_strided(window, in[0]);
    oar_tensor_unref(window);
    return st;
}

static oar_status slice_backward_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_slice(g->gout[0], (int)g->attrs[1].i, g->attrs[2].i, g->attrs[3].i, g->attrs[4].i);
    return OAR_OK;
}

const oar_op_def oar_opdef_slice_backward = {
    .name = "slice_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"shape", OAR_ATTR_INTS}, {"dim", OAR_ATTR_INT}, {"start", OAR_ATTR_INT},
              {"end", OAR_ATTR_INT}, {"step", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = slice_backward_infer, .reference = slice_backward_ref, .grad = slice_backward_grad,
};

/* ---- expand: size-1 dims (and new leading dims) get stride 0 */
static oar_status expand_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int nd = a[0].n, lead = nd - x->ndim;
    if (nd > OAR_MAX_DIMS || lead < 0) return shape_error("expand", "expected at least as many dims as the input", x);
    for (int d = 0; d < nd; d++) {
        int64_t want = a[0].ints[d], have = d < lead ? 1 : x->shape[d - lead];
        if (want == -1) {
            if (d < lead) return shape_error("expand", "expected -1 only for existing dims", x);
            want = have;
        }
        if (want < 0 || (have != 1 && have != want)) {
            char s[128];
            oar_format_shape(a[0].ints, nd, s, sizeof s);
            char xs[128];
            oar_format_shape(x->shape, x->ndim, xs, sizeof xs);
            return oar_error(OAR_ERR_SHAPE, "expand: expected each input dim to be 1 or equal to the "
                                            "target, got input %s and target %s", xs, s);
        }
        out->shape[d] = want;
    }
    out->ndim = nd;
    out->dtype = x->dtype;
    *n_out = 1;
    return OAR_OK;
}

static oar_status expand_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)a; (void)n_out;
    const oar_tensor *x = in[0];
    int lead = out[0]->ndim - x->ndim;
    for (int d = 0; d < out[0]->ndim; d++)
        out[0]->strides[d] = d < lead || (x->shape[d - lead] == 1 && out[0]->shape[d] != 1) ? 0 : x->strides[d - lead];
    return OAR_OK;
}

static oar_status expand_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_sum_to_shape(g->gout[0], g->in[0]->shape, g->in[0]->ndim);
    return OAR_OK;
}

const oar_op_def oar_opdef_expand = {
    .name = "expand", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"shape", OAR_ATTR_INTS}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = expand_infer, .view = expand_view, .grad = expand_grad,
};

/* ---- squeeze / unsqueeze of one dim */
static oar_status squeeze_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim);
    if (d < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "squeeze: expected dim in [%d, %d], got %lld",
                         -(x->ndim ? x->ndim : 1), (x->ndim ? x->ndim : 1) - 1, (long long)a[0].i);
    oar_meta_from(out, x);
    if (x->ndim && x->shape[d] == 1) { /* like torch: squeezing a dim of size > 1 is a no-op */
        for (int k = d; k + 1 < x->ndim; k++) out->shape[k] = x->shape[k + 1];
        out->ndim--;
    }
    *n_out = 1;
    return OAR_OK;
}

static oar_status squeeze_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim);
    memcpy(out[0]->strides, x->strides, sizeof x->strides);
    if (out[0]->ndim < x->ndim)
        for (int k = d; k + 1 < x->ndim; k++) out[0]->strides[k] = x->strides[k + 1];
    return OAR_OK;
}

static oar_status unsqueeze_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim + 1);
    if (d < 0 || x->ndim == OAR_MAX_DIMS)
        return oar_error(OAR_ERR_INVALID_ARG, "unsqueeze: expected dim in [%d, %d] and fewer than %d dims, "
                                              "got dim %lld with %d dims", -(x->ndim + 1), x->ndim,
                         OAR_MAX_DIMS, (long long)a[0].i, x->ndim);
    out->dtype = x->dtype;
    out->ndim = x->ndim + 1;
    for (int k = 0, s = 0; k < out->ndim; k++) out->shape[k] = k == d ? 1 : x->shape[s++];
    *n_out = 1;
    return OAR_OK;
}

static oar_status unsqueeze_view(oar_tensor *const *in, int n_in, const oar_attr *a, oar_tensor *const *out, int n_out) {
    (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int d = oar_normalize_dim((int)a[0].i, x->ndim + 1);
    for (int k = 0, s = 0; k < out[0]->ndim; k++) {
        if (k == d) out[0]->strides[k] = s < x->ndim ? x->strides[s] * x->shape[s] : 1;
        else out[0]->strides[k] = x->strides[s++];
    }
    return OAR_OK;
}

static oar_status restore_shape_grad(oar_grad_ctx *g) {
    g->gin[0] = oar_reshape(g->gout[0], g->in[0]->shape, g->in[0]->ndim);
    return OAR_OK;
}

const oar_op_def oar_opdef_squeeze = {
    .name = "squeeze", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = squeeze_infer, .view = squeeze_view, .grad = restore_shape_grad,
};

const oar_op_def oar_opdef_unsqueeze = {
    .name = "unsqueeze", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_VIEW | OAR_OPF_STRIDED, .ref_dtypes = OAR_ALL_DTYPES,
    .infer = unsqueeze_infer, .view = unsqueeze_view, .grad = restore_shape_grad,
};

/* ---- public API */
oar_tensor *oar_reshape(oar_tensor *t, const int64_t *shape, int ndim) {
    OAR_CHECK_HANDLE("reshape", t, NULL);
    if (!t) return NULL;
    if (ndim > OAR_ATTR_MAX_INTS || ndim < 0 || (ndim && !shape)) {
        oar_error(OAR_ERR_INVALID_ARG, "reshape: expected 0..%d dims, got %d", OAR_MAX_DIMS, ndim);
        return NULL;
    }
    oar_attr a = oar_attr_ints(shape, ndim);
    oar_meta m;
    int n;
    oar_tensor *in[1] = {t};
    if (oar_op_infer(OAR_OP_reshape, in, 1, &a, &m, &n) != OAR_OK) return NULL;
    int64_t st[OAR_MAX_DIMS];
    if (!view_strides(t, m.shape, m.ndim, st)) {
        oar_tensor *c = oar_contiguous(t);
        oar_tensor *r = oar_reshape(c, shape, ndim);
        oar_release(c);
        return r;
    }
    return oar_op_call1(OAR_OP_reshape, in, 1, &a);
}

oar_tensor *oar_view(oar_tensor *t, const int64_t *shape, int ndim) {
    OAR_CHECK_HANDLE("view", t, NULL);
    if (!t) return NULL;
    if (ndim > OAR_ATTR_MAX_INTS || ndim < 0 || (ndim && !shape)) {
        oar_error(OAR_ERR_INVALID_ARG, "view: expected 0..%d dims, got %d", OAR_MAX_DIMS, ndim);
        return NULL;
    }
    oar_attr a = oar_attr_ints(shape, ndim);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_reshape, in, 1, &a);
}

oar_tensor *oar_flatten(oar_tensor *t, int start_dim, int end_dim) {
    OAR_CHECK_HANDLE("flatten", t, NULL);
    if (!t) return NULL;
    int nd = t->ndim ? t->ndim : 1;
    int s = oar_normalize_dim(start_dim, nd), e = oar_normalize_dim(end_dim, nd);
    if (s < 0 || e < 0 || s > e) {
        oar_error(OAR_ERR_INVALID_ARG, "flatten: expected start_dim <= end_dim within [%d, %d], got %d and %d",
                  -nd, nd - 1, start_dim, end_dim);
        return NULL;
    }
    if (t->ndim == 0) {
        int64_t one = 1;
        return oar_reshape(t, &one, 1);
    }
    int64_t shape[OAR_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < s; d++) shape[n++] = t->shape[d];
    int64_t m = 1;
    for (int d = s; d <= e; d++) m *= t->shape[d];
    shape[n++] = m;
    for (int d = e + 1; d < t->ndim; d++) shape[n++] = t->shape[d];
    return oar_reshape(t, shape, n);
}

oar_tensor *oar_permute(oar_tensor *t, const int *dims, int ndim) {
    if (!t) return NULL;
    if (ndim < 0 || ndim > OAR_MAX_DIMS || (ndim && !dims)) {
        oar_error(OAR_ERR_INVALID_ARG, "permute: expected one entry in dims per input dim, got %d", ndim);
        return NULL;
    }
    oar_attr a = oar_attr_dims(dims, ndim);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_permute, in, 1, &a);
}

oar_tensor *oar_transpose(oar_tensor *t, int dim0, int dim1) {
    OAR_CHECK_HANDLE("transpose", t, NULL);
    if (!t) return NULL;
    int nd = t->ndim, a = oar_normalize_dim(dim0, nd), b = oar_normalize_dim(dim1, nd);
    if (a < 0 || b < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "transpose: expected dims in [%d, %d], got %d and %d", -nd, nd - 1, dim0, dim1);
        return NULL;
    }
    int dims[OAR_MAX_DIMS];
    for (int d = 0; d < nd; d++) dims[d] = d;
    dims[a] = b;
    dims[b] = a;
    return oar_permute(t, dims, nd);
}

oar_tensor *oar_slice(oar_tensor *t, int dim, int64_t start, int64_t end, int64_t step) {
    oar_attr a[4] = {oar_attr_int(dim), oar_attr_int(start), oar_attr_int(end), oar_attr_int(step)};
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_slice, in, 1, a);
}

oar_tensor *oar_expand(oar_tensor *t, const int64_t *shape, int ndim) {
    if (ndim < 0 || ndim > OAR_MAX_DIMS || (ndim && !shape)) {
        oar_error(OAR_ERR_INVALID_ARG, "expand: expected 0..%d target dims, got %d", OAR_MAX_DIMS, ndim);
        return NULL;
    }
    oar_attr a = oar_attr_ints(shape, ndim);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_expand, in, 1, &a);
}

oar_tensor *oar_squeeze(oar_tensor *t, int dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_squeeze, in, 1, &a);
}

oar_tensor *oar_unsqueeze(oar_tensor *t, int dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_unsqueeze, in, 1, &a);
}

oar_tensor *oar_as_strided(oar_tensor *t, const int64_t *size, const int64_t *stride, int ndim, int64_t storage_offset) {
    if (ndim < 0 || ndim > OAR_MAX_DIMS || (ndim && (!size || !stride))) {
        oar_error(OAR_ERR_INVALID_ARG, "as_strided: expected 0..%d dims with their sizes and strides, got %d",
                  OAR_MAX_DIMS, ndim);
        return NULL;
    }
    oar_attr a[3] = {oar_attr_ints(size, ndim), oar_attr_ints(stride, ndim), oar_attr_int(storage_offset)};
    oar_tensor *in[1] = {t};
    return oar_op_call1(OAR_OP_as_strided, in, 1, a);
}
