/* The memory planner: plans for chains, diamonds, views, in-place nodes, gradients and control
 * flow; oar_plan_check on every plan, and rejecting corrupted ones; and random programs run
 * through their plans (intermediates at their offsets in one poisoned arena) giving the same
 * results as the plain interpretation, before and after the passes. */
#include "graph_test_util.h"

static const int64_t S1000[1] = {1000};

static bool plan_ok(const oar_program *p, oar_memory_plan *plan) {
    if (oar_plan_memory(p, plan) != OAR_OK) return false;
    if (oar_plan_check(p, plan) == OAR_OK) return true;
    fprintf(stderr, "plan check: %s\n", oar_last_error());
    oar_plan_free(plan);
    return false;
}

/* Plans p, checks the plan, and compares the planned run with the plain one. */
static bool runs_as_planned(const oar_program *p, oar_tensor *const *in, int n_in) {
    oar_memory_plan plan;
    if (!plan_ok(p, &plan)) return false;
    bool ok = gt_same_results(p, NULL, p, &plan, in, n_in);
    oar_plan_free(&plan);
    return ok;
}

static const oar_op_id CHAIN_OPS[] = {OAR_OP_sin, OAR_OP_tanh, OAR_OP_neg, OAR_OP_sigmoid, OAR_OP_relu, OAR_OP_cos};

static void test_chain(void) {
    const int N = 16;
    const int64_t buf = 4000;
    for (int variant = 0; variant < 3; variant++) {
        oar_program *p = oar_program_new();
        int x = gt_input(p, S1000, 1);
        int v = x, first = -1;
        for (int i = 0; i < N; i++) {
            v = gt_op_in(p, GT_MAIN, CHAIN_OPS[i % 6], "", &v, 1);
            if (i == 0) first = v;
        }
        if (variant >= 1) v = GT_OP(p, sum, "dims=0 keepdim=0", v); /* the chain ends inside */
        oar_program_add_output(p, GT_MAIN, v);
        if (variant == 2) CHECK(oar_pass_inplace(p) == OAR_OK);
        oar_memory_plan plan;
        CHECK(plan_ok(p, &plan));
        if (plan.root) {
            if (variant == 0) {
                /* N buffers, the last one an output: the other N-1 fit in two */
                CHECK(plan.arena_bytes >= 2 * buf && plan.arena_bytes <= 2 * buf + 64);
                CHECK(plan.fresh_bytes == buf && plan.persistent_bytes == 0);
                CHECK(oar_plan_naive_bytes(p) == (N - 1) * buf);
                CHECK(plan.first[first] == 0 && plan.last[first] == 1);
            } else if (variant == 1) {
                CHECK(plan.arena_bytes <= 2 * buf + 64);
                CHECK(oar_plan_naive_bytes(p) == N * buf);
            } else {
                /* in place: the whole chain is one buffer, alive from step 0 to the sum */
                CHECK(plan.arena_bytes == buf);
                for (int i = 0; i < p->n_values; i++)
                    if (p->values[i].kind == OAR_VAL_NODE && p->values[i].meta.ndim == 1)
                        CHECK(plan.root[i] == first);
                CHECK(plan.first[first] == 0 && plan.last[first] == N);
            }
            oar_plan_free(&plan);
        }
        oar_tensor *xt = oar_randn(S1000, 1, OAR_F32);
        CHECK(runs_as_planned(p, &xt, 1));
        oar_release(xt);
        oar_program_free(p);
    }
}

static void test_diamond_and_corruption(void) {
    const int64_t s[2] = {8, 16}; /* 512 bytes */
    oar_program *p = oar_program_new();
    int x = gt_input(p, s, 2);
    int a = GT_OP(p, exp, "", x);
    int b = GT_OP(p, relu, "", a);
    int c = GT_OP(p, sin, "", a);
    int d = GT_OP(p, add, "", b, c);
    oar_program_add_output(p, GT_MAIN, d);
    oar_memory_plan plan;
    CHECK(plan_ok(p, &plan));
    if (!plan.root) {
        oar_program_free(p);
        return;
    }
    CHECK(plan.first[a] == 0 && plan.last[a] == 2);
    CHECK(plan.first[b] == 1 && plan.last[b] == 3);
    CHECK(plan.first[c] == 2 && plan.last[c] == 3);
    CHECK(plan.cls[x] == OAR_BUF_EXTERNAL && plan.cls[d] == OAR_BUF_FRESH && plan.cls[a] == OAR_BUF_ARENA);
    CHECK(plan.offset[x] == -1 && plan.offset[d] == -1);
    CHECK(plan.arena_bytes == 3 * 512); /* a, b and c are all live at step 2 */
    CHECK(plan.offset[a] % 64 == 0 && plan.offset[b] % 64 == 0 && plan.offset[c] % 64 == 0);
    oar_tensor *xt = oar_randn(s, 2, OAR_F32);
    CHECK(runs_as_planned(p, &xt, 1));

    /* corruptions the check must catch */
    int64_t ob = plan.offset[b], oc = plan.offset[c];
    plan.offset[c] = ob;
    CHECK_ERR(oar_plan_check(p, &plan), "share arena bytes");
    plan.offset[c] = ob >= 64 ? ob - 64 : ob + 64; /* a partial overlap */
    CHECK_ERR(oar_plan_check(p, &plan), "share arena bytes");
    plan.offset[c] = oc;
    plan.offset[b] = ob + 8;
    CHECK_ERR(oar_plan_check(p, &plan), "aligned");
    plan.offset[b] = plan.arena_bytes;
    CHECK_ERR(oar_plan_check(p, &plan), "does not fit");
    plan.offset[b] = ob;
    plan.last[a] = 1;
    CHECK_ERR(oar_plan_check(p, &plan), "does not cover");
    plan.last[a] = 2;
    plan.root[c] = a;
    CHECK_ERR(oar_plan_check(p, &plan), "another root");
    plan.root[c] = c;
    plan.cls[b] = OAR_BUF_FRESH;
    CHECK_ERR(oar_plan_check(p, &plan), "wrong buffer class");
    plan.cls[b] = OAR_BUF_ARENA;
    plan.nbytes[b] = 4;
    CHECK_ERR(oar_plan_check(p, &plan), "size");
    plan.nbytes[b] = 512;
    CHECK(oar_plan_check(p, &plan) == OAR_OK); /* restored */
    plan.n_values--;
    CHECK_ERR(oar_plan_check(p, &plan), "values");
    plan.n_values++;
    oar_plan_free(&plan);

    /* not-yet-compacted programs are refused */
    p->nodes[p->values[c].node].dead = true;
    CHECK_ERR(oar_plan_memory(p, &plan), "compact");
    CHECK(plan.root == NULL);
    oar_release(xt);
    oar_program_free(p);
}

static void test_views(void) {
    const int64_t s[2] = {4, 6};
    oar_program *p = oar_program_new();
    int x = gt_input(p, s, 2);
    int a = GT_OP(p, exp, "", x);                                 /* 0 */
    int v = GT_OP(p, reshape, "shape=6,4", a);                    /* 1 */
    int pm = GT_OP(p, permute, "dims=1,0", v);                    /* 2 */
    int sl = GT_OP(p, slice, "dim=0 start=1 end=3 step=1", pm);   /* 3 */
    int e = GT_OP(p, exp, "", x);                                 /* 4 */
    int b = GT_OP(p, neg, "", sl);                                /* 5: last read of a's buffer */
    int outs[2], n_outs = 0;
    gt_node(p, GT_MAIN, OAR_OP_split, "dim=0 split_size=2", (int[]){e}, 1, outs, &n_outs); /* 6 */
    int f = GT_OP(p, add, "", outs[0], outs[1]);                  /* 7 */
    int g = GT_OP(p, sum, "dims=0,1 keepdim=0", b);               /* 8 */
    int h = GT_OP(p, add, "", f, g);                              /* 9 */
    int r = GT_OP(p, exp, "", x);                                 /* 10 */
    int rv = GT_OP(p, reshape, "shape=24", r);                    /* 11: a view is an output */
    oar_program_add_output(p, GT_MAIN, h);
    oar_program_add_output(p, GT_MAIN, rv);
    oar_memory_plan plan;
    CHECK(plan_ok(p, &plan));
    if (plan.root) {
        CHECK(plan.root[v] == a && plan.root[pm] == a && plan.root[sl] == a);
        CHECK(plan.nbytes[v] == 0 && plan.offset[v] == -1 && plan.cls[v] == OAR_BUF_ARENA);
        CHECK(plan.first[a] == 0 && plan.last[a] == 5);
        CHECK(plan.root[outs[0]] == e && plan.root[outs[1]] == e && plan.last[e] == 7);
        CHECK(plan.cls[r] == OAR_BUF_FRESH && plan.cls[rv] == OAR_BUF_FRESH && plan.root[rv] == r);
        CHECK(plan.fresh_bytes == plan.nbytes[h] + plan.nbytes[r]);
        oar_plan_free(&plan);
    }
    oar_tensor *xt = oar_randn(s, 2, OAR_F32);
    CHECK(runs_as_planned(p, &xt, 1));
    oar_release(xt);

    /* a view of an input stays external */
    int xv = GT_OP(p, reshape, "shape=24", x);
    int y = GT_OP(p, neg, "", xv);
    (void)y;
    CHECK(plan_ok(p, &plan));
    if (plan.root) {
        CHECK(plan.root[xv] == x && plan.cls[xv] == OAR_BUF_EXTERNAL && plan.offset[xv] == -1);
        oar_plan_free(&plan);
    }
    oar_program_free(p);
}

static void test_gradients_and_inplace(void) {
    oar_program *p = oar_program_new();
    int x = gt_input(p, S1000, 1);
    int g = GT_OP(p, square, "", x);
    int o = GT_OP(p, neg, "", x);
    int k = GT_OP(p, exp, "", x);
    int kk = GT_OP(p, tanh, "", k);
    oar_tensor *w1 = oar_zeros(S1000, 1, OAR_F32), *w2 = oar_zeros(S1000, 1, OAR_F32);
    oar_program_add_grad_write(p, g, w1);
    oar_program_add_grad_write(p, o, w2); /* also an output: the caller's copy wins */
    oar_program_add_output(p, GT_MAIN, o);
    oar_program_add_output(p, GT_MAIN, kk);
    oar_memory_plan plan;
    CHECK(plan_ok(p, &plan));
    if (plan.root) {
        CHECK(plan.cls[g] == OAR_BUF_PERSISTENT && plan.persistent_bytes == 4000);
        CHECK(plan.cls[o] == OAR_BUF_FRESH && plan.fresh_bytes == 8000);
        CHECK(plan.cls[k] == OAR_BUF_ARENA && plan.arena_bytes == 4000);
        oar_plan_free(&plan);
    }
    CHECK(oar_pass_inplace(p) == OAR_OK && p->nodes[p->values[kk].node].inplace);
    CHECK(plan_ok(p, &plan));
    if (plan.root) {
        CHECK(plan.root[kk] == k && plan.cls[k] == OAR_BUF_FRESH && plan.arena_bytes == 0);
        oar_plan_free(&plan);
    }
    oar_tensor *xt = oar_randn(S1000, 1, OAR_F32);
    CHECK(runs_as_planned(p, &xt, 1));
    oar_release(xt);

    /* a mark that does not fit the shapes is refused */
    int z = oar_program_add_input(p, GT_MAIN, &(oar_meta){.dtype = OAR_F32, .ndim = 1, .shape = {1}}, "z");
    int ez = GT_OP(p, exp, "", z);
    int m = GT_OP(p, add, "", ez, x);
    p->nodes[p->values[m].node].inplace = true;
    CHECK_ERR(oar_plan_memory(p, &plan), "marked in place");
    p->nodes[p->values[m].node].inplace = false;
    int nx = GT_OP(p, neg, "", x);
    p->nodes[p->values[nx].node].inplace = true;
    CHECK_ERR(oar_plan_memory(p, &plan), "must not overwrite");
    oar_release(w1);
    oar_release(w2);
    oar_program_free(p);
}

static void test_control_flow(void) {
    const int64_t s[2] = {4, 5};
    oar_program *p = oar_program_new();
    int x = gt_input(p, s, 2);
    int a = GT_OP(p, exp, "", x);  /* 0 */
    int b = GT_OP(p, neg, "", x);  /* 1 */
    int h = GT_OP(p, tanh, "", x); /* 2: holds a block reading a */
    int sb = gt_attach_block(p, p->values[h].node);
    int sv = GT_OPB(p, sb, reshape, "shape=20", a);
    int si = GT_OPB(p, sb, sin, "", sv);
    oar_program_add_output(p, sb, si);
    int c = GT_OP(p, sin, "", b);  /* 3 */
    int d = GT_OP(p, add, "", c, h); /* 4 */
    oar_program_add_output(p, GT_MAIN, d);
    CHECK(oar_program_verify(p) == OAR_OK);
    oar_memory_plan plan;
    CHECK(plan_ok(p, &plan));
    if (plan.root) {
        CHECK(plan.first[a] == 0 && plan.last[a] == 2); /* read by the block of step 2 */
        CHECK(plan.root[sv] == a && plan.cls[sv] == OAR_BUF_ARENA);
        CHECK(plan.cls[si] == OAR_BUF_FRESH && plan.first[si] == -1 && plan.offset[si] == -1);
        CHECK(plan.last[b] == 3 && plan.last[h] == 4);
        /* a must not share bytes with h (both live at step 2) */
        CHECK(plan.offset[a] + plan.nbytes[a] <= plan.offset[h] || plan.offset[h] + plan.nbytes[h] <= plan.offset[a]);
        plan.offset[h] = plan.offset[a];
        CHECK_ERR(oar_plan_check(p, &plan), "share arena bytes");
        oar_plan_free(&plan);
    }
    oar_program_free(p);
}

/* ---- random programs */
static uint64_t g_rs = 88172645463325252ull;
static int rnd(int n) {
    g_rs = g_rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((g_rs >> 33) % (uint64_t)n);
}

typedef struct pool {
    int v[512];
    bool strided[512]; /* may be non-contiguous (reshape would refuse it) */
    int n;
} pool;

static void push(pool *pl, int v, bool strided) {
    if (v >= 0 && pl->n < 512) {
        pl->v[pl->n] = v;
        pl->strided[pl->n++] = strided;
    }
}

static const oar_op_id UNARY[] = {OAR_OP_neg, OAR_OP_sin, OAR_OP_tanh, OAR_OP_sigmoid, OAR_OP_relu, OAR_OP_abs, OAR_OP_cos};
static const oar_op_id BINARY[] = {OAR_OP_add, OAR_OP_sub, OAR_OP_mul, OAR_OP_maximum};

static oar_program *random_program(oar_tensor **params, int *n_params) {
    const int64_t s[2] = {6, 5};
    oar_program *p = oar_program_new();
    pool pl = {.n = 0};
    push(&pl, gt_input(p, s, 2), false);
    push(&pl, gt_input(p, s, 2), false);
    push(&pl, gt_tensor(p, OAR_VAL_PARAM, s, 2, "w"), false);
    push(&pl, gt_tensor(p, OAR_VAL_CONST, s, 2, NULL), false);
    push(&pl, gt_tensor(p, OAR_VAL_CONST, s, 2, NULL), false);
    int n_ops = 8 + rnd(30);
    for (int i = 0; i < n_ops; i++) {
        int ia = rnd(pl.n), ib = rnd(pl.n);
        int a = pl.v[ia], b = pl.v[ib];
        bool sa = pl.strided[ia], sb = pl.strided[ib];
        switch (rnd(12)) {
        case 0: case 1: push(&pl, gt_op_in(p, GT_MAIN, UNARY[rnd(7)], "", &a, 1), false); break;
        case 2: case 3: push(&pl, gt_op_in(p, GT_MAIN, BINARY[rnd(4)], "", (int[]){a, b}, 2), false); break;
        case 4: {
            int r = GT_OP(p, sum, "dims=1 keepdim=1", a);
            push(&pl, rnd(2) ? GT_OP(p, mul, "", b, r) : GT_OP(p, add, "", r, b), false);
            break;
        }
        case 5:
            if (!sa) push(&pl, GT_OP(p, reshape, "shape=6,5", GT_OP(p, reshape, "shape=30", a)), false);
            break;
        case 6: {
            int t = GT_OP(p, tanh, "", GT_OP(p, permute, "dims=1,0", a));
            push(&pl, GT_OP(p, permute, "dims=1,0", t), true);
            break;
        }
        case 7: push(&pl, GT_OP(p, slice, "dim=0 start=0 end=6 step=1", a), sa); break;
        case 8: push(&pl, GT_OP(p, squeeze, "dim=0", GT_OP(p, unsqueeze, "dim=0", a)), sa); break;
        case 9: push(&pl, GT_OP(p, dropout, "p=0.3 training=1", a), false); break;
        case 10: {
            int outs[4], n = 0;
            gt_node(p, GT_MAIN, OAR_OP_split, "dim=0 split_size=3", &a, 1, outs, &n);
            push(&pl, GT_OP(p, concat, "dim=0", outs[1], outs[0]), false);
            break;
        }
        default: { /* a duplicate of an earlier node, for cse */
            const oar_block *mb = &p->blocks[GT_MAIN];
            if (mb->n_nodes == 0) break;
            const oar_node *n = &p->nodes[mb->nodes[rnd(mb->n_nodes)]];
            oar_meta m[OAR_MAX_OUTPUTS];
            for (int o = 0; o < n->n_out; o++) m[o] = p->values[n->out[o]].meta;
            int outs[OAR_MAX_OUTPUTS];
            int in[OAR_MAX_INPUTS];
            memcpy(in, n->in, sizeof(int) * (size_t)n->n_in);
            oar_attr attrs[OAR_MAX_ATTRS + 1];
            memcpy(attrs, n->attrs, sizeof(oar_attr) * (size_t)oar_op_table[n->op]->n_attrs);
            oar_program_add_node(p, GT_MAIN, n->op, in, n->n_in, attrs, m, n->n_out, outs);
            (void)sb;
            break;
        }
        }
    }
    int n_out = 1 + rnd(3);
    for (int k = 0; k < n_out; k++) oar_program_add_output(p, GT_MAIN, pl.v[rnd(pl.n)]);
    *n_params = 0;
    if (rnd(3) == 0) {
        int v = pl.v[rnd(pl.n)];
        const int64_t s2[2] = {6, 5};
        params[0] = oar_zeros(s2, 2, OAR_F32);
        if (p->values[v].meta.ndim == 2) {
            oar_program_add_grad_write(p, v, params[0]);
        }
        *n_params = 1;
    }
    return p;
}

static void test_random_programs(void) {
    const int64_t s[2] = {6, 5};
    int failures = 0;
    int64_t arena_total = 0, naive_total = 0;
    for (int trial = 0; trial < 300 && failures < 5; trial++) {
        oar_tensor *params[1];
        int n_params;
        oar_program *p = random_program(params, &n_params);
        oar_tensor *in[2] = {oar_randn(s, 2, OAR_F32), oar_randn(s, 2, OAR_F32)};
        bool ok = oar_program_verify(p) == OAR_OK;
        ok = ok && runs_as_planned(p, in, 2); /* no passes: views, duplicates, dead code */
        oar_program *before = gt_clone(p);
        uint64_t mask = trial % 4 == 0 ? (uint64_t)rnd(1 << oar_pass_count()) : oar_build_strategy_mask(NULL);
        ok = ok && oar_passes_run(p, mask, false) == OAR_OK;
        oar_memory_plan plan;
        if (ok && plan_ok(p, &plan)) {
            ok = gt_same_results(before, NULL, p, &plan, in, 2);
            int64_t naive = oar_plan_naive_bytes(p);
            ok = ok && naive >= 0 && plan.arena_bytes <= naive + 64 * p->n_values;
            arena_total += plan.arena_bytes;
            naive_total += naive;
            oar_plan_free(&plan);
        } else {
            ok = false;
        }
        if (!ok) {
            failures++;
            char buf[8192];
            oar_program_dump(before, buf, sizeof buf);
            fprintf(stderr, "random program %d (mask %llx) failed (%s):\n%s\n", trial, (unsigned long long)mask,
                    oar_last_error(), buf);
        }
        CHECK(ok);
        oar_program_free(before);
        oar_program_free(p);
        oar_release(in[0]);
        oar_release(in[1]);
        for (int k = 0; k < n_params; k++) oar_release(params[k]);
    }
    CHECK(arena_total < naive_total); /* reuse happens */
    printf("random programs: planned %lld bytes, %lld with no reuse\n", (long long)arena_total,
           (long long)naive_total);
}

int main(void) {
    oar_manual_seed(11);
    test_chain();
    test_diamond_and_corruption();
    test_views();
    test_gradients_and_inplace();
    test_control_flow();
    test_random_programs();
    return test_summary("test_graph_plan");
}
