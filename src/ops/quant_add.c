/* qadd(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp; activation, dtype): the sum of two
 * quantized tensors of one shape, requantized, with ONNX's float arithmetic throughout:
 *
 *   v = fl((a - a_zp) * a_scale) + fl((b - b_zp) * b_scale)        (f32, as DequantizeLinear + Add)
 *   v = max(v, 0) with activation = relu
 *   y = saturate(round_half_even(v / y_scale) + y_zp)              (QuantizeLinear: a division)
 *
 * so qadd is bit for bit the dequantize -> add [-> relu] -> quantize chain a QDQ file writes
 * around ResNet's residual (and com.microsoft QLinearAdd's definition), in one pass over bytes
 * instead of five over floats. Scales are 0-d f32 (positive, finite), zero points 0-d integers
 * within the range of their data's dtype; a, b and y of one shape (no broadcasting). The AVX2
 * kernel (src/kernels/cpu/qadd_avx2.c) does the same operations 8 at a time. */
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static bool is_q8(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8; }
static bool is_int(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8 || dt == OAR_I32 || dt == OAR_I64; }

static const char *const NAMES[QA_N] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
                                        "y_zero_point"};

static oar_status check_param(const oar_tensor *t, int k) {
    bool scale = k == QA_AS || k == QA_BS || k == QA_YS;
    if (t->ndim != 0)
        return oar_error(OAR_ERR_SHAPE, "qadd: expected %s 0-d (per tensor), got %d-d; per-channel parameters are not "
                                        "supported by qadd (dequantize, add and quantize instead)",
                         NAMES[k], t->ndim);
    if (scale ? t->dtype != OAR_F32 : !is_int(t->dtype))
        return oar_error(OAR_ERR_DTYPE, "qadd: expected %s %s, got %s", NAMES[k],
                         scale ? "f32" : "an integer (i32, i64, i8 or u8)", oar_dtype_name(t->dtype));
    return OAR_OK;
}

static oar_status qadd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    const oar_tensor *x = in[QA_A], *y = in[QA_B];
    if (!is_q8(x->dtype) || !is_q8(y->dtype))
        return oar_error(OAR_ERR_DTYPE, "qadd: expected a and b u8 or i8, got %s and %s; use add for float data",
                         oar_dtype_name(x->dtype), oar_dtype_name(y->dtype));
    if (x->ndim != y->ndim || memcmp(x->shape, y->shape, sizeof(int64_t) * (size_t)x->ndim)) {
        char xs[128], ys[128];
        oar_format_shape(x->shape, x->ndim, xs, sizeof xs);
        oar_format_shape(y->shape, y->ndim, ys, sizeof ys);
        return oar_error(OAR_ERR_SHAPE, "qadd: expected a and b of one shape (no broadcasting), got %s and %s", xs, ys);
    }
    for (int k = 0; k < QA_N; k++) {
        if (k == QA_A || k == QA_B) continue;
        oar_status st = check_param(in[k], k);
        if (st != OAR_OK) return st;
    }
    if (!is_q8((oar_dtype)a[1].i))
        return oar_error(OAR_ERR_DTYPE, "qadd: expected dtype u8 or i8, got %s", oar_dtype_name((oar_dtype)a[1].i));
    if (a[0].i != OAR_QACT_NONE && a[0].i != OAR_QACT_RELU)
        return oar_error(OAR_ERR_INVALID_ARG, "qadd: expected activation 0 (none) or 1 (relu), got %lld", (long long)a[0].i);
    oar_meta_from(out, x);
    out->dtype = (oar_dtype)a[1].i;
    *n_out = 1;
    return OAR_OK;
}

/* Scales positive and finite, zero points within their data's range. */
static oar_status load_scale(const oar_tensor *t, const char *name, float *s) {
    *s = *(const float *)oar_tensor_ptr(t);
    if (!(*s > 0) || isinf(*s))
        return oar_error(OAR_ERR_INVALID_ARG, "qadd: expected a positive finite %s, got %g", name, (double)*s);
    return OAR_OK;
}

static oar_status load_zp(const oar_tensor *t, const char *name, oar_dtype of, int32_t *z) {
    int32_t qmin, qmax;
    oar_qrange(of, &qmin, &qmax);
    int64_t v = oar_dtypes[t->dtype].load_i64(oar_tensor_ptr(t));
    if (v < qmin || v > qmax)
        return oar_error(OAR_ERR_INVALID_ARG, "qadd: expected %s in [%d, %d] (%s), got %lld", name, qmin, qmax,
                         oar_dtype_name(of), (long long)v);
    *z = (int32_t)v;
    return OAR_OK;
}

oar_status oar_qadd_params(oar_tensor *const *in, oar_tensor *const *out, const oar_attr *a, oar_qadd_params_t *p) {
    oar_status st;
    if ((st = load_scale(in[QA_AS], "a_scale", &p->sa)) != OAR_OK ||
        (st = load_scale(in[QA_BS], "b_scale", &p->sb)) != OAR_OK ||
        (st = load_scale(in[QA_YS], "y_scale", &p->sy)) != OAR_OK ||
        (st = load_zp(in[QA_AZP], "a_zero_point", in[QA_A]->dtype, &p->za)) != OAR_OK ||
        (st = load_zp(in[QA_BZP], "b_zero_point", in[QA_B]->dtype, &p->zb)) != OAR_OK ||
        (st = load_zp(in[QA_YZP], "y_zero_point", out[0]->dtype, &p->zy)) != OAR_OK)
        return st;
    int32_t qmin, qmax;
    oar_qrange(out[0]->dtype, &qmin, &qmax);
    p->lo = (float)(qmin - p->zy), p->hi = (float)(qmax - p->zy);
    p->relu = a[0].i == OAR_QACT_RELU;
    p->a_signed = in[QA_A]->dtype == OAR_I8, p->b_signed = in[QA_B]->dtype == OAR_I8;
    p->y_signed = out[0]->dtype == OAR_I8;
    return OAR_OK;
}

typedef struct qadd_job {
    const uint8_t *a, *b;
    uint8_t *y;
    oar_qadd_params_t p;
} qadd_job;

static void qadd_range(void *ctx, int64_t b0, int64_t e) {
    const qadd_job *j = ctx;
    for (int64_t i = b0; i < e; i++)
        j->y[i] = (uint8_t)oar_qadd_one(&j->p, j->a[i], j->b[i]);
}

static oar_status qadd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    qadd_job j = {.a = (const uint8_t *)oar_tensor_ptr(in[QA_A]), .b = (const uint8_t *)oar_tensor_ptr(in[QA_B]),
                  .y = (uint8_t *)oar_tensor_ptr(out[0])};
    oar_status st = oar_qadd_params(in, out, a, &j.p);
    if (st != OAR_OK) return st;
    if (out[0]->numel) oar_parallel_for(out[0]->numel, 1 << 14, qadd_range, &j);
    return OAR_OK;
}

const oar_op_def oar_opdef_qadd = {
    .name = "qadd", .n_inputs = QA_N, .n_outputs = 1, .key_input = QA_A, .n_attrs = 2,
    .attrs = {{"activation", OAR_ATTR_INT}, {"dtype", OAR_ATTR_DTYPE}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qadd_infer, .reference = qadd_ref,
};
