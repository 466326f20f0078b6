"""torch.linalg on LAPACK beside torch 1.13 (builds with OpenBLAS). Outputs that are unique (solves, LU
with partial pivoting, eigen- and singular values, norms, pinv, lstsq, matrix_exp) are compared with
torch's, values and the gradient of sum(out * g). Eigen- and singular vectors and Q are unique only up
to sign: for them the tests check invariants (reconstruction, orthogonality) and the gradients of
losses that do not depend on the signs, against torch's and, for eigh (whose input is read from one
triangle), against finite differences along symmetric directions."""
import numpy as np
import pytest

import oar

pytestmark = pytest.mark.skipif("linalg_svd" not in oar._ops.ID, reason="this build has no LAPACK (OpenBLAS)")
R = np.random.default_rng(14)


def rnd(*shape, dtype=np.float64):
    return R.standard_normal(shape).astype(dtype)


def spd(n, batch=(), dtype=np.float64):
    a = rnd(*batch, n, n)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def sym(n, batch=()):
    a = rnd(*batch, n, n)
    return a + np.swapaxes(a, -1, -2)


def well(n, batch=(), dtype=np.float64):
    """a well-conditioned general matrix"""
    return (rnd(*batch, n, n) + 2 * n ** 0.5 * np.eye(n)).astype(dtype)


def upper_tri(n, batch=()):
    return np.triu(rnd(*batch, n, n)) + 3 * np.eye(n)


# name: (arrays, call(lib, *tensors) -> tensor or tuple of tensors, differentiable)
CASES = {
    "solve": ([well(3), rnd(3, 2)], lambda L, a, b: L.linalg.solve(a, b), True),
    "solve_vector_batched": ([well(4, (2,)), rnd(2, 4)], lambda L, a, b: L.linalg.solve(a, b), True),
    "solve_broadcast": ([well(3, (2, 1)), rnd(4, 3, 2)], lambda L, a, b: L.linalg.solve(a, b), True),
    "solve_right_f32": ([well(3, (), np.float32), rnd(2, 3, dtype=np.float32)],
                        lambda L, a, b: L.linalg.solve(a, b, left=False), True),
    "solve_triangular_upper": ([upper_tri(4), rnd(4, 2)],
                               lambda L, a, b: L.linalg.solve_triangular(a, b, upper=True), True),
    "solve_triangular_lower_unit_right": ([rnd(2, 3, 3), rnd(2, 4, 3)], lambda L, a, b: L.linalg.solve_triangular(
        a, b, upper=False, left=False, unitriangular=True), True),
    "lu_factor": ([rnd(2, 4, 4)], lambda L, a: L.linalg.lu_factor(a).LU, True),
    "lu_factor_pivots": ([rnd(2, 4, 4)], lambda L, a: L.linalg.lu_factor(a).pivots, False),
    "lu_factor_wide": ([rnd(3, 5)], lambda L, a: L.linalg.lu_factor(a).LU, True),
    "lu_factor_tall": ([rnd(2, 5, 3)], lambda L, a: L.linalg.lu_factor(a).LU, True),
    "lu": ([rnd(3, 3)], lambda L, a: L.stack(list(L.linalg.lu(a))), True),
    "lu_tall": ([rnd(2, 5, 3)], lambda L, a: L.cat([t.flatten(-2) for t in L.linalg.lu(a)], -1), True),
    "lu_wide": ([rnd(3, 4)], lambda L, a: L.cat([t.flatten() for t in L.linalg.lu(a)]), True),
    "lu_solve": ([well(3, (2,)), rnd(2, 3, 2)],
                 lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b), True),
    "lu_solve_adjoint_right": ([well(3), rnd(2, 3)],
                               lambda L, a, b: L.linalg.lu_solve(*L.linalg.lu_factor(a), b, left=False, adjoint=True),
                               True),
    "lu_unpack_solve_old": ([well(3), rnd(3, 2)], lambda L, a, b: L.lu_solve(b, *L.lu(a)), True),
    "eigvalsh": ([sym(4, (2,))], lambda L, a: L.linalg.eigvalsh(a), True),
    # not symmetric: the values depend on which triangle is read
    "eigvalsh_upper_f32": ([rnd(3, 3, dtype=np.float32)], lambda L, a: L.linalg.eigvalsh(a, UPLO="U"), True),
    "eigvalsh_lower": ([rnd(2, 3, 3)], lambda L, a: L.linalg.eigvalsh(a), True),
    "svdvals": ([rnd(2, 5, 3)], lambda L, a: L.linalg.svdvals(a), True),
    "svdvals_wide_f32": ([rnd(3, 6, dtype=np.float32)], lambda L, a: L.linalg.svdvals(a), True),
    "lstsq_tall": ([rnd(2, 6, 3), rnd(2, 6, 2)], lambda L, a, b: L.linalg.lstsq(a, b).solution, True),
    "lstsq_wide_gelsd": ([rnd(3, 5), rnd(3, 2)], lambda L, a, b: L.linalg.lstsq(a, b, driver="gelsd").solution, True),
    "lstsq_residuals_gels": ([rnd(6, 3), rnd(6, 2)], lambda L, a, b: L.linalg.lstsq(a, b, driver="gels").residuals,
                             False),
    "lstsq_gelsd_all": ([rnd(2, 6, 3), rnd(2, 6, 2)], lambda L, a, b: L.cat(
        [L.linalg.lstsq(a, b, driver="gelsd").residuals, L.linalg.lstsq(a, b, driver="gelsd").singular_values], -1),
        False),
    "lstsq_rank_deficient": ([np.ones((5, 3)), rnd(5, 2)], lambda L, a, b: L.linalg.lstsq(a, b).solution, False),
    "lstsq_rank_deficient_wide_rank": ([np.ones((3, 5)), rnd(3, 2)], lambda L, a, b: L.linalg.lstsq(a, b).rank, False),
    "lstsq_gelss_all": ([rnd(2, 6, 3), rnd(2, 6, 2)], lambda L, a, b: L.cat(
        [L.linalg.lstsq(a, b, driver="gelss").residuals, L.linalg.lstsq(a, b, driver="gelss").singular_values], -1),
        False),
    "lstsq_gelss_solution": ([rnd(2, 6, 3), rnd(2, 6, 2)],
                             lambda L, a, b: L.linalg.lstsq(a, b, driver="gelss").solution, True),
    "lstsq_gelss_deficient": ([np.ones((5, 3)), rnd(5, 2)],
                              lambda L, a, b: L.linalg.lstsq(a, b, driver="gelss").solution, False),
    # torch 1.13 cannot differentiate a vector right-hand side (its rule indexes dim -2)
    "lstsq_vector": ([rnd(5, 3), rnd(5)], lambda L, a, b: L.linalg.lstsq(a, b).solution, False),
    "matrix_power_5": ([rnd(2, 3, 3) * 0.5], lambda L, a: L.linalg.matrix_power(a, 5), True),
    "matrix_power_neg": ([well(3)], lambda L, a: L.linalg.matrix_power(a, -3), True),
    "matrix_power_0": ([rnd(2, 3, 3)], lambda L, a: L.linalg.matrix_power(a, 0), False),
    "multi_dot": ([rnd(3), rnd(3, 8), rnd(8, 2), rnd(2, 5), rnd(5)],
                  lambda L, a, b, c, d, e: L.linalg.multi_dot([a, b, c, d, e]), True),
    "multi_dot_matrices_f32": ([rnd(4, 9, dtype=np.float32), rnd(9, 2, dtype=np.float32), rnd(2, 6, dtype=np.float32)],
                               lambda L, a, b, c: L.linalg.multi_dot([a, b, c]), True),
    "cond": ([well(4, (2,))], lambda L, a: L.linalg.cond(a), True),
    "cond_m2_rect": ([rnd(5, 3)], lambda L, a: L.linalg.cond(a, -2), True),
    # torch 1.13 cannot differentiate cond with a norm order (its inv_ex output is modified in place)
    "cond_fro": ([well(3)], lambda L, a: L.linalg.cond(a, "fro"), False),
    "cond_inf": ([well(3, (2,))], lambda L, a: L.linalg.cond(a, float("inf")), False),
    "cond_nuc_m1": ([well(3)], lambda L, a: L.linalg.cond(a, "nuc") + L.linalg.cond(a, -1), False),
    "inv_ex": ([well(3, (2,))], lambda L, a: L.linalg.inv_ex(a).inverse, True),
    "inv_ex_info": ([np.stack([np.ones((3, 3)), well(3)])], lambda L, a: L.linalg.inv_ex(a).info, False),
    "solve_ex": ([well(3), rnd(3)], lambda L, a, b: L.linalg.solve_ex(a, b).result, True),
    "solve_ex_info": ([np.stack([well(3), np.zeros((3, 3))]), rnd(2, 3, 2)],
                      lambda L, a, b: L.linalg.solve_ex(a, b).info, False),
    "vander": ([rnd(2, 4)], lambda L, x: L.linalg.vander(x), True),
    "vander_N": ([rnd(3)], lambda L, x: L.linalg.vander(x, N=5), True),
    "tensorinv": ([well(6).reshape(2, 3, 6)], lambda L, a: L.linalg.tensorinv(a, ind=2), True),
    "tensorsolve": ([well(6).reshape(2, 3, 6), rnd(2, 3)], lambda L, a, b: L.linalg.tensorsolve(a, b), True),
    "tensorsolve_dims": ([well(6).reshape(6, 2, 3).transpose(1, 2, 0).copy(), rnd(6)],
                         lambda L, a, b: L.linalg.tensorsolve(a, b, dims=(0, 1)), True),
    "diagonal": ([rnd(2, 3, 4)], lambda L, a: L.linalg.diagonal(a, offset=1), True),
    "matmul": ([rnd(2, 3, 4), rnd(4, 2)], lambda L, a, b: L.linalg.matmul(a, b), True),
    "pinv": ([rnd(2, 3, 5)], lambda L, a: L.linalg.pinv(a), True),
    # torch differentiates pinv(hermitian=True) as a general pinv; oar through eigh, which reads one
    # triangle: the two agree along symmetric directions (test_pinv_hermitian_gradient)
    "pinv_hermitian": ([spd(4)], lambda L, a: L.linalg.pinv(a, hermitian=True), False),
    "pinv_rank_deficient": ([np.outer(rnd(4), rnd(3))], lambda L, a: L.linalg.pinv(a), False),
    "pinverse": ([rnd(4, 3)], lambda L, a: L.pinverse(a), True),
    "matrix_rank": ([np.stack([np.outer(rnd(4), rnd(4)), rnd(4, 4), np.zeros((4, 4))])],
                    lambda L, a: L.linalg.matrix_rank(a), False),
    "matrix_rank_hermitian_tol": ([spd(4)], lambda L, a: L.stack([L.linalg.matrix_rank(a, hermitian=True),
                                                                  L.linalg.matrix_rank(a, atol=5.0)]), False),
    "matrix_norms": ([rnd(2, 3, 4)], lambda L, a: L.stack(
        [L.linalg.matrix_norm(a, o) for o in ("fro", "nuc", 2, -2, float("inf"), float("-inf"), 1, -1)]), True),
    "matrix_norm_dims_keepdim": ([rnd(3, 2, 4)], lambda L, a: L.cat([L.linalg.matrix_norm(
        a, o, dim=(2, 0), keepdim=True).flatten() for o in ("nuc", 2, 1, float("inf"))]), True),
    "norm_ord_2d": ([rnd(3, 4)], lambda L, a: L.stack([L.linalg.norm(a, o) for o in ("nuc", 2, 1, -1)]), True),
    "matrix_exp": ([rnd(2, 4, 4)], lambda L, a: L.linalg.matrix_exp(a), True),
    "matrix_exp_large_norm": ([3 * rnd(3, 3)], lambda L, a: L.matrix_exp(a), True),
    "matrix_exp_small_f32": ([0.01 * rnd(3, 3, dtype=np.float32)], lambda L, a: L.linalg.matrix_exp(a), True),
    "cholesky_solve": ([spd(3, (2,)), rnd(2, 3, 2)],
                       lambda L, a, b: L.cholesky_solve(b, L.linalg.cholesky(a)), True),
    "cholesky_solve_upper": ([spd(3), rnd(3, 2)],
                             lambda L, a, b: L.cholesky_solve(b, L.linalg.cholesky(a, upper=True), upper=True), True),
    "cholesky_inverse": ([spd(3)], lambda L, a: L.cholesky_inverse(L.linalg.cholesky(a)), True),
    "triangular_solve_transpose": ([upper_tri(3), rnd(3, 2)],
                                   lambda L, a, b: L.triangular_solve(b, a, transpose=True).solution, True),
    "svd_old_S": ([rnd(4, 3)], lambda L, a: L.svd(a).S, True),
    "qr_r_abs": ([rnd(5, 3)], lambda L, a: L.linalg.qr(a, mode="r").R.abs(), False),
}


def _tensors(lib, arrays, grad):
    return [lib.tensor(a).requires_grad_(grad) for a in arrays]


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(CASES))
def test_linalg_matches_torch(torch, name):
    arrays, call, differentiable = CASES[name]
    o_in, t_in = _tensors(oar, arrays, differentiable), _tensors(torch, arrays, differentiable)
    o_out, t_out = call(oar, *o_in), call(torch, *t_in)
    o, t = o_out.detach().numpy(), t_out.detach().numpy()
    assert o.shape == t.shape, f"{name}: shape {o.shape}, torch's {t.shape}"
    assert o.dtype == t.dtype, f"{name}: dtype {o.dtype}, torch's {t.dtype}"
    tol = 2e-4 if o.dtype == np.float32 else 1e-9
    np.testing.assert_allclose(o, t, rtol=tol, atol=tol, err_msg=name)
    if differentiable:
        g = R.standard_normal(t.shape).astype(t.dtype)
        (o_out * oar.tensor(g)).sum().backward()
        (t_out * torch.tensor(g)).sum().backward()
        for k, (oi, ti) in enumerate(zip(o_in, t_in)):
            assert oi.grad is not None, f"{name}: no gradient for input {k}"
            np.testing.assert_allclose(oi.grad.numpy(), ti.grad.numpy(), rtol=10 * tol, atol=10 * tol,
                                       err_msg=f"{name} d/d input {k}")


def _mT(x):
    return x.transpose(-2, -1)


def _orthonormal_columns(q):
    k = q.shape[-1]
    np.testing.assert_allclose((_mT(q) @ q).numpy(), np.broadcast_to(np.eye(k), (*q.shape[:-2], k, k)), atol=1e-10)


# gauge-invariant losses of each decomposition: they read the vectors only through products that a
# sign flip of a vector leaves unchanged
def _eigh_loss(L, lam, v, c):
    return (lam * lam).sum() + ((v * lam.unsqueeze(-2).sin()) @ _mT(v) * c).sum() + (v ** 4).sum()


def _svd_loss(L, u, s, vh, cu, cv):
    k = s.shape[-1]
    u, vh = u[..., :k], vh[..., :k, :]
    return s.exp().sum() + ((u @ _mT(u)) * cu).sum() + ((_mT(vh) @ vh) * cv).sum() + (u ** 4).sum() + \
        (vh ** 4).sum()


def _qr_loss(L, q, r, c):
    m = q.shape[-2]
    return ((q @ _mT(q)) * c[..., :m, :m]).sum() + (r * r * c[..., :r.shape[-2], :r.shape[-1]]).sum() + \
        (q ** 4).sum()


@pytest.mark.parametrize("batch,n,upper", [((), 4, False), ((2,), 3, True), ((2, 1), 5, False)])
def test_eigh_invariants_and_gradient(torch, batch, n, upper):
    a = sym(n, batch)
    c = rnd(*batch, n, n)
    A = oar.tensor(a, requires_grad=True)
    lam, v = oar.linalg.eigh(A, UPLO="U" if upper else "L")
    np.testing.assert_allclose(lam.detach().numpy(), np.linalg.eigvalsh(a), atol=1e-10)
    np.testing.assert_allclose((v * lam.unsqueeze(-2) @ _mT(v)).detach().numpy(), a, atol=1e-10)
    _orthonormal_columns(v.detach())
    _eigh_loss(oar, lam, v, oar.tensor(c)).backward()
    T = torch.tensor(a, requires_grad=True)
    _eigh_loss(torch, *torch.linalg.eigh(T, UPLO="U" if upper else "L"), torch.tensor(c)).backward()
    np.testing.assert_allclose(A.grad.numpy(), T.grad.numpy(), rtol=1e-8, atol=1e-8)
    # finite differences along a symmetric direction (eigh reads one triangle: only those are meaningful)
    d = sym(n, batch)

    def loss(x):
        with oar.no_grad():
            return _eigh_loss(oar, *oar.linalg.eigh(oar.tensor(x), UPLO="U" if upper else "L"), oar.tensor(c)).item()

    eps = 1e-6
    fd = (loss(a + eps * d) - loss(a - eps * d)) / (2 * eps)
    np.testing.assert_allclose((A.grad.numpy() * d).sum(), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape,full", [((5, 3), False), ((3, 5), False), ((2, 4, 4), True), ((2, 5, 3), True),
                                        ((3, 6), True)])
def test_svd_invariants_and_gradient(torch, shape, full):
    a = rnd(*shape)
    m, n = shape[-2:]
    k = min(m, n)
    cu, cv = rnd(*shape[:-2], m, m), rnd(*shape[:-2], n, n)
    A = oar.tensor(a, requires_grad=True)
    u, s, vh = oar.linalg.svd(A, full_matrices=full)
    assert tuple(u.shape[-2:]) == ((m, m) if full else (m, k)) and tuple(vh.shape[-2:]) == ((n, n) if full else (k, n))
    np.testing.assert_allclose(s.detach().numpy(), np.linalg.svd(a, compute_uv=False), atol=1e-10)
    np.testing.assert_allclose((u[..., :k] * s.unsqueeze(-2) @ vh[..., :k, :]).detach().numpy(), a, atol=1e-10)
    _orthonormal_columns(u.detach())
    _orthonormal_columns(_mT(vh.detach()))
    _svd_loss(oar, u, s, vh, oar.tensor(cu), oar.tensor(cv)).backward()
    T = torch.tensor(a, requires_grad=True)
    _svd_loss(torch, *torch.linalg.svd(T, full_matrices=full), torch.tensor(cu), torch.tensor(cv)).backward()
    np.testing.assert_allclose(A.grad.numpy(), T.grad.numpy(), rtol=1e-8, atol=1e-8)
    U, S, V = oar.svd(oar.tensor(a), some=not full)  # torch.svd: V, not Vh
    np.testing.assert_allclose((U[..., :k] * S.unsqueeze(-2) @ _mT(V[..., :k])).numpy(), a, atol=1e-10)


@pytest.mark.parametrize("shape,mode", [((5, 3), "reduced"), ((3, 5), "reduced"), ((2, 4, 4), "complete"),
                                        ((5, 3), "complete"), ((2, 3, 3), "reduced")])
def test_qr_invariants_and_gradient(torch, shape, mode):
    a = rnd(*shape)
    m, n = shape[-2:]
    k = min(m, n)
    c = rnd(*shape[:-2], m, max(m, n))
    A = oar.tensor(a, requires_grad=True)
    q, r = oar.linalg.qr(A, mode=mode)
    assert tuple(q.shape[-2:]) == (m, m if mode == "complete" else k)
    assert tuple(r.shape[-2:]) == (m if mode == "complete" else k, n)
    np.testing.assert_allclose((q @ r).detach().numpy(), a, atol=1e-10)
    np.testing.assert_allclose(np.tril(r.detach().numpy(), -1), 0)
    _orthonormal_columns(q.detach())
    np.testing.assert_allclose(np.abs(r.detach().numpy()), np.abs(np.linalg.qr(a, mode)[1]), atol=1e-10)
    if mode == "complete" and m > n:  # Q's last columns are not determined by A: torch refuses too
        with pytest.raises(RuntimeError, match="not differentiable when mode='complete' and m > n"):
            _qr_loss(oar, q, r, oar.tensor(c)).backward()
        return
    _qr_loss(oar, q, r, oar.tensor(c)).backward()
    T = torch.tensor(a, requires_grad=True)
    _qr_loss(torch, *torch.linalg.qr(T, mode=mode), torch.tensor(c)).backward()
    np.testing.assert_allclose(A.grad.numpy(), T.grad.numpy(), rtol=1e-8, atol=1e-8)


def test_lu_reconstructs_and_factor_ex_reports_singular(torch):
    a = rnd(2, 4, 6)
    P, L, U = oar.linalg.lu(oar.tensor(a))
    np.testing.assert_allclose((P @ L @ U).numpy(), a, atol=1e-12)
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    LU, piv, info = oar.linalg.lu_factor_ex(oar.tensor(singular))
    tLU, tpiv, tinfo = torch.linalg.lu_factor_ex(torch.tensor(singular))
    assert info.item() == tinfo.item() == 2 and piv.tolist() == tpiv.tolist()
    with pytest.raises(RuntimeError, match=r"U\[2,2\] of matrix 0 is zero"):
        oar.linalg.lu_factor(oar.tensor(singular))


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="The solver failed because the input matrix is singular"):
        oar.linalg.solve(oar.tensor([[1.0, 2.0], [2.0, 4.0]]), oar.ones(2, 1))
    with pytest.raises(RuntimeError, match=r"linalg_eigh: expected A to be square matrices .* got \[2, 3\]"):
        oar.linalg.eigh(oar.ones(2, 3))
    with pytest.raises(RuntimeError, match="which mode='r' does not compute"):
        oar.linalg.qr(oar.randn(3, 2, requires_grad=True), mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="parameter `driver` should be one of"):
        oar.linalg.lstsq(oar.randn(3, 2), oar.randn(3, 1), driver="gelsx")
    with pytest.raises(RuntimeError, match="rank-deficient, which the driver gels cannot solve"):
        # a zero column: R's last pivot is exactly 0 on any CPU (ones(4, 2) leaves a rounding residue there)
        oar.linalg.lstsq(oar.tensor([[1.0, 0.0]] * 4), oar.randn(4, 1), driver="gels")
    with pytest.raises(RuntimeError, match="Order 3 not supported"):
        oar.linalg.matrix_norm(oar.randn(3, 3), 3)
    with pytest.raises(RuntimeError, match="must be batches of square matrices, but they are 2 by 3"):
        oar.linalg.matrix_power(oar.randn(2, 3), 2)
    with pytest.raises(RuntimeError, match="expected at least 2 tensors but got 1"):
        oar.linalg.multi_dot([oar.randn(2, 2)])
    with pytest.raises(RuntimeError, match="tensor 1 must be 2D but got 3D"):
        oar.linalg.multi_dot([oar.randn(2, 2), oar.randn(1, 2, 2)])
    with pytest.raises(RuntimeError, match=r"prod\(self.shape\[ind:\]\) == prod\(self.shape\[:ind\]\), but got 3 != 2"):
        oar.linalg.tensorinv(oar.randn(2, 3), ind=1)
    with pytest.raises(RuntimeError, match="solve_ex: The solver failed because the input matrix is singular"):
        oar.linalg.solve_ex(oar.zeros(2, 2), oar.randn(2), check_errors=True)
    with pytest.raises(RuntimeError, match=r"\(Batch element 1\): The diagonal element 2 is zero"):
        oar.linalg.inv_ex(oar.stack([oar.eye(2), oar.tensor([[1.0, 1.0], [1.0, 1.0]])]), check_errors=True)
    with pytest.raises(TypeError, match="expected B to have the matrix's dtype f64, got f32"):
        oar.linalg.solve(oar.randn(2, 2, dtype=oar.float64), oar.randn(2, 1))


def test_pinv_hermitian_gradient(torch):
    a, g, d = spd(4), rnd(4, 4), sym(4)
    A, T = oar.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (oar.linalg.pinv(A, hermitian=True) * oar.tensor(g)).sum().backward()
    (torch.linalg.pinv(T, hermitian=True) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose((A.grad.numpy() * d).sum(), (T.grad.numpy() * d).sum(), rtol=1e-9)


@pytest.mark.parametrize("norm1", [0.01, 0.2, 0.8, 1.8, 4.0, 40.0])
def test_matrix_exp_every_pade_degree(torch, norm1):
    """1-norms within each degree's bound (3, 5, 7, 9, 13) and one scaled and squared, in f64 against torch;
    exp(A) exp(-A) = I would not see a wrong coefficient (r(A) r(-A) = I for any Padé coefficients)"""
    a = rnd(2, 4, 4)
    a *= norm1 / np.abs(a).sum(-2).max(-1)[..., None, None]
    np.testing.assert_allclose(oar.linalg.matrix_exp(oar.tensor(a)).numpy(), torch.linalg.matrix_exp(
        torch.tensor(a)).numpy(), rtol=1e-13 * max(1.0, norm1), atol=1e-13)


def test_matrix_exp_rotation():
    t = 0.7
    e = oar.linalg.matrix_exp(oar.tensor([[0.0, -t], [t, 0.0]], dtype=oar.float64)).numpy()
    np.testing.assert_allclose(e, [[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], atol=1e-14)


def test_second_order_gradients_match_torch(torch):
    """the rules are written with ops, so they differentiate again: the gradient of |dy/dA|^2"""
    a, b = well(3), rnd(3, 2)
    grads = []
    for L in (oar, torch):
        A = L.tensor(a, requires_grad=True)
        y = (L.linalg.solve(A, L.tensor(b)) ** 2).sum() + (L.linalg.matrix_exp(A / 3) ** 2).sum() + \
            L.linalg.svdvals(A).prod() + (L.linalg.qr(A).R ** 2).sum() + L.linalg.eigvalsh(A @ A.transpose(0, 1))[0]
        g, = L.autograd.grad(y, A, create_graph=True)
        (g ** 2).sum().backward()
        grads.append(A.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-8, atol=1e-8)
