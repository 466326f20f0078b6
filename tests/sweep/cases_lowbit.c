/* Sweep cases for the low-bit dtypes (float8, float4, int4, int2): casts to and from them, with
 * values that round (ties included), overflow (NaN or inf: oar's cast does not saturate) and
 * wrap, and the data-movement ops on their codes, through every kernel and the strided eager
 * path. Their bit-level meaning is pinned by test_lowbit (C) and test_lowbit_dtypes.py. */
#include "sweep.h"

#define F8_MIX "c0.1,-3.3,500,1e-9,-0,17,nan,-inf,100,0.0009765625,240,-57344"

const sweep_case sweep_cases_lowbit[] = {
    /* casts: round to nearest even, overflow by each format's rule; and back, exactly */
    {"cast", F8_MIX "f32:12", "dtype=f8e4m3fn"},
    {"cast", F8_MIX "f32:12", "dtype=f8e4m3fnuz"},
    {"cast", F8_MIX "f32:12", "dtype=f8e5m2"},
    {"cast", F8_MIX "f32:12", "dtype=f8e5m2fnuz"},
    {"cast", F8_MIX "f64:12", "dtype=f8e8m0"},
    {"cast", "c0.25,0.75,-3.5,5,7,-100,nanf32:7", "dtype=f4e2m1"},
    {"cast", "n:3x4", "dtype=f8e4m3fn", SWEEP_NO_GRAD}, /* a staircase: finite differences see 0 */
    {"cast", "c1.5,-2,448,-0.015625f8e4m3fn:4", "dtype=f32"},
    {"cast", "c1.5,-2,57344,-0.015625f8e5m2:4", "dtype=f16"},
    {"cast", "c1.5,-2,240f8e4m3fnuz:3", "dtype=f8e5m2"},
    {"cast", "c-9,8,7,-8,16,100i32:6", "dtype=i4"},
    {"cast", "c-9.7,8.2,2.9,-2.9f32:4", "dtype=i4"},
    {"cast", "c-1,4,3,5i64:4", "dtype=u2"},
    {"cast", "c-3,7,2,1i8:4", "dtype=i2"},
    {"cast", "c17,15,-1u8:3", "dtype=u4"},
    {"cast", "c-8,7,-1i4:3", "dtype=f32"},
    {"cast", "c-2,1i2:2", "dtype=i64"},
    {"cast", "c0,15u4:2", "dtype=u8"},
    {"contiguous", "c1.5,-2,448,-0.015625f8e4m3fn:2x2", ""},
    /* the shape and copy ops move the codes unchanged */
    {"reshape", "c1,2,3,4,5,6f8e5m2:2x3", "shape=3,2", SWEEP_NO_STRIDED},
    {"permute", "c1,-2,3,-4,5,6f4e2m1:2x3", "dims=1,0"},
    {"slice", "c-8,7,-1,3,5,0i4:6", "dim=0 start=1 end=6 step=2"},
    {"expand", "c1,2,3u2:3x1", "shape=2,3,4"},
    {"squeeze", "c1.5,-2,448f8e4m3fn:3x1", "dim=1"},
    {"unsqueeze", "c0.5,4f8e8m0:2", "dim=0"},
    {"concat", "c1.5,-2f8e4m3fnuz:2x1;c3,4,5,6f8e4m3fnuz:2x2", "dim=1"},
    {"stack", "c-8,7i4:2;c3,-1i4:2", "dim=0"},
    {"split", "c1,2,3,4,5f8e5m2fnuz:5", "dim=0 split_size=2"},
    {"flip", "c1,-2,3,-4,5,6f4e2m1:2x3", "dims=0,1"},
    {"pad", "c1.5,-2,448,-0.015625f8e4m3fn:2x2", "pads=1,2 mode=0 value=-3"},
    {"index_select", "c-8,7,-1,3i4:4x1;i0_4:3", "dim=0"},
    {"gather", "c1,2,3,0u2:2x2;i0_2:2x3", "dim=1"},
    {"masked_fill", "c1.5,-2,448,-0.015625f8e5m2:2x2;b:2x2", "value=-0.5"},
    {"where", "b:2x3;c1,2,3,4,5,6f8e4m3fn:2x3;c-1f8e4m3fn:", ""},
    {0},
};

/* Arithmetic, comparisons and reductions refuse them, naming the dtype. */
static oar_tensor *z(oar_dtype dt) {
    int64_t s[2] = {2, 2};
    return oar_zeros(s, 2, dt);
}
static bool add_f8(void) { return oar_add(z(OAR_F8E4M3FN), z(OAR_F8E4M3FN)) != NULL; }
static bool lt_i4(void) { return oar_lt(z(OAR_I4), z(OAR_I4)) != NULL; }
static bool sum_u2(void) { return oar_sum(z(OAR_U2), NULL, 0, false) != NULL; }
static bool exp_f4(void) { return oar_exp(z(OAR_F4E2M1)) != NULL; }
static bool matmul_e5(void) { return oar_matmul(z(OAR_F8E5M2), z(OAR_F8E5M2)) != NULL; }

const sweep_bad sweep_bad_lowbit[] = {
    {"add of f8e4m3fn", add_f8, "add: no kernel for dtype f8e4m3fn on cpu"},
    {"lt of i4", lt_i4, "lt: no kernel for dtype i4 on cpu"},
    {"sum of u2", sum_u2, "sum: no kernel for dtype u2 on cpu"},
    {"exp of f4e2m1", exp_f4, "f4e2m1"},
    {"matmul of f8e5m2", matmul_e5, "f8e5m2"},
    {0},
};
