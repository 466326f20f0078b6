/* fused_attention where the AVX2 kernel (attention_cpu.c) does not run: below the AVX2 cap
 * (OAR_CPU_ISA=generic, a CPU without it) or without OpenBLAS. It runs the chain the
 * fuse_attention pass replaced, op by op through dispatch: matmul(q, kᵀ), the scale, the mask,
 * softmax, matmul(p, v). So a compiled inference program gives eager's bits wherever the AVX2
 * kernel would have (it mirrors those ops' arithmetic); the op's reference kernel, in double,
 * does not, and left alone made the predictor and compiled gpt-mini differ from eager on such
 * machines. Causal calls (no pass makes them) keep the reference. */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>

static oar_status fused_attention_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                           oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_no_grad_begin(); /* a kernel: nothing here is for the tape */
    oar_scope_begin();   /* the chain's intermediates */
    oar_tensor *s = oar_matmul(in[0], oar_transpose(in[1], -2, -1));
    if (s && a[0].f != 1.0) s = oar_mul_scalar(s, a[0].f); /* the pass's scale is the f32 constant it found */
    if (s && in[3]) s = oar_masked_fill(s, in[3], -INFINITY);
    oar_tensor *p = s ? oar_softmax(s, -1) : NULL, *o = p ? oar_matmul(p, in[2]) : NULL;
    oar_status st = o ? oar_copy_(out[0], o) : oar_last_status();
    if (st == OAR_OK) st = oar_copy_(out[1], p);
    oar_scope_end();
    oar_no_grad_end();
    return st;
}

static bool composed_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out;
    return a[1].i == 0 && in[0]->dtype == OAR_F32;
}

void oar_cpu_register_attention_composed(void) {
    oar_register_kernel(OAR_OP_fused_attention, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                                   .impl = "composed", .priority = 5,
                                                                   .fn = fused_attention_composed,
                                                                   .supports = composed_supports});
}
