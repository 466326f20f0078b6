"""torch's remaining everyday names, written on oar's functions: print options, the deterministic
and precision switches (oar's kernels are deterministic and always compute f32 in f32), dtype
queries (result_type, promote_types, can_cast), creation (asarray, frombuffer, randint_like, range),
the scatter forms of slicing (slice_scatter, select_scatter, diagonal_scatter), put / index_reduce,
histogram, the *_copy forms of the view ops, convolution / conv_tbc / constant_pad_nd / embedding
with torch's top-level signatures, and Tensor methods torch has where oar had only the function
(broadcast_to, roll, addmm, dist, ...). Installed by install() once the package is complete."""
import builtins
import collections
import math
import warnings

from . import _creation as C
from . import _dtype as D
from . import _functions as F
from ._format import set_printoptions  # noqa: F401  (re-exported by install)

_state = {"deterministic": False, "warn_only": False, "matmul_precision": "highest", "interop_threads": 1}


# ---------------------------------------------------------------- switches
def use_deterministic_algorithms(mode, *, warn_only=False):
    """Recorded for the queries below: oar's kernels are deterministic already (results do not depend on
    the thread count or on timing), so no algorithm changes and none raises."""
    if not isinstance(mode, builtins.bool):
        raise TypeError(f"use_deterministic_algorithms: expected a bool mode, got {type(mode).__name__}")
    _state["deterministic"], _state["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["warn_only"]


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode):
    """0 / "default": off; 1 / "warn" and 2 / "error": deterministic algorithms on (warn_only for 1)."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, "
                               f"but got {debug_mode}")
        debug_mode = _DEBUG_MODES[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode():
    return 0 if not _state["deterministic"] else 1 if _state["warn_only"] else 2


def set_float32_matmul_precision(precision):
    """"highest", "high" or "medium" (recorded: oar's float32 products always accumulate in float32;
    there is no TF32 or bf16 shortcut to allow)."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision: expected 'highest', 'high' or 'medium', got {precision!r}")
    _state["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _state["matmul_precision"]


def get_num_interop_threads():
    """oar runs one op at a time (its pool parallelizes inside ops): one inter-op thread."""
    return _state["interop_threads"]


def set_num_interop_threads(n):
    if not isinstance(n, int) or n <= 0:
        raise RuntimeError(f"Expected positive number of threads, got {n!r}")
    _state["interop_threads"] = n


def is_anomaly_enabled():
    from . import _C

    return _C.is_anomaly_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    from . import _C

    _C.set_detect_anomaly(bool(enabled) and check_nan)


def is_anomaly_check_nan_enabled():
    return is_anomaly_enabled()


# ---------------------------------------------------------------- dtype queries
def _category(d):
    return 2 if d.is_floating_point else 0 if d is D.bool_ else 1


def _scalar_dtype(v):
    return D.bool_ if isinstance(v, builtins.bool) else D.int64 if isinstance(v, int) else D.float32


def result_type(tensor1, tensor2):
    """The dtype an arithmetic op of the two gives (tensors or Python numbers; torch's rules: a number or
    a 0-d tensor sets the dtype only when it is of a higher category)."""
    def info(x):
        if isinstance(x, (builtins.bool, int, float)):
            return _scalar_dtype(x), 0   # 0: a number; 1: a 0-d tensor; 2: a tensor with dims
        if not hasattr(x, "dtype"):
            raise TypeError(f"result_type(): expected tensors or numbers, got {type(x).__name__}")
        return x.dtype, 1 if x.ndim == 0 else 2

    (da, ka), (db, kb) = info(tensor1), info(tensor2)
    if ka == kb:
        return D.promote(da, db)
    (hi, dh), (lo, dl) = ((ka, da), (kb, db)) if ka > kb else ((kb, db), (ka, da))
    if _category(dl) > _category(dh):
        return dl if lo == 1 else {2: D.float32, 1: D.int64, 0: D.bool_}[_category(dl)]
    return dh


def promote_types(type1, type2):
    return D.promote(D.to_dtype(type1, "promote_types"), D.to_dtype(type2, "promote_types"))


def can_cast(from_, to):
    """False where torch's casting rule forbids an implicit cast: floating to integral or bool, integral
    to bool."""
    return _category(D.to_dtype(from_, "can_cast")) <= _category(D.to_dtype(to, "can_cast"))


# ---------------------------------------------------------------- creation
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """A tensor from obj, sharing memory where it can (a tensor, or a NumPy array of oar's dtypes) unless
    copy=True; copy=False refuses what cannot be shared."""
    from ._tensor import Tensor

    if isinstance(obj, Tensor):
        out = obj
        if dtype is not None and D.to_dtype(dtype, "asarray") is not obj.dtype:
            if copy is False:
                raise ValueError("asarray: copy=False, but a change of dtype needs a copy")
            out = obj.to(dtype)
        elif copy:
            out = obj.clone()
    else:
        import numpy as np

        if isinstance(obj, np.ndarray) and not copy and dtype is None:
            out = C.from_numpy(obj)
        elif copy is False and not isinstance(obj, np.ndarray):
            raise ValueError(f"asarray: copy=False, but a {type(obj).__name__} cannot share memory with a tensor")
        else:
            out = C.tensor(obj, dtype=dtype)
    if device is not None:
        out = out.to(device)
    if requires_grad:
        out.requires_grad_(True)
    return out


def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """A 1-d tensor over the bytes of buffer (shared, as torch's: writes show in both)."""
    import numpy as np

    dt = D.to_dtype(dtype, "frombuffer")
    names = {v: k for k, v in D._NUMPY.items()}
    if dt not in names:
        raise TypeError(f"frombuffer: {dt} has no NumPy counterpart to read the bytes as")
    np_dtype = np.dtype(names[dt])
    nbytes = len(memoryview(buffer).cast("B"))
    if offset < 0 or offset > nbytes:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({nbytes} bytes)")
    if count == 0 or (count < 0 and (nbytes - offset) % np_dtype.itemsize):
        raise ValueError(f"frombuffer: buffer length ({nbytes - offset} bytes after offset) must be a multiple "
                         f"of element size ({np_dtype.itemsize})")
    arr = np.frombuffer(buffer, dtype=np_dtype, count=count, offset=offset)
    out = C.from_numpy(arr)
    if requires_grad:
        out.requires_grad_(True)
    return out


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None, requires_grad=False,
                 memory_format=None):
    """randint over input's shape (high alone: [0, high))."""
    if high is None:
        low, high = 0, low
    return C.randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, requires_grad=requires_grad)


def range(start=0, end=None, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):
    """torch.range (deprecated there too): end included, float32 by default."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values "
                  "in [start, end).", UserWarning, stacklevel=2)
    if end is None:
        start, end = 0, start
    n = int(math.floor((end - start) / step)) + 1
    return (C.arange(n, dtype=D.float64) * step + start).to(dtype or D.float32).requires_grad_(requires_grad)


def fill(input, value):
    return C.full_like(input, value)


# ---------------------------------------------------------------- scatter forms of slicing
def _assign(input, src, index):
    out = input.clone()
    out[index] = src
    return out


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """input with input[..., start:end:step, ...] (along dim) replaced by src."""
    index = (builtins.slice(None),) * (dim % input.ndim) + (builtins.slice(start, end, step),)
    return _assign(input, src, index)


def select_scatter(input, src, dim, index):
    return _assign(input, src, (builtins.slice(None),) * (dim % input.ndim) + (index,))


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """input with its diagonal (offset, dim1, dim2) replaced by src, as torch.diagonal_scatter."""
    d1, d2 = dim1 % input.ndim, dim2 % input.ndim
    n1, n2 = input.shape[d1], input.shape[d2]
    rows = [i for i in builtins.range(n1) if 0 <= i + offset < n2]
    if tuple(src.shape) != tuple(input.diagonal(offset, d1, d2).shape):
        raise RuntimeError(f"diagonal_scatter: expected src of shape {list(input.diagonal(offset, d1, d2).shape)}, "
                           f"got {list(src.shape)}")
    moved = input.movedim((d1, d2), (0, 1))
    index = (C.tensor(rows, dtype=D.int64), C.tensor([i + offset for i in rows], dtype=D.int64))
    out = _assign(moved, src.movedim(-1, 0), index)
    return out.movedim((0, 1), (d1, d2))


def put(input, index, source, accumulate=False):
    """input with the elements at flat positions index (of the row-major flattening) set to source (added
    with accumulate=True)."""
    flat = input.reshape(-1)
    idx = index.reshape(-1).to(D.int64) % builtins.max(flat.numel(), 1)
    return flat.index_put((idx,), source.reshape(-1), accumulate).reshape(tuple(input.shape))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """Along dim, row index[i] of input reduced (prod, mean, amax, amin) with row i of source."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    d = dim % builtins.max(input.ndim, 1)
    shape = [1] * source.ndim
    shape[d] = -1
    expanded = index.to(D.int64).reshape(shape).expand(*source.shape)
    return input.scatter_reduce(d, expanded, source, reduce, include_self=include_self)


# ---------------------------------------------------------------- histogram
histogram_result = collections.namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input, bins=100, *, range=None, weight=None, density=False):
    """(hist, bin_edges): bins equal-width bins over range (default: the input's min and max) or the
    given increasing edges; the last bin includes its right edge; weight sums weights instead of
    counting; density divides by the total and the bin widths."""
    from ._tensor import Tensor

    x = input.reshape(-1).to(D.float64)
    if isinstance(bins, Tensor):
        edges = bins.to(D.float64)
    else:
        if range is None:
            lo, hi = (x.min().item(), x.max().item()) if x.numel() else (0.0, 0.0)
        else:
            lo, hi = float(range[0]), float(range[1])
        if lo > hi:
            raise RuntimeError(f"histogram: min should not exceed max, got min {lo} max {hi}")
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        edges = C.linspace(lo, hi, bins + 1, dtype=D.float64)
    nb = edges.numel() - 1
    w = weight.reshape(-1).to(D.float64) if weight is not None else C.ones_like(x)
    inside = (x >= edges[0]) & (x <= edges[-1])
    from ._compositions import bucketize

    pos = bucketize(x, edges, right=True) - 1
    pos = F.clamp(pos, 0, nb - 1)       # x == the last edge falls in the last bin
    hist = C.zeros(nb, dtype=D.float64).index_add(0, pos, F.where(inside, w, C.zeros_like(w)))
    if density:
        hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
    return histogram_result(hist.to(input.dtype), edges.to(input.dtype))


# ---------------------------------------------------------------- numerical gradient
def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient: the derivative estimated along each dim by central differences (second order,
    exact for quadratics, also for uneven coordinates) inside and one-sided differences of order
    edge_order (1 or 2) at the ends. spacing: one number, a number per dim, or a 1-d tensor of
    coordinates per dim. A tuple with one tensor per dim."""
    from ._tensor import Tensor

    dims = list(builtins.range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [d % input.ndim for d in dims]
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order}")
    if isinstance(spacing, (int, float)) or isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = [spacing] * len(dims)
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                           f"{len(dims)} (the dims), but got a list of length {len(spacing)}")
    out = []
    for d, h in zip(dims, spacing):
        n = input.shape[d]
        if n < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1, got "
                               f"size {n} at dim {d}")
        out.append(_gradient_1d(input, d, n, h, edge_order))
    return tuple(out)


def _gradient_1d(f, d, n, h, edge_order):
    from ._tensor import Tensor

    at = lambda start, length=1: F.narrow(f, d, start, length)
    shape = [1] * f.ndim
    shape[d] = -1
    if isinstance(h, Tensor) and h.ndim == 1:   # coordinates: uneven steps
        x = h.to(f.dtype if f.is_floating_point() else D.float32)
        steps = (x[1:] - x[:-1])
        hl, hr = steps[:-1].reshape(shape), steps[1:].reshape(shape)
        inner = (hl * hl * at(2, n - 2) - hr * hr * at(0, n - 2) + (hr * hr - hl * hl) * at(1, n - 2)) / (
            hl * hr * (hl + hr))
        a1, a2 = steps[0], steps[1] if n > 2 else steps[0]
        b1, b2 = steps[-2] if n > 2 else steps[-1], steps[-1]
        if edge_order == 1:
            first = (at(1) - at(0)) / a1
            last = (at(n - 1) - at(n - 2)) / b2
        else:
            first = (-(2 * a1 + a2) / (a1 * (a1 + a2)) * at(0) + (a1 + a2) / (a1 * a2) * at(1)
                     - a1 / (a2 * (a1 + a2)) * at(2))
            last = (b2 / (b1 * (b1 + b2)) * at(n - 3) - (b1 + b2) / (b1 * b2) * at(n - 2)
                    + (2 * b2 + b1) / (b2 * (b1 + b2)) * at(n - 1))
    else:
        h = float(h)
        inner = (at(2, n - 2) - at(0, n - 2)) / (2 * h)
        if edge_order == 1:
            first, last = (at(1) - at(0)) / h, (at(n - 1) - at(n - 2)) / h
        else:
            first = (-3 * at(0) + 4 * at(1) - at(2)) / (2 * h)
            last = (3 * at(n - 1) - 4 * at(n - 2) + at(n - 3)) / (2 * h)
    return F.cat([first, inner, last], d) if n > 2 else F.cat([first, last], d)


# ---------------------------------------------------------------- top-level signatures
def constant_pad_nd(input, pad, value=0):
    from .nn import functional as NF

    return NF.pad(input, pad, mode="constant", value=value)


def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """torch.convolution: conv1d/2d/3d or their transposes by the weight's rank."""
    from .nn import functional as NF

    k = weight.ndim - 2
    if k not in (1, 2, 3):
        raise RuntimeError(f"convolution: expected a 3-, 4- or 5-d weight, got {weight.ndim}-d")
    if transposed:
        fn = (NF.conv_transpose1d, NF.conv_transpose2d, NF.conv_transpose3d)[k - 1]
        return fn(input, weight, bias, stride, padding, output_padding, groups, dilation)
    fn = (NF.conv1d, NF.conv2d, NF.conv3d)[k - 1]
    return fn(input, weight, bias, stride, padding, dilation, groups)


def conv_tbc(input, weight, bias, pad=0):
    """The time-batch-channel 1-d convolution (fairseq's): input [T, B, Cin], weight [K, Cin, Cout],
    bias [Cout], pad zeros at both ends of time; out [T + 2 pad - K + 1, B, Cout]."""
    from .nn import functional as NF

    if input.ndim != 3 or weight.ndim != 3 or bias.ndim != 1:
        raise RuntimeError(f"conv_tbc: expected a 3-d input, 3-d weight and 1-d bias, got {input.ndim}-d, "
                           f"{weight.ndim}-d and {bias.ndim}-d")
    out = NF.conv1d(input.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=pad)
    return out.permute(2, 0, 1)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """torch.embedding (weight first; padding_idx -1: none)."""
    from .nn import functional as NF

    return NF.embedding(indices, weight, padding_idx=None if padding_idx == -1 else padding_idx,
                        scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    return F.sqrt((input * input).sum(dim=dim, keepdim=keepdim))


def nuclear_norm(input, dim=None, keepdim=False):
    from . import linalg

    if isinstance(dim, builtins.bool):   # nuclear_norm(input, keepdim) positionally
        dim, keepdim = None, dim
    return linalg.matrix_norm(input, "nuc", dim=dim if dim is not None else (-2, -1), keepdim=keepdim)


def split_with_sizes(input, split_sizes, dim=0):
    if builtins.sum(split_sizes) != input.shape[dim]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {input.shape[dim]} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes={list(split_sizes)}")
    return input.split(list(split_sizes), dim)


def nextafter(input, other):
    """The next representable value after input toward other, elementwise (NumPy's nextafter; not
    differentiable, as torch's)."""
    import numpy as np

    b = other.detach().numpy() if hasattr(other, "numpy") else other
    return C.tensor(np.nextafter(input.detach().numpy(), np.asarray(b, dtype=input.detach().numpy().dtype)),
                    dtype=input.dtype)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """An uninitialized tensor with the given strides: a view over a buffer just large enough."""
    if len(size) != len(stride):
        raise RuntimeError(f"mismatch in length of strides and shape: {len(size)} and {len(stride)}")
    need = 1 + builtins.sum((n - 1) * st for n, st in zip(size, stride)) if all(size) else 0
    base = C.empty(need, dtype=dtype)
    out = base.as_strided(tuple(size), tuple(stride)) if need else C.empty(*size, dtype=dtype)
    return out.requires_grad_(requires_grad) if requires_grad else out


def set_default_tensor_type(t):
    """torch.FloatTensor (oar's default already) is accepted; other types name a default dtype oar keeps
    at float32."""
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    if name.split(".")[-1] not in ("FloatTensor", "Tensor"):
        raise NotImplementedError(f"set_default_tensor_type: oar's default tensor type is torch.FloatTensor "
                                  f"(float32, on the CPU), got {name}")


def _copying(fn):
    def copy_fn(input, *args, **kwargs):
        out = fn(input, *args, **kwargs)
        return [t.clone() for t in out] if isinstance(out, (list, tuple)) else out.clone()

    copy_fn.__name__ = fn.__name__ + "_copy" if hasattr(fn, "__name__") else "copy"
    return copy_fn


# the torch.<view>_copy functions: the view op, then a copy (torch's out-of-place forms of its views)
_VIEW_COPIES = {"alias": lambda t: t, "detach": lambda t: t.detach(), "diagonal": lambda t, *a, **k: t.diagonal(*a, **k),
                "expand": lambda t, *a, **k: t.expand(*a, **k), "permute": lambda t, *a: t.permute(*a),
                "select": lambda t, d, i: t.select(d, i), "slice": lambda t, dim=0, start=None, end=None, step=1:
                t[(builtins.slice(None),) * (dim % t.ndim) + (builtins.slice(start, end, step),)],
                "split": lambda t, *a, **k: t.split(*a, **k), "split_with_sizes": split_with_sizes,
                "squeeze": lambda t, *a: t.squeeze(*a), "t": lambda t: t.t(),
                "transpose": lambda t, a, b: t.transpose(a, b), "unbind": lambda t, dim=0: t.unbind(dim),
                "unfold": lambda t, *a: t.unfold(*a), "unsqueeze": lambda t, d: t.unsqueeze(d),
                "view": lambda t, *a: t.view(*a), "as_strided": lambda t, *a, **k: t.as_strided(*a, **k)}


# ---------------------------------------------------------------- Tensor methods
def _resize_(self, *sizes):
    """Tensor.resize_: the tensor takes the new shape over its elements in row-major order; growing adds
    zeros (torch leaves them uninitialized)."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    n = math.prod(sizes)
    flat = self.reshape(-1)
    if n > flat.numel():
        flat = F.cat([flat, C.zeros(n - flat.numel(), dtype=self.dtype)])
    self._set_(flat[:n].reshape(*sizes).clone())
    return self


def _elementwise_python(name, self, fn, *others):
    """apply_ / map_ / map2_: fn called on each element (Python numbers), the results written into self;
    CPU tensors outside autograd only, as torch's."""
    import numpy as np

    if self._device != 0:
        raise TypeError(f"{name} is only implemented on CPU tensors")
    if self.requires_grad:
        raise RuntimeError(f"{name}: a tensor that requires grad cannot be changed by a Python function; "
                           f"use .detach() or no_grad")
    arrays = [self.numpy()] + [np.broadcast_to(o.numpy(), tuple(self.shape)) for o in others]
    out = np.array([fn(*(a.item() for a in vals)) for vals in zip(*(a.reshape(-1) for a in arrays))])
    from ._tensor import _inplace

    return _inplace(self, C.tensor(out.reshape(tuple(self.shape)) if out.size else arrays[0], dtype=self.dtype))


def _view_in_place(op):
    """t_, transpose_, swapaxes_: the tensor becomes the view op's result (torch's in-place view ops)."""
    def method(self, *args):
        self._set_(op(self, *args))
        return self

    return method


def _dist(self, other, p=2):
    return F.norm(self - other, p)


def _in_place(op):
    def method(self, *args, **kwargs):
        from ._tensor import _inplace

        return _inplace(self, op(self, *args, **kwargs).to(self.dtype))

    return method


_COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "greater": "gt",
                "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne"}


def install(namespace, tensor_class):
    """Adds the names above to the package namespace and their methods to tensor_class (where missing)."""
    top = {name: fn for name, fn in globals().items()
           if callable(fn) and not name.startswith("_") and name not in ("install", "histogram_result")
           and getattr(fn, "__module__", None) == __name__}
    top["set_printoptions"] = set_printoptions
    top["broadcast_to"] = lambda input, size: input.expand(*size)
    top["matrix_power"] = lambda input, n: namespace["linalg"].matrix_power(input, n)
    top["mvlgamma"] = lambda input, p: namespace["special"].multigammaln(input, p)
    top["bilinear"] = namespace["nn"].functional.bilinear
    top["adaptive_max_pool1d"] = namespace["nn"].functional.adaptive_max_pool1d
    top["max_pool1d_with_indices"] = namespace["nn"].functional.max_pool1d_with_indices
    top["detach"] = lambda input: input.detach()
    top["detach_"] = lambda input: input.detach_()
    top["zero_"] = lambda input: input.zero_()
    top["fill_"] = lambda input, value: input.fill_(value)
    top["index_put"] = lambda input, indices, values, accumulate=False: input.index_put(indices, values, accumulate)
    top["index_put_"] = lambda input, indices, values, accumulate=False: input.index_put_(indices, values, accumulate)
    top["resize_as_"] = lambda input, other: input.resize_as_(other)
    for name in ("clamp_", "gcd_", "lcm_", "ldexp_", "addmv_"):
        top[name] = lambda input, *args, _m=name, **kwargs: getattr(input, _m)(*args, **kwargs)
    for name in ("conj", "resolve_conj", "resolve_neg", "is_conj", "is_neg", "adjoint"):
        top[name] = lambda input, _m=name: getattr(input, _m)()
    top["is_inference"] = lambda input: False
    top["get_device"] = lambda input: -1 if input._device == 0 else 0
    top["is_storage"] = lambda obj: False
    top["unsafe_split"] = lambda input, split_size, dim=0: input.split(split_size, dim)
    top["unsafe_chunk"] = lambda input, chunks, dim=0: input.chunk(chunks, dim)
    top["unsafe_split_with_sizes"] = split_with_sizes
    for name, fn in _VIEW_COPIES.items():
        top[name + "_copy"] = _copying(fn)
    for name, fn in top.items():
        if name not in namespace:
            namespace[name] = fn

    methods = {"broadcast_to": top["broadcast_to"], "roll": F.roll,
               "addmm": namespace["addmm"], "dist": _dist, "matrix_power": top["matrix_power"],
               "mvlgamma": top["mvlgamma"], "split_with_sizes": split_with_sizes,
               "unsafe_split": top["unsafe_split"], "unsafe_chunk": top["unsafe_chunk"],
               "slice_scatter": slice_scatter, "select_scatter": select_scatter,
               "diagonal_scatter": diagonal_scatter, "put": put, "index_reduce": index_reduce,
               "histogram": histogram, "nextafter": nextafter, "prelu": namespace["nn"].functional.prelu,
               "hardshrink": namespace["nn"].functional.hardshrink,
               "adjoint": lambda self: self.transpose(-2, -1), "resolve_conj": lambda self: self,
               "resolve_neg": lambda self: self, "conj": lambda self: self, "conj_physical": lambda self: self.clone(),
               "is_conj": lambda self: False, "is_neg": lambda self: False, "is_complex": lambda self: False,
               "char": lambda self: self.to(D.int8), "resize_": _resize_,
               "apply_": lambda self, fn: _elementwise_python("apply_", self, fn),
               "map_": lambda self, other, fn: _elementwise_python("map_", self, fn, other),
               "map2_": lambda self, a, b, fn: _elementwise_python("map2_", self, fn, a, b),
               "resize_as_": lambda self, other: _resize_(self, tuple(other.shape)),
               "t_": _view_in_place(lambda t: t.t()), "transpose_": _view_in_place(lambda t, a, b: t.transpose(a, b)),
               "swapaxes_": _view_in_place(lambda t, a, b: t.transpose(a, b)),
               "swapdims_": _view_in_place(lambda t, a, b: t.transpose(a, b))}
    methods.update({
        "stft": lambda self, *args, **kwargs: namespace["stft"](self, *args, **kwargs),
        "istft": lambda self, *args, **kwargs: namespace["istft"](self, *args, **kwargs),
        "narrow_copy": lambda self, dim, start, length: self.narrow(dim, start, length).clone(),
        "unsafe_split_with_sizes": split_with_sizes, "to_dense": lambda self: self,
        "new_empty_strided": lambda self, size, stride, dtype=None, **kw: empty_strided(
            size, stride, dtype=dtype or self.dtype), "is_inference": lambda self: False,
        "is_shared": lambda self: False, "is_pinned": lambda self: False, "has_names": lambda self: False,
        "cfloat": lambda self: namespace["complex"](self.float(), C.zeros_like(self.float())),
        "cdouble": lambda self: namespace["complex"](self.double(), C.zeros_like(self.double()))})
    for name, fn in methods.items():
        if not hasattr(tensor_class, name):
            setattr(tensor_class, name, fn)
    for name in ("addmm", "cumsum", "tril", "triu", "mvlgamma", "put", "index_reduce"):
        if not hasattr(tensor_class, name + "_"):
            setattr(tensor_class, name + "_", _in_place(getattr(tensor_class, name)))
    for name, op in _COMPARISONS.items():
        if not hasattr(tensor_class, name + "_"):
            setattr(tensor_class, name + "_", _in_place(getattr(F, op)))
    for name, get in (("mH", lambda self: self.transpose(-2, -1)), ("H", _conj_t), ("is_cpu", lambda self: self._device == 0),
                      ("is_sparse", lambda self: False), ("itemsize", lambda self: self.dtype.itemsize),
                      ("nbytes", lambda self: self.numel() * self.dtype.itemsize),
                      ("real", lambda self: self), ("imag", _no_imag), ("layout", lambda self: namespace["strided"]),
                      ("names", lambda self: (None,) * self.ndim),
                      *((flag, lambda self: False) for flag in ("is_meta", "is_mps", "is_xpu", "is_ipu", "is_vulkan",
                                                                "is_mkldnn", "is_nested", "is_ort", "is_sparse_csr"))):
        if not hasattr(tensor_class, name):
            setattr(tensor_class, name, property(get))


def _no_imag(self):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _conj_t(self):
    """Tensor.H: the conjugate transpose of a matrix (a 0-d tensor is itself)."""
    if self.ndim not in (0, 2):
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.ndim}-D tensor.")
    return self if self.ndim == 0 else self.t()
