/* conv2d_act where oneDNN cannot run it (no oneDNN in the build, or a call it declines): the
 * best conv2d kernel into the output, then residual add and relu in one pass over it, in f32
 * with the same operations as the add and relu kernels, so the result equals the unfused
 * conv2d + add + relu (or clip to [0, 6]: relu6). oneDNN's kernel (conv_dnnl.c, priority 20) applies the epilogue as
 * post-ops instead. NCHW only. */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

static oar_status conv2d_act_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in;
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_conv2d, in, 3, out, n_out, a);
    if (!k) return oar_last_status();
    oar_status st = oar_op_run_kernel(OAR_OP_conv2d, k, in, 3, out, n_out, a);
    if (st != OAR_OK) return st;
    float *y = (float *)oar_tensor_ptr(out[0]);
    const float *r = in[3] ? (const float *)oar_tensor_ptr(in[3]) : NULL;
    bool relu = !strcmp(a[4].s, "relu"), relu6 = !strcmp(a[4].s, "relu6");
    int64_t n = out[0]->numel;
    if (r)
        for (int64_t i = 0; i < n; i++) y[i] += r[i];
    if (relu)
        for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    if (relu6) /* clip's order: NaN stays NaN */
        for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0.0f ? 0.0f : y[i] > 6.0f ? 6.0f : y[i];
    return OAR_OK;
}

/* NHWC convolutions run in oneDNN (or the reference): no NHWC conv2d kernel to compose with. */
static bool conv2d_act_composed_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                         const oar_attr *a) {
    (void)in; (void)n_in; (void)out; (void)n_out;
    return !strcmp(a[5].s, "nchw");
}

void oar_cpu_register_conv_act(void) {
    oar_register_kernel(OAR_OP_conv2d_act, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                              .impl = "composed", .priority = 10,
                                                              .fn = conv2d_act_composed,
                                                              .supports = conv2d_act_composed_supports});
}
