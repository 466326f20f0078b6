"""torch.autograd.Function: a user's forward and backward as one node of the graph.

apply runs forward without autograd, then records each differentiable output with the core's
custom_function op (src/ops/custom_fn.c): the output is a view of forward's result, and when
backward reaches it the core calls back into the ctx, which runs the class's backward. Inside a
traced function (oar.jit.to_static) the ops forward and backward run are recorded like any
others, so a custom function compiles into the program."""
import functools

from .. import _C
from .._grad_mode import no_grad


class FunctionCtx:
    """The ctx of forward and backward: saved tensors, the inputs wanting gradients, options."""

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, _C.TensorBase):
                raise TypeError(f"save_for_backward can only save variables, but argument {tensors.index(t)} is "
                                f"not a Variable")
        self._saved = tensors

    @property
    def saved_tensors(self):
        return getattr(self, "_saved", ())

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = getattr(self, "_non_differentiable", ()) + tensors

    def set_materialize_grads(self, value):
        self._materialize = bool(value)

    def mark_dirty(self, *tensors):
        """Declares inputs forward modified in place; apply returns them, their history now this node."""
        self._dirty = getattr(self, "_dirty", ()) + tensors

    def mark_shared_storage(self, *pairs):
        pass  # torch's deprecated hint: storage sharing needs no declaration here

    # ---- called by the core when backward reaches output j of this function
    def _backward(self, j, grad):
        grads = [None] * len(self._outputs)
        grads[j] = grad
        if getattr(self, "_materialize", True):
            from .._creation import zeros

            for k, (shape, dtype, device) in enumerate(self._outputs):
                if grads[k] is None and shape is not None:
                    grads[k] = zeros(*shape, dtype=dtype, device=device)
        res = self._cls.backward(self, *grads)
        res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
        n = self._n_args
        if len(res) < n or any(r is not None for r in res[n:]):
            raise RuntimeError(f"function {self._cls.__name__}Backward returned an incorrect number of gradients "
                               f"(expected {n}, got {len(res)})")
        out = []
        for i in self._tensor_args:
            g = res[i]
            if g is not None and not isinstance(g, _C.TensorBase):
                raise TypeError(f"function {self._cls.__name__}Backward: expected a Tensor or None as gradient "
                                f"{i}, got {type(g).__name__}")
            out.append(g)
        return out


class Function:
    """Subclass with static forward(ctx, *args) and backward(ctx, *grad_outputs) (or torch 2's
    forward(*args) with setup_context(ctx, inputs, output)); call with Cls.apply(*args)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    def __call__(self, *args, **kwargs):
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method: call Cls.apply(*args)")

    @classmethod
    def vjp(cls, ctx, *grad_outputs):
        return cls.backward(ctx, *grad_outputs)

    @classmethod
    def apply(cls, *args):
        is_t = lambda a: isinstance(a, _C.TensorBase)
        ctx = FunctionCtx()
        ctx._cls, ctx._n_args = cls, len(args)
        ctx._tensor_args = [i for i, a in enumerate(args) if is_t(a)]
        ctx.needs_input_grad = tuple(is_t(a) and a.requires_grad for a in args)
        with no_grad():
            if cls.setup_context is not Function.setup_context:  # torch 2's split form
                outputs = cls.forward(*args)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        dirty = {id(t) for t in getattr(ctx, "_dirty", ())}
        if dirty - {id(o) for o in outs}:
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as output. "
                               "The inputs that are modified inplace must all be outputs of the Function.")
        if not (_C.is_grad_enabled() and any(ctx.needs_input_grad)):
            return outputs
        if any(id(a) in dirty and a.requires_grad and a.is_leaf for a in args if is_t(a)):
            raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
        skip = {id(t) for t in getattr(ctx, "_non_differentiable", ())}
        ctx._outputs = [(tuple(o.shape), o.dtype, o.device) if is_t(o) and o.is_floating_point() else (None,) * 3
                        for o in outs]
        inputs = tuple(args[i] for i in ctx._tensor_args)
        recorded = tuple(_C.custom_function(o, j, inputs, ctx)
                         if is_t(o) and o.is_floating_point() and id(o) not in skip else o
                         for j, o in enumerate(outs))
        # a dirty input is returned as itself, its history moved onto this node (as torch rebases it)
        recorded = tuple(o._set_(r) or o if id(o) in dirty and r is not o else r for o, r in zip(outs, recorded))
        return recorded[0] if single else recorded


def once_differentiable(fn):
    """Marks a backward that cannot itself be differentiated: it runs without autograd."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            return fn(ctx, *args)

    return wrapper


class InplaceFunction(Function):
    def __init__(self, inplace=False):
        self.inplace = inplace
