/* The elementwise families on the GPU: unary ops, binary ops (NumPy broadcasting),
 * comparisons, logical ops, where, and the relu/gelu backward ops. Each op maps to a kind of
 * one launcher (elementwise.cu); this file packs operands as strided views at the output's
 * shape. */
#include "cuda_ew_pack.h"

#include <string.h>

/* Operands at the output's shape: strides in elements, 0 on broadcast dims (launch_elementwise.h;
 * cuda_special.c packs its operands with it too). */
bool oar_cu_ew_pack(oar_cu_ew *e, oar_tensor *const *in, int n_in, oar_tensor *y) {
    memset(e, 0, sizeof *e);
    if (y->ndim > OAR_CU_MAX_DIMS) return false;
    e->ndim = y->ndim;
    e->n_in = n_in;
    e->n = y->numel;
    e->out = oar_tensor_ptr(y);
    e->out_dtype = y->dtype;
    e->contiguous = 1;
    for (int k = 0; k < y->ndim; k++) e->shape[k] = y->shape[k];
    for (int j = 0; j < n_in; j++) {
        const oar_tensor *t = in[j];
        int lead = y->ndim - t->ndim;
        if (lead < 0) return false;
        int64_t expect = 1;
        for (int k = y->ndim - 1; k >= 0; k--) {
            int tk = k - lead;
            int64_t s = tk < 0 || t->shape[tk] == 1 ? 0 : t->strides[tk];
            e->strides[j][k] = s;
            if (y->shape[k] != 1 && s != expect) e->contiguous = 0;
            expect *= y->shape[k];
        }
        e->in[j] = oar_tensor_ptr(t);
    }
    return true;
}

static bool fits(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)n_out; (void)a;
    return out[0]->ndim <= OAR_CU_MAX_DIMS;
}

/* ---- unary */
typedef struct { oar_op_id op; int kind; } op_kind;
static const op_kind unary_ops[] = {
    {OAR_OP_neg, OAR_CU_NEG}, {OAR_OP_abs, OAR_CU_ABS}, {OAR_OP_exp, OAR_CU_EXP}, {OAR_OP_log, OAR_CU_LOG},
    {OAR_OP_log1p, OAR_CU_LOG1P}, {OAR_OP_sqrt, OAR_CU_SQRT}, {OAR_OP_rsqrt, OAR_CU_RSQRT},
    {OAR_OP_square, OAR_CU_SQUARE}, {OAR_OP_sin, OAR_CU_SIN}, {OAR_OP_cos, OAR_CU_COS}, {OAR_OP_tanh, OAR_CU_TANH},
    {OAR_OP_sigmoid, OAR_CU_SIGMOID}, {OAR_OP_relu, OAR_CU_RELU}, {OAR_OP_leaky_relu, OAR_CU_LEAKY_RELU},
    {OAR_OP_elu, OAR_CU_ELU}, {OAR_OP_gelu, OAR_CU_GELU}, {OAR_OP_silu, OAR_CU_SILU},
    {OAR_OP_softplus, OAR_CU_SOFTPLUS}, {OAR_OP_erf, OAR_CU_ERF}, {OAR_OP_clip, OAR_CU_CLIP},
    {OAR_OP_sign, OAR_CU_SIGN}, {OAR_OP_floor, OAR_CU_FLOOR}, {OAR_OP_ceil, OAR_CU_CEIL},
    {OAR_OP_round, OAR_CU_ROUND}, {OAR_OP_logical_not, OAR_CU_LOGICAL_NOT}, {OAR_OP_erfc, OAR_CU_ERFC},
    {OAR_OP_asin, OAR_CU_ASIN}, {OAR_OP_acos, OAR_CU_ACOS}, {OAR_OP_atan, OAR_CU_ATAN}, {OAR_OP_sinh, OAR_CU_SINH},
    {OAR_OP_asinh, OAR_CU_ASINH}, {OAR_OP_atanh, OAR_CU_ATANH}, {OAR_OP_expm1, OAR_CU_EXPM1},
    {OAR_OP_exp2, OAR_CU_EXP2}, {OAR_OP_acosh, OAR_CU_ACOSH}, {OAR_OP_cosh, OAR_CU_COSH},
    {OAR_OP_lgamma, OAR_CU_LGAMMA}, {OAR_OP_digamma, OAR_CU_DIGAMMA}, {OAR_OP_polygamma, OAR_CU_POLYGAMMA},
    {OAR_OP_erfinv, OAR_CU_ERFINV}, {OAR_OP_bitwise_not, OAR_CU_BITWISE_NOT},
};
#define N_UNARY (int)(sizeof unary_ops / sizeof unary_ops[0])

static int kind_of(const op_kind *table, int n, oar_op_id op) {
    for (int i = 0; i < n; i++)
        if (table[i].op == op) return table[i].kind;
    return -1;
}

/* The attributes a unary kind reads, as doubles. */
static void unary_attrs(oar_op_id op, const oar_attr *a, double *out) {
    const oar_op_def *d = oar_op_table[op];
    for (int i = 0; i < d->n_attrs && i < 2; i++)
        out[i] = a[i].kind == OAR_ATTR_FLOAT ? a[i].f : (double)a[i].i;
}

static oar_status run_unary(oar_op_id op, const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out,
                            const oar_attr *a) {
    oar_cu_ew e;
    if (!oar_cu_ew_pack(&e, in, 1, out[0]))
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: too many dims for the GPU kernel", oar_op_table[op]->name);
    e.in_dtype = in[0]->dtype;
    unary_attrs(op, a, e.attr);
    int err = oar_cu_unary(kind_of(unary_ops, N_UNARY, op), &e, ctx->stream);
    return oar_cuda_status((cudaError_t)err, oar_op_table[op]->name);
}

#define UNARY_FN(NAME)                                                                                   \
    static oar_status cu_##NAME(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, \
                                int n_out, const oar_attr *a) {                                          \
        (void)n_in; (void)n_out;                                                                         \
        return run_unary(OAR_OP_##NAME, ctx, in, out, a);                                                \
    }
UNARY_FN(neg) UNARY_FN(abs) UNARY_FN(exp) UNARY_FN(log) UNARY_FN(log1p) UNARY_FN(sqrt) UNARY_FN(rsqrt)
UNARY_FN(square) UNARY_FN(sin) UNARY_FN(cos) UNARY_FN(tanh) UNARY_FN(sigmoid) UNARY_FN(relu)
UNARY_FN(leaky_relu) UNARY_FN(elu) UNARY_FN(gelu) UNARY_FN(silu) UNARY_FN(softplus) UNARY_FN(erf)
UNARY_FN(clip) UNARY_FN(sign) UNARY_FN(floor) UNARY_FN(ceil) UNARY_FN(round) UNARY_FN(logical_not)
UNARY_FN(erfc) UNARY_FN(asin) UNARY_FN(acos) UNARY_FN(atan) UNARY_FN(sinh) UNARY_FN(asinh) UNARY_FN(atanh)
UNARY_FN(expm1) UNARY_FN(exp2) UNARY_FN(acosh) UNARY_FN(cosh) UNARY_FN(lgamma) UNARY_FN(digamma)
UNARY_FN(polygamma) UNARY_FN(erfinv) UNARY_FN(bitwise_not)

/* ---- binary */
static const op_kind binary_ops[] = {
    {OAR_OP_add, OAR_CU_ADD}, {OAR_OP_sub, OAR_CU_SUB}, {OAR_OP_mul, OAR_CU_MUL}, {OAR_OP_div, OAR_CU_DIV},
    {OAR_OP_pow, OAR_CU_POW}, {OAR_OP_maximum, OAR_CU_MAX}, {OAR_OP_minimum, OAR_CU_MIN}, {OAR_OP_eq, OAR_CU_EQ},
    {OAR_OP_ne, OAR_CU_NE}, {OAR_OP_lt, OAR_CU_LT}, {OAR_OP_le, OAR_CU_LE}, {OAR_OP_gt, OAR_CU_GT},
    {OAR_OP_ge, OAR_CU_GE}, {OAR_OP_logical_and, OAR_CU_AND}, {OAR_OP_logical_or, OAR_CU_OR},
    {OAR_OP_relu_backward, OAR_CU_RELU_BACKWARD}, {OAR_OP_gelu_backward, OAR_CU_GELU_BACKWARD},
    {OAR_OP_atan2, OAR_CU_ATAN2}, {OAR_OP_bitwise_and, OAR_CU_BITWISE_AND}, {OAR_OP_bitwise_or, OAR_CU_BITWISE_OR},
    {OAR_OP_bitwise_xor, OAR_CU_BITWISE_XOR}, {OAR_OP_gcd, OAR_CU_GCD}, {OAR_OP_lcm, OAR_CU_LCM},
};
#define N_BINARY (int)(sizeof binary_ops / sizeof binary_ops[0])

static oar_status run_binary(oar_op_id op, const oar_kctx *ctx, oar_tensor *const *in, oar_tensor *const *out,
                             const oar_attr *a) {
    oar_cu_ew e;
    if (!oar_cu_ew_pack(&e, in, 2, out[0]))
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: too many dims for the GPU kernel", oar_op_table[op]->name);
    e.in_dtype = in[0]->dtype;
    if (op == OAR_OP_gelu_backward) e.attr[0] = (double)a[0].i;
    int err = oar_cu_binary(kind_of(binary_ops, N_BINARY, op), &e, ctx->stream);
    return oar_cuda_status((cudaError_t)err, oar_op_table[op]->name);
}

#define BINARY_FN(NAME)                                                                                  \
    static oar_status cu_##NAME(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, \
                                int n_out, const oar_attr *a) {                                          \
        (void)n_in; (void)n_out;                                                                         \
        return run_binary(OAR_OP_##NAME, ctx, in, out, a);                                               \
    }
BINARY_FN(add) BINARY_FN(sub) BINARY_FN(mul) BINARY_FN(div) BINARY_FN(pow) BINARY_FN(maximum)
BINARY_FN(minimum) BINARY_FN(atan2) BINARY_FN(eq) BINARY_FN(ne) BINARY_FN(lt) BINARY_FN(le) BINARY_FN(gt) BINARY_FN(ge)
BINARY_FN(logical_and) BINARY_FN(logical_or) BINARY_FN(relu_backward) BINARY_FN(gelu_backward)
BINARY_FN(bitwise_and) BINARY_FN(bitwise_or) BINARY_FN(bitwise_xor) BINARY_FN(gcd) BINARY_FN(lcm)

static oar_status cu_where(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                           int n_out, const oar_attr *a) {
    (void)n_in; (void)n_out; (void)a;
    oar_cu_ew e;
    if (!oar_cu_ew_pack(&e, in, 3, out[0]))
        return oar_error(OAR_ERR_UNSUPPORTED, "where: too many dims for the GPU kernel");
    e.in_dtype = in[1]->dtype;
    return oar_cuda_status((cudaError_t)oar_cu_where(&e, ctx->stream), "where");
}

static oar_status cu_increment(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    oar_status st = oar_cuda_status(
        (cudaError_t)oar_cu_increment(oar_tensor_ptr(in[0]), in[0]->dtype, in[0]->numel, ctx->stream), "increment");
    if (st == OAR_OK) in[0]->storage->version++; /* an in-place write, as the reference records it */
    return st;
}

void oar_cuda_register_elementwise(void) {
#define REG(NAME) oar_cuda_register(OAR_OP_##NAME, oar_op_table[OAR_OP_##NAME]->ref_dtypes, cu_##NAME, fits);
    REG(neg) REG(abs) REG(exp) REG(log) REG(log1p) REG(sqrt) REG(rsqrt) REG(square) REG(sin) REG(cos)
    REG(tanh) REG(sigmoid) REG(relu) REG(leaky_relu) REG(elu) REG(gelu) REG(silu) REG(softplus) REG(erf)
    REG(clip) REG(sign) REG(floor) REG(ceil) REG(round) REG(logical_not)
    REG(erfc) REG(asin) REG(acos) REG(atan) REG(sinh) REG(asinh) REG(atanh) REG(expm1) REG(exp2) REG(atan2)
    REG(acosh) REG(cosh) REG(lgamma) REG(digamma) REG(polygamma) REG(erfinv) REG(bitwise_not)
    REG(bitwise_and) REG(bitwise_or) REG(bitwise_xor) REG(gcd) REG(lcm)
    REG(add) REG(sub) REG(mul) REG(div) REG(pow) REG(maximum) REG(minimum) REG(eq) REG(ne) REG(lt) REG(le)
    REG(gt) REG(ge) REG(logical_and) REG(logical_or) REG(relu_backward) REG(gelu_backward) REG(where)
    oar_cuda_register(OAR_OP_increment, OAR_INT_DTYPES, cu_increment, NULL);
#undef REG
}
