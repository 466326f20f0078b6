/* The fuse_linear_act pass on traced programs: linear + relu/gelu become linear_act, results
 * bitwise equal to the unfused program (inference and training steps: losses, gradients and
 * parameters), relu_backward switched to read the activation, and the pass off by name. */
#include "fusion_test_util.h"
#include "zoo_step_util.h"

static oar_jit *compile(oar_static_fn fn, void *user, bool fuse, oar_module *m, oar_optimizer *o) {
    return fusion_compile(fn, user, fuse ? NULL : "fuse_linear_act", m, o);
}

/* three layers: gelu (tanh), gelu (erf) without bias, relu; and a linear read twice */
static oar_status layers(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    oar_tensor *h = oar_gelu(oar_linear(in[0], in[1], in[2]), true);
    h = oar_gelu(oar_linear(h, in[3], NULL), false);
    oar_tensor *z = oar_linear(h, in[4], in[5]);
    out[0] = oar_relu(oar_linear(h, in[3], NULL));
    out[1] = oar_add(oar_relu(z), z); /* z has two readers: not fused */
    return OAR_OK;
}

static void test_inference(void) {
    oar_scope_begin();
    oar_tensor *in[6] = {oar_randn((int64_t[]){37, 24}, 2, OAR_F32), oar_randn((int64_t[]){40, 24}, 2, OAR_F32),
                         oar_randn((int64_t[]){40}, 1, OAR_F32),     oar_randn((int64_t[]){40, 40}, 2, OAR_F32),
                         oar_randn((int64_t[]){9, 40}, 2, OAR_F32),  oar_randn((int64_t[]){9}, 1, OAR_F32)};
    oar_tensor *eager[2], *on[2], *off[2];
    CHECK(layers(NULL, in, 6, eager, 2) == OAR_OK);
    oar_jit *f_on = compile(layers, NULL, true, NULL, NULL), *f_off = compile(layers, NULL, false, NULL, NULL);
    CHECK(oar_jit_call(f_on, in, 6, on, 2) == OAR_OK && oar_jit_call(f_off, in, 6, off, 2) == OAR_OK);
    for (int k = 0; k < 2; k++) CHECK(t_same_bits(eager[k], on[k]) && t_same_bits(off[k], on[k]));
    CHECK(fusion_count_op(f_on, OAR_OP_linear_act) == 3 && fusion_count_op(f_on, OAR_OP_linear) == 1);
    CHECK(fusion_count_op(f_off, OAR_OP_linear_act) == 0 && fusion_count_op(f_off, OAR_OP_linear) == 4);
    CHECK(oar_program_verify(f_on->entries[0].program) == OAR_OK);
    for (int k = 0; k < 2; k++) {
        oar_release(on[k]);
        oar_release(off[k]);
    }
    oar_jit_free(f_on);
    oar_jit_free(f_off);
    oar_scope_end();
}

/* ---- training steps of zoo models */
static void check_training(const char *name, int64_t n, int steps) {
    oar_scope_begin();
    const oar_zoo_info *info = oar_zoo_find(name);
    zoo_run a, b;
    zoo_run_init_sgd(&a, name, 3);
    zoo_run_init_sgd(&b, name, 3);
    oar_jit *fa = compile(zoo_step_fn, &a, true, a.m, a.opt), *fb = compile(zoo_step_fn, &b, false, b.m, b.opt);
    int diffs = 0;
    oar_manual_seed(8);
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_tensor *io[2];
        zoo_batch(info, n, 0, &io[0], &io[1]);
        oar_tensor *la[1] = {0}, *lb[1] = {0};
        CHECK(oar_jit_call(fa, io, 2, la, 1) == OAR_OK && oar_jit_call(fb, io, 2, lb, 1) == OAR_OK);
        diffs += !t_same_bits(la[0], lb[0]);
        diffs += zoo_param_grad_diffs(a.m, b.m);
        oar_release(la[0]);
        oar_release(lb[0]);
        oar_scope_end();
    }
    int fused = fusion_count_op(fa, OAR_OP_linear_act);
    CHECK(diffs == 0 && fused > 0 && fusion_count_op(fb, OAR_OP_linear_act) == 0);
    CHECK(oar_program_verify(fa->entries[0].program) == OAR_OK);
    printf("  %-5s %d steps: %d linear_act, %d differences\n", name, steps, fused, diffs);
    oar_jit_free(fa);
    oar_jit_free(fb);
    zoo_run_free(&a);
    zoo_run_free(&b);
    oar_scope_end();
}

int main(void) {
    fusion_check_switch("fuse_linear_act", "inplace");
    test_inference();
    check_training("mlp", 16, 3);
    check_training("tiny", 16, 3);
    return test_summary("test_fusion_linear_act");
}
