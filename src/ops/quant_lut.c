/* qlut(x, table): y[i] = table[code of x[i]], a byte lookup over u8 or i8 data. The table holds
 * 256 entries, one per code in order (u8: 0..255; i8: -128..127, so code c is entry c + 128), and
 * y takes its dtype. Any elementwise function of one quantized tensor is such a table: ONNX's
 * QLinearSigmoid and QLinearLeakyRelu (and their QDQ forms) are dequantize -> f32 op ->
 * quantize, and the importer evaluates that chain once on the 256 codes (src/io/onnx/
 * onnx_ops_ms.c), so the lookup gives the chain's bytes in one pass over bytes. */
#include "ops/quant.h"

#include <stdint.h>

static bool is_q8(oar_dtype dt) { return dt == OAR_U8 || dt == OAR_I8; }

static oar_status qlut_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in, (void)a;
    const oar_tensor *x = in[0], *t = in[1];
    if (!is_q8(x->dtype))
        return oar_error(OAR_ERR_DTYPE, "qlut: expected x u8 or i8, got %s; quantize it first",
                         oar_dtype_name(x->dtype));
    if (!is_q8(t->dtype) || t->ndim != 1 || t->shape[0] != 256)
        return oar_error(OAR_ERR_SHAPE, "qlut: expected a table of 256 u8 or i8 entries (one per code of x), got %s "
                                        "of %d dims with %lld elements", oar_dtype_name(t->dtype), t->ndim,
                         (long long)t->numel);
    oar_meta_from(out, x);
    out->dtype = t->dtype;
    *n_out = 1;
    return OAR_OK;
}

typedef struct lut_job {
    const uint8_t *x, *table;
    uint8_t *y;
    uint8_t bias; /* added to a byte to index the table: 128 for i8 codes (two's complement) */
} lut_job;

static void lut_range(void *ctx, int64_t b, int64_t e) {
    const lut_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->y[i] = j->table[(uint8_t)(j->x[i] + j->bias)];
}

static oar_status qlut_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                           const oar_attr *a) {
    (void)ctx, (void)n_in, (void)n_out, (void)a;
    lut_job j = {.x = (const uint8_t *)oar_tensor_ptr(in[0]), .table = (const uint8_t *)oar_tensor_ptr(in[1]),
                 .y = (uint8_t *)oar_tensor_ptr(out[0]), .bias = in[0]->dtype == OAR_I8 ? 128 : 0};
    if (out[0]->numel) oar_parallel_for(out[0]->numel, 1 << 15, lut_range, &j);
    return OAR_OK;
}

const oar_op_def oar_opdef_qlut = {
    .name = "qlut", .n_inputs = 2, .n_outputs = 1, .key_input = 0,
    .flags = OAR_OPF_NONDIFF, .ref_dtypes = OAR_DTYPE_BIT(OAR_U8) | OAR_DTYPE_BIT(OAR_I8),
    .infer = qlut_infer, .reference = qlut_ref,
};

oar_tensor *oar_qlut(oar_tensor *x, oar_tensor *table) {
    oar_tensor *in[2] = {x, table};
    return oar_op_call1(OAR_OP_qlut, in, 2, NULL);
}
