"""The Concrete / Gumbel-softmax relaxations, as torch 1.13 builds them: LogitRelaxedBernoulli and
RelaxedBernoulli (its sigmoid), ExpRelaxedCategorical and RelaxedOneHotCategorical (its exp), each with a
reparameterized sample from logistic / Gumbel noise divided by the temperature."""
from .. import _creation as C
from .. import _dtype as D
from .._tensor import Size
from . import constraints
from .continuous import _rand
from .discrete import Categorical
from .distribution import Distribution, lazy_property, logits_to_probs, probs_to_logits, set_probs_or_logits
from .transformed_distribution import TransformedDistribution
from .transforms import ExpTransform, SigmoidTransform

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli", "ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


def clamp_probs(probs):
    eps = D.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


class LogitRelaxedBernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real   # rsample works, but has_rsample stays False as in torch 1.13

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        set_probs_or_logits(self, probs, logits)
        super().__init__(self.__dict__["probs" if probs is not None else "logits"].size(),
                         validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def expand(self, batch_shape, _instance=None):
        new = _instance if _instance is not None else type(self).__new__(type(self))
        new.temperature = self.temperature
        for k in ("probs", "logits"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(*shape) if shape else self.probs)
        u = clamp_probs(_rand(shape, probs.dtype))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        from .distribution import broadcast_all

        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args=validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)


class ExpRelaxedCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector   # the true support is a submanifold of it
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _instance if _instance is not None else type(self).__new__(type(self))
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, Size(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    param_shape = property(lambda self: self._categorical.param_shape)
    logits = property(lambda self: self._categorical.logits)
    probs = property(lambda self: self._categorical.probs)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        u = clamp_probs(_rand(shape, self.logits.dtype))
        scores = (self.logits - (-u.log()).log()) / self.temperature   # logits + Gumbel noise
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        from .distribution import broadcast_all

        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = C.full_like(self.temperature, float(k)).lgamma() + self.temperature.log() * (k - 1)
        score = logits - value * self.temperature
        return (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1) + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args),
                         ExpTransform(), validate_args=validate_args)

    temperature = property(lambda self: self.base_dist.temperature)
    logits = property(lambda self: self.base_dist.logits)
    probs = property(lambda self: self.base_dist.probs)
