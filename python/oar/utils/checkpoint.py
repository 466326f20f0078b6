"""torch.utils.checkpoint: activation checkpointing. A checkpointed piece of the forward keeps
only its inputs; backward runs it again with autograd on and back-propagates through the
recomputed graph (a nested backward, so parameters inside accumulate their .grad as usual).
With preserve_rng_state the recomputation replays the forward's random draws (dropout masks
match). use_reentrant=False also records the piece when no input requires grad, so parameters
inside still get gradients (torch's non-reentrant variant); both need .backward(), as torch's
reentrant variant does."""
import warnings

from .. import _C
from .. import random as _random
from .._grad_mode import enable_grad
from ..autograd import Function
from ..autograd import backward as _backward

__all__ = ["checkpoint", "checkpoint_sequential"]


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


class _Checkpoint(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, anchor, *args):
        ctx.run_function, ctx.preserve = run_function, preserve_rng_state
        if preserve_rng_state:
            ctx.rng = _C.rng_get_state()
        ctx.tensor_index = [i for i, a in enumerate(args) if _is_tensor(a)]
        ctx.others = [None if _is_tensor(a) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_index])
        return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.others)
        for i, t in zip(ctx.tensor_index, ctx.saved_tensors):
            args[i] = t.detach().requires_grad_(t.requires_grad)
        with _random.fork_rng(enabled=ctx.preserve):
            if ctx.preserve:
                _C.rng_set_state(*ctx.rng)
            with enable_grad():
                outputs = ctx.run_function(*args)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if _is_tensor(o) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        arg_grads = [None] * len(args)
        for i in ctx.tensor_index:
            arg_grads[i] = args[i].grad
        return (None, None, None) + tuple(arg_grads)


def checkpoint(function, *args, use_reentrant=True, **kwargs):
    """function(*args) without keeping its activations: they are recomputed in backward."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant and _C.is_grad_enabled() and \
            not any(_is_tensor(a) and a.requires_grad for a in args):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None")
    anchor = None
    if not use_reentrant and _C.is_grad_enabled():
        from .._creation import zeros

        anchor = zeros(1, requires_grad=True)  # records the piece even when no input requires grad
    return _Checkpoint.apply(function, preserve, anchor, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=True, **kwargs):
    """A sequential model (or list of modules) in `segments` checkpointed pieces; the last piece runs
    normally (its activations are needed right away by backward)."""
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    from ..nn import Sequential

    if isinstance(functions, Sequential):
        functions = list(functions.children())

    def run(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
