/* Scaled dot-product attention as one op, and its backward as another.
 *
 *   fused_attention(q [..., L, D], k [..., S, D], v [..., S, Dv], mask? bool [L, S]; scale, causal)
 *     -> out [..., L, Dv], and hidden (saved for backward) probs [..., L, S]
 *   probs = softmax(q kᵀ * scale, masked to -inf where mask is true or, when causal, j > i)
 *   out   = probs v
 *
 *   attention_backward(grad_out, q, k, v, probs; scale) -> dq, dk, dv
 *
 * The leading (batch) dims of q, k and v are equal; the mask broadcasts over them. A row with
 * every key masked gives NaN, as softmax of all -inf does in the unfused composition. Inputs
 * may be strided (q, k, v are usually head views of a projection): kernels read them in place.
 * The fusion pass fuse_attention (src/graph/passes/fuse_attention.c) makes these ops from the
 * matmul / scale / masked_fill / softmax / matmul chain and its traced backward. Reference
 * kernels compute in double through the dtype traits. */
#include "ops/op.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shapes */

static void shape_text(const oar_tensor *t, char *buf, size_t size) { oar_format_shape(t->shape, t->ndim, buf, size); }

/* q, k, v: float, one dtype, rank >= 2, equal leading dims, q/k share D, k/v share S. */
static oar_status check_qkv(const char *op, oar_tensor *const *qkv) {
    static const char *const names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        oar_status st = oar_check_float(op, qkv[i], names[i]);
        if (st != OAR_OK) return st;
    }
    oar_status st = oar_check_same_dtype(op, qkv, 3);
    if (st != OAR_OK) return st;
    char sq[128], sk[128], sv[128];
    shape_text(qkv[0], sq, sizeof sq);
    shape_text(qkv[1], sk, sizeof sk);
    shape_text(qkv[2], sv, sizeof sv);
    const oar_tensor *q = qkv[0], *k = qkv[1], *v = qkv[2];
    int nd = q->ndim;
    bool ranks = nd >= 2 && k->ndim == nd && v->ndim == nd;
    bool batch = ranks && memcmp(q->shape, k->shape, sizeof(int64_t) * (size_t)(nd - 2)) == 0 &&
                 memcmp(q->shape, v->shape, sizeof(int64_t) * (size_t)(nd - 2)) == 0;
    if (!batch)
        return oar_error(OAR_ERR_SHAPE, "%s: expected q [..., L, D], k [..., S, D] and v [..., S, Dv] with one rank "
                                        ">= 2 and equal leading dims, got %s, %s and %s", op, sq, sk, sv);
    if (q->shape[nd - 1] != k->shape[nd - 1] || k->shape[nd - 2] != v->shape[nd - 2])
        return oar_error(OAR_ERR_SHAPE, "%s: expected q and k with one last dim D and k and v with one length S, got "
                                        "%s, %s and %s", op, sq, sk, sv);
    return OAR_OK;
}

static void meta_with_last2(oar_meta *m, const oar_tensor *like, int64_t rows, int64_t cols) {
    oar_meta_from(m, like);
    m->shape[like->ndim - 2] = rows;
    m->shape[like->ndim - 1] = cols;
}

static oar_status fused_attention_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                        int *n_out) {
    (void)n_in;
    oar_status st = check_qkv("fused_attention", in);
    if (st != OAR_OK) return st;
    const oar_tensor *q = in[0], *k = in[1], *v = in[2], *mask = in[3];
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2];
    if (mask && (mask->dtype != OAR_BOOL || mask->ndim != 2 || mask->shape[0] != L || mask->shape[1] != S)) {
        char sm[128];
        shape_text(mask, sm, sizeof sm);
        return oar_error(OAR_ERR_SHAPE, "fused_attention: expected a bool mask of shape [%lld, %lld] ([L, S]), got %s%s",
                         (long long)L, (long long)S, oar_dtype_name(mask->dtype), sm);
    }
    if (!isfinite(a[0].f))
        return oar_error(OAR_ERR_INVALID_ARG, "fused_attention: expected a finite scale, got %g", a[0].f);
    if (a[1].i != 0 && a[1].i != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "fused_attention: expected causal 0 or 1, got %lld", (long long)a[1].i);
    meta_with_last2(&out[0], q, L, v->shape[nd - 1]);
    meta_with_last2(&out[1], q, L, S);
    *n_out = 2;
    return OAR_OK;
}

static oar_status attention_backward_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,
                                           int *n_out) {
    (void)n_in; (void)a;
    oar_status st = check_qkv("attention_backward", in + 1);
    if (st == OAR_OK) st = oar_check_same_dtype("attention_backward", in, 5);
    if (st != OAR_OK) return st;
    const oar_tensor *g = in[0], *q = in[1], *k = in[2], *v = in[3], *p = in[4];
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], Dv = v->shape[nd - 1];
    bool g_ok = g->ndim == nd && !memcmp(g->shape, q->shape, sizeof(int64_t) * (size_t)(nd - 2)) &&
                g->shape[nd - 2] == L && g->shape[nd - 1] == Dv;
    bool p_ok = p->ndim == nd && !memcmp(p->shape, q->shape, sizeof(int64_t) * (size_t)(nd - 2)) &&
                p->shape[nd - 2] == L && p->shape[nd - 1] == S;
    if (!g_ok || !p_ok) {
        char sg[128], sp[128], sq[128];
        shape_text(g, sg, sizeof sg);
        shape_text(p, sp, sizeof sp);
        shape_text(q, sq, sizeof sq);
        return oar_error(OAR_ERR_SHAPE, "attention_backward: expected grad_out [..., %lld, %lld] and probs [..., %lld, "
                                        "%lld] with q's leading dims (q is %s), got %s and %s", (long long)L,
                         (long long)Dv, (long long)L, (long long)S, sq, sg, sp);
    }
    oar_meta_from(&out[0], q);
    oar_meta_from(&out[1], k);
    oar_meta_from(&out[2], v);
    *n_out = 3;
    return OAR_OK;
}

/* ---- reference kernels */

/* Element offset of batch entry b (over the leading dims) in t. */
static int64_t batch_offset(const oar_tensor *t, int64_t b) {
    int64_t off = 0;
    for (int d = t->ndim - 3; d >= 0; d--) {
        off += (b % t->shape[d]) * t->strides[d];
        b /= t->shape[d];
    }
    return off;
}

static int64_t batch_count(const oar_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim - 2; d++) n *= t->shape[d];
    return n;
}

/* A matrix of batch entry b: element (i, j) at base[(i * rs + j * cs) * es]. */
typedef struct ref_mat {
    const char *base;
    int64_t rs, cs;
} ref_mat;

static ref_mat mat_of(const oar_tensor *t, int64_t b) {
    int64_t es = (int64_t)oar_dtypes[t->dtype].size;
    return (ref_mat){oar_tensor_ptr(t) + batch_offset(t, b) * es, t->strides[t->ndim - 2], t->strides[t->ndim - 1]};
}

static double at(const oar_dtype_traits *tr, ref_mat m, int64_t i, int64_t j) {
    return tr->load(m.base + (i * m.rs + j * m.cs) * (int64_t)tr->size);
}

static bool masked(const oar_tensor *mask, bool causal, int64_t i, int64_t j) {
    if (causal && j > i) return true;
    if (!mask) return false;
    const char *p = oar_tensor_ptr(mask);
    return oar_dtypes[OAR_BOOL].load(p + i * mask->strides[0] + j * mask->strides[1]) != 0;
}

static oar_status fused_attention_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *q = in[0], *k = in[1], *v = in[2], *mask = in[3];
    const oar_dtype_traits *tr = &oar_dtypes[q->dtype];
    const int64_t es = (int64_t)tr->size;
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], D = q->shape[nd - 1], Dv = v->shape[nd - 1];
    double scale = a[0].f;
    bool causal = a[1].i != 0;
    double *row = malloc(sizeof(double) * (size_t)(S ? S : 1));
    if (!row) return oar_error(OAR_ERR_OOM, "fused_attention: out of memory");
    char *op = oar_tensor_ptr(out[0]), *pp = oar_tensor_ptr(out[1]);
    for (int64_t b = 0, nb = batch_count(q); b < nb; b++) {
        ref_mat qm = mat_of(q, b), km = mat_of(k, b), vm = mat_of(v, b);
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY;
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += at(tr, qm, i, d) * at(tr, km, j, d);
                row[j] = masked(mask, causal, i, j) ? -INFINITY : s * scale;
                if (row[j] > mx) mx = row[j];
            }
            double sum = 0;
            for (int64_t j = 0; j < S; j++) sum += row[j] = exp(row[j] - mx); /* all -inf: NaN, as softmax */
            for (int64_t j = 0; j < S; j++) {
                row[j] /= sum;
                tr->store(pp + ((b * L + i) * S + j) * es, row[j]);
            }
            for (int64_t e = 0; e < Dv; e++) {
                double o = 0;
                for (int64_t j = 0; j < S; j++) o += row[j] * at(tr, vm, j, e);
                tr->store(op + ((b * L + i) * Dv + e) * es, o);
            }
        }
    }
    free(row);
    return OAR_OK;
}

/* dv = pᵀ g;  dp = g vᵀ;  ds = scale * p * (dp - rowsum(dp * p));  dq = ds k;  dk = dsᵀ q */
static oar_status attention_backward_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                         oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *g = in[0], *q = in[1], *k = in[2], *v = in[3], *p = in[4];
    const oar_dtype_traits *tr = &oar_dtypes[q->dtype];
    const int64_t es = (int64_t)tr->size;
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], D = q->shape[nd - 1], Dv = v->shape[nd - 1];
    double scale = a[0].f;
    double *ds = malloc(sizeof(double) * (size_t)(L * S > 0 ? L * S : 1));
    if (!ds) return oar_error(OAR_ERR_OOM, "attention_backward: out of memory");
    char *dq = oar_tensor_ptr(out[0]), *dk = oar_tensor_ptr(out[1]), *dv = oar_tensor_ptr(out[2]);
    for (int64_t b = 0, nb = batch_count(q); b < nb; b++) {
        ref_mat gm = mat_of(g, b), qm = mat_of(q, b), km = mat_of(k, b), vm = mat_of(v, b), pm = mat_of(p, b);
        for (int64_t j = 0; j < S; j++)
            for (int64_t e = 0; e < Dv; e++) {
                double s = 0;
                for (int64_t i = 0; i < L; i++) s += at(tr, pm, i, j) * at(tr, gm, i, e);
                tr->store(dv + ((b * S + j) * Dv + e) * es, s);
            }
        for (int64_t i = 0; i < L; i++) {
            double r = 0;
            for (int64_t j = 0; j < S; j++) {
                double dp = 0;
                for (int64_t e = 0; e < Dv; e++) dp += at(tr, gm, i, e) * at(tr, vm, j, e);
                ds[i * S + j] = dp;
                r += dp * at(tr, pm, i, j);
            }
            for (int64_t j = 0; j < S; j++) ds[i * S + j] = scale * at(tr, pm, i, j) * (ds[i * S + j] - r);
        }
        for (int64_t i = 0; i < L; i++)
            for (int64_t d = 0; d < D; d++) {
                double s = 0;
                for (int64_t j = 0; j < S; j++) s += ds[i * S + j] * at(tr, km, j, d);
                tr->store(dq + ((b * L + i) * D + d) * es, s);
            }
        for (int64_t j = 0; j < S; j++)
            for (int64_t d = 0; d < D; d++) {
                double s = 0;
                for (int64_t i = 0; i < L; i++) s += ds[i * S + j] * at(tr, qm, i, d);
                tr->store(dk + ((b * S + j) * D + d) * es, s);
            }
    }
    free(ds);
    return OAR_OK;
}

/* ---- gradient rules (public ops) */

static oar_tensor *mT(oar_tensor *t) { return oar_transpose(t, -1, -2); }

static oar_tensor *softmax_bwd(oar_tensor *g, oar_tensor *y) {
    oar_attr a = oar_attr_int(-1);
    oar_tensor *in[2] = {g, y};
    return oar_op_call1(OAR_OP_softmax_backward, in, 2, &a);
}

/* Calls attention_backward: dq, dk, dv tracked in the rule's scope. */
static oar_status call_attention_backward(oar_tensor *g, oar_tensor *q, oar_tensor *k, oar_tensor *v, oar_tensor *p,
                                          double scale, oar_tensor **d) {
    oar_attr a = oar_attr_float(scale);
    oar_tensor *in[5] = {g, q, k, v, p};
    int n = 3;
    oar_status st = oar_op_call(OAR_OP_attention_backward, in, 5, &a, d, &n);
    if (st != OAR_OK) return st;
    for (int i = 0; i < 3; i++) oar_track(d[i]);
    return OAR_OK;
}

static oar_status fused_attention_grad(oar_grad_ctx *g) {
    oar_tensor *q = g->in[0], *k = g->in[1], *v = g->in[2], *p = g->out[1];
    oar_tensor *go = g->gout[0], *gp = g->gout[1];
    double scale = g->attrs[0].f;
    if (!go && !gp) return OAR_OK;
    if (!gp) { /* the usual case: one registered op */
        oar_tensor *d[3];
        oar_status st = call_attention_backward(go, q, k, v, p, scale, d);
        if (st != OAR_OK) return st;
        for (int i = 0; i < 3; i++)
            if (g->needs[i]) g->gin[i] = d[i];
        return OAR_OK;
    }
    /* a gradient reached the saved probs too (double backward): compose it */
    oar_tensor *dp = go ? oar_add(oar_matmul(go, mT(v)), gp) : gp;
    oar_tensor *ds = oar_mul_scalar(softmax_bwd(dp, p), scale);
    if (g->needs[0]) g->gin[0] = oar_matmul(ds, k);
    if (g->needs[1]) g->gin[1] = oar_matmul(mT(ds), q);
    if (g->needs[2] && go) g->gin[2] = oar_matmul(mT(p), go);
    for (int i = 0; i < 2; i++)
        if (g->needs[i] && !g->gin[i]) return oar_last_status();
    return g->needs[2] && go && !g->gin[2] ? oar_last_status() : OAR_OK;
}

/* attention_backward(g, q, k, v, p) with p an independent input:
 *   dv = pᵀ g, dp = g vᵀ, r = rowsum(dp * p), ds = scale * p * (dp - r), dq = ds k, dk = dsᵀ q.
 * For incoming gradients uq, uk, uv of dq, dk, dv, the gradient reaching ds is
 * w = uq kᵀ + q ukᵀ, and reaching ds0 = p * (dp - r) is wd = scale * w; then
 *   to dp: softmax_backward(wd, p)                        (call it gdp)
 *   to p:  g uvᵀ + wd * (dp - r) - dp * rowsum(wd * p)
 *   to g:  p uv + gdp v;   to v: gdpᵀ g;   to q: ds uk;   to k: dsᵀ uq. */
static oar_status attention_backward_grad(oar_grad_ctx *g) {
    oar_tensor *go = g->in[0], *q = g->in[1], *k = g->in[2], *v = g->in[3], *p = g->in[4];
    oar_tensor *uq = g->gout[0], *uk = g->gout[1], *uv = g->gout[2];
    double scale = g->attrs[0].f;
    const int last = -1;
    oar_tensor *dp = oar_matmul(go, mT(v));
    oar_tensor *r = oar_sum(oar_mul(dp, p), &last, 1, true);
    oar_tensor *ds = oar_mul_scalar(oar_mul(p, oar_sub(dp, r)), scale);
    oar_tensor *w = NULL;
    if (uq) w = oar_matmul(uq, mT(k));
    if (uk) {
        oar_tensor *t = oar_matmul(q, mT(uk));
        w = w ? oar_add(w, t) : t;
    }
    oar_tensor *wd = w ? oar_mul_scalar(w, scale) : NULL;
    oar_tensor *gdp = wd ? softmax_bwd(wd, p) : NULL;
    if (g->needs[0] && (uv || gdp)) {
        oar_tensor *a = uv ? oar_matmul(p, uv) : NULL, *b = gdp ? oar_matmul(gdp, v) : NULL;
        g->gin[0] = a && b ? oar_add(a, b) : a ? a : b;
    }
    if (g->needs[1] && uk) g->gin[1] = oar_matmul(ds, uk);
    if (g->needs[2] && uq) g->gin[2] = oar_matmul(mT(ds), uq);
    if (g->needs[3] && gdp) g->gin[3] = oar_matmul(mT(gdp), go);
    if (g->needs[4] && (uv || wd)) {
        oar_tensor *t = uv ? oar_matmul(go, mT(uv)) : NULL;
        if (wd) {
            oar_tensor *s = oar_sub(oar_mul(wd, oar_sub(dp, r)), oar_mul(dp, oar_sum(oar_mul(wd, p), &last, 1, true)));
            t = t ? oar_add(t, s) : s;
        }
        g->gin[4] = t;
    }
    bool due[5] = {uv || gdp, uk != NULL, uq != NULL, gdp != NULL, uv || wd};
    for (int i = 0; i < 5; i++)
        if (g->needs[i] && due[i] && !g->gin[i]) return oar_last_status();
    return OAR_OK;
}

const oar_op_def oar_opdef_fused_attention = {
    .name = "fused_attention", .n_inputs = 4, .n_outputs = 2, .n_visible = 1, .n_attrs = 2,
    .attrs = {{"scale", OAR_ATTR_FLOAT}, {"causal", OAR_ATTR_INT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_ALLOW, .ref_dtypes = OAR_FLOAT_DTYPES, .optional_inputs = 0x8,
    .infer = fused_attention_infer, .reference = fused_attention_ref, .grad = fused_attention_grad,
};

const oar_op_def oar_opdef_attention_backward = {
    .name = "attention_backward", .n_inputs = 5, .n_outputs = 3, .n_attrs = 1, .attrs = {{"scale", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_STRIDED | OAR_OPF_AMP_DENY, .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = attention_backward_infer, .reference = attention_backward_ref, .grad = attention_backward_grad,
};

oar_tensor *oar_scaled_dot_product_attention(oar_tensor *q, oar_tensor *k, oar_tensor *v, oar_tensor *mask,
                                             double scale, bool causal) {
    oar_attr a[2] = {oar_attr_float(scale), oar_attr_int(causal)};
    oar_tensor *in[4] = {q, k, v, mask};
    return oar_op_call1(OAR_OP_fused_attention, in, 4, a);
}
