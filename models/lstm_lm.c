/* lstm-lm: Embedding(10000, 200), a 2-layer LSTM(200) over [T, N] token ids, and a
 * Linear(200, 10000) decoder. forward_n(x, h, c) -> (logits [T, N, 10000], h, c), so a
 * training loop can carry the state between windows (truncated BPTT). */
#include "zoo.h"
#include "zoo_util.h"

#define VOCAB 10000
#define WIDTH 200
#define LAYERS 2

/* kids: emb, rnn, dec */
static oar_status lm_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    zoo_kids *s = oar_module_state(self);
    if (n_in < 1 || n_out < 1)
        return oar_set_error(OAR_ERR_INVALID_ARG, "lstm-lm: expected inputs (x[, h, c]) and outputs (logits[, h, c])");
    oar_scope_begin();
    oar_tensor *rin[3] = {zoo_run(s->k[0], in[0]), n_in > 1 ? in[1] : NULL, n_in > 2 ? in[2] : NULL};
    oar_tensor *rout[3] = {NULL, NULL, NULL};
    oar_status st = oar_forward_n(s->k[1], rin, 3, rout, 3);
    if (st != OAR_OK) {
        oar_scope_end();
        return st;
    }
    for (int i = 1; i < n_out && i < 3; i++) out[i] = oar_keep(rout[i]);
    return zoo_finish(out, zoo_run(s->k[2], rout[0]));
}

static const oar_module_ops LM_OPS = {"LSTMLM", lm_forward, free, NULL};

oar_module *oar_zoo_lstm_lm(const oar_zoo_opts *o) {
    int64_t vocab = o && o->num_classes ? o->num_classes : VOCAB;
    zoo_kids *s;
    oar_module *m = zoo_new(&LM_OPS, &s);
    bool ok = m != NULL;
    zoo_add(m, s, "emb", oar_nn_embedding(vocab, WIDTH), &ok);
    zoo_add(m, s, "rnn", oar_nn_lstm(WIDTH, WIDTH, LAYERS, false), &ok);
    zoo_add(m, s, "dec", oar_nn_linear(WIDTH, vocab, true), &ok);
    return oar_zoo_checked(m, ok);
}
