"""More of oar.distributions beside torch.distributions 1.13: Cauchy, HalfNormal, HalfCauchy, Gumbel,
Weibull, Pareto, Geometric and NegativeBinomial. Statistics and their parameter gradients in f64 (1e-9),
the KL pairs torch registers among them and with the rest, shapes / expand / reprs / validation, and
draws compared by distribution (Kolmogorov-Smirnov distances against the exact CDFs, frequencies against
the pmf), never bit for bit."""
import math

import numpy as np
import pytest

import oar
from conftest import torch_or_skip

R = np.random.default_rng(11)
LOC, SCALE = R.standard_normal((2, 3)), R.random((2, 3)) + 0.5
CONC = R.random((2, 3)) * 3 + 0.4
ALPHA = np.array([[0.7, 1.5, 2.5], [3.0, 4.5, 9.0]])
PROBS = R.random((2, 3)) * 0.8 + 0.1
POS = R.random((4, 2, 3)) * 4 + 0.05
REAL = R.standard_normal((4, 2, 3)) * 2
COUNTS = np.array([[0, 1, 4], [7, 2, 0]], float)
Q = R.random((2, 3)) * 0.9 + 0.05

# name -> (constructor(L, params), parameter arrays, values for log_prob / cdf, methods)
CASES = {
    "Cauchy": (lambda L, p: L.distributions.Cauchy(p[0], p[1]), [LOC, SCALE], REAL,
               ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "mode"]),
    "HalfNormal": (lambda L, p: L.distributions.HalfNormal(p[0]), [SCALE], np.abs(REAL),
                   ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "mode"]),
    "HalfCauchy": (lambda L, p: L.distributions.HalfCauchy(p[0]), [SCALE], np.abs(REAL),
                   ["log_prob", "cdf", "icdf", "entropy", "mean", "variance", "mode"]),
    "Gumbel": (lambda L, p: L.distributions.Gumbel(p[0], p[1]), [LOC, SCALE], REAL,
               ["log_prob", "entropy", "mean", "variance", "stddev", "mode"]),
    "Weibull": (lambda L, p: L.distributions.Weibull(p[0], p[1]), [SCALE, CONC], POS,
                ["log_prob", "entropy", "mean", "variance", "mode"]),
    "Pareto": (lambda L, p: L.distributions.Pareto(p[0], p[1]), [SCALE * 0.05, ALPHA], POS,
               ["log_prob", "entropy", "mean", "variance", "mode", "cdf", "icdf"]),
    "Geometric probs": (lambda L, p: L.distributions.Geometric(probs=p[0]), [PROBS], COUNTS,
                        ["log_prob", "entropy", "mean", "variance", "mode"]),
    "Geometric logits": (lambda L, p: L.distributions.Geometric(logits=p[0]), [LOC], COUNTS, ["log_prob", "entropy"]),
    "NegativeBinomial": (lambda L, p: L.distributions.NegativeBinomial(p[0], probs=p[1]), [CONC, PROBS], COUNTS,
                         ["log_prob", "mean", "variance", "mode"]),
    "NegativeBinomial logits": (lambda L, p: L.distributions.NegativeBinomial(p[0], logits=p[1]), [CONC, LOC], COUNTS,
                                ["log_prob", "mean"]),
}


def evaluate(L, name, how):
    make, params, value, _ = CASES[name]
    ts = [L.from_numpy(p.copy()).requires_grad_() for p in params]
    d = make(L, ts)
    if how in ("log_prob", "cdf"):
        out = getattr(d, how)(L.from_numpy(value.copy()))
    elif how == "icdf":
        out = d.icdf(L.from_numpy(Q.copy()))
    else:
        out = d.entropy() if how == "entropy" else getattr(d, how)
    grads = []
    if out.requires_grad:
        finite = out.detach().isfinite()
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
    par = lambda s=1.0, a=ALPHA: D.Pareto(f(SCALE * s), f(a))
    gum = lambda s=1.0: D.Gumbel(f(LOC * s), f(SCALE))
    unit = D.Uniform(f(Q * 0.3 + 2), f(Q * 0.3 + 2.5))
    return {
        "Cauchy Cauchy": (D.Cauchy(f(LOC), f(SCALE)), D.Cauchy(f(LOC * 0.3), f(SCALE * 2))),
        "HalfNormal HalfNormal": (D.HalfNormal(f(SCALE)), D.HalfNormal(f(SCALE[::-1].copy()))),
        "Gumbel Gumbel": (gum(), gum(-0.5)), "Pareto Pareto": (par(), par(0.8, ALPHA * 0.5)),
        "Pareto Pareto outside": (par(), par(1.3)),
        "Geometric Geometric": (D.Geometric(f(PROBS)), D.Geometric(f(PROBS[::-1].copy()))),
        "Exponential Gumbel": (D.Exponential(f(SCALE)), gum()), "Gamma Gumbel": (D.Gamma(f(CONC), f(SCALE)), gum()),
        "Gumbel Normal": (gum(), D.Normal(f(LOC), f(SCALE))), "Normal Gumbel": (D.Normal(f(LOC), f(SCALE)), gum()),
        "Uniform Gumbel": (unit, gum()), "Pareto Exponential": (par(), D.Exponential(f(SCALE))),
        "Pareto Gamma": (par(), D.Gamma(f(CONC), f(SCALE))), "Pareto Normal": (par(), D.Normal(f(LOC), f(SCALE))),
        "Uniform Pareto": (unit, par(0.5)), "Uniform Pareto outside": (D.Uniform(f(Q * 0), f(Q + 1)), par()),
        "Gumbel Gamma": (gum(), D.Gamma(f(CONC), f(SCALE))), "Normal Pareto": (D.Normal(f(LOC), f(SCALE)), par()),
        "Pareto Uniform": (par(), unit), "Exponential Pareto": (D.Exponential(f(SCALE)), par()),
        "Beta Pareto": (D.Beta(f(CONC), f(SCALE)), par()), "Gamma Pareto": (D.Gamma(f(CONC), f(SCALE)), par()),
    }


@pytest.mark.parametrize("name", sorted(_pairs(oar)))
def test_kl_divergence_matches_torch(name):
    torch = torch_or_skip()
    res = [L.distributions.kl_divergence(*_pairs(L)[name]).numpy() for L in (oar, torch)]
    np.testing.assert_allclose(res[0], res[1], rtol=1e-9, atol=1e-12)


def _ks(x, cdf):
    x = np.sort(x)
    c, n = cdf(x), len(x)
    return max((np.arange(1, n + 1) / n - c).max(), (c - np.arange(n) / n).max())


N = 20000
KS_BOUND = 1.95 / math.sqrt(N)   # exceeded with probability 1e-3 by a correct sampler


def test_continuous_draws_follow_their_cdfs():
    D = oar.distributions
    checks = [
        (D.Cauchy(0.5, 2.0), lambda v: 0.5 + np.arctan((v - 0.5) / 2) / math.pi),
        (D.HalfNormal(1.5), lambda v: np.array([math.erf(t / (1.5 * math.sqrt(2))) for t in v])),
        (D.HalfCauchy(0.7), lambda v: 2 * np.arctan(v / 0.7) / math.pi),
        (D.Gumbel(1.0, 2.0), lambda v: np.exp(-np.exp(-(v - 1.0) / 2.0))),
        (D.Weibull(2.0, 0.8), lambda v: 1 - np.exp(-(v / 2.0) ** 0.8)),
        (D.Pareto(1.5, 2.5), lambda v: 1 - (1.5 / v) ** 2.5),
    ]
    for d, cdf in checks:
        x = d.sample((N,)).numpy()
        assert x.shape == (N,)
        assert _ks(x, cdf) < KS_BOUND, d
        r = d.rsample((N,))   # the reparameterized path draws the same distribution
        assert _ks(r.numpy(), cdf) < KS_BOUND, d


def test_count_draws_follow_their_pmfs():
    D = oar.distributions
    p = 0.3
    x = D.Geometric(oar.tensor(p)).sample((N,)).numpy()
    assert (x == np.round(x)).all() and x.min() >= 0
    k = np.arange(12)
    freq = np.bincount(x.astype(int), minlength=12)[:12] / N
    np.testing.assert_allclose(freq, p * (1 - p) ** k, atol=0.012)
    # NegativeBinomial(r, p): mean r p / (1 - p), variance r p / (1 - p)^2, pmf by lgamma
    r, p = 3.5, 0.4
    x = D.NegativeBinomial(r, oar.tensor(p)).sample((N,)).numpy()
    assert (x == np.round(x)).all() and x.min() >= 0
    k = np.arange(15)
    pmf = np.exp([math.lgamma(r + i) - math.lgamma(i + 1) - math.lgamma(r) + r * math.log(1 - p) + i * math.log(p)
                  for i in k])
    freq = np.bincount(x.astype(int), minlength=15)[:15] / N
    np.testing.assert_allclose(freq, pmf, atol=0.012)
    m, v = r * p / (1 - p), r * p / (1 - p) ** 2
    assert abs(x.mean() - m) < 5 * math.sqrt(v / N)


def test_rsample_gradients():
    """d x / d loc = 1 and d x / d scale = (x - loc) / scale for the location-scale draws; Weibull and Pareto
    through their transforms: d x / d scale = x / scale"""
    D = oar.distributions
    for make in (lambda l, s: D.Cauchy(l, s), lambda l, s: D.Gumbel(l, s)):
        loc, scale = oar.full((6,), 0.3, requires_grad=True), oar.full((6,), 1.7, requires_grad=True)
        x = make(loc, scale).rsample()
        x.sum().backward()
        np.testing.assert_allclose(loc.grad.numpy(), np.ones(6))
        np.testing.assert_allclose(scale.grad.numpy(), (x.detach().numpy() - 0.3) / 1.7, rtol=1e-5, atol=1e-6)
    for make in (lambda s: D.Weibull(s, 1.3), lambda s: D.Pareto(s, 2.0), lambda s: D.HalfNormal(s)):
        scale = oar.full((6,), 1.7, dtype=oar.float64, requires_grad=True)
        x = make(scale).rsample()
        x.sum().backward()
        np.testing.assert_allclose(scale.grad.numpy(), x.detach().numpy() / 1.7, rtol=1e-9)


def test_shapes_expand_supports_and_reprs():
    torch = torch_or_skip()
    makes = {
        "Cauchy": lambda L: L.distributions.Cauchy(L.zeros(2, 3), 1.0),
        "Cauchy scalar": lambda L: L.distributions.Cauchy(0.0, 1.0),
        "HalfNormal": lambda L: L.distributions.HalfNormal(L.ones(3)),
        "HalfCauchy": lambda L: L.distributions.HalfCauchy(2.0),
        "Gumbel": lambda L: L.distributions.Gumbel(L.zeros(3), 2.0),
        "Weibull": lambda L: L.distributions.Weibull(L.ones(2, 1), L.ones(3) * 2),
        "Pareto": lambda L: L.distributions.Pareto(1.0, L.ones(3) * 3),
        "Geometric": lambda L: L.distributions.Geometric(L.full((3,), 0.3)),
        "Geometric logits": lambda L: L.distributions.Geometric(logits=L.zeros(2, 2)),
        "NegativeBinomial": lambda L: L.distributions.NegativeBinomial(L.ones(3) * 2, L.full((3,), 0.3)),
    }
    for name, make in makes.items():
        o, t = make(oar), make(torch)
        assert repr(o).replace("oar.", "torch.") == repr(t), name
        assert (tuple(o.batch_shape), tuple(o.event_shape)) == (tuple(t.batch_shape), tuple(t.event_shape)), name
        assert o.has_rsample == t.has_rsample, name
        if name != "Pareto":   # a dependent support: its repr holds the scale tensor
            assert repr(o.support) == repr(t.support), name
        assert {k: repr(v) for k, v in o.arg_constraints.items()} == {k: repr(v) for k, v in t.arg_constraints.items()}
        for shape in ((), (4,), (2, 5)):
            assert tuple(o.sample(shape).shape) == tuple(t.sample(shape).shape), (name, shape)
        big = (6,) + tuple(o.batch_shape)
        oe, te = o.expand(big), t.expand(big)
        assert type(oe) is type(o) and tuple(oe.batch_shape) == tuple(te.batch_shape), name
        assert tuple(oe.sample((2,)).shape) == tuple(te.sample((2,)).shape), name
        np.testing.assert_allclose(oe.mean.numpy(), te.mean.numpy(), rtol=1e-6)
    assert not oar.distributions.Geometric(oar.full((2,), 0.5)).has_rsample


def test_validation_errors_match_torch():
    torch = torch_or_skip()
    for make in (lambda L: L.distributions.Cauchy(L.zeros(2), -L.ones(2)),
                 lambda L: L.distributions.HalfNormal(L.zeros(2)),
                 lambda L: L.distributions.Gumbel(L.zeros(2), L.zeros(2)),
                 lambda L: L.distributions.Weibull(L.ones(2), -L.ones(2)),
                 lambda L: L.distributions.Pareto(L.ones(2), L.zeros(2)),
                 lambda L: L.distributions.Geometric(L.tensor([0.5, 1.5])),
                 lambda L: L.distributions.Geometric(L.tensor([0.5, 0.0])),
                 lambda L: L.distributions.NegativeBinomial(-L.ones(2), L.full((2,), 0.5)),
                 lambda L: L.distributions.NegativeBinomial(L.ones(2), L.ones(2)),
                 lambda L: L.distributions.HalfNormal(L.ones(2)).log_prob(-L.ones(2)),
                 lambda L: L.distributions.Pareto(L.ones(2), L.ones(2)).log_prob(L.full((2,), 0.5)),
                 lambda L: L.distributions.Geometric(L.full((2,), 0.5)).log_prob(L.full((2,), 0.5))):
        msgs = []
        for L in (oar, torch):
            with pytest.raises(ValueError) as e:
                make(L)
            msgs.append(str(e.value).split("found invalid values")[0].replace("oar.", "torch."))
        assert msgs[0] == msgs[1]


def test_torch_module_paths_and_remaining_constraints():
    """torch's import paths (torch.distributions.normal.Normal, .utils.broadcast_all, ...) and the constraints
    added with them, checked on the same values as torch's"""
    import importlib

    torch = torch_or_skip()
    names = [n for n in dir(torch.distributions) if not n.startswith("_")]
    missing = [n for n in names if not hasattr(oar.distributions, n)]
    assert not missing, missing   # every public name of torch.distributions 1.13
    for mod in ("normal", "studentT", "relaxed_categorical", "one_hot_categorical", "chi2", "gamma", "beta"):
        o, t = importlib.import_module("oar.distributions." + mod), importlib.import_module("torch.distributions." + mod)
        public = [n for n in getattr(t, "__all__", []) if n[0].isupper()]
        assert public and all(hasattr(o, n) for n in public), (mod, public)
    from oar.distributions.utils import broadcast_all, clamp_probs, logits_to_probs, probs_to_logits  # noqa: F401
    from oar.distributions.normal import Normal

    assert Normal is oar.distributions.Normal
    C, TC = oar.distributions.constraints, torch.distributions.constraints
    m = np.array([[[1.0, 0.0], [0.5, 2.0]], [[1.0, 0.3], [0.3, 1.0]], [[1.0, 2.0], [2.0, 1.0]]])
    ms = np.array([[[1.0, 0.0], [0.0, 2.0]], [[1.0, 0.3], [0.3, 1.0]], [[1.0, 2.0], [2.0, 1.0]], [[2.0, 0.0], [0.0, 0.0]]])
    # torch's (semi)definiteness checks return the symmetry test alone when a batch mixes in an unsymmetric
    # matrix, so those two are compared on symmetric batches
    lapack = "linalg_eigh" in oar._ops.ID   # eigvalsh: builds with OpenBLAS
    for name, batch in (("lower_triangular", m), ("square", m), ("symmetric", m), ("lower_cholesky", m)) + \
            ((("positive_semidefinite", ms), ("positive_definite", ms)) if lapack else ()):
        o, t = getattr(C, name), getattr(TC, name)
        assert repr(o) == repr(t)
        np.testing.assert_array_equal(o.check(oar.from_numpy(batch)).numpy(), t.check(torch.from_numpy(batch)).numpy(),
                                      name)
    v = np.array([[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    np.testing.assert_array_equal(C.one_hot.check(oar.from_numpy(v)).numpy(), TC.one_hot.check(torch.from_numpy(v)).numpy())
    np.testing.assert_array_equal(C.less_than(0.5).check(oar.from_numpy(v)).numpy(),
                                  TC.less_than(0.5).check(torch.from_numpy(v)).numpy())
    assert repr(C.less_than(0.5)) == repr(TC.less_than(0.5)) and repr(C.one_hot) == repr(TC.one_hot)
    assert C.is_dependent(C.dependent) and not C.is_dependent(C.real)
    assert repr(oar.distributions.OneHotCategorical(oar.ones(3)).support) == repr(
        torch.distributions.OneHotCategorical(torch.ones(3)).support)


def test_biject_to_and_transform_to_match_torch():
    """the registry's transforms for each constraint: reprs, values, inverses and log-determinants as torch's,
    images inside the constraint"""
    torch = torch_or_skip()
    x = R.standard_normal((2, 3))
    cases = [("real", lambda C: C.real), ("positive", lambda C: C.positive),
             ("nonnegative", lambda C: C.nonnegative), ("greater_than", lambda C: C.greater_than(1.5)),
             ("greater_than_eq", lambda C: C.greater_than_eq(-1.0)), ("less_than", lambda C: C.less_than(2.0)),
             ("interval", lambda C: C.interval(-1.0, 3.0)), ("unit_interval", lambda C: C.unit_interval),
             ("half_open_interval", lambda C: C.half_open_interval(0.5, 4.0)), ("simplex", lambda C: C.simplex),
             ("real_vector", lambda C: C.real_vector), ("independent", lambda C: C.independent(C.positive, 1))]
    for name, make in cases:
        for reg in ("biject_to", "transform_to"):
            res = []
            for L in (oar, torch):
                c = make(L.distributions.constraints)
                t = getattr(L.distributions, reg)(c)
                y = t(L.from_numpy(x.copy()))
                row = [repr(t), y.numpy(), t.inv(y).numpy() if t.bijective else None,
                       bool(c.check(y).all())]
                if t.bijective:
                    row.append(t.log_abs_det_jacobian(L.from_numpy(x.copy()), y).numpy())
                res.append(row)
            o, tt = res
            assert o[0] == tt[0], (name, reg)
            assert o[3] and tt[3], (name, reg)
            for a, b in zip(o[1:], tt[1:]):
                if isinstance(a, np.ndarray):
                    np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=f"{name} {reg}")
    lt = oar.distributions.transform_to(oar.distributions.constraints.lower_cholesky)
    m = oar.from_numpy(R.standard_normal((2, 3, 3)))
    assert bool(oar.distributions.constraints.lower_cholesky.check(lt(m)).all())
    np.testing.assert_allclose(lt.inv(lt(m)).numpy(), np.tril(m.numpy()), rtol=1e-12)
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        oar.distributions.biject_to(oar.distributions.constraints.boolean)


def test_structural_transforms():
    torch = torch_or_skip()
    D, TD = oar.distributions, torch.distributions
    x = R.standard_normal((4, 2, 3))
    pairs = [(D.IndependentTransform(D.ExpTransform(), 1), TD.IndependentTransform(TD.ExpTransform(), 1)),
             (D.ReshapeTransform((2, 3), (6,)), TD.ReshapeTransform((2, 3), (6,))),
             (D.CumulativeDistributionTransform(D.Normal(0.0, 2.0)),
              TD.CumulativeDistributionTransform(TD.Normal(0.0, 2.0)))]
    for o, t in pairs:
        yo, yt = o(oar.from_numpy(x.copy())), t(torch.from_numpy(x.copy()))
        np.testing.assert_allclose(yo.numpy(), yt.numpy(), rtol=1e-9)
        np.testing.assert_allclose(o.inv(yo).numpy(), t.inv(yt).numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(o.log_abs_det_jacobian(oar.from_numpy(x.copy()), yo).numpy(),
                                   t.log_abs_det_jacobian(torch.from_numpy(x.copy()), yt).numpy(), rtol=1e-9)
        assert o.forward_shape((4, 2, 3)) == tuple(t.forward_shape(torch.Size((4, 2, 3))))
    assert repr(pairs[0][0]) == repr(pairs[0][1])
    # CorrCholeskyTransform: 6 reals to a 4 x 4 correlation factor, as torch's; the image is one, and the
    # log-determinant is that of the Jacobian onto the factor's strictly lower entries (central differences)
    v = R.standard_normal((3, 6))
    o, t = D.CorrCholeskyTransform(), TD.CorrCholeskyTransform()
    yo, yt = o(oar.from_numpy(v.copy())), t(torch.from_numpy(v.copy()))
    np.testing.assert_allclose(yo.numpy(), yt.numpy(), rtol=1e-12, atol=1e-15)
    assert bool(D.constraints.corr_cholesky.check(yo).all())
    np.testing.assert_allclose(o.inv(yo).numpy(), v, rtol=1e-9)
    ldj = o.log_abs_det_jacobian(oar.from_numpy(v.copy()), yo).numpy()
    np.testing.assert_allclose(ldj, t.log_abs_det_jacobian(torch.from_numpy(v.copy()), yt).numpy(), rtol=1e-12)
    low = [(i, j) for i in range(4) for j in range(i)]
    f = lambda u: o(oar.from_numpy(u)).numpy()[[i for i, _ in low], [j for _, j in low]]
    jac = np.stack([(f(v[0] + h) - f(v[0] - h)) / 2e-6 for h in np.eye(6) * 1e-6], 1)
    np.testing.assert_allclose(ldj[0], math.log(abs(np.linalg.det(jac))), rtol=1e-7)
    assert o.forward_shape((3, 6)) == (3, 4, 4) and o.inverse_shape((3, 4, 4)) == (3, 6)
    with pytest.raises(ValueError, match="not a flattend lower-diagonal number"):
        o.forward_shape((3, 5))
    assert repr(D.biject_to(D.constraints.corr_cholesky)) == "CorrCholeskyTransform()"
    with pytest.raises(ValueError, match="different numbers of elements"):
        D.ReshapeTransform((2, 3), (5,))
    # a reshape changes the event shape of the distribution it transforms
    td = D.TransformedDistribution(D.Independent(D.Normal(oar.zeros(4, 6), 1.0), 1), D.ReshapeTransform((6,), (2, 3)))
    assert tuple(td.event_shape) == (2, 3) and tuple(td.batch_shape) == (4,) and tuple(td.sample().shape) == (4, 2, 3)
    v = R.standard_normal((5, 4, 2, 3))
    tt = TD.TransformedDistribution(TD.Independent(TD.Normal(torch.zeros(4, 6, dtype=torch.float64), 1.0), 1),
                                    TD.ReshapeTransform((6,), (2, 3)))
    td = D.TransformedDistribution(D.Independent(D.Normal(oar.zeros(4, 6, dtype=oar.float64), 1.0), 1),
                                   D.ReshapeTransform((6,), (2, 3)))
    np.testing.assert_allclose(td.log_prob(oar.from_numpy(v)).numpy(), tt.log_prob(torch.from_numpy(v)).numpy(),
                               rtol=1e-12)


def test_cat_and_stack_transforms_and_constraints():
    torch = torch_or_skip()
    x = R.standard_normal((4, 5))
    res = []
    for L in (oar, torch):
        D = L.distributions
        T, C = D.transforms, D.constraints
        c = T.CatTransform([T.ExpTransform(), T.identity_transform, T.SigmoidTransform()], dim=-1, lengths=[2, 2, 1])
        s = T.StackTransform([T.ExpTransform(), T.AffineTransform(1.0, 2.0)], dim=0)
        y, z = c(L.from_numpy(x.copy())), s(L.from_numpy(x[:2].copy()))
        k = C.cat([C.positive, C.real], dim=-1, lengths=[2, 3])
        st = C.stack([C.positive, C.real], dim=0)
        res.append([y.numpy(), c.inv(y).numpy(), c.log_abs_det_jacobian(L.from_numpy(x.copy()), y).numpy(),
                    z.numpy(), s.inv(z).numpy(), s.log_abs_det_jacobian(L.from_numpy(x[:2].copy()), z).numpy(),
                    k.check(L.from_numpy(x.copy())).numpy(), st.check(L.from_numpy(x[:2].copy())).numpy(),
                    D.biject_to(k)(L.from_numpy(x.copy())).numpy(), D.transform_to(st)(L.from_numpy(x[:2].copy())).numpy(),
                    k.event_dim, st.event_dim])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    T = oar.distributions.transforms
    with pytest.raises(ValueError, match="expected size 5 along dim -1"):
        T.CatTransform([T.ExpTransform(), T.ExpTransform()], dim=-1, lengths=[2, 3])(oar.zeros(4, 4))
    with pytest.raises(ValueError, match="one length per transform"):
        T.CatTransform([T.ExpTransform()], lengths=[1, 2])

