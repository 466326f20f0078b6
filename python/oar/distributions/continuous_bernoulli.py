"""ContinuousBernoulli(probs | logits) on [0, 1] (Loaiza-Ganem and Cunningham, 2019): density
C(p) p^x (1 - p)^(1 - x). Near p = 1/2 the closed forms of the normalizer, mean and variance divide
0 by 0, so inside torch's lims (0.499, 0.501) their Taylor series are used, as torch 1.13 does;
rsample by the inverse CDF."""
import math

from .. import _creation as C
from .._tensor import Size
from . import constraints
from .continuous import _rand
from .distribution import Distribution, broadcast_all, lazy_property, logits_to_probs, probs_to_logits
from .exp_family import ExponentialFamily
from .relaxed import clamp_probs

__all__ = ["ContinuousBernoulli"]


def _where(cond, a, b):
    from .. import where

    return where(cond, a, b)


class ContinuousBernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(self.probs).all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
        else:
            (self.logits,) = broadcast_all(logits)
        self._lims = lims
        super().__init__(self.__dict__["probs" if probs is not None else "logits"].size(),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = ContinuousBernoulli.__new__(ContinuousBernoulli)
        new._lims = self._lims
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        """probs, with lims[0] inside the unstable region (so the closed forms stay finite there)"""
        return _where(self._outside_unstable_region(), self.probs, C.full_like(self.probs, self._lims[0]))

    def _cont_bern_log_norm(self):
        """log C(p): log(|log(1 - p) - log p| / |1 - 2p|), by its series in (p - 1/2)^2 near 1/2"""
        p = self._cut_probs()
        below = _where(p <= 0.5, p, C.zeros_like(p))
        above = _where(p >= 0.5, p, C.ones_like(p))
        log_norm = ((-p).log1p() - p.log()).abs().log() - _where(p <= 0.5, (-2.0 * below).log1p(),
                                                                 (2.0 * above - 1.0).log())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return _where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        p = self._cut_probs()
        mus = p / (2.0 * p - 1.0) + 1.0 / ((-p).log1p() - p.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return _where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self):
        p = self._cut_probs()
        vs = p * (p - 1.0) / (1.0 - 2.0 * p).pow(2) + 1.0 / ((-p).log1p() - p.log()).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return _where(self._outside_unstable_region(), vs, taylor)

    stddev = property(lambda self: self.variance.sqrt())

    def rsample(self, sample_shape=Size()):
        return self.icdf(_rand(tuple(self._extended_shape(sample_shape)), self.probs.dtype))

    def log_prob(self, value):
        from ..nn import functional as NF

        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -NF.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        p = self._cut_probs()
        cdfs = (p.pow(value) * (1.0 - p).pow(1.0 - value) + p - 1.0) / (2.0 * p - 1.0)
        inner = _where(self._outside_unstable_region(), cdfs, value)
        return _where(value <= 0.0, C.zeros_like(inner), _where(value >= 1.0, C.ones_like(inner), inner))

    def icdf(self, value):
        p = self._cut_probs()
        closed = ((-p + value * (2.0 * p - 1.0)).log1p() - (-p).log1p()) / (p.log() - (-p).log1p())
        return _where(self._outside_unstable_region(), closed, value)

    def entropy(self):
        log0, log1 = (-self.probs).log1p(), self.probs.log()
        return self.mean * (log0 - log1) - self._cont_bern_log_norm() - log0

    _natural_params = property(lambda self: (self.logits,))

    def _log_normalizer(self, x):
        """log((e^x - 1) / x), by its series 0.5 x + x^2/24 - x^4/2880 near x = 0 (torch's lims)"""
        lo, hi = self._lims[0] - 0.5, self._lims[1] - 0.5
        outside = (x <= lo) | (x > hi)
        cut = _where(outside, x, C.full_like(x, lo))
        log_norm = (cut.exp() - 1.0).abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return _where(outside, log_norm, taylor)
