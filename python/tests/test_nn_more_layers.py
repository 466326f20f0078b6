"""Layers torch.nn has that oar lacked, beside torch 1.13: fractional max pooling (2-d and 3-d, with
torch's own window samples passed in: values, indices, gradients), AdaptiveLogSoftmaxWithLoss (torch's
weights copied in: output, loss, every gradient, log_prob, predict), InstanceNorm with running
statistics and the lazy instance norms (train steps, then eval), DataParallel, the
max_pool*_with_indices aliases and conv_tbc."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(8)


def pair(torch, arr):
    return oar.from_numpy(arr.copy()).requires_grad_(), torch.from_numpy(arr.copy()).requires_grad_()


@pytest.mark.parametrize("n,shape,kernel,out", [(2, (2, 3, 11, 9), (3, 2), (5, 4)), (2, (3, 10, 10), 2, (5, 5)),
                                                (2, (1, 2, 8, 8), (2, 2), (1, 3)),
                                                (3, (1, 2, 7, 9, 8), (2, 3, 2), (4, 5, 3))])
def test_fractional_max_pool_matches_torch(n, shape, kernel, out):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float32)
    planes = shape[:-n] if len(shape) == n + 2 else (1,) + shape[:-n]
    s = R.random(planes + (n,)).astype(np.float32)
    res = []
    for lib, xx in zip((oar, torch), pair(torch, x)):
        fn = getattr(lib.nn.functional, f"fractional_max_pool{n}d")
        v, i = fn(xx, kernel, output_size=out, return_indices=True, _random_samples=lib.from_numpy(s))
        (v * lib.arange(float(v.numel())).reshape(v.shape)).sum().backward()
        res.append((v.detach().numpy(), i.numpy(), xx.grad.numpy()))
    np.testing.assert_array_equal(res[0][0], res[1][0])
    np.testing.assert_array_equal(res[0][1], res[1][1])
    np.testing.assert_array_equal(res[0][2], res[1][2])


def test_fractional_max_pool_modules():
    torch = torch_or_skip()
    m = oar.nn.FractionalMaxPool2d(3, output_ratio=0.5)
    assert repr(m) == repr(torch.nn.FractionalMaxPool2d(3, output_ratio=0.5))
    x = oar.randn(2, 3, 12, 10)
    y, idx = oar.nn.FractionalMaxPool2d(2, output_ratio=(0.5, 0.7), return_indices=True)(x)
    assert tuple(y.shape) == (2, 3, 6, 7)
    flat = x.reshape(2, 3, -1)
    np.testing.assert_array_equal(flat.gather(2, idx.reshape(2, 3, -1)).numpy(), y.reshape(2, 3, -1).numpy())
    y3 = oar.nn.FractionalMaxPool3d(2, output_size=(3, 4, 2))(oar.randn(1, 2, 6, 8, 5))
    assert tuple(y3.shape) == (1, 2, 3, 4, 2)
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        oar.nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="requires specifying either"):
        oar.nn.FractionalMaxPool2d(2)
    with pytest.raises(RuntimeError, match="too large relative to input size"):
        oar.nn.functional.fractional_max_pool2d(oar.randn(1, 1, 4, 4), 3, output_size=3)


@pytest.mark.parametrize("cutoffs,div,head_bias", [([5, 12], 2.0, False), ([3], 4.0, True), ([2, 6, 15], 1.5, False)])
def test_adaptive_log_softmax_matches_torch(cutoffs, div, head_bias):
    torch = torch_or_skip()
    torch.manual_seed(0)
    tm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs, div_value=div, head_bias=head_bias)
    om = oar.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs, div_value=div, head_bias=head_bias)
    om.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in tm.state_dict().items()})
    assert repr(om) == repr(tm)
    x = R.standard_normal((10, 8)).astype(np.float32)
    target = R.integers(0, 20, 10)
    target[:3] = [0, 19, cutoffs[0]]
    res = []
    for lib, m in ((oar, om), (torch, tm)):
        out, loss = m(lib.from_numpy(x.copy()), lib.from_numpy(target.copy()))
        loss.backward()
        grads = [p.grad.numpy() for _, p in sorted(m.named_parameters())]
        lp = m.log_prob(lib.from_numpy(x.copy())).detach().numpy()
        res.append((out.detach().numpy(), loss.item(), grads, lp, m.predict(lib.from_numpy(x.copy())).numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-5, atol=1e-6)
    assert abs(res[0][1] - res[1][1]) < 1e-5
    for go, gt in zip(res[0][2], res[1][2]):
        np.testing.assert_allclose(go, gt, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(res[0][3], res[1][3], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(res[0][4], res[1][4])
    with pytest.raises(RuntimeError, match=r"Target values should be in \[0, 19\]"):
        om(oar.from_numpy(x), oar.from_numpy(np.full(10, 20)))
    with pytest.raises(ValueError, match="cutoffs should be a sequence"):
        oar.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [12, 5])


@pytest.mark.parametrize("lazy", [False, True])
def test_instance_norm_running_stats_match_torch(lazy):
    torch = torch_or_skip()
    res = []
    for lib in (oar, torch):
        m = lib.nn.LazyInstanceNorm2d() if lazy else lib.nn.InstanceNorm2d(3, affine=True, track_running_stats=True)
        R2 = np.random.default_rng(8)   # the same draws for both libraries
        xs = [lib.from_numpy((R2.standard_normal((4, 3, 5, 6)) * (k + 1) + k).astype(np.float32)) for k in range(3)]
        outs = [m(x).detach().numpy() for x in xs]
        m.eval()
        outs.append(m(xs[0]).detach().numpy())
        res.append((outs, m.running_mean.numpy(), m.running_var.numpy(), int(m.num_batches_tracked),
                    sorted(m.state_dict()), type(m).__name__))
    for a, b in zip(res[0][0], res[1][0]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res[0][2], res[1][2], rtol=1e-5, atol=1e-6)
    assert res[0][3:] == res[1][3:]


def test_data_parallel_and_aliases():
    torch = torch_or_skip()
    x = R.standard_normal((2, 6, 4, 4)).astype(np.float32)
    dp = oar.nn.DataParallel(oar.nn.Linear(4, 2))
    assert list(dp.state_dict()) == list(torch.nn.DataParallel(torch.nn.Linear(4, 2)).state_dict())
    assert repr(dp) == repr(torch.nn.DataParallel(torch.nn.Linear(4, 2)))
    inp = oar.ones(3, 4)
    np.testing.assert_array_equal(dp(inp).detach().numpy(), dp.module(inp).detach().numpy())
    for n in (1, 2, 3):
        shape = {1: (2, 3, 8), 2: (2, 3, 8, 8), 3: (2, 3, 4, 6, 6)}[n]
        a = R.standard_normal(shape).astype(np.float32)
        vo, io = getattr(oar.nn.functional, f"max_pool{n}d_with_indices")(oar.from_numpy(a), 2)
        vt, it = getattr(torch.nn.functional, f"max_pool{n}d_with_indices")(torch.from_numpy(a), 2)
        np.testing.assert_array_equal(vo.numpy(), vt.numpy())
        np.testing.assert_array_equal(io.numpy(), it.numpy())
    tbc = [lib.conv_tbc(lib.from_numpy(x[0, :, :, 0].T.copy().reshape(4, 1, 6)), lib.ones(2, 6, 3), lib.zeros(3), 1)
           for lib in (oar, torch)]
    np.testing.assert_allclose(tbc[0].numpy(), tbc[1].numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,out", [((2, 3, 6, 7, 5), (3, 2, 4)), ((3, 5, 5, 5), 2), ((1, 2, 4, 6, 8), (2, 3, 4))])
def test_adaptive_max_pool3d_matches_torch(shape, out):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float32)
    res = []
    for lib, xx in zip((oar, torch), pair(torch, x)):
        v, i = lib.nn.AdaptiveMaxPool3d(out, return_indices=True)(xx)
        (v * v).sum().backward()
        res.append((v.detach().numpy(), i.numpy(), xx.grad.numpy(),
                    lib.nn.functional.adaptive_max_pool3d(xx, out).detach().numpy()))
    for a, b in zip(*res):
        np.testing.assert_array_equal(a, b)


def test_max_unpool3d_matches_torch():
    torch = torch_or_skip()
    x = R.standard_normal((2, 3, 4, 6, 6)).astype(np.float32)
    v, i = torch.nn.functional.max_pool3d(torch.from_numpy(x), 2, return_indices=True)
    res = []
    for lib in (oar, torch):
        vv = lib.from_numpy(v.numpy().copy()).requires_grad_()
        y = lib.nn.MaxUnpool3d(2)(vv, lib.from_numpy(i.numpy().copy()))
        y2 = lib.nn.functional.max_unpool3d(vv, lib.from_numpy(i.numpy().copy()), 2, output_size=(5, 7, 7))
        (y * 2 + 0).sum().backward()
        res.append((y.detach().numpy(), y2.detach().numpy(), vv.grad.numpy(), repr(lib.nn.MaxUnpool3d(2, 1)) + repr(lib.nn.MaxUnpool2d((2, 3), 1, (1, 0))) + repr(lib.nn.MaxUnpool1d(2))))
    for a, b in zip(res[0][:3], res[1][:3]):
        np.testing.assert_array_equal(a, b)
    assert res[0][3] == res[1][3]
    with pytest.raises(RuntimeError, match="indices of its shape"):
        oar.nn.functional.max_unpool3d(oar.ones(1, 1, 2, 2, 2), oar.zeros(1, 1, 2, 2, dtype=oar.int64), 2)


INTERP = [((1, 2, 7), dict(scale_factor=2.5, mode="linear")), ((2, 1, 5), dict(size=3, mode="linear", align_corners=True)),
          ((1, 2, 3, 4, 5), dict(size=(5, 3, 8), mode="trilinear")),
          ((1, 1, 4, 3, 2), dict(scale_factor=2, mode="trilinear", align_corners=True)),
          ((1, 2, 8, 6), dict(size=(3, 4), mode="area")), ((1, 2, 9), dict(size=4, mode="area")),
          ((1, 1, 6, 6), dict(scale_factor=1.5, mode="bilinear"))]


@pytest.mark.parametrize("shape,kw", INTERP)
def test_interpolate_modes_match_torch(shape, kw):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float64)
    res = []
    for lib, xx in zip((oar, torch), pair(torch, x)):
        y = lib.nn.functional.interpolate(xx, **kw)
        (y * y).sum().backward()
        res.append((y.detach().numpy(), xx.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    with pytest.raises(NotImplementedError, match="trilinear mode needs 5D input"):
        oar.nn.functional.interpolate(oar.ones(1, 1, 4, 4), scale_factor=2, mode="trilinear")


@pytest.mark.parametrize("mode", ["circular", "reflect", "replicate"])
def test_conv_padding_modes_and_circular_pad_match_torch(mode):
    torch = torch_or_skip()
    x = R.standard_normal((2, 3, 6, 5)).astype(np.float32)
    tconv = torch.nn.Conv2d(3, 4, 3, padding=(2, 1), padding_mode=mode)
    oconv = oar.nn.Conv2d(3, 4, 3, padding=(2, 1), padding_mode=mode)
    oconv.load_state_dict({k: oar.from_numpy(v.detach().numpy().copy()) for k, v in tconv.state_dict().items()})
    res = []
    for lib, conv, xx in zip((oar, torch), (oconv, tconv), pair(torch, x)):
        y = conv(xx)
        (y * y).sum().backward()
        pads = lib.nn.functional.pad(xx, (1, 2, 2, 0), mode="circular")
        res.append((y.detach().numpy(), xx.grad.numpy(), conv.weight.grad.numpy(), pads.detach().numpy(), repr(conv)))
    for a, b in zip(res[0][:4], res[1][:4]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert res[0][4] == res[1][4]
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        oar.nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode is supported for ConvTranspose2d'):
        oar.nn.ConvTranspose2d(1, 1, 3, padding_mode="circular")
    with pytest.raises(ValueError, match="wrapping around more than once"):
        oar.nn.functional.pad(oar.ones(1, 1, 2, 2), (3, 0), mode="circular")


@pytest.mark.parametrize("eq,shapes", [("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("ij,jk,kl", [(2, 3), (3, 4), (4, 5)]),
                                       ("bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 2)]),
                                       ("i,i,i->", [(4,), (4,), (4,)]), ("...ij,jk,k->...i", [(2, 3, 4), (4, 5), (5,)]),
                                       ("ab,bc,cd,de->ae", [(2, 3), (3, 4), (4, 5), (5, 2)])])
def test_einsum_of_many_operands_matches_torch(eq, shapes):
    torch = torch_or_skip()
    arrays = [R.standard_normal(s) for s in shapes]
    res = []
    for lib in (oar, torch):
        ts = [lib.from_numpy(a.copy()).requires_grad_() for a in arrays]
        y = lib.einsum(eq, *ts)
        (y * y).sum().backward()
        res.append([y.detach().numpy()] + [t.grad.numpy() for t in ts])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
