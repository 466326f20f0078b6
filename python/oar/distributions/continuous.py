"""Normal, Uniform, Exponential, Laplace, Cauchy: location-scale families with reparameterized samples
(loc + scale * standard noise), closed-form log densities, CDFs, inverse CDFs and entropies."""
import math

from .. import _creation as C
from .. import _dtype as D
from .._tensor import Size
from . import constraints
from .distribution import _LOG_SQRT_2PI, Distribution, broadcast_all
from .exp_family import ExponentialFamily

__all__ = ["Normal", "Uniform", "Exponential", "Laplace", "Cauchy"]


class _Scalarish(Distribution):
    """Distributions whose parameters broadcast to the batch shape (the event is a scalar)."""

    def _shape_of(self, *params):
        return self.__dict__[self._first].size()   # the parameters broadcast to it (numbers: 0-d)

    def expand(self, batch_shape, _instance=None):
        new = type(self).__new__(type(self))
        shape = Size(batch_shape)
        for k in self.arg_constraints:
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*shape)
        Distribution.__init__(new, shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _noise(self, sample_shape, draw):
        shape = self._extended_shape(sample_shape)
        return draw(tuple(shape), self.__dict__[self._first].dtype)


def _randn(shape, dtype):
    return C.randn(*shape, dtype=dtype) if shape else C.randn(1, dtype=dtype).reshape(())


def _rand(shape, dtype):
    return C.rand(*shape, dtype=dtype) if shape else C.rand(1, dtype=dtype).reshape(())


class Normal(_Scalarish, ExponentialFamily):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _first = "loc"

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self._shape_of(loc, scale), validate_args=validate_args)

    mean = mode = property(lambda self: self.loc)
    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale.pow(2))

    def rsample(self, sample_shape=Size()):
        return self.loc + self._noise(sample_shape, _randn) * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()))

    def _log_normalizer(self, x, y):
        return -0.25 * x.pow(2) / y + 0.5 * (-math.pi / y).log()


class Uniform(_Scalarish):
    arg_constraints = {"low": constraints.dependent, "high": constraints.dependent}
    has_rsample = True
    _first = "low"

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self._shape_of(low, high), validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError(f"Expected parameter low (Tensor of shape {tuple(self.low.shape)}) of distribution "
                             f"{self!r} to satisfy the constraint LessThan(upper_bound=high), but found invalid "
                             f"values:\n{self.low}")

    @property
    def support(self):
        return constraints.half_open_interval(self.low, self.high)

    mean = property(lambda self: (self.high + self.low) / 2)
    mode = property(lambda self: C.full_like(self.low, float("nan")))
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low).pow(2) / 12)

    def rsample(self, sample_shape=Size()):
        return self.low + self._noise(sample_shape, _rand) * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()

    def __repr__(self):
        shown = ", ".join(f"{k}: {v.item() if v.ndim == 0 else v.size()}" for k, v in (("low", self.low),
                                                                                       ("high", self.high)))
        return f"Uniform({shown})"


class Exponential(_Scalarish, ExponentialFamily):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True
    _first = "rate"

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(self._shape_of(rate), validate_args=validate_args)

    mean = property(lambda self: self.rate.reciprocal())
    mode = property(lambda self: C.zeros_like(self.rate))
    stddev = property(lambda self: self.rate.reciprocal())
    variance = property(lambda self: self.rate.pow(-2))

    def rsample(self, sample_shape=Size()):
        u = self._noise(sample_shape, _rand)
        return -(-u).log1p() / self.rate   # -log(1 - u): u in [0, 1) never reaches log(0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()

    _mean_carrier_measure = 0
    _natural_params = property(lambda self: (-self.rate,))

    def _log_normalizer(self, x):
        return -(-x).log()


class Laplace(_Scalarish):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _first = "loc"

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self._shape_of(loc, scale), validate_args=validate_args)

    mean = mode = property(lambda self: self.loc)
    stddev = property(lambda self: 2 ** 0.5 * self.scale)
    variance = property(lambda self: 2 * self.scale.pow(2))

    def rsample(self, sample_shape=Size()):
        eps = D.finfo(self.loc.dtype).eps
        u = (self._noise(sample_shape, _rand) * 2 - 1).clamp(min=-1 + eps, max=1 - eps)   # in (-1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Cauchy(_Scalarish):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True
    _first = "loc"

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self._shape_of(loc, scale), validate_args=validate_args)

    mode = property(lambda self: self.loc)
    mean = property(lambda self: C.full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype))
    variance = property(lambda self: C.full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype))

    def rsample(self, sample_shape=Size()):
        u = self._noise(sample_shape, _rand)
        return self.loc + (math.pi * (u - 0.5)).tan() * self.scale   # the inverse CDF of standard noise

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (1 + ((value - self.loc) / self.scale) ** 2).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()

