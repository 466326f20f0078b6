"""Bernoulli, Categorical and OneHotCategorical, parameterized by probs or logits (one of them; the
other is computed when first used): samples from oar's generator, log-probabilities through the
numerically stable logit forms, entropies, enumerate_support."""
from .. import _creation as C
from .. import _dtype as D
from .._grad_mode import no_grad
from .._tensor import Size
from . import constraints
from .distribution import (Distribution, broadcast_all, lazy_property, logits_to_probs, probs_to_logits,
                           set_probs_or_logits)
from .exp_family import ExponentialFamily

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Bernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        set_probs_or_logits(self, probs, logits)
        super().__init__(self.__dict__["probs" if probs is not None else "logits"].size(), validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self.probs.size()

    mean = property(lambda self: self.probs)
    mode = property(lambda self: (self.probs >= 0.5).to(self.probs.dtype))
    variance = property(lambda self: self.probs * (1 - self.probs))

    def sample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            return _bernoulli(self.probs.expand(*shape) if shape else self.probs)

    def log_prob(self, value):
        from ..nn import functional as NF

        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -NF.binary_cross_entropy_with_logits(logits, value.to(logits.dtype), reduction="none")

    def entropy(self):
        from ..nn import functional as NF

        return NF.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (self.logits,))

    def _log_normalizer(self, x):
        return x.exp().log1p()

    def enumerate_support(self, expand=True):
        values = C.arange(2, dtype=self.probs.dtype).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(2, *self._batch_shape) if expand else values

    def expand(self, batch_shape, _instance=None):
        new = Bernoulli.__new__(Bernoulli)
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        return new


def _bernoulli(p):
    """0/1 draws with probabilities p (oar's generator), in p's dtype."""
    from .. import bernoulli

    return bernoulli(p)


class Categorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            params = self.probs
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            params = self.logits
        self._num_events = params.size()[-1]
        super().__init__(params.size()[:-1], validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    @property
    def param_shape(self):
        return self.probs.size()

    mean = property(lambda self: C.full(tuple(self._extended_shape()), float("nan"), dtype=self.probs.dtype))
    variance = mean
    mode = property(lambda self: self.probs.argmax(dim=-1))

    def sample(self, sample_shape=Size()):
        from .. import multinomial

        n = 1
        for s in sample_shape:
            n *= s
        with no_grad():
            flat = self.probs.reshape(-1, self._num_events)
            draws = multinomial(flat, n, replacement=True).t()   # [n, batch]
        return draws.reshape(*self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_all_long(value, self.logits)
        return log_pmf.gather(-1, value[..., :1]).squeeze(-1)

    def entropy(self):
        min_real = D.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = C.arange(self._num_events, dtype=D.int64).reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand(self._num_events, *self._batch_shape) if expand else values

    def expand(self, batch_shape, _instance=None):
        new = Categorical.__new__(Categorical)
        shape = tuple(batch_shape) + (self._num_events,)
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*shape)
        new._num_events = self._num_events
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        return new


def broadcast_all_long(value, logits):
    """value ([..., 1] indices) and logits ([..., K]) broadcast over their leading dims."""
    from .. import broadcast_shapes

    lead = broadcast_shapes(tuple(value.shape[:-1]), tuple(logits.shape[:-1]))
    return value.expand(*lead, 1), logits.expand(*lead, logits.shape[-1])


class OneHotCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)
    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self._categorical.probs * (1 - self._categorical.probs))

    def sample(self, sample_shape=Size()):
        from ..nn import functional as NF

        idx = self._categorical.sample(sample_shape)
        return NF.one_hot(idx, self._event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def enumerate_support(self, expand=True):
        n = self._event_shape[0]
        values = C.eye(n, dtype=self.probs.dtype).reshape((n,) + (1,) * len(self._batch_shape) + (n,))
        return values.expand(n, *self._batch_shape, n) if expand else values


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose rsample passes the gradient straight through to probs (Bengio et al. 2013):
    the draw's value with the probabilities' gradient"""
    has_rsample = True

    def rsample(self, sample_shape=Size()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())

