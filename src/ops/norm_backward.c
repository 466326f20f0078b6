/* layer_norm_backward(grad_out, x, weight?, mean, rstd; normalized_ndim) -> dx, dweight, dbias
 *
 * The backward of layer_norm in one op (layer_norm's rule calls it when no gradient reaches
 * its hidden statistics): per row of the m normalized values, with xhat = (x - mean) * rstd
 * and gxhat = grad_out * weight (grad_out without weight),
 *   dx      = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat))
 *   dweight = sum over rows of grad_out * xhat,  dbias = sum over rows of grad_out
 * dweight and dbias have the normalized shape (computed even without weight or bias: the
 * rule drops them). mean and rstd are inputs of their own, shaped as layer_norm returns them
 * (x's shape with the normalized dims at 1), so the rule below also serves double backward.
 * The reference kernel computes in double through the dtype traits. */
#include "ops/op.h"

#include <string.h>

static int64_t prod(const int64_t *s, int from, int to) {
    int64_t n = 1;
    for (int i = from; i < to; i++) n *= s[i];
    return n;
}

/* grad_out and x of one float dtype; mean and rstd of another, pdt: x's, or f32 with an
 * f16/bf16 x (as the forward ops return their statistics for f32 parameters). */
static oar_status check_dtypes(const char *op, oar_tensor *const *in, oar_dtype *pdt) {
    oar_tensor *same[2] = {in[0], in[1]}, *stats[2] = {in[3], in[4]};
    oar_status st = oar_check_same_dtype(op, same, 2);
    if (st == OAR_OK) st = oar_check_same_dtype(op, stats, 2);
    if (st != OAR_OK) return st;
    const oar_dtype xdt = in[1]->dtype;
    *pdt = in[3]->dtype;
    if (*pdt != xdt && !(*pdt == OAR_F32 && (xdt == OAR_F16 || xdt == OAR_BF16)))
        return oar_error(OAR_ERR_DTYPE, "%s: expected mean and rstd of the input's dtype %s (or f32 for an f16/bf16 "
                                        "input), got %s; pass the forward op's own statistics", op,
                         oar_dtype_name(xdt), oar_dtype_name(*pdt));
    return OAR_OK;
}

/* A rule for same-dtype inputs run on an f16/bf16 grad_out and x with f32 statistics: on f32
 * copies of grad_out, x and the gradient reaching dx; the gradients of grad_out and x are
 * rounded back to their dtype. */
static oar_status grad_wide(oar_grad_ctx *g, oar_status (*rule)(oar_grad_ctx *)) {
    const oar_dtype xdt = g->in[1]->dtype, pdt = g->in[3]->dtype;
    if (xdt == pdt) return rule(g);
    oar_tensor *in[OAR_MAX_INPUTS] = {0};
    for (int i = 0; i < g->n_in && i < OAR_MAX_INPUTS; i++) in[i] = g->in[i];
    in[0] = oar_cast(g->in[0], pdt);
    in[1] = oar_cast(g->in[1], pdt);
    oar_tensor *gout[3] = {g->gout[0] ? oar_cast(g->gout[0], pdt) : NULL, g->gout[1], g->gout[2]};
    if (!in[0] || !in[1] || (g->gout[0] && !gout[0])) return oar_last_status();
    oar_grad_ctx wide = *g;
    wide.in = in;
    wide.gout = gout;
    oar_status st = rule(&wide);
    for (int i = 0; i < 2 && st == OAR_OK; i++)
        if (g->gin[i] && !(g->gin[i] = oar_cast(g->gin[i], xdt))) st = oar_last_status();
    return st;
}

static oar_status ln_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    static const char *const op = "layer_norm_backward";
    const oar_tensor *g = in[0], *x = in[1], *w = in[2], *mean = in[3], *rstd = in[4];
    oar_status st = oar_check_float(op, x, "the input");
    if (st != OAR_OK) return st;
    oar_dtype pdt;
    if ((st = check_dtypes(op, in, &pdt)) != OAR_OK) return st;
    int64_t k = a[0].i;
    if (k < 1 || k > x->ndim)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected normalized_ndim in [1, %d] (the input has %d dims), got "
                                              "%lld", op, x->ndim, x->ndim, (long long)k);
    int nd = x->ndim, lead = nd - (int)k;
    char sx[128], sg[128];
    oar_format_shape(x->shape, nd, sx, sizeof sx);
    oar_format_shape(g->shape, g->ndim, sg, sizeof sg);
    if (g->ndim != nd || memcmp(g->shape, x->shape, sizeof(int64_t) * (size_t)nd))
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad_out of the input's shape %s, got %s", op, sx, sg);
    for (int s = 0; s < 2; s++) {
        const oar_tensor *t = s ? rstd : mean;
        bool ok = t->ndim == nd && !memcmp(t->shape, x->shape, sizeof(int64_t) * (size_t)lead);
        for (int d = lead; ok && d < nd; d++) ok = t->shape[d] == 1;
        if (!ok) {
            char st_[128];
            oar_format_shape(t->shape, t->ndim, st_, sizeof st_);
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s with the last %lld dims at 1 (as layer_norm "
                                            "returns it), got %s", op, s ? "rstd" : "mean", sx, (long long)k, st_);
        }
    }
    if (w && (w->dtype != pdt || w->ndim != (int)k ||
              memcmp(w->shape, x->shape + lead, sizeof(int64_t) * (size_t)k))) {
        char sw[128], sn[128];
        oar_format_shape(w->shape, w->ndim, sw, sizeof sw);
        oar_format_shape(x->shape + lead, (int)k, sn, sizeof sn);
        return oar_error(OAR_ERR_SHAPE, "%s: expected weight %s%s (the statistics' dtype), got %s%s", op,
                         oar_dtype_name(pdt), sn, oar_dtype_name(w->dtype), sw);
    }
    oar_meta_from(&out[0], x);
    for (int o = 1; o < 3; o++) {
        out[o].dtype = pdt;
        out[o].ndim = (int)k;
        memcpy(out[o].shape, x->shape + lead, sizeof(int64_t) * (size_t)k);
    }
    *n_out = 3;
    return OAR_OK;
}

static oar_status ln_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *x = in[1], *w = in[2];
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype], *tp = &oar_dtypes[in[3]->dtype]; /* x; statistics */
    const int64_t es = (int64_t)tr->size, ps = (int64_t)tp->size;
    int k = (int)a[0].i;
    int64_t m = prod(x->shape, x->ndim - k, x->ndim), rows = prod(x->shape, 0, x->ndim - k);
    const char *gp = oar_tensor_ptr(g), *xp = oar_tensor_ptr(x), *wp = w ? oar_tensor_ptr(w) : NULL;
    const char *mp = oar_tensor_ptr(in[3]), *rp = oar_tensor_ptr(in[4]);
    char *dx = oar_tensor_ptr(out[0]), *dw = oar_tensor_ptr(out[1]), *db = oar_tensor_ptr(out[2]);
    for (int64_t i = 0; i < m; i++) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < rows; r++) {
            double gv = tr->load(gp + (r * m + i) * es);
            sw += gv * (tr->load(xp + (r * m + i) * es) - tp->load(mp + r * ps)) * tp->load(rp + r * ps);
            sb += gv;
        }
        tp->store(dw + i * ps, sw);
        tp->store(db + i * ps, sb);
    }
    for (int64_t r = 0; r < rows; r++) {
        double mean = tp->load(mp + r * ps), rstd = tp->load(rp + r * ps), m1 = 0, m2 = 0;
        for (int64_t i = 0; i < m; i++) {
            double gx = tr->load(gp + (r * m + i) * es) * (wp ? tp->load(wp + i * ps) : 1.0);
            m1 += gx;
            m2 += gx * (tr->load(xp + (r * m + i) * es) - mean) * rstd;
        }
        m1 /= (double)m;
        m2 /= (double)m;
        for (int64_t i = 0; i < m; i++) {
            double gx = tr->load(gp + (r * m + i) * es) * (wp ? tp->load(wp + i * ps) : 1.0);
            double xh = (tr->load(xp + (r * m + i) * es) - mean) * rstd;
            tr->store(dx + (r * m + i) * es, rstd * (gx - m1 - xh * m2));
        }
    }
    return OAR_OK;
}

/* Double backward, shared by both ops. With a = rstd * u (u: the gradient reaching dx),
 * t = gxhat - m1 - xhat * m2, mean_n / sum_n over the reduced dims rd (those the statistics
 * are broadcast over) and sum_r over the dims the weight is broadcast over:
 *   to gxhat: G = a - mean_n(a) - xhat * mean_n(a * xhat)
 *   to xhat:  H = -a * m2 - gxhat * mean_n(a * xhat) + grad_out * uw
 *   grad_out: G * weight + xhat * uw + ub       x: rstd * H        weight: sum_r(G * grad_out)
 *   mean:     -rstd * sum_n(H)                  rstd: sum_n(u * t) + sum_n(H * (x - mean))
 * where uw and ub reach dweight and dbias (broadcast against x). w, mean and rstd arrive
 * already shaped to broadcast against x (bshape); results go back to the inputs' shapes. */
static oar_tensor *as_shape(oar_tensor *t, const oar_tensor *like) {
    if (!t || (t->ndim == like->ndim && !memcmp(t->shape, like->shape, sizeof(int64_t) * (size_t)t->ndim))) return t;
    return oar_reshape(t, like->shape, like->ndim);
}

static oar_status norm_backward_rule(oar_grad_ctx *g, oar_tensor *w, oar_tensor *mean, oar_tensor *rstd,
                                     const int64_t *bshape, const int *rd, int nrd, double n) {
    oar_tensor *gy = g->in[0], *x = g->in[1];
    oar_tensor *u = g->gout[0], *uw = g->gout[1], *ub = g->gout[2];
    if (uw) uw = oar_reshape(uw, bshape, x->ndim);
    if (ub) ub = oar_reshape(ub, bshape, x->ndim);
    double inv_n = n > 0 ? 1.0 / n : 0.0;
    oar_tensor *xc = oar_sub(x, mean), *xhat = oar_mul(xc, rstd), *gxh = w ? oar_mul(gy, w) : gy;
    oar_tensor *G = NULL, *H = NULL, *t = NULL;
    if (u) {
        oar_tensor *m1 = oar_mul_scalar(oar_sum(gxh, rd, nrd, true), inv_n);
        oar_tensor *m2 = oar_mul_scalar(oar_sum(oar_mul(gxh, xhat), rd, nrd, true), inv_n);
        t = oar_sub(oar_sub(gxh, m1), oar_mul(xhat, m2));
        oar_tensor *aa = oar_mul(rstd, u);
        oar_tensor *ma = oar_mul_scalar(oar_sum(aa, rd, nrd, true), inv_n);
        oar_tensor *max = oar_mul_scalar(oar_sum(oar_mul(aa, xhat), rd, nrd, true), inv_n);
        G = oar_sub(oar_sub(aa, ma), oar_mul(xhat, max));
        H = oar_neg(oar_add(oar_mul(aa, m2), oar_mul(gxh, max)));
    }
    if (uw) {
        oar_tensor *h = oar_mul(gy, uw);
        H = H ? oar_add(H, h) : h;
    }
    if (g->needs[0] && (G || uw || ub)) {
        oar_tensor *d = G ? (w ? oar_mul(G, w) : G) : NULL;
        if (uw) d = d ? oar_add(d, oar_mul(xhat, uw)) : oar_mul(xhat, uw);
        if (ub) d = d ? oar_add(d, ub) : oar_expand(ub, gy->shape, gy->ndim);
        g->gin[0] = d;
    }
    if (g->needs[1] && H) g->gin[1] = oar_mul(rstd, H);
    if (w && g->needs[2] && G) g->gin[2] = as_shape(oar_sum_to_shape(oar_mul(G, gy), w->shape, w->ndim), g->in[2]);
    if (g->needs[3] && H) g->gin[3] = as_shape(oar_neg(oar_mul(rstd, oar_sum(H, rd, nrd, true))), g->in[3]);
    if (g->needs[4] && (t || H)) {
        oar_tensor *r = t ? oar_sum(oar_mul(u, t), rd, nrd, true) : NULL;
        if (H) {
            oar_tensor *s = oar_sum(oar_mul(H, xc), rd, nrd, true);
            r = r ? oar_add(r, s) : s;
        }
        g->gin[4] = as_shape(r, g->in[4]);
    }
    bool due[5] = {G || uw || ub, H != NULL, w && G, H != NULL, t || H};
    for (int i = 0; i < 5; i++)
        if (g->needs[i] && due[i] && !g->gin[i]) return oar_last_status();
    return OAR_OK;
}

static oar_status ln_backward_grad_same(oar_grad_ctx *g);

static oar_status ln_backward_grad(oar_grad_ctx *g) { return grad_wide(g, ln_backward_grad_same); }

static oar_status ln_backward_grad_same(oar_grad_ctx *g) {
    oar_tensor *x = g->in[1];
    int k = (int)g->attrs[0].i, rd[OAR_MAX_DIMS], lead = x->ndim - k;
    for (int i = 0; i < k; i++) rd[i] = lead + i;
    int64_t bshape[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) bshape[d] = d < lead ? 1 : x->shape[d];
    return norm_backward_rule(g, g->in[2], g->in[3], g->in[4], bshape, rd, k,
                              (double)prod(x->shape, lead, x->ndim));
}

const oar_op_def oar_opdef_layer_norm_backward = {
    .name = "layer_norm_backward", .n_inputs = 5, .n_outputs = 3, .key_input = 1, .n_attrs = 1,
    .attrs = {{"normalized_ndim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x4,
    .infer = ln_backward_infer, .reference = ln_backward_ref, .grad = ln_backward_grad,
};

/* ---- batch_norm_backward(grad_out, x [N, C, ...], weight? [C], mean [C], rstd [C]) -> dx,
 * dweight [C], dbias [C]
 *
 * The backward of batch_norm in training mode in one op (batch_norm's rule calls it when no
 * gradient reaches its hidden statistics): per channel, over the cnt = numel / C values of
 * that channel, with xhat = (x - mean) * rstd and gxhat = grad_out * weight,
 *   dx      = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat))
 *   dweight = sum of grad_out * xhat,  dbias = sum of grad_out
 * The same algebra as layer_norm_backward with the roles of the dims exchanged, so the two
 * share the double-backward rule above. The reference kernel computes in double. */

static oar_status bn_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    static const char *const op = "batch_norm_backward";
    const oar_tensor *g = in[0], *x = in[1], *w = in[2];
    oar_status st = oar_check_float(op, x, "the input");
    if (st != OAR_OK) return st;
    oar_dtype pdt; /* per-channel values: x's dtype, or f32 with an f16/bf16 x */
    if ((st = check_dtypes(op, in, &pdt)) != OAR_OK) return st;
    char sx[128], sg[128];
    oar_format_shape(x->shape, x->ndim, sx, sizeof sx);
    oar_format_shape(g->shape, g->ndim, sg, sizeof sg);
    if (x->ndim < 2)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an input of shape [N, C, ...] (2 or more dims), got %s", op, sx);
    if (g->ndim != x->ndim || memcmp(g->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim))
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad_out of the input's shape %s, got %s", op, sx, sg);
    const char *names[3] = {"weight", "mean", "rstd"};
    const oar_tensor *vec[3] = {w, in[3], in[4]};
    for (int v = 0; v < 3; v++) {
        const oar_tensor *t = vec[v];
        if (!t) continue;
        if (t->dtype != pdt || t->ndim != 1 || t->shape[0] != x->shape[1]) {
            char st_[128];
            oar_format_shape(t->shape, t->ndim, st_, sizeof st_);
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s %s[%lld] (one value per channel, the statistics' "
                                            "dtype), got %s%s", op, names[v], oar_dtype_name(pdt),
                             (long long)x->shape[1], oar_dtype_name(t->dtype), st_);
        }
    }
    oar_meta_from(&out[0], x);
    for (int o = 1; o < 3; o++) {
        out[o].dtype = pdt;
        out[o].ndim = 1;
        out[o].shape[0] = x->shape[1];
    }
    *n_out = 3;
    return OAR_OK;
}

static oar_status bn_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    const oar_tensor *g = in[0], *x = in[1], *w = in[2];
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype], *tp = &oar_dtypes[in[3]->dtype]; /* x; per channel */
    const int64_t es = (int64_t)tr->size, ps = (int64_t)tp->size, n = x->shape[0], c = x->shape[1];
    const int64_t s = prod(x->shape, 2, x->ndim);
    const double cnt = (double)(n * s);
    const char *gp = oar_tensor_ptr(g), *xp = oar_tensor_ptr(x), *wp = w ? oar_tensor_ptr(w) : NULL;
    const char *mp = oar_tensor_ptr(in[3]), *rp = oar_tensor_ptr(in[4]);
    char *dx = oar_tensor_ptr(out[0]), *dw = oar_tensor_ptr(out[1]), *db = oar_tensor_ptr(out[2]);
    for (int64_t ch = 0; ch < c; ch++) {
        double mean = tp->load(mp + ch * ps), rstd = tp->load(rp + ch * ps), wv = wp ? tp->load(wp + ch * ps) : 1.0;
        double sb = 0, sw = 0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) {
                int64_t at = ((i * c + ch) * s + j) * es;
                double gv = tr->load(gp + at);
                sb += gv;
                sw += gv * (tr->load(xp + at) - mean) * rstd;
            }
        tp->store(dw + ch * ps, sw);
        tp->store(db + ch * ps, sb);
        double m1 = cnt > 0 ? wv * sb / cnt : 0.0, m2 = cnt > 0 ? wv * sw / cnt : 0.0;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < s; j++) {
                int64_t at = ((i * c + ch) * s + j) * es;
                double xh = (tr->load(xp + at) - mean) * rstd;
                tr->store(dx + at, rstd * (tr->load(gp + at) * wv - m1 - xh * m2));
            }
    }
    return OAR_OK;
}

static oar_status bn_backward_grad_same(oar_grad_ctx *g);

static oar_status bn_backward_grad(oar_grad_ctx *g) { return grad_wide(g, bn_backward_grad_same); }

static oar_status bn_backward_grad_same(oar_grad_ctx *g) {
    oar_tensor *x = g->in[1], *w = g->in[2];
    int64_t cshape[OAR_MAX_DIMS];
    int rd[OAR_MAX_DIMS], nrd = 0;
    for (int d = 0; d < x->ndim; d++) {
        cshape[d] = d == 1 ? x->shape[1] : 1;
        if (d != 1) rd[nrd++] = d;
    }
    oar_tensor *wb = w ? oar_reshape(w, cshape, x->ndim) : NULL;
    oar_tensor *mb = oar_reshape(g->in[3], cshape, x->ndim), *rb = oar_reshape(g->in[4], cshape, x->ndim);
    if ((w && !wb) || !mb || !rb) return oar_last_status();
    return norm_backward_rule(g, wb, mb, rb, cshape, rd, nrd, (double)(x->numel / (x->shape[1] ? x->shape[1] : 1)));
}

const oar_op_def oar_opdef_batch_norm_backward = {
    .name = "batch_norm_backward", .n_inputs = 5, .n_outputs = 3, .key_input = 1,
    .flags = OAR_OPF_AMP_MIXED, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x4,
    .infer = bn_backward_infer, .reference = bn_backward_ref, .grad = bn_backward_grad,
};
