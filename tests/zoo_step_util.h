/* One training step of a zoo model as a function a test can run eagerly or compile, and random
 * batches of the model's input kind: shared by the tests that compare eager, static and fused
 * training bit for bit. */
#ifndef OAR_ZOO_STEP_UTIL_H
#define OAR_ZOO_STEP_UTIL_H

#include "test_util.h"

typedef struct zoo_run {
    oar_module *m;
    oar_optimizer *opt;
    bool language, stateful;
    int64_t vocab;
} zoo_run;

/* forward, cross-entropy (per token for language models), backward, optimizer step */
static inline oar_status zoo_step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    zoo_run *r = user;
    oar_optimizer_zero_grad(r->opt);
    oar_tensor *z;
    if (r->stateful) {
        oar_tensor *args[3] = {in[0], NULL, NULL}, *o[3];
        if (oar_forward_n(r->m, args, 3, o, 3) != OAR_OK) return oar_last_status();
        z = o[0];
    } else {
        z = oar_forward(r->m, in[0]);
    }
    oar_tensor *loss;
    if (r->language) {
        int64_t s2[2] = {-1, r->vocab}, flat = -1;
        loss = oar_cross_entropy(oar_reshape(z, s2, 2), oar_reshape(in[1], &flat, 1), NULL);
    } else {
        loss = oar_cross_entropy(z, in[1], NULL);
    }
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(r->opt);
    out[0] = loss;
    return st;
}

/* The model made from seed, with an optimizer of options oo. */
static inline void zoo_run_init(zoo_run *r, const char *name, uint64_t seed, const oar_optim_opts *oo) {
    oar_manual_seed(seed);
    r->m = oar_zoo_create(name, NULL);
    r->opt = oar_optimizer_for(r->m, oo);
    const oar_zoo_info *info = oar_zoo_find(name);
    r->language = info->input == OAR_ZOO_TOKENS || info->input == OAR_ZOO_TOKENS_STATEFUL;
    r->stateful = info->input == OAR_ZOO_TOKENS_STATEFUL;
    r->vocab = info->num_classes;
}

/* A random batch of n samples; token models get windows of at most max_t tokens. */
static inline void zoo_batch(const oar_zoo_info *info, int64_t n, int64_t max_t, oar_tensor **x, oar_tensor **y) {
    int64_t t = info->context ? (info->context < max_t ? info->context : max_t) : 0;
    switch (info->input) {
    case OAR_ZOO_FEATURES:
        *x = oar_randn((int64_t[]){n, info->in_channels}, 2, OAR_F32);
        *y = oar_randint(0, info->num_classes, (int64_t[]){n}, 1, OAR_I64);
        break;
    case OAR_ZOO_IMAGE: {
        int64_t hw = info->in_channels == 3 ? 32 : 28;
        *x = oar_randn((int64_t[]){n, info->in_channels, hw, hw}, 4, OAR_F32);
        *y = oar_randint(0, info->num_classes, (int64_t[]){n}, 1, OAR_I64);
        break;
    }
    case OAR_ZOO_TOKENS:
        *x = oar_randint(0, info->num_classes, (int64_t[]){n, t}, 2, OAR_I64);
        *y = oar_randint(0, info->num_classes, (int64_t[]){n, t}, 2, OAR_I64);
        break;
    case OAR_ZOO_TOKENS_STATEFUL:
        *x = oar_randint(0, info->num_classes, (int64_t[]){t, n}, 2, OAR_I64);
        *y = oar_randint(0, info->num_classes, (int64_t[]){t, n}, 2, OAR_I64);
        break;
    }
}

/* zoo_run_init with SGD, lr 0.05 and momentum 0.9: the fusion tests' training setting. */
static inline void zoo_run_init_sgd(zoo_run *r, const char *name, uint64_t seed) {
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    zoo_run_init(r, name, seed, &oo);
}

/* Parameters and gradients of a and b (same architecture) that are not bitwise equal. */
static inline int zoo_param_grad_diffs(oar_module *a, oar_module *b) {
    int diffs = 0;
    for (int i = 0; i < oar_module_num_parameters(a); i++) {
        oar_tensor *pa = oar_module_parameter(a, i, NULL), *pb = oar_module_parameter(b, i, NULL);
        diffs += !t_same_bits(pa, pb) + !t_same_bits(oar_grad_get(pa), oar_grad_get(pb));
    }
    return diffs;
}

static inline void zoo_run_free(zoo_run *r) {
    oar_optimizer_free(r->opt);
    oar_module_free(r->m);
}

#endif
