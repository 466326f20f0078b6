"""oar.nn.utils: gradient clipping and parameter vectors."""
from .. import _C
from .. import _functions as F


def _params(parameters):
    if isinstance(parameters, _C.TensorBase):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the gradients so that their total norm is at most max_norm; returns the total norm."""
    ps = _params(parameters)
    total = _C.clip_grad_norm(ps, float(max_norm), float(norm_type))
    if error_if_nonfinite and not (total.item() == total.item() and abs(total.item()) != float("inf")):
        raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped.")
    return total.float()


def clip_grad_value_(parameters, clip_value):
    for p in _params(parameters):
        p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return F.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    from .._grad_mode import no_grad

    off = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[off:off + n].view_as(p))
            off += n
