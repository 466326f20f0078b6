/* AMP in compiled steps (docs/amp.md): a traced step that scales the loss, unscales and steps
 * through a loss scaler holds the scaler's check-and-skip as ops (amp_begin_unscale,
 * amp_unscale, amp_skip_step, amp_update_scale), so every run checks all gradients in one fused
 * pass and masks the optimizer's updates on inf/nan without a host round trip per parameter.
 * Bind the scaler's state into the program by naming its source in oar_jit_opts.state_sources:
 *
 *     const oar_state_source *src[] = {oar_grad_scaler_state_source(sc)};
 *     oar_jit_opts jo = {.module = m, .optimizer = opt, .state_sources = src, .n_state_sources = 1};
 *
 * Inside a traced step oar_grad_scaler_step cannot say whether the run will skip (*skipped stays
 * false); after each run the scaler's skip count, streak and warning, and the optimizer's step
 * count, are as an eager step leaves them. Included by oar.h. */
#ifndef OAR_AMP_STATIC_H
#define OAR_AMP_STATIC_H

#include "oar/amp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The scaler's tensors for compiled steps: "scaler.scale", ".growth_tracker", ".skipped", ".found",
 * ".inv_scale" (valid while the scaler lives; free compiled functions using it first). */
OAR_API const oar_state_source *oar_grad_scaler_state_source(oar_grad_scaler *s);
/* O2's f32 masters (those apart from their parameters), "master.<parameter path>", for a compiled
 * step that calls oar_amp_masters_step (or sync_grads, a step and sync_params): the masters'
 * gradients are casts in the program and the rounding back into the parameters its ops. */
OAR_API const oar_state_source *oar_amp_masters_state_source(oar_amp_masters *w);

#ifdef __cplusplus
}
#endif
#endif /* OAR_AMP_STATIC_H */
