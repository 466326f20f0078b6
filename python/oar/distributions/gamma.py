"""Gamma(concentration, rate) and Chi2(df) = Gamma(df / 2, 1 / 2): reparameterized samples from the
standard_gamma op (Marsaglia-Tsang draws; the gradient in concentration is the implicit one, d x / d alpha
at the draw's quantile), closed-form log densities and entropies, as torch 1.13."""
from .. import _dtype as D
from .._tensor import Size
from . import constraints
from .distribution import Distribution, broadcast_all
from .exp_family import ExponentialFamily

__all__ = ["Gamma", "Chi2"]


def _tiny_floor(value):
    """value clamped below at the dtype's smallest normal number without touching its gradient (torch clamps
    the detached tensor in place): a draw divided by a large rate may underflow to 0, outside the support."""
    return value + (value.detach().clamp(min=D.finfo(value.dtype).tiny) - value.detach())


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(self.concentration.size(), validate_args=validate_args)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: ((self.concentration - 1) / self.rate).clamp(min=0))
    variance = property(lambda self: self.concentration / self.rate.pow(2))

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        shape = Size(batch_shape)
        new.concentration, new.rate = self.concentration.expand(*shape), self.rate.expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=Size()):
        from .. import _standard_gamma

        shape = tuple(self._extended_shape(sample_shape))
        alpha, rate = (self.concentration.expand(*shape), self.rate.expand(*shape)) if shape else \
            (self.concentration, self.rate)
        return _tiny_floor(_standard_gamma(alpha) / rate)

    def log_prob(self, value):
        from .. import xlogy

        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration, self.rate
        return xlogy(a, b) + xlogy(a - 1, value) - b * value - a.lgamma()

    def entropy(self):
        a = self.concentration
        return a - self.rate.log() + a.lgamma() + (1.0 - a) * a.digamma()

    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (self.concentration - 1, -self.rate))

    def _log_normalizer(self, x, y):
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()


class Chi2(Gamma):
    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)

    df = property(lambda self: self.concentration * 2)
