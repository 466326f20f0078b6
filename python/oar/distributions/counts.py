"""Poisson, Binomial, Geometric and NegativeBinomial: count distributions (no reparameterized samples, as
in torch). Poisson draws come from oar.poisson; Binomial draws count successes among total_count
Bernoulli trials; Geometric inverts the CDF of a uniform; NegativeBinomial is a Poisson whose rate is a
Gamma draw."""

from .. import _creation as C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .distribution import (Distribution, broadcast_all, lazy_property, logits_to_probs, probs_to_logits,
                           set_probs_or_logits)
from .exp_family import ExponentialFamily

__all__ = ["Poisson", "Binomial", "Geometric", "NegativeBinomial"]


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self.rate.size(), validate_args=validate_args)

    mean = variance = property(lambda self: self.rate)
    mode = property(lambda self: self.rate.floor())

    def sample(self, sample_shape=Size()):
        from .. import poisson

        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return poisson(self.rate.expand(*shape) if shape else self.rate)

    def log_prob(self, value):
        from .. import xlogy

        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - (value + 1).lgamma()

    def expand(self, batch_shape, _instance=None):
        return Poisson(self.rate.expand(*batch_shape), validate_args=False)

    _natural_params = property(lambda self: (self.rate.log(),))

    def _log_normalizer(self, x):
        return x.exp()


class Binomial(Distribution):
    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        (self.total_count,) = set_probs_or_logits(self, probs, logits, total_count)
        super().__init__(self.total_count.size(), validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    mode = property(lambda self: ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count))
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        n_max = int(self.total_count.max().item()) if self.total_count.numel() else 0
        with no_grad():
            p = self.probs.expand(*shape) if shape else self.probs
            n = self.total_count.expand(*shape) if shape else self.total_count
            if n_max == 0:
                return C.zeros_like(p)
            trials = C.rand(*shape, n_max, dtype=p.dtype) if shape else C.rand(n_max, dtype=p.dtype)
            index = C.arange(n_max, dtype=p.dtype)
            hit = (trials < p.unsqueeze(-1)) & (index < n.unsqueeze(-1))   # trial j counts when j < n
            return hit.to(p.dtype).sum(-1)

    def log_prob(self, value):
        from ..nn import functional as NF

        if self._validate_args:
            self._validate_sample(value)
        n, k, logits = broadcast_all(self.total_count, value, self.logits)
        log_choose = (n + 1).lgamma() - (k + 1).lgamma() - (n - k + 1).lgamma()
        # k log p + (n - k) log(1 - p) = k logits - n softplus(logits), stable for large |logits|
        return log_choose + k * logits - n * NF.softplus(logits)

    def entropy(self):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        values = self.enumerate_support(False)
        log_prob = self.log_prob(values)
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand=True):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = C.arange(n + 1, dtype=self.probs.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(n + 1, *self._batch_shape) if expand else values

    def expand(self, batch_shape, _instance=None):
        new = Binomial.__new__(Binomial)
        new.total_count = self.total_count.expand(*batch_shape)
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        return new


class Geometric(Distribution):
    """the number of failures before the first success of Bernoulli(probs) trials"""
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        set_probs_or_logits(self, probs, logits)
        super().__init__(self.__dict__["probs" if probs is not None else "logits"].size(),
                         validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            value = self.probs
            raise ValueError(f"Expected parameter probs ({type(value).__name__} of shape {tuple(value.shape)}) of "
                             f"distribution {self!r} to be positive but found invalid values:\n{value[~(value > 0)]}")

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: C.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def sample(self, sample_shape=Size()):
        from .continuous import _rand

        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            u = _rand(shape, self.probs.dtype).clamp(min=D.finfo(self.probs.dtype).tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        from .. import where

        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # p = 1 at k = 0: 0 * log(0) is 0 (torch zeroes p there)
        probs = where((probs == 1) & (value == 0), C.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        from ..nn import functional as NF

        return NF.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs

    def expand(self, batch_shape, _instance=None):
        new = Geometric.__new__(Geometric)
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new


class NegativeBinomial(Distribution):
    """failures before total_count successes of Bernoulli trials that succeed with 1 - probs (torch's
    convention: probs is the probability of each counted event)"""
    arg_constraints = {"total_count": constraints.greater_than_eq(0),
                       "probs": constraints.half_open_interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        (self.total_count,) = set_probs_or_logits(self, probs, logits, total_count)
        super().__init__(self.total_count.size(), validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    mean = property(lambda self: self.total_count * self.logits.exp())
    mode = property(lambda self: ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0))
    variance = property(lambda self: self.mean / (-self.logits).sigmoid())

    def sample(self, sample_shape=Size()):
        from .. import poisson
        from .gamma import Gamma

        with no_grad():
            rate = Gamma(self.total_count, (-self.logits).exp(), validate_args=False).sample(sample_shape)
            return poisson(rate)

    def log_prob(self, value):
        from .. import where
        from ..nn import functional as NF

        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        unnormalized = n * NF.logsigmoid(-logits) + value * NF.logsigmoid(logits)
        normalization = -(n + value).lgamma() + (1.0 + value).lgamma() + n.lgamma()
        normalization = where(n + value == 0, C.zeros_like(normalization), normalization)   # 0 events of 0: log 1
        return unnormalized - normalization

    def expand(self, batch_shape, _instance=None):
        new = NegativeBinomial.__new__(NegativeBinomial)
        new.total_count = self.total_count.expand(*batch_shape)
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

