"""The Gamma family of oar.distributions (Gamma, Chi2, Beta, Dirichlet, StudentT, FisherSnedecor) beside
torch.distributions 1.13: log_prob, entropy, mean, variance and mode with their parameter gradients on the
same parameters (f64, 1e-9); KL divergences torch registers among them; shapes, expand, supports, reprs
and validation messages. Draws are compared by distribution, never bit for bit (oar's Philox is not
torch's generator): Kolmogorov-Smirnov distances against exact CDFs and moments, with bounds a wrong
sampler exceeds; rsample's gradients of the mean and second moment against the analytic derivatives."""
import math

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(7)
CONC = R.random((2, 3)) * 3 + 0.2
RATE = R.random((2, 3)) * 2 + 0.3
POS = R.random((2, 3)) * 4 + 0.1
DF = np.array([[0.7, 1.5, 2.5], [3.0, 4.5, 9.0]])   # across the moments' existence thresholds
DIR = R.random((2, 4)) * 2 + 0.3
LOC, SCALE = R.standard_normal((2, 3)), R.random((2, 3)) + 0.5
UNIT = R.random((4, 2, 3)) * 0.9 + 0.05
SIMPLEX = R.random((5, 2, 4)) + 0.05
SIMPLEX = SIMPLEX / SIMPLEX.sum(-1, keepdims=True)

# name -> (constructor(L, params), parameter arrays, values for log_prob, methods)
CASES = {
    "Gamma": (lambda L, p: L.distributions.Gamma(p[0], p[1]), [CONC, RATE], POS,
              ["log_prob", "entropy", "mean", "variance", "mode"]),
    "Chi2": (lambda L, p: L.distributions.Chi2(p[0]), [CONC * 2], POS, ["log_prob", "entropy", "mean", "variance",
                                                                         "mode"]),
    "Beta": (lambda L, p: L.distributions.Beta(p[0], p[1]), [CONC, RATE], UNIT,
             ["log_prob", "entropy", "mean", "variance", "mode"]),
    "Dirichlet": (lambda L, p: L.distributions.Dirichlet(p[0]), [DIR], SIMPLEX,
                  ["log_prob", "entropy", "mean", "variance", "mode"]),
    "StudentT": (lambda L, p: L.distributions.StudentT(p[0], p[1], p[2]), [DF, LOC, SCALE], R.standard_normal((4, 2, 3)),
                 ["log_prob", "entropy", "mean", "variance", "mode"]),
    "FisherSnedecor": (lambda L, p: L.distributions.FisherSnedecor(p[0], p[1]), [DF * 1.5, DF * 2], POS,
                       ["log_prob", "mean", "variance", "mode"]),
}


def evaluate(L, name, how):
    make, params, value, _ = CASES[name]
    ts = [L.from_numpy(p.copy()).requires_grad_() for p in params]
    d = make(L, ts)
    out = d.log_prob(L.from_numpy(value.copy())) if how == "log_prob" else d.entropy() if how == "entropy" \
        else getattr(d, how)
    grads = []
    if out.requires_grad:
        finite = out.detach().isfinite()   # NaN / inf moments: no gradient to compare
        w = (L.arange(float(out.numel())).reshape(tuple(out.shape)) + 1) * finite.to(out.dtype)
        (L.where(finite, out, L.zeros_like(out)) * w).sum().backward()
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


def _pairs(L):
    D, f = L.distributions, L.from_numpy
    g = lambda s=1.0: D.Gamma(f(CONC * s), f(RATE))
    b = lambda s=1.0: D.Beta(f(CONC * s), f(RATE))
    unit = D.Uniform(f(UNIT[0] * 0.4), f(UNIT[0] * 0.4 + 0.5))
    wide = D.Uniform(f(LOC - 2), f(LOC + 3))
    return {
        "Gamma Gamma": (g(), g(1.7)), "Chi2 Gamma": (D.Chi2(f(CONC)), g()),
        "Beta Beta": (b(), b(0.6)), "Dirichlet Dirichlet": (D.Dirichlet(f(DIR)), D.Dirichlet(f(DIR[::-1].copy()))),
        "Exponential Gamma": (D.Exponential(f(RATE)), g()), "Gamma Exponential": (g(), D.Exponential(f(RATE * 2))),
        "Gamma Normal": (g(), D.Normal(f(LOC), f(SCALE))), "Beta Gamma": (b(), g()),
        "Beta Exponential": (b(), D.Exponential(f(RATE))), "Beta Normal": (b(), D.Normal(f(LOC), f(SCALE))),
        "Beta Uniform": (b(), D.Uniform(f(-UNIT[0]), f(1 + UNIT[1]))), "Beta Uniform inside": (b(), unit),
        "Uniform Beta": (unit, b()), "Uniform Beta outside": (wide, b()),
        "Uniform Gamma": (unit, g()), "Uniform Gamma outside": (wide, g()),
        "Gamma Uniform": (g(), unit), "Gamma Beta": (g(), b()), "Exponential Beta": (D.Exponential(f(RATE)), b()),
        "Normal Gamma": (D.Normal(f(LOC), f(SCALE)), g()), "Laplace Beta": (D.Laplace(f(LOC), f(SCALE)), b()),
        "Normal Uniform": (D.Normal(f(LOC), f(SCALE)), unit),
    }


@pytest.mark.parametrize("name", sorted(_pairs(oar)))
def test_kl_divergence_matches_torch(name):
    torch = torch_or_skip()
    res = [L.distributions.kl_divergence(*_pairs(L)[name]).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12)


def _ks(x, cdf):
    """The Kolmogorov-Smirnov distance of the draws x from the CDF"""
    x = np.sort(x)
    c = cdf(x)
    n = len(x)
    return max((np.arange(1, n + 1) / n - c).max(), (c - np.arange(n) / n).max())


def _gammainc(a, x):
    return oar.special.gammainc(oar.full(x.shape, float(a), dtype=oar.float64), oar.from_numpy(x)).numpy()


N = 20000
KS_BOUND = 1.95 / math.sqrt(N)   # exceeded with probability 1e-3 by a correct sampler


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_gamma_draws_follow_the_distribution(dtype):
    """KS distances from P(a, rate x) across the boost (a < 1), a = 1 and Marsaglia-Tsang's range; f32 and f64"""
    dt = getattr(oar, dtype)
    for a, rate in ((0.05, 1.0), (0.6, 2.0), (1.0, 0.5), (3.3, 1.0), (40.0, 4.0)):
        x = oar.distributions.Gamma(oar.tensor(a, dtype=dt), oar.tensor(rate, dtype=dt)).sample((N,))
        assert x.dtype == dt and tuple(x.shape) == (N,)
        x = x.numpy().astype(np.float64)
        assert (x > 0).all()
        assert _ks(x, lambda v: _gammainc(a, v * rate)) < KS_BOUND, (a, rate)
    x = oar.distributions.Chi2(oar.tensor(3.0, dtype=dt)).sample((N,)).numpy().astype(np.float64)
    assert _ks(x, lambda v: _gammainc(1.5, v / 2)) < KS_BOUND


def test_beta_dirichlet_student_fisher_draws():
    """KS distances where the CDF has a closed form, moments elsewhere"""
    D = oar.distributions
    # Beta(a, 1): x^a; Beta(1, b): 1 - (1 - x)^b
    x = D.Beta(0.4, 1.0).sample((N,)).numpy()
    assert _ks(x, lambda v: v ** 0.4) < KS_BOUND
    x = D.Beta(1.0, 3.5).sample((N,)).numpy()
    assert _ks(x, lambda v: 1 - (1 - v) ** 3.5) < KS_BOUND
    x = D.Beta(oar.tensor(2.5), oar.tensor(0.7)).sample((N,)).numpy()
    m, v = 2.5 / 3.2, 2.5 * 0.7 / (3.2 ** 2 * 4.2)
    assert abs(x.mean() - m) < 5 * math.sqrt(v / N) and abs(x.var() - v) < 0.05 * v
    # a Dirichlet's marginal x_i is Beta(a_i, a0 - a_i); here x_0 ~ Beta(1, 2.5)
    x = D.Dirichlet(oar.tensor([1.0, 2.0, 0.5])).sample((N,)).numpy()
    assert tuple(x.shape) == (N, 3) and np.allclose(x.sum(-1), 1)
    assert _ks(x[:, 0], lambda v: 1 - (1 - v) ** 2.5) < KS_BOUND
    np.testing.assert_allclose(x.mean(0), [1 / 3.5, 2 / 3.5, 0.5 / 3.5], atol=5 * math.sqrt(0.25 / N))
    # StudentT with 1 degree of freedom is Cauchy; with 2, 1/2 + x / (2 sqrt(2 + x^2))
    x = D.StudentT(1.0, 0.5, 2.0).sample((N,)).numpy()
    assert _ks(x, lambda v: 0.5 + np.arctan((v - 0.5) / 2) / math.pi) < KS_BOUND
    x = D.StudentT(2.0).sample((N,)).numpy()
    assert _ks(x, lambda v: 0.5 + v / (2 * np.sqrt(2 + v * v))) < KS_BOUND
    # F(2, 2): x / (1 + x); F(2, d2): 1 - (1 + 2x/d2)^(-d2/2)
    x = D.FisherSnedecor(2.0, 2.0).sample((N,)).numpy()
    assert _ks(x, lambda v: v / (1 + v)) < KS_BOUND
    x = D.FisherSnedecor(2.0, 7.0).sample((N,)).numpy()
    assert _ks(x, lambda v: 1 - (1 + 2 * v / 7) ** -3.5) < KS_BOUND


def _mc_grad(make, param_value, stat, n=100000):
    """The mean and the standard error over n draws of d stat(x) / d param, each draw with its own copy"""
    p = oar.full((n,), param_value, dtype=oar.float64, requires_grad=True)
    x = make(p).rsample()
    stat(x).sum().backward()
    g = p.grad.numpy()
    return g.mean(), g.std() / math.sqrt(n)


@pytest.mark.parametrize("alpha", [0.3, 1.0, 4.0, 25.0])
def test_gamma_rsample_gradient_matches_the_analytic_one(alpha):
    """d E[x] / d alpha = 1 / rate and d E[x^2] / d alpha = (2 alpha + 1) / rate^2, estimated from rsample"""
    rate = 1.5
    make = lambda a: oar.distributions.Gamma(a, rate)
    m, se = _mc_grad(make, alpha, lambda x: x)
    assert abs(m - 1 / rate) < 5 * se + 1e-9, (m, se)
    m, se = _mc_grad(make, alpha, lambda x: x * x)
    assert abs(m - (2 * alpha + 1) / rate ** 2) < 5 * se, (m, se)
    # the gradient in rate is exact draw by draw: x = g / rate
    r = oar.full((5,), rate, dtype=oar.float64, requires_grad=True)
    x = oar.distributions.Gamma(alpha, r).rsample()
    x.sum().backward()
    np.testing.assert_allclose(r.grad.numpy(), -x.detach().numpy() / rate, rtol=1e-12)


def test_rsample_gradients_of_the_family():
    D = oar.distributions
    # Beta: d E[x] / d c1 = c0 / (c1 + c0)^2, d E[x] / d c0 = -c1 / (c1 + c0)^2
    c1, c0 = 1.5, 0.8
    m, se = _mc_grad(lambda a: D.Beta(a, c0), c1, lambda x: x)
    assert abs(m - c0 / (c1 + c0) ** 2) < 5 * se, (m, se)
    m, se = _mc_grad(lambda b: D.Beta(c1, b), c0, lambda x: x)
    assert abs(m + c1 / (c1 + c0) ** 2) < 5 * se, (m, se)
    # Dirichlet: d E[x_0] / d a_0 = (a0 - a_0) / a0^2
    a = oar.tensor([2.0, 0.7, 1.3], dtype=oar.float64).expand(50000, 3).clone().requires_grad_()
    D.Dirichlet(a).rsample()[:, 0].sum().backward()
    g = a.grad.numpy()
    for i, want in enumerate([(4.0 - 2.0) / 16.0, -2.0 / 16.0, -2.0 / 16.0]):
        assert abs(g[:, i].mean() - want) < 5 * g[:, i].std() / math.sqrt(len(g)) + 1e-12, (i, g[:, i].mean())
    # StudentT: E[(x - loc)^2] = scale^2 df / (df - 2), so d / d df = -2 scale^2 / (df - 2)^2
    df, scale = 6.0, 1.5
    m, se = _mc_grad(lambda d: D.StudentT(d, 0.0, scale), df, lambda x: x * x, n=200000)
    assert abs(m + 2 * scale ** 2 / (df - 2) ** 2) < 5 * se, (m, se)
    # FisherSnedecor: E[x] = d2 / (d2 - 2), free of d1
    m, se = _mc_grad(lambda d: D.FisherSnedecor(4.0, d), 9.0, lambda x: x)
    assert abs(m + 2 / 7 ** 2) < 5 * se, (m, se)
    m, se = _mc_grad(lambda d: D.FisherSnedecor(d, 9.0), 4.0, lambda x: x)
    assert abs(m) < 5 * se, (m, se)
    # Chi2: E[x] = df
    m, se = _mc_grad(lambda d: D.Chi2(d), 3.0, lambda x: x)
    assert abs(m - 1.0) < 5 * se, (m, se)


def test_standard_gamma_functions_match_torch_names():
    torch = torch_or_skip()
    a = oar.tensor([0.5, 2.0, 30.0], dtype=oar.float64, requires_grad=True)
    x = oar._standard_gamma(a)
    x.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), oar._standard_gamma_grad(a.detach(), x.detach()).numpy())
    # torch's _standard_gamma_grad is a rational fit in the middle range (about 1e-3 there); oar's is
    # exact to ~1e-10 (tests/test_standard_gamma.c): the two agree within torch's accuracy
    aa, xx = np.array([0.3, 1.0, 2.5, 7.0, 40.0]), np.array([0.2, 1.3, 2.0, 9.0, 37.0])
    o = oar._standard_gamma_grad(oar.from_numpy(aa), oar.from_numpy(xx)).numpy()
    t = torch._standard_gamma_grad(torch.from_numpy(aa), torch.from_numpy(xx)).numpy()
    np.testing.assert_allclose(o, t, rtol=2e-3)
    s = oar._sample_dirichlet(oar.ones(4, 3))
    assert tuple(s.shape) == (4, 3) and np.allclose(s.sum(-1).numpy(), 1)


def test_shapes_expand_supports_and_reprs():
    torch = torch_or_skip()
    makes = {
        "Gamma": lambda L: L.distributions.Gamma(L.ones(2, 3), 2.0),
        "Gamma scalar": lambda L: L.distributions.Gamma(1.5, 2.0),
        "Gamma one": lambda L: L.distributions.Gamma(L.tensor([1.0]), 2.0),
        "Chi2": lambda L: L.distributions.Chi2(L.ones(3) * 4),
        "Beta": lambda L: L.distributions.Beta(L.ones(3), L.ones(3) * 2),
        "Beta scalar": lambda L: L.distributions.Beta(1.0, 2.0),
        "Dirichlet": lambda L: L.distributions.Dirichlet(L.ones(2, 4)),
        "StudentT": lambda L: L.distributions.StudentT(L.ones(3) * 3, 0.5, 2.0),
        "StudentT scalar": lambda L: L.distributions.StudentT(3.0),
        "FisherSnedecor": lambda L: L.distributions.FisherSnedecor(L.ones(2, 1) * 3, L.ones(3) * 5),
    }
    for name, make in makes.items():
        o, t = make(oar), make(torch)
        assert repr(o).replace("oar.", "torch.") == repr(t), name
        assert (tuple(o.batch_shape), tuple(o.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape)), name
        assert o.has_rsample == t.has_rsample and repr(o.support) == repr(t.support), name
        assert {k: repr(v) for k, v in o.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
        for shape in ((), (4,), (2, 5)):
            assert tuple(o.sample(shape).shape) == tuple(t.sample(shape).shape), (name, shape)
            assert tuple(o.rsample(shape).shape) == tuple(t.rsample(shape).shape), (name, shape)
        big = (6,) + tuple(o.batch_shape)
        oe, te = o.expand(big), t.expand(big)
        assert type(oe) is type(o) and tuple(oe.batch_shape) == tuple(te.batch_shape), name
        assert tuple(oe.sample((2,)).shape) == tuple(te.sample((2,)).shape), name
        np.testing.assert_allclose(oe.mean.numpy(), te.mean.numpy(), rtol=1e-6)
    assert not oar.distributions.Gamma(oar.ones(2, requires_grad=True), 1.0).sample().requires_grad
    assert oar.distributions.Gamma(oar.ones(2, requires_grad=True), 1.0).rsample().requires_grad


def test_validation_errors_match_torch():
    torch = torch_or_skip()
    for make in (lambda L: L.distributions.Gamma(L.ones(2), -L.ones(2)),
                 lambda L: L.distributions.Gamma(L.zeros(2), L.ones(2)),
                 lambda L: L.distributions.Chi2(-L.ones(2)),
                 lambda L: L.distributions.Beta(L.tensor([1.0, -1.0]), L.ones(2)),
                 lambda L: L.distributions.Dirichlet(L.tensor([[1.0, 0.0], [1.0, 1.0]])),
                 lambda L: L.distributions.StudentT(L.tensor([-1.0, 2.0])),
                 lambda L: L.distributions.StudentT(L.tensor([1.0, 2.0]), 0.0, L.tensor([1.0, 0.0])),
                 lambda L: L.distributions.FisherSnedecor(L.ones(2), L.zeros(2)),
                 lambda L: L.distributions.Dirichlet(L.tensor(1.0)),
                 lambda L: L.distributions.Gamma(L.ones(2), L.ones(2)).log_prob(-L.ones(2)),
                 lambda L: L.distributions.Beta(L.ones(2), L.ones(2)).log_prob(L.ones(2) * 1.5),
                 lambda L: L.distributions.Dirichlet(L.ones(3)).log_prob(L.ones(3)),
                 lambda L: L.distributions.Dirichlet(L.ones(3)).log_prob(L.ones(2) / 2)):
        msgs = []
        for L in (oar, torch):
            with pytest.raises(ValueError) as e:
                make(L)
            msgs.append(str(e.value).split(", but found")[0].replace("oar.", "torch."))
        assert msgs[0] == msgs[1]
    oar.distributions.Gamma(oar.ones(2), -oar.ones(2), validate_args=False)   # unchecked when asked
