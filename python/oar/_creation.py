"""Tensor creation with torch's names and defaults (float32 unless said otherwise)."""
import builtins
import numbers

from . import _C
from . import _device as _dev
from . import _dtype as D

_is_t = lambda x: isinstance(x, _C.TensorBase)


def _device_ok(device, fn):
    """oar's device code for a device argument (None: the host); a CUDA device is checked usable"""
    return _dev.code(device, fn)


def _finish(t, requires_grad, dev=None):
    """t made on the host, moved to device code dev (a new leaf there), then requires_grad"""
    if dev is not None and dev != t._device:
        t = _dev.move(t.detach(), dev)
    if requires_grad:
        t.requires_grad = True
    return t


def _size(size, fn):
    if len(size) == 1 and isinstance(size[0], (tuple, list)) or (len(size) == 1 and hasattr(size[0], "__iter__")):
        size = tuple(size[0])
    for s in size:
        if not isinstance(s, numbers.Integral) or isinstance(s, builtins.bool):
            raise TypeError(f"{fn}(): argument 'size' must be tuple of ints, but found element of type "
                            f"{type(s).__name__}")
    return tuple(int(s) for s in size)


def _flatten(data, fn):
    """(flat values, shape, inferred dtype) of nested sequences of numbers."""
    if isinstance(data, numbers.Number):
        d = D.bool_ if isinstance(data, builtins.bool) else D.int64 if isinstance(data, numbers.Integral) else D.float32
        return [data], (), d
    if _is_t(data):
        return data._flat_list(), tuple(data.shape), D.BY_CODE[data._dtype]
    if not isinstance(data, (list, tuple)):
        raise TypeError(f"{fn}(): could not infer dtype of {type(data).__name__}")
    if len(data) == 0:
        return [], (0,), D.float32
    parts = [_flatten(x, fn) for x in data]
    shape = parts[0][1]
    if builtins.any(p[1] != shape for p in parts):
        raise ValueError(f"{fn}(): expected sequence of length {len(data[0]) if shape else 0} at dim 1 "
                         f"(got a ragged nested list)")
    flat = [v for p in parts for v in p[0]]
    d = parts[0][2]
    for p in parts[1:]:
        d = D.promote(d, p[2])
    return flat, (len(data),) + shape, d


def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    dev = _device_ok(device, "tensor")
    if _is_t(data):
        t = _C.clone(data.detach())
        if dtype is not None:
            t = _C.cast(t, D.to_dtype(dtype).code)
        return _finish(t, requires_grad, dev)
    if hasattr(data, "__array_interface__") and not isinstance(data, (list, tuple)):
        t = _C.clone(from_numpy(_np_contiguous(data)))
        if dtype is not None:
            t = _C.cast(t, D.to_dtype(dtype).code)
        return _finish(t, requires_grad, dev)
    flat, shape, d = _flatten(data, "tensor")
    d = D.to_dtype(dtype) if dtype is not None else d
    return _finish(_C.from_flat(flat, shape, d.code), requires_grad, dev)


def as_tensor(data, dtype=None, device=None):
    if _is_t(data) and (dtype is None or D.to_dtype(dtype).code == data._dtype):
        return _dev.move(data, _device_ok(device, "as_tensor"))
    if hasattr(data, "__array_interface__") and dtype is None:
        import numpy as np

        if isinstance(data, np.ndarray) and data.flags.c_contiguous:
            return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def _np_contiguous(a):
    import numpy as np

    a = np.asarray(a)
    if a.dtype == np.float64 or a.dtype in (np.float32, np.float16, np.int64, np.int32, np.int16, np.int8, np.uint8,
                                            np.uint16, np.uint32, np.uint64, np.bool_):
        return np.asarray(a, order="C")  # ascontiguousarray would make a 0-d array 1-d
    raise TypeError(f"can't convert np.ndarray of type {a.dtype}. The only supported types are: float64, float32, "
                    f"float16, int64, int32, int16, int8, uint64, uint32, uint16, uint8, and bool.")


def from_numpy(ndarray):
    """A tensor sharing ndarray's memory (writes show on both sides), as torch.from_numpy."""
    import numpy as np

    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype.byteorder == ">":
        raise TypeError("from_numpy: big-endian arrays are not supported; convert with astype first")
    return _C.from_buffer(ndarray)


def from_dlpack(ext_tensor):
    """A tensor sharing the memory of any DLPack producer (numpy >= 1.22, torch, oar)."""
    if hasattr(ext_tensor, "__dlpack__"):
        return _C.from_dlpack_capsule(ext_tensor.__dlpack__())
    return _C.from_dlpack_capsule(ext_tensor)


def _create(kind, size, dtype, device, requires_grad, fn, a=0.0, b=0.0):
    dev = _device_ok(device, fn)
    d = D.float32 if dtype is None else D.to_dtype(dtype)
    return _finish(_C.create(kind, _size(size, fn), d.code, a, b), requires_grad, dev)


def zeros(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    return _create("zeros", size, dtype, device, requires_grad, "zeros")


def ones(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None):
    return _create("ones", size, dtype, device, requires_grad, "ones")


def empty(*size, dtype=None, device=None, requires_grad=False, out=None, layout=None, memory_format=None):
    return _create("empty", size, dtype, device, requires_grad, "empty")


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = D.bool_ if isinstance(fill_value, builtins.bool) else D.int64 if isinstance(fill_value, numbers.Integral) else D.float32
    return _create("full", (tuple(size),), dtype, device, requires_grad, "full", float(fill_value))


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _create("rand", size, dtype, device, requires_grad, "rand")


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    return _create("randn", size, dtype, device, requires_grad, "randn")


def randint(low=0, high=None, size=None, *, dtype=None, device=None, requires_grad=False, generator=None):
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if high is None or size is None:
        raise TypeError("randint() missing required arguments: 'high' and 'size'")
    return _create("randint", (tuple(size),), dtype or D.int64, device, requires_grad, "randint", low, high)


def randperm(n, *, dtype=None, device=None, requires_grad=False):
    from . import _functions as F

    dev = _device_ok(device, "randperm")
    return _finish(F.argsort(rand(n)).to(D.to_dtype(dtype) if dtype else D.int64), requires_grad, dev)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    dev = _device_ok(device, "arange")
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        dtype = D.int64 if builtins.all(isinstance(v, numbers.Integral) for v in (start, end, step)) else D.float32
    return _finish(_C.arange(float(start), float(end), float(step), D.to_dtype(dtype).code), requires_grad, dev)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    dev = _device_ok(device, "linspace")
    if steps < 0:
        raise RuntimeError("linspace(): number of steps must be non-negative")
    return _finish(_C.linspace(float(start), float(end), int(steps), D.to_dtype(dtype or D.float32).code), requires_grad,
                   dev)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    dev = _device_ok(device, "eye")
    if n < 0 or (m is not None and m < 0):
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    return _finish(_C.eye(int(n), int(n if m is None else m), D.to_dtype(dtype or D.float32).code), requires_grad,
                   dev)


def _like(fn, kind):
    def f(input, *, dtype=None, device=None, requires_grad=False, memory_format=None, **kw):
        d = D.to_dtype(dtype) if dtype is not None else D.BY_CODE[input._dtype]
        dev = input._device if device is None else _device_ok(device, fn)  # torch: the input's device
        return _finish(_C.create(kind, tuple(input.shape), d.code, 0.0, 0.0), requires_grad, dev)

    f.__name__ = fn
    return f


zeros_like = _like("zeros_like", "zeros")
ones_like = _like("ones_like", "ones")
empty_like = _like("empty_like", "empty")
rand_like = _like("rand_like", "rand")
randn_like = _like("randn_like", "randn")


class layout:
    """torch.layout: oar's tensors are all strided (torch.strided); other layouts are refused."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


strided = layout("strided")


def _check_layout(layout, fn):
    if layout is not None and layout is not strided:
        raise NotImplementedError(f"{fn}: only the strided layout is offered, got {layout!r}")


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None):
    _check_layout(layout, "full_like")
    d = D.to_dtype(dtype) if dtype is not None else D.BY_CODE[input._dtype]
    dev = input._device if device is None else _device_ok(device, "full_like")
    return _finish(full(tuple(input.shape), fill_value, dtype=d), requires_grad, dev)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    return full((), s, dtype=dtype or D.float32, device=device, requires_grad=requires_grad)


# ---------------------------------------------------------------- window functions (signal processing)
def _window(name, window_length, periodic, dtype, device, requires_grad, values):
    """torch's window functions: values(n, N) over n = 0..N-1 of a symmetric window of length N;
    a periodic window is the symmetric one of length + 1 without its last point."""
    import numpy as np

    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    d = D.to_dtype(dtype) if dtype is not None else _default_float()
    if not d.is_floating_point:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {d.name}")
    if window_length <= 1:
        w = np.ones(window_length)
    else:
        n = window_length + 1 if periodic else window_length
        w = values(np.arange(n, dtype=np.float64), n)[:window_length]
    return tensor(w, dtype=d, device=device, requires_grad=requires_grad)


def _default_float():
    from . import get_default_dtype

    return get_default_dtype()


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False, **kw):
    import numpy as np

    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.5 - 0.5 * np.cos(2 * np.pi * n / (N - 1)))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, device=None,
                   requires_grad=False, **kw):
    import numpy as np

    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: alpha - beta * np.cos(2 * np.pi * n / (N - 1)))


def blackman_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False, **kw):
    import numpy as np

    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 0.42 - 0.5 * np.cos(2 * np.pi * n / (N - 1)) + 0.08 * np.cos(4 * np.pi * n / (N - 1)))


def bartlett_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False, **kw):
    import numpy as np

    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: 1 - np.abs(2 * n / (N - 1) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None, requires_grad=False, **kw):
    import numpy as np

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, N: np.i0(beta * np.sqrt(1 - (2 * n / (N - 1) - 1) ** 2)) / np.i0(beta))
