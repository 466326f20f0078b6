"""torch.nn.utils.parametrizations (torch 1.13: orthogonal, spectral_norm) on parametrize.py:
the modules compute the weight from its original on every read, with autograd through them."""
from enum import Enum, auto

from ... import _C
from ..._grad_mode import no_grad
from .. import functional as F
from ..modules.module import Module
from . import parametrize

__all__ = ["orthogonal", "spectral_norm"]


def _eye(n, like):
    from ... import eye

    return eye(n, dtype=like.dtype)


def _householder_product(A, tau):
    """The first k columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^T with v_i = (0,..,0, 1,
    A[i+1:, i]) (LAPACK's orgqr, torch.linalg.householder_product), composed so autograd runs
    through it. A: [..., n, k], tau: [..., k]."""
    from ... import cat, zeros

    n, k = A.shape[-2], A.shape[-1]
    q = _eye(n, A)[:, :k].expand(*A.shape)
    for i in range(k - 1, -1, -1):
        parts = [zeros(*A.shape[:-2], i, dtype=A.dtype)] if i else []
        v = cat(parts + [A.new_ones(*A.shape[:-2], 1), A[..., i + 1:, i]], -1)   # [..., n]
        proj = (v.unsqueeze(-1) * q).sum(-2, keepdim=True)                      # v^T q: [..., 1, k]
        q = q - tau[..., i].unsqueeze(-1).unsqueeze(-1) * v.unsqueeze(-1) * proj
    return q


def _geqrf_signed(Q):
    """LAPACK's geqrf of a matrix or batch (numpy's raw QR: the reflectors below the diagonal, R
    above it), the diagonal replaced by the signs the householder map multiplies the columns by
    (R's diagonal's, flipped where a reflector is trivial, tau = 0), as torch's right_inverse."""
    import numpy as np

    from ... import from_numpy

    a = Q.detach().numpy().astype(np.float64)
    flat = a.reshape(-1, *a.shape[-2:])
    hs, taus = [], []
    for m in flat:
        h, tau = np.linalg.qr(m, mode="raw")
        hs.append(h.T)
        taus.append(tau)
    h, tau = np.stack(hs), np.stack(taus)
    k = min(h.shape[-2:])
    idx = np.arange(k)
    h[:, idx, idx] = np.sign(h[:, idx, idx]) * np.where(tau[:, :k] == 0, -1.0, 1.0)
    return from_numpy(np.ascontiguousarray(h.reshape(a.shape))).to(Q.dtype)


def _is_orthogonal(Q):
    from ... import finfo

    n, k = Q.shape[-2], Q.shape[-1]
    eps = 10. * n * finfo(Q.dtype).eps
    return bool(((Q.mT @ Q) - _eye(k, Q)).abs().max().item() <= eps)


def _make_orthogonal(A):
    """The Q of A's QR, its columns' signs fixed so R's diagonal is positive (unique for full rank)."""
    from ... import linalg

    q, r = linalg.qr(A)
    return q * r.diagonal(dim1=-2, dim2=-1).sign().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """An orthogonal (or, non-square, orthonormal-columns) matrix from an unconstrained one: the
    exponential or Cayley map of the skew-symmetric part of its lower triangle, or its lower
    triangle as Householder reflectors; with the trivialization, times a stored base."""

    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        if weight.is_complex() and orthogonal_map == _OrthMaps.householder:
            raise ValueError("The householder parametrization does not support complex tensors.")
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        from ... import cat, linalg

        n, k = X.shape[-2], X.shape[-1]
        transposed = n < k
        if transposed:
            X, n, k = X.mT, k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], -1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = linalg.matrix_exp(A)
            else:
                Id = _eye(n, A)
                Q = linalg.solve(Id - 0.5 * A, Id + 0.5 * A)
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2. / (1. + (A * A).sum(dim=-2))
            Q = _householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if "base" in self._buffers:
            Q = self.base @ Q
        return Q.mT if transposed else Q

    def right_inverse(self, Q):
        from ... import cat, eye, randn

        with no_grad():
            if Q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                                 f"Got a tensor of shape {Q.shape}.")
            Q_init = Q
            n, k = Q.shape[-2], Q.shape[-1]
            transpose = n < k
            if transpose:
                Q, n, k = Q.mT, k, n
            if "base" not in self._buffers:
                if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                A = _geqrf_signed(Q)
                return A.mT if transpose else A
            if n == k:
                Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
            else:   # complete the columns to a square orthogonal base with random ones
                N = randn(*(tuple(Q.shape[:-2]) + (n, n - k)), dtype=Q.dtype)
                Q = _make_orthogonal(cat([Q, N], -1))
            self.base = Q
            # -I of Q_init's shape: the original whose image under each map is the identity
            return -eye(*Q_init.shape[-2:], dtype=Q_init.dtype).expand(*Q_init.shape).clone()


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.TensorBase):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        square = weight.shape[-2] == weight.shape[-1]
        orthogonal_map = "matrix_exp" if square or weight.is_complex() else "householder"
    kind = getattr(_OrthMaps, orthogonal_map, None)
    if kind is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    parametrize.register_parametrization(module, name, _Orthogonal(weight, kind, use_trivialization=use_trivialization),
                                         unsafe=True)
    return module


def _as_matrix(weight, dim):
    if dim != 0:
        weight = weight.permute(dim, *(d for d in range(weight.ndim) if d != dim))
    return weight.flatten(1)


class _SpectralNorm(Module):
    """weight / sigma, sigma its largest singular value estimated by power iteration (Miyato et
    al. 2018) on the buffers _u, _v: n_power_iterations more in each training forward."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            from ... import randn

            self.n_power_iterations = n_power_iterations
            w = _as_matrix(weight, self.dim)
            h, wd = w.shape
            self.register_buffer("_u", F.normalize(randn(h, dtype=w.dtype), dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(randn(wd, dtype=w.dtype), dim=0, eps=eps))
            self._power_method(w, 15)

    def _power_method(self, w, n):
        from ... import mv

        with no_grad():
            for _ in range(n):
                self._u.copy_(F.normalize(mv(w, self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mv(w.t(), self._u), dim=0, eps=self.eps))

    def forward(self, weight):
        from ... import dot, mv

        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        w = _as_matrix(weight, self.dim)
        if self.training:
            self._power_method(w, self.n_power_iterations)
        sigma = dot(self._u.clone(), mv(w, self._v.clone()))
        return weight / sigma

    def right_inverse(self, value):
        return value


def _transposed_conv(module):
    from .. import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d

    return isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    weight = getattr(module, name, None)
    if not isinstance(weight, _C.TensorBase):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if _transposed_conv(module) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
