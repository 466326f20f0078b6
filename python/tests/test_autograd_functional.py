"""torch.autograd.functional (vjp, jvp, jacobian, hessian, vhp, hvp), gradcheck / gradgradcheck and
Variable beside torch 1.13: the same values for one and several inputs and outputs, torch's errors,
and gradcheck catching a wrong backward."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(3)
X = R.standard_normal((3,)).astype(np.float64)
Y = R.standard_normal((2, 3)).astype(np.float64)


def f_single(L, x):
    return (x.sin() * x.exp()).sum() if x.ndim == 1 else x


def funcs(L):
    return {
        "vector": (lambda x: x.sin() * x.exp() + x.pow(3), (X,)),
        "matrix": (lambda y, x: y @ x.tanh() + (y * y).sum(1), (Y, X)),
        "two outputs": (lambda y, x: (y.sum(0) * x, (y ** 2).sum()), (Y, X)),
    }


def scalar_funcs(L):
    return {
        "cubic": (lambda x: (x.pow(3) * x.sin()).sum(), (X,)),
        "coupled": (lambda y, x: ((y @ x) ** 2).sum() + (x.exp() * y.sum(0)).sum(), (Y, X)),
    }


def conv(L, arrays):
    return tuple(L.from_numpy(a.copy()) for a in arrays)


def flat(x):
    if isinstance(x, (tuple, list)):
        return [v for item in x for v in flat(item)]
    return [x.detach().numpy()]


def close(a, b):
    fa, fb = flat(a), flat(b)
    assert len(fa) == len(fb)
    for u, v in zip(fa, fb):
        assert u.shape == v.shape, (u.shape, v.shape)
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["vector", "matrix", "two outputs"])
def test_vjp_jvp_jacobian_match_torch(name):
    torch = torch_or_skip()
    res = {}
    for L in (oar, torch):
        fn, arrays = funcs(L)[name]
        ins = conv(L, arrays)
        outs = fn(*ins)
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        v_out = tuple(L.from_numpy(np.linspace(-1, 1, o.numel()).reshape(tuple(o.shape))) for o in outs_t)
        v_in = tuple(L.from_numpy(np.linspace(0.5, 2, x.numel()).reshape(tuple(x.shape))) for x in ins)
        one = lambda t: t if len(t) > 1 else t[0]
        F = L.autograd.functional
        res[L] = (F.vjp(fn, one(ins), one(v_out)), F.jvp(fn, one(ins), one(v_in)), F.jacobian(fn, one(ins)))
    for a, b in zip(res[oar], res[torch]):
        close(a, b)


@pytest.mark.parametrize("name", ["cubic", "coupled"])
def test_hessian_vhp_hvp_match_torch(name):
    torch = torch_or_skip()
    res = {}
    for L in (oar, torch):
        fn, arrays = scalar_funcs(L)[name]
        ins = conv(L, arrays)
        v_in = tuple(L.from_numpy(np.linspace(0.5, 2, x.numel()).reshape(tuple(x.shape))) for x in ins)
        one = lambda t: t if len(t) > 1 else t[0]
        F = L.autograd.functional
        res[L] = (F.hessian(fn, one(ins)), F.vhp(fn, one(ins), one(v_in)), F.hvp(fn, one(ins), one(v_in)))
    for a, b in zip(res[oar], res[torch]):
        close(a, b)


def test_create_graph_strict_and_errors():
    torch = torch_or_skip()
    x = oar.from_numpy(X.copy()).requires_grad_()
    _, g = oar.autograd.functional.vjp(lambda t: (t ** 3).sum(), x, create_graph=True)
    g.sum().backward()   # second derivative through the vjp: 6x
    np.testing.assert_allclose(x.grad.numpy(), 6 * X, rtol=1e-12)
    with pytest.raises(RuntimeError, match="independent of input 1"):
        oar.autograd.functional.vjp(lambda a, b: a * 2, (oar.ones(2), oar.ones(2)), oar.ones(2), strict=True)
    _, gs = oar.autograd.functional.vjp(lambda a, b: a * 2, (oar.ones(2), oar.ones(2)), oar.ones(2))
    assert gs[1].numpy().tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="v can only be None"):
        oar.autograd.functional.vjp(lambda a: a * 2, oar.ones(2))
    with pytest.raises(RuntimeError, match="Entry 0 in v has invalid size"):
        oar.autograd.functional.vjp(lambda a: a * 2, oar.ones(2), oar.ones(3))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        oar.autograd.functional.jacobian(lambda a: a, [oar.ones(2), 3])
    with pytest.raises(RuntimeError, match="single Tensor with a single element"):
        oar.autograd.functional.hessian(lambda a: a * 2, oar.ones(2))
    with pytest.raises(RuntimeError, match="v can only be None"):
        torch.autograd.functional.vjp(lambda a: a * 2, torch.ones(2))   # the oracle says the same


def test_gradcheck_passes_and_catches_a_wrong_backward():
    x = oar.from_numpy(X.copy()).requires_grad_()
    y = oar.from_numpy(Y.copy()).requires_grad_()
    assert oar.autograd.gradcheck(lambda a, b: (b @ a.sin(), a.exp() * 2), (x, y))
    assert oar.autograd.gradgradcheck(lambda a, b: (b @ a.sin()).pow(2), (x, y))

    class Wrong(oar.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return g * a   # should be 2 a

    with pytest.raises(oar.autograd.GradcheckError, match="Jacobian mismatch for output 0 with respect to input 0"):
        oar.autograd.gradcheck(Wrong.apply, (x,))
    assert oar.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False) is False
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        oar.autograd.gradcheck(lambda a: a, (oar.ones(2),))
    assert isinstance(oar.ones(2), oar.autograd.Variable)
    v = oar.autograd.Variable(oar.ones(2), requires_grad=True)
    assert v.requires_grad and isinstance(v, oar.Tensor)


def test_detect_anomaly_names_the_op_like_torch():
    torch = torch_or_skip()
    msgs = []
    for L in (oar, torch):
        x = L.tensor([0.0, 1.0], requires_grad=True)
        with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
            with L.autograd.detect_anomaly():
                assert L.is_anomaly_enabled()
                y = (x / x).sum()   # 0/0: the backward of div makes NaN
                with pytest.raises(RuntimeError) as e:
                    y.backward()
                msgs.append(str(e.value))
        assert not L.is_anomaly_enabled()
    # the divisor's gradient -x/y^2 is 0/0 (the dividend's, 1/y, is inf: not an anomaly)
    assert "Function 'divBackward' returned nan values in its 1th output." in msgs[0], msgs[0]
    assert "Function 'DivBackward0' returned nan values in its 1th output." in msgs[1]
    x = oar.tensor([0.0, 1.0], requires_grad=True)
    (x / x).sum().backward()   # off: NaN gradients come through, as torch's
    assert np.isnan(x.grad.numpy()[0])
    oar.autograd.set_detect_anomaly(True)
    try:
        z = oar.tensor([0.0], requires_grad=True)
        (z ** 0.5).sum().backward()   # an infinite gradient is not an anomaly (torch agrees)
        with pytest.raises(RuntimeError, match="Function 'sqrtBackward' returned nan values in its 0th output"):
            (z.sqrt() * 0).sum().backward()   # 0 * d sqrt(0) = 0 * inf
    finally:
        oar.autograd.set_detect_anomaly(False)
