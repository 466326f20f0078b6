#!/usr/bin/env python3
"""Golden values from PyTorch for oar's dynamically quantized LSTM and GRU (issue 16).

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_qrnn.py
It writes tests/golden/qrnn.txt, which tests/test_quant_rnn.c reads (the test does not need
torch). Each case draws an nn.LSTM / nn.GRU (sequence first) with float32-exact parameters and
inputs and records:

    case <kind> input=I hidden=H layers=L steps=T batch=N
    param <name> <tensor>     torch's parameters by name
    input <name> <tensor>     x [, h0 [, c0]]
    fp32 <k> <tensor>         the float module's outputs (y, h_n [, c_n]), evaluated in float64
    torch_q <k> <tensor>      torch.ao.quantization.quantize_dynamic with per_channel_dynamic_qconfig
                              (qint8 weights per row, symmetric), run by torch's quantized LSTM /
                              GRU on this build's engine (onednn; fbgemm computes the same)
    emul8 <k> <tensor>        the same dynamic scheme written with torch's quantization
                              primitives, with activations on the full u8 range (what oar does;
                              see below), evaluated in float64
    end

torch's quantized RNN quantizes its activations to 7 bits (reduce_range: ChooseQuantizationParams
on [0, 127]), a guard for AVX2's saturating u8*s8 pairs; oar's int8 kernels are exact, so it
uses [0, 255] (as its dynamic Linear). The emulation below is checked against torch's own
quantized module at 7 bits before it is written at 8, so it follows torch's structure (the
whole input sequence quantized once per layer, h per step, b_ih in the input product, b_hh in
the recurrent one): the script stops if that check fails.

A tensor is "f64 <ndim> <dims...> | <values...>" in row-major order.
"""
import os

import numpy as np
import torch
import torch.ao.quantization as tq
import torch.nn as nn

torch.manual_seed(16)
torch.backends.quantized.engine = next(e for e in ("fbgemm", "x86", "onednn") if e in torch.backends.quantized.supported_engines)
LINES = []


def fmt(t):
    t = torch.as_tensor(t).detach().to(torch.float64)
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    return f"f64 {t.dim()} {dims} | {vals}"


class Wrap(nn.Module):
    """quantize_dynamic converts children, not the root"""

    def __init__(self, r):
        super().__init__()
        self.r = r

    def forward(self, *a):
        return self.r(*a)


def qparams(t, reduce_range):
    """u8 affine scale and zero point of t's range: torch's MinMaxObserver at 8 bits (what oar's
    choose_qparams computes), aten's ChooseQuantizationParams at 7 bits (torch's quantized RNN)"""
    if not reduce_range:
        ob = tq.MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_affine)
        ob(t.float())
        s, z = ob.calculate_qparams()
        return float(s), int(z)
    lo, hi = min(float(t.min()), 0.0), max(float(t.max()), 0.0)
    qmin, qmax = 0, 127
    s = float(np.float32((np.float64(np.float32(hi)) - np.float32(lo)) / (qmax - qmin)))
    if s == 0:
        s = 0.1
    z_lo, z_hi = qmin - lo / s, qmax - hi / s
    z = z_lo if abs(qmin) - abs(lo / s) < abs(qmax) - abs(hi / s) else z_hi
    return s, int(np.clip(np.rint(z), qmin, qmax))


def qweight(w):
    """per-row symmetric qint8, as per_channel_dynamic_qconfig, dequantized (float64)"""
    ob = tq.PerChannelMinMaxObserver(ch_axis=0, dtype=torch.qint8, qscheme=torch.per_channel_symmetric)
    ob(w.float())
    s, z = ob.calculate_qparams()
    return torch.quantize_per_channel(w.float(), s, z, 0, torch.qint8).dequantize().double()


def qlinear(x, w_deq, b, reduce_range):
    """dynamic linear: x quantized per tensor over its range, products of the int8 values"""
    s, z = qparams(x, reduce_range)
    xq = torch.quantize_per_tensor(x.float(), s, z, torch.quint8).dequantize().double()
    return xq @ w_deq.T + b


def emulate(kind, params, layers, x, h0, c0, reduce_range):
    T, N = x.shape[0], x.shape[1]
    cur, hn, cn = x.double(), [], []
    for l in range(layers):
        w_ih, w_hh = qweight(params[f"weight_ih_l{l}"]), qweight(params[f"weight_hh_l{l}"])
        b_ih, b_hh = params[f"bias_ih_l{l}"].double(), params[f"bias_hh_l{l}"].double()
        gx = qlinear(cur.reshape(T * N, -1), w_ih, b_ih, reduce_range).reshape(T, N, -1)
        h = h0[l].double() if h0 is not None else None
        c = c0[l].double() if c0 is not None else None
        ys = []
        for t in range(T):
            hh = qlinear(h, w_hh, b_hh, reduce_range) if h is not None else b_hh.expand(N, -1)
            if kind == "lstm":
                i, f, g, o = (hh + gx[t]).chunk(4, 1)
                ig = torch.sigmoid(i) * torch.tanh(g)
                c = torch.sigmoid(f) * c + ig if c is not None else ig
                h = torch.sigmoid(o) * torch.tanh(c)
            else:
                ir, iz, inn = gx[t].chunk(3, 1)
                hr, hz, hn_ = hh.chunk(3, 1)
                r, z = torch.sigmoid(hr + ir), torch.sigmoid(hz + iz)
                n = torch.tanh(inn + hn_ * r)
                h = (h - n) * z + n if h is not None else n - n * z
            ys.append(h)
        cur = torch.stack(ys)
        hn.append(h)
        cn.append(c)
    out = [cur, torch.stack(hn)]
    if kind == "lstm":
        out.append(torch.stack(cn))
    return out


def case(kind, I, H, layers, T, N, state):
    cls = nn.LSTM if kind == "lstm" else nn.GRU
    m = cls(I, H, layers)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p * 2)  # U(-2/sqrt(H), 2/sqrt(H)): gates away from their linear region
    m = m.float().eval()
    params = {n: p.detach().clone() for n, p in m.named_parameters()}
    x = torch.randn(T, N, I)
    inputs = [("x", x)]
    h0 = c0 = None
    if state:
        h0 = torch.randn(layers, N, H) * 0.5
        inputs.append(("h0", h0))
        if kind == "lstm":
            c0 = torch.randn(layers, N, H) * 0.5
            inputs.append(("c0", c0))
    LINES.append(f"case {kind} input={I} hidden={H} layers={layers} steps={T} batch={N}")
    for n, p in params.items():
        LINES.append(f"param {n} {fmt(p)}")
    for n, t in inputs:
        LINES.append(f"input {n} {fmt(t)}")
    state_args = () if not state else ((h0, c0),) if kind == "lstm" else (h0,)
    with torch.no_grad():
        m64 = cls(I, H, layers).double().eval()
        m64.load_state_dict({n: p.double() for n, p in params.items()})
        y, st = m64(x.double(), *[tuple(s.double() for s in a) if isinstance(a, tuple) else a.double()
                                  for a in state_args])
        fp32 = [y] + (list(st) if kind == "lstm" else [st])
        q = tq.quantize_dynamic(Wrap(m), {cls: tq.per_channel_dynamic_qconfig}, dtype=torch.qint8)
        assert "quantized.dynamic" in type(q.r).__module__, type(q.r)
        y, st = q(x, *state_args)
        torch_q = [y] + (list(st) if kind == "lstm" else [st])
        emu7 = emulate(kind, params, layers, x, h0, c0, True)
        gap = max(float((a.double() - b).abs().max()) for a, b in zip(torch_q, emu7))
        assert gap < 1e-5, f"{kind}: the emulation at 7 bits is {gap} from torch's quantized module"
        emu8 = emulate(kind, params, layers, x, h0, c0, False)
    for k, t in enumerate(fp32):
        LINES.append(f"fp32 {k} {fmt(t)}")
    for k, t in enumerate(torch_q):
        LINES.append(f"torch_q {k} {fmt(t)}")
    for k, t in enumerate(emu8):
        LINES.append(f"emul8 {k} {fmt(t)}")
    LINES.append("end")
    print(f"{kind} I={I} H={H} L={layers} T={T} N={N} state={state}: emulation(7 bit) vs torch {gap:.2e}, "
          f"torch_q vs fp32 {max(float((a.double() - b).abs().max()) for a, b in zip(torch_q, fp32)):.2e}, "
          f"8-bit vs fp32 {max(float((a - b).abs().max()) for a, b in zip(emu8, fp32)):.2e}")


case("lstm", 8, 6, 2, 5, 3, False)
case("lstm", 16, 12, 1, 7, 4, True)
case("gru", 8, 6, 2, 5, 3, True)
case("gru", 10, 16, 1, 6, 2, False)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "qrnn.txt")
with open(out, "w") as f:
    f.write(f"# made by tests/golden/gen_qrnn.py with torch {torch.__version__} "
            f"(engine {torch.backends.quantized.engine}); do not edit\n")
    f.write("\n".join(LINES) + "\n")
print("wrote", out)
