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


class UninitializedParameter(Parameter):
    pass


class Buffer(Tensor):
    pass
