/* 2-d pooling over the last two dims of [C, H, W] or [N, C, H, W] tensors, with PyTorch's
 * output sizes (ceil_mode), window clipping (count_include_pad) and adaptive bins.
 * Backward ops: max pooling scatters the gradient to each window's argmax (recomputed from x,
 * so nothing but x is saved) and its second-order partner gathers from the argmax; average
 * pooling and its backward are adjoint linear maps, so each one's rule is the other. */
#include "ops/op.h"

#include <math.h>
#include <string.h>

typedef struct pgeom {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    bool ceil_mode, include_pad;
} pgeom;

/* torch's pooling_output_shape: floor (or ceil) division, and with ceil_mode no window may
 * start beyond the input and its left padding. */
/* In 128 bits, so that huge attributes from a model file give an error instead of overflowing;
 * a result past int64 saturates to INT64_MAX (refused by the caller). */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    typedef __int128 wide;
    wide num = (wide)in + 2 * (wide)p - (wide)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    wide out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= (wide)in + p) out--;
    return out > INT64_MAX ? INT64_MAX : out < INT64_MIN ? INT64_MIN : (int64_t)out;
}

static oar_status check_input_shape(const char *op, const char *name, const int64_t *xs, int nd) {
    char s[128];
    oar_format_shape(xs, nd, s, sizeof s);
    if (nd != 3 && nd != 4)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s to be 3-d [C, H, W] or 4-d [N, C, H, W], got shape %s",
                         op, name, s);
    for (int d = nd - 3; d < nd; d++)
        if (xs[d] < 1)
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s to have non-zero channels, height and width, got "
                                            "shape %s", op, name, s);
    return OAR_OK;
}

static oar_status read_pair(const char *op, const char *what, const oar_attr *a, int64_t min, int64_t *out) {
    char s[128];
    oar_format_shape(a->ints, a->n, s, sizeof s);
    if (a->n != 2)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s to have 2 entries (height, width), got %s", op, what, s);
    if (a->ints[0] < min || a->ints[1] < min)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s entries >= %lld, got %s", op, what, (long long)min, s);
    out[0] = a->ints[0], out[1] = a->ints[1];
    return OAR_OK;
}

/* Window parameters (dil NULL: 1) for an input of shape xs, checked as torch checks them. */
static oar_status pool_geom(const char *op, const char *xname, const int64_t *xs, int nd, const oar_attr *ker,
                            const oar_attr *str, const oar_attr *pad, const oar_attr *dil, bool ceil_mode,
                            pgeom *g) {
    oar_status st;
    int64_t k[2] = {1, 1}, s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
    if ((st = check_input_shape(op, xname, xs, nd)) != OAR_OK) return st;
    if ((st = read_pair(op, "kernel", ker, 1, k)) != OAR_OK) return st;
    if ((st = read_pair(op, "stride", str, 1, s)) != OAR_OK) return st;
    if ((st = read_pair(op, "padding", pad, 0, p)) != OAR_OK) return st;
    if (dil && (st = read_pair(op, "dilation", dil, 1, d)) != OAR_OK) return st;
    if (p[0] > k[0] / 2 || p[1] > k[1] / 2)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected padding at most half the kernel, got padding "
                                              "[%lld, %lld] for kernel [%lld, %lld]; pad the input with oar_pad "
                                              "for more", op, (long long)p[0], (long long)p[1], (long long)k[0],
                         (long long)k[1]);
    g->h = xs[nd - 2], g->w = xs[nd - 1];
    g->planes = 1;
    for (int i = 0; i < nd - 2; i++) g->planes *= xs[i];
    g->kh = k[0], g->kw = k[1], g->sh = s[0], g->sw = s[1], g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
    g->ceil_mode = ceil_mode;
    g->oh = pool_out_size(g->h, k[0], s[0], p[0], d[0], ceil_mode);
    g->ow = pool_out_size(g->w, k[1], s[1], p[1], d[1], ceil_mode);
    if (g->oh == INT64_MAX || g->ow == INT64_MAX)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one from input "
                                        "%lld x %lld with padding [%lld, %lld]", op, (long long)g->h, (long long)g->w,
                         (long long)p[0], (long long)p[1]);
    if (g->oh < 1 || g->ow < 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output of at least 1 x 1, got %lld x %lld from input "
                                        "%lld x %lld with kernel [%lld, %lld], padding [%lld, %lld], dilation "
                                        "[%lld, %lld]; use a smaller kernel or more padding", op,
                         (long long)g->oh, (long long)g->ow, (long long)g->h, (long long)g->w, (long long)k[0],
                         (long long)k[1], (long long)p[0], (long long)p[1], (long long)d[0], (long long)d[1]);
    return OAR_OK;
}

static void pooled_meta(oar_meta *m, oar_dtype dt, const int64_t *xs, int nd, int64_t oh, int64_t ow) {
    m->dtype = dt;
    m->ndim = nd;
    memcpy(m->shape, xs, sizeof(int64_t) * (size_t)nd);
    m->shape[nd - 2] = oh, m->shape[nd - 1] = ow;
}

/* t's shape must equal want (an output or input shape the op computed). */
static oar_status check_shape_is(const char *op, const char *name, const oar_tensor *t, const int64_t *want,
                                 int nd, const char *why) {
    if (t->ndim == nd && !memcmp(t->shape, want, sizeof(int64_t) * (size_t)nd)) return OAR_OK;
    char a[128], b[128];
    oar_format_shape(want, nd, a, sizeof a);
    oar_format_shape(t->shape, t->ndim, b, sizeof b);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s (%s), got %s", op, name, a, why, b);
}

static oar_status check_pair_dtypes(const char *op, oar_tensor *const *in, const char *n0, const char *n1) {
    oar_status st;
    if ((st = oar_check_float(op, in[0], n0)) != OAR_OK) return st;
    if (in[1]->dtype != in[0]->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have %s's dtype %s, got %s; convert it with oar_cast",
                         op, n1, n0, oar_dtype_name(in[0]->dtype), oar_dtype_name(in[1]->dtype));
    return OAR_OK;
}

/* Accumulation buffer in double for the scatter-style backward kernels. */
static double *zeroed_doubles(int64_t n) {
    double *p = oar_alloc(sizeof(double) * (size_t)n);
    if (p) memset(p, 0, sizeof(double) * (size_t)n);
    return p;
}

static void store_doubles(oar_tensor *t, double *p) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    char *dst = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) tr->store(dst + i * (int64_t)tr->size, p[i]);
    oar_free(p, sizeof(double) * (size_t)t->numel);
}

/* ================================================================ max pooling */
/* attrs: kernel, stride, padding, dilation, ceil_mode; x is input 0 of max_pool2d and input 1
 * of its backward ops. */
static oar_status max_geom(const char *op, const oar_tensor *x, const oar_attr *a, pgeom *g) {
    return pool_geom(op, "x", x->shape, x->ndim, &a[0], &a[1], &a[2], &a[3], a[4].i != 0, g);
}

/* Index in the plane of the window's maximum, chosen as torch does: the first largest value,
 * a NaN winning; -1 when the window holds no input element. */
static int64_t window_argmax(const pgeom *g, const oar_dtype_traits *tr, const char *plane, int64_t oy, int64_t ox) {
    int64_t best_i = -1;
    double best = -INFINITY;
    for (int64_t ky = 0; ky < g->kh; ky++) {
        int64_t iy = oy * g->sh - g->ph + ky * g->dh;
        if (iy < 0 || iy >= g->h) continue;
        for (int64_t kx = 0; kx < g->kw; kx++) {
            int64_t ix = ox * g->sw - g->pw + kx * g->dw;
            if (ix < 0 || ix >= g->w) continue;
            double v = tr->load(plane + (iy * g->w + ix) * (int64_t)tr->size);
            if (best_i < 0 || v > best || isnan(v)) {
                best = v;
                best_i = iy * g->w + ix;
            }
        }
    }
    return best_i;
}

static oar_status max_pool_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    pgeom g;
    oar_status st = oar_check_float("max_pool2d", in[0], "x");
    if (st == OAR_OK) st = max_geom("max_pool2d", in[0], a, &g);
    if (st != OAR_OK) return st;
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, g.oh, g.ow);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_pool_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pgeom g;
    max_geom("max_pool2d", in[0], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    for (int64_t p = 0; p < g.planes; p++) {
        const char *xp = x + p * g.h * g.w * es;
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t i = window_argmax(&g, tr, xp, oy, ox);
                tr->store(y + ((p * g.oh + oy) * g.ow + ox) * es, i < 0 ? -INFINITY : tr->load(xp + i * es));
            }
    }
    return OAR_OK;
}

static oar_tensor *max_call(oar_op_id op, oar_tensor *a0, oar_tensor *x, const oar_attr *attrs) {
    oar_tensor *in[2] = {a0, x};
    return oar_op_call1(op, in, 2, attrs);
}

static oar_status max_pool_grad(oar_grad_ctx *g) {
    g->gin[0] = max_call(OAR_OP_max_pool2d_backward, g->gout[0], g->in[0], g->attrs);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

/* torch's defaults but stride's (torch: the kernel size, which a table value cannot say) */
#define MAX_ATTRS {"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS, "0,0"}, \
                  {"dilation", OAR_ATTR_INTS, "1,1"}, {"ceil_mode", OAR_ATTR_INT, "false"}

const oar_op_def oar_opdef_max_pool2d = {
    .name = "max_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_pool_infer, .reference = max_pool_ref, .grad = max_pool_grad,
};

/* ---- max_pool2d_backward(grad, x): grad added at each window's argmax in x. The result is
 * linear in grad (adjoint: max_pool2d_gather) and piecewise constant in x (zero gradient). */
static oar_status max_bwd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "max_pool2d_backward";
    pgeom g;
    oar_status st = check_pair_dtypes(op, in, "grad", "x");
    if (st == OAR_OK) st = max_geom(op, in[1], a, &g);
    if (st != OAR_OK) return st;
    oar_meta m;
    pooled_meta(&m, in[1]->dtype, in[1]->shape, in[1]->ndim, g.oh, g.ow);
    if ((st = check_shape_is(op, "grad", in[0], m.shape, m.ndim, "max_pool2d's output for x")) != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_bwd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pgeom g;
    max_geom("max_pool2d_backward", in[1], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[1]->dtype];
    int64_t es = (int64_t)tr->size;
    double *dx = zeroed_doubles(out[0]->numel);
    if (!dx) return OAR_ERR_OOM;
    const char *gy = oar_tensor_ptr(in[0]), *x = oar_tensor_ptr(in[1]);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t i = window_argmax(&g, tr, x + p * g.h * g.w * es, oy, ox);
                if (i >= 0) dx[p * g.h * g.w + i] += tr->load(gy + ((p * g.oh + oy) * g.ow + ox) * es);
            }
    store_doubles(out[0], dx);
    return OAR_OK;
}

static oar_status max_bwd_grad(oar_grad_ctx *g) {
    if (g->needs[0]) {
        g->gin[0] = max_call(OAR_OP_max_pool2d_gather, g->gout[0], g->in[1], g->attrs);
        if (!g->gin[0]) return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_max_pool2d_backward = {
    .name = "max_pool2d_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_bwd_infer, .reference = max_bwd_ref, .grad = max_bwd_grad,
};

/* ---- max_pool2d_gather(v, x): v read at each window's argmax in x (v has x's shape). It is
 * max_pool2d's derivative in direction v, and the adjoint of max_pool2d_backward. */
static oar_status max_gather_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "max_pool2d_gather";
    pgeom g;
    oar_status st = check_pair_dtypes(op, in, "v", "x");
    if (st == OAR_OK) st = max_geom(op, in[1], a, &g);
    if (st == OAR_OK) st = check_shape_is(op, "v", in[0], in[1]->shape, in[1]->ndim, "x's shape");
    if (st != OAR_OK) return st;
    pooled_meta(out, in[1]->dtype, in[1]->shape, in[1]->ndim, g.oh, g.ow);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_gather_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pgeom g;
    max_geom("max_pool2d_gather", in[1], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[1]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *v = oar_tensor_ptr(in[0]), *x = oar_tensor_ptr(in[1]);
    char *y = oar_tensor_ptr(out[0]);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t i = window_argmax(&g, tr, x + p * g.h * g.w * es, oy, ox);
                tr->store(y + ((p * g.oh + oy) * g.ow + ox) * es, i < 0 ? 0.0 : tr->load(v + (p * g.h * g.w + i) * es));
            }
    return OAR_OK;
}

static oar_status max_gather_grad(oar_grad_ctx *g) {
    if (g->needs[0]) {
        g->gin[0] = max_call(OAR_OP_max_pool2d_backward, g->gout[0], g->in[1], g->attrs);
        if (!g->gin[0]) return oar_last_status();
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_max_pool2d_gather = {
    .name = "max_pool2d_gather", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_gather_infer, .reference = max_gather_ref, .grad = max_gather_grad,
};

/* ================================================================ average pooling */
/* attrs: kernel, stride, padding, ceil_mode, count_include_pad (after input_shape in the
 * backward op). */
static oar_status avg_geom(const char *op, const char *xname, const int64_t *xs, int nd, const oar_attr *a, pgeom *g) {
    oar_status st = pool_geom(op, xname, xs, nd, &a[0], &a[1], &a[2], NULL, a[3].i != 0, g);
    g->include_pad = a[4].i != 0;
    return st;
}

/* The window of output (oy, ox) clipped to the input, and its divisor, as torch computes
 * them: with count_include_pad the divisor counts padding but not the part of a ceil_mode
 * window that hangs past the padding. Returns false for a window with no input element. */
static bool avg_window(const pgeom *g, int64_t oy, int64_t ox, int64_t *y0, int64_t *y1, int64_t *x0, int64_t *x1,
                       double *divisor) {
    int64_t hs = oy * g->sh - g->ph, ws = ox * g->sw - g->pw;
    int64_t he = hs + g->kh < g->h + g->ph ? hs + g->kh : g->h + g->ph;
    int64_t we = ws + g->kw < g->w + g->pw ? ws + g->kw : g->w + g->pw;
    int64_t padded = (he - hs) * (we - ws);
    *y0 = hs > 0 ? hs : 0, *x0 = ws > 0 ? ws : 0;
    *y1 = he < g->h ? he : g->h, *x1 = we < g->w ? we : g->w;
    if (*y0 >= *y1 || *x0 >= *x1) return false;
    *divisor = (double)(g->include_pad ? padded : (*y1 - *y0) * (*x1 - *x0));
    return true;
}

static oar_status avg_pool_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    pgeom g;
    oar_status st = oar_check_float("avg_pool2d", in[0], "x");
    if (st == OAR_OK) st = avg_geom("avg_pool2d", "x", in[0]->shape, in[0]->ndim, a, &g);
    if (st != OAR_OK) return st;
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, g.oh, g.ow);
    *n_out = 1;
    return OAR_OK;
}

static oar_status avg_pool_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pgeom g;
    avg_geom("avg_pool2d", "x", in[0]->shape, in[0]->ndim, a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t y0, y1, x0, x1;
                double div, acc = 0;
                if (avg_window(&g, oy, ox, &y0, &y1, &x0, &x1, &div)) {
                    for (int64_t iy = y0; iy < y1; iy++)
                        for (int64_t ix = x0; ix < x1; ix++) acc += tr->load(x + ((p * g.h + iy) * g.w + ix) * es);
                    acc /= div;
                }
                tr->store(y + ((p * g.oh + oy) * g.ow + ox) * es, acc);
            }
    return OAR_OK;
}

static oar_status avg_pool_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    oar_attr a[6] = {oar_attr_ints(x->shape, x->ndim), g->attrs[0], g->attrs[1], g->attrs[2], g->attrs[3], g->attrs[4]};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_avg_pool2d_backward, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

#define AVG_ATTRS {"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS, "0,0"}, \
                  {"ceil_mode", OAR_ATTR_INT, "false"}, {"count_include_pad", OAR_ATTR_INT, "true"}

const oar_op_def oar_opdef_avg_pool2d = {
    .name = "avg_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5, .attrs = {AVG_ATTRS},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_pool_infer, .reference = avg_pool_ref, .grad = avg_pool_grad,
};

/* ---- avg_pool2d_backward(grad; input_shape, ...): each output's gradient spread evenly over
 * its window, onto zeros of input_shape. The adjoint of avg_pool2d. */
static oar_status avg_bwd_geom(oar_tensor *const *in, const oar_attr *a, pgeom *g) {
    const char *op = "avg_pool2d_backward";
    oar_status st = oar_check_float(op, in[0], "grad");
    if (st != OAR_OK) return st;
    if (a[0].n < 3 || a[0].n > 4)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have 3 or 4 entries, got %d", op, a[0].n);
    if ((st = avg_geom(op, "input_shape", a[0].ints, a[0].n, a + 1, g)) != OAR_OK) return st;
    oar_meta m;
    pooled_meta(&m, in[0]->dtype, a[0].ints, a[0].n, g->oh, g->ow);
    return check_shape_is(op, "grad", in[0], m.shape, m.ndim, "avg_pool2d's output for input_shape");
}

static oar_status avg_bwd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    pgeom g;
    oar_status st = avg_bwd_geom(in, a, &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status avg_bwd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    pgeom g;
    avg_bwd_geom(in, a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size;
    double *dx = zeroed_doubles(out[0]->numel);
    if (!dx) return OAR_ERR_OOM;
    const char *gy = oar_tensor_ptr(in[0]);
    for (int64_t p = 0; p < g.planes; p++)
        for (int64_t oy = 0; oy < g.oh; oy++)
            for (int64_t ox = 0; ox < g.ow; ox++) {
                int64_t y0, y1, x0, x1;
                double div;
                if (!avg_window(&g, oy, ox, &y0, &y1, &x0, &x1, &div)) continue;
                double v = tr->load(gy + ((p * g.oh + oy) * g.ow + ox) * es) / div;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) dx[(p * g.h + iy) * g.w + ix] += v;
            }
    store_doubles(out[0], dx);
    return OAR_OK;
}

static oar_status avg_bwd_grad(oar_grad_ctx *g) {
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_avg_pool2d, in, 1, g->attrs + 1);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_avg_pool2d_backward = {
    .name = "avg_pool2d_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 6,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, AVG_ATTRS},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_bwd_infer, .reference = avg_bwd_ref, .grad = avg_bwd_grad,
};

/* ================================================================ adaptive average pooling */
/* Output bin i of n over size s covers [floor(i*s/n), ceil((i+1)*s/n)). */
static int64_t bin_start(int64_t i, int64_t s, int64_t n) { return i * s / n; }
static int64_t bin_end(int64_t i, int64_t s, int64_t n) { return ((i + 1) * s + n - 1) / n; }

static oar_status adaptive_check(const char *op, const char *xname, const int64_t *xs, int nd, const oar_attr *size) {
    oar_status st = check_input_shape(op, xname, xs, nd);
    if (st != OAR_OK) return st;
    int64_t o[2];
    return read_pair(op, "output_size", size, 0, o);
}

static oar_status adaptive_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "adaptive_avg_pool2d";
    oar_status st = oar_check_float(op, in[0], "x");
    if (st == OAR_OK) st = adaptive_check(op, "x", in[0]->shape, in[0]->ndim, &a[0]);
    if (st != OAR_OK) return st;
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, a[0].ints[0], a[0].ints[1]);
    *n_out = 1;
    return OAR_OK;
}

/* Shared walk of the bins: forward averages x into y; backward spreads y over x (in double). */
static void adaptive_walk(bool forward, const oar_dtype_traits *tr, int64_t planes, int64_t h, int64_t w,
                          int64_t oh, int64_t ow, const char *x, char *y, double *dx) {
    int64_t es = (int64_t)tr->size;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0 = bin_start(oy, h, oh), y1 = bin_end(oy, h, oh);
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t x0 = bin_start(ox, w, ow), x1 = bin_end(ox, w, ow);
                double div = (double)((y1 - y0) * (x1 - x0)), acc = 0;
                char *yo = y + ((p * oh + oy) * ow + ox) * es;
                double gv = forward ? 0 : tr->load(yo) / div;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        int64_t i = (p * h + iy) * w + ix;
                        if (forward) acc += tr->load(x + i * es);
                        else dx[i] += gv;
                    }
                if (forward) tr->store(yo, acc / div);
            }
        }
}

static oar_status adaptive_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int nd = x->ndim;
    int64_t planes = x->numel / (x->shape[nd - 2] * x->shape[nd - 1]);
    adaptive_walk(true, &oar_dtypes[x->dtype], planes, x->shape[nd - 2], x->shape[nd - 1], a[0].ints[0],
                  a[0].ints[1], oar_tensor_ptr(x), oar_tensor_ptr(out[0]), NULL);
    return OAR_OK;
}

static oar_status adaptive_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    oar_attr a[1] = {oar_attr_ints(x->shape, x->ndim)};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_adaptive_avg_pool2d_backward, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_adaptive_avg_pool2d = {
    .name = "adaptive_avg_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"output_size", OAR_ATTR_INTS}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = adaptive_infer, .reference = adaptive_ref, .grad = adaptive_grad,
};

/* ---- adaptive_avg_pool2d_backward(grad; input_shape): the adjoint of adaptive_avg_pool2d;
 * grad's last two dims give the output size. */
static oar_status adaptive_bwd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "adaptive_avg_pool2d_backward";
    const oar_tensor *gy = in[0];
    oar_status st = oar_check_float(op, gy, "grad");
    if (st != OAR_OK) return st;
    if (a[0].n < 3 || a[0].n > 4)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have 3 or 4 entries, got %d", op, a[0].n);
    if ((st = check_input_shape(op, "input_shape", a[0].ints, a[0].n)) != OAR_OK) return st;
    if (gy->ndim != a[0].n || memcmp(gy->shape, a[0].ints, sizeof(int64_t) * (size_t)(gy->ndim - 2))) {
        char s[128], t[128];
        oar_format_shape(gy->shape, gy->ndim, s, sizeof s);
        oar_format_shape(a[0].ints, a[0].n, t, sizeof t);
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad to match input_shape %s but in its last two dims, got %s",
                         op, t, s);
    }
    out->dtype = gy->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status adaptive_bwd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    const oar_tensor *gy = in[0], *dx = out[0];
    int nd = dx->ndim;
    int64_t h = dx->shape[nd - 2], w = dx->shape[nd - 1];
    double *acc = zeroed_doubles(dx->numel);
    if (!acc) return OAR_ERR_OOM;
    adaptive_walk(false, &oar_dtypes[gy->dtype], dx->numel / (h * w), h, w, gy->shape[nd - 2], gy->shape[nd - 1],
                  NULL, oar_tensor_ptr(gy), acc);
    store_doubles(out[0], acc);
    return OAR_OK;
}

static oar_status adaptive_bwd_grad(oar_grad_ctx *g) {
    const oar_tensor *gy = g->in[0];
    oar_attr a[1] = {oar_attr_ints(gy->shape + gy->ndim - 2, 2)};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_adaptive_avg_pool2d, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_adaptive_avg_pool2d_backward = {
    .name = "adaptive_avg_pool2d_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"input_shape", OAR_ATTR_INTS}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = adaptive_bwd_infer, .reference = adaptive_bwd_ref, .grad = adaptive_bwd_grad,
};

/* ================================================================ public API */
static oar_tensor *pool_public(oar_op_id op, oar_tensor *x, const oar_pool_opts *o) {
    const char *name = oar_op_table[op]->name;
    if (!o) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected options with the kernel size, got NULL opts", name);
        return NULL;
    }
    int64_t s[2], d[2];
    for (int i = 0; i < 2; i++) {
        s[i] = o->stride[i] ? o->stride[i] : o->kernel[i];
        d[i] = o->dilation[i] ? o->dilation[i] : 1;
    }
    oar_tensor *in[1] = {x};
    if (op == OAR_OP_max_pool2d) {
        oar_attr a[5] = {oar_attr_ints(o->kernel, 2), oar_attr_ints(s, 2), oar_attr_ints(o->padding, 2),
                         oar_attr_ints(d, 2), oar_attr_int(o->ceil_mode)};
        return oar_op_call1(op, in, 1, a);
    }
    if (d[0] != 1 || d[1] != 1) {
        oar_error(OAR_ERR_INVALID_ARG, "avg_pool2d: expected dilation 1 (average pooling has no dilation), got "
                                       "[%lld, %lld]", (long long)d[0], (long long)d[1]);
        return NULL;
    }
    oar_attr a[5] = {oar_attr_ints(o->kernel, 2), oar_attr_ints(s, 2), oar_attr_ints(o->padding, 2),
                     oar_attr_int(o->ceil_mode), oar_attr_int(!o->exclude_pad)};
    return oar_op_call1(op, in, 1, a);
}

oar_tensor *oar_max_pool2d(oar_tensor *x, const oar_pool_opts *opts) { return pool_public(OAR_OP_max_pool2d, x, opts); }
oar_tensor *oar_avg_pool2d(oar_tensor *x, const oar_pool_opts *opts) { return pool_public(OAR_OP_avg_pool2d, x, opts); }

oar_tensor *oar_adaptive_avg_pool2d(oar_tensor *x, int64_t out_h, int64_t out_w) {
    int64_t size[2] = {out_h, out_w};
    oar_attr a[1] = {oar_attr_ints(size, 2)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_adaptive_avg_pool2d, in, 1, a);
}
