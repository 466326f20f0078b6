"""HalfNormal and HalfCauchy: |X| of a centred Normal or Cauchy (TransformedDistributions through
AbsTransform, as torch 1.13), with the density doubled on [0, inf) and -inf below."""
import math

from .. import _creation as C
from . import constraints
from .continuous import Cauchy, Normal
from .transformed_distribution import TransformedDistribution
from .transforms import AbsTransform

__all__ = ["HalfNormal", "HalfCauchy"]


class _Folded(TransformedDistribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, base, validate_args=None):
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    scale = property(lambda self: self.base_dist.scale)
    mode = property(lambda self: C.zeros_like(self.scale))

    def log_prob(self, value):
        from .. import where

        if self._validate_args:
            self._validate_sample(value)
        lp = self.base_dist.log_prob(value) + math.log(2)
        return where(value >= 0, lp, C.full_like(lp, -math.inf))

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)

    def __repr__(self):
        return f"{type(self).__name__}()"


class HalfNormal(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0.0, scale, validate_args=False), validate_args=validate_args)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    variance = property(lambda self: self.scale.pow(2) * (1 - 2 / math.pi))


class HalfCauchy(_Folded):
    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0.0, scale, validate_args=False), validate_args=validate_args)

    mean = property(lambda self: C.full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype))
    variance = property(lambda self: self.base_dist.variance)
