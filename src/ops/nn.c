/* Neural-network ops that are not normalizations: softmax, log_softmax (each with a
 * registered backward op that their rules call), dropout, embedding
 * (with its backward, a registered op so double backward works) and one_hot. Reference
 * kernels compute floats in double through the dtype traits. */
#include "ops/op.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool is_int_dtype(oar_dtype dt) { return (OAR_INT_DTYPES & OAR_DTYPE_BIT(dt)) != 0; }

/* ---- softmax and log_softmax(x; dim) */

/* A 0-d input behaves like a 1-element vector (torch accepts dim 0 or -1 for it). */
static oar_status softmax_dim(const char *name, const oar_tensor *x, int64_t dim, int *d_out) {
    int nd = x->ndim ? x->ndim : 1;
    if (dim < -nd || dim >= nd)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim in [%d, %d] for an input with %d dims, "
                                              "got %lld", name, -nd, nd - 1, x->ndim, (long long)dim);
    *d_out = (int)(dim < 0 ? dim + nd : dim);
    return OAR_OK;
}

/* x viewed as [outer, n, inner] around dim d. */
static void around_dim(const oar_tensor *x, int d, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = *inner = 1;
    *n = x->ndim ? x->shape[d] : 1;
    for (int i = 0; i < d && i < x->ndim; i++) *outer *= x->shape[i];
    for (int i = d + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

static oar_status softmax_infer_as(const char *name, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                   int *n_out) {
    oar_status st = oar_check_float(name, in[0], "the input");
    int d = 0;
    if (st == OAR_OK) st = softmax_dim(name, in[0], a[0].i, &d);
    if (st != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}
static oar_status softmax_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    return softmax_infer_as("softmax", in, a, out, n_out);
}
static oar_status log_softmax_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                    int *n_out) {
    (void)n_in;
    return softmax_infer_as("log_softmax", in, a, out, n_out);
}

/* Shifted by the maximum so exp never overflows; a NaN anywhere in a line poisons the line
 * (as in torch), because the maximum then becomes NaN. */
static oar_status softmax_ref_as(bool log_form, oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a) {
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    int d = 0;
    oar_status st = softmax_dim(log_form ? "log_softmax" : "softmax", x, a[0].i, &d);
    if (st != OAR_OK) return st;
    int64_t outer, n, inner;
    around_dim(x, d, &outer, &n, &inner);
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *xp = oar_tensor_ptr(x);
    char *yp = oar_tensor_ptr(y);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = o * n * inner + j;
            double m = -INFINITY;
            for (int64_t k = 0; k < n; k++) {
                double v = tr->load(xp + (base + k * inner) * es);
                if (v > m || v != v) m = v;
                if (m != m) break;
            }
            double s = 0;
            for (int64_t k = 0; k < n; k++) s += exp(tr->load(xp + (base + k * inner) * es) - m);
            double ls = log(s);
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (base + k * inner) * es;
                double v = tr->load(xp + at) - m;
                tr->store(yp + at, log_form ? v - ls : exp(v) / s);
            }
        }
    }
    return OAR_OK;
}
static oar_status softmax_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_ref_as(false, in, out, a);
}
static oar_status log_softmax_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                  int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_ref_as(true, in, out, a);
}

/* Both rules are registered ops (softmax_backward, log_softmax_backward below): one pass over
 * each line instead of a product, a keepdim reduction and two broadcast ops. */
static oar_tensor *call_backward(oar_op_id op, oar_tensor *gy, oar_tensor *y, int64_t dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[2] = {gy, y};
    return oar_op_call1(op, in, 2, &a);
}
static oar_status softmax_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    g->gin[0] = call_backward(OAR_OP_softmax_backward, g->gout[0], g->out[0], g->attrs[0].i);
    return g->gin[0] ? OAR_OK : oar_last_status();
}
static oar_status log_softmax_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    g->gin[0] = call_backward(OAR_OP_log_softmax_backward, g->gout[0], g->out[0], g->attrs[0].i);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_softmax = {
    .name = "softmax", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = softmax_infer, .reference = softmax_ref, .grad = softmax_grad,
};
const oar_op_def oar_opdef_log_softmax = {
    .name = "log_softmax", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = log_softmax_infer, .reference = log_softmax_ref, .grad = log_softmax_grad,
};

oar_tensor *oar_softmax(oar_tensor *x, int dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_softmax, in, 1, &a);
}
oar_tensor *oar_log_softmax(oar_tensor *x, int dim) {
    oar_attr a = oar_attr_int(dim);
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_log_softmax, in, 1, &a);
}

/* ---- softmax_backward(grad_output, output; dim) -> dx = y * (g - sum(g * y))
 *      log_softmax_backward(grad_output, output; dim) -> dx = g - exp(y) * sum(g)
 * along dim, y being the forward op's output. Both inputs have one shape and float dtype. */
static oar_status softmax_backward_infer_as(const char *name, oar_tensor *const *in, const oar_attr *a,
                                            oar_meta *out, int *n_out) {
    oar_status st = oar_check_float(name, in[0], "the gradient");
    if (st == OAR_OK) st = oar_check_same_dtype(name, in, 2);
    if (st != OAR_OK) return st;
    if (in[0]->ndim != in[1]->ndim || memcmp(in[0]->shape, in[1]->shape, sizeof(int64_t) * (size_t)in[0]->ndim)) {
        char s0[128], s1[128];
        oar_format_shape(in[0]->shape, in[0]->ndim, s0, sizeof s0);
        oar_format_shape(in[1]->shape, in[1]->ndim, s1, sizeof s1);
        return oar_error(OAR_ERR_SHAPE, "%s: expected the gradient and the output to have one shape, got %s and %s",
                         name, s0, s1);
    }
    int d = 0;
    if ((st = softmax_dim(name, in[0], a[0].i, &d)) != OAR_OK) return st;
    oar_meta_from(out, in[0]);
    *n_out = 1;
    return OAR_OK;
}
static oar_status softmax_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                         int *n_out) {
    (void)n_in;
    return softmax_backward_infer_as("softmax_backward", in, a, out, n_out);
}
static oar_status log_softmax_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                             int *n_out) {
    (void)n_in;
    return softmax_backward_infer_as("log_softmax_backward", in, a, out, n_out);
}

static oar_status softmax_backward_ref_as(bool log_form, oar_tensor *const *in, oar_tensor *const *out,
                                          const oar_attr *a) {
    const oar_tensor *gy = in[0], *y = in[1];
    oar_tensor *dx = out[0];
    if (dx->numel == 0) return OAR_OK;
    int d = 0;
    oar_status st = softmax_dim(log_form ? "log_softmax_backward" : "softmax_backward", gy, a[0].i, &d);
    if (st != OAR_OK) return st;
    int64_t outer, n, inner;
    around_dim(gy, d, &outer, &n, &inner);
    const oar_dtype_traits *tr = &oar_dtypes[gy->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *gp = oar_tensor_ptr(gy), *yp = oar_tensor_ptr(y);
    char *dp = oar_tensor_ptr(dx);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = o * n * inner + j;
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (base + k * inner) * es;
                s += log_form ? tr->load(gp + at) : tr->load(gp + at) * tr->load(yp + at);
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (base + k * inner) * es;
                double gv = tr->load(gp + at), yv = tr->load(yp + at);
                tr->store(dp + at, log_form ? gv - exp(yv) * s : yv * (gv - s));
            }
        }
    }
    return OAR_OK;
}
static oar_status softmax_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                       oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_backward_ref_as(false, in, out, a);
}
static oar_status log_softmax_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                           oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    return softmax_backward_ref_as(true, in, out, a);
}

/* dx = y * (g - s) with s = sum(g * y); for an incoming gradient u of dx:
 *   d/dg = y * (u - sum(u * y)) = softmax_backward(u, y)
 *   d/dy = u * (g - s) - g * sum(u * y) */
static oar_status softmax_backward_grad(oar_grad_ctx *g) {
    oar_tensor *u = g->gout[0], *gy = g->in[0], *y = g->in[1];
    if (!u) return OAR_OK;
    int d = (int)g->attrs[0].i;
    if (g->needs[0] && !(g->gin[0] = call_backward(OAR_OP_softmax_backward, u, y, d))) return oar_last_status();
    if (g->needs[1]) {
        oar_tensor *s = oar_sum(oar_mul(gy, y), &d, 1, true), *uy = oar_sum(oar_mul(u, y), &d, 1, true);
        if (!(g->gin[1] = oar_sub(oar_mul(u, oar_sub(gy, s)), oar_mul(gy, uy)))) return oar_last_status();
    }
    return OAR_OK;
}
/* dx = g - exp(y) * S with S = sum(g); for an incoming gradient u of dx:
 *   d/dg = u - sum(u * exp(y)),  d/dy = -u * exp(y) * S */
static oar_status log_softmax_backward_grad(oar_grad_ctx *g) {
    oar_tensor *u = g->gout[0], *gy = g->in[0], *y = g->in[1];
    if (!u) return OAR_OK;
    int d = (int)g->attrs[0].i;
    oar_tensor *p = oar_exp(y);
    if (g->needs[0] && !(g->gin[0] = oar_sub(u, oar_sum(oar_mul(u, p), &d, 1, true)))) return oar_last_status();
    if (g->needs[1] && !(g->gin[1] = oar_neg(oar_mul(oar_mul(u, p), oar_sum(gy, &d, 1, true)))))
        return oar_last_status();
    return OAR_OK;
}

const oar_op_def oar_opdef_softmax_backward = {
    .name = "softmax_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = softmax_backward_infer, .reference = softmax_backward_ref, .grad = softmax_backward_grad,
};
const oar_op_def oar_opdef_log_softmax_backward = {
    .name = "log_softmax_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 1, .attrs = {{"dim", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = log_softmax_backward_infer, .reference = log_softmax_backward_ref, .grad = log_softmax_backward_grad,
};

/* ---- dropout(x; p, training) -> y [, mask]
 * The mask (hidden output, x's dtype) holds 0 or 1/(1-p), so y = x * mask and the gradient is
 * g * mask. It exists only when elements are actually dropped at random (training, 0 < p < 1);
 * otherwise dropout is the identity (p = 0 or eval) or zeros (p = 1). */
static bool dropout_masks(const oar_attr *a) { return a[1].i && a[0].f > 0 && a[0].f < 1; }

static oar_status dropout_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    oar_status st = oar_check_float("dropout", in[0], "the input");
    if (st != OAR_OK) return st;
    double p = a[0].f;
    if (!(p >= 0 && p <= 1))
        return oar_error(OAR_ERR_INVALID_ARG, "dropout: expected a probability p in [0, 1], got %g", p);
    oar_meta_from(&out[0], in[0]);
    *n_out = 1;
    if (dropout_masks(a)) {
        oar_meta_from(&out[1], in[0]);
        *n_out = 2;
    }
    return OAR_OK;
}

static oar_status dropout_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)n_in;
    const oar_tensor *x = in[0];
    oar_tensor *y = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[x->dtype];
    const int64_t es = (int64_t)tr->size;
    const char *xp = oar_tensor_ptr(x);
    char *yp = oar_tensor_ptr(y);
    if (n_out < 2) {
        if (a[1].i && a[0].f >= 1) memset(yp, 0, (size_t)(y->numel * es)); /* all bits 0 is 0.0 in every float type */
        else memcpy(yp, xp, (size_t)(y->numel * es));
        return OAR_OK;
    }
    double p = a[0].f, scale = 1.0 / (1.0 - p);
    char *mp = oar_tensor_ptr(out[1]);
    for (int64_t i = 0; i < y->numel; i++) {
        /* the mask is rounded to x's dtype first, as in torch, so y = x * mask exactly */
        tr->store(mp + i * es, oar_rng_uniform(ctx->rng, (uint64_t)i) >= p ? scale : 0.0);
        tr->store(yp + i * es, tr->load(xp + i * es) * tr->load(mp + i * es));
    }
    return OAR_OK;
}

/* The mask does not depend on x, so a gradient reaching it (double backward) adds nothing. */
static oar_status dropout_grad(oar_grad_ctx *g) {
    if (!g->gout[0]) return OAR_OK;
    if (g->n_out > 1) g->gin[0] = oar_mul(g->gout[0], g->out[1]);
    else if (g->attrs[1].i && g->attrs[0].f >= 1) g->gin[0] = oar_zeros_like(g->gout[0]);
    else g->gin[0] = g->gout[0];
    return g->gin[0] ? OAR_OK : oar_last_status();
}

/* Only a call that makes a mask draws: evaluation, p = 0 and p = 1 leave the generator alone. */
static int64_t dropout_draws(oar_tensor *const *out, int n_out, const oar_attr *a) {
    return n_out >= 2 && dropout_masks(a) ? out[0]->numel : 0;
}

const oar_op_def oar_opdef_dropout = {
    .name = "dropout", .n_inputs = 1, .n_outputs = -1, .n_visible = 1, .n_attrs = 2,
    .attrs = {{"p", OAR_ATTR_FLOAT, "0.5"}, {"training", OAR_ATTR_INT, "true"}},
    .flags = OAR_OPF_RANDOM, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = dropout_infer, .reference = dropout_ref, .grad = dropout_grad, .draws = dropout_draws,
};

oar_tensor *oar_dropout(oar_tensor *x, double p, bool training) {
    oar_attr a[2] = {oar_attr_float(p), oar_attr_int(training)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_dropout, in, 1, a);
}

/* ---- embedding(weight [num, dim], indices [...]) -> [..., dim] */

static oar_status check_indices(const char *name, const oar_tensor *idx) {
    if (is_int_dtype(idx->dtype)) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected integer indices (i64, i32, i8 or u8), got %s; convert "
                                    "them with oar_cast", name, oar_dtype_name(idx->dtype));
}

static oar_status embedding_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in; (void)a;
    const oar_tensor *w = in[0], *idx = in[1];
    if (w->ndim != 2) {
        char s[128];
        oar_format_shape(w->shape, w->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "embedding: expected weight of shape [num_embeddings, embedding_dim], "
                                        "got %s", s);
    }
    oar_status st = check_indices("embedding", idx);
    if (st != OAR_OK) return st;
    if (idx->ndim + 1 > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "embedding: expected indices with at most %d dims (the result adds "
                                        "one), got %d", OAR_MAX_DIMS - 1, idx->ndim);
    out->dtype = w->dtype;
    out->ndim = idx->ndim + 1;
    memcpy(out->shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    out->shape[idx->ndim] = w->shape[1];
    *n_out = 1;
    return OAR_OK;
}

/* Index i of idx, checked against [0, num); an error names the bad value. */
static oar_status load_index(const char *name, const oar_tensor *idx, int64_t i, int64_t num, int64_t *v) {
    const oar_dtype_traits *ti = &oar_dtypes[idx->dtype];
    *v = ti->load_i64(oar_tensor_ptr(idx) + i * (int64_t)ti->size);
    if (*v >= 0 && *v < num) return OAR_OK;
    return oar_error(OAR_ERR_INVALID_ARG, "%s: index %lld is out of range; expected indices in [0, %lld) "
                                          "for a weight with %lld rows", name, (long long)*v, (long long)num,
                     (long long)num);
}

static oar_status embedding_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    const oar_tensor *w = in[0], *idx = in[1];
    int64_t num = w->shape[0];
    size_t row = (size_t)w->shape[1] * oar_dtypes[w->dtype].size;
    const char *wp = oar_tensor_ptr(w);
    char *yp = oar_tensor_ptr(out[0]);
    for (int64_t i = 0; i < idx->numel; i++) {
        int64_t v;
        oar_status st = load_index("embedding", idx, i, num, &v);
        if (st != OAR_OK) return st;
        if (row) memcpy(yp + (size_t)i * row, wp + (size_t)v * row, row);
    }
    return OAR_OK;
}

static oar_status embedding_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    oar_attr a = oar_attr_int(g->in[0]->shape[0]);
    oar_tensor *in[2] = {g->gout[0], g->in[1]};
    g->gin[0] = oar_op_call1(OAR_OP_embedding_backward, in, 2, &a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_embedding = {
    .name = "embedding", .n_inputs = 2, .n_outputs = 1, .key_input = 0,
    .flags = 0, .ref_dtypes = OAR_BASE_DTYPES,
    .infer = embedding_infer, .reference = embedding_ref, .grad = embedding_grad,
};

oar_tensor *oar_embedding(oar_tensor *weight, oar_tensor *indices) {
    oar_tensor *in[2] = {weight, indices};
    return oar_op_call1(OAR_OP_embedding, in, 2, NULL);
}

/* ---- embedding_backward(grad [..., dim], indices [...]; num_weights) -> [num_weights, dim]:
 * the rows of grad summed into the rows the indices name. */
static oar_status embedding_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                           int *n_out) {
    (void)n_in;
    const oar_tensor *g = in[0], *idx = in[1];
    oar_status st = oar_check_float("embedding_backward", g, "the gradient");
    if (st == OAR_OK) st = check_indices("embedding_backward", idx);
    if (st != OAR_OK) return st;
    if (a[0].i < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "embedding_backward: expected num_weights >= 0, got %lld",
                         (long long)a[0].i);
    if (g->ndim != idx->ndim + 1 || memcmp(g->shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim) != 0) {
        char gs[128], is[128];
        oar_format_shape(g->shape, g->ndim, gs, sizeof gs);
        oar_format_shape(idx->shape, idx->ndim, is, sizeof is);
        return oar_error(OAR_ERR_SHAPE, "embedding_backward: expected the gradient to have the indices' shape "
                                        "plus one trailing dim, got %s for indices %s", gs, is);
    }
    out->dtype = g->dtype;
    out->ndim = 2;
    out->shape[0] = a[0].i;
    out->shape[1] = g->shape[g->ndim - 1];
    *n_out = 1;
    return OAR_OK;
}

/* Sums in double, in index order, so the result does not depend on threads. */
static oar_status embedding_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *idx = in[1];
    oar_tensor *y = out[0];
    const oar_dtype_traits *tr = &oar_dtypes[g->dtype];
    const int64_t es = (int64_t)tr->size, num = a[0].i, dim = y->shape[1];
    double *acc = oar_malloc(sizeof(double) * (size_t)(y->numel ? y->numel : 1));
    if (!acc) return OAR_ERR_OOM;
    const char *gp = oar_tensor_ptr(g);
    oar_status st = OAR_OK;
    for (int64_t i = 0; i < idx->numel && st == OAR_OK; i++) {
        int64_t v;
        st = load_index("embedding_backward", idx, i, num, &v);
        for (int64_t k = 0; st == OAR_OK && k < dim; k++) acc[v * dim + k] += tr->load(gp + (i * dim + k) * es);
    }
    char *yp = oar_tensor_ptr(y);
    for (int64_t i = 0; st == OAR_OK && i < y->numel; i++) tr->store(yp + i * es, acc[i]);
    free(acc);
    return st;
}

/* Linear in the gradient: its own gradient gathers rows again. */
static oar_status embedding_backward_grad(oar_grad_ctx *g) {
    if (!g->gout[0] || !g->needs[0]) return OAR_OK;
    g->gin[0] = oar_embedding(g->gout[0], g->in[1]);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_embedding_backward = {
    .name = "embedding_backward", .n_inputs = 2, .n_outputs = 1, .key_input = 0, .n_attrs = 1,
    .attrs = {{"num_weights", OAR_ATTR_INT}},
    .flags = OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = embedding_backward_infer, .reference = embedding_backward_ref, .grad = embedding_backward_grad,
};

/* ---- one_hot(indices; num_classes) -> i64 [..., num_classes]; num_classes = -1: max + 1 */
static oar_status one_hot_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const oar_tensor *idx = in[0];
    oar_status st = check_indices("one_hot", idx);
    if (st != OAR_OK) return st;
    if (idx->ndim + 1 > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_SHAPE, "one_hot: expected indices with at most %d dims (the result adds one), "
                                        "got %d", OAR_MAX_DIMS - 1, idx->ndim);
    int64_t classes = a[0].i;
    if (classes < -1)
        return oar_error(OAR_ERR_INVALID_ARG, "one_hot: expected num_classes >= 0, or -1 to use max(indices) + 1, "
                                              "got %lld", (long long)classes);
    if (classes == -1) {
        /* the result's shape depends on the data here */
        if (idx->numel == 0)
            return oar_error(OAR_ERR_INVALID_ARG, "one_hot: cannot infer num_classes from an empty tensor; "
                                                  "pass num_classes explicitly");
        if (!idx->storage)
            return oar_error(OAR_ERR_UNSUPPORTED, "one_hot: num_classes = -1 needs the indices' values; pass "
                                                  "num_classes explicitly when tracing");
        /* indices on a device are read from a host copy */
        oar_tensor *host = NULL;
        if (idx->device != OAR_CPU) {
            host = oar_tensor_new_on(OAR_CPU, idx->dtype, idx->shape, idx->ndim);
            if (!host) return oar_last_status();
            if ((st = oar_tensor_copy_strided(host, idx)) != OAR_OK) {
                oar_tensor_unref(host);
                return st;
            }
            idx = host;
        }
        oar_iter it;
        oar_tensor *ops[1] = {(oar_tensor *)idx};
        oar_iter_init(&it, idx->shape, idx->ndim, ops, 1);
        const oar_dtype_traits *ti = &oar_dtypes[idx->dtype];
        int64_t mx = INT64_MIN;
        do {
            int64_t v = ti->load_i64(it.ptr[0]);
            if (v > mx) mx = v;
        } while (oar_iter_next(&it));
        if (host) oar_tensor_unref(host);
        classes = mx < 0 ? 0 : mx + 1; /* negative values are reported by the kernel */
    }
    out->dtype = OAR_I64;
    out->ndim = idx->ndim + 1;
    memcpy(out->shape, idx->shape, sizeof(int64_t) * (size_t)idx->ndim);
    out->shape[idx->ndim] = classes;
    *n_out = 1;
    return OAR_OK;
}

static oar_status one_hot_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                              int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    const oar_tensor *idx = in[0];
    oar_tensor *y = out[0];
    const int64_t classes = y->shape[y->ndim - 1];
    const oar_dtype_traits *ti = &oar_dtypes[idx->dtype];
    const char *ip = oar_tensor_ptr(idx);
    int64_t *yp = (int64_t *)oar_tensor_ptr(y);
    if (y->numel) memset(yp, 0, sizeof(int64_t) * (size_t)y->numel);
    for (int64_t i = 0; i < idx->numel; i++) {
        int64_t v = ti->load_i64(ip + i * (int64_t)ti->size);
        if (v < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "one_hot: expected class values >= 0, got %lld", (long long)v);
        if (v >= classes)
            return oar_error(OAR_ERR_INVALID_ARG, "one_hot: class value %lld is out of range; expected values in "
                                                  "[0, %lld) for num_classes = %lld", (long long)v,
                             (long long)classes, (long long)classes);
        yp[i * classes + v] = 1;
    }
    return OAR_OK;
}

const oar_op_def oar_opdef_one_hot = {
    .name = "one_hot", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1, .attrs = {{"num_classes", OAR_ATTR_INT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_INT_DTYPES,
    .infer = one_hot_infer, .reference = one_hot_ref,
};

oar_tensor *oar_one_hot(oar_tensor *indices, int64_t num_classes) {
    oar_attr a = oar_attr_int(num_classes);
    oar_tensor *in[1] = {indices};
    return oar_op_call1(OAR_OP_one_hot, in, 1, &a);
}
