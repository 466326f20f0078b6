"""Printing like torch: tensor([[1.0000, 2.5000]], dtype=oar.float64, requires_grad=True)."""
import math

from . import _dtype as D

_THRESHOLD, _EDGE = 1000, 3


def _float_formatter(values):
    finite = [abs(v) for v in values if math.isfinite(v)]
    if not finite:
        return lambda v: _special(v) or ""
    ints = all(float(v).is_integer() for v in values if math.isfinite(v))
    hi, lo = max(finite), min([v for v in finite if v != 0] or [0])
    if ints and hi < 1e8:
        return lambda v: _special(v) or f"{v:.0f}."
    if hi > 1e8 or (lo and lo < 1e-4) or (lo and hi / lo > 1000):
        return lambda v: _special(v) or f"{v:.4e}"
    return lambda v: _special(v) or f"{v:.4f}"


def _special(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def format_tensor(t, prefix="tensor("):
    shape = list(t.shape)
    n = t.numel()
    summarize = n > _THRESHOLD
    flat = (t.detach() if t._device == 0 else t.detach().cpu())._flat_list() if n else []
    dt = D.BY_CODE[t._dtype]
    if dt is D.bool_:
        fmt = lambda v: "True" if v else "False"
    elif dt.is_floating_point:
        fmt = _float_formatter(flat)
    else:
        fmt = str
    strs = [fmt(v) for v in flat]
    width = max((len(s) for s in strs), default=0)
    strs = [s.rjust(width) for s in strs]
    indent = len(prefix)

    def block(off, dims, depth):
        if not dims:
            return strs[off]
        step = 1
        for d in dims[1:]:
            step *= d
        idx = list(range(dims[0]))
        if summarize and dims[0] > 2 * _EDGE:
            idx = idx[:_EDGE] + [None] + idx[-_EDGE:]
        parts = ["..." if i is None else block(off + i * step, dims[1:], depth + 1) for i in idx]
        if len(dims) == 1:
            return "[" + ", ".join(parts) + "]"
        sep = "," + "\n" * (len(dims) - 1) + " " * (indent + depth + 1)
        return "[" + sep.join(parts) + "]"

    body = block(0, shape, 0) if shape else (strs[0] if strs else "")
    if n == 0:
        body = "[]"
    extras = []
    if n == 0 and len(shape) != 1:
        extras.append(f"size=({', '.join(str(s) for s in shape)}{',' if len(shape) == 1 else ''})")
    if t._device != 0:
        extras.append("device='cuda:0'")
    if dt not in (D.float32, D.int64, D.bool_):
        extras.append(f"dtype=oar.{dt.name}")
    if t.requires_grad:
        extras.append("grad_fn=<OarBackward>" if not t.is_leaf else "requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"
