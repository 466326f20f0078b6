"""Kumaraswamy, Multinomial, MixtureSameFamily, the relaxed (Concrete) distributions,
LowRankMultivariateNormal, VonMises, OneHotCategoricalStraightThrough, ContinuousBernoulli and LogisticNormal
(with the softplus / softmax / stick-breaking transforms) of oar.distributions beside torch.distributions 1.13: statistics, log densities and their parameter
gradients in f64 (1e-9), shapes / expand / reprs / validation, and draws checked by distribution
(Kolmogorov-Smirnov distances against exact CDFs, moments), never bit for bit."""
import math

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

# LowRankMultivariateNormal and Wishart factor matrices: the LAPACK ops exist only in builds with OpenBLAS
LAPACK = "linalg_cholesky" in oar._ops.ID and "linalg_slogdet" in oar._ops.ID
needs_lapack = pytest.mark.skipif(not LAPACK, reason="this build has no LAPACK ops (OpenBLAS absent)")
R = np.random.default_rng(5)
C1, C0 = R.random((2, 3)) * 3 + 0.3, R.random((2, 3)) * 3 + 0.3
UNIT = R.random((4, 2, 3)) * 0.9 + 0.05
P3 = R.random((2, 3)) + 0.1
COUNTS = np.array([[[1, 0, 4], [2, 2, 1]], [[0, 0, 5], [5, 0, 0]]], float)   # [2 samples, 2 batch, 3]
LOGITS = R.standard_normal((2, 3))
TEMP = np.array(0.7)
MIXW, MLOC, MSCALE = R.random((2, 3)) + 0.2, R.standard_normal((2, 3)), R.random((2, 3)) + 0.4
XS = R.standard_normal((5, 2))
SIMPLEX = R.random((4, 2, 3)) + 0.05
SIMPLEX = SIMPLEX / SIMPLEX.sum(-1, keepdims=True)
LR_LOC, LR_W, LR_D = R.standard_normal((2, 4)), R.standard_normal((2, 4, 2)), R.random((2, 4)) + 0.4
_A = R.standard_normal((4, 4))
COV4 = _A @ _A.T + np.eye(4)
ANGLES = R.random((3, 2)) * 2 * np.pi - np.pi
_B = R.standard_normal((2, 3, 3))
WCOV = _B @ _B.transpose(0, 2, 1) + np.eye(3)
_B = R.standard_normal((4, 2, 3, 3))
WVAL = _B @ _B.transpose(0, 1, 3, 2) + np.eye(3)
LKJ_VALUE = np.array([[1.0, 0, 0], [0.3, math.sqrt(1 - 0.09), 0], [-0.5, 0.2, math.sqrt(1 - 0.29)]])
CB_PROBS = np.array([[0.05, 0.4995, 0.3], [0.5005, 0.7, 0.97]])   # both sides of, and inside, the lims
SIMPLEX4 = R.random((3, 2, 4)) + 0.05
SIMPLEX4 = SIMPLEX4 / SIMPLEX4.sum(-1, keepdims=True)

CASES = {
    "Kumaraswamy": (lambda L, p: L.distributions.Kumaraswamy(p[0], p[1]), [C1, C0], UNIT,
                    ["log_prob", "entropy", "mean", "variance", "mode"]),
    "Multinomial probs": (lambda L, p: L.distributions.Multinomial(5, probs=p[0]), [P3], COUNTS,
                          ["log_prob", "entropy", "mean", "variance"]),
    "Multinomial logits": (lambda L, p: L.distributions.Multinomial(5, logits=p[0]), [LOGITS], COUNTS,
                           ["log_prob", "mean"]),
    "MixtureSameFamily": (lambda L, p: L.distributions.MixtureSameFamily(
        L.distributions.Categorical(probs=p[0]), L.distributions.Normal(p[1], p[2])), [MIXW, MLOC, MSCALE], XS,
        ["log_prob", "cdf", "mean", "variance"]),
    "MixtureSameFamily events": (lambda L, p: L.distributions.MixtureSameFamily(
        L.distributions.Categorical(logits=p[0][0]), L.distributions.Independent(L.distributions.Normal(
            p[1].reshape(3, 2), p[2].reshape(3, 2)), 1)), [MIXW, MLOC, MSCALE], XS, ["log_prob", "mean", "variance"]),
    "RelaxedBernoulli": (lambda L, p: L.distributions.RelaxedBernoulli(p[0], probs=p[1]), [TEMP, P3 / 1.2], UNIT,
                         ["log_prob"]),
    "LogitRelaxedBernoulli": (lambda L, p: L.distributions.RelaxedBernoulli(p[0], logits=p[1]).base_dist,
                              [TEMP, LOGITS], R.standard_normal((4, 2, 3)), ["log_prob"]),
    "RelaxedOneHotCategorical": (lambda L, p: L.distributions.RelaxedOneHotCategorical(p[0], logits=p[1]),
                                 [TEMP, LOGITS], SIMPLEX, ["log_prob"]),
    "LowRankMultivariateNormal": (lambda L, p: L.distributions.LowRankMultivariateNormal(p[0], p[1], p[2]),
                                  [LR_LOC, LR_W, LR_D], R.standard_normal((3, 2, 4)),
                                  ["log_prob", "entropy", "mean", "variance", "covariance_matrix",
                                   "precision_matrix", "scale_tril"]),
    "LowRankMultivariateNormal broadcast": (lambda L, p: L.distributions.LowRankMultivariateNormal(
        p[0][0], p[1], p[2][1]), [LR_LOC, LR_W, LR_D], R.standard_normal((4,)), ["log_prob", "entropy", "variance"]),
    "VonMises": (lambda L, p: L.distributions.VonMises(p[0], p[1]), [R.standard_normal((2,)), np.array([0.4, 6.0])],
                 ANGLES, ["log_prob", "mean", "variance"]),
    "ContinuousBernoulli": (lambda L, p: L.distributions.ContinuousBernoulli(probs=p[0]), [CB_PROBS], UNIT,
                            ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "stddev"]),
    "ContinuousBernoulli logits": (lambda L, p: L.distributions.ContinuousBernoulli(logits=p[0]), [LOGITS], UNIT,
                                   ["log_prob", "entropy"]),   # torch's mean fails here (a 0-d df viewed as the batch)
    "LogisticNormal": (lambda L, p: L.distributions.LogisticNormal(p[0], p[1]), [LOGITS, C1], SIMPLEX4,
                       ["log_prob"]),
    "Wishart cov": (lambda L, p: L.distributions.Wishart(p[0], covariance_matrix=p[1]), [np.array([4.5, 7.0]), WCOV],
                    WVAL, ["log_prob", "entropy", "mean", "variance", "mode", "precision_matrix"]),
    "Wishart tril": (lambda L, p: L.distributions.Wishart(3.5, scale_tril=L.linalg.cholesky(p[0])), [WCOV], WVAL,
                     ["log_prob", "entropy"]),   # torch's mean fails here (a 0-d df viewed as the batch)
    "LKJCholesky": (lambda L, p: L.distributions.LKJCholesky(3, p[0]), [np.array([0.5, 1.0, 3.0])],
                    np.broadcast_to(LKJ_VALUE, (2, 3, 3, 3)).copy(), ["log_prob"]),
    "softplus": (lambda L, p: L.distributions.TransformedDistribution(
        L.distributions.Normal(p[0], p[1]), L.distributions.SoftplusTransform()), [LOGITS, C1], UNIT * 3,
        ["log_prob"]),
}


def evaluate(L, name, how):
    make, params, value, _ = CASES[name]
    ts = [L.from_numpy(np.array(p, dtype=np.float64)).requires_grad_() for p in params]
    d = make(L, ts)
    if how in ("log_prob", "cdf"):
        out = getattr(d, how)(L.from_numpy(value.copy()))
    elif how == "icdf":
        out = d.icdf(L.from_numpy(UNIT[0].copy()))
    else:
        out = d.entropy() if how == "entropy" else getattr(d, how)
    grads = []
    if out.requires_grad:
        finite = out.detach().isfinite()
        w = (L.arange(float(out.numel())).reshape(tuple(out.shape)) + 1) * finite.to(out.dtype)
        (L.where(finite, out, L.zeros_like(out)) * w).sum().backward()
        grads = [t.grad.numpy() if t.grad is not None else np.zeros(np.shape(p)) for t, p in zip(ts, params)]
    return out.detach().numpy(), grads, (tuple(d.batch_shape), tuple(d.event_shape))


@pytest.mark.parametrize("name,how", [(n, h) for n, c in CASES.items() for h in c[3]])
def test_values_and_gradients_match_torch(name, how):
    torch = torch_or_skip()
    if name.startswith(("LowRank", "Wishart")) and not LAPACK:
        pytest.skip("this build has no LAPACK ops (OpenBLAS absent)")
    o, t = evaluate(oar, name, how), evaluate(torch, name, how)
    # torch's Multinomial entropy takes lgamma(n + 1) of an int64 tensor, so in float32 (1e-8 off); oar's is f64
    rtol = 1e-7 if (name, how) == ("Multinomial probs", "entropy") else 1e-9
    np.testing.assert_allclose(o[0], t[0], rtol=rtol, atol=1e-12)
    for go, gt in zip(o[1], t[1]):
        np.testing.assert_allclose(go, gt, rtol=1e-8, atol=1e-10)
    assert o[2] == t[2]


N = 20000
KS_BOUND = 1.95 / math.sqrt(N)


def _ks(x, cdf):
    x = np.sort(x)
    c, n = cdf(x), len(x)
    return max((np.arange(1, n + 1) / n - c).max(), (c - np.arange(n) / n).max())


def test_draws_follow_their_distributions():
    D, T = oar.distributions, oar.tensor
    # Kumaraswamy's CDF 1 - (1 - x^a)^b
    x = D.Kumaraswamy(T(0.6), T(2.5)).rsample((N,)).numpy()
    assert _ks(x, lambda v: 1 - (1 - v ** 0.6) ** 2.5) < KS_BOUND
    # a mixture of two normals: its CDF is the weighted sum
    mix = D.MixtureSameFamily(D.Categorical(T([0.3, 0.7])), D.Normal(T([-2.0, 1.0]), T([0.5, 1.5])))
    phi = lambda v, m, s: 0.5 * (1 + np.array([math.erf(t) for t in (v - m) / (s * math.sqrt(2))]))
    x = mix.sample((N,)).numpy()
    assert x.shape == (N,)
    assert _ks(x, lambda v: 0.3 * phi(v, -2.0, 0.5) + 0.7 * phi(v, 1.0, 1.5)) < KS_BOUND
    # Multinomial: counts sum to n, means n p, variances n p (1 - p)
    p = np.array([0.2, 0.5, 0.3])
    x = D.Multinomial(6, T(p)).sample((N,)).numpy()
    assert x.shape == (N, 3) and (x.sum(-1) == 6).all()
    np.testing.assert_allclose(x.mean(0), 6 * p, atol=5 * math.sqrt(6 * 0.25 / N))
    np.testing.assert_allclose(x.var(0), 6 * p * (1 - p), rtol=0.06)
    # RelaxedBernoulli: P(X < 1/2) = 1 - p (the logistic noise's sign), whatever the temperature;
    # LogitRelaxedBernoulli(t, logits l) is logistic with location l / t and scale 1 / t
    x = D.RelaxedBernoulli(T(0.4), probs=T(0.3)).rsample((N,)).numpy()
    assert abs((x < 0.5).mean() - 0.7) < 5 * math.sqrt(0.21 / N)
    x = D.RelaxedBernoulli(T(0.5), logits=T(0.8)).base_dist.rsample((N,)).numpy()
    assert _ks(x, lambda v: 1 / (1 + np.exp(-(v - 1.6) * 0.5))) < KS_BOUND
    # RelaxedOneHotCategorical: argmax of a draw is Categorical(probs) (the Gumbel-max trick)
    p = np.array([0.1, 0.6, 0.3])
    x = D.RelaxedOneHotCategorical(T(0.3), probs=T(p)).rsample((N,)).numpy()
    assert np.allclose(x.sum(-1), 1, atol=1e-5)
    np.testing.assert_allclose(np.bincount(x.argmax(-1), minlength=3) / N, p, atol=5 * math.sqrt(0.25 / N))


def _lowrank_pairs(L):
    D, f = L.distributions, L.from_numpy
    p = D.LowRankMultivariateNormal(f(LR_LOC), f(LR_W), f(LR_D))
    q = D.LowRankMultivariateNormal(f(LR_LOC * 0.3), f(LR_W[::-1].copy()), f(LR_D * 2))
    m = D.MultivariateNormal(f(LR_LOC[0]), f(COV4))
    return {"lowrank lowrank": (p, q), "mvn lowrank": (m, q), "lowrank mvn": (p, m)}


@needs_lapack
@pytest.mark.parametrize("name", ["lowrank lowrank", "mvn lowrank", "lowrank mvn"])
def test_lowrank_kl_matches_torch(name):
    torch = torch_or_skip()
    res = [L.distributions.kl_divergence(*_lowrank_pairs(L)[name]).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12)


def _more_pairs(L):
    D, f = L.distributions, L.from_numpy
    cb = lambda s=1.0: D.ContinuousBernoulli(f(CB_PROBS * s))
    return {
        "cb cb": (cb(), cb(0.9)), "cb exponential": (cb(), D.Exponential(f(C1))),
        "cb normal": (cb(), D.Normal(f(LOGITS), f(C1))), "cb uniform": (cb(), D.Uniform(f(-C1), f(1 + C0))),
        "cb uniform inf": (cb(), D.Uniform(f(C1 * 0), f(1 + C0))), "uniform cb": (D.Uniform(f(UNIT[0] * 0.5),
                                                                                    f(UNIT[0] * 0.5 + 0.3)), cb()),
        "beta cb": (D.Beta(f(C1), f(C0)), cb()), "normal cb": (D.Normal(f(LOGITS), f(C1)), cb()),
        "lognormal lognormal": (D.LogNormal(f(LOGITS), f(C1)), D.LogNormal(f(LOGITS * 0.5), f(C0))),
        "logisticnormal": (D.LogisticNormal(f(LOGITS), f(C1)), D.LogisticNormal(f(LOGITS * 0), f(C0))),
    }


@pytest.mark.parametrize("name", sorted(_more_pairs(oar)))
def test_more_kl_pairs_match_torch(name):
    torch = torch_or_skip()
    res = [L.distributions.kl_divergence(*_more_pairs(L)[name]).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12)


def test_transformed_kl_needs_equal_transforms():
    D = oar.distributions
    p = D.TransformedDistribution(D.Normal(0.0, 1.0), D.AffineTransform(1.0, 2.0))
    assert D.kl_divergence(p, D.TransformedDistribution(D.Normal(0.5, 1.0), D.AffineTransform(1.0, 2.0))).item() > 0
    with pytest.raises(NotImplementedError):
        D.kl_divergence(p, D.TransformedDistribution(D.Normal(0.5, 1.0), D.AffineTransform(1.0, 3.0)))


def test_simplex_transforms_and_cb_draws():
    D, T = oar.distributions, oar.tensor
    x = oar.from_numpy(LOGITS.copy())
    sb = D.StickBreakingTransform()
    y = sb(x)
    assert tuple(y.shape) == (2, 4) and np.allclose(y.sum(-1).numpy(), 1)
    np.testing.assert_allclose(sb.inv(y).numpy(), LOGITS, rtol=1e-9)
    assert sb.forward_shape((2, 3)) == (2, 4) and sb.inv.forward_shape((2, 4)) == (2, 3)
    sm = D.SoftmaxTransform()(x).numpy()
    np.testing.assert_allclose(sm, np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True), rtol=1e-12)
    # stick-breaking's log-determinant against the Jacobian of its first K coordinates (central differences)
    xv = oar.from_numpy(LOGITS[0].copy())
    jac = np.stack([_row(sb, LOGITS[0], i) for i in range(3)])
    np.testing.assert_allclose(sb.log_abs_det_jacobian(xv, sb(xv)).item(), math.log(abs(np.linalg.det(jac))),
                               rtol=1e-9)
    # ContinuousBernoulli: KS from its CDF, away from and at p = 1/2
    for p in (0.2, 0.5, 0.9):
        d = D.ContinuousBernoulli(T(p, dtype=oar.float64))
        x = d.rsample((N,)).numpy()
        assert _ks(x, lambda v: d.cdf(oar.from_numpy(v.copy())).numpy()) < KS_BOUND, p
    # LogisticNormal: the draws' logits after stick-breaking's inverse are the normal draws
    x = D.LogisticNormal(T([0.5, -1.0]), T([1.0, 0.3])).sample((N,))
    z = sb.inv(x.to(oar.float64)).numpy()
    np.testing.assert_allclose(z.mean(0), [0.5, -1.0], atol=0.05)
    np.testing.assert_allclose(z.std(0), [1.0, 0.3], rtol=0.05)


def _row(t, x0, i, h=1e-6):
    """row i of t's Jacobian by central differences"""
    row = []
    for j in range(len(x0)):
        e = np.zeros_like(x0)
        e[j] = h
        up, dn = t(oar.from_numpy(x0 + e)).numpy()[i], t(oar.from_numpy(x0 - e)).numpy()[i]
        row.append((up - dn) / (2 * h))
    return np.array(row)


@needs_lapack
def test_lowrank_vonmises_straight_through_draws():
    D, T = oar.distributions, oar.tensor
    # LowRankMultivariateNormal: the sample covariance is W W^T + diag(D)
    w, d = LR_W[0], LR_D[0]
    x = D.LowRankMultivariateNormal(T(LR_LOC[0]), T(w), T(d)).rsample((N,)).numpy()
    np.testing.assert_allclose(np.cov(x.T), w @ w.T + np.diag(d), atol=0.12)
    np.testing.assert_allclose(x.mean(0), LR_LOC[0], atol=0.05)
    # VonMises: KS distance from the CDF integrated from the density on a fine grid
    loc, kappa = 0.7, 2.5
    x = D.VonMises(T(loc, dtype=oar.float64), T(kappa, dtype=oar.float64)).sample((N,)).numpy()
    assert x.min() >= -math.pi and x.max() < math.pi
    grid = np.linspace(-math.pi, math.pi, 20001)
    dens = np.exp(kappa * np.cos(grid - loc))
    cdf = np.concatenate([[0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(grid))])
    cdf /= cdf[-1]
    assert _ks(x, lambda v: np.interp(v, grid, cdf)) < KS_BOUND
    # straight-through: the value is a one-hot draw, the gradient that of probs
    probs = T([0.2, 0.5, 0.3], dtype=oar.float64, requires_grad=True)
    st = D.OneHotCategoricalStraightThrough(probs=probs)
    s = st.rsample((N,))
    v = s.detach().numpy()
    assert set(np.unique(v)) == {0.0, 1.0} and (v.sum(-1) == 1).all()
    np.testing.assert_allclose(v.mean(0), [0.2, 0.5, 0.3], atol=5 * math.sqrt(0.25 / N))
    (s * T([1.0, 2.0, 3.0], dtype=oar.float64)).sum().backward()
    np.testing.assert_allclose(probs.grad.numpy(), N * (np.array([1.0, 2.0, 3.0]) - 2.1), rtol=1e-9)


def test_relaxed_rsample_is_differentiable():
    D = oar.distributions
    logits = oar.zeros(3, dtype=oar.float64, requires_grad=True)
    x = D.RelaxedOneHotCategorical(oar.tensor(0.5, dtype=oar.float64), logits=logits).rsample((200,))
    x[:, 0].sum().backward()
    g = logits.grad.numpy()   # raising logit 0 raises x_0 and lowers the rest: the gradient sums to 0
    assert g[0] > 0 and g[1] < 0 and g[2] < 0 and abs(g.sum()) < 1e-9


def test_shapes_expand_and_reprs():
    torch = torch_or_skip()
    makes = {
        "Kumaraswamy": lambda L: L.distributions.Kumaraswamy(L.ones(3), L.ones(3) * 2),
        "Multinomial": lambda L: L.distributions.Multinomial(4, L.ones(2, 3)),
        "RelaxedBernoulli": lambda L: L.distributions.RelaxedBernoulli(L.tensor(0.5), L.full((3,), 0.3)),
        "LogitRelaxedBernoulli": lambda L: L.distributions.RelaxedBernoulli(L.tensor(0.5), L.full((3,), 0.3)).base_dist,
        "RelaxedOneHotCategorical": lambda L: L.distributions.RelaxedOneHotCategorical(L.tensor(0.5), L.ones(2, 3)),
        "ExpRelaxedCategorical": lambda L: L.distributions.RelaxedOneHotCategorical(L.tensor(0.5), L.ones(2, 3)).base_dist,
        "MixtureSameFamily": lambda L: L.distributions.MixtureSameFamily(
            L.distributions.Categorical(L.ones(2, 3)), L.distributions.Normal(L.zeros(2, 3), L.ones(2, 3))),
        "LowRankMultivariateNormal": lambda L: L.distributions.LowRankMultivariateNormal(
            L.zeros(2, 3), L.ones(3, 1), L.ones(3)),
        "VonMises": lambda L: L.distributions.VonMises(L.zeros(3), 2.0),
        "OneHotCategoricalStraightThrough": lambda L: L.distributions.OneHotCategoricalStraightThrough(L.ones(2, 3)),
        "OneHotCategorical": lambda L: L.distributions.OneHotCategorical(logits=L.ones(2, 3)),
        "ContinuousBernoulli": lambda L: L.distributions.ContinuousBernoulli(L.full((3,), 0.3)),
        "LogisticNormal": lambda L: L.distributions.LogisticNormal(L.zeros(2, 3), L.ones(3)),
        "LogisticNormal scalar": lambda L: L.distributions.LogisticNormal(0.0, 1.0),
        "LKJCholesky": lambda L: L.distributions.LKJCholesky(3, L.full((2,), 2.0)),
        "Wishart": lambda L: L.distributions.Wishart(L.full((2,), 4.0), covariance_matrix=L.eye(3)),
        "Wishart scalar": lambda L: L.distributions.Wishart(4.0, precision_matrix=L.eye(2) * 2),
    }
    for name, make in makes.items():
        if name.startswith(("LowRank", "Wishart")) and not LAPACK:
            continue
        o, t = make(oar), make(torch)
        assert repr(o).replace("oar.", "torch.") == repr(t), name
        assert (tuple(o.batch_shape), tuple(o.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape)), name
        assert o.has_rsample == t.has_rsample, name
        assert {k: repr(v) for k, v in o.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
        for shape in ((), (4,), (2, 5)):
            assert tuple(o.sample(shape).shape) == tuple(t.sample(shape).shape), (name, shape)
        big = (6,) + tuple(o.batch_shape)
        oe, te = o.expand(big), t.expand(big)
        assert type(oe) is type(o) and tuple(oe.batch_shape) == tuple(te.batch_shape), name
        assert tuple(oe.sample((2,)).shape) == tuple(te.sample((2,)).shape), name
    assert repr(oar.distributions.constraints.multinomial(3)) == repr(torch.distributions.constraints.multinomial(3))


def test_validation_errors_match_torch():
    torch = torch_or_skip()
    for make, exc in ((lambda L: L.distributions.Kumaraswamy(L.ones(2), -L.ones(2)), ValueError),
                      (lambda L: L.distributions.Multinomial(3, L.tensor([0.5, -0.5])), ValueError),
                      (lambda L: L.distributions.Multinomial(3, L.ones(3)).log_prob(L.tensor([3.0, 1.0, 0.0])),
                       ValueError),
                      (lambda L: L.distributions.Multinomial(L.tensor(3), L.ones(3)), NotImplementedError),
                      (lambda L: L.distributions.RelaxedBernoulli(L.tensor(0.5), L.tensor([1.5])), ValueError),
                      (lambda L: L.distributions.MixtureSameFamily(
                          L.distributions.Categorical(L.ones(2)), L.distributions.Normal(L.zeros(3), 1.0)), ValueError),
                      (lambda L: L.distributions.MixtureSameFamily(
                          L.distributions.Normal(L.zeros(3), 1.0), L.distributions.Normal(L.zeros(3), 1.0)),
                       ValueError),
                      (lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(3), L.ones(3, 1) * 0.1, -L.ones(3) * 0.1),
                       ValueError),
                      (lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(3), L.ones(2, 1), L.ones(3)),
                       ValueError),
                      (lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(3), L.ones(3, 1), L.ones(2)),
                       ValueError),
                      (lambda L: L.distributions.LowRankMultivariateNormal(L.zeros(3), L.ones(3), L.ones(3)),
                       ValueError),
                      (lambda L: L.distributions.VonMises(L.zeros(2), L.zeros(2)), ValueError),
                      (lambda L: L.distributions.ContinuousBernoulli(L.tensor([1.5]), validate_args=True), ValueError),
                      (lambda L: L.distributions.ContinuousBernoulli(L.tensor([0.5])).log_prob(L.tensor([1.5])),
                       ValueError),
                      (lambda L: L.distributions.LogisticNormal(L.zeros(2), -L.ones(2)), ValueError),
                      (lambda L: L.distributions.Wishart(1.5, covariance_matrix=L.eye(3)), ValueError),
                      (lambda L: L.distributions.LKJCholesky(1, 1.0), ValueError),
                      (lambda L: L.distributions.LKJCholesky(3, -1.0), ValueError),
                      (lambda L: L.distributions.LKJCholesky(2, 1.0).log_prob(L.ones(2, 2)), ValueError),
                      (lambda L: L.distributions.Wishart(4.0, scale_tril=-L.eye(3)), ValueError)):
        if not LAPACK and {"LowRankMultivariateNormal", "Wishart"} & set(make.__code__.co_names):
            continue   # the factorizations need the LAPACK ops
        msgs = []
        for L in (oar, torch):
            with pytest.raises(exc) as e:
                make(L)
            msgs.append(str(e.value).split("found invalid values")[0].replace("oar.", "torch."))
        assert msgs[0] == msgs[1]


def test_exponential_family_entropy_and_bregman_kl():
    """the generic entropy and Bregman KL of ExponentialFamily against each family's closed forms and
    torch's generic ones; isinstance as torch"""
    torch = torch_or_skip()
    makes = {
        "Normal": lambda L, s: L.distributions.Normal(L.from_numpy(LOGITS * s), L.from_numpy(C1)),
        "Exponential": lambda L, s: L.distributions.Exponential(L.from_numpy(C1 * s)),
        "Gamma": lambda L, s: L.distributions.Gamma(L.from_numpy(C1 * s), L.from_numpy(C0)),
        "Beta": lambda L, s: L.distributions.Beta(L.from_numpy(C1 * s), L.from_numpy(C0)),
        "Dirichlet": lambda L, s: L.distributions.Dirichlet(L.from_numpy(C1 * s)),
        "Bernoulli": lambda L, s: L.distributions.Bernoulli(logits=L.from_numpy(LOGITS * s)),
        "ContinuousBernoulli": lambda L, s: L.distributions.ContinuousBernoulli(logits=L.from_numpy(LOGITS * s)),
        "Poisson": lambda L, s: L.distributions.Poisson(L.from_numpy(C1 * s)),
    }
    from oar.distributions import kl as okl
    from torch.distributions import kl as tkl

    for name, make in makes.items():
        o, t = make(oar, 1.0), make(torch, 1.0)
        assert isinstance(o, oar.distributions.ExponentialFamily) == isinstance(t, torch.distributions.ExponentialFamily)
        if name in ("Poisson", "Beta", "Dirichlet"):   # no carrier measure given, in torch either
            for L, d in ((oar, o), (torch, t)):
                with pytest.raises(NotImplementedError):
                    L.distributions.ExponentialFamily.entropy(d)
        else:
            generic = oar.distributions.ExponentialFamily.entropy(o).detach().numpy()
            np.testing.assert_allclose(generic, o.entropy().detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
            np.testing.assert_allclose(generic, torch.distributions.ExponentialFamily.entropy(t).detach().numpy(),
                                       rtol=1e-9, atol=1e-12, err_msg=name)
        bo = okl._kl_expfamily_expfamily(o, make(oar, 0.7)).detach().numpy()
        bt = tkl._kl_expfamily_expfamily(t, make(torch, 0.7)).detach().numpy()
        np.testing.assert_allclose(bo, bt, rtol=1e-9, atol=1e-12, err_msg=name)
        if name not in ("ContinuousBernoulli",):   # closed forms where both exist agree with the Bregman one
            np.testing.assert_allclose(bo, oar.distributions.kl_divergence(o, make(oar, 0.7)).detach().numpy(),
                                       rtol=1e-8, atol=1e-11, err_msg=name)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        okl._kl_expfamily_expfamily(makes["Gamma"](oar, 1.0), makes["Exponential"](oar, 1.0))


@needs_lapack
def test_wishart_draws_and_rsample_gradient():
    D = oar.distributions
    cov = WCOV[0]
    x = D.Wishart(T64(5.0), covariance_matrix=T64(cov)).sample((N,)).numpy()
    assert x.shape == (N, 3, 3) and np.allclose(x, x.transpose(0, 2, 1))
    w = D.Wishart(3.5, scale_tril=oar.linalg.cholesky(oar.from_numpy(WCOV)))   # a number df, batched scale
    np.testing.assert_allclose(w.mean.numpy(), 3.5 * WCOV, rtol=1e-12)
    assert (np.linalg.eigvalsh(x) > 0).all()
    # mean df cov; variance of entry ij df (cov_ij^2 + cov_ii cov_jj)
    var = 5.0 * (cov ** 2 + np.outer(np.diag(cov), np.diag(cov)))
    assert (np.abs(x.mean(0) - 5.0 * cov) < 5 * np.sqrt(var / N)).all()
    np.testing.assert_allclose(x.var(0), var, rtol=0.1)
    # d E[tr X] / d df = tr(cov), through the chi-square (Gamma) draws of Bartlett's diagonal
    n = 40000
    df = oar.full((n,), 4.0, dtype=oar.float64, requires_grad=True)
    s = D.Wishart(df, covariance_matrix=T64(cov)).rsample()
    s.diagonal(dim1=-2, dim2=-1).sum().backward()
    g = df.grad.numpy()
    assert abs(g.mean() - np.trace(cov)) < 5 * g.std() / math.sqrt(n), (g.mean(), np.trace(cov))


def T64(v):
    return oar.tensor(v, dtype=oar.float64)


def test_lkj_cholesky_draws():
    """the correlations of L L^T: (r + 1) / 2 ~ Beta(eta - 1 + d / 2, same) for each off-diagonal entry (torch
    1.13's own draws fail this from dim 3: its onion method's Beta concentrations are off by half from row 2)"""
    D = oar.distributions
    beta22 = lambda v: 3 * v ** 2 - 2 * v ** 3
    for d, eta, cdf in ((2, 2.0, beta22), (3, 0.5, lambda v: v), (2, 1.0, lambda v: v), (4, 1.0, beta22)):
        lt = D.LKJCholesky(d, eta).sample((N,))
        assert tuple(lt.shape) == (N, d, d) and bool(oar.distributions.constraints.corr_cholesky.check(lt).all())
        c = (lt @ lt.mT).numpy()
        np.testing.assert_allclose(np.diagonal(c, axis1=1, axis2=2), 1.0, rtol=1e-5)
        for i, j in [(i, j) for i in range(1, d) for j in range(i)]:
            assert _ks((c[:, i, j] + 1) / 2, cdf) < KS_BOUND, (d, eta, i, j)

