"""torch.linalg: det, slogdet, inv, solve and cholesky on LAPACK (ops of the table in builds with
OpenBLAS), and cross, vector_norm, matrix_norm's Frobenius norm and vecdot as compositions."""
import collections

from . import _compositions as K
from . import _functions as F
from ._ops import ID

__all__ = ["cross", "vector_norm", "matrix_norm", "norm", "vecdot", "det", "slogdet", "inv", "solve", "cholesky"]
_SignLogAbsDet = collections.namedtuple("slogdet", ["sign", "logabsdet"])


def _lapack(name, A):
    if name not in ID:
        raise RuntimeError(f"linalg.{name[7:]}: this build has no LAPACK; rebuild oar with OpenBLAS")
    A = A if A.dtype.is_floating_point else A.to(F.D.float32)
    return F.call(name, (A,))


def det(A):
    return _lapack("linalg_det", A)


def slogdet(A):
    """(sign, log|det|); the sign is 0 for a singular matrix, as torch"""
    return _SignLogAbsDet(*_lapack("linalg_slogdet", A))


def inv(A):
    return _lapack("linalg_inv", A)


def solve(A, B, *, left=True):
    """X with A X = B (X A = B when left=False), through inv(A); B may be a vector"""
    Ai = inv(A)
    if not left:
        return F.matmul(B, Ai)
    if B.ndim == A.ndim - 1:
        return F.matmul(Ai, B.unsqueeze(-1)).squeeze(-1)
    return F.matmul(Ai, B)


def cholesky(A, *, upper=False):
    L = _lapack("linalg_cholesky", A)
    return L.transpose(-2, -1) if upper else L


def cross(input, other, *, dim=-1):
    """torch.linalg.cross: the cross product along dim (default -1, unlike torch.cross)"""
    return K.cross(input, other, dim=dim)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    if dim is None:
        x, dim = x.reshape(-1), 0
    return F.norm(x, ord, dim, keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    if ord != "fro":
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} is not offered (only 'fro')")
    return vector_norm(A, 2, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: the 2-norm of the flattened input by default; a vector norm over one dim;
    the Frobenius norm over two"""
    if ord == "fro" or (ord is None and dim is not None and not isinstance(dim, int) and len(dim) == 2):
        return matrix_norm(A, "fro", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def vecdot(x, y, *, dim=-1):
    return F.sum(F.mul(x, y), dim)
