/* nn.TransformerEncoderLayer and nn.TransformerDecoderLayer (torch 1.13), built from the
 * layers a user would use: MultiheadAttention, Linear, LayerNorm, Dropout. Children are
 * registered in torch's order under torch's names, so parameters list and load as torch's
 * state_dict does.
 *
 *   encoder, post-norm:  x = norm1(x + sa(x));  x = norm2(x + ff(x))
 *   encoder, norm_first: x = x + sa(norm1(x));  x = x + ff(norm2(x))
 *   decoder adds cross-attention over memory between the two: mha(x, memory, memory), with
 *   norm2 on it and norm3 on the feed-forward block.
 *   sa(x) = dropout1(self_attn(x, x, x)), ff(x) = dropout2(linear2(dropout(act(linear1(x))))).
 *
 * oar's MultiheadAttention is batch-first; sequence-first inputs ([S, N, E]) are transposed
 * on the way in and out. Masks: causal (torch's square subsequent mask as src_mask/tgt_mask)
 * is an option; arbitrary masks and key padding masks are not offered. */
#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tf_state {
    oar_transformer_opts o;
    bool decoder;
} tf_state;

oar_transformer_opts oar_transformer_defaults(int64_t d_model, int64_t nhead) {
    return (oar_transformer_opts){.d_model = d_model, .nhead = nhead, .dim_feedforward = 2048, .dropout = 0.1,
                                  .activation = OAR_ACT_RELU, .layer_norm_eps = 1e-5};
}

static const char *tf_name(const tf_state *s) { return s->decoder ? "TransformerDecoderLayer" : "TransformerEncoderLayer"; }

static oar_module *child(oar_module *m, const char *name) {
    for (int i = 0; i < m->n_children; i++)
        if (!strcmp(m->children[i].name, name)) return m->children[i].module;
    return NULL;
}

/* A sequence argument: [L, E] unbatched, or [N, L, E] / [L, N, E] with the options' layout. */
static oar_status check_seq(const tf_state *s, const char *what, const oar_tensor *x, int want_ndim) {
    char sh[128];
    oar_layer_shape_str(x, sh, sizeof sh);
    int nd = oar_ndim(x);
    bool ok = (nd == 2 || nd == 3) && (want_ndim == 0 || nd == want_ndim) && oar_size(x, -1) == s->o.d_model;
    if (ok) return OAR_OK;
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s with d_model = %lld%s, got %s", tf_name(s), what,
                     s->o.batch_first ? "[N, L, E] (or [L, E])" : "[L, N, E] (or [L, E])", (long long)s->o.d_model,
                     want_ndim ? " and the target's number of dims" : "", sh);
}

/* To oar's batch-first layout and back (a view; sequence-first inputs only). */
static oar_tensor *to_batch_first(const tf_state *s, oar_tensor *x) {
    return oar_ndim(x) == 3 && !s->o.batch_first ? oar_transpose(x, 0, 1) : x;
}

static oar_tensor *self_attention(oar_module *m, oar_tensor *x, const char *attn, const char *drop) {
    return oar_forward(child(m, drop), oar_forward(child(m, attn), x));
}

static oar_tensor *cross_attention(oar_module *m, oar_tensor *x, oar_tensor *memory) {
    oar_tensor *in[3] = {x, memory, memory}, *y = NULL;
    if (oar_forward_n(child(m, "multihead_attn"), in, 3, &y, 1) != OAR_OK) return NULL;
    return oar_forward(child(m, "dropout2"), y);
}

static oar_tensor *feed_forward(oar_module *m, const tf_state *s, oar_tensor *x) {
    oar_tensor *h = oar_forward(child(m, "linear1"), x);
    h = s->o.activation == OAR_ACT_GELU ? oar_gelu(h, false) : oar_relu(h);
    h = oar_forward(child(m, "linear2"), oar_forward(child(m, "dropout"), h));
    return oar_forward(child(m, s->decoder ? "dropout3" : "dropout2"), h);
}

/* One residual block: x + f(norm(x)) with norm_first, else norm(x + f(x)). block 0: self-
 * attention, 1: cross-attention, 2: feed-forward. */
static oar_tensor *residual(oar_module *m, const tf_state *s, oar_tensor *x, int block, const char *norm,
                            oar_tensor *memory) {
    oar_module *ln = child(m, norm);
    oar_tensor *in = s->o.norm_first ? oar_forward(ln, x) : x;
    oar_tensor *y = block == 0 ? self_attention(m, in, "self_attn", "dropout1")
                  : block == 1 ? cross_attention(m, in, memory) : feed_forward(m, s, in);
    oar_tensor *sum = oar_add(x, y);
    return s->o.norm_first ? sum : oar_forward(ln, sum);
}

static oar_status tf_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const tf_state *s = m->state;
    int want_in = s->decoder ? 2 : 1;
    if (n_in != want_in || n_out != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s and 1 output, got %d inputs and %d outputs",
                         tf_name(s), s->decoder ? "2 inputs (tgt, memory)" : "1 input (src)", n_in, n_out);
    for (int i = 0; i < n_in; i++)
        if (!in[i]) {
            if (oar_last_status() != OAR_OK) return oar_last_status();
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a %s tensor, got NULL", tf_name(s),
                             s->decoder ? (i ? "memory" : "tgt") : "src");
        }
    oar_status st = check_seq(s, s->decoder ? "tgt" : "src", in[0], 0);
    if (st == OAR_OK && s->decoder) st = check_seq(s, "memory", in[1], oar_ndim(in[0]));
    if (st != OAR_OK) return st;
    /* the scope oar_forward opened around this call releases every temporary below */
    oar_tensor *x = to_batch_first(s, in[0]);
    oar_tensor *memory = s->decoder ? to_batch_first(s, in[1]) : NULL;
    x = residual(m, s, x, 0, "norm1", NULL);
    if (s->decoder) x = residual(m, s, x, 1, "norm2", memory);
    x = residual(m, s, x, 2, s->decoder ? "norm3" : "norm2", NULL);
    if (x && oar_ndim(x) == 3 && !s->o.batch_first) x = oar_contiguous(oar_transpose(x, 0, 1));
    if (!x) return oar_last_status();
    out[0] = x;
    return OAR_OK;
}

static int tf_describe(const oar_module *m, char *buf, size_t size) {
    const tf_state *s = oar_module_state(m);
    char eps[32], drop[32];
    return snprintf(buf, size, "d_model=%lld, nhead=%lld, dim_feedforward=%lld, dropout=%s, activation=%s, "
                    "layer_norm_eps=%s, batch_first=%s, norm_first=%s, causal=%s", (long long)s->o.d_model,
                    (long long)s->o.nhead, (long long)s->o.dim_feedforward, oar_layer_pyfloat(s->o.dropout, drop, sizeof drop),
                    s->o.activation == OAR_ACT_GELU ? "gelu" : "relu", oar_layer_pyfloat(s->o.layer_norm_eps, eps, sizeof eps),
                    oar_layer_bool(s->o.batch_first), oar_layer_bool(s->o.norm_first), oar_layer_bool(s->o.causal));
}

static const oar_module_ops encoder_ops = {"TransformerEncoderLayer", tf_forward, free, tf_describe};
static const oar_module_ops decoder_ops = {"TransformerDecoderLayer", tf_forward, free, tf_describe};

static oar_status check_opts(const char *who, const oar_transformer_opts *o) {
    if (!o) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected options (start from oar_transformer_defaults), got NULL", who);
    if (o->d_model < 1 || o->nhead < 1 || o->d_model % o->nhead != 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected d_model >= 1 divisible by nhead >= 1, got d_model=%lld, "
                         "nhead=%lld", who, (long long)o->d_model, (long long)o->nhead);
    if (o->dim_feedforward < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dim_feedforward >= 1 (torch's default is 2048), got %lld",
                         who, (long long)o->dim_feedforward);
    if (!(o->dropout >= 0 && o->dropout <= 1))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected dropout in [0, 1], got %g", who, o->dropout);
    if (o->activation != OAR_ACT_RELU && o->activation != OAR_ACT_GELU)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected activation OAR_ACT_RELU or OAR_ACT_GELU (torch's 'relu' "
                         "and 'gelu'), got %d", who, (int)o->activation);
    if (!(o->layer_norm_eps > 0))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected layer_norm_eps > 0 (torch's default is 1e-5), got %g", who,
                         o->layer_norm_eps);
    return OAR_OK;
}

/* Adds child under name; a NULL child (a failed constructor) fails with its error. */
static oar_status add(oar_module *m, const char *name, oar_module *c) {
    if (!c) return oar_last_status() != OAR_OK ? oar_last_status() : OAR_ERR_OOM;
    oar_status st = oar_module_add_child(m, name, c);
    if (st != OAR_OK) oar_module_free(c);
    return st;
}

static oar_module *make(const oar_transformer_opts *o, bool decoder) {
    const char *who = decoder ? "TransformerDecoderLayer" : "TransformerEncoderLayer";
    if (check_opts(who, o) != OAR_OK) return NULL;
    tf_state cfg = {*o, decoder};
    oar_module *m = oar_layer_new(decoder ? &decoder_ops : &encoder_ops, &cfg, sizeof cfg);
    if (!m) return NULL;
    int64_t E = o->d_model;
    oar_status st = add(m, "self_attn", oar_nn_multihead_attention(E, o->nhead, true, o->causal, o->dropout));
    if (st == OAR_OK && decoder)
        st = add(m, "multihead_attn", oar_nn_multihead_attention(E, o->nhead, true, false, o->dropout));
    if (st == OAR_OK) st = add(m, "linear1", oar_nn_linear(E, o->dim_feedforward, true));
    if (st == OAR_OK) st = add(m, "dropout", oar_nn_dropout(o->dropout));
    if (st == OAR_OK) st = add(m, "linear2", oar_nn_linear(o->dim_feedforward, E, true));
    static const char *const norms[3] = {"norm1", "norm2", "norm3"}, *const drops[3] = {"dropout1", "dropout2", "dropout3"};
    for (int k = 0; k < (decoder ? 3 : 2) && st == OAR_OK; k++) st = add(m, norms[k], oar_nn_layer_norm(&E, 1, o->layer_norm_eps, true));
    for (int k = 0; k < (decoder ? 3 : 2) && st == OAR_OK; k++) st = add(m, drops[k], oar_nn_dropout(o->dropout));
    if (st != OAR_OK) {
        oar_error_prefix("%s", who);
        oar_module_free(m);
        return NULL;
    }
    return m;
}

oar_module *oar_nn_transformer_encoder_layer(const oar_transformer_opts *opts) { return make(opts, false); }
oar_module *oar_nn_transformer_decoder_layer(const oar_transformer_opts *opts) { return make(opts, true); }
