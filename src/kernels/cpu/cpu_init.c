/* Registers every CPU backend's kernels. A backend adds one line here. */
#include "kernels/cpu/cpu_kernels.h"

/* Both read the one CPU switch (src/base/cpu_isa.c) at every call, so a cap set after
 * registration (oar_set_cpu_isa) applies to the next dispatch. */
bool oar_cpu_has_avx2(void) { return oar_get_cpu_isa() >= OAR_CPU_ISA_AVX2; }
bool oar_cpu_has_avx512(void) { return oar_get_cpu_isa() >= OAR_CPU_ISA_AVX512; }

void oar_cpu_kernels_init(void) {
    oar_cpu_register_elementwise();
    oar_cpu_register_reduce();
    oar_cpu_register_gemm();
    oar_cpu_register_gemv();
    oar_cpu_register_matmul_bf16();
    oar_cpu_register_conv();
    oar_cpu_register_nn();
    oar_cpu_register_loss();
    oar_cpu_register_ctc();
    oar_cpu_register_index();
    oar_cpu_register_masked_fill();
    oar_cpu_register_unary_backward();
    oar_cpu_register_pool2x2();
    oar_cpu_register_pool_nhwc();
    oar_cpu_register_optim_multi();
    oar_cpu_register_attention();
    oar_cpu_register_attention_composed();
    oar_cpu_register_norm_backward();
    oar_cpu_register_fused_ew();
    oar_cpu_register_linear_act();
    oar_cpu_register_linear_act_composed();
    oar_cpu_register_conv_act();
    oar_cpu_register_add_layer_norm();
    oar_cpu_register_add_layer_norm_composed();
    oar_cpu_register_conv_direct();
    oar_cpu_register_pool_dnnl();
    oar_cpu_register_copy();
    oar_cpu_register_embedding_backward();
    oar_cpu_register_grid_sample();
    oar_cpu_register_roi_align();
    oar_cpu_register_nms();
    oar_cpu_register_quant();
    oar_cpu_register_cast_fast();
    oar_cpu_register_half_f32(); /* last: it wraps the f32 kernels registered above */
}
