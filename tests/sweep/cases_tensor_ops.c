/* Sweep cases for copies and casts, and increment (an in-place counter step: the sweep runs
 * it from the case's values each time and compares what it wrote). */
#include "ops/increment.h"
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
    /* the copy kernel (cpu_copy.c): odd sizes, one element, each element size, and sizes
     * it cuts into units and threads (the strided pass sends every dim strided by 2 to it;
     * tests/test_copy_kernels.c covers permutes, chunk views and broadcasts) */
    {"contiguous", "n:3x7x5x9", "", SWEEP_NO_GRAD},
    {"contiguous", "n:1x1", ""},
    {"contiguous", "nf64:5x3x17", "", SWEEP_NO_GRAD},
    {"contiguous", "nbf16:9x31", "", SWEEP_NO_GRAD},
    {"contiguous", "i-100_100i8:13x11", ""},
    {"contiguous", "i0_200u8:6x19", ""},
    {"contiguous", "i-9_9i32:4x3x5", ""},
    {"contiguous", "n:8x128x4x64", "", SWEEP_NO_GRAD},
    {"contiguous", "i0_9:300x70", "", SWEEP_NO_GRAD},
    {"contiguous", "n:100000", "", SWEEP_NO_GRAD},
    /* to_device on the host (device=0); the CUDA sweep runs the same cases host <-> GPU */
    {"to_device", "n:3x4", "device=0"},
    {"to_device", "i0_9:2x0x3", "device=0"},
    {"cast", "n:3x4", "dtype=f64"},           /* to f64 */
    {"cast", "n:3x4", "dtype=f32", SWEEP_NO_GRAD}, /* to f32: too coarse for f64 differences */
    {"cast", "n:2x3", "dtype=i64", SWEEP_NO_GRAD}, /* to i64: no gradient flows */
    {"cast", "i0_100:6", "dtype=f32"},
    /* f32 to bytes: NaN to 0, saturation at both ends, truncation toward zero of fractions and
     * of -0.5, whole vectors and a tail (the AVX2 kernel against the reference's conversion) */
    {"cast", "cnan,-inf,inf,-300,300,-128.9,-0.5,0.5,1.99,127.5,254.9,255.5,-129,3e9,-3e9,42.7,-0.0f32:37",
     "dtype=u8", SWEEP_NO_GRAD},
    {"cast", "cnan,-inf,inf,-300,300,-128.9,-0.5,0.5,1.99,127.5,254.9,255.5,-129,3e9,-3e9,42.7,-0.0f32:37",
     "dtype=i8", SWEEP_NO_GRAD},
    {"cast", "n:3x11", "dtype=u8", SWEEP_NO_GRAD},
    /* i32 sums to f32: beyond 2^24 they round to nearest even (16777217 -> 16777216, 16777219 -> 16777220) */
    {"cast", "c16777217,16777219,-16777219,2147483647,-2147483648,0,-1,123456789,7i32:21", "dtype=f32", SWEEP_NO_GRAD},
    {"cast", "n:5", "dtype=f16", SWEEP_NO_GRAD, 1e-3},    /* to f16 */
    {"cast", "n:5", "dtype=bf16", SWEEP_NO_GRAD, 1e-2},    /* to bf16 */
    /* increment: a 0-d i64 (num_batches_tracked), each integer dtype, negatives, the largest
     * i8 and u8 (wrap around), an empty tensor */
    {"increment", "i0_5:", ""},
    {"increment", "i-3_3i32:2x3", ""},
    {"increment", "c127,0,-128i8:3", ""},
    {"increment", "c255,0u8:4", ""},
    {"increment", "i0_5:0x2", ""},
    {0},
};

static bool bad_cast_dtype(void) {
    int64_t s[1] = {2};
    oar_tensor *x = oar_zeros(s, 1, OAR_F32);
    return oar_cast(x, (oar_dtype)42) != NULL;
}

static bool bad_increment_float(void) {
    int64_t s[1] = {2};
    return oar_increment_(oar_zeros(s, 1, OAR_F32)) == OAR_OK;
}
static bool bad_increment_bool(void) { return oar_increment_(oar_zeros(NULL, 0, OAR_BOOL)) == OAR_OK; }
static bool bad_increment_strided(void) {
    int64_t s[2] = {2, 3};
    return oar_increment_(oar_transpose(oar_zeros(s, 2, OAR_I64), 0, 1)) == OAR_OK;
}
static bool bad_increment_null(void) { return oar_increment_(NULL) == OAR_OK; }

const sweep_bad sweep_bad_tensor_ops[] = {
    {"cast to an invalid dtype", bad_cast_dtype, "expected a target dtype"},
    {"increment of a float tensor", bad_increment_float,
     "increment: expected an integer tensor (i8, u8, i32 or i64), got f32"},
    {"increment of a bool tensor", bad_increment_bool,
     "increment: expected an integer tensor (i8, u8, i32 or i64), got bool"},
    {"increment of a strided view", bad_increment_strided,
     "increment: expected a contiguous tensor (it is updated in place), got a strided view"},
    {"increment of NULL", bad_increment_null, "increment: input 0 is NULL"},
    {0},
};
