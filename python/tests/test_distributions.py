"""oar.distributions beside torch.distributions 1.13: log_prob, cdf, icdf, entropy, mean, variance and
their parameter gradients on the same parameters; shapes (batch, event, samples, expand,
enumerate_support); KL divergences; samples' moments and rsample's reparameterization; torch's
validation errors and reprs."""
import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(12)
LOC = R.standard_normal((2, 3))
SCALE = R.random((2, 3)) + 0.5
PROBS = R.random((2, 3)) * 0.8 + 0.1
CAT = R.random((2, 4)) + 0.1
A = R.standard_normal((3, 3))
COV = A @ A.T + 3 * np.eye(3)
MLOC = R.standard_normal((2, 3))

# name -> (constructor(L, params), parameter arrays, values at which log_prob/cdf are taken, methods)
CASES = {
    "Normal": (lambda L, p: L.distributions.Normal(p[0], p[1]), [LOC, SCALE], R.standard_normal((4, 2, 3)),
               ["log_prob", "cdf", "entropy", "mean", "variance", "stddev"]),
    "Uniform": (lambda L, p: L.distributions.Uniform(p[0], p[0] + p[1]), [LOC, SCALE], LOC + SCALE * 0.3,
                ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "Exponential": (lambda L, p: L.distributions.Exponential(p[0]), [SCALE], SCALE * 1.7,
                    ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "Laplace": (lambda L, p: L.distributions.Laplace(p[0], p[1]), [LOC, SCALE], R.standard_normal((4, 2, 3)),
                ["log_prob", "cdf", "entropy", "mean", "variance"]),
    "Bernoulli probs": (lambda L, p: L.distributions.Bernoulli(probs=p[0]), [PROBS], (R.random((2, 3)) > 0.5) * 1.0,
                        ["log_prob", "entropy", "mean", "variance"]),
    "Bernoulli logits": (lambda L, p: L.distributions.Bernoulli(logits=p[0]), [LOC], (R.random((2, 3)) > 0.5) * 1.0,
                         ["log_prob", "entropy", "mean"]),
    "Categorical probs": (lambda L, p: L.distributions.Categorical(probs=p[0]), [CAT], np.array([[0, 3], [2, 1], [1, 1]]),
                          ["log_prob", "entropy"]),
    "Categorical logits": (lambda L, p: L.distributions.Categorical(logits=p[0]), [LOC], np.array([0, 2]),
                           ["log_prob", "entropy"]),
    "MultivariateNormal cov": (lambda L, p: L.distributions.MultivariateNormal(p[0], covariance_matrix=p[1]),
                               [MLOC, COV], R.standard_normal((5, 2, 3)), ["log_prob", "entropy", "mean", "variance"]),
    "MultivariateNormal tril": (lambda L, p: L.distributions.MultivariateNormal(
        p[0], scale_tril=L.linalg.cholesky(p[1])), [MLOC, COV], R.standard_normal((2, 3)), ["log_prob", "entropy"]),
    "MultivariateNormal precision": (lambda L, p: L.distributions.MultivariateNormal(
        p[0], precision_matrix=p[1]), [MLOC[0], COV], R.standard_normal((4, 3)), ["log_prob", "entropy"]),
    "Independent Normal": (lambda L, p: L.distributions.Independent(L.distributions.Normal(p[0], p[1]), 1),
                           [LOC, SCALE], R.standard_normal((2, 3)), ["log_prob", "entropy", "mean"]),
}


def evaluate(L, name, how):
    make, params, value, methods = CASES[name]
    ts = [L.from_numpy(p.copy()).requires_grad_() for p in params]
    d = make(L, ts)
    v = L.from_numpy(value.copy())
    out = getattr(d, how)(v) if how in ("log_prob", "cdf") else d.entropy() if how == "entropy" else getattr(d, how)
    grads = []
    if out.requires_grad:
        (out * (L.arange(float(out.numel())).reshape(tuple(out.shape)) + 1)).sum().backward()
        grads = [t.grad.numpy() if t.grad is not None else np.zeros_like(p) for t, p in zip(ts, params)]
    return out.detach().numpy(), grads, (tuple(d.batch_shape), tuple(d.event_shape))


@pytest.mark.parametrize("name,how", [(n, h) for n, c in CASES.items() for h in c[3]])
def test_values_and_gradients_match_torch(name, how):
    torch = torch_or_skip()
    o, t = evaluate(oar, name, how), evaluate(torch, name, how)
    np.testing.assert_allclose(o[0], t[0], rtol=1e-9, atol=1e-12)
    for go, gt in zip(o[1], t[1]):
        np.testing.assert_allclose(go, gt, rtol=1e-8, atol=1e-10)
    assert o[2] == t[2]


def test_icdf_matches_torch():
    torch = torch_or_skip()
    q = R.random((2, 3)) * 0.9 + 0.05
    for name in ("Normal", "Uniform", "Exponential", "Laplace"):
        make, params = CASES[name][:2]
        res = [make(L, [L.from_numpy(p.copy()) for p in params]).icdf(L.from_numpy(q.copy())).numpy() for L in (oar, torch)]
        np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12, err_msg=name)


KL_PAIRS = [("Normal", lambda L: (L.distributions.Normal(L.from_numpy(LOC), L.from_numpy(SCALE)),
                                  L.distributions.Normal(L.from_numpy(LOC * 0.5), L.from_numpy(SCALE * 2)))),
            ("Bernoulli", lambda L: (L.distributions.Bernoulli(L.from_numpy(PROBS)),
                                     L.distributions.Bernoulli(L.from_numpy(PROBS[::-1].copy())))),
            ("Categorical", lambda L: (L.distributions.Categorical(L.from_numpy(CAT)),
                                       L.distributions.Categorical(logits=L.from_numpy(CAT * 2)))),
            ("Uniform", lambda L: (L.distributions.Uniform(L.from_numpy(LOC), L.from_numpy(LOC + 1)),
                                   L.distributions.Uniform(L.from_numpy(LOC - 1), L.from_numpy(LOC + 1.5)))),
            ("Exponential", lambda L: (L.distributions.Exponential(L.from_numpy(SCALE)),
                                       L.distributions.Exponential(L.from_numpy(SCALE * 3)))),
            ("Laplace", lambda L: (L.distributions.Laplace(L.from_numpy(LOC), L.from_numpy(SCALE)),
                                   L.distributions.Laplace(L.from_numpy(LOC + 1), L.from_numpy(SCALE * 2)))),
            ("MVN", lambda L: (L.distributions.MultivariateNormal(L.from_numpy(MLOC), L.from_numpy(COV)),
                               L.distributions.MultivariateNormal(L.from_numpy(MLOC * 0), L.from_numpy(COV * 2)))),
            ("Independent", lambda L: (L.distributions.Independent(L.distributions.Normal(L.from_numpy(LOC),
                                                                                          L.from_numpy(SCALE)), 1),
                                       L.distributions.Independent(L.distributions.Normal(L.from_numpy(LOC * 0),
                                                                                          L.from_numpy(SCALE)), 1)))]


@pytest.mark.parametrize("name,make", KL_PAIRS)
def test_kl_divergence_matches_torch(name, make):
    torch = torch_or_skip()
    res = [L.distributions.kl_divergence(*make(L)).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12)


def test_uniform_kl_outside_support_is_inf():
    d = oar.distributions
    kl = d.kl_divergence(d.Uniform(0.0, 2.0), d.Uniform(0.5, 1.0))
    assert kl.item() == float("inf")
    with pytest.raises(NotImplementedError, match="No KL"):
        d.kl_divergence(d.Normal(0.0, 1.0), d.Categorical(oar.ones(2)))   # a pair torch registers no KL for either


def test_samples_moments_and_reparameterization():
    d = oar.distributions
    oar.manual_seed(0)
    n = 40000
    for dist, mean, var in ((d.Normal(1.5, 2.0), 1.5, 4.0), (d.Uniform(-1.0, 3.0), 1.0, 16 / 12),
                            (d.Exponential(2.0), 0.5, 0.25), (d.Laplace(-1.0, 0.5), -1.0, 0.5),
                            (d.Bernoulli(0.3), 0.3, 0.21)):
        x = dist.sample((n,)).numpy()
        assert abs(x.mean() - mean) < 5 * (var / n) ** 0.5 + 1e-3, (dist, x.mean())
        assert abs(x.var() - var) < 0.05 * var, (dist, x.var())
    c = d.Categorical(oar.tensor([0.1, 0.6, 0.3])).sample((n,)).numpy()
    np.testing.assert_allclose(np.bincount(c, minlength=3) / n, [0.1, 0.6, 0.3], atol=0.01)
    mvn = d.MultivariateNormal(oar.from_numpy(MLOC[0]), oar.from_numpy(COV))
    xs = mvn.sample((n,)).numpy()
    np.testing.assert_allclose(np.cov(xs.T), COV, atol=0.25)
    # rsample: d sample / d loc = 1, d sample / d scale = the standard noise
    loc, scale = oar.zeros(5, requires_grad=True), oar.full((5,), 2.0, requires_grad=True)
    s = d.Normal(loc, scale).rsample()
    s.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), np.ones(5))
    np.testing.assert_allclose(scale.grad.numpy(), s.detach().numpy() / 2.0, rtol=1e-6)
    assert not d.Normal(loc, scale).sample().requires_grad


def test_shapes_support_expand_and_reprs():
    torch = torch_or_skip()
    for L in (oar, torch):
        n = L.distributions.Normal(L.zeros(2, 3), L.ones(2, 3))
        assert tuple(n.sample((4, 5)).shape) == (4, 5, 2, 3)
        e = n.expand((7, 2, 3))
        assert tuple(e.batch_shape) == (7, 2, 3) and tuple(e.sample().shape) == (7, 2, 3)
        c = L.distributions.Categorical(logits=L.zeros(2, 4))
        assert tuple(c.sample((3,)).shape) == (3, 2) and tuple(c.expand((5, 2)).batch_shape) == (5, 2)
        oh = L.distributions.OneHotCategorical(probs=L.ones(2, 4) / 4)
        assert tuple(oh.sample((3,)).shape) == (3, 2, 4) and tuple(oh.event_shape) == (4,)
        mv = L.distributions.MultivariateNormal(L.zeros(2, 3), L.eye(3))
        assert tuple(mv.batch_shape) == (2,) and tuple(mv.rsample((6,)).shape) == (6, 2, 3)
    np.testing.assert_array_equal(oar.distributions.Bernoulli(oar.full((2,), 0.5)).enumerate_support().numpy(),
                                  torch.distributions.Bernoulli(torch.full((2,), 0.5)).enumerate_support().numpy())
    np.testing.assert_array_equal(oar.distributions.Categorical(oar.ones(2, 3)).enumerate_support().numpy(),
                                  torch.distributions.Categorical(torch.ones(2, 3)).enumerate_support().numpy())
    for make in (lambda L: L.distributions.Normal(0.0, 1.0), lambda L: L.distributions.Normal(L.zeros(2), L.ones(2)),
                 lambda L: L.distributions.Bernoulli(L.full((2,), 0.5)),
                 lambda L: L.distributions.MultivariateNormal(L.zeros(3), L.eye(3)),
                 lambda L: L.distributions.Independent(L.distributions.Normal(L.zeros(2), L.ones(2)), 1)):
        assert repr(make(oar)).replace("oar.", "torch.") == repr(make(torch))
    assert repr(oar.distributions.constraints.positive) == repr(torch.distributions.constraints.positive)


def test_validation_errors_match_torch():
    torch = torch_or_skip()
    for make in (lambda L: L.distributions.Normal(L.zeros(2), -L.ones(2)),
                 lambda L: L.distributions.Bernoulli(probs=L.full((2,), 1.5)),
                 lambda L: L.distributions.Exponential(L.zeros(2)),
                 lambda L: L.distributions.Categorical(probs=L.tensor([0.5, -0.5, 1.0]))):
        msgs = []
        for L in (oar, torch):
            with pytest.raises(ValueError) as e:
                make(L)
            msgs.append(str(e.value).split(", but found")[0].replace("oar.", "torch."))
        assert msgs[0] == msgs[1]
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        oar.distributions.Bernoulli(probs=oar.ones(1) * 0.5, logits=oar.zeros(1))
    with pytest.raises(ValueError, match="to be within the support"):
        oar.distributions.Exponential(oar.ones(2)).log_prob(-oar.ones(2))
    oar.distributions.Normal(oar.zeros(2), -oar.ones(2), validate_args=False)   # unchecked when asked


TRANSFORMED = {
    "LogNormal": (lambda L, p: L.distributions.LogNormal(p[0], p[1]), np.exp(R.standard_normal((2, 3)))),
    "affine tanh": (lambda L, p: L.distributions.TransformedDistribution(
        L.distributions.Normal(p[0], p[1]), [L.distributions.AffineTransform(0.5, 2.0), L.distributions.TanhTransform()]),
        np.tanh(R.standard_normal((2, 3)))),
    "sigmoid": (lambda L, p: L.distributions.TransformedDistribution(
        L.distributions.Normal(p[0], p[1]), L.distributions.SigmoidTransform()), R.random((2, 3)) * 0.9 + 0.05),
    "compose exp power": (lambda L, p: L.distributions.TransformedDistribution(
        L.distributions.Normal(p[0], p[1]), L.distributions.ComposeTransform(
            [L.distributions.ExpTransform(), L.distributions.PowerTransform(2.0)])), np.exp(R.standard_normal((2, 3)))),
    "affine event": (lambda L, p: L.distributions.TransformedDistribution(
        L.distributions.Independent(L.distributions.Normal(p[0], p[1]), 1),
        L.distributions.AffineTransform(p[0], p[1], event_dim=1)), R.standard_normal((2, 3))),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMED))
def test_transformed_distributions_match_torch(name):
    torch = torch_or_skip()
    make, value = TRANSFORMED[name]
    res = []
    for L in (oar, torch):
        ps = [L.from_numpy(LOC.copy()).requires_grad_(), L.from_numpy(SCALE.copy()).requires_grad_()]
        d = make(L, ps)
        lp = d.log_prob(L.from_numpy(value.copy()))
        lp.sum().backward()
        out = [lp.detach().numpy(), ps[0].grad.numpy(), ps[1].grad.numpy(), tuple(d.batch_shape), tuple(d.event_shape),
               tuple(d.rsample((4,)).shape)]
        if name == "LogNormal":
            q = L.from_numpy(np.full((2, 3), 0.3))
            out += [d.mean.detach().numpy(), d.variance.detach().numpy(), d.entropy().detach().numpy(),
                    d.cdf(L.from_numpy(value.copy())).detach().numpy(), d.icdf(q).detach().numpy()]
        res.append(out)
    for a, b in zip(*res):
        if isinstance(a, tuple):
            assert a == b
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


COUNTS = {
    "Poisson": (lambda L, p: L.distributions.Poisson(p[0]), [SCALE * 3], np.array([[0, 1, 2], [5, 3, 0]], float),
                ["log_prob", "mean", "variance"]),
    "Binomial probs": (lambda L, p: L.distributions.Binomial(7, probs=p[0]), [PROBS], np.array([[0, 3, 7], [2, 6, 1]], float),
                       ["log_prob", "mean", "variance", "entropy"]),
    "Binomial logits": (lambda L, p: L.distributions.Binomial(5, logits=p[0]), [LOC], np.array([[0, 3, 5], [2, 4, 1]], float),
                        ["log_prob", "entropy"]),
}
CASES.update(COUNTS)


@pytest.mark.parametrize("name,how", [(n, h) for n, c in COUNTS.items() for h in c[3]])
def test_count_distributions_match_torch(name, how):
    test_values_and_gradients_match_torch(name, how)


def test_count_samples_and_poisson():
    import math

    torch = torch_or_skip()
    d = oar.distributions
    oar.manual_seed(3)
    n = 40000
    for rate in (0.7, 4.0, 25.0, 300.0):   # Knuth's method below 10, transformed rejection above
        x = oar.poisson(oar.full((n,), rate)).numpy()
        assert (x == np.round(x)).all() and x.min() >= 0
        ks = np.arange(int(rate + 6 * rate ** 0.5) + 3)
        pmf = np.exp(ks * math.log(rate) - rate - np.array([math.lgamma(k + 1) for k in ks]))
        freq = np.bincount(x.astype(int), minlength=len(ks))[:len(ks)] / n
        assert np.abs(freq - pmf).max() < 0.012, (rate, np.abs(freq - pmf).max())
    b = d.Binomial(oar.tensor([3.0, 10.0]), probs=oar.tensor([0.2, 0.7])).sample((n,)).numpy()
    np.testing.assert_allclose(b.mean(0), [0.6, 7.0], atol=0.05)
    np.testing.assert_allclose(b.var(0), [0.48, 2.1], rtol=0.05)
    assert (b[:, 0] <= 3).all() and (b[:, 1] <= 10).all()
    kl = [L.distributions.kl_divergence(L.distributions.Poisson(L.tensor([2.0, 5.0])),
                                        L.distributions.Poisson(L.tensor([3.0, 1.0]))).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(kl[0], kl[1], rtol=1e-6)
    kl = [L.distributions.kl_divergence(L.distributions.Binomial(4, L.tensor([0.2, 0.6])),
                                        L.distributions.Binomial(4, L.tensor([0.5, 0.1]))).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(kl[0], kl[1], rtol=1e-6)
    with pytest.raises(RuntimeError, match="expected rate to be non-negative"):
        oar.poisson(oar.tensor([-1.0]))
