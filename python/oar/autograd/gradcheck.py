"""torch.autograd.gradcheck / gradgradcheck: a function's analytical Jacobian (reverse mode, a row per
output element) against central finite differences, elementwise within atol + rtol * |numerical|;
run it in float64, as torch advises. gradgradcheck does the same for the function's vector-Jacobian
product, so second derivatives are checked."""
from .. import _creation as C

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck when the Jacobians differ (torch's name)."""


def _tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable(inputs):
    from .._tensor import Tensor

    return [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]


def _outputs(func, inputs):
    return tuple(o for o in _tuple(func(*inputs)))


def _numerical(func, inputs, i, eps):
    """d outputs / d inputs[i] by central differences: a list over outputs of [out.numel, in.numel]."""
    import numpy as np

    x = inputs[i].detach()
    base = x.numpy().astype(np.float64).reshape(-1)
    cols = []
    for k in range(base.size):   # (grad mode stays on: gradgradcheck's function differentiates inside)
        vals = []
        for step in (eps, -eps):
            moved = base.copy()
            moved[k] += step
            args = list(inputs)
            args[i] = C.tensor(moved.reshape(tuple(x.shape)), dtype=x.dtype).requires_grad_(True)
            vals.append([o.detach().numpy().astype(np.float64).reshape(-1) for o in _outputs(func, args)])
        cols.append([(a - b) / (2 * eps) for a, b in zip(*vals)])
    n_out = len(cols[0]) if cols else len(_outputs(func, inputs))
    return [np.stack([c[o] for c in cols], axis=1) if cols else np.zeros((0, 0)) for o in range(n_out)]


def _analytical(func, inputs, i):
    """The same Jacobians from reverse mode: rows are grads of each output element."""
    import numpy as np

    from . import grad

    outs = _outputs(func, inputs)
    res = []
    for o in outs:
        flat = o.reshape(-1)
        rows = []
        for k in range(flat.numel()):
            if not o.requires_grad:
                rows.append(np.zeros(inputs[i].numel()))
                continue
            g = grad([flat[k]], [inputs[i]], retain_graph=True, allow_unused=True)[0]
            rows.append(np.zeros(inputs[i].numel()) if g is None else g.detach().numpy().astype(np.float64).ravel())
        res.append(np.stack(rows) if rows else np.zeros((0, inputs[i].numel())))
    return res


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True, fast_mode=False):
    """True when every output's Jacobian with respect to every input requiring grad matches central
    differences; else GradcheckError (or False with raise_exception=False)."""
    import numpy as np

    inputs = _tuple(inputs)
    which = _differentiable(inputs)
    if not which:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of the them "
                         "have requires_grad=True.")
    for i in which:
        if inputs[i].dtype.name not in ("float64",):
            import warnings

            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. This check "
                          "will likely fail if all the inputs are not of double precision floating point. ")
    for i in which:
        num = _numerical(func, inputs, i, eps)
        ana = _analytical(func, inputs, i)
        for o, (n, a) in enumerate(zip(num, ana)):
            if not np.allclose(a, n, rtol=rtol, atol=atol):
                msg = (f"Jacobian mismatch for output {o} with respect to input {i},\nnumerical:{n}\n"
                       f"analytical:{a}\n")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3, gen_non_contig_grad_outputs=False,
                  raise_exception=True, nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
                  check_batched_grad=False, check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False):
    """gradcheck of (inputs, grad_outputs) -> the vector-Jacobian products of func: its second derivatives.
    grad_outputs default to random values of the outputs' shapes (requiring grad)."""
    from . import grad

    inputs = _tuple(inputs)
    outs = _outputs(func, inputs)
    if grad_outputs is None:
        grad_outputs = tuple(C.randn(*o.shape, dtype=o.dtype).requires_grad_(True) for o in outs)
    grad_outputs = _tuple(grad_outputs)
    n_in = len(inputs)
    which = _differentiable(inputs)

    def vjps(*args):
        xs, gs = args[:n_in], args[n_in:]
        ys = _outputs(func, xs)
        pairs = [(y, g) for y, g in zip(ys, gs) if y.requires_grad]
        got = grad([y for y, _ in pairs], [xs[i] for i in which], [g for _, g in pairs], create_graph=True,
                   allow_unused=True)
        return tuple(C.zeros_like(xs[i]) if g is None else g for g, i in zip(got, which))

    return gradcheck(vjps, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception)
