/* Registration of the vectorized nn kernels, one function per file (cpu_nn.c calls them). */
#ifndef OAR_NN_KERNELS_H
#define OAR_NN_KERNELS_H

#include "kernels/cpu/cpu_kernels.h"

void oar_cpu_nn_register_softmax(void); /* nn_softmax.c */
void oar_cpu_nn_register_norm(void);    /* nn_norm.c */
/* supports(): AVX2 present and every input dense f32 (nn_norm.c; for kernels that index
 * their inputs themselves) */
bool oar_nn_dense_f32_ok(oar_tensor *const *in, int n_in, oar_tensor *const *out, int n_out, const oar_attr *a);
void oar_cpu_nn_register_dropout(void); /* nn_dropout.c */
/* Shared with the add + layer_norm fusion (nn_add_layer_norm.c), so its kernels do the float
 * arithmetic of the unfused ones: one row of layer_norm in f32 (nn_norm.c), and the
 * layer_norm_backward kernel, which adds a sixth input (a residual gradient) to dx when given
 * one (nn_norm_backward.c). */
void oar_nn_layer_norm_row(const float *x, const float *w, const float *b, float *y, float *mean_out,
                           float *rstd_out, int64_t m, double eps);
oar_status oar_nn_layer_norm_backward_avx2(const oar_kctx *ctx, oar_tensor *const *in, int n_in,
                                          oar_tensor *const *out, int n_out, const oar_attr *a);
/* batch_norm_backward in f32 over [n, c, s] (nn_norm_backward.c; AVX2 builds only): relu_y,
 * when set, masks g to relu_y > 0 first, and g_out, when set, receives the masked g. */
void oar_nn_batch_norm_backward_f32(const float *g, const float *x, const float *w, const float *mean,
                                    const float *rstd, const float *relu_y, float *dx, float *dw, float *db,
                                    float *g_out, int64_t n, int64_t c, int64_t s);

#endif
