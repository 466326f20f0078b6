/* The interchange integer dtypes i16, u16, u32 and u64: their place in the enum (stored in
 * files), casts between every kind (integers wrap as C and NumPy do, floats truncate and clamp),
 * and the unsigned semantics of u64 above 2^63 in comparisons, extremes, sorting, division and
 * shifts, which an int64 evaluator would get wrong. Expected values are NumPy's. */
#include "test_util.h"

#include <stdint.h>

#define TWO63 9223372036854775808ull

static oar_tensor *vec(const void *data, int64_t n, oar_dtype dt) { return oar_from_data(data, &n, 1, dt); }

/* Whether t (any dtype) holds exactly the n elements of want, of dtype dt. */
static bool holds(oar_tensor *t, const void *want, int64_t n, oar_dtype dt) {
    if (!t || oar_dtype_of(t) != dt || oar_numel(t) != n) return false;
    size_t bytes = (size_t)n * oar_dtype_size(dt);
    char *got = malloc(bytes + 1);
    bool same = oar_copy_to_buffer(t, got, bytes, dt) == OAR_OK && !memcmp(got, want, bytes);
    free(got);
    return same;
}

static void test_table(void) {
    /* appended after bool: the numbers of the older dtypes (in files, in bindings) stay */
    CHECK(OAR_BOOL == 8 && OAR_I16 == 9 && OAR_U16 == 10 && OAR_U32 == 11 && OAR_U64 == 12 && OAR_DTYPE_COUNT >= 13);
    const char *names[4] = {"i16", "u16", "u32", "u64"};
    size_t sizes[4] = {2, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        oar_dtype dt = (oar_dtype)(OAR_I16 + k);
        CHECK(!strcmp(oar_dtype_name(dt), names[k]) && oar_dtype_size(dt) == sizes[k] && !oar_dtype_is_float(dt));
    }
}

static void test_creation(void) {
    const uint16_t ar[4] = {0, 3, 6, 9};
    CHECK(holds(oar_arange(0, 12, 3, OAR_U16), ar, 4, OAR_U16));
    const int16_t fl[2] = {-32768, -32768};
    CHECK(holds(oar_full((int64_t[]){2}, 1, -32768, OAR_I16), fl, 2, OAR_I16));
    const uint64_t big[2] = {18446744073709549568ull, 18446744073709549568ull}, zero[2] = {0, 0};
    CHECK(holds(oar_full((int64_t[]){2}, 1, 18446744073709549568.0, OAR_U64), big, 2, OAR_U64));
    CHECK(holds(oar_zeros((int64_t[]){2}, 1, OAR_U64), zero, 2, OAR_U64));
    const uint32_t ones[2] = {1, 1};
    CHECK(holds(oar_ones((int64_t[]){2}, 1, OAR_U32), ones, 2, OAR_U32));
}

static void test_casts(void) {
    const int32_t i32[4] = {40000, -40000, 70000, -1};
    const int16_t to_i16[4] = {-25536, 25536, 4464, -1};
    const uint16_t to_u16[4] = {40000, 25536, 4464, 65535};
    CHECK(holds(oar_cast(vec(i32, 4, OAR_I32), OAR_I16), to_i16, 4, OAR_I16));
    CHECK(holds(oar_cast(vec(i32, 4, OAR_I32), OAR_U16), to_u16, 4, OAR_U16));
    const int64_t i64[3] = {-1, 4294967296LL, INT64_MIN};
    const uint32_t to_u32[3] = {4294967295u, 0, 0};
    const uint64_t to_u64[3] = {UINT64_MAX, 4294967296ull, TWO63};
    CHECK(holds(oar_cast(vec(i64, 3, OAR_I64), OAR_U32), to_u32, 3, OAR_U32));
    CHECK(holds(oar_cast(vec(i64, 3, OAR_I64), OAR_U64), to_u64, 3, OAR_U64));
    /* u64 -> i64 keeps the bits; u64 <-> f64 is unsigned */
    const uint64_t u64[3] = {TWO63, UINT64_MAX, TWO63 + 5};
    const int64_t back[3] = {INT64_MIN, -1, INT64_MIN + 5};
    const double as_f64[3] = {9223372036854775808.0, 18446744073709551616.0, 9223372036854775808.0};
    const uint8_t as_u8[3] = {0, 255, 5};
    CHECK(holds(oar_cast(vec(u64, 3, OAR_U64), OAR_I64), back, 3, OAR_I64));
    CHECK(holds(oar_cast(vec(u64, 3, OAR_U64), OAR_F64), as_f64, 3, OAR_F64));
    CHECK(holds(oar_cast(vec(u64, 3, OAR_U64), OAR_U8), as_u8, 3, OAR_U8));
    /* floats truncate toward zero and clamp to the range (NaN: 0) */
    const double f64[6] = {1e19, -3.5, 2e19, NAN, 12345.9, 18446744073709549568.0};
    const uint64_t f_u64[6] = {10000000000000000000ull, 0, UINT64_MAX, 0, 12345, 18446744073709549568ull};
    CHECK(holds(oar_cast(vec(f64, 6, OAR_F64), OAR_U64), f_u64, 6, OAR_U64));
    const float f32[5] = {40000, -40000, 3.9f, -3.9f, NAN};
    const int16_t f_i16[5] = {32767, -32768, 3, -3, 0};
    CHECK(holds(oar_cast(vec(f32, 5, OAR_F32), OAR_I16), f_i16, 5, OAR_I16));
    const uint16_t u16[2] = {300, 65535};
    const int8_t u16_i8[2] = {44, -1};
    CHECK(holds(oar_cast(vec(u16, 2, OAR_U16), OAR_I8), u16_i8, 2, OAR_I8));
    const int16_t m1 = -1;
    const uint64_t m1_u64 = UINT64_MAX; /* sign-extended, then wrapped: NumPy's int16(-1).astype(uint64) */
    CHECK(holds(oar_cast(vec(&m1, 1, OAR_I16), OAR_U64), &m1_u64, 1, OAR_U64));
    const uint32_t big32 = 4294967295u;
    const float big32_f = 4294967296.0f;
    CHECK(holds(oar_cast(vec(&big32, 1, OAR_U32), OAR_F32), &big32_f, 1, OAR_F32));
    double v = 0;
    CHECK(oar_item(vec(&u64[1], 1, OAR_U64), &v) == OAR_OK && v == 18446744073709551616.0);
}

static void test_unsigned_order(void) {
    const uint64_t a[4] = {TWO63, 1, UINT64_MAX, 0}, b[4] = {1, TWO63, 5, 0};
    oar_tensor *x = vec(a, 4, OAR_U64), *y = vec(b, 4, OAR_U64);
    const uint8_t lt[4] = {0, 1, 0, 0}, gt[4] = {1, 0, 1, 0}, ge[4] = {1, 0, 1, 1};
    CHECK(holds(oar_lt(x, y), lt, 4, OAR_BOOL));
    CHECK(holds(oar_gt(x, y), gt, 4, OAR_BOOL));
    CHECK(holds(oar_ge(x, y), ge, 4, OAR_BOOL));
    const uint64_t mx[4] = {TWO63, TWO63, UINT64_MAX, 0}, mn[4] = {1, 1, 5, 0};
    CHECK(holds(oar_maximum(x, y), mx, 4, OAR_U64));
    CHECK(holds(oar_minimum(x, y), mn, 4, OAR_U64));
    const uint64_t top = UINT64_MAX, bottom = 0;
    const int64_t arg = 2;
    CHECK(holds(oar_amax(x, NULL, 0, false), &top, 1, OAR_U64));
    CHECK(holds(oar_amin(x, NULL, 0, false), &bottom, 1, OAR_U64));
    CHECK(holds(oar_argmax(x, 0, false), &arg, 1, OAR_I64));
    oar_tensor *tv = NULL, *ti = NULL;
    const uint64_t top2[2] = {UINT64_MAX, TWO63};
    const int64_t top2_i[2] = {2, 0};
    CHECK(oar_topk(x, 2, 0, true, true, &tv, &ti) == OAR_OK && holds(tv, top2, 2, OAR_U64) &&
          holds(ti, top2_i, 2, OAR_I64));
    oar_release(tv);
    oar_release(ti);
    /* sums wrap in 64 bits and come back as u64 */
    const uint64_t s[2] = {UINT64_MAX, 2}, one = 1;
    CHECK(holds(oar_sum(vec(s, 2, OAR_U64), NULL, 0, false), &one, 1, OAR_U64));
    /* i16: 32767 + 1 wraps; neg and abs of -32768 wrap to -32768 (torch's int16) */
    const int16_t p[2] = {32767, -32768}, q[2] = {1, -1}, pq[2] = {-32768, 32767}, ng[2] = {-32767, -32768};
    CHECK(holds(oar_add(vec(p, 2, OAR_I16), vec(q, 2, OAR_I16)), pq, 2, OAR_I16));
    CHECK(holds(oar_neg(vec(p, 2, OAR_I16)), ng, 2, OAR_I16));
    const int16_t ab[2] = {32767, -32768};
    CHECK(holds(oar_abs(vec(p, 2, OAR_I16)), ab, 2, OAR_I16));
    /* unsigned: neg is 2^n - x, abs the value */
    const uint32_t u[2] = {1, 0}, nu[2] = {4294967295u, 0};
    CHECK(holds(oar_neg(vec(u, 2, OAR_U32)), nu, 2, OAR_U32));
    CHECK(holds(oar_abs(x), a, 4, OAR_U64));
}

static void test_division_shifts(void) {
    const uint64_t a[3] = {UINT64_MAX, TWO63, 7}, b[3] = {2, 3, 2};
    const uint64_t q[3] = {9223372036854775807ull, 3074457345618258602ull, 3};
    CHECK(holds(oar_div_trunc(vec(a, 3, OAR_U64), vec(b, 3, OAR_U64)), q, 3, OAR_U64));
    CHECK(holds(oar_div_floor(vec(a, 3, OAR_U64), vec(b, 3, OAR_U64)), q, 3, OAR_U64));
    const int16_t c[3] = {-7, 7, -32768}, d[3] = {2, -2, -1};
    const int16_t tq[3] = {-3, -3, -32768}, fq[3] = {-4, -4, -32768};
    CHECK(holds(oar_div_trunc(vec(c, 3, OAR_I16), vec(d, 3, OAR_I16)), tq, 3, OAR_I16));
    CHECK(holds(oar_div_floor(vec(c, 3, OAR_I16), vec(d, 3, OAR_I16)), fq, 3, OAR_I16));
    const int64_t e = INT64_MIN, f = -1;
    CHECK(holds(oar_div_trunc(vec(&e, 1, OAR_I64), vec(&f, 1, OAR_I64)), &e, 1, OAR_I64));
    const uint16_t z = 0, n = 5; /* x / 0 is 0, as NumPy's */
    CHECK(holds(oar_div_trunc(vec(&n, 1, OAR_U16), vec(&z, 1, OAR_U16)), &z, 1, OAR_U16));
    CHECK(holds(oar_div_floor(vec(&n, 1, OAR_U16), vec(&z, 1, OAR_U16)), &z, 1, OAR_U16));
    /* shifts of u64 are logical: 2^63 >> 63 is 1, not -1 */
    const uint64_t s[3] = {TWO63, TWO63, TWO63}, by[3] = {63, 1, 64}, r[3] = {1, 1ull << 62, 0}, l[3] = {0, 0, 0};
    CHECK(holds(oar_bitwise_right_shift(vec(s, 3, OAR_U64), vec(by, 3, OAR_U64)), r, 3, OAR_U64));
    CHECK(holds(oar_bitwise_left_shift(vec(s, 3, OAR_U64), vec(by, 3, OAR_U64)), l, 3, OAR_U64));
    const int16_t h = -32768, one = 1, half = -16384;
    CHECK(holds(oar_bitwise_right_shift(vec(&h, 1, OAR_I16), vec(&one, 1, OAR_I16)), &half, 1, OAR_I16));
}

static void test_print_refuse(void) {
    const uint64_t a[2] = {UINT64_MAX, TWO63};
    char buf[256];
    oar_format(vec(a, 2, OAR_U64), buf, sizeof buf);
    CHECK(strstr(buf, "[18446744073709551615, 9223372036854775808]") && strstr(buf, "dtype=u64"));
    const int16_t h[2] = {-32768, 7};
    oar_format(vec(h, 2, OAR_I16), buf, sizeof buf);
    CHECK(strstr(buf, "[-32768, 7]") && strstr(buf, "dtype=i16"));
    /* ops outside the list refuse them, naming the dtype */
    oar_tensor *m = oar_zeros((int64_t[]){2, 2}, 2, OAR_I16);
    CHECK_ERR(oar_matmul(m, m), "i16");
    CHECK_ERR(oar_exp(m), "got i16");
}

int main(void) {
    oar_scope_begin();
    test_table();
    test_creation();
    test_casts();
    test_unsigned_order();
    test_division_shifts();
    test_print_refuse();
    oar_scope_end();
    return test_summary("test_int_dtypes");
}
