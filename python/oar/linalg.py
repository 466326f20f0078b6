"""torch.linalg on LAPACK (ops of the table in builds with OpenBLAS: det, slogdet, inv, cholesky,
solve, solve_triangular, lu_factor, lu_unpack, lu_solve, eigh, svd, qr, lstsq, matrix_exp, cholesky_ex,
ldl_factor, ldl_solve, geqrf, householder_product, ormqr, eig), what is
written over them (lu, eigvalsh, svdvals, pinv, matrix_rank, matrix_norm's spectral norms), and cross,
vector_norm and vecdot as compositions. eig and eigvals return oar's complex tensors (pairs of real
ones, _complex.py), so their gradients reach a real input through the parts. Operands broadcast over their batch dims here; the ops take
matrices with equal batch dims."""
import collections

from . import _compositions as K
from . import _creation as C
from . import _functions as F
from ._ops import ID

__all__ = ["cross", "vector_norm", "matrix_norm", "norm", "vecdot", "det", "slogdet", "inv", "solve", "cholesky",
           "solve_triangular", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "eigh", "eigvalsh", "svd", "svdvals",
           "qr", "lstsq", "pinv", "matrix_rank", "matrix_exp", "matrix_power", "multi_dot", "cond", "inv_ex",
           "solve_ex", "vander", "tensorinv", "tensorsolve", "diagonal", "matmul", "LinAlgError", "cholesky_ex",
           "ldl_factor", "ldl_factor_ex", "ldl_solve", "householder_product", "eig", "eigvals"]
_SignLogAbsDet = collections.namedtuple("slogdet", ["sign", "logabsdet"])
_LUFactor = collections.namedtuple("linalg_lu_factor", ["LU", "pivots"])
_LUFactorEx = collections.namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_LU = collections.namedtuple("linalg_lu", ["P", "L", "U"])
_Eigh = collections.namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
_SVD = collections.namedtuple("linalg_svd", ["U", "S", "Vh"])
_QR = collections.namedtuple("linalg_qr", ["Q", "R"])
_Lstsq = collections.namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
_InvEx = collections.namedtuple("linalg_inv_ex", ["inverse", "info"])
_SolveEx = collections.namedtuple("linalg_solve_ex", ["result", "info"])
_CholeskyEx = collections.namedtuple("linalg_cholesky_ex", ["L", "info"])
_LDLFactor = collections.namedtuple("linalg_ldl_factor", ["LD", "pivots"])
_LDLFactorEx = collections.namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
_Eig = collections.namedtuple("linalg_eig", ["eigenvalues", "eigenvectors"])
_Geqrf = collections.namedtuple("geqrf", ["a", "tau"])
LinAlgError = RuntimeError  # torch.linalg.LinAlgError is a RuntimeError too; oar's errors are RuntimeErrors


def _has(name):
    if name not in ID:
        raise RuntimeError(f"linalg.{name[7:]}: this build has no LAPACK; rebuild oar with OpenBLAS")


def _float(A):
    return A if A.dtype.is_floating_point else A.to(F.D.float32)


def _lapack(name, A, **attrs):
    _has(name)
    return F.call(name, (_float(A),), attrs or None)


def _mT(x):
    return x.transpose(-2, -1)


def _batched(*ts):
    """the matrices of ts (each [..., r, c]) expanded to one broadcast batch shape"""
    batch = K.broadcast_shapes(*[t.shape[:-2] for t in ts])
    return [t.expand(*batch, *t.shape[-2:]) if tuple(t.shape[:-2]) != tuple(batch) else t for t in ts]


def _vector_rhs(A, B):
    """torch's rule: B is a batch of vectors when it is 1-d or has A's shape without the last dim"""
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve2(name, A, B, attrs=None):
    """an op solving A X = B, with B possibly vectors, over broadcast batch dims"""
    _has(name)
    A, B = _float(A), _float(B)
    vec = _vector_rhs(A, B)
    if vec:
        B = B.unsqueeze(-1)
    A, B = _batched(A, B)
    X = F.call(name, (A, B), attrs)
    return X.squeeze(-1) if vec else X


def det(A):
    return _lapack("linalg_det", A)


def slogdet(A):
    """(sign, log|det|); the sign is 0 for a singular matrix, as torch"""
    return _SignLogAbsDet(*_lapack("linalg_slogdet", A))


def inv(A):
    return _lapack("linalg_inv", A)


def solve(A, B, *, left=True, out=None):
    """X with A X = B (X A = B when left=False) by LU with partial pivoting (gesv); a singular A raises
    torch's message"""
    if left:
        X = _solve2("linalg_solve", A, B)
    else:
        X = _mT(_solve2("linalg_solve", _mT(A), _mT(B)))
    return _out(X, out)


def _out(X, out):
    if out is None:
        return X
    out.copy_(X)
    return out


def solve_triangular(A, B, *, upper, left=True, unitriangular=False, out=None):
    """X with A X = B (X A = B when left=False) reading one triangle of A (trsm); B is a matrix"""
    if left:
        X = _solve2("linalg_solve_triangular", A, B, {"upper": upper, "unitriangular": unitriangular})
    else:
        X = _mT(_solve2("linalg_solve_triangular", _mT(A), _mT(B),
                        {"upper": not upper, "unitriangular": unitriangular}))
    return _out(X, out)


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of getrf: pivots are 1-based int32, info > 0 where U has a zero pivot"""
    if not pivot:
        raise RuntimeError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")
    return _LUFactorEx(*_lapack("linalg_lu_factor", A, check_errors=check_errors))


def lu_factor(A, *, pivot=True):
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot, check_errors=True)
    return _LUFactor(LU, pivots)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """torch.lu_unpack: (P, L, U) from lu_factor's outputs"""
    _has("linalg_lu_unpack")
    P, L, U = F.call("linalg_lu_unpack", (LU_data, LU_pivots))
    empty = C.empty(0, dtype=LU_data.dtype)
    return _LU(P if unpack_pivots else empty, L if unpack_data else empty, U if unpack_data else empty)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U; differentiable for square A"""
    LU, pivots, _ = lu_factor_ex(A, pivot=pivot)
    return _LU(*lu_unpack(LU, pivots))


def lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """X with A X = B from A's lu_factor (A^T X = B when adjoint; X A = B when left=False)"""
    _has("linalg_lu_solve")
    if not left:
        return _out(_mT(lu_solve(LU, pivots, _mT(B), adjoint=not adjoint)), out)
    B = _float(B)
    batch = K.broadcast_shapes(LU.shape[:-2], B.shape[:-2])
    if tuple(LU.shape[:-2]) != tuple(batch):
        LU = LU.expand(*batch, *LU.shape[-2:])
        pivots = pivots.expand(*batch, pivots.shape[-1])
    if tuple(B.shape[:-2]) != tuple(batch):
        B = B.expand(*batch, *B.shape[-2:])
    return _out(F.call("linalg_lu_solve", (LU, pivots, B), {"adjoint": adjoint}), out)


def eigh(A, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of symmetric A from its lower (UPLO='L') or
    upper triangle (syevd); each vector is unique up to sign"""
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    return _Eigh(*_lapack("linalg_eigh", A, upper=UPLO == "U"))


def eigvalsh(A, UPLO="L"):
    return eigh(A, UPLO).eigenvalues


def svd(A, full_matrices=True, *, driver=None):
    """(U, S, Vh) with A = U diag(S) Vh, S descending (gesdd); singular vectors are unique up to sign"""
    if driver is not None:
        raise RuntimeError("linalg.svd: keyword argument driver= is only supported on CUDA inputs with cuSOLVER "
                           "backend.")
    return _SVD(*_lapack("linalg_svd", A, full_matrices=full_matrices))


def svdvals(A, *, driver=None):
    return svd(A, False, driver=driver).S


def qr(A, mode="reduced"):
    """(Q, R) with A = Q R (geqrf + orgqr); mode 'reduced', 'complete' or 'r' (Q empty)"""
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    return _QR(*_lapack("linalg_qr", A, mode=mode))


def _tolerance(S_max, A, atol, rtol):
    """torch's cutoff max(atol, rtol * S_max), rtol defaulting to eps * max(m, n) when neither is given"""
    if rtol is None:
        rtol = F.D.finfo(A.dtype).eps * max(A.shape[-2], A.shape[-1]) if atol is None or atol == 0 else 0.0
    cut = S_max * rtol
    if atol is not None:
        cut = F.where(cut > atol, cut, atol if hasattr(atol, "shape") else K._scalar_like(float(atol), cut))
    return cut


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """the pseudo-inverse through svd (eigh when hermitian): singular values at or below the cutoff
    count as zero"""
    A = _float(A)
    if rcond is not None:
        rtol = rcond
    if hermitian:
        L, V = eigh(A)
        absL = L.abs()
        keep = absL > _tolerance(absL.amax(-1, keepdim=True), A, atol, rtol)
        inv_l = F.where(keep, 1.0 / F.where(keep, L, K._scalar_like(1.0, L)), K._scalar_like(0.0, L))
        return _out(F.matmul(V * inv_l.unsqueeze(-2), _mT(V)), out)
    U, S, Vh = svd(A, full_matrices=False)
    if S.shape[-1] == 0:
        return _out(C.zeros(*A.shape[:-2], A.shape[-1], A.shape[-2], dtype=A.dtype), out)
    keep = S > _tolerance(S.amax(-1, keepdim=True), A, atol, rtol)
    inv_s = F.where(keep, 1.0 / F.where(keep, S, K._scalar_like(1.0, S)), K._scalar_like(0.0, S))
    return _out(F.matmul(_mT(Vh) * inv_s.unsqueeze(-2), _mT(U)), out)


def matrix_rank(A, *, atol=None, rtol=None, hermitian=False, tol=None, out=None):
    """the number of singular values (|eigenvalues| when hermitian) above torch's cutoff, as int64"""
    A = _float(A)
    if tol is not None:
        atol, rtol = tol, 0.0
    S = eigvalsh(A).abs() if hermitian else svdvals(A)
    if S.shape[-1] == 0:
        return _out(C.zeros(*A.shape[:-2], dtype=F.D.int64), out)
    cut = _tolerance(S.amax(-1, keepdim=True), A, atol, rtol)
    return _out((S > cut).sum(-1), out)


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
    """torch.linalg.matrix_norm: 'fro', 'nuc' (sum of singular values), 2 / -2 (largest / smallest),
    inf / -inf (max / min row sum of |A|), 1 / -1 (max / min column sum)"""
    if dtype is not None:
        A = A.to(dtype)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {tuple(dim)}")
    d0, d1 = (d % A.ndim for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return vector_norm(A, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        S = svdvals(K.movedim(A, (d0, d1), (-2, -1)))
        r = S.sum(-1) if ord == "nuc" else S.amax(-1) if ord == 2 else S.amin(-1)
        return r.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1)) if keepdim else r
    if ord in (float("inf"), float("-inf"), 1, -1):
        summed, extreme = (d1, d0) if abs(ord) == float("inf") else (d0, d1)
        r = A.abs().sum(summed, keepdim=True)
        r = r.amax(extreme, keepdim=True) if ord > 0 else r.amin(extreme, keepdim=True)
        return r if keepdim else r.squeeze(max(d0, d1)).squeeze(min(d0, d1))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """torch.linalg.norm: the 2-norm of the flattened input by default; a vector norm over one dim;
    a matrix norm over two (or of a 2-d input when ord is given)"""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is None and ord is not None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        dim = tuple(range(A.ndim))
    if dim is not None and len(dim) == 2:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq: the least-squares solution (minimum norm when A is rank-deficient) by LAPACK's
    driver of that name (gelsy by default, as torch's CPU; gelsd, gelss; gels for full rank). What is
    shown beside the solution follows torch's CPU drivers."""
    _has("linalg_lstsq")
    drv = "gelsy" if driver is None else driver
    if drv not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    A, B = _float(A), _float(B)
    vec = B.ndim == A.ndim - 1
    if vec:
        B = B.unsqueeze(-1)
    if A.shape[-2] != B.shape[-2]:
        raise RuntimeError(f"torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    A, B = _batched(A, B)
    m, n = A.shape[-2], A.shape[-1]
    if rcond is None:
        rcond = F.D.finfo(A.dtype).eps * max(m, n)
    X, res, rank, sv = F.call("linalg_lstsq", (A, B), {"driver": drv,
                                                        "rcond": float(rcond)})
    if vec:
        X, res = X.squeeze(-1), res.squeeze(-1)
    empty = C.empty(0, dtype=A.dtype)
    show_res = m > n and drv != "gelsy" and (drv == "gels" or bool((rank == n).all()))
    # torch differentiates the solution only (the op's rule also covers residuals and singular values)
    return _Lstsq(X, res.detach() if show_res else empty, C.empty(0, dtype=F.D.int64) if drv == "gels" else rank,
                  sv.detach() if drv in ("gelsd", "gelss") else empty)


def matrix_exp(A):
    """exp(A) by scaling and squaring with a Padé approximant"""
    return _lapack("linalg_matrix_exp", A)


def vecdot(x, y, *, dim=-1):
    return F.sum(F.mul(x, y), dim)


def _square(name, A):
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2] if A.ndim > 1 else 1} by {A.shape[-1] if A.ndim else 1} matrices")


def _eye_like(A):
    n = A.shape[-1]
    return C.eye(n, dtype=A.dtype).expand(*A.shape[:-2], n, n)


def matrix_power(A, n):
    """A to the integer power n by repeated squaring (n < 0: of inv(A); n = 0: the identity)"""
    _square("matrix_power", A)
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: expected an int exponent, got {type(n).__name__}")
    if n == 0:
        return _eye_like(A).clone()
    base, n = (inv(A), -n) if n < 0 else (A, n)
    result = None
    while n:
        if n & 1:
            result = base if result is None else F.matmul(result, base)
        n >>= 1
        if n:
            base = F.matmul(base, base)
    return result


def multi_dot(tensors, *, out=None):
    """the product of a chain of matrices (the first may be a row vector, the last a column vector),
    multiplied in the order with the fewest scalar products, as torch's"""
    ts = list(tensors)
    if len(ts) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(ts)}")
    first_vec, last_vec = ts[0].ndim == 1, ts[-1].ndim == 1
    if first_vec:
        ts[0] = ts[0].unsqueeze(0)
    if last_vec:
        ts[-1] = ts[-1].unsqueeze(-1)
    for i, t in enumerate(ts):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
    k = len(ts)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):  # the classic matrix-chain order
        for i in range(k - length):
            j = i + length
            cost[i][j] = None
            for m in range(i, j):
                c = cost[i][m] + cost[m + 1][j] + dims[i] * dims[m + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, m

    def product(i, j):
        return ts[i] if i == j else F.matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    r = product(0, k - 1)
    if first_vec:
        r = r.squeeze(0)
    if last_vec:
        r = r.squeeze(-1)
    return _out(r, out)


def cond(A, p=None):
    """the condition number: the ratio of extreme singular values (p None, 2, -2), else
    norm(A, p) * norm(inv(A), p) for square A"""
    A = _float(A)
    if p is None or p in (2, -2):
        S = svdvals(A)
        hi, lo = S.amax(-1), S.amin(-1)
        return hi / lo if p != -2 else lo / hi
    _square("cond", A)
    return matrix_norm(A, p) * matrix_norm(inv(A), p)


def inv_ex(A, *, check_errors=False):
    """(inverse, info): info > 0 for a singular matrix (its zero pivot's 1-based index), where inv raises"""
    _square("inv_ex", A)
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        _singular("linalg.inv_ex", info, "The diagonal element {} is zero, the inversion could not be completed "
                  "because the input matrix is singular.")
    return _InvEx(lu_solve(LU, pivots, _eye_like(LU)), info)


def _singular(who, info, message):
    """torch's error for the first singular matrix of a batch (info: getrf's per matrix)"""
    flat = info.reshape(-1).tolist()
    bad = next((i for i, v in enumerate(flat) if v > 0), None)
    if bad is not None:
        where = f"(Batch element {bad}): " if info.ndim else ""
        raise RuntimeError(f"{who}: {where}" + message.format(flat[bad]))


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) of solve, info > 0 for a singular A instead of an error"""
    _square("solve_ex", A)
    LU, pivots, info = lu_factor_ex(A)
    if check_errors:
        _singular("torch.linalg.solve_ex", info, "The solver failed because the input matrix is singular.")
    vec = left and _vector_rhs(A, B)
    X = lu_solve(LU, pivots, B.unsqueeze(-1) if vec else B, left=left)
    return _SolveEx(X.squeeze(-1) if vec else X, info)


def vander(x, *, N=None):
    """the Vandermonde matrix of x's last dim: columns x^0, x^1, ..., x^(N-1)"""
    n = x.shape[-1] if N is None else N
    if n < 1:
        raise RuntimeError("linalg.vander: N must be greater than 1.")
    return x.unsqueeze(-1) ** C.arange(n, dtype=x.dtype)


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def tensorinv(A, ind=2):
    """the inverse of A viewed as a matrix of shape[:ind] x shape[ind:] rows and columns"""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    if _numel(rows) != _numel(cols):
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {_numel(cols)} != {_numel(rows)}")
    return inv(A.reshape(_numel(rows), _numel(cols))).reshape(*cols, *rows)


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B, X of shape A.shape[B.ndim:] (dims of A moved to the end first)"""
    if dims is not None:
        keep = [d % A.ndim for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in keep], *keep)
    rest = tuple(A.shape[B.ndim:])
    return solve(A.reshape(_numel(tuple(B.shape)), _numel(rest)), B.reshape(-1)).reshape(*rest)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    return K.diagonal(A, offset, dim1, dim2)


def matmul(input, other, *, out=None):
    return _out(F.matmul(input, other), out)


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info) of potrf reading A's lower triangle: info k > 0 where the leading minor of order k
    is not positive-definite (L then holds what the factorization reached), instead of an error"""
    L, info = _lapack("linalg_cholesky_ex", A)
    if check_errors:
        _singular("linalg.cholesky_ex", info, "The factorization could not be completed because the input is not "
                  "positive-definite (the leading minor of order {} is not positive-definite).")
    return _CholeskyEx(_mT(L) if upper else L, info)


def ldl_factor_ex(A, *, hermitian=False, check_errors=False):
    """(LD, pivots, info) of sytrf (Bunch-Kaufman) on A's lower triangle: LD holds unit-lower L below
    the diagonal and the 1x1 / 2x2 blocks of D on and beside it; pivots are LAPACK's (1-based, a
    negative pair marks a 2x2 block); info k > 0 where D[k-1, k-1] is zero. hermitian is the same
    factorization for real A."""
    LD, pivots, info = _lapack("linalg_ldl_factor", A)
    if check_errors:
        _ldl_singular("torch.linalg.ldl_factor_ex", info)
    return _LDLFactorEx(LD, pivots, info)


def _ldl_singular(who, info):
    # torch 1.13 fails an internal assert here ("Unknown error code"); this names the cause
    _singular(who, info, "The factorization could not be completed because the input is singular (the diagonal "
              "element {} of D is zero).")


def ldl_factor(A, *, hermitian=False):
    LD, pivots, info = ldl_factor_ex(A, hermitian=hermitian)
    _ldl_singular("torch.linalg.ldl_factor", info)
    return _LDLFactor(LD, pivots)


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """X with A X = B from A's ldl_factor (sytrs); B is a matrix (..., n, k), batch dims broadcast"""
    _has("linalg_ldl_solve")
    if B.dtype is not LD.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type {_scalar_type(B)} and A of "
                           f"type {_scalar_type(LD)} instead.")
    if pivots.dtype is not F.D.int32:  # torch takes int64 pivots too
        pivots = pivots.to(F.D.int32)
    batch = K.broadcast_shapes(LD.shape[:-2], B.shape[:-2])
    if tuple(LD.shape[:-2]) != tuple(batch):
        LD = LD.expand(*batch, *LD.shape[-2:])
        pivots = pivots.expand(*batch, pivots.shape[-1])
    if tuple(B.shape[:-2]) != tuple(batch):
        B = B.expand(*batch, *B.shape[-2:])
    return _out(F.call("linalg_ldl_solve", (LD, pivots, B)), out)


_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16", "int64": "Long",
                "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _scalar_type(t):
    """torch's name of t's dtype in its messages (Float, Double, Long...)"""
    return _SCALAR_TYPE.get(t.dtype.name, t.dtype.name)


def _check_reflectors(who, A, tau):
    """torch's checks of the reflectors' input and tau (no broadcasting)"""
    if A.ndim < 2:
        raise RuntimeError(f"{who}: input must have at least 2 dimensions.")
    if A.ndim - tau.ndim != 1:
        raise RuntimeError(f"{who}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{who}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{who}: tau dtype {_scalar_type(tau)} does not match input dtype {_scalar_type(A)}")


def householder_product(A, tau, *, out=None):
    """the first n columns of H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i column i of A below the
    diagonal with 1 on it (orgqr): geqrf's outputs give qr's Q"""
    _has("linalg_householder_product")
    who = "torch.linalg.householder_product"
    if A.ndim >= 2 and A.shape[-2] < A.shape[-1]:
        raise RuntimeError(f"{who}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if A.ndim >= 2 and tau.ndim >= 1 and A.shape[-1] < tau.shape[-1]:
        raise RuntimeError(f"{who}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    _check_reflectors(who, A, tau)
    return _out(F.call("linalg_householder_product", (A, tau)), out)


def _real_matrix(who, A):
    from ._complex import ComplexTensor

    if isinstance(A, ComplexTensor):
        raise RuntimeError(f"{who}: complex inputs are not offered (oar's complex tensors are pairs of real ones); "
                           "pass a real matrix")
    return _float(A)


def eig(A):
    """(eigenvalues, eigenvectors) of a real square A by geev, as complex tensors (complex64 for
    float32): A V = V diag(L), LAPACK's order, each vector of unit norm with its largest component
    real. Differentiable (torch's rule) for losses that do not depend on the vectors' phases."""
    from ._complex import ComplexTensor

    _has("linalg_eig")
    A = _real_matrix("linalg.eig", A)
    _square("eig", A)
    lr, li, vr, vi = F.call("linalg_eig", (A,))
    return _Eig(ComplexTensor(lr, li), ComplexTensor(vr, vi))


def eigvals(A):
    return eig(A).eigenvalues


def _geqrf(A):
    """torch.geqrf: (a, tau), R on and above a's diagonal and the Householder reflectors below"""
    _has("linalg_geqrf")
    if A.ndim < 2:
        raise RuntimeError("torch.geqrf: input must have at least 2 dimensions.")
    return _Geqrf(*F.call("linalg_geqrf", (_float(A),)))


def _ormqr(A, tau, C, left=True, transpose=False):
    """torch.ormqr: Q C (C Q when not left; Q^T when transpose), Q the product of A's reflectors"""
    _has("linalg_ormqr")
    who = "torch.ormqr"
    if A.ndim < 2 or C.ndim < 2:
        raise RuntimeError(f"{who}: {'input' if A.ndim < 2 else 'other'} must have at least 2 dimensions.")
    side = -2 if left else -1
    if C.shape[side] < tau.shape[-1]:
        raise RuntimeError(f"{who}: other.shape[{side}] must be greater than or equal to tau.shape[-1]")
    if C.shape[side] != A.shape[-2]:
        raise RuntimeError(f"{who}: other.shape[{side}] must be equal to input.shape[-2]")
    if tau.shape[-1] > A.shape[-1]:
        raise RuntimeError(f"{who}: tau.shape[-1] must be less than or equal to input.shape[-1]")
    if A.ndim - tau.ndim != 1:
        raise RuntimeError(f"{who}: Expected tau to have one dimension less than input, but got tau.ndim equal to "
                           f"{tau.ndim} and input.ndim is equal to {A.ndim}")
    if C.ndim != A.ndim:
        raise RuntimeError(f"{who}: Expected other to have the same number of dimensions as input, but got "
                           f"other.ndim equal to {C.ndim} and input.ndim is equal to {A.ndim}")
    if tuple(C.shape[:-2]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{who}: Expected batch dimensions of other to be equal to input.shape[:-2], but got "
                           f"{list(C.shape[:-2])}")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{who}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    for name, t in (("tau", tau), ("other", C)):  # torch's wording, "dtype" and the name unspaced
        if t.dtype is not A.dtype:
            raise RuntimeError(f"{who}: Expected input and {name} to have the same dtype, but input has dtype"
                               f"{_scalar_type(A)} and {name} has dtype {_scalar_type(t)}")
    return F.call("linalg_ormqr", (A, tau, C), {"left": left, "transpose": transpose})
