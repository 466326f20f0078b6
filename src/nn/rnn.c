/* nn.LSTM and nn.GRU: multi-layer recurrent modules with torch's parameter names, layout
 * and initialization (weight_ih_l{k} [G*H, in], weight_hh_l{k} [G*H, H], bias_ih_l{k} and
 * bias_hh_l{k} [G*H], all U(-1/sqrt(H), 1/sqrt(H)); G = 4 for LSTM, 3 for GRU).
 * forward_n(x, h0[, c0]) -> (y, h_n[, c_n]); x is [T, N, I] ([N, T, I] with batch_first) or
 * [T, I] unbatched; states are [layers, N, H] ([layers, H] unbatched), NULL for zeros. */
#include "nn/rnn.h"
#include "ops/dispatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct rnn_state {
    oar_rnn_kind kind;
    int64_t input, hidden;
    int layers;
    bool batch_first;
} rnn_state;

static const char *kind_name(oar_rnn_kind k) { return k == OAR_RNN_LSTM ? "LSTM" : "GRU"; }

static oar_tensor *param(oar_module *m, const char *what, int layer) {
    char name[64];
    snprintf(name, sizeof name, "%s_l%d", what, layer);
    return oar_module_local(m, name);
}

static void shape_str(const oar_tensor *t, char *buf, size_t size) {
    oar_format_shape(oar_shape(t), oar_ndim(t), buf, size);
}

/* The input and the states against the module's sizes and dtype. */
static oar_status check_inputs(oar_module *m, const rnn_state *s, oar_tensor *const *in, int n_in, int n_out) {
    const char *who = kind_name(s->kind);
    int max_state = s->kind == OAR_RNN_LSTM ? 2 : 1;
    if (n_in < 1 || n_in > 1 + max_state || !in)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 1 to %d inputs (x%s), got %d", who, 1 + max_state,
                         s->kind == OAR_RNN_LSTM ? ", h0, c0" : ", h0", n_in);
    if (n_out < 1 || n_out > 1 + max_state)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 1 to %d outputs (y%s), got %d", who, 1 + max_state,
                         s->kind == OAR_RNN_LSTM ? ", h_n, c_n" : ", h_n", n_out);
    oar_tensor *x = in[0];
    if (!x) {
        if (oar_last_status() != OAR_OK) return oar_last_status(); /* keep the error that made x NULL */
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected an input tensor x, got NULL", who);
    }
    oar_dtype dt = oar_dtype_of(param(m, "bias_ih", 0)); /* the weights' too, unless they are int8 */
    char sx[128];
    shape_str(x, sx, sizeof sx);
    if (oar_dtype_of(x) != dt && !oar_amp_active) /* autocast casts it itself */
        return oar_error(OAR_ERR_DTYPE, "%s: expected x of dtype %s (the parameters' dtype), got %s", who,
                         oar_dtype_name(dt), oar_dtype_name(oar_dtype_of(x)));
    int nd = oar_ndim(x);
    if ((nd != 2 && nd != 3) || oar_size(x, -1) != s->input)
        return oar_error(OAR_ERR_SHAPE, "%s: expected x of shape %s with %lld input features, got %s", who,
                         nd == 2 ? "[T, I]" : s->batch_first ? "[N, T, I]" : "[T, N, I]", (long long)s->input, sx);
    int64_t T = nd == 3 && s->batch_first ? oar_size(x, 1) : oar_size(x, 0);
    int64_t N = nd == 3 ? oar_size(x, s->batch_first ? 0 : 1) : 1;
    /* a batch of no sequences is an empty request and gives empty outputs (as in PyTorch); a
     * sequence needs a step, since h_n is the state after the last one */
    if (T < 1 || N < 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected at least one step, got x of shape %s", who, sx);
    for (int k = 1; k < n_in; k++) {
        oar_tensor *st = in[k];
        if (!st) continue; /* zeros */
        const char *name = k == 1 ? "h0" : "c0";
        char ss[128], want[128];
        shape_str(st, ss, sizeof ss);
        if (nd == 3) snprintf(want, sizeof want, "[%d, %lld, %lld]", s->layers, (long long)N, (long long)s->hidden);
        else snprintf(want, sizeof want, "[%d, %lld]", s->layers, (long long)s->hidden);
        if (oar_dtype_of(st) != dt)
            return oar_error(OAR_ERR_DTYPE, "%s: expected %s of dtype %s (the parameters' dtype), got %s", who, name,
                             oar_dtype_name(dt), oar_dtype_name(oar_dtype_of(st)));
        bool ok = oar_ndim(st) == nd && oar_size(st, 0) == s->layers && oar_size(st, -1) == s->hidden &&
                  (nd == 2 || oar_size(st, 1) == N);
        if (!ok)
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s (layers, %shidden), got %s", who, name, want,
                             nd == 3 ? "batch, " : "", ss);
    }
    return OAR_OK;
}

typedef struct rnn_work {
    oar_tensor **h0, **c0; /* per layer [N, H] views of the initial states, or NULL (zeros) */
    oar_tensor **hn, **cn; /* per layer [N, H] final states */
} rnn_work;

static bool is_quantized(const oar_module *m);

static oar_status run_layers(oar_module *m, const rnn_state *s, oar_tensor *x, bool batch_first, rnn_work *w,
                             oar_tensor **y) {
    oar_tensor *cur = x;
    bool q = is_quantized(m);
    for (int l = 0; l < s->layers; l++) {
        oar_rnn_layer_io io = {.x = cur,
                               .w_ih = param(m, "weight_ih", l),
                               .w_hh = param(m, "weight_hh", l),
                               .b_ih = param(m, "bias_ih", l),
                               .b_hh = param(m, "bias_hh", l),
                               .w_ih_scale = q ? param(m, "weight_ih_scale", l) : NULL,
                               .w_hh_scale = q ? param(m, "weight_hh_scale", l) : NULL,
                               .h0 = w->h0 ? w->h0[l] : NULL,
                               .c0 = w->c0 ? w->c0[l] : NULL};
        oar_status st = q ? oar_rnn_qlayer(s->kind, &io) : oar_rnn_layer(s->kind, &io);
        if (st != OAR_OK) return st;
        cur = io.y; /* [T, N, H], the next layer's input */
        w->hn[l] = io.h_n;
        w->cn[l] = io.c_n;
    }
    *y = batch_first ? oar_contiguous(oar_transpose(cur, 0, 1)) : cur;
    return *y ? OAR_OK : oar_last_status();
}

static oar_status rnn_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    const rnn_state *s = m->state;
    oar_status st = check_inputs(m, s, in, n_in, n_out);
    if (st != OAR_OK) return st;
    bool batched = oar_ndim(in[0]) == 3;
    int L = s->layers;
    oar_tensor **buf = calloc((size_t)L * 4, sizeof(*buf));
    if (!buf) return oar_error(OAR_ERR_OOM, "%s: out of memory", kind_name(s->kind));
    rnn_work w = {.hn = buf + 2 * L, .cn = buf + 3 * L};
    oar_scope_begin();
    /* everything as batched and sequence-first: x [T, N, I], states [L, N, H] */
    oar_tensor *x = !batched ? oar_unsqueeze(in[0], 1) : s->batch_first ? oar_transpose(in[0], 0, 1) : in[0];
    for (int k = 1; k < n_in && st == OAR_OK; k++) {
        if (!in[k]) continue;
        oar_tensor **dst = k == 1 ? (w.h0 = buf) : (w.c0 = buf + L);
        st = oar_rnn_unbind(batched ? in[k] : oar_unsqueeze(in[k], 1), dst);
    }
    oar_tensor *y = NULL, *h_n = NULL, *c_n = NULL;
    if (st == OAR_OK) st = run_layers(m, s, x, batched && s->batch_first, &w, &y);
    if (st == OAR_OK && n_out > 1 && !(h_n = oar_rnn_join(w.hn, L))) st = oar_last_status();
    if (st == OAR_OK && n_out > 2 && !(c_n = oar_rnn_join(w.cn, L))) st = oar_last_status();
    if (st == OAR_OK && !batched) {
        y = oar_squeeze(y, 1);
        if (h_n) h_n = oar_squeeze(h_n, 1);
        if (c_n) c_n = oar_squeeze(c_n, 1);
        if (!y || (n_out > 1 && !h_n) || (n_out > 2 && !c_n)) st = oar_last_status();
    }
    if (st == OAR_OK) {
        out[0] = oar_keep(y);
        if (n_out > 1) out[1] = oar_keep(h_n);
        if (n_out > 2) out[2] = oar_keep(c_n);
    }
    oar_scope_end();
    free(buf);
    return st;
}

static int rnn_describe(const oar_module *m, char *buf, size_t size) {
    const rnn_state *s = m->state;
    return snprintf(buf, size, "input=%lld, hidden=%lld, layers=%d, batch_first=%s", (long long)s->input,
                    (long long)s->hidden, s->layers, s->batch_first ? "true" : "false");
}

static int rnn_describe_q(const oar_module *m, char *buf, size_t size) {
    int n = rnn_describe(m, buf, size);
    return n < 0 || (size_t)n >= size ? n : n + snprintf(buf + n, size - (size_t)n, ", weights=i8 per row");
}

static const oar_module_ops lstm_ops = {"LSTM", rnn_forward, free, rnn_describe};
static const oar_module_ops gru_ops = {"GRU", rnn_forward, free, rnn_describe};
/* the same modules after oar_quantize_dynamic (weights i8 with per-row scales) */
static const oar_module_ops q_lstm_ops = {"DynamicQuantizedLSTM", rnn_forward, free, rnn_describe_q};
static const oar_module_ops q_gru_ops = {"DynamicQuantizedGRU", rnn_forward, free, rnn_describe_q};

static bool is_quantized(const oar_module *m) { return m->ops == &q_lstm_ops || m->ops == &q_gru_ops; }

bool oar_rnn_info(oar_module *m, oar_rnn_kind *kind, int *layers, bool *quantized) {
    if (!m || (m->ops != &lstm_ops && m->ops != &gru_ops && !is_quantized(m))) return false;
    const rnn_state *s = m->state;
    if (kind) *kind = s->kind;
    if (layers) *layers = s->layers;
    if (quantized) *quantized = is_quantized(m);
    return true;
}

void oar_rnn_set_quantized(oar_module *m) {
    const rnn_state *s = m->state;
    m->ops = s->kind == OAR_RNN_LSTM ? &q_lstm_ops : &q_gru_ops;
}

static oar_module *rnn_new(oar_rnn_kind kind, int64_t input, int64_t hidden, int layers, bool batch_first) {
    const char *who = kind_name(kind);
    if (input < 1 || hidden < 1 || layers < 1) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected input >= 1, hidden >= 1 and layers >= 1, got input=%lld, "
                                       "hidden=%lld, layers=%d", who, (long long)input, (long long)hidden, layers);
        return NULL;
    }
    rnn_state *s = malloc(sizeof *s);
    oar_module *m = s ? oar_module_new(kind == OAR_RNN_LSTM ? &lstm_ops : &gru_ops, s) : NULL;
    if (!m) {
        free(s);
        if (oar_last_status() == OAR_OK) oar_error(OAR_ERR_OOM, "%s: out of memory", who);
        return NULL;
    }
    *s = (rnn_state){kind, input, hidden, layers, batch_first};
    int64_t G = (kind == OAR_RNN_LSTM ? 4 : 3) * hidden;
    double bound = 1.0 / sqrt((double)hidden);
    static const char *const names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (int l = 0; l < layers; l++) {
        int64_t shapes[4][2] = {{G, l ? hidden : input}, {G, hidden}, {G, 0}, {G, 0}};
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "%s_l%d", names[k], l);
            oar_tensor *t = oar_empty(shapes[k], k < 2 ? 2 : 1, OAR_F32);
            oar_status st = t ? oar_init_uniform_(t, -bound, bound) : oar_last_status();
            if (st == OAR_OK) st = oar_module_add_parameter(m, name, t);
            oar_release(t);
            if (st != OAR_OK) {
                oar_module_free(m);
                return NULL;
            }
        }
    }
    return m;
}

oar_module *oar_nn_lstm(int64_t input, int64_t hidden, int layers, bool batch_first) {
    return rnn_new(OAR_RNN_LSTM, input, hidden, layers, batch_first);
}

oar_module *oar_nn_gru(int64_t input, int64_t hidden, int layers, bool batch_first) {
    return rnn_new(OAR_RNN_GRU, input, hidden, layers, batch_first);
}
