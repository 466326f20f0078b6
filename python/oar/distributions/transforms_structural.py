"""Transforms that wrap, reshape or assemble others (torch.distributions.transforms' names):
CorrCholeskyTransform (a vector of n(n-1)/2 reals to the Cholesky factor of a correlation matrix),
IndependentTransform (a base transform whose log-determinant sums over extra rightmost dims),
ReshapeTransform (unit Jacobian), LowerCholeskyTransform (unconstrained square matrices to lower
triangular ones with a positive diagonal, by exp on the diagonal) and CumulativeDistributionTransform
(a distribution's CDF, e.g. for copulas)."""
import math

from .._tensor import Size
from . import constraints
from .transforms import Transform, _sum_rightmost

__all__ = ["IndependentTransform", "ReshapeTransform", "LowerCholeskyTransform", "CumulativeDistributionTransform",
           "CorrCholeskyTransform"]


class IndependentTransform(Transform):
    def __init__(self, base_transform, reinterpreted_batch_ndims, cache_size=0):
        self.base_transform, self.reinterpreted_batch_ndims = base_transform, reinterpreted_batch_ndims
        self.event_dim = base_transform.event_dim + reinterpreted_batch_ndims

    domain = property(lambda self: constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims))
    codomain = property(lambda self: constraints.independent(self.base_transform.codomain,
                                                             self.reinterpreted_batch_ndims))
    bijective = property(lambda self: self.base_transform.bijective)
    sign = property(lambda self: self.base_transform.sign)

    def _call(self, x):
        if x.dim() < self.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y):
        if y.dim() < self.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        return _sum_rightmost(self.base_transform.log_abs_det_jacobian(x, y), self.reinterpreted_batch_ndims)

    def __eq__(self, other):
        return isinstance(other, IndependentTransform) and self.base_transform == other.base_transform and \
            self.reinterpreted_batch_ndims == other.reinterpreted_batch_ndims

    __hash__ = object.__hash__

    def __repr__(self):
        return f"IndependentTransform({self.base_transform!r}, {self.reinterpreted_batch_ndims})"

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    bijective = True

    def __init__(self, in_shape, out_shape, cache_size=0):
        self.in_shape, self.out_shape = Size(in_shape), Size(out_shape)
        if self.in_shape.numel() != self.out_shape.numel():
            raise ValueError("in_shape, out_shape have different numbers of elements")
        self.event_dim = len(self.in_shape)

    codomain_event_dim = property(lambda self: len(self.out_shape))

    domain = property(lambda self: constraints.independent(constraints.real, len(self.in_shape)))
    codomain = property(lambda self: constraints.independent(constraints.real, len(self.out_shape)))

    def _call(self, x):
        return x.reshape(*(tuple(x.shape[:x.dim() - len(self.in_shape)]) + tuple(self.out_shape)))

    def _inverse(self, y):
        return y.reshape(*(tuple(y.shape[:y.dim() - len(self.out_shape)]) + tuple(self.in_shape)))

    def log_abs_det_jacobian(self, x, y):
        from .. import zeros

        return zeros(tuple(x.shape[:x.dim() - len(self.in_shape)]), dtype=x.dtype)

    def __eq__(self, other):
        return isinstance(other, ReshapeTransform) and (self.in_shape, self.out_shape) == (other.in_shape,
                                                                                            other.out_shape)

    __hash__ = object.__hash__

    def _swap(self, shape, have, want):
        if len(shape) < len(have):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(have)
        if tuple(shape[cut:]) != tuple(have):
            raise ValueError(f"Shape mismatch: expected {Size(shape[cut:])} but got {have}")
        return tuple(shape[:cut]) + tuple(want)

    def forward_shape(self, shape):
        return self._swap(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape):
        return self._swap(shape, self.out_shape, self.in_shape)


class LowerCholeskyTransform(Transform):
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky
    event_dim = 2

    def _call(self, x):
        from .. import diag_embed

        return x.tril(-1) + diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y):
        from .. import diag_embed

        return y.tril(-1) + diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class CumulativeDistributionTransform(Transform):
    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size=0):
        self.distribution = distribution

    domain = property(lambda self: self.distribution.support)

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)


def _tril_selector(n, diag, dtype):
    """S [k, n * n] with a 1 at (k, i n + j) for the k-th (i, j), j - i <= diag, in row order: vec @ S fills a
    matrix's strictly lower part, mat.flatten @ S^T reads it back (both differentiable)"""
    from .. import tensor

    cells = [i * n + j for i in range(n) for j in range(n) if j - i <= diag]
    rows = [[1.0 if c == cell else 0.0 for c in range(n * n)] for cell in cells]
    return tensor(rows, dtype=dtype).reshape(len(cells), n * n)


def _vec_to_tril(vec, n, diag):
    return (vec @ _tril_selector(n, diag, vec.dtype)).reshape(*vec.shape[:-1], n, n)


def _tril_to_vec(mat, diag):
    n = mat.shape[-1]
    return mat.reshape(*mat.shape[:-2], n * n) @ _tril_selector(n, diag, mat.dtype).mT


class CorrCholeskyTransform(Transform):
    """row i of the factor: tanh of its i inputs as signed stick-breaking fractions of the unit length left,
    the diagonal taking the rest"""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True
    event_dim = 1
    codomain_event_dim = 2

    def _call(self, x):
        from .. import cat, eye, finfo, ones

        eps = finfo(x.dtype).eps
        n = self.forward_shape(tuple(x.shape))[-1]
        r = _vec_to_tril(x.tanh().clamp(min=-1 + eps, max=1 - eps), n, -1)
        left = (1 - r.pow(2)).sqrt().cumprod(-1)
        left = cat([ones(*left.shape[:-1], 1, dtype=x.dtype), left[..., :-1]], -1)
        return (r + eye(n, dtype=x.dtype)) * left

    def _inverse(self, y):
        from .. import cat, ones

        rest = 1 - (y * y).cumsum(-1)
        rest = cat([ones(*rest.shape[:-1], 1, dtype=y.dtype), rest[..., :-1]], -1)
        t = _tril_to_vec(y, -1) / _tril_to_vec(rest, -1).sqrt()
        return ((1 + t) / (1 - t)).log() / 2   # atanh

    def log_abs_det_jacobian(self, x, y):
        from ..nn import functional as NF

        stick = 0.5 * _tril_to_vec(1 - (y * y).cumsum(-1), -2).log().sum(-1)
        tanh = -2 * (x + NF.softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n_in = shape[-1]
        d = round((0.25 + 2 * n_in) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n_in:
            raise ValueError("Input is not a flattend lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)

