/* One O2 training step as the AMP tests run it (eagerly or under oar_jit): zero the gradients,
 * the loss under O2 autocast, backward, the masters' optimizer step. Only the loss differs
 * between the tests; loss_of builds it from the step's inputs. */
#ifndef OAR_TESTS_AMP_O2_UTIL_H
#define OAR_TESTS_AMP_O2_UTIL_H

#include "oar.h"
#include "oar/amp.h"

typedef oar_tensor *(*amp_o2_loss_fn)(void *user, oar_tensor *const *in);

static inline oar_status amp_o2_step(oar_optimizer *o, oar_amp_masters *w, amp_o2_loss_fn loss_of, void *user,
                                     oar_tensor *const *in, oar_tensor **out) {
    oar_optimizer_zero_grad(o);
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.level = OAR_AMP_O2;
    oar_status st = oar_autocast_begin(&ac);
    if (st != OAR_OK) return st;
    oar_tensor *loss = loss_of(user, in);
    oar_autocast_end();
    if (!loss) return oar_last_status();
    if ((st = oar_backward(loss, NULL, false)) != OAR_OK) return st;
    if ((st = oar_amp_masters_step(w, o, NULL, NULL)) != OAR_OK) return st;
    out[0] = loss;
    return OAR_OK;
}

#endif
