"""t[index] and t[index] = v with torch's rules: ints, slices, None and Ellipsis give views;
bool and integer tensors (or lists) select elements (a copy, differentiable)."""
import builtins
import numbers

from . import _C
from . import _dtype as D
from . import _functions as F

_is_t = lambda x: isinstance(x, _C.TensorBase)


def _as_index_tensor(i):
    from ._creation import tensor

    if _is_t(i):
        return i
    return tensor(i)


def _expand_index(t, index):
    if not isinstance(index, tuple):
        index = (index,)
    index = tuple(_as_index_tensor(i) if isinstance(i, list) else i for i in index)
    consumed = builtins.sum(
        (i.ndim if _is_t(i) and i._dtype == D.bool_.code else 1) for i in index
        if i is not None and i is not Ellipsis)
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if consumed > t.ndim:
        raise IndexError(f"too many indices for tensor of dimension {t.ndim}")
    out = []
    for i in index:
        if i is Ellipsis:
            out += [slice(None)] * (t.ndim - consumed)
        else:
            out.append(i)
    return out


def getitem(t, index):
    items = _expand_index(t, index)
    x, dim, advanced = t, 0, []
    for i in items:
        if i is None:
            x = F.unsqueeze(x, dim)
            dim += 1
        elif isinstance(i, builtins.bool):
            x = F.unsqueeze(x, dim)
            if not i:
                x = F.narrow(x, dim, 0, 0)
            dim += 1
        elif isinstance(i, numbers.Integral) or (_is_t(i) and i.ndim == 0 and not i.is_floating_point()
                                                 and i._dtype != D.bool_.code):
            i = int(i)
            n = x.shape[dim]
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {n}")
            x = F.select(x, dim, i)
        elif isinstance(i, slice):
            n = x.shape[dim]
            start, stop, step = i.indices(n)
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            stop = builtins.max(stop, start)
            x = _C.call(_SLICE, (x,), {"dim": dim, "start": start, "end": stop, "step": step})
            dim += 1
        elif _is_t(i):
            advanced.append((dim, i))
            dim += i.ndim if i._dtype == D.bool_.code else 1
        else:
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             f"valid indices (got {type(i).__name__})")
    if not advanced:
        return x
    if len(advanced) > 1:
        return _multi_advanced(x, advanced)
    d, idx = advanced[0]
    if idx._dtype == D.bool_.code:
        return _bool_index(x, d, idx)
    if idx.is_floating_point():
        raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    n = x.shape[d]
    flat = F.reshape(idx, (-1,)).to(D.int64)
    if flat.numel() and (builtins.bool((flat >= n).any()) or builtins.bool((flat < -n).any())):
        bad = [v for v in flat.tolist() if not -n <= v < n][0]
        raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {n}")
    flat = F.where(flat < 0, flat + n, flat)
    picked = F.index_select(x, d, flat)
    shape = list(x.shape)
    return F.reshape(picked, shape[:d] + list(idx.shape) + shape[d + 1:])


_SLICE = None


def _bool_index(x, d, mask):
    k = mask.ndim
    shape = list(x.shape)
    if list(mask.shape) != shape[d:d + k]:
        raise IndexError(f"The shape of the mask {list(mask.shape)} at index {d} does not match the shape of the "
                         f"indexed tensor {shape}")
    merged = F.reshape(x, shape[:d] + [-1] + shape[d + k:]) if k != 1 else x
    idx = F.nonzero(F.reshape(mask, (-1,)), as_tuple=True)[0]
    return F.index_select(merged, d, idx)


def _multi_advanced(x, advanced):
    """Several integer tensor indices on consecutive dims: one linear index into those dims merged."""
    dims = [d for d, _ in advanced]
    if dims != list(range(dims[0], dims[0] + len(dims))) or builtins.any(i._dtype == D.bool_.code for _, i in advanced):
        raise IndexError("oar: several tensor indices must be integer tensors on consecutive dims (use one index at "
                         "a time otherwise)")
    shape = list(x.shape)
    d0 = dims[0]
    lin = None
    for d, idx in advanced:
        n = shape[d]
        idx = idx.to(D.int64)
        idx = F.where(idx < 0, idx + n, idx)
        lin = idx if lin is None else lin * n + idx
    merged = F.reshape(x, shape[:d0] + [-1] + shape[dims[-1] + 1:])
    picked = F.index_select(merged, d0, F.reshape(lin, (-1,)))
    return F.reshape(picked, shape[:d0] + list(lin.shape) + shape[dims[-1] + 1:])


def setitem(t, index, value):
    if _C.is_grad_enabled() and (t.requires_grad or (_is_t(value) and value.requires_grad)):
        if t.is_leaf and t.requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        return _setitem_tracked(t, index, value)
    items = _expand_index(t, index)
    if not builtins.any(_is_t(i) and not (i.ndim == 0 and i._dtype != D.bool_.code) for i in items):
        view = getitem(t, index)  # basic indexing: a view sharing t's storage
        if not _is_t(value):
            view.fill_(value)
        else:
            view.copy_(value.to(t.dtype))
        return
    # advanced indexing writes through numpy, which shares t's memory
    import numpy as np

    arr = t.numpy()
    conv = tuple(i.numpy() if _is_t(i) else i for i in (index if isinstance(index, tuple) else (index,)))
    arr[conv if len(conv) != 1 else conv[0]] = value.detach().numpy() if _is_t(value) else value


def _setitem_tracked(t, index, value):
    """Assignment that autograd sees (into a tensor it tracks, or of a value it tracks), as torch's
    copy_slices: t becomes where(assigned, value placed there, t), a new node of the graph, so the
    gradient reaches the old t outside the assigned elements and the value inside. The positions
    are those of the same indexing applied to a tensor of flat positions."""
    from ._creation import arange, full, ones, zeros

    n = t.numel()
    pos = getitem(arange(n, device=t.device).reshape(t.shape), index)
    flat = pos.reshape(-1)
    advanced = builtins.any(_is_t(i) for i in _expand_index(t, index))  # basic indexing never repeats
    if advanced and flat.numel() and F.unique(flat).numel() != flat.numel():
        raise RuntimeError("oar: assigning through an index that names an element twice is not offered while "
                           "autograd records (which value wins is undefined); make the indices unique")
    v = value.to(t.dtype) if _is_t(value) else full((), value, dtype=t.dtype, device=t.device)
    v = v.expand(*pos.shape).reshape(-1)
    placed = F.scatter_add(zeros(n, dtype=t.dtype, device=t.device), 0, flat, v)
    count = F.scatter_add(zeros(n, dtype=D.float32, device=t.device), 0, flat, ones(flat.numel(), device=t.device))
    t._set_(F.where(F.gt(count, 0), placed, t.reshape(-1)).reshape(t.shape))


def _init():
    global _SLICE
    from ._ops import ID

    _SLICE = ID["slice"]


_init()
