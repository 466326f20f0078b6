"""adaptive_max_pool1d/2d (and their modules) beside torch 1.13 at sizes that do not divide the
input: values, indices (flat over H*W, or over L), and gradients."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(8)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 9), (3, 4)), ((3, 10, 5), (4, None)), ((1, 2, 6, 6), 3),
                                       ((2, 2, 5, 7), (5, 7)), ((1, 1, 4, 9), (2, 1))])
def test_adaptive_max_pool2d_matches_torch(shape, out):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float32)
    res = []
    for lib in (oar, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        y, idx = lib.nn.functional.adaptive_max_pool2d(t, out, return_indices=True)
        (y * y).sum().backward()
        plain = lib.nn.functional.adaptive_max_pool2d(t.detach(), out)
        res.append((y.detach().numpy(), idx.numpy(), t.grad.numpy(), plain.numpy()))
    for k in range(4):
        np.testing.assert_allclose(res[0][k], res[1][k], rtol=1e-6, atol=1e-6, err_msg=f"output {k}")


def test_adaptive_max_pool1d_and_modules_match_torch():
    torch = torch_or_skip()
    x = R.standard_normal((2, 3, 11)).astype(np.float32)
    res = []
    for lib in (oar, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        m = lib.nn.AdaptiveMaxPool1d(4, return_indices=True)
        y, idx = m(t)
        y.sum().backward()
        m2 = lib.nn.AdaptiveMaxPool2d((2, 3))
        z = m2(lib.from_numpy(x.copy()).unsqueeze(0))
        res.append((y.detach().numpy(), idx.numpy(), t.grad.numpy(), z.numpy(), repr(m), repr(m2),
                    lib.nn.functional.adaptive_max_pool1d(lib.from_numpy(x[0].copy()), 3).numpy()))
    for k in (0, 1, 2, 3, 6):
        np.testing.assert_allclose(res[0][k], res[1][k], rtol=1e-6, atol=1e-6, err_msg=f"output {k}")
    assert res[0][4] == res[1][4] and res[0][5] == res[1][5]
    with pytest.raises(RuntimeError, match="Expected 3D or 4D tensor"):
        oar.nn.functional.adaptive_max_pool2d(oar.ones(4, 4), 2)
