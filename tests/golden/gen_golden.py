#!/usr/bin/env python3
"""Generates golden values from PyTorch for a representative subset of oar's ops.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_golden.py
It writes tests/golden/ops.txt, which test_golden.c reads (the test does not need torch).
Each case: inputs (float64 unless stated), the op's attributes in oar's text form, PyTorch's
outputs, and the gradients of sum_k(sum(out_k * w_k)) for fixed random weights w_k.
"""
import math
import os
import sys

import torch

torch.manual_seed(0)
F = torch.nn.functional
CASES = []


def case(op, attrs, inputs, fn, grad=True, nograd=()):
    """inputs: list of tensors (or None); fn(*inputs) -> tensor or tuple of tensors.
    nograd: indices of float inputs that take no gradient (e.g. running statistics)."""
    CASES.append((op, attrs, inputs, fn, grad, set(nograd)))


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def pos(*shape):
    return torch.rand(*shape, dtype=torch.float64) * 1.5 + 0.5


def distinct(*shape):
    n = math.prod(shape)
    return (torch.randperm(n).to(torch.float64) - n / 2 + 0.5).reshape(shape) * 0.25


def ints(lo, hi, *shape):
    return torch.randint(lo, hi, shape, dtype=torch.int64)


# ---- elementwise binary (broadcasting)
case("add", "", [randn(2, 3, 4), randn(4)], torch.add)
case("sub", "", [randn(3, 1), randn(1, 5)], torch.sub)
case("mul", "", [randn(2, 3), randn(2, 1)], torch.mul)
case("div", "", [randn(3, 4), pos(4)], torch.div)
case("pow", "", [pos(3, 4), randn(3, 4)], torch.pow)
case("maximum", "", [distinct(3, 4), distinct(3, 4)], torch.maximum)
case("minimum", "", [distinct(2, 3), distinct(3)], torch.minimum)
case("lt", "", [randn(3, 4), randn(4)], torch.lt, grad=False)
case("where", "", [torch.rand(3, 4) > 0.5, randn(3, 4), randn(4)], torch.where)
# ---- unary
case("exp", "", [randn(3, 4)], torch.exp)
case("log", "", [pos(3, 4)], torch.log)
case("relu", "", [distinct(3, 4)], torch.relu)
case("neg", "", [randn(5)], torch.neg)
# ---- reductions
case("sum", "dims=0,2 keepdim=1", [randn(2, 3, 4)], lambda x: x.sum(dim=(0, 2), keepdim=True))
case("sum", "dims= keepdim=0", [randn(3, 4)], lambda x: x.sum())
# ---- views
case("permute", "dims=2,0,1", [randn(2, 3, 4)], lambda x: x.permute(2, 0, 1))
case("slice", "dim=1 start=1 end=6 step=2", [randn(3, 6)], lambda x: x[:, 1:6:2])
case("expand", "shape=2,3,4", [randn(3, 1)], lambda x: x.expand(2, 3, 4))

# Families added as they land (attribute names follow oar's schemas).
extra = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cases_more.py")
if os.path.exists(extra):
    exec(open(extra).read())


def dtype_name(t):
    return {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.bool: "bool"}[t.dtype]


def fmt(t):
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) if t.dtype.is_floating_point else str(int(v)) for v in t.reshape(-1).tolist())
    return f"{dtype_name(t)} {t.dim()} {dims} | {vals}"


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.txt")
    lines = [f"# oar golden values from torch {torch.__version__}; regenerate with gen_golden.py"]
    for op, attrs, inputs, fn, grad, nograd in CASES:
        wants = [x is not None and x.dtype.is_floating_point and grad and i not in nograd
                 for i, x in enumerate(inputs)]
        ins = [None if x is None else x.clone().requires_grad_(w) for x, w in zip(inputs, wants)]
        outs = fn(*ins)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        lines.append(f"case {op} | {attrs}")
        for x in inputs:
            lines.append("input none" if x is None else "input " + fmt(x))
        loss = None
        for k, y in enumerate(outs):
            lines.append(f"output {k} " + fmt(y.detach()))
            if grad and y.dtype.is_floating_point:
                w = torch.rand(y.shape, dtype=torch.float64) * 2 - 1
                lines.append(f"weight {k} " + fmt(w))
                term = (y * w).sum()
                loss = term if loss is None else loss + term
        if grad and loss is not None:
            floats = [x for x, w in zip(ins, wants) if w]
            gs = torch.autograd.grad(loss, floats, allow_unused=True)
            gi = 0
            for i, x in enumerate(ins):
                if wants[i]:
                    g = gs[gi] if gs[gi] is not None else torch.zeros_like(x)
                    lines.append(f"grad {i} " + fmt(g))
                    gi += 1
        lines.append("end")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
