/* BatchNorm's num_batches_tracked under oar_jit_to_static: the counter is advanced by the
 * increment op inside the program, so K compiled training steps leave the model bitwise where K
 * eager steps leave it (parameters, running statistics and the counter); a module called twice
 * per step counts twice (the two increments are neither merged nor dropped); evaluation counts
 * nothing and its program has no increment; a failed call changes nothing; momentum=None (a
 * cumulative average, factor 1/num_batches_tracked) averages the batch statistics eagerly, and
 * compiled steps, which read the factor from the counter at run time, match eager ones bitwise. */
#include "test_util.h"

#include "graph/jit.h"
#include "ops/increment.h"

#define FEATURES 6

typedef struct model {
    oar_module *m, *bn;
    oar_optimizer *opt;
    int bn_calls; /* forwards of the BatchNorm per step */
} model;

/* linear -> batch_norm1d -> relu -> linear, made from one seed so two copies start equal */
static void model_init(model *r, double momentum, int bn_calls) {
    oar_manual_seed(5);
    r->bn = oar_nn_batch_norm1d(FEATURES, 1e-5, momentum, true, true);
    oar_module *kids[4] = {oar_nn_linear(4, FEATURES, true), r->bn, oar_nn_activation(OAR_ACT_RELU, 0),
                           oar_nn_linear(FEATURES, 3, true)};
    r->m = oar_nn_sequential(kids, 4);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    oo.momentum = 0.9;
    r->opt = oar_optimizer_for(r->m, &oo);
    r->bn_calls = bn_calls;
    CHECK(r->m && r->opt);
}

static void model_free(model *r) {
    oar_optimizer_free(r->opt);
    oar_module_free(r->m);
}

/* forward, cross-entropy, backward, SGD step; with bn_calls 2 the BatchNorm also sees in[0]
 * widened to its features once more (a second count in the same step) */
static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    model *r = user;
    oar_optimizer_zero_grad(r->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(r->m, in[0]), in[1], NULL);
    if (loss && r->bn_calls == 2) {
        oar_tensor *wide = oar_concat((oar_tensor *[]){in[0], in[0]}, 2, 1); /* [N, 8] */
        oar_tensor *extra = oar_forward(r->bn, oar_slice(wide, 1, 0, FEATURES, 1));
        loss = extra ? oar_add(loss, oar_mean(extra, NULL, 0, false)) : NULL;
    }
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(r->opt);
    out[0] = loss;
    return st;
}

static int64_t counter(model *r) { return (int64_t)t_at(oar_module_get(r->bn, "num_batches_tracked"), 0); }

static int model_diffs(model *a, model *b) {
    int diffs = 0;
    for (int i = 0; i < oar_module_num_parameters(a->m); i++)
        diffs += !t_same_bits(oar_module_parameter(a->m, i, NULL), oar_module_parameter(b->m, i, NULL));
    for (int i = 0; i < oar_module_num_buffers(a->m); i++) /* running_mean, running_var, num_batches_tracked */
        diffs += !t_same_bits(oar_module_buffer(a->m, i, NULL), oar_module_buffer(b->m, i, NULL));
    return diffs;
}

static int count_op(const oar_jit *f, oar_op_id op) {
    const oar_program *p = f->entries[0].program;
    int n = 0;
    for (int i = 0; i < p->blocks[OAR_MAIN_BLOCK].n_nodes; i++) {
        const oar_node *nd = &p->nodes[p->blocks[OAR_MAIN_BLOCK].nodes[i]];
        n += !nd->dead && nd->op == op;
    }
    return n;
}

static oar_jit *compile(model *r) {
    oar_jit_opts jo = {.module = r->m, .optimizer = r->opt};
    return oar_jit_to_static(step_fn, r, &jo);
}

/* K compiled steps against K eager steps from the same start, bit for bit after every step
 * (momentum < 0: the cumulative average, whose factor changes every step and every call) */
static void check_training(double momentum, int bn_calls, int steps) {
    oar_scope_begin();
    model e, s;
    model_init(&e, momentum, bn_calls);
    model_init(&s, momentum, bn_calls);
    oar_module_train(e.m, true);
    oar_module_train(s.m, true);
    oar_jit *f = compile(&s);
    CHECK(f != NULL);
    int diffs = 0;
    oar_manual_seed(11);
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_tensor *io[2] = {oar_randn((int64_t[]){8, 4}, 2, OAR_F32), oar_randint(0, 3, (int64_t[]){8}, 1, OAR_I64)};
        oar_tensor *ls[1] = {0}, *le[1] = {0};
        CHECK(oar_jit_call(f, io, 2, ls, 1) == OAR_OK);
        CHECK(step_fn(&e, io, 2, le, 1) == OAR_OK);
        diffs += !t_same_bits(ls[0], le[0]) + model_diffs(&s, &e);
        CHECK(counter(&s) == (int64_t)bn_calls * (k + 1) && counter(&e) == counter(&s));
        oar_release(ls[0]);
        oar_scope_end();
    }
    CHECK(diffs == 0);
    CHECK(count_op(f, OAR_OP_increment) == bn_calls);
    CHECK(oar_program_verify(f->entries[0].program) == OAR_OK);
    printf("  %d compiled steps, momentum %s, BatchNorm called %d time(s) per step: num_batches_tracked %lld "
           "(eager %lld), %d increment node(s), %d differences\n", steps, momentum < 0 ? "None" : "0.1", bn_calls,
           (long long)counter(&s), (long long)counter(&e), count_op(f, OAR_OP_increment), diffs);
    oar_jit_free(f);
    model_free(&e);
    model_free(&s);
    oar_scope_end();
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_forward(((model *)user)->m, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* evaluation reads the running statistics and counts nothing, eagerly or compiled */
static void check_eval(void) {
    oar_scope_begin();
    model r;
    model_init(&r, 0.1, 1);
    oar_module_train(r.m, false);
    oar_tensor *x = oar_randn((int64_t[]){5, 4}, 2, OAR_F32), *ys[1] = {0};
    oar_jit_opts jo = {.module = r.m};
    oar_jit *f = oar_jit_to_static(forward_fn, &r, &jo);
    for (int k = 0; k < 3; k++) {
        CHECK(oar_jit_call(f, &x, 1, ys, 1) == OAR_OK);
        oar_release(ys[0]);
    }
    CHECK(oar_forward(r.m, x) != NULL);
    CHECK(counter(&r) == 0 && count_op(f, OAR_OP_increment) == 0);
    oar_jit_free(f);
    model_free(&r);
    oar_scope_end();
}

/* the op itself and the eager layer: a wrong input fails before anything is written */
static void check_eager(void) {
    oar_scope_begin();
    oar_tensor *c = oar_full((int64_t[]){3}, 1, 41, OAR_I32);
    CHECK(oar_increment_(c) == OAR_OK && oar_increment_(c) == OAR_OK);
    CHECK(t_at(c, 0) == 43 && t_at(c, 2) == 43);
    model r;
    model_init(&r, 0.1, 1);
    oar_module_train(r.m, true);
    oar_tensor *rm = oar_clone(oar_module_get(r.bn, "running_mean"));
    CHECK_ERR(oar_forward(r.bn, oar_randn((int64_t[]){5, FEATURES + 1}, 2, OAR_F32)), "BatchNorm1d: expected");
    CHECK(counter(&r) == 0 && t_same_bits(rm, oar_module_get(r.bn, "running_mean")));
    CHECK(oar_forward(r.bn, oar_randn((int64_t[]){5, FEATURES}, 2, OAR_F32)) != NULL && counter(&r) == 1);
    model_free(&r);
    oar_scope_end();
}

/* momentum=None eagerly: the running mean is the plain average of the batch means */
static void check_cumulative(void) {
    oar_scope_begin();
    model r;
    model_init(&r, -1, 1);
    oar_module_train(r.m, true);
    oar_tensor *x[3], *sum = NULL;
    for (int k = 0; k < 3; k++) {
        x[k] = oar_randn((int64_t[]){7, FEATURES}, 2, OAR_F32);
        CHECK(oar_forward(r.bn, x[k]) != NULL);
        oar_tensor *bm = oar_mean(x[k], (int[]){0}, 1, false);
        sum = sum ? oar_add(sum, bm) : bm;
    }
    oar_tensor *rm = oar_module_get(r.bn, "running_mean");
    double worst = 0;
    for (int c = 0; c < FEATURES; c++) {
        double d = fabs(t_at(rm, c) - t_at(sum, c) / 3);
        worst = d > worst ? d : worst;
    }
    CHECK(counter(&r) == 3 && worst < 1e-6); /* f32 running mean: a few roundings */
    printf("  momentum=None: eager running mean within %.2g of the batch means' average\n", worst);
    model_free(&r);
    oar_scope_end();
}

int main(void) {
    check_eager();
    check_training(0.1, 1, 4);
    check_training(0.1, 2, 3);
    check_eval();
    check_cumulative();
    check_training(-1, 1, 5);
    check_training(-1, 2, 3);
    return test_summary("test_bn_count");
}
