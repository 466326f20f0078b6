#!/usr/bin/env python3
"""Golden values from PyTorch for oar's quantization ops and observers.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_quant.py
It writes tests/golden/quant.txt, which tests/test_quant_golden.c reads (the test does not need
torch). Format, one case per block:
    case KIND NAME | k=v ...             KIND: quantize, fake_quant, fake_quant_lsq, minmax, moving_average
    <name> DTYPE NDIM DIM... | VALUES    tensors of the case (x, scale, zp, q, deq, y, gout, gx, ...)
Float values are float32-representable and written with 9 significant digits (exact).
The cases plant rounding ties (x / scale = k + 0.5 exactly, scales powers of two) and
saturation at both ends of the range.
"""
import os

import torch

torch.manual_seed(16)
OUT = []


def fmt(name, t):
    t = t.detach()
    if t.dtype in (torch.float32, torch.float64):
        dt, vals = "f32", " ".join("%.9g" % v for v in t.float().flatten().tolist())
    else:
        dt, vals = "i64", " ".join(str(int(v)) for v in t.flatten().tolist())
    shape = " ".join(str(s) for s in t.shape)
    OUT.append("%s %s %d %s | %s" % (name, dt, t.dim(), shape, vals))


def case(kind, name, **attrs):
    OUT.append("case %s %s | %s" % (kind, name, " ".join("%s=%s" % kv for kv in attrs.items())))


def values(n, scale):
    """ties, saturation and random values on a grid of scale"""
    ties = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5, 127.5, -127.5, -128.5, 254.5, 255.5]) * scale
    sat = torch.tensor([1e4, -1e4, 300.0, -300.0]) * scale
    rnd = torch.randn(n) * 60 * scale
    return torch.cat([ties, sat, rnd]).float()


TORCH_DT = {"u8": torch.quint8, "i8": torch.qint8}
RANGE = {"u8": (0, 255), "i8": (-128, 127)}

# quantize / dequantize per tensor
for dt, scale, zp in [("u8", 0.5, 3), ("u8", 0.25, 0), ("i8", 0.5, -2), ("i8", 0.1, 0), ("u8", 0.037, 128)]:
    x = values(20, scale)
    q = torch.quantize_per_tensor(x, scale, zp, TORCH_DT[dt])
    case("quantize", "per_tensor_%s_s%g_z%d" % (dt, scale, zp), axis=0, dtype=dt)
    fmt("x", x); fmt("scale", torch.tensor(scale)); fmt("zp", torch.tensor(zp))
    fmt("q", q.int_repr()); fmt("deq", q.dequantize())

# per channel, along axis 0 and 1
for dt, axis in [("u8", 1), ("i8", 0), ("i8", 1)]:
    x = torch.stack([values(4, 0.25), values(4, 0.5), values(4, 0.125)], dim=axis)
    c = x.shape[axis]
    scales = torch.tensor([0.25, 0.5, 0.125] + [0.1] * (c - 3))[:c].double()
    lo, hi = RANGE[dt]
    zps = torch.randint(lo // 4, hi // 4, (c,))
    q = torch.quantize_per_channel(x, scales, zps, axis, TORCH_DT[dt])
    case("quantize", "per_channel_%s_axis%d" % (dt, axis), axis=axis, dtype=dt)
    fmt("x", x); fmt("scale", scales.float()); fmt("zp", zps)
    fmt("q", q.int_repr()); fmt("deq", q.dequantize())

# fake quantization, with its straight-through gradient
for qmin, qmax, scale, zp in [(0, 255, 0.5, 3), (-128, 127, 0.25, 0), (-8, 7, 0.5, 1), (0, 15, 0.1, 2)]:
    x = values(20, scale).requires_grad_()
    y = torch.fake_quantize_per_tensor_affine(x, torch.tensor([scale]), torch.tensor([zp], dtype=torch.int32),
                                              qmin, qmax)
    g = torch.randn(x.shape)
    y.backward(g)
    case("fake_quant", "per_tensor_%d_%d_s%g" % (qmin, qmax, scale), axis=0, quant_min=qmin, quant_max=qmax)
    fmt("x", x); fmt("scale", torch.tensor(scale)); fmt("zp", torch.tensor(zp))
    fmt("y", y); fmt("gout", g); fmt("gx", x.grad)
for axis in [0, 1]:
    x = torch.stack([values(4, 0.25), values(4, 0.5), values(4, 0.125)], dim=axis).requires_grad_()
    c = x.shape[axis]
    scales = torch.tensor([0.25, 0.5, 0.125] + [0.2] * (c - 3))[:c]
    zps = torch.randint(-20, 20, (c,), dtype=torch.int32)
    y = torch.fake_quantize_per_channel_affine(x, scales, zps, axis, -128, 127)
    g = torch.randn(x.shape)
    y.backward(g)
    case("fake_quant", "per_channel_axis%d" % axis, axis=axis, quant_min=-128, quant_max=127)
    fmt("x", x); fmt("scale", scales); fmt("zp", zps)
    fmt("y", y); fmt("gout", g); fmt("gx", x.grad)

# observers: min-max (affine and symmetric, per tensor and per channel) and moving average
obs = torch.ao.quantization
batches = [torch.randn(4, 6) * (1 + i) + 0.5 * i for i in range(3)]
for dt in ["u8", "i8"]:
    for sym in [False, True]:
        qs = torch.per_tensor_symmetric if sym else torch.per_tensor_affine
        for kind, o in [("minmax", obs.MinMaxObserver(dtype=TORCH_DT[dt], qscheme=qs)),
                        ("moving_average", obs.MovingAverageMinMaxObserver(averaging_constant=0.1,
                                                                           dtype=TORCH_DT[dt], qscheme=qs))]:
            for b in batches:
                o(b)
            s, z = o.calculate_qparams()
            case(kind, "%s_%s" % (dt, "sym" if sym else "affine"), dtype=dt, symmetric=int(sym), per_channel=0,
                 axis=0, momentum=0.9)
            for i, b in enumerate(batches):
                fmt("batch", b)
            fmt("scale", s.reshape(())); fmt("zp", z.reshape(()))
        qs = torch.per_channel_symmetric if sym else torch.per_channel_affine
        o = obs.PerChannelMinMaxObserver(ch_axis=1, dtype=TORCH_DT[dt], qscheme=qs)
        for b in batches:
            o(b)
        s, z = o.calculate_qparams()
        case("minmax", "per_channel_%s_%s" % (dt, "sym" if sym else "affine"), dtype=dt, symmetric=int(sym),
             per_channel=1, axis=1, momentum=0.9)
        for b in batches:
            fmt("batch", b)
        fmt("scale", s); fmt("zp", z)

# learnable-scale fake quantization (LSQ): outputs and the gradients of x, scale and zero point.
# Random values and saturation only: no rounding ties (torch rounds x / scale + zero point in
# its backward, oar round(x / scale) + zero point, which differ only at ties). Zero points are
# not negative: torch 1.13's backward takes the zero point as (int)(zp + 0.5), truncating toward
# 0, so a zero point of -3 is -3 in its forward and -2 in its backward (d/dscale of a clamped
# value 129 instead of 127 - (-3) = 130); oar uses the forward's rounded zero point in both.
for qmin, qmax, scale, zp, gf in [(-8, 7, 0.1, 1.3, 0.5), (0, 255, 0.02, 127.6, 1.0), (-128, 127, 0.05, 3.0, 0.01),
                                  (0, 15, 0.25, 20.0, 1.0)]:
    x = torch.cat([torch.tensor([1e4, -1e4, 300.0, -300.0]) * scale,
                   torch.randn(32) * (qmax - qmin) * 0.4 * scale]).float().requires_grad_()
    s = torch.tensor([scale], requires_grad=True)
    z = torch.tensor([zp], requires_grad=True)
    y = torch._fake_quantize_learnable_per_tensor_affine(x, s, z, qmin, qmax, gf)
    g = torch.randn(x.shape)
    y.backward(g)
    case("fake_quant_lsq", "per_tensor_%d_%d_s%g_z%g" % (qmin, qmax, scale, zp), quant_min=qmin, quant_max=qmax,
         grad_factor=gf)
    fmt("x", x); fmt("scale", s.reshape(())); fmt("zp", z.reshape(()))
    fmt("y", y); fmt("gout", g); fmt("gx", x.grad); fmt("gscale", s.grad.reshape(())); fmt("gzp", z.grad.reshape(()))

# observers with torch's reduce_range (7-bit ranges: quint8 [0, 127], qint8 [-64, 63]): min-max and
# moving average per tensor, min-max per channel; affine u8 and both i8 schemes (torch refuses
# reduce_range for symmetric quint8). Data with outliers so that the ranges differ from 8 bits.
rr_batches = [torch.randn(5, 4) * (2 + i) - 0.7 * i for i in range(3)]
rr_batches[1][0, 0] = 9.0
for dt, sym in [("u8", False), ("i8", False), ("i8", True)]:
    qs = torch.per_tensor_symmetric if sym else torch.per_tensor_affine
    for kind, o in [("minmax", obs.MinMaxObserver(dtype=TORCH_DT[dt], qscheme=qs, reduce_range=True)),
                    ("moving_average", obs.MovingAverageMinMaxObserver(averaging_constant=0.1, dtype=TORCH_DT[dt],
                                                                       qscheme=qs, reduce_range=True))]:
        for b in rr_batches:
            o(b)
        s, z = o.calculate_qparams()
        case(kind, "reduce_range_%s_%s" % (dt, "sym" if sym else "affine"), dtype=dt, symmetric=int(sym),
             per_channel=0, axis=0, momentum=0.9, reduce_range=1)
        for b in rr_batches:
            fmt("batch", b)
        fmt("scale", s.reshape(())); fmt("zp", z.reshape(()))
    qs = torch.per_channel_symmetric if sym else torch.per_channel_affine
    o = obs.PerChannelMinMaxObserver(ch_axis=1, dtype=TORCH_DT[dt], qscheme=qs, reduce_range=True)
    for b in rr_batches:
        o(b)
    s, z = o.calculate_qparams()
    case("minmax", "reduce_range_per_channel_%s_%s" % (dt, "sym" if sym else "affine"), dtype=dt, symmetric=int(sym),
         per_channel=1, axis=1, momentum=0.9, reduce_range=1)
    for b in rr_batches:
        fmt("batch", b)
    fmt("scale", s); fmt("zp", z)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quant.txt")
with open(path, "w") as f:
    f.write("# oar golden values for quantization from torch %s; regenerate with gen_quant.py\n" % torch.__version__)
    f.write("\n".join(OUT) + "\n")
print("wrote", path, len([l for l in OUT if l.startswith("case")]), "cases")
