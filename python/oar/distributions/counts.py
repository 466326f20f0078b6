"""Poisson and Binomial: count distributions (no reparameterized samples, as in torch). Poisson draws
come from oar.poisson; Binomial draws count successes among total_count Bernoulli trials."""
from .. import _creation as C
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .distribution import (Distribution, broadcast_all, lazy_property, logits_to_probs, probs_to_logits,
                           set_probs_or_logits)

__all__ = ["Poisson", "Binomial"]


class Poisson(Distribution):
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


