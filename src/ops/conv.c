/* Convolutions on NCHW data: conv1d, conv2d, conv_transpose2d and conv2d's backward ops.
 * Each of them is one of three linear maps of the same loop nest: the forward map (x, w) -> y,
 * its adjoint in x (conv2d_grad_input, which is also conv_transpose2d) and its adjoint in w
 * (conv2d_grad_weight). Every gradient rule is again one of the three, so gradients of any
 * order stay convolutions. conv1d is the 2-d nest with a unit height. */
#include "ops/op.h"

#include <string.h>

/* The loop nest's geometry. The output grid (oh, ow) may be smaller than the full conv
 * output: after conv_transpose2d with output_padding, the conv of its output is longer than
 * the grid it came from, and the adjoints then cover only that grid. */
typedef struct geom {
    int64_t n, ci, h, w;  /* x [n, ci, h, w] */
    int64_t co, kh, kw;   /* weight [co, ci / groups, kh, kw] */
    int64_t oh, ow;       /* y [n, co, oh, ow] */
    int64_t sh, sw, ph, pw, dh, dw, groups;
} geom;

/* Sizes are computed in 128 bits: a model file may pair a huge dim with a huge attribute, and
 * that must be an error, not an overflow. Results past int64 saturate (and are then refused). */
typedef __int128 wide;
static int64_t sat64(wide v) { return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v; }

static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    wide span = (wide)in + 2 * (wide)p - (wide)d * (k - 1) - 1;
    return span < 0 ? 0 : sat64(span / s + 1);
}

/* Reads one spatial parameter list (stride, padding, ...) with nsp entries, each >= min. */
static oar_status read_list(const char *op, const char *what, const oar_attr *a, int nsp, int64_t min,
                            int64_t *out) {
    char s[128];
    if (a->n != nsp) {
        oar_format_shape(a->ints, a->n, s, sizeof s);
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s to have %d entr%s, got %s", op, what, nsp,
                         nsp == 1 ? "y" : "ies", s);
    }
    for (int i = 0; i < nsp; i++) {
        if (a->ints[i] < min) {
            oar_format_shape(a->ints, a->n, s, sizeof s);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s entries >= %lld, got %s", op, what,
                             (long long)min, s);
        }
        out[i] = a->ints[i];
    }
    return OAR_OK;
}

/* Stride, padding, dilation and groups into g. 1-d convs get the neutral height parameters. */
static oar_status read_params(const char *op, const oar_attr *stride, const oar_attr *pad,
                              const oar_attr *dil, const oar_attr *groups, int nsp, geom *g) {
    int64_t s[2] = {1, 1}, p[2] = {0, 0}, d[2] = {1, 1};
    oar_status st;
    if ((st = read_list(op, "stride", stride, nsp, 1, s + 2 - nsp)) != OAR_OK) return st;
    if ((st = read_list(op, "padding", pad, nsp, 0, p + 2 - nsp)) != OAR_OK) return st;
    if ((st = read_list(op, "dilation", dil, nsp, 1, d + 2 - nsp)) != OAR_OK) return st;
    if (groups->i < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected groups >= 1, got %lld", op, (long long)groups->i);
    g->sh = s[0], g->sw = s[1], g->ph = p[0], g->pw = p[1], g->dh = d[0], g->dw = d[1];
    g->groups = groups->i;
    return OAR_OK;
}

/* Shapes of x and weight (4-d, height 1 for conv1d) into g, checked; the full output size is
 * left in oh, ow. xn/wn name the tensors in messages ("x" or "input_shape"). */
static oar_status fill_geom(const char *op, const int64_t *xs, const int64_t *ws, const char *xn,
                            const char *wn, int nsp, geom *g) {
    g->n = xs[0], g->ci = xs[1], g->h = xs[2], g->w = xs[3];
    g->co = ws[0], g->kh = ws[2], g->kw = ws[3];
    if (g->co % g->groups != 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.shape[0] (out channels) divisible by groups, got "
                                        "%lld %% %lld != 0", op, wn, (long long)g->co, (long long)g->groups);
    if ((wide)ws[1] * g->groups != g->ci)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.shape[1] * groups == %s.shape[1], got %lld * %lld "
                                        "!= %lld", op, wn, xn, (long long)ws[1], (long long)g->groups,
                         (long long)g->ci);
    if (g->ci < 1 || g->kh < 1 || g->kw < 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected at least one input channel and a kernel of size >= 1, "
                                        "got %lld channels and kernel %lld x %lld", op, (long long)g->ci,
                         (long long)g->kh, (long long)g->kw);
    g->oh = conv_out_size(g->h, g->kh, g->sh, g->ph, g->dh);
    g->ow = conv_out_size(g->w, g->kw, g->sw, g->pw, g->dw);
    if (g->oh == INT64_MAX || g->ow == INT64_MAX)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one from input "
                                        "%lld x %lld and padding %lld x %lld", op, (long long)g->h,
                         (long long)g->w, (long long)g->ph, (long long)g->pw);
    if (g->oh < 1 || g->ow < 1) {
        int64_t in[2] = {sat64((wide)g->h + 2 * (wide)g->ph), sat64((wide)g->w + 2 * (wide)g->pw)};
        int64_t k[2] = {sat64((wide)g->dh * (g->kh - 1) + 1), sat64((wide)g->dw * (g->kw - 1) + 1)};
        char a[64], b[64];
        oar_format_shape(in + 2 - nsp, nsp, a, sizeof a);
        oar_format_shape(k + 2 - nsp, nsp, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected the padded input %s to be at least as large as the "
                                        "dilated kernel %s; use a smaller kernel or dilation, or more padding",
                         op, a, b);
    }
    return OAR_OK;
}

static oar_status check_ndim(const char *op, const oar_tensor *t, const char *name, int nd, const char *layout) {
    if (t->ndim == nd) return OAR_OK;
    char s[128];
    oar_format_shape(t->shape, t->ndim, s, sizeof s);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s to be %d-d %s, got shape %s%s", op, name, nd, layout, s,
                     nd == 4 && t->ndim == 3 && !strcmp(name, "x") ? "; add a batch dim with oar_unsqueeze(x, 0)" : "");
}

/* Inputs float and of one dtype; NULL entries (an absent bias) are skipped. */
static oar_status check_dtypes(const char *op, oar_tensor *const *in, int n, const char *const *names) {
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        oar_status st = oar_check_float(op, in[i], names[i]);
        if (st != OAR_OK) return st;
        if (in[i]->dtype != in[0]->dtype)
            return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have %s's dtype %s, got %s; convert it with "
                                            "oar_cast", op, names[i], names[0], oar_dtype_name(in[0]->dtype),
                             oar_dtype_name(in[i]->dtype));
    }
    return OAR_OK;
}

static oar_status check_bias(const char *op, const oar_tensor *b, int64_t channels) {
    if (!b || (b->ndim == 1 && b->shape[0] == channels)) return OAR_OK;
    char s[128];
    oar_format_shape(b->shape, b->ndim, s, sizeof s);
    return oar_error(OAR_ERR_SHAPE, "%s: expected bias of shape [%lld] (one per output channel), got %s", op,
                     (long long)channels, s);
}

/* An output grid given by a tensor must fit in the full conv output (see geom). */
static oar_status check_grid(const char *op, const oar_tensor *gy, const geom *g, const char *xn) {
    if (gy->shape[2] <= g->oh && gy->shape[3] <= g->ow) return OAR_OK;
    return oar_error(OAR_ERR_SHAPE, "%s: expected grad's spatial size to be at most the conv output [%lld, %lld] "
                                    "of %s, got [%lld, %lld]", op, (long long)g->oh, (long long)g->ow, xn,
                     (long long)gy->shape[2], (long long)gy->shape[3]);
}

/* ---- the reference loop nest, in double */
typedef enum { MAP_FORWARD, MAP_GRAD_INPUT, MAP_GRAD_WEIGHT } conv_map;

/* Visits every (output position, weight tap) pair that lands inside x; the map decides which
 * of the three operands accumulates. */
static void conv_nest(conv_map m, const geom *g, double *x, double *w, double *y) {
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups;
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t co = 0; co < g->co; co++) {
            int64_t c0 = co / cog * cig;
            for (int64_t oy = 0; oy < g->oh; oy++)
                for (int64_t ox = 0; ox < g->ow; ox++) {
                    double *yo = y + ((n * g->co + co) * g->oh + oy) * g->ow + ox;
                    for (int64_t ci = 0; ci < cig; ci++)
                        for (int64_t ky = 0; ky < g->kh; ky++) {
                            int64_t iy = oy * g->sh - g->ph + ky * g->dh;
                            if (iy < 0 || iy >= g->h) continue;
                            for (int64_t kx = 0; kx < g->kw; kx++) {
                                int64_t ix = ox * g->sw - g->pw + kx * g->dw;
                                if (ix < 0 || ix >= g->w) continue;
                                double *xi = x + ((n * g->ci + c0 + ci) * g->h + iy) * g->w + ix;
                                double *wk = w + ((co * cig + ci) * g->kh + ky) * g->kw + kx;
                                switch (m) {
                                case MAP_FORWARD: *yo += *xi * *wk; break;
                                case MAP_GRAD_INPUT: *xi += *yo * *wk; break;
                                case MAP_GRAD_WEIGHT: *wk += *yo * *xi; break;
                                }
                            }
                        }
                }
        }
}

/* A tensor as a double array: f64 data in place, other float types converted. */
static double *dbuf_get(const oar_tensor *t, bool load) {
    if (t->dtype == OAR_F64) return (double *)oar_tensor_ptr(t);
    double *p = oar_alloc(sizeof(double) * (size_t)t->numel);
    if (!p || !load) return p;
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    const char *src = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] = tr->load(src + i * (int64_t)tr->size);
    return p;
}

static void dbuf_put(double *p, const oar_tensor *t, bool store) {
    if (t->dtype == OAR_F64) return;
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    char *dst = oar_tensor_ptr(t);
    if (store)
        for (int64_t i = 0; i < t->numel; i++) tr->store(dst + i * (int64_t)tr->size, p[i]);
    oar_free(p, sizeof(double) * (size_t)t->numel);
}

/* Runs map m; the operand it accumulates into is the op's output, which starts at the bias
 * (per channel, dim 1) or at zero. */
static oar_status conv_ref_run(conv_map m, const geom *g, oar_tensor *x, oar_tensor *w, oar_tensor *y,
                               const oar_tensor *bias) {
    oar_tensor *t[3] = {x, w, y};
    int oi = m == MAP_FORWARD ? 2 : m == MAP_GRAD_INPUT ? 0 : 1;
    if (t[oi]->numel == 0) return OAR_OK;
    double *d[3] = {0};
    oar_status st = OAR_OK;
    for (int i = 0; i < 3 && st == OAR_OK; i++)
        if (!(d[i] = dbuf_get(t[i], i != oi))) st = OAR_ERR_OOM;
    if (st == OAR_OK) {
        oar_tensor *o = t[oi];
        memset(d[oi], 0, sizeof(double) * (size_t)o->numel);
        if (bias) {
            const oar_dtype_traits *tr = &oar_dtypes[bias->dtype];
            int64_t ch = o->shape[1], plane = o->numel / (o->shape[0] * ch);
            for (int64_t i = 0; i < o->numel; i++)
                d[oi][i] = tr->load(oar_tensor_ptr(bias) + (i / plane % ch) * (int64_t)tr->size);
        }
        conv_nest(m, g, d[0], d[1], d[2]);
    }
    for (int i = 0; i < 3; i++)
        if (d[i]) dbuf_put(d[i], t[i], st == OAR_OK && i == oi);
    return st;
}

/* 1-d shapes [n, c, l] viewed as 4-d [n, c, 1, l]. */
static void as_4d(const int64_t *s3, int64_t *s4) {
    s4[0] = s3[0], s4[1] = s3[1], s4[2] = 1, s4[3] = s3[2];
}

/* ---- gradient helpers: the three maps as op calls */
/* conv2d of x with w under attrs spdg (stride, padding, dilation, groups), cut to the grid
 * (oh, ow) of the tensor whose adjoint is wanted (see geom). */
static oar_tensor *conv_call(oar_tensor *x, oar_tensor *w, const oar_attr *spdg, int64_t oh, int64_t ow) {
    oar_tensor *in[3] = {x, w, NULL};
    oar_tensor *y = oar_op_call1(OAR_OP_conv2d, in, 3, spdg);
    if (y && y->shape[2] > oh) y = oar_slice(y, 2, 0, oh, 1);
    if (y && y->shape[3] > ow) y = oar_slice(y, 3, 0, ow, 1);
    return y;
}

static oar_tensor *grad_input_call(oar_tensor *gy, oar_tensor *w, const int64_t *xshape, const oar_attr *spdg) {
    oar_attr a[5] = {oar_attr_ints(xshape, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_tensor *in[2] = {gy, w};
    return oar_op_call1(OAR_OP_conv2d_grad_input, in, 2, a);
}

static oar_tensor *grad_weight_call(oar_tensor *x, oar_tensor *gy, const int64_t *wshape, const oar_attr *spdg) {
    oar_attr a[5] = {oar_attr_ints(wshape, 4), spdg[0], spdg[1], spdg[2], spdg[3]};
    oar_tensor *in[2] = {x, gy};
    return oar_op_call1(OAR_OP_conv2d_grad_weight, in, 2, a);
}

/* Sums over every dim but the channels: [n, c, h, w] or [n, c, l]. */
static oar_tensor *bias_grad(oar_tensor *gy) {
    int dims[3] = {0, 2, 3};
    return oar_sum(gy, dims, gy->ndim - 1, false);
}

/* Every requested gradient must have been produced. */
static oar_status grads_done(const oar_grad_ctx *g) {
    for (int i = 0; i < g->n_in; i++)
        if (g->needs[i] && g->in[i] && !g->gin[i])
            return oar_last_status() != OAR_OK ? oar_last_status()
                                               : oar_error(OAR_ERR_INTERNAL, "conv: a gradient rule produced no "
                                                                             "gradient; please report this");
    return OAR_OK;
}

static const char *const XWB[3] = {"x", "weight", "bias"};

/* ---- conv2d(x, weight, bias?; stride, padding, dilation, groups) */
static oar_status conv2d_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    geom g;
    oar_status st;
    if ((st = check_dtypes("conv2d", in, 3, XWB)) != OAR_OK) return st;
    if ((st = check_ndim("conv2d", in[0], "x", 4, "[N, C, H, W]")) != OAR_OK) return st;
    if ((st = check_ndim("conv2d", in[1], "weight", 4, "[out, in / groups, kh, kw]")) != OAR_OK) return st;
    if ((st = read_params("conv2d", &a[0], &a[1], &a[2], &a[3], 2, &g)) != OAR_OK) return st;
    if ((st = fill_geom("conv2d", in[0]->shape, in[1]->shape, "x", "weight", 2, &g)) != OAR_OK) return st;
    if ((st = check_bias("conv2d", in[2], g.co)) != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 4;
    out->shape[0] = g.n, out->shape[1] = g.co, out->shape[2] = g.oh, out->shape[3] = g.ow;
    *n_out = 1;
    return OAR_OK;
}

static oar_status conv2d_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    geom g;
    read_params("conv2d", &a[0], &a[1], &a[2], &a[3], 2, &g);
    fill_geom("conv2d", in[0]->shape, in[1]->shape, "x", "weight", 2, &g);
    return conv_ref_run(MAP_FORWARD, &g, in[0], in[1], out[0], in[2]);
}

/* The incoming gradient is often a broadcast (from sum): made dense once here rather than by
 * dispatch for each backward op that reads it. */
static oar_tensor *dense(oar_tensor *t) { return t && !t->contiguous ? oar_contiguous(t) : t; }

static oar_status conv2d_grad(oar_grad_ctx *g) {
    oar_tensor *gy = dense(g->gout[0]), *x = g->in[0], *w = g->in[1];
    if (g->needs[0]) g->gin[0] = grad_input_call(gy, w, x->shape, g->attrs);
    if (g->needs[1]) g->gin[1] = grad_weight_call(x, gy, w->shape, g->attrs);
    if (g->needs[2]) g->gin[2] = bias_grad(gy);
    return grads_done(g);
}

#define CONV_ATTRS(ONE, ZERO) {"stride", OAR_ATTR_INTS, ONE}, {"padding", OAR_ATTR_INTS, ZERO}, \
                   {"dilation", OAR_ATTR_INTS, ONE}, {"groups", OAR_ATTR_INT, "1"}

const oar_op_def oar_opdef_conv2d = {
    .name = "conv2d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 4, .attrs = {CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = conv2d_infer, .reference = conv2d_ref, .grad = conv2d_grad,
};

/* ---- conv2d_grad_input(grad, weight; input_shape, stride, padding, dilation, groups):
 * the adjoint of conv2d in x, onto a zero tensor of input_shape. */
static oar_status grad_input_geom(oar_tensor *const *in, const oar_attr *a, geom *g) {
    static const char *const names[2] = {"grad", "weight"};
    const char *op = "conv2d_grad_input";
    oar_status st;
    if ((st = check_dtypes(op, in, 2, names)) != OAR_OK) return st;
    if ((st = check_ndim(op, in[0], "grad", 4, "[N, out, oh, ow]")) != OAR_OK) return st;
    if ((st = check_ndim(op, in[1], "weight", 4, "[out, in / groups, kh, kw]")) != OAR_OK) return st;
    if (a[0].n != 4)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have 4 entries [N, C, H, W], got %d",
                         op, a[0].n);
    for (int i = 0; i < 4; i++)
        if (a[0].ints[i] < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape entries >= 0, got %lld", op,
                             (long long)a[0].ints[i]);
    if ((st = read_params(op, &a[1], &a[2], &a[3], &a[4], 2, g)) != OAR_OK) return st;
    if ((st = fill_geom(op, a[0].ints, in[1]->shape, "input_shape", "weight", 2, g)) != OAR_OK) return st;
    if (in[0]->shape[0] != g->n || in[0]->shape[1] != g->co)
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad.shape[0:2] == [%lld, %lld] (batch of input_shape, "
                                        "weight.shape[0]), got [%lld, %lld]", op, (long long)g->n,
                         (long long)g->co, (long long)in[0]->shape[0], (long long)in[0]->shape[1]);
    if ((st = check_grid(op, in[0], g, "input_shape")) != OAR_OK) return st;
    g->oh = in[0]->shape[2], g->ow = in[0]->shape[3];
    return OAR_OK;
}

static oar_status grad_input_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    geom g;
    oar_status st = grad_input_geom(in, a, &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 4;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * 4);
    *n_out = 1;
    return OAR_OK;
}

static oar_status grad_input_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    geom g;
    grad_input_geom(in, a, &g);
    return conv_ref_run(MAP_GRAD_INPUT, &g, out[0], in[1], in[0], NULL);
}

/* dx = A_w(gy): linear in gy (adjoint: conv2d) and in w (adjoint: grad_weight). */
static oar_status grad_input_grad(oar_grad_ctx *g) {
    oar_tensor *ggx = g->gout[0], *gy = g->in[0], *w = g->in[1];
    if (g->needs[0]) g->gin[0] = conv_call(ggx, w, g->attrs + 1, gy->shape[2], gy->shape[3]);
    if (g->needs[1]) g->gin[1] = grad_weight_call(ggx, gy, w->shape, g->attrs + 1);
    return grads_done(g);
}

const oar_op_def oar_opdef_conv2d_grad_input = {
    .name = "conv2d_grad_input", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_input_infer, .reference = grad_input_ref, .grad = grad_input_grad,
};

/* ---- conv2d_grad_weight(x, grad; weight_shape, stride, padding, dilation, groups):
 * the adjoint of conv2d in the weight. */
static oar_status grad_weight_geom(oar_tensor *const *in, const oar_attr *a, geom *g) {
    static const char *const names[2] = {"x", "grad"};
    const char *op = "conv2d_grad_weight";
    oar_status st;
    if ((st = check_dtypes(op, in, 2, names)) != OAR_OK) return st;
    if ((st = check_ndim(op, in[0], "x", 4, "[N, C, H, W]")) != OAR_OK) return st;
    if ((st = check_ndim(op, in[1], "grad", 4, "[N, out, oh, ow]")) != OAR_OK) return st;
    if (a[0].n != 4)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected weight_shape to have 4 entries [out, in / groups, "
                                              "kh, kw], got %d", op, a[0].n);
    if ((st = read_params(op, &a[1], &a[2], &a[3], &a[4], 2, g)) != OAR_OK) return st;
    if ((st = fill_geom(op, in[0]->shape, a[0].ints, "x", "weight_shape", 2, g)) != OAR_OK) return st;
    if (in[1]->shape[0] != g->n || in[1]->shape[1] != g->co)
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad.shape[0:2] == [%lld, %lld] (x.shape[0], "
                                        "weight_shape[0]), got [%lld, %lld]", op, (long long)g->n,
                         (long long)g->co, (long long)in[1]->shape[0], (long long)in[1]->shape[1]);
    if ((st = check_grid(op, in[1], g, "x")) != OAR_OK) return st;
    g->oh = in[1]->shape[2], g->ow = in[1]->shape[3];
    return OAR_OK;
}

static oar_status grad_weight_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    geom g;
    oar_status st = grad_weight_geom(in, a, &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 4;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * 4);
    *n_out = 1;
    return OAR_OK;
}

static oar_status grad_weight_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    geom g;
    grad_weight_geom(in, a, &g);
    return conv_ref_run(MAP_GRAD_WEIGHT, &g, in[0], out[0], in[1], NULL);
}

/* dw = B(x, gy): linear in x (adjoint: grad_input) and in gy (adjoint: conv2d). */
static oar_status grad_weight_grad(oar_grad_ctx *g) {
    oar_tensor *ggw = g->gout[0], *x = g->in[0], *gy = g->in[1];
    if (g->needs[0]) g->gin[0] = grad_input_call(gy, ggw, x->shape, g->attrs + 1);
    if (g->needs[1]) g->gin[1] = conv_call(x, ggw, g->attrs + 1, gy->shape[2], gy->shape[3]);
    return grads_done(g);
}

const oar_op_def oar_opdef_conv2d_grad_weight = {
    .name = "conv2d_grad_weight", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"weight_shape", OAR_ATTR_INTS}, CONV_ATTRS("1,1", "0,0")},
    .flags = OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = grad_weight_infer, .reference = grad_weight_ref, .grad = grad_weight_grad,
};

/* ---- conv_transpose2d(x, weight, bias?; stride, padding, output_padding, dilation, groups)
 * with weight [in, out / groups, kh, kw]: the adjoint of conv2d(y, weight), i.e. grad_input
 * with x as the grad. Its geometry is that conv's, with the roles of x and y swapped. */
static oar_status transpose_geom(oar_tensor *const *in, const oar_attr *a, geom *g, int64_t *yshape) {
    const char *op = "conv_transpose2d";
    oar_status st;
    if ((st = check_dtypes(op, in, 3, XWB)) != OAR_OK) return st;
    if ((st = check_ndim(op, in[0], "x", 4, "[N, C, H, W]")) != OAR_OK) return st;
    if ((st = check_ndim(op, in[1], "weight", 4, "[in, out / groups, kh, kw]")) != OAR_OK) return st;
    if ((st = read_params(op, &a[0], &a[1], &a[3], &a[4], 2, g)) != OAR_OK) return st;
    int64_t opad[2] = {0, 0};
    if ((st = read_list(op, "output_padding", &a[2], 2, 0, opad)) != OAR_OK) return st;
    const oar_tensor *x = in[0], *w = in[1];
    if (x->shape[1] != w->shape[0])
        return oar_error(OAR_ERR_SHAPE, "%s: expected weight.shape[0] == x.shape[1] (in channels), got %lld != %lld",
                         op, (long long)w->shape[0], (long long)x->shape[1]);
    if (w->shape[0] % g->groups != 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected weight.shape[0] (in channels) divisible by groups, got "
                                        "%lld %% %lld != 0", op, (long long)w->shape[0], (long long)g->groups);
    int64_t s[2] = {g->sh, g->sw}, d[2] = {g->dh, g->dw}, p[2] = {g->ph, g->pw};
    for (int i = 0; i < 2; i++)
        if (opad[i] >= s[i] && opad[i] >= d[i])
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected output_padding smaller than stride or dilation, "
                                                  "got output_padding %lld with stride %lld and dilation %lld", op,
                             (long long)opad[i], (long long)s[i], (long long)d[i]);
    yshape[0] = x->shape[0];
    yshape[1] = sat64((wide)w->shape[1] * g->groups);
    for (int i = 0; i < 2; i++) {
        yshape[2 + i] = sat64(((wide)x->shape[2 + i] - 1) * s[i] - 2 * (wide)p[i] +
                              (wide)d[i] * (w->shape[2 + i] - 1) + opad[i] + 1);
        if (yshape[1] == INT64_MAX || yshape[2 + i] == INT64_MAX)
            return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one along dim "
                                            "%d; check stride, dilation and groups", op, yshape[1] == INT64_MAX ? 1 : 2 + i);
        if (yshape[2 + i] < 1 || x->shape[2 + i] < 1)
            return oar_error(OAR_ERR_SHAPE, "%s: expected a positive output size, got %lld along dim %d for input "
                                            "size %lld; use less padding", op, (long long)yshape[2 + i], 2 + i,
                             (long long)x->shape[2 + i]);
    }
    if ((st = check_bias(op, in[2], yshape[1])) != OAR_OK) return st;
    /* the conv from y back to x: weight [in, out / groups, kh, kw] is its [co, ci / groups, ..] */
    if ((st = fill_geom(op, yshape, w->shape, "output", "weight", 2, g)) != OAR_OK) return st;
    g->oh = x->shape[2], g->ow = x->shape[3];
    return OAR_OK;
}

static oar_status transpose_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    geom g;
    oar_status st = transpose_geom(in, a, &g, out->shape);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 4;
    *n_out = 1;
    return OAR_OK;
}

static oar_status transpose_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    geom g;
    int64_t ys[4];
    transpose_geom(in, a, &g, ys);
    return conv_ref_run(MAP_GRAD_INPUT, &g, out[0], in[1], in[0], in[2]);
}

static oar_status transpose_grad(oar_grad_ctx *g) {
    oar_tensor *gy = dense(g->gout[0]), *x = g->in[0], *w = g->in[1];
    oar_attr spdg[4] = {g->attrs[0], g->attrs[1], g->attrs[3], g->attrs[4]};
    if (g->needs[0]) g->gin[0] = conv_call(gy, w, spdg, x->shape[2], x->shape[3]);
    if (g->needs[1]) g->gin[1] = grad_weight_call(gy, x, w->shape, spdg);
    if (g->needs[2]) g->gin[2] = bias_grad(gy);
    return grads_done(g);
}

const oar_op_def oar_opdef_conv_transpose2d = {
    .name = "conv_transpose2d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 5,
    .attrs = {{"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS}, {"output_padding", OAR_ATTR_INTS},
              {"dilation", OAR_ATTR_INTS}, {"groups", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = transpose_infer, .reference = transpose_ref, .grad = transpose_grad,
};

/* ---- conv1d(x [N, C, L], weight [out, C / groups, k], bias?; stride, padding, dilation, groups) */
static oar_status conv1d_geom(oar_tensor *const *in, const oar_attr *a, geom *g) {
    oar_status st;
    if ((st = check_dtypes("conv1d", in, 3, XWB)) != OAR_OK) return st;
    if ((st = check_ndim("conv1d", in[0], "x", 3, "[N, C, L]")) != OAR_OK) return st;
    if ((st = check_ndim("conv1d", in[1], "weight", 3, "[out, in / groups, k]")) != OAR_OK) return st;
    if ((st = read_params("conv1d", &a[0], &a[1], &a[2], &a[3], 1, g)) != OAR_OK) return st;
    int64_t xs[4], ws[4];
    as_4d(in[0]->shape, xs);
    as_4d(in[1]->shape, ws);
    if ((st = fill_geom("conv1d", xs, ws, "x", "weight", 1, g)) != OAR_OK) return st;
    return check_bias("conv1d", in[2], g->co);
}

static oar_status conv1d_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    geom g;
    oar_status st = conv1d_geom(in, a, &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = 3;
    out->shape[0] = g.n, out->shape[1] = g.co, out->shape[2] = g.ow;
    *n_out = 1;
    return OAR_OK;
}

static oar_status conv1d_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                             int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    geom g;
    conv1d_geom(in, a, &g);
    return conv_ref_run(MAP_FORWARD, &g, in[0], in[1], out[0], in[2]);
}

/* The rule runs the 2-d backward ops on unit-height views. */
static oar_status conv1d_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1];
    oar_tensor *gy4 = oar_unsqueeze(dense(g->gout[0]), 2);
    int64_t s[2] = {1, g->attrs[0].ints[0]}, p[2] = {0, g->attrs[1].ints[0]}, d[2] = {1, g->attrs[2].ints[0]};
    oar_attr spdg[4] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(d, 2), g->attrs[3]};
    if (g->needs[0]) {
        int64_t xs[4];
        as_4d(x->shape, xs);
        g->gin[0] = oar_squeeze(grad_input_call(gy4, oar_unsqueeze(w, 2), xs, spdg), 2);
    }
    if (g->needs[1]) {
        int64_t ws[4];
        as_4d(w->shape, ws);
        g->gin[1] = oar_squeeze(grad_weight_call(oar_unsqueeze(x, 2), gy4, ws, spdg), 2);
    }
    if (g->needs[2]) g->gin[2] = bias_grad(g->gout[0]);
    return grads_done(g);
}

const oar_op_def oar_opdef_conv1d = {
    .name = "conv1d", .n_inputs = 3, .n_outputs = 1, .n_attrs = 4, .attrs = {CONV_ATTRS("1", "0")},
    .flags = OAR_OPF_AMP_ALLOW | OAR_OPF_QUANTIZABLE, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 1u << 2,
    .infer = conv1d_infer, .reference = conv1d_ref, .grad = conv1d_grad,
};

/* ---- public API: option structs resolved to explicit attributes (zero fields: defaults) */
static int64_t or_default(int64_t v, int64_t def) { return v ? v : def; }

static oar_tensor *conv_public(oar_op_id op, oar_tensor *x, oar_tensor *w, oar_tensor *b, const oar_conv_opts *o,
                               int nsp) {
    static const oar_conv_opts defaults;
    if (!o) o = &defaults;
    int64_t s[2], p[2], d[2], opad[2];
    for (int i = 0; i < nsp; i++) {
        s[i] = or_default(o->stride[i], 1);
        p[i] = o->padding[i];
        d[i] = or_default(o->dilation[i], 1);
        opad[i] = o->output_padding[i];
    }
    oar_attr groups = oar_attr_int(or_default(o->groups, 1));
    oar_tensor *in[3] = {x, w, b};
    if (op == OAR_OP_conv_transpose2d) {
        oar_attr a[5] = {oar_attr_ints(s, 2), oar_attr_ints(p, 2), oar_attr_ints(opad, 2), oar_attr_ints(d, 2), groups};
        return oar_op_call1(op, in, 3, a);
    }
    oar_attr a[4] = {oar_attr_ints(s, nsp), oar_attr_ints(p, nsp), oar_attr_ints(d, nsp), groups};
    return oar_op_call1(op, in, 3, a);
}

oar_tensor *oar_conv1d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv1d, x, weight, bias, opts, 1);
}

oar_tensor *oar_conv2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv2d, x, weight, bias, opts, 2);
}

oar_tensor *oar_conv_transpose2d(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, const oar_conv_opts *opts) {
    return conv_public(OAR_OP_conv_transpose2d, x, weight, bias, opts, 2);
}
