/* The optimizer step as an op (optimizer_update) and in compiled training steps:
 *   - the op called directly gives the bits an eager oar_optimizer_step gives, for every kind,
 *     increments the step state, and fills SGD's fresh momentum buffer exactly once;
 *   - a training step {zero_grad; mse(linear(x)); backward; [clip]; step} compiled with
 *     oar_jit_to_static gives, after 5 calls, the parameters and state that 5 eager steps give
 *     from the same weights (bitwise), counts its runs in oar_optimizer_steps, and sees learning
 *     rates set between calls (by hand or by a scheduler);
 *   - the host-side hooks and the kernel reject programs traced with other options. */
#include "optim/optim.h"
#include "test_util.h"

typedef struct config {
    const char *name;
    oar_optim_opts opts;
} config;

static int configs(config *c) {
    int n = 0;
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = 0.1;
    c[n++] = (config){"SGD", o};
    o.momentum = 0.9, o.weight_decay = 0.01;
    c[n++] = (config){"SGD momentum wd", o};
    o.nesterov = true;
    c[n++] = (config){"SGD nesterov", o};
    o.nesterov = false, o.dampening = 0.25;
    c[n++] = (config){"SGD dampening", o};
    o = oar_optim_defaults(OAR_OPTIM_ADAM);
    o.lr = 0.01;
    c[n++] = (config){"Adam", o};
    o.weight_decay = 0.1, o.amsgrad = true;
    c[n++] = (config){"Adam L2 amsgrad", o};
    o = oar_optim_defaults(OAR_OPTIM_ADAMW);
    o.lr = 0.01;
    c[n++] = (config){"AdamW", o};
    o.amsgrad = true;
    c[n++] = (config){"AdamW amsgrad", o};
    o = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    c[n++] = (config){"RMSprop", o};
    o.centered = true, o.momentum = 0.9, o.weight_decay = 0.01;
    c[n++] = (config){"RMSprop centered momentum", o};
    o = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    o.lr_decay = 0.01, o.initial_accumulator = 0.1, o.weight_decay = 0.01;
    c[n++] = (config){"Adagrad", o};
    o = oar_optim_defaults(OAR_OPTIM_LAMB);
    o.weight_decay = 0.01;
    c[n++] = (config){"LAMB", o};
    o = oar_optim_defaults(OAR_OPTIM_ADADELTA);
    o.weight_decay = 0.01, o.maximize = true;
    c[n++] = (config){"Adadelta wd maximize", o};
    o = oar_optim_defaults(OAR_OPTIM_ADAMAX);
    o.weight_decay = 0.01;
    c[n++] = (config){"Adamax wd", o};
    o = oar_optim_defaults(OAR_OPTIM_NADAM);
    o.weight_decay = 0.01;
    c[n++] = (config){"NAdam wd", o};
    o = oar_optim_defaults(OAR_OPTIM_RADAM);
    o.beta2 = 0.5; /* rho_inf 3: never rectified */
    c[n++] = (config){"RAdam", o};
    o = oar_optim_defaults(OAR_OPTIM_ASGD);
    o.t0 = 1, o.lr = 0.05;
    c[n++] = (config){"ASGD averaging", o};
    o = oar_optim_defaults(OAR_OPTIM_RPROP);
    o.maximize = true;
    c[n++] = (config){"Rprop maximize", o};
    return n;
}

/* ---- the op called by hand against the optimizer, three steps */
static void test_op_matches_step(const config *c) {
    oar_scope_begin();
    oar_manual_seed(3);
    int64_t shape[2] = {37, 5};
    oar_tensor *p = oar_randn(shape, 2, OAR_F32);
    oar_set_requires_grad(p, true);
    oar_tensor *q = t_leaf_copy(p); /* updated by the op directly */
    oar_optimizer *o = oar_optimizer_new(&p, 1, &c->opts);
    CHECK(o != NULL);
    /* the op's own inputs: zeroed state of the slots the options use, and a hyper tensor */
    oar_tensor *slot[OAR_SLOT_COUNT] = {0};
    for (int s = 0; s < OAR_SLOT_COUNT; s++)
        if (oar_optim_slot_used(&c->opts, (oar_slot)s))
            slot[s] = oar_full(shape, oar_slot_is_scalar(s) ? 0 : 2, oar_optim_slot_init(&c->opts, (oar_slot)s),
                               oar_optim_slot_dtype(s, OAR_F32));
    int64_t nh = OAR_HYPER_COUNT;
    oar_tensor *hyper = oar_zeros(&nh, 1, OAR_F64);
    oar_optim_write_hyper(oar_data(hyper), oar_optimizer_group_opts(o, 0));
    double *h = oar_data(hyper);
    h[OAR_HYPER_FRESH_MOMENTUM] = c->opts.kind == OAR_OPTIM_SGD && c->opts.momentum != 0;
    for (int step = 0; o && step < 3; step++) {
        oar_tensor *g = oar_randn(shape, 2, OAR_F32);
        t_give_grad(p, g);
        CHECK(oar_optimizer_step(o) == OAR_OK);
        CHECK(oar_optim_update_call(c->opts.kind, q, g, hyper, slot) == OAR_OK);
        CHECK(h[OAR_HYPER_FRESH_MOMENTUM] == 0); /* filled once */
    }
    CHECK(t_same_bits(p, q));
    if (!t_same_bits(p, q)) printf("  %s: the op and the optimizer differ\n", c->name);
    for (int i = 0; o && i < oar_optimizer_num_state(o); i++) {
        const char *name;
        oar_tensor *st = oar_optimizer_state(o, i, &name);
        const char *slot_name = strchr(name, '.') + 1;
        for (int s = 0; s < OAR_SLOT_COUNT; s++)
            if (!strcmp(slot_name, oar_slot_names[s])) CHECK(t_same_bits(st, slot[s]));
    }
    if (slot[OAR_SLOT_STEP]) CHECK(t_at(slot[OAR_SLOT_STEP], 0) == 3);
    oar_optimizer_free(o);
    oar_scope_end();
}

/* ---- compiled training steps */
typedef struct trainer {
    oar_module *m;
    oar_optimizer *o;
    double clip; /* > 0: clip_grad_norm before the step */
} trainer;

static oar_status train_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    (void)n_in;
    (void)n_out;
    oar_optimizer_zero_grad(t->o);
    oar_tensor *loss = oar_mse_loss(oar_forward(t->m, in[0]), in[1], OAR_REDUCE_MEAN);
    if (!loss) return oar_last_status();
    oar_status st = oar_backward(loss, NULL, false);
    if (st == OAR_OK && t->clip > 0) {
        int n = oar_module_num_parameters(t->m);
        oar_tensor *ps[8];
        for (int i = 0; i < n && i < 8; i++) ps[i] = oar_module_parameter(t->m, i, NULL);
        st = oar_clip_grad_norm(ps, n, t->clip, 2.0, NULL);
    }
    if (st == OAR_OK) st = oar_optimizer_step(t->o);
    out[0] = loss;
    return st;
}

static void make_trainer(trainer *t, const oar_optim_opts *opts, double clip) {
    oar_manual_seed(7);
    t->m = oar_nn_linear(6, 3, true);
    t->o = oar_optimizer_for(t->m, opts);
    t->clip = clip;
}

static void free_trainer(trainer *t) {
    oar_optimizer_free(t->o);
    oar_module_free(t->m);
}

/* lr_at[k]: the lr set before call k (0: leave it). */
static void compare_compiled(const config *c, double clip, const double *lr_at, bool *all_same) {
    oar_scope_begin();
    trainer e, s;
    make_trainer(&e, &c->opts, clip);
    make_trainer(&s, &c->opts, clip); /* same seed: same weights */
    oar_jit_opts jo = {.module = s.m, .optimizer = s.o};
    oar_jit *f = oar_jit_to_static(train_fn, &s, &jo);
    CHECK(f != NULL);
    bool ok = f != NULL;
    for (int k = 0; ok && k < 5; k++) {
        oar_manual_seed(100 + (uint64_t)k);
        oar_tensor *x = oar_randn((int64_t[]){4, 6}, 2, OAR_F32), *y = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
        if (lr_at && lr_at[k] > 0) {
            oar_optimizer_group_opts(e.o, 0)->lr = lr_at[k];
            oar_optimizer_group_opts(s.o, 0)->lr = lr_at[k];
        }
        oar_tensor *in[2] = {x, y}, *le[1] = {0}, *ls[1] = {0};
        oar_status st = train_fn(&e, in, 2, le, 1);
        CHECK(st == OAR_OK);
        st = oar_jit_call(f, in, 2, ls, 1);
        CHECK(st == OAR_OK);
        if (st != OAR_OK) {
            printf("  %s: compiled step failed: %s\n", c->name, oar_last_error());
            ok = false;
            break;
        }
        CHECK(t_same_bits(le[0], ls[0]));
    }
    if (ok) {
        CHECK(oar_jit_num_traces(f) == 1);
        CHECK(oar_optimizer_steps(s.o) == 5 && oar_optimizer_steps(e.o) == 5);
        bool eq = oar_optimizer_num_state(s.o) == oar_optimizer_num_state(e.o);
        for (int i = 0; i < oar_module_num_parameters(e.m); i++)
            eq &= t_same_bits(oar_module_parameter(e.m, i, NULL), oar_module_parameter(s.m, i, NULL));
        for (int i = 0; eq && i < oar_optimizer_num_state(e.o); i++)
            eq &= t_same_bits(oar_optimizer_state(e.o, i, NULL), oar_optimizer_state(s.o, i, NULL));
        /* gradients of the last run are on the parameters, as eagerly */
        for (int i = 0; i < oar_module_num_parameters(e.m); i++)
            eq &= t_same_bits(oar_grad_get(oar_module_parameter(e.m, i, NULL)), oar_grad_get(oar_module_parameter(s.m, i, NULL)));
        if (!eq) printf("  %s%s%s: compiled and eager steps differ\n", c->name, clip > 0 ? " (clipped)" : "",
                        lr_at ? " (lr changed)" : "");
        *all_same &= eq;
        CHECK(eq);
    }
    oar_jit_free(f);
    free_trainer(&e);
    free_trainer(&s);
    oar_scope_end();
}

/* A scheduler stepped between compiled calls changes the lr the program uses. */
static void test_scheduler(void) {
    oar_scope_begin();
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_SGD);
    so.lr = 0.5;
    so.momentum = 0.9;
    trainer e, s;
    make_trainer(&e, &so, 0);
    make_trainer(&s, &so, 0);
    oar_sched_opts sch = oar_sched_defaults(OAR_SCHED_STEP);
    sch.step_size = 2;
    sch.gamma = 0.1;
    oar_scheduler *se = oar_scheduler_new(e.o, &sch), *ss = oar_scheduler_new(s.o, &sch);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.o};
    oar_jit *f = oar_jit_to_static(train_fn, &s, &jo);
    oar_tensor *xs[6], *ys[6];
    for (int k = 0; k < 6; k++) {
        xs[k] = oar_randn((int64_t[]){4, 6}, 2, OAR_F32);
        ys[k] = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
    }
    bool eq = true;
    for (int k = 0; k < 6; k++) {
        oar_tensor *in[2] = {xs[k], ys[k]}, *l[1] = {0};
        CHECK(train_fn(&e, in, 2, l, 1) == OAR_OK);
        CHECK(oar_jit_call(f, in, 2, l, 1) == OAR_OK);
        CHECK(oar_scheduler_step(se, 0) == OAR_OK && oar_scheduler_step(ss, 0) == OAR_OK);
        for (int i = 0; i < 2; i++)
            eq &= t_same_bits(oar_module_parameter(e.m, i, NULL), oar_module_parameter(s.m, i, NULL));
    }
    CHECK(eq);
    CHECK(oar_optimizer_group_opts(s.o, 0)->lr < 0.5 * 0.1 * 0.1 * 1.0001);
    CHECK(oar_optimizer_steps(s.o) == 6);
    /* the lr matters: a compiled run with the scheduler's lr differs from one with the first lr */
    trainer fixed;
    make_trainer(&fixed, &so, 0);
    oar_jit_opts jo2 = {.module = fixed.m, .optimizer = fixed.o};
    oar_jit *f2 = oar_jit_to_static(train_fn, &fixed, &jo2);
    for (int k = 0; k < 6; k++) {
        oar_tensor *in[2] = {xs[k], ys[k]}, *l[1] = {0};
        CHECK(oar_jit_call(f2, in, 2, l, 1) == OAR_OK);
    }
    CHECK(!t_same_bits(oar_module_parameter(fixed.m, 0, NULL), oar_module_parameter(s.m, 0, NULL)));
    oar_jit_free(f2);
    free_trainer(&fixed);
    oar_scheduler_free(se);
    oar_scheduler_free(ss);
    oar_jit_free(f);
    free_trainer(&e);
    free_trainer(&s);
    oar_scope_end();
}

/* Options that change the state a program was traced with are reported when it runs; an
 * invalid option is reported by the kernel, naming the op. */
static void test_compiled_option_errors(void) {
    oar_scope_begin();
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_SGD);
    so.lr = 0.1;
    trainer s;
    make_trainer(&s, &so, 0);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.o};
    oar_jit *f = oar_jit_to_static(train_fn, &s, &jo);
    oar_tensor *x = oar_randn((int64_t[]){4, 6}, 2, OAR_F32), *y = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
    oar_tensor *in[2] = {x, y}, *l[1] = {0};
    CHECK(oar_jit_call(f, in, 2, l, 1) == OAR_OK);
    oar_optimizer_group_opts(s.o, 0)->momentum = 0.9; /* needs a buffer the program does not have */
    CHECK(oar_jit_call(f, in, 2, l, 1) != OAR_OK);
    CHECK(strstr(oar_last_error(), "the options now need the momentum_buffer state") != NULL);
    oar_optimizer_group_opts(s.o, 0)->momentum = 0;
    oar_optimizer_group_opts(s.o, 0)->lr = -1;
    CHECK(oar_jit_call(f, in, 2, l, 1) != OAR_OK);
    CHECK(strstr(oar_last_error(), "optimizer_update: SGD: expected lr >= 0, got -1") != NULL);
    oar_optimizer_group_opts(s.o, 0)->lr = 0.1;
    oar_optimizer_zero_grad(s.o);
    CHECK(oar_jit_call(f, in, 2, l, 1) == OAR_OK);
    oar_jit_free(f);
    free_trainer(&s);
    oar_scope_end();
}

/* Tracing reads no data: the clip norm is NaN at tracing, and its tensor form is an output;
 * clip_grad_value is recorded too. */
static oar_status clip_total_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    (void)n_in;
    (void)n_out;
    oar_optimizer_zero_grad(t->o);
    oar_tensor *loss = oar_mse_loss(oar_forward(t->m, in[0]), in[1], OAR_REDUCE_MEAN);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    oar_tensor *ps[2] = {oar_module_parameter(t->m, 0, NULL), oar_module_parameter(t->m, 1, NULL)};
    if (st == OAR_OK && oar_is_tracing()) {
        double total = 0;
        st = oar_clip_grad_norm(ps, 2, 1e9, 2.0, &total); /* nothing clipped, only the norm */
        if (st == OAR_OK && !isnan(total)) st = oar_error(OAR_ERR_INTERNAL, "expected a NaN norm while tracing");
    }
    if (st == OAR_OK) st = oar_clip_grad_value(ps, 2, 0.5);
    if (st == OAR_OK) out[0] = oar_clip_grad_norm_total(ps, 2, 0.01, 2.0);
    if (st == OAR_OK && !out[0]) st = oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(t->o);
    return st;
}

static void test_clip_total(void) {
    oar_scope_begin();
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_ADAM);
    trainer e, s;
    make_trainer(&e, &so, 0);
    make_trainer(&s, &so, 0);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.o};
    oar_jit *f = oar_jit_to_static(clip_total_fn, &s, &jo);
    bool eq = true;
    for (int k = 0; k < 3; k++) {
        oar_tensor *x = oar_randn((int64_t[]){4, 6}, 2, OAR_F32), *y = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
        oar_tensor *in[2] = {x, y}, *te[1] = {0}, *ts[1] = {0};
        CHECK(clip_total_fn(&e, in, 2, te, 1) == OAR_OK);
        oar_status st = oar_jit_call(f, in, 2, ts, 1);
        CHECK(st == OAR_OK);
        if (st != OAR_OK) {
            printf("  clip total: %s\n", oar_last_error());
            break;
        }
        CHECK(oar_dtype_of(ts[0]) == OAR_F64 && oar_numel(ts[0]) == 1);
        eq &= t_same_bits(te[0], ts[0]) && t_at(ts[0], 0) > 0.01;
        for (int i = 0; i < 2; i++)
            eq &= t_same_bits(oar_module_parameter(e.m, i, NULL), oar_module_parameter(s.m, i, NULL));
    }
    CHECK(eq);
    oar_jit_free(f);
    free_trainer(&e);
    free_trainer(&s);
    oar_scope_end();
}

/* Two steps in one compiled function: both run at every call, and both are counted. */
static oar_status two_steps_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    oar_status st = train_fn(user, in, n_in, out, n_out);
    return st == OAR_OK ? oar_optimizer_step(t->o) : st;
}

static void test_two_steps(void) {
    oar_scope_begin();
    oar_optim_opts so = oar_optim_defaults(OAR_OPTIM_ADAMW);
    trainer e, s;
    make_trainer(&e, &so, 0);
    make_trainer(&s, &so, 0);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.o};
    oar_jit *f = oar_jit_to_static(two_steps_fn, &s, &jo);
    bool eq = true;
    for (int k = 0; k < 3; k++) {
        oar_tensor *x = oar_randn((int64_t[]){4, 6}, 2, OAR_F32), *y = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
        oar_tensor *in[2] = {x, y}, *l[1] = {0};
        CHECK(two_steps_fn(&e, in, 2, l, 1) == OAR_OK);
        CHECK(oar_jit_call(f, in, 2, l, 1) == OAR_OK);
        for (int i = 0; i < 2; i++)
            eq &= t_same_bits(oar_module_parameter(e.m, i, NULL), oar_module_parameter(s.m, i, NULL));
    }
    CHECK(eq);
    CHECK(oar_optimizer_steps(s.o) == 6 && oar_optimizer_steps(e.o) == 6);
    oar_jit_free(f);
    free_trainer(&e);
    free_trainer(&s);
    oar_scope_end();
}

int main(void) {
    oar_init();
    config cs[24];
    int n = configs(cs);
    for (int i = 0; i < n; i++) test_op_matches_step(&cs[i]);
    bool all_same = true;
    const double lrs[5] = {0, 0, 0.03, 0, 0.001};
    for (int i = 0; i < n; i++) {
        compare_compiled(&cs[i], 0, NULL, &all_same);
        compare_compiled(&cs[i], 0, lrs, &all_same);
        compare_compiled(&cs[i], 0.05, NULL, &all_same);
    }
    test_scheduler();
    test_compiled_option_errors();
    test_clip_total();
    test_two_steps();
    return test_summary("test_optim_static");
}
