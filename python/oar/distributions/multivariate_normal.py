"""MultivariateNormal, parameterized by a covariance matrix, a precision matrix or the lower Cholesky
factor L of the covariance (what it keeps): samples loc + L eps, log densities through a triangular
solve, entropies from L's diagonal."""
import math

from .. import _creation as C
from .._tensor import Size
from . import constraints
from .distribution import Distribution, lazy_property

__all__ = ["MultivariateNormal"]


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        from .. import broadcast_shapes, linalg

        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        m = given[0]
        if m.dim() < 2:
            raise ValueError("scale_tril matrix must be at least two-dimensional, with optional leading batch "
                             "dimensions" if scale_tril is not None else "covariance_matrix or precision_matrix "
                             "must be at least two-dimensional, with optional leading batch dimensions")
        batch = broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
        k = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch, k, k)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch, k, k)
        else:
            self.precision_matrix = precision_matrix.expand(*batch, k, k)
        self.loc = loc.expand(*batch, k)
        super().__init__(Size(batch), Size((k,)), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(*self._batch_shape, *self._event_shape, *self._event_shape)

    @lazy_property
    def precision_matrix(self):
        from .. import linalg

        return linalg.inv(self.covariance_matrix)

    mean = mode = property(lambda self: self.loc)

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(*self._batch_shape, *self._event_shape)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        eps = C.randn(*shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        from .. import linalg

        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        L = self._unbroadcasted_scale_tril
        lead = tuple(diff.shape[:-1])
        Lb = L.expand(*lead, *L.shape[-2:]) if lead else L
        z = linalg.solve_triangular(Lb, diff.unsqueeze(-1), upper=False).squeeze(-1)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + (z * z).sum(-1)) - self._half_log_det()

    def entropy(self):
        k = self._event_shape[0]
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(*self._batch_shape) if len(self._batch_shape) else h

    def expand(self, batch_shape, _instance=None):
        k = self._event_shape[0]
        return MultivariateNormal(self.loc.expand(*batch_shape, k),
                                  scale_tril=self._unbroadcasted_scale_tril.expand(*batch_shape, k, k),
                                  validate_args=False)
