/* Batch tiles (src/graph/batch_tiles.c, the planner's and the executor's parts):
 *  - a conv -> relu -> max pooling chain whose tensors exceed the caches at batch 17 becomes
 *    one tile: one image per slice at 1 thread, two at 2 (the last slice one image), the
 *    conv's output (read only inside) planned as one slice, the relu's output (also read by a
 *    whole-batch sum after the tile) and the pooled output (read by a small conv after it)
 *    cut from whole-batch buffers; the plan passes oar_plan_check;
 *  - the executor's results equal the node-by-node eager run, to the bit, at 1 and 2 threads
 *    (slices in the wrong place, a buffer reused inside the tile or a remainder slice run at
 *    the full slice size would not);
 *  - small tensors (the same chain at batch 2) and a sum over the batch make no tile;
 *  - the NHWC path the imported CNNs take (conv2d_act with layout nhwc and a residual, the
 *    oneDNN kernel; max_pool2d_nhwc with ceil_mode) is one tile too, its result read by a mean, bit-equal to eager at 1 and 2 threads; like every test here it also runs capped
 *    at avx2 and generic, so each ISA path's kernels run sliced;
 *  - the sizes follow the caches (oar_set_cpu_caches): a 3.5x larger L2 gives slices of three
 *    images a thread, an L3 large enough to hold the batch or an L2 four times an image makes
 *    no tile, a small L2 one image a thread. The other cases pin the 2-core Zen 5's caches
 *    (1 MiB L2, 32 MiB L3), so what they expect does not depend on the host. */
#include "graph_test_util.h"

#include "graph/exec.h"

typedef struct chain {
    oar_program *p;
    int x, conv, relu, pool, conv2, total;
} chain;

/* x [n, 8, 128, 128] -> conv 3x3 (pad 1) -> relu -> max pool 2x2 stride 1 -> conv 1x1 to 4
 * channels; outputs: the last conv and sum(relu) over every dim (the batch too). */
static chain make_chain(int64_t n) {
    chain c = {.p = oar_program_new()};
    oar_manual_seed(11);
    c.x = gt_input(c.p, (int64_t[]){n, 8, 128, 128}, 4);
    int w1 = gt_tensor(c.p, OAR_VAL_PARAM, (int64_t[]){8, 8, 3, 3}, 4, "w1");
    int b1 = gt_tensor(c.p, OAR_VAL_PARAM, (int64_t[]){8}, 1, "b1");
    int w2 = gt_tensor(c.p, OAR_VAL_PARAM, (int64_t[]){4, 8, 1, 1}, 4, "w2");
    c.conv = GT_OP(c.p, conv2d, "stride=1,1 padding=1,1 dilation=1,1 groups=1", c.x, w1, b1);
    c.relu = GT_OP(c.p, relu, "", c.conv);
    c.pool = GT_OP(c.p, max_pool2d, "kernel=2,2 stride=1,1 padding=0,0 dilation=1,1 ceil_mode=0", c.relu);
    c.conv2 = GT_OP(c.p, conv2d, "stride=1,1 padding=0,0 dilation=1,1 groups=1", c.pool, w2, -1);
    c.total = GT_OP(c.p, sum, "dims=0,1,2,3 keepdim=0", c.relu);
    CHECK(c.conv2 >= 0 && c.total >= 0);
    CHECK(oar_program_add_output(c.p, GT_MAIN, c.conv2) == OAR_OK);
    CHECK(oar_program_add_output(c.p, GT_MAIN, c.total) == OAR_OK);
    return c;
}

static void test_plan(int threads, int64_t batch) {
    chain c = make_chain(batch);
    oar_memory_plan plan;
    CHECK(oar_plan_memory_tiled(c.p, threads, &plan) == OAR_OK);
    CHECK(plan.n_tiles == 1);
    if (plan.n_tiles == 1) {
        const oar_batch_tile *t = &plan.tiles[0];
        CHECK(t->first == 0 && t->last == 2); /* conv, relu, pool */
        CHECK(t->batch == batch && t->sub == threads);
        int64_t image = 8 * 128 * 128 * 4;
        CHECK(plan.tiled[c.conv] == OAR_TILE_INTERIOR && plan.nbytes[c.conv] == image * threads);
        CHECK(plan.tiled[c.relu] == OAR_TILE_SLICED && plan.nbytes[c.relu] == image * batch);
        CHECK(plan.tiled[c.pool] == OAR_TILE_SLICED && plan.tiled[c.x] == OAR_TILE_SLICED);
        CHECK(plan.tiled[c.conv2] == OAR_TILE_NONE);
        /* the tile's inputs and outputs live through all of it */
        CHECK(plan.first[c.relu] == 0 && plan.last[c.relu] == 4 && plan.last[c.conv] == 2);
    }
    CHECK(oar_plan_check(c.p, &plan) == OAR_OK);
    oar_plan_free(&plan);
    oar_program_free(c.p);
}

static void test_results(int threads, int64_t batch) {
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_scope_begin();
    chain c = make_chain(batch);
    oar_tensor *x = oar_randn((int64_t[]){batch, 8, 128, 128}, 4, OAR_F32);
    oar_tensor *want[2] = {0}, *got[2] = {0};
    CHECK(gt_eval(c.p, NULL, &x, 1, want) == OAR_OK);
    oar_exec *e = oar_exec_create(c.p);
    CHECK(e != NULL);
    if (e) {
        CHECK(oar_exec_plan(e)->n_tiles == 1 && oar_exec_plan(e)->tiles[0].sub == threads);
        CHECK(oar_exec_run(e, &x, 1, got, 2) == OAR_OK);
        CHECK(t_same_bits(got[0], want[0]));
        CHECK(t_same_bits(got[1], want[1]));
        for (int k = 0; k < 2; k++) oar_release(got[k]);
        CHECK(oar_exec_run(e, &x, 1, got, 2) == OAR_OK); /* a second run: the same */
        CHECK(t_same_bits(got[0], want[0]));
        for (int k = 0; k < 2; k++) oar_release(got[k]);
        oar_exec_free(e);
    }
    for (int k = 0; k < 2; k++) oar_release(want[k]);
    oar_release(x);
    oar_program_free(c.p);
    oar_scope_end();
}

static void test_no_tile(void) {
    chain c = make_chain(2); /* 2 images: the whole batch fits the caches */
    oar_memory_plan plan;
    CHECK(oar_plan_memory_tiled(c.p, 1, &plan) == OAR_OK);
    CHECK(plan.n_tiles == 0 && plan.tiled[c.conv] == OAR_TILE_NONE);
    oar_plan_free(&plan);
    CHECK(oar_plan_memory(c.p, &plan) == OAR_OK && plan.n_tiles == 0); /* untiled planning */
    oar_plan_free(&plan);
    oar_program_free(c.p);
}

/* x [n, 128, 128, 8] (NHWC) -> conv2d_act 3x3 relu -> conv2d_act 1x1 + residual (the first
 * conv's output) -> max_pool2d_nhwc 3x3 stride 1 ceil_mode -> mean over H, W: [n, 8]. The mean
 * reads under 16 MB over the batch: it ends the tile and reads the pooled slices after it. */
static void test_nhwc(int threads, int64_t batch) {
    CHECK(oar_set_num_threads(threads) == OAR_OK);
    oar_scope_begin();
    oar_program *p = oar_program_new();
    oar_manual_seed(12);
    int x = gt_input(p, (int64_t[]){batch, 128, 128, 8}, 4);
    int w1 = gt_tensor(p, OAR_VAL_PARAM, (int64_t[]){8, 8, 3, 3}, 4, "w1");
    int b1 = gt_tensor(p, OAR_VAL_PARAM, (int64_t[]){8}, 1, "b1");
    int w2 = gt_tensor(p, OAR_VAL_PARAM, (int64_t[]){8, 8, 1, 1}, 4, "w2");
    int c1 = GT_OP(p, conv2d_act, "stride=1,1 padding=1,1 dilation=1,1 groups=1 act=relu layout=nhwc", x, w1, b1, -1);
    int c2 = GT_OP(p, conv2d_act, "stride=1,1 padding=0,0 dilation=1,1 groups=1 act=relu layout=nhwc", c1, w2, -1, c1);
    int pool = GT_OP(p, max_pool2d_nhwc, "kernel=3,3 stride=1,1 padding=0,0 dilation=1,1 ceil_mode=1", c2);
    int m = GT_OP(p, mean, "dims=1,2 keepdim=0", pool);
    CHECK(m >= 0 && oar_program_add_output(p, GT_MAIN, m) == OAR_OK);
    oar_tensor *in = oar_randn((int64_t[]){batch, 128, 128, 8}, 4, OAR_F32), *want = NULL, *got = NULL;
    CHECK(gt_eval(p, NULL, &in, 1, &want) == OAR_OK);
    oar_exec *e = oar_exec_create(p);
    CHECK(e != NULL);
    if (e) {
        const oar_memory_plan *pl = oar_exec_plan(e);
        CHECK(pl->n_tiles == 1 && pl->tiles[0].first == 0 && pl->tiles[0].last == 2 && pl->tiles[0].sub == threads);
        CHECK(pl->tiled[c1] == OAR_TILE_INTERIOR && pl->tiled[c2] == OAR_TILE_INTERIOR && pl->tiled[pool] == OAR_TILE_SLICED);
        CHECK(pl->tiled[m] == OAR_TILE_NONE);
        CHECK(oar_exec_run(e, &in, 1, &got, 1) == OAR_OK);
        CHECK(t_same_bits(got, want));
        oar_release(got);
        oar_exec_free(e);
    }
    oar_release(want);
    oar_release(in);
    oar_program_free(p);
    oar_scope_end();
}

static int64_t tile_sub(int threads, oar_cpu_caches caches) {
    CHECK(oar_set_cpu_caches(&caches) == OAR_OK);
    chain c = make_chain(17);
    oar_memory_plan plan;
    int64_t sub = -1;
    CHECK(oar_plan_memory_tiled(c.p, threads, &plan) == OAR_OK);
    if (plan.n_tiles == 1) sub = plan.tiles[0].sub;
    else CHECK(plan.n_tiles == 0);
    if (plan.n_tiles == 1) CHECK(oar_plan_check(c.p, &plan) == OAR_OK);
    oar_plan_free(&plan);
    oar_program_free(c.p);
    return sub;
}

/* The chain's nodes read and write 1 MiB an image (conv: 512 KiB in, 512 KiB out) and 17 MiB
 * over the batch. */
static void test_caches(const oar_cpu_caches *zen5) {
    const int64_t K = 1024, M = K * K;
    for (int threads = 1; threads <= 2; threads++) {
        CHECK(tile_sub(threads, *zen5) == threads);
        CHECK(tile_sub(threads, (oar_cpu_caches){48 * K, 7 * M / 2, 32 * M}) == 3 * threads); /* 3 images a thread */
        CHECK(tile_sub(threads, (oar_cpu_caches){48 * K, 256 * K, 32 * M}) == threads);   /* never under one */
        CHECK(tile_sub(threads, (oar_cpu_caches){48 * K, 1 * M, 36 * M}) == -1);          /* the batch fits half the L3 */
        CHECK(tile_sub(threads, (oar_cpu_caches){48 * K, 1 * M, 30 * M}) == threads);
        CHECK(tile_sub(threads, (oar_cpu_caches){48 * K, 8 * M, 4 * M}) == -1); /* an image is under a quarter of the L2 */
    }
    CHECK(oar_set_cpu_caches(&(oar_cpu_caches){48 * K, 0, 32 * M}) == OAR_ERR_INVALID_ARG);
    CHECK(oar_set_cpu_caches(NULL) == OAR_OK);
    oar_cpu_caches d = oar_cpu_caches_detected(), g = oar_get_cpu_caches();
    CHECK(d.l1d > 0 && d.l2 > 0 && d.l3 > 0 && g.l1d == d.l1d && g.l2 == d.l2 && g.l3 == d.l3);
    CHECK(oar_set_cpu_caches(zen5) == OAR_OK);
}

int main(void) {
    /* the caches these cases' sizes were chosen for (the tiles follow the host's otherwise) */
    const oar_cpu_caches zen5 = {48 << 10, 1 << 20, 32 << 20};
    CHECK(oar_set_cpu_caches(&zen5) == OAR_OK);
    test_caches(&zen5);
    test_nhwc(1, 17);
    test_nhwc(2, 17);
    test_plan(1, 17);
    test_plan(2, 17);
    test_results(1, 17);
    test_results(2, 17); /* eight slices of two images, then one of one */
    test_no_tile();
    return test_summary("test_batch_tiles");
}
