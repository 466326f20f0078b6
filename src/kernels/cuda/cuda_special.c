/* torch.special's functions on the GPU (special.cu): each op a kind of one launcher over one or two
 * float operands at the output's shape (broadcast dims have stride 0). */
#include "cuda_ew_pack.h"
#include "launch_special.h"

typedef struct {
    oar_op_id op;
    int kind;
} special_kind;
static const special_kind kinds[] = {
    {OAR_OP_i0, OAR_CU_SP_I0}, {OAR_OP_i0e, OAR_CU_SP_I0E}, {OAR_OP_i1, OAR_CU_SP_I1}, {OAR_OP_i1e, OAR_CU_SP_I1E},
    {OAR_OP_modified_bessel_i0, OAR_CU_SP_I0}, {OAR_OP_modified_bessel_i1, OAR_CU_SP_I1},
    {OAR_OP_modified_bessel_k0, OAR_CU_SP_K0}, {OAR_OP_modified_bessel_k1, OAR_CU_SP_K1},
    {OAR_OP_scaled_modified_bessel_k0, OAR_CU_SP_K0E}, {OAR_OP_scaled_modified_bessel_k1, OAR_CU_SP_K1E},
    {OAR_OP_bessel_j0, OAR_CU_SP_J0}, {OAR_OP_bessel_j1, OAR_CU_SP_J1}, {OAR_OP_bessel_y0, OAR_CU_SP_Y0},
    {OAR_OP_bessel_y1, OAR_CU_SP_Y1}, {OAR_OP_spherical_bessel_j0, OAR_CU_SP_SPHERICAL_J0},
    {OAR_OP_airy_ai, OAR_CU_SP_AIRY_AI}, {OAR_OP_gammainc, OAR_CU_SP_GAMMAINC},
    {OAR_OP_gammaincc, OAR_CU_SP_GAMMAINCC}, {OAR_OP_zeta, OAR_CU_SP_ZETA},
    {OAR_OP_chebyshev_polynomial_t, OAR_CU_SP_CHEB_T}, {OAR_OP_chebyshev_polynomial_u, OAR_CU_SP_CHEB_U},
    {OAR_OP_chebyshev_polynomial_v, OAR_CU_SP_CHEB_V}, {OAR_OP_chebyshev_polynomial_w, OAR_CU_SP_CHEB_W},
    {OAR_OP_shifted_chebyshev_polynomial_t, OAR_CU_SP_SCHEB_T},
    {OAR_OP_shifted_chebyshev_polynomial_u, OAR_CU_SP_SCHEB_U},
    {OAR_OP_shifted_chebyshev_polynomial_v, OAR_CU_SP_SCHEB_V},
    {OAR_OP_shifted_chebyshev_polynomial_w, OAR_CU_SP_SCHEB_W},
    {OAR_OP_hermite_polynomial_h, OAR_CU_SP_HERMITE_H}, {OAR_OP_hermite_polynomial_he, OAR_CU_SP_HERMITE_HE},
    {OAR_OP_laguerre_polynomial_l, OAR_CU_SP_LAGUERRE}, {OAR_OP_legendre_polynomial_p, OAR_CU_SP_LEGENDRE},
};
#define N_KINDS (int)(sizeof kinds / sizeof kinds[0])

static bool fits(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)n_out; (void)a;
    return out[0]->ndim <= OAR_CU_MAX_DIMS;
}

static oar_status run(oar_op_id op, const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out) {
    oar_cu_ew e;
    const char *name = oar_op_table[op]->name;
    if (!oar_cu_ew_pack(&e, in, n_in, out[0]))
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: too many dims for the GPU kernel", name);
    e.in_dtype = in[0]->dtype;
    int kind = -1;
    for (int i = 0; i < N_KINDS; i++)
        if (kinds[i].op == op) kind = kinds[i].kind;
    return oar_cuda_status((cudaError_t)oar_cu_special(kind, &e, ctx->stream), name);
}

#define SPECIAL_FN(NAME)                                                                                      \
    static oar_status cu_##NAME(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, \
                                int n_out, const oar_attr *a) {                                               \
        (void)n_out; (void)a;                                                                                 \
        return run(OAR_OP_##NAME, ctx, in, n_in, out);                                                        \
    }
SPECIAL_FN(i0) SPECIAL_FN(i0e) SPECIAL_FN(i1) SPECIAL_FN(i1e) SPECIAL_FN(modified_bessel_i0)
SPECIAL_FN(modified_bessel_i1) SPECIAL_FN(modified_bessel_k0) SPECIAL_FN(modified_bessel_k1)
SPECIAL_FN(scaled_modified_bessel_k0) SPECIAL_FN(scaled_modified_bessel_k1) SPECIAL_FN(bessel_j0)
SPECIAL_FN(bessel_j1) SPECIAL_FN(bessel_y0) SPECIAL_FN(bessel_y1) SPECIAL_FN(spherical_bessel_j0)
SPECIAL_FN(airy_ai) SPECIAL_FN(gammainc) SPECIAL_FN(gammaincc) SPECIAL_FN(zeta)
SPECIAL_FN(chebyshev_polynomial_t) SPECIAL_FN(chebyshev_polynomial_u) SPECIAL_FN(chebyshev_polynomial_v)
SPECIAL_FN(chebyshev_polynomial_w) SPECIAL_FN(shifted_chebyshev_polynomial_t)
SPECIAL_FN(shifted_chebyshev_polynomial_u) SPECIAL_FN(shifted_chebyshev_polynomial_v)
SPECIAL_FN(shifted_chebyshev_polynomial_w) SPECIAL_FN(hermite_polynomial_h) SPECIAL_FN(hermite_polynomial_he)
SPECIAL_FN(laguerre_polynomial_l) SPECIAL_FN(legendre_polynomial_p)

void oar_cuda_register_special(void) {
#define REG(NAME) oar_cuda_register(OAR_OP_##NAME, oar_op_table[OAR_OP_##NAME]->ref_dtypes, cu_##NAME, fits);
    REG(i0) REG(i0e) REG(i1) REG(i1e) REG(modified_bessel_i0) REG(modified_bessel_i1) REG(modified_bessel_k0)
    REG(modified_bessel_k1) REG(scaled_modified_bessel_k0) REG(scaled_modified_bessel_k1) REG(bessel_j0)
    REG(bessel_j1) REG(bessel_y0) REG(bessel_y1) REG(spherical_bessel_j0) REG(airy_ai) REG(gammainc)
    REG(gammaincc) REG(zeta) REG(chebyshev_polynomial_t) REG(chebyshev_polynomial_u) REG(chebyshev_polynomial_v)
    REG(chebyshev_polynomial_w) REG(shifted_chebyshev_polynomial_t) REG(shifted_chebyshev_polynomial_u)
    REG(shifted_chebyshev_polynomial_v) REG(shifted_chebyshev_polynomial_w) REG(hermite_polynomial_h)
    REG(hermite_polynomial_he) REG(laguerre_polynomial_l) REG(legendre_polynomial_p)
#undef REG
}
