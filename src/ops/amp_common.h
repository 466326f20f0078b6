/* What the two loss-scaling op families share (amp.c: the eager scaler's in-place unscale and
 * scale update; amp_step.c: the compiled step's unscale into new gradients, begin and skip):
 * the checks of their 0-d state inputs and gradient lists, and the unscale loop itself, so an
 * eager and a compiled step multiply and detect inf/nan with the same code. */
#ifndef OAR_OPS_AMP_COMMON_H
#define OAR_OPS_AMP_COMMON_H

#include "ops/op.h"

#define OAR_AMP_UNSCALE_MAX_GRADS 30

/* Input i of op, named what, must be a 0-d tensor of dtype dt. */
oar_status oar_amp_check_scalar(const char *op, const oar_tensor *t, oar_dtype dt, const char *what, int i);

/* An unscale's inputs: found (f32 0-d), inv_scale (f32 0-d), then 1 to
 * OAR_AMP_UNSCALE_MAX_GRADS float gradients. */
oar_status oar_amp_check_unscale(const char *op, oar_tensor *const *in, int n_in);

/* y = x * inv over n elements of dtype dt (y == x: in place), rounded once; true when a result
 * is inf or nan. */
bool oar_amp_unscale(oar_dtype dt, const void *x, void *y, int64_t n, float inv);

#endif
