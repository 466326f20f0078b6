/* add_layer_norm and layer_norm_backward_add on bf16/f16 where the mixed kernels
 * (nn_add_layer_norm.c) do not run: below the AVX2 cap, rows longer than their buffers, strided
 * or all-low-precision operands. They run the kernels dispatch picks for the unfused ops (add,
 * then layer_norm on its output; layer_norm_backward, then add of the residual into dx in
 * place), so a compiled step with the fused nodes keeps the eager step's bits on every path.
 * The ops' reference kernels round once from double where the unfused via-f32 kernels round f32
 * results, so they would not (the same reason as linear_act_composed.c). */
#include "kernels/cpu/cpu_kernels.h"

static oar_status run_op(oar_op_id op, oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                         const oar_attr *a) {
    const oar_kernel_entry *k = oar_select_kernel(op, in, n_in, out, n_out, a);
    if (!k) return oar_last_status();
    return oar_op_run_kernel(op, k, in, n_in, out, n_out, a);
}

static oar_status add_layer_norm_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_status st = run_op(OAR_OP_add, in, 2, out, 1, NULL);
    if (st != OAR_OK) return st;
    oar_tensor *ln_in[3] = {out[0], in[2], in[3]};
    return run_op(OAR_OP_layer_norm, ln_in, 3, out + 1, 3, a);
}

static oar_status layer_norm_backward_add_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                                   oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_status st = run_op(OAR_OP_layer_norm_backward, in, 5, out, 3, a);
    if (st != OAR_OK || out[0]->numel == 0) return st;
    /* elementwise in place: each dx value is read before its sum is written (add commutes) */
    oar_tensor *add_in[2] = {out[0], in[5]};
    return run_op(OAR_OP_add, add_in, 2, out, 1, NULL);
}

static bool composed_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)in; (void)n_in; (void)n_out; (void)a;
    return out[0]->contiguous;
}

void oar_cpu_register_add_layer_norm_composed(void) {
    oar_kernel_entry e = {.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_BF16) | OAR_DTYPE_BIT(OAR_F16),
                          .impl = "composed", .priority = 5, .fn = add_layer_norm_composed, .supports = composed_ok};
    oar_register_kernel(OAR_OP_add_layer_norm, e);
    e.fn = layer_norm_backward_add_composed;
    oar_register_kernel(OAR_OP_layer_norm_backward_add, e);
}
