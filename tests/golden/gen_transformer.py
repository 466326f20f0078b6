#!/usr/bin/env python3
"""Golden values from PyTorch for oar's TransformerEncoderLayer and TransformerDecoderLayer.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_transformer.py
It writes tests/golden/transformer.txt, which tests/test_golden_transformer.c reads (the test
does not need torch). Each case builds nn.TransformerEncoderLayer or nn.TransformerDecoderLayer
with dropout 0 in training mode (so dropout is the identity and torch takes its ordinary,
differentiable path), draws parameters and inputs as float32 values held in float64 (so the f32
run starts from the same numbers), evaluates in float64 and records:

    case <kind> <key=value ...>    kind: encoder | decoder
    param <name> <tensor>          every parameter, by torch's name
    input <name> <tensor>          encoder: src; decoder: tgt, memory
    output 0 <tensor>
    weight 0 <tensor>              fixed random weights w
    grad <name> <tensor>           d/d(name) of sum(output * w), for every input and parameter
    end

causal=1 passes torch's square subsequent mask as src_mask (encoder) or tgt_mask (decoder).
A tensor is "f64 <ndim> <dims...> | <values...>" in row-major order.
"""
import os

import torch

torch.manual_seed(0)
LINES = []


def fmt(t):
    t = t.detach()
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    return f"f64 {t.dim()} {dims} | {vals}"


def f32(*shape, scale=1.0):
    return (torch.randn(*shape) * scale).to(torch.float32).to(torch.float64)


def case(kind, E, heads, ff, act, batch_first, norm_first, causal, N, S, T=None):
    cls = torch.nn.TransformerEncoderLayer if kind == "encoder" else torch.nn.TransformerDecoderLayer
    m = cls(E, heads, dim_feedforward=ff, dropout=0.0, activation=act, batch_first=batch_first,
            norm_first=norm_first).double()
    m.train()
    with torch.no_grad():  # f32-exact values; nonzero biases and norm affines, so every use is checked
        for name, p in m.named_parameters():
            if "bias" in name or "norm" in name:
                p.normal_(0.5 if name.endswith("weight") else 0.0, 0.5)
            p.copy_(p.to(torch.float32).to(torch.float64))

    def seq(L):
        if N == 0:
            return f32(L, E)
        return f32(N, L, E) if batch_first else f32(L, N, E)

    names = ["src"] if kind == "encoder" else ["tgt", "memory"]
    inputs = [seq(S)] if kind == "encoder" else [seq(S), seq(T)]
    inputs = [t.clone().requires_grad_(True) for t in inputs]
    mask = torch.nn.Transformer.generate_square_subsequent_mask(S).double() if causal else None
    if kind == "encoder":
        out = m(inputs[0], src_mask=mask)
    else:
        out = m(inputs[0], inputs[1], tgt_mask=mask)
    attrs = (f"d_model={E} nhead={heads} dim_feedforward={ff} activation={act} batch_first={int(batch_first)} "
             f"norm_first={int(norm_first)} causal={int(causal)}")
    LINES.append(f"case {kind} {attrs}")
    for name, p in m.named_parameters():
        LINES.append(f"param {name} {fmt(p)}")
    for n, t in zip(names, inputs):
        LINES.append(f"input {n} {fmt(t)}")
    w = f32(*out.shape)
    LINES.append(f"output 0 {fmt(out)}")
    LINES.append(f"weight 0 {fmt(w)}")
    loss = (out * w).sum()
    wrt = inputs + list(m.parameters())
    wnames = names + [n for n, _ in m.named_parameters()]
    for n, g in zip(wnames, torch.autograd.grad(loss, wrt)):
        LINES.append(f"grad {n} {fmt(g)}")
    LINES.append("end")


# encoder: post-norm relu batch_first; pre-norm gelu sequence-first; causal; unbatched (N = 0)
case("encoder", 8, 2, 16, "relu", True, False, False, 2, 5)
case("encoder", 8, 4, 12, "gelu", False, True, False, 3, 4)
case("encoder", 6, 3, 10, "relu", True, True, True, 2, 5)
case("encoder", 4, 1, 8, "gelu", True, False, True, 0, 3)
# decoder: the same variations, with memory of another length
case("decoder", 8, 2, 16, "relu", True, False, False, 2, 5, 3)
case("decoder", 8, 4, 12, "gelu", False, True, True, 2, 4, 6)
case("decoder", 6, 2, 10, "relu", False, False, True, 3, 3, 4)
case("decoder", 4, 2, 8, "gelu", True, True, False, 0, 3, 2)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer.txt")
with open(out, "w") as f:
    f.write(f"# made by tests/golden/gen_transformer.py with torch {torch.__version__}; do not edit\n")
    f.write("\n".join(LINES) + "\n")
print(f"wrote {out}: {sum(1 for l in LINES if l.startswith('case'))} cases")
