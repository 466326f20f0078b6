"""The 3-d layers of the video models as ops of their own (conv3d, conv_transpose3d, max_pool3d,
avg_pool3d; issue 14), beside torch 1.13: torch's pooling options the composition did not offer
(max_pool3d's indices, avg_pool3d's ceil_mode, count_include_pad=False and divisor_override) with
their gradients, conv3d's second-order gradients, and to_static tracing them as single ops (the
program names them; compiled = eager, bit for bit, over a dynamic batch)."""
import numpy as np
import pytest

import oar

from test_torch_behaviours import both, close

R = np.random.RandomState(21)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


@pytest.mark.parametrize("kw", [dict(kernel_size=(1, 3, 3), stride=(1, 2, 2), padding=(0, 1, 1)),
                                dict(kernel_size=(3, 2, 2), stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=2, stride=1, dilation=(2, 1, 2))])
def test_max_pool3d_indices_match_torch(torch, kw):
    x = f32(2, 3, 6, 7, 8)
    (xo,), (xt,) = both(torch, x)
    (yo, io), (yt, it) = (lib.nn.functional.max_pool3d(v, return_indices=True, **kw) for lib, v in
                          ((oar, xo), (torch, xt)))
    close(yo, yt)
    assert io.dtype == oar.int64 and np.array_equal(io.numpy(), it.numpy())
    m = oar.nn.MaxPool3d(return_indices=True, **kw)
    assert np.array_equal(m(oar.tensor(x[0]))[1].numpy(), it[0].numpy())  # unbatched


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                dict(kernel_size=(2, 3, 3), stride=(1, 2, 2), padding=1, count_include_pad=False),
                                dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=(1, 2, 3), stride=1, divisor_override=5)])
def test_avg_pool3d_options_match_torch(torch, kw):
    (xo,), (xt,) = both(torch, f32(2, 3, 5, 7, 6))
    yo, yt = oar.nn.AvgPool3d(**kw)(xo), torch.nn.AvgPool3d(**kw)(xt)
    close(yo, yt)
    gy = f32(*yt.shape)
    (yo * oar.tensor(gy)).sum().backward()
    (yt * torch.tensor(gy)).sum().backward()
    close(xo.grad, xt.grad)


def test_conv3d_second_order_matches_torch(torch):
    x, w, v = f32(2, 4, 4, 5, 5), f32(6, 2, 3, 2, 3), f32(2, 4, 4, 5, 5)
    res = []
    for lib in (oar, torch):
        xl, wl = lib.tensor(x, requires_grad=True), lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv3d(xl, wl, None, (1, 2, 1), 1, (2, 1, 1), 2)
        (gx,) = lib.autograd.grad((y * y).sum(), xl, create_graph=True)
        (gx * lib.tensor(v)).sum().backward()
        res.append((gx.detach().numpy(), xl.grad.numpy(), wl.grad.numpy()))
    for what, a, b in zip(("dx", "d2/dx2", "d2/dxdw"), *res):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3, err_msg=what)


class Clip(oar.nn.Module):
    """A video-model block: conv3d stem, 3-d max pooling, a transposed conv, global pooling."""

    def __init__(self):
        super().__init__()
        self.stem = oar.nn.Conv3d(3, 8, (3, 7, 7), (1, 2, 2), (1, 3, 3))
        self.pool = oar.nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))
        self.up = oar.nn.ConvTranspose3d(8, 4, 2, stride=2)
        self.head = oar.nn.AdaptiveAvgPool3d(1)

    def forward(self, x):
        return self.head(self.up(self.pool(self.stem(x).relu()))).flatten(1)


def test_to_static_traces_the_3d_ops():
    m = Clip()
    f = oar.jit.to_static(m.forward, input_spec=[oar.jit.InputSpec([None, 3, 4, 16, 16])])
    for b in (2, 3):
        x = oar.randn(b, 3, 4, 16, 16)
        got, want = f(x), m(x).detach()
        assert got.shape == want.shape and bool((got == want).all())
    assert f.num_traces() == 1
    text = f.program()
    for op in ("conv3d(", "max_pool3d(", "conv_transpose3d(", "avg_pool3d("):
        assert op in text, op
    assert "conv2d(" not in text  # no longer composed of 2-d convolutions


def test_errors_name_what_was_expected():
    with pytest.raises(RuntimeError, match=r"conv3d: expected weight.shape\[1\] \* groups == x.shape\[1\], got 3 \* 1 != 4"):
        oar.nn.functional.conv3d(oar.zeros(1, 4, 3, 5, 5), oar.zeros(2, 3, 2, 2, 2))
    with pytest.raises(RuntimeError, match="conv3d: expected a 5-D input"):
        oar.nn.functional.conv3d(oar.zeros(4, 5, 5), oar.zeros(2, 4, 2, 2, 2))
    with pytest.raises(RuntimeError, match="max_pool3d: expected x to be 4-d"):
        oar.nn.functional.max_pool3d(oar.zeros(4, 5), 2)
    with pytest.raises(RuntimeError, match="divisor must be not zero"):
        oar.nn.functional.avg_pool3d(oar.zeros(1, 1, 4, 4, 4), 2, divisor_override=0)
