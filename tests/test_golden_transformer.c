/* Golden values from PyTorch for TransformerEncoderLayer and TransformerDecoderLayer
 * (tests/golden/transformer.txt, made by tests/golden/gen_transformer.py with torch 1.13):
 * post-norm and norm_first, relu and gelu, batch_first and sequence-first, causal self-
 * attention, unbatched inputs. torch's parameters are loaded by name (so oar must register
 * torch's names and shapes), then the output and the gradients of sum(out * w) w.r.t. every
 * input and parameter must match torch: f64 to 1e-10 relative (only summation order differs),
 * f32 to 1e-5 of (1 + |value|) (inputs are f32-exact; two layer norms, two attention softmaxes
 * and dot products of at most 16 terms; a wrong residual, norm placement or mask moves values
 * by 1e-2 or more). */
#include "golden_module.h"

static oar_module *build(const gcase *c) {
    oar_transformer_opts o = oar_transformer_defaults(attr(c, "d_model"), attr(c, "nhead"));
    o.dim_feedforward = attr(c, "dim_feedforward");
    o.dropout = 0.0; /* torch ran with dropout 0 in training mode */
    o.activation = strstr(c->attrs, "activation=gelu") ? OAR_ACT_GELU : OAR_ACT_RELU;
    o.batch_first = attr(c, "batch_first");
    o.norm_first = attr(c, "norm_first");
    o.causal = attr(c, "causal");
    return !strcmp(c->kind, "encoder") ? oar_nn_transformer_encoder_layer(&o) : oar_nn_transformer_decoder_layer(&o);
}

/* The module's inputs in forward_n order: src, or tgt and memory. */
static int forward_inputs(const gcase *c, oar_tensor *const *cast, oar_tensor **in) {
    if (!strcmp(c->kind, "encoder")) {
        in[0] = input_named(c, "src", cast);
        return 1;
    }
    in[0] = input_named(c, "tgt", cast);
    in[1] = input_named(c, "memory", cast);
    return 2;
}

int main(void) { return golden_module_main("test_golden_transformer", "transformer.txt", 8); }
