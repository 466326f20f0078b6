/* ONNX convolution, pooling, normalization and loss operators, translated to oar's ops. oar's
 * convolutions and pooling are 1-D to 3-D with symmetric padding: ONNX's auto_pad and
 * asymmetric pads become an explicit pad op first. Pools that oar's cannot express (average
 * pooling with dilations, pads wider than half the kernel with ceil_mode, in 3-D also asymmetric
 * pads) take the extreme or the sum over the kernel's strided slices. */
#include "io/onnx/onnx_ops.h"
#include "ops/op.h"

#include <math.h>
#include <string.h>

/* Spatial geometry of a conv or pool node over n spatial dims. */
typedef struct geom {
    int n;
    int64_t kernel[3], stride[3], dilation[3], pad_begin[3], pad_end[3];
} geom;

static oar_status read_geom(ox_ctx *c, const oar_tensor *x, const int64_t *kernel, geom *g) {
    g->n = x->ndim - 2;
    if (g->n < 1 || g->n > 3)
        return ox_unsupported(c, "a %d-D input (%d spatial dims); oar supports 1 to 3 spatial dims", x->ndim,
                              g->n < 0 ? 0 : g->n);
    int64_t s[6], d[6], p[6];
    int ns = ox_attr_ints(c, "strides", s, 6), nd = ox_attr_ints(c, "dilations", d, 6),
        np = ox_attr_ints(c, "pads", p, 6);
    if (ns < 0 || nd < 0 || np < 0) return oar_last_status();
    if ((ns && ns != g->n) || (nd && nd != g->n) || (np && np != 2 * g->n))
        return ox_fail(c, OAR_ERR_FORMAT, "expected strides and dilations of %d values and pads of %d, got %d, %d "
                                          "and %d", g->n, 2 * g->n, ns, nd, np);
    char buf[32];
    const char *auto_pad = ox_attr_str(c, "auto_pad", "NOTSET", buf, sizeof buf);
    for (int i = 0; i < g->n; i++) {
        g->kernel[i] = kernel[i];
        g->stride[i] = ns ? s[i] : 1;
        g->dilation[i] = nd ? d[i] : 1;
        g->pad_begin[i] = np ? p[i] : 0;
        g->pad_end[i] = np ? p[g->n + i] : 0;
        if (g->stride[i] < 1 || g->dilation[i] < 1 || g->kernel[i] < 1 || g->pad_begin[i] < 0 || g->pad_end[i] < 0)
            return ox_fail(c, OAR_ERR_INVALID_ARG, "expected kernel, strides and dilations >= 1 and pads >= 0");
        if (!strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER")) {
            int64_t in = x->shape[2 + i], out = (in + g->stride[i] - 1) / g->stride[i];
            int64_t total = (out - 1) * g->stride[i] + (g->kernel[i] - 1) * g->dilation[i] + 1 - in;
            if (total < 0) total = 0;
            g->pad_begin[i] = auto_pad[5] == 'U' ? total / 2 : total - total / 2;
            g->pad_end[i] = total - g->pad_begin[i];
        } else if (!strcmp(auto_pad, "VALID")) {
            g->pad_begin[i] = g->pad_end[i] = 0;
        } else if (strcmp(auto_pad, "NOTSET")) {
            return ox_unsupported(c, "auto_pad='%s'; supported: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad);
        }
    }
    return OAR_OK;
}

static bool symmetric(const geom *g) {
    for (int i = 0; i < g->n; i++)
        if (g->pad_begin[i] != g->pad_end[i]) return false;
    return true;
}

/* x padded explicitly by the geometry's pads (value v), which are then zero. */
static oar_tensor *pad_explicitly(oar_tensor *x, geom *g, double v) {
    int64_t pads[6];
    for (int i = 0; i < g->n; i++) { /* oar_pad's pairs start from the last dim */
        pads[2 * i] = g->pad_begin[g->n - 1 - i];
        pads[2 * i + 1] = g->pad_end[g->n - 1 - i];
        g->pad_begin[g->n - 1 - i] = g->pad_end[g->n - 1 - i] = 0;
    }
    return oar_pad(x, pads, 2 * g->n, OAR_PAD_CONSTANT, v);
}

/* 3-D: oar's conv3d op. */
static oar_tensor *conv3d(ox_ctx *c, oar_tensor *x, oar_tensor *w, oar_tensor *b, geom *g) {
    if (!symmetric(g) && !(x = pad_explicitly(x, g, 0.0))) return NULL;
    oar_attr a[4] = {oar_attr_ints(g->stride, 3), oar_attr_ints(g->pad_begin, 3), oar_attr_ints(g->dilation, 3),
                     oar_attr_int(ox_attr_int(c, "group", 1))};
    oar_tensor *in[3] = {x, w, b};
    return oar_op_call1(OAR_OP_conv3d, in, 3, a);
}

oar_tensor *ox_conv(ox_ctx *c, oar_tensor *x, oar_tensor *w, oar_tensor *b) {
    if (!x || !w) {
        ox_fail(c, OAR_ERR_FORMAT, "expected inputs X and W");
        return NULL;
    }
    if (w->ndim != x->ndim) {
        ox_fail(c, OAR_ERR_SHAPE, "expected W of rank %d, got %d", x->ndim, w->ndim);
        return NULL;
    }
    geom g;
    if (read_geom(c, x, w->shape + 2, &g) != OAR_OK) return NULL;
    if (g.n == 3) return conv3d(c, x, w, b, &g);
    if (!symmetric(&g) && !(x = pad_explicitly(x, &g, 0.0))) return NULL;
    oar_conv_opts o = {.groups = ox_attr_int(c, "group", 1)};
    for (int i = 0; i < g.n; i++) {
        o.stride[i] = g.stride[i];
        o.padding[i] = g.pad_begin[i];
        o.dilation[i] = g.dilation[i];
    }
    return g.n == 1 ? oar_conv1d(x, w, b, &o) : oar_conv2d(x, w, b, &o);
}

bool ox_conv2d_opts(ox_ctx *c, const oar_tensor *x, const oar_tensor *w, oar_conv_opts *o) {
    geom g;
    if (!x || !w || x->ndim != 4 || w->ndim != 4) return false;
    if (read_geom(c, x, w->shape + 2, &g) != OAR_OK || !symmetric(&g)) return false; /* ox_conv's path reports it */
    *o = (oar_conv_opts){.groups = ox_attr_int(c, "group", 1)};
    for (int i = 0; i < 2; i++) {
        o->stride[i] = g.stride[i];
        o->padding[i] = g.pad_begin[i];
        o->dilation[i] = g.dilation[i];
    }
    return true;
}

oar_status ox_Conv(ox_ctx *c) {
    oar_tensor *y = NULL;
    if (ox_qdq_conv(c, &y)) return ox_set(c, 0, y);
    return ox_set(c, 0, ox_conv(c, OX_IN(c, 0), OX_IN(c, 1), OX_IN(c, 2)));
}

/* 3-D: oar's conv_transpose3d op, uncropped (no padding): [N, M, Dfull, Hfull, Wfull]. */
static oar_tensor *conv_transpose3d(oar_tensor *x, oar_tensor *w, const int64_t *s, const int64_t *d, int64_t groups) {
    int64_t zero[3] = {0, 0, 0};
    oar_attr a[5] = {oar_attr_ints(s, 3), oar_attr_ints(zero, 3), oar_attr_ints(zero, 3), oar_attr_ints(d, 3),
                     oar_attr_int(groups)};
    oar_tensor *in[3] = {x, w, NULL};
    return oar_op_call1(OAR_OP_conv_transpose3d, in, 3, a);
}

oar_status ox_ConvTranspose(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *w = OX_IN(c, 1), *b = OX_IN(c, 2);
    if (!x || !w) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X and W");
    if (w->ndim != x->ndim) return ox_fail(c, OAR_ERR_SHAPE, "expected W of rank %d, got %d", x->ndim, w->ndim);
    bool one_d = x->ndim == 3;
    if (x->ndim < 3 || x->ndim > 5)
        return ox_unsupported(c, "a %d-D input; oar supports 1 to 3 spatial dims", x->ndim);
    int n = x->ndim - 2;
    int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, p[6] = {0}, op[3] = {0}, os[3];
    int ns = ox_attr_ints(c, "strides", s, 3), nd = ox_attr_ints(c, "dilations", d, 3), np = ox_attr_ints(c, "pads", p, 6),
        nop = ox_attr_ints(c, "output_padding", op, 3), nos = ox_attr_ints(c, "output_shape", os, 3);
    if (ns < 0 || nd < 0 || np < 0 || nop < 0 || nos < 0) return oar_last_status();
    if ((ns && ns != n) || (nd && nd != n) || (np && np != 2 * n) || (nop && nop != n) || (nos && nos != n))
        return ox_fail(c, OAR_ERR_FORMAT, "expected strides, dilations, output_padding, output_shape of %d values "
                                          "and pads of %d", n, 2 * n);
    for (int i = 0; i < n; i++)
        if (s[i] < 1 || d[i] < 1) return ox_fail(c, OAR_ERR_INVALID_ARG, "expected strides and dilations >= 1");
    char buf[32];
    const char *auto_pad = ox_attr_str(c, "auto_pad", "NOTSET", buf, sizeof buf);
    bool same = !strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER");
    if (!same && strcmp(auto_pad, "NOTSET") && strcmp(auto_pad, "VALID"))
        return ox_unsupported(c, "auto_pad='%s'; supported: NOTSET, SAME_UPPER, SAME_LOWER, VALID", auto_pad);
    int64_t begin[3], end[3], full[3];
    for (int i = 0; i < n; i++) {
        int64_t in = x->shape[2 + i], k = w->shape[2 + i];
        full[i] = (in - 1) * s[i] + (k - 1) * d[i] + 1;
        begin[i] = p[i];
        end[i] = full[i] - p[n + i] + op[i]; /* output_padding adds at the end */
        if (nos || same) {
            int64_t want = nos ? os[i] : in * s[i];
            int64_t total = full[i] + op[i] - want;
            if (total < 0) total = 0;
            begin[i] = !strcmp(auto_pad, "SAME_UPPER") ? total / 2 : total - total / 2;
            end[i] = begin[i] + want;
        }
    }
    if (one_d) { /* as 2-D with a height of 1 */
        x = oar_unsqueeze(x, 2);
        w = oar_unsqueeze(w, 2);
    }
    oar_conv_opts o = {.groups = ox_attr_int(c, "group", 1)};
    for (int i = 0; i < n && i < 2; i++) { /* 1-D: the width */
        int j = one_d ? 1 : i;
        o.stride[j] = s[i];
        o.dilation[j] = d[i];
    }
    oar_tensor *y = !x || !w ? NULL : n == 3 ? conv_transpose3d(x, w, s, d, o.groups)
                                              : oar_conv_transpose2d(x, w, NULL, &o);
    for (int i = 0; i < n && y; i++) { /* crop (or zero-extend) the full result to [begin, end) */
        int dim = one_d ? 3 : 2 + i;
        if (end[i] > full[i]) {
            int64_t pads[6] = {0};
            pads[2 * (y->ndim - 1 - dim) + 1] = end[i] - full[i];
            y = oar_pad(y, pads, 2 * (y->ndim - 2), OAR_PAD_CONSTANT, 0.0);
        }
        if (y && (begin[i] || end[i] != y->shape[dim])) y = oar_slice(y, dim, begin[i], end[i], 1);
    }
    if (y && one_d) y = oar_squeeze(y, 2);
    if (y && b) {
        int64_t bs[5] = {1, b->numel, 1, 1, 1};
        y = oar_add(y, oar_reshape(b, bs, y->ndim));
    }
    return ox_set(c, 0, y);
}

/* Pooling over n spatial dims by strided slices: the windows' extreme (max) or sum, divided by
 * the count of what the window may count (average; count_include_pad decides whether the pads
 * do, never the extension ceil_mode adds). Used for average pooling with dilations and for the
 * 3-D pools pool3d_fits declines. */
static oar_tensor *pool_by_slices(ox_ctx *c, oar_tensor *x, const geom *g, bool max, bool include_pad, bool ceil_mode) {
    int n = g->n;
    int64_t out[3], extra[3], pads[6] = {0}, mask_pads[6] = {0}, ones_shape[OAR_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int64_t in = x->shape[2 + i], L = in + g->pad_begin[i] + g->pad_end[i];
        int64_t span = (g->kernel[i] - 1) * g->dilation[i] + 1, room = L - span;
        if (room < 0) {
            ox_fail(c, OAR_ERR_SHAPE, "the window (span %lld) exceeds the padded input (%lld) in spatial dim %d",
                    (long long)span, (long long)L, i);
            return NULL;
        }
        out[i] = (ceil_mode ? (room + g->stride[i] - 1) / g->stride[i] : room / g->stride[i]) + 1;
        if (ceil_mode && (out[i] - 1) * g->stride[i] >= in + g->pad_begin[i]) out[i]--; /* starts inside */
        extra[i] = (out[i] - 1) * g->stride[i] + span - L;
        if (extra[i] < 0) extra[i] = 0;
        int j = n - 1 - i; /* oar_pad's pairs start from the last dim */
        pads[2 * j] = g->pad_begin[i];
        pads[2 * j + 1] = g->pad_end[i] + extra[i];
        mask_pads[2 * j] = include_pad ? 0 : g->pad_begin[i];
        mask_pads[2 * j + 1] = include_pad ? extra[i] : g->pad_end[i] + extra[i];
        ones_shape[2 + i] = include_pad ? L : in;
    }
    oar_tensor *xp = oar_pad(x, pads, 2 * n, OAR_PAD_CONSTANT, max ? -INFINITY : 0.0), *mp = NULL;
    if (!max) {
        ones_shape[0] = ones_shape[1] = 1;
        mp = oar_pad(oar_ones(ones_shape, x->ndim, x->dtype), mask_pads, 2 * n, OAR_PAD_CONSTANT, 0.0);
    }
    if (!xp || (!max && !mp)) return NULL;
    oar_tensor *acc = NULL, *cnt = NULL;
    int64_t k[3] = {0, 0, 0};
    for (;;) { /* every kernel offset */
        oar_tensor *sx = xp, *sm = mp;
        for (int i = 0; i < n && sx; i++) {
            int64_t start = k[i] * g->dilation[i], end = start + (out[i] - 1) * g->stride[i] + 1;
            sx = oar_slice(sx, 2 + i, start, end, g->stride[i]);
            if (sm) sm = oar_slice(sm, 2 + i, start, end, g->stride[i]);
        }
        if (!sx) return NULL;
        acc = !acc ? sx : max ? oar_maximum(acc, sx) : oar_add(acc, sx);
        if (!max) cnt = !cnt ? sm : oar_add(cnt, sm);
        if (!acc || (!max && !cnt)) return NULL;
        int i = n - 1;
        while (i >= 0 && ++k[i] == g->kernel[i]) k[i--] = 0;
        if (i < 0) break;
    }
    return max ? oar_contiguous(acc) : oar_div(acc, cnt);
}

/* 3-D pooling by oar's max_pool3d / avg_pool3d where they express the node: symmetric pads of
 * at most half the kernel, and no dilation for averages. */
static bool pool3d_fits(const geom *g, bool max) {
    for (int i = 0; i < 3; i++)
        if (g->pad_begin[i] != g->pad_end[i] || 2 * g->pad_begin[i] > g->kernel[i] || (!max && g->dilation[i] != 1))
            return false;
    return true;
}

static oar_tensor *pool3d(oar_tensor *x, const geom *g, bool max, bool include_pad, bool ceil_mode) {
    oar_tensor *in[1] = {x};
    if (max) {
        oar_attr a[5] = {oar_attr_ints(g->kernel, 3), oar_attr_ints(g->stride, 3), oar_attr_ints(g->pad_begin, 3),
                         oar_attr_ints(g->dilation, 3), oar_attr_int(ceil_mode)};
        return oar_op_call1(OAR_OP_max_pool3d, in, 1, a);
    }
    oar_attr a[6] = {oar_attr_ints(g->kernel, 3), oar_attr_ints(g->stride, 3), oar_attr_ints(g->pad_begin, 3),
                     oar_attr_int(ceil_mode), oar_attr_int(include_pad), oar_attr_int(0)};
    return oar_op_call1(OAR_OP_avg_pool3d, in, 1, a);
}

/* MaxPool's Indices: each window's maximum as a flat index into x [N, C, H, W] (row major, or
 * column major within each plane: storage_order 1), read by max_pool2d_gather (max pooling's
 * derivative, so the pooling's own choice of maximum) from a map of the plane's indices (f64:
 * exact), plus each plane's offset. */
static oar_tensor *pool_indices(oar_tensor *x, const oar_pool_opts *o, bool col_major) {
    int64_t h = x->shape[2], w = x->shape[3], hw[2] = {h, w}, wh[2] = {w, h}, nc[1] = {x->shape[0] * x->shape[1]};
    oar_tensor *xd = oar_cast(x, OAR_F64), *map = oar_arange(0, (double)(h * w), 1, OAR_F64);
    map = col_major ? oar_transpose(oar_reshape(map, wh, 2), 0, 1) : oar_reshape(map, hw, 2);
    oar_tensor *plane = oar_contiguous(oar_expand(map, x->shape, x->ndim));
    oar_attr at[5] = {oar_attr_ints(o->kernel, 2), oar_attr_ints(o->stride, 2), oar_attr_ints(o->padding, 2),
                      oar_attr_ints(o->dilation, 2), oar_attr_int(o->ceil_mode)};
    oar_tensor *in[2] = {plane, xd};
    oar_tensor *local = plane && xd ? oar_op_call1(OAR_OP_max_pool2d_gather, in, 2, at) : NULL;
    if (!local) return NULL;
    int64_t shape[4] = {x->shape[0], x->shape[1], 1, 1};
    oar_tensor *offset = oar_reshape(oar_arange(0, (double)(nc[0] * h * w), (double)(h * w), OAR_F64), shape, 4);
    return offset ? oar_cast(oar_add(local, offset), OAR_I64) : NULL;
}

static oar_status pool(ox_ctx *c, bool max) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    bool indices = max && c->n_out > 1 && c->want[1];
    bool col_major = ox_attr_int(c, "storage_order", 0) != 0; /* of Indices only */
    int64_t k[6];
    int nk = ox_attr_ints(c, "kernel_shape", k, 6);
    if (nk < 0) return oar_last_status();
    if (nk != x->ndim - 2) {
        if (x->ndim - 2 < 1 || x->ndim - 2 > 3)
            return ox_unsupported(c, "a %d-D input; oar pools over 1 to 3 spatial dims", x->ndim);
        return ox_fail(c, OAR_ERR_FORMAT, "expected kernel_shape of %d values, got %d", x->ndim - 2, nk);
    }
    geom g;
    oar_status st = read_geom(c, x, k, &g);
    if (st != OAR_OK) return st;
    bool include_pad = ox_attr_int(c, "count_include_pad", 0) != 0, ceil_mode = ox_attr_int(c, "ceil_mode", 0) != 0;
    bool dilated = false;
    for (int i = 0; i < g.n; i++) dilated |= g.dilation[i] != 1;
    if (indices && (g.n == 3 || !symmetric(&g)))
        return ox_unsupported(c, "output Indices of a %s; oar gives them for 1-D and 2-D pools with symmetric pads",
                              g.n == 3 ? "3-D pool" : "pool with asymmetric pads");
    if (g.n == 3 || (!max && dilated)) {
        oar_dtype dt = x->dtype;
        if (max && !oar_dtype_is_float(dt)) x = oar_cast(x, OAR_F64);
        oar_tensor *y = !x ? NULL : g.n == 3 && pool3d_fits(&g, max) ? pool3d(x, &g, max, include_pad, ceil_mode)
                                                                      : pool_by_slices(c, x, &g, max, include_pad, ceil_mode);
        return ox_set(c, 0, y && y->dtype != dt ? oar_cast(y, dt) : y);
    }
    bool fits = symmetric(&g);
    for (int i = 0; i < g.n; i++) fits &= 2 * g.pad_begin[i] <= g.kernel[i];
    oar_tensor *real = NULL; /* average pooling that must not count explicit pads: 1 where x is */
    if (!fits) { /* asymmetric or wide pads: pad first with what the window must ignore or count */
        if (ceil_mode) return ox_unsupported(c, "ceil_mode=1 with asymmetric or wider-than-half-kernel pads");
        if (!max && !include_pad) {
            geom g2 = g;
            int64_t ones_shape[OAR_MAX_DIMS] = {1, 1};
            for (int i = 0; i < g.n; i++) ones_shape[2 + i] = x->shape[2 + i];
            if (!(real = pad_explicitly(oar_ones(ones_shape, x->ndim, x->dtype), &g2, 0.0))) return oar_last_status();
            include_pad = true;
        }
        if (!(x = pad_explicitly(x, &g, max ? -INFINITY : 0.0))) return oar_last_status();
    }
    bool one_d = g.n == 1;
    oar_pool_opts o = {.ceil_mode = ceil_mode, .exclude_pad = !include_pad};
    for (int i = 0; i < 2; i++) {
        int j = one_d ? 0 : i; /* 1-D pools as 2-D with a height of 1 */
        bool unit = one_d && i == 0;
        o.kernel[i] = unit ? 1 : g.kernel[j];
        o.stride[i] = unit ? 1 : g.stride[j];
        o.padding[i] = unit ? 0 : g.pad_begin[j];
        o.dilation[i] = unit ? 1 : g.dilation[j];
    }
    if (indices && !fits) return ox_unsupported(c, "output Indices with pads wider than half the kernel");
    if (max && !one_d && fits && !indices) { /* oar's int8 pooling: of u8/i8 data, or of DequantizeLinear's */
        oar_attr at[5] = {oar_attr_ints(o.kernel, 2), oar_attr_ints(o.stride, 2), oar_attr_ints(o.padding, 2),
                          oar_attr_ints(o.dilation, 2), oar_attr_int(o.ceil_mode)};
        oar_tensor *y = NULL;
        if (x->dtype == OAR_U8 || x->dtype == OAR_I8) return ox_set(c, 0, oar_op_call1(OAR_OP_qmax_pool2d, &x, 1, at));
        if (ox_qdq_max_pool(c, at, &y)) return ox_set(c, 0, y);
    }
    if (one_d) x = oar_unsqueeze(x, 2);
    oar_dtype dt = x ? x->dtype : OAR_F32;
    if (x && max && !oar_dtype_is_float(dt)) x = oar_cast(x, OAR_F64); /* integers: exact in double */
    oar_tensor *y = x ? (max ? oar_max_pool2d(x, &o) : oar_avg_pool2d(x, &o)) : NULL;
    if (y && real) { /* the mean over the real elements: divided by the fraction of them in each window */
        if (one_d) real = oar_unsqueeze(real, 2);
        y = oar_div(y, oar_avg_pool2d(real, &o));
    }
    oar_tensor *idx = y && indices ? pool_indices(x, &o, col_major) : NULL;
    if (y && one_d) y = oar_squeeze(y, 2), idx = idx ? oar_squeeze(idx, 2) : NULL;
    if (y && y->dtype != dt) y = oar_cast(y, dt);
    st = ox_set(c, 0, y);
    return st == OAR_OK && indices ? ox_set(c, 1, idx) : st;
}
oar_status ox_MaxPool(ox_ctx *c) { return pool(c, true); }

/* MaxUnpool: X's values written at the flat indices I into zeros of the output's shape (by
 * default (in - 1) stride + kernel - pads per spatial dim, or output_shape). Repeated indices
 * (overlapping windows choosing one element) carry one value: the sum over them divided by
 * their count, in f64 (exact for the float types). */
oar_status ox_MaxUnpool(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *idx = OX_IN(c, 1);
    if (!x || !idx) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X and I");
    if (x->ndim < 3 || idx->ndim != x->ndim || memcmp(idx->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
        return ox_fail(c, OAR_ERR_SHAPE, "expected X [N, C, spatial...] and I of its shape");
    int n = x->ndim - 2;
    int64_t k[OAR_MAX_DIMS], st[OAR_MAX_DIMS], pads[2 * OAR_MAX_DIMS] = {0}, shape[OAR_MAX_DIMS];
    if (ox_attr_ints(c, "kernel_shape", k, OAR_MAX_DIMS) != n)
        return ox_fail(c, OAR_ERR_FORMAT, "expected kernel_shape of %d values", n);
    for (int i = 0; i < n; i++) st[i] = 1;
    if (ox_attr(c, "strides") && ox_attr_ints(c, "strides", st, OAR_MAX_DIMS) != n)
        return ox_fail(c, OAR_ERR_FORMAT, "expected strides of %d values", n);
    if (ox_attr(c, "pads") && ox_attr_ints(c, "pads", pads, 2 * OAR_MAX_DIMS) != 2 * n)
        return ox_fail(c, OAR_ERR_FORMAT, "expected pads of %d values", 2 * n);
    shape[0] = x->shape[0], shape[1] = x->shape[1];
    for (int i = 0; i < n; i++) shape[2 + i] = (x->shape[2 + i] - 1) * st[i] + k[i] - pads[i] - pads[n + i];
    int64_t out_shape[OAR_MAX_DIMS], grow[2 * OAR_MAX_DIMS] = {0}; /* output_shape: zeros after each dim's end */
    memcpy(out_shape, shape, sizeof shape);
    if (OX_IN(c, 2) && ox_known_ints(c, 2, out_shape, OAR_MAX_DIMS) != x->ndim)
        return ox_fail(c, OAR_ERR_SHAPE, "expected output_shape of %d values", x->ndim);
    for (int d = 0; d < x->ndim; d++) {
        if (out_shape[d] < shape[d] || (d < 2 && out_shape[d] != shape[d]))
            return ox_fail(c, OAR_ERR_SHAPE, "output_shape[%d] = %lld; expected %s%lld (the indices address a tensor "
                                             "of that size)", d, (long long)out_shape[d], d < 2 ? "" : "at least ",
                           (long long)shape[d]);
        grow[2 * (x->ndim - 1 - d) + 1] = out_shape[d] - shape[d]; /* oar_pad's pairs run from the last dim */
    }
    int64_t total = 1, flat = -1;
    for (int d = 0; d < x->ndim; d++) total *= shape[d];
    oar_tensor *v = oar_reshape(oar_cast(x, OAR_F64), &flat, 1), *i = oar_reshape(oar_cast(idx, OAR_I64), &flat, 1);
    oar_tensor *zeros = oar_zeros(&total, 1, OAR_F64);
    oar_tensor *placed = oar_scatter_add(zeros, 0, i, v), *hits = oar_scatter_add(zeros, 0, i, oar_ones_like(v));
    oar_tensor *y = placed && hits ? oar_where(oar_gt_scalar(hits, 0.0), oar_div(placed, oar_maximum_scalar(hits, 1.0)),
                                               placed)
                                   : NULL;
    y = y ? oar_reshape(oar_cast(y, x->dtype), shape, x->ndim) : NULL;
    return ox_set(c, 0, y ? oar_pad(y, grow, 2 * n, OAR_PAD_CONSTANT, 0.0) : NULL);
}
oar_status ox_AveragePool(ox_ctx *c) { return pool(c, false); }

static oar_status global_pool(ox_ctx *c, bool max) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x || x->ndim < 3) return ox_fail(c, OAR_ERR_SHAPE, "expected an input [N, C, spatial...]");
    /* 2-D average: the op oar's own models use (and the export writes as GlobalAveragePool), so
     * a round trip runs the same kernel */
    if (!max && x->ndim == 4) return ox_set(c, 0, oar_adaptive_avg_pool2d(x, 1, 1));
    int dims[OAR_MAX_DIMS], n = 0;
    for (int d = 2; d < x->ndim; d++) dims[n++] = d;
    return ox_set(c, 0, max ? oar_amax(x, dims, n, true) : oar_mean(x, dims, n, true));
}
oar_status ox_GlobalAveragePool(ox_ctx *c) { return global_pool(c, false); }
oar_status ox_GlobalMaxPool(ox_ctx *c) { return global_pool(c, true); }

/* training_mode=1: normalized by the batch's statistics (population variance); outputs 1 and 2
 * are the running statistics updated with momentum, as values (nothing is written in place). */
static oar_status batch_norm_training(ox_ctx *c, oar_tensor *x, oar_tensor *scale, oar_tensor *bias, oar_tensor *mean,
                                      oar_tensor *var, double eps) {
    if (x->ndim < 2) return ox_fail(c, OAR_ERR_SHAPE, "expected X [N, C, ...], got %d dims", x->ndim);
    int dims[OAR_MAX_DIMS], n = 0;
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        if (d != 1) dims[n++] = d;
        shape[d] = d == 1 ? x->shape[1] : 1;
    }
    double momentum = ox_attr_float(c, "momentum", 0.9);
    oar_tensor *bm = oar_mean(x, dims, n, false), *bv = oar_var(x, dims, n, 0, false);
    if (!bm || !bv) return oar_last_status();
    oar_tensor *inv = oar_mul(oar_rsqrt(oar_add_scalar(bv, eps)), scale);
    oar_tensor *y = oar_add(oar_mul(oar_sub(x, oar_reshape(bm, shape, x->ndim)), oar_reshape(inv, shape, x->ndim)),
                            oar_reshape(bias, shape, x->ndim));
    oar_status st = ox_set(c, 0, y);
    if (st == OAR_OK && c->n_out > 1)
        st = ox_set(c, 1, oar_add(oar_mul_scalar(mean, momentum), oar_mul_scalar(bm, 1.0 - momentum)));
    if (st == OAR_OK && c->n_out > 2)
        st = ox_set(c, 2, oar_add(oar_mul_scalar(var, momentum), oar_mul_scalar(bv, 1.0 - momentum)));
    return st;
}

oar_status ox_BatchNormalization(ox_ctx *c) {
    if (c->n_in < 5) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X, scale, B, mean, var");
    oar_tensor *x = OX_IN(c, 0), *scale = OX_IN(c, 1), *bias = OX_IN(c, 2), *mean = OX_IN(c, 3), *var = OX_IN(c, 4);
    double eps = ox_attr_float(c, "epsilon", 1e-5);
    if (!x || !scale || !bias || !mean || !var) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X, scale, B, mean, var");
    if (ox_attr_int(c, "training_mode", 0)) return batch_norm_training(c, x, scale, bias, mean, var, eps);
    if (c->opset < 7 && !ox_attr_int(c, "is_test", 0) && c->n_out > 1)
        return ox_unsupported(c, "is_test=0 with the statistics outputs (opset < 7 training); not supported");
    for (int k = 1; k < c->n_out; k++)
        if (c->want[k]) return ox_unsupported(c, "output %d (running statistics) is requested; inference gives Y only", k);
    if (mean->storage && var->storage) { /* the statistics are the model's: one batch_norm op (foldable into a conv) */
        oar_tensor *stats[2] = {oar_tensor_alias(mean), oar_tensor_alias(var)};
        for (int k = 0; k < 2; k++) /* bound like a module's buffers, which batch_norm may read in place */
            if (stats[k]) stats[k]->trace_id = 0, oar_track(stats[k]);
        if (!stats[0] || !stats[1]) return oar_last_status();
        return ox_set(c, 0, oar_batch_norm(x, scale, bias, stats[0], stats[1], false, 0.1, eps));
    }
    /* statistics computed by the graph: (x - mean) / sqrt(var + eps) * scale + B per channel */
    int64_t shape[OAR_MAX_DIMS];
    shape[0] = x->ndim > 1 ? x->shape[1] : 1;
    for (int d = 1; d < x->ndim - 1; d++) shape[d] = 1;
    int n = x->ndim > 1 ? x->ndim - 1 : 1;
#define CH(t) oar_reshape((t), shape, n)
    oar_tensor *y = oar_mul(oar_sub(x, CH(mean)), CH(oar_mul(oar_rsqrt(oar_add_scalar(var, eps)), scale)));
    return ox_set(c, 0, y ? oar_add(y, CH(bias)) : NULL);
#undef CH
}

static bool same_shape(const oar_tensor *w, const int64_t *shape, int n) {
    if (!w || w->ndim != n) return false;
    for (int d = 0; d < n; d++)
        if (w->shape[d] != shape[d]) return false;
    return true;
}

oar_status ox_LayerNormalization(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0), *scale = OX_IN(c, 1), *bias = OX_IN(c, 2);
    if (!x || !scale) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X and Scale");
    int axis = ox_axis(c, ox_attr_int(c, "axis", -1), x->ndim, "axis");
    if (axis < 0) return oar_last_status();
    double eps = ox_attr_float(c, "epsilon", 1e-5);
    int nd = x->ndim - axis;
    const int64_t *norm_shape = x->shape + axis;
    bool fits = same_shape(scale, norm_shape, nd) && (!bias || same_shape(bias, norm_shape, nd));
    oar_tensor *y = fits ? oar_layer_norm(x, nd, scale, bias, eps) : oar_layer_norm(x, nd, NULL, NULL, eps);
    if (!fits && y) { /* Scale and B broadcast to X */
        y = oar_mul(y, scale);
        if (y && bias) y = oar_add(y, bias);
    }
    oar_status st = ox_set(c, 0, y);
    if (st != OAR_OK || (!(c->n_out > 1 && c->want[1]) && !(c->n_out > 2 && c->want[2]))) return st;
    int dims[OAR_MAX_DIMS];
    for (int d = 0; d < nd; d++) dims[d] = axis + d;
    oar_tensor *xf = x->dtype == OAR_F32 || x->dtype == OAR_F64 ? x : oar_cast(x, OAR_F32);
    if ((st = ox_set(c, 1, oar_mean(xf, dims, nd, true))) != OAR_OK) return st;
    if (c->n_out > 2) st = ox_set(c, 2, oar_rsqrt(oar_add_scalar(oar_var(xf, dims, nd, 0, true), eps)));
    return st;
}

/* x [N, C, ...] normalized per group; per-channel Scale and B (per group before opset 21). */
static oar_status group_norm(ox_ctx *c, int64_t groups, oar_tensor *scale, oar_tensor *bias, bool per_group) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x || x->ndim < 2) return ox_fail(c, OAR_ERR_SHAPE, "expected an input [N, C, ...]");
    int64_t C = x->shape[1];
    if (per_group && scale && bias && groups && C % groups == 0) { /* each group's value for its channels */
        int64_t gs[2] = {groups, 1}, ge[2] = {groups, C / groups}, flat[1] = {C};
        scale = oar_reshape(oar_expand(oar_reshape(scale, gs, 2), ge, 2), flat, 1);
        bias = oar_reshape(oar_expand(oar_reshape(bias, gs, 2), ge, 2), flat, 1);
    }
    return ox_set(c, 0, oar_group_norm(x, groups, scale, bias, ox_attr_float(c, "epsilon", 1e-5)));
}

oar_status ox_GroupNormalization(ox_ctx *c) {
    return group_norm(c, ox_attr_int(c, "num_groups", 0), OX_IN(c, 1), OX_IN(c, 2), c->opset < 21);
}

oar_status ox_InstanceNormalization(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x || x->ndim < 3) return ox_fail(c, OAR_ERR_SHAPE, "expected an input [N, C, spatial...]");
    return group_norm(c, x->shape[1], OX_IN(c, 1), OX_IN(c, 2), false);
}

/* (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9) over axes, as ONNX's function body writes it */
oar_status ox_MeanVarianceNormalization(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    int64_t axes[OAR_MAX_DIMS] = {0, 2, 3};
    int n = ox_attr(c, "axes") ? ox_attr_ints(c, "axes", axes, OAR_MAX_DIMS) : 3;
    if (n < 0) return oar_last_status();
    int dims[OAR_MAX_DIMS];
    for (int i = 0; i < n; i++)
        if ((dims[i] = ox_axis(c, axes[i], x->ndim, "axis")) < 0) return oar_last_status();
    oar_tensor *mean = oar_mean(x, dims, n, true);
    oar_tensor *var = mean ? oar_sub(oar_mean(oar_square(x), dims, n, true), oar_square(mean)) : NULL;
    return ox_set(c, 0, var ? oar_div(oar_sub(x, mean), oar_add_scalar(oar_sqrt(var), 1e-9)) : NULL);
}

/* Local response normalization across channels: x / (bias + alpha / size * sum of x^2 over the
 * channels c - floor((size - 1) / 2) .. c + ceil((size - 1) / 2))^beta, the sum as size shifted
 * slices of the zero-padded squares. */
oar_status ox_LRN(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x || x->ndim < 3) return ox_fail(c, OAR_ERR_SHAPE, "expected an input [N, C, spatial...]");
    int64_t size = ox_attr_int(c, "size", 0);
    if (size < 1) return ox_fail(c, OAR_ERR_INVALID_ARG, "expected the attribute size >= 1, got %lld", (long long)size);
    double alpha = ox_attr_float(c, "alpha", 1e-4), beta = ox_attr_float(c, "beta", 0.75);
    double bias = ox_attr_float(c, "bias", 1.0);
    int64_t pads[2 * OAR_MAX_DIMS] = {0}, ch = x->shape[1];
    int n_pads = 2 * (x->ndim - 1); /* from the last dim back to the channels */
    pads[n_pads - 2] = (size - 1) / 2, pads[n_pads - 1] = size / 2;
    oar_tensor *sq = oar_pad(oar_square(x), pads, n_pads, OAR_PAD_CONSTANT, 0.0), *sum = NULL;
    for (int64_t k = 0; sq && k < size; k++) {
        oar_tensor *s = oar_slice(sq, 1, k, k + ch, 1);
        sum = sum ? oar_add(sum, s) : s;
    }
    oar_tensor *den = sum ? oar_pow_scalar(oar_add_scalar(oar_mul_scalar(sum, alpha / (double)size), bias), beta) : NULL;
    return ox_set(c, 0, den ? oar_div(x, den) : NULL);
}

oar_status ox_Dropout(ox_ctx *c) {
    oar_tensor *x = OX_IN(c, 0);
    if (!x) return ox_fail(c, OAR_ERR_FORMAT, "expected an input");
    bool training = c->opset < 7 ? !ox_attr_int(c, "is_test", 0) && c->opset < 6 : false;
    double ratio = c->opset < 12 ? ox_attr_float(c, "ratio", 0.5) : 0.5;
    if (c->opset >= 12) {
        if (OX_IN(c, 1) && !ox_known_scalar(c, 1, &ratio)) return oar_last_status();
        double t = 0;
        if (OX_IN(c, 2) && !ox_known_scalar(c, 2, &t)) return oar_last_status();
        training = t != 0;
    }
    if (training && ratio > 0)
        return ox_unsupported(c, "training_mode=1 with ratio %g draws random masks; oar imports inference models",
                              ratio);
    oar_status st = ox_set(c, 0, x);
    if (st == OAR_OK && c->n_out > 1 && c->want[1]) /* nothing dropped: the mask is all true */
        st = ox_set(c, 1, oar_ones(x->shape, x->ndim, OAR_BOOL));
    return st;
}

/* ---- losses: oar's nll_loss, or with per-class weights the same sum written with ops */
static oar_tensor *weighted_nll(oar_tensor *logp, oar_tensor *target, oar_tensor *w, const oar_ce_opts *o) {
    oar_tensor *t = target->dtype == OAR_I64 ? target : oar_cast(target, OAR_I64);
    oar_tensor *keep = o->ignore_index == INT64_MIN ? NULL : oar_ne_scalar(t, (double)o->ignore_index);
    if (keep) t = oar_where(keep, t, oar_zeros(NULL, 0, OAR_I64)); /* ignored: any valid class, weighted 0 */
    oar_tensor *picked = oar_squeeze(oar_gather(logp, 1, oar_unsqueeze(t, 1)), 1);
    int64_t flat = t ? t->numel : 0;
    oar_tensor *wt = t ? oar_reshape(oar_index_select(w, 0, oar_reshape(t, &flat, 1)), t->shape, t->ndim) : NULL;
    if (wt && keep) wt = oar_mul(wt, oar_cast(keep, wt->dtype));
    oar_tensor *loss = picked && wt ? oar_neg(oar_mul(picked, wt)) : NULL;
    if (!loss || o->reduction == OAR_REDUCE_NONE) return loss;
    oar_tensor *sum = oar_sum(loss, NULL, 0, false);
    return o->reduction == OAR_REDUCE_SUM ? sum : oar_div(sum, oar_sum(wt, NULL, 0, false));
}

static oar_status loss(ox_ctx *c, bool from_logits) {
    oar_tensor *x = OX_IN(c, 0), *target = OX_IN(c, 1), *w = OX_IN(c, 2);
    if (!x || !target) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs scores and labels");
    if (x->ndim < 2) return ox_fail(c, OAR_ERR_SHAPE, "expected scores [N, C, ...], got %d dims", x->ndim);
    char buf[16];
    const char *r = ox_attr_str(c, "reduction", "mean", buf, sizeof buf);
    oar_ce_opts o = oar_ce_defaults();
    if (!strcmp(r, "mean")) o.reduction = OAR_REDUCE_MEAN;
    else if (!strcmp(r, "sum")) o.reduction = OAR_REDUCE_SUM;
    else if (!strcmp(r, "none")) o.reduction = OAR_REDUCE_NONE;
    else return ox_unsupported(c, "reduction='%s'; supported: mean, sum, none", r);
    const Onnx__AttributeProto *ii = ox_attr(c, "ignore_index");
    o.ignore_index = ii && ii->has_i ? ii->i : INT64_MIN;
    oar_tensor *logp = from_logits ? oar_log_softmax(x, 1) : x;
    oar_tensor *y = !logp ? NULL : w ? weighted_nll(logp, target, w, &o) : oar_nll_loss(logp, target, &o);
    oar_status st = ox_set(c, 0, y);
    if (st == OAR_OK && from_logits && c->n_out > 1) st = ox_set(c, 1, logp);
    return st;
}
oar_status ox_SoftmaxCrossEntropyLoss(ox_ctx *c) { return loss(c, true); }
oar_status ox_NegativeLogLikelihoodLoss(ox_ctx *c) { return loss(c, false); }
