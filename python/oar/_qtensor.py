"""Quantized tensors with torch's API (torch.quantize_per_tensor, Tensor.q_scale, int_repr, ...).

A quantized tensor is its integer codes (an oar u8/i8 tensor) and the affine map back to real
values: per tensor (a scale and a zero point) or per channel along one axis. oar's ops take the
codes and the map as separate inputs (docs/quant.md), so a QTensor is a plain Python object, not
an oar.Tensor: an op that has no quantized form refuses it (TypeError naming the type) instead
of computing on the codes as if they were numbers. The torch functions that do take quantized
tensors (relu, the pools, flatten, mean, ...) are listed at the end (_kinds.implements)."""
import numbers

from . import _C
from . import _dtype as D
from . import _kinds
from ._ops import call


class qscheme:
    """torch.per_tensor_affine and friends: how a quantized tensor maps its codes to values."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name

    def __reduce__(self):
        return (_qscheme_by_name, (self.name,))


per_tensor_affine = qscheme("per_tensor_affine")
per_channel_affine = qscheme("per_channel_affine")
per_tensor_symmetric = qscheme("per_tensor_symmetric")
per_channel_symmetric = qscheme("per_channel_symmetric")
per_channel_affine_float_qparams = qscheme("per_channel_affine_float_qparams")
_QSCHEMES = {q.name: q for q in (per_tensor_affine, per_channel_affine, per_tensor_symmetric,
                                 per_channel_symmetric, per_channel_affine_float_qparams)}


def _qscheme_by_name(name):
    return _QSCHEMES[name]


class _QDtype(D.dtype):
    """torch.quint8 / qint8 / qint32: the dtype of a quantized tensor. Its codes are stored in
    `storage` (u8, i8, i32); no plain tensor has this dtype."""

    __slots__ = ("storage", "qmin", "qmax")

    def __init__(self, name, storage, qmin, qmax):
        self.name, self.itemsize, self.is_floating_point, self.is_signed = name, storage.itemsize, False, qmin < 0
        self.storage, self.qmin, self.qmax = storage, qmin, qmax

    @property
    def code(self):
        raise TypeError(f"torch.{self.name} is the dtype of quantized tensors: make one with "
                        "torch.quantize_per_tensor or torch.quantize_per_channel")


quint8 = _QDtype("quint8", D.uint8, 0, 255)
qint8 = _QDtype("qint8", D.int8, -128, 127)
qint32 = _QDtype("qint32", D.int32, -(1 << 31), (1 << 31) - 1)
for _q in (quint8, qint8, qint32):
    D.ALIASES[_q.name] = _q


def _scalar(v, dtype):
    return _C.create("full", (), dtype.code, float(v))


def _as_tensor(v, dtype, what):
    if isinstance(v, _C.TensorBase):
        return v.to(dtype)
    if isinstance(v, numbers.Number):
        return _scalar(v, dtype)
    raise TypeError(f"{what}: expected a number or a Tensor, got {type(v).__name__}")


@_kinds.register_as("quantized", "dequantize() it first")
class QTensor:
    """A quantized tensor: `codes` (u8/i8) and its scale, zero point (tensors: 0-d per tensor,
    1-d per channel) and channel axis (None per tensor)."""

    __slots__ = ("codes", "_scale", "_zero_point", "_axis", "_dtype", "__weakref__")
    is_quantized = True
    requires_grad = False
    grad = grad_fn = None
    is_leaf = True

    def __init__(self, codes, scale, zero_point, axis, dtype):
        self.codes, self._scale, self._zero_point, self._axis, self._dtype = codes, scale, zero_point, axis, dtype

    def _like(self, codes):
        """codes with this tensor's quantization (ops that move values, not change them)."""
        return QTensor(codes, self._scale, self._zero_point, self._axis, self._dtype)

    # what a tensor reports
    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self.codes.shape)
    ndim = property(lambda self: self.codes.ndim)
    device = property(lambda self: self.codes.device)

    def size(self, dim=None):
        return self.codes.size(dim)

    def dim(self):
        return self.codes.ndim

    def numel(self):
        return self.codes.numel()

    def __len__(self):
        return len(self.codes)

    def is_contiguous(self):
        return self.codes.is_contiguous()

    def element_size(self):
        return self._dtype.itemsize

    # the map from codes to values
    def qscheme(self):
        """torch's tensors report the affine schemes (symmetric is an observer's choice of zero point)"""
        return per_tensor_affine if self._axis is None else per_channel_affine

    def _per_tensor(self, what):
        if self._axis is not None:
            raise RuntimeError(f"{what}: expected a per-tensor quantized tensor, got one quantized per channel "
                               f"(axis {self._axis}); use q_per_channel_scales()/q_per_channel_zero_points()")

    def _per_channel(self, what):
        if self._axis is None:
            raise RuntimeError(f"{what}: expected a per-channel quantized tensor, got one quantized per tensor; "
                               "use q_scale()/q_zero_point()")

    def q_scale(self):
        self._per_tensor("q_scale")
        return float(self._scale.item())

    def q_zero_point(self):
        self._per_tensor("q_zero_point")
        return int(self._zero_point.item())

    def q_per_channel_scales(self):
        self._per_channel("q_per_channel_scales")
        return self._scale.to(D.float64)

    def q_per_channel_zero_points(self):
        self._per_channel("q_per_channel_zero_points")
        return self._zero_point.to(D.int64)

    def q_per_channel_axis(self):
        self._per_channel("q_per_channel_axis")
        return self._axis

    def int_repr(self):
        return self.codes.clone()

    def dequantize(self):
        return call("dequantize", (self.codes, self._scale, self._zero_point), {"axis": _axis_attr(self._axis)})

    # ops that move codes around keep the quantization (per tensor; per channel only where the axis stays)
    def _moved(self, what, codes):
        if self._axis is not None and codes.shape != self.codes.shape:
            raise RuntimeError(f"{what}: per-channel quantized tensors keep their shape here; dequantize() first")
        return self._like(codes)

    def view(self, *shape):
        return self._moved("view", self.codes.view(*shape))

    def reshape(self, *shape):
        return self._moved("reshape", self.codes.reshape(*shape))

    def flatten(self, start_dim=0, end_dim=-1):
        return self._moved("flatten", self.codes.flatten(start_dim, end_dim))

    def transpose(self, dim0, dim1):
        self._per_tensor("transpose")
        return self._like(self.codes.transpose(dim0, dim1))

    def permute(self, *dims):
        self._per_tensor("permute")
        return self._like(self.codes.permute(*dims))

    def squeeze(self, *dim):
        return self._moved("squeeze", self.codes.squeeze(*dim))

    def unsqueeze(self, dim):
        return self._moved("unsqueeze", self.codes.unsqueeze(dim))

    def contiguous(self, memory_format=None):
        return self._like(self.codes.contiguous())

    def chunk(self, chunks, dim=0):
        self._per_tensor("chunk")
        return tuple(self._like(c) for c in self.codes.chunk(chunks, dim))

    def split(self, split_size, dim=0):
        self._per_tensor("split")
        return tuple(self._like(c) for c in self.codes.split(split_size, dim))

    def __getitem__(self, index):
        self._per_tensor("indexing")
        return self._like(self.codes[index])

    def clone(self, memory_format=None):
        return self._like(self.codes.clone())

    def detach(self):
        return self

    def to(self, *args, **kwargs):
        target = args[0] if args else kwargs.get("dtype", kwargs.get("device"))
        if target is self._dtype or target in (None, "cpu") or getattr(target, "type", None) == "cpu":
            return self
        raise RuntimeError(f"to(): a quantized tensor cannot be cast to {target!r}; dequantize() it first")

    def cpu(self):
        return self

    def relu(self):
        return relu(self)

    def mean(self, dim=None, keepdim=False, dtype=None):
        return mean(self, dim, keepdim)

    def numpy(self):
        raise TypeError("can't convert a quantized tensor to numpy: use int_repr() or dequantize() first")

    def __repr__(self):
        body = repr(self.dequantize())
        body = body[:body.rindex(")")] if body.endswith(")") else body
        if self._axis is None:
            q = f"quantization_scheme={self.qscheme()!r}, scale={self.q_scale()}, zero_point={self.q_zero_point()}"
        else:
            q = (f"quantization_scheme={self.qscheme()!r}, scale={self._scale.tolist()}, "
                 f"zero_point={self._zero_point.tolist()}, axis={self._axis}")
        return f"{body}, size={tuple(self.shape)}, dtype=torch.{self._dtype.name},\n       {q})"


def _axis_attr(axis):
    return -1 if axis is None else axis


def _check_qdtype(dtype, what, allowed=(quint8, qint8)):
    if dtype not in allowed:
        raise TypeError(f"{what}: expected dtype {' or '.join('torch.' + d.name for d in allowed)}, got {dtype!r}")


def quantize_per_tensor(input, scale, zero_point, dtype):
    """torch.quantize_per_tensor: codes = clamp(round_half_even(x / scale) + zero_point)."""
    if isinstance(input, (list, tuple)):
        return [quantize_per_tensor(x, s, z, dtype) for x, s, z in zip(input, scale, zero_point)]
    _check_qdtype(dtype, "quantize_per_tensor")
    s = _as_tensor(scale, D.float32, "quantize_per_tensor scale").reshape(())
    z = _as_tensor(zero_point, D.int32, "quantize_per_tensor zero_point").reshape(())
    codes = call("quantize", (input.to(D.float32) if input.dtype is not D.float32 else input, s, z),
                 {"axis": -1, "dtype": dtype.storage.code})
    return QTensor(codes, s, z, None, dtype)


def quantize_per_channel(input, scales, zero_points, axis, dtype):
    """torch.quantize_per_channel: per-channel scales and zero points along axis."""
    _check_qdtype(dtype, "quantize_per_channel")
    axis = axis + input.ndim if axis < 0 else axis
    s, z = scales.to(D.float32), zero_points.to(D.int32)
    codes = call("quantize", (input.to(D.float32) if input.dtype is not D.float32 else input, s, z),
                 {"axis": axis, "dtype": dtype.storage.code})
    return QTensor(codes, s, z, axis, dtype)


_BY_STORAGE = {D.uint8: quint8, D.int8: qint8, D.int32: qint32}


def _codes(int_repr, what):
    if not isinstance(int_repr, _C.TensorBase) or int_repr.dtype not in _BY_STORAGE:
        got = int_repr.dtype if isinstance(int_repr, _C.TensorBase) else type(int_repr).__name__
        raise TypeError(f"{what}: expected the integer codes as a uint8, int8 or int32 tensor (int_repr()), got {got}")
    return int_repr.contiguous().clone(), _BY_STORAGE[int_repr.dtype]


def _make_per_tensor_quantized_tensor(int_repr, scale, zero_point):
    """torch._make_per_tensor_quantized_tensor: a quantized tensor from its codes as they are (no
    rounding: what moves a quantized tensor between frameworks bit for bit); the dtype follows the
    codes' (uint8 -> quint8, int8 -> qint8, int32 -> qint32)."""
    codes, dtype = _codes(int_repr, "_make_per_tensor_quantized_tensor")
    s = _as_tensor(scale, D.float32, "_make_per_tensor_quantized_tensor scale").reshape(())
    z = _as_tensor(zero_point, D.int32, "_make_per_tensor_quantized_tensor zero_point").reshape(())
    return QTensor(codes, s, z, None, dtype)


def _make_per_channel_quantized_tensor(int_repr, scales, zero_points, axis):
    """torch._make_per_channel_quantized_tensor: codes with one scale and zero point per index of axis."""
    what = "_make_per_channel_quantized_tensor"
    codes, dtype = _codes(int_repr, what)
    axis = axis + codes.ndim if axis < 0 else axis
    if not 0 <= axis < codes.ndim:
        raise IndexError(f"{what}: axis {axis} is out of range for codes of {codes.ndim} dims")
    s, z = _as_tensor(scales, D.float32, what + " scales"), _as_tensor(zero_points, D.int32, what + " zero_points")
    if s.shape != (codes.shape[axis],) or z.shape != (codes.shape[axis],):
        raise RuntimeError(f"{what}: expected {codes.shape[axis]} scales and zero points (the size of axis {axis}), "
                           f"got shapes {tuple(s.shape)} and {tuple(z.shape)}")
    return QTensor(codes, s.contiguous(), z.contiguous(), axis, dtype)


def dequantize(input):
    if isinstance(input, (list, tuple)):
        return [dequantize(x) for x in input]
    return input.dequantize()


def requantize(x, scale, zero_point, dtype=quint8):
    """x (a QTensor or float tensor) as codes of (scale, zero_point): quantize(dequantize(x)), in f32
    as torch's quantized ops without integer kernels do."""
    values = x.dequantize() if isinstance(x, QTensor) else x
    return quantize_per_tensor(values, scale, zero_point, dtype)


# --- torch functions that also take quantized tensors (registered at the end) --------------------

def relu(x, inplace=False):
    """relu on codes: max(q, zero_point), the code of 0."""
    zp = x._zero_point if x._axis is None else x._zero_point.reshape(
        [-1 if d == x._axis else 1 for d in range(x.ndim)])
    return x._like(call("maximum", (x.codes, zp.to(x.codes.dtype)), {}))


def _through_float(x, f):
    """f on x's values, the result quantized with x's own parameters (torch's quantized pools and
    means keep the input's scale and zero point)."""
    x._per_tensor("this quantized op")
    return requantize(f(x.dequantize()), x._scale, x._zero_point, x._dtype)


_LUT_CACHE = {}  # (function key, input scale, zero point, output scale, zero point) -> table codes
_LUT_CACHE_SIZE = 256


def lut(x, f, scale, zero_point, key=None):
    """f applied to each code of x as a 256-entry table (oar's qlut): every code's value through the
    float function, quantized with (scale, zero_point), as torch's quantized activations compute it.
    With a key naming f and its arguments, eager calls reuse the table of an input grid seen before
    (building it is five small ops, costlier than the lookup itself); a trace always builds it, so
    the program keeps the input's scale as the trace saw it."""
    x._per_tensor("a quantized activation")
    if x.dtype is not quint8:
        raise TypeError(f"a quantized activation: expected a torch.quint8 input, got {x.dtype!r}")
    cache_key = None
    if key is not None and not _C.is_tracing():
        cache_key = (key, float(x._scale), int(x._zero_point), float(scale), int(zero_point))
        cached = _LUT_CACHE.get(cache_key)
        if cached is not None:
            return QTensor(call("qlut", (x.codes, cached[0]), {}), cached[1], cached[2], None, quint8)
    from ._creation import arange

    values = QTensor(arange(256, dtype=D.uint8), x._scale, x._zero_point, None, quint8).dequantize()
    table = quantize_per_tensor(f(values), scale, zero_point, quint8)
    if cache_key is not None:
        if len(_LUT_CACHE) >= _LUT_CACHE_SIZE:
            _LUT_CACHE.pop(next(iter(_LUT_CACHE)))  # the oldest entry
        _LUT_CACHE[cache_key] = (table.codes, table._scale, table._zero_point)
    return QTensor(call("qlut", (x.codes, table.codes), {}), table._scale, table._zero_point, None, quint8)


def fixed_range(name, scale, zero_point):
    """torch's quantized sigmoid/hardsigmoid (outputs in [0, 1]: scale 1/256, zero point 0) and tanh
    ([-1, 1]: 2/256, 128): a table to the fixed output grid."""
    def impl(x, *args, **kwargs):
        from .nn import functional as Fn

        return lut(x, getattr(Fn, name), scale, zero_point, key=name)

    impl.__name__ = name
    return impl


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """max pooling commutes with a monotone quantization: the codes are pooled directly."""
    from .nn import functional as Fn

    if return_indices:
        raise NotImplementedError("max_pool2d of a quantized tensor: return_indices=True is not offered")
    k = Fn._pair(kernel_size, "kernel_size", "max_pool2d")
    s = k if stride is None or stride == [] else Fn._pair(stride, "stride", "max_pool2d")
    return x._like(call("qmax_pool2d", (x.codes,), {"kernel": k, "stride": s,
                                                      "padding": Fn._pair(padding, "padding", "max_pool2d"),
                                                      "dilation": Fn._pair(dilation, "dilation", "max_pool2d"),
                                                      "ceil_mode": int(bool(ceil_mode))}))


def pooled_through_float(name):
    def impl(x, *args, **kwargs):
        from .nn import functional as Fn

        return _through_float(x, lambda v: getattr(Fn, name)(v, *args, **kwargs))

    impl.__name__ = name
    return impl


def mean(x, dim=None, keepdim=False, dtype=None):
    from . import _functions as F

    return _through_float(x, lambda v: F.mean(v, dim, keepdim) if dim is not None else F.mean(v))


def identity_in_eval(x, p=0.5, training=False):
    """dropout on a quantized tensor: only inference is quantized, where dropout is the identity."""
    if training:
        raise RuntimeError("dropout of a quantized tensor in training mode: quantized models run inference only")
    return x


def moved(method):
    """flatten/transpose/... as torch functions: the QTensor method of that name."""
    def impl(x, *args, **kwargs):
        return getattr(x, method)(*args, **kwargs)

    impl.__name__ = method
    return impl


_kinds.implements(QTensor, {
    "relu": relu, "sigmoid": fixed_range("sigmoid", 1.0 / 256, 0), "tanh": fixed_range("tanh", 2.0 / 256, 128),
    "hardsigmoid": fixed_range("hardsigmoid", 1.0 / 256, 0), "mean": mean, "max_pool2d": max_pool2d,
    "avg_pool2d": pooled_through_float("avg_pool2d"), "adaptive_avg_pool2d": pooled_through_float("adaptive_avg_pool2d"),
    "dropout": identity_in_eval, "transpose": moved("transpose"), "flatten": moved("flatten"), "chunk": moved("chunk"),
    "reshape": moved("reshape"), "permute": moved("permute"), "squeeze": moved("squeeze"),
    "unsqueeze": moved("unsqueeze")})
