/* ONNX RNN, GRU and LSTM, unrolled over the (static) sequence with oar's ops: the input
 * projection of every step is one matmul, then each step adds the recurrent product and applies
 * the gates. Default activations only (sigmoid and tanh; RNN: tanh); sequence_lens only when
 * every sequence has the full length. */
#include "io/onnx/onnx_ops.h"

#include <stdio.h>
#include <string.h>

typedef enum { CELL_RNN, CELL_GRU, CELL_LSTM } cell_kind;

/* Rows [k H, (k + 1) H) of the last dim of t. */
static oar_tensor *gate(oar_tensor *t, int k, int64_t H) { return t ? oar_slice(t, t->ndim - 1, k * H, (k + 1) * H, 1) : NULL; }

/* t is [dims...] exactly (-1: any size there); what names it in the error. */
static oar_status check_shape(ox_ctx *c, const oar_tensor *t, const char *what, int n, const int64_t *dims) {
    bool ok = !t || t->ndim == n;
    for (int d = 0; ok && t && d < n; d++) ok = dims[d] < 0 || t->shape[d] == dims[d];
    if (ok) return OAR_OK;
    char want[128] = "[";
    size_t k = 1;
    for (int d = 0; d < n && k < sizeof want; d++)
        k += (size_t)snprintf(want + k, sizeof want - k, "%s%lld", d ? ", " : "", (long long)dims[d]);
    snprintf(want + k, sizeof want - k, "]");
    char got[128] = "[";
    k = 1;
    for (int d = 0; d < t->ndim && k < sizeof got; d++)
        k += (size_t)snprintf(got + k, sizeof got - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    snprintf(got + k, sizeof got - k, "]");
    return ox_fail(c, OAR_ERR_SHAPE, "expected %s of shape %s (-1: any), got %s", what, want, got);
}

/* Direction d of a [dirs, ...] weight, as a 2-D (or 1-D) tensor. */
static oar_tensor *dir_of(oar_tensor *t, int d) { return t ? oar_squeeze(oar_slice(t, 0, d, d + 1, 1), 0) : NULL; }

static oar_status check_activations(ox_ctx *c, cell_kind kind) {
    const Onnx__AttributeProto *a = ox_attr(c, "activations");
    static const char *const want[3][3] = {{"Tanh"}, {"Sigmoid", "Tanh"}, {"Sigmoid", "Tanh", "Tanh"}};
    int per_dir = kind == CELL_RNN ? 1 : kind == CELL_GRU ? 2 : 3;
    for (size_t i = 0; a && i < a->n_strings; i++) {
        const ProtobufCBinaryData *s = &a->strings[i];
        const char *w = want[kind][i % (size_t)per_dir];
        if (s->len != strlen(w) || memcmp(s->data, w, s->len))
            return ox_unsupported(c, "activations other than the defaults (%s%s%s); oar translates the defaults only",
                                  want[kind][0], per_dir > 1 ? ", " : "", per_dir > 1 ? want[kind][1] : "");
    }
    if (ox_attr_float(c, "clip", 0) != 0) return ox_unsupported(c, "attribute clip; not supported");
    if (ox_attr_int(c, "input_forget", 0)) return ox_unsupported(c, "input_forget=1; not supported");
    return OAR_OK;
}

static oar_status recurrent(ox_ctx *c, cell_kind kind) {
    oar_tensor *X = OX_IN(c, 0), *W = OX_IN(c, 1), *R = OX_IN(c, 2), *B = OX_IN(c, 3), *lens = OX_IN(c, 4),
               *h0 = OX_IN(c, 5), *c0 = kind == CELL_LSTM ? OX_IN(c, 6) : NULL, *P = kind == CELL_LSTM ? OX_IN(c, 7) : NULL;
    if (!X || !W || !R) return ox_fail(c, OAR_ERR_FORMAT, "expected inputs X, W and R");
    oar_status st = check_activations(c, kind);
    if (st != OAR_OK) return st;
    int gates = kind == CELL_RNN ? 1 : kind == CELL_GRU ? 3 : 4;
    int64_t H = ox_attr_int(c, "hidden_size", W->ndim == 3 ? W->shape[1] / gates : 0);
    bool batch_first = ox_attr_int(c, "layout", 0) != 0;
    if (X->ndim != 3 || W->ndim != 3 || R->ndim != 3 || H <= 0 || W->shape[1] != gates * H)
        return ox_fail(c, OAR_ERR_SHAPE, "expected X [seq, batch, input] and W [dirs, %d hidden, input]", gates);
    if (batch_first) X = oar_transpose(X, 0, 1);
    if (!X) return oar_last_status();
    int64_t T = X->shape[0], N = X->shape[1];
    if (lens) { /* only full-length sequences */
        int64_t l[4096];
        int n = ox_known_ints(c, 4, l, 4096);
        if (n < 0) return oar_last_status();
        for (int i = 0; i < n; i++)
            if (l[i] != T) return ox_unsupported(c, "sequence_lens shorter than the sequence (%lld < %lld)", (long long)l[i], (long long)T);
    }
    char buf[16];
    const char *dir = ox_attr_str(c, "direction", "forward", buf, sizeof buf);
    int dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool reverse = !strcmp(dir, "reverse");
    if (!reverse && dirs == 1 && strcmp(dir, "forward"))
        return ox_fail(c, OAR_ERR_INVALID_ARG, "direction='%s'; expected forward, reverse or bidirectional", dir);
    if (W->shape[0] != dirs) return ox_fail(c, OAR_ERR_SHAPE, "W has %lld directions, expected %d", (long long)W->shape[0], dirs);
    int64_t G = gates * H, w_dims[3] = {dirs, G, X->shape[2]}, r_dims[3] = {dirs, G, H}, b_dims[2] = {dirs, 2 * G},
            s_dims[3] = {dirs, N, H}, p_dims[2] = {dirs, 3 * H};
    if ((st = check_shape(c, W, "W", 3, w_dims)) != OAR_OK || (st = check_shape(c, R, "R", 3, r_dims)) != OAR_OK ||
        (st = check_shape(c, B, "B", 2, b_dims)) != OAR_OK)
        return st;
    if (batch_first) s_dims[0] = N, s_dims[1] = dirs; /* layout 1: initial states [N, dirs, H] */
    if ((st = check_shape(c, h0, "initial_h", 3, s_dims)) != OAR_OK || (st = check_shape(c, c0, "initial_c", 3, s_dims)) != OAR_OK ||
        (st = check_shape(c, P, "P", 2, p_dims)) != OAR_OK)
        return st;
    if (batch_first) { /* the states in the [dirs, N, H] layout used below */
        if (h0 && !(h0 = oar_transpose(h0, 0, 1))) return oar_last_status();
        if (c0 && !(c0 = oar_transpose(c0, 0, 1))) return oar_last_status();
    }
    bool lbr = ox_attr_int(c, "linear_before_reset", 0) != 0;
    oar_tensor *Y[2][4096 / 8];
    if (T > (int64_t)(sizeof Y[0] / sizeof *Y[0])) return ox_unsupported(c, "sequences longer than %d steps", (int)(sizeof Y[0] / sizeof *Y[0]));
    oar_tensor *hT[2] = {0}, *cT[2] = {0};
    for (int d = 0; d < dirs; d++) {
        bool back = reverse || d == 1;
        oar_tensor *w = dir_of(W, d), *r = dir_of(R, d), *b = dir_of(B, d), *rt = oar_transpose(r, 0, 1);
        /* every step's input projection at once: [T, N, gates H] */
        oar_tensor *bw = b ? oar_slice(b, 0, 0, gates * H, 1) : NULL, *br = b ? oar_slice(b, 0, gates * H, 2 * gates * H, 1) : NULL;
        oar_tensor *xw = oar_matmul(X, oar_transpose(w, 0, 1));
        if (xw && bw) xw = oar_add(xw, kind == CELL_GRU && lbr ? bw : oar_add(bw, br));
        int64_t hs[2] = {N, H};
        oar_tensor *h = h0 ? dir_of(h0, d) : oar_zeros(hs, 2, X->dtype);
        oar_tensor *cell = kind == CELL_LSTM ? (c0 ? dir_of(c0, d) : oar_zeros(hs, 2, X->dtype)) : NULL;
        oar_tensor *p = P ? dir_of(P, d) : NULL;
        if (!xw || !h || !rt || (kind == CELL_LSTM && !cell)) return oar_last_status();
        for (int64_t s = 0; s < T; s++) {
            int64_t t = back ? T - 1 - s : s;
            oar_tensor *x_t = oar_squeeze(oar_slice(xw, 0, t, t + 1, 1), 0);
            if (kind == CELL_RNN) {
                h = oar_tanh(oar_add(x_t, oar_matmul(h, rt)));
            } else if (kind == CELL_GRU) { /* gates z, r, h */
                oar_tensor *rh = oar_matmul(h, oar_slice(rt, 1, 0, 2 * H, 1));
                if (lbr && br) rh = oar_add(rh, oar_slice(br, 0, 0, 2 * H, 1));
                oar_tensor *zr = oar_sigmoid(oar_add(oar_slice(x_t, 1, 0, 2 * H, 1), rh));
                oar_tensor *z = gate(zr, 0, H), *rg = gate(zr, 1, H), *rh_h = oar_slice(rt, 1, 2 * H, 3 * H, 1);
                oar_tensor *cand;
                if (lbr) {
                    oar_tensor *hr = oar_matmul(h, rh_h);
                    if (br) hr = oar_add(hr, oar_slice(br, 0, 2 * H, 3 * H, 1));
                    cand = oar_tanh(oar_add(gate(x_t, 2, H), oar_mul(rg, hr)));
                } else {
                    cand = oar_tanh(oar_add(gate(x_t, 2, H), oar_matmul(oar_mul(rg, h), rh_h)));
                }
                h = oar_add(oar_mul(oar_rsub_scalar(z, 1.0), cand), oar_mul(z, h)); /* (1 - z) h~ + z h */
            } else { /* gates i, o, f, c */
                oar_tensor *g = oar_add(x_t, oar_matmul(h, rt));
                oar_tensor *gi = gate(g, 0, H), *go = gate(g, 1, H), *gf = gate(g, 2, H), *gc = gate(g, 3, H);
                if (p) {
                    gi = oar_add(gi, oar_mul(gate(p, 0, H), cell));
                    gf = oar_add(gf, oar_mul(gate(p, 2, H), cell));
                }
                cell = oar_add(oar_mul(oar_sigmoid(gf), cell), oar_mul(oar_sigmoid(gi), oar_tanh(gc)));
                if (p && cell) go = oar_add(go, oar_mul(gate(p, 1, H), cell));
                h = oar_mul(oar_sigmoid(go), oar_tanh(cell));
            }
            if (!h) return oar_last_status();
            Y[d][t] = h;
        }
        hT[d] = h;
        cT[d] = cell;
    }
    /* Y [T, dirs, N, H] (layout 1: [N, T, dirs, H]); Y_h, Y_c [dirs, N, H] (layout 1: [N, dirs, H]) */
    if (c->n_out > 0 && c->want[0]) {
        oar_tensor *steps[4096 / 8];
        for (int64_t t = 0; t < T; t++) {
            oar_tensor *per_dir[2] = {Y[0][t], dirs > 1 ? Y[1][t] : NULL};
            steps[t] = oar_stack(per_dir, dirs, 0);
            if (!steps[t]) return oar_last_status();
        }
        oar_tensor *y = oar_stack(steps, (int)T, 0);
        if (y && batch_first) {
            int perm[4] = {2, 0, 1, 3};
            y = oar_contiguous(oar_permute(y, perm, 4));
        }
        if ((st = ox_set(c, 0, y)) != OAR_OK) return st;
    }
    oar_tensor *last[2][2] = {{hT[0], hT[1]}, {cT[0], cT[1]}};
    for (int k = 1; k < c->n_out && k < (kind == CELL_LSTM ? 3 : 2); k++) {
        if (!c->want[k]) continue;
        oar_tensor *y = oar_stack(last[k - 1], dirs, 0);
        if (y && batch_first) y = oar_contiguous(oar_transpose(y, 0, 1));
        if ((st = ox_set(c, k, y)) != OAR_OK) return st;
    }
    return OAR_OK;
}

oar_status ox_RNN(ox_ctx *c) { return recurrent(c, CELL_RNN); }
oar_status ox_GRU(ox_ctx *c) { return recurrent(c, CELL_GRU); }
oar_status ox_LSTM(ox_ctx *c) { return recurrent(c, CELL_LSTM); }
