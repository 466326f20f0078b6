/* fused_attention and attention_backward where the AVX2 kernels (attention_cpu.c) do not run:
 * below the AVX2 cap (OAR_CPU_ISA=generic, a CPU without it) or without OpenBLAS. They run the
 * chains the fuse_attention pass replaced, op by op through dispatch, so compiled programs
 * give eager's bits wherever the AVX2 kernels would have (those mirror the same ops'
 * arithmetic); the ops' reference kernels, in double, do not, and left alone made the
 * predictor, compiled gpt-mini inference and its compiled training step differ from eager on
 * such machines. Causal forward calls (no pass makes them) keep the reference. */
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

/* The traced backward: dv = pᵀ g; dp = g vᵀ; ds = softmax_backward(dp, p), zero where the
 * forward masked (there the chain has where(mask, 0, ds); the mask is not an input of this op,
 * but p is 0 exactly there, or where exp underflowed, which changes at most a zero's sign);
 * ds *= scale; dq = ds k; dk = (qᵀ ds)ᵀ, as the chain computes dkᵀ. */
static oar_status attention_backward_composed(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                              oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    oar_tensor *g = in[0], *q = in[1], *k = in[2], *v = in[3], *p = in[4];
    oar_no_grad_begin();
    oar_scope_begin();
    oar_tensor *dv = oar_matmul(oar_transpose(p, -1, -2), g), *dp = oar_matmul(g, oar_transpose(v, -1, -2));
    oar_attr dim = oar_attr_int(-1);
    oar_tensor *sb_in[2] = {dp, p}, *ds = dp ? oar_op_call1(OAR_OP_softmax_backward, sb_in, 2, &dim) : NULL;
    oar_tensor *zero = oar_scalar(0.0, OAR_F32);
    if (ds) ds = oar_where(oar_eq(p, zero), zero, ds);
    if (ds && a[0].f != 1.0) ds = oar_mul_scalar(ds, a[0].f);
    oar_tensor *dq = ds ? oar_matmul(ds, k) : NULL, *dkt = ds ? oar_matmul(oar_transpose(q, -1, -2), ds) : NULL;
    oar_status st = dv && dq && dkt ? OAR_OK : oar_last_status();
    if (st == OAR_OK) st = oar_copy_(out[0], dq);
    if (st == OAR_OK) st = oar_copy_(out[1], oar_transpose(dkt, -1, -2));
    if (st == OAR_OK) st = oar_copy_(out[2], dv);
    oar_scope_end();
    oar_no_grad_end();
    return st;
}

static bool backward_supports(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a) {
    (void)n_in; (void)out; (void)n_out; (void)a;
    return in[1]->dtype == OAR_F32;
}

void oar_cpu_register_attention_composed(void) {
    oar_register_kernel(OAR_OP_attention_backward,
                        (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32), .impl = "composed",
                                           .priority = 5, .fn = attention_backward_composed,
                                           .supports = backward_supports});
    oar_register_kernel(OAR_OP_fused_attention, (oar_kernel_entry){.device = OAR_CPU, .dtypes = OAR_DTYPE_BIT(OAR_F32),
                                                                   .impl = "composed", .priority = 5,
                                                                   .fn = fused_attention_composed,
                                                                   .supports = composed_supports});
}
