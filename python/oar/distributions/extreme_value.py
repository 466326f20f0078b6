"""Gumbel, Weibull and Pareto as torch 1.13 builds them: TransformedDistributions of a Uniform or an
Exponential (so rsample is reparameterized and expand / log_prob come from TransformedDistribution),
with closed-form means, modes, variances and entropies."""
import math

from .. import _creation as C
from .. import _dtype as D
from . import constraints
from .continuous import Exponential, Uniform
from .distribution import broadcast_all
from .transformed_distribution import TransformedDistribution
from .transforms import AffineTransform, ExpTransform, PowerTransform

__all__ = ["Gumbel", "Weibull", "Pareto"]

_EULER = 0.57721566490153286061


class _Shown(TransformedDistribution):
    def __repr__(self):   # torch's Distribution repr: the parameters kept on the instance
        from .distribution import Distribution

        return Distribution.__repr__(self)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        for k in self.arg_constraints:
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*batch_shape)
        return new


class Gumbel(_Shown):
    """loc - scale log(-log U), U uniform on [tiny, 1 - eps)"""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = D.finfo(self.loc.dtype)
        base = Uniform(C.full_like(self.loc, fi.tiny), C.full_like(self.loc, 1 - fi.eps))
        transforms = [ExpTransform().inv, AffineTransform(0, -C.ones_like(self.scale)), ExpTransform().inv,
                      AffineTransform(self.loc, -self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev.pow(2))

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class Weibull(_Shown):
    """scale E^(1 / concentration), E standard exponential"""
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(C.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = super().expand(batch_shape, _instance)
        new.concentration_reciprocal = new.concentration.reciprocal()
        new.transforms = [PowerTransform(new.concentration_reciprocal), AffineTransform(0, new.scale)]
        return new

    mean = property(lambda self: self.scale * (1 + self.concentration_reciprocal).lgamma().exp())
    mode = property(lambda self: self.scale * ((self.concentration - 1) / self.concentration) **
                    self.concentration.reciprocal())

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * ((1 + 2 * r).lgamma().exp() - (2 * (1 + r).lgamma()).exp())

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER * (1 - r) + (self.scale * r).log() + 1


class Pareto(_Shown):
    """scale e^E, E exponential with rate alpha"""
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        super().__init__(base, [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    @property
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())
