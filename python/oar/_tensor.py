"""oar.Tensor: torch's Tensor methods, operators, indexing and printing over _C.TensorBase."""
import builtins
import numbers

from . import _C
from . import _device as _dev
from . import _dtype as D
from . import _functions as F
from ._format import format_tensor

_is_t = lambda x: isinstance(x, _C.TensorBase)


class Size(tuple):
    """torch.Size: a tuple of sizes."""

    def __repr__(self):
        return f"oar.Size([{', '.join(str(s) for s in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n


class device:
    """torch.device: device("cpu"), device("cuda"), device("cuda:0"), device("cuda", 0), device(0)."""

    def __init__(self, type="cpu", index=None):
        if isinstance(type, device):
            type, index = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = "cuda", type
        else:
            kind, idx = _dev.parse(type, "oar.device")
            type, index = kind, idx if idx is not None else index
        self.type, self.index = str(type), index

    def __repr__(self):
        return f"device(type='{self.type}'{'' if self.index is None else f', index={self.index}'})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


_CPU = device("cpu")
_CUDA0 = device("cuda", 0)


class _GradFn:
    """Stands for the autograd node that made a tensor (oar keeps it in C)."""

    __slots__ = ("name",)

    def __init__(self, name="OarBackward"):
        self.name = name

    def name_(self):
        return self.name

    def __repr__(self):
        return f"<{self.name}>"


class _RemovableHandle:
    def __init__(self, tensor, key):
        self._tensor, self._key = tensor, key

    def remove(self):
        if self._tensor is not None:
            self._tensor._remove_hook(self._key)
            self._tensor = None


def _inplace(self, result):
    """Writes result into self, as torch's in-place ops do."""
    if _C.is_grad_enabled() and self.requires_grad and self.is_leaf:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    if _C.is_grad_enabled() and (self.requires_grad or result.requires_grad):
        # autograd must see the new value as an op result: self now holds it (other views of the old
        # storage keep the old values)
        self._set_(result)
        return self
    if tuple(result.shape) != tuple(self.shape):
        raise RuntimeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                           f"{list(result.shape)}")
    self.copy_(result)
    return self


class Tensor(_C.TensorBase):
    """A multi-dimensional array with autograd, as torch.Tensor."""

    # torch makes tensors with Tensor(data) too (deprecated there, still common)
    def __new__(cls, *args, **kw):
        if not args:
            return _C.create("empty", (0,), D.float32.code)._alias(cls)
        if builtins.all(isinstance(a, int) for a in args):
            return _C.create("empty", args, D.float32.code)._alias(cls)
        from ._creation import tensor

        return tensor(args[0], dtype=D.float32)._alias(cls)

    def __init__(self, *args, **kw):
        pass

    # ---- properties
    @property
    def dtype(self):
        return D.BY_CODE[self._dtype]

    @property
    def shape(self):
        return Size(_C.TensorBase.shape.__get__(self))

    def size(self, dim=None):
        s = _C.TensorBase.shape.__get__(self)
        if dim is None:
            return Size(s)
        return s[F._wrap_dim(dim, len(s), "size")]

    def stride(self, dim=None):
        s = self._strides
        return s if dim is None else s[F._wrap_dim(dim, len(s), "stride")]

    def dim(self):
        return self.ndim

    ndimension = dim

    def nelement(self):
        return self.numel()

    def element_size(self):
        return self.dtype.itemsize

    @property
    def device(self):
        return _CUDA0 if self._device == _dev.CUDA else _CPU

    @property
    def is_cuda(self):
        return self._device == _dev.CUDA

    is_quantized = False  # quantized tensors are _qtensor.QTensor

    def get_device(self):
        """torch's: -1 on the cpu, the CUDA index on a GPU"""
        return 0 if self._device == _dev.CUDA else -1

    @property
    def data(self):
        return self.detach()

    @data.setter
    def data(self, value):
        if tuple(value.shape) == tuple(self.shape) and value._dtype == self._dtype and value._device == self._device:
            with _no_grad():
                self.copy_(value)
        else:
            rg = self.requires_grad
            self._set_(value.detach())
            if rg:
                self.requires_grad = True

    @property
    def grad(self):
        retained = self.__dict__.get("_retained_grad")
        return retained if retained is not None else self._grad

    @grad.setter
    def grad(self, value):
        self.__dict__.pop("_retained_grad", None)
        self._grad = value

    @property
    def grad_fn(self):
        return _GradFn() if self.requires_grad and not self.is_leaf else None

    @property
    def T(self):
        return F.permute(self, list(range(self.ndim))[::-1])

    @property
    def mT(self):
        return F.transpose(self, -2, -1)

    def is_floating_point(self):
        return self.dtype.is_floating_point

    def type(self, dtype=None):
        if dtype is None:
            return "oar." + {"float32": "FloatTensor", "float64": "DoubleTensor", "int64": "LongTensor",
                             "int32": "IntTensor", "int16": "ShortTensor", "bool": "BoolTensor"}.get(self.dtype.name,
                                                                                                     self.dtype.name)
        return self.to(dtype)

    # ---- autograd
    def retain_grad(self):
        if self.is_leaf:
            return
        if "_retain_handle" in self.__dict__:
            return

        def keep(g):
            self.__dict__["_retained_grad"] = g if self.__dict__.get("_retained_grad") is None else \
                self.__dict__["_retained_grad"] + g

        self.__dict__["_retain_handle"] = self.register_hook(keep)

    @property
    def retains_grad(self):
        return "_retain_handle" in self.__dict__

    def register_hook(self, hook):
        return _RemovableHandle(self, self._register_hook(hook))

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    def detach_(self):
        self._set_(self.detach())
        return self

    # ---- conversion
    def to(self, *args, **kw):
        """to(dtype), to(device[, dtype]), to(other) (its dtype and device), with dtype= / device=
        keywords; non_blocking and copy are accepted (copy=True always copies)."""
        dtype, dev = kw.get("dtype"), None
        if kw.get("device") is not None:
            dev = _dev.code(kw["device"], "Tensor.to")
        for a in args:
            if isinstance(a, (D.dtype,)) or getattr(a, "__module__", "") == "torch" and "dtype" in type(a).__name__:
                dtype = a
            elif _is_t(a):
                dtype, dev = a.dtype, a._device
            elif a is not None and not isinstance(a, bool):
                dev = _dev.code(a, "Tensor.to")
        t = _dev.move(self, dev)
        if dtype is not None:
            d = D.to_dtype(dtype)
            if d.code != t._dtype:
                t = _C.cast(t, d.code)
        if kw.get("copy") and t is self:
            t = self.clone()
        return t

    def cpu(self, memory_format=None):
        return _dev.move(self, _dev.CPU)

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        if device is not None:
            kind, index = _dev.parse(device, "Tensor.cuda")
            if kind != "cuda":
                raise RuntimeError(f"Tensor.cuda: expected a CUDA device, got '{device}'")
            _dev.check_cuda("Tensor.cuda", index)
        else:
            _dev.check_cuda("Tensor.cuda")
        return _dev.move(self, _dev.CUDA)

    def float(self):
        return self.to(D.float32)

    def double(self):
        return self.to(D.float64)

    def half(self):
        return self.to(D.float16)

    def bfloat16(self):
        return self.to(D.bfloat16)

    def long(self):
        return self.to(D.int64)

    def int(self):
        return self.to(D.int32)

    def bool(self):
        return self.to(D.bool_)

    def byte(self):
        return self.to(D.uint8)

    def type_as(self, other):
        return self.to(other.dtype)

    def numpy(self, *, force=False):
        if self.requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
        if self._device != _dev.CPU:
            if not force:
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor "
                                "to host memory first.")
            return self.detach().cpu().numpy()
        import numpy as np

        return np.asarray(self if not self.requires_grad else self.detach())

    def tolist(self):
        flat = (self if self._device == _dev.CPU else self.detach().cpu())._flat_list()
        shape = list(self.shape)
        if not shape:
            return flat[0]

        def nest(off, dims):
            if len(dims) == 1:
                return flat[off:off + dims[0]]
            step = 1
            for d in dims[1:]:
                step *= d
            return [nest(off + i * step, dims[1:]) for i in range(dims[0])]

        return nest(0, shape)

    @property
    def __array_interface__(self):
        raise AttributeError  # numpy uses the buffer protocol (zero-copy); kept off so it is the only path

    def __array__(self, dtype=None):
        import numpy as np

        a = np.asarray(memoryview(self.detach() if self.requires_grad else self))
        return a if dtype is None else a.astype(dtype)

    # ---- Python protocol
    def __repr__(self, *, tensor_contents=None):
        return format_tensor(self)

    __str__ = __repr__

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with more than one value is ambiguous")
        return builtins.bool(self.item())

    def __float__(self):
        return builtins.float(self.item())

    def __int__(self):
        return builtins.int(self.item())

    def __index__(self):
        if self.numel() != 1 or self.is_floating_point():
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self.item())

    def __hash__(self):
        return id(self)

    def __contains__(self, element):
        return builtins.bool((self == element).any())

    def __reduce_ex__(self, proto):
        return (_rebuild, (self.tolist(), self.dtype.name, self.requires_grad))

    def __deepcopy__(self, memo):
        c = F.clone(self.detach())
        if self.requires_grad:
            c.requires_grad = True
        c = c._alias(type(self)) if type(self) is not type(c) else c
        for k, v in self.__dict__.items():
            if not k.startswith("_retain"):
                c.__dict__[k] = v
        memo[id(self)] = c
        return c

    # ---- operators: see _operator() below for the fast paths
    def __matmul__(self, o):
        return F.matmul(self, o)

    def __rmatmul__(self, o):
        return F.matmul(o, self)

    def __floordiv__(self, o):
        return F.floor_divide(self, o)

    def __rfloordiv__(self, o):
        return F.floor_divide(o, self)

    def __mod__(self, o):
        return F.remainder(self, o)

    def __rmod__(self, o):
        return F.remainder(o, self)

    def __matmul__(self, o):
        return F.matmul(self, o)

    def __rmatmul__(self, o):
        return F.matmul(o, self)

    def __neg__(self):
        return F.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return F.abs(self)

    def __invert__(self):
        return F.bitwise_not(self)

    def __and__(self, o):
        return F.bitwise_and(self, o)

    def __or__(self, o):
        return F.bitwise_or(self, o)

    def __xor__(self, o):
        return F.bitwise_xor(self, o)

    def __rand__(self, o):
        return F.bitwise_and(o, self)

    def __ror__(self, o):
        return F.bitwise_or(o, self)

    def __rxor__(self, o):
        return F.bitwise_xor(o, self)

    def __lshift__(self, o):
        return F.bitwise_left_shift(self, o)

    def __rshift__(self, o):
        return F.bitwise_right_shift(self, o)

    def __rlshift__(self, o):
        return F.bitwise_left_shift(o, self)

    def __rrshift__(self, o):
        return F.bitwise_right_shift(o, self)

    def __eq__(self, o):
        if o is None:
            return False
        return F.eq(self, o)

    def __ne__(self, o):
        if o is None:
            return True
        return F.ne(self, o)

    def __iadd__(self, o):
        return _inplace(self, F.add(self, o))

    def __isub__(self, o):
        return _inplace(self, F.sub(self, o))

    def __imul__(self, o):
        return _inplace(self, F.mul(self, o))

    def __itruediv__(self, o):
        return _inplace(self, F.div(self, o))

    def __ipow__(self, o):
        return _inplace(self, F.pow(self, o))

    # ---- indexing
    def __getitem__(self, index):
        from ._indexing import getitem

        return getitem(self, index)

    def __setitem__(self, index, value):
        from ._indexing import setitem

        setitem(self, index, value)

    # ---- methods with several forms
    def view(self, *shape):
        if len(shape) == 1 and (isinstance(shape[0], D.dtype)):
            raise NotImplementedError("Tensor.view(dtype) is not offered")
        return F.view(self, *shape)

    def view_as(self, other):
        return F.view(self, *other.shape)

    def reshape_as(self, other):
        return F.reshape(self, *other.shape)

    def expand_as(self, other):
        return F.expand(self, *other.shape)

    def new(self, *args, **kw):
        """torch's legacy constructor: x.new(data) copies data (a tensor or a sequence) into a
        tensor of x's dtype and device; x.new(*sizes) or x.new(Size) is uninitialized; x.new()
        is empty."""
        from ._creation import empty, tensor

        dev = kw.get("device", self.device)
        if len(args) == 1 and not isinstance(args[0], (int, Size)):
            data = args[0]
            return tensor(data.detach() if isinstance(data, _C.TensorBase) else data, dtype=self.dtype, device=dev)
        sizes = tuple(args[0]) if len(args) == 1 and isinstance(args[0], Size) else args
        return empty(*(sizes or (0,)), dtype=self.dtype, device=dev)

    def new_zeros(self, *size, dtype=None, **kw):
        from ._creation import zeros

        return zeros(*size, dtype=dtype or self.dtype, device=kw.get("device", self.device),
                     requires_grad=kw.get("requires_grad", False))

    def new_ones(self, *size, dtype=None, **kw):
        from ._creation import ones

        return ones(*size, dtype=dtype or self.dtype, device=kw.get("device", self.device),
                    requires_grad=kw.get("requires_grad", False))

    def new_full(self, size, fill_value, dtype=None, **kw):
        from ._creation import full

        return full(size, fill_value, dtype=dtype or self.dtype, device=kw.get("device", self.device),
                    requires_grad=kw.get("requires_grad", False))

    def new_empty(self, *size, dtype=None, **kw):
        from ._creation import empty

        return empty(*size, dtype=dtype or self.dtype, device=kw.get("device", self.device),
                     requires_grad=kw.get("requires_grad", False))

    def new_tensor(self, data, dtype=None, **kw):
        from ._creation import tensor

        return tensor(data, dtype=dtype or self.dtype, device=kw.get("device", self.device),
                      requires_grad=kw.get("requires_grad", False))

    def zero_(self):
        return self.fill_(0)

    def uniform_(self, a=0.0, b=1.0):
        from ._creation import rand

        with _no_grad():
            self.copy_(rand(*self.shape, dtype=self.dtype) * (b - a) + a)
        return self

    def normal_(self, mean=0.0, std=1.0):
        from ._creation import randn

        with _no_grad():
            self.copy_(randn(*self.shape, dtype=self.dtype) * std + mean)
        return self

    def masked_fill_(self, mask, value):
        return _inplace(self, F.masked_fill(self, mask, value))

    def clamp_(self, min=None, max=None):
        return _inplace(self, F.clamp(self, min, max))

    clip_ = clamp_

    def add_(self, other, *, alpha=1):
        return _inplace(self, F.add(self, other, alpha=alpha))

    def sub_(self, other, *, alpha=1):
        return _inplace(self, F.sub(self, other, alpha=alpha))

    def mul_(self, other):
        return _inplace(self, F.mul(self, other))

    def div_(self, other):
        return _inplace(self, F.div(self, other))

    def pow_(self, other):
        return _inplace(self, F.pow(self, other))

    def neg_(self):
        return _inplace(self, F.neg(self))

    def relu_(self):
        return _inplace(self, F.relu(self))

    def sigmoid_(self):
        return _inplace(self, F.sigmoid(self))

    def tanh_(self):
        return _inplace(self, F.tanh(self))

    def exp_(self):
        return _inplace(self, F.exp(self))

    def sqrt_(self):
        return _inplace(self, F.sqrt(self))

    def addcmul_(self, t1, t2, value=1):
        return _inplace(self, F.add(self, F.mul(F.mul(t1, t2), value)))

    def addcdiv_(self, t1, t2, value=1):
        return _inplace(self, F.add(self, F.mul(F.div(t1, t2), value)))

    def lerp_(self, end, weight):
        return _inplace(self, F.add(self, F.mul(F.sub(end, self), weight)))

    def unsqueeze_(self, dim):
        self._set_(F.unsqueeze(self, dim))
        return self

    def squeeze_(self, dim=None):
        self._set_(F.squeeze(self, dim))
        return self


def _rebuild(data, dtype_name, requires_grad):
    """Unpickles a tensor (copy.deepcopy and multiprocessing use this too)."""
    from ._creation import tensor

    return tensor(data, dtype=D.ALIASES[dtype_name], requires_grad=requires_grad)


class _no_grad:
    def __enter__(self):
        self.prev = _C.set_grad_enabled(False)

    def __exit__(self, *a):
        _C.set_grad_enabled(self.prev)


# Methods that are the function of the same name with self first (torch's Tensor.<fn> = torch.<fn>).
_METHODS = """add sub mul div pow maximum minimum eq ne lt le gt ge logical_and logical_or logical_not
neg abs exp log log1p log2 log10 sqrt rsqrt square sin cos tanh sigmoid relu silu erf sign floor ceil round clamp clip
clamp_min clamp_max sum prod mean amax amin logsumexp var std norm argmax argmin max min all any cumsum topk
sort argsort reshape permute transpose t expand squeeze unsqueeze flatten unflatten contiguous clone chunk split
unbind narrow select flip tril triu index_select gather scatter_add masked_fill repeat nonzero masked_select
matmul mm bmm dot outer multiply subtract true_divide divide greater greater_equal less less_equal not_equal
negative absolute swapaxes swapdims count_nonzero where tensor_split repeat_interleave
floor_divide remainder fmod trunc fix unique erfc expm1 exp2 sinh asin acos atan asinh atanh atan2 arcsin arccos
arctan arcsinh arctanh arctan2 acosh arccosh cosh lgamma digamma erfinv bitwise_and bitwise_or bitwise_xor bitwise_not
gcd lcm cumprod cummax cummin mode bitwise_left_shift bitwise_right_shift i0 igamma igammac""".split()
for _name in _METHODS:
    if not hasattr(Tensor, _name) or _name in ("sum", "max", "min", "all", "any", "abs", "round"):
        setattr(Tensor, _name, getattr(F, _name))


def _where_method(self, condition, other):
    return F.where(condition, self, other)


Tensor.where = _where_method
Tensor.polygamma = lambda self, n: F.polygamma(n, self)
Tensor.polygamma_ = lambda self, n: _inplace(self, F.polygamma(n, self))
for _name in ("cumprod cosh acosh arccosh lgamma digamma erfinv bitwise_and bitwise_or bitwise_xor bitwise_not gcd lcm "
              "bitwise_left_shift bitwise_right_shift").split():
    setattr(Tensor, _name + "_", lambda self, *args, _f=getattr(F, _name): _inplace(self, _f(self, *args)))
Tensor.softmax = lambda self, dim, dtype=None: _nnf().softmax(self, dim, dtype=dtype)
Tensor.log_softmax = lambda self, dim, dtype=None: _nnf().log_softmax(self, dim, dtype=dtype)


def _nnf():
    from .nn import functional

    return functional


def _operator(fn, scalar_kind, tensor_op, reflected=False):
    """A Python operator with the common cases first: a tensor and a Python number of the same
    kind (x + 1 on floats, i * 2 on integers) go straight to the C scalar op, and two tensors of
    one dtype straight to the op; everything else takes the general path (promotion, errors)."""
    kind = _SCALAR[scalar_kind] if scalar_kind else None
    op = ID[tensor_op]
    scalar_op, call, general = _C.scalar_op, _C.call, fn
    floats, ints = _FLOAT_CODES, _INT_CODES

    def forward(self, o):
        t = type(o)
        if t is float:
            if kind is not None and self._dtype in floats:
                return scalar_op(kind, self, o)
        elif t is int:
            if kind is not None and (self._dtype in floats or self._dtype in ints and tensor_op != "div"):
                return scalar_op(kind, self, o)
        elif isinstance(o, _C.TensorBase) and not reflected and o._dtype == self._dtype and \
                (tensor_op != "div" or self._dtype in floats):
            return call(op, (self, o))
        return general(o, self) if reflected else general(self, o)

    return forward


from ._functions import _SCALAR  # noqa: E402
from ._ops import ID  # noqa: E402

_FLOAT_CODES = frozenset(d.code for d in (D.float32, D.float64, D.float16, D.bfloat16))
_INT_CODES = frozenset(d.code for d in (D.int8, D.uint8, D.int32, D.int64))
for _name, _fn, _scalar, _op, _refl in [
        ("__add__", F.add, "add", "add", False), ("__radd__", F.add, "add", "add", True),
        ("__sub__", F.sub, "sub", "sub", False), ("__rsub__", F.sub, "rsub", "sub", True),
        ("__mul__", F.mul, "mul", "mul", False), ("__rmul__", F.mul, "mul", "mul", True),
        ("__truediv__", F.div, "div", "div", False), ("__rtruediv__", F.div, "rdiv", "div", True),
        ("__pow__", F.pow, "pow", "pow", False), ("__rpow__", F.pow, "rpow", "pow", True),
        ("__lt__", F.lt, "lt", "lt", False), ("__le__", F.le, "le", "le", False),
        ("__gt__", F.gt, "gt", "gt", False), ("__ge__", F.ge, "ge", "ge", False)]:
    setattr(Tensor, _name, _operator(_fn, _scalar, _op, _refl))

_C._set_tensor_class(Tensor)
