/* Sweep cases for elementwise binary ops. */
#include "sweep.h"

const sweep_case sweep_cases_binary[] = {
    {"add", "n:3x4;n:3x4", ""},
    {"add", "n:2x3x4;n:4", ""},
    {"add", "n:3x1;n:1x5", ""},
    {"add", "n:2x0x3;n:3", ""},
    {"add", "n:;n:2x2", ""},
    {"add", "i0_10:5;i0_10:5", ""},
    {"sub", "n:3x4;n:4", ""},
    {"mul", "n:3x4;n:3x1", ""},
    {"mul", "i0_10:2x3;i0_10:3", ""},
    {"div", "n:3x4;p:4", ""},
    {"pow", "p:3x4;n:3x4", ""},
    {"pow", "p:5;n:", ""},
    {"atan2", "n:3x4;n:3x4", ""},
    {"atan2", "n:2x3;n:3", ""},
    {"atan2", "n:;n:4", ""},
    /* bitwise ops and gcd/lcm: integers of every width, bool for the bitwise ones, broadcasting */
    {"bitwise_and", "i-100_100:3x4;i-100_100:3x4", ""},
    {"bitwise_and", "i0_256u8:2x3;i0_256u8:3", ""},
    {"bitwise_and", "b:6;b:6", ""},
    {"bitwise_or", "i-100_100i32:3x4;i-100_100i32:4", ""},
    {"bitwise_or", "b:2x3;b:", ""},
    {"bitwise_xor", "i-128_128i8:3x4;i-128_128i8:3x4", ""},
    {"bitwise_xor", "b:5;b:5", ""},
    {"gcd", "i-60_60:3x4;i-60_60:3x4", ""},
    {"gcd", "c0,12,-12,7i64:4;c0,18,0,-21i64:4", ""},
    {"gcd", "i0_100i32:2x3;i0_100i32:3", ""},
    {"lcm", "i-30_30:3x4;i-30_30:4", ""},
    {"lcm", "c0,12,-4,100i8:4;c5,18,6,3i8:4", ""}, /* 300 wraps in i8 as torch's */
    /* rounded division: floats round the quotient; integers exact, signs of both kinds, INT_MIN / -1 */
    {"div_trunc", "n:3x4;p:4", ""},
    {"div_floor", "n:3x4;n:3x4", ""},
    {"div_trunc", "c-7,7,-7,7,0,-128,127i8:7;c2,2,-2,-2,5,-1,-1i8:7", ""},
    {"div_floor", "c-7,7,-7,7,0,-128,127i8:7;c2,2,-2,-2,5,-1,-1i8:7", ""},
    {"div_floor", "i-1000_1000:3x4;c-7,3,5,-2i64:4", ""},
    {"div_trunc", "c-9223372036854775807,9223372036854775807,-1i64:3;c-1,2,3i64:3", ""},
    {"div_floor", "i0_256u8:2x3;i1_20u8:3", ""},
    {"div_trunc", "i-100000_100000i32:6;c-3,4i32:2x1", ""},
    /* shifts: every integer dtype, broadcasting, and shift amounts at and past the width and
     * negative (0, or -1 for >> of a negative value) */
    {"bitwise_left_shift", "i0_256u8:3x4;i0_9u8:3x4", ""},
    {"bitwise_left_shift", "c1,3,100,-5,127,-1,1,5i8:8;c0,7,8,9,70,-1,-128,1i8:8", ""},
    {"bitwise_left_shift", "i-1000_1000i32:2x3;c0,1,31,32i32:4x1x1", ""},
    {"bitwise_left_shift", "c1,-3,7,1i64:4;c63,62,64,-1i64:4", ""},
    {"bitwise_right_shift", "i0_256u8:2x3;i0_10u8:3", ""},
    {"bitwise_right_shift", "c-128,-5,127,-1,64i8:5;c7,9,8,-2,6i8:5", ""},
    {"bitwise_right_shift", "i-100000_100000i32:3x4;i0_33i32:3x4", ""},
    {"bitwise_right_shift", "c-9223372036854775807,100,-1i64:3;c63,64,0i64:3", ""},
    {"maximum", "d:3x4;d:3x4", ""},
    {"maximum", "n:3x4;n:", ""},
    {"minimum", "d:2x3;d:3", ""},
    {"eq", "i0_3:4x4;i0_3:4", ""},
    {"ne", "i0_3:4x4;i0_3:4x4", ""},
    {"lt", "n:3x4;n:4", ""},
    {"le", "i0_3:6;i0_3:6", ""},
    {"gt", "n:3x4;n:3x4", ""},
    {"ge", "i0_3:6;i0_3:1", ""},
    {"logical_and", "b:3x4;b:4", ""},
    {"logical_or", "b:3x4;b:3x4", ""},
    {"logical_not", "b:3x4", ""},
    {"logical_not", "n:5", ""},
    {"where", "b:3x4;n:3x4;n:4", ""},
    {"where", "b:3x1;n:1x4;n:", ""},
    /* larger broadcasts for the avx2 broadcast kernels: per-channel operands, middle and
     * outer-product broadcasts, inner blocks with vector bodies and tails, a threaded size */
    {"add", "n:4x8x5x6;n:8x1x1", "", SWEEP_NO_GRAD},
    {"add", "n:2x3x33;n:2x1x33", "", SWEEP_NO_GRAD},
    {"add", "n:64x32x32;n:32x1", "", SWEEP_NO_GRAD},
    {"sub", "n:1x8x1x1;n:4x8x5x6", "", SWEEP_NO_GRAD},
    {"mul", "n:4x8x5x6;n:1x8x1x1", "", SWEEP_NO_GRAD},
    {"mul", "n:1x1;n:1", "", SWEEP_NO_GRAD},
    {"div", "n:4x8x7x7;p:8x1x1", "", SWEEP_NO_GRAD},
    {"maximum", "n:4x8x5x6;n:8x1x1", "", SWEEP_NO_GRAD},
    {"minimum", "n:3x1x17;n:1x5x1", "", SWEEP_NO_GRAD},
    {"eq", "i0_3f32:2x4x8x9;i0_3f32:4x1x1", "", SWEEP_NO_GRAD},
    {"ne", "i0_3f32:2x4x8x9;i0_3f32:2x1x8x9", "", SWEEP_NO_GRAD},
    {"lt", "n:2x4x8x8;n:4x1x1", "", SWEEP_NO_GRAD},
    {"le", "i0_3f32:4x1x1;i0_3f32:2x4x8x9", "", SWEEP_NO_GRAD},
    {"gt", "n:2x4x8x8;n:2x4x8x8", "", SWEEP_NO_GRAD},
    {"gt", "n:64x32x33;n:", "", SWEEP_NO_GRAD},
    {"ge", "i0_3f32:3x1x37;i0_3f32:1x5x1", "", SWEEP_NO_GRAD},
    {"where", "b:2x4x8x9;n:2x4x8x9;n:", "", SWEEP_NO_GRAD},
    {"where", "b:2x4x8x9;n:2x4x8x9;n:4x1x1", "", SWEEP_NO_GRAD},
    {"where", "b:4x1x1;n:2x4x8x9;n:", "", SWEEP_NO_GRAD},
    {"where", "b:2x1x8x9;n:4x1x1;n:2x4x1x1", "", SWEEP_NO_GRAD},
    {"where", "b:64x32x33;n:64x32x33;n:33", "", SWEEP_NO_GRAD},
    {0},
};

static bool bad_broadcast(void) {
    int64_t a[2] = {2, 3}, b[2] = {4, 3};
    return oar_add(oar_zeros(a, 2, OAR_F32), oar_zeros(b, 2, OAR_F32)) != NULL;
}
static bool bad_dtype(void) {
    int64_t a[1] = {3};
    return oar_mul(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F64)) != NULL;
}
static bool bad_where_cond(void) {
    int64_t a[1] = {3};
    return oar_where(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32)) != NULL;
}
static bool bad_bitwise_float(void) {
    int64_t a[1] = {3};
    return oar_bitwise_and(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32)) != NULL;
}
static bool bad_gcd_bool(void) {
    int64_t a[1] = {3};
    return oar_gcd(oar_zeros(a, 1, OAR_BOOL), oar_zeros(a, 1, OAR_BOOL)) != NULL;
}
static bool bad_shift_float(void) {
    int64_t a[1] = {3};
    return oar_bitwise_left_shift(oar_zeros(a, 1, OAR_F32), oar_zeros(a, 1, OAR_F32)) != NULL;
}
static bool bad_shift_bool(void) {
    int64_t a[1] = {3};
    return oar_bitwise_right_shift(oar_zeros(a, 1, OAR_BOOL), oar_zeros(a, 1, OAR_BOOL)) != NULL;
}
static bool bad_shift_dtypes(void) {
    int64_t a[1] = {3};
    return oar_bitwise_right_shift(oar_zeros(a, 1, OAR_U8), oar_zeros(a, 1, OAR_I64)) != NULL;
}
static bool null_input(void) {
    int64_t a[1] = {3};
    return oar_add(oar_zeros(a, 1, OAR_F32), NULL) != NULL;
}

const sweep_bad sweep_bad_binary[] = {
    {"add of shapes that do not broadcast", bad_broadcast, "expected shapes that broadcast"},
    {"mul of f32 and f64", bad_dtype, "got f32 (input 0) and f64 (input 1)"},
    {"where with a float condition", bad_where_cond, "expected cond to be bool"},
    {"add with a NULL input", null_input, "input 1 is NULL"},
    {"bitwise_and of floats", bad_bitwise_float, "bitwise_and: expected integer or bool inputs, got f32"},
    {"gcd of bools", bad_gcd_bool, "gcd: expected numeric inputs, got bool"},
    {"bitwise_left_shift of floats", bad_shift_float, "bitwise_left_shift: expected integer inputs (i8, u8, i16, u16, i32, u32, i64, u64), got f32"},
    {"bitwise_right_shift of bools", bad_shift_bool, "bitwise_right_shift: expected integer inputs (i8, u8, i16, u16, i32, u32, i64, u64), got bool"},
    {"bitwise_right_shift of u8 and i64", bad_shift_dtypes, "got u8 (input 0) and i64 (input 1)"},
    {0},
};
