#!/usr/bin/env python3
"""Golden values for batch_norm with f16/bf16 inputs and f32 parameters (tests/test_amp_bn.c reads
tests/golden/amp_bn.txt).

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_amp_bn.py
bf16 cases: torch 1.13's own CPU kernel, torch.nn.functional.batch_norm on a bfloat16 input with
float32 weight, bias and running statistics (it returns bf16, keeps the running statistics f32, and
its backward gives a bf16 input gradient and f32 weight and bias gradients).
f16 cases: torch 1.13 has no CPU batch_norm for float16 ("not implemented for 'Half'"), so the
script runs the f32 op on the widened input and rounds the output and the input gradient to f16.

Format: "case NAME DTYPE training=0|1 momentum=M eps=E", then tensors "KEY f32 NDIM DIMS | VALUES"
(every value exact: low-precision values are printed as the f32 numbers they are) for
x, weight, bias, running_mean, running_var (before), grad_out, y, running_mean_after,
running_var_after, dx, dweight, dbias; "end" closes a case.
"""
import os

import torch
import torch.nn.functional as F

CASES = [
    ("train_bf16", torch.bfloat16, (4, 3, 5), True),
    ("train_bf16_4d", torch.bfloat16, (3, 4, 3, 3), True),
    ("eval_bf16", torch.bfloat16, (2, 3, 4), False),
    ("train_f16", torch.float16, (4, 3, 5), True),
]
MOMENTUM, EPS = 0.1, 1e-5


def line(key, t):
    t = t.detach().float().contiguous()
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) for v in t.reshape(-1).tolist())
    return f"{key} f32 {t.dim()} {dims} | {vals}"


out = [f"# made by tests/golden/gen_amp_bn.py (torch {torch.__version__}); do not edit"]
g = torch.Generator().manual_seed(15)
for name, dt, shape, training in CASES:
    c = shape[1]
    x = (torch.randn(shape, generator=g) * 1.5 + 0.7).to(dt)
    w = torch.rand(c, generator=g) + 0.5
    b = torch.randn(c, generator=g) * 0.3
    rm = torch.randn(c, generator=g) * 0.2
    rv = torch.rand(c, generator=g) + 0.5
    go = torch.randn(shape, generator=g).to(dt)
    rm2, rv2 = rm.clone(), rv.clone()
    xr, wr, br = x.clone().requires_grad_(), w.clone().requires_grad_(), b.clone().requires_grad_()
    if dt == torch.bfloat16:
        y = F.batch_norm(xr, rm2, rv2, wr, br, training=training, momentum=MOMENTUM, eps=EPS)
        assert y.dtype == torch.bfloat16
        y.backward(go)
        dx = xr.grad
        assert dx.dtype == torch.bfloat16 and wr.grad.dtype == torch.float32
    else:
        xf = xr.float()
        y32 = F.batch_norm(xf, rm2, rv2, wr, br, training=training, momentum=MOMENTUM, eps=EPS)
        y32.backward(go.float())
        y = y32.to(dt)
        dx = xr.grad.to(dt)
    out.append(f"case {name} {str(dt).replace('torch.', '')} training={int(training)} momentum={MOMENTUM} eps={EPS}")
    for key, t in [("x", x), ("weight", w), ("bias", b), ("running_mean", rm), ("running_var", rv),
                   ("grad_out", go), ("y", y), ("running_mean_after", rm2), ("running_var_after", rv2),
                   ("dx", dx), ("dweight", wr.grad), ("dbias", br.grad)]:
        out.append(line(key, t))
    out.append("end")

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "amp_bn.txt")
with open(path, "w") as f:
    f.write("\n".join(out) + "\n")
print(f"wrote {path}")
