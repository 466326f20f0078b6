/* Launchers of pool.cu: 2-d max, average and adaptive average pooling over planes of
 * [planes, h, w] (contiguous), forward and backward. Plain C; dtype is an oar_dtype (f32, f64,
 * f16, bf16); each returns a cudaError_t as int. Sums run in double in the CPU reference's
 * order; the backwards gather per input element (no atomics), adding the windows in output
 * order, so results are bitwise the reference's. */
#ifndef OAR_CUDA_LAUNCH_POOL_H
#define OAR_CUDA_LAUNCH_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct oar_cu_pool {
    int64_t planes, h, w, oh, ow;
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int include_pad; /* average pooling: count_include_pad */
} oar_cu_pool;

/* y = each window's maximum (the first largest, a NaN winning as on the CPU; -inf for a window
 * without input elements). argmax (planes * oh * ow int64 of scratch, or NULL) receives the
 * index in the plane (-1: none). */
int oar_cu_max_pool2d(void *y, int64_t *argmax, const void *x, int dtype, const oar_cu_pool *g, void *stream);
/* The argmax only. */
int oar_cu_max_pool2d_argmax(int64_t *argmax, const void *x, int dtype, const oar_cu_pool *g, void *stream);
/* dx (x's shape) = gy added at each window's argmax (argmax from oar_cu_max_pool2d_argmax). */
int oar_cu_max_pool2d_backward(void *dx, const void *gy, const int64_t *argmax, int dtype, const oar_cu_pool *g,
                               void *stream);
/* y (pooled shape) = v (x's shape) read at each window's argmax, 0 where none. */
int oar_cu_max_pool2d_gather(void *y, const void *v, const int64_t *argmax, int dtype, const oar_cu_pool *g,
                             void *stream);
int oar_cu_avg_pool2d(void *y, const void *x, int dtype, const oar_cu_pool *g, void *stream);
int oar_cu_avg_pool2d_backward(void *dx, const void *gy, int dtype, const oar_cu_pool *g, void *stream);
/* adaptive: bins [floor(i*s/n), ceil((i+1)*s/n)); kernel, stride and padding unused. */
int oar_cu_adaptive_avg_pool2d(void *y, const void *x, int dtype, const oar_cu_pool *g, void *stream);
int oar_cu_adaptive_avg_pool2d_backward(void *dx, const void *gy, int dtype, const oar_cu_pool *g, void *stream);

#ifdef __cplusplus
}
#endif
#endif
