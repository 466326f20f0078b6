/* CPU fast kernels (AVX2/FMA, OpenBLAS, oneDNN). Each file registers its kernels from an
 * init function listed in cpu_init.c; the reference kernels remain the oracle. */
#ifndef OAR_CPU_KERNELS_H
#define OAR_CPU_KERNELS_H

#include "ops/op.h"

void oar_cpu_kernels_init(void);
/* impl names of f16/bf16 kernels that take only some calls of their dtype: the mixed norms
 * (f16/bf16 activations with f32 parameters) and the same-shape binary ops (half_binary.c).
 * The via-f32 kernels still cover the other f16/bf16 calls of those ops. */
#define OAR_IMPL_HALF_MIXED "avx2-mixed"
#define OAR_IMPL_HALF_PARTIAL "avx2-half"
void oar_cpu_register_half_binary(void); /* half_binary.c */
void oar_cpu_register_half_gelu(void);   /* half_gelu.c: gelu and gelu_backward */
/* One registration function per file cpu_<family>.c. */
void oar_cpu_register_elementwise(void);
void oar_cpu_register_reduce(void);
void oar_cpu_register_gemm(void);
void oar_cpu_register_conv(void);
void oar_cpu_register_nn(void);
void oar_cpu_register_loss(void);
void oar_cpu_register_ctc(void);
void oar_cpu_register_index(void);
void oar_cpu_register_masked_fill(void); /* index_masked_fill.c */
void oar_cpu_register_unary_backward(void); /* avx2_unary_backward.c */
void oar_cpu_register_pool2x2(void);   /* conv_pool2x2.c */
void oar_cpu_register_pool_nhwc(void); /* pool_nhwc_x86.c: max_pool2d_nhwc on AVX2 / AVX-512 */
void oar_cpu_register_gemv(void);      /* gemv_x86.c: linear of one row on AVX2 / AVX-512 */
void oar_cpu_register_optim_multi(void); /* optim_multi.c */
void oar_cpu_register_attention(void);  /* attention_cpu.c */
void oar_cpu_register_attention_composed(void); /* attention_composed.c */
void oar_cpu_register_norm_backward(void); /* nn_norm_backward.c */
void oar_cpu_register_fused_ew(void);  /* avx2_fused_ew.c */
void oar_cpu_register_linear_act(void); /* avx2_linear_act.c */
void oar_cpu_register_linear_act_composed(void); /* linear_act_composed.c */
void oar_cpu_register_conv_act(void);  /* conv_act.c */
void oar_cpu_register_add_layer_norm(void); /* nn_add_layer_norm.c */
void oar_cpu_register_add_layer_norm_composed(void); /* add_layer_norm_composed.c */
void oar_cpu_register_conv_direct(void); /* conv_direct.c */
void oar_cpu_register_pool_dnnl(void);  /* pool_dnnl.c: adaptive_avg_pool2d on oneDNN (nothing without it) */
void oar_cpu_register_copy(void);       /* cpu_copy.c */
void oar_cpu_register_grid_sample(void); /* vision_grid_sample.c */
void oar_cpu_register_roi_align(void);  /* vision_roi_align.c */
void oar_cpu_register_nms(void);        /* vision_nms.c */
/* y (same dtype and shape as x, any strides) takes x's values through the layout copy kernel
 * (cpu_copy.c: rows, tiled transposes, threads) */
void oar_cpu_copy_layout(const oar_kctx *ctx, oar_tensor *y, const oar_tensor *x);
void oar_cpu_register_matmul_bf16(void); /* matmul_dnnl_bf16.c: native bf16 matmul and linear */
void oar_cpu_register_cast_fast(void);  /* cast_avx2.c: f32 -> u8/i8 and i32 -> f32 casts */
void oar_cpu_register_half_f32(void);   /* half_f32.c: f16/bf16 casts and via-f32 kernels */
/* dst <- src, contiguous and of equal numel, one f32 and the other f16/bf16 (half_f32.c). */
void oar_cpu_convert_half(oar_tensor *dst, const oar_tensor *src);
/* The same on plain buffers: n f32 values rounded into f16/bf16 (half_f32.c). */
void oar_cpu_f32_to_half(void *dst, const float *src, int64_t n, oar_dtype half);
/* and n f16/bf16 values widened into f32 */
void oar_cpu_half_to_f32(float *dst, const void *src, int64_t n, oar_dtype half);
void oar_cpu_register_embedding_backward(void); /* nn_embedding_backward.c */
void oar_cpu_register_quant(void);      /* qgemm_x86.c: qlinear on AVX-512 VNNI and exact AVX2 */
/* Whether oar's AVX2+FMA / AVX-512F code may run: the CPU has it and the cap (oar_set_cpu_isa,
 * OAR_CPU_ISA) allows it. Every kernel asks these, at dispatch time, never the CPU directly. */
bool oar_cpu_has_avx2(void);
bool oar_cpu_has_avx512(void);

#endif
