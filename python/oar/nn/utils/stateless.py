"""torch.nn.utils.stateless.functional_call: call a module with some of its parameters and
buffers replaced by given tensors (by state_dict name) for that call only; gradients flow to the
given tensors, and the module's own tensors are back afterwards, even if the call raises."""
from ... import _C


def _slot(module, name):
    """The dict (_parameters or _buffers) of the submodule that holds the dotted name, and the key."""
    *path, leaf = name.split(".")
    m = module
    for p in path:
        sub = m._modules.get(p)
        if sub is None:
            raise AttributeError(f"functional_call: {type(m).__name__} has no submodule '{p}' (in '{name}')")
        m = sub
    for d in (m._parameters, m._buffers):
        if leaf in d:
            return d, leaf
    raise AttributeError(f"functional_call: '{name}' is not a parameter or buffer of {type(module).__name__} "
                         "(expected a key of its state_dict or named_parameters)")


def functional_call(module, parameters_and_buffers, args, kwargs=None):
    saved = []
    try:
        for name, t in parameters_and_buffers.items():
            if not isinstance(t, _C.TensorBase):
                raise TypeError(f"functional_call: expected a Tensor for '{name}', got {type(t).__name__}")
            d, key = _slot(module, name)
            saved.append((d, key, d[key]))
            d[key] = t
        return module(*args, **(kwargs or {})) if isinstance(args, tuple) else module(args, **(kwargs or {}))
    finally:
        for d, key, old in reversed(saved):
            d[key] = old
