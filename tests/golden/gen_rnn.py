#!/usr/bin/env python3
"""Golden values from PyTorch for oar's attention and recurrent layers.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_rnn.py
It writes tests/golden/rnn.txt, which tests/test_golden_rnn.c reads (the test does not need
torch). Each case builds a torch module (nn.MultiheadAttention with batch_first=True, nn.LSTM,
nn.GRU), draws its parameters and inputs as float32 values (so the f32 run starts from the
same numbers), evaluates in float64, and records:

    case <kind> <key=value ...>         kind: mha | lstm | gru
    param <name> <tensor>               every parameter, by torch's name
    input <name> <tensor>               mha: query [, key [, value]]; rnn: x [, h0 [, c0]]
    output <k> <tensor>                 mha: output, averaged weights; rnn: y, h_n [, c_n]
    weight <k> <tensor>                 fixed random weights w_k
    grad <name> <tensor>                d/d(name) of sum_k sum(output_k * w_k), for every
                                        input and parameter
    end

A tensor is "f64 <ndim> <dims...> | <values...>" in row-major order. MHA inputs: only query
means self-attention (one tensor); query and key without value means value is key.
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
    """Random values exactly representable in float32, held as float64."""
    return (torch.randn(*shape) * scale).to(torch.float32).to(torch.float64)


def emit(kind, attrs, module, inputs, outputs_fn):
    """inputs: list of (name, tensor or None); outputs_fn(*tensors) -> tuple of outputs."""
    module = module.double()
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(p.to(torch.float32).to(torch.float64))
    LINES.append(f"case {kind} {attrs}")
    for name, p in module.named_parameters():
        LINES.append(f"param {name} {fmt(p)}")
    leaves = []
    for name, t in inputs:
        if t is None:
            continue
        t = t.clone().requires_grad_(True)
        leaves.append((name, t))
        LINES.append(f"input {name} {fmt(t)}")
    outs = outputs_fn(*[t for _, t in leaves])
    loss = 0
    for k, o in enumerate(outs):
        w = f32(*o.shape)
        LINES.append(f"output {k} {fmt(o)}")
        LINES.append(f"weight {k} {fmt(w)}")
        loss = loss + (o * w).sum()
    wrt = [t for _, t in leaves] + list(module.parameters())
    names = [n for n, _ in leaves] + [n for n, _ in module.named_parameters()]
    grads = torch.autograd.grad(loss, wrt)
    for n, g in zip(names, grads):
        LINES.append(f"grad {n} {fmt(g)}")
    LINES.append("end")


# ---- multi-head attention (batch_first=True, dropout 0: oar's dropout draws other numbers)
def mha_case(E, heads, bias, causal, N, L, S, mode):
    """mode: self (one input), kv (key is value), qkv (three inputs)."""
    m = torch.nn.MultiheadAttention(E, heads, dropout=0.0, bias=bias, batch_first=True)
    with torch.no_grad():  # nonzero biases, so their gradients and uses are checked
        for name, p in m.named_parameters():
            if "bias" in name:
                p.normal_(0, 0.5)
    q = f32(N, L, E)
    k = q if mode == "self" else f32(N, S, E)
    v = k if mode != "qkv" else f32(N, S, E)
    mask = torch.triu(torch.ones(L, S if mode != "self" else L, dtype=torch.bool), 1) if causal else None
    inputs = [("query", q)] + ([("key", k)] if mode != "self" else []) + ([("value", v)] if mode == "qkv" else [])

    def run(*t):
        qq = t[0]
        kk = t[1] if len(t) > 1 else qq
        vv = t[2] if len(t) > 2 else kk
        out, w = m(qq, kk, vv, need_weights=True, attn_mask=mask, average_attn_weights=True)
        return out, w

    attrs = f"embed_dim={E} heads={heads} bias={int(bias)} causal={int(causal)}"
    emit("mha", attrs, m, inputs, run)


mha_case(8, 2, True, False, 2, 5, 5, "self")
mha_case(8, 4, True, True, 2, 6, 6, "self")
mha_case(6, 3, False, False, 2, 4, 7, "qkv")
mha_case(8, 2, True, True, 3, 5, 4, "kv")
mha_case(4, 1, True, True, 1, 3, 3, "self")


# ---- LSTM and GRU
def rnn_case(kind, I, H, layers, batch_first, T, N, with_h0, with_c0=False, unbatched=False):
    cls = torch.nn.LSTM if kind == "lstm" else torch.nn.GRU
    m = cls(I, H, num_layers=layers, batch_first=batch_first)
    if unbatched:
        x = f32(T, I)
        sshape = (layers, H)
    else:
        x = f32(N, T, I) if batch_first else f32(T, N, I)
        sshape = (layers, N, H)
    h0 = f32(*sshape, scale=0.5) if with_h0 else None
    c0 = f32(*sshape, scale=0.5) if with_c0 else None
    inputs = [("x", x), ("h0", h0), ("c0", c0)]

    def run(*t):
        xx = t[0]
        rest = list(t[1:])
        hh = rest.pop(0) if with_h0 else None
        cc = rest.pop(0) if with_c0 else None
        if kind == "lstm":
            if hh is None and cc is None:
                y, (hn, cn) = m(xx)
            else:
                hh = hh if hh is not None else torch.zeros(sshape, dtype=torch.float64)
                cc = cc if cc is not None else torch.zeros(sshape, dtype=torch.float64)
                y, (hn, cn) = m(xx, (hh, cc))
            return y, hn, cn
        y, hn = m(xx, hh) if hh is not None else m(xx)
        return y, hn

    attrs = f"input={I} hidden={H} layers={layers} batch_first={int(batch_first)}"
    emit(kind, attrs, m, inputs, run)


rnn_case("lstm", 3, 4, 2, False, 5, 2, True, True)
rnn_case("lstm", 3, 4, 2, True, 4, 3, False, False)
rnn_case("lstm", 2, 3, 1, False, 6, 2, True, False)
rnn_case("lstm", 3, 4, 2, False, 4, 1, True, True, unbatched=True)
rnn_case("gru", 3, 4, 2, False, 5, 2, True)
rnn_case("gru", 3, 4, 2, True, 4, 3, False)
rnn_case("gru", 2, 5, 1, True, 3, 2, True, unbatched=True)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rnn.txt")
with open(out, "w") as f:
    f.write("# made by tests/golden/gen_rnn.py with torch " + torch.__version__ + "; do not edit\n")
    f.write("\n".join(LINES) + "\n")
print(f"wrote {out}: {sum(1 for l in LINES if l.startswith('case'))} cases")
