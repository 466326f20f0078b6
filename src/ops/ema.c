/* ema_update(avg, value; momentum, scale): avg = avg * (1 - momentum) + value * (momentum * scale)
 * in place, no outputs. BatchNorm's running statistics are updated inside its kernel; SyncBatchNorm
 * computes its statistics from ops over the ranks and needs the update as an op of its own, so a
 * compiled step applies it at every run (mutated_inputs keeps every call, in order). The two
 * factors are rounded to f32 once; each element is a*(1-m) + v*(m*s) in f32. */
#include "ops/ema.h"

#include "ops/op.h"

static oar_status ema_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    (void)out;
    const oar_tensor *avg = in[0], *v = in[1];
    if (avg->dtype != OAR_F32 || v->dtype != OAR_F32)
        return OAR_FAIL(OAR_ERR_DTYPE, "ema_update", "expected an f32 average and value, got %s and %s",
                        oar_dtype_name(avg->dtype), oar_dtype_name(v->dtype));
    if (avg->numel != v->numel)
        return OAR_FAIL(OAR_ERR_SHAPE, "ema_update", "expected a value with as many elements as the average (%lld), "
                        "got %lld", (long long)avg->numel, (long long)v->numel);
    if (!avg->contiguous)
        return OAR_FAIL(OAR_ERR_INVALID_ARG, "ema_update", "expected a contiguous average (it is updated in place), "
                                                           "got a strided view");
    if (!(a[0].f >= 0 && a[0].f <= 1))
        return OAR_FAIL(OAR_ERR_INVALID_ARG, "ema_update", "expected 0 <= momentum <= 1, got %g", a[0].f);
    *n_out = 0;
    return OAR_OK;
}

static oar_status ema_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                          const oar_attr *a) {
    (void)ctx, (void)n_in, (void)out, (void)n_out;
    oar_tensor *avg = in[0];
    const oar_tensor *v = in[1];
    float keep = (float)(1.0 - a[0].f), take = (float)(a[0].f * a[1].f);
    float *p = (float *)oar_tensor_ptr(avg);
    if (v->contiguous) {
        const float *q = (const float *)oar_tensor_ptr(v);
        for (int64_t i = 0; i < avg->numel; i++) p[i] = p[i] * keep + q[i] * take;
    } else { /* a strided value: walk its elements in row-major order */
        int64_t idx[OAR_MAX_DIMS] = {0};
        const float *base = (const float *)oar_tensor_ptr(v);
        for (int64_t i = 0; i < avg->numel; i++) {
            int64_t off = 0;
            for (int d = 0; d < v->ndim; d++) off += idx[d] * v->strides[d];
            p[i] = p[i] * keep + base[off] * take;
            for (int d = v->ndim - 1; d >= 0 && ++idx[d] == v->shape[d]; d--) idx[d] = 0;
        }
    }
    avg->storage->version++; /* an in-place write: autograd and the executor see it */
    return OAR_OK;
}

const oar_op_def oar_opdef_ema_update = {
    .name = "ema_update", .n_inputs = 2, .n_outputs = 0, .n_attrs = 2,
    .attrs = {{"momentum", OAR_ATTR_FLOAT}, {"scale", OAR_ATTR_FLOAT}},
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_F32),
    .unsaved_inputs = 0x3, .mutated_inputs = 0x1,
    .infer = ema_infer, .reference = ema_ref,
};

oar_status oar_ema_update_(oar_tensor *avg, oar_tensor *value, double momentum, double scale) {
    oar_attr a[2] = {oar_attr_float(momentum), oar_attr_float(scale)};
    oar_tensor *in[2] = {avg, value}, *out[1];
    int n_out = 1;
    return oar_op_call(OAR_OP_ema_update, in, 2, a, out, &n_out);
}
