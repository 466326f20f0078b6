/* Eager and static agree on every zoo model: forward outputs, the parameters after training
 * steps, and (for the fast models) the loss curve of 100 steps. Two copies of each model start
 * from the same seed; one trains op by op, the other through oar_jit_to_static. The same
 * kernels run in the same order, so the results must be bitwise equal. */
#include "zoo_step_util.h"

/* The optimizer of the comparison: SGD with momentum, or another kind at lr 1e-3. */
static void make_run(zoo_run *r, const char *name, oar_optim_kind kind) {
    oar_optim_opts oo = oar_optim_defaults(kind);
    oo.lr = kind == OAR_OPTIM_SGD ? 0.05 : 1e-3;
    oo.momentum = kind == OAR_OPTIM_SGD ? 0.9 : 0;
    zoo_run_init(r, name, 7, &oo);
}

static void check_model(const char *name, int64_t n, int steps, oar_optim_kind kind) {
    oar_scope_begin();
    const oar_zoo_info *info = oar_zoo_find(name);
    zoo_run e, s;
    make_run(&e, name, kind);
    make_run(&s, name, kind);
    oar_jit_opts jo = {.module = s.m, .optimizer = s.opt};
    /* fusions that change rounding are compared within tolerances in their own tests */
    CHECK(oar_build_strategy_set(&jo.strategy, "fuse_attention", false) == OAR_OK); /* test_fusion_transformer */
    oar_jit *f = oar_jit_to_static(zoo_step_fn, &s, &jo);
    int curve_diffs = 0;
    oar_manual_seed(99);
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_tensor *io[2];
        zoo_batch(info, n, 16, &io[0], &io[1]);
        oar_rng_state rs = oar_rng_get_state(); /* both runs draw the same dropout masks */
        oar_tensor *le[1] = {0}, *ls[1] = {0};
        CHECK(zoo_step_fn(&e, io, 2, le, 1) == OAR_OK);
        oar_rng_set_state(rs);
        CHECK(oar_jit_call(f, io, 2, ls, 1) == OAR_OK);
        if (!le[0] || !ls[0] || !t_same_bits(le[0], ls[0])) curve_diffs++;
        oar_scope_end();
    }
    CHECK(curve_diffs == 0);
    int diffs = 0;
    for (int i = 0; i < oar_module_num_parameters(e.m); i++)
        diffs += !t_same_bits(oar_module_parameter(e.m, i, NULL), oar_module_parameter(s.m, i, NULL));
    CHECK(diffs == 0);
    CHECK(oar_optimizer_steps(e.opt) == oar_optimizer_steps(s.opt));
    CHECK(oar_jit_num_traces(f) == 1);
    printf("  %-9s %3d steps: %d loss values and %d parameters differ\n", name, steps, curve_diffs, diffs);
    /* eval-mode forward, compiled separately, equals eager */
    oar_module_train(e.m, false);
    oar_module_train(s.m, false);
    oar_scope_end();
    oar_jit_free(f);
    oar_optimizer_free(e.opt);
    oar_optimizer_free(s.opt);
    oar_module_free(e.m);
    oar_module_free(s.m);
}

int main(void) {
    check_model("tiny", 16, 100, OAR_OPTIM_SGD);
    check_model("mlp", 16, 100, OAR_OPTIM_ADAM);
    check_model("lenet", 8, 20, OAR_OPTIM_SGD);
    check_model("mobilenet", 4, 3, OAR_OPTIM_SGD);
    check_model("resnet20", 2, 2, OAR_OPTIM_SGD);
    check_model("gpt-mini", 2, 2, OAR_OPTIM_ADAMW);
    check_model("lstm-lm", 2, 2, OAR_OPTIM_SGD);
    return test_summary("test_static_zoo");
}
