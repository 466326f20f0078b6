"""oar.nn.utils beside torch 1.13: parametrize (class names, state_dict keys, outputs, gradients,
assignment through right_inverse, chains, cached, removal), parametrizations.orthogonal and
spectral_norm, the hook form of spectral_norm, conv/linear + batch-norm fusion, functional_call,
skip_init, clip_grad_norm, convert_parameters, init.dirac_ and init.sparse_. Random state (the
power iteration's u and v, orthogonal's base) is copied from torch's modules so the values compare."""
import warnings

import numpy as np
import pytest

import oar
from conftest import torch_or_skip


def _o(t):
    """A torch tensor as an oar tensor of the same dtype."""
    return oar.from_numpy(t.detach().numpy().copy())


def _n(t):
    return t.detach().numpy()


def _close(a, b, tol=1e-5):
    a, b = _n(a), _n(b)
    assert a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol), np.abs(a - b).max()


def _pair(torch, make):
    """The same module in both libraries, oar's holding torch's initial values."""
    torch.manual_seed(0)
    t = make(torch)
    o = make(oar)
    o.load_state_dict({k: _o(v) for k, v in t.state_dict().items()})
    return o, t


def _symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    return Symmetric()


def _scaled(lib):
    class Scale(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, X):
            self.calls += 1
            return X * 2.0

        def right_inverse(self, A):
            return A / 2.0

    return Scale()


def _shift(lib):
    class Shift(lib.nn.Module):
        def forward(self, X):
            return X + 1.0

        def right_inverse(self, A):
            return A - 1.0

    return Shift()


def _product(lib):
    """Two originals (right_inverse returns a pair): original0 @ original1."""
    class Product(lib.nn.Module):
        def forward(self, A, B):
            return A @ B

        def right_inverse(self, X):
            return X, lib.eye(X.shape[-1], dtype=X.dtype)

    return Product()


def test_parametrize_as_torch():
    torch = torch_or_skip()
    P = lambda lib: lib.nn.utils.parametrize   # noqa: E731
    o, t = _pair(torch, lambda lib: lib.nn.Linear(4, 4).double())
    for lib, m in ((oar, o), (torch, t)):
        P(lib).register_parametrization(m, "weight", _symmetric(lib))
        P(lib).register_parametrization(m, "weight", _scaled(lib))
        P(lib).register_parametrization(m, "weight", _shift(lib))   # the chain's order matters
    assert type(o).__name__ == type(t).__name__ == "ParametrizedLinear"
    assert list(o.state_dict()) == list(t.state_dict())
    assert [n for n, _ in o.named_parameters()] == [n for n, _ in t.named_parameters()]
    assert P(oar).is_parametrized(o) and P(oar).is_parametrized(o, "weight") and not P(oar).is_parametrized(o, "bias")
    assert P(oar).type_before_parametrizations(o) is oar.nn.Linear
    assert repr(o).replace("oar.", "torch.") == repr(t)
    _close(o.weight, t.weight)
    assert np.allclose(_n(o.weight), _n(o.weight).T)
    x = np.random.RandomState(0).randn(3, 4)
    for lib, m in ((oar, o), (torch, t)):
        (m(lib.from_numpy(x)) ** 2).sum().backward()
    _close(o.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad)
    _close(o.bias.grad, t.bias.grad)
    # assignment goes through the chain's right_inverse (backwards)
    v = np.random.RandomState(1).randn(4, 4)
    v = v + v.T
    o.weight, t.weight = oar.from_numpy(v), torch.from_numpy(v)
    _close(o.parametrizations.weight.original, t.parametrizations.weight.original)
    _close(o.weight, t.weight)
    # cached: the chain runs once per block however often the weight is read
    scale = o.parametrizations.weight[1]
    before = scale.calls
    with P(oar).cached():
        a, b = o.weight, o.weight
    assert scale.calls == before + 1 and a is b
    o.weight
    assert scale.calls == before + 2
    # removal: the parametrized value (or the original) becomes the plain parameter again
    for lib, m in ((oar, o), (torch, t)):
        P(lib).remove_parametrizations(m, "weight", leave_parametrized=True)
    assert type(o) is oar.nn.Linear and list(o.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    _close(o.weight, t.weight)
    assert isinstance(o.weight, oar.nn.Parameter)


def test_parametrize_removal_and_sequences():
    torch = torch_or_skip()
    P = lambda lib: lib.nn.utils.parametrize   # noqa: E731
    o, t = _pair(torch, lambda lib: lib.nn.Linear(3, 3).double())
    for lib, m in ((oar, o), (torch, t)):
        P(lib).register_parametrization(m, "weight", _scaled(lib))
        P(lib).register_parametrization(m, "bias", _scaled(lib))
        P(lib).remove_parametrizations(m, "weight", leave_parametrized=False)
    assert type(o).__name__ == "ParametrizedLinear" and list(o.state_dict()) == list(t.state_dict())
    _close(o.weight, t.weight)
    _close(o.bias, t.bias)
    # a parametrization with two originals
    o, t = _pair(torch, lambda lib: lib.nn.Linear(3, 3).double())
    for lib, m in ((oar, o), (torch, t)):
        P(lib).register_parametrization(m, "weight", _product(lib))
    assert list(o.state_dict()) == list(t.state_dict())
    assert "parametrizations.weight.original1" in o.state_dict()
    _close(o.weight, t.weight)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P(oar).remove_parametrizations(o, "weight", leave_parametrized=False)
    errs = []
    for lib, m in ((oar, o), (torch, t)):
        with pytest.raises(ValueError) as e:
            P(lib).register_parametrization(m, "nothing", _scaled(lib))
        errs.append(str(e.value).split("with name")[1])

        class Widen(lib.nn.Module):
            def forward(self, X):
                return lib.cat([X, X], 0)

        with pytest.raises(ValueError) as e2:
            P(lib).register_parametrization(m, "bias", Widen())
        errs.append(str(e2.value).replace("torch.Size", "oar.Size"))
    assert errs[0] == errs[2] and errs[1] == errs[3]


def test_parametrized_module_copies_and_refuses_pickle():
    import copy
    import pickle

    torch = torch_or_skip()
    for lib in (oar, torch):
        m = lib.nn.Linear(3, 3).double()
        lib.nn.utils.parametrize.register_parametrization(m, "weight", _symmetric(lib))
        twin = copy.deepcopy(m)
        assert type(twin) is type(m) and twin.parametrizations.weight.original is not m.parametrizations.weight.original
        x = lib.ones(2, 3, dtype=lib.float64)
        assert np.array_equal(_n(twin(x)), _n(m(x)))
        with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through "):
            pickle.dumps(m)
        with pytest.raises(KeyError, match="attribute 'weight' already exists"):
            m.weight = lib.nn.Parameter(lib.ones(3, 3, dtype=lib.float64))


def test_parametrized_module_trains():
    """An optimizer over the original steps the parametrized weight, which stays symmetric."""
    m = oar.nn.Linear(3, 3)
    oar.nn.utils.parametrize.register_parametrization(m, "weight", _symmetric(oar))
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    x = oar.randn(5, 3)
    losses = []
    for _ in range(5):
        loss = (m(x) - 1).pow(2).mean()
        losses.append(loss.item())
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < losses[0]
    w = _n(m.weight)
    assert np.allclose(w, w.T)


@pytest.mark.parametrize("shape,orth_map", [((5, 5), None), ((5, 5), "cayley"), ((5, 5), "householder"),
                                            ((6, 3), "householder"), ((3, 6), None), ((6, 3), "matrix_exp"),
                                            ((3, 6), "cayley")])
def test_orthogonal_as_torch(shape, orth_map):
    torch = torch_or_skip()
    o, t = _pair(torch, lambda lib: lib.nn.Linear(shape[1], shape[0]).double())
    for lib, m in ((oar, o), (torch, t)):
        lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orth_map)
    assert list(o.state_dict()) == list(t.state_dict())
    w = _n(o.weight)
    small = w.T @ w if shape[0] >= shape[1] else w @ w.T
    assert np.allclose(small, np.eye(min(shape)), atol=1e-12)
    if shape[0] == shape[1]:   # no random completion: the weight is torch's
        _close(o.weight, t.weight, 1e-10)
    # the same base and original give the same weight and gradient
    tp = t.parametrizations.weight
    o.parametrizations.weight.original.detach().copy_(_o(tp.original))
    o.parametrizations.weight[0].base = _o(tp[0].base)
    with torch.no_grad():
        tp.original.add_(torch.from_numpy(np.random.RandomState(2).randn(*shape) * 0.1))
    o.parametrizations.weight.original.detach().copy_(_o(tp.original))
    _close(o.weight, t.weight, 1e-10)
    x = np.random.RandomState(0).randn(4, shape[1])
    for lib, m in ((oar, o), (torch, t)):
        (m(lib.from_numpy(x)) ** 3).sum().backward()
    _close(o.parametrizations.weight.original.grad, tp.original.grad, 1e-8)


@pytest.mark.parametrize("shape", [(6, 4), (4, 4), (3, 5)])
def test_orthogonal_without_trivialization(shape):
    torch = torch_or_skip()
    o, t = _pair(torch, lambda lib: lib.nn.Linear(shape[1], shape[0]).double())
    for lib, m in ((oar, o), (torch, t)):
        lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map="householder", use_trivialization=False)
    assert list(o.state_dict()) == list(t.state_dict())
    _close(o.parametrizations.weight.original, t.parametrizations.weight.original, 1e-10)
    _close(o.weight, t.weight, 1e-10)
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        o2 = oar.nn.Linear(4, 4)
        oar.nn.utils.parametrizations.orthogonal(o2, orthogonal_map="cayley", use_trivialization=False)
        o2.weight = oar.eye(4)


@pytest.mark.parametrize("make,dim", [(lambda lib: lib.nn.Linear(5, 4), None),
                                      (lambda lib: lib.nn.Conv2d(3, 4, 3), None),
                                      (lambda lib: lib.nn.ConvTranspose2d(3, 4, 2), None),
                                      (lambda lib: lib.nn.Conv2d(2, 3, 2), 2)])
def test_spectral_norm_parametrization_as_torch(make, dim):
    torch = torch_or_skip()
    o, t = _pair(torch, lambda lib: make(lib).double())
    kw = {} if dim is None else {"dim": dim}
    for lib, m in ((oar, o), (torch, t)):
        lib.nn.utils.parametrizations.spectral_norm(m, n_power_iterations=2, **kw)
    assert list(o.state_dict()) == list(t.state_dict())
    tp, op = t.parametrizations.weight[0], o.parametrizations.weight[0]
    op._u.copy_(_o(tp._u))
    op._v.copy_(_o(tp._v))
    x = np.random.RandomState(0).randn(2, *([5] if isinstance(o, oar.nn.Linear) else [3, 5, 5]))
    x = np.ascontiguousarray(x[:, :2]) if dim == 2 else x
    for step in range(3):
        for lib, m in ((oar, o), (torch, t)):
            m.zero_grad()
            (m(lib.from_numpy(x)) ** 2).sum().backward()
        _close(o.weight, t.weight, 1e-10)
        _close(op._u, tp._u, 1e-10)
        _close(o.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad, 1e-8)
    for lib, m in ((oar, o), (torch, t)):   # two forwards, one backward
        m.zero_grad()
        (m(lib.from_numpy(x)).sum() + (m(lib.from_numpy(x)) ** 2).sum()).backward()
    _close(o.parametrizations.weight.original.grad, t.parametrizations.weight.original.grad, 1e-8)
    o.eval()
    u = _n(op._u).copy()
    o(oar.from_numpy(x))
    assert np.array_equal(_n(op._u), u)   # eval: no power iteration


def test_spectral_norm_hook_as_torch():
    torch = torch_or_skip()
    o, t = _pair(torch, lambda lib: lib.nn.Conv2d(3, 4, 3).double())
    for lib, m in ((oar, o), (torch, t)):
        lib.nn.utils.spectral_norm(m, n_power_iterations=3)
    assert list(o.state_dict()) == list(t.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    assert [n for n, _ in o.named_parameters()] == [n for n, _ in t.named_parameters()]
    o.weight_u.copy_(_o(t.weight_u))
    o.weight_v.copy_(_o(t.weight_v))
    x = np.random.RandomState(0).randn(2, 3, 6, 6)
    for step in range(3):
        for lib, m in ((oar, o), (torch, t)):
            m.zero_grad()
            y = m(lib.from_numpy(x))
            (y ** 2).sum().backward()
        _close(o.weight, t.weight, 1e-10)
        _close(o.weight_u, t.weight_u, 1e-10)
        _close(o.weight_v, t.weight_v, 1e-10)
        _close(o.weight_orig.grad, t.weight_orig.grad, 1e-8)
    # two forwards, one backward: each graph keeps its own step's u and v
    for lib, m in ((oar, o), (torch, t)):
        m.zero_grad()
        (m(lib.from_numpy(x)).sum() + (m(lib.from_numpy(x)) ** 2).sum()).backward()
    _close(o.weight_orig.grad, t.weight_orig.grad, 1e-8)
    for lib, m in ((oar, o), (torch, t)):
        m.eval()
        m(lib.from_numpy(x))
        with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
            lib.nn.utils.spectral_norm(m)
        lib.nn.utils.remove_spectral_norm(m)
    assert list(o.state_dict()) == list(t.state_dict()) == ["bias", "weight"]
    _close(o.weight, t.weight, 1e-10)
    for lib, m in ((oar, o), (torch, t)):
        with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
            lib.nn.utils.remove_spectral_norm(m)


def _bn_stats(torch, bn):
    g = torch.Generator().manual_seed(4)
    with torch.no_grad():
        bn.running_mean.copy_(torch.randn(bn.num_features, generator=g, dtype=bn.running_mean.dtype))
        bn.running_var.copy_(torch.rand(bn.num_features, generator=g, dtype=bn.running_var.dtype) + 0.5)
        bn.weight.copy_(torch.randn(bn.num_features, generator=g, dtype=bn.weight.dtype))
        bn.bias.copy_(torch.randn(bn.num_features, generator=g, dtype=bn.bias.dtype))


@pytest.mark.parametrize("kind", ["conv", "conv_nobias", "conv_transpose", "linear"])
def test_fusion_as_torch(kind):
    torch = torch_or_skip()

    def make(lib):
        if kind == "linear":
            return lib.nn.Linear(5, 4).double(), lib.nn.BatchNorm1d(4).double()
        if kind == "conv_transpose":
            return lib.nn.ConvTranspose2d(3, 4, 3, stride=2).double(), lib.nn.BatchNorm2d(4).double()
        return lib.nn.Conv2d(3, 4, 3, bias=kind == "conv").double(), lib.nn.BatchNorm2d(4).double()

    torch.manual_seed(0)
    tl, tb = make(torch)
    _bn_stats(torch, tb)
    ol, ob = make(oar)
    ol.load_state_dict({k: _o(v) for k, v in tl.state_dict().items()})
    ob.load_state_dict({k: _o(v) for k, v in tb.state_dict().items()})
    x = np.random.RandomState(0).randn(*((2, 5) if kind == "linear" else (2, 3, 6, 6)))
    fused = []
    for lib, layer, bn in ((oar, ol, ob), (torch, tl, tb)):
        layer.eval()
        bn.eval()
        if kind == "linear":
            f = lib.nn.utils.fusion.fuse_linear_bn_eval(layer, bn)
        else:
            f = lib.nn.utils.fusion.fuse_conv_bn_eval(layer, bn, transpose=kind == "conv_transpose")
        assert f is not layer and type(f) is type(layer)
        assert isinstance(f.weight, lib.nn.Parameter) and isinstance(f.bias, lib.nn.Parameter)
        xi = lib.from_numpy(x)
        _close(f(xi), bn(layer(xi)), 1e-10)
        fused.append(f)
    _close(fused[0].weight, fused[1].weight, 1e-12)
    _close(fused[0].bias, fused[1].bias, 1e-12)
    _close(fused[0](oar.from_numpy(x)), fused[1](torch.from_numpy(x)), 1e-10)
    ol.train()
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        (oar.nn.utils.fuse_linear_bn_eval if kind == "linear" else oar.nn.utils.fuse_conv_bn_eval)(ol, ob)


def test_functional_call_as_torch():
    torch = torch_or_skip()

    def make(lib):
        return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4), lib.nn.Linear(4, 2)).double()

    o, t = _pair(torch, make)
    rs = np.random.RandomState(0)
    x = rs.randn(5, 3)
    w0, b2, rm = rs.randn(4, 3), rs.randn(2), rs.randn(4)
    outs, grads = [], []
    for lib, m in ((oar, o), (torch, t)):
        before = {k: _n(v).copy() for k, v in m.state_dict().items()}
        w = lib.from_numpy(w0.copy()).requires_grad_()
        m.eval()
        y = lib.nn.utils.stateless.functional_call(
            m, {"0.weight": w, "2.bias": lib.from_numpy(b2), "1.running_mean": lib.from_numpy(rm)},
            (lib.from_numpy(x),))
        (y ** 2).sum().backward()
        outs.append(y)
        grads.append((w.grad, m[0].bias.grad))
        assert all(np.array_equal(_n(v), before[k]) for k, v in m.state_dict().items())
        assert m[0].weight.grad is None   # the replaced parameter took no gradient
    _close(outs[0], outs[1], 1e-10)
    _close(grads[0][0], grads[1][0], 1e-10)
    _close(grads[0][1], grads[1][1], 1e-10)
    with pytest.raises(AttributeError, match="'0.nothing' is not a parameter or buffer"):
        oar.nn.utils.stateless.functional_call(o, {"0.nothing": oar.ones(1)}, (oar.from_numpy(x),))
    assert o[0].weight.shape == (4, 3)


def test_skip_init_clip_grad_norm_and_vectors():
    torch = torch_or_skip()
    for lib in (oar, torch):   # no random draws (torch builds on the meta device)
        state = lib.get_rng_state()
        m = lib.nn.utils.skip_init(lib.nn.Linear, 6, 3, bias=True)
        assert type(m) is lib.nn.Linear and m.weight.shape == (3, 6) and m.bias.shape == (3,)
        assert lib.equal(lib.get_rng_state(), state)
        lib.nn.Linear(6, 3)
        assert not lib.equal(lib.get_rng_state(), state)
    a = oar.nn.Linear(2, 2).weight.detach().clone()
    assert not np.array_equal(_n(oar.nn.Linear(2, 2).weight), _n(a))   # initializers work again afterwards
    for lib in (oar, torch):
        with pytest.raises(RuntimeError, match="Expected a Module; got"):
            lib.nn.utils.skip_init(int)
        with pytest.raises(RuntimeError, match="Module must support a 'device' arg"):
            lib.nn.utils.skip_init(lib.nn.ReLU)
    norms = []
    for lib in (oar, torch):
        p = lib.nn.Parameter(lib.ones(4, dtype=lib.float64))
        (p * 3).sum().backward()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            n = lib.nn.utils.clip_grad_norm([p], 1.0)
        assert [str(x.message) for x in w] == [
            "torch.nn.utils.clip_grad_norm is now deprecated in favor of torch.nn.utils.clip_grad_norm_."]
        norms.append((float(n), _n(p.grad).tolist()))
    assert np.allclose(norms[0][0], norms[1][0]) and np.allclose(norms[0][1], norms[1][1])
    from oar.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

    ps = [oar.nn.Parameter(oar.zeros(2, 2)), oar.nn.Parameter(oar.zeros(3))]
    vector_to_parameters(oar.arange(7).float(), ps)
    assert parameters_to_vector(ps).tolist() == list(range(7))
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        vector_to_parameters([1.0], ps)


@pytest.mark.parametrize("shape,groups", [((4, 4, 3), 1), ((6, 3, 3, 3), 2), ((4, 6, 3, 2, 5), 1),
                                          ((2, 5, 4, 4), 1), ((8, 2, 1, 1), 4)])
def test_dirac_as_torch(shape, groups):
    torch = torch_or_skip()
    a, b = oar.empty(*shape), torch.empty(*shape)
    oar.nn.init.dirac_(a, groups)
    torch.nn.init.dirac_(b, groups)
    assert np.array_equal(_n(a), _n(b))
    x = np.random.RandomState(0).randn(1, shape[1] * groups, *([7] * (len(shape) - 2))).astype(np.float32)
    if len(shape) == 4 and shape[-1] == shape[-2] and shape[-1] % 2 == 1:   # an identity convolution
        y = oar.nn.functional.conv2d(oar.from_numpy(x), a, padding=shape[-1] // 2, groups=groups)
        n = min(shape[0] // groups, shape[1])
        assert np.allclose(_n(y)[:, :n], x[:, :n])


def test_dirac_and_sparse_errors_and_sparse_statistics():
    torch = torch_or_skip()
    for lib in (oar, torch):
        with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions are supported"):
            lib.nn.init.dirac_(lib.empty(3, 3))
        with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
            lib.nn.init.dirac_(lib.empty(3, 3, 3), 2)
        with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
            lib.nn.init.sparse_(lib.empty(3, 3, 3), 0.5)
    for rows, cols, sparsity in ((10, 50, 0.3), (7, 20, 0.5), (100, 30, 0.1)):
        zs = {}
        for lib in (oar, torch):
            w = lib.nn.init.sparse_(lib.empty(rows, cols), sparsity, std=0.5)
            arr = _n(w)
            zs[lib.__name__] = (arr == 0).sum(0).tolist()
            nz = arr[arr != 0]
            assert abs(nz.std() - 0.5) < 0.1 and abs(nz.mean()) < 0.1
        assert zs["oar"] == zs["torch"] == [int(np.ceil(sparsity * rows))] * cols


def test_torch_switch_resolves_the_new_modules():
    import importlib
    import sys

    names = ["nn.utils.parametrize", "nn.utils.parametrizations", "nn.utils.stateless", "nn.utils.fusion",
             "nn.utils.convert_parameters"]
    with oar.mock_torch():
        for n in names:
            assert importlib.import_module("torch." + n) is sys.modules["oar." + n]
        from torch.nn.utils import spectral_norm
        from torch.utils.data import ChainDataset, WeightedRandomSampler
        from torch.optim.lr_scheduler import OneCycleLR
        assert spectral_norm is oar.nn.utils.spectral_norm and OneCycleLR is oar.optim.lr_scheduler.OneCycleLR
        assert WeightedRandomSampler is oar.utils.data.WeightedRandomSampler and ChainDataset.__module__ == \
            "oar.utils.data_more"


def test_torch_state_dicts_load_into_normalized_modules():
    """A torch checkpoint of a spectral-normed (both forms) or orthogonal module loads into oar's
    and gives torch's outputs in eval mode."""
    torch = torch_or_skip()
    x = np.random.RandomState(0).randn(3, 5)
    wraps = [lambda lib, m: lib.nn.utils.spectral_norm(m),
             lambda lib, m: lib.nn.utils.parametrizations.spectral_norm(m),
             lambda lib, m: lib.nn.utils.parametrizations.orthogonal(m)]
    for wrap in wraps:
        torch.manual_seed(1)
        t = wrap(torch, torch.nn.Linear(5, 4).double())
        t(torch.from_numpy(x))   # a training step moves u and v
        t.eval()
        o = wrap(oar, oar.nn.Linear(5, 4).double()).eval()
        o.load_state_dict({k: _o(v) for k, v in t.state_dict().items()})
        _close(o(oar.from_numpy(x)), t(torch.from_numpy(x)), 1e-10)
