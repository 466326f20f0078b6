/* Golden values from PyTorch for MultiheadAttention, LSTM and GRU (tests/golden/rnn.txt, made
 * by tests/golden/gen_rnn.py). torch's parameters are loaded into the oar module by name
 * (which also checks that oar registers the same names and shapes), then the outputs and the
 * gradients of sum_k sum(out_k * w_k) w.r.t. every input and parameter must match torch.
 *
 * Two passes. f64: the inputs are exact and only summation order differs from torch, so
 * 1e-10 relative. f32: inputs and parameters are f32-exact (the generator rounds them), so
 * the difference is oar's own f32 rounding: unit roundoff 6e-8, grown by dot products of at
 * most 8 terms, a softmax, and up to 6 recurrent steps whose gates contract errors (sigmoid'
 * <= 1/4, tanh' <= 1); the worst case seen is 4e-7 of (1 + |value|) (printed at the end), so
 * 1e-5 keeps a margin of 25, while a wrong gate, bias or mask moves values by 1e-4 to 1e-1
 * (a 1e-4 relative change of one stored value already fails). */
#include "golden_module.h"

static oar_module *build(const gcase *c) {
    if (!strcmp(c->kind, "mha"))
        return oar_nn_multihead_attention(attr(c, "embed_dim"), attr(c, "heads"), attr(c, "bias"), attr(c, "causal"), 0.0);
    oar_module *(*make)(int64_t, int64_t, int, bool) = !strcmp(c->kind, "lstm") ? oar_nn_lstm : oar_nn_gru;
    return make(attr(c, "input"), attr(c, "hidden"), (int)attr(c, "layers"), attr(c, "batch_first"));
}

/* The module's inputs in forward_n order, from the cast copies of the case's inputs. */
static int forward_inputs(const gcase *c, oar_tensor *const *cast, oar_tensor **in) {
    if (!strcmp(c->kind, "mha")) {
        in[0] = input_named(c, "query", cast);
        oar_tensor *k = input_named(c, "key", cast), *v = input_named(c, "value", cast);
        if (!k) return 1;           /* self-attention */
        in[1] = k;
        in[2] = v ? v : k;          /* key is value */
        return 3;
    }
    in[0] = input_named(c, "x", cast);
    in[1] = input_named(c, "h0", cast);
    in[2] = input_named(c, "c0", cast);
    return !strcmp(c->kind, "lstm") ? 3 : 2;
}

int main(void) { return golden_module_main("test_golden_rnn", "rnn.txt", 10); }
