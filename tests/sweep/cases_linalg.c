/* Sweep cases for linear algebra: matmul, linear, einsum. The larger cases (no gradient
 * check) exercise the GEMM kernels: folded batches, per-batch loops, packed layouts. */
#include "sweep.h"

#include <math.h>

const sweep_case sweep_cases_linalg[] = {
#ifdef OAR_HAVE_OPENBLAS
    /* LAPACK: batched, 1x1, empty; det/slogdet/inv gradients by finite differences. cholesky reads one
     * triangle (finite differences see that) while its rule is torch's symmetrized one: checked
     * against torch in python/tests instead */
    {"linalg_det", "n:3x3", ""},
    {"linalg_det", "n:2x4x4", ""},
    {"linalg_det", "n:1x1", ""},
    {"linalg_det", "n:2x0x0", ""},
    {"linalg_slogdet", "n:3x3", ""},
    {"linalg_slogdet", "n:3x2x2", ""},
    {"linalg_inv", "n:3x3", ""},
    {"linalg_inv", "n:2x4x4", ""},
    {"linalg_cholesky", "c4,1,0.5,1,3,0.2,0.5,0.2,2:3x3", "", SWEEP_NO_GRAD},
    {"linalg_cholesky", "c2,0.5,0.5,1:2x2x2", "", SWEEP_NO_GRAD},
    /* solves: gradients in A and B by finite differences; pivots are fixed (valid LAPACK rows) */
    {"linalg_solve", "n:3x3;n:3x2", ""},
    {"linalg_solve", "n:2x4x4;n:2x4x1", ""},
    {"linalg_solve", "n:2x0x0;n:2x0x3", ""},
    {"linalg_solve_triangular", "n:3x3;n:3x2", "upper=1"},
    {"linalg_solve_triangular", "n:2x3x3;n:2x3x4", "upper=0"},
    {"linalg_solve_triangular", "n:3x3;n:3x2", "upper=1 unitriangular=1"},
    {"linalg_solve_triangular", "n:2x4x4;n:2x4x1", "upper=0 unitriangular=1"},
    {"linalg_lu_factor", "n:4x4", ""},
    {"linalg_lu_factor", "n:2x3x3", ""},
    {"linalg_lu_factor", "n:3x5", ""},
    {"linalg_lu_factor", "n:2x5x3", ""},
    {"linalg_lu_unpack", "n:3x3;c3,2,3i32:3", ""},
    {"linalg_lu_unpack", "n:2x4x3;c2,3,3,2,2,3i32:2x3", ""},
    {"linalg_lu_unpack", "n:3x5;c1,3,3i32:3", ""},
    {"linalg_lu_solve", "n:3x3;c3,2,3i32:3;n:3x2", ""},
    {"linalg_lu_solve", "n:2x3x3;c2,2,3,1,3,3i32:2x3;n:2x3x1", "adjoint=1"},
    /* decompositions: sign-gauged vectors move smoothly under the small steps of finite
     * differences. eigh reads one triangle while its rule is symmetric, like cholesky: its gradient
     * is checked along symmetric directions and against torch in python/tests. The columns a full
     * svd adds and the Q of a complete tall qr are not determined by A: no finite differences. */
    {"linalg_eigh", "n:3x3", "", SWEEP_NO_GRAD},
    {"linalg_eigh", "n:2x4x4", "upper=1", SWEEP_NO_GRAD},
    {"linalg_svd", "n:3x3", ""},
    {"linalg_svd", "n:4x3", "full_matrices=0"},
    {"linalg_svd", "n:2x3x5", "full_matrices=0"},
    {"linalg_svd", "n:2x4x3", "full_matrices=1", SWEEP_NO_GRAD},
    {"linalg_svd", "n:0x3", "full_matrices=1", SWEEP_NO_GRAD},
    {"linalg_qr", "n:4x3", ""},
    {"linalg_qr", "n:2x3x3", "mode=complete"},
    {"linalg_qr", "n:3x5", ""},
    {"linalg_qr", "n:2x5x3", "mode=complete", SWEEP_NO_GRAD},
    {"linalg_qr", "n:4x3", "mode=r", SWEEP_NO_GRAD},
    /* least squares: tall (residuals), square, wide (minimum norm); both drivers */
    {"linalg_lstsq", "n:5x3;n:5x2", ""},
    {"linalg_lstsq", "n:2x3x3;n:2x3x1", "driver=gels"},
    {"linalg_lstsq", "n:3x5;n:3x2", ""},
    {"linalg_lstsq", "n:2x5x3;n:2x5x2", "driver=gelsd"},
    {"linalg_lstsq", "n:3x5;n:3x2", "driver=gelss"},
    {"linalg_lstsq", "n:2x2x4;n:2x2x3", "driver=gels"},
    /* matrix_exp: every Padé degree (1-norms from 0.01 to about 12, the last scaled and squared) */
    {"linalg_matrix_exp", "c0.004,-0.002,0.001,0.003:2x2", ""},
    {"linalg_matrix_exp", "c0.05,-0.02,0.1,0.03:2x2", ""},
    {"linalg_matrix_exp", "c0.3,-0.2,0.1,0.25:2x2", ""},
    {"linalg_matrix_exp", "c0.9,-0.5,0.4,0.8:2x2", ""},
    {"linalg_matrix_exp", "n:3x3", ""},
    {"linalg_matrix_exp", "c3,-2,1,2.5,1,-3,2,0.5,4:3x3", ""},
    {"linalg_matrix_exp", "n:2x4x4", ""},
    /* cholesky_ex reads one triangle, like cholesky (its rule is cholesky's): no finite
     * differences; the second case fails at order 2 (info, no error). ldl_factor and ldl_solve have
     * no derivative in torch 1.13 (nor here): values only, with 1x1 and 2x2 pivots (a zero
     * diagonal forces a 2x2 block); ldl_solve's LD is any factor with pivots sytrf could give */
    {"linalg_cholesky_ex", "c4,1,0.5,1,3,0.2,0.5,0.2,2:2x3x3", "", SWEEP_NO_GRAD},
    {"linalg_cholesky_ex", "c1,2,2,1:2x2x2", "", SWEEP_NO_GRAD},
    {"linalg_ldl_factor", "c1,2,3,2,-1,0.5,3,0.5,0.2:2x3x3", "", SWEEP_NO_GRAD},
    {"linalg_ldl_factor", "c0,1,2,1,0,3,2,3,0:3x3", "", SWEEP_NO_GRAD},
    {"linalg_ldl_solve", "n:2x3x3;c1,2,3i32:2x3;n:2x3x2", "", SWEEP_NO_GRAD},
    {"linalg_ldl_solve", "n:3x3;c-2,-2,3i32:3;n:3x1", "", SWEEP_NO_GRAD},
    /* Householder products: tau of every length up to n (k < n leaves columns of I), gradients in
     * both inputs by finite differences; geqrf and ormqr have no derivative in torch 1.13 */
    {"linalg_householder_product", "n:4x3;n:3", ""},
    {"linalg_householder_product", "n:2x5x3;n:2x2", ""},
    {"linalg_householder_product", "n:3x3;n:3", ""},
    {"linalg_geqrf", "n:2x4x3", "", SWEEP_NO_GRAD},
    {"linalg_geqrf", "n:3x5", "", SWEEP_NO_GRAD},
    {"linalg_ormqr", "n:2x4x3;n:2x3;n:2x4x2", "left=1 transpose=0", SWEEP_NO_GRAD},
    {"linalg_ormqr", "n:4x2;n:2;n:3x4", "left=0 transpose=1", SWEEP_NO_GRAD},
    /* eig: complex pairs and real eigenvalues. A random cotangent of the vectors depends on their
     * phase, which torch's rule refuses: gradients by finite differences in python/tests, on losses
     * that do not depend on it */
    {"linalg_eig", "n:2x4x4", "", SWEEP_NO_GRAD},
    {"linalg_eig", "c2,1,0.5,0.3,-1,0.2,0.1,0.4,3:3x3", "", SWEEP_NO_GRAD},
    {"linalg_eig", "n:1x1", "", SWEEP_NO_GRAD},
#endif
    {"matmul", "n:3x4;n:4x5", ""},
    {"matmul", "n:2x3x4;n:2x4x5", ""},
    {"matmul", "n:2x1x3x4;n:5x4x2", ""},
    {"matmul", "n:2x3x4;n:4x5", ""},
    {"matmul", "n:3x4;n:2x4x5", ""},
    {"matmul", "n:4;n:4", ""},
    {"matmul", "n:4;n:4x3", ""},
    {"matmul", "n:3x4;n:4", ""},
    {"matmul", "n:4;n:2x4x3", ""},
    {"matmul", "n:2x3x4;n:4", ""},
    {"matmul", "n:1x4;n:4x1", ""},
    {"matmul", "n:3x1;n:1x4", ""},
    {"matmul", "n:3x0;n:0x4", ""},
    {"matmul", "n:0x3;n:3x4", ""},
    {"matmul", "n:2x0x3;n:3x4", ""},
    {"matmul", "i-3_4:3x4;i-3_4:4x2", ""},
    {"matmul", "nf16:3x4;nf16:4x2", "", 0, 1e-2},
    {"matmul", "nbf16:2x3x20;nbf16:20x6", "", 0, 2e-2},
    {"matmul", "n:33x65;n:65x17", "", SWEEP_NO_GRAD},
    {"matmul", "n:3x33x65;n:65x17", "", SWEEP_NO_GRAD},
    {"matmul", "n:2x1x20x30;n:3x30x25", "", SWEEP_NO_GRAD},
    {"matmul", "n:40;n:3x40x21", "", SWEEP_NO_GRAD},
    {"linear", "n:3x4;n:5x4;n:5", ""},
    {"linear", "n:2x3x4;n:5x4;n:5", ""},
    {"linear", "n:4;n:5x4;n:5", ""},
    {"linear", "n:3x4;n:5x4;none", ""},
    {"linear", "n:1x1;n:1x1;n:1", ""},
    {"linear", "n:3x0;n:5x0;n:5", ""},
    {"linear", "n:0x4;n:5x4;n:5", ""},
    {"linear", "n:2x0x4;n:3x4;n:3", ""},
    {"linear", "i-3_4:3x4;i-3_4:5x4;i-3_4:5", ""},
    {"linear", "nbf16:2x3x20;nbf16:6x20;nbf16:6", "", 0, 2e-2},
    {"linear", "n:40x65;n:17x65;n:17", "", SWEEP_NO_GRAD},
    {"linear", "n:2x20x33;n:30x33;none", "", SWEEP_NO_GRAD},
    {"einsum", "n:3x4;n:4x5", "equation=ij,jk->ik"},
    {"einsum", "n:3x4;n:4x5", "equation=ij,jk"},
    {"einsum", "n:2x3x4;n:2x4x5", "equation=bij,bjk->bik"},
    {"einsum", "n:2x3x4;n:2x5x4", "equation=bij,bkj->bki"},
    {"einsum", "n:3x4;none", "equation=ij->ji"},
    {"einsum", "n:2x3x4;none", "equation=abc->cab"},
    {"einsum", "n:3x4;none", "equation=ij->i"},
    {"einsum", "n:3x4;none", "equation=ij->"},
    {"einsum", "n:3;n:4", "equation=i,j->ij"},
    {"einsum", "n:2x3;n:2x3", "equation=ij,ij->ij"},
    {"einsum", "n:2x3;n:3x2", "equation=ij,ji->"},
    {"einsum", "n:2x3;n:4x5", "equation=ij,kl->jl"},
    {"einsum", "n:3x3;none", "equation=ii->i"},
    {"einsum", "n:3x3;none", "equation=ii"},
    {"einsum", "n:3x4x3;n:4", "equation=iji,j->ij"},
    {"einsum", "n:2x3x4;n:4x5", "equation=...ij,jk->...ik"},
    {"einsum", "n:2x1x3;n:4x3", "equation=...i,...i->..."},
    {"einsum", "n:2x3x4;none", "equation=i...->..."},
    {"einsum", "n:2x1;n:3x4", "equation=ij,jk->ik"},
    {"einsum", "n:;n:3", "equation=,i->i"},
    {"einsum", "n:2x3;n:3x0", "equation=ij,jk->ik"},
    {"einsum", "n:2x0;n:0x3", "equation=ij,jk->ik"},
    {"einsum", "i0_5:3x4;i0_5:4x2", "equation=ij,jk->ik"},
    {"einsum", "nf16:2x3x20;nf16:2x5x20", "equation=bij,bkj->bki", 0, 1e-2},
    {"einsum", "n:3x4;n:4x5", "equation=ij,jk->ki"},
    {"einsum", "n:2x3x4;n:2x4x5", "equation=bij,bjk->ikb"},
    {"einsum", "n:1x3x4;n:2x4x5", "equation=bij,bjk->bik"},
    {"einsum", "n:3x4x2;n:2x5x4", "equation=ikb,bjk->bij"},
    {"einsum", "n:4x16x24;n:4x24x20", "equation=bij,bjk->bik", SWEEP_NO_GRAD},
    {"einsum", "n:20x33x3;n:3x17x33", "equation=ikb,bjk->bji", SWEEP_NO_GRAD},
    {"einsum", "n:30x40;n:40x20", "equation=ij,jk->ki", SWEEP_NO_GRAD},
    {"einsum", "n:2x3x16x8;n:2x3x20x8", "equation=bhqd,bhkd->bhqk", SWEEP_NO_GRAD},
    {0},
};

static oar_tensor *z(int64_t d0, int64_t d1, int nd) {
    int64_t s[2] = {d0, d1};
    return oar_zeros(s, nd, OAR_F32);
}

static bool mm_inner(void) { return oar_matmul(z(2, 3, 2), z(4, 5, 2)) != NULL; }
static bool mm_scalar(void) { return oar_matmul(oar_scalar(1, OAR_F32), z(2, 2, 2)) != NULL; }
static bool mm_batch(void) {
    int64_t a[3] = {2, 3, 4}, b[3] = {3, 4, 5};
    return oar_matmul(oar_zeros(a, 3, OAR_F32), oar_zeros(b, 3, OAR_F32)) != NULL;
}
static bool mm_bool(void) {
    int64_t s[2] = {2, 2};
    return oar_matmul(oar_zeros(s, 2, OAR_BOOL), oar_zeros(s, 2, OAR_BOOL)) != NULL;
}
static bool mm_dtype(void) {
    int64_t s[2] = {2, 2};
    return oar_matmul(oar_zeros(s, 2, OAR_F32), oar_zeros(s, 2, OAR_F64)) != NULL;
}
static bool lin_in(void) { return oar_linear(z(3, 3, 2), z(5, 4, 2), NULL) != NULL; }
static bool lin_bias(void) { return oar_linear(z(3, 4, 2), z(5, 4, 2), z(4, 0, 1)) != NULL; }
static bool lin_weight(void) { return oar_linear(z(3, 4, 2), z(4, 0, 1), NULL) != NULL; }
static bool es_char(void) { return oar_einsum("i1->i", z(2, 3, 2), NULL) != NULL; }
static bool es_ndim(void) { return oar_einsum("ijk->i", z(2, 3, 2), NULL) != NULL; }
static bool es_size(void) { return oar_einsum("ij,jk->ik", z(2, 3, 2), z(4, 5, 2)) != NULL; }
static bool es_out(void) { return oar_einsum("ij->k", z(2, 3, 2), NULL) != NULL; }
static bool es_count(void) { return oar_einsum("ij->ji", z(2, 3, 2), z(3, 0, 1)) != NULL; }
static bool es_null(void) { return oar_einsum("ij,jk->ik", z(2, 3, 2), NULL) != NULL; }
static bool es_diag(void) { return oar_einsum("ii->i", z(2, 3, 2), NULL) != NULL; }

#ifdef OAR_HAVE_OPENBLAS
static oar_tensor *mat(const double *v, int64_t n) {
    int64_t s[2] = {n, n};
    return oar_from_data(v, s, 2, OAR_F64);
}
static bool bad_inv_singular(void) {
    double v[4] = {1, 2, 2, 4};
    return oar_linalg_inv(mat(v, 2)) != NULL;
}
static bool bad_cholesky_indefinite(void) {
    double v[4] = {1, 2, 2, 1};
    return oar_linalg_cholesky(mat(v, 2)) != NULL;
}
static bool bad_householder_wide(void) {
    int64_t s[2] = {2, 3}, k[1] = {2};
    oar_tensor *in[2] = {oar_zeros(s, 2, OAR_F64), oar_zeros(k, 1, OAR_F64)};
    return oar_op_call1(OAR_OP_linalg_householder_product, in, 2, NULL) != NULL;
}
static bool bad_ormqr_rows(void) {
    int64_t s[2] = {4, 2}, k[1] = {2}, c[2] = {3, 2};
    oar_tensor *in[3] = {oar_zeros(s, 2, OAR_F64), oar_zeros(k, 1, OAR_F64), oar_zeros(c, 2, OAR_F64)};
    oar_attr at[2] = {oar_attr_int(1), oar_attr_int(0)};
    return oar_op_call1(OAR_OP_linalg_ormqr, in, 3, at) != NULL;
}
static bool bad_eig_nan(void) {
    double v[4] = {1, NAN, 0, 1};
    return oar_op_call1(OAR_OP_linalg_eig, (oar_tensor *[]){mat(v, 2)}, 1, NULL) != NULL;
}
static bool bad_det_not_square(void) {
    int64_t s[2] = {2, 3};
    return oar_linalg_det(oar_zeros(s, 2, OAR_F32)) != NULL;
}
#endif

const sweep_bad sweep_bad_linalg[] = {
#ifdef OAR_HAVE_OPENBLAS
    {"inverse of a singular matrix", bad_inv_singular, "linalg_inv: matrix 0 is singular (U[1, 1]"},
    {"cholesky of an indefinite matrix", bad_cholesky_indefinite, "linalg_cholesky: the input is not positive-definite"},
    {"det of a 2x3 matrix", bad_det_not_square, "linalg_det: expected square matrices in the last two dims"},
    {"householder_product of a wide input", bad_householder_wide,
     "linalg_householder_product: expected input.shape[-2] >= input.shape[-1]"},
    {"ormqr with Q of the wrong size", bad_ormqr_rows, "linalg_ormqr: expected input.shape[-2] == other.shape[-2]"},
    {"eig of a matrix with a nan", bad_eig_nan, "linalg_eig: input tensor should not contain infs or NaNs (matrix 0)"},
#endif
    {"matmul of 2x3 and 4x5", mm_inner, "matmul: expected a.shape[-1] == b.shape[-2], got 3 != 4"},
    {"matmul of a scalar", mm_scalar, "expected both operands to have at least 1 dim, got 0D and 2D"},
    {"matmul with batch dims 2 and 3", mm_batch, "expected batch dims that broadcast"},
    {"matmul of bools", mm_bool, "expected numeric operands, got bool"},
    {"matmul of f32 and f64", mm_dtype, "got f32 (input 0) and f64 (input 1)"},
    {"linear with the wrong in_features", lin_in, "expected x.shape[-1] == weight.shape[1] (in_features), got 3 != 4"},
    {"linear with the wrong bias", lin_bias, "expected bias of shape [5] (out_features), got [4]"},
    {"linear with a vector weight", lin_weight, "expected weight of shape [out_features, in_features]"},
    {"einsum with a digit", es_char, "invalid character '1' at index 1"},
    {"einsum with too many labels", es_ndim, "expected operand 0 to have 3 dims (one per label)"},
    {"einsum with mismatched sizes", es_size, "expected label 'j' to have one size across operands"},
    {"einsum with an unknown output label", es_out, "expected output labels that appear in an operand, got 'k'"},
    {"einsum with an extra operand", es_count, "expected 1 operand as the equation"},
    {"einsum missing its second operand", es_null, "input 1 is NULL"},
    {"einsum of a non-square diagonal", es_diag, "repeated in operand 0, to have one size, got 2 and 3"},
    {0},
};
