/* Losses over integer class indices: cross_entropy (log-softmax fused in, numerically stable)
 * and nll_loss, with torch's ignore_index and label smoothing, and their backward ops.
 * Inputs are [C], [N, C] or [N, C, d1, ...]; targets have the input's shape without the
 * class dim. With smoothing eps, a sample's loss is (1 - eps) * nll + eps * mean over classes
 * of -log p; ignored samples contribute 0 and the mean divides by the counted samples.
 * cross_entropy(x) equals nll_loss(log_softmax(x)) for every option. */
#include "ops/loss.h"

#include <math.h>
#include <string.h>


/* Attribute positions of cross_entropy, nll_loss and cross_entropy_backward;
 * nll_loss_backward has num_classes first, then these. */
enum { A_REDUCTION, A_IGNORE, A_SMOOTHING };

static int class_dim(int ndim) { return ndim == 1 ? 0 : 1; }

/* The input as [outer, classes, inner]; a 1-d input is a single sample. */
typedef struct cls_layout {
    int64_t outer, classes, inner;
} cls_layout;

static cls_layout layout_of(const oar_tensor *x) {
    cls_layout L = {1, x->shape[class_dim(x->ndim)], 1};
    if (x->ndim >= 2) L.outer = x->shape[0];
    for (int d = 2; d < x->ndim; d++) L.inner *= x->shape[d];
    return L;
}

/* Counts targets != ignore_index and checks that they lie in [0, classes). target must be
 * contiguous (kernels get contiguous inputs). Shared with the fast kernels (cpu_loss.c) so
 * both report a bad target alike. */
oar_status oar_loss_count_targets(const char *op, const oar_tensor *target, int64_t classes,
                                  int64_t ignore_index, int64_t *count) {
    const oar_dtype_traits *tr = &oar_dtypes[target->dtype];
    const char *p = oar_tensor_ptr(target);
    int64_t n = 0;
    for (int64_t i = 0; i < target->numel; i++) {
        int64_t t = tr->load_i64(p + i * (int64_t)tr->size);
        if (t == ignore_index) continue;
        if (t < 0 || t >= classes)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected target values in [0, %lld) or equal to "
                                                  "ignore_index (%lld), got %lld at flat index %lld of the "
                                                  "target; check the labels against the number of classes",
                             op, (long long)classes, (long long)ignore_index, (long long)t, (long long)i);
        n++;
    }
    *count = n;
    return OAR_OK;
}

/* ---- inference */
static oar_status check_opts(const char *op, int64_t reduction, double eps) {
    oar_status st = oar_loss_check_reduction(op, reduction);
    if (st != OAR_OK) return st;
    if (!(eps >= 0 && eps <= 1)) /* also refuses NaN */
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected label_smoothing in [0, 1], got %g", op, eps);
    return OAR_OK;
}

static oar_status check_target_dtype(const char *op, const oar_tensor *t) {
    if (!oar_dtypes[t->dtype].is_float && t->dtype != OAR_BOOL) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected target to hold integer class indices (i64), got %s; "
                                    "class probabilities (soft targets) are not supported, and index "
                                    "tensors convert with oar_cast", op, oar_dtype_name(t->dtype));
}

/* Checks the input x (called what) and its target t. */
static oar_status check_input_target(const char *op, const char *what, const oar_tensor *x, const oar_tensor *t) {
    oar_status st = oar_check_float(op, x, what);
    if (st == OAR_OK) st = check_target_dtype(op, t);
    if (st != OAR_OK) return st;
    char xs[128], ts[128], ws[128];
    oar_format_shape(x->shape, x->ndim, xs, sizeof xs);
    if (x->ndim == 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape [C], [N, C] or [N, C, d1, ...], got %s",
                         op, what, xs);
    int cd = class_dim(x->ndim);
    if (x->shape[cd] == 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected at least one class (%s.shape[%d] > 0), got %s of "
                                        "shape %s", op, what, cd, what, xs);
    int64_t want[OAR_MAX_DIMS];
    int nw = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != cd) want[nw++] = x->shape[d];
    if (t->ndim != nw || memcmp(t->shape, want, sizeof(int64_t) * (size_t)nw) != 0) {
        oar_format_shape(want, nw, ws, sizeof ws);
        oar_format_shape(t->shape, t->ndim, ts, sizeof ts);
        return oar_error(OAR_ERR_SHAPE, "%s: expected target of shape %s for %s of shape %s (the class dim "
                                        "%d removed), got %s", op, ws, what, xs, cd, ts);
    }
    return OAR_OK;
}

/* The loss: per sample (target's shape) for reduction none, else a scalar. */
static void loss_meta(const oar_tensor *x, const oar_tensor *t, int64_t reduction, oar_meta *m) {
    m->dtype = x->dtype;
    m->ndim = 0;
    if (reduction == OAR_REDUCE_NONE) {
        m->ndim = t->ndim;
        memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    }
}

/* Checks that tensor v (called what) has meta m. */
static oar_status check_like(const char *op, const char *what, const oar_tensor *v, const oar_meta *m) {
    if (v->dtype == m->dtype && v->ndim == m->ndim &&
        memcmp(v->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim) == 0)
        return OAR_OK;
    char ws[128], vs[128];
    oar_format_shape(m->shape, m->ndim, ws, sizeof ws);
    oar_format_shape(v->shape, v->ndim, vs, sizeof vs);
    return oar_error(v->dtype != m->dtype ? OAR_ERR_DTYPE : OAR_ERR_SHAPE, "%s: expected %s of shape %s and "
                     "dtype %s, got %s %s", op, what, ws, oar_dtype_name(m->dtype), vs, oar_dtype_name(v->dtype));
}

static oar_status ce_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = check_opts("cross_entropy", a[A_REDUCTION].i, a[A_SMOOTHING].f);
    if (st == OAR_OK) st = check_input_target("cross_entropy", "logits", in[0], in[1]);
    if (st != OAR_OK) return st;
    loss_meta(in[0], in[1], a[A_REDUCTION].i, &out[0]);
    /* hidden output: each sample's log-sum-exp, which the backward needs; kept in f64 so that
     * exp(x - lse) stays accurate for large logits and for f16/bf16 */
    loss_meta(in[0], in[1], OAR_REDUCE_NONE, &out[1]);
    out[1].dtype = OAR_F64;
    *n_out = 2;
    return OAR_OK;
}

static oar_status nll_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = check_opts("nll_loss", a[A_REDUCTION].i, a[A_SMOOTHING].f);
    if (st == OAR_OK) st = check_input_target("nll_loss", "log_probs", in[0], in[1]);
    if (st != OAR_OK) return st;
    loss_meta(in[0], in[1], a[A_REDUCTION].i, out);
    *n_out = 1;
    return OAR_OK;
}

/* cross_entropy_backward(grad_output, logits, target, lse (f64)) -> grad of logits */
static oar_status ceb_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "cross_entropy_backward";
    oar_meta gm, lm;
    oar_status st = check_opts(op, a[A_REDUCTION].i, a[A_SMOOTHING].f);
    if (st == OAR_OK) st = check_input_target(op, "logits", in[1], in[2]);
    if (st != OAR_OK) return st;
    loss_meta(in[1], in[2], a[A_REDUCTION].i, &gm);
    loss_meta(in[1], in[2], OAR_REDUCE_NONE, &lm);
    lm.dtype = OAR_F64;
    st = check_like(op, "grad_output", in[0], &gm);
    if (st == OAR_OK) st = check_like(op, "lse", in[3], &lm);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    *n_out = 1;
    return OAR_OK;
}

/* nll_loss_backward(grad_output, target; num_classes, ...) -> grad of log_probs */
static oar_status nllb_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "nll_loss_backward";
    const oar_tensor *g = in[0], *t = in[1];
    int64_t classes = a[0].i;
    const oar_attr *o = a + 1;
    oar_status st = check_opts(op, o[A_REDUCTION].i, o[A_SMOOTHING].f);
    if (st == OAR_OK) st = oar_check_float(op, g, "grad_output");
    if (st == OAR_OK) st = check_target_dtype(op, t);
    if (st != OAR_OK) return st;
    if (classes < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected num_classes >= 1, got %lld", op, (long long)classes);
    if (t->ndim + 1 > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "%s: expected a target of at most %d dims, got %d", op,
                         OAR_MAX_DIMS - 1, t->ndim);
    oar_meta gm;
    gm.dtype = g->dtype;
    gm.ndim = o[A_REDUCTION].i == OAR_REDUCE_NONE ? t->ndim : 0;
    memcpy(gm.shape, t->shape, sizeof(int64_t) * (size_t)gm.ndim);
    st = check_like(op, "grad_output", g, &gm);
    if (st != OAR_OK) return st;
    /* the target's shape with the class dim put back */
    out->dtype = g->dtype;
    out->ndim = t->ndim + 1;
    int cd = class_dim(out->ndim);
    for (int d = 0, s = 0; d < out->ndim; d++) out->shape[d] = d == cd ? classes : t->shape[s++];
    *n_out = 1;
    return OAR_OK;
}

/* ---- reference kernels (double accumulation; contiguous inputs) */
static double mix(double nll, double uniform, double eps) {
    /* without smoothing the uniform part is not computed: it may be inf (masked logits) and
     * 0 * inf would poison the loss */
    return eps > 0 ? (1 - eps) * nll + eps * uniform : nll;
}

static double reduced(double acc, int64_t count, int64_t reduction) {
    return reduction == OAR_REDUCE_MEAN ? acc / (double)count : acc; /* no samples: NaN, like torch */
}

static oar_status ce_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                         int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *t = in[1];
    cls_layout L = layout_of(x);
    int64_t ignore = a[A_IGNORE].i, r = a[A_REDUCTION].i, count;
    oar_status st = oar_loss_count_targets("cross_entropy", t, L.classes, ignore, &count);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype], *tt = &oar_dtypes[t->dtype];
    int64_t xs = (int64_t)tx->size, ts = (int64_t)tt->size, step = L.inner * xs;
    const char *xp = oar_tensor_ptr(x), *tp = oar_tensor_ptr(t);
    char *lp = oar_tensor_ptr(out[0]);
    double *lse_out = (double *)oar_tensor_ptr(out[1]), eps = a[A_SMOOTHING].f, acc = 0;
    for (int64_t n = 0; n < L.outer; n++) {
        for (int64_t k = 0; k < L.inner; k++) {
            int64_t i = n * L.inner + k;
            const char *row = xp + (n * L.classes * L.inner + k) * xs;
            double m = -INFINITY, sum_x = 0, sum_e = 0;
            for (int64_t c = 0; c < L.classes; c++) {
                double v = tx->load(row + c * step);
                if (v > m) m = v;
                sum_x += v;
            }
            for (int64_t c = 0; c < L.classes; c++) sum_e += exp(tx->load(row + c * step) - m);
            double lse = m + log(sum_e), loss = 0;
            lse_out[i] = lse;
            int64_t tg = tt->load_i64(tp + i * ts);
            if (tg != ignore) loss = mix(lse - tx->load(row + tg * step), lse - sum_x / (double)L.classes, eps);
            if (r == OAR_REDUCE_NONE) tx->store(lp + i * xs, loss);
            else acc += loss;
        }
    }
    if (r != OAR_REDUCE_NONE) tx->store(lp, reduced(acc, count, r));
    return OAR_OK;
}

static oar_status nll_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0], *t = in[1];
    cls_layout L = layout_of(x);
    int64_t ignore = a[A_IGNORE].i, r = a[A_REDUCTION].i, count;
    oar_status st = oar_loss_count_targets("nll_loss", t, L.classes, ignore, &count);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype], *tt = &oar_dtypes[t->dtype];
    int64_t xs = (int64_t)tx->size, ts = (int64_t)tt->size, step = L.inner * xs;
    const char *xp = oar_tensor_ptr(x), *tp = oar_tensor_ptr(t);
    char *lp = oar_tensor_ptr(out[0]);
    double eps = a[A_SMOOTHING].f, acc = 0;
    for (int64_t n = 0; n < L.outer; n++) {
        for (int64_t k = 0; k < L.inner; k++) {
            int64_t i = n * L.inner + k;
            const char *row = xp + (n * L.classes * L.inner + k) * xs;
            int64_t tg = tt->load_i64(tp + i * ts);
            double loss = 0;
            if (tg != ignore) {
                double sum = 0;
                if (eps > 0)
                    for (int64_t c = 0; c < L.classes; c++) sum += tx->load(row + c * step);
                loss = mix(-tx->load(row + tg * step), -sum / (double)L.classes, eps);
            }
            if (r == OAR_REDUCE_NONE) tx->store(lp + i * xs, loss);
            else acc += loss;
        }
    }
    if (r != OAR_REDUCE_NONE) tx->store(lp, reduced(acc, count, r));
    return OAR_OK;
}

/* Smoothed one-hot weight of class c for target tg. */
static inline double smoothed(int64_t c, int64_t tg, double eps, int64_t classes) {
    return (c == tg ? 1 - eps : 0) + eps / (double)classes;
}

/* dx = a * (softmax(x) - q), with a = grad_output (/ count for mean) and 0 for ignored samples. */
static oar_status ceb_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                          int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *go = in[0], *x = in[1], *t = in[2], *lse = in[3];
    cls_layout L = layout_of(x);
    int64_t ignore = a[A_IGNORE].i, r = a[A_REDUCTION].i, count;
    oar_status st = oar_loss_count_targets("cross_entropy_backward", t, L.classes, ignore, &count);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *tx = &oar_dtypes[x->dtype], *tt = &oar_dtypes[t->dtype];
    int64_t xs = (int64_t)tx->size, ts = (int64_t)tt->size, step = L.inner * xs;
    const char *xp = oar_tensor_ptr(x), *tp = oar_tensor_ptr(t), *gp = oar_tensor_ptr(go);
    const double *lse_in = (const double *)oar_tensor_ptr(lse);
    char *dp = oar_tensor_ptr(out[0]);
    double eps = a[A_SMOOTHING].f;
    for (int64_t n = 0; n < L.outer; n++) {
        for (int64_t k = 0; k < L.inner; k++) {
            int64_t i = n * L.inner + k, off = (n * L.classes * L.inner + k) * xs;
            int64_t tg = tt->load_i64(tp + i * ts);
            double g = tx->load(gp + (r == OAR_REDUCE_NONE ? i * xs : 0)), s = lse_in[i];
            if (r == OAR_REDUCE_MEAN) g /= (double)count;
            for (int64_t c = 0; c < L.classes; c++) {
                double d = 0; /* ignored samples get exact zeros, whatever their logits */
                if (tg != ignore) d = g * (exp(tx->load(xp + off + c * step) - s) - smoothed(c, tg, eps, L.classes));
                tx->store(dp + off + c * step, d);
            }
        }
    }
    return OAR_OK;
}

/* d log_probs = -a * q, with a as above. */
static oar_status nllb_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                           int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *go = in[0], *t = in[1], *y = out[0];
    cls_layout L = layout_of(y);
    const oar_attr *o = a + 1;
    int64_t ignore = o[A_IGNORE].i, r = o[A_REDUCTION].i, count;
    oar_status st = oar_loss_count_targets("nll_loss_backward", t, L.classes, ignore, &count);
    if (st != OAR_OK) return st;
    const oar_dtype_traits *ty = &oar_dtypes[y->dtype], *tt = &oar_dtypes[t->dtype];
    int64_t ys = (int64_t)ty->size, ts = (int64_t)tt->size, step = L.inner * ys;
    const char *tp = oar_tensor_ptr(t), *gp = oar_tensor_ptr(go);
    char *dp = oar_tensor_ptr(y);
    double eps = o[A_SMOOTHING].f;
    for (int64_t n = 0; n < L.outer; n++) {
        for (int64_t k = 0; k < L.inner; k++) {
            int64_t i = n * L.inner + k, off = (n * L.classes * L.inner + k) * ys;
            int64_t tg = tt->load_i64(tp + i * ts);
            double g = ty->load(gp + (r == OAR_REDUCE_NONE ? i * ys : 0));
            if (r == OAR_REDUCE_MEAN) g /= (double)count;
            for (int64_t c = 0; c < L.classes; c++) {
                /* classes with zero weight get exact zeros, as in torch, even for an inf gradient */
                double q = tg == ignore ? 0 : smoothed(c, tg, eps, L.classes);
                ty->store(dp + off + c * step, q > 0 ? -g * q : 0.0);
            }
        }
    }
    return OAR_OK;
}

/* ---- gradient rules (op calls only, so higher-order gradients work) */
/* A rule whose op calls failed left a needed gradient NULL; report the failure. */
static oar_status rule_status(oar_grad_ctx *g) {
    for (int i = 0; i < g->n_in; i++) {
        if (!g->needs[i] || g->gin[i]) continue;
        if (oar_last_status() != OAR_OK) return oar_last_status();
        return oar_error(OAR_ERR_INTERNAL, "loss gradient: no gradient for input %d; please report this", i);
    }
    return OAR_OK;
}

static oar_tensor *target_i64(oar_tensor *t) { return t->dtype == OAR_I64 ? t : oar_cast(t, OAR_I64); }

static oar_tensor *valid_mask(oar_tensor *t64, int64_t ignore) {
    return oar_ne(t64, oar_scalar((double)ignore, OAR_I64));
}

/* The number of counted samples, at least 1: it only divides gradients that are zero when
 * nothing is counted, so an all-ignored batch gets zero gradients, as in torch. */
static oar_tensor *count_at_least_1(oar_tensor *valid, oar_dtype dt) {
    return oar_maximum(oar_sum(oar_cast(valid, dt), NULL, 0, false), oar_scalar(1.0, dt));
}

/* dL/d(sample loss), shaped like the target: gout, spread (sum) or divided by the count
 * (mean); 0 for ignored samples. */
static oar_tensor *sample_scale(oar_tensor *gout, oar_tensor *valid, int64_t r, oar_dtype dt) {
    oar_tensor *s = r == OAR_REDUCE_MEAN ? oar_div(gout, count_at_least_1(valid, dt)) : gout;
    return oar_where(valid, s, oar_scalar(0.0, dt));
}

/* Reduces per-sample values as the forward did, skipping ignored samples. */
static oar_tensor *reduce_samples(oar_tensor *v, oar_tensor *valid, int64_t r, oar_dtype dt) {
    oar_tensor *m = oar_where(valid, v, oar_scalar(0.0, dt));
    if (r == OAR_REDUCE_NONE) return m;
    oar_tensor *s = oar_sum(m, NULL, 0, false);
    return r == OAR_REDUCE_MEAN ? oar_div(s, count_at_least_1(valid, dt)) : s;
}

/* (1 - eps) * one_hot(t) + eps / C, shaped like the input x. */
static oar_tensor *smoothed_one_hot(oar_tensor *t64, const oar_tensor *x, double eps) {
    int cd = class_dim(x->ndim);
    int64_t classes = x->shape[cd], shape[OAR_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) shape[d] = d == cd ? classes : 1;
    oar_tensor *ids = oar_reshape(oar_to(oar_arange(0, (double)classes, 1, OAR_I64), x->device), shape, x->ndim);
    oar_tensor *hot = oar_cast(oar_eq(oar_unsqueeze(t64, cd), ids), x->dtype);
    return oar_add_scalar(oar_mul_scalar(hot, 1.0 - eps), eps / (double)classes);
}

/* softmax from the saved log-sum-exp (f64): exp(x - lse) <= 1 never overflows. */
static oar_tensor *probs(oar_tensor *x, oar_tensor *lse) {
    oar_tensor *p = oar_exp(oar_sub(oar_cast(x, OAR_F64), oar_unsqueeze(lse, class_dim(x->ndim))));
    return oar_cast(p, x->dtype);
}

static oar_status ce_grad(oar_grad_ctx *g) {
    if (!g->needs[0]) return OAR_OK;
    oar_tensor *x = g->in[0], *lse = g->out[1], *dx = NULL;
    if (g->gout[0]) {
        oar_tensor *in[4] = {g->gout[0], x, g->in[1], lse};
        dx = oar_op_call1(OAR_OP_cross_entropy_backward, in, 4, g->attrs);
    }
    if (g->gout[1]) { /* the saved lse got a gradient (double backward): d lse / dx = softmax */
        oar_tensor *d = oar_mul(probs(x, lse), oar_unsqueeze(oar_cast(g->gout[1], x->dtype), class_dim(x->ndim)));
        dx = g->gout[0] ? oar_add(dx, d) : d;
    }
    g->gin[0] = dx;
    return rule_status(g);
}

/* The backward op treats lse as an input of its own: dx = a * (exp(x - lse) - q) is linear in
 * grad_output, and depends on x and lse through p = exp(x - lse) only. The path from lse back
 * to the logits is closed by ce_grad's gout[1] branch. */
static oar_status ceb_grad(oar_grad_ctx *g) {
    oar_tensor *G = g->gout[0], *x = g->in[1], *lse = g->in[3];
    int64_t r = g->attrs[A_REDUCTION].i;
    int cd = class_dim(x->ndim);
    oar_tensor *t64 = target_i64(g->in[2]);
    oar_tensor *valid = valid_mask(t64, g->attrs[A_IGNORE].i);
    oar_tensor *p = probs(x, lse);
    if (g->needs[1] || g->needs[3]) {
        oar_tensor *gp = oar_mul(oar_mul(G, p), oar_unsqueeze(sample_scale(g->in[0], valid, r, x->dtype), cd));
        if (g->needs[1]) g->gin[1] = gp;
        if (g->needs[3]) g->gin[3] = oar_cast(oar_neg(oar_sum(gp, &cd, 1, false)), OAR_F64);
    }
    if (g->needs[0]) {
        oar_tensor *q = smoothed_one_hot(t64, x, g->attrs[A_SMOOTHING].f);
        oar_tensor *per_sample = oar_sum(oar_mul(G, oar_sub(p, q)), &cd, 1, false);
        g->gin[0] = reduce_samples(per_sample, valid, r, x->dtype);
    }
    return rule_status(g);
}

static oar_status nll_grad(oar_grad_ctx *g) {
    if (!g->needs[0]) return OAR_OK;
    const oar_tensor *x = g->in[0];
    oar_attr a[4] = {oar_attr_int(x->shape[class_dim(x->ndim)]), g->attrs[A_REDUCTION], g->attrs[A_IGNORE],
                     g->attrs[A_SMOOTHING]};
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_nll_loss_backward, in, 2, a);
    return rule_status(g);
}

/* d log_probs = -a q is linear in grad_output: its gradient is nll_loss of the incoming
 * gradient under the same options. */
static oar_status nllb_grad(oar_grad_ctx *g) {
    if (!g->needs[0]) return OAR_OK;
    const oar_attr *o = g->attrs + 1;
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    oar_tensor *d = oar_op_call1(OAR_OP_nll_loss, in, 2, o);
    if (d && o[A_REDUCTION].i == OAR_REDUCE_MEAN) {
        /* nothing counted: the output is all zeros whatever grad_output is, but the mean is NaN */
        oar_tensor *zero = oar_scalar(0.0, d->dtype);
        oar_tensor *valid = valid_mask(target_i64(g->in[1]), o[A_IGNORE].i);
        d = oar_where(oar_gt(oar_sum(oar_cast(valid, d->dtype), NULL, 0, false), zero), d, zero);
    }
    g->gin[0] = d;
    return rule_status(g);
}

/* ---- definitions */
/* reduction 0 is 'mean' (oar_reduction); torch's defaults */
#define CE_ATTRS {"reduction", OAR_ATTR_INT, "0"}, {"ignore_index", OAR_ATTR_INT, "-100"}, \
                 {"label_smoothing", OAR_ATTR_FLOAT, "0"}

const oar_op_def oar_opdef_cross_entropy = {
    .name = "cross_entropy", .n_inputs = 2, .n_outputs = 2, .n_visible = 1, .n_attrs = 3,
    .attrs = {CE_ATTRS}, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = ce_infer, .reference = ce_ref, .grad = ce_grad,
};

const oar_op_def oar_opdef_cross_entropy_backward = {
    .name = "cross_entropy_backward", .n_inputs = 4, .n_outputs = 1, .key_input = 1, .n_attrs = 3,
    .attrs = {CE_ATTRS}, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = ceb_infer, .reference = ceb_ref, .grad = ceb_grad,
};

const oar_op_def oar_opdef_nll_loss = {
    .name = "nll_loss", .n_inputs = 2, .n_outputs = 1, .n_attrs = 3,
    .attrs = {CE_ATTRS}, .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = nll_infer, .reference = nll_ref, .grad = nll_grad,
};

const oar_op_def oar_opdef_nll_loss_backward = {
    .name = "nll_loss_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 4,
    .attrs = {{"num_classes", OAR_ATTR_INT}, CE_ATTRS}, .flags = OAR_OPF_AMP_DENY,
    .ref_dtypes = OAR_FLOAT_DTYPES, .infer = nllb_infer, .reference = nllb_ref, .grad = nllb_grad,
};

/* ---- public API */
oar_ce_opts oar_ce_defaults(void) {
    return (oar_ce_opts){.reduction = OAR_REDUCE_MEAN, .ignore_index = -100, .label_smoothing = 0.0};
}

static oar_tensor *class_loss(oar_op_id op, oar_tensor *x, oar_tensor *target, const oar_ce_opts *opts) {
    oar_ce_opts o = opts ? *opts : oar_ce_defaults();
    oar_attr a[3] = {oar_attr_int(o.reduction), oar_attr_int(o.ignore_index), oar_attr_float(o.label_smoothing)};
    oar_tensor *in[2] = {x, target};
    return oar_op_call1(op, in, 2, a);
}

oar_tensor *oar_cross_entropy(oar_tensor *logits, oar_tensor *target, const oar_ce_opts *opts) {
    return class_loss(OAR_OP_cross_entropy, logits, target, opts);
}

oar_tensor *oar_nll_loss(oar_tensor *log_probs, oar_tensor *target, const oar_ce_opts *opts) {
    return class_loss(OAR_OP_nll_loss, log_probs, target, opts);
}
