"""oar.autograd: grad, backward, the grad-mode switches, Function, functional (vjp, jvp, jacobian,
hessian, vhp, hvp), gradcheck / gradgradcheck, anomaly detection and the deprecated Variable."""
from .. import _C
from .._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401


def _seq(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, is_grads_batched=False):
    """Gradients of outputs with respect to inputs, without touching any .grad (torch.autograd.grad)."""
    outs, ins = _seq(outputs), _seq(inputs)
    gouts = None if grad_outputs is None else _seq(grad_outputs)
    for k, o in enumerate(outs):
        if gouts is None or gouts[k] is None:
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
    retain = create_graph if retain_graph is None else retain_graph
    return _C.autograd_grad(outs, ins, gouts, bool(retain), bool(create_graph), bool(allow_unused))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    ts = _seq(tensors)
    gs = [None] * len(ts) if grad_tensors is None else _seq(grad_tensors)
    for k, (t, g) in enumerate(zip(ts, gs)):
        t.backward(g, retain_graph=True if k < len(ts) - 1 else retain_graph)


from . import function  # noqa: E402
from .function import Function, FunctionCtx, once_differentiable  # noqa: E402,F401
from . import anomaly_mode, functional  # noqa: E402,F401
from .anomaly_mode import detect_anomaly, set_detect_anomaly  # noqa: E402,F401
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402,F401


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        from .._tensor import Tensor

        return isinstance(other, Tensor)


class Variable(metaclass=_VariableMeta):
    """torch.autograd.Variable (deprecated there): Variable(t, requires_grad=False) is t itself (with
    requires_grad set when asked), and every tensor is an instance."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        return data.requires_grad_(True) if requires_grad else data
