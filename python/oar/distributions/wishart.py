"""Wishart(df, covariance_matrix | precision_matrix | scale_tril) over positive definite p x p matrices, as
torch 1.13. rsample by Bartlett's decomposition, L A A^T L^T with A lower triangular, sqrt(chi2(df - i)) on
its diagonal (the standard_gamma op, so the draw is differentiable in df) and standard normals below it;
a draw that is not positive definite (likely when p - 1 < df < p) is redrawn, up to max_try_correction
times."""
import math
import warnings

from .. import _creation as C
from .. import _dtype as D
from .._tensor import Size
from . import constraints
from .distribution import lazy_property
from .exp_family import ExponentialFamily
from .gamma import Chi2

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """sum_i<p digamma(x - i/2)"""
    return (x.unsqueeze(-1) - C.arange(p, dtype=x.dtype) / 2).digamma().sum(-1)


class Wishart(ExponentialFamily):
    arg_constraints = {"covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite,
                       "scale_tril": constraints.lower_cholesky, "df": constraints.greater_than(0)}
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        from .. import broadcast_shapes, linalg

        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, (int, float)):
            batch = tuple(param.shape[:-2])
            self.df = C.tensor(float(df), dtype=param.dtype)
        else:
            batch = broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape))
            self.df = df.expand(*batch)
        p = param.shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        name = "scale_tril" if scale_tril is not None else "covariance_matrix" if covariance_matrix is not None \
            else "precision_matrix"
        setattr(self, name, param.expand(*batch, p, p))
        # df's bound depends on p: an instance copy of the table (torch rewrites its class's)
        self.arg_constraints = dict(Wishart.arg_constraints, df=constraints.greater_than(p - 1))
        if bool((self.df < p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for ndim - 1 < df < ndim.")
        super().__init__(Size(batch), Size((p, p)), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = linalg.cholesky(linalg.inv(precision_matrix))
        self._dist_chi2 = self._chi2(batch)

    def _chi2(self, batch):
        p = self._event_shape[-1]
        df = self.df.unsqueeze(-1) - C.arange(p, dtype=self._unbroadcasted_scale_tril.dtype).expand(*batch, p)
        return Chi2(df)

    def expand(self, batch_shape, _instance=None):
        new = Wishart.__new__(Wishart)
        batch = tuple(batch_shape)
        shape = batch + tuple(self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(*shape)
        new.df = self.df.expand(*batch)
        for k in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if k in self.__dict__:
                new.__dict__[k] = self.__dict__[k].expand(*shape)
        new.arg_constraints = self.arg_constraints
        ExponentialFamily.__init__(new, Size(batch), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        new._dist_chi2 = new._chi2(batch)
        return new

    def _full(self, t):
        return t.expand(*self._batch_shape, *self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._full(self._unbroadcasted_scale_tril)

    @lazy_property
    def covariance_matrix(self):
        lt = self._unbroadcasted_scale_tril
        return self._full(lt @ lt.mT)

    @lazy_property
    def precision_matrix(self):
        from .. import cholesky_solve

        eye = C.eye(self._event_shape[-1], dtype=self._unbroadcasted_scale_tril.dtype)
        return self._full(cholesky_solve(eye, self._unbroadcasted_scale_tril))

    def _df_matrix(self):
        # a number df stays 0-d (as torch keeps it); expanded here, where torch's view fails for a batch
        return self.df.expand(*self._batch_shape).reshape(*self._batch_shape, 1, 1)

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        from .. import where

        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = where(factor <= 0, C.full_like(factor, math.nan), factor)
        return factor.expand(*self._batch_shape).reshape(*self._batch_shape, 1, 1) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        d = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=Size()):
        from .. import diag_embed

        p = self._event_shape[-1]
        diag = self._dist_chi2.rsample(sample_shape).sqrt()
        diag = diag.clamp(min=D.finfo(diag.dtype).eps)
        below = C.randn(*tuple(sample_shape), *self._batch_shape, p, p, dtype=diag.dtype).tril(-1)
        chol = self._unbroadcasted_scale_tril @ (diag_embed(diag) + below)
        return chol @ chol.mT

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        from .. import where

        max_try_correction = 10 if max_try_correction is None else max_try_correction
        sample = self._bartlett_sampling(sample_shape)
        singular = ~self.support.check(sample)
        if bool(singular.any()):
            warnings.warn("Singular sample detected.")
            for _ in range(max_try_correction):
                sample = where(singular.unsqueeze(-1).unsqueeze(-1), self._bartlett_sampling(sample_shape), sample)
                singular = ~self.support.check(sample)
                if not bool(singular.any()):
                    break
        return sample

    def log_prob(self, value):
        from .. import cholesky_solve, linalg, mvlgamma

        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        lt = self._unbroadcasted_scale_tril
        half_log_det = lt.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        lead = tuple(value.shape[:-2])
        ltb = lt.expand(*lead, p, p) if lead else lt
        trace = cholesky_solve(value, ltb).diagonal(dim1=-2, dim2=-1).sum(-1)
        return -nu * (p * _LOG_2 / 2 + half_log_det) - mvlgamma(nu / 2, p=p) + \
            (nu - p - 1) / 2 * linalg.slogdet(value).logabsdet - trace / 2

    def entropy(self):
        from .. import mvlgamma

        nu, p = self.df, self._event_shape[-1]
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (p + 1) * (p * _LOG_2 / 2 + half_log_det) + mvlgamma(nu / 2, p=p) - \
            (nu - p - 1) / 2 * _mvdigamma(nu / 2, p) + nu * p / 2

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        from .. import linalg, mvlgamma

        p = self._event_shape[-1]
        return (y + (p + 1) / 2) * (-linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p) + mvlgamma(y + (p + 1) / 2, p=p)
