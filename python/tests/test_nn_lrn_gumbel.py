"""LocalResponseNorm / F.local_response_norm, F.gumbel_softmax, InstanceNorm3d and NLLLoss2d beside
torch 1.13: values and gradients where the two can agree, the sampler by its statistics."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(23)


@pytest.mark.parametrize("shape,size", [((2, 7, 5, 4), 3), ((2, 6, 9), 4), ((1, 5, 3, 2, 2), 2), ((2, 3, 4, 4), 5)])
def test_local_response_norm_matches_torch(shape, size):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float32)
    out = []
    for lib in (oar, torch):
        t = lib.from_numpy(x.copy()).requires_grad_()
        m = lib.nn.LocalResponseNorm(size, alpha=0.01, beta=0.8, k=2.0)
        y = m(t)
        (y * y).sum().backward()
        out.append((y.detach().numpy(), t.grad.numpy(), repr(m)))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-4, atol=1e-6)
    assert out[0][2] == out[1][2]


def test_gumbel_softmax_samples_and_straight_through():
    logits = oar.from_numpy(np.log(np.array([[0.1, 0.6, 0.3]], np.float32))).requires_grad_()
    oar.manual_seed(4)
    soft = oar.nn.functional.gumbel_softmax(logits.expand(4000, 3), tau=0.5)
    np.testing.assert_allclose(soft.detach().numpy().sum(-1), 1.0, rtol=1e-5)
    hard = oar.nn.functional.gumbel_softmax(logits.expand(4000, 3), hard=True)
    h = hard.detach().numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and np.all(h.sum(-1) == 1)
    freq = h.mean(0)  # the argmax of logits + Gumbel noise is a draw from softmax(logits)
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.03)
    (hard * oar.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0  # the soft sample's gradient


def test_instance_norm_3d_and_nll_loss_2d_match_torch():
    torch = torch_or_skip()
    x = R.standard_normal((2, 3, 4, 3, 5)).astype(np.float32)
    logp = np.log(R.dirichlet(np.ones(4), (2, 3, 3)).astype(np.float32)).transpose(0, 3, 1, 2).copy()
    target = R.integers(0, 4, (2, 3, 3))
    out = []
    for lib in (oar, torch):
        m = lib.nn.InstanceNorm3d(3, affine=True)
        y = m(lib.from_numpy(x.copy()))
        loss = lib.nn.NLLLoss2d()(lib.from_numpy(logp.copy()), lib.from_numpy(target))
        out.append((y.detach().numpy(), loss.item(), repr(m)))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-5)
    assert out[0][2] == out[1][2]
