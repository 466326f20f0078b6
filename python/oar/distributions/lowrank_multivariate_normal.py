"""LowRankMultivariateNormal(loc, cov_factor W [n, m], cov_diag D [n]): covariance W W^T + diag(D), kept in
that form. Log densities and entropies use the m x m capacitance matrix I + W^T D^-1 W (Woodbury's
identity and the matrix determinant lemma), so nothing of size n x n is formed; samples are
loc + W eps_m + sqrt(D) eps_n. As torch 1.13."""
import math

from .. import _creation as C
from .._tensor import Size
from . import constraints
from .distribution import Distribution, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _capacitance_tril(w, d):
    """Cholesky factor of I + W^T D^-1 W"""
    from .. import linalg

    m = w.shape[-1]
    k = (w.mT / d.unsqueeze(-2)) @ w
    return linalg.cholesky(k + C.eye(m, dtype=w.dtype))


def _lowrank_logdet(d, cap_tril):
    return 2 * cap_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + d.log().sum(-1)


def _lowrank_mahalanobis(w, d, x, cap_tril):
    """x^T (W W^T + D)^-1 x = x^T D^-1 x - |L^-1 W^T D^-1 x|^2 (Woodbury), x [..., n]"""
    from .. import linalg

    wt_dinv_x = ((w.mT / d.unsqueeze(-2)) @ x.unsqueeze(-1))   # [..., m, 1]
    lead = tuple(wt_dinv_x.shape[:-2])
    cap = cap_tril.expand(*lead, *cap_tril.shape[-2:]) if lead else cap_tril
    z = linalg.solve_triangular(cap, wt_dinv_x, upper=False).squeeze(-1)
    return (x.pow(2) / d).sum(-1) - z.pow(2).sum(-1)


class LowRankMultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        from .. import broadcast_tensors

        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = Size(tuple(loc.shape[-1:]))
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != tuple(event_shape):
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != tuple(event_shape):
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, diag_ = broadcast_tensors(loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc, self.cov_diag = loc_[..., 0], diag_[..., 0]
        self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag = cov_factor, cov_diag
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)
        super().__init__(Size(tuple(self.loc.shape[:-1])), event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = LowRankMultivariateNormal.__new__(LowRankMultivariateNormal)
        shape = tuple(batch_shape) + tuple(self._event_shape)
        new.loc, new.cov_diag = self.loc.expand(*shape), self.cov_diag.expand(*shape)
        new.cov_factor = self.cov_factor.expand(*shape, self.cov_factor.shape[-1])
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, Size(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self, t, *tail):
        return t.expand(*self._batch_shape, *tail)

    mean = mode = property(lambda self: self.loc)

    @lazy_property
    def variance(self):
        v = self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag
        return self._full(v, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        from .. import linalg

        n = self._event_shape[0]
        sqrt_d = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dw = self._unbroadcasted_cov_factor / sqrt_d
        k = dw @ dw.mT + C.eye(n, dtype=dw.dtype)
        return self._full(sqrt_d * linalg.cholesky(k), n, n)

    @lazy_property
    def covariance_matrix(self):
        from .. import diag_embed

        w = self._unbroadcasted_cov_factor
        n = self._event_shape[0]
        return self._full(w @ w.mT + diag_embed(self._unbroadcasted_cov_diag), n, n)

    @lazy_property
    def precision_matrix(self):
        from .. import diag_embed, linalg

        d = self._unbroadcasted_cov_diag
        wt_dinv = self._unbroadcasted_cov_factor.mT / d.unsqueeze(-2)
        a = linalg.solve_triangular(self._capacitance_tril, wt_dinv, upper=False)
        n = self._event_shape[0]
        return self._full(diag_embed(d.reciprocal()) - a.mT @ a, n, n)

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        eps_w = C.randn(*shape[:-1], self.cov_factor.shape[-1], dtype=self.loc.dtype)
        eps_d = C.randn(*shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1) + \
            self._unbroadcasted_cov_diag.sqrt() * eps_d

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        m = _lowrank_mahalanobis(w, d, value - self.loc, self._capacitance_tril)
        log_det = _lowrank_logdet(d, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + m)

    def entropy(self):
        log_det = _lowrank_logdet(self._unbroadcasted_cov_diag, self._capacitance_tril)
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return h.expand(*self._batch_shape) if len(self._batch_shape) else h
