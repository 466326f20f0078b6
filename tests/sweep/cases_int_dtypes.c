/* Sweep cases for the interchange integer dtypes i16, u16, u32 and u64 (issues 14 and 18): every
 * op that takes them, with i16 values that overflow and wrap, and u64 values above 2^63 (which
 * the int64 evaluator would read as negative: 2^63 = 9223372036854775808, 1.5 * 2^63 =
 * 13835058055282163712, 2^64 - 2048 = 18446744073709549568, all exact doubles). Their meaning is
 * pinned by test_int_dtypes (C) and test_int_dtypes.py (torch 1.13's int16, NumPy's unsigned). */
#include "sweep.h"

#define U64_BIG "c9223372036854775808,1,18446744073709549568,0,13835058055282163712,5"

const sweep_case sweep_cases_int_dtypes[] = {
    /* arithmetic wraps in the dtype's width */
    {"add", "c32767,-32768,30000,-5i16:4;c1,-1,30000,7i16:4", ""},
    {"add", "i-300_300i16:3x4;i-300_300i16:4", ""},
    {"sub", "c0,1,65535,7u16:4;c1,2,1,7u16:4", ""},
    {"mul", "c65536,4294967295,3,0u32:4;c65536,2,5,9u32:4", ""},
    {"add", "c18446744073709549568,9223372036854775808,1u64:3;c4096,9223372036854775808,2u64:3", ""},
    {"sub", "c0,1,9223372036854775808u64:3;c1,2,1u64:3", ""},
    {"mul", "i0_1000u64:3x4;i0_1000u64:4", ""},
    /* order and equality: unsigned for u64 above 2^63 */
    {"maximum", U64_BIG "u64:6;c1,9223372036854775808,5,0,18446744073709549568,13835058055282163712u64:6", ""},
    {"minimum", U64_BIG "u64:2x3;c13835058055282163712,0,1u64:3", ""},
    {"maximum", "c-32768,32767,-1,0i16:4;c5,-5,-1,-32768i16:4", ""},
    {"minimum", "i0_65536u16:3x4;i0_65536u16:4", ""},
    {"lt", U64_BIG "u64:6;c1,9223372036854775808,5,0,18446744073709549568,13835058055282163712u64:6", ""},
    {"le", U64_BIG "u64:2x3;c13835058055282163712,0,1u64:3", ""},
    {"gt", U64_BIG "u64:6;c13835058055282163712u64:", ""},
    {"ge", "c4294967295,0,2147483648,7u32:4;c2147483648,0,4294967295,8u32:4", ""},
    {"eq", U64_BIG "u64:6;c9223372036854775808,1,0,0,13835058055282163712,4u64:6", ""},
    {"ne", "i-5_5i16:3x4;i-5_5i16:4", ""},
    {"lt", "c-32768,32767,-1,0i16:4;c5,-5,-1,-32768i16:4", ""},
    {"gt", "i0_65536u16:2x3;i0_65536u16:3", ""},
    /* rounded division: exact, u64 as unsigned, INT_MIN / -1 wraps */
    {"div_trunc", "c18446744073709549568,9223372036854775808,7,100u64:4;c3,2,2,9u64:4", ""},
    {"div_floor", U64_BIG "u64:6;c3,1,7,9,2,13835058055282163712u64:6", ""},
    {"div_trunc", "c-7,7,-32768,5,-1i16:5;c2,-2,-1,3,7i16:5", ""},
    {"div_floor", "c-7,7,-32768,5,-1i16:5;c2,-2,-1,3,7i16:5", ""},
    {"div_floor", "i0_65536u16:3x4;i1_300u16:4", ""},
    {"div_trunc", "i0_100000u32:6;i1_70u32:6", ""},
    {"div_floor", "c5,-5,0i16:3;c0i16:", ""}, /* x / 0 is 0, NumPy's value */
    /* bitwise ops and shifts (logical for unsigned, arithmetic for i16; the width bounds them) */
    {"bitwise_and", U64_BIG "u64:6;c18446744073709549568,3,13835058055282163712,1,9223372036854775808,4u64:6", ""},
    {"bitwise_or", "i0_65536u16:3x4;i0_65536u16:4", ""},
    {"bitwise_xor", "i-32768_32768i16:3x4;i-32768_32768i16:3x4", ""},
    {"bitwise_xor", "c4294967295,0,2147483648u32:3;c1,4294967295,2147483648u32:3", ""},
    {"bitwise_left_shift", "c9223372036854775808,18446744073709549568,1,5u64:4;c1,63,64,3u64:4", ""},
    {"bitwise_right_shift", "c9223372036854775808,18446744073709549568,1,5u64:4;c1,63,64,3u64:4", ""},
    {"bitwise_left_shift", "c-32768,-5,12345,1i16:4;c1,15,16,3i16:4", ""},
    {"bitwise_right_shift", "c-32768,-5,12345,1i16:4;c1,15,16,3i16:4", ""},
    {"bitwise_right_shift", "c65535,32768,7u16:3;c15,1,16u16:3", ""},
    {"bitwise_left_shift", "c4294967295,1,3u32:3;c31,32,4u32:3", ""},
    {"logical_and", "i0_3u32:3x4;i0_3u32:4", ""},
    {"logical_or", "i0_3u16:3x4;i0_3u16:3x4", ""},
    {"logical_not", U64_BIG "u64:6", ""},
    {"where", "b:3x4;" U64_BIG "u64:3x4;i0_9u64:4", ""},
    {"where", "b:2x3;c-32768,32767i16:2x3;i-9_9i16:", ""},
    /* unary: neg wraps (unsigned: 2^n - x), abs of an unsigned value is the value */
    {"neg", "c0,1,4294967295,2147483648u32:4", ""},
    {"neg", "c-32768,5,0,32767i16:4", ""},
    {"neg", U64_BIG "u64:6", ""},
    {"abs", "c-32768,-5,7,0i16:4", ""},
    {"abs", U64_BIG "u64:6", ""},
    {"abs", "i0_65536u16:5", ""},
    {"bitwise_not", "i-32768_32768i16:3x4", ""},
    {"bitwise_not", U64_BIG "u64:6", ""},
    {"bitwise_not", "i0_65536u16:5", ""},
    {"bitwise_not", "c0,4294967295u32:2", ""},
    /* reductions: sums wrap (u16/u32/u64 sum to u64, i16 to i64), extremes compare unsigned */
    {"sum", "c18446744073709549568,4096,9223372036854775808,1u64:2x2", "dims=0 keepdim=0"},
    {"sum", "c32767,32767,-5,-32768i16:2x2", "dims=1 keepdim=1"},
    {"sum", "i0_4294967295u32:3x4", "dims= keepdim=0"},
    {"sum", "i0_65536u16:2x3x2", "dims=0,2 keepdim=0"},
    {"amax", U64_BIG "u64:2x3", "dims=1 keepdim=0"},
    {"amin", U64_BIG "u64:2x3", "dims=0 keepdim=1"},
    {"amax", "i-32768_32768i16:3x4", "dims= keepdim=0"},
    {"amin", "i0_4294967295u32:3x4", "dims=1 keepdim=0"},
    {"argmax", U64_BIG "u64:2x3", "dim=1 keepdim=0"},
    {"argmin", U64_BIG "u64:6", "dim=0 keepdim=0"},
    {"argmax", "i-32768_32768i16:3x4", "dim=0 keepdim=1"},
    {"argmin", "i0_65536u16:3x4", "dim=1 keepdim=0"},
    {"topk", U64_BIG "u64:2x6", "k=3 dim=1 largest=1 sorted=1"},
    {"topk", U64_BIG "u64:6", "k=4 dim=0 largest=0 sorted=1"},
    {"topk", "i-32768_32768i16:3x5", "k=2 dim=1 largest=1 sorted=0"},
    {"topk", "i0_4294967295u32:4x3", "k=2 dim=0 largest=0 sorted=1"},
    {"topk_gather", U64_BIG "u64:2x3;i0_3:2x2", "dim=1"},
    /* casts: integers wrap to the narrower width (C's and NumPy's rule), floats truncate toward
     * zero and clamp to the range (NaN: 0), u64 converts as unsigned both ways */
    {"cast", "c40000,-40000,70000,5,-1i32:5", "dtype=i16"},
    {"cast", "c40000,-40000,70000,5,-1i32:5", "dtype=u16"},
    {"cast", "c-1,4294967296,4294967295,-2147483648i64:4", "dtype=u32"},
    {"cast", "c-1,-9223372036854775808,5i64:3", "dtype=u64"},
    {"cast", U64_BIG "u64:6", "dtype=i64"},
    {"cast", U64_BIG "u64:6", "dtype=f64"},
    {"cast", U64_BIG "u64:6", "dtype=u8"},
    {"cast", U64_BIG "u64:6", "dtype=i16"},
    {"cast", "c300,65535,128,-1u16:4", "dtype=i8"},
    {"cast", "c-32768,32767,-1i16:3", "dtype=u64"},
    {"cast", "cnan,-inf,inf,-5,70000,3.9,-3.9,65535.5f32:8", "dtype=u16"},
    {"cast", "cnan,-inf,inf,-40000,40000,3.9,-3.9f32:7", "dtype=i16"},
    {"cast", "c1e19,-3.5,2e19,nan,12345.9,18446744073709549568f64:6", "dtype=u64"},
    {"cast", "c4294967295,16777217,0u32:3", "dtype=f32"},
    {"cast", "c4294967295,65536,0u32:3", "dtype=bool"},
    {"cast", "b:6", "dtype=u32"},
    {"cast", "i-9_9i16:3x4", "dtype=f16"},
    {"contiguous", U64_BIG "u64:2x3", ""},
    {"contiguous", "i-32768_32768i16:5x7", ""},
    /* shape and copy ops move the elements unchanged */
    {"reshape", "i0_65536u16:2x3x4", "shape=6,4", SWEEP_NO_STRIDED},
    {"permute", "i-32768_32768i16:2x3x4", "dims=2,0,1"},
    {"slice", U64_BIG "u64:6x4", "dim=0 start=1 end=5 step=2"},
    {"expand", "i0_4294967295u32:3x1", "shape=2,3,4"},
    {"squeeze", "i0_9u16:3x1x4", "dim=1"},
    {"unsqueeze", U64_BIG "u64:3x2", "dim=1"},
    {"slice_backward", "i-9_9i16:2x4", "shape=6,4 dim=0 start=1 end=5 step=2"},
    {"concat", U64_BIG "u64:2x3;i0_9u64:4x3", "dim=0"},
    {"concat", "i-32768_32768i16:2x3;i-9_9i16:2x2", "dim=1"},
    {"stack", "i0_65536u16:2x3;i0_65536u16:2x3", "dim=1"},
    {"split", "i0_4294967295u32:5x3", "dim=0 split_size=2"},
    {"chunk", U64_BIG "u64:6x2", "dim=0 chunks=4"},
    {"flip", U64_BIG "u64:2x3", "dims=0,1"},
    {"pad", "i-32768_32768i16:2x3", "pads=1,2 mode=0 value=-7"},
    {"pad", U64_BIG "u64:2x3", "pads=1,2 mode=0 value=9223372036854775808"},
    {"pad", "i0_65536u16:2x4", "pads=2,1 mode=1 value=0"},
    {"pad_backward", "i-9_9i16:2x6", "shape=2,3 pads=1,2 mode=0"},
    {"index_select", U64_BIG "u64:6x2;i0_6:4", "dim=0"},
    {"index_select", "i-32768_32768i16:5x3;i0_3:4", "dim=1"},
    {"index_select_backward", "i0_65536u32:4x3;i0_5:4", "shape=5,3 dim=0"},
    {"gather", "i0_65536u16:3x4;i0_3:5x4", "dim=0"},
    {"gather", U64_BIG "u64:2x3;i0_3:2x5", "dim=1"},
    {"scatter_add", "i0_65536u64:3x4;i0_3:2x4;i0_65536u64:2x4", "dim=0"},
    {"scatter_add", "c32767,-32768,5i16:3x1;i0_3:2x1;c1,-1i16:2x1", "dim=0"},
    {"masked_fill", U64_BIG "u64:2x3;b:2x3", "value=18446744073709549568"},
    {"masked_fill", "i-32768_32768i16:3x4;b:4", "value=-32768"},
    {0},
};

/* Everything else refuses them, naming the dtype (the reference kernels' dtype masks). */
static oar_tensor *z(oar_dtype dt) {
    int64_t s[2] = {2, 2};
    return oar_zeros(s, 2, dt);
}
static bool pow_u16(void) { return oar_pow(z(OAR_U16), z(OAR_U16)) != NULL; }
static bool gcd_i16(void) { return oar_gcd(z(OAR_I16), z(OAR_I16)) != NULL; }
static bool matmul_i16(void) { return oar_matmul(z(OAR_I16), z(OAR_I16)) != NULL; }
static bool cumsum_u64(void) { return oar_cumsum(z(OAR_U64), 0) != NULL; }
static bool prod_u32(void) { return oar_prod(z(OAR_U32), NULL, 0, false) != NULL; }
static bool relu_u32(void) { return oar_relu(z(OAR_U32)) != NULL; }
static bool exp_i16(void) { return oar_exp(z(OAR_I16)) != NULL; }
static bool div_u64(void) { return oar_div(z(OAR_U64), z(OAR_U64)) != NULL; }
static bool div_floor_bool(void) { return oar_div_floor(z(OAR_BOOL), z(OAR_BOOL)) != NULL; }

const sweep_bad sweep_bad_int_dtypes[] = {
    {"pow of u16", pow_u16, "pow: no kernel for dtype u16 on cpu"},
    {"gcd of i16", gcd_i16, "gcd: no kernel for dtype i16 on cpu"},
    {"matmul of i16", matmul_i16, "i16"},
    {"cumsum of u64", cumsum_u64, "cumsum: no kernel for dtype u64 on cpu"},
    {"prod of u32", prod_u32, "prod: no kernel for dtype u32 on cpu"},
    {"relu of u32", relu_u32, "relu: takes no u32 tensors"},
    {"exp of i16", exp_i16, "exp: expected"},
    {"true division of u64", div_u64, "div: expected floating inputs (true division), got u64"},
    {"div_floor of bools", div_floor_bool, "div_floor: expected numeric inputs, got bool"},
    {0},
};
