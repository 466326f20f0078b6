"""nn.Parameter: a leaf tensor that modules register as a parameter."""
from .. import _C
from .._tensor import Tensor


class Parameter(Tensor):
    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _C.create("empty", (0,), 0)
        if not isinstance(data, _C.TensorBase):
            raise TypeError(f"Parameter: expected a Tensor, got {type(data).__name__}")
        p = data.detach()._alias(cls)
        p.requires_grad = requires_grad
        return p

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __reduce_ex__(self, proto):
        return (Parameter, (self.detach(), self.requires_grad))  # the data pickles as a Tensor


class UninitializedTensorMixin:
    """A parameter or buffer whose shape a lazy module learns from its first input: empty until
    materialize() gives it storage and turns it into its plain class (torch's semantics)."""

    cls_to_become = None

    def materialize(self, shape, device=None, dtype=None):
        from .._creation import empty

        grad = self.requires_grad
        self._set_(empty(*shape, dtype=dtype or self.dtype, device=device or self.device))
        self.requires_grad = grad
        self.__class__ = self.cls_to_become

    def __repr__(self):
        return f"<{type(self).__name__}>"


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    cls_to_become = Parameter

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        from .._creation import empty

        return Parameter.__new__(cls, empty(0, dtype=dtype, device=device), requires_grad)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    cls_to_become = Tensor

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        from .._creation import empty

        return empty(0, dtype=dtype, device=device, requires_grad=requires_grad)._alias(cls)


class Buffer(Tensor):
    pass
