"""Dirichlet(concentration) over the simplex and Beta(concentration1, concentration0) = the first
coordinate of a two-category Dirichlet, as torch 1.13. rsample normalizes Gamma(alpha_i, 1) draws, so its
gradient is the Gamma draws' implicit one carried through the normalization (torch's _dirichlet_grad is
another estimator of the same expectation: equal in distribution, not draw for draw)."""
from .. import _creation as C
from .._tensor import Size
from . import constraints
from .distribution import Distribution, broadcast_all

__all__ = ["Dirichlet", "Beta"]


class Dirichlet(Distribution):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(Size(shape[:-1]), Size(shape[-1:]), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = Dirichlet.__new__(Dirichlet)
        shape = Size(batch_shape)
        new.concentration = self.concentration.expand(*(tuple(shape) + tuple(self._event_shape)))
        Distribution.__init__(new, shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=Size()):
        from .. import _sample_dirichlet

        return _sample_dirichlet(self.concentration.expand(*self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a = self.concentration
        return (value.log() * (a - 1.0)).sum(-1) + a.sum(-1).lgamma() - a.lgamma().sum(-1)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def mode(self):
        from .. import where

        am1 = (self.concentration - 1).clamp(min=0.0)
        mode = am1 / am1.sum(-1, True)
        # all alpha_i < 1: the density peaks at every vertex; torch takes the first one
        first = (C.arange(mode.shape[-1]) == 0).to(mode.dtype).expand(*mode.shape)
        return where((self.concentration < 1).all(-1, True), first, mode)

    @property
    def variance(self):
        a0 = self.concentration.sum(-1, True)
        return self.concentration * (a0 - self.concentration) / (a0.pow(2) * (a0 + 1))

    def entropy(self):
        a = self.concentration
        k, a0 = a.shape[-1], a.sum(-1)
        return a.lgamma().sum(-1) - a0.lgamma() - (k - a0) * a0.digamma() - ((a - 1.0) * a.digamma()).sum(-1)


class Beta(Distribution):
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        from .. import stack

        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([c1, c0], -1), validate_args=validate_args)
        super().__init__(self._dirichlet._batch_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = Beta.__new__(Beta)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, Size(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    concentration1 = property(lambda self: self._dirichlet.concentration[..., 0])
    concentration0 = property(lambda self: self._dirichlet.concentration[..., 1])
    mean = property(lambda self: self.concentration1 / (self.concentration1 + self.concentration0))
    mode = property(lambda self: self._dirichlet.mode[..., 0])

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=Size()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        from .. import stack

        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
