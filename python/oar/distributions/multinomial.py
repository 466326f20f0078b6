"""Multinomial(total_count, probs | logits): counts of total_count Categorical draws (an int total_count,
as torch 1.13), with torch's log_prob (0 * -inf taken as 0) and its entropy through the Binomial
marginals."""
import math

from .. import _creation as C
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .counts import Binomial
from .discrete import Categorical
from .distribution import Distribution, broadcast_all

__all__ = ["Multinomial"]


class Multinomial(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        self._binomial = Binomial(total_count=total_count, probs=self.probs)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = Multinomial.__new__(Multinomial)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = Binomial(total_count=self.total_count, probs=new._categorical.probs)
        Distribution.__init__(new, Size(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def support(self):
        return constraints.multinomial(self.total_count)

    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=Size()):
        from ..nn import functional as NF

        k = self._event_shape[0]
        with no_grad():
            draws = self._categorical.sample((self.total_count,) + tuple(sample_shape))   # [n, sample, batch]
            return NF.one_hot(draws, k).sum(0).to(self.probs.dtype)

    def entropy(self):
        n = float(self.total_count)
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        return term1 + (binomial_probs * (support + 1).lgamma()).sum(0).sum(-1)

    def log_prob(self, value):
        from .. import where

        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = where((value == 0) & (logits == -math.inf), C.zeros_like(logits), logits)
        return (value.sum(-1) + 1).lgamma() - (value + 1).lgamma().sum(-1) + (logits * value).sum(-1)
