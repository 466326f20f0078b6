/* gpt-mini: a pre-LayerNorm decoder with learned positions and a tied input/output
 * embedding (vocab 256, context 128, 4 layers, 4 heads, d 256, MLP 1024 with tanh-GELU).
 * Attention is written with plain ops (matmul, mask, softmax) as in the reference workload. */
#include "zoo.h"
#include "zoo_util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define VOCAB 256
#define CTX 128
#define LAYERS 4
#define HEADS 4
#define D 256
#define HIDDEN 1024

typedef struct attn_state {
    zoo_kids kids;     /* qkv, proj */
    int64_t heads;
    oar_tensor *mask;  /* [CTX, CTX] bool, true above the diagonal (the future) */
} attn_state;

static void attn_destroy(void *p) {
    attn_state *s = p;
    oar_release(s->mask);
    free(s);
}

static oar_status attn_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    attn_state *s = oar_module_state(self);
    oar_tensor *x = in[0];
    int64_t B = oar_size(x, 0), T = oar_size(x, 1), C = oar_size(x, 2), h = s->heads, hd = C / h;
    if (T > CTX) return oar_set_error(OAR_ERR_SHAPE, "gpt-mini: expected at most %d tokens, got %lld", CTX, (long long)T);
    oar_scope_begin();
    oar_tensor *qkv[3];
    oar_chunk(zoo_run(s->kids.k[0], x), 3, 2, qkv, 3);
    int64_t split[4] = {B, T, h, hd};
    oar_tensor *q = oar_transpose(oar_reshape(qkv[0], split, 4), 1, 2); /* [B, h, T, hd] */
    oar_tensor *k = oar_transpose(oar_reshape(qkv[1], split, 4), 1, 2);
    oar_tensor *v = oar_transpose(oar_reshape(qkv[2], split, 4), 1, 2);
    oar_tensor *att = oar_mul_scalar(oar_matmul(q, oar_transpose(k, -2, -1)), 1.0 / sqrt((double)hd));
    oar_device dev = oar_device_of(att);
    if (att && oar_device_of(s->mask) != dev && !oar_is_tracing()) { /* kept where it is used */
        oar_tensor *moved = oar_retain(oar_to(s->mask, dev));
        if (moved) {
            oar_release(s->mask);
            s->mask = moved;
        }
    }
    /* while tracing, a host mask's move is folded into a device constant (the tracer's rule) */
    oar_tensor *full = oar_device_of(s->mask) == dev ? s->mask : oar_to(s->mask, dev);
    oar_tensor *mask = oar_slice(oar_slice(full, 0, 0, T, 1), 1, 0, T, 1);
    att = oar_softmax(oar_masked_fill(att, mask, -INFINITY), -1);
    int64_t merged[3] = {B, T, C};
    oar_tensor *y = oar_reshape(oar_transpose(oar_matmul(att, v), 1, 2), merged, 3);
    return zoo_finish(out, zoo_run(s->kids.k[1], y));
}

static const oar_module_ops ATTN_OPS = {"CausalSelfAttention", attn_forward, attn_destroy, NULL};

static oar_module *attention(void) {
    attn_state *s = calloc(1, sizeof *s);
    oar_module *m = s ? oar_module_new(&ATTN_OPS, s) : NULL;
    if (!m) {
        free(s);
        return NULL;
    }
    s->heads = HEADS;
    int64_t sq[2] = {CTX, CTX};
    oar_scope_begin();
    s->mask = oar_retain(oar_triu(oar_ones(sq, 2, OAR_BOOL), 1)); /* ours, whatever scope the caller has */
    oar_scope_end();
    bool ok = s->mask != NULL;
    zoo_add(m, &s->kids, "qkv", oar_nn_linear(D, 3 * D, true), &ok);
    zoo_add(m, &s->kids, "proj", oar_nn_linear(D, D, true), &ok);
    return oar_zoo_checked(m, ok);
}

/* kids: ln1, attn, ln2, fc, fc2 */
static oar_status block_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_scope_begin();
    /* x = in + attn(ln1(in)) and ln2(x) in one op: LayerNorm's two-input form */
    oar_tensor *xa[2] = {in[0], zoo_run(s->k[1], zoo_run(s->k[0], in[0]))}, *yx[2] = {NULL, NULL};
    if (oar_forward_n(s->k[2], xa, 2, yx, 2) != OAR_OK) return zoo_finish(out, NULL);
    oar_tensor *m = zoo_run(s->k[4], oar_gelu(zoo_run(s->k[3], yx[0]), true));
    return zoo_finish(out, oar_add(yx[1], m));
}

static const oar_module_ops BLOCK_OPS = {"GPTBlock", block_forward, free, NULL};

static oar_module *block(void) {
    zoo_kids *s;
    oar_module *m = zoo_new(&BLOCK_OPS, &s);
    bool ok = m != NULL;
    int64_t d = D;
    zoo_add(m, s, "ln1", oar_nn_layer_norm(&d, 1, 1e-5, true), &ok);
    zoo_add(m, s, "attn", attention(), &ok);
    zoo_add(m, s, "ln2", oar_nn_layer_norm(&d, 1, 1e-5, true), &ok);
    zoo_add(m, s, "fc", oar_nn_linear(D, HIDDEN, true), &ok);
    zoo_add(m, s, "fc2", oar_nn_linear(HIDDEN, D, true), &ok);
    return oar_zoo_checked(m, ok);
}

/* kids: wte, wpe, blocks, ln_f */
static oar_status gpt_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    oar_tensor *idx = in[0];
    if (!idx || oar_ndim(idx) != 2)
        return oar_set_error(OAR_ERR_SHAPE, "gpt-mini: expected token ids of shape [batch, time], got %d dims",
                             idx ? oar_ndim(idx) : -1);
    oar_scope_begin();
    oar_tensor *pos = oar_to(oar_arange(0, (double)oar_size(idx, 1), 1, OAR_I64), oar_device_of(idx));
    oar_tensor *x = oar_add(zoo_run(s->k[0], idx), zoo_run(s->k[1], pos));
    x = zoo_run(s->k[3], zoo_run(s->k[2], x));
    return zoo_finish(out, oar_linear(x, oar_module_get(s->k[0], "weight"), NULL)); /* tied */
}

static const oar_module_ops GPT_OPS = {"GPTMini", gpt_forward, free, NULL};

oar_module *oar_zoo_gpt_mini(const oar_zoo_opts *o) {
    (void)o; /* the vocabulary is bytes */
    zoo_kids *s;
    oar_module *m = zoo_new(&GPT_OPS, &s);
    bool ok = m != NULL;
    int64_t d = D;
    zoo_add(m, s, "wte", oar_nn_embedding(VOCAB, D), &ok);
    zoo_add(m, s, "wpe", oar_nn_embedding(CTX, D), &ok);
    oar_module *blocks = oar_nn_sequential(NULL, 0);
    for (int i = 0; i < LAYERS; i++) {
        oar_module *b = block();
        if (!b || !blocks || oar_nn_sequential_append(blocks, b) != OAR_OK) {
            if (b && blocks) oar_module_free(b);
            ok = false;
        }
    }
    zoo_add(m, s, "blocks", blocks, &ok);
    zoo_add(m, s, "ln_f", oar_nn_layer_norm(&d, 1, 1e-5, true), &ok);
    /* GPT-2 style init: N(0, 0.02) for every matrix, zero biases (LayerNorm keeps 1 and 0) */
    for (int i = 0; ok && i < oar_module_num_parameters(m); i++) {
        const char *name;
        oar_tensor *p = oar_module_parameter(m, i, &name);
        if (oar_ndim(p) == 2) ok = oar_init_normal_(p, 0.0, 0.02) == OAR_OK;
        else if (strstr(name, "ln") == NULL) ok = oar_init_constant_(p, 0.0) == OAR_OK;
    }
    return oar_zoo_checked(m, ok);
}
