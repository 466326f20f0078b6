"""oar.nn.utils: gradient clipping, parameter vectors, weight and spectral norm, parametrizations,
conv/linear + batch-norm fusion, functional_call, skip_init."""
from ... import _C
from ... import _functions as F


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


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """torch's deprecated name of clip_grad_norm_ (it warns as torch's)."""
    import warnings

    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of torch.nn.utils.clip_grad_norm_.",
                  stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite)


def clip_grad_value_(parameters, clip_value):
    for p in _params(parameters):
        p.grad.clamp_(-clip_value, clip_value)


def parameters_to_vector(parameters):
    return F.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec, parameters):
    from ..._grad_mode import no_grad

    if not isinstance(vec, _C.TensorBase):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    off = 0
    with no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[off:off + n].view_as(p))
            off += n


def _norm_except_dim(v, dim):
    """The 2-norm of v over every dim but dim (over all of v when dim is None or -1 on 1-d)."""
    if dim is None or dim == -1 and v.ndim == 1:
        return v.pow(2).sum().sqrt()
    d = dim % v.ndim
    return v.pow(2).sum([i for i in range(v.ndim) if i != d], keepdim=True).sqrt()


class _WeightNorm:
    """torch.nn.utils.weight_norm's hook: before each forward, name = name_g * name_v / ||name_v||."""

    def __init__(self, name, dim):
        self.name, self.dim = name, dim

    def compute(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute(module))


def weight_norm(module, name="weight", dim=0):
    """Reparameterizes module.<name> as a magnitude <name>_g and a direction <name>_v (Salimans &
    Kingma 2016), recomputed before every forward (torch's deprecated hook form, whose parameter
    names the checkpoints of model files such as wav2vec2 use)."""
    from ..parameter import Parameter

    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, _WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    weight = getattr(module, name)
    fn = _WeightNorm(name, dim)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight.detach(), dim)))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    object.__setattr__(module, name, fn.compute(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    from ..parameter import Parameter

    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, _WeightNorm) and hook.name == name:
            weight = hook.compute(module).detach()
            del module._forward_pre_hooks[key]
            del module._parameters[name + "_g"], module._parameters[name + "_v"]
            module.__dict__.pop(name, None)
            module.register_parameter(name, Parameter(weight))
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) without drawing its initial values (torch's contract: the
    parameters' values are unspecified). oar has no meta device: the module is built with the
    random initializers of nn.init turned into no-ops for the call."""
    import inspect

    from .. import init
    from ..modules.module import Module

    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    names = ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
             "kaiming_normal_", "orthogonal_", "sparse_")
    saved = {n: getattr(init, n) for n in names if hasattr(init, n)}
    try:
        for n in saved:
            setattr(init, n, lambda tensor, *a, **k: tensor)
        return module_cls(*args, **kwargs)
    finally:
        for n, f in saved.items():
            setattr(init, n, f)


from . import rnn  # noqa: E402,F401  (torch.nn.utils.rnn: packed sequences)
from . import parametrize, parametrizations, stateless, fusion  # noqa: E402,F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402,F401
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights  # noqa
from . import convert_parameters  # noqa: E402,F401
