/* Sweep cases for copies and casts. */
#include "sweep.h"

const sweep_case sweep_cases_tensor_ops[] = {
    {"contiguous", "n:3x4", ""},
    {"contiguous", "n:2x0x3", ""},
    {"contiguous", "i0_9:5", ""},
    /* larger inputs: the strided pass copies them through the tiled path (rows, columns and
     * a partial tile), for each element size */
    {"contiguous", "n:3x40x50", "", SWEEP_NO_GRAD},
    {"contiguous", "n:70x33", "", SWEEP_NO_GRAD},
    {"contiguous", "i0_9:7x45", ""},
    {"contiguous", "nf16:40x37", "", SWEEP_NO_GRAD},
    {"contiguous", "b:6x50", ""},
    {"cast", "n:3x4", "dtype=f64"},           /* to f64 */
    {"cast", "n:3x4", "dtype=f32", SWEEP_NO_GRAD}, /* to f32: too coarse for f64 differences */
    {"cast", "n:2x3", "dtype=i64", SWEEP_NO_GRAD}, /* to i64: no gradient flows */
    {"cast", "i0_100:6", "dtype=f32"},
    {"cast", "n:5", "dtype=f16", SWEEP_NO_GRAD, 1e-3},    /* to f16 */
    {"cast", "n:5", "dtype=bf16", SWEEP_NO_GRAD, 1e-2},    /* to bf16 */
    {0},
};

static bool bad_cast_dtype(void) {
    int64_t s[1] = {2};
    oar_tensor *x = oar_zeros(s, 1, OAR_F32);
    return oar_cast(x, (oar_dtype)42) != NULL;
}

const sweep_bad sweep_bad_tensor_ops[] = {
    {"cast to an invalid dtype", bad_cast_dtype, "expected a target dtype"},
    {0},
};
