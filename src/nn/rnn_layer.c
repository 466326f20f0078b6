/* One LSTM or GRU layer over a whole sequence, with torch's equations and gate order:
 *
 *   LSTM (i, f, g, o):  i = σ(W_ii x + b_ii + W_hi h + b_hi), f = σ(..), g = tanh(..), o = σ(..)
 *                       c' = f * c + i * g,  h' = o * tanh(c')
 *   GRU  (r, z, n):     r = σ(W_ir x + b_ir + W_hr h + b_hr), z = σ(..)
 *                       n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h' = (1 - z) * n + z * h
 *
 * The input projection of all steps is computed up front, one oar_linear over [T, N, I] per
 * gate (the gate's rows of W_ih are a contiguous view, so each result is a contiguous
 * [T, N, H]); a step then costs one small product per gate and a few elementwise ops on
 * contiguous [N, H] tensors. A zero initial state skips the first step's recurrent products
 * (they would add only the bias, which is folded into the input projection). */
#include "nn/rnn.h"

#include <stdlib.h>

#define MAX_GATES 4

/* Per-gate views of the weights and the biases that join the input projection. */
typedef struct gates {
    int n;                                            /* 4 (LSTM) or 3 (GRU) */
    oar_tensor *w_ih[MAX_GATES], *w_hh[MAX_GATES], *bias[MAX_GATES];
    oar_tensor *b_hn;                                 /* GRU: b_hn stays inside r * (...) */
} gates;

static oar_status split_gates(oar_rnn_kind kind, const oar_rnn_layer_io *io, gates *g) {
    g->n = kind == OAR_RNN_LSTM ? 4 : 3;
    oar_tensor *sum[MAX_GATES], *b_ih[MAX_GATES], *b_hh[MAX_GATES];
    if (oar_chunk(io->w_ih, g->n, 0, g->w_ih, g->n) != g->n || oar_chunk(io->w_hh, g->n, 0, g->w_hh, g->n) != g->n ||
        oar_chunk(oar_add(io->b_ih, io->b_hh), g->n, 0, sum, g->n) != g->n)
        return oar_last_status();
    for (int k = 0; k < g->n; k++) g->bias[k] = sum[k];
    if (kind == OAR_RNN_GRU) { /* n: b_in outside, b_hn inside the reset gate's product */
        if (oar_chunk(io->b_ih, 3, 0, b_ih, 3) != 3 || oar_chunk(io->b_hh, 3, 0, b_hh, 3) != 3)
            return oar_last_status();
        g->bias[2] = b_ih[2];
        g->b_hn = b_hh[2];
    }
    return OAR_OK;
}

/* steps[k * T + t] = (x·W_ih,kᵀ + bias_k)[t], [N, H]. */
static oar_status project_input(const oar_rnn_layer_io *io, const gates *g, int64_t T, oar_tensor **steps) {
    for (int k = 0; k < g->n; k++) {
        oar_status st = oar_rnn_unbind(oar_linear(io->x, g->w_ih[k], g->bias[k]), steps + k * T);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Gate pre-activation: the input part plus W_hh,k·h (nothing to add for a zero state). */
static oar_tensor *pre(oar_tensor *gx, oar_tensor *w_hh, oar_tensor *h) {
    return h ? oar_add(gx, oar_linear(h, w_hh, NULL)) : gx;
}

static void lstm_step(oar_tensor *const *gx, int64_t T, const gates *g, oar_tensor **h, oar_tensor **c) {
    oar_tensor *i = oar_sigmoid(pre(gx[0], g->w_hh[0], *h)), *gg = oar_tanh(pre(gx[2 * T], g->w_hh[2], *h));
    oar_tensor *o = oar_sigmoid(pre(gx[3 * T], g->w_hh[3], *h));
    oar_tensor *ig = oar_mul(i, gg);
    oar_tensor *cn = *c ? oar_add(oar_mul(oar_sigmoid(pre(gx[T], g->w_hh[1], *h)), *c), ig) : ig;
    *h = oar_mul(o, oar_tanh(cn));
    *c = cn;
}

static oar_tensor *gru_step(oar_tensor *const *gx, int64_t T, const gates *g, oar_tensor *h) {
    oar_tensor *r = oar_sigmoid(pre(gx[0], g->w_hh[0], h)), *z = oar_sigmoid(pre(gx[T], g->w_hh[1], h));
    oar_tensor *hn = h ? oar_linear(h, g->w_hh[2], g->b_hn) : g->b_hn; /* W_hn h + b_hn */
    oar_tensor *n = oar_tanh(oar_add(gx[2 * T], oar_mul(r, hn)));
    /* (1 - z) * n + z * h, written n + z * (h - n); with h = 0 it is n - z * n */
    return h ? oar_add(n, oar_mul(z, oar_sub(h, n))) : oar_sub(n, oar_mul(z, n));
}

oar_status oar_rnn_layer(oar_rnn_kind kind, oar_rnn_layer_io *io) {
    int64_t T = oar_size(io->x, 0);
    gates g;
    oar_status st = split_gates(kind, io, &g);
    if (st != OAR_OK) return st;
    oar_tensor **steps = malloc(sizeof(*steps) * (size_t)T * (MAX_GATES + 1));
    if (!steps)
        return oar_error(OAR_ERR_OOM, "%s: out of memory for %lld steps", kind == OAR_RNN_LSTM ? "LSTM" : "GRU",
                         (long long)T);
    oar_tensor **hs = steps + T * MAX_GATES;
    st = project_input(io, &g, T, steps);
    oar_tensor *h = io->h0, *c = io->c0;
    for (int64_t t = 0; st == OAR_OK && t < T; t++) {
        /* a scope per step frees what autograd does not keep (views, unsaved temporaries) */
        oar_scope_begin();
        if (kind == OAR_RNN_LSTM) {
            lstm_step(steps + t, T, &g, &h, &c);
            oar_keep(c);
        } else {
            h = gru_step(steps + t, T, &g, h);
        }
        oar_keep(h);
        oar_scope_end();
        if (!h) st = oar_last_status();
        hs[t] = h;
    }
    if (st == OAR_OK) {
        io->y = oar_rnn_join(hs, T);
        io->h_n = h;
        io->c_n = kind == OAR_RNN_LSTM ? c : NULL;
        if (!io->y) st = oar_last_status();
    }
    free(steps);
    return st;
}
