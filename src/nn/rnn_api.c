/* oar_rnn_layer_run and oar_rnn_qlayer_run (include/oar/rnn.h): one layer of the C core's
 * LSTM/GRU, float or dynamically quantized, for front ends that hold the parameters themselves.
 * Checks what the layer needs, then runs the same code as nn.LSTM/nn.GRU (or their quantized
 * form), inside a scope so only the outputs remain. */
#include "nn/rnn.h"

static oar_status need(oar_tensor *t, const char *name, int ndim, const char *who) {
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s, got NULL", who, name);
    if (oar_ndim(t) != ndim)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s with %d dims, got %d", who, name, ndim, oar_ndim(t));
    return OAR_OK;
}

/* a weight's scale: 0-d (per tensor) or [G*H] (per row), f32 */
static oar_status need_scale(oar_tensor *s, oar_tensor *w, const char *name, int64_t GH, const char *who) {
    if (!s) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s, got NULL", who, name);
    if (oar_dtype_of(s) != OAR_F32 || !(oar_ndim(s) == 0 || (oar_ndim(s) == 1 && oar_size(s, 0) == GH)))
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s as f32 of shape [] (per tensor) or [%lld] (per row), got %s "
                                        "with %d dims", who, name, (long long)GH, oar_dtype_name(oar_dtype_of(s)),
                         oar_ndim(s));
    if (oar_dtype_of(w) != OAR_I8)
        return oar_error(OAR_ERR_DTYPE, "%s: expected i8 weights beside their scales, got %s", who,
                         oar_dtype_name(oar_dtype_of(w)));
    return OAR_OK;
}

/* the checks both entry points share, then the float or the quantized layer */
static oar_status run(oar_rnn_cell cell, oar_rnn_layer_io io, bool quantized, oar_tensor **y, oar_tensor **h_n,
                      oar_tensor **c_n) {
    const char *who = quantized ? (cell == OAR_RNN_CELL_LSTM ? "rnn_qlayer_run (LSTM)" : "rnn_qlayer_run (GRU)")
                                : (cell == OAR_RNN_CELL_LSTM ? "rnn_layer_run (LSTM)" : "rnn_layer_run (GRU)");
    if (cell != OAR_RNN_CELL_LSTM && cell != OAR_RNN_CELL_GRU)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected the cell OAR_RNN_CELL_LSTM or OAR_RNN_CELL_GRU, got %d",
                         quantized ? "rnn_qlayer_run" : "rnn_layer_run", (int)cell);
    if (!y || !h_n || (cell == OAR_RNN_CELL_LSTM && !c_n))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected output pointers y, h_n%s, got NULL", who,
                         cell == OAR_RNN_CELL_LSTM ? " and c_n" : "");
    oar_status st = need(io.x, "x [T, N, I]", 3, who);
    if (st == OAR_OK) st = need(io.w_ih, "w_ih [G*H, I]", 2, who);
    if (st == OAR_OK) st = need(io.w_hh, "w_hh [G*H, H]", 2, who);
    if (st == OAR_OK) st = need(io.b_ih, "b_ih [G*H]", 1, who);
    if (st == OAR_OK) st = need(io.b_hh, "b_hh [G*H]", 1, who);
    if (st != OAR_OK) return st;
    int64_t G = cell == OAR_RNN_CELL_LSTM ? 4 : 3, GH = oar_size(io.w_hh, 0), H = oar_size(io.w_hh, 1);
    int64_t T = oar_size(io.x, 0), N = oar_size(io.x, 1), I = oar_size(io.x, 2);
    if (T < 1 || GH != G * H || oar_size(io.w_ih, 0) != GH || oar_size(io.w_ih, 1) != I || oar_size(io.b_ih, 0) != GH ||
        oar_size(io.b_hh, 0) != GH)
        return oar_error(OAR_ERR_SHAPE, "%s: expected x [T>=1, N, I], w_ih [%lld*H, I], w_hh [%lld*H, H] and biases "
                                        "[%lld*H]; got x [%lld, %lld, %lld], w_ih [%lld, %lld], w_hh [%lld, %lld], "
                                        "b_ih [%lld], b_hh [%lld]", who, (long long)G, (long long)G, (long long)G,
                         (long long)T, (long long)N, (long long)I, (long long)oar_size(io.w_ih, 0),
                         (long long)oar_size(io.w_ih, 1), (long long)GH, (long long)H, (long long)oar_size(io.b_ih, 0),
                         (long long)oar_size(io.b_hh, 0));
    if (quantized) {
        st = need_scale(io.w_ih_scale, io.w_ih, "w_ih_scale", GH, who);
        if (st == OAR_OK) st = need_scale(io.w_hh_scale, io.w_hh, "w_hh_scale", GH, who);
        if (st != OAR_OK) return st;
    }
    oar_tensor *states[2] = {io.h0, io.c0};
    for (int k = 0; k < (cell == OAR_RNN_CELL_LSTM ? 2 : 1); k++)
        if (states[k] && (oar_ndim(states[k]) != 2 || oar_size(states[k], 0) != N || oar_size(states[k], 1) != H))
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape [%lld, %lld] (batch, hidden) or NULL", who,
                             k ? "c0" : "h0", (long long)N, (long long)H);
    if (cell != OAR_RNN_CELL_LSTM) io.c0 = NULL;
    oar_rnn_kind kind = cell == OAR_RNN_CELL_LSTM ? OAR_RNN_LSTM : OAR_RNN_GRU;
    oar_scope_begin();
    st = quantized ? oar_rnn_qlayer(kind, &io) : oar_rnn_layer(kind, &io);
    if (st == OAR_OK) {
        *y = oar_keep(io.y);
        *h_n = oar_keep(io.h_n);
        if (c_n) *c_n = io.c_n ? oar_keep(io.c_n) : NULL;
    }
    oar_scope_end();
    return st;
}

oar_status oar_rnn_layer_run(oar_rnn_cell cell, oar_tensor *x, oar_tensor *w_ih, oar_tensor *w_hh, oar_tensor *b_ih,
                             oar_tensor *b_hh, oar_tensor *h0, oar_tensor *c0, oar_tensor **y, oar_tensor **h_n,
                             oar_tensor **c_n) {
    oar_rnn_layer_io io = {.x = x, .w_ih = w_ih, .w_hh = w_hh, .b_ih = b_ih, .b_hh = b_hh, .h0 = h0, .c0 = c0};
    return run(cell, io, false, y, h_n, c_n);
}

oar_status oar_rnn_qlayer_run(oar_rnn_cell cell, oar_tensor *x, oar_tensor *w_ih, oar_tensor *w_ih_scale,
                              oar_tensor *w_hh, oar_tensor *w_hh_scale, oar_tensor *b_ih, oar_tensor *b_hh,
                              oar_tensor *h0, oar_tensor *c0, oar_tensor **y, oar_tensor **h_n, oar_tensor **c_n) {
    oar_rnn_layer_io io = {.x = x, .w_ih = w_ih, .w_hh = w_hh, .b_ih = b_ih, .b_hh = b_hh, .w_ih_scale = w_ih_scale,
                           .w_hh_scale = w_hh_scale, .h0 = h0, .c0 = c0};
    return run(cell, io, true, y, h_n, c_n);
}
