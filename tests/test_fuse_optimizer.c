/* The fuse_all_optimizer_ops pass (src/graph/passes/fuse_optimizer.c) and the
 * optimizer_update_multi op it makes:
 *   - a compiled training step of a 4-layer MLP (8 parameters) has optimizer_update_multi nodes
 *     as full as the op's 32 state inputs allow and no optimizer_update with the pass on, eight
 *     optimizer_update nodes with it off;
 *   - for every optimizer kind and option set, 4 compiled steps with the pass on give bitwise
 *     the parameters, state and gradients of 4 compiled steps with it off and of 4 eager steps;
 *   - groups end where the op's inputs are full (Adam: 6 parameters a node), where a parameter
 *     is updated again (two steps in one function), and where a node between two updates
 *     reads a parameter already updated (two optimizers with a read between their steps):
 *     results stay those of the eager steps;
 *   - a thread chunk may start anywhere inside a parameter: every kind's loop over a whole
 *     range (AVX2 where it has one) gives the bits of the loop run one element at a time (the
 *     portable tail code). */
#include "ops/op.h"
#include "optim/optim.h"
#include "test_util.h"

/* Occurrences of "= op(" or " op(" in program i's text. */
static int count_op(oar_jit *f, const char *op) {
    char *buf = malloc(1 << 20);
    int n = 0;
    if (buf && oar_jit_dump(f, 0, buf, 1 << 20) >= 0) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s(", op);
        for (const char *s = buf; (s = strstr(s, pat)) != NULL; s += strlen(pat)) n++;
    }
    free(buf);
    return n;
}

typedef struct trainer {
    oar_module *m;
    oar_optimizer *o, *o2; /* o2: a second optimizer over the last layer (split test) */
    int steps;             /* optimizer steps per call */
    bool read_between;     /* split test: the output reads the first layer's weight between steps */
} trainer;

static oar_status train_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    trainer *t = user;
    (void)n_in;
    (void)n_out;
    oar_optimizer_zero_grad(t->o);
    if (t->o2) oar_optimizer_zero_grad(t->o2);
    oar_tensor *loss = oar_mse_loss(oar_forward(t->m, in[0]), in[1], OAR_REDUCE_MEAN);
    if (!loss) return oar_last_status();
    oar_status st = oar_backward(loss, NULL, false);
    for (int k = 0; k < t->steps && st == OAR_OK; k++) st = oar_optimizer_step(t->o);
    out[0] = loss;
    if (st == OAR_OK && t->read_between) { /* the updated weight of layer 0, before o2 steps */
        out[0] = oar_sum(oar_module_parameter(t->m, 0, NULL), NULL, 0, false);
        if (!out[0]) st = oar_last_status();
    }
    if (st == OAR_OK && t->o2) st = oar_optimizer_step(t->o2);
    return st;
}

/* An MLP of `layers` linear layers (widths 5, 7, 6, ..., 3) with ReLUs between. */
static void make_trainer(trainer *t, int layers, const oar_optim_opts *opts, bool split) {
    memset(t, 0, sizeof *t);
    oar_manual_seed(11);
    oar_module *mods[32];
    int n = 0, w = 5;
    for (int l = 0; l < layers; l++) {
        int next = l == layers - 1 ? 3 : 6 + l % 3;
        mods[n++] = oar_nn_linear(w, next, true);
        if (l < layers - 1) mods[n++] = oar_nn_activation(OAR_ACT_RELU, 0);
        w = next;
    }
    t->m = oar_nn_sequential(mods, n);
    t->steps = 1;
    int np = oar_module_num_parameters(t->m);
    oar_tensor *ps[64];
    for (int i = 0; i < np; i++) ps[i] = oar_module_parameter(t->m, i, NULL);
    if (split) { /* o: every layer but the last, o2: the last */
        t->o = oar_optimizer_new(ps, np - 2, opts);
        t->o2 = oar_optimizer_new(ps + np - 2, 2, opts);
        t->read_between = true;
    } else {
        t->o = oar_optimizer_new(ps, np, opts);
    }
}

static void free_trainer(trainer *t) {
    oar_optimizer_free(t->o);
    oar_optimizer_free(t->o2);
    oar_module_free(t->m);
}

static bool same_training(trainer *a, trainer *b) {
    bool eq = true;
    for (int i = 0; i < oar_module_num_parameters(a->m); i++) {
        oar_tensor *pa = oar_module_parameter(a->m, i, NULL), *pb = oar_module_parameter(b->m, i, NULL);
        eq &= t_same_bits(pa, pb) && t_same_bits(oar_grad_get(pa), oar_grad_get(pb));
    }
    oar_optimizer *oa[2] = {a->o, a->o2}, *ob[2] = {b->o, b->o2};
    for (int k = 0; k < 2; k++) {
        if (!oa[k]) continue;
        eq &= oar_optimizer_num_state(oa[k]) == oar_optimizer_num_state(ob[k]);
        for (int i = 0; eq && i < oar_optimizer_num_state(oa[k]); i++)
            eq &= t_same_bits(oar_optimizer_state(oa[k], i, NULL), oar_optimizer_state(ob[k], i, NULL));
    }
    return eq;
}

/* Eager, compiled with the pass and compiled without it, 4 calls each from the same weights.
 * Returns the optimizer_update_multi and optimizer_update nodes of the fused program. */
static void compare(const char *what, int layers, const oar_optim_opts *opts, int steps, bool split, int *n_multi,
                    int *n_single) {
    oar_scope_begin();
    trainer e, on, off;
    make_trainer(&e, layers, opts, split);
    make_trainer(&on, layers, opts, split);
    make_trainer(&off, layers, opts, split);
    e.steps = on.steps = off.steps = steps;
    oar_jit_opts jon = {.module = on.m, .optimizer = on.o}, joff = {.module = off.m, .optimizer = off.o};
    CHECK(oar_build_strategy_set(&joff.strategy, "fuse_all_optimizer_ops", false) == OAR_OK);
    oar_jit *fon = oar_jit_to_static(train_fn, &on, &jon), *foff = oar_jit_to_static(train_fn, &off, &joff);
    CHECK(fon && foff);
    bool ok = fon && foff, eq = true;
    for (int k = 0; ok && k < 4; k++) {
        oar_manual_seed(200 + (uint64_t)k);
        oar_tensor *x = oar_randn((int64_t[]){4, 5}, 2, OAR_F32), *y = oar_randn((int64_t[]){4, 3}, 2, OAR_F32);
        oar_tensor *in[2] = {x, y}, *le[1] = {0}, *lon[1] = {0}, *loff[1] = {0};
        CHECK(train_fn(&e, in, 2, le, 1) == OAR_OK);
        oar_status st = oar_jit_call(fon, in, 2, lon, 1);
        if (st == OAR_OK) st = oar_jit_call(foff, in, 2, loff, 1);
        CHECK(st == OAR_OK);
        if (st != OAR_OK) {
            printf("  %s: compiled step failed: %s\n", what, oar_last_error());
            ok = false;
            break;
        }
        eq &= t_same_bits(le[0], lon[0]) && t_same_bits(le[0], loff[0]);
    }
    if (ok) {
        eq &= same_training(&e, &on) && same_training(&e, &off);
        *n_multi = count_op(fon, "optimizer_update_multi");
        *n_single = count_op(fon, "optimizer_update");
        CHECK(count_op(foff, "optimizer_update_multi") == 0);
        CHECK(count_op(foff, "optimizer_update") == oar_module_num_parameters(e.m) * steps);
    }
    if (!eq) printf("  %s: eager, fused and unfused steps differ\n", what);
    CHECK(eq);
    oar_jit_free(fon);
    oar_jit_free(foff);
    free_trainer(&e);
    free_trainer(&on);
    free_trainer(&off);
    oar_scope_end();
}

static int configs(oar_optim_opts *c, const char **names) {
    int n = 0;
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = 0.1;
    names[n] = "SGD", c[n++] = o;
    o.momentum = 0.9, o.weight_decay = 0.01; /* the buffer is filled by the first update */
    names[n] = "SGD momentum", c[n++] = o;
    o.nesterov = true;
    names[n] = "SGD nesterov", c[n++] = o;
    o.nesterov = false, o.dampening = 0.25;
    names[n] = "SGD dampening", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ADAM);
    o.lr = 0.01;
    names[n] = "Adam", c[n++] = o;
    o.weight_decay = 0.1, o.amsgrad = true;
    names[n] = "Adam L2 amsgrad", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ADAMW);
    o.lr = 0.01, o.amsgrad = true;
    names[n] = "AdamW amsgrad", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    names[n] = "RMSprop", c[n++] = o;
    o.centered = true, o.momentum = 0.9, o.weight_decay = 0.01;
    names[n] = "RMSprop centered momentum", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    o.lr_decay = 0.01, o.initial_accumulator = 0.1, o.weight_decay = 0.01;
    names[n] = "Adagrad", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_LAMB);
    o.weight_decay = 0.01;
    names[n] = "LAMB", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ADADELTA);
    o.weight_decay = 0.01, o.maximize = true;
    names[n] = "Adadelta", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ADAMAX);
    names[n] = "Adamax", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_NADAM);
    names[n] = "NAdam", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_RADAM);
    names[n] = "RAdam", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_ASGD);
    o.t0 = 1;
    names[n] = "ASGD", c[n++] = o;
    o = oar_optim_defaults(OAR_OPTIM_RPROP);
    names[n] = "Rprop", c[n++] = o;
    return n;
}

static void test_every_kind(void) {
    oar_optim_opts c[24];
    const char *names[24];
    int n = configs(c, names);
    for (int i = 0; i < n; i++) {
        int multi = -1, single = -1, per_param = 2; /* param, hyper, then the slots used */
        for (int s = 0; s < OAR_SLOT_COUNT; s++) per_param += oar_optim_slot_used(&c[i], (oar_slot)s);
        int per_node = OAR_OPTIM_MULTI_STATE / per_param, want = (8 + per_node - 1) / per_node; /* 8 parameters */
        compare(names[i], 4, &c[i], 1, false, &multi, &single);
        CHECK(multi == want && single == 0);
        if (multi != want || single != 0) printf("  %s: %d multi, %d single nodes\n", names[i], multi, single);
    }
}

/* Adam takes 5 state inputs a parameter: 20 parameters need ceil(20 / 6) = 4 nodes. */
static void test_capacity(void) {
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_ADAM);
    int multi = -1, single = -1;
    compare("Adam, 20 parameters", 10, &o, 1, false, &multi, &single);
    CHECK(multi == 4 && single == 0);
    o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = 0.05;
    compare("SGD, 20 parameters", 10, &o, 1, false, &multi, &single); /* 2 inputs a parameter: 16 a node */
    CHECK(multi == 2 && single == 0);
}

/* Two steps in one call: the second update of a parameter starts a new group. */
static void test_updated_twice(void) {
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_ADAMW);
    int multi = -1, single = -1;
    compare("AdamW, two steps a call", 3, &o, 2, false, &multi, &single);
    CHECK(multi == 2 && single == 0);
}

/* o steps layers 0-2, the output reads layer 0's updated weight, then o2 steps layer 3: o's
 * updates may not move below that read, so o and o2 get a node each. */
static void test_read_between(void) {
    oar_optim_opts o = oar_optim_defaults(OAR_OPTIM_SGD);
    o.lr = 0.1, o.momentum = 0.9;
    int multi = -1, single = -1;
    compare("SGD, a read between two optimizers", 4, &o, 1, true, &multi, &single);
    CHECK(multi == 2 && single == 0);
}

/* Runs plan pl's loop over [0, n) at once, or element by element. */
static void run_loop(oar_optim_plan *pl, int64_t n, bool by_element) {
    if (!by_element) pl->run(&pl->c, 0, n);
    else
        for (int64_t i = 0; i < n; i++) pl->run(&pl->c, i, i + 1);
}

/* Two copies of one update (param, grad, slots), one run whole and one element by element. */
static void test_split_anywhere(void) {
    oar_scope_begin();
    oar_optim_opts c[24];
    const char *names[24];
    int n_cfg = configs(c, names);
    const int64_t sizes[2] = {37, 1003};
    for (int ci = 0; ci < n_cfg; ci++)
        for (int si = 0; si < 2; si++) {
            int64_t n = sizes[si];
            oar_manual_seed(50 + (uint64_t)ci);
            float *data[2][2 + OAR_SLOT_COUNT];
            oar_tensor *src[2 + OAR_SLOT_COUNT];
            for (int k = 0; k < 2 + OAR_SLOT_COUNT; k++) { /* param, grad, then slots (positive: sqrt) */
                src[k] = k < 2 ? oar_randn(&n, 1, OAR_F32) : oar_abs(oar_randn(&n, 1, OAR_F32));
                for (int copy = 0; copy < 2; copy++) {
                    data[copy][k] = malloc(sizeof(float) * (size_t)n);
                    oar_copy_to_buffer(src[k], data[copy][k], sizeof(float) * (size_t)n, OAR_F32);
                }
            }
            double sums[2][2 * OAR_OPTIM_MAX_BLOCKS];
            for (int copy = 0; copy < 2; copy++) {
                oar_optim_update u = {.o = &c[ci], .n = n, .p = data[copy][0], .g = data[copy][1], .t = 3,
                                      .fresh_momentum = si == 0 && c[ci].kind == OAR_OPTIM_SGD};
                for (int s = 1; s < OAR_SLOT_COUNT; s++)
                    u.s[s] = oar_optim_slot_used(&c[ci], (oar_slot)s) ? data[copy][2 + s] : NULL;
                oar_optim_plan pl;
                oar_optim_plan_f32(&u, &pl, sums[copy]);
                if (pl.moments) { /* LAMB: copy 0's moments for both, then the apply loops compared */
                    if (copy == 0) {
                        pl.moments(&pl.c, 0, pl.n_blocks);
                        for (int k = 0; k < 2 + OAR_SLOT_COUNT; k++)
                            memcpy(data[1][k], data[0][k], sizeof(float) * (size_t)n);
                        memcpy(sums[1], sums[0], sizeof sums[0]);
                    }
                    oar_optim_lamb_trust(&pl, c[ci].lr);
                }
                run_loop(&pl, n, copy == 1);
            }
            bool eq = true;
            for (int k = 0; k < 2 + OAR_SLOT_COUNT; k++) eq &= memcmp(data[0][k], data[1][k], sizeof(float) * (size_t)n) == 0;
            CHECK(eq);
            if (!eq) printf("  %s, %lld elements: the loop split per element differs\n", names[ci], (long long)n);
            for (int k = 0; k < 2 + OAR_SLOT_COUNT; k++) {
                free(data[0][k]);
                free(data[1][k]);
            }
        }
    oar_scope_end(); /* the source tensors */
}

int main(void) {
    oar_init();
    CHECK(oar_op_find("optimizer_update_multi") >= 0);
    test_every_kind();
    test_capacity();
    test_updated_twice();
    test_read_between();
    test_split_anywhere();
    return test_summary("test_fuse_optimizer");
}
