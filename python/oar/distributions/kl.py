"""kl_divergence(p, q) and register_kl: closed forms by the pair of types (the most specific pair
registered for the types' classes wins, as torch's lookup)."""

from .continuous import Exponential, Laplace, Normal, Uniform
from .counts import Binomial, Poisson
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .independent import Independent
from .multivariate_normal import MultivariateNormal

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
