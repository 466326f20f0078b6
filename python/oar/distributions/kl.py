"""kl_divergence(p, q) and register_kl: closed forms by the pair of types (the most specific pair
registered for the types' classes wins, as torch's lookup)."""
import math

from .beta import Beta, Dirichlet
from .continuous import Cauchy, Exponential, Laplace, Normal, Uniform
from .continuous_bernoulli import ContinuousBernoulli
from .counts import Binomial, Geometric, Poisson
from .extreme_value import Gumbel, Pareto
from .folded import HalfNormal
from .gamma import Gamma
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .exp_family import ExponentialFamily
from .independent import Independent
from .lowrank_multivariate_normal import LowRankMultivariateNormal, _lowrank_logdet, _lowrank_mahalanobis
from .multivariate_normal import MultivariateNormal
from .transformed_distribution import TransformedDistribution

__all__ = ["kl_divergence", "register_kl"]

_KL = {}


def register_kl(type_p, type_q):
    """Decorator registering fn(p, q) as KL(p || q) for p of type_p and q of type_q."""
    def decorate(fn):
        _KL[type_p, type_q] = fn
        return fn

    return decorate


def kl_divergence(p, q):
    matches = [(tp, tq) for tp, tq in _KL if isinstance(p, tp) and isinstance(q, tq)]
    if not matches:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and q type "
                                  f"{type(q).__name__}")
    # the most specific: the pair whose classes come earliest in p's and q's method resolution orders
    best = min(matches, key=lambda m: (type(p).__mro__.index(m[0]), type(q).__mro__.index(m[1])))
    return _KL[best](p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    from ..nn import functional as NF

    t1 = p.probs * (NF.softplus(-q.logits) - NF.softplus(-p.logits))
    t2 = (1 - p.probs) * (NF.softplus(q.logits) - NF.softplus(p.logits))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    from .. import full_like, where, zeros_like

    t = p.probs * (p.logits - q.logits)
    t = where(q.probs == 0, full_like(t, float("inf")), t)
    t = where(p.probs == 0, zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    from .. import full_like, where

    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return where(outside, full_like(result, float("inf")), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    ratio = q.rate / p.rate
    return ratio - ratio.log() - 1


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    ratio = p.scale / q.scale
    diff = (p.loc - q.loc).abs()
    return -ratio.log() + diff / q.scale + ratio * (-diff / p.scale).exp() - 1


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    from .. import linalg

    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot "
                         "be computed")
    k = p.event_shape[0]
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    lead = tuple(p.batch_shape)
    Lp, Lq = Lp.expand(*lead, k, k), Lq.expand(*lead, k, k)
    half_det = Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    trace = linalg.solve_triangular(Lq, Lp, upper=False).pow(2).flatten(-2).sum(-1)
    z = linalg.solve_triangular(Lq, (q.loc - p.loc).expand(*lead, k).unsqueeze(-1), upper=False)
    return half_det + 0.5 * (trace + z.pow(2).flatten(-2).sum(-1) - k)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return p._sum_rightmost(kl_divergence(p.base_dist, q.base_dist))




@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    from ..nn import functional as NF

    if not bool((p.total_count == q.total_count).all()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    t1 = p.probs * (NF.softplus(-q.logits) - NF.softplus(-p.logits))
    t2 = (1 - p.probs) * (NF.softplus(q.logits) - NF.softplus(p.logits))
    return p.total_count * (t1 + t2)


# ---- the Gamma family (torch's closed forms; inf where p's support reaches outside q's)
_EULER = 0.57721566490153286061


def _inf_like(t):
    from .. import full_like

    return full_like(t, math.inf)


def _inf_where(cond, result):
    from .. import where

    return where(cond, _inf_like(result), result)


def _xlogx(x):
    return x * x.log()


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    a, b = p.concentration, p.rate
    return q.concentration * (b / q.rate).log() + q.concentration.lgamma() - a.lgamma() + \
        (a - q.concentration) * a.digamma() + (q.rate - b) * (a / b)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp, sq = p.concentration1 + p.concentration0, q.concentration1 + q.concentration0
    t1 = q.concentration1.lgamma() + q.concentration0.lgamma() + sp.lgamma()
    t2 = p.concentration1.lgamma() + p.concentration0.lgamma() + sq.lgamma()
    t3 = (p.concentration1 - q.concentration1) * p.concentration1.digamma()
    t4 = (p.concentration0 - q.concentration0) * p.concentration0.digamma()
    return t1 - t2 + t3 + t4 + (sq - sp) * sp.digamma()


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp, sq = p.concentration.sum(-1), q.concentration.sum(-1)
    t2 = (p.concentration.lgamma() - q.concentration.lgamma()).sum(-1)
    t4 = p.concentration.digamma() - sp.digamma().unsqueeze(-1)
    return sp.lgamma() - sq.lgamma() - t2 + ((p.concentration - q.concentration) * t4).sum(-1)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    return -q.concentration * ratio.log() + ratio + q.concentration.lgamma() + q.concentration * _EULER - \
        (1 + _EULER)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    var, b2, a = q.scale.pow(2), p.rate.pow(2), p.concentration
    t1 = 0.5 * (b2 * var * 2 * math.pi).log() - a - a.lgamma()
    t2 = 0.5 * (a.pow(2) + a) / b2
    return t1 + (a - 1) * a.digamma() + (t2 - q.loc * a / p.rate + 0.5 * q.loc.pow(2)) / var


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    c1, c0 = p.concentration1, p.concentration0
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (c1.digamma() - (c1 + c0).digamma())
    return -p.entropy() + t2 - t3 + q.rate * c1 / (c1 + c0)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    total = p.concentration1 + p.concentration0
    mean, var = p.concentration1 / total, q.scale.pow(2)
    t3 = (mean * (1 - mean) / (total + 1) + mean.pow(2)) * 0.5
    return -p.entropy() + 0.5 * (var * 2 * math.pi).log() + (t3 - q.loc * mean + q.loc.pow(2) * 0.5) / var


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0) | (q.high < 1), result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t2 = (q.concentration1 - 1) * (_xlogx(p.high) - _xlogx(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_xlogx(1 - p.high) - _xlogx(1 - p.low) + width) / width
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    return _inf_where((p.high > 1) | (p.low < 0), t3 + t4 - width.log() - t2)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_xlogx(p.high) - _xlogx(p.low) - width) / width
    return _inf_where(p.low < 0, -width.log() + t2 + t3 + q.rate * (p.high + p.low) / 2)


@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    return _inf_like(p.concentration)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    return _inf_like(p.rate)


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
def _kl_real_infinity(p, q):
    return _inf_like(p.loc)


# ---- Cauchy, HalfNormal, Gumbel, Pareto, Geometric
@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    return ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log() - (4 * p.scale * q.scale).log()


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    r, lq, lp = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    return -r.log() - lq + lp + r * _EULER + (lq + (1 + r).lgamma() - lp).exp() - (1 + _EULER)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    ratio = q.alpha / p.alpha
    result = q.alpha * (p.scale / q.scale).log() - ratio.log() + ratio - 1
    return _inf_where(p.scale < q.scale, result)   # p's support starts below q's


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    sr, lr = p.rate * q.scale, q.loc / q.scale
    return sr.log() - 1 - lr + lr.exp() * sr / (sr + 1) + sr.reciprocal()


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a, bs, lr = p.concentration, p.rate * q.scale, q.loc / q.scale
    t1 = (a - 1) * a.digamma() - a.lgamma() - a
    return t1 + bs.log() + a / bs + lr.exp() * (1 + bs.reciprocal()).pow(-a) - lr


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    r = p.scale / q.scale
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -(r / math.sqrt(2 * math.pi)).log() + (math.pi * r * 0.5).pow(2) / 3 + t3 - (_EULER + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    m, v, lr = p.loc / q.scale, (p.scale / q.scale).pow(2), q.loc / q.scale
    return -0.5 * v.log() + m - lr + (-m + 0.5 * v + lr).exp() - 0.5 * (1 + math.log(2 * math.pi))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    c = q.scale / (p.high - p.low)
    hi, lo = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    return c.log() + 0.5 * (hi + lo) - c * ((-hi).exp() - (-lo).exp())


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    sr = p.scale * q.rate
    result = (p.alpha / sr).log() - p.alpha.reciprocal() + p.alpha * sr / (p.alpha - 1) - 1
    return _inf_where(p.alpha <= 1, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, p.alpha.log() - common + t2 + (1 - q.concentration) * common + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var2, common = 2 * q.scale.pow(2), p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    return _inf_where(p.alpha <= 2, t1 - p.alpha.reciprocal() + (t3 + t4) / var2 - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_xlogx(p.high) - _xlogx(p.low) - width) / width
    return _inf_where(p.low < q.scale, t2 * (q.alpha + 1) - t1)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
@register_kl(Normal, Pareto)
@register_kl(Laplace, Pareto)
def _kl_real_line_infinity(p, q):
    return _inf_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p, q):
    return _inf_like(p.scale)


@register_kl(Exponential, Pareto)
def _kl_exponential_pareto(p, q):
    return _inf_like(p.rate)


@register_kl(Gamma, Pareto)
def _kl_gamma_pareto(p, q):
    return _inf_like(p.concentration)


@register_kl(Beta, Pareto)
def _kl_beta_pareto(p, q):
    return _inf_like(p.concentration1)


# ---- low-rank multivariate normals: the trace of inv(q cov) p cov expanded by Woodbury's identity,
# inv(qW qW^T + qD) = inv(qD) - A^T A with A = inv(q capacitance tril) qW^T inv(qD)
def _trace_xxt(x):
    return x.pow(2).flatten(-2).sum(-1)


def _same_event(p, q):
    if tuple(p.event_shape) != tuple(q.event_shape):
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         "cannot be computed")


def _woodbury_a(q):
    from .. import linalg

    return linalg.solve_triangular(q._capacitance_tril, q._unbroadcasted_cov_factor.mT /
                                   q._unbroadcasted_cov_diag.unsqueeze(-2), upper=False)


def _q_lowrank_terms(p, q):
    _same_event(p, q)
    log_det_q = _lowrank_logdet(q._unbroadcasted_cov_diag, q._capacitance_tril)
    maha = _lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc,
                                q._capacitance_tril)
    return log_det_q, maha, _woodbury_a(q)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p, q):
    log_det_q, maha, a = _q_lowrank_terms(p, q)
    pw, pd, qd = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    term1 = log_det_q - _lowrank_logdet(pd, p._capacitance_tril)
    term2 = (pd / qd).sum(-1) + _trace_xxt(pw * qd.rsqrt().unsqueeze(-1)) - \
        _trace_xxt(a * pd.sqrt().unsqueeze(-2)) - _trace_xxt(a @ pw)
    return 0.5 * (term1 + term2 + maha - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p, q):
    log_det_q, maha, a = _q_lowrank_terms(p, q)
    lp = p._unbroadcasted_scale_tril
    term1 = log_det_q - 2 * lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    term2 = _trace_xxt(lp * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1)) - _trace_xxt(a @ lp)
    return 0.5 * (term1 + term2 + maha - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p, q):
    from .. import broadcast_shapes, diag_embed, linalg

    _same_event(p, q)
    lq, n = q._unbroadcasted_scale_tril, p.event_shape[0]
    term1 = 2 * lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _lowrank_logdet(p._unbroadcasted_cov_diag,
                                                                              p._capacitance_tril)
    batch = broadcast_shapes(tuple(lq.shape[:-2]), tuple(p._unbroadcasted_cov_factor.shape[:-2]))
    diff = (q.loc - p.loc).expand(*batch, n) if batch else q.loc - p.loc
    lqb = lq.expand(*batch, n, n)
    term3 = linalg.solve_triangular(lqb, diff.unsqueeze(-1), upper=False).pow(2).flatten(-2).sum(-1)
    pw = p._unbroadcasted_cov_factor.expand(*batch, n, p.cov_factor.shape[-1])
    pd = diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(*batch, n, n)
    term2 = _trace_xxt(linalg.solve_triangular(lqb, pw, upper=False)) + \
        _trace_xxt(linalg.solve_triangular(lqb, pd, upper=False))
    return 0.5 * (term1 + term2 + term3 - n)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """equal transforms (torch's equality: same kinds, same parameters) leave KL unchanged"""
    if p.transforms != q.transforms or tuple(p.event_shape) != tuple(q.event_shape):
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


# ---- ContinuousBernoulli (on [0, 1]: inf against a distribution whose support misses part of it)
@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p, q):
    return p.mean * (p.logits - q.logits) + p._cont_bern_log_norm() + (-p.probs).log1p() - \
        q._cont_bern_log_norm() - (-q.probs).log1p()


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p, q):
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return -p.entropy() + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p, q):
    # torch 1.13 marks inf where q.low >= 0 or q.high <= 1 (a Uniform covering [0, 1] exactly counts too)
    return _inf_where((q.low >= 0) | (q.high <= 1), -p.entropy() + (q.high - q.low).log())


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p, q):
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    return _inf_where((p.high >= 1) | (p.low <= 0), result)


@register_kl(ContinuousBernoulli, Pareto)
def _kl_cb_infinity(p, q):
    return _inf_like(p.probs)


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p, q):
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(Exponential, ContinuousBernoulli)
def _kl_exponential_cb(p, q):
    return _inf_like(p.rate)


@register_kl(Gamma, ContinuousBernoulli)
def _kl_gamma_cb(p, q):
    return _inf_like(p.concentration)


@register_kl(Normal, ContinuousBernoulli)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Gumbel, ContinuousBernoulli)
def _kl_real_cb(p, q):
    return _inf_like(p.loc)


@register_kl(Pareto, ContinuousBernoulli)
def _kl_pareto_cb(p, q):
    return _inf_like(p.scale)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p, q):
    """the Bregman divergence of the log normalizer A between the natural parameters:
    A(theta_q) - A(theta_p) - <theta_q - theta_p, grad A(theta_p)>, for two of one family"""
    from .. import autograd

    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  "computed using Bregman divergences")
    p_thetas = [t.detach().requires_grad_() for t in p._natural_params]
    q_thetas = q._natural_params
    a_p = p._log_normalizer(*p_thetas)
    grads = autograd.grad(a_p.sum(), p_thetas, create_graph=True)
    result = q._log_normalizer(*q_thetas) - a_p
    for tp, tq, g in zip(p_thetas, q_thetas, grads):
        term = (tq - tp) * g
        k = len(q.event_shape)
        result = result - (term.reshape(*term.shape[:term.ndim - k], -1).sum(-1) if k else term)
    return result

