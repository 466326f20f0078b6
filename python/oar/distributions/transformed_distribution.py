"""TransformedDistribution (a base distribution pushed through transforms: samples transformed,
log_prob(y) = base.log_prob(x) - log|dy/dx| at x = inverse(y)), LogNormal = exp(Normal) and
LogisticNormal = stick-breaking of a Normal vector."""
from .._tensor import Size
from . import constraints
from .continuous import Normal
from .distribution import Distribution
from .independent import Independent
from .transforms import ExpTransform, StickBreakingTransform, Transform

__all__ = ["TransformedDistribution", "LogNormal", "LogisticNormal"]


class TransformedDistribution(Distribution):
    arg_constraints = {}

    def __init__(self, base_distribution, transforms, validate_args=None):
        self.transforms = [transforms] if isinstance(transforms, Transform) else list(transforms)
        for t in self.transforms:
            if not isinstance(t, Transform):
                raise ValueError(f"transforms must be a Transform or a list of Transforms, but was {transforms}")
        self.base_dist = base_distribution
        event_dim = len(base_distribution.event_shape)
        for t in self.transforms:   # a transform's output event may have other dims than its input's (reshape)
            event_dim = max(event_dim, t.event_dim) + t.codomain_event_dim - t.event_dim
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        for t in self.transforms:
            shape = t.forward_shape(shape)   # stick-breaking adds one to the event size
        super().__init__(Size(shape[:len(shape) - event_dim]), Size(shape[len(shape) - event_dim:]),
                         validate_args=validate_args)

    has_rsample = property(lambda self: self.base_dist.has_rsample)

    @property
    def support(self):
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    def sample(self, sample_shape=Size()):
        x = self.base_dist.sample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def rsample(self, sample_shape=Size()):
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def expand(self, batch_shape, _instance=None):
        """the base distribution expanded to the shape the transforms map onto batch_shape (all of oar's
        transforms keep shapes); the transforms' parameters broadcast"""
        new = _instance if _instance is not None else type(self).__new__(type(self))
        batch_shape = Size(batch_shape)
        shape = tuple(batch_shape) + tuple(self._event_shape)
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        new.base_dist = self.base_dist.expand(Size(shape[:len(shape) - len(self.base_dist.event_shape)]))
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        event_dim = len(self._event_shape)
        result, y = 0, value
        for t in reversed(self.transforms):
            x = t.inv(y)
            ldj = t.log_abs_det_jacobian(x, y)
            event_dim += t.event_dim - t.codomain_event_dim
            extra = event_dim - t.event_dim
            result = result - (ldj.reshape(*ldj.shape[:ldj.ndim - extra], -1).sum(-1) if extra else ldj)
            y = x
        base = self.base_dist.log_prob(y)
        extra = event_dim - len(self.base_dist.event_shape)
        return result + (base.reshape(*base.shape[:base.ndim - extra], -1).sum(-1) if extra else base)

    def cdf(self, value):
        for t in reversed(self.transforms):
            value = t.inv(value)
        cdf = self.base_dist.cdf(value)
        sign = 1
        for t in self.transforms:
            sign = sign * t.sign
        return cdf if isinstance(sign, int) and sign == 1 else sign * (cdf - 0.5) + 0.5

    def icdf(self, value):
        value = self.base_dist.icdf(value)
        for t in self.transforms:
            value = t(value)
        return value

    def __repr__(self):
        return f"{type(self).__name__}()"


class LogNormal(TransformedDistribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        super().__init__(Normal(loc, scale, validate_args=validate_args), ExpTransform(), validate_args=validate_args)

    loc = property(lambda self: self.base_dist.loc)
    scale = property(lambda self: self.base_dist.scale)
    mean = property(lambda self: (self.loc + self.scale.pow(2) / 2).exp())
    mode = property(lambda self: (self.loc - self.scale.pow(2)).exp())
    variance = property(lambda self: (self.scale.pow(2).exp() - 1) * (2 * self.loc + self.scale.pow(2)).exp())

    def entropy(self):
        return self.base_dist.entropy() + self.loc

    def __repr__(self):
        return repr(self.base_dist).replace("Normal", "LogNormal", 1)


class LogisticNormal(TransformedDistribution):
    """StickBreakingTransform of Independent(Normal(loc, scale), 1): a distribution on the simplex of one
    more coordinate than loc"""
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand((1,))
        super().__init__(Independent(base, 1), StickBreakingTransform(), validate_args=validate_args)

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)

