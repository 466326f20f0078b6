"""oar.cuda.amp (torch.cuda.amp): autocast with CUDA's defaults (float16), GradScaler, and the
custom_fwd / custom_bwd decorators of custom autograd functions."""
import functools

from . import autocast_mode
from .grad_scaler import GradScaler  # noqa: F401
from .._dtype import float16


class autocast(autocast_mode.autocast):
    """torch.cuda.amp.autocast(args...) is oar.autocast("cuda", args...)."""

    def __init__(self, enabled=True, dtype=float16, cache_enabled=True):
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


def _cast(value, dtype):
    from .._tensor import Tensor
    from .._dtype import float64

    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() and value.is_cuda and value.dtype is not float64 else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, dtype): _cast(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, cast_inputs=None):
    """torch's: with cast_inputs, the forward of a custom Function runs with autocast off on
    CUDA inputs cast to that dtype; without, it runs under the current state."""
    if fwd is None:
        return functools.partial(custom_fwd, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        if cast_inputs is None:
            args[0]._fwd_used_autocast = autocast_mode.is_autocast_enabled()
            return fwd(*args, **kwargs)
        on = autocast_mode.is_autocast_enabled()
        args[0]._fwd_used_autocast = False
        if on:
            with autocast(enabled=False):
                return fwd(*_cast(args, cast_inputs), **_cast(kwargs, cast_inputs))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd):
    """torch's: backward runs under the autocast state its forward ran in."""

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(args[0]._fwd_used_autocast):
            return bwd(*args, **kwargs)

    return decorate_bwd
