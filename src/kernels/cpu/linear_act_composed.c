/* linear_act where the AVX2 kernel (avx2_linear_act.c) does not run: below the AVX2 cap
 * (OAR_CPU_ISA=generic, or a CPU without it) and on other architectures. It runs the kernels
 * dispatch would pick for the unfused pair, linear and then the activation op in place over
 * its output, so the fused op gives the bits of linear + act whatever those kernels are. The
 * op's reference kernel instead composes the two reference kernels, which differ from the
 * GEMM-backed linear in rounding: static programs (fuse_linear_act) then disagreed with eager
 * ones wherever only the reference was left to run. */
#include "kernels/cpu/cpu_kernels.h"
#include "ops/fused_ew.h"

/* The activation op of kind k with its attribute; false for none. */
static bool act_op(int64_t k, oar_op_id *op, oar_attr *a) {
    a[0] = oar_attr_int(k == OAR_LINEAR_ACT_GELU_TANH);
    switch (k) {
    case OAR_LINEAR_ACT_RELU: *op = OAR_OP_relu; return true;
    case OAR_LINEAR_ACT_GELU: case OAR_LINEAR_ACT_GELU_TANH: *op = OAR_OP_gelu; return true;
    default: return false;
    }
}

static oar_status linear_act_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                      int n_out, const oar_attr *a) {
    (void)ctx;
    const oar_kernel_entry *k = oar_select_kernel(OAR_OP_linear, in, n_in, out, n_out, NULL);
    if (!k) return oar_last_status();
    oar_status st = oar_op_run_kernel(OAR_OP_linear, k, in, n_in, out, n_out, NULL);
    oar_op_id op;
    oar_attr aa[1];
    if (st != OAR_OK || !act_op(a[0].i, &op, aa) || out[0]->numel == 0) return st;
    oar_tensor *y = out[0]; /* elementwise: in place reads each element before writing it */
    const oar_kernel_entry *ka = oar_select_kernel(op, &y, 1, &y, 1, aa);
    if (!ka) return oar_last_status();
    return oar_op_run_kernel(op, ka, &y, 1, &y, 1, aa);
}

/* Wherever linear has a kernel for these inputs (its dispatch may still fall to the
 * reference, which is then what the unfused pair runs too). */
static bool linear_act_composed_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out,
                                         const oar_attr *a) {
    (void)a;
    return out[0]->contiguous && oar_select_kernel(OAR_OP_linear, in, n_in, out, n_out, NULL) != NULL;
}

void oar_cpu_register_linear_act_composed(void) {
    oar_register_kernel(OAR_OP_linear_act, (oar_kernel_entry){.device = OAR_CPU,
                                                              .dtypes = OAR_BASE_DTYPES & ~OAR_DTYPE_BIT(OAR_BOOL),
                                                              .impl = "composed",
                                                              .priority = 5,
                                                              .fn = linear_act_composed,
                                                              .supports = linear_act_composed_supports});
}
