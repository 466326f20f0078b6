/* Graph passes: for each pass, a program where it must act and one where it must not, with
 * results checked equal before and after by interpreting both programs (and the optimized one
 * once more through its memory plan). Also the pass table, build strategies and the driver. */
#include "graph_test_util.h"

static const int64_t S45[2] = {4, 5};

/* Runs fn on p, then checks: the program verifies, and its results (plain, and planned) equal
 * those of the program before. */
static bool keeps_results(oar_program *p, oar_pass_fn fn, oar_tensor *const *in, int n_in) {
    oar_program *before = gt_clone(p);
    bool ok = fn(p) == OAR_OK && oar_program_verify(p) == OAR_OK;
    oar_program_compact(p);
    ok = ok && gt_same_results(before, NULL, p, NULL, in, n_in);
    oar_memory_plan plan;
    if (ok && oar_plan_memory(p, &plan) == OAR_OK) {
        ok = oar_plan_check(p, &plan) == OAR_OK && gt_same_results(before, NULL, p, &plan, in, n_in);
        oar_plan_free(&plan);
    } else {
        ok = false;
    }
    oar_program_free(before);
    return ok;
}

static int node_of(const oar_program *p, int value) { return p->values[value].node; }

static int count_kind(const oar_program *p, oar_value_kind k) {
    int n = 0;
    for (int v = 0; v < p->n_values; v++) n += p->values[v].kind == k;
    return n;
}

static uint64_t pass_bit(const char *name) { return 1ull << oar_pass_find(name); }

/* By name, so that fusion passes added to the table keep this test valid. */
static void test_table(void) {
    /* the generic passes first, inplace last; fusion passes sit between (their own tests) */
    int n = oar_pass_count(), cse = oar_pass_find("cse"), inplace = oar_pass_find("inplace");
    uint64_t all = (1ull << n) - 1, defaults = 0;
    CHECK(n >= 4 && n <= 64);
    CHECK(strcmp(oar_pass_name(0), "dead_code") == 0 && cse == 1 && oar_pass_find("constant_folding") == 2);
    CHECK(inplace == n - 1);
    CHECK(oar_pass_name(n) == NULL && oar_pass_name(-1) == NULL && oar_pass_summary(n) == NULL);
    for (int i = 0; i < n; i++) {
        CHECK(oar_pass_summary(i) && strlen(oar_pass_summary(i)) > 10);
        CHECK(oar_pass_find(oar_pass_name(i)) == i);
        if (oar_pass_at(i)->default_on) defaults |= 1ull << i;
        if (i < 3 || i == inplace) CHECK(oar_pass_at(i)->default_on && !oar_pass_at(i)->inference_only);
    }
    CHECK(oar_pass_find("fusion") == -1 && oar_pass_find(NULL) == -1 && oar_pass_at(n) == NULL);

    oar_build_strategy s = {0};
    CHECK(oar_build_strategy_mask(&s) == defaults);
    CHECK(oar_build_strategy_mask(NULL) == defaults);
    CHECK(oar_build_strategy_set(&s, "cse", false) == OAR_OK);
    CHECK(oar_build_strategy_mask(&s) == (defaults & ~(1ull << cse)));
    CHECK(oar_build_strategy_set(&s, "cse", true) == OAR_OK);
    CHECK(oar_build_strategy_mask(&s) == defaults);
    CHECK(oar_build_strategy_set(&s, "inplace", false) == OAR_OK &&
          oar_build_strategy_mask(&s) == (defaults & ~(1ull << inplace)));
    oar_build_strategy both = {.enable = 1ull << inplace, .disable = 1ull << inplace}; /* disable wins */
    CHECK(oar_build_strategy_mask(&both) == (defaults & ~(1ull << inplace)));
    oar_build_strategy every = {.enable = ~0ull};
    CHECK(oar_build_strategy_mask(&every) == all);
    oar_clear_error();
    CHECK(oar_build_strategy_set(&s, "fusion", true) == OAR_ERR_INVALID_ARG);
    CHECK(strstr(oar_last_error(), "dead_code, cse, constant_folding, ") != NULL);
    CHECK(strstr(oar_last_error(), "'fusion'") != NULL);
    CHECK_ERR(oar_build_strategy_set(NULL, "cse", true), "NULL");
}

/* ---- dead code */
static void test_dead_code_acts(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S45, 2);
    int a = GT_OP(p, exp, "", x);
    int b = GT_OP(p, relu, "", a);
    int c = GT_OP(p, sin, "", b); /* b and c: dead, transitively */
    (void)c;
    int d = GT_OP(p, neg, "", a);
    int outs[4], n_outs = 0;
    gt_node(p, GT_MAIN, OAR_OP_split, "dim=0 split_size=2", (int[]){d}, 1, outs, &n_outs);
    CHECK(n_outs == 2);
    int e = GT_OP(p, tanh, "", outs[1]); /* split kept: one of its outputs is used */
    oar_program_add_output(p, GT_MAIN, e);
    oar_tensor *xt = oar_randn(S45, 2, OAR_F32);
    CHECK(gt_live_nodes(p, GT_MAIN) == 6);
    CHECK(keeps_results(p, oar_pass_dead_code, &xt, 1));
    CHECK(gt_live_nodes(p, GT_MAIN) == 4);
    CHECK(p->nodes[node_of(p, b)].dead && p->nodes[node_of(p, c)].dead);
    CHECK(gt_count_op(p, OAR_OP_split) == 1 && gt_count_op(p, OAR_OP_neg) == 1);
    CHECK(oar_pass_dead_code(p) == OAR_OK && gt_live_nodes(p, GT_MAIN) == 4); /* a fixpoint */
    oar_release(xt);
    oar_program_free(p);
}

static void test_dead_code_keeps(void) {
    oar_program *p = oar_program_new();
    int64_t xs[2] = {4, 3}, cs[1] = {3};
    int x = gt_input(p, xs, 2);
    int w = gt_tensor(p, OAR_VAL_PARAM, cs, 1, "bn.weight");
    int b = gt_tensor(p, OAR_VAL_PARAM, cs, 1, "bn.bias");
    oar_tensor *rm_t = oar_zeros(cs, 1, OAR_F32), *rv_t = oar_ones(cs, 1, OAR_F32);
    int rm = oar_program_add_tensor(p, OAR_VAL_PARAM, rm_t, "bn.running_mean");
    int rv = oar_program_add_tensor(p, OAR_VAL_PARAM, rv_t, "bn.running_var");
    GT_OP(p, batch_norm, "training=1 momentum=0.1 eps=1e-5", x, w, b, rm, rv, -1); /* unused, mutates */
    GT_OP(p, dropout, "p=0.5 training=1", x);                                  /* unused, random */
    int g = GT_OP(p, square, "", x);                                           /* a gradient */
    oar_tensor *param = oar_zeros(xs, 2, OAR_F32);
    oar_program_add_grad_write(p, g, param);
    int y = GT_OP(p, neg, "", x);
    oar_program_add_output(p, GT_MAIN, y);
    oar_tensor *xt = oar_randn(xs, 2, OAR_F32);
    CHECK(keeps_results(p, oar_pass_dead_code, &xt, 1));
    CHECK(gt_live_nodes(p, GT_MAIN) == 4);
    CHECK(gt_count_op(p, OAR_OP_batch_norm) == 1 && gt_count_op(p, OAR_OP_dropout) == 1);
    CHECK(gt_count_op(p, OAR_OP_square) == 1);
    CHECK(t_at(rm_t, 0) != 0.0); /* the running mean was updated by the runs */
    oar_release(xt);
    oar_release(rm_t);
    oar_release(rv_t);
    oar_release(param);
    oar_program_free(p);

    /* control flow: the node is kept (its blocks may have effects); inside its block, what
     * the block yields stays and the rest goes */
    p = oar_program_new();
    x = gt_input(p, S45, 2);
    int h = GT_OP(p, exp, "", x);
    int sb = gt_attach_block(p, node_of(p, h));
    int s1 = GT_OPB(p, sb, neg, "", x);
    int s2 = GT_OPB(p, sb, sin, "", x);
    oar_program_add_output(p, sb, s1);
    CHECK(oar_program_verify(p) == OAR_OK);
    CHECK(oar_pass_dead_code(p) == OAR_OK && oar_program_verify(p) == OAR_OK);
    CHECK(!p->nodes[node_of(p, h)].dead && !p->nodes[node_of(p, s1)].dead && p->nodes[node_of(p, s2)].dead);
    oar_program_free(p);
}

/* ---- common subexpressions */
static void test_cse_acts(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S45, 2), y = gt_input(p, S45, 2);
    int a1 = GT_OP(p, exp, "", x), a2 = GT_OP(p, exp, "", x);
    int b1 = GT_OP(p, add, "", a1, y), b2 = GT_OP(p, add, "", a2, y); /* equal once a2 is a1 */
    int s1 = GT_OP(p, sum, "dims=1 keepdim=0", x), s2 = GT_OP(p, sum, "dims=1 keepdim=0", x);
    int s3 = GT_OP(p, sum, "dims=0 keepdim=0", x);
    int l1 = GT_OP(p, leaky_relu, "negative_slope=0.1", x), l2 = GT_OP(p, leaky_relu, "negative_slope=0.1", x);
    int l3 = GT_OP(p, leaky_relu, "negative_slope=0.2", x);
    int l4 = GT_OP(p, leaky_relu, "negative_slope=0.0", x), l5 = GT_OP(p, leaky_relu, "negative_slope=-0.0", x);
    int r1 = GT_OP(p, reshape, "shape=20", x), r2 = GT_OP(p, reshape, "shape=20", x);
    int r3 = GT_OP(p, reshape, "shape=5,4", x);
    int outs[] = {b1, b2, s1, s2, s3, l1, l2, l3, l4, l5, r1, r2, r3};
    for (int i = 0; i < 13; i++) oar_program_add_output(p, GT_MAIN, outs[i]);
    oar_tensor *in[2] = {oar_randn(S45, 2, OAR_F32), oar_randn(S45, 2, OAR_F32)};
    CHECK(keeps_results(p, oar_pass_cse, in, 2));
    CHECK(gt_count_op(p, OAR_OP_exp) == 1 && gt_count_op(p, OAR_OP_add) == 1);
    CHECK(gt_count_op(p, OAR_OP_sum) == 2);
    CHECK(gt_count_op(p, OAR_OP_leaky_relu) == 4); /* 0.1 once; 0.2, 0.0 and -0.0 differ */
    CHECK(gt_count_op(p, OAR_OP_reshape) == 2);
    const oar_block *mb = &p->blocks[GT_MAIN];
    CHECK(mb->out[0] == mb->out[1] && mb->out[0] == b1);
    CHECK(mb->out[2] == mb->out[3] && mb->out[2] != mb->out[4]);
    CHECK(mb->out[10] == mb->out[11]);
    CHECK(gt_live_nodes(p, GT_MAIN) == 10);
    oar_release(in[0]);
    oar_release(in[1]);
    oar_program_free(p);
}

static void test_cse_keeps(void) {
    oar_program *p = oar_program_new();
    int64_t xs[2] = {4, 3}, cs[1] = {3};
    int x = gt_input(p, xs, 2);
    int d1 = GT_OP(p, dropout, "p=0.5 training=1", x), d2 = GT_OP(p, dropout, "p=0.5 training=1", x);
    oar_tensor *rm_t = oar_zeros(cs, 1, OAR_F32), *rv_t = oar_ones(cs, 1, OAR_F32);
    int rm = oar_program_add_tensor(p, OAR_VAL_PARAM, rm_t, "bn.running_mean");
    int rv = oar_program_add_tensor(p, OAR_VAL_PARAM, rv_t, "bn.running_var");
    int c = gt_tensor(p, OAR_VAL_CONST, cs, 1, NULL);
    int p0 = gt_tensor(p, OAR_VAL_PARAM, cs, 1, "p0");
    int rv2 = gt_tensor(p, OAR_VAL_PARAM, cs, 1, "rv2");
    int v1 = GT_OP(p, reshape, "shape=1,3", rm);
    int m1 = GT_OP(p, mul, "", rm, c);
    int m1b = GT_OP(p, mul, "", rm, c); /* no update in between: merged */
    int y = GT_OP(p, batch_norm, "training=1 momentum=0.5 eps=1e-5", x, -1, -1, rm, rv, -1);
    int m2 = GT_OP(p, mul, "", rm, c); /* reads the updated running mean */
    int v2 = GT_OP(p, reshape, "shape=1,3", rm);
    int n1 = GT_OP(p, neg, "", v1), n2 = GT_OP(p, neg, "", v2); /* v1 and v2 alias a mutated param */
    int a1 = GT_OP(p, exp, "", p0), a2 = GT_OP(p, exp, "", p0);
    GT_OP(p, batch_norm, "training=1 momentum=0.5 eps=1e-5", x, -1, -1, a1, rv2, -1); /* a1 changes */
    int na2 = GT_OP(p, neg, "", a2);
    int outs[] = {d1, d2, m1, m2, y, n1, n2, m1b, na2};
    for (int i = 0; i < 9; i++) oar_program_add_output(p, GT_MAIN, outs[i]);
    oar_program *before = gt_clone(p);
    CHECK(oar_pass_cse(p) == OAR_OK && oar_program_verify(p) == OAR_OK);
    oar_program_compact(p);
    CHECK(gt_count_op(p, OAR_OP_dropout) == 2 && gt_count_op(p, OAR_OP_mul) == 2);
    CHECK(p->blocks[GT_MAIN].out[7] == m1);
    CHECK(gt_count_op(p, OAR_OP_reshape) == 2 && gt_count_op(p, OAR_OP_neg) == 3);
    CHECK(gt_count_op(p, OAR_OP_exp) == 2);
    /* results, restoring the running mean before each run */
    oar_tensor *xt = oar_randn(xs, 2, OAR_F32);
    oar_tensor *ra[9] = {0}, *rb[9] = {0};
    oar_fill_(rm_t, 0.0);
    CHECK(gt_eval(before, NULL, &xt, 1, ra) == OAR_OK);
    oar_fill_(rm_t, 0.0);
    CHECK(gt_eval(p, NULL, &xt, 1, rb) == OAR_OK);
    for (int i = 0; i < 9; i++) {
        CHECK(gt_close(ra[i], rb[i], 1e-6));
        oar_release(ra[i]);
        oar_release(rb[i]);
    }
    oar_release(xt);
    oar_release(rm_t);
    oar_release(rv_t);
    oar_program_free(before);
    oar_program_free(p);

    /* blocks: equal nodes in one block merge; across blocks they do not */
    p = oar_program_new();
    x = gt_input(p, S45, 2);
    int h = GT_OP(p, exp, "", x);
    int sb = gt_attach_block(p, node_of(p, h));
    int e1 = GT_OPB(p, sb, exp, "", x), e2 = GT_OPB(p, sb, exp, "", x);
    int s = GT_OPB(p, sb, add, "", e1, e2);
    oar_program_add_output(p, sb, s);
    oar_program_add_output(p, GT_MAIN, h);
    CHECK(oar_pass_cse(p) == OAR_OK && oar_program_verify(p) == OAR_OK);
    CHECK(!p->nodes[node_of(p, h)].dead && !p->nodes[node_of(p, e1)].dead && p->nodes[node_of(p, e2)].dead);
    CHECK(p->nodes[node_of(p, s)].in[0] == e1 && p->nodes[node_of(p, s)].in[1] == e1);
    oar_program_free(p);
}

/* ---- constant folding */
static void test_fold_acts(void) {
    oar_program *p = oar_program_new();
    int64_t xs[2] = {5, 4};
    int x = gt_input(p, xs, 2);
    int c1 = gt_tensor(p, OAR_VAL_CONST, S45, 2, NULL), c2 = gt_tensor(p, OAR_VAL_CONST, S45, 2, NULL);
    int a = GT_OP(p, add, "", c1, c2);
    int b = GT_OP(p, tanh, "", a);
    int r = GT_OP(p, permute, "dims=1,0", b); /* a view of a constant: folded into a copy */
    int y = GT_OP(p, mul, "", x, r);
    int s = GT_OP(p, sum, "dims=0 keepdim=0", c1); /* a constant result yielded directly */
    oar_program_add_output(p, GT_MAIN, y);
    oar_program_add_output(p, GT_MAIN, s);
    int consts = count_kind(p, OAR_VAL_CONST);
    oar_tensor *xt = oar_randn(xs, 2, OAR_F32);
    CHECK(keeps_results(p, oar_pass_constant_folding, &xt, 1));
    CHECK(gt_live_nodes(p, GT_MAIN) == 1 && gt_count_op(p, OAR_OP_mul) == 1);
    CHECK(count_kind(p, OAR_VAL_CONST) == consts + 2); /* no constants for a and b */
    int rc = p->nodes[p->blocks[GT_MAIN].nodes[0]].in[1];
    char want[32];
    snprintf(want, sizeof want, "const.%d", r);
    CHECK(p->values[rc].kind == OAR_VAL_CONST && strcmp(p->values[rc].name, want) == 0);
    CHECK(oar_is_contiguous(p->values[rc].tensor) && p->values[rc].tensor->offset == 0);
    CHECK(p->values[rc].meta.shape[0] == 5 && p->values[rc].meta.shape[1] == 4);
    int sc = p->blocks[GT_MAIN].out[1];
    CHECK(p->values[sc].kind == OAR_VAL_CONST && sc != s);
    oar_release(xt);
    oar_program_free(p);
}

static void test_fold_keeps(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S45, 2);
    int pm = gt_tensor(p, OAR_VAL_PARAM, S45, 2, "w");
    int c1 = gt_tensor(p, OAR_VAL_CONST, S45, 2, NULL);
    int64_t one[2] = {1, 1};
    int c0 = gt_tensor(p, OAR_VAL_CONST, one, 2, NULL);
    int a = GT_OP(p, add, "", pm, c1);              /* a parameter changes between runs */
    int d = GT_OP(p, dropout, "p=0.5 training=1", c1); /* random */
    int big = GT_OP(p, expand, "shape=2048,1024", c0); /* 2M elements: over the cap */
    int s = GT_OP(p, sum, "dims=0,1 keepdim=0", big);
    int e = GT_OP(p, add, "", x, c1);                /* an input */
    int outs[] = {a, d, s, e};
    for (int i = 0; i < 4; i++) oar_program_add_output(p, GT_MAIN, outs[i]);
    int consts = count_kind(p, OAR_VAL_CONST);
    oar_tensor *xt = oar_randn(S45, 2, OAR_F32);
    CHECK(keeps_results(p, oar_pass_constant_folding, &xt, 1));
    CHECK(gt_live_nodes(p, GT_MAIN) == 5 && count_kind(p, OAR_VAL_CONST) == consts);
    oar_release(xt);
    oar_program_free(p);
}

/* ---- in place */
static int n_inplace(const oar_program *p) {
    int n = 0;
    for (int i = 0; i < p->n_nodes; i++) n += !p->nodes[i].dead && p->nodes[i].inplace;
    return n;
}

static void test_inplace_acts(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S45, 2), y = gt_input(p, S45, 2);
    int a = GT_OP(p, exp, "", x);
    int b = GT_OP(p, relu, "", a);
    int c = GT_OP(p, add, "", b, y);
    int d = GT_OP(p, sigmoid, "", c);
    oar_program_add_output(p, GT_MAIN, d);
    oar_tensor *in[2] = {oar_randn(S45, 2, OAR_F32), oar_randn(S45, 2, OAR_F32)};
    CHECK(keeps_results(p, oar_pass_inplace, in, 2));
    CHECK(!p->nodes[node_of(p, a)].inplace && p->nodes[node_of(p, b)].inplace);
    CHECK(p->nodes[node_of(p, c)].inplace && p->nodes[node_of(p, d)].inplace);
    oar_memory_plan plan;
    CHECK(oar_plan_memory(p, &plan) == OAR_OK);
    CHECK(plan.root[d] == a && plan.cls[a] == OAR_BUF_FRESH && plan.arena_bytes == 0);
    oar_plan_free(&plan);
    CHECK(oar_pass_inplace(p) == OAR_OK && n_inplace(p) == 3); /* idempotent */
    oar_release(in[0]);
    oar_release(in[1]);
    oar_program_free(p);
}

static void test_inplace_keeps(void) {
    oar_program *p = oar_program_new();
    int64_t zs[2] = {1, 5};
    int x = gt_input(p, S45, 2), z = gt_input(p, zs, 2);
    int a = GT_OP(p, exp, "", x);
    int b = GT_OP(p, relu, "", a);
    int c = GT_OP(p, mul, "", a, b); /* a has two uses */
    int e = GT_OP(p, exp, "", x);
    int v = GT_OP(p, reshape, "shape=20", e);
    int f = GT_OP(p, neg, "", e); /* a view of e exists */
    int g = GT_OP(p, exp, "", x);
    int w = GT_OP(p, reshape, "shape=4,5", g);
    int h = GT_OP(p, neg, "", w); /* input made by a view */
    int k = GT_OP(p, exp, "", z);
    int m = GT_OP(p, add, "", k, x); /* broadcast: output larger than input 0 */
    int q = GT_OP(p, exp, "", x);
    int r = GT_OP(p, neg, "", q); /* q is also a program output */
    int gw = GT_OP(p, exp, "", x);
    int t = GT_OP(p, neg, "", gw); /* gw becomes a gradient */
    int u = GT_OP(p, neg, "", x);  /* an input of the program */
    oar_tensor *param = oar_zeros(S45, 2, OAR_F32);
    oar_program_add_grad_write(p, gw, param);
    int outs[] = {c, v, f, h, m, q, r, t, u};
    for (int i = 0; i < 9; i++) oar_program_add_output(p, GT_MAIN, outs[i]);
    oar_tensor *in[2] = {oar_randn(S45, 2, OAR_F32), oar_randn(zs, 2, OAR_F32)};
    CHECK(keeps_results(p, oar_pass_inplace, in, 2));
    CHECK(n_inplace(p) == 0);
    oar_release(in[0]);
    oar_release(in[1]);
    oar_release(param);
    oar_program_free(p);

    /* nodes inside a block are never marked (a loop body would clobber what the next
     * iteration reads) */
    p = oar_program_new();
    x = gt_input(p, S45, 2);
    int hh = GT_OP(p, exp, "", x);
    int sb = gt_attach_block(p, node_of(p, hh));
    int s1 = GT_OPB(p, sb, exp, "", x);
    int s2 = GT_OPB(p, sb, neg, "", s1);
    oar_program_add_output(p, sb, s2);
    CHECK(oar_pass_inplace(p) == OAR_OK && n_inplace(p) == 0);
    oar_program_free(p);
}

/* ---- the driver */
static void test_driver(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S45, 2);
    int c1 = gt_tensor(p, OAR_VAL_CONST, S45, 2, NULL);
    int k = GT_OP(p, exp, "", c1);  /* folds */
    int a1 = GT_OP(p, mul, "", x, k), a2 = GT_OP(p, mul, "", x, k);
    int b = GT_OP(p, add, "", a1, a2); /* add(a1, a1) after cse */
    int dead = GT_OP(p, sin, "", b);
    (void)dead;
    int d = GT_OP(p, tanh, "", b);
    int e = GT_OP(p, relu, "", d);
    oar_program_add_output(p, GT_MAIN, e);
    oar_program *before = gt_clone(p);
    CHECK(oar_passes_run(p, 0, false) == OAR_OK && gt_live_nodes(p, GT_MAIN) == 7);
    /* the four general passes (fusion passes have their own tests) */
    uint64_t general = pass_bit("dead_code") | pass_bit("cse") | pass_bit("constant_folding") | pass_bit("inplace");
    CHECK(oar_passes_run(p, general, true) == OAR_OK);
    CHECK(p->blocks[GT_MAIN].n_nodes == 4); /* mul, add, tanh, relu: compacted */
    CHECK(gt_count_op(p, OAR_OP_exp) == 0 && gt_count_op(p, OAR_OP_sin) == 0 && gt_count_op(p, OAR_OP_mul) == 1);
    CHECK(n_inplace(p) == 2); /* tanh over add's output, relu over tanh's */
    oar_tensor *xt = oar_randn(S45, 2, OAR_F32);
    oar_memory_plan plan;
    CHECK(oar_plan_memory(p, &plan) == OAR_OK);
    CHECK(oar_plan_check(p, &plan) == OAR_OK);
    CHECK(gt_same_results(before, NULL, p, &plan, &xt, 1));
    CHECK(gt_same_results(before, NULL, p, NULL, &xt, 1));
    oar_plan_free(&plan);
    oar_release(xt);
    oar_program_free(before);
    oar_program_free(p);

    /* a pass that leaves a bad program is named (here the program was bad to begin with) */
    p = oar_program_new();
    x = gt_input(p, S45, 2);
    oar_meta wrong = {.dtype = OAR_F32, .ndim = 2, .shape = {3, 3}};
    int bad;
    oar_program_add_node(p, GT_MAIN, OAR_OP_exp, &x, 1, NULL, &wrong, 1, &bad);
    oar_program_add_output(p, GT_MAIN, bad);
    CHECK_ERR(oar_passes_run(p, oar_build_strategy_mask(NULL), false), "pass dead_code: program: node 0 (exp)");
    oar_program_free(p);
    CHECK_ERR(oar_passes_run(NULL, 0, false), "expected a program");
}

int main(void) {
    oar_manual_seed(7);
    test_table();
    test_dead_code_acts();
    test_dead_code_keeps();
    test_cse_acts();
    test_cse_keeps();
    test_fold_acts();
    test_fold_keeps();
    test_inplace_acts();
    test_inplace_keeps();
    test_driver();
    return test_summary("test_graph_passes");
}
