"""torch.nn.utils.parametrize: a module's tensor computed from stored originals by a chain of
modules on every read (module.weight = f(module.parametrizations.weight.original)), as torch 1.13:
the module's class becomes a subclass named Parametrized<Class> with a property per tensor, the
originals live in module.parametrizations (so state_dict keys are torch's
"parametrizations.weight.original"), assigning to the tensor goes through right_inverse, and
cached() computes each parametrized tensor once inside its block."""
import collections.abc
from contextlib import contextmanager

from ... import _C
from ..._grad_mode import no_grad
from ..modules.layers import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["cached", "ParametrizationList", "register_parametrization", "is_parametrized", "remove_parametrizations",
           "type_before_parametrizations", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextmanager
def cached():
    """Inside the block each parametrized tensor is computed at its first read and reused (one
    forward of a weight read several times, as in an RNN); the cache empties on leaving it."""
    global _cache, _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache = {}


def _register(module, name, t):
    if isinstance(t, Parameter):
        module.register_parameter(name, t)
    else:
        module.register_buffer(name, t)


def _replace_data(original, new):
    """original takes new's data in place (torch's set_): the Parameter object, and so an
    optimizer holding it, stays."""
    grad = original.requires_grad
    if new is not original:
        original._set_(new.detach())
    original.requires_grad_(grad)


class ParametrizationList(ModuleList):
    """The chain of parametrizations of one tensor and its originals: `original` (or original0,
    original1, ... when the first right_inverse returns several tensors)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        shape, dtype = original.shape, original.dtype
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    try:
                        new = m.right_inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, _C.TensorBase) and not isinstance(new, collections.abc.Sequence):
            raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                             f"Got {type(new).__name__}")
        self.is_tensor = isinstance(new, _C.TensorBase)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise ValueError("When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
            with no_grad():
                _replace_data(original, new)
            _register(self, "original", original)
        else:
            for i, o in enumerate(new):
                if not isinstance(o, _C.TensorBase):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                                     f"Got element {i} of the sequence with type {type(o).__name__}.")
                if isinstance(original, Parameter):
                    o = Parameter(o)
                o.requires_grad_(original.requires_grad)
                _register(self, f"original{i}", o)
        if not self.unsafe:
            z = self()
            if not isinstance(z, _C.TensorBase):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if z.dtype != dtype:
                raise ValueError("Registering a parametrization may not change the dtype of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized dtype: {dtype}\n"
                                 f"parametrized dtype: {z.dtype}")
            if z.shape != shape:
                raise ValueError("Registering a parametrization may not change the shape of the tensor, unless "
                                 f"`unsafe` flag is enabled.\nunparametrized shape: {shape}\n"
                                 f"parametrized shape: {z.shape}")

    def right_inverse(self, value):
        """Assigning module.<name> = value stores the originals that give value."""
        with no_grad():
            for m in reversed(list(self)):
                if not hasattr(m, "right_inverse"):
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse.")
                value = m.right_inverse(value)
            if self.is_tensor:
                if not isinstance(value, _C.TensorBase):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                if value.dtype != self.original.dtype:
                    raise ValueError(f"The tensor returned by `right_inverse` has dtype {value.dtype} while "
                                     f"`original` has dtype {self.original.dtype}")
                _replace_data(self.original, value)
                return
            if not isinstance(value, collections.abc.Sequence):
                raise ValueError(f"'right_inverse' must return a sequence of tensors. Got {type(value).__name__}.")
            if len(value) != self.ntensors:
                raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}. "
                                 f"Got a sequence of lenght {len(value)}.")
            for i, t in enumerate(value):
                o = getattr(self, f"original{i}")
                if not isinstance(t, _C.TensorBase):
                    raise ValueError(f"`right_inverse` must return a sequence of tensors. Got element {i} of type "
                                     f"{type(t).__name__}")
                if o.dtype != t.dtype:
                    raise ValueError(f"Tensor {i} returned by `right_inverse` has dtype {t.dtype} while "
                                     f"`original{i}` has dtype {o.dtype}")
                _replace_data(o, t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _getstate(self):
    raise RuntimeError("Serialization of parametrized modules is only supported through state_dict(). See:\n"
                       "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
                       "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training")


def _deepcopy(self, memo):
    """copy.deepcopy without pickling (which parametrized modules refuse): a new instance of the
    same class with a deep copy of the attributes."""
    import copy

    if id(self) in memo:
        return memo[id(self)]
    twin = self.__new__(type(self))
    memo[id(self)] = twin
    twin.__dict__ = copy.deepcopy(self.__dict__, memo)
    return twin


def _inject_new_class(module):
    cls = type(module)
    attrs = {"__getstate__": _getstate}
    if not hasattr(cls, "__deepcopy__"):
        attrs["__deepcopy__"] = _deepcopy
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), attrs)


def _inject_property(module, name):
    def get(self):
        p = self.parametrizations[name]
        if not _cache_enabled:
            return p()
        key = (id(self), name)
        if _cache.get(key) is None:
            _cache[key] = p()
        return _cache[key]

    def set_(self, value):
        self.parametrizations[name].right_inverse(value)

    setattr(type(module), name, property(get, set_))


def is_parametrized(module, tensor_name=None):
    ps = module.__dict__.get("_modules", {}).get("parametrizations")
    if ps is None or not isinstance(ps, ModuleDict):
        return False
    return len(ps) > 0 if tensor_name is None else tensor_name in ps


def _check_like(x, y, what_x, name, returned=False):
    if not isinstance(x, _C.TensorBase):
        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(x).__name__}" if returned
                         else f"A parametrization must return a tensor. Got {type(x).__name__}.")
    head = ("The tensor returned by parametrization.right_inverse must have the same {} as module." + name
            + ", unless the `unsafe` flag is enabled.\n") if returned else \
        "Registering a parametrization may not change the {} of the tensor, unless the `unsafe` flag is enabled.\n"
    if x.dtype != y.dtype:
        tail = f"returned dtype: {x.dtype}" if returned else f"{what_x}.dtype: {x.dtype}"
        raise ValueError(head.format("dtype") + f"module.{name}.dtype: {y.dtype}\n" + tail)
    if x.shape != y.shape:
        tail = f"returned shape: {x.shape}" if returned else f"{what_x}.shape: {x.shape}"
        raise ValueError(head.format("shape") + f"module.{name}.shape: {y.shape}\n" + tail)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """module.<tensor_name> becomes parametrization(original) (appended to the chain when it is
    already parametrized)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_like(x, y, f"parametrization(module.{tensor_name})", tensor_name)
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    _check_like(z, y, None, tensor_name, returned=True)
        chain = module.parametrizations[tensor_name]
        chain.append(parametrization)
        chain.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        chain = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = chain
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with name "
                         f"'{tensor_name}'")
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Back to a plain parameter or buffer: the current parametrized value (leave_parametrized),
    or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    chain = module.parametrizations[tensor_name]
    if chain.is_tensor:
        original = chain.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
                _replace_data(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is parametrized "
                             "in terms of a sequence of tensors.")
        t = getattr(module, tensor_name)
        original = Parameter(t) if t.requires_grad else t
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module):
    return type(module).__bases__[0] if is_parametrized(module) else type(module)


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Registers from_module's parametrizations (all, or tensor_name's) on to_module, sharing the
    originals."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        src = from_module.parametrizations[name]
        for f in src:
            register_parametrization(to_module, name, f)
        dst = to_module.parametrizations[name]
        if hasattr(src, "original"):
            dst.original = src.original
        else:
            i = 0
            while hasattr(src, f"original{i}"):
                setattr(dst, f"original{i}", getattr(src, f"original{i}"))
                i += 1
    return to_module
