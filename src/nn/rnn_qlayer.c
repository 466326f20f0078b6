/* One dynamically quantized LSTM or GRU layer over a sequence (oar_quantize_dynamic): the
 * weights are i8 with one symmetric scale per row (per gate channel), the activations are
 * quantized to u8 per call over their range (choose_qparams), and the gate products are
 * qlinear (int32 sums, exact on every CPU path); the nonlinearities stay f32. The arithmetic
 * is torch's quantized LSTM / GRU (aten's QuantizedCellParamsDynamic), step for step:
 *
 *   input part:  the whole sequence x [T, N, I] quantized once, its product with W_ih plus b_ih
 *                for every step at once: [T, N, H] per gate
 *   each step:   h quantized over its own range, its product with W_hh plus b_hh: [N, H] per gate
 *                (a zero initial state gives b_hh: qlinear of zeros is exactly its bias)
 *   LSTM:        per gate (i, f, g, o) hh + ih; c' = σ(f) c + σ(i) tanh(g), h' = σ(o) tanh(c')
 *   GRU:         r = σ(hh_r + ih_r), z = σ(hh_z + ih_z), n = tanh(ih_n + hh_n r),
 *                h' = (h - n) z + n
 *
 * One difference from torch remains by design: torch's fbgemm and onednn engines quantize
 * these activations to 7 bits (reduce_range, for AVX2's saturating u8·s8 pairs); oar's int8
 * kernels are exact at 8 bits, so it uses the full u8 range, as its dynamic Linear does.
 * Everything is ops, so a quantized model traces and runs in the predictor. */
#include "nn/rnn.h"

#include <stdlib.h>

#define MAX_GATES 4

/* Per-gate views (rows k*H .. (k+1)*H) of the weights, their scales and the biases, so each gate's
 * product is a contiguous [.., H] tensor and the elementwise work runs on the fast contiguous
 * kernels (a chunk of one [N, G*H] product would be strided). The int32 sums and the epilogue of
 * a row do not depend on the other rows, so this is the same arithmetic as one product. */
typedef struct qgates {
    int n;
    oar_tensor *w_ih[MAX_GATES], *s_ih[MAX_GATES], *b_ih[MAX_GATES];
    oar_tensor *w_hh[MAX_GATES], *s_hh[MAX_GATES], *b_hh[MAX_GATES];
} qgates;

/* t's n chunks along dim 0; a 0-d t (a per-tensor scale) is every gate's */
static bool chunks(oar_tensor *t, int n, oar_tensor **out) {
    if (t && oar_ndim(t) == 0) {
        for (int k = 0; k < n; k++) out[k] = t;
        return true;
    }
    return t && oar_chunk(t, n, 0, out, n) == n;
}

static oar_status split_gates(oar_rnn_kind kind, const oar_rnn_layer_io *io, qgates *g) {
    g->n = kind == OAR_RNN_LSTM ? 4 : 3;
    bool ok = chunks(io->w_ih, g->n, g->w_ih) && chunks(io->w_ih_scale, g->n, g->s_ih) &&
              chunks(io->b_ih, g->n, g->b_ih) && chunks(io->w_hh, g->n, g->w_hh) &&
              chunks(io->w_hh_scale, g->n, g->s_hh) && chunks(io->b_hh, g->n, g->b_hh);
    return ok ? OAR_OK : oar_last_status();
}

/* hh[k] = W_hh,k h + b_hh,k ([N, H]) for every gate, h quantized once over its range; for a
 * zero state b_hh,k ([H], what qlinear of zeros gives). */
static oar_status recurrent(oar_tensor *h, const qgates *g, oar_tensor **hh) {
    if (!h) {
        for (int k = 0; k < g->n; k++) hh[k] = g->b_hh[k];
        return OAR_OK;
    }
    oar_tensor *s, *z;
    oar_status st = oar_choose_qparams(h, OAR_U8, false, &s, &z);
    oar_tensor *q = st == OAR_OK ? oar_quantize(h, s, z, 0, OAR_U8) : NULL;
    for (int k = 0; k < g->n; k++)
        if (!(hh[k] = q ? oar_qlinear(q, s, z, g->w_hh[k], g->s_hh[k], g->b_hh[k], NULL) : NULL))
            return oar_last_status();
    return OAR_OK;
}

/* gx[k * T]: gate k's input part at this step */
static oar_status lstm_step(oar_tensor *const *gx, int64_t T, const qgates *g, oar_tensor **h, oar_tensor **c) {
    oar_tensor *hh[MAX_GATES];
    oar_status st = recurrent(*h, g, hh);
    if (st != OAR_OK) return st;
    oar_tensor *i = oar_sigmoid(oar_add(hh[0], gx[0])), *f = oar_sigmoid(oar_add(hh[1], gx[T]));
    oar_tensor *gg = oar_tanh(oar_add(hh[2], gx[2 * T])), *o = oar_sigmoid(oar_add(hh[3], gx[3 * T]));
    oar_tensor *ig = oar_mul(i, gg);
    oar_tensor *cn = *c ? oar_add(oar_mul(f, *c), ig) : ig;
    *h = oar_mul(o, oar_tanh(cn));
    *c = cn;
    return *h ? OAR_OK : oar_last_status();
}

static oar_status gru_step(oar_tensor *const *gx, int64_t T, const qgates *g, oar_tensor **h) {
    oar_tensor *hh[MAX_GATES];
    oar_status st = recurrent(*h, g, hh);
    if (st != OAR_OK) return st;
    oar_tensor *r = oar_sigmoid(oar_add(hh[0], gx[0])), *z = oar_sigmoid(oar_add(hh[1], gx[T]));
    oar_tensor *n = oar_tanh(oar_add(gx[2 * T], oar_mul(hh[2], r)));
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
    qgates g;
    oar_status st = split_gates(kind, io, &g);
    if (st != OAR_OK) return st;
    oar_tensor **steps = malloc(sizeof(*steps) * (size_t)T * (MAX_GATES + 1));
    if (!steps) return oar_error(OAR_ERR_OOM, "%s: out of memory for %lld steps", who, (long long)T);
    oar_tensor **hs = steps + T * MAX_GATES;
    /* the input part of every step at once, x quantized over the whole sequence:
     * steps[k * T + t] = (W_ih,k x + b_ih,k)[t] */
    oar_tensor *s, *z, *q = NULL;
    st = oar_choose_qparams(io->x, OAR_U8, false, &s, &z);
    if (st == OAR_OK && !(q = oar_quantize(io->x, s, z, 0, OAR_U8))) st = oar_last_status();
    for (int k = 0; k < g.n && st == OAR_OK; k++)
        st = oar_rnn_unbind(oar_qlinear(q, s, z, g.w_ih[k], g.s_ih[k], g.b_ih[k], NULL), steps + k * T);
    oar_tensor *h = io->h0, *c = io->c0;
    for (int64_t t = 0; st == OAR_OK && t < T; t++) {
        oar_scope_begin(); /* a step's temporaries go with it */
        st = kind == OAR_RNN_LSTM ? lstm_step(steps + t, T, &g, &h, &c) : gru_step(steps + t, T, &g, &h);
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
