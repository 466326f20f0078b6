"""oar.Tensor and the module-level API beyond the parity table: properties, printing,
conversions, in-place ops and assignment, grad modes, hooks, retain_grad, autograd.grad."""
import numpy as np
import pytest

import oar


def test_properties_and_creation():
    x = oar.zeros(2, 3)
    assert x.shape == (2, 3) and x.size() == oar.Size([2, 3]) and x.size(1) == 3 and x.size(-1) == 3
    assert x.dim() == 2 and x.ndim == 2 and x.numel() == 6 and x.dtype is oar.float32
    assert str(x.device) == "cpu" and x.is_leaf and not x.requires_grad and x.grad is None and x.grad_fn is None
    assert oar.ones((2, 2)).sum().item() == 4.0
    assert oar.full((2,), 7).dtype is oar.int64 and oar.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert oar.arange(5).tolist() == [0, 1, 2, 3, 4] and oar.arange(5).dtype is oar.int64
    assert oar.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert oar.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert oar.eye(2, 3).tolist() == [[1, 0, 0], [0, 1, 0]]
    assert oar.empty(3, 0).shape == (3, 0)
    assert oar.zeros_like(x, dtype=oar.int64).dtype is oar.int64 and oar.ones_like(x).shape == (2, 3)
    assert oar.full_like(x, 2.0).sum().item() == 12.0
    oar.manual_seed(3)
    a = oar.rand(100)
    oar.manual_seed(3)
    assert oar.equal(a, oar.rand(100)) if hasattr(oar, "equal") else (a == oar.rand(100)).all()
    assert 0 <= a.min().item() and a.max().item() < 1
    r = oar.randint(2, 5, (1000,))
    assert r.dtype is oar.int64 and r.min().item() == 2 and r.max().item() == 4
    assert abs(oar.randn(10000).mean().item()) < 0.05
    t = oar.tensor([[1, 2], [3, 4]])
    assert t.dtype is oar.int64 and t.tolist() == [[1, 2], [3, 4]]
    assert oar.tensor([True, False]).dtype is oar.bool and oar.tensor([1, 2.5]).dtype is oar.float32
    assert oar.tensor(3.5).shape == () and oar.tensor(3.5).item() == 3.5
    assert oar.tensor([[1, 2]], dtype=oar.float64).dtype is oar.float64
    assert oar.tensor(np.arange(4)).tolist() == [0, 1, 2, 3]
    assert oar.tensor([]).shape == (0,)


def test_conversions():
    x = oar.tensor([1.7, -2.2])
    assert x.long().tolist() == [1, -2] and x.int().dtype is oar.int32 and x.double().dtype is oar.float64
    assert x.to(oar.float16).dtype is oar.float16 and x.to("cpu") is x and x.to(oar.float32) is x
    assert x.bool().tolist() == [True, True] and x.half().float().tolist() == pytest.approx([1.7, -2.2], abs=1e-3)
    assert x.to(oar.bfloat16).float().tolist() == pytest.approx([1.7, -2.2], abs=1e-2)
    assert isinstance(oar.tensor(3).item(), int) and isinstance(oar.tensor(True).item(), bool)
    assert float(oar.tensor(2.5)) == 2.5 and int(oar.tensor(7)) == 7 and [0, 1, 2][oar.tensor(1)] == 1
    assert len(oar.zeros(4, 2)) == 4 and [r.tolist() for r in oar.arange(4).view(2, 2)] == [[0, 1], [2, 3]]
    assert 3 in oar.arange(5)


def test_repr_like_torch(torch):
    cases = [[1.0, 2.5], [[1, 2], [3, 4]], [True, False], [1.0, 2.0], [[0.001, 123.0]], 3.25]
    for data in cases:
        assert repr(oar.tensor(data)).replace("oar.", "torch.") == repr(torch.tensor(data))
    assert repr(oar.tensor([1.0, 2.0], dtype=oar.float64)) == "tensor([1., 2.], dtype=oar.float64)"
    assert repr(oar.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"
    assert "grad_fn=" in repr(oar.tensor([1.0], requires_grad=True) * 2)
    assert repr(oar.zeros(2000)).count("...") == 1
    assert repr(oar.Size([2, 3])) == "oar.Size([2, 3])"


def test_inplace_and_setitem():
    x = oar.zeros(3, 4)
    alias = x.view(12)
    x += 1
    x *= 3
    x[0, 1] = 5
    x[1] = oar.tensor([1.0, 2, 3, 4])
    x[:, 3] = -1
    x[x > 4] = 9
    x[oar.tensor([2]), 0] = 7
    assert x.tolist() == [[3, 9, 3, -1], [1, 2, 3, -1], [7, 3, 3, -1]]
    assert alias.tolist()[:4] == [3, 9, 3, -1]  # in-place ops wrote through the shared storage
    y = oar.arange(6).float()
    y.add_(1).mul_(2).clamp_(max=9).sub_(1, alpha=2)
    assert y.tolist() == [0, 2, 4, 6, 7, 7]
    y.zero_()
    assert y.sum().item() == 0
    w = oar.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        w += 1
    with oar.no_grad():
        w -= 0.5  # parameter updates outside autograd, as optimizers written in Python do
    assert w.tolist() == [0.5, 0.5] and w.requires_grad
    h = w * 2
    h += 1  # a non-leaf: autograd records the new value
    h.sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]


def test_views_share_storage():
    x = oar.arange(12).float().reshape(3, 4)
    v = x[1:, ::2]
    assert v.shape == (2, 2) and not v.is_contiguous() and v.stride() == (4, 2)
    x.fill_(1)
    assert v.tolist() == [[1, 1], [1, 1]]
    assert x.t().contiguous().is_contiguous() and x.permute(1, 0).shape == (4, 3)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.t().view(12)
    assert x.t().reshape(12).shape == (12,)


def test_grad_modes():
    x = oar.ones(2, requires_grad=True)
    with oar.no_grad():
        assert not (x * 2).requires_grad
        with oar.enable_grad():
            assert (x * 2).requires_grad
    assert (x * 2).requires_grad

    @oar.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad and oar.is_grad_enabled()
    oar.set_grad_enabled(False)
    assert not oar.is_grad_enabled()
    oar.set_grad_enabled(True)
    with oar.set_grad_enabled(False):
        assert not (x + 1).requires_grad
    assert oar.is_grad_enabled()
    with oar.inference_mode():
        assert not (x + 1).requires_grad


def test_hooks_retain_grad_autograd_grad():
    x = oar.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10)
    y = x * x
    y.retain_grad()
    y.sum().backward()
    assert seen == [[2.0, 4.0, 6.0]] and x.grad.tolist() == [20.0, 40.0, 60.0]
    assert y.grad.tolist() == [1.0, 1.0, 1.0] and y.retains_grad
    handle.remove()
    x.grad = None
    (x * x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0] and len(seen) == 1
    (gx,) = oar.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert gx.tolist() == [3.0, 12.0, 27.0]
    (ggx,) = oar.autograd.grad(gx.sum(), x)
    assert ggx.tolist() == [6.0, 12.0, 18.0]
    a, b = oar.ones(2, requires_grad=True), oar.ones(2, requires_grad=True)
    ga, gb = oar.autograd.grad((a * 3).sum(), [a, b], allow_unused=True)
    assert ga.tolist() == [3.0, 3.0] and gb is None
    z = x.detach()
    assert not z.requires_grad and z.is_leaf
    c = x.clone()
    assert c.requires_grad and not c.is_leaf
    (c * 2).sum().backward()
    out = oar.ones(2, 2, requires_grad=True) @ oar.ones(2, 2)
    out.backward(oar.ones(2, 2))


def test_hook_error_surfaces():
    x = oar.ones(2, requires_grad=True)

    def bad(g):
        raise KeyError("from the hook")

    x.register_hook(bad)
    with pytest.raises(KeyError, match="from the hook"):
        (x * 2).sum().backward()
    y = oar.ones(2, requires_grad=True)
    y.register_hook(lambda g: "not a tensor")
    with pytest.raises(TypeError, match="expected the hook to return a Tensor or None, got str"):
        (y * 2).sum().backward()


def test_type_promotion():
    i = oar.tensor([1, 2, 3])
    assert (i + 1).dtype is oar.int64 and (i + 1.5).dtype is oar.float32 and (i / 2).dtype is oar.float32
    assert (i * oar.tensor([1.0])).dtype is oar.float32
    assert (oar.ones(2, dtype=oar.float64) + oar.ones(2)).dtype is oar.float64
    assert (oar.ones(2) + oar.tensor(1.0, dtype=oar.float64)).dtype is oar.float32  # 0-d stays behind
    assert (oar.tensor([True]) + 1).dtype is oar.int64
    assert (i > 1.5).tolist() == [False, True, True]
    assert (i // 2).tolist() == [0, 1, 1] and (i % 2).tolist() == [1, 0, 1]


def test_ops_namespace_is_generated():
    assert callable(oar.ops.conv2d) and "stride: ints" in oar.ops.conv2d.__doc__
    y = oar.ops.sum(oar.ones(2, 3), dims=[1], keepdim=0)
    assert y.tolist() == [3.0, 3.0]


def test_pickle_and_deepcopy():
    import copy
    import pickle

    t = pickle.loads(pickle.dumps(oar.tensor([[1.5, 2]], dtype=oar.float64, requires_grad=True)))
    assert t.dtype is oar.float64 and t.requires_grad and t.tolist() == [[1.5, 2.0]]
    p = pickle.loads(pickle.dumps(oar.nn.Parameter(oar.ones(2))))
    assert isinstance(p, oar.nn.Parameter) and p.requires_grad
    m = oar.nn.Sequential(oar.nn.Linear(2, 3), oar.nn.BatchNorm1d(3))
    c = copy.deepcopy(m)
    assert isinstance(c[0].weight, oar.nn.Parameter) and (c[0].weight == m[0].weight).all()
    with oar.no_grad():
        c[0].weight.fill_(0)
    assert m[0].weight.abs().sum().item() > 0  # a copy, not a view
