/* bitwise_left_shift and bitwise_right_shift: integer shifts with NumPy broadcasting (ONNX's
 * BitShift, torch's << and >>). The result depends on the dtype's width (a shift by the width or
 * more clears every bit), so these are not kinds of binary.c's int64 evaluator. */
#include "ops/op.h"

static oar_status shift_infer(const char *name, oar_tensor *const *in, oar_meta *out, int *n_out) {
    oar_status st = oar_check_same_dtype(name, in, 2);
    if (st != OAR_OK) return st;
    oar_dtype dt = in[0]->dtype;
    if (oar_dtypes[dt].is_float || dt == OAR_BOOL)
        return oar_error(OAR_ERR_DTYPE, "%s: expected integer inputs (i8, u8, i16, u16, i32, u32, i64, u64), got %s; shifts are defined "
                                        "on the bits of integers only", name, oar_dtype_name(dt));
    *n_out = 1;
    return oar_infer_broadcast(name, in, 2, dt, out);
}

/* a shifted by b in a dtype of `bits` bits (a sign-extended to int64 when signed). Out-of-range
 * shifts are defined rather than left to C (undefined there): 0, or -1 for >> of a negative. */
static inline int64_t shift_one(bool left, int64_t a, int64_t b, int bits) {
    if (b < 0 || b >= bits) return left || a >= 0 ? 0 : -1;
    if (left) return (int64_t)((uint64_t)a << b); /* the store truncates to the dtype */
    return a >= 0 ? a >> b : ~(~a >> b);         /* arithmetic, without relying on >> of negatives */
}

static oar_status shift_ref(bool left, oar_tensor *const *in, oar_tensor *const *out) {
    oar_tensor *y = out[0];
    if (y->numel == 0) return OAR_OK;
    oar_tensor *ops[3] = {y, in[0], in[1]};
    oar_iter it;
    oar_iter_init(&it, y->shape, y->ndim, ops, 3);
    const oar_dtype_traits *t = &oar_dtypes[y->dtype];
    int bits = (int)t->size * 8;
    if (oar_dtype_bits_u64(y->dtype)) { /* logical shifts of the unsigned value */
        do {
            uint64_t a = *(const uint64_t *)it.ptr[1], b = *(const uint64_t *)it.ptr[2];
            *(uint64_t *)it.ptr[0] = b >= 64 ? 0 : left ? a << b : a >> b;
        } while (oar_iter_next(&it));
        return OAR_OK;
    }
    do t->store_i64(it.ptr[0], shift_one(left, t->load_i64(it.ptr[1]), t->load_i64(it.ptr[2]), bits));
    while (oar_iter_next(&it));
    return OAR_OK;
}

#define SHIFT(NAME, LEFT)                                                                                        \
    static oar_status NAME##_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out,            \
                                   int *n_out) {                                                                 \
        (void)n_in; (void)a;                                                                                     \
        return shift_infer(#NAME, in, out, n_out);                                                               \
    }                                                                                                            \
    static oar_status NAME##_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,   \
                                 int n_out, const oar_attr *a) {                                                 \
        (void)ctx; (void)n_in; (void)n_out; (void)a;                                                             \
        return shift_ref(LEFT, in, out);                                                                         \
    }                                                                                                            \
    const oar_op_def oar_opdef_##NAME = {                                                                        \
        .name = #NAME, .n_inputs = 2, .n_outputs = 1,                                                            \
        .flags = OAR_OPF_ELEMENTWISE | OAR_OPF_STRIDED | OAR_OPF_NONDIFF | OAR_OPF_INPLACE_OK,                   \
        .ref_dtypes = OAR_INT_DTYPES | OAR_EXT_INT_DTYPES, .infer = NAME##_infer, .reference = NAME##_ref,       \
    };                                                                                                           \
    oar_tensor *oar_##NAME(oar_tensor *a, oar_tensor *b) {                                                       \
        oar_tensor *in[2] = {a, b};                                                                              \
        return oar_op_call1(OAR_OP_##NAME, in, 2, NULL);                                                         \
    }

SHIFT(bitwise_left_shift, true)
SHIFT(bitwise_right_shift, false)
