/* A compiled O2 gpt-mini training step (SGD on the f32 masters), for the tests that compare
 * one build strategy with another: the same seed and data, only the named passes set. */
#ifndef OAR_TESTS_AMP_O2_GPT_UTIL_H
#define OAR_TESTS_AMP_O2_GPT_UTIL_H

#include "amp_o2_util.h"
#include "zoo_step_util.h"

typedef struct o2_run {
    zoo_run z;
    oar_amp_masters *w;
    oar_optimizer *o;
} o2_run;

static oar_tensor *o2_loss(void *user, oar_tensor *const *in) {
    o2_run *r = user;
    int64_t s2[2] = {-1, r->z.vocab}, flat = -1;
    oar_tensor *z = oar_forward(r->z.m, in[0]);
    return oar_cross_entropy(oar_reshape(z, s2, 2), oar_reshape(in[1], &flat, 1), NULL);
}

static oar_status o2_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    o2_run *r = user;
    return amp_o2_step(r->o, r->w, o2_loss, r, in, out);
}

/* The step compiled with passes[i] set to on[i] (the others at their defaults). */
static oar_jit *o2_init(o2_run *r, const char *const *passes, const bool *on, int n_passes) {
    zoo_run_init_sgd(&r->z, "gpt-mini", 3);
    oar_amp_decorate_opts d = oar_amp_decorate_defaults();
    r->w = oar_amp_decorate(r->z.m, &d);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    r->o = oar_amp_masters_optimizer(r->w, &oo);
    const oar_state_source *src[1] = {oar_amp_masters_state_source(r->w)};
    oar_jit_opts jo = {.module = r->z.m, .optimizer = r->o, .state_sources = src, .n_state_sources = 1};
    for (int i = 0; i < n_passes; i++) CHECK(oar_build_strategy_set(&jo.strategy, passes[i], on[i]) == OAR_OK);
    return oar_jit_to_static(o2_step, r, &jo);
}

static void o2_free(o2_run *r) {
    oar_optimizer_free(r->o);
    oar_amp_masters_free(r->w);
    zoo_run_free(&r->z);
}

#endif
