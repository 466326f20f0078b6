"""Tensor.unfold, scatter_add_, index_put(_), fill_diagonal_, sum_to_size, diff, histc beside torch
1.13 (values, gradients where they apply, in-place identity), and the in-place random fills by their
statistics."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(29)


def _both(torch, fn, *arrays, grad=True):
    res = []
    for lib in (oar, torch):
        ts = [lib.from_numpy(a.copy()) for a in arrays]
        if grad:
            ts[0].requires_grad_()
        y = fn(lib, *ts)
        if grad:
            (y * y).sum().backward()
        res.append((y.detach().numpy(), ts[0].grad.numpy() if grad else None))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6, atol=1e-6)
    if grad:
        np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim,size,step", [(0, 2, 1), (1, 3, 2), (-1, 4, 4), (2, 1, 3)])
def test_unfold_matches_torch(dim, size, step):
    torch = torch_or_skip()
    _both(torch, lambda L, x: x.unfold(dim, size, step) * 1.0, R.standard_normal((3, 5, 8)).astype(np.float32))


def test_index_put_and_scatter_add_match_torch():
    torch = torch_or_skip()
    x = R.standard_normal((4, 3)).astype(np.float32)
    rows, cols = np.array([0, 2, 0, 3]), np.array([1, 1, 1, 2])
    vals = R.standard_normal(4).astype(np.float32)
    for acc in (False, True):
        if not acc:  # distinct positions: torch leaves the order of repeated writes undefined
            r, c = np.array([0, 2, 3]), np.array([1, 1, 2])
            v = vals[:3]
        else:
            r, c, v = rows, cols, vals
        _both(torch, lambda L, a, i, j, w: a.clone().index_put_((i, j), w, accumulate=acc), x, r, c, v, grad=False)
        _both(torch, lambda L, a, i, j, w: a.index_put((i, j), w, accumulate=acc) * 2, x, r, c, v)
    _both(torch, lambda L, a, i, w: a.clone().index_put_((i,), w, accumulate=True), x, rows,
          R.standard_normal((4, 3)).astype(np.float32), grad=False)
    idx = np.array([[0, 1, 0], [2, 0, 1]])
    src = R.standard_normal((2, 3)).astype(np.float32)
    _both(torch, lambda L, a, i, s: a.clone().scatter_add_(0, i, s), x, idx, src, grad=False)
    t = oar.ones(2, 2)
    assert t.scatter_add_(0, oar.tensor([[0, 1]]), oar.ones(1, 2)) is t


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((5, 3), False), ((7, 3), True), ((3, 5), True),
                                        ((3, 3, 3), False)])
def test_fill_diagonal_matches_torch(shape, wrap):
    torch = torch_or_skip()
    x = R.standard_normal(shape).astype(np.float32)
    ours, theirs = oar.from_numpy(x.copy()), torch.from_numpy(x.copy())
    assert ours.fill_diagonal_(7.5, wrap=wrap) is ours
    theirs.fill_diagonal_(7.5, wrap=wrap)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_sum_to_size_diff_histc_match_torch():
    torch = torch_or_skip()
    x = R.standard_normal((2, 3, 4)).astype(np.float32)
    _both(torch, lambda L, a: a.sum_to_size(3, 1), x)
    _both(torch, lambda L, a: a.sum_to_size((1, 3, 4)), x)
    _both(torch, lambda L, a: a.diff(dim=1), x)
    _both(torch, lambda L, a: a.histc(5, -1.0, 1.0), x, grad=False)


def test_random_fills_have_their_distributions():
    oar.manual_seed(2)
    n = 20000
    b = oar.empty(n).bernoulli_(0.3).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.015
    e = oar.empty(n).exponential_(2.0).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02
    g = oar.empty(n).geometric_(0.25).numpy()
    assert g.min() >= 1 and np.all(g == np.round(g)) and abs(g.mean() - 4.0) < 0.15
    ln = oar.empty(n).log_normal_(0.0, 0.5).numpy()
    assert abs(np.log(ln).mean()) < 0.02 and abs(np.log(ln).std() - 0.5) < 0.02
    c = oar.empty(n).cauchy_(1.0, 2.0).numpy()
    assert abs(np.median(c) - 1.0) < 0.1 and abs(np.percentile(c, 75) - np.percentile(c, 25) - 4.0) < 0.3
    r = oar.empty(n).random_(3, 9).numpy()
    assert set(np.unique(r)) == set(range(3, 9))
    r2 = oar.empty(n, dtype=oar.int64).random_(5).numpy()
    assert set(np.unique(r2)) == set(range(5))
    t = oar.empty(3)
    assert t.exponential_() is t
