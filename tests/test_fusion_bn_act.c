/* The fuse_bn_act pass on traced programs: batch_norm (+ add) + relu become batch_norm_act and
 * the traced relu_backward + batch_norm_backward become batch_norm_act_backward, with results
 * bitwise equal to the unfused program and to eager mode (forward in training and inference
 * mode; training steps of zoo models: losses, gradients, parameters, running statistics and
 * num_batches_tracked; the cumulative average, whose counter the fused node carries and reads
 * at run time), patterns with an extra reader left alone, and the pass switchable by name. */
#include "fusion_test_util.h"
#include "zoo_step_util.h"

#include "ops/batch_norm_factor.h"
#include "ops/increment.h"

#include <string.h>

static oar_jit *compile(oar_static_fn fn, void *user, bool fuse, oar_module *m, oar_optimizer *o) {
    return fusion_compile(fn, user, fuse ? NULL : "fuse_bn_act", m, o);
}

/* in: x, w, b, residual; user: running mean and var (captured, updated in place). relu(bn(x));
 * relu(residual + bn(x)) (the add's other order); relu(bn(x) + r) whose sum is also an output
 * (two readers: not fused). */
static int g_training;
static oar_status blocks(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    oar_tensor **rs = user;
    bool tr = g_training != 0;
    out[0] = oar_relu(oar_batch_norm(in[0], in[1], in[2], rs[0], rs[1], tr, 0.1, 1e-5));
    out[1] = oar_relu(oar_add(in[3], oar_batch_norm(in[0], NULL, in[2], rs[0], rs[1], tr, 0.1, 1e-5)));
    oar_tensor *z = oar_add(oar_batch_norm(in[3], in[1], NULL, NULL, NULL, true, 0.1, 1e-5), in[0]);
    out[2] = oar_relu(z);
    out[3] = z;
    return OAR_OK;
}

static void check_forward(int training) {
    oar_scope_begin();
    g_training = training;
    int64_t xs[4] = {4, 6, 5, 7}, cs[1] = {6};
    oar_tensor *in[4] = {oar_randn(xs, 4, OAR_F32), oar_randn(cs, 1, OAR_F32), oar_randn(cs, 1, OAR_F32),
                         oar_randn(xs, 4, OAR_F32)};
    oar_tensor *rm = oar_randn(cs, 1, OAR_F32), *rv = oar_rand(cs, 1, OAR_F32);
    /* three copies of the running statistics: eager, fused and unfused each update their own */
    oar_tensor *rs[3][2];
    for (int k = 0; k < 3; k++) {
        rs[k][0] = oar_clone(rm);
        rs[k][1] = oar_clone(rv);
    }
    oar_tensor *eager[4], *on[4], *off[4];
    CHECK(blocks(rs[0], in, 4, eager, 4) == OAR_OK);
    oar_jit *f_on = compile(blocks, rs[1], true, NULL, NULL), *f_off = compile(blocks, rs[2], false, NULL, NULL);
    CHECK(oar_jit_call(f_on, in, 4, on, 4) == OAR_OK);
    CHECK(oar_jit_call(f_off, in, 4, off, 4) == OAR_OK);
    int diffs = 0;
    for (int k = 0; k < 4; k++) diffs += !t_same_bits(eager[k], on[k]) + !t_same_bits(off[k], on[k]);
    for (int k = 0; k < 2; k++) diffs += !t_same_bits(rs[0][k], rs[1][k]) + !t_same_bits(rs[2][k], rs[1][k]);
    CHECK(diffs == 0);
    CHECK(fusion_count_op(f_on, OAR_OP_batch_norm_act) == 2 && fusion_count_op(f_on, OAR_OP_batch_norm) == 1);
    CHECK(fusion_count_op(f_off, OAR_OP_batch_norm_act) == 0 && fusion_count_op(f_off, OAR_OP_batch_norm) == 3);
    CHECK(oar_program_verify(f_on->entries[0].program) == OAR_OK);
    printf("  forward (%s): %d differences\n", training ? "training" : "inference", diffs);
    oar_jit_free(f_on);
    oar_jit_free(f_off);
    oar_scope_end();
}

/* ---- training steps of zoo models: fused, unfused and eager side by side */
static int compare_models(oar_module *a, oar_module *b) {
    int diffs = zoo_param_grad_diffs(a, b);
    for (int i = 0; i < oar_module_num_buffers(a); i++)
        diffs += !t_same_bits(oar_module_buffer(a, i, NULL), oar_module_buffer(b, i, NULL));
    return diffs;
}

static void check_training(const char *name, int64_t n, int steps, int want_fwd, int want_bwd) {
    oar_scope_begin();
    const oar_zoo_info *info = oar_zoo_find(name);
    zoo_run a, b, e;
    zoo_run_init_sgd(&a, name, 3);
    zoo_run_init_sgd(&b, name, 3);
    zoo_run_init_sgd(&e, name, 3);
    oar_module_train(a.m, true);
    oar_module_train(b.m, true);
    oar_module_train(e.m, true);
    oar_jit *fa = compile(zoo_step_fn, &a, true, a.m, a.opt), *fb = compile(zoo_step_fn, &b, false, b.m, b.opt);
    int diffs = 0;
    oar_manual_seed(8);
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_tensor *io[2], *la[1] = {0}, *lb[1] = {0}, *le[1] = {0};
        zoo_batch(info, n, 0, &io[0], &io[1]);
        CHECK(oar_jit_call(fa, io, 2, la, 1) == OAR_OK && oar_jit_call(fb, io, 2, lb, 1) == OAR_OK);
        CHECK(zoo_step_fn(&e, io, 2, le, 1) == OAR_OK);
        /* every buffer, num_batches_tracked included (the increment op counts compiled steps) */
        int d_ab = !t_same_bits(la[0], lb[0]) + compare_models(a.m, b.m);
        int d_ae = !t_same_bits(la[0], le[0]) + compare_models(a.m, e.m);
        if (d_ab || d_ae) printf("  step %d: %d differences fused/unfused, %d fused/eager\n", k, d_ab, d_ae);
        diffs += d_ab + d_ae;
        oar_release(la[0]);
        oar_release(lb[0]);
        oar_scope_end();
    }
    int fwd = fusion_count_op(fa, OAR_OP_batch_norm_act), bwd = fusion_count_op(fa, OAR_OP_batch_norm_act_backward);
    CHECK(diffs == 0 && fwd == want_fwd && bwd == want_bwd);
    CHECK(fusion_count_op(fb, OAR_OP_batch_norm_act) == 0 && fusion_count_op(fb, OAR_OP_batch_norm_act_backward) == 0);
    CHECK(oar_program_verify(fa->entries[0].program) == OAR_OK);
    printf("  %-9s %d steps: %d batch_norm_act, %d batch_norm_act_backward, %d differences\n", name, steps, fwd, bwd,
           diffs);
    oar_jit_free(fa);
    oar_jit_free(fb);
    zoo_run_free(&a);
    zoo_run_free(&b);
    zoo_run_free(&e);
    oar_scope_end();
}

/* user: running mean, var and num_batches_tracked (captured). relu(bn(x)) with the cumulative
 * average; the counter is advanced between calls outside the program, so each call's factor
 * must come from the counter at run time, in the fused node as in the unfused one. */
static oar_status counted(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    oar_tensor **rs = user;
    out[0] = oar_relu(oar_batch_norm_counted(in[0], in[1], in[2], rs[0], rs[1], rs[2], true, -1, 1e-5));
    return out[0] ? OAR_OK : oar_last_status();
}

static void check_counter(void) {
    oar_scope_begin();
    int64_t xs[3] = {5, 4, 3}, cs[1] = {4};
    oar_tensor *in[3] = {oar_randn(xs, 3, OAR_F32), oar_randn(cs, 1, OAR_F32), oar_randn(cs, 1, OAR_F32)};
    oar_tensor *rs[3][3];
    for (int k = 0; k < 3; k++) { /* eager, fused, unfused */
        rs[k][0] = oar_zeros(cs, 1, OAR_F32);
        rs[k][1] = oar_ones(cs, 1, OAR_F32);
        rs[k][2] = oar_full(NULL, 0, 2, OAR_I64);
    }
    oar_jit *f_on = compile(counted, rs[1], true, NULL, NULL), *f_off = compile(counted, rs[2], false, NULL, NULL);
    int diffs = 0;
    for (int step = 0; step < 3; step++) {
        oar_tensor *e[1], *on[1], *off[1];
        in[0] = oar_randn(xs, 3, OAR_F32);
        CHECK(counted(rs[0], in, 3, e, 1) == OAR_OK);
        CHECK(oar_jit_call(f_on, in, 3, on, 1) == OAR_OK);
        CHECK(oar_jit_call(f_off, in, 3, off, 1) == OAR_OK);
        diffs += !t_same_bits(e[0], on[0]) + !t_same_bits(off[0], on[0]);
        for (int k = 0; k < 2; k++) diffs += !t_same_bits(rs[0][k], rs[1][k]) + !t_same_bits(rs[2][k], rs[1][k]);
        for (int k = 0; k < 3; k++) CHECK(oar_increment_(rs[k][2]) == OAR_OK);
    }
    CHECK(diffs == 0);
    CHECK(fusion_count_op(f_on, OAR_OP_batch_norm_act) == 1 && fusion_count_op(f_on, OAR_OP_batch_norm) == 0);
    CHECK(fusion_count_op(f_off, OAR_OP_batch_norm_act) == 0 && fusion_count_op(f_off, OAR_OP_batch_norm) == 1);
    CHECK(oar_program_verify(f_on->entries[0].program) == OAR_OK);
    printf("  cumulative average (counter read at run time), 3 calls: %d differences\n", diffs);
    oar_jit_free(f_on);
    oar_jit_free(f_off);
    oar_scope_end();
}

int main(void) {
    fusion_check_switch("fuse_bn_act", "fuse_elementwise");
    check_forward(1);
    check_forward(0);
    check_counter();
    /* ResNet-20: the stem and each block's first relu(bn), and the 9 residual relu(bn + shortcut) */
    check_training("resnet20", 4, 2, 19, 19);
    return test_summary("test_fusion_bn_act");
}
