"""torch.autograd.Function on oar (python/oar/autograd/function.py over the core's
custom_function op), beside the same classes on torch 1.13: gradients, several outputs, non-tensor
arguments, non-differentiable outputs, unmaterialized gradients, once_differentiable, inputs modified in
place (mark_dirty), compiled steps, errors, and the ctx released with the graph."""
import gc
import weakref

import numpy as np
import pytest

import oar

from test_torch_behaviours import close

R = np.random.RandomState(5)


def classes(lib):
    """The same user code against either library."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x ** 3 * scale

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g * ctx.scale, None

    class SplitMax(lib.autograd.Function):  # two differentiable outputs and an integer one
        @staticmethod
        def forward(ctx, a, b):
            idx = (a > b).long()
            ctx.mark_non_differentiable(idx)
            ctx.save_for_backward(a, b)
            return a * b, a + 2 * b, idx

        @staticmethod
        def backward(ctx, g_prod, g_sum, g_idx):
            a, b = ctx.saved_tensors
            return g_prod * b + g_sum, g_prod * a + 2 * g_sum

    class Unmaterialized(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g0, g1):
            ctx.seen = (g0 is None, g1 is None)
            out = 0
            if g0 is not None:
                out = out + 2 * g0
            if g1 is not None:
                out = out + 3 * g1
            return out

    class GradMultiply(lib.autograd.Function):  # fairseq's / torchaudio's wav2vec2
        @staticmethod
        def forward(ctx, x, scale):
            ctx.scale = scale
            return x.new(x)  # a copy (torch's legacy constructor form)

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, grad):
            return grad * ctx.scale, None

    return Cube, SplitMax, Unmaterialized, GradMultiply


def test_functions_match_torch(torch):
    x, a, b, w = (R.randn(4, 3).astype(np.float32) for _ in range(4))
    results = []
    for lib in (oar, torch):
        Cube, SplitMax, Unmaterialized, GradMultiply = classes(lib)
        xt, at, bt = (lib.tensor(v, requires_grad=True) for v in (x, a, b))
        wt = lib.tensor(w)
        y = Cube.apply(xt, 0.5)
        p, s, idx = SplitMax.apply(at, bt)
        assert not idx.requires_grad and idx.dtype == lib.int64
        u0, _ = Unmaterialized.apply(xt)
        g = GradMultiply.apply(y, 0.25)
        loss = (g * wt).sum() + (p * s).sum() + u0.sum()
        loss.backward()
        results.append([loss, y, p, s, idx, xt.grad, at.grad, bt.grad])
    for o, t in zip(*results):
        close(o, t, rtol=1e-5, atol=1e-6)


def dirty_classes(lib):
    class Relu_(lib.autograd.Function):  # modifies its input and returns it
        @staticmethod
        def forward(ctx, x):
            x.clamp_(min=0)
            ctx.mark_dirty(x)
            ctx.save_for_backward(x)
            return x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * (x > 0).to(g.dtype)

    class AddInto(lib.autograd.Function):  # two outputs, the second the dirty input
        @staticmethod
        def forward(ctx, x, w):
            x.add_(w)
            ctx.mark_dirty(x)
            return w * 2, x

        @staticmethod
        def backward(ctx, g1, g2):
            return g2, g1 * 2 + g2

    class NotReturned(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g

    return Relu_, AddInto, NotReturned


def test_mark_dirty_matches_torch(torch):
    a, x, w = (R.randn(5).astype(np.float32) for _ in range(3))
    results = []
    for lib in (oar, torch):
        Relu_, AddInto, _ = dirty_classes(lib)
        at, xt, wt = (lib.tensor(v, requires_grad=True) for v in (a, x, w))
        b = at * 3
        y = Relu_.apply(b)
        assert y is b and y.grad_fn is not None
        xc = xt.clone()
        o1, o2 = AddInto.apply(xc, wt)
        assert o2 is xc and o2.grad_fn is not None
        loss = (y * lib.arange(5.0)).sum() + o1.sum() + (o2 * o2).sum()
        loss.backward()
        results.append([loss, y, o1, o2, at.grad, xt.grad, wt.grad])
    for o, t in zip(*results):
        close(o, t, rtol=1e-5, atol=1e-6)


def test_mark_dirty_errors(torch):
    for lib in (oar, torch):
        Relu_, _, NotReturned = dirty_classes(lib)
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            Relu_.apply(lib.tensor([1.0, -1.0], requires_grad=True))
        with pytest.raises(RuntimeError, match="marked as dirty .* not returned as output"):
            NotReturned.apply(lib.tensor([1.0, -1.0], requires_grad=True) * 1)
    Relu_, _, _ = dirty_classes(oar)
    v = oar.tensor([-2.0, 3.0])  # no gradient wanted: modified in place, returned as itself
    assert Relu_.apply(v) is v and v.tolist() == [0.0, 3.0]


def test_ctx_flags_and_unmaterialized_grads():
    _, _, Unmaterialized, _ = classes(oar)
    x = oar.tensor(R.randn(3).astype(np.float32), requires_grad=True)
    seen = {}

    class Probe(oar.autograd.Function):
        @staticmethod
        def forward(ctx, a, k, b):
            seen["needs"] = ctx.needs_input_grad
            return a * k + b

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, g

    Probe.apply(x, 2.0, oar.ones(3)).sum().backward()
    assert seen["needs"] == (True, False, False)
    close(x.grad, np.full(3, 2.0, np.float32))
    u0, u1 = Unmaterialized.apply(x)
    x.grad = None
    u1.sum().backward()  # only the second output reaches the function
    close(x.grad, np.full(3, 3.0, np.float32))
    assert u1.grad_fn is not None


def test_without_grad_nothing_is_recorded():
    Cube, *_ = classes(oar)
    x = oar.tensor(R.randn(3).astype(np.float32), requires_grad=True)
    with oar.no_grad():
        y = Cube.apply(x, 1.0)
    assert not y.requires_grad
    y = Cube.apply(oar.tensor([1.0, 2.0]), 1.0)  # no input wants a gradient
    assert not y.requires_grad and y.grad_fn is None


def test_custom_function_compiles():
    import warnings

    _, _, _, GradMultiply = classes(oar)
    Cube = classes(oar)[0]
    w = oar.tensor(R.randn(3, 4).astype(np.float32), requires_grad=True)
    x = oar.tensor(R.randn(2, 3).astype(np.float32))

    def step(x):
        h = GradMultiply.apply(Cube.apply(x @ w, 0.5), 0.1)
        loss = (h * h).sum()
        loss.backward()
        return loss

    want = step(x)
    want_grad = w.grad.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would warn
        compiled = oar.jit.to_static(step)
        for _ in range(3):  # the trace, then the program
            w.grad = None
            got = compiled(x)
    close(got, want, rtol=1e-6)
    close(w.grad, want_grad, rtol=1e-5)


def test_errors():
    class WrongCount(oar.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g

    class WrongShape(oar.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            return oar.ones(7)

    class Raises(oar.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise KeyError("from the user's backward")

    x = oar.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="incorrect number of gradients"):
        WrongCount.apply(x, 2.0).sum().backward()
    with pytest.raises(RuntimeError, match=r"expected the input's \[3\]"):
        WrongShape.apply(x).backward()
    with pytest.raises(KeyError, match="from the user's backward"):
        Raises.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="Legacy autograd function"):
        WrongCount()(x, 2.0)
    with pytest.raises(NotImplementedError, match="forward"):
        oar.autograd.Function.apply(x)


def test_ctx_is_released_with_the_graph():
    refs = []

    class Keep(oar.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            refs.append(weakref.ref(ctx))
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = oar.tensor([1.0, 2.0], requires_grad=True)
    for _ in range(50):
        (Keep.apply(x) * 3).sum().backward()
    y = Keep.apply(x)
    gc.collect()
    assert all(r() is None for r in refs[:-1])  # every finished graph let its ctx go
    assert refs[-1]() is not None  # y still holds its node
    del y
    gc.collect()
    assert refs[-1]() is None
