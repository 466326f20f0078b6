"""torch functions written as compositions of other ones (elementwise tests, the add-multiply
family, stacking and splitting helpers, diagonals, index updates, searching, order statistics,
sampling), each with torch's semantics; autograd differentiates them through their parts. Checked
against torch in python/tests/test_torch_compositions.py."""
import builtins
import math
import numbers

from . import _C
from . import _creation as C
from . import _dtype as D
from . import _functions as F
from ._kinds import CLASSES as _OTHER, other as _other

__all__ = []


def _is_t(v):
    return isinstance(v, _C.TensorBase)


def _export(f):
    __all__.append(f.__name__)
    return f


def _float(x):
    return x if x.dtype.is_floating_point else x.to(D.float32)


def _scalar_like(v, x):
    return C.full((), v, dtype=x.dtype)


# ---------------------------------------------------------------- elementwise tests and repairs
@_export
def isnan(input):
    return F.ne(input, input) if input.dtype.is_floating_point else C.zeros_like(input, dtype=D.bool_)


@_export
def isinf(input):
    return F.eq(F.abs(input), math.inf) if input.dtype.is_floating_point else C.zeros_like(input, dtype=D.bool_)


@_export
def isposinf(input):
    return F.eq(input, math.inf) if input.dtype.is_floating_point else C.zeros_like(input, dtype=D.bool_)


@_export
def isneginf(input):
    return F.eq(input, -math.inf) if input.dtype.is_floating_point else C.zeros_like(input, dtype=D.bool_)


@_export
def isfinite(input):
    if not input.dtype.is_floating_point:
        return C.ones_like(input, dtype=D.bool_)
    return F.logical_not(F.logical_or(isnan(input), isinf(input)))


@_export
def isreal(input):
    return C.ones_like(input, dtype=D.bool_)  # a real tensor (complex ones are _complex.ComplexTensor)


@_export
def signbit(input):
    """x < 0, and -0.0 (whose reciprocal is -inf)"""
    if not input.dtype.is_floating_point:
        return F.lt(input, 0)
    return F.logical_or(F.lt(input, 0), F.logical_and(F.eq(input, 0), F.lt(F.div(1.0, input), 0)))


@_export
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    if not input.dtype.is_floating_point:
        return input.clone()
    info = D.finfo(input.dtype)
    out = F.where(isnan(input), _scalar_like(nan, input), input)
    out = F.where(isposinf(input), _scalar_like(info.max if posinf is None else posinf, input), out)
    return F.where(isneginf(input), _scalar_like(info.min if neginf is None else neginf, input), out)


@_export
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    x = F.where(isnan(input), C.zeros_like(input), input)
    return F.sum(x, dim, keepdim, dtype=dtype) if dim is not None else F.sum(x, dtype=dtype)


@_export
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    kept = F.logical_not(isnan(input)).to(input.dtype)
    total = nansum(input, dim, keepdim)
    count = F.sum(kept, dim, keepdim) if dim is not None else F.sum(kept)
    return F.div(total, count)


# ---------------------------------------------------------------- elementwise functions
@_export
def reciprocal(input):
    return F.div(1.0, _float(input))


@_export
def tan(input):
    x = _float(input)
    return F.div(F.sin(x), F.cos(x))


@_export
def angle(input):
    """the argument: 0 for x >= 0, pi for x < 0 (NaN stays NaN); a complex tensor's is atan2(imag, real)"""
    if type(input) in _OTHER:
        return _other("angle", input)
    x = _float(input)
    return F.where(isnan(x), x, F.where(F.lt(x, 0), _scalar_like(math.pi, x), C.zeros_like(x)))


@_export
def deg2rad(input):
    return F.mul(_float(input), math.pi / 180.0)


@_export
def rad2deg(input):
    return F.mul(_float(input), 180.0 / math.pi)


@_export
def frac(input):
    return F.sub(input, F.trunc(input))


@_export
def hypot(input, other):
    return F.sqrt(F.add(F.mul(input, input), F.mul(other, other)))


@_export
def logaddexp(input, other):
    """max + log1p(exp(-|a - b|)): no overflow; equal infinities give that infinity"""
    big = F.maximum(input, other)
    d = F.abs(F.sub(input, other))
    out = F.add(big, F.log1p(F.exp(F.neg(d))))
    return F.where(F.eq(input, other), F.add(input, math.log(2.0)), out)  # equal infinities: no inf - inf


@_export
def logaddexp2(input, other):
    big = F.maximum(input, other)
    d = F.abs(F.sub(input, other))
    return F.add(big, F.mul(F.log1p(F.exp(F.mul(d, -math.log(2.0)))), 1.0 / math.log(2.0)))


@_export
def logit(input, eps=None):
    x = input if eps is None else F.clamp(input, eps, 1.0 - eps)
    return F.log(F.div(x, F.sub(1.0, x)))


@_export
def xlogy(input, other):
    """x log y, 0 where x = 0 (unless y is NaN)"""
    zero = F.logical_and(F.eq(input, 0), F.logical_not(isnan(other)))
    prod = F.mul(input, F.log(other))
    return F.where(zero, C.zeros_like(prod), prod)


@_export
def sinc(input):
    """sin(pi x) / (pi x), 1 at 0 (with the gradient 0 there, as torch)"""
    x = _float(input)
    zero = F.eq(x, 0)
    safe = F.where(zero, C.ones_like(x), x)
    px = F.mul(safe, math.pi)
    return F.where(zero, C.ones_like(x), F.div(F.sin(px), px))


@_export
def sgn(input):
    return F.sign(input)


@_export
def heaviside(input, values):
    step = F.gt(input, 0).to(input.dtype)
    return F.where(F.eq(input, 0), values.to(input.dtype), step)


@_export
def float_power(input, exponent):
    base = input.to(D.float64) if _is_t(input) else input
    exp = exponent.to(D.float64) if _is_t(exponent) else exponent
    return F.pow(base, exp)


@_export
def fmax(input, other):
    """maximum, with NaN only where both are NaN"""
    return F.where(isnan(input), other, F.where(isnan(other), input, F.maximum(input, other)))


@_export
def fmin(input, other):
    return F.where(isnan(input), other, F.where(isnan(other), input, F.minimum(input, other)))


@_export
def logical_xor(input, other):
    return F.ne(input.to(D.bool_), other.to(D.bool_) if _is_t(other) else bool(other))


@_export
def lerp(input, end, weight):
    """torch's two-sided form: start + w (end - start) for w < 0.5, end - (end - start)(1 - w) above"""
    diff = F.sub(end, input)
    w = weight if _is_t(weight) else _scalar_like(weight, input)
    low = F.add(input, F.mul(w, diff))
    high = F.sub(end, F.mul(diff, F.sub(1.0, w)))
    return F.where(F.lt(F.abs(w), 0.5), low, high)


@_export
def addcmul(input, tensor1, tensor2, *, value=1):
    return F.add(input, F.mul(F.mul(tensor1, tensor2), value))


@_export
def addcdiv(input, tensor1, tensor2, *, value=1):
    return F.add(input, F.mul(F.div(tensor1, tensor2), value))


def _beta_alpha(input, prod, beta, alpha):
    scaled = prod if alpha == 1 else F.mul(prod, alpha)
    if beta == 0:  # input is ignored, NaN included (torch)
        return F.add(scaled, C.zeros_like(scaled))
    return F.add(scaled, input if beta == 1 else F.mul(input, beta))


@_export
def addmv(input, mat, vec, *, beta=1, alpha=1):
    return _beta_alpha(input, F.matmul(mat, vec), beta, alpha)


@_export
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    prod = F.bmm(batch1, batch2)
    return _beta_alpha(F._amp_low_like(input, prod), prod, beta, alpha)


@_export
def mv(input, vec):
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    return F.matmul(input, vec)


@_export
def chain_matmul(*matrices):
    out = matrices[0]
    for m in matrices[1:]:
        out = F.matmul(out, m)
    return out


@_export
def vdot(input, other):
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return F.sum(F.mul(input, other))


@_export
def tensordot(a, b, dims=2, out=None):
    """contracts dims of a with dims of b: the free dims of a, then those of b"""
    if isinstance(dims, numbers.Integral):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = [list(d) if isinstance(d, (list, tuple)) else [d] for d in dims]
    da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = math.prod(a.shape[d] for d in da)
    left = F.permute(a, free_a + da).reshape(math.prod(a.shape[d] for d in free_a), k)
    right = F.permute(b, db + free_b).reshape(k, math.prod(b.shape[d] for d in free_b))
    return F.matmul(left, right).reshape(*[a.shape[d] for d in free_a], *[b.shape[d] for d in free_b])


@_export
def inner(input, other):
    if input.ndim == 0 or other.ndim == 0:
        return F.mul(input, other)
    return tensordot(input, other, ([-1], [-1]))


@_export
def ger(input, vec2):
    return F.outer(input, vec2)


@_export
def kron(input, other):
    """kron: the product of every pair of entries, a's index major"""
    n = builtins.max(input.ndim, other.ndim)
    a = input.reshape(*([1] * (n - input.ndim)), *input.shape)
    b = other.reshape(*([1] * (n - other.ndim)), *other.shape)
    shape_a = [s for d in a.shape for s in (d, 1)]
    shape_b = [s for d in b.shape for s in (1, d)]
    out = F.mul(a.reshape(*shape_a), b.reshape(*shape_b))
    return out.reshape(*[p * q for p, q in zip(a.shape, b.shape)])


# ---------------------------------------------------------------- shapes
@_export
def broadcast_shapes(*shapes):
    out = []
    for shape in shapes:
        shape = [shape] if isinstance(shape, numbers.Integral) else list(shape)
        if len(shape) > len(out):
            out = [1] * (len(shape) - len(out)) + out
        for i, s in enumerate(reversed(shape)):
            j = len(out) - 1 - i
            if out[j] == 1:
                out[j] = s
            elif s != 1 and s != out[j]:
                raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape: {shapes}")
    from ._tensor import Size

    return Size(out)


@_export
def broadcast_tensors(*tensors):
    shape = broadcast_shapes(*[t.shape for t in tensors])
    return tuple(t.expand(*shape) for t in tensors)


@_export
def atleast_1d(*tensors):
    out = [t.reshape(1) if t.ndim == 0 else t for t in (tensors[0] if len(tensors) == 1 and
                                                        isinstance(tensors[0], (list, tuple)) else tensors)]
    return out[0] if len(out) == 1 else tuple(out)


@_export
def atleast_2d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = [t.reshape(1, -1) if t.ndim < 2 else t for t in ts]
    return out[0] if len(out) == 1 else tuple(out)


@_export
def atleast_3d(*tensors):
    ts = tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else tensors
    out = []
    for t in ts:
        if t.ndim == 0:
            t = t.reshape(1, 1, 1)
        elif t.ndim == 1:
            t = t.reshape(1, -1, 1)
        elif t.ndim == 2:
            t = t.unsqueeze(-1)
        out.append(t)
    return out[0] if len(out) == 1 else tuple(out)


@_export
def hstack(tensors):
    ts = [atleast_1d(t) for t in tensors]
    return F.cat(ts, 0 if ts[0].ndim == 1 else 1)


@_export
def vstack(tensors):
    return F.cat([atleast_2d(t) for t in tensors], 0)


row_stack = vstack
__all__.append("row_stack")


@_export
def dstack(tensors):
    return F.cat([atleast_3d(t) for t in tensors], 2)


@_export
def column_stack(tensors):
    return F.cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)


def _split_like(name, dim, min_dims):
    def split(input, indices_or_sections):
        if input.ndim < min_dims:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                               f"with {input.ndim} dimensions!")
        d = dim if input.ndim > 1 or name != "hsplit" else 0
        if isinstance(indices_or_sections, numbers.Integral) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                               f"{input.shape[d]} is not divisible by the split_size {indices_or_sections}!")
        return F.tensor_split(input, indices_or_sections, d)

    split.__name__ = name
    __all__.append(name)
    return split


hsplit = _split_like("hsplit", 1, 1)
vsplit = _split_like("vsplit", 0, 2)
dsplit = _split_like("dsplit", 2, 3)


@_export
def movedim(input, source, destination):
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    n = input.ndim
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) should contain the same "
                           f"number of dims as destination ({dst} dims)")
    src, dst = [s % n for s in src], [d % n for d in dst]
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(n) if i not in src)
    return F.permute(input, [o if o is not None else next(rest) for o in order])


moveaxis = movedim
swapaxes = swapdims = F.transpose
__all__ += ["moveaxis", "swapaxes", "swapdims"]


@_export
def ravel(input):
    return F.reshape(input, (-1,))


@_export
def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return F.flip(input, [1])


@_export
def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return F.flip(input, [0])


@_export
def rot90(input, k=1, dims=(0, 1)):
    d0, d1 = dims
    k %= 4
    if k == 1:
        return F.transpose(F.flip(input, [d1]), d0, d1)
    if k == 2:
        return F.flip(input, [d0, d1])
    if k == 3:
        return F.flip(F.transpose(input, d0, d1), [d1])
    return input.clone()


@_export
def tile(input, dims):
    dims = list(dims) if not isinstance(dims, numbers.Integral) else [dims]
    if len(dims) < input.ndim:
        dims = [1] * (input.ndim - len(dims)) + dims
    x = input.reshape(*([1] * (len(dims) - input.ndim)), *input.shape)
    return x.repeat(*dims)


# ---------------------------------------------------------------- diagonals and triangles
@_export
def diagonal(input, offset=0, dim1=0, dim2=1):
    """the entries (i, i + offset) of the (dim1, dim2) planes, as a last dimension"""
    x = movedim(input, (dim1, dim2), (-2, -1))
    rows, cols = x.shape[-2], x.shape[-1]
    length = builtins.max(0, builtins.min(rows, cols - offset) if offset >= 0 else builtins.min(rows + offset, cols))
    r = C.arange(length, dtype=D.int64) + builtins.max(-offset, 0)
    c = C.arange(length, dtype=D.int64) + builtins.max(offset, 0)
    flat = x.reshape(*x.shape[:-2], rows * cols)
    return F.index_select(flat, -1, r * cols + c) if length else flat[..., :0]


@_export
def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """the last dimension as the diagonal `offset` of new (dim1, dim2) planes"""
    eye = C.eye(input.shape[-1], dtype=input.dtype)
    planes = F.mul(input.unsqueeze(-1), eye)  # (..., L, L) with the values on the diagonal
    from .nn import functional as NF

    pad = (offset, 0, 0, offset) if offset >= 0 else (0, -offset, -offset, 0)
    planes = NF.pad(planes, pad) if offset else planes  # now (..., n, n)
    nd = planes.ndim
    if (dim1 % nd, dim2 % nd) == (nd - 2, nd - 1):
        return planes
    return movedim(planes, (-2, -1), (dim1, dim2))


@_export
def diag(input, diagonal=0):
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return globals()["diagonal"](input, diagonal)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


@_export
def diagflat(input, offset=0):
    return diag_embed(input.reshape(-1), offset)


@_export
def trace(input):
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    return F.sum(diagonal(input))


def _tri_indices(row, col, offset, upper):
    rows, cols = [], []
    for i in range(row):
        for j in range(col):
            if (j - i >= offset) if upper else (j - i <= offset):
                rows.append(i)
                cols.append(j)
    return C.tensor([rows, cols], dtype=D.int64).reshape(2, len(rows))


@_export
def tril_indices(row, col, offset=0, *, dtype=D.int64, device="cpu", layout=None):
    return _tri_indices(row, col, offset, False).to(dtype)


@_export
def triu_indices(row, col, offset=0, *, dtype=D.int64, device="cpu", layout=None):
    return _tri_indices(row, col, offset, True).to(dtype)


@_export
def block_diag(*tensors):
    ts = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in tensors]
    width = builtins.sum(t.shape[1] for t in ts)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = D.promote(dtype, t.dtype)
    rows, left = [], 0
    for t in ts:
        parts = [C.zeros(t.shape[0], left, dtype=dtype), t.to(dtype),
                 C.zeros(t.shape[0], width - left - t.shape[1], dtype=dtype)]
        rows.append(F.cat(parts, 1))
        left += t.shape[1]
    return F.cat(rows, 0)


@_export
def cartesian_prod(*tensors):
    if len(tensors) == 1:
        return tensors[0]
    grids = F.meshgrid(*tensors, indexing="ij")
    return F.stack([g.reshape(-1) for g in grids], 1)


@_export
def vander(x, N=None, increasing=False):
    n = x.shape[0] if N is None else N
    powers = C.arange(n, dtype=D.int64)
    if not increasing:
        powers = F.flip(powers, [0])
    base = x if x.dtype.is_floating_point else x.to(D.int64)
    return F.pow(base.unsqueeze(-1), powers.to(base.dtype))


# ---------------------------------------------------------------- indexing updates
def _index_along(input, dim, index, shape_of):
    """index (1-d, along dim) broadcast to shape_of's shape, for scatter_add / gather"""
    dim %= input.ndim
    view = [1] * shape_of.ndim
    view[dim] = index.shape[0]
    return index.reshape(*view).expand(*shape_of.shape), dim


@_export
def index_add(input, dim, index, source, *, alpha=1):
    idx, d = _index_along(input, dim, index, source)
    return F.add(input, F.scatter_add(C.zeros_like(input), d, idx, source if alpha == 1 else F.mul(source, alpha)))


@_export
def index_fill(input, dim, index, value):
    d = dim % input.ndim
    hit = F.ne(F.sum(F.eq(C.arange(input.shape[d], dtype=D.int64).unsqueeze(1), index.reshape(1, -1)), 1), 0)
    view = [1] * input.ndim
    view[d] = input.shape[d]
    v = value.to(input.dtype) if _is_t(value) else _scalar_like(value, input)
    return F.where(hit.reshape(*view), v, input)


@_export
def index_copy(input, dim, index, source):
    idx, d = _index_along(input, dim, index, source)
    return scatter(input, d, idx, source)


@_export
def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """input with src (or value) written at index along dim; reduce 'add' / 'multiply' combine instead"""
    if src is None:
        src = value
    if not _is_t(src):
        src = C.full(index.shape, src, dtype=input.dtype)
    if reduce == "add":
        return F.scatter_add(input, dim, index, src.to(input.dtype))
    if reduce == "multiply":
        return scatter_reduce(input, dim, index, src.to(input.dtype), "prod")
    if reduce is not None:
        raise RuntimeError(f"reduce argument must be either add or multiply, got {reduce}")
    hit = F.ne(F.scatter_add(C.zeros_like(input), dim, index, C.ones(index.shape, dtype=input.dtype)), 0)
    placed = F.scatter_add(C.zeros_like(input), dim, index, src[tuple(slice(0, s) for s in index.shape)].to(input.dtype))
    return F.where(hit, placed, input)


@_export
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """torch.scatter_reduce: sum, prod, mean, amax or amin of the src elements index sends to each slot
    (and of the input's value there, with include_self); src is cut to index's shape, as torch reads it"""
    if tuple(src.shape) != tuple(index.shape):
        src = src[tuple(slice(0, n) for n in index.shape)]
    return F.call("scatter_reduce", (input, index, src), {"dim": dim, "reduce": reduce,
                                                          "include_self": builtins.bool(include_self)})


@_export
def masked_scatter(input, mask, source):
    """input with the positions where mask (broadcast) holds taken, in order, from source's elements"""
    m = F.logical_and(mask.to(D.bool_), C.ones(input.shape, dtype=D.bool_)).reshape(-1)
    need = int(F.sum(m.to(D.int64)).item())
    if need > source.numel():
        raise RuntimeError(f"masked_scatter: expected source with at least {need} elements (the ones in mask), "
                           f"got {source.numel()}")
    if need == 0:
        return F.add(input, C.zeros((), dtype=input.dtype))
    at = F.where(m, F.sub(F.cumsum(m.to(D.int64), 0), 1), C.zeros((), dtype=D.int64))
    taken = F.index_select(source.reshape(-1).to(input.dtype), 0, at).reshape(*input.shape)
    return F.where(m.reshape(*input.shape), taken, input)


@_export
def as_strided(input, size, stride, storage_offset=None):
    """torch.as_strided: a view of input's storage (nonnegative strides in elements)"""
    return F.call("as_strided", (input,), {"size": tuple(size), "stride": tuple(stride),
                                           "storage_offset": -1 if storage_offset is None else int(storage_offset)})


@_export
def cross(input, other, dim=None):
    """torch.cross: the cross product along a dim of size 3 (by default the first such dim, as torch 1.13)"""
    a, b = broadcast_tensors(input, other)
    if dim is None:
        dim = next((d for d, n in enumerate(a.shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    if a.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[dim]} and "
                           f"{b.shape[dim]}")
    nxt, prv = C.tensor([1, 2, 0]), C.tensor([2, 0, 1])
    pick = lambda t, i: F.index_select(t, dim, i)
    return F.sub(F.mul(pick(a, nxt), pick(b, prv)), F.mul(pick(a, prv), pick(b, nxt)))


@_export
def cov(input, *, correction=1, fweights=None, aweights=None):
    """torch.cov: rows are variables, columns observations (a 1-d input is one variable)"""
    x = _float(input if input.ndim == 2 else input.reshape(1, -1))
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = fweights.to(x.dtype)
    if aweights is not None:
        w = aweights.to(x.dtype) if w is None else F.mul(w, aweights.to(x.dtype))
    if w is None:
        avg = F.mean(x, 1, True)
        norm = float(n - correction)
    else:
        w_sum = F.sum(w)
        avg = F.div(F.sum(F.mul(x, w), 1, True), w_sum)
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = F.sub(w_sum, correction)
        else:
            norm = F.sub(w_sum, F.div(F.mul(F.sum(F.mul(w, aweights.to(x.dtype))), correction), w_sum))
        norm = F.maximum(norm, C.zeros((), dtype=x.dtype))
    xm = F.sub(x, avg)
    c = F.matmul(xm if w is None else F.mul(xm, w), xm.t())
    c = F.div(c, builtins.max(norm, 0.0) if isinstance(norm, float) else norm)
    return c.reshape(()) if input.ndim < 2 else c


@_export
def corrcoef(input):
    """torch.corrcoef: the covariance scaled by the standard deviations, clipped to [-1, 1]"""
    c = cov(input)
    if c.ndim == 0:
        return F.div(c, c)
    sd = F.sqrt(diagonal(c))
    c = F.div(F.div(c, sd.unsqueeze(1)), sd.unsqueeze(0))
    return F.clamp(c, -1.0, 1.0)


@_export
def det(input):
    from . import linalg

    return linalg.det(input)


@_export
def logdet(input):
    """log det: NaN for a negative determinant, -inf for a singular matrix, as torch"""
    from . import linalg

    sign, logabs = linalg.slogdet(input)
    return F.where(F.lt(sign, 0), _scalar_like(math.nan, logabs), F.where(F.eq(sign, 0),
                                                                          _scalar_like(-math.inf, logabs), logabs))


@_export
def slogdet(input):
    from . import linalg

    return linalg.slogdet(input)


@_export
def inverse(input):
    from . import linalg

    return linalg.inv(input)


@_export
def cholesky(input, upper=False):
    from . import linalg

    return linalg.cholesky(input, upper=upper)


@_export
def cholesky_solve(input, input2, upper=False):
    """X with A X = input where A = L L^T (U^T U when upper), L = input2: two triangular solves"""
    from . import linalg

    low = input2.transpose(-2, -1) if upper else input2
    Y = linalg.solve_triangular(low, input, upper=False)
    return linalg.solve_triangular(low.transpose(-2, -1), Y, upper=True)


@_export
def cholesky_inverse(input, upper=False):
    n = input.shape[-1]
    return cholesky_solve(C.eye(n, dtype=input.dtype).expand(*input.shape), input, upper)


@_export
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False):
    """(X, A.clone()) with A X = input (A^T X = input when transpose), torch's older form"""
    from . import linalg

    M = A.transpose(-2, -1) if transpose else A
    X = linalg.solve_triangular(M, input, upper=upper != transpose, unitriangular=unitriangular)
    return _namedtuple("triangular_solve", ["solution", "cloned_coefficient"])(X, A.clone())


@_export
def matrix_exp(input):
    from . import linalg

    return linalg.matrix_exp(input)


@_export
def svd(input, some=True, compute_uv=True):
    """torch.svd: (U, S, V) with V = Vh^T; some=False gives the full factors; without compute_uv, U and V
    are zeros of the full shapes, as torch"""
    from . import linalg

    U, S, Vh = linalg.svd(input, full_matrices=not some)
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        return _namedtuple("svd", ["U", "S", "V"])(C.zeros(*input.shape[:-2], m, m, dtype=S.dtype), S.detach(),
                                                   C.zeros(*input.shape[:-2], n, n, dtype=S.dtype))
    return _namedtuple("svd", ["U", "S", "V"])(U, S, Vh.transpose(-2, -1))


@_export
def qr(input, some=True):
    from . import linalg

    return _namedtuple("qr", ["Q", "R"])(*linalg.qr(input, "reduced" if some else "complete"))


@_export
def pinverse(input, rcond=1e-15):
    from . import linalg

    return linalg.pinv(input, rtol=rcond)


@_export
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    from . import linalg

    return linalg.lu_unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)


@_export
def lu(A, pivot=True, get_infos=False):
    """torch.lu: (LU, pivots[, infos])"""
    from . import linalg

    LU, pivots, info = linalg.lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


@_export
def lu_solve(b, LU_data, LU_pivots):
    from . import linalg

    return linalg.lu_solve(LU_data, LU_pivots, b)


@_export
def geqrf(input):
    from . import linalg

    return linalg._geqrf(input)


@_export
def orgqr(input, tau):
    from . import linalg

    return linalg.householder_product(input, tau)


@_export
def ormqr(input, input2, input3, left=True, transpose=False):
    from . import linalg

    return linalg._ormqr(input, input2, input3, left, transpose)


def _namedtuple(name, fields):
    import collections

    return collections.namedtuple(name, fields)


@_export
def pdist(input, p=2):
    """torch.pdist: the p-norm distance of every pair of rows i < j, in row-major order"""
    n = input.shape[0]
    pairs = _tri_indices(n, n, 1, True)
    return _pnorm_last(F.sub(F.index_select(input, 0, pairs[0]), F.index_select(input, 0, pairs[1])), p)


@_export
def take(input, index):
    return F.index_select(input.reshape(-1), 0, index.reshape(-1)).reshape(*index.shape)


@_export
def take_along_dim(input, indices, dim=None):
    if dim is None:
        return take(input, indices)
    shape = list(broadcast_shapes(input.shape, indices.shape))
    shape_i = list(shape)
    shape_i[dim] = indices.shape[dim]
    shape_x = list(shape)
    shape_x[dim] = input.shape[dim]
    return F.gather(input.expand(*shape_x), dim, indices.expand(*shape_i))


# ---------------------------------------------------------------- comparisons and searching
@_export
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{input.dtype!r} did not match {other.dtype!r}")
    a, b = (input, other) if input.dtype.is_floating_point else (input.to(D.float64), other.to(D.float64))
    err = F.abs(F.sub(a, b))
    within = F.logical_and(isfinite(err), F.le(err, F.add(F.mul(F.abs(b), rtol), atol)))
    close = F.logical_or(F.eq(a, b), within)  # equal infinities are close; a finite value is never close to one
    if equal_nan:
        close = F.logical_or(close, F.logical_and(isnan(input), isnan(other)))
    return close


@_export
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(F.all(isclose(input, other, rtol, atol, equal_nan)).item())


@_export
def equal(input, other):
    return tuple(input.shape) == tuple(other.shape) and bool(F.all(F.eq(input, other)).item())


@_export
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    test = test_elements.reshape(-1) if _is_t(test_elements) else C.tensor(test_elements)
    e = elements if _is_t(elements) else C.tensor(elements)
    hit = F.ne(F.sum(F.eq(e.unsqueeze(-1), test), -1), 0)
    return F.logical_not(hit) if invert else hit


@_export
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """the insertion index of each value in the last dimension of sorted_sequence (left: the first
    index whose entry is >= the value; right: > the value)"""
    if sorter is not None:
        sorted_sequence = F.gather(sorted_sequence, -1, sorter)
    right = right or side == "right"
    values = input if _is_t(input) else C.tensor(input, dtype=sorted_sequence.dtype)
    scalar = values.ndim == 0
    seq = sorted_sequence
    if seq.ndim == 1:
        cmp = F.le(seq, values.reshape(*values.shape, 1)) if right else F.lt(seq, values.reshape(*values.shape, 1))
    else:
        cmp = F.le(seq.unsqueeze(-2), values.unsqueeze(-1)) if right else F.lt(seq.unsqueeze(-2),
                                                                                values.unsqueeze(-1))
    out = F.sum(cmp.to(D.int64), -1)
    if scalar:
        out = out.reshape(())
    return out.to(D.int32) if out_int32 else out


@_export
def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@_export
def bincount(input, weights=None, minlength=0):
    if input.ndim != 1 or input.dtype.is_floating_point:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if input.numel() and int(F.amin(input).item()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    size = builtins.max(int(F.amax(input).item()) + 1 if input.numel() else 0, minlength)
    if weights is None:
        return F.scatter_add(C.zeros(size, dtype=D.int64), 0, input.to(D.int64), C.ones(input.shape, dtype=D.int64))
    w = weights.to(D.float64) if weights.dtype is not D.float32 else weights
    return F.scatter_add(C.zeros(size, dtype=w.dtype), 0, input.to(D.int64), w)


@_export
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    if dim is not None:
        raise NotImplementedError("unique_consecutive(dim=...) is not offered; dim=None (flattened) is")
    flat = input.reshape(-1)
    n = flat.shape[0]
    starts = F.cat([C.ones(builtins.min(n, 1), dtype=D.bool_), F.ne(flat[1:], flat[:-1])]) if n else \
        C.zeros(0, dtype=D.bool_)
    out = [F.masked_select(flat, starts)]
    if return_inverse:
        out.append((F.cumsum(starts.to(D.int64), 0) - 1).reshape(*input.shape))
    if return_counts:
        at = F.nonzero(starts).reshape(-1)
        out.append(F.diff(F.cat([at, C.tensor([n], dtype=D.int64)])))
    return out[0] if len(out) == 1 else tuple(out)


# ---------------------------------------------------------------- order statistics and moments
def _values_indices(values, indices):
    from collections import namedtuple

    return namedtuple("values_indices", ["values", "indices"])(values, indices)


@_export
def kthvalue(input, k, dim=-1, keepdim=False):
    s = F.sort(input, dim)
    values, indices = F.narrow(s.values, dim, k - 1, 1), F.narrow(s.indices, dim, k - 1, 1)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return _values_indices(values, indices)


@_export
def median(input, dim=None, keepdim=False):
    """the lower of the two middle values, as torch"""
    if dim is None:
        flat = input.reshape(-1)
        return F.sort(flat, 0).values[(flat.shape[0] - 1) // 2]
    return kthvalue(input, (input.shape[dim] - 1) // 2 + 1, dim, keepdim)


@_export
def msort(input):
    return F.sort(input, 0).values


def _pick_quantiles(s, pos, interpolation):
    """values of the sorted last dim of s at the float positions pos [..., Q], interpolated as torch"""
    lo, hi = F.floor(pos).to(D.int64), F.ceil(pos).to(D.int64)
    if interpolation == "linear":
        low, high = F.gather(s, -1, lo), F.gather(s, -1, hi)
        return F.add(low, F.mul(F.sub(high, low), F.sub(pos, lo.to(pos.dtype))))
    if interpolation == "lower":
        return F.gather(s, -1, lo)
    if interpolation == "higher":
        return F.gather(s, -1, hi)
    if interpolation == "midpoint":
        return F.mul(F.add(F.gather(s, -1, lo), F.gather(s, -1, hi)), 0.5)
    if interpolation == "nearest":
        return F.gather(s, -1, F.round(pos).to(D.int64))
    raise ValueError(f"quantile() interpolation must be one of linear, lower, higher, midpoint or nearest. "
                     f"Got {interpolation}")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    x = input.reshape(-1) if dim is None else movedim(input, dim, -1)
    s = F.sort(x, -1).values  # NaN sorts last
    qs = q if _is_t(q) else C.tensor(q, dtype=input.dtype)
    scalar_q = qs.ndim == 0
    qs = qs.reshape(-1)
    batch = tuple(s.shape[:-1])
    if ignore_nan:  # each line's own count of numbers; an all-NaN line picks position 0, a NaN
        count = F.sum(F.logical_not(isnan(x)).to(D.int64), -1, True).to(qs.dtype)
        pos = F.maximum(F.mul(F.sub(count, 1.0), qs), C.zeros((), dtype=qs.dtype))
    else:  # a NaN anywhere in a line sorts to its end: the last position holds it
        pos = F.mul(qs, s.shape[-1] - 1).expand(*batch, qs.shape[0])
    out = _pick_quantiles(s, pos, interpolation)
    if not ignore_nan:  # torch: NaN wherever the line has one
        out = F.where(isnan(F.narrow(s, -1, s.shape[-1] - 1, 1)), _scalar_like(math.nan, out), out)
    out = movedim(out, -1, 0)  # the quantiles first, as torch
    if dim is not None and keepdim:
        out = out.unsqueeze(dim + 1 if dim >= 0 else dim)
    return out.squeeze(0) if scalar_q else out


@_export
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    return _quantile(input, q, dim, keepdim, interpolation, False)


@_export
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """torch.nanquantile: each line's quantiles over its non-NaN values (NaN where it has none)"""
    return _quantile(input, q, dim, keepdim, interpolation, True)


@_export
def nanmedian(input, dim=None, keepdim=False):
    """torch.nanmedian: the lower middle of the non-NaN values (NaN where there are none)"""
    if dim is None:
        flat = input.reshape(-1)
        count = int(F.logical_not(isnan(flat)).sum().item())
        return F.sort(flat, 0).values[builtins.max((count - 1) // 2, 0)]
    x = input.reshape(1) if input.ndim == 0 else input
    order = F.sort(x, dim).indices
    count = F.sum(F.logical_not(isnan(x)).to(D.int64), dim, True)
    k = F.where(F.gt(count, 0), F.floor_divide(F.sub(count, 1), 2), C.zeros((), dtype=D.int64))
    indices = F.gather(order, dim, k)
    values = F.gather(x, dim, indices)
    if not keepdim or input.ndim == 0:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    if input.ndim == 0:
        values, indices = values.reshape(()), indices.reshape(())
    return _values_indices(values, indices)


def _spread_mean(spread, input, dim, unbiased, keepdim, correction):
    u = unbiased if correction is None else bool(correction)
    if dim is None:
        return spread(input, unbiased=u), F.mean(input)
    return spread(input, dim, unbiased=u, keepdim=keepdim), F.mean(input, dim, keepdim)


@_export
def var_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _spread_mean(F.var, input, dim, unbiased, keepdim, correction)


@_export
def std_mean(input, dim=None, unbiased=True, keepdim=False, *, correction=None):
    return _spread_mean(F.std, input, dim, unbiased, keepdim, correction)


@_export
def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) shifted by the dimension's maximum so nothing overflows"""
    top = F.amax(input, dim, True)
    top = F.where(isinf(top), C.zeros_like(top), top)
    return F.add(F.log(F.cumsum(F.exp(F.sub(input, top)), dim)), top)


@_export
def trapezoid(y, x=None, *, dx=None, dim=-1):
    return _trapezoid_rule(F.sum, y, x, dx, dim)


def _trapezoid_rule(accumulate, y, x, dx, dim):
    """the trapezoids' areas along dim, summed (trapezoid) or running (cumulative_trapezoid)"""
    n = y.shape[dim]
    left, right = F.narrow(y, dim, 0, n - 1), F.narrow(y, dim, 1, n - 1)
    if x is not None:
        step = F.diff(x, dim=dim if x.ndim == y.ndim else -1)
        return accumulate(F.mul(F.mul(F.add(left, right), step), 0.5), dim)
    return F.mul(accumulate(F.add(left, right), dim), 0.5 * (1.0 if dx is None else dx))


trapz = trapezoid
__all__.append("trapz")


@_export
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """the p-norm distance of every row of x1 to every row of x2 (directly: no mm shortcut, so no
    cancellation); the gradient at distance 0 is 0, as torch's"""
    return _pnorm_last(F.sub(x1.unsqueeze(-2), x2.unsqueeze(-3)), p)


def _pnorm_last(diff, p):
    """the p-norm over the last dim, with gradient 0 at 0 (cdist's and pdist's)"""
    if p == 0:
        return F.sum(F.ne(diff, 0).to(diff.dtype), -1)
    if p == math.inf:
        return F.amax(F.abs(diff), -1)
    if p == 1:
        return F.sum(F.abs(diff), -1)
    power = F.sum(F.pow(F.abs(diff), p), -1)
    nonzero = F.gt(power, 0)
    safe = F.where(nonzero, power, C.ones_like(power))
    return F.where(nonzero, F.pow(safe, 1.0 / p), C.zeros_like(power))


@_export
def dist(input, other, p=2):
    return F.norm(F.sub(input, other).reshape(-1), p)


@_export
def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    exps = C.linspace(start, end, steps, dtype=D.float64)
    out = F.pow(base, exps).to(dtype or D.float32)
    if requires_grad:
        out.requires_grad_()
    return out


# ---------------------------------------------------------------- sampling
@_export
def bernoulli(input, p=None, *, generator=None):
    prob = input if p is None else C.full(input.shape, p, dtype=input.dtype)
    return F.lt(C.rand_like(prob), prob).to(input.dtype)


@_export
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None, requires_grad=False):
    if _is_t(mean) or _is_t(std):
        shape = broadcast_shapes(*[t.shape for t in (mean, std) if _is_t(t)])
        like = mean if _is_t(mean) else std
        return F.add(F.mul(C.randn(*shape, dtype=like.dtype), std), mean)
    out = F.add(F.mul(C.randn(*size, dtype=dtype or D.float32), std), mean)
    if requires_grad:
        out.requires_grad_()
    return out


@_export
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """rows of non-negative weights: with replacement, inverse-CDF draws; without, the weighted
    order of exponential races (keys u^(1/w), largest first), each index at most once"""
    probs = _float(input)
    rows = probs.reshape(-1, probs.shape[-1])
    if bool(F.any(F.lt(rows, 0)).item()) or not bool(F.all(isfinite(rows)).item()):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if bool(F.any(F.eq(F.sum(rows, -1), 0)).item()):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    n = rows.shape[-1]
    if replacement:
        cdf = F.cumsum(F.div(rows, F.sum(rows, -1, True)), -1)
        u = C.rand(rows.shape[0], num_samples, dtype=rows.dtype)
        out = F.clamp(searchsorted(cdf.contiguous(), u, right=True), 0, n - 1)
    else:
        if num_samples > n:
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
        u = C.rand(*rows.shape, dtype=rows.dtype)
        keys = F.where(F.gt(rows, 0), F.div(F.log(u), rows), C.full(rows.shape, -math.inf, dtype=rows.dtype))
        out = F.topk(keys, num_samples, -1).indices
    return out.reshape(*probs.shape[:-1], num_samples) if probs.ndim == 2 else out.reshape(num_samples)


@_export
def poisson(input, generator=None):
    """Poisson draws with the rates in input (oar's generator; not differentiable, as torch's): Knuth's
    product of uniforms below rate 10, Hormann's transformed rejection (PTRS) above, each as a vectorized
    loop that redraws only the elements not yet accepted."""
    if generator is not None:
        raise NotImplementedError("poisson: generator= is not offered (oar's generator is global)")
    from ._grad_mode import no_grad

    with no_grad():
        rate = input.detach().to(D.float64)
        if bool((rate < 0).any()) or bool(rate.isnan().any()):
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
        out = C.zeros_like(rate)
        small = rate < 10
        if bool(small.any()):
            out = F.where(small, _poisson_knuth(F.where(small, rate, C.zeros_like(rate))), out)
        if bool((~small).any()):
            out = F.where(small, out, _poisson_ptrs(F.where(small, C.full_like(rate, 10.0), rate)))
        return out.to(input.dtype)


@_export
def _standard_gamma(input, generator=None):
    """torch._standard_gamma: a Gamma(alpha, 1) draw per element of alpha (the standard_gamma op: Marsaglia and
    Tsang on oar's generator), differentiable in alpha by the implicit reparameterization gradient"""
    if generator is not None:
        raise NotImplementedError("_standard_gamma: generator= is not offered (oar's generator is global)")
    if not _is_t(input):
        raise TypeError(f"_standard_gamma(): argument 'input' must be Tensor, not {type(input).__name__}")
    return F.call("standard_gamma", (input,))


@_export
def _standard_gamma_grad(input, output):
    """torch._standard_gamma_grad: d output / d alpha of Gamma(alpha, 1) draws output at their quantiles"""
    return F.call("standard_gamma_grad", (input, output))


@_export
def _sample_dirichlet(input, generator=None):
    """torch._sample_dirichlet: Gamma(alpha_i, 1) draws normalized over the last dim (differentiable through
    the Gamma draws' reparameterization gradient)"""
    g = _standard_gamma(input, generator)
    return g / g.sum(-1, True)


def _poisson_knuth(rate):
    limit, prod = (-rate).exp(), C.rand(*rate.shape, dtype=D.float64) if rate.ndim else C.rand(1, dtype=D.float64)[0]
    count = C.zeros_like(rate)
    active = prod > limit
    while bool(active.any()):
        count = count + active.to(D.float64)
        u = C.rand(*rate.shape, dtype=D.float64) if rate.ndim else C.rand(1, dtype=D.float64)[0]
        prod = F.where(active, prod * u, prod)
        active = prod > limit
    return count


def _poisson_ptrs(rate):
    """Hormann (1993), "The transformed rejection method for generating Poisson random variables"."""
    sq, log_rate = rate.sqrt(), rate.log()
    b = 0.931 + 2.53 * sq
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    vr = 0.9277 - 3.6224 / (b - 2)
    result, pending = C.zeros_like(rate), C.ones_like(rate).to(D.bool_)
    draw = lambda: C.rand(*rate.shape, dtype=D.float64) if rate.ndim else C.rand(1, dtype=D.float64)[0]
    while bool(pending.any()):
        u, v = draw() - 0.5, draw()
        us = 0.5 - u.abs()
        k = ((2 * a / us + b) * u + rate + 0.43).floor()
        quick = (us >= 0.07) & (v <= vr)
        bad = (k < 0) | ((us < 0.013) & (v > us))
        slow = (v.log() + inv_alpha.log() - (a / (us * us) + b).log()) <= (-rate + k * log_rate - (k + 1).lgamma())
        accept = pending & (quick | (~bad & slow))
        result = F.where(accept, k, result)
        pending = pending & ~accept
    return result


# ---- more of torch's top-level functions
import collections as _collections  # noqa: E402
import itertools as _itertools  # noqa: E402

_AminMax = _collections.namedtuple("aminmax", ["min", "max"])
_Frexp = _collections.namedtuple("frexp", ["mantissa", "exponent"])


@_export
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over dim (all elements when None), as two reductions"""
    if dim is None:
        if keepdim:
            return _AminMax(F.amin(input, tuple(range(input.ndim)), True), F.amax(input, tuple(range(input.ndim)), True))
        return _AminMax(F.amin(input.reshape(-1), 0), F.amax(input.reshape(-1), 0))
    return _AminMax(F.amin(input, dim, keepdim), F.amax(input, dim, keepdim))


@_export
def argwhere(input):
    """the indices of the non-zero elements, one row each (nonzero's layout)"""
    return F.nonzero(input)


@_export
def combinations(input, r=2, with_replacement=False):
    """the r-element combinations of a 1-d tensor's elements, one per row, in itertools' order"""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return C.empty(0, dtype=input.dtype)
    pick = _itertools.combinations_with_replacement if with_replacement else _itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return C.empty(0, r, dtype=input.dtype)
    index = C.tensor([i for row in rows for i in row], dtype=D.int64)
    return F.index_select(input, 0, index).reshape(len(rows), r)


@_export
def copysign(input, other):
    """|input| with other's sign (-0.0 counts as negative), a float result"""
    x = _float(input)
    neg = signbit(other) if _is_t(other) else (math.copysign(1.0, other) < 0)
    if not _is_t(neg):
        return F.neg(F.abs(x)) if neg else F.abs(x)
    return F.where(neg, F.neg(F.abs(x)), F.abs(x))


@_export
def frexp(input):
    """(mantissa in [0.5, 1) in magnitude, int32 exponent) with input = mantissa * 2**exponent; 0 gives
    (0, 0). Normal and subnormal floats; inf and nan keep their value with exponent 0."""
    if not input.dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    a = F.abs(input)
    finite = F.logical_and(isfinite(input), F.ne(input, 0))
    safe = F.where(finite, a, _scalar_like(1.0, a))
    e = F.add(F.floor(F.log2(safe)), 1)
    m = F.div(input, F.pow(_scalar_like(2.0, e), e))
    # log2's rounding may put a power of two one step off: bring the magnitude into [0.5, 1)
    big = F.ge(F.abs(m), 1)
    m, e = F.where(big, F.mul(m, 0.5), m), F.where(big, F.add(e, 1), e)
    small = F.logical_and(F.lt(F.abs(m), 0.5), finite)
    m, e = F.where(small, F.mul(m, 2.0), m), F.where(small, F.sub(e, 1), e)
    m = F.where(finite, m, input)
    e = F.where(finite, e, _scalar_like(0.0, e))
    return _Frexp(m, e.to(D.int32))


@_export
def ldexp(input, other):
    """input * 2**other"""
    x = _float(input)
    two = _scalar_like(2.0, x)
    return F.mul(x, F.pow(two, other.to(x.dtype) if _is_t(other) else float(other)))


@_export
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)"""
    return _beta_alpha(input, F.outer(vec1, vec2), beta, alpha)


@_export
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * the sum over the batch of batch1[i] @ batch2[i]"""
    prod = F.sum(F.bmm(batch1, batch2), 0)
    return _beta_alpha(F._amp_low_like(input, prod), prod, beta, alpha)


@_export
def renorm(input, p, dim, maxnorm):
    """each slice along dim whose p-norm exceeds maxnorm scaled down to norm maxnorm"""
    d = dim % input.ndim
    others = tuple(i for i in range(input.ndim) if i != d)
    norm = F.pow(F.sum(F.pow(F.abs(input), p), others, True), 1.0 / p)
    factor = F.where(F.gt(norm, maxnorm), F.div(maxnorm, F.add(norm, 1e-7)), _scalar_like(1.0, norm))
    return F.mul(input, factor)


@_export
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """the running trapezoid-rule integral along dim (one element shorter than y)"""
    return _trapezoid_rule(F.cumsum, y, x, dx, dim)


@_export
def is_nonzero(input):
    """the truth of a one-element tensor"""
    if input.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if input.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.reshape(-1)[0].item() != 0)


@_export
def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


@_export
def is_signed(input):
    return input.dtype not in (D.uint8, D.bool_)


@_export
def positive(input):
    if input.dtype is D.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


# Tensor methods of the same names (those Tensor does not have yet), and the in-place forms
_METHODS = ["cholesky_solve", "cholesky_inverse", "triangular_solve", "matrix_exp", "svd", "qr", "pinverse",
            "lu_solve", "angle", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal", "signbit", "nan_to_num", "nansum",
            "nanmean", "reciprocal", "tan", "deg2rad", "rad2deg", "frac", "hypot", "logaddexp", "logaddexp2",
            "logit", "xlogy", "sinc", "sgn", "heaviside", "float_power", "fmax", "fmin", "logical_xor", "lerp",
            "addcmul", "addcdiv", "addmv", "baddbmm", "mv", "vdot", "inner", "ger", "kron", "movedim", "moveaxis",
            "swapaxes", "swapdims", "ravel", "fliplr", "flipud", "rot90", "tile", "diagonal", "diag_embed", "diag",
            "diagflat", "trace", "index_add", "index_fill", "index_copy", "scatter", "take", "take_along_dim",
            "isclose", "allclose", "equal", "isin", "bincount", "unique_consecutive", "kthvalue", "median", "msort",
            "scatter_reduce", "masked_scatter", "as_strided", "cross", "cov", "corrcoef", "det", "logdet", "slogdet",
            "inverse", "cholesky", "geqrf", "orgqr", "ormqr",
            "quantile", "nanquantile", "nanmedian", "logcumsumexp", "bernoulli", "multinomial", "hsplit", "vsplit", "dsplit",
            "aminmax", "argwhere", "copysign", "frexp", "ldexp", "addr", "addbmm", "renorm", "is_nonzero",
            "is_same_size", "is_signed", "positive"]
_INPLACE = ["nan_to_num", "reciprocal", "tan", "deg2rad", "rad2deg", "frac", "hypot", "logit", "xlogy",
            "sinc", "sgn", "heaviside", "float_power", "logical_xor", "lerp", "addcmul", "addcdiv", "addmv",
            "baddbmm", "index_add", "index_fill", "index_copy", "scatter", "scatter_reduce", "masked_scatter", "fmax", "fmin",
            "copysign", "ldexp", "addr", "addbmm", "renorm"]


def add_methods(tensor_class, inplace):
    for name in _METHODS:
        if not hasattr(tensor_class, name):
            setattr(tensor_class, name, globals()[name])
    for name in _INPLACE:
        if not hasattr(tensor_class, name + "_"):
            f = globals()[name]

            def method(self, *args, _f=f, **kwargs):
                return inplace(self, _f(self, *args, **kwargs))

            method.__name__ = name + "_"
            setattr(tensor_class, name + "_", method)
