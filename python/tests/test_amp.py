"""Mixed precision from Python (docs/amp.md, "From Python"): oar.autocast beside torch 1.13's CPU
autocast (which dtype each op runs in, values, a model's loss), nesting, disabled regions and the
decorator form, compiled functions and training steps under autocast equal to eager ones, and
GradScaler (growth, backoff and skipped steps, state_dict, unscale_ before clipping, fp16 and bf16
training)."""
import warnings

import numpy as np
import pytest

import oar
import oar.nn as nn
import oar.nn.functional as F


def arrays():
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {"x": f(4, 8), "w": f(6, 8), "b": f(6), "img": f(2, 3, 8, 8), "cw": f(4, 3, 3, 3), "seq": f(1, 4, 8),
            "kw": f(2, 4, 3), "y": np.array([0, 1, 2, 3]), "p": rng.random((4, 8)).astype(np.float32)}


def _lin(T, Fn, a):
    return Fn.linear(a["x"], a["w"], a["b"])


# op -> f(lib, functional, tensors): each runs under CPU bf16 autocast in oar and in torch; "_b"
# cases take a bf16 input (what a low op hands on), "_mixed" cases a bf16 and an f32 one
CASES = {
    "linear": _lin,
    "matmul": lambda T, Fn, a: a["x"] @ a["w"].t(),
    "mm": lambda T, Fn, a: T.mm(a["x"], a["w"].t()),
    "bmm": lambda T, Fn, a: T.bmm(a["x"][None], a["w"].t()[None]),
    "addmm": lambda T, Fn, a: T.addmm(a["b"], a["x"], a["w"].t()),
    "conv2d": lambda T, Fn, a: Fn.conv2d(a["img"], a["cw"]),
    "conv1d": lambda T, Fn, a: Fn.conv1d(a["seq"], a["kw"]),
    "softmax": lambda T, Fn, a: Fn.softmax(a["x"], -1),
    "softmax_b": lambda T, Fn, a: Fn.softmax(_lin(T, Fn, a), -1),
    "log_softmax_b": lambda T, Fn, a: Fn.log_softmax(_lin(T, Fn, a), -1),
    "layer_norm": lambda T, Fn, a: Fn.layer_norm(a["x"], (8,)),
    "layer_norm_b": lambda T, Fn, a: Fn.layer_norm(_lin(T, Fn, a), (6,)),
    "batch_norm_b": lambda T, Fn, a: Fn.batch_norm(Fn.conv2d(a["img"], a["cw"]), T.zeros(4), T.ones(4), T.ones(4),
                                                   T.zeros(4), training=True),
    "sum": lambda T, Fn, a: a["x"].sum(),
    "sum_b": lambda T, Fn, a: _lin(T, Fn, a).sum(),
    "mean_b": lambda T, Fn, a: _lin(T, Fn, a).mean(),
    "add_mixed": lambda T, Fn, a: _lin(T, Fn, a) + a["b"],
    "mul_mixed": lambda T, Fn, a: _lin(T, Fn, a) * a["b"],
    "add_0d": lambda T, Fn, a: _lin(T, Fn, a) + T.tensor(1.5),
    "relu_b": lambda T, Fn, a: Fn.relu(_lin(T, Fn, a)),
    "relu": lambda T, Fn, a: Fn.relu(a["x"]),
    "gelu_b": lambda T, Fn, a: Fn.gelu(_lin(T, Fn, a)),
    "tanh_b": lambda T, Fn, a: T.tanh(_lin(T, Fn, a)),
    "cat_mixed": lambda T, Fn, a: T.cat([_lin(T, Fn, a), a["w"][:4, :6]]),
    "stack_mixed": lambda T, Fn, a: T.stack([_lin(T, Fn, a), a["w"][:4, :6]]),
    "max_pool2d_b": lambda T, Fn, a: Fn.max_pool2d(Fn.conv2d(a["img"], a["cw"]), 2),
    "cross_entropy_b": lambda T, Fn, a: Fn.cross_entropy(_lin(T, Fn, a), a["y"]),
    "mse_loss_mixed": lambda T, Fn, a: Fn.mse_loss(_lin(T, Fn, a), a["x"][:, :6]),
    "einsum": lambda T, Fn, a: T.einsum("ij,kj->ik", a["x"], a["w"]),
}


def _run(lib, Fn, case, dtype):
    a = {k: lib.tensor(v) for k, v in arrays().items()}
    with lib.autocast("cpu", dtype=dtype):
        return CASES[case](lib, Fn, a)


@pytest.mark.parametrize("case", sorted(CASES))
def test_op_dtypes_match_torch_cpu_bf16(torch, case):
    """Each op's output dtype under CPU bf16 autocast is torch's, its values close to torch's."""
    import torch.nn.functional as TF

    want = _run(torch, TF, case, torch.bfloat16)
    got = _run(oar, F, case, oar.bfloat16)
    assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1], case
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.float().detach().numpy(), want.float().detach().numpy(), rtol=3e-2, atol=3e-2)


def test_region_state_and_queries(torch):
    assert not oar.is_autocast_cpu_enabled() and not oar.is_autocast_enabled()
    assert oar.get_autocast_cpu_dtype() == oar.bfloat16 and oar.get_autocast_gpu_dtype() == oar.float16
    assert oar.get_autocast_cpu_dtype() is getattr(oar, str(torch.get_autocast_cpu_dtype()).split(".")[-1])
    x, w = oar.randn(3, 4), oar.randn(5, 4)
    with oar.autocast("cpu"):
        assert oar.is_autocast_cpu_enabled() and not oar.is_autocast_enabled()
        assert F.linear(x, w).dtype == oar.bfloat16
        with oar.autocast("cpu", enabled=False):  # a disabled region inside an enabled one
            assert not oar.is_autocast_cpu_enabled()
            assert F.linear(x, w).dtype == oar.float32
            with oar.cpu.amp.autocast(dtype=oar.float16):  # nested again, another dtype (oar: f16 on CPU too)
                assert oar.get_autocast_cpu_dtype() == oar.float16
                assert F.linear(x, w).dtype == oar.float16
            assert F.linear(x, w).dtype == oar.float32
        assert F.linear(x, w).dtype == oar.bfloat16 and oar.get_autocast_cpu_dtype() == oar.bfloat16
    assert not oar.is_autocast_cpu_enabled() and F.linear(x, w).dtype == oar.float32


def test_region_restored_after_exception():
    x, w = oar.randn(3, 4), oar.randn(5, 4)
    with pytest.raises(KeyError):
        with oar.autocast("cpu"):
            raise KeyError("boom")
    assert not oar.is_autocast_cpu_enabled() and F.linear(x, w).dtype == oar.float32


def test_decorator_and_set_functions():
    x, w = oar.randn(3, 4), oar.randn(5, 4)

    @oar.autocast("cpu")
    def f(a):
        return F.linear(a, w)

    @oar.cpu.amp.autocast()
    def g(a):
        return F.linear(a, w)

    assert f(x).dtype == oar.bfloat16 and g(x).dtype == oar.bfloat16
    assert F.linear(x, w).dtype == oar.float32
    oar.set_autocast_cpu_enabled(True)
    try:
        assert F.linear(x, w).dtype == oar.bfloat16
        oar.set_autocast_cpu_dtype(oar.float16)
        assert F.linear(x, w).dtype == oar.float16
    finally:
        oar.set_autocast_cpu_enabled(False)
        oar.set_autocast_cpu_dtype(oar.bfloat16)
    assert F.linear(x, w).dtype == oar.float32


def test_cuda_autocast_without_cuda_disables_with_torch_warning():
    if oar.cuda.is_available():
        pytest.skip("a GPU is present: oar.autocast('cuda') casts")
    x, w = oar.randn(3, 4), oar.randn(5, 4)
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ctx = oar.cuda.amp.autocast()
    with ctx:
        assert not oar.is_autocast_enabled() and F.linear(x, w).dtype == oar.float32
    with pytest.warns(UserWarning, match="not supported"):
        oar.autocast("cpu", dtype=oar.float32)
    with pytest.raises(RuntimeError, match="device_type must be"):
        oar.autocast("tpu")


def test_custom_lists_and_policy():
    x, w = oar.randn(3, 4), oar.randn(5, 4)
    with oar.autocast("cpu", custom_fp32=["linear"]):
        assert F.linear(x, w).dtype == oar.float32
    with oar.autocast("cpu", custom_low=["relu"]):
        assert F.relu(x).dtype == oar.bfloat16
    with pytest.raises(ValueError, match="not an op"):
        with oar.autocast("cpu", custom_low=["no_such_op"]):
            pass
    assert not oar.is_autocast_cpu_enabled()
    with pytest.raises(ValueError, match="cpu_policy"):
        oar.autocast("cpu", cpu_policy="fast")


def test_namespaces_and_mock():
    import importlib

    assert oar.amp.autocast is oar.autocast
    assert oar.cuda.amp.GradScaler is oar.amp.GradScaler
    assert importlib.import_module("oar.cuda.amp") is oar.cuda.amp
    with oar.mock_torch():
        import torch as T  # noqa: F401
        from torch.cuda.amp import GradScaler, autocast
        from torch.cpu.amp import autocast as cpu_autocast

        assert GradScaler is oar.amp.GradScaler and autocast is oar.cuda.amp.autocast
        assert cpu_autocast is oar.cpu.amp.autocast and T.autocast is oar.autocast
        from torch.amp.autocast_mode import autocast as amp_autocast

        assert amp_autocast is oar.autocast


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(4 * 8 * 8, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):  # no LayerNorm: torch 1.13's CPU autocast refuses its bf16 input with f32 weights
        h = F.relu(self.bn(self.conv(x)))
        h = F.gelu(self.fc1(h.flatten(1)))
        return self.fc2(F.softmax(h, -1) * h)


def _copy_params(src, dst, T):
    for (n, p), (_, q) in zip(src.named_parameters(), dst.named_parameters()):
        q.data = T.tensor(p.detach().numpy())


def test_model_loss_under_autocast_close_to_torch(torch):
    """A conv/bn/linear/softmax model's loss and gradients under CPU bf16 autocast, beside
    torch's from the same weights: close (bf16 rounding), and apart from the f32 loss."""
    import torch.nn as tnn
    import torch.nn.functional as TF

    class TNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = tnn.Conv2d(3, 4, 3, padding=1), tnn.BatchNorm2d(4)
            self.fc1, self.fc2 = tnn.Linear(256, 32), tnn.Linear(32, 5)

        def forward(self, x):
            h = TF.relu(self.bn(self.conv(x)))
            h = TF.gelu(self.fc1(h.flatten(1)))
            return self.fc2(TF.softmax(h, -1) * h)

    m, tm = Net(), TNet()
    _copy_params(m, tm, torch)
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((8, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, 8)
    with oar.autocast("cpu"):
        out = m(oar.tensor(x))
        loss = F.cross_entropy(out, oar.tensor(y))
    with torch.autocast("cpu"):
        tout = tm(torch.tensor(x))
        tloss = TF.cross_entropy(tout, torch.tensor(y))
    assert out.dtype == oar.bfloat16 and tout.dtype == torch.bfloat16
    assert loss.dtype == oar.float32 and tloss.dtype == torch.float32
    f32 = F.cross_entropy(m(oar.tensor(x)), oar.tensor(y)).item()
    assert abs(loss.item() - tloss.item()) < 2e-2 * max(1.0, abs(tloss.item()))
    assert loss.item() != f32
    loss.backward()
    tloss.backward()
    for p, q in zip(m.parameters(), tm.parameters()):
        assert p.grad.dtype == oar.float32  # gradients reach the f32 parameters in f32
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=0.1, atol=2e-2)


def test_compiled_function_under_autocast_equals_eager():
    oar.manual_seed(0)
    m = Net()
    x = oar.randn(4, 3, 8, 8)

    def fwd(a):
        with oar.autocast("cpu"):
            return F.softmax(m(a), -1), m(a)

    sf = oar.jit.to_static(fwd)
    for _ in range(2):
        (p, o), (q, r) = fwd(x), sf(x)
        assert o.dtype == r.dtype == p.dtype == q.dtype == oar.bfloat16  # softmax follows, as torch's CPU autocast
        assert bool((p == q).all()) and bool((o == r).all())
    # a region around the compiled call: its own program (the cache keys on the autocast state)
    g = oar.jit.to_static(m.forward)
    assert g(x).dtype == oar.float32
    with oar.autocast("cpu"):
        assert g(x).dtype == oar.bfloat16
    assert g(x).dtype == oar.float32


def _train(compiled, dtype, steps=6, scaler=None, autocast=True):
    oar.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = oar.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    oar.manual_seed(1)
    x, y = oar.randn(32, 16), oar.randint(0, 4, (32,))

    def step(a, b):
        opt.zero_grad()
        with oar.autocast("cpu", dtype=dtype, enabled=autocast):
            loss = F.cross_entropy(m(a), b)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return loss

    f = oar.jit.to_static(step) if compiled else step
    losses = [f(x, y).item() for _ in range(steps)]
    return losses, [p.detach().clone() for p in m.parameters()]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compiled_training_step_under_autocast_equals_eager(dtype):
    dt = getattr(oar, dtype)
    el, ep = _train(False, dt)
    cl, cp = _train(True, dt)
    assert cl == el
    assert all(bool((a == b).all()) for a, b in zip(cp, ep))
    assert el[-1] < el[0]
    f32, _ = _train(False, dt, autocast=False)
    assert el != f32  # the region was in effect


def test_compiled_scaled_step_equals_eager():
    el, ep = _train(False, oar.float16, scaler=oar.cuda.amp.GradScaler(init_scale=1024.0, growth_interval=2))
    sc = oar.cuda.amp.GradScaler(init_scale=1024.0, growth_interval=2)
    cl, cp = _train(True, oar.float16, scaler=sc)
    assert cl == el and all(bool((a == b).all()) for a, b in zip(cp, ep))
    assert sc.get_scale() == 1024.0 * 2 ** 3  # grown every 2 good steps, also in the compiled runs


def test_compiled_scaled_step_after_load_state_dict():
    """A checkpointed scaler state loaded while a compiled step uses the scaler reaches the
    program (the state is loaded into the scaler's own tensors)."""
    def run(compiled):
        sc = oar.cuda.amp.GradScaler(init_scale=1024.0, growth_interval=2)
        oar.manual_seed(0)
        m = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        opt = oar.optim.SGD(m.parameters(), lr=0.1)
        x, y = oar.randn(8, 16), oar.randint(0, 4, (8,))

        def step(a, b):
            opt.zero_grad()
            with oar.autocast("cpu", dtype=oar.float16):
                loss = F.cross_entropy(m(a), b)
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
            return loss

        f = oar.jit.to_static(step) if compiled else step
        f(x, y), f(x, y)
        sc.load_state_dict({"scale": 4.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2,
                            "_growth_tracker": 1})
        f(x, y)
        return sc.state_dict(), [p.detach().clone() for p in m.parameters()]

    (esd, ep), (csd, cp) = run(False), run(True)
    assert esd == csd and esd["scale"] == 8.0 and esd["_growth_tracker"] == 0
    assert all(bool((a == b).all()) for a, b in zip(cp, ep))


def _mlp_and_batch(seed=0):
    oar.manual_seed(seed)
    m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    x, y = oar.randn(16, 8), oar.randint(0, 3, (16,))
    return m, x, y


def _scaled_backward(scaler, m, x, y, bad=False):
    with oar.autocast("cpu", dtype=oar.float16):
        loss = F.cross_entropy(m(x), y)
    if bad:
        loss = loss * float("inf")
    scaler.scale(loss).backward()
    return loss


def test_grad_scaler_growth_backoff_and_skip():
    m, x, y = _mlp_and_batch()
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    sc = oar.cuda.amp.GradScaler(init_scale=256.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    assert sc.is_enabled() and sc.get_scale() == 256.0
    for k in range(3):
        opt.zero_grad()
        _scaled_backward(sc, m, x, y)
        assert sc.step(opt) is None
        sc.update()
        assert sc._get_growth_tracker() == (k + 1) % 3
    assert sc.get_scale() == 512.0  # grown after growth_interval good steps
    before = [p.detach().clone() for p in m.parameters()]
    opt.zero_grad()
    _scaled_backward(sc, m, x, y, bad=True)
    assert sc.step(opt) is None
    assert all(bool((a == p).all()) for a, p in zip(before, m.parameters()))  # skipped: parameters unchanged
    sc.update()
    assert sc.get_scale() == 128.0 and sc._get_growth_tracker() == 0  # backed off
    opt.zero_grad()
    _scaled_backward(sc, m, x, y)
    sc.step(opt)
    sc.update()
    assert not all(bool((a == p).all()) for a, p in zip(before, m.parameters()))


def test_grad_scaler_step_matches_plain_step():
    """An unscaled step through the scaler is the plain step: the scale cancels (a power of two)."""
    m1, x, y = _mlp_and_batch()
    m2, _, _ = _mlp_and_batch()
    o1, o2 = oar.optim.SGD(m1.parameters(), lr=0.1), oar.optim.SGD(m2.parameters(), lr=0.1)
    sc = oar.cuda.amp.GradScaler()
    F.cross_entropy(m1(x), y).backward()
    o1.step()
    sc.scale(F.cross_entropy(m2(x), y)).backward()
    sc.step(o2)
    sc.update()
    for p, q in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_grad_scaler_unscale_then_clip_then_step(torch):
    """unscale_ gives the true gradients (torch's from the same weights), clipping sees them, and
    step does not unscale again."""
    m, x, y = _mlp_and_batch()
    tm = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    _copy_params(m, tm, torch)
    opt = oar.optim.SGD(m.parameters(), lr=0.5)
    sc = oar.cuda.amp.GradScaler(init_scale=4096.0)
    sc.scale(F.cross_entropy(m(x), y)).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        sc.unscale_(opt)
    torch.nn.functional.cross_entropy(tm(torch.tensor(x.numpy())), torch.tensor(y.numpy())).backward()
    for p, q in zip(m.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
    norm = nn.utils.clip_grad_norm_(m.parameters(), 0.1)
    tnorm = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.1)
    assert abs(float(norm) - float(tnorm)) < 1e-4 * float(tnorm)
    before = [p.detach().clone() for p in m.parameters()]
    sc.step(opt)
    torch.optim.SGD(tm.parameters(), lr=0.5).step()
    with pytest.raises(RuntimeError, match="already been called"):
        sc.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        sc.unscale_(opt)
    sc.update()
    for p, q, b in zip(m.parameters(), tm.parameters(), before):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)
        assert not bool((p == b).all())


def test_grad_scaler_state_dict_round_trip(torch):
    m, x, y = _mlp_and_batch()
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    sc = oar.cuda.amp.GradScaler(init_scale=128.0, growth_interval=5)
    for _ in range(2):
        opt.zero_grad()
        _scaled_backward(sc, m, x, y)
        sc.step(opt)
        sc.update()
    sd = sc.state_dict()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's scaler warns without CUDA
        tkeys = set(torch.cuda.amp.GradScaler(enabled=False).state_dict()) or \
            {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}
    assert set(sd) == tkeys
    assert sd == {"scale": 128.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 5,
                  "_growth_tracker": 2}
    sc2 = oar.amp.GradScaler(growth_factor=4.0)
    sc2.load_state_dict(sd)
    assert sc2.state_dict() == sd and sc2.get_growth_factor() == 2.0
    for s in (sc, sc2):  # both grow at the same step now
        for _ in range(3):
            opt.zero_grad()
            _scaled_backward(s, m, x, y)
            s.step(opt)
            s.update()
        assert s.get_scale() == 256.0
    with pytest.raises(RuntimeError, match="state dict is empty"):
        sc2.load_state_dict({})
    sc2.update(new_scale=8.0)
    assert sc2.get_scale() == 8.0
    sc2.set_growth_interval(7)
    assert sc2.get_growth_interval() == 7 and sc2.get_scale() == 8.0


def test_grad_scaler_disabled_and_errors():
    m, x, y = _mlp_and_batch()
    opt = oar.optim.SGD(m.parameters(), lr=0.1)
    off = oar.cuda.amp.GradScaler(enabled=False)
    loss = F.cross_entropy(m(x), y)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    loss.backward()
    off.step(opt)
    off.update()
    sc = oar.cuda.amp.GradScaler(init_scale=2.0)
    a, b = oar.ones(2), oar.ones(3, dtype=oar.float16)
    out = sc.scale([a, (b, a)])
    assert out[0].tolist() == [2.0, 2.0] and out[1][0].dtype == oar.float32 and isinstance(out[1], tuple)
    with pytest.raises(ValueError, match="iterable of Tensors"):
        sc.scale(3.0)
    with pytest.raises(AssertionError, match="No inf checks"):
        sc.update()
    with pytest.raises(TypeError, match="oar.optim optimizer"):
        sc.step(object())
    with pytest.raises(RuntimeError, match="Closure"):
        sc.step(opt, closure=lambda: None)
    with pytest.raises(AssertionError, match="growth factor"):
        oar.cuda.amp.GradScaler(growth_factor=1.0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mixed_precision_training_from_python(dtype):
    """A small MLP trained a few dozen steps as `oar train --amp` does (autocast forward, scaled
    backward for fp16): the loss falls, nothing is NaN, and it ends near f32 training's."""
    def run(dt):
        oar.manual_seed(0)
        m = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 5))
        opt = oar.optim.Adam(m.parameters(), lr=3e-3)
        sc = oar.cuda.amp.GradScaler(enabled=dt is oar.float16, init_scale=2.0 ** 16, growth_interval=10)
        oar.manual_seed(1)
        x = oar.randn(256, 20)
        y = (x[:, :5].argmax(1))
        losses = []
        for _ in range(40):
            opt.zero_grad()
            with oar.autocast("cpu", dtype=dt, enabled=dt is not None):
                loss = F.cross_entropy(m(x), y)
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
            losses.append(loss.item())
        return losses, sc

    losses, sc = run(getattr(oar, dtype))
    f32, _ = run(None)
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.5 * losses[0]
    assert abs(losses[-1] - f32[-1]) < 0.1 * f32[0]
    assert losses != f32  # the region was in effect
    if dtype == "float16":
        assert sc.get_scale() >= 2.0 ** 16  # no step was skipped: the scale only grew


def test_grad_scaler_with_own_step_and_two_optimizers():
    """An optimizer subclass with its own step() is stepped through it (skipped on inf); two
    optimizers are unscaled and stepped one after the other, the other order refused."""
    class Counting(oar.optim.SGD):
        calls = 0

        def step(self, closure=None):
            Counting.calls += 1
            return super().step(closure)

    m, x, y = _mlp_and_batch()
    opt = Counting(m.parameters(), lr=0.1)
    sc = oar.cuda.amp.GradScaler(init_scale=64.0)
    before = [p.detach().clone() for p in m.parameters()]
    _scaled_backward(sc, m, x, y, bad=True)
    assert sc.step(opt) is None and Counting.calls == 0
    sc.update()
    assert sc.get_scale() == 32.0 and all(bool((a == p).all()) for a, p in zip(before, m.parameters()))
    opt.zero_grad()
    _scaled_backward(sc, m, x, y)
    sc.step(opt)
    sc.update()
    assert Counting.calls == 1 and not all(bool((a == p).all()) for a, p in zip(before, m.parameters()))

    o1 = oar.optim.SGD(m[0].parameters(), lr=0.1)
    o2 = oar.optim.SGD(m[2].parameters(), lr=0.1)
    for order_ok in (True, False):
        o1.zero_grad(), o2.zero_grad()
        _scaled_backward(sc, m, x, y)
        if order_ok:
            sc.unscale_(o1), sc.step(o1), sc.unscale_(o2), sc.step(o2)
        else:
            sc.unscale_(o1), sc.unscale_(o2)
            with pytest.raises(RuntimeError, match="another optimizer was unscaled"):
                sc.step(o1)
        sc.update()


def test_custom_fwd_bwd_as_torch(torch):
    """torch.cuda.amp.custom_fwd / custom_bwd on a custom Function: forward records whether CUDA
    autocast was on, backward runs under that state; cast_inputs casts CUDA tensors only (a
    no-op here, as in torch); the results are torch's."""
    def run(lib):
        class Sq(lib.autograd.Function):
            @staticmethod
            @lib.cuda.amp.custom_fwd(cast_inputs=lib.float16)
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x

            @staticmethod
            @lib.cuda.amp.custom_bwd
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return 2 * x * g

        x = lib.tensor([1.0, -2.0, 3.0], requires_grad=True)
        with lib.autocast("cpu"):
            y = Sq.apply(x)
        y.sum().backward()
        return y.dtype, y.detach().numpy(), x.grad.numpy()

    (od, oy, og), (td, ty, tg) = run(oar), run(torch)
    assert str(od).split(".")[-1] == str(td).split(".")[-1] == "float32"
    np.testing.assert_array_equal(oy, ty)
    np.testing.assert_array_equal(og, tg)
