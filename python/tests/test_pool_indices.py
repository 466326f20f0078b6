"""max_pool1d/2d(return_indices=True), max_unpool1d/2d and their modules beside torch 1.13:
indices (ties, NaN, padding, dilation, ceil_mode, 16-bit inputs), unpooling values and gradients,
output_size, the error for an invalid index, and a compiled pool-unpool (SegNet's pattern)."""
import warnings

import numpy as np
import pytest

import oar

from test_torch_behaviours import close

R = np.random.RandomState(3)
CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1), dict(kernel_size=3, stride=1, dilation=2,
                                                                          ceil_mode=True), dict(kernel_size=(2, 3), stride=(1, 2))]


@pytest.mark.parametrize("kw", CASES)
def test_max_pool2d_indices_match_torch(torch, kw):
    x = R.randn(2, 3, 7, 8).astype(np.float32)
    x[0, 0, :2, :2] = 1.5  # a tie: the first maximum, as torch
    x[1, 2, 3, 3] = np.nan  # NaN is the maximum
    for inp in (x, x[0]):  # batched and unbatched
        got = oar.nn.functional.max_pool2d(oar.tensor(inp), return_indices=True, **kw)
        want = torch.nn.functional.max_pool2d(torch.tensor(inp), return_indices=True, **kw)
        assert got[1].dtype == oar.int64
        np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
        np.testing.assert_array_equal(got[0].numpy(), want[0].numpy())


def test_indices_of_16_bit_inputs_and_1d(torch):
    x = R.randn(2, 4, 6, 6).astype(np.float32)
    got = oar.nn.functional.max_pool2d(oar.tensor(x).to(oar.bfloat16), 2, return_indices=True)
    want = torch.nn.functional.max_pool2d(torch.tensor(x).to(torch.bfloat16), 2, return_indices=True)
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    y = R.randn(2, 3, 11).astype(np.float32)
    got = oar.nn.MaxPool1d(3, 2, 1, return_indices=True)(oar.tensor(y))
    want = torch.nn.MaxPool1d(3, 2, 1, return_indices=True)(torch.tensor(y))
    np.testing.assert_array_equal(got[1].numpy(), want[1].numpy())
    close(oar.nn.functional.max_unpool1d(got[0], got[1], 3, 2, 1, output_size=[11]),
          torch.nn.functional.max_unpool1d(want[0], want[1], 3, 2, 1, output_size=[11]))


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)])
def test_max_unpool2d_values_and_gradients(torch, kw):
    x = R.randn(2, 3, 8, 9).astype(np.float32)
    w = R.randn(2, 3, 8, 9).astype(np.float32)
    res = []
    for lib in (oar, torch):
        xt = lib.tensor(x, requires_grad=True)
        y, idx = lib.nn.functional.max_pool2d(xt, return_indices=True, **kw)
        u = lib.nn.MaxUnpool2d(**kw)(y, idx, output_size=xt.shape)
        (u * lib.tensor(w)).sum().backward()
        res.append([u, xt.grad])
    for g, t in zip(*res):
        close(g, t, rtol=1e-6, atol=1e-6)


def test_default_output_size_and_errors(torch):
    v = R.randn(1, 2, 3, 3).astype(np.float32)
    i = np.array([[[[0, 3, 5], [12, 14, 17], [30, 33, 35]]] * 2]).reshape(1, 2, 3, 3)
    got = oar.nn.functional.max_unpool2d(oar.tensor(v), oar.tensor(i), 2)
    want = torch.nn.functional.max_unpool2d(torch.tensor(v), torch.tensor(i), 2)
    assert tuple(got.shape) == (1, 2, 6, 6)
    close(got, want)
    bad = i.copy()
    bad[0, 0, 0, 0] = 36
    with pytest.raises(ValueError, match=r"expected indices in \[0, 36\).* got 36"):
        oar.nn.functional.max_unpool2d(oar.tensor(v), oar.tensor(bad), 2)


def test_pool_unpool_compiles():
    pool, unpool = oar.nn.MaxPool2d(2, return_indices=True), oar.nn.MaxUnpool2d(2)

    def f(x):
        y, idx = pool(x)
        return unpool(oar.relu(y), idx)

    x = oar.tensor(R.randn(2, 3, 6, 6).astype(np.float32))
    compiled = oar.jit.to_static(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would warn
        for _ in range(2):
            close(compiled(x), f(x))
    assert not compiled.fell_back
