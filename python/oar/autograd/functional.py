"""torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp and hvp of a Python function, from
oar's reverse mode (autograd.grad). jvp and hvp use the double-vjp identity: the vjp is linear in
its cotangent u, so differentiating <vjp(u), v> with respect to u gives J v (no forward mode needed,
but every op on the path must have a differentiable backward, as torch's "double backward")."""
from .. import _creation as C
from .._grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(x, what, fn):
    """(tuple of x, whether x was a tuple); every element must be a tensor."""
    from .._tensor import Tensor

    was_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if was_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            where = f"The {what} given to {fn}" + (f" at index {i}" if was_tuple else "")
            raise TypeError(f"{where} must be either a Tensor or a tuple of Tensors but the value at index {i} "
                            f"has type {type(t).__name__}.")
    return items, was_tuple


def _prepare(inputs, create_graph):
    """Inputs that require grad: detached copies (so the caller's graph is not touched), joined to the
    caller's graph only when create_graph asks for it."""
    return tuple(t if create_graph and t.requires_grad else t.detach().requires_grad_(True) for t in inputs)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, fn, what="output"):
    """grad of sum(outputs * grad_outputs) per input; unused inputs give zeros (or refuse when strict)."""
    from . import grad

    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        grads = (None,) * len(inputs)
    else:
        grads = grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs], retain_graph=True,
                     create_graph=create_graph, allow_unused=True)
    out = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The {what} of the user-provided function is independent of input {i}. This is "
                                   f"not allowed in strict mode.")
            g = C.zeros_like(x)
        out.append(g)
    return tuple(out)


def _finish(items, was_tuple, create_graph):
    items = tuple(t if create_graph else t.detach() for t in items)
    return items if was_tuple else items[0]


def _check_v(v, outputs, what, fn):
    vs, _ = _as_tuple(v, "v", fn)
    if len(vs) != len(outputs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, outputs)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {list(b.shape)} but got "
                               f"{list(a.shape)}.")
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J): v shaped as the outputs (omitted only for a one-element output)."""
    with enable_grad():
        ins, in_tuple = _as_tuple(inputs, "inputs", "vjp")
        ins = _prepare(ins, create_graph)
        outs, out_tuple = _as_tuple(func(*ins), "outputs of the user-provided function", "vjp")
        if v is None:
            if len(outs) != 1 or outs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                                   "Tensor with a single element.")
            vs = (C.ones_like(outs[0]),)
        else:
            vs = _check_v(v, outs, "outputs", "vjp")
        grads = _grads(outs, ins, vs, create_graph, strict, "vjp")
    return _finish(outs, out_tuple, create_graph), _finish(grads, in_tuple, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v): v shaped as the inputs (omitted only for a one-element input)."""
    with enable_grad():
        ins, in_tuple = _as_tuple(inputs, "inputs", "jvp")
        ins = _prepare(ins, create_graph)
        if v is None:
            if len(ins) != 1 or ins[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            vs = (C.ones_like(ins[0]),)
        else:
            vs = _check_v(v, ins, "inputs", "jvp")
        outs, out_tuple = _as_tuple(func(*ins), "outputs of the user-provided function", "jvp")
        # u: a cotangent for each output; vjp(u) is linear in u, so d<vjp(u), v>/du = J v
        us = tuple(C.zeros_like(o).requires_grad_(True) for o in outs)
        g = _grads(outs, ins, us, True, strict, "jvp")
        from . import grad

        pairs = [(gi, vi) for gi, vi in zip(g, vs) if gi.requires_grad]
        if pairs:
            jv = grad([p for p, _ in pairs], list(us), [q for _, q in pairs], retain_graph=True,
                      create_graph=create_graph, allow_unused=True)
        else:
            jv = (None,) * len(us)
        jv = tuple(C.zeros_like(o) if j is None else j for j, o in zip(jv, outs))
    return _finish(outs, out_tuple, create_graph), _finish(jv, out_tuple, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d outputs / d inputs: for one input and one output a tensor of shape out.shape + in.shape; a tuple
    over inputs (and a tuple over outputs of those) otherwise. Reverse mode, one row per output element."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your function '
                         'has more outputs than inputs, "forward-mode" tends to be more performant. Otherwise, '
                         'prefer to use "reverse-mode".')
    from . import grad

    with enable_grad():
        ins, in_tuple = _as_tuple(inputs, "inputs", "jacobian")
        ins = _prepare(ins, create_graph)
        outs, out_tuple = _as_tuple(func(*ins), "outputs of the user-provided function", "jacobian")
        table = []
        for i, out in enumerate(outs):
            flat = out.reshape(-1)
            rows = [[] for _ in ins]
            for k in range(flat.numel()):
                if out.requires_grad:
                    g = grad([flat[k]], list(ins), retain_graph=True, create_graph=create_graph, allow_unused=True)
                else:
                    g = (None,) * len(ins)
                for j, (gj, x) in enumerate(zip(g, ins)):
                    if gj is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is independent of input {j}."
                                               f" This is not allowed in strict mode.")
                        gj = C.zeros_like(x)
                    rows[j].append(gj)
            from .. import stack

            per_input = tuple(
                (stack(r) if r else C.zeros(0, *x.shape, dtype=x.dtype)).reshape(*out.shape, *x.shape)
                for r, x in zip(rows, ins))
            table.append(_finish(per_input, True, create_graph))
    if not out_tuple:
        return table[0] if in_tuple else table[0][0]
    return tuple(t if in_tuple else t[0] for t in table)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Jacobian of the gradient of a function with a one-element output: in.shape + in.shape (a tuple
    of tuples for several inputs)."""
    ins, in_tuple = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        out = func(*xs)
        outs, out_tuple = _as_tuple(out, "outputs of the user-provided function", "hessian")
        if out_tuple or outs[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element.")
        return _grads(outs, xs, (C.ones_like(outs[0]),), True, strict, "hessian")

    res = jacobian(gradient, ins, create_graph=create_graph, strict=strict, strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0][0] if isinstance(res[0], tuple) else res[0]
    return res


def _gradient_and_v(func, inputs, v, create_graph, strict, fn):
    """What vhp and hvp share: the prepared inputs, the one-element output, v, and the gradient with
    its graph kept (so it can be differentiated again)."""
    ins, in_tuple = _as_tuple(inputs, "inputs", fn)
    ins = _prepare(ins, create_graph)
    outs, out_tuple = _as_tuple(func(*ins), "outputs of the user-provided function", fn)
    if out_tuple or outs[0].numel() != 1:
        raise RuntimeError(f"The function given to {fn} should return a single Tensor with a single element.")
    if v is None and len(ins) == 1 and ins[0].numel() == 1:
        vs = (C.ones_like(ins[0]),)
    else:
        vs = _check_v(v, ins, "inputs", fn)
    g = _grads(outs, ins, (C.ones_like(outs[0]),), True, strict, fn)
    return ins, in_tuple, outs, vs, g


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H) for a function with a one-element output."""
    with enable_grad():
        ins, in_tuple, outs, vs, g = _gradient_and_v(func, inputs, v, create_graph, strict, "vhp")
        res = _grads(g, ins, vs, create_graph, strict, "vhp", what="jacobian")
    return _finish(outs, False, create_graph), _finish(res, in_tuple, create_graph)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): the double-vjp identity on the gradient (equal to vhp for a symmetric H)."""
    with enable_grad():
        ins, in_tuple, outs, vs, g = _gradient_and_v(func, inputs, v, create_graph, strict, "hvp")
        us = tuple(C.zeros_like(x).requires_grad_(True) for x in ins)
        gu = _grads(g, ins, us, True, strict, "hvp", what="jacobian")
        res = _grads(gu, us, vs, create_graph, strict, "hvp", what="double backward")
    return _finish(outs, False, create_graph), _finish(res, in_tuple, create_graph)
