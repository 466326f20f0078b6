/* Registration of the vectorized nn kernels, one function per file (cpu_nn.c calls them). */
#ifndef OAR_NN_KERNELS_H
#define OAR_NN_KERNELS_H

#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_nn_register_softmax(void); /* nn_softmax.c */
void oar_cpu_nn_register_norm(void);    /* nn_norm.c */
/* supports(): AVX2 present and every input dense f32 (nn_norm.c; for kernels that index
 * their inputs themselves) */
bool oar_nn_dense_f32_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a);
/* F16C present (nn_norm.c); whether t is dense and of nn_half.h's kind k (bf16, or f16 with
 * F16C): the norm kernels that read bf16/f16 activations with f32 parameters check both */
bool oar_nn_has_f16c(void);
bool oar_nn_half_ok(const oar_tensor *t, int k);
void oar_cpu_nn_register_dropout(void); /* nn_dropout.c */
/* Shared with the add + layer_norm fusion (nn_add_layer_norm.c), so its kernels do the float
 * arithmetic of the unfused ones: one row of layer_norm in f32 (nn_norm.c), and the
 * layer_norm_backward kernel, which adds a sixth input (a residual gradient) to dx when given
 * one (nn_norm_backward.c). */
void oar_nn_layer_norm_row(const float *x, const float *w, const float *b, float *y, float *mean_out,
                           float *rstd_out, int64_t m, double eps);
/* layer_norm's row on bf16/f16 x and y (dtype dt) with f32 parameters: widened into xb (m
 * floats), oar_nn_layer_norm_row into yb (m floats), rounded into y. The mixed layer_norm kernels
 * take rows of up to OAR_NN_LN_HALF_MAX values (buffers on the stack). */
#define OAR_NN_LN_HALF_MAX 4096
/* Two f32 rows of m values (x0, x1) normalized with oar_nn_layer_norm_row's operations, the
 * statistics of both in interleaved chains: each row gets that routine's bits. */
void oar_nn_layer_norm_row_pair(const float *x0, const float *x1, const float *w, const float *b, float *y0, float *y1,
                                float *mean_out, float *rstd_out, int64_t m, double eps);
void oar_nn_layer_norm_row_half(const void *x, const float *w, const float *b, void *y, float *mean_out,
                                float *rstd_out, int64_t m, double eps, oar_dtype dt, float *xb, float *yb);
oar_status oar_nn_layer_norm_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a);
#endif
