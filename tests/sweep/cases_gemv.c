/* Sweep cases for linear of one row (src/kernels/cpu/gemv_x86.c): four-row groups and single
 * rows, pairs of vectors, a last vector, a masked remainder; a 1-d and a 3-d row, no bias; a
 * product split over the threads. */
#include "sweep.h"

const sweep_case sweep_cases_gemv[] = {
    {"linear", "n:1x37;n:9x37;n:9", ""},
    {"linear", "n:24;n:7x24;n:7", ""},
    {"linear", "n:1x1x20;n:5x20;none", ""},
    {"linear", "n:1x1280;n:300x1280;n:300", "", SWEEP_NO_GRAD},
    {0},
};

/* a row of 5 features against weights of 4 */
static bool one_row_features_differ(void) {
    oar_tensor *in[3] = {oar_zeros((int64_t[]){1, 5}, 2, OAR_F32), oar_zeros((int64_t[]){3, 4}, 2, OAR_F32), NULL};
    return oar_op_call1(OAR_OP_linear, in, 3, NULL) != NULL;
}

const sweep_bad sweep_bad_gemv[] = {
    {"linear of one row, in_features differ", one_row_features_differ, "linear: expected x.shape[-1] == weight.shape[1]"},
    {0},
};
