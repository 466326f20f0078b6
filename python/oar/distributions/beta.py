"""Dirichlet(concentration) over the simplex, Beta(concentration1, concentration0) = the first
coordinate of a two-category Dirichlet, and Kumaraswamy (a Beta look-alike with a closed-form CDF, built
from a Uniform by transforms as torch 1.13 does). rsample normalizes Gamma(alpha_i, 1) draws, so its
gradient is the Gamma draws' implicit one carried through the normalization (torch's _dirichlet_grad is
another estimator of the same expectation: equal in distribution, not draw for draw)."""
from .. import _creation as C
from .._tensor import Size
from . import constraints
from .distribution import Distribution, broadcast_all
from .exp_family import ExponentialFamily
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, PowerTransform

__all__ = ["Dirichlet", "Beta", "Kumaraswamy"]


class Dirichlet(ExponentialFamily):
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

    _natural_params = property(lambda self: (self.concentration,))

    def _log_normalizer(self, x):
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()


class Beta(ExponentialFamily):
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

    _natural_params = property(lambda self: (self.concentration1, self.concentration0))

    def _log_normalizer(self, x, y):
        return x.lgamma() + y.lgamma() - (x + y).lgamma()


def _kumaraswamy_moment(a, b, n):
    """E[x^n] = b B(1 + n/a, b)"""
    arg = 1 + n / a
    return b * (arg.lgamma() + b.lgamma() - (arg + b).lgamma()).exp()


class Kumaraswamy(TransformedDistribution):
    """(1 - U^(1/concentration0))^(1/concentration1), U uniform on [0, 1)"""
    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        from .continuous import Uniform

        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(C.zeros_like(self.concentration0), C.ones_like(self.concentration0), validate_args=validate_args)
        transforms = [PowerTransform(self.concentration0.reciprocal()), AffineTransform(1.0, -1.0),
                      PowerTransform(self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new.concentration1 = self.concentration1.expand(*batch_shape)
        new.concentration0 = self.concentration0.expand(*batch_shape)
        return new

    mean = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 1))
    variance = property(lambda self: _kumaraswamy_moment(self.concentration1, self.concentration0, 2) -
                        self.mean.pow(2))

    @property
    def mode(self):
        from .. import where

        a, b = self.concentration1, self.concentration0
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()   # torch 1.13's expression, kept as it is
        return where((b < 1) | (a < 1), C.full_like(log_mode, float("nan")), log_mode).exp()

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        h0 = (b + 1).digamma() + 0.57721566490153286061
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * h0 - a.log() - b.log()

    def __repr__(self):
        return Distribution.__repr__(self)

