/* One dynamically quantized LSTM or GRU layer over a sequence (oar_quantize_dynamic): the
 * weights are i8 with one symmetric scale per row (per gate channel), the activations are
 * quantized to u8 per call over their range (choose_qparams), and the gate products are
 * qlinear (int32 sums, exact on every CPU path); the nonlinearities stay f32. The arithmetic
 * is torch's quantized LSTM / GRU (aten's QuantizedCellParamsDynamic), step for step:
 *
 *   input part:  the whole sequence x [T, N, I] quantized once, one qlinear with W_ih and b_ih
 *                over all the gates: [T, N, G*H]
 *   each step:   h quantized over its own range, one qlinear with W_hh and b_hh: [N, G*H]
 *                (a zero initial state gives b_hh: qlinear of zeros is exactly its bias)
 *   LSTM:        gates = hh + ih, chunked (i, f, g, o); c' = σ(f) c + σ(i) tanh(g),
 *                h' = σ(o) tanh(c')
 *   GRU:         r = σ(hh_r + ih_r), z = σ(hh_z + ih_z), n = tanh(ih_n + hh_n r),
 *                h' = (h - n) z + n
 *
 * One difference from torch remains by design: torch's fbgemm and onednn engines quantize
 * these activations to 7 bits (reduce_range, for AVX2's saturating u8·s8 pairs); oar's int8
 * kernels are exact at 8 bits, so it uses the full u8 range, as its dynamic Linear does.
 * Everything is ops, so a quantized model traces and runs in the predictor. */
#include "nn/rnn.h"

#include <stdlib.h>

/* W_hh h + b_hh over all the gates ([N, G*H]), or b_hh alone ([G*H]) for a zero state. */
static oar_tensor *recurrent(oar_tensor *h, const oar_rnn_layer_io *io) {
    if (!h) return io->b_hh;
    oar_tensor *s, *z;
    if (oar_choose_qparams(h, OAR_U8, false, &s, &z) != OAR_OK) return NULL;
    oar_tensor *q = oar_quantize(h, s, z, 0, OAR_U8);
    return q ? oar_qlinear(q, s, z, io->w_hh, io->w_hh_scale, io->b_hh, NULL) : NULL;
}

/* The n gate chunks of a [.., n*H] tensor along its last dim (views); false on failure. */
static bool gate_chunks(oar_tensor *t, int n, oar_tensor **out) {
    return t && oar_chunk(t, n, oar_ndim(t) - 1, out, n) == n;
}

static oar_status lstm_step(oar_tensor *gx, const oar_rnn_layer_io *io, oar_tensor **h, oar_tensor **c) {
    oar_tensor *g[4];
    if (!gate_chunks(oar_add(recurrent(*h, io), gx), 4, g)) return oar_last_status();
    oar_tensor *i = oar_sigmoid(g[0]), *f = oar_sigmoid(g[1]), *gg = oar_tanh(g[2]), *o = oar_sigmoid(g[3]);
    oar_tensor *ig = oar_mul(i, gg);
    oar_tensor *cn = *c ? oar_add(oar_mul(f, *c), ig) : ig;
    *h = oar_mul(o, oar_tanh(cn));
    *c = cn;
    return *h ? OAR_OK : oar_last_status();
}

static oar_status gru_step(oar_tensor *gx, const oar_rnn_layer_io *io, oar_tensor **h) {
    oar_tensor *ig[3], *hg[3];
    if (!gate_chunks(gx, 3, ig) || !gate_chunks(recurrent(*h, io), 3, hg)) return oar_last_status();
    oar_tensor *r = oar_sigmoid(oar_add(hg[0], ig[0])), *z = oar_sigmoid(oar_add(hg[1], ig[1]));
    oar_tensor *n = oar_tanh(oar_add(ig[2], oar_mul(hg[2], r)));
    /* (h - n) z + n; with h = 0 it is n - n z (the same value: the negation is exact) */
    *h = *h ? oar_add(oar_mul(oar_sub(*h, n), z), n) : oar_sub(n, oar_mul(n, z));
    return *h ? OAR_OK : oar_last_status();
}

oar_status oar_rnn_qlayer(oar_rnn_kind kind, oar_rnn_layer_io *io) {
    const char *who = kind == OAR_RNN_LSTM ? "DynamicQuantizedLSTM" : "DynamicQuantizedGRU";
    if (!io->w_ih_scale || !io->w_hh_scale || oar_dtype_of(io->w_ih) != OAR_I8 || oar_dtype_of(io->w_hh) != OAR_I8)
        return oar_error(OAR_ERR_STATE, "%s: expected i8 weights with their scales, got %s and %s weights; quantize "
                                        "the layer with oar_quantize_dynamic", who,
                         oar_dtype_name(oar_dtype_of(io->w_ih)), oar_dtype_name(oar_dtype_of(io->w_hh)));
    if (oar_dtype_of(io->x) != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "%s: expected an f32 input (activations are quantized per call from f32), "
                                        "got %s", who, oar_dtype_name(oar_dtype_of(io->x)));
    int64_t T = oar_size(io->x, 0);
    oar_tensor **steps = malloc(sizeof(*steps) * (size_t)T * 2);
    if (!steps) return oar_error(OAR_ERR_OOM, "%s: out of memory for %lld steps", who, (long long)T);
    oar_tensor **hs = steps + T;
    /* the input part of every step at once: x quantized over the whole sequence */
    oar_tensor *s, *z, *q = NULL;
    oar_status st = oar_choose_qparams(io->x, OAR_U8, false, &s, &z);
    if (st == OAR_OK && !(q = oar_quantize(io->x, s, z, 0, OAR_U8))) st = oar_last_status();
    if (st == OAR_OK) st = oar_rnn_unbind(oar_qlinear(q, s, z, io->w_ih, io->w_ih_scale, io->b_ih, NULL), steps);
    oar_tensor *h = io->h0, *c = io->c0;
    for (int64_t t = 0; st == OAR_OK && t < T; t++) {
        oar_scope_begin(); /* a step's temporaries go with it */
        st = kind == OAR_RNN_LSTM ? lstm_step(steps[t], io, &h, &c) : gru_step(steps[t], io, &h);
        if (st == OAR_OK) {
            oar_keep(h);
            if (kind == OAR_RNN_LSTM) oar_keep(c);
        }
        oar_scope_end();
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
