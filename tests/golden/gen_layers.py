#!/usr/bin/env python3
"""Golden values from PyTorch for oar's built-in layers (section 8 of oar.h).

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/gen_layers.py
It writes tests/golden/layers.txt, which tests/test_golden_layers.c reads (the test does not
need torch). Each block is one layer in one mode:

    case <spec>              the layer, as "<kind> key=value ..." (the C test builds it from this)
    mode train|eval
    repr <text>              torch's repr in oar's spelling (see oar_repr), newlines as \\n
    param <path> <tensor>    every parameter, in torch's order (oar must use the same names)
    buffer <path> <tensor>   every buffer, likewise
    input <tensor>
    output <tensor>          the forward output
    weight <tensor>          w: the gradients are those of sum(output * w)
    gradin <tensor>          ... with respect to the input (float inputs only)
    grad <path> <tensor>     ... with respect to each parameter
    after <path> <tensor>    each buffer after the step (batch norm's running statistics)
    end

Tensors are written as in ops.txt: "f32 2 3 4 | v v v ...", every value exactly (f32 values
printed as the doubles they are). Parameters are randomized (normalization weights too, so
that gradients are not trivially ones) and the C test loads them, so oar's own initialization
plays no part here.
"""
import copy
import os
import sys

import torch

torch.manual_seed(2)
nn = torch.nn
CASES = []  # (spec, module, input, modes)

# oar_activation's numbering (include/oar.h)
ACT = {"relu": 0, "leaky_relu": 1, "elu": 2, "gelu": 3, "gelu_tanh": 4, "silu": 5, "tanh": 6, "sigmoid": 7,
       "softplus": 8, "identity": 9}


def randn(*shape):
    return torch.randn(*shape, dtype=torch.float32)


def case(spec, module, x, modes=("train",)):
    CASES.append((spec, module, x, modes))


def pair(v):
    return v if isinstance(v, tuple) else (v, v)


def csv(v):
    return ",".join(str(int(i)) for i in v)


# ---- constructors: the torch module and the spec the C test parses (defaults as in oar)
def linear(i, o, bias=True):
    return f"linear in={i} out={o} bias={int(bias)}", nn.Linear(i, o, bias=bias)


def conv(dims, i, o, k, stride=1, padding=0, dilation=1, groups=1, bias=True, output_padding=0, transposed=False):
    kind = "conv_transpose2d" if transposed else f"conv{dims}d"
    spec = (f"{kind} in={i} out={o} k={k} stride={stride} padding={padding} dilation={dilation} groups={groups} "
            f"bias={int(bias)} output_padding={output_padding}")
    if transposed:
        mod = nn.ConvTranspose2d(i, o, k, stride, padding, output_padding, groups, bias, dilation)
    else:
        mod = (nn.Conv1d if dims == 1 else nn.Conv2d)(i, o, k, stride, padding, dilation, groups, bias)
    return spec, mod


def batch_norm(dims, c, eps=1e-5, momentum=0.1, affine=True, track=True):
    spec = (f"batch_norm{dims}d features={c} eps={eps!r} momentum={-1.0 if momentum is None else momentum!r} "
            f"affine={int(affine)} track={int(track)}")
    mod = (nn.BatchNorm1d if dims == 1 else nn.BatchNorm2d)(c, eps, momentum, affine, track)
    return spec, mod


def pool(kind, k, stride=None, padding=0, dilation=1, ceil_mode=False, count_include_pad=True):
    k, padding, dilation = pair(k), pair(padding), pair(dilation)
    s = pair(stride) if stride is not None else k
    spec = (f"{kind} k={csv(k)} stride={csv(s)} padding={csv(padding)} dilation={csv(dilation)} "
            f"ceil={int(ceil_mode)} count_include_pad={int(count_include_pad)}")
    sq = lambda t: t[0] if t[0] == t[1] else t  # torch prints what it was given: ints where square
    if kind == "max_pool2d":
        mod = nn.MaxPool2d(sq(k), sq(s), sq(padding), sq(dilation), ceil_mode=ceil_mode)
    else:
        mod = nn.AvgPool2d(sq(k), sq(s), sq(padding), ceil_mode=ceil_mode, count_include_pad=count_include_pad)
    return spec, mod


def activation(name, param=0.0):
    """param 0 is oar's "torch default"; torch gets the resolved value."""
    spec = f"activation kind={ACT[name]} param={param!r}"
    mod = {
        "relu": lambda: nn.ReLU(),
        "leaky_relu": lambda: nn.LeakyReLU(param or 0.01),
        "elu": lambda: nn.ELU(param or 1.0),
        "gelu": lambda: nn.GELU(),
        "gelu_tanh": lambda: nn.GELU(approximate="tanh"),
        "silu": lambda: nn.SiLU(),
        "tanh": lambda: nn.Tanh(),
        "sigmoid": lambda: nn.Sigmoid(),
        "softplus": lambda: nn.Softplus(beta=float(param or 1.0)),
        "identity": lambda: nn.Identity(),
    }[name]()
    return spec, mod


def oar_repr(mod):
    """torch's repr in oar's spelling: C booleans; no Dropout inplace flag (oar has none); and
    AvgPool2d shows ceil_mode / count_include_pad when not torch's defaults, as oar does."""
    text = repr(mod).replace(", inplace=False", "")
    for m in mod.modules():
        if isinstance(m, nn.AvgPool2d):
            extra = (", ceil_mode=true" if m.ceil_mode else "") + ("" if m.count_include_pad else
                                                                    ", count_include_pad=false")
            text = text.replace(repr(m), repr(m)[:-1] + extra + ")")
    return text.replace("True", "true").replace("False", "false")


# ---- the cases
case(*linear(5, 3), randn(4, 5))
case(*linear(4, 6, bias=False), randn(2, 3, 4))
case(*conv(1, 3, 4, 3, stride=2, padding=1), randn(2, 3, 9))
case(*conv(1, 4, 2, 2, dilation=2, groups=2, bias=False), randn(4, 7))  # unbatched
case(*conv(2, 3, 4, 3, padding=1), randn(2, 3, 5, 6))
case(*conv(2, 4, 6, 3, stride=2, padding=2, dilation=2, groups=2), randn(2, 4, 7, 8))
case(*conv(2, 2, 3, 2, bias=False), randn(2, 5, 4))  # unbatched
case(*conv(2, 4, 2, 3, stride=2, padding=1, output_padding=1, transposed=True), randn(2, 4, 3, 4))
case(*conv(2, 4, 6, 2, stride=2, dilation=2, groups=2, output_padding=1, bias=False, transposed=True),
     randn(1, 4, 3, 3))
case(*batch_norm(1, 3), randn(5, 3) * 2 + 1, modes=("train", "eval"))
case(*batch_norm(1, 3, momentum=None), randn(4, 3, 5), modes=("train", "eval"))
case(*batch_norm(2, 4, eps=1e-3, momentum=0.3), randn(3, 4, 3, 2), modes=("train", "eval"))
case(*batch_norm(2, 2, affine=False), randn(2, 2, 3, 3), modes=("train", "eval"))
case(*batch_norm(2, 3, track=False), randn(2, 3, 2, 2), modes=("train", "eval"))
case("layer_norm shape=6 eps=1e-05 affine=1", nn.LayerNorm(6), randn(3, 6))
case("layer_norm shape=2,3 eps=0.001 affine=1", nn.LayerNorm((2, 3), eps=1e-3), randn(2, 4, 2, 3))
case("layer_norm shape=4 eps=1e-05 affine=0", nn.LayerNorm(4, elementwise_affine=False), randn(5, 4))
case("group_norm groups=2 channels=4 eps=1e-05 affine=1", nn.GroupNorm(2, 4), randn(3, 4, 3, 2))
case("group_norm groups=3 channels=3 eps=0.001 affine=0", nn.GroupNorm(3, 3, eps=1e-3, affine=False), randn(2, 3, 5))
case("dropout p=0.5", nn.Dropout(0.5), randn(3, 4), modes=("eval",))
case("dropout p=0.0", nn.Dropout(0.0), randn(3, 4), modes=("train",))
case("dropout p=1.0", nn.Dropout(1.0), randn(3, 4), modes=("train",))
case("embedding num=7 dim=3", nn.Embedding(7, 3), torch.tensor([[0, 3, 3], [6, 1, 0]], dtype=torch.int64))
case(*pool("max_pool2d", 2), randn(2, 3, 6, 5))
case(*pool("max_pool2d", (3, 2), stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True), randn(2, 7, 6))
case(*pool("avg_pool2d", 2), randn(2, 2, 4, 5))
case(*pool("avg_pool2d", 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), randn(1, 2, 6, 7))
case(*pool("avg_pool2d", (2, 3), padding=(1, 1), count_include_pad=True), randn(2, 5, 5))
case("adaptive_avg_pool2d h=3 w=2", nn.AdaptiveAvgPool2d((3, 2)), randn(2, 2, 7, 5))
case("adaptive_avg_pool2d h=2 w=2", nn.AdaptiveAvgPool2d(2), randn(1, 4, 4))
case("flatten start=1 end=-1", nn.Flatten(), randn(2, 3, 2, 2))
case("flatten start=1 end=2", nn.Flatten(1, 2), randn(2, 3, 2, 2))
for name, param in [("relu", 0.0), ("leaky_relu", 0.0), ("leaky_relu", 0.2), ("elu", 0.0), ("elu", 0.5),
                    ("gelu", 0.0), ("gelu_tanh", 0.0), ("silu", 0.0), ("tanh", 0.0), ("sigmoid", 0.0),
                    ("softplus", 0.0), ("softplus", 2.0), ("identity", 0.0)]:
    x = randn(3, 5) * 3
    if name == "softplus":
        x[0, 0] = 12.0  # beyond the threshold (beta * x > 20) when beta = 2
    case(*activation(name, param), x)

# conv-bn-relu-pool-flatten-linear, as the C test builds it for "cnn"
cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                    nn.Linear(4 * 3 * 3, 5))
case("cnn", cnn, randn(2, 3, 6, 6), modes=("train", "eval"))


def randomize_state(mod):
    """Normalization layers start at ones/zeros; random values make every gradient count.
    Running statistics and counters get values of their kind, so eval and momentum=None differ
    from the defaults too."""
    with torch.no_grad():
        for m in mod.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1 + 0.5 * torch.randn_like(m.weight))
                    m.bias.copy_(0.5 * torch.randn_like(m.bias))
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)) and m.track_running_stats:
                m.running_mean.copy_(torch.randn_like(m.running_mean))
                m.running_var.copy_(0.5 + torch.rand_like(m.running_var))
                m.num_batches_tracked.fill_(3)


def dtype_name(t):
    return {torch.float64: "f64", torch.float32: "f32", torch.int64: "i64", torch.bool: "bool"}[t.dtype]


def fmt(t):
    t = t.detach()
    dims = " ".join(str(d) for d in t.shape)
    vals = " ".join(repr(float(v)) if t.dtype.is_floating_point else str(int(v)) for v in t.reshape(-1).tolist())
    return f"{dtype_name(t)} {t.dim()} {dims} | {vals}"


def block(spec, base, x, mode):
    mod = copy.deepcopy(base)
    mod.train(mode == "train")
    lines = [f"case {spec}", f"mode {mode}", "repr " + oar_repr(mod).replace("\n", "\\n")]
    lines += [f"param {n} {fmt(p)}" for n, p in mod.named_parameters()]
    lines += [f"buffer {n} {fmt(b)}" for n, b in mod.named_buffers()]
    lines.append("input " + fmt(x))
    xin = x.clone().requires_grad_(x.dtype.is_floating_point)
    y = mod(xin)
    w = torch.rand(y.shape, dtype=y.dtype) * 2 - 1
    lines += ["output " + fmt(y), "weight " + fmt(w)]
    names = [n for n, _ in mod.named_parameters()]
    wrt = ([xin] if xin.requires_grad else []) + [p for _, p in mod.named_parameters()]
    grads = torch.autograd.grad((y * w).sum(), wrt, allow_unused=True)
    grads = [torch.zeros_like(t) if g is None else g for g, t in zip(grads, wrt)]
    if xin.requires_grad:
        lines.append("gradin " + fmt(grads.pop(0)))
    lines += [f"grad {n} {fmt(g)}" for n, g in zip(names, grads)]
    lines += [f"after {n} {fmt(b)}" for n, b in mod.named_buffers()]
    lines.append("end")
    return lines


def main():
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.txt")
    lines = [f"# oar golden values for the built-in layers from torch {torch.__version__}; regenerate with "
             "gen_layers.py"]
    n = 0
    for spec, mod, x, modes in CASES:
        randomize_state(mod)
        for mode in modes:
            lines += block(spec, mod, x, mode)
            n += 1
    with open(out_path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {n} blocks to {out_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
