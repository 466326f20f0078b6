/* Complete resume (issue 13, defect 5):
 *   - the LR scheduler's state: set directly (no stepping t times), saved in a checkpoint with
 *     the rest and restored so the schedule continues bit for bit (closed forms and plateau);
 *   - rewinding: a checkpoint saved before any step, loaded into an optimizer that has stepped,
 *     resets its state as torch's load_state_dict does, and a compiled step built on the
 *     optimizer keeps working and repeats the same steps bit for bit;
 *   - ops that draw nothing leave the generator alone (dropout in evaluation, p = 0, p = 1), so
 *     an evaluation between epochs does not change later dropout masks, and a run resumed
 *     across one is bit-exact. */
#include "test_io_util.h"

static char dir[512];

static const char *in_dir(char *buf, size_t size, const char *name) {
    snprintf(buf, size, "%s/%s", dir, name);
    return buf;
}

/* ---- the scheduler */

static oar_optimizer *sgd_over(oar_module *m, double lr) {
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = lr;
    o.momentum = 0.9;
    return oar_optimizer_for(m, &o);
}

/* Setting t gives the lr that stepping t times gives, for every closed form. */
static void test_sched_set_state(void) {
    oar_sched_opts kinds[4] = {oar_sched_defaults(OAR_SCHED_STEP), oar_sched_defaults(OAR_SCHED_COSINE),
                               oar_sched_defaults(OAR_SCHED_WARMUP_COSINE), oar_sched_defaults(OAR_SCHED_ONE_CYCLE)};
    kinds[0].step_size = 3;
    kinds[1].t_max = 20;
    kinds[2].t_max = 20, kinds[2].warmup = 4;
    kinds[3].t_max = 20;
    for (int k = 0; k < 4; k++) {
        oar_module *m = oar_nn_linear(3, 2, true);
        oar_optimizer *a = sgd_over(m, 0.1), *b = sgd_over(m, 0.1);
        oar_scheduler *sa = oar_scheduler_new(a, &kinds[k]), *sb = oar_scheduler_new(b, &kinds[k]);
        for (int i = 0; i < 13; i++) CHECK(oar_scheduler_next(sa) == OAR_OK);
        oar_sched_state st = oar_scheduler_get_state(sa);
        CHECK(st.t == 13);
        CHECK(oar_scheduler_set_state(sb, &st) == OAR_OK);
        CHECK(oar_scheduler_t(sb) == 13 && oar_scheduler_lr(sb, 0) == oar_scheduler_lr(sa, 0));
        CHECK(oar_scheduler_next(sa) == OAR_OK && oar_scheduler_next(sb) == OAR_OK);
        CHECK(oar_scheduler_lr(sb, 0) == oar_scheduler_lr(sa, 0));
        oar_scheduler_free(sa);
        oar_scheduler_free(sb);
        oar_optimizer_free(a);
        oar_optimizer_free(b);
        oar_module_free(m);
    }
    /* bad states are refused with the reason, and change nothing */
    oar_module *m = oar_nn_linear(3, 2, true);
    oar_optimizer *o = sgd_over(m, 0.1);
    oar_scheduler *s = oar_scheduler_new(o, &kinds[3]);
    oar_sched_state bad = {.t = 21};
    CHECK_ERR(oar_scheduler_set_state(s, &bad), "expected t <= t_max = 20, got 21");
    bad.t = -1;
    CHECK_ERR(oar_scheduler_set_state(s, &bad), "expected t >= 0, got -1");
    CHECK(oar_scheduler_t(s) == 0);
    CHECK_ERR(oar_scheduler_set_state(s, NULL), "got a NULL state");
    oar_scheduler_free(s);
    /* the plateau needs its metric: the metric-free step refuses it */
    s = oar_scheduler_new(o, &(oar_sched_opts){.kind = OAR_SCHED_PLATEAU});
    CHECK_ERR(oar_scheduler_next(s), "ReduceLROnPlateau: expected oar_scheduler_step(s, metric)");
    oar_scheduler_free(s);
    oar_optimizer_free(o);
    oar_module_free(m);
}

/* save_all / load_all: a fresh optimizer and scheduler continue the schedule exactly. */
static void sched_roundtrip(const char *label, oar_sched_opts so, const double *metrics) {
    char path[600];
    in_dir(path, sizeof path, "sched.ckpt");
    oar_manual_seed(5);
    oar_module *m = oar_nn_linear(4, 3, true);
    oar_optimizer *o = sgd_over(m, 0.2);
    /* a second group with its own lr: every group's lr is kept */
    oar_tensor *extra = oar_zeros((int64_t[]){2}, 1, OAR_F32);
    oar_set_requires_grad(extra, true);
    oar_optim_opts g1 = *oar_optimizer_group_opts(o, 0);
    g1.lr = 0.05;
    CHECK(oar_optimizer_add_group(o, &extra, 1, &g1) == 1);
    oar_scheduler *s = oar_scheduler_new(o, &so);
    for (int i = 0; i < 7; i++) CHECK(oar_scheduler_step(s, metrics ? metrics[i] : 0) == OAR_OK);
    CHECK(oar_checkpoint_save_all(path, m, o, s, 7) == OAR_OK);

    oar_module *m2 = oar_nn_linear(4, 3, true);
    oar_optimizer *o2 = sgd_over(m2, 0.2);
    oar_tensor *extra2 = oar_zeros((int64_t[]){2}, 1, OAR_F32);
    oar_set_requires_grad(extra2, true);
    CHECK(oar_optimizer_add_group(o2, &extra2, 1, &g1) == 1);
    oar_scheduler *s2 = oar_scheduler_new(o2, &so);
    int64_t step = -1;
    CHECK(oar_checkpoint_load_all(path, m2, o2, s2, &step) == OAR_OK);
    CHECK(step == 7 && oar_scheduler_t(s2) == 7);
    bool same = true;
    for (int i = 7; i < 14; i++) {
        for (int g = 0; g < 2; g++) same &= oar_scheduler_lr(s, g) == oar_scheduler_lr(s2, g);
        CHECK(oar_scheduler_step(s, metrics ? metrics[i] : 0) == OAR_OK);
        CHECK(oar_scheduler_step(s2, metrics ? metrics[i] : 0) == OAR_OK);
    }
    for (int g = 0; g < 2; g++) same &= oar_scheduler_lr(s, g) == oar_scheduler_lr(s2, g);
    if (!same) fprintf(stderr, "test_resume: %s does not continue after loading\n", label);
    CHECK(same);
    CHECK(oar_scheduler_get_state(s).bad_steps == oar_scheduler_get_state(s2).bad_steps);

    /* the wrong kind, or no scheduler in the file: reported, nothing changed */
    oar_sched_opts other = oar_sched_defaults(OAR_SCHED_EXPONENTIAL);
    other.gamma = 0.5;
    oar_scheduler *s3 = oar_scheduler_new(o2, &other);
    CHECK(oar_checkpoint_load_all(path, m2, o2, s3, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "in the file, ExponentialLR given"));
    CHECK(oar_scheduler_t(s3) == 0);
    CHECK(oar_checkpoint_save(path, m, o, 7) == OAR_OK);
    CHECK(oar_checkpoint_load_all(path, m2, o2, s3, NULL) == OAR_ERR_INVALID_ARG &&
          strstr(oar_last_error(), "the file has no scheduler state"));
    oar_scheduler_free(s3);

    oar_scheduler_free(s);
    oar_scheduler_free(s2);
    oar_optimizer_free(o);
    oar_optimizer_free(o2);
    oar_release(extra);
    oar_release(extra2);
    oar_module_free(m);
    oar_module_free(m2);
    printf("test_resume: %s round trip\n", label);
}

static void test_sched_checkpoint(void) {
    oar_sched_opts st = oar_sched_defaults(OAR_SCHED_STEP);
    st.step_size = 3;
    sched_roundtrip("StepLR", st, NULL);
    oar_sched_opts cos = oar_sched_defaults(OAR_SCHED_COSINE);
    cos.t_max = 10;
    cos.eta_min = 1e-3;
    sched_roundtrip("CosineAnnealingLR", cos, NULL);
    oar_sched_opts pl = oar_sched_defaults(OAR_SCHED_PLATEAU);
    pl.patience = 1;
    const double metrics[14] = {5, 4, 4, 4, 4, 3.9, 4, 4, 4, 4, 2, 4, 4, 4};
    sched_roundtrip("ReduceLROnPlateau", pl, metrics);
}

/* ---- rewinding an optimizer */

typedef struct trainer {
    oar_module *m;
    oar_optimizer *o;
} trainer;

static oar_status train_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    (void)n_in, (void)n_out;
    oar_optimizer_zero_grad(t->o);
    oar_tensor *loss = oar_mse_loss(oar_forward(t->m, in[0]), in[1], OAR_REDUCE_MEAN);
    if (!loss) return oar_last_status();
    oar_status st = oar_backward(loss, NULL, false);
    if (st == OAR_OK) st = oar_optimizer_step(t->o);
    out[0] = loss;
    return st;
}

/* Runs k steps on fixed data (compiled when f is given) and returns the parameters' copies. */
static void steps(trainer *t, oar_jit *f, int k, oar_tensor **params) {
    for (int i = 0; i < k; i++) {
        oar_scope_begin();
        oar_manual_seed(200 + (uint64_t)i);
        oar_tensor *in[2] = {oar_randn((int64_t[]){5, 4}, 2, OAR_F32), oar_randn((int64_t[]){5, 3}, 2, OAR_F32)};
        oar_tensor *loss[1] = {0};
        CHECK((f ? oar_jit_call(f, in, 2, loss, 1) : train_fn(t, in, 2, loss, 1)) == OAR_OK);
        if (f) oar_release(loss[0]);
        oar_scope_end();
    }
    for (int i = 0; i < oar_module_num_parameters(t->m); i++) {
        oar_tensor *d = oar_detach(oar_module_parameter(t->m, i, NULL));
        params[i] = oar_clone(d);
        oar_release(d);
    }
}

static void rewind_case(const char *label, oar_optim_opts opts, bool compiled) {
    char path[600];
    in_dir(path, sizeof path, "rewind.ckpt");
    oar_manual_seed(9);
    trainer t = {oar_nn_linear(4, 3, true), NULL};
    t.o = oar_optimizer_for(t.m, &opts);
    CHECK(oar_checkpoint_save(path, t.m, t.o, 0) == OAR_OK); /* before any step */
    oar_jit_opts jo = {.module = t.m, .optimizer = t.o};
    oar_jit *f = compiled ? oar_jit_to_static(train_fn, &t, &jo) : NULL;
    oar_tensor *first[2] = {0}, *again[2] = {0};
    steps(&t, f, 3, first);
    CHECK(oar_optimizer_steps(t.o) == 3 && oar_optimizer_num_state(t.o) > 0);
    int64_t step = -1;
    oar_status st = oar_checkpoint_load(path, t.m, t.o, &step);
    CHECK(st == OAR_OK);
    if (st != OAR_OK) fprintf(stderr, "test_resume: rewinding %s: %s\n", label, oar_last_error());
    CHECK(step == 0 && oar_optimizer_steps(t.o) == 0);
    steps(&t, f, 3, again);
    bool same = t_same_bits(first[0], again[0]) && t_same_bits(first[1], again[1]);
    if (!same) fprintf(stderr, "test_resume: %s%s after rewinding differs\n", label, compiled ? " compiled" : "");
    CHECK(same);
    if (f) CHECK(oar_jit_num_traces(f) == 1); /* the program was kept, not retraced */
    /* a checkpoint of the rewound optimizer says "no state", like the file it came from */
    CHECK(oar_checkpoint_load(path, t.m, t.o, NULL) == OAR_OK);
    CHECK(oar_checkpoint_save(path, t.m, t.o, 0) == OAR_OK);
    oar_tensor_dict *d = oar_safetensors_load(path);
    CHECK(d && oar_dict_get(d, "optim.0.momentum_buffer") == NULL && oar_dict_get(d, "optim.0.exp_avg") == NULL);
    oar_dict_free(d);
    for (int i = 0; i < 2; i++) {
        oar_release(first[i]);
        oar_release(again[i]);
    }
    oar_jit_free(f);
    oar_optimizer_free(t.o);
    oar_module_free(t.m);
}

static void test_rewind(void) {
    oar_optim_opts sgd = oar_optim_defaults(OAR_OPTIM_SGD);
    sgd.lr = 0.1, sgd.momentum = 0.9, sgd.dampening = 0.1;
    oar_optim_opts adam = oar_optim_defaults(OAR_OPTIM_ADAM);
    adam.lr = 0.01, adam.amsgrad = true;
    oar_optim_opts ada = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    ada.initial_accumulator = 0.1;
    for (int compiled = 0; compiled < 2; compiled++) {
        rewind_case("SGD with momentum", sgd, compiled);
        rewind_case("Adam amsgrad", adam, compiled);
        rewind_case("Adagrad", ada, compiled);
    }
}

/* ---- ops that draw nothing leave the generator alone */

static oar_status eval_dropout_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user, (void)n_in, (void)n_out;
    out[0] = oar_mul_scalar(oar_dropout(in[0], 0.5, false), 2.0);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_no_draw_no_advance(void) {
    oar_scope_begin();
    oar_manual_seed(3);
    oar_tensor *x = oar_ones((int64_t[]){64}, 1, OAR_F32);
    oar_rng_state before = oar_rng_get_state();
    CHECK(oar_dropout(x, 0.5, false) != NULL); /* evaluation */
    CHECK(oar_dropout(x, 0.0, true) != NULL);  /* nothing dropped */
    CHECK(oar_dropout(x, 1.0, true) != NULL);  /* everything dropped */
    CHECK(oar_rng_get_state().offset == before.offset);
    CHECK(oar_dropout(x, 0.5, true) != NULL);  /* this one draws */
    CHECK(oar_rng_get_state().offset == before.offset + 64);
    /* the same in a compiled function: evaluation-mode dropout is a program node that draws nothing */
    oar_jit *f = oar_jit_to_static(eval_dropout_fn, NULL, NULL);
    oar_tensor *out[1] = {0};
    before = oar_rng_get_state();
    for (int i = 0; i < 2; i++) {
        CHECK(oar_jit_call(f, &x, 1, out, 1) == OAR_OK);
        oar_release(out[0]);
    }
    CHECK(oar_rng_get_state().offset == before.offset);
    oar_jit_free(f);
    oar_scope_end();
}

typedef struct drop_net {
    oar_module *l1, *l2;
} drop_net;

/* Functional dropout, as a user writes it: oar_dropout(h, p, training). */
static oar_tensor *drop_forward(drop_net *n, oar_tensor *x, bool training) {
    oar_tensor *h = oar_relu(oar_forward(n->l1, x));
    return oar_forward(n->l2, oar_dropout(h, 0.3, training));
}

static oar_status eval_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    out[0] = drop_forward(user, in[0], false);
    return out[0] ? OAR_OK : oar_last_status();
}

static void drop_train(drop_net *n, oar_optimizer *o, int from, int to) {
    for (int s = from; s < to; s++) {
        oar_scope_begin();
        oar_tensor *x = oar_randn((int64_t[]){8, 5}, 2, OAR_F32), *y = oar_randn((int64_t[]){8, 2}, 2, OAR_F32);
        oar_tensor *loss = oar_mse_loss(drop_forward(n, x, true), y, OAR_REDUCE_MEAN);
        CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
        CHECK(oar_optimizer_step(o) == OAR_OK);
        oar_optimizer_zero_grad(o);
        oar_scope_end();
    }
}

/* An evaluation pass, eager and compiled, on data made without the global generator. */
static void drop_eval(drop_net *n, oar_jit *f) {
    oar_scope_begin();
    oar_tensor *x = oar_full((int64_t[]){16, 5}, 2, 0.25, OAR_F32), *out[1] = {0};
    CHECK(drop_forward(n, x, false) != NULL);
    CHECK(oar_jit_call(f, &x, 1, out, 1) == OAR_OK);
    oar_release(out[0]);
    oar_scope_end();
}

static oar_module *drop_module(drop_net *n) {
    oar_module *children[2] = {n->l1, n->l2};
    return oar_nn_sequential(children, 2);
}

static void test_resume_across_eval(void) {
    char path[600];
    in_dir(path, sizeof path, "eval.ckpt");
    oar_optim_opts opts = oar_optim_defaults(OAR_OPTIM_ADAM);
    opts.lr = 0.01;
    /* reference: 6 steps, no evaluation */
    oar_manual_seed(11);
    drop_net ref = {oar_nn_linear(5, 16, true), oar_nn_linear(16, 2, true)};
    oar_module *mref = drop_module(&ref);
    oar_optimizer *oref = oar_optimizer_for(mref, &opts);
    drop_train(&ref, oref, 0, 6);
    /* 3 steps, an evaluation (eager and compiled), a checkpoint, then resumed in fresh objects */
    oar_manual_seed(11);
    drop_net a = {oar_nn_linear(5, 16, true), oar_nn_linear(16, 2, true)};
    oar_module *ma = drop_module(&a);
    oar_optimizer *oa = oar_optimizer_for(ma, &opts);
    oar_jit *fa = oar_jit_to_static(eval_fn, &a, &(oar_jit_opts){.module = ma});
    drop_train(&a, oa, 0, 3);
    drop_eval(&a, fa);
    CHECK(oar_checkpoint_save(path, ma, oa, 3) == OAR_OK);
    drop_eval(&a, fa);
    oar_manual_seed(999);
    drop_net b = {oar_nn_linear(5, 16, true), oar_nn_linear(16, 2, true)};
    oar_module *mb = drop_module(&b);
    oar_optimizer *ob = oar_optimizer_for(mb, &opts);
    int64_t step = 0;
    CHECK(oar_checkpoint_load(path, mb, ob, &step) == OAR_OK && step == 3);
    drop_train(&b, ob, 3, 6);
    bool same = true;
    for (int i = 0; i < oar_module_num_parameters(mref); i++)
        same &= t_same_bits(oar_module_parameter(mref, i, NULL), oar_module_parameter(mb, i, NULL));
    if (!same) fprintf(stderr, "test_resume: the run resumed across an evaluation differs\n");
    CHECK(same);
    oar_jit_free(fa);
    oar_optimizer_free(oref);
    oar_optimizer_free(oa);
    oar_optimizer_free(ob);
    oar_module_free(mref);
    oar_module_free(ma);
    oar_module_free(mb);
}

int main(void) {
    if (!io_mkdtemp(dir, sizeof dir)) {
        fprintf(stderr, "test_resume: cannot make a scratch directory\n");
        return 1;
    }
    test_sched_set_state();
    test_no_draw_no_advance();
    if (io_have_safetensors()) {
        test_sched_checkpoint();
        test_rewind();
        test_resume_across_eval();
    } else {
        printf("test_resume: built without cJSON: checkpoint cases skipped\n");
    }
    io_rmtree(dir);
    return test_summary("test_resume");
}
