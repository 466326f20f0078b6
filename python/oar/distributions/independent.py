"""Independent: a distribution whose rightmost reinterpreted_batch_ndims batch dims become event dims,
so log_prob and entropy sum over them (a diagonal Normal as one multivariate event)."""
from .._tensor import Size
from . import constraints
from .distribution import Distribution

__all__ = ["Independent"]


class Independent(Distribution):
    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError(f"Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), actual "
                             f"{n} vs {len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        super().__init__(Size(shape[:len(shape) - event_dim]), Size(shape[len(shape) - event_dim:]),
                         validate_args=validate_args)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    has_enumerate_support = property(lambda self: False)
    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    @property
    def support(self):
        return constraints.dependent if self.reinterpreted_batch_ndims else self.base_dist.support

    def _sum_rightmost(self, value):
        n = self.reinterpreted_batch_ndims
        return value.reshape(*value.shape[:value.ndim - n], -1).sum(-1) if n else value

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return self._sum_rightmost(self.base_dist.log_prob(value))

    def entropy(self):
        return self._sum_rightmost(self.base_dist.entropy())

    def expand(self, batch_shape, _instance=None):
        base = self.base_dist.expand(tuple(batch_shape) + tuple(self._event_shape[:self.reinterpreted_batch_ndims]))
        return Independent(base, self.reinterpreted_batch_ndims, validate_args=False)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
