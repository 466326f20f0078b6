"""More of torch.Tensor's methods, written on oar's functions: unfold (sliding windows), the in-place
scatter_add_ and index_put_ (accumulate adds repeated positions), fill_diagonal_, sum_to_size, diff
and histc as methods, and the in-place random fills (bernoulli_, exponential_, geometric_,
log_normal_, cauchy_, random_) from oar's generator. Installed on Tensor by add_methods."""
import math

from . import _creation as C
from . import _dtype as D
from . import _functions as F
from ._grad_mode import no_grad


def unfold(self, dimension, size, step):
    """windows of `size` elements every `step` along dimension, as a new last dim (a copy, where torch
    gives a view; gradients flow to every window's elements)"""
    d = dimension % max(self.ndim, 1)
    n = self.shape[d] if self.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    idx = (C.arange(count, dtype=D.int64).unsqueeze(1) * step + C.arange(size, dtype=D.int64).unsqueeze(0))
    x = self if self.ndim else self.reshape(1)
    picked = F.index_select(x, d, idx.reshape(-1))
    shape = list(x.shape)
    shape[d:d + 1] = [count, size]
    return picked.reshape(*shape).movedim(d + 1, -1)


def scatter_add_(self, dim, index, src):
    from ._tensor import _inplace

    return _inplace(self, F.scatter_add(self, dim, index, src))


def index_put(self, indices, values, accumulate=False):
    return self.clone().index_put_(indices, values, accumulate)


def index_put_(self, indices, values, accumulate=False):
    """self[indices] = values; with accumulate, values add up where indices repeat"""
    from ._compositions import broadcast_tensors, index_add
    from ._tensor import _inplace

    indices = tuple(indices)
    if not accumulate:
        self[indices] = values
        return self
    m = len(indices)
    lead = tuple(self.shape[:m])
    flat = None
    for i, ix in zip(range(m), broadcast_tensors(*indices)):
        ix = F.where(F.lt(ix, 0), F.add(ix, lead[i]), ix).to(D.int64)
        flat = ix if flat is None else F.add(F.mul(flat, lead[i]), ix)
    rest = tuple(self.shape[m:])
    rows = math.prod(lead)
    vals = values if hasattr(values, "shape") else C.tensor(values, dtype=self.dtype)
    vals = vals.to(self.dtype).expand(*flat.shape, *rest).reshape(-1, *rest)
    out = index_add(self.reshape(rows, *rest), 0, flat.reshape(-1), vals).reshape(*self.shape)
    return _inplace(self, out)


def fill_diagonal_(self, fill_value, wrap=False):
    """the main diagonal (every dim of equal size, or 2-d) set to fill_value; wrap: a tall matrix's
    diagonal starts again after each N+1 rows, as torch's"""
    if self.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if self.ndim > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    strides = [math.prod(self.shape[i + 1:]) for i in range(self.ndim)]
    step = sum(strides)
    total = math.prod(self.shape)
    end = total if (wrap and self.ndim == 2) else min(self.shape) * step - step + 1
    pos = C.arange(0, min(end, total), step, dtype=D.int64)
    flat = self.reshape(-1).clone()
    with no_grad():
        flat[pos] = fill_value
    from ._tensor import _inplace

    return _inplace(self, flat.reshape(*self.shape))


def sum_to_size(self, *size):
    """summed over the dims a broadcast from `size` would have expanded"""
    size = tuple(size[0]) if len(size) == 1 and not isinstance(size[0], int) else size
    lead = self.ndim - len(size)
    out = F.sum(self, tuple(range(lead))) if lead > 0 else self
    dims = tuple(i for i, s in enumerate(size) if s == 1 and out.shape[i] != 1)
    return F.sum(out, dims, True) if dims else out


def _fill(self, values):
    with no_grad():
        self.copy_(values.to(self.dtype))
    return self


def bernoulli_(self, p=0.5, *, generator=None):
    prob = p if hasattr(p, "shape") else C.full(tuple(self.shape), float(p))
    return _fill(self, F.lt(C.rand(*self.shape), prob.to(D.float32)))


def exponential_(self, lambd=1.0, *, generator=None):
    u = C.rand(*self.shape, dtype=D.float64)
    return _fill(self, F.div(F.neg(F.log1p(F.neg(u))), lambd))


def geometric_(self, p, *, generator=None):
    """the number of Bernoulli(p) trials to the first success (1, 2, ...)"""
    u = C.rand(*self.shape, dtype=D.float64)
    return _fill(self, F.add(F.floor(F.div(F.log1p(F.neg(u)), math.log1p(-p))), 1))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    return _fill(self, F.exp(F.add(F.mul(C.randn(*self.shape, dtype=D.float64), std), mean)))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    u = C.rand(*self.shape, dtype=D.float64)
    angle = F.mul(F.sub(u, 0.5), math.pi)
    return _fill(self, F.add(F.mul(F.div(F.sin(angle), F.cos(angle)), sigma), median))


def random_(self, from_=0, to=None, *, generator=None):
    """integers uniform in [from, to) (to None: [0, 2**mantissa bits] for floats, the dtype's max for
    integers, as torch's)"""
    if to is None:
        from_, to = (0, from_) if from_ else (0, None)
    if to is None:
        to = {D.float32: 2 ** 24 + 1, D.float64: 2 ** 53 + 1, D.float16: 2 ** 11 + 1, D.bfloat16: 2 ** 8 + 1,
              D.int64: 2 ** 63 - 1, D.int32: 2 ** 31 - 1, D.int16: 2 ** 15 - 1, D.int8: 2 ** 7 - 1, D.uint8: 2 ** 8 - 1,
              D.bool_: 2}.get(self.dtype, 2 ** 24 + 1)
    u = C.rand(*self.shape, dtype=D.float64)
    return _fill(self, F.add(F.floor(F.mul(u, float(to - from_))), float(from_)))


_METHODS = ("unfold", "scatter_add_", "index_put", "index_put_", "fill_diagonal_", "sum_to_size", "bernoulli_",
            "exponential_", "geometric_", "log_normal_", "cauchy_", "random_")


def add_methods(tensor_class):
    for name in _METHODS:
        if not hasattr(tensor_class, name):
            setattr(tensor_class, name, globals()[name])
    for name in ("diff", "histc"):
        if not hasattr(tensor_class, name):
            setattr(tensor_class, name, getattr(F, name))
