/* Normalization layers: batch_norm, layer_norm, group_norm. Each returns the normalized
 * tensor and, as hidden outputs, the mean and inverse standard deviation it used, so the
 * gradient rule needs no second pass over x. The rules are written with ops; under double
 * backward gradients also reach the hidden statistics, and the rules account for them. */
#include "ops/op.h"

#include "ops/batch_norm_factor.h"

#include <math.h>
#include <string.h>

/* ---- shared checks */

static oar_status shape_mismatch(const char *op, const char *what, const int64_t *want, int want_nd,
                                 const oar_tensor *got) {
    char a[128], b[128];
    oar_format_shape(want, want_nd, a, sizeof a);
    oar_format_shape(got->shape, got->ndim, b, sizeof b);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s, got %s", op, what, a, b);
}

/* weight/bias: absent, or of dtype want and the given shape. want is x's dtype, except for
 * f16/bf16 inputs with f32 parameters (norm_param_dtype). */
static oar_status check_affine_as(const char *op, const char *what, const oar_tensor *x, const oar_tensor *p,
                                  const int64_t *shape, int ndim, oar_dtype want) {
    if (!p) return OAR_OK;
    if (p->dtype != want)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype %s (%s), got %s; convert it with oar_cast", op,
                         what, oar_dtype_name(want),
                         want == x->dtype ? "the input's"
                                          : "as the first given parameter: an f16/bf16 input takes f32 parameters",
                         oar_dtype_name(p->dtype));
    if (p->ndim != ndim || memcmp(p->shape, shape, sizeof(int64_t) * (size_t)ndim) != 0)
        return shape_mismatch(op, what, shape, ndim, p);
    return OAR_OK;
}

/* The dtype of a norm's per-channel values (weight, bias, the hidden statistics): x's, or f32
 * for an f16/bf16 x with f32 weight or bias (see oar_batch_norm_param_dtype). */
static oar_dtype norm_param_dtype(const oar_tensor *x, const oar_tensor *w, const oar_tensor *b) {
    return oar_batch_norm_param_dtype(x, w, b, NULL);
}

/* A rule for same-dtype inputs run on an f16/bf16 x with f32 statistics (pdt): the composed
 * rules (double backward, inference-mode batch_norm, group_norm) run on f32 copies of x and of
 * the gradient reaching y, and dx is rounded back to x's dtype. */
static oar_status grad_wide(oar_grad_ctx *g, oar_status (*rule)(oar_grad_ctx *), oar_dtype pdt) {
    oar_tensor *x = g->in[0], *gy = g->gout[0];
    oar_tensor *in[OAR_MAX_INPUTS] = {0}, *gout[3] = {gy ? oar_cast(gy, pdt) : NULL, g->gout[1], g->gout[2]};
    for (int i = 0; i < g->n_in && i < OAR_MAX_INPUTS; i++) in[i] = g->in[i];
    if (!(in[0] = oar_cast(x, pdt)) || (gy && !gout[0])) return oar_last_status();
    oar_grad_ctx wide = *g;
    wide.in = in;
    wide.gout = gout;
    oar_status st = rule(&wide);
    if (st == OAR_OK && g->gin[0] && !(g->gin[0] = oar_cast(g->gin[0], x->dtype))) return oar_last_status();
    return st;
}

static int64_t prod(const int64_t *s, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= s[i];
    return n;
}

/* Mean and biased variance of n values spaced by stride (elements), two-pass in double. */
static void moments(const oar_dtype_traits *tr, const char *p, int64_t n, int64_t stride, double *mean,
                    double *var) {
    const int64_t es = (int64_t)tr->size;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += tr->load(p + i * stride * es);
    double m = n ? s / (double)n : NAN;
    double q = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = tr->load(p + i * stride * es) - m;
        q += d * d;
    }
    *mean = m;
    *var = n ? q / (double)n : NAN;
}

/* ---- gradient pieces shared by the three rules */

/* dL/dx for xhat = (x - mean) * rstd with batch statistics over the dims rd (n elements each):
 * gxhat is the gradient reaching xhat; gmean and grstd reach the statistics directly (double
 * backward through the hidden outputs). Any of the three may be NULL; all broadcast to xhat. */
static oar_tensor *stats_dx(oar_tensor *xhat, oar_tensor *rstd, oar_tensor *gxhat, oar_tensor *gmean,
                            oar_tensor *grstd, const int *rd, int nrd, double n) {
    double inv_n = n > 0 ? 1.0 / n : 0.0;
    oar_tensor *dx = NULL;
    if (gxhat) {
        /* rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)) */
        oar_tensor *m1 = oar_mul_scalar(oar_sum(gxhat, rd, nrd, true), inv_n);
        oar_tensor *m2 = oar_mul_scalar(oar_sum(oar_mul(gxhat, xhat), rd, nrd, true), inv_n);
        dx = oar_mul(rstd, oar_sub(oar_sub(gxhat, m1), oar_mul(xhat, m2)));
    }
    if (gmean) { /* d mean / dx_i = 1/n */
        oar_tensor *t = oar_expand(oar_mul_scalar(gmean, inv_n), xhat->shape, xhat->ndim);
        dx = dx ? oar_add(dx, t) : t;
    }
    if (grstd) { /* d rstd / dx_i = -rstd^3 (x_i - mean) / n = -rstd^2 xhat_i / n */
        oar_tensor *t = oar_mul(oar_mul_scalar(oar_mul(grstd, oar_mul(rstd, rstd)), -inv_n), xhat);
        dx = dx ? oar_add(dx, t) : t;
    }
    return dx;
}

/* Shape of a per-channel vector broadcast against [N, C, ...]: [1, C, 1, ...]. */
static void channel_shape(const oar_tensor *x, int64_t *shape) {
    for (int d = 0; d < x->ndim; d++) shape[d] = d == 1 ? x->shape[1] : 1;
}

/* weight and bias gradients: sums of gy * xhat and gy over everything but the parameter's
 * dims; pshape is the parameter as broadcast against x. */
static void affine_grads(oar_grad_ctx *g, oar_tensor *gy, oar_tensor *xhat, const int64_t *pshape, int pnd) {
    if (!gy) return;
    oar_tensor *w = g->in[1], *b = g->in[2];
    if (w && g->needs[1])
        g->gin[1] = oar_reshape(oar_sum_to_shape(oar_mul(gy, xhat), pshape, pnd), w->shape, w->ndim);
    if (b && g->needs[2]) g->gin[2] = oar_reshape(oar_sum_to_shape(gy, pshape, pnd), b->shape, b->ndim);
}

/* A rule failed if an op returned NULL where a gradient was due. */
static oar_status grad_status(oar_grad_ctx *g) {
    for (int i = 0; i < 3 && i < g->n_in; i++)
        if (g->needs[i] && g->in[i] && g->gout[0] && !g->gin[i]) return oar_last_status();
    return OAR_OK;
}

/* ---- layer_norm(x, weight?, bias?; normalized_ndim, eps) -> y [, mean, rstd] */

static oar_status layer_norm_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_status st = oar_check_float("layer_norm", x, "the input");
    if (st != OAR_OK) return st;
    int64_t k = a[0].i;
    if (k < 1 || k > x->ndim)
        return oar_error(OAR_ERR_INVALID_ARG, "layer_norm: expected normalized_ndim in [1, %d] (the input has %d "
                                              "dims), got %lld", x->ndim, x->ndim, (long long)k);
    const int64_t *nshape = x->shape + x->ndim - k;
    const oar_dtype pdt = norm_param_dtype(x, in[1], in[2]);
    if ((st = check_affine_as("layer_norm", "weight", x, in[1], nshape, (int)k, pdt)) != OAR_OK) return st;
    if ((st = check_affine_as("layer_norm", "bias", x, in[2], nshape, (int)k, pdt)) != OAR_OK) return st;
    oar_meta_from(&out[0], x);
    for (int o = 1; o < 3; o++) { /* statistics keep x's rank with the normalized dims at 1, like torch */
        oar_meta_from(&out[o], x);
        out[o].dtype = pdt;
        for (int d = x->ndim - (int)k; d < x->ndim; d++) out[o].shape[d] = 1;
    }
    *n_out = 3;
    return OAR_OK;
}

static oar_status layer_norm_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *w = in[1], *b = in[2];
    int k = (int)a[0].i;
    double eps = a[1].f;
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype], *tp = &oar_dtypes[out[1]->dtype]; /* x, y; statistics */
    const int64_t es = (int64_t)tr->size, ps = (int64_t)tp->size;
    int64_t m = prod(x->shape, x->ndim - k, x->ndim), rows = prod(x->shape, 0, x->ndim - k);
    const char *xp = oar_tensor_ptr(x), *wp = w ? oar_tensor_ptr(w) : NULL, *bp = b ? oar_tensor_ptr(b) : NULL;
    char *yp = oar_tensor_ptr(out[0]), *mp = oar_tensor_ptr(out[1]), *rp = oar_tensor_ptr(out[2]);
    for (int64_t r = 0; r < rows; r++) {
        double mean, var;
        moments(tr, xp + r * m * es, m, 1, &mean, &var);
        double rstd = 1.0 / sqrt(var + eps);
        tp->store(mp + r * ps, mean);
        tp->store(rp + r * ps, rstd);
        for (int64_t i = 0; i < m; i++) {
            double v = (tr->load(xp + (r * m + i) * es) - mean) * rstd;
            if (wp) v *= tp->load(wp + i * ps);
            if (bp) v += tp->load(bp + i * ps);
            tr->store(yp + (r * m + i) * es, v);
        }
    }
    return OAR_OK;
}

static oar_status layer_norm_grad_composed(oar_grad_ctx *g);

static oar_status layer_norm_grad(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1], *gy = g->gout[0];
    if (gy && !g->gout[1] && !g->gout[2]) { /* the usual case: one registered op (norm_backward.c) */
        oar_tensor *in[5] = {gy, x, w, g->out[1], g->out[2]}, *d[3];
        oar_attr a = g->attrs[0];
        int n = 3;
        oar_status st = oar_op_call(OAR_OP_layer_norm_backward, in, 5, &a, d, &n);
        if (st != OAR_OK) return st;
        for (int i = 0; i < 3; i++) oar_track(d[i]);
        if (g->needs[0]) g->gin[0] = d[0];
        if (w && g->needs[1]) g->gin[1] = d[1];
        if (g->in[2] && g->needs[2]) g->gin[2] = oar_reshape(d[2], g->in[2]->shape, g->in[2]->ndim);
        return grad_status(g);
    }
    const oar_dtype pdt = g->out[1]->dtype;
    return x->dtype == pdt ? layer_norm_grad_composed(g) : grad_wide(g, layer_norm_grad_composed, pdt);
}

/* The rule written with ops (gradients reaching the hidden statistics: double backward). */
static oar_status layer_norm_grad_composed(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1], *gy = g->gout[0];
    int k = (int)g->attrs[0].i, rd[OAR_MAX_DIMS];
    for (int i = 0; i < k; i++) rd[i] = x->ndim - k + i;
    oar_tensor *mean = g->out[1], *rstd = g->out[2];
    oar_tensor *xhat = oar_mul(oar_sub(x, mean), rstd);
    if (g->needs[0]) {
        oar_tensor *gxhat = gy ? (w ? oar_mul(gy, w) : gy) : NULL;
        g->gin[0] = stats_dx(xhat, rstd, gxhat, g->gout[1], g->gout[2], rd, k,
                             (double)prod(x->shape, x->ndim - k, x->ndim));
    }
    affine_grads(g, gy, xhat, x->shape + x->ndim - k, k);
    return grad_status(g);
}

const oar_op_def oar_opdef_layer_norm = {
    .name = "layer_norm", .n_inputs = 3, .n_outputs = 3, .n_visible = 1, .n_attrs = 2,
    .attrs = {{"normalized_ndim", OAR_ATTR_INT}, {"eps", OAR_ATTR_FLOAT, "1e-05"}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x6,
    .infer = layer_norm_infer, .reference = layer_norm_ref, .grad = layer_norm_grad,
};

oar_tensor *oar_layer_norm(oar_tensor *x, int normalized_ndim, oar_tensor *weight, oar_tensor *bias, double eps) {
    oar_attr a[2] = {oar_attr_int(normalized_ndim), oar_attr_float(eps)};
    oar_tensor *in[3] = {x, weight, bias};
    return oar_op_call1(OAR_OP_layer_norm, in, 3, a);
}

/* ---- group_norm(x [N, C, ...], weight? [C], bias? [C]; groups, eps) -> y [, mean, rstd [N, groups]] */

static oar_status group_norm_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_status st = oar_check_float("group_norm", x, "the input");
    if (st != OAR_OK) return st;
    if (x->ndim < 2) {
        char s[128];
        oar_format_shape(x->shape, x->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "group_norm: expected an input of shape [N, C, ...] (2 or more dims), "
                                        "got %s", s);
    }
    int64_t groups = a[0].i, c = x->shape[1];
    if (groups < 1 || c % groups != 0)
        return oar_error(OAR_ERR_INVALID_ARG, "group_norm: expected groups >= 1 dividing the %lld channels, "
                                              "got groups = %lld", (long long)c, (long long)groups);
    const oar_dtype pdt = norm_param_dtype(x, in[1], in[2]);
    if ((st = check_affine_as("group_norm", "weight", x, in[1], &x->shape[1], 1, pdt)) != OAR_OK) return st;
    if ((st = check_affine_as("group_norm", "bias", x, in[2], &x->shape[1], 1, pdt)) != OAR_OK) return st;
    oar_meta_from(&out[0], x);
    for (int o = 1; o < 3; o++) {
        out[o].dtype = pdt;
        out[o].ndim = 2;
        out[o].shape[0] = x->shape[0];
        out[o].shape[1] = groups;
    }
    *n_out = 3;
    return OAR_OK;
}

static oar_status group_norm_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *w = in[1], *b = in[2];
    const int64_t groups = a[0].i, n = x->shape[0], c = x->shape[1], s = prod(x->shape, 2, x->ndim);
    const int64_t cg = c / groups, m = cg * s; /* a group is one contiguous block of m values */
    double eps = a[1].f;
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype], *tp = &oar_dtypes[out[1]->dtype]; /* x, y; statistics */
    const int64_t es = (int64_t)tr->size, ps = (int64_t)tp->size;
    const char *xp = oar_tensor_ptr(x), *wp = w ? oar_tensor_ptr(w) : NULL, *bp = b ? oar_tensor_ptr(b) : NULL;
    char *yp = oar_tensor_ptr(out[0]), *mp = oar_tensor_ptr(out[1]), *rp = oar_tensor_ptr(out[2]);
    for (int64_t r = 0; r < n * groups; r++) {
        double mean, var;
        moments(tr, xp + r * m * es, m, 1, &mean, &var);
        double rstd = 1.0 / sqrt(var + eps);
        tp->store(mp + r * ps, mean);
        tp->store(rp + r * ps, rstd);
        for (int64_t i = 0; i < m; i++) {
            int64_t ch = (r % groups) * cg + i / (s ? s : 1);
            double v = (tr->load(xp + (r * m + i) * es) - mean) * rstd;
            if (wp) v *= tp->load(wp + ch * ps);
            if (bp) v += tp->load(bp + ch * ps);
            tr->store(yp + (r * m + i) * es, v);
        }
    }
    return OAR_OK;
}

static oar_status group_norm_grad_same(oar_grad_ctx *g);

static oar_status group_norm_grad(oar_grad_ctx *g) {
    const oar_dtype pdt = g->out[1]->dtype;
    return g->in[0]->dtype == pdt ? group_norm_grad_same(g) : grad_wide(g, group_norm_grad_same, pdt);
}

static oar_status group_norm_grad_same(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1], *gy = g->gout[0];
    const int64_t groups = g->attrs[0].i, n = x->shape[0], c = x->shape[1];
    const int64_t m = c / groups * prod(x->shape, 2, x->ndim);
    int64_t gshape[3] = {n, groups, m}, sshape[3] = {n, groups, 1}, cshape[OAR_MAX_DIMS];
    channel_shape(x, cshape);
    /* statistics are per (sample, group): work in the grouped layout [N, groups, m] */
    oar_tensor *rstd = oar_reshape(g->out[2], sshape, 3);
    oar_tensor *xhat_g = oar_mul(oar_sub(oar_reshape(x, gshape, 3), oar_reshape(g->out[1], sshape, 3)), rstd);
    oar_tensor *xhat = oar_reshape(xhat_g, x->shape, x->ndim);
    if (g->needs[0]) {
        oar_tensor *gxhat = gy ? oar_reshape(w ? oar_mul(gy, oar_reshape(w, cshape, x->ndim)) : gy, gshape, 3) : NULL;
        oar_tensor *gm = g->gout[1] ? oar_reshape(g->gout[1], sshape, 3) : NULL;
        oar_tensor *gr = g->gout[2] ? oar_reshape(g->gout[2], sshape, 3) : NULL;
        int rd[1] = {2};
        oar_tensor *dx = stats_dx(xhat_g, rstd, gxhat, gm, gr, rd, 1, (double)m);
        g->gin[0] = dx ? oar_reshape(dx, x->shape, x->ndim) : NULL;
    }
    affine_grads(g, gy, xhat, cshape, x->ndim);
    return grad_status(g);
}

const oar_op_def oar_opdef_group_norm = {
    .name = "group_norm", .n_inputs = 3, .n_outputs = 3, .n_visible = 1, .n_attrs = 2,
    .attrs = {{"groups", OAR_ATTR_INT}, {"eps", OAR_ATTR_FLOAT, "1e-05"}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x6,
    .infer = group_norm_infer, .reference = group_norm_ref, .grad = group_norm_grad,
};

oar_tensor *oar_group_norm(oar_tensor *x, int64_t groups, oar_tensor *weight, oar_tensor *bias, double eps) {
    oar_attr a[2] = {oar_attr_int(groups), oar_attr_float(eps)};
    oar_tensor *in[3] = {x, weight, bias};
    return oar_op_call1(OAR_OP_group_norm, in, 3, a);
}

/* ---- batch_norm(x [N, C, ...], weight?, bias?, running_mean?, running_var?,
 * num_batches_tracked?; training, momentum, eps) -> y [, mean, invstd [C]]. Training normalizes
 * with the batch mean and biased variance and updates the running statistics in place
 * (unbiased variance, like torch); inference normalizes with the running statistics, which the
 * hidden outputs then carry. A negative momentum with num_batches_tracked (an integer scalar,
 * only read) blends with 1 / (count + 1) instead: torch's cumulative average (momentum=None),
 * read at run time so compiled steps follow the count. The op is STRIDED so the running
 * statistics are updated where they live, never in a copy. An f16/bf16 x may come with f32
 * parameters (oar_batch_norm_param_dtype): y keeps x's dtype, the statistics are f32. So under
 * autocast batch_norm *follows* (OAR_OPF_AMP_MIXED): a bf16 activation goes in and comes out
 * bf16 with no casts around it, while O2 keeps the layer's parameters f32. The CUDA kernels
 * take one dtype only, so on a GPU autocast still casts x to f32. */

static oar_status check_running(const oar_tensor *x, const oar_tensor *r, const char *what) {
    if (!r) return OAR_OK;
    oar_status st = oar_check_float("batch_norm", r, what);
    if (st != OAR_OK) return st;
    if (r->ndim != 1 || r->shape[0] != x->shape[1]) return shape_mismatch("batch_norm", what, &x->shape[1], 1, r);
    if (r->requires_grad && oar_grad_enabled())
        return oar_error(OAR_ERR_INVALID_ARG, "batch_norm: %s requires grad, but running statistics are not "
                                              "differentiable; pass a tensor that does not (see oar_detach)", what);
    return OAR_OK;
}

/* num_batches_tracked: an integer scalar, given exactly when a negative momentum asks for the
 * cumulative average (needed then only when running statistics are updated). */
static oar_status check_counter(const oar_tensor *n, double momentum, bool updates) {
    if (n && (n->numel != 1 || !(OAR_INT_DTYPES & OAR_DTYPE_BIT(n->dtype)))) {
        char s[128];
        oar_format_shape(n->shape, n->ndim, s, sizeof s);
        return oar_error(OAR_ERR_DTYPE, "batch_norm: expected num_batches_tracked to be an integer scalar, got %s%s",
                         oar_dtype_name(n->dtype), s);
    }
    if (n && !(momentum < 0))
        return oar_error(OAR_ERR_INVALID_ARG, "batch_norm: expected num_batches_tracked only with a negative momentum "
                                              "(cumulative average), got momentum %g; pass NULL instead", momentum);
    if (!n && momentum < 0 && updates)
        return oar_error(OAR_ERR_INVALID_ARG, "batch_norm: expected num_batches_tracked with a negative momentum "
                                              "(cumulative average) in training, got none; pass it or a momentum "
                                              "in [0, 1]");
    return OAR_OK;
}

/* The dtype of batch_norm's parameters and statistics (the hidden mean and invstd outputs, the
 * weight and bias and their gradients): the input's, except for an f16/bf16 input whose first
 * given weight, bias or running_mean is f32. Then the input stays low precision (y has its
 * dtype) and everything per channel is f32, as torch's CPU autocast and Paddle's O2 run norms
 * (the statistics are computed in double either way). */
oar_dtype oar_batch_norm_param_dtype(const oar_tensor *x, const oar_tensor *w, const oar_tensor *b,
                                     const oar_tensor *rmean) {
    const oar_tensor *first = w ? w : b ? b : rmean;
    bool low = x->dtype == OAR_F16 || x->dtype == OAR_BF16;
    return low && first && first->dtype == OAR_F32 ? OAR_F32 : x->dtype;
}

static oar_status batch_norm_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_status st = oar_check_float("batch_norm", x, "the input");
    if (st != OAR_OK) return st;
    char s[128];
    oar_format_shape(x->shape, x->ndim, s, sizeof s);
    if (x->ndim < 2)
        return oar_error(OAR_ERR_SHAPE, "batch_norm: expected an input of shape [N, C] or [N, C, ...] (2 or more "
                                        "dims), got %s", s);
    const oar_dtype pdt = oar_batch_norm_param_dtype(x, in[1], in[2], in[3]);
    if ((st = check_affine_as("batch_norm", "weight", x, in[1], &x->shape[1], 1, pdt)) != OAR_OK) return st;
    if ((st = check_affine_as("batch_norm", "bias", x, in[2], &x->shape[1], 1, pdt)) != OAR_OK) return st;
    if (!in[3] != !in[4])
        return oar_error(OAR_ERR_INVALID_ARG, "batch_norm: expected running_mean and running_var together, got "
                                              "only %s; pass both or neither", in[3] ? "running_mean" : "running_var");
    if ((st = check_running(x, in[3], "running_mean")) != OAR_OK) return st;
    if ((st = check_running(x, in[4], "running_var")) != OAR_OK) return st;
    bool training = a[0].i != 0;
    if ((st = check_counter(in[5], a[1].f, training && in[3])) != OAR_OK) return st;
    if (!training && !in[3])
        return oar_error(OAR_ERR_INVALID_ARG, "batch_norm: expected running_mean and running_var in inference "
                                              "(training = false), got none; pass them or use training mode");
    if (training && x->shape[0] * prod(x->shape, 2, x->ndim) == 1)
        return oar_error(OAR_ERR_SHAPE, "batch_norm: expected more than 1 value per channel when training, got "
                                        "input of shape %s; use a larger batch or inference mode", s);
    oar_meta_from(&out[0], x);
    for (int o = 1; o < 3; o++) {
        out[o].dtype = pdt;
        out[o].ndim = 1;
        out[o].shape[0] = x->shape[1];
    }
    *n_out = 3;
    return OAR_OK;
}

static oar_tensor *dense(oar_tensor *t) {
    if (!t) return NULL;
    return t->contiguous ? oar_retain(t) : oar_tensor_contiguous_copy(t);
}

static oar_status batch_norm_compute(const oar_tensor *x, const oar_tensor *w, const oar_tensor *b,
                                     oar_tensor *rmean, oar_tensor *rvar, const oar_tensor *counter,
                                     oar_tensor *const *out, const oar_attr *a) {
    const bool training = a[0].i != 0;
    const double momentum = oar_batch_norm_factor(a[1].f, counter), eps = a[2].f;
    const int64_t n = x->shape[0], c = x->shape[1], s = prod(x->shape, 2, x->ndim), cnt = n * s;
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype], *tp = &oar_dtypes[out[1]->dtype]; /* x, y; per channel */
    const int64_t es = (int64_t)tr->size, ps = (int64_t)tp->size;
    const char *xp = oar_tensor_ptr(x), *wp = w ? oar_tensor_ptr(w) : NULL, *bp = b ? oar_tensor_ptr(b) : NULL;
    char *yp = oar_tensor_ptr(out[0]), *mp = oar_tensor_ptr(out[1]), *rp = oar_tensor_ptr(out[2]);
    /* running statistics may be strided views of any float dtype */
    const oar_dtype_traits *tm = rmean ? &oar_dtypes[rmean->dtype] : NULL, *tv = rvar ? &oar_dtypes[rvar->dtype] : NULL;
    char *rmp = rmean ? oar_tensor_ptr(rmean) : NULL, *rvp = rvar ? oar_tensor_ptr(rvar) : NULL;
    const int64_t rms = rmean ? rmean->strides[0] * (int64_t)tm->size : 0;
    const int64_t rvs = rvar ? rvar->strides[0] * (int64_t)tv->size : 0;
    const bool update = training && rmean && cnt > 0; /* torch leaves them alone for an empty batch */
    for (int64_t ch = 0; ch < c; ch++) {
        double mean, invstd;
        if (training) {
            double var = 0, sum = 0;
            mean = 0;
            if (cnt > 0) {
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < s; j++) sum += tr->load(xp + ((i * c + ch) * s + j) * es);
                mean = sum / (double)cnt;
                for (int64_t i = 0; i < n; i++)
                    for (int64_t j = 0; j < s; j++) {
                        double d = tr->load(xp + ((i * c + ch) * s + j) * es) - mean;
                        var += d * d;
                    }
                var /= (double)cnt;
            }
            invstd = 1.0 / sqrt(var + eps);
            if (update) {
                double unbiased = var * (double)cnt / (double)(cnt - 1);
                tm->store(rmp + ch * rms, (1 - momentum) * tm->load(rmp + ch * rms) + momentum * mean);
                tv->store(rvp + ch * rvs, (1 - momentum) * tv->load(rvp + ch * rvs) + momentum * unbiased);
            }
        } else {
            mean = tm->load(rmp + ch * rms);
            invstd = 1.0 / sqrt(tv->load(rvp + ch * rvs) + eps);
        }
        tp->store(mp + ch * ps, mean);
        tp->store(rp + ch * ps, invstd);
        double scale = invstd * (wp ? tp->load(wp + ch * ps) : 1.0), shift = bp ? tp->load(bp + ch * ps) : 0.0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) {
                int64_t at = ((i * c + ch) * s + j) * es;
                tr->store(yp + at, (tr->load(xp + at) - mean) * scale + shift);
            }
    }
    if (update) { /* once per call, so autograd sees the in-place write */
        rmean->storage->version++;
        rvar->storage->version++;
    }
    return OAR_OK;
}

static oar_status batch_norm_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                 int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *x = dense(in[0]), *w = dense(in[1]), *b = dense(in[2]);
    oar_status st = (!x || (in[1] && !w) || (in[2] && !b)) ? OAR_ERR_OOM
                                                           : batch_norm_compute(x, w, b, in[3], in[4], in[5], out, a);
    oar_tensor_unref(x);
    oar_tensor_unref(w);
    oar_tensor_unref(b);
    return st;
}

static oar_status batch_norm_grad_same(oar_grad_ctx *g);

/* Gradient of batch_norm. With an f16/bf16 input and f32 parameters the one-op backward takes
 * the mixed dtypes itself; the composed rule runs on f32 copies (grad_wide). */
static oar_status batch_norm_grad(oar_grad_ctx *g) {
    const oar_dtype pdt = g->out[1]->dtype;
    const bool training = g->attrs[0].i != 0;
    if (g->in[0]->dtype == pdt || (training && g->gout[0] && !g->gout[1] && !g->gout[2]))
        return batch_norm_grad_same(g);
    return grad_wide(g, batch_norm_grad_same, pdt);
}

static oar_status batch_norm_grad_same(oar_grad_ctx *g) {
    oar_tensor *x = g->in[0], *w = g->in[1], *gy = g->gout[0];
    const bool training = g->attrs[0].i != 0;
    if (training && gy && !g->gout[1] && !g->gout[2]) { /* the usual case: one registered op (norm_backward.c) */
        oar_tensor *in[5] = {gy, x, w, g->out[1], g->out[2]}, *d[3];
        int n = 3;
        oar_status st = oar_op_call(OAR_OP_batch_norm_backward, in, 5, NULL, d, &n);
        if (st != OAR_OK) return st;
        for (int i = 0; i < 3; i++) oar_track(d[i]);
        if (g->needs[0]) g->gin[0] = d[0];
        if (w && g->needs[1]) g->gin[1] = d[1];
        if (g->in[2] && g->needs[2]) g->gin[2] = d[2];
        return grad_status(g);
    }
    int64_t cshape[OAR_MAX_DIMS];
    channel_shape(x, cshape);
    oar_tensor *rstd = oar_reshape(g->out[2], cshape, x->ndim);
    oar_tensor *xhat = oar_mul(oar_sub(x, oar_reshape(g->out[1], cshape, x->ndim)), rstd);
    if (g->needs[0]) {
        oar_tensor *gxhat = gy ? (w ? oar_mul(gy, oar_reshape(w, cshape, x->ndim)) : gy) : NULL;
        if (training) {
            int rd[OAR_MAX_DIMS], nrd = 0;
            for (int d = 0; d < x->ndim; d++)
                if (d != 1) rd[nrd++] = d;
            oar_tensor *gm = g->gout[1] ? oar_reshape(g->gout[1], cshape, x->ndim) : NULL;
            oar_tensor *gr = g->gout[2] ? oar_reshape(g->gout[2], cshape, x->ndim) : NULL;
            g->gin[0] = stats_dx(xhat, rstd, gxhat, gm, gr, rd, nrd, (double)(x->numel / (x->shape[1] ? x->shape[1] : 1)));
        } else if (gxhat) {
            /* the statistics are constants here (running statistics are not differentiable) */
            g->gin[0] = oar_mul(gxhat, rstd);
        }
    }
    affine_grads(g, gy, xhat, cshape, x->ndim);
    return grad_status(g);
}

const oar_op_def oar_opdef_batch_norm = {
    .name = "batch_norm", .n_inputs = 6, .n_outputs = 3, .n_visible = 1, .n_attrs = 3,
    .attrs = {{"training", OAR_ATTR_INT, "false"}, {"momentum", OAR_ATTR_FLOAT, "0.1"}, {"eps", OAR_ATTR_FLOAT, "1e-05"}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x3E,
    .unsaved_inputs = 0x38, /* running stats (updated in place) and the counter: never read by the rule */
    .mutated_inputs = 0x18,
    .infer = batch_norm_infer, .reference = batch_norm_ref, .grad = batch_norm_grad,
};

oar_tensor *oar_batch_norm_counted(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, oar_tensor *running_mean,
                                   oar_tensor *running_var, oar_tensor *num_batches_tracked, bool training,
                                   double momentum, double eps) {
    oar_attr a[3] = {oar_attr_int(training), oar_attr_float(momentum), oar_attr_float(eps)};
    oar_tensor *in[6] = {x, weight, bias, running_mean, running_var, num_batches_tracked};
    return oar_op_call1(OAR_OP_batch_norm, in, 6, a);
}

oar_tensor *oar_batch_norm(oar_tensor *x, oar_tensor *weight, oar_tensor *bias, oar_tensor *running_mean,
                           oar_tensor *running_var, bool training, double momentum, double eps) {
    return oar_batch_norm_counted(x, weight, bias, running_mean, running_var, NULL, training, momentum, eps);
}
