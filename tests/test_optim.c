/* Optimizers, clipping and schedules beyond the torch golden values (test_golden_optim.c):
 * defaults, state names and checkpoints, parameter groups, skipped parameters, no allocation
 * after the first step, thread-count independence, clipping, and bad inputs. */
#include "tensor/tensor.h" /* to hand a parameter a gradient of the wrong shape or layout */
#include "test_util.h"

#include <float.h>

static oar_tensor *vec(const float *v, int64_t n) { return oar_from_data(v, &n, 1, OAR_F32); }

static oar_tensor *param(const int64_t *shape, int ndim, double scale) {
    oar_tensor *t = oar_mul_scalar(oar_randn(shape, ndim, OAR_F32), scale);
    oar_set_requires_grad(t, true);
    return t;
}

static void test_defaults(void) {
    oar_optim_opts d = oar_optim_defaults(OAR_OPTIM_ADAMW);
    CHECK(d.explicit_values && d.lr == 1e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 &&
          d.weight_decay == 1e-2);
    d = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    CHECK(d.lr == 1e-2 && d.alpha == 0.99 && d.eps == 1e-8 && d.momentum == 0);
    d = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    CHECK(d.lr == 1e-2 && d.eps == 1e-10 && d.lr_decay == 0 && d.initial_accumulator == 0);
    d = oar_optim_defaults(OAR_OPTIM_LAMB);
    CHECK(d.lr == 1e-3 && d.eps == 1e-6 && d.weight_decay == 0);
    CHECK(oar_optim_defaults(OAR_OPTIM_SGD).lr == 0);

    oar_tensor *p = param((int64_t[]){3}, 1, 1.0);
    /* zero fields take the kind's defaults ... */
    oar_optimizer *o = oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAMW, .lr = 0.5});
    oar_optim_opts *g = oar_optimizer_group_opts(o, 0);
    CHECK(g && g->lr == 0.5 && g->beta1 == 0.9 && g->beta2 == 0.999 && g->eps == 1e-8 && g->weight_decay == 1e-2 &&
          g->explicit_values);
    oar_optimizer_free(o);
    /* ... unless explicit: AdamW without weight decay, Adam with beta1 = 0 */
    d = oar_optim_defaults(OAR_OPTIM_ADAMW);
    d.weight_decay = 0;
    d.beta1 = 0;
    o = oar_optimizer_new(&p, 1, &d);
    g = oar_optimizer_group_opts(o, 0);
    CHECK(g && g->weight_decay == 0 && g->beta1 == 0);
    oar_optimizer_free(o);
    oar_release(p);
}

static void test_bad_options(void) {
    oar_tensor *p = param((int64_t[]){3}, 1, 1.0);
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD}), "SGD: expected lr > 0");
    CHECK_ERR(oar_optimizer_new(&p, 1, NULL), "SGD: expected lr > 0");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM, .lr = -1}),
              "Adam: expected lr >= 0, got -1");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM, .beta1 = 1.5}),
              "Adam: expected 0 <= beta1 < 1, got 1.5");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_LAMB, .beta2 = 1}),
              "LAMB: expected 0 <= beta2 < 1, got 1");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1, .nesterov = true}),
              "SGD: expected momentum > 0 and dampening == 0 with nesterov");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1, .momentum = -0.5}),
              "SGD: expected momentum >= 0, got -0.5");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_RMSPROP, .weight_decay = -1}),
              "RMSprop: expected weight_decay >= 0");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAGRAD, .lr_decay = -1}),
              "Adagrad: expected lr_decay >= 0");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = (oar_optim_kind)42}), "expected a kind");
    oar_release(p);
}

static void test_bad_params(void) {
    oar_optim_opts sgd = {.kind = OAR_OPTIM_SGD, .lr = 0.1};
    oar_tensor *i = oar_zeros((int64_t[]){3}, 1, OAR_I64);
    CHECK_ERR(oar_optimizer_new(&i, 1, &sgd), "SGD: expected parameter 0 to be f32 or f64, got i64");
    oar_tensor *h = oar_zeros((int64_t[]){3}, 1, OAR_F16);
    CHECK_ERR(oar_optimizer_new(&h, 1, &sgd), "expected parameter 0 to be f32 or f64, got f16");
    oar_tensor *p = param((int64_t[]){2, 3}, 2, 1.0);
    oar_tensor *two[2] = {p, p};
    CHECK_ERR(oar_optimizer_new(two, 2, &sgd), "expected distinct parameters, got parameter 1 == parameter 0");
    oar_tensor *nul[1] = {NULL};
    CHECK_ERR(oar_optimizer_new(nul, 1, &sgd), "expected parameter 0 to be a tensor, got NULL");
    CHECK_ERR(oar_optimizer_new(&p, 0, &sgd), "expected a non-empty list of parameters");
    oar_tensor *y = oar_mul_scalar(p, 2.0);
    CHECK_ERR(oar_optimizer_new(&y, 1, &sgd), "expected parameter 0 to be a leaf tensor");
    oar_tensor *tr = oar_detach(oar_transpose(p, 0, 1));
    CHECK_ERR(oar_optimizer_new(&tr, 1, &sgd), "expected parameter 0 to be contiguous");
    oar_release(i);
    oar_release(h);
    oar_release(y);
    oar_release(tr);
    oar_release(p);
}

static void test_state_names(void) {
    oar_tensor *p[2] = {param((int64_t[]){2, 3}, 2, 1.0), param((int64_t[]){4}, 1, 1.0)};
    oar_optim_opts adam = oar_optim_defaults(OAR_OPTIM_ADAM);
    adam.amsgrad = true;
    oar_optimizer *o = oar_optimizer_new(p, 2, &adam);
    CHECK(oar_optimizer_num_state(o) == 0); /* made lazily */
    for (int k = 0; k < 2; k++) t_give_grad(p[k], oar_ones_like(p[k]));
    CHECK(oar_optimizer_step(o) == OAR_OK);
    const char *want[] = {"0.step", "0.exp_avg", "0.exp_avg_sq", "0.max_exp_avg_sq",
                          "1.step", "1.exp_avg", "1.exp_avg_sq", "1.max_exp_avg_sq"};
    CHECK(oar_optimizer_num_state(o) == 8);
    for (int i = 0; i < 8 && i < oar_optimizer_num_state(o); i++) {
        const char *name;
        oar_tensor *t = oar_optimizer_state(o, i, &name);
        CHECK(t && !strcmp(name, want[i]));
        if (!strcmp(name + 2, "step")) {
            double v = 0;
            CHECK(oar_dtype_of(t) == OAR_I64 && oar_ndim(t) == 0 && oar_item(t, &v) == OAR_OK && v == 1);
        } else {
            oar_tensor *pp = p[name[0] - '0'];
            CHECK(oar_dtype_of(t) == OAR_F32 && oar_ndim(t) == oar_ndim(pp) && oar_numel(t) == oar_numel(pp));
        }
    }
    CHECK_ERR(oar_optimizer_state(o, 8, NULL), "Adam: expected a state index in [0, 8), got 8");
    CHECK(oar_optimizer_steps(o) == 1);
    oar_optimizer_free(o);

    /* RMSprop's slots follow its options; SGD without momentum keeps no state */
    oar_optim_opts rms = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    rms.centered = true;
    rms.momentum = 0.5;
    o = oar_optimizer_new(p, 1, &rms);
    CHECK(oar_optimizer_step(o) == OAR_OK);
    const char *rwant[] = {"0.step", "0.momentum_buffer", "0.square_avg", "0.grad_avg"};
    CHECK(oar_optimizer_num_state(o) == 4);
    for (int i = 0; i < 4; i++) {
        const char *name = "";
        oar_optimizer_state(o, i, &name);
        CHECK(name && !strcmp(name, rwant[i]));
    }
    oar_optimizer_free(o);
    o = oar_optimizer_new(p, 2, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1});
    CHECK(oar_optimizer_step(o) == OAR_OK && oar_optimizer_num_state(o) == 0);
    oar_optimizer_free(o);
    for (int k = 0; k < 2; k++) oar_release(p[k]);
}

/* Saving every state tensor and loading it into a fresh optimizer over copies of the
 * parameters makes both continue identically. */
static void test_load_state_round_trip(oar_optim_kind kind) {
    oar_tensor *p[2] = {param((int64_t[]){3, 5}, 2, 1.0), param((int64_t[]){7}, 1, 1.0)};
    oar_optim_opts opts = oar_optim_defaults(kind);
    opts.lr = 0.01;
    opts.momentum = kind == OAR_OPTIM_SGD || kind == OAR_OPTIM_RMSPROP ? 0.9 : 0;
    opts.amsgrad = kind == OAR_OPTIM_ADAM;
    opts.centered = kind == OAR_OPTIM_RMSPROP;
    opts.lr_decay = kind == OAR_OPTIM_ADAGRAD ? 0.01 : 0;
    oar_optimizer *a = oar_optimizer_new(p, 2, &opts);
    for (int s = 0; s < 3; s++) {
        for (int k = 0; k < 2; k++) t_give_grad(p[k], oar_randn(oar_shape(p[k]), oar_ndim(p[k]), OAR_F32));
        CHECK(oar_optimizer_step(a) == OAR_OK);
    }
    oar_tensor *q[2] = {t_leaf_copy(p[0]), t_leaf_copy(p[1])};
    oar_optimizer *b = oar_optimizer_new(q, 2, &opts);
    CHECK(oar_optimizer_num_state(a) > 0);
    for (int i = 0; i < oar_optimizer_num_state(a); i++) {
        const char *name;
        oar_tensor *t = oar_optimizer_state(a, i, &name);
        CHECK(oar_optimizer_load_state(b, name, t) == OAR_OK);
    }
    CHECK(oar_optimizer_set_steps(b, oar_optimizer_steps(a)) == OAR_OK);
    CHECK(oar_optimizer_num_state(b) == oar_optimizer_num_state(a) && oar_optimizer_steps(b) == 3);
    for (int k = 0; k < 2; k++) {
        oar_tensor *g = oar_randn(oar_shape(p[k]), oar_ndim(p[k]), OAR_F32);
        t_give_grad(p[k], g);
        t_give_grad(q[k], g);
    }
    CHECK(oar_optimizer_step(a) == OAR_OK && oar_optimizer_step(b) == OAR_OK);
    for (int k = 0; k < 2; k++) CHECK(t_same_bits(p[k], q[k]));
    oar_optimizer_free(a);
    oar_optimizer_free(b);
    for (int k = 0; k < 2; k++) {
        oar_release(p[k]);
        oar_release(q[k]);
    }
}

static void test_load_state_errors(void) {
    oar_tensor *p[2] = {param((int64_t[]){2, 3}, 2, 1.0), param((int64_t[]){4}, 1, 1.0)};
    oar_optimizer *o = oar_optimizer_new(p, 2, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM});
    oar_tensor *good = oar_zeros((int64_t[]){2, 3}, 2, OAR_F32);
    oar_tensor *wrong_shape = oar_zeros((int64_t[]){3, 2}, 2, OAR_F32);
    oar_tensor *wrong_dtype = oar_zeros((int64_t[]){2, 3}, 2, OAR_F64);
    oar_tensor *step_f = oar_scalar(3, OAR_F32), *step_i = oar_scalar(3, OAR_I64), *neg = oar_scalar(-1, OAR_I64);
    CHECK_ERR(oar_optimizer_load_state(o, "0.exp_avg", wrong_shape),
              "Adam: expected '0.exp_avg' to be f32 [2, 3] (like its parameter), got f32 [3, 2]");
    CHECK_ERR(oar_optimizer_load_state(o, "0.exp_avg", wrong_dtype), "got f64 [2, 3]");
    CHECK_ERR(oar_optimizer_load_state(o, "0.step", step_f), "expected '0.step' to be i64 [] (a step count)");
    CHECK_ERR(oar_optimizer_load_state(o, "0.step", neg), "expected '0.step' >= 0, got -1");
    CHECK_ERR(oar_optimizer_load_state(o, "2.exp_avg", good), "with an index in [0, 2), got '2.exp_avg'");
    CHECK_ERR(oar_optimizer_load_state(o, "exp_avg", good), "expected a state name '<param index>.<slot>'");
    CHECK_ERR(oar_optimizer_load_state(o, "0.momentum_buffer", good),
              "expected a slot of parameter 0 to be one of step, exp_avg, exp_avg_sq, got '0.momentum_buffer'");
    CHECK_ERR(oar_optimizer_load_state(o, "0.max_exp_avg_sq", good), "one of step, exp_avg, exp_avg_sq");
    CHECK_ERR(oar_optimizer_load_state(o, "0.exp_avg", NULL), "got NULL");
    CHECK(oar_optimizer_num_state(o) == 0); /* nothing was made by failed loads */
    /* a load before the first step makes the parameter's state; the step continues from it */
    CHECK(oar_optimizer_load_state(o, "0.step", step_i) == OAR_OK);
    CHECK(oar_optimizer_num_state(o) == 3);
    t_give_grad(p[0], oar_ones_like(p[0]));
    CHECK(oar_optimizer_step(o) == OAR_OK);
    double v = 0;
    CHECK(oar_item(oar_optimizer_state(o, 0, NULL), &v) == OAR_OK && v == 4);
    CHECK_ERR(oar_optimizer_set_steps(o, -1), "Adam: expected steps >= 0, got -1");
    oar_optimizer_free(o);
    oar_release(good);
    oar_release(wrong_shape);
    oar_release(wrong_dtype);
    oar_release(step_f);
    oar_release(step_i);
    oar_release(neg);
    for (int k = 0; k < 2; k++) oar_release(p[k]);
}

/* Adadelta to Rprop: torch 1.13's defaults, checks and slots; scalar slots load as f32 []. */
static void test_added_kinds(void) {
    oar_optim_opts d = oar_optim_defaults(OAR_OPTIM_ADADELTA);
    CHECK(d.lr == 1.0 && d.rho == 0.9 && d.eps == 1e-6 && d.weight_decay == 0 && !d.maximize);
    d = oar_optim_defaults(OAR_OPTIM_ADAMAX);
    CHECK(d.lr == 2e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8);
    d = oar_optim_defaults(OAR_OPTIM_NADAM);
    CHECK(d.lr == 2e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8 && d.momentum_decay == 4e-3);
    d = oar_optim_defaults(OAR_OPTIM_RADAM);
    CHECK(d.lr == 1e-3 && d.beta1 == 0.9 && d.beta2 == 0.999 && d.eps == 1e-8);
    d = oar_optim_defaults(OAR_OPTIM_ASGD);
    CHECK(d.lr == 1e-2 && d.lambd == 1e-4 && d.alpha == 0.75 && d.t0 == 1e6);
    d = oar_optim_defaults(OAR_OPTIM_RPROP);
    CHECK(d.lr == 1e-2 && d.etaminus == 0.5 && d.etaplus == 1.2 && d.step_size_min == 1e-6 && d.step_size_max == 50);

    oar_tensor *p = param((int64_t[]){3}, 1, 1.0);
    /* zero fields take the kind's defaults */
    oar_optimizer *o = oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_RPROP, .etaplus = 2});
    oar_optim_opts *g = oar_optimizer_group_opts(o, 0);
    CHECK(g && g->lr == 1e-2 && g->etaminus == 0.5 && g->etaplus == 2 && g->step_size_max == 50);
    oar_optimizer_free(o);
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADADELTA, .rho = 1.5}),
              "Adadelta: expected 0 <= rho <= 1, got 1.5");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_NADAM, .momentum_decay = -1}),
              "NAdam: expected momentum_decay >= 0, got -1");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_RADAM, .beta2 = 1}),
              "RAdam: expected 0 <= beta2 < 1, got 1");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_RPROP, .etaminus = 1.5}),
              "Rprop: expected 0 < etaminus < 1, got 1.5");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_RPROP, .weight_decay = 0.1}),
              "Rprop: expected weight_decay 0 (torch 1.13's Rprop has none), got 0.1");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ASGD, .lambd = NAN}),
              "ASGD: expected a finite lambd, got nan");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM, .maximize = true}),
              "Adam: expected maximize false, got true (oar offers maximize for Adadelta, Adamax, ASGD and Rprop); "
              "minimize the negated loss instead");
    CHECK_ERR(oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_NADAM, .maximize = true}),
              "and Rprop; torch 1.13's has none)");

    /* ASGD's slots: step, eta (lr at first), mu (1) and ax; eta and mu are f32 scalars */
    o = oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ASGD, .lr = 0.5});
    oar_tensor *f64s = oar_scalar(0.25, OAR_F64), *f32s = oar_scalar(0.25, OAR_F32);
    CHECK_ERR(oar_optimizer_load_state(o, "0.eta", f64s), "ASGD: expected '0.eta' to be f32 [] (a scalar), got f64 []");
    CHECK_ERR(oar_optimizer_load_state(o, "0.exp_avg", f32s), "one of step, eta, mu, ax, got '0.exp_avg'");
    t_give_grad(p, oar_ones_like(p));
    CHECK(oar_optimizer_step(o) == OAR_OK);
    const char *want[4] = {"0.step", "0.eta", "0.mu", "0.ax"};
    CHECK(oar_optimizer_num_state(o) == 4);
    for (int i = 0; i < 4 && i < oar_optimizer_num_state(o); i++) {
        const char *name;
        oar_tensor *t = oar_optimizer_state(o, i, &name);
        CHECK(!strcmp(name, want[i]));
        CHECK(oar_ndim(t) == (i == 3 ? 1 : 0) && oar_dtype_of(t) == (i == 0 ? OAR_I64 : i == 3 ? OAR_F32 : OAR_F32));
    }
    double eta = 0;
    /* after step 1: eta = lr / (1 + lambd lr)^alpha, in f32 as torch keeps it */
    CHECK(oar_item(oar_optimizer_state(o, 1, NULL), &eta) == OAR_OK &&
          eta == (double)(float)(0.5 / pow(1 + 1e-4 * 0.5, 0.75)));
    CHECK(oar_optimizer_load_state(o, "0.eta", f32s) == OAR_OK);
    CHECK(oar_item(oar_optimizer_state(o, 1, NULL), &eta) == OAR_OK && eta == 0.25);
    oar_optimizer_free(o);
    oar_release(f64s);
    oar_release(f32s);
    oar_release(p);
}

static void test_groups(void) {
    float zeros[3] = {0, 0, 0}, ones[3] = {1, 1, 1};
    oar_tensor *a = vec(zeros, 3), *b = vec(zeros, 3), *c = vec(zeros, 3), *g = vec(ones, 3);
    oar_set_requires_grad(a, true);
    oar_set_requires_grad(b, true);
    oar_set_requires_grad(c, true);
    oar_optimizer *o = oar_optimizer_new(&a, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1});
    oar_optim_opts other = *oar_optimizer_group_opts(o, 0);
    other.lr = 0.01;
    CHECK(oar_optimizer_add_group(o, &b, 1, &other) == 1);
    CHECK(oar_optimizer_add_group(o, &c, 1, NULL) == 2); /* NULL: group 0's options */
    CHECK(oar_optimizer_num_groups(o) == 3);
    CHECK_ERR(oar_optimizer_add_group(o, &a, 1, NULL), "SGD: expected distinct parameters, got parameter 3 == "
                                                       "parameter 0");
    CHECK_ERR(oar_optimizer_add_group(o, &g, 1, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM}),
              "SGD: expected every group to have kind SGD, got Adam");
    CHECK_ERR(oar_optimizer_group_opts(o, 3), "expected a group in [0, 3), got 3");
    CHECK(oar_optimizer_num_groups(o) == 3);
    t_give_grad(a, g);
    t_give_grad(b, g);
    t_give_grad(c, g);
    CHECK(oar_optimizer_step(o) == OAR_OK);
    CHECK_NEAR(t_at(a, 1), -0.1f, 1e-7);
    CHECK_NEAR(t_at(b, 1), -0.01f, 1e-8);
    CHECK_NEAR(t_at(c, 1), -0.1f, 1e-7);
    /* edits through the mutable options take effect at the next step and are checked there */
    oar_optimizer_group_opts(o, 1)->lr = 0;
    CHECK(oar_optimizer_step(o) == OAR_OK); /* lr 0 is allowed once created (schedules reach it) */
    CHECK_NEAR(t_at(b, 1), -0.01f, 1e-8);
    oar_optimizer_group_opts(o, 1)->lr = -1;
    double before = t_at(a, 0);
    CHECK_ERR(oar_optimizer_step(o), "group 1: SGD: expected lr >= 0, got -1");
    CHECK(t_at(a, 0) == before && oar_optimizer_steps(o) == 2); /* a failed step changes nothing */
    oar_optimizer_free(o);
    oar_release(a);
    oar_release(b);
    oar_release(c);
    oar_release(g);
}

static void test_zero_grad_and_skips(void) {
    oar_tensor *p[2] = {param((int64_t[]){5}, 1, 1.0), param((int64_t[]){5}, 1, 1.0)};
    oar_tensor *p1_before = t_leaf_copy(p[1]);
    oar_optimizer *o = oar_optimizer_new(p, 2, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM, .lr = 0.1});
    t_give_grad(p[0], oar_ones_like(p[0]));
    CHECK(oar_optimizer_step(o) == OAR_OK);
    CHECK(t_same_bits(p[1], p1_before));          /* no gradient: skipped */
    CHECK(oar_optimizer_num_state(o) == 3); /* and no state for it */
    CHECK(oar_grad_get(p[0]) != NULL);
    oar_optimizer_zero_grad(o);
    CHECK(oar_grad_get(p[0]) == NULL && oar_grad_get(p[1]) == NULL);
    oar_tensor *p0 = t_leaf_copy(p[0]);
    CHECK(oar_optimizer_step(o) == OAR_OK); /* nothing has a gradient: nothing changes */
    CHECK(t_same_bits(p[0], p0) && oar_optimizer_steps(o) == 2);
    oar_optimizer_free(o);
    oar_release(p0);
    oar_release(p1_before);
    for (int k = 0; k < 2; k++) oar_release(p[k]);
}

static void test_bad_grads(void) {
    oar_tensor *p = param((int64_t[]){2, 3}, 2, 1.0);
    oar_tensor *before = t_leaf_copy(p);
    oar_optimizer *o = oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 0.1, .momentum = 0.9});
    oar_zero_grad(p);
    p->grad = oar_tensor_contiguous_copy(oar_zeros((int64_t[]){3, 2}, 2, OAR_F32));
    CHECK_ERR(oar_optimizer_step(o),
              "SGD: expected the gradient of parameter 0 to have the parameter's shape [2, 3], got [3, 2]");
    oar_zero_grad(p);
    p->grad = oar_tensor_contiguous_copy(oar_zeros((int64_t[]){2, 3}, 2, OAR_F64));
    CHECK_ERR(oar_optimizer_step(o), "SGD: expected the gradient of parameter 0 to be f32 like the parameter, got f64");
    CHECK(t_same_bits(p, before) && oar_optimizer_num_state(o) == 0 && oar_optimizer_steps(o) == 0);
    /* a strided gradient works, and gives what its contiguous copy gives */
    oar_tensor *gt = oar_randn((int64_t[]){3, 2}, 2, OAR_F32);
    oar_zero_grad(p);
    p->grad = oar_retain(oar_transpose(gt, 0, 1));
    CHECK(!p->grad->contiguous);
    oar_tensor *q = t_leaf_copy(before);
    oar_optimizer *o2 = oar_optimizer_new(&q, 1, oar_optimizer_group_opts(o, 0));
    t_give_grad(q, oar_contiguous(oar_transpose(gt, 0, 1)));
    CHECK(oar_optimizer_step(o) == OAR_OK && oar_optimizer_step(o2) == OAR_OK);
    CHECK(t_same_bits(p, q));
    oar_optimizer_free(o);
    oar_optimizer_free(o2);
    oar_release(gt);
    oar_release(q);
    oar_release(before);
    oar_release(p);
}

/* After the first step an optimizer allocates nothing: memory in tensors stays flat. */
static void test_no_allocation_growth(oar_optim_kind kind) {
    oar_module *m = oar_nn_sequential((oar_module *[]){oar_nn_linear(16, 32, true), oar_nn_linear(32, 4, true)}, 2);
    oar_optim_opts opts = oar_optim_defaults(kind);
    opts.lr = 0.01;
    opts.momentum = kind == OAR_OPTIM_SGD ? 0.9 : 0;
    oar_optimizer *o = oar_optimizer_for(m, &opts);
    CHECK(o != NULL);
    oar_tensor *x = oar_randn((int64_t[]){8, 16}, 2, OAR_F32);
    int64_t after_first = 0;
    for (int s = 0; o && s < 5; s++) {
        oar_optimizer_zero_grad(o);
        oar_scope_begin();
        CHECK(oar_backward(oar_sum(oar_square(oar_forward(m, x)), NULL, 0, false), NULL, false) == OAR_OK);
        oar_scope_end();
        oar_memory_stats before = oar_memory_stats_get(OAR_CPU);
        CHECK(oar_optimizer_step(o) == OAR_OK);
        oar_memory_stats after = oar_memory_stats_get(OAR_CPU);
        if (s == 0) after_first = after.current_bytes;
        else CHECK(after.n_allocs == before.n_allocs && after.current_bytes == after_first);
    }
    oar_optimizer_free(o);
    oar_release(x);
    oar_module_free(m);
}

static void test_optimizer_for(void) {
    oar_module *m = oar_nn_sequential((oar_module *[]){oar_nn_linear(3, 4, true), oar_nn_linear(4, 2, true)}, 2);
    oar_optimizer *o = oar_optimizer_for(m, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM});
    CHECK(o != NULL);
    oar_optimizer_free(o);
    CHECK(oar_module_set_requires_grad(m, "0.", false) == OAR_OK);
    o = oar_optimizer_for(m, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM});
    CHECK(o != NULL);
    for (int i = 2; i < 4; i++) {
        oar_tensor *t = oar_module_parameter(m, i, NULL);
        t_give_grad(t, oar_ones_like(t));
    }
    CHECK(oar_optimizer_step(o) == OAR_OK);
    const char *name = NULL;
    CHECK(oar_optimizer_num_state(o) == 6); /* frozen parameters are not in the optimizer */
    CHECK(oar_optimizer_state(o, 5, &name) && !strcmp(name, "1.exp_avg_sq"));
    oar_optimizer_free(o);
    CHECK(oar_module_set_requires_grad(m, "", false) == OAR_OK);
    CHECK_ERR(oar_optimizer_for(m, &(oar_optim_opts){.kind = OAR_OPTIM_ADAM}),
              "optimizer_for: expected a module with trainable parameters, got only frozen ones");
    oar_module_free(m);
}

/* Three steps over a large tensor (threaded when threads allow), from fixed values. */
static oar_tensor *run_big(oar_optim_kind kind) {
    int64_t n = 300001;
    oar_manual_seed(5);
    oar_tensor *g = oar_randn(&n, 1, OAR_F32), *init = oar_randn(&n, 1, OAR_F32);
    oar_tensor *p = t_leaf_copy(init);
    oar_optim_opts opts = oar_optim_defaults(kind);
    opts.lr = 0.01;
    opts.weight_decay = kind == OAR_OPTIM_RPROP ? 0 : 0.01; /* Rprop has none */
    opts.momentum = kind == OAR_OPTIM_SGD ? 0.9 : 0;
    oar_optimizer *o = oar_optimizer_new(&p, 1, &opts);
    for (int s = 0; s < 3; s++) {
        t_give_grad(p, g);
        CHECK(oar_optimizer_step(o) == OAR_OK);
    }
    CHECK(!t_same_bits(p, init));
    oar_optimizer_free(o);
    oar_release(g);
    oar_release(init);
    return p;
}

/* Every result is the same for any number of threads (LAMB's and clipping's norms too). */
static void test_threads_agree(void) {
    enum { N = OAR_OPTIM_RPROP + 1 };
    oar_tensor *res[2][N];
    double norms[2][N];
    int threads[2] = {4, 1}; /* 4 first: the pool is only ever shrunk here */
    for (int r = 0; r < 2; r++) {
        CHECK(oar_set_num_threads(threads[r]) == OAR_OK);
        for (int k = 0; k < N; k++) {
            res[r][k] = run_big((oar_optim_kind)k);
            CHECK(oar_clip_grad_norm(&res[r][k], 1, 1.0, 2, &norms[r][k]) == OAR_OK && norms[r][k] > 1);
        }
    }
    for (int k = 0; k < N; k++) {
        CHECK(t_same_bits(res[0][k], res[1][k]));
        CHECK(norms[0][k] == norms[1][k]);
        CHECK(t_same_bits(oar_grad_get(res[0][k]), oar_grad_get(res[1][k])));
        oar_release(res[0][k]);
        oar_release(res[1][k]);
    }
}

static oar_tensor *scalar_param(float v) {
    oar_tensor *t = vec(&v, 1);
    oar_set_requires_grad(t, true);
    return t;
}

/* The vector loops (8 elements at a time) and the scalar tails give the same bits: one
 * 19-element parameter against 19 one-element parameters holding the same values. LAMB's
 * trust ratio is per tensor, so there only its moments are compared. */
static void test_vector_matches_scalar(oar_optim_opts opts) {
    enum { N = 19, S = 7 }; /* 7 steps: RAdam's rectified branch runs from step 6 */
    float init[N], grads[S][N];
    for (int i = 0; i < N; i++) {
        init[i] = (float)(0.1 * (i % 7) - 0.35 + 0.01 * i);
        for (int s = 0; s < S; s++) grads[s][i] = (float)(((i * 37 + s * 11) % 17) / 8.0 - 1.0);
    }
    oar_tensor *big = vec(init, N), *small[N];
    oar_set_requires_grad(big, true);
    for (int i = 0; i < N; i++) small[i] = scalar_param(init[i]);
    oar_optimizer *ob = oar_optimizer_new(&big, 1, &opts), *os = oar_optimizer_new(small, N, &opts);
    for (int s = 0; s < S; s++) {
        t_give_grad(big, vec(grads[s], N));
        for (int i = 0; i < N; i++) t_give_grad(small[i], vec(&grads[s][i], 1));
        CHECK(oar_optimizer_step(ob) == OAR_OK && oar_optimizer_step(os) == OAR_OK);
    }
    if (opts.kind == OAR_OPTIM_LAMB) {
        for (int k = 1; k <= 2; k++) { /* 0.exp_avg, 0.exp_avg_sq vs i.exp_avg, i.exp_avg_sq */
            oar_tensor *whole = oar_optimizer_state(ob, k, NULL);
            for (int i = 0; i < N; i++) CHECK(t_at(whole, i) == t_at(oar_optimizer_state(os, 3 * i + k, NULL), 0));
        }
    } else {
        for (int i = 0; i < N; i++) CHECK(((float *)oar_data(big))[i] == ((float *)oar_data(small[i]))[0]);
    }
    oar_optimizer_free(ob);
    oar_optimizer_free(os);
    oar_release(big);
    for (int i = 0; i < N; i++) oar_release(small[i]);
}

static void test_vector_paths(void) {
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = 0.1, o.momentum = 0.9, o.nesterov = true, o.weight_decay = 0.01;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_ADAM);
    o.lr = 0.05, o.amsgrad = true, o.weight_decay = 0.1;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_ADAMW);
    o.lr = 0.05, o.amsgrad = true;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    test_vector_matches_scalar(o);
    o.centered = true, o.momentum = 0.9, o.weight_decay = 0.1;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    o.weight_decay = 0.1, o.lr_decay = 0.1;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_LAMB);
    o.weight_decay = 0.01;
    test_vector_matches_scalar(o);
    /* the added kinds with AVX2 loops (the others' portable loops vectorize as they are) */
    o = oar_optim_defaults(OAR_OPTIM_ADADELTA);
    test_vector_matches_scalar(o);
    o.weight_decay = 0.1, o.maximize = true;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_NADAM);
    o.lr = 0.05, o.weight_decay = 0.1;
    test_vector_matches_scalar(o);
    o = oar_optim_defaults(OAR_OPTIM_RADAM);
    o.lr = 0.05, o.weight_decay = 0.1;
    test_vector_matches_scalar(o);
    o.beta2 = 0.9; /* rho_t > 5 at steps 6 and 7 */
    test_vector_matches_scalar(o);
}

/* LAMB over several reduction blocks against its formula in double: the first step from
 * zero moments is u = g / (|g| + eps) + wd p, p -= lr ||p|| / ||u|| u. */
static void test_lamb_reference(void) {
    int64_t n = 70001;
    oar_manual_seed(9);
    oar_tensor *p = param(&n, 1, 1.0), *g = oar_randn(&n, 1, OAR_F32);
    float *p0 = malloc(sizeof(float) * (size_t)n);
    memcpy(p0, oar_data(p), sizeof(float) * (size_t)n);
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_LAMB);
    o.lr = 0.01, o.weight_decay = 0.1;
    oar_optimizer *opt = oar_optimizer_new(&p, 1, &o);
    t_give_grad(p, g);
    CHECK(oar_optimizer_step(opt) == OAR_OK);
    const float *gv = oar_data(g), *pv = oar_data(p);
    double np = 0, nu = 0;
    for (int64_t i = 0; i < n; i++) {
        double u = gv[i] / (fabs(gv[i]) + o.eps) + o.weight_decay * p0[i];
        np += (double)p0[i] * p0[i];
        nu += u * u;
    }
    /* p is stored in f32 (half an ulp of rounding) and u is computed in f32 (a few ulp of the
     * update, which matters where p is near zero) */
    double trust = sqrt(np) / sqrt(nu), worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double u = gv[i] / (fabs(gv[i]) + o.eps) + o.weight_decay * p0[i], want = p0[i] - o.lr * trust * u;
        worst = fmax(worst, fabs(pv[i] - want) / (FLT_EPSILON * (fabs(want) + 4 * o.lr * trust * fabs(u))));
    }
    CHECK(worst <= 1.0);
    free(p0);
    oar_optimizer_free(opt);
    oar_release(p);
    oar_release(g);
}

static void test_clip(void) {
    float va[2] = {3, 4}, vb[1] = {12}, vc[2] = {0.5f, -2};
    oar_tensor *p[3] = {vec(va, 2), vec(vb, 1), vec(vc, 2)};
    for (int k = 0; k < 3; k++) oar_set_requires_grad(p[k], true);
    t_give_grad(p[0], vec(va, 2)); /* gradients [3, 4], [12]; p[2] has none */
    t_give_grad(p[1], vec(vb, 1));
    oar_tensor *list[3] = {p[0], p[2], p[1]};
    double total = 0;
    CHECK(oar_clip_grad_norm(list, 3, 100, 2, &total) == OAR_OK);
    CHECK_NEAR(total, 13, 1e-12);
    CHECK(t_at(oar_grad_get(p[0]), 0) == 3); /* under max_norm: unchanged */
    CHECK(oar_clip_grad_norm(list, 3, 100, 1, &total) == OAR_OK);
    CHECK_NEAR(total, 19, 1e-12);
    CHECK(oar_clip_grad_norm(list, 3, 100, INFINITY, &total) == OAR_OK);
    CHECK_NEAR(total, 12, 1e-12);
    CHECK(oar_clip_grad_norm(list, 3, 100, 3, &total) == OAR_OK);
    CHECK_NEAR(total, cbrt(27.0 + 64 + 1728), 1e-9);
    CHECK(oar_clip_grad_norm(list, 3, 6.5, 2, &total) == OAR_OK);
    CHECK_NEAR(total, 13, 1e-12);
    double coef = 6.5 / (13 + 1e-6);
    CHECK_NEAR(t_at(oar_grad_get(p[0]), 1), 4 * coef, 1e-6);
    CHECK_NEAR(t_at(oar_grad_get(p[1]), 0), 12 * coef, 1e-6);
    CHECK(oar_clip_grad_norm(list, 3, 1e9, 2, &total) == OAR_OK);
    CHECK_NEAR(total, 6.5, 1e-5);
    CHECK(oar_clip_grad_norm(list, 0, 1, 2, &total) == OAR_OK && total == 0);

    CHECK(oar_clip_grad_value(list, 3, 1.75) == OAR_OK); /* [1.5, 2] and [6] become [1.5, 1.75], [1.75] */
    CHECK_NEAR(t_at(oar_grad_get(p[0]), 0), 1.5, 1e-6);
    CHECK(t_at(oar_grad_get(p[0]), 1) == 1.75 && t_at(oar_grad_get(p[1]), 0) == 1.75);
    CHECK(oar_grad_get(p[2]) == NULL);
    float vn[2] = {NAN, -5};
    oar_tensor *gn = vec(vn, 2);
    t_give_grad(p[2], gn);
    CHECK(oar_clip_grad_value(&p[2], 1, 1.0) == OAR_OK);
    CHECK(isnan(t_at(oar_grad_get(p[2]), 0)) && t_at(oar_grad_get(p[2]), 1) == -1);
    CHECK(oar_clip_grad_norm(&p[2], 1, 1.0, 2, &total) == OAR_OK && isnan(total)); /* NaN spreads, as torch */
    CHECK(isnan(t_at(oar_grad_get(p[2]), 1)));

    CHECK_ERR(oar_clip_grad_norm(list, 3, -1, 2, NULL), "clip_grad_norm: expected max_norm >= 0, got -1");
    CHECK_ERR(oar_clip_grad_norm(list, 3, 1, 0, NULL), "clip_grad_norm: expected norm_type > 0");
    CHECK_ERR(oar_clip_grad_norm(list, -1, 1, 2, NULL), "expected a list of n >= 0 tensors, got n < 0");
    CHECK_ERR(oar_clip_grad_value(list, 3, -1), "clip_grad_value: expected clip >= 0, got -1");
    oar_tensor *nul[1] = {NULL};
    CHECK_ERR(oar_clip_grad_value(nul, 1, 1), "expected tensor 0, got NULL");
    oar_release(gn);
    for (int k = 0; k < 3; k++) oar_release(p[k]);
}

static void test_schedulers(void) {
    float z[1] = {0};
    oar_tensor *p = vec(z, 1), *q = vec(z, 1);
    oar_optimizer *o = oar_optimizer_new(&p, 1, &(oar_optim_opts){.kind = OAR_OPTIM_SGD, .lr = 1.0});
    /* zero fields: StepLR's gamma is 0.1 */
    oar_scheduler *s = oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_STEP, .step_size = 2});
    CHECK(s && oar_scheduler_lr(s, 0) == 1.0);
    CHECK(oar_scheduler_step(s, 0) == OAR_OK && oar_scheduler_lr(s, 0) == 1.0);
    /* a group added later takes its lr then as its base */
    oar_optim_opts g1 = *oar_optimizer_group_opts(o, 0);
    g1.lr = 0.5;
    CHECK(oar_optimizer_add_group(o, &q, 1, &g1) == 1);
    CHECK(oar_scheduler_step(s, 0) == OAR_OK && oar_scheduler_t(s) == 2);
    CHECK_NEAR(oar_scheduler_lr(s, 0), 0.1, 1e-15);
    CHECK_NEAR(oar_scheduler_lr(s, 1), 0.05, 1e-15);
    CHECK_ERR(oar_scheduler_lr(s, 2), "scheduler_lr: expected a group in [0, 2), got 2");
    CHECK(isnan(oar_scheduler_lr(s, 2)));
    oar_scheduler_free(s);

    /* OneCycleLR cannot step past its total */
    s = oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_ONE_CYCLE, .t_max = 10, .max_lr = 1});
    CHECK(s && fabs(oar_scheduler_lr(s, 0) - 1.0 / 25) < 1e-15);
    for (int t = 0; t < 10; t++) CHECK(oar_scheduler_step(s, 0) == OAR_OK);
    CHECK_ERR(oar_scheduler_step(s, 0), "OneCycleLR: expected at most t_max = 10 steps (the total), got step 11");
    oar_scheduler_free(s);

    /* plateau defaults: patience 10, threshold 1e-4, factor 0.1 */
    oar_optimizer_group_opts(o, 0)->lr = 1.0;
    s = oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_PLATEAU});
    CHECK(oar_scheduler_step(s, 1.0) == OAR_OK);
    for (int t = 0; t < 10; t++) CHECK(oar_scheduler_step(s, 1.0) == OAR_OK);
    CHECK(oar_scheduler_lr(s, 0) == 1.0); /* 10 bad steps: still patient */
    CHECK(oar_scheduler_step(s, 0.99995) == OAR_OK); /* within the threshold: not better */
    CHECK_NEAR(oar_scheduler_lr(s, 0), 0.1, 1e-15);
    oar_scheduler_free(s);

    /* warmup then cosine, past t_max it stays at eta_min */
    oar_optimizer_group_opts(o, 0)->lr = 1.0;
    s = oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_WARMUP_COSINE, .warmup = 2, .t_max = 4,
                                               .eta_min = 0.1});
    double want[] = {0, 0.5, 1.0, 0.55, 0.1, 0.1, 0.1};
    for (int t = 0; t < 7; t++) {
        if (t) CHECK(oar_scheduler_step(s, 0) == OAR_OK);
        CHECK_NEAR(oar_scheduler_lr(s, 0), want[t], 1e-15);
    }
    oar_scheduler_free(s);

    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_STEP}),
              "StepLR: expected step_size >= 1, got 0");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_EXPONENTIAL}),
              "ExponentialLR: expected gamma > 0 (ExponentialLR has no default), got 0");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_COSINE}),
              "CosineAnnealingLR: expected t_max >= 1");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_WARMUP_COSINE, .warmup = 5, .t_max = 5}),
              "expected 0 <= warmup < t_max, got warmup 5 and t_max 5");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_ONE_CYCLE, .t_max = 3}),
              "OneCycleLR: expected phases of positive length");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_PLATEAU, .gamma = 1}),
              "ReduceLROnPlateau: expected 0 <= gamma < 1");
    CHECK_ERR(oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_MULTISTEP, .n_milestones = 17}),
              "MultiStepLR: expected 0 <= n_milestones <= 16, got 17");
    CHECK_ERR(oar_scheduler_new(o, NULL), "scheduler_new: expected options");
    CHECK_ERR(oar_scheduler_new(NULL, &(oar_sched_opts){.kind = OAR_SCHED_STEP, .step_size = 1}),
              "scheduler_new: expected an optimizer, got NULL");
    oar_optimizer_free(o);
    oar_release(p);
    oar_release(q);
}

int main(void) {
    /* Several threads from the start (before any parallel loop) so large updates run threaded. */
    CHECK(oar_set_num_threads(4) == OAR_OK);
    oar_manual_seed(11);
    oar_scope_begin();
    test_defaults();
    test_bad_options();
    test_bad_params();
    test_state_names();
    for (int k = OAR_OPTIM_SGD; k <= OAR_OPTIM_RPROP; k++) test_load_state_round_trip((oar_optim_kind)k);
    test_load_state_errors();
    test_added_kinds();
    test_groups();
    test_zero_grad_and_skips();
    test_bad_grads();
    for (int k = OAR_OPTIM_SGD; k <= OAR_OPTIM_RPROP; k++) test_no_allocation_growth((oar_optim_kind)k);
    test_optimizer_for();
    test_vector_paths();
    test_lamb_reference();
    test_clip();
    test_schedulers();
    test_threads_agree(); /* last: it leaves one thread */
    oar_scope_end();
    return test_summary("test_optim");
}
