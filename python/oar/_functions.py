"""Functions with torch's names, signatures and semantics, over the op table.

Elementwise and reduction families are generated from the table (one wrapper per family,
instantiated for every op of it); the rest translate torch's arguments into the op's
attributes. Python numbers mix with tensors as in torch (type promotion, scalar forms)."""
import builtins
import collections
import math
import numbers

from . import _C
from . import _dtype as D
from ._ops import ID, SCHEMA, TABLE, call
from ._ops import default as _d  # defaults from the op table (src/ops)
from . import _complex  # noqa: F401  (registers the complex kind)
from . import _qtensor  # noqa: F401  (registers the quantized kind)
from ._kinds import CLASSES as _OTHER, other as _other

_call = _C.call

TensorBase = _C.TensorBase
_SCALAR = {n: i for i, n in enumerate(_C.SCALAR_OPS.split())}
_scalar_op = _C.scalar_op
_is_t = lambda x: isinstance(x, TensorBase)


def _dt(t):
    return D.BY_CODE[t._dtype]


def _check_tensor(x, fn, what="input"):
    if not _is_t(x):
        raise TypeError(f"{fn}(): argument '{what}' must be Tensor, not {type(x).__name__}")
    return x


def _cast(t, d):
    return t if t._dtype == d.code else _C.cast(t, d.code)


def _scalar_tensor(v, d):
    return _C.create("full", (), d.code, float(v))


def _scalar_dtype(s):
    if isinstance(s, builtins.bool):
        return D.bool_
    if isinstance(s, numbers.Integral):
        return D.int64
    if isinstance(s, numbers.Real):
        return D.float32
    raise TypeError(f"expected a Tensor or a number, got {type(s).__name__}")


def _tensor_and_scalar_dtype(t, s):
    """torch's rule: a number changes the result type only across categories (int -> float)."""
    td, sd = _dt(t), _scalar_dtype(s)
    if sd.is_floating_point and not td.is_floating_point:
        return D.float32
    if sd is D.int64 and td is D.bool_:
        return D.int64
    return td


def _promote_pair(a, b):
    da, db = _dt(a), _dt(b)
    if da is db:
        return a, b
    # a 0-d tensor does not widen within its category (torch's rule for dimensionless operands)
    cat = lambda d: 2 if d.is_floating_point else 0 if d is D.bool_ else 1
    if a.ndim == 0 and b.ndim > 0 and cat(da) <= cat(db):
        return _cast(a, db), b
    if b.ndim == 0 and a.ndim > 0 and cat(db) <= cat(da):
        return a, _cast(b, da)
    r = D.promote(da, db)
    return _cast(a, r), _cast(b, r)


# ---------------------------------------------------------------- elementwise binary
_REVERSED = {"sub": "rsub", "div": "rdiv", "pow": "rpow"}
_COMMUTES = {"add", "mul", "maximum", "minimum", "eq", "ne", "bitwise_and", "bitwise_or", "bitwise_xor", "gcd", "lcm"}
_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
# ops whose integer inputs promote to the default float type (torch.special's binary functions too)
_TRUE_DIV = {"div", "atan2", "zeta", "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
             "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
             "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
             "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p"}


def _binary(name):
    op_id = ID[name]

    def f(input, other, *, out=None):
        if out is not None:
            raise TypeError(f"{name}(): out= is not offered; assign the result")
        if _is_t(input) and _is_t(other):
            a, b = _promote_pair(input, other)
            if name in _TRUE_DIV and not _dt(a).is_floating_point:
                a, b = _cast(a, D.float32), _cast(b, D.float32)
            return _call(op_id, (a, b))
        if _is_t(input):
            t, s, op = input, other, name
        elif _is_t(other):
            t, s = other, input
            op = name if name in _COMMUTES else _FLIPPED.get(name) or _REVERSED.get(name)
            if op is None:
                return f(_scalar_tensor(s, _tensor_and_scalar_dtype(other, s)), other)
        else:
            raise TypeError(f"{name}(): expected at least one Tensor, got {type(input).__name__} and "
                            f"{type(other).__name__}")
        if not isinstance(s, numbers.Number):
            raise TypeError(f"{name}(): argument 'other' must be Tensor or Number, not {type(s).__name__}")
        rd = _tensor_and_scalar_dtype(t, s)
        if name in _TRUE_DIV and not rd.is_floating_point:
            rd = D.float32
        t = _cast(t, rd)
        k = _SCALAR.get(op)
        if k is None:
            return call(name, (t, _scalar_tensor(s, rd)) if t is input or name in _COMMUTES else
                        (_scalar_tensor(s, rd), t))
        return _scalar_op(k, t, s)

    f.__name__ = name
    f.__doc__ = f"torch.{name}: elementwise with broadcasting and type promotion (generated from the op table)."
    return f


_BINARY = [r["name"] for r in TABLE if r["n_inputs"] == 2 and not r["attrs"] and r["flags"] & 1]
G = {n: _binary(n) for n in _BINARY}
add_ = G["add"]


def add(input, other, *, alpha=1, out=None):
    if alpha != 1:
        other = other * alpha if isinstance(other, numbers.Number) else mul(other, alpha)
    return G["add"](input, other, out=out)


def sub(input, other, *, alpha=1, out=None):
    if alpha != 1:
        other = other * alpha if isinstance(other, numbers.Number) else mul(other, alpha)
    return G["sub"](input, other, out=out)


mul, div, pow, maximum, minimum = G["mul"], G["div"], G["pow"], G["maximum"], G["minimum"]
eq, ne, lt, le, gt, ge = G["eq"], G["ne"], G["lt"], G["le"], G["gt"], G["ge"]
logical_and, logical_or = G["logical_and"], G["logical_or"]
bitwise_and, bitwise_or, bitwise_xor, gcd, lcm = G["bitwise_and"], G["bitwise_or"], G["bitwise_xor"], G["gcd"], G["lcm"]
bitwise_left_shift, bitwise_right_shift = G["bitwise_left_shift"], G["bitwise_right_shift"]
greater, greater_equal, less, less_equal, not_equal = gt, ge, lt, le, ne


_true_div = G["div"]


def _quotient_dtype(input, other):
    """The dtype of a rounded division: the promoted type (a number widens only across kinds)."""
    if _is_t(input) and _is_t(other):
        return _dt(_promote_pair(input, other)[0])
    t, s = (input, other) if _is_t(input) else (other, input)
    if not isinstance(s, numbers.Number):
        raise TypeError(f"div(): argument 'other' must be Tensor or Number, not {type(s).__name__}")
    return _tensor_and_scalar_dtype(t, s)


def _rounded_div(input, other, mode):
    """floor / trunc division: floats round the true quotient; integers divide exactly in their
    own type (the div_floor / div_trunc ops, uint64 as unsigned)."""
    rd = _quotient_dtype(input, other)
    if rd.is_floating_point:
        q = _true_div(input, other)
        return floor(q) if mode == "floor" else where(lt(q, 0), ceil(q), floor(q))
    if (_is_t(other) and bool(eq(other, 0).any())) or (not _is_t(other) and other == 0):
        raise RuntimeError("ZeroDivisionError: integer division by zero")
    a, b = (_cast(v, rd) if _is_t(v) else _scalar_tensor(v, rd) for v in (input, other))
    return call("div_floor" if mode == "floor" else "div_trunc", (a, b))


def div(input, other, *, rounding_mode=None, out=None):
    """torch.div: true division, or rounded toward -inf ("floor") or zero ("trunc")."""
    if rounding_mode is None:
        return _true_div(input, other, out=out)
    if rounding_mode not in ("floor", "trunc"):
        raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
                         f"'{rounding_mode}'")
    if out is not None:
        raise TypeError("div(): out= is not offered; assign the result")
    return _rounded_div(input, other, rounding_mode)


def floor_divide(input, other):
    return _rounded_div(input, other, "floor")


def remainder(input, other):
    """Python's modulo: the sign of the divisor (a - floor(a / b) * b)."""
    return sub(input, mul(floor_divide(input, other), other))


def fmod(input, other):
    """C's fmod: the sign of the dividend (a - trunc(a / b) * b)."""
    return sub(input, mul(_rounded_div(input, other, "trunc"), other))


def trunc(input):
    _check_tensor(input, "trunc")
    return input if not _dt(input).is_floating_point else where(lt(input, 0), ceil(input), floor(input))


fix = trunc
multiply, subtract, true_divide, divide = mul, sub, div, div


def rsub(input, other, alpha=1):
    return sub(other, input, alpha=alpha)


# ---------------------------------------------------------------- elementwise unary
_INT_OK = {"neg", "abs", "square", "relu", "sign", "floor", "ceil", "round", "logical_not", "bitwise_not"}


def _unary(name):
    promote = name not in _INT_OK
    op = ID[name]
    floats = frozenset(d.code for d in (D.float32, D.float64, D.float16, D.bfloat16))

    def f(input):
        if not isinstance(input, TensorBase):
            return _other(name, input)  # a quantized or complex tensor, or an error
        if promote and input._dtype not in floats:
            input = _cast(input, D.float32)  # torch: integers promote to the default float type
        return _call(op, (input,))

    f.__name__ = name
    f.__doc__ = f"torch.{name} (generated from the op table)."
    return f


_UNARY = [r["name"] for r in TABLE if r["n_inputs"] == 1 and not r["attrs"] and r["flags"] & 1
          and r["name"] != "contiguous"]
for _n in _UNARY:
    G[_n] = _unary(_n)
neg, abs, exp, log, log1p, sqrt, rsqrt = G["neg"], G["abs"], G["exp"], G["log"], G["log1p"], G["sqrt"], G["rsqrt"]
square, sin, cos, tanh, sigmoid, relu = G["square"], G["sin"], G["cos"], G["tanh"], G["sigmoid"], G["relu"]
silu, erf, sign, floor, ceil, logical_not = G["silu"], G["erf"], G["sign"], G["floor"], G["ceil"], G["logical_not"]
erfc, expm1, exp2, sinh, atan2 = G["erfc"], G["expm1"], G["exp2"], G["sinh"], G["atan2"]
asin, acos, atan, asinh, atanh = G["asin"], G["acos"], G["atan"], G["asinh"], G["atanh"]
arcsin, arccos, arctan, arcsinh, arctanh, arctan2 = asin, acos, atan, asinh, atanh, atan2
acosh, cosh, lgamma, digamma, erfinv = G["acosh"], G["cosh"], G["lgamma"], G["digamma"], G["erfinv"]
arccosh = acosh
negative, absolute = neg, abs
i0 = G["i0"]


def _igamma(name, op):
    def f(input, other, *, out=None):
        """torch.igamma / igammac: the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P of
        two tensors (torch takes no numbers), differentiable in x only"""
        if out is not None:
            raise TypeError(f"{name}(): out= is not offered; assign the result")
        _check_tensor(input, name, "input")
        _check_tensor(other, name, "other")
        a, x = _promote_pair(input, other)
        if not _dt(a).is_floating_point:
            raise RuntimeError(f"{name}: expected a floating input, got {_dt(input)} and {_dt(other)} (torch has no "
                               f"integer kernel either); cast one of them to a float dtype")
        return _call(ID[op], (a, x))

    f.__name__ = name
    return f


igamma = _igamma("igamma", "gammainc")
igammac = _igamma("igammac", "gammaincc")


def bitwise_not(input):
    """torch.bitwise_not: ~x on integers, logical not on bool (the op takes integers only)"""
    _check_tensor(input, "bitwise_not")
    return logical_not(input) if _dt(input) is D.bool_ else G["bitwise_not"](input)


def polygamma(n, input):
    """torch.polygamma: the n-th derivative of digamma (n >= 0); integers promote to float32"""
    if not isinstance(input, TensorBase):
        return _other("polygamma", input)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if not _dt(input).is_floating_point:
        input = _cast(input, D.float32)
    return call("polygamma", (input,), {"n": int(n)})


def log2(input):
    """torch.log2, composed: log(x) / log(2) (within an ulp or two of torch's)."""
    return mul(log(input), 1.0 / math.log(2.0))


def log10(input):
    """torch.log10, composed: log(x) / log(10)."""
    return mul(log(input), 1.0 / math.log(10.0))


def round(input, *, decimals=0):
    if decimals:
        s = 10.0 ** decimals
        return div(G["round"](mul(input, s)), s)
    return G["round"](input)


def clamp(input, min=None, max=None):
    _check_tensor(input, "clamp")
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if _is_t(min) or _is_t(max):
        r = input
        if min is not None:
            r = maximum(r, min)
        if max is not None:
            r = minimum(r, max)
        return r
    if not _dt(input).is_floating_point and (isinstance(min, float) or isinstance(max, float)):
        input = _cast(input, D.float32)
    return call("clip", (input,), {"min": -math.inf if min is None else min, "max": math.inf if max is None else max})


clip = clamp


def clamp_min(input, min):
    return clamp(input, min=min)


def clamp_max(input, max):
    return clamp(input, max=max)


def where(condition, input=None, other=None):
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    cond = _check_tensor(condition, "where", "condition")
    if not _is_t(input):
        input = _scalar_tensor(input, _dt(other) if _is_t(other) else _scalar_dtype(input))
    if not _is_t(other):
        other = _scalar_tensor(other, _dt(input))
    a, b = _promote_pair(input, other)
    return call("where", (_cast(cond, D.bool_), a, b))


# ---------------------------------------------------------------- reductions
def _dims(dim):
    if dim is None:
        return []
    if isinstance(dim, int):
        return [dim]
    return list(dim)


def _reduction(name, int_to=None):
    def f(input, dim=None, keepdim=_d(name, "keepdim"), *, dtype=None):
        if not _is_t(input):
            return _other(name, input, dim, keepdim)  # a quantized or complex tensor, or an error
        if dtype is not None:
            input = _cast(input, D.to_dtype(dtype))
        elif int_to is not None and not _dt(input).is_floating_point:
            input = _cast(input, int_to)
        return call(name, (input,), {"dims": _dims(dim), "keepdim": builtins.bool(keepdim)})

    f.__name__ = name
    f.__doc__ = f"torch.{name}(input, dim=None, keepdim=False) (generated from the op table)."
    return f


sum = _reduction("sum")
prod = _reduction("prod")
mean = _reduction("mean")
amax = _reduction("amax")
amin = _reduction("amin")
_logsumexp = _reduction("logsumexp", int_to=D.float32)


def logsumexp(input, dim, keepdim=_d("logsumexp", "keepdim")):
    return _logsumexp(input, dim, keepdim)


def _var_like(name):
    def f(input, dim=None, unbiased=_d(name, "correction") == 1, keepdim=_d(name, "keepdim"), *, correction=None):
        _check_tensor(input, name)
        if isinstance(dim, builtins.bool):  # torch.var(x, False): the unbiased flag
            dim, unbiased = None, dim
        c = (1 if unbiased else 0) if correction is None else correction
        return call(name, (input,), {"dims": _dims(dim), "correction": int(c), "keepdim": builtins.bool(keepdim)})

    f.__name__ = name
    return f


var, std = _var_like("var"), _var_like("std")


def norm(input, p="fro", dim=None, keepdim=_d("norm", "keepdim"), dtype=None):
    _check_tensor(input, "norm")
    if p in ("fro", None):
        p = 2
    if p == "nuc":
        raise NotImplementedError("norm: the nuclear norm is not offered")
    return call("norm", (input,), {"p": float(p), "dims": _dims(dim), "keepdim": builtins.bool(keepdim)})


def _arg(name):
    def f(input, dim=None, keepdim=False):
        _check_tensor(input, name)
        if dim is None:
            r = call(name, (reshape(input, (-1,)),), {"dim": 0, "keepdim": False})
            return reshape(r, (1,) * input.ndim) if keepdim else r
        return call(name, (input,), {"dim": dim, "keepdim": builtins.bool(keepdim)})

    f.__name__ = name
    return f


argmax, argmin = _arg("argmax"), _arg("argmin")
_ValuesIndices = collections.namedtuple("_ValuesIndices", ["values", "indices"])


def _max_like(name, red, arg, pair):
    def f(input, dim=None, keepdim=False, *, out=None):
        if _is_t(dim):
            return pair(input, dim)
        if dim is None:
            return red(input)
        return _ValuesIndices(red(input, dim, keepdim), arg(input, dim, keepdim))

    f.__name__ = name
    return f


max = _max_like("max", amax, argmax, maximum)
min = _max_like("min", amin, argmin, minimum)


def all(input, dim=None, keepdim=False):
    return amin(_cast(ne(input, 0) if _dt(input) is not D.bool_ else input, D.int64), dim, keepdim).bool() \
        if input.numel() else _C.create("ones", () if dim is None else (), D.bool_.code)


def any(input, dim=None, keepdim=False):
    return amax(_cast(ne(input, 0) if _dt(input) is not D.bool_ else input, D.int64), dim, keepdim).bool() \
        if input.numel() else _C.create("zeros", (), D.bool_.code)


def cumsum(input, dim, *, dtype=None):
    if dtype is not None:
        input = _cast(input, D.to_dtype(dtype))
    return call("cumsum", (input,), {"dim": dim, "reverse": 0})


def cumprod(input, dim, *, dtype=None):
    """torch.cumprod; its gradient is exact where the input has zeros (the op's rule)"""
    if dtype is not None:
        input = _cast(input, D.to_dtype(dtype))
    return call("cumprod", (input,), {"dim": dim})


def _take_indices(input, dim, index, keepdim=True):
    """values of input at index along dim (gather: differentiable); 0-d inputs through one element"""
    if input.ndim == 0:
        return reshape(gather(reshape(input, (1,)), 0, reshape(index, (1,))), ())
    if not keepdim:
        return squeeze(gather(input, dim, unsqueeze(index, dim)), dim)
    return gather(input, dim, index)


def _cum_extreme(name, op):
    def f(input, dim):
        _check_tensor(input, name)
        index = call(op, (input,), {"dim": dim})
        return _ValuesIndices(_take_indices(input, dim, index), index)

    f.__name__ = name
    f.__doc__ = f"torch.{name}: (values, indices) of the running extreme; ties take the later index, NaN holds"
    return f


cummax, cummin = _cum_extreme("cummax", "cumargmax"), _cum_extreme("cummin", "cumargmin")


def mode(input, dim=-1, keepdim=False):
    """torch.mode: the most frequent value along dim (the smallest of equally frequent ones) and its last index"""
    _check_tensor(input, "mode")
    index = call("argmode", (input,), {"dim": dim})
    values = _take_indices(input, dim, index, keepdim=False)
    if keepdim and input.ndim:
        values, index = unsqueeze(values, dim), unsqueeze(index, dim)
    return _ValuesIndices(values, index)


def topk(input, k, dim=-1, largest=True, sorted=True):
    v, i = call("topk", (input,), {"k": k, "dim": dim, "largest": builtins.bool(largest), "sorted": builtins.bool(sorted)})
    return _ValuesIndices(v, i)


def sort(input, dim=-1, descending=False):
    return topk(input, input.shape[dim] if input.ndim else 1, dim, largest=descending, sorted=True)


def argsort(input, dim=-1, descending=False):
    return sort(input, dim, descending).indices


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique of the flattened tensor, always sorted (as torch's CPU kernel): a sort, then the
    first element of every run of equal values. Its size depends on the values: eager only."""
    _check_tensor(input, "unique")
    if dim is not None:
        return _unique_dim(input, dim, return_inverse, return_counts)
    flat = reshape(input, (-1,))
    n = flat.shape[0]
    vals, order = sort(flat)
    if n:
        first = reshape(_scalar_tensor(1, D.bool_), (1,))
        starts = cat([first, ne(narrow(vals, 0, 1, n - 1), narrow(vals, 0, 0, n - 1))])
    else:
        starts = _cast(vals, D.bool_)
    out = [masked_select(vals, starts)]
    if return_inverse:  # each sorted element's run number, put back in the input's order
        run = sub(cumsum(_cast(starts, D.int64), 0), 1)
        out.append(reshape(index_select(run, 0, argsort(order)) if n else _cast(order, D.int64), input.shape))
    if return_counts:
        at = reshape(nonzero(starts), (-1,))
        out.append(diff(cat([at, reshape(_scalar_tensor(n, D.int64), (1,))])))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_dim(input, dim, return_inverse, return_counts):
    """torch.unique(dim=d): the distinct slices along d in lexicographic order (of each slice in the
    layout of input.transpose(0, d), as torch). Each slice becomes a row; the rows are ranked column by column (a column's values by their 1-d unique, combined with
    the ranks so far and re-ranked, so keys stay below the row count and order rows as tuples)."""
    from ._creation import arange, zeros

    d = _wrap_dim(dim, input.ndim, "unique")
    n = input.shape[d]
    if builtins.any(s == 0 for i, s in enumerate(input.shape) if i != d):
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
    slices = transpose(input, 0, d)  # torch's layout of a slice (transposed, not moved: it decides the order)
    rows = reshape(slices, (n, math.prod(slices.shape[1:])))
    key = zeros(n, dtype=D.int64)
    for c in builtins.range(rows.shape[1]):
        _, rank = unique(select(rows, 1, c), return_inverse=True)
        _, key = unique(add(mul(key, n + 1), rank), return_inverse=True)
    _, inverse, counts = unique(key, return_inverse=True, return_counts=True)
    pick = zeros(counts.shape[0], dtype=D.int64)
    pick[inverse] = arange(n, dtype=D.int64)  # any row of a group: they are equal
    out = [transpose(index_select(slices, 0, pick), 0, d)]
    if return_inverse:
        out.append(inverse)
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def histc(input, bins=100, min=0, max=0):
    """torch.histc: counts in `bins` equal bins over [min, max] (the data's range when both are equal),
    in input's dtype; values outside are left out, max falls in the last bin. A value's bin is
    int((x - min) * bins / (max - min)) in input's precision, as torch computes it."""
    _check_tensor(input, "histc")
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins}")
    if not input.is_floating_point():
        raise RuntimeError(f'"histogram_cpu" not implemented for \'{input.dtype.name.capitalize()}\'')
    x = reshape(input, (-1,))
    lo, hi = _cast(_scalar_tensor(min, D.float64), input.dtype).item(), _cast(_scalar_tensor(max, D.float64),
                                                                              input.dtype).item()
    if lo == hi and x.shape[0]:
        lo, hi = amin(x).item(), amax(x).item()
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc(): range of [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError("torch.histc(): max must be larger than min")
    from ._creation import ones_like, zeros

    inside = masked_select(x, logical_and(ge(x, lo), le(x, hi)))
    span = sub(_cast(_scalar_tensor(hi, D.float64), input.dtype), lo)  # in input's precision
    pos = _cast(div(mul(sub(inside, lo), float(bins)), span), D.int64)  # truncation: the values are >= 0
    pos = clamp(pos, 0, bins - 1)  # max itself: the last bin
    return scatter_add(zeros(bins, dtype=input.dtype), 0, pos, ones_like(inside))


def count_nonzero(input, dim=None):
    return sum(ne(input, 0), dim)


# ---------------------------------------------------------------- shapes and views
def _shape_args(shape, fn):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if not isinstance(s, numbers.Integral) or isinstance(s, builtins.bool):
            raise TypeError(f"{fn}(): argument 'size' must be a tuple of ints, but found element of type "
                            f"{type(s).__name__}")
    return [int(s) for s in shape]


def reshape(input, *shape):
    """A view when the strides allow it (as torch's), else a contiguous copy."""
    if type(input) in _OTHER:
        return _other("reshape", input, *shape)
    shape = _shape_args(shape, "reshape")
    if not input.is_contiguous() and not _viewable(input, shape):
        input = _C.contiguous(input)
    return call("reshape", (input,), {"shape": shape})


def view(input, *shape):
    """Always a view: of a non-contiguous tensor too where every run of dims contiguous in memory
    is split exactly by the new shape (torch's rule); otherwise torch's error."""
    shape = _shape_args(shape, "view")
    if not input.is_contiguous() and not _viewable(input, shape):
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return call("reshape", (input,), {"shape": shape})


def _viewable(input, shape):
    """Whether the reshape op can view input as shape without a copy (src/ops/view.c's rule; decided
    here because a failed call inside a traced function fails the trace). A shape that does not fit
    is left to the op's error."""
    old, strides, n = list(input.shape), input.stride(), input.numel()
    new = list(shape)
    if new.count(-1) == 1:
        known = math.prod(d for d in new if d != -1)
        if known == 0 or n % known:
            return True
        new[new.index(-1)] = n // known
    if math.prod(new) != n or n == 0 or not old:
        return True
    nd, base, tnum, vnum = len(new) - 1, strides[-1], 1, 1
    for td in range(len(old) - 1, -1, -1):
        tnum *= old[td]
        if td == 0 or (old[td - 1] != 1 and strides[td - 1] != tnum * base):  # a contiguous run ends
            while nd >= 0 and (vnum < tnum or new[nd] == 1):
                vnum *= new[nd]
                nd -= 1
            if vnum != tnum:
                return False
            if td > 0:
                base, tnum, vnum = strides[td - 1], 1, 1
    return nd == -1


def permute(input, *dims):
    if type(input) in _OTHER:
        return _other("permute", input, *dims)
    return call("permute", (input,), {"dims": _shape_args(dims, "permute")})


def transpose(input, dim0, dim1):
    if type(input) in _OTHER:
        return _other("transpose", input, dim0, dim1)
    n = input.ndim
    if n == 0:
        return input
    perm = list(range(n))
    d0, d1 = _wrap_dim(dim0, n, "transpose"), _wrap_dim(dim1, n, "transpose")
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return permute(input, perm)


swapaxes = swapdims = transpose


def _wrap_dim(d, n, fn):
    m = n if n else 1
    if not -m <= d < m:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-m}, {m - 1}], but got {d})")
    return d % m


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def expand(input, *sizes):
    return call("expand", (input,), {"shape": _shape_args(sizes, "expand")})


def broadcast_to(input, shape):
    return expand(input, *shape)


def squeeze(input, dim=None):
    if type(input) in _OTHER:
        return _other("squeeze", input, *(() if dim is None else (dim,)))
    if dim is None:
        keep = [s for s in input.shape if s != 1]
        return reshape(input, keep) if len(keep) != input.ndim else input
    if isinstance(dim, (tuple, list)):
        for d in sorted((_wrap_dim(d, input.ndim, "squeeze") for d in dim), reverse=True):
            input = squeeze(input, d)
        return input
    return call("squeeze", (input,), {"dim": dim})


def unsqueeze(input, dim):
    if type(input) in _OTHER:
        return _other("unsqueeze", input, dim)
    return call("unsqueeze", (input,), {"dim": dim})


def flatten(input, start_dim=0, end_dim=-1):
    if type(input) in _OTHER:
        return _other("flatten", input, start_dim, end_dim)
    n = input.ndim
    if n == 0:
        return reshape(input, (1,))
    s, e = _wrap_dim(start_dim, n, "flatten"), _wrap_dim(end_dim, n, "flatten")
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = list(input.shape)
    if s > 0 and s < e and input.numel() and _C.is_tracing():
        # the batch (dim 0) is the dim a compiled program most often leaves free (input specs,
        # dynamic_axes): written -1, it stays free; the merged dims are written as their product
        return reshape(input, [-1] + shape[1:s] + [math.prod(shape[s:e + 1])] + shape[e + 1:])
    # -1 keeps a traced dynamic dim dynamic; with no elements it is ambiguous, so give the product
    merged = shape[s] if s == e else -1 if input.numel() else math.prod(shape[s:e + 1])
    return reshape(input, shape[:s] + [merged] + shape[e + 1:])


def unflatten(input, dim, sizes):
    shape = list(input.shape)
    d = _wrap_dim(dim, len(shape), "unflatten")
    return reshape(input, shape[:d] + list(sizes) + shape[d + 1:])


def contiguous(input):
    return _C.contiguous(input)


def clone(input, *, memory_format=None):
    return _C.clone(input)


def chunk(input, chunks, dim=0):
    if type(input) in _OTHER:
        return _other("chunk", input, chunks, dim)
    if not isinstance(chunks, int) or chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    return _C.split(input, chunks, dim, True)


def split(tensor, split_size_or_sections, dim=0):
    if isinstance(split_size_or_sections, int):
        return _C.split(tensor, split_size_or_sections, dim, False)
    sizes, out, start = list(split_size_or_sections), [], 0
    total = tensor.shape[dim]
    if builtins.sum(sizes) != total:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {total} (input tensor's size at "
                           f"dimension {dim}), but got split_sizes={sizes}")
    for s in sizes:
        out.append(narrow(tensor, dim, start, s))
        start += s
    return tuple(out)


def unbind(input, dim=0):
    return tuple(select(input, dim, i) for i in range(input.shape[dim]))


def narrow(input, dim, start, length):
    return call("slice", (input,), {"dim": dim, "start": start, "end": start + length, "step": 1})


def select(input, dim, index):
    n = input.shape[_wrap_dim(dim, input.ndim, "select")]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size {tuple(input.shape)} at "
                         f"dimension {dim}")
    index %= n
    return squeeze(narrow(input, dim, index, 1), dim)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """n-th forward difference along dim (torch.diff), from slices: out[i] = x[i + 1] - x[i]."""
    d = _wrap_dim(dim, input.ndim, "diff")
    if prepend is not None or append is not None:
        input = cat([t for t in (prepend, input, append) if t is not None], d)
    for _ in range(n):
        m = input.shape[d]
        input = sub(narrow(input, d, 1, m - 1), narrow(input, d, 0, m - 1))
    return input


def roll(input, shifts, dims=None):
    """Shifts elements along dims, wrapping around (torch.roll), as two slices concatenated."""
    if dims is None:
        return reshape(roll(flatten(input), shifts, 0), *input.shape)
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dims must align, got {len(shifts)} shifts and {len(dims)} dims")
    for s, d in zip(shifts, dims):
        d = _wrap_dim(d, input.ndim, "roll")
        n = input.shape[d]
        s = s % n if n else 0
        if s:
            input = cat([narrow(input, d, n - s, s), narrow(input, d, 0, n - s)], d)
    return input


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-d tensors (torch.meshgrid), as broadcast views."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: expected indexing 'ij' or 'xy', got {indexing!r}")
    ts = list(tensors)
    if indexing == "xy" and len(ts) >= 2:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = []
    for k, t in enumerate(ts):
        view = [1] * len(ts)
        view[k] = -1
        grids.append(expand(reshape(t, view), shape))
    if indexing == "xy" and len(grids) >= 2:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    d = _dt(tensors[0])
    for x in tensors[1:]:
        d = D.promote(d, _dt(x))
    tensors = [_cast(_check_tensor(x, "cat"), d) for x in tensors]
    while len(tensors) > _MAX_OP_INPUTS:  # the op takes at most 64: concatenate in groups first
        tensors = [call("concat", tensors[i:i + _MAX_OP_INPUTS], {"dim": dim}) if len(tensors) - i > 1 else tensors[i]
                   for i in range(0, len(tensors), _MAX_OP_INPUTS)]
    return call("concat", tensors, {"dim": dim})


_MAX_OP_INPUTS = 64


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if len(tensors) > _MAX_OP_INPUTS:
        n = tensors[0].ndim + 1
        return cat([unsqueeze(_check_tensor(x, "stack"), dim) for x in tensors], _wrap_dim(dim, n, "stack"))
    return call("stack", tensors, {"dim": dim})


def flip(input, dims):
    return call("flip", (input,), {"dims": _dims(dims)})


def tril(input, diagonal=0):
    return call("tril", (input,), {"diagonal": diagonal})


def triu(input, diagonal=0):
    return call("triu", (input,), {"diagonal": diagonal})


def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None):
    """Views of input split along dim: into n parts (the first size % n one longer), or at the
    given indices (torch's overloads: positional, sections=, indices=)."""
    given = [v for v in (indices_or_sections, sections, indices) if v is not None]
    if len(given) != 1:
        raise TypeError("tensor_split: expected one of indices_or_sections, sections or indices")
    indices_or_sections = given[0]
    d = _wrap_dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {n}")
        bounds = [k * (size // n) + builtins.min(k, size % n) for k in range(n + 1)]
    else:
        idx = indices_or_sections.tolist() if hasattr(indices_or_sections, "tolist") else list(indices_or_sections)
        bounds = [0] + [builtins.min(builtins.max(i if i >= 0 else i + size, 0), size) for i in idx] + [size]
    return tuple(narrow(input, d, a, builtins.max(b, a) - a) for a, b in zip(bounds, bounds[1:]))


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated (along dim; over the flattened input when dim is None): an int, or a
    count per element (a tensor or list). Differentiable in input."""
    if repeats is None:  # torch.repeat_interleave(counts): indices repeated by their counts
        from ._creation import arange

        return repeat_interleave(arange(input.shape[0]), input, 0)
    if dim is None:
        input, dim = input.reshape(-1), 0
    d = _wrap_dim(dim, input.ndim, "repeat_interleave")
    counts = repeats.tolist() if hasattr(repeats, "tolist") else repeats
    if isinstance(counts, int) or (isinstance(counts, list) and len(counts) == 1 and input.shape[d] != 1):
        r = counts if isinstance(counts, int) else counts[0]
        shape = list(input.shape)
        x = input.unsqueeze(d + 1).expand(*shape[:d + 1], r, *shape[d + 1:])
        return x.reshape(*shape[:d], shape[d] * r, *shape[d + 1:])
    if len(counts) != input.shape[d] or builtins.any(c < 0 for c in counts):
        raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along dim "
                           f"({input.shape[d]}) and be >= 0, got {counts}")
    from ._creation import tensor

    index = tensor([i for i, c in enumerate(counts) for _ in range(c)], dtype=D.int64)
    return index_select(input, d, index)


def index_select(input, dim, index):
    return call("index_select", (input, index), {"dim": dim})


def gather(input, dim, index):
    return call("gather", (input, index), {"dim": dim})


def scatter_add(input, dim, index, src):
    return call("scatter_add", (input, index, src), {"dim": dim})


def masked_fill(input, mask, value):
    if _is_t(value):
        value = value.item()
    return call("masked_fill", (input, _cast(mask, D.bool_)), {"value": float(value)})


def repeat(input, *sizes):
    sizes = _shape_args(sizes, "repeat")
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    x = reshape(input, [1] * (len(sizes) - input.ndim) + list(input.shape))
    shape = list(x.shape)
    inter = []
    for s, r in zip(shape, sizes):
        inter += [1, s]
    x = reshape(x, inter)
    full = []
    for s, r in zip(shape, sizes):
        full += [r, s]
    return reshape(expand(x, *full), [s * r for s, r in zip(shape, sizes)])


def nonzero(input, *, as_tuple=False):
    import numpy as np

    idx = np.nonzero(input.detach().cpu().numpy())
    from ._creation import from_numpy

    if as_tuple:
        return tuple(from_numpy(np.ascontiguousarray(i, dtype=np.int64)) for i in idx)
    return from_numpy(np.ascontiguousarray(np.stack(idx, axis=1).astype(np.int64)))


def masked_select(input, mask):
    mask = _cast(mask, D.bool_)
    if tuple(mask.shape) != tuple(input.shape):
        mask = expand(mask, *input.shape)
    return index_select(reshape(input, (-1,)), 0, nonzero(reshape(mask, (-1,)), as_tuple=True)[0])


# ---------------------------------------------------------------- linear algebra
def matmul(input, other):
    # no type promotion, as in torch: mixed dtypes are an error
    return call("matmul", (_check_tensor(input, "matmul"), _check_tensor(other, "matmul", "other")))


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"mm: expected 2D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"bmm: expected 3D tensors, got {input.ndim}D and {mat2.ndim}D")
    return matmul(input, mat2)


def dot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


def outer(input, vec2):
    return mul(unsqueeze(input, 1), unsqueeze(vec2, 0))


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if len(operands) > 2:
        return _einsum_chain(equation, operands)
    return call("einsum", (operands[0], operands[1] if len(operands) == 2 else None), {"equation": equation})


def _einsum_chain(equation, operands):
    """Three or more operands: contracted left to right, two at a time (torch's order without
    opt_einsum); each intermediate keeps the letters a later operand or the output still needs."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): more operands were provided than specified in the equation"
                         if len(operands) > len(terms) else
                         "einsum(): fewer operands were provided than specified in the equation")
    if not arrow:   # implicit output: the ellipsis, then the letters used once, in alphabetical order
        letters = "".join(t.replace("...", "") for t in terms)
        rhs = ("..." if builtins.any("..." in t for t in terms) else "") + "".join(
            builtins.sorted(c for c in builtins.set(letters) if letters.count(c) == 1))
    acc, acc_term = operands[0], terms[0]
    for k in range(1, len(terms)):
        later = "".join(terms[k + 1:]) + rhs
        seen = []
        for c in (acc_term + terms[k]).replace("...", ""):
            if c not in seen and c in later:
                seen.append(c)
        ellipsis = "..." if "..." in acc_term or "..." in terms[k] else ""
        out_term = rhs if k == len(terms) - 1 else ellipsis + "".join(seen)
        acc = call("einsum", (acc, operands[k]), {"equation": f"{acc_term},{terms[k]}->{out_term}"})
        acc_term = out_term
    return acc


def _amp_low_like(input, prod):
    """input cast to prod's f16/bf16 when autocast made prod low: torch's autocast runs addmm,
    baddbmm and addbmm whole in the low dtype, where the composition's add would promote."""
    if prod.dtype != input.dtype and prod.dtype in (D.float16, D.bfloat16) and input.dtype == D.float32 and \
            _C.autocast_enabled():
        return input.to(prod.dtype)
    return input


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    prod = mm(mat1, mat2)
    input = _amp_low_like(input, prod)
    return add(mul(input, beta) if beta != 1 else input, mul(prod, alpha) if alpha != 1 else prod)
