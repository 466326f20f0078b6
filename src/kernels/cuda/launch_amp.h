/* Launchers of amp.cu: the loss scaler's ops on the GPU (src/ops/amp.c has their reference):
 * one gradient divided by the scale in place, noting any inf/nan in a flag, and the scale's
 * update. Plain C; each returns a cudaError_t as int. */
#ifndef OAR_CUDA_LAUNCH_AMP_H
#define OAR_CUDA_LAUNCH_AMP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* g (n elements of dtype f32/f64/f16/bf16, contiguous) *= *inv_scale (one f32 on the
 * device); *found (one f32 on the device) = 1 when a result is not finite, else untouched. */
int oar_cu_amp_unscale(int dtype, void *g, int64_t n, const float *inv_scale, float *found, void *stream);
/* torch's _amp_update_scale_ with a floor (amp.c's update_ref), on one thread. */
int oar_cu_amp_update_scale(float *scale, int64_t *growth_tracker, const float *found, double growth_factor,
                            double backoff_factor, int64_t growth_interval, double min_scale, void *stream);

#ifdef __cplusplus
}
#endif
#endif
