"""torch.linalg: the functions of it that oar offers (cross, vector_norm, matrix_norm's Frobenius
norm, vecdot), as compositions of oar's ops."""
from . import _compositions as K
from . import _functions as F

__all__ = ["cross", "vector_norm", "matrix_norm", "norm", "vecdot"]


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
