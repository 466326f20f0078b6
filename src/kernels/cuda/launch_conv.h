/* Launchers of conv.cu: the elementwise epilogue the cuDNN convolutions share (bias per
 * channel, a residual, relu). Plain C; returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_CONV_H
#define OAR_CUDA_LAUNCH_CONV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[i] = act(y[i] + bias[c(i)] + residual[i]) over n elements of dtype (f32, f64, f16, bf16);
 * bias and residual may be NULL; relu != 0 applies max(v, 0). The channel of element i is
 * (i / inner) % channels (NCHW: inner = H * W; NHWC: inner = 1). */
int oar_cu_conv_epilogue(void *y, const void *bias, const void *residual, int dtype, int64_t n, int64_t channels,
                         int64_t inner, int relu, void *stream);

#ifdef __cplusplus
}
#endif
#endif
