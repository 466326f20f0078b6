/* The fuse_add_layer_norm pass and its ops: add_layer_norm and layer_norm_backward_add against
 * the unfused ops (bitwise, one and two threads), and the pass on traced programs: a pre-LN
 * inference function (with a broadcast add and a final norm that must stay unfused), and
 * gpt-mini training steps (losses, gradients and parameters after AdamW updates), fused
 * against unfused with the pass switched off by name, bitwise; and hand-built programs for the
 * conditions (where the backward fusion goes, and the cases it must refuse). */
#include "fusion_test_util.h"
#include "zoo_step_util.h"

#include "graph_test_util.h"

static oar_jit *compile(oar_static_fn fn, void *user, bool fuse, oar_module *m, oar_optimizer *o) {
    return fusion_compile(fn, user, fuse ? NULL : "fuse_add_layer_norm", m, o);
}

/* ---- the fused ops against the unfused ones, eager, bitwise */
static void check_ops(const int64_t *shape, int nd, int k, bool affine) {
    oar_scope_begin();
    int64_t *ns = (int64_t *)shape + nd - k;
    oar_tensor *a = oar_randn(shape, nd, OAR_F32), *b = oar_randn(shape, nd, OAR_F32);
    oar_tensor *w = affine ? oar_randn(ns, k, OAR_F32) : NULL, *bias = affine ? oar_randn(ns, k, OAR_F32) : NULL;
    oar_tensor *g = oar_randn(shape, nd, OAR_F32), *r = oar_randn(shape, nd, OAR_F32);
    oar_attr at[2] = {oar_attr_int(k), oar_attr_float(1e-5)};
    int was = oar_get_num_threads();
    for (int threads = 1; threads <= 2; threads++) {
        CHECK(oar_set_num_threads(threads) == OAR_OK);
        /* unfused: add, layer_norm (all three outputs), layer_norm_backward, add */
        oar_tensor *s = oar_add(a, b), *ln_in[3] = {s, w, bias}, *ln[3], *fu[4];
        int n = 3, nf = 4;
        CHECK(oar_op_call(OAR_OP_layer_norm, ln_in, 3, at, ln, &n) == OAR_OK);
        oar_tensor *in4[4] = {a, b, w, bias};
        CHECK(oar_op_call(OAR_OP_add_layer_norm, in4, 4, at, fu, &nf) == OAR_OK && nf == 4);
        bool same = t_same_bits(s, fu[0]);
        for (int o = 0; o < 3; o++) same &= t_same_bits(ln[o], fu[o + 1]);
        CHECK(same);
        oar_tensor *bw_in[6] = {g, s, w, ln[1], ln[2], r}, *bw[3], *bwa[3];
        n = 3;
        nf = 3;
        CHECK(oar_op_call(OAR_OP_layer_norm_backward, bw_in, 5, at, bw, &n) == OAR_OK);
        CHECK(oar_op_call(OAR_OP_layer_norm_backward_add, bw_in, 6, at, bwa, &nf) == OAR_OK);
        oar_tensor *dx = oar_add(r, bw[0]);
        CHECK(t_same_bits(dx, bwa[0]) && t_same_bits(bw[1], bwa[1]) && t_same_bits(bw[2], bwa[2]));
        for (int o = 0; o < 3; o++) {
            oar_release(ln[o]);
            oar_release(bw[o]);
            oar_release(bwa[o]);
        }
        for (int o = 0; o < 4; o++) oar_release(fu[o]);
    }
    CHECK(oar_set_num_threads(was) == OAR_OK);
    oar_scope_end();
}

static void test_ops(void) {
    check_ops((int64_t[]){64, 300}, 2, 1, true);   /* a row tail of 4 */
    check_ops((int64_t[]){3, 333, 256}, 3, 1, true); /* rows split over threads */
    check_ops((int64_t[]){5, 7, 3}, 3, 2, false);
}

/* ---- inference: a small pre-LN stack */
static oar_status pre_ln(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    oar_tensor *h = oar_add(in[0], in[1]); /* [B, T, D] + [T, D]: broadcast, stays unfused */
    for (int l = 0; l < 3; l++) h = oar_add(h, oar_linear(oar_layer_norm(h, 1, in[2], in[3], 1e-5), in[4], NULL));
    out[0] = oar_layer_norm(h, 1, in[2], NULL, 1e-5); /* the final norm: its add is the last one */
    out[1] = oar_layer_norm(oar_add(in[0], in[0]), 1, NULL, NULL, 1e-5); /* an add of one value twice */
    return OAR_OK;
}

static void test_inference(void) {
    oar_scope_begin();
    oar_tensor *in[5] = {oar_randn((int64_t[]){2, 5, 20}, 3, OAR_F32), oar_randn((int64_t[]){5, 20}, 2, OAR_F32),
                         oar_randn((int64_t[]){20}, 1, OAR_F32), oar_randn((int64_t[]){20}, 1, OAR_F32),
                         oar_randn((int64_t[]){20, 20}, 2, OAR_F32)};
    oar_tensor *eager[2], *on[2], *off[2];
    CHECK(pre_ln(NULL, in, 5, eager, 2) == OAR_OK);
    oar_jit *f_on = compile(pre_ln, NULL, true, NULL, NULL), *f_off = compile(pre_ln, NULL, false, NULL, NULL);
    CHECK(oar_jit_call(f_on, in, 5, on, 2) == OAR_OK && oar_jit_call(f_off, in, 5, off, 2) == OAR_OK);
    for (int k = 0; k < 2; k++) CHECK(t_same_bits(eager[k], on[k]) && t_same_bits(off[k], on[k]));
    /* the residual adds of layers 0..2 feed layers 1, 2 and the final norm; add(x, x) fuses too */
    CHECK(fusion_count_op(f_on, OAR_OP_add_layer_norm) == 4 && fusion_count_op(f_on, OAR_OP_layer_norm) == 1);
    CHECK(fusion_count_op(f_on, OAR_OP_add) == 1);
    CHECK(fusion_count_op(f_off, OAR_OP_add_layer_norm) == 0 && fusion_count_op(f_off, OAR_OP_layer_norm) == 5);
    CHECK(oar_program_verify(f_on->entries[0].program) == OAR_OK);
    for (int k = 0; k < 2; k++) {
        oar_release(on[k]);
        oar_release(off[k]);
    }
    oar_jit_free(f_on);
    oar_jit_free(f_off);
    oar_scope_end();
}

/* gpt-mini's forward alone (an inference program): 8 fusions, logits bitwise equal */
static oar_status gpt_forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static void test_gpt_inference(void) {
    oar_scope_begin();
    oar_manual_seed(4);
    oar_module *m = oar_zoo_create("gpt-mini", NULL);
    oar_tensor *x = oar_randint(0, 256, (int64_t[]){2, 24}, 2, OAR_I64), *eager = oar_forward(m, x), *on[1], *off[1];
    oar_jit *f_on = compile(gpt_forward_fn, m, true, m, NULL), *f_off = compile(gpt_forward_fn, m, false, m, NULL);
    CHECK(oar_jit_call(f_on, &x, 1, on, 1) == OAR_OK && oar_jit_call(f_off, &x, 1, off, 1) == OAR_OK);
    CHECK(t_same_bits(eager, on[0]) && t_same_bits(off[0], on[0]));
    CHECK(fusion_count_op(f_on, OAR_OP_add_layer_norm) == 8 && fusion_count_op(f_on, OAR_OP_layer_norm) == 1);
    /* with the pass off, the 4 blocks' ln2 still run LayerNorm's two-input form (the front end's fusion) */
    CHECK(fusion_count_op(f_on, OAR_OP_layer_norm_backward_add) == 0 && fusion_count_op(f_off, OAR_OP_add_layer_norm) == 4);
    oar_release(on[0]);
    oar_release(off[0]);
    oar_jit_free(f_on);
    oar_jit_free(f_off);
    oar_module_free(m);
    oar_scope_end();
}

/* ---- hand-built programs: the pass alone, then results against the unpassed copy */
enum { BW_LATE_RESIDUAL, BW_DW_READ_EARLY, BW_DX_READ_TWICE, FW_WEIGHT_MADE_LATE, FW_WEIGHT_WRITTEN };

/* x + g -> layer_norm -> layer_norm_backward(q, ...) whose dx is added to r = y * q, a residual
 * gradient made after the backward node; variants break one condition each. */
static void check_program(int variant, int want_fwd, int want_bwd) {
    oar_scope_begin();
    oar_program *p = oar_program_new();
    int64_t sh[2] = {4, 12}, ns[1] = {12};
    int x = gt_input(p, sh, 2), g = gt_input(p, sh, 2), q = gt_input(p, sh, 2);
    int w = gt_tensor(p, OAR_VAL_PARAM, ns, 1, "w"), b = gt_tensor(p, OAR_VAL_PARAM, ns, 1, "b");
    int s = GT_OP(p, add, "", x, g);
    if (variant == FW_WEIGHT_MADE_LATE) w = GT_OP(p, mul, "", w, w);
    int bn = -1; /* batch_norm writing w as its running mean (momentum 0 keeps the values, not the write) */
    if (variant == FW_WEIGHT_WRITTEN) {
        int v = gt_tensor(p, OAR_VAL_PARAM, ns, 1, "v");
        bn = GT_OP(p, batch_norm, "training=1 momentum=0 eps=1e-05", q, -1, -1, w, v, -1);
    }
    int ln[3], bw[3];
    gt_node(p, GT_MAIN, OAR_OP_layer_norm, "normalized_ndim=1 eps=1e-05", (int[]){s, w, b}, 3, ln, NULL);
    gt_node(p, GT_MAIN, OAR_OP_layer_norm_backward, "normalized_ndim=1", (int[]){q, s, w, ln[1], ln[2]}, 5, bw, NULL);
    int extra = variant == BW_DW_READ_EARLY ? GT_OP(p, mul, "", bw[1], bw[1])
              : variant == BW_DX_READ_TWICE ? GT_OP(p, mul, "", bw[0], q) : bn;
    int r = GT_OP(p, mul, "", ln[0], q);
    int t = GT_OP(p, add, "", bw[0], r);
    int outs[] = {t, bw[1], bw[2], ln[0], s, extra};
    for (int k = 0; k < 6 && outs[k] >= 0; k++) CHECK(oar_program_add_output(p, GT_MAIN, outs[k]) == OAR_OK);
    CHECK(oar_program_verify(p) == OAR_OK);
    oar_program *before = gt_clone(p);
    CHECK(oar_passes_run(p, 1ull << oar_pass_find("fuse_add_layer_norm"), true) == OAR_OK);
    CHECK(gt_count_op(p, OAR_OP_add_layer_norm) == want_fwd && gt_count_op(p, OAR_OP_layer_norm_backward_add) == want_bwd);
    oar_tensor *in[3] = {oar_randn(sh, 2, OAR_F32), oar_randn(sh, 2, OAR_F32), oar_randn(sh, 2, OAR_F32)};
    CHECK(gt_same_results(before, NULL, p, NULL, in, 3));
    for (int k = 0; k < 3; k++) oar_release(in[k]);
    oar_program_free(before);
    oar_program_free(p);
    oar_scope_end();
}

static void test_programs(void) {
    check_program(BW_LATE_RESIDUAL, 1, 1);    /* fused at the add's position */
    check_program(BW_DW_READ_EARLY, 1, 0);    /* dw read before the add: neither place works */
    check_program(BW_DX_READ_TWICE, 1, 0);    /* dx has another reader */
    check_program(FW_WEIGHT_MADE_LATE, 0, 1); /* the weight is made after the add */
    check_program(FW_WEIGHT_WRITTEN, 0, 1);   /* the weight is written in place after the add */
}

/* ---- training: gpt-mini steps with AdamW */
static void test_gpt_training(int steps) {
    oar_scope_begin();
    const char *name = "gpt-mini";
    const oar_zoo_info *info = oar_zoo_find(name);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
    zoo_run a, b;
    zoo_run_init(&a, name, 5, &oo);
    zoo_run_init(&b, name, 5, &oo);
    oar_jit *fa = compile(zoo_step_fn, &a, true, a.m, a.opt), *fb = compile(zoo_step_fn, &b, false, b.m, b.opt);
    int diffs = 0;
    oar_manual_seed(9);
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_tensor *io[2];
        zoo_batch(info, 2, 16, &io[0], &io[1]);
        oar_tensor *la[1] = {0}, *lb[1] = {0};
        CHECK(oar_jit_call(fa, io, 2, la, 1) == OAR_OK && oar_jit_call(fb, io, 2, lb, 1) == OAR_OK);
        diffs += !t_same_bits(la[0], lb[0]);
        diffs += zoo_param_grad_diffs(a.m, b.m);
        oar_release(la[0]);
        oar_release(lb[0]);
        oar_scope_end();
    }
    /* 4 blocks: each block's two residual adds feed ln2, the next ln1 or ln_f; block 0's ln1
     * reads the broadcast embedding add. Backward: every layer_norm but ln_f (whose input has
     * no other reader) has its dx added to a residual gradient. */
    int fwd = fusion_count_op(fa, OAR_OP_add_layer_norm), bwd = fusion_count_op(fa, OAR_OP_layer_norm_backward_add);
    CHECK(diffs == 0 && fwd == 8 && bwd == 8);
    CHECK(fusion_count_op(fb, OAR_OP_add_layer_norm) == 4 && fusion_count_op(fb, OAR_OP_layer_norm_backward_add) == 4);
    CHECK(oar_program_verify(fa->entries[0].program) == OAR_OK);
    printf("  gpt-mini %d AdamW steps: %d add_layer_norm, %d layer_norm_backward_add, %d differences\n", steps, fwd,
           bwd, diffs);
    oar_jit_free(fa);
    oar_jit_free(fb);
    zoo_run_free(&a);
    zoo_run_free(&b);
    oar_scope_end();
}

int main(void) {
    fusion_check_switch("fuse_add_layer_norm", "fuse_elementwise");
    test_ops();
    test_inference();
    test_gpt_inference();
    test_programs();
    test_gpt_training(3);
    return test_summary("test_fusion_add_layer_norm");
}
