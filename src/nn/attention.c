/* nn.MultiheadAttention with batch_first=True: parameters in_proj_weight [3E, E] (xavier
 * uniform), in_proj_bias [3E] (zeros) and a child "out_proj" (weight [E, E] with Linear's
 * default U(-1/sqrt(E), 1/sqrt(E)), bias [E] zeros), as torch has them.
 *
 *   forward_n(query [N, L, E], key [N, S, E], value [N, S, E]) -> output [N, L, E]
 *   and, as a second output, the attention weights averaged over heads [N, L, S];
 *   oar_forward(x) is self-attention. Unbatched [L, E] inputs work too.
 *
 * Per head: softmax(q kᵀ / sqrt(E / heads) + mask) v, with the causal mask putting -inf on
 * key positions j > i (torch's attn_mask = triu(ones(L, S), 1)); dropout on the weights in
 * training only. As in torch, q is scaled before the product (the [N, L, E] projection, not
 * the larger [N, heads, L, S] scores). The causal mask is a bool [L, S] applied with
 * masked_fill (broadcast over batch and heads, one pass) and kept for the next call with the
 * same lengths. */
#include "nn/module.h"
#include "ops/dispatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct mha_state {
    int64_t embed_dim, heads;
    bool bias, causal;
    double dropout;
    oar_tensor *mask;          /* bool [mask_L, mask_S], true above the diagonal; NULL until used */
    int64_t mask_L, mask_S;
} mha_state;

/* ---- out_proj: a plain linear child, so its parameters are "out_proj.weight/bias" */
static oar_status proj_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (n_in != 1 || n_out != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "Linear: expected 1 input and 1 output, got %d and %d", n_in, n_out);
    out[0] = oar_linear(in[0], oar_module_local(m, "weight"), oar_module_local(m, "bias"));
    return out[0] ? OAR_OK : oar_last_status();
}

static int proj_describe(const oar_module *m, char *buf, size_t size) {
    const int64_t *e = m->state;
    return snprintf(buf, size, "in_features=%lld, out_features=%lld, bias=%s", (long long)e[0], (long long)e[0],
                    e[1] ? "true" : "false");
}

static const oar_module_ops proj_ops = {"Linear", proj_forward, free, proj_describe};

/* ---- the attention module */
static void shape_str(const oar_tensor *t, char *buf, size_t size) {
    oar_format_shape(oar_shape(t), oar_ndim(t), buf, size);
}

static oar_status check_inputs(const mha_state *s, oar_dtype dt, oar_tensor *const *in, int n_in, int n_out) {
    if (n_in != 1 && n_in != 3)
        return oar_error(OAR_ERR_INVALID_ARG, "MultiheadAttention: expected 1 input (self-attention) or 3 (query, "
                                              "key, value), got %d", n_in);
    if (n_out != 1 && n_out != 2)
        return oar_error(OAR_ERR_INVALID_ARG, "MultiheadAttention: expected 1 output, or 2 (output, attention "
                                              "weights), got %d", n_out);
    static const char *const names[3] = {"query", "key", "value"};
    for (int i = 0; i < n_in; i++) {
        if (in[i]) continue;
        if (oar_last_status() != OAR_OK) return oar_last_status(); /* keep the error that made it NULL */
        return oar_error(OAR_ERR_INVALID_ARG, "MultiheadAttention: expected a %s tensor, got NULL", names[i]);
    }
    int nd = oar_ndim(in[0]);
    for (int i = 0; i < n_in; i++) {
        char sh[128];
        shape_str(in[i], sh, sizeof sh);
        if (oar_dtype_of(in[i]) != dt && !oar_amp_active) /* autocast casts them itself */
            return oar_error(OAR_ERR_DTYPE, "MultiheadAttention: expected %s of dtype %s (the parameters' dtype), "
                                            "got %s", names[i], oar_dtype_name(dt), oar_dtype_name(oar_dtype_of(in[i])));
        if ((nd != 2 && nd != 3) || oar_ndim(in[i]) != nd || oar_size(in[i], -1) != s->embed_dim)
            return oar_error(OAR_ERR_SHAPE, "MultiheadAttention: expected %s of shape %s with embed_dim %lld%s, got %s",
                             names[i], nd == 2 ? "[L, E]" : "[N, L, E]", (long long)s->embed_dim,
                             i ? " and the query's number of dims" : "", sh);
        if (oar_size(in[i], 0) < 1 || oar_size(in[i], nd - 2) < 1)
            return oar_error(OAR_ERR_SHAPE, "MultiheadAttention: expected a non-empty %s, got shape %s", names[i], sh);
    }
    if (n_in == 3) {
        char sq[128], sk[128], sv[128];
        shape_str(in[0], sq, sizeof sq);
        shape_str(in[1], sk, sizeof sk);
        shape_str(in[2], sv, sizeof sv);
        if (nd == 3 && (oar_size(in[1], 0) != oar_size(in[0], 0) || oar_size(in[2], 0) != oar_size(in[0], 0)))
            return oar_error(OAR_ERR_SHAPE, "MultiheadAttention: expected query, key and value with one batch size, "
                                            "got %s, %s and %s", sq, sk, sv);
        if (oar_size(in[1], nd - 2) != oar_size(in[2], nd - 2))
            return oar_error(OAR_ERR_SHAPE, "MultiheadAttention: expected key and value with one length S, got %s "
                                            "and %s", sk, sv);
    }
    return OAR_OK;
}

/* [N, L, E] -> [N, heads, L, E / heads] (a view). */
static oar_tensor *split_heads(oar_tensor *t, int64_t heads) {
    const int64_t *sh = oar_shape(t);
    int64_t s4[4] = {sh[0], sh[1], heads, sh[2] / heads};
    return oar_permute(oar_view(t, s4, 4), (const int[]){0, 2, 1, 3}, 4);
}

/* The projections of query, key and value, one oar_linear each with the rows of in_proj
 * (contiguous views). Self-attention could use one product with all of in_proj and chunk
 * its result, but those chunks are strided along the last dim and their gradient becomes a
 * strided concat; three products cost the same arithmetic and keep every gradient dense. */
static oar_status project(oar_module *m, oar_tensor *const *x, oar_tensor **out) {
    oar_tensor *w = oar_module_local(m, "in_proj_weight"), *b = oar_module_local(m, "in_proj_bias");
    oar_tensor *ws[3], *bs[3] = {NULL, NULL, NULL};
    if (oar_chunk(w, 3, 0, ws, 3) != 3 || (b && oar_chunk(b, 3, 0, bs, 3) != 3)) return oar_last_status();
    for (int i = 0; i < 3; i++)
        if (!(out[i] = oar_linear(x[i], ws[i], bs[i]))) return oar_last_status();
    return OAR_OK;
}

/* The causal mask for L queries and S keys on dev: true where key j lies in the future of
 * query i (j > i). Made on dev itself (not moved there), so that a program traced on the GPU
 * sees a GPU constant and no host tensor. Borrowed: the state keeps it (one reference of its
 * own) for the next call on that device. */
static oar_tensor *causal_mask(mha_state *s, int64_t L, int64_t S, oar_device dev) {
    if (s->mask && s->mask_L == L && s->mask_S == S && oar_device_of(s->mask) == dev) return s->mask;
    int64_t shape[2] = {L, S};
    oar_device was = oar_get_default_device();
    if (oar_set_default_device(dev) != OAR_OK) return NULL;
    oar_tensor *m = oar_triu(oar_ones(shape, 2, OAR_BOOL), 1); /* owned by the caller's scope */
    oar_set_default_device(was);
    if (!m || oar_is_tracing()) return m; /* a mask made while tracing has no data: never keep it */
    oar_release(s->mask);
    s->mask = oar_retain(m);
    s->mask_L = L;
    s->mask_S = S;
    return m;
}

static oar_status mha_attend(oar_module *m, mha_state *s, oar_tensor *const *in, int n_in, oar_tensor **out,
                             int n_out) {
    oar_tensor *x[3];
    for (int i = 0; i < 3; i++) x[i] = in[n_in == 3 ? i : 0];
    bool batched = oar_ndim(x[0]) == 3;
    for (int i = 0; i < 3 && !batched; i++) x[i] = oar_unsqueeze(x[i], 0); /* [L, E] -> [1, L, E] */
    oar_tensor *p[3];
    oar_status st = project(m, x, p);
    if (st != OAR_OK) return st;
    int64_t N = oar_size(x[0], 0), L = oar_size(x[0], 1), S = oar_size(x[1], 1), H = s->heads;
    double scale = 1.0 / sqrt((double)(s->embed_dim / H));
    oar_tensor *q = split_heads(oar_mul_scalar(p[0], scale), H), *k = split_heads(p[1], H), *v = split_heads(p[2], H);
    oar_tensor *scores = oar_matmul(q, oar_transpose(k, -1, -2)); /* [N, H, L, S] */
    if (s->causal)
        scores = scores ? oar_masked_fill(scores, causal_mask(s, L, S, oar_device_of(scores)), -INFINITY) : NULL;
    oar_tensor *attn = oar_softmax(scores, -1);
    if (m->training && s->dropout > 0) attn = oar_dropout(attn, s->dropout, true);
    int64_t merged[3] = {N, L, s->embed_dim};
    oar_tensor *ctx = oar_reshape(oar_permute(oar_matmul(attn, v), (const int[]){0, 2, 1, 3}, 4), merged, 3);
    oar_tensor *y = NULL, *weights = NULL;
    if (ctx && (st = oar_forward_n(oar_module_child(m, "out_proj"), &ctx, 1, &y, 1)) != OAR_OK) return st;
    if (n_out > 1) weights = oar_mean(attn, (const int[]){1}, 1, false); /* [N, L, S] */
    if (!batched) {
        y = oar_squeeze(y, 0);
        if (n_out > 1) weights = oar_squeeze(weights, 0);
    }
    if (!y || (n_out > 1 && !weights)) return oar_last_status();
    out[0] = oar_keep(y);
    if (n_out > 1) out[1] = oar_keep(weights);
    return OAR_OK;
}

static oar_status mha_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    mha_state *s = m->state;
    oar_status st = check_inputs(s, oar_dtype_of(oar_module_local(m, "in_proj_weight")), in, n_in, n_out);
    if (st != OAR_OK) return st;
    oar_scope_begin();
    st = mha_attend(m, s, in, n_in, out, n_out);
    oar_scope_end();
    return st;
}

static int mha_describe(const oar_module *m, char *buf, size_t size) {
    const mha_state *s = m->state;
    return snprintf(buf, size, "embed_dim=%lld, heads=%lld, bias=%s, causal=%s, dropout=%g", (long long)s->embed_dim,
                    (long long)s->heads, s->bias ? "true" : "false", s->causal ? "true" : "false", s->dropout);
}

static void mha_destroy(void *p) {
    mha_state *s = p;
    oar_release(s->mask);
    free(s);
}

static const oar_module_ops mha_ops = {"MultiheadAttention", mha_forward, mha_destroy, mha_describe};

/* Registers t (made by the caller) under name and drops the caller's reference. */
static oar_status add_param(oar_module *m, const char *name, oar_tensor *t, oar_status init) {
    oar_status st = !t ? oar_last_status() : init != OAR_OK ? init : oar_module_add_parameter(m, name, t);
    oar_release(t);
    return st;
}

static oar_module *out_proj_new(int64_t E, bool bias) {
    int64_t *e = malloc(sizeof(int64_t) * 2);
    oar_module *m = e ? oar_module_new(&proj_ops, e) : NULL;
    if (!m) {
        free(e);
        if (oar_last_status() == OAR_OK) oar_error(OAR_ERR_OOM, "MultiheadAttention: out of memory");
        return NULL;
    }
    e[0] = E;
    e[1] = bias;
    int64_t ws[2] = {E, E};
    oar_tensor *w = oar_empty(ws, 2, OAR_F32), *b = bias ? oar_zeros(&E, 1, OAR_F32) : NULL;
    oar_status st = add_param(m, "weight", w, w ? oar_init_kaiming_uniform_(w, sqrt(5.0), OAR_FAN_IN) : OAR_OK);
    if (bias) {
        oar_status sb = add_param(m, "bias", b, OAR_OK);
        if (st == OAR_OK) st = sb;
    }
    if (st != OAR_OK) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

oar_module *oar_nn_multihead_attention(int64_t embed_dim, int64_t heads, bool bias, bool causal, double dropout) {
    if (embed_dim < 1 || heads < 1 || embed_dim % heads != 0) {
        oar_error(OAR_ERR_INVALID_ARG, "MultiheadAttention: expected embed_dim >= 1 divisible by heads >= 1, got "
                                       "embed_dim=%lld, heads=%lld", (long long)embed_dim, (long long)heads);
        return NULL;
    }
    if (!(dropout >= 0 && dropout <= 1)) {
        oar_error(OAR_ERR_INVALID_ARG, "MultiheadAttention: expected dropout in [0, 1], got %g", dropout);
        return NULL;
    }
    mha_state *s = malloc(sizeof *s);
    oar_module *m = s ? oar_module_new(&mha_ops, s) : NULL;
    if (!m) {
        free(s);
        if (oar_last_status() == OAR_OK) oar_error(OAR_ERR_OOM, "MultiheadAttention: out of memory");
        return NULL;
    }
    *s = (mha_state){embed_dim, heads, bias, causal, dropout, NULL, 0, 0};
    int64_t ws[2] = {3 * embed_dim, embed_dim}, bs = 3 * embed_dim;
    oar_tensor *w = oar_empty(ws, 2, OAR_F32);
    oar_status st = add_param(m, "in_proj_weight", w, w ? oar_init_xavier_uniform_(w, 1.0) : OAR_OK);
    if (st == OAR_OK && bias) st = add_param(m, "in_proj_bias", oar_zeros(&bs, 1, OAR_F32), OAR_OK);
    if (st == OAR_OK) {
        oar_module *proj = out_proj_new(embed_dim, bias);
        st = proj ? oar_module_add_child(m, "out_proj", proj) : oar_last_status();
        if (st != OAR_OK) oar_module_free(proj);
    }
    if (st != OAR_OK) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}
