/* Launcher of special.cu: torch.special's Bessel functions, Airy's Ai, the incomplete gamma
 * functions, zeta and the orthogonal polynomials, one kernel for one or two float operands (the op
 * a runtime kind), computing in double from the headers the CPU reference compiles
 * (src/ops/special_*.h). Kept apart from elementwise.cu so its long loops do not weigh on the
 * common elementwise kernel. */
#ifndef OAR_CUDA_LAUNCH_SPECIAL_H
#define OAR_CUDA_LAUNCH_SPECIAL_H

#include "launch_elementwise.h"

#ifdef __cplusplus
extern "C" {
#endif

enum oar_cu_special {
    /* one operand */
    OAR_CU_SP_I0, OAR_CU_SP_I0E, OAR_CU_SP_I1, OAR_CU_SP_I1E, OAR_CU_SP_K0, OAR_CU_SP_K1, OAR_CU_SP_K0E,
    OAR_CU_SP_K1E, OAR_CU_SP_J0, OAR_CU_SP_J1, OAR_CU_SP_Y0, OAR_CU_SP_Y1, OAR_CU_SP_SPHERICAL_J0,
    OAR_CU_SP_AIRY_AI,
    /* two operands */
    OAR_CU_SP_GAMMAINC, OAR_CU_SP_GAMMAINCC, OAR_CU_SP_ZETA, OAR_CU_SP_CHEB_T, OAR_CU_SP_CHEB_U, OAR_CU_SP_CHEB_V,
    OAR_CU_SP_CHEB_W, OAR_CU_SP_SCHEB_T, OAR_CU_SP_SCHEB_U, OAR_CU_SP_SCHEB_V, OAR_CU_SP_SCHEB_W,
    OAR_CU_SP_HERMITE_H, OAR_CU_SP_HERMITE_HE, OAR_CU_SP_LAGUERRE, OAR_CU_SP_LEGENDRE
};

/* e: one or two inputs (n_in) of one float dtype (in_dtype), the output of that dtype */
int oar_cu_special(int kind, const oar_cu_ew *e, void *stream);

#ifdef __cplusplus
}
#endif
#endif
