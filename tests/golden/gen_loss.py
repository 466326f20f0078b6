#!/usr/bin/env python3
"""Golden values from PyTorch for oar's loss family.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_loss.py
It writes tests/golden/loss.txt, which tests/test_golden_loss.c reads (the test does not
need torch). The format is that of ops.txt (see gen_golden.py), plus two lines per case for
the double backward of input 0:
    direction 0 <tensor>   v, a random tensor of input 0's shape
    grad2 0 <tensor>       d/d input0 of sum(grad_0 * v), where grad_0 is the first-order
                           gradient of sum(output * weight)
Inputs are float32-representable, so the test can also run them in f32.
"""
import os
import sys

import torch

torch.manual_seed(1)
F = torch.nn.functional
REDUCTIONS = {0: "mean", 1: "sum", 2: "none"}
CASES = []


def f32_exact(t):
    return t.float().double()


def randn(*shape, scale=1.0):
    return f32_exact(torch.randn(shape, dtype=torch.float64) * scale)


def uniform(*shape):
    return f32_exact(torch.rand(shape, dtype=torch.float64))


def ints(lo, hi, *shape):
    return torch.randint(lo, hi, shape, dtype=torch.int64)


def ce_attrs(r, ignore=-100, eps=0.0):
    return f"reduction={r} ignore_index={ignore} label_smoothing={eps!r}"


def cross_entropy(r, ignore=-100, eps=0.0):
    return lambda x, t: F.cross_entropy(x, t, reduction=REDUCTIONS[r], ignore_index=ignore, label_smoothing=eps)


def nll_loss(r, ignore=-100, eps=0.0):
    """torch's nll_loss, extended with cross_entropy's label smoothing (oar's nll_loss takes
    the same options): per sample (1 - eps) * nll + eps * mean over classes of -log p."""
    def fn(lp, t):
        if eps == 0.0:
            return F.nll_loss(lp, t, reduction=REDUCTIONS[r], ignore_index=ignore)
        cd = 0 if lp.dim() == 1 else 1
        valid = t != ignore
        picked = lp.gather(cd, torch.where(valid, t, torch.zeros_like(t)).unsqueeze(cd)).squeeze(cd)
        per = (1 - eps) * -picked + eps * -lp.mean(dim=cd)
        per = torch.where(valid, per, torch.zeros_like(per))
        if r == 2:
            return per
        return per.sum() if r == 1 else per.sum() / valid.sum()
    return fn


def case(op, attrs, inputs, fn):
    CASES.append((op, attrs, inputs, fn))


def ce_case(x, t, r, ignore=-100, eps=0.0):
    case("cross_entropy", ce_attrs(r, ignore, eps), [x, t], cross_entropy(r, ignore, eps))


def nll_case(lp, t, r, ignore=-100, eps=0.0):
    case("nll_loss", ce_attrs(r, ignore, eps), [lp, t], nll_loss(r, ignore, eps))


# ---- cross_entropy: reductions, ignore_index hit and not, smoothing 0 and 0.1, shapes
ce_case(randn(4, 5), ints(0, 5, 4), 0)
ce_case(randn(4, 5), ints(0, 5, 4), 1, eps=0.1)
ce_case(randn(4, 5), torch.tensor([1, 0, 1, 4]), 2, ignore=1)
ce_case(randn(6, 3), torch.tensor([0, -100, 2, 1, -100, 2]), 0, eps=0.1)
ce_case(randn(6, 3), torch.tensor([0, -100, 2, 1, -100, 2]), 1, eps=0.2)
ce_case(randn(6, 3), torch.tensor([0, -100, 2, 1, -100, 2]), 2, eps=0.1)
ce_case(randn(3, 19), ints(0, 19, 3), 0, eps=0.1)           # vector body and tail in f32
ce_case(randn(1, 7), ints(0, 7, 1), 0)                      # N = 1
ce_case(randn(2, 3, 4), torch.tensor([[0, 2, 1, 2], [1, 1, 0, 2]]), 0, ignore=2, eps=0.1)
ce_case(randn(2, 3, 2, 2), ints(0, 3, 2, 2, 2), 2)
ce_case(randn(2, 3, 2, 2), ints(0, 3, 2, 2, 2), 1, eps=0.3)
ce_case(randn(5), torch.tensor(3), 0, eps=0.1)              # unbatched [C]
ce_case(randn(5), torch.tensor(3), 2)
ce_case(randn(3, 4, scale=1000.0), ints(0, 4, 3), 0, eps=0.1)  # stability: large logits
ce_case(randn(4, 3), torch.tensor([-100, -100, -100, -100]), 0, eps=0.1)  # nothing counted: NaN
ce_case(randn(4, 3), torch.tensor([-100, -100, -100, -100]), 1)

# ---- nll_loss
nll_case(F.log_softmax(randn(4, 5), 1).detach(), ints(0, 5, 4), 0)
nll_case(randn(4, 5), torch.tensor([1, 0, 1, 4]), 1, ignore=1)
nll_case(randn(6, 3), torch.tensor([0, -100, 2, 1, -100, 2]), 0, eps=0.1)
nll_case(randn(2, 3, 4), ints(0, 3, 2, 4), 2, eps=0.2)
nll_case(randn(2, 3, 4), ints(0, 3, 2, 4), 0, ignore=0)
nll_case(randn(5), torch.tensor(2), 1)

# ---- elementwise losses
for r in (0, 1, 2):
    case("mse_loss", f"reduction={r}", [randn(3, 4), randn(3, 4)],
         lambda x, t, r=r: F.mse_loss(x, t, reduction=REDUCTIONS[r]))
    case("l1_loss", f"reduction={r}", [randn(3, 4), randn(3, 4)],
         lambda x, t, r=r: F.l1_loss(x, t, reduction=REDUCTIONS[r]))
    case("bce_with_logits", f"reduction={r}", [randn(3, 4, scale=3.0), uniform(3, 4)],
         lambda x, t, r=r: F.binary_cross_entropy_with_logits(x, t, reduction=REDUCTIONS[r]))
for r, beta in ((0, 1.0), (1, 0.5), (2, 2.0), (0, 0.0)):
    case("smooth_l1_loss", f"reduction={r} beta={beta!r}", [randn(4, 5), randn(4, 5)],
         lambda x, t, r=r, beta=beta: F.smooth_l1_loss(x, t, reduction=REDUCTIONS[r], beta=beta))
case("mse_loss", "reduction=0", [randn(), randn()], lambda x, t: F.mse_loss(x, t))
# bce: large logits of both signs must not overflow
case("bce_with_logits", "reduction=2",
     [torch.tensor([-120.0, -30.0, -1.5, 0.0, 2.0, 40.0, 130.0], dtype=torch.float64), uniform(7)],
     lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="none"))


def dtype_name(t):
    return {torch.float64: "f64", torch.int64: "i64"}[t.dtype]


def fmt(t):
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) if t.dtype.is_floating_point else str(int(v)) for v in t.reshape(-1).tolist())
    return f"{dtype_name(t)} {t.dim()} {dims} | {vals}"


def check_nll_extension():
    """oar's promise: cross_entropy(x) == nll_loss(log_softmax(x)) under every option."""
    x, t = randn(6, 4), torch.tensor([0, 3, -100, 1, 2, -100])
    for r in (0, 1, 2):
        for eps in (0.0, 0.1):
            a = cross_entropy(r, -100, eps)(x, t)
            b = nll_loss(r, -100, eps)(F.log_softmax(x, 1), t)
            assert torch.allclose(a, b, atol=1e-12), (r, eps)


def main():
    check_nll_extension()
    lines = [f"# oar golden values for the loss family from torch {torch.__version__}; regenerate with gen_loss.py"]
    for op, attrs, inputs, fn in CASES:
        ins = [x.clone().requires_grad_(True) if x.dtype.is_floating_point else x for x in inputs]
        y = fn(*ins)
        w = torch.rand(y.shape, dtype=torch.float64) * 2 - 1
        lines.append(f"case {op} | {attrs}")
        lines += ["input " + fmt(x) for x in inputs]
        lines.append("output 0 " + fmt(y.detach()))
        lines.append("weight 0 " + fmt(w))
        floats = [i for i, x in enumerate(ins) if x.dtype.is_floating_point]
        grads = torch.autograd.grad((y * w).sum(), [ins[i] for i in floats], create_graph=True, allow_unused=True)
        for i, g in zip(floats, grads):
            lines.append(f"grad {i} " + fmt(torch.zeros_like(inputs[i]) + (g.detach() if g is not None else 0.0)))
        g0 = grads[0]
        v = torch.rand(ins[0].shape, dtype=torch.float64) * 2 - 1
        g2 = None
        if g0 is not None and g0.requires_grad:
            g2 = torch.autograd.grad((g0 * v).sum(), ins[0], allow_unused=True)[0]
        lines.append("direction 0 " + fmt(v))
        # adding zeros materializes torch's lazy zero tensors
        lines.append("grad2 0 " + fmt(torch.zeros_like(v) + (g2.detach() if g2 is not None else 0.0)))
        lines.append("end")
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loss.txt")
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {len(CASES)} cases to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
