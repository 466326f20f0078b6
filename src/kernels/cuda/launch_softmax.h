/* Launchers of softmax.cu: softmax / log_softmax and their backward ops along one dim of a
 * contiguous tensor viewed as [outer, n, inner]. dtype is OAR_F32 or OAR_F64; each returns a
 * cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_SOFTMAX_H
#define OAR_CUDA_LAUNCH_SOFTMAX_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

int oar_cu_softmax(int log_form, int dtype, const void *x, void *y, int64_t outer, int64_t n, int64_t inner,
                   void *stream);
/* dx = y * (g - sum(g * y)) (softmax) or g - exp(y) * sum(g) (log_softmax) */
int oar_cu_softmax_backward(int log_form, int dtype, const void *g, const void *y, void *dx, int64_t outer,
                            int64_t n, int64_t inner, void *stream);

#ifdef __cplusplus
}
#endif
#endif
