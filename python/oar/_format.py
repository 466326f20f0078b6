"""Printing like torch: tensor([[1.0000, 2.5000]], dtype=oar.float64, requires_grad=True), with
torch's print options (set_printoptions: precision, threshold, edgeitems, linewidth, sci_mode,
profile): floats in fixed or scientific notation chosen from the shown values' range, whole
values as "3.", rows wrapped at linewidth, large tensors summarized with "..."."""
import math

from . import _dtype as D

_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
             "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
             "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}


class _PrintOptions:
    precision, threshold, edgeitems, linewidth = 4, 1000, 3, 80
    sci_mode = None


OPTIONS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """torch.set_printoptions: a profile ("default", "short", "full") first, then the options given;
    sci_mode None lets the values choose (it is set on every call, as torch's)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: expected profile 'default', 'short' or 'full', got {profile!r}")
        for k, v in _PROFILES[profile].items():
            setattr(OPTIONS, k, v)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            setattr(OPTIONS, k, v)
    OPTIONS.sci_mode = sci_mode


def get_printoptions():
    return dict(precision=OPTIONS.precision, threshold=OPTIONS.threshold, edgeitems=OPTIONS.edgeitems,
                linewidth=OPTIONS.linewidth, sci_mode=OPTIONS.sci_mode)


def _float_formatter(values):
    """torch's choice for the shown values: whole numbers as "3." (unless the range needs exponents),
    others with `precision` digits, scientific where the nonzero finite values span more than 1000x,
    exceed 1e8 or (not whole) go below 1e-4. The column width comes from the nonzero finite values
    in the chosen notation (so inf and nan do not widen it); a sci_mode option changes the notation
    but not that width, as in torch. Returns (format, width)."""
    p = OPTIONS.precision
    nonzero = [v for v in values if math.isfinite(v) and v != 0]
    whole, sci, width = True, False, 1
    if nonzero:
        hi, lo = max(abs(v) for v in nonzero), min(abs(v) for v in nonzero)
        whole = all(float(v).is_integer() for v in nonzero)
        sci = hi / lo > 1000 or hi > 1e8 or (not whole and lo < 1e-4)
        shown = (lambda v: f"{v:.{p}e}") if sci else (lambda v: f"{v:.0f}.") if whole else (lambda v: f"{v:.{p}f}")
        width = max(len(shown(v)) for v in nonzero)
        if OPTIONS.sci_mode is not None:   # (without a nonzero finite value torch keeps "0." even then)
            sci = OPTIONS.sci_mode

    def fmt(v):
        if sci:
            s = f"{v:{width}.{p}e}"
        elif whole:
            s = f"{v:.0f}" + ("." if math.isfinite(v) else "")
        else:
            s = f"{v:.{p}f}"
        return s.rjust(width)

    return fmt, width


def _shown_flat(t, shape, summarize, edge):
    """The values printed, in order: every element, or the first and last `edge` of each summarized dim."""
    flat = (t.detach() if t._device == 0 else t.detach().cpu())._flat_list()
    if not summarize:
        return flat
    out = []

    def walk(off, dims):
        if not dims:
            out.append(flat[off])
            return
        step = math.prod(dims[1:])
        idx = range(dims[0]) if dims[0] <= 2 * edge else [*range(edge), *range(dims[0] - edge, dims[0])]
        for i in idx:
            walk(off + i * step, dims[1:])

    walk(0, shape)
    return out


def format_tensor(t, prefix="tensor("):
    shape = list(t.shape)
    n = t.numel()
    edge = OPTIONS.edgeitems
    summarize = n > OPTIONS.threshold
    shown = _shown_flat(t, shape, summarize, edge) if n else []
    dt = D.BY_CODE[t._dtype]
    if dt.is_floating_point:
        fmt, width = _float_formatter(shown)
        strs = [fmt(v) for v in shown]
    else:
        strs = [("True" if v else "False") if dt is D.bool_ else str(v) for v in shown]
        width = max((len(s) for s in strs), default=1)
        strs = [s.rjust(width) for s in strs]
    strs = iter(strs)
    indent = len(prefix)

    def row(dims, depth):
        """A last-dim row: its items wrapped at linewidth ("..." counts as an item)."""
        items = []
        if summarize and dims[0] > 2 * edge:
            items = [next(strs) for _ in range(edge)] + [" ..."] + [next(strs) for _ in range(edge)]
        else:
            items = [next(strs) for _ in range(dims[0])]
        per_line = max(1, (OPTIONS.linewidth - indent - depth) // (width + 2))
        lines = [", ".join(items[k:k + per_line]) for k in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + depth + 1)).join(lines) + "]"

    def block(dims, depth):
        if len(dims) == 1:
            return row(dims, depth)
        idx = list(range(dims[0]))
        if summarize and dims[0] > 2 * edge:
            idx = idx[:edge] + [None] + idx[-edge:]
        parts = ["..." if i is None else block(dims[1:], depth + 1) for i in idx]
        sep = "," + "\n" * (len(dims) - 1) + " " * (indent + depth + 1)
        return "[" + sep.join(parts) + "]"

    if n == 0:
        body = "[]"
    else:
        body = block(shape, 0) if shape else next(strs)
    extras = []   # torch's suffixes: each on the last line if it fits in linewidth, else on a new line
    if n == 0 and len(shape) != 1:
        extras.append(f"size=({', '.join(str(s) for s in shape)}{',' if len(shape) == 1 else ''})")
    if t._device != 0:
        extras.append("device='cuda:0'")
    if dt not in (D.float32, D.int64, D.bool_):
        extras.append(f"dtype=oar.{dt.name}")
    if t.requires_grad:
        extras.append("grad_fn=<OarBackward>" if not t.is_leaf else "requires_grad=True")
    out = prefix + body
    line = len(out) - out.rfind("\n") + 1
    for e in extras:
        if line + len(e) + 2 > OPTIONS.linewidth:
            out += ",\n" + " " * indent + e
            line = indent + len(e)
        else:
            out += ", " + e
            line += len(e) + 2
    return out + ")"
