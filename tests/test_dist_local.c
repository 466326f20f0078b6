/* src/dist in one process (no launcher, no MPI needed): the checks every collective makes, the
 * one-rank backend, data parallel over one rank (gradients as plain backward's, misuse named),
 * compiled data parallel (the bucketing pass's program, the same bits as eager), no_sync,
 * SyncBatchNorm over one rank (BatchNorm), Fleet-style variables, and the loader's shard. The
 * multi-rank behaviour is tests/dist. */
#include "test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static oar_module *small_mlp(void) {
    oar_module *layers[] = {oar_nn_linear(4, 6, true), oar_nn_activation(OAR_ACT_TANH, 0), oar_nn_linear(6, 2, true)};
    return oar_nn_sequential(layers, 3);
}

static void before_init(void) {
    oar_tensor *t = oar_zeros((int64_t[]){3}, 1, OAR_F32);
    CHECK(oar_dist_rank() == 0 && oar_dist_world_size() == 1 && !oar_dist_initialized());
    CHECK_ERR(oar_dist_allreduce(t, OAR_DIST_SUM, true), "call oar_dist_init first");
    CHECK(oar_dist_wait(NULL) != OAR_OK);
    oar_module *m = small_mlp();
    CHECK_ERR(oar_dist_data_parallel(m, NULL), "call oar_dist_init first");
    oar_module_free(m);
    /* Fleet's variables without a launcher, malformed ones, and inconsistent timeouts */
    setenv("PADDLE_TRAINERS_NUM", "2", 1);
    CHECK_ERR(oar_dist_init(NULL), "oar launch --nproc 2");
    setenv("PADDLE_TRAINERS_NUM", "two", 1);
    CHECK_ERR(oar_dist_init(NULL), "PADDLE_TRAINERS_NUM to be a non-negative integer, got \"two\"");
    unsetenv("PADDLE_TRAINERS_NUM");
    CHECK_ERR(oar_dist_init(&(oar_dist_opts){.heartbeat_ms = 500, .peer_timeout_ms = 1000}),
              "at least 3 heartbeats");
    CHECK(!oar_dist_initialized());
    oar_release(t);
}

static void collectives(void) {
    CHECK(oar_dist_init(NULL) == OAR_OK && oar_dist_initialized());
    CHECK(strcmp(oar_dist_backend(), "local") == 0 && oar_dist_dead_rank() == -1);
    float v[4] = {1, -2, 3.5f, 4};
    oar_tensor *t = oar_from_data(v, (int64_t[]){4}, 1, OAR_F32);
    for (int op = OAR_DIST_SUM; op <= OAR_DIST_MIN; op++)
        for (int fixed = 0; fixed < 2; fixed++) {
            CHECK(oar_dist_wait(oar_dist_allreduce(t, (oar_dist_op)op, fixed)) == OAR_OK);
            CHECK(!memcmp(oar_data(t), v, sizeof v)); /* over one rank: the identity */
        }
    oar_tensor *out = oar_zeros((int64_t[]){4}, 1, OAR_F32);
    CHECK(oar_dist_wait(oar_dist_allgather(out, t)) == OAR_OK && !memcmp(oar_data(out), v, sizeof v));
    oar_tensor *out2 = oar_zeros((int64_t[]){4}, 1, OAR_F32);
    CHECK(oar_dist_wait(oar_dist_reduce_scatter(out2, t, OAR_DIST_SUM)) == OAR_OK && !memcmp(oar_data(out2), v, sizeof v));
    oar_dist_work *w = oar_dist_broadcast(t, 0);
    CHECK(w && oar_dist_test(w) && oar_dist_wait(w) == OAR_OK);
    CHECK(oar_dist_wait(oar_dist_barrier()) == OAR_OK);
    /* bad arguments, each named */
    CHECK_ERR(oar_dist_broadcast(t, 1), "dist_broadcast: expected 0 <= root < 1 (the world size), got 1");
    CHECK_ERR(oar_dist_allreduce(t, (oar_dist_op)9, true), "dist_allreduce: expected a reduce op");
    CHECK_ERR(oar_dist_allreduce(NULL, OAR_DIST_SUM, true), "dist_allreduce: the tensor is NULL");
    oar_tensor *bytes = oar_zeros((int64_t[]){4}, 1, OAR_U8);
    CHECK_ERR(oar_dist_allreduce(bytes, OAR_DIST_SUM, true),
              "expected the tensor of dtype f32, f64, i32, i64, f16 or bf16 (the dtypes oar reduces), got u8");
    oar_tensor *bytes_out = oar_zeros((int64_t[]){4}, 1, OAR_U8), *bytes_out2 = oar_zeros((int64_t[]){4}, 1, OAR_U8);
    ((uint8_t *)oar_data(bytes))[3] = 200; /* bytes are moved (allgather, broadcast), never reduced */
    CHECK(oar_dist_wait(oar_dist_allgather(bytes_out, bytes)) == OAR_OK && ((uint8_t *)oar_data(bytes_out))[3] == 200);
    CHECK(oar_dist_wait(oar_dist_broadcast(bytes, 0)) == OAR_OK);
    CHECK_ERR(oar_dist_reduce_scatter(bytes_out2, bytes, OAR_DIST_SUM), "(the dtypes oar reduces), got u8");
    oar_release(bytes_out);
    oar_release(bytes_out2);
    /* halves: oar's fixed-order sum only (MPI has none) */
    oar_tensor *half = oar_zeros((int64_t[]){4}, 1, OAR_F16);
    CHECK(oar_dist_wait(oar_dist_allreduce(half, OAR_DIST_SUM, true)) == OAR_OK);
    CHECK_ERR(oar_dist_allreduce(half, OAR_DIST_SUM, false), "f16 tensors are reduced in oar's fixed rank order only");
    oar_tensor *m2 = oar_zeros((int64_t[]){2, 3}, 2, OAR_F32), *tr = oar_transpose(m2, 0, 1);
    CHECK_ERR(oar_dist_allreduce(tr, OAR_DIST_SUM, false), "expected the tensor contiguous");
    oar_tensor *big = oar_zeros((int64_t[]){5}, 1, OAR_F32);
    CHECK_ERR(oar_dist_allgather(big, t), "expected out.numel == 1 (world size) * in.numel, got 5 and 4");
    oar_tensor *f64 = oar_zeros((int64_t[]){4}, 1, OAR_F64);
    CHECK_ERR(oar_dist_allgather(f64, t), "expected out and in of one dtype, got f64 and f32");
    CHECK_ERR(oar_dist_send(t, 0, -1), "dist_send: expected 0 <= tag <= 30000, got -1");
    CHECK(oar_dist_wait(oar_dist_send(t, 0, 1)) != OAR_OK && strstr(oar_last_error(), "no peer"));
    oar_release(t);
    oar_release(out);
    oar_release(out2);
    oar_release(bytes);
    oar_release(half);
    oar_release(tr);
    oar_release(m2);
    oar_release(big);
    oar_release(f64);
}

static void data_parallel(void) {
    oar_manual_seed(4);
    oar_module *m = small_mlp();
    oar_manual_seed(4);
    oar_module *twin = small_mlp();
    CHECK_ERR(oar_dist_data_parallel(m, &(oar_dist_strategy){.fuse_grad_size_in_MB = -1}),
              "expected bucket sizes >= 0 MB");
    /* 24-byte buckets: every parameter alone, last first */
    oar_dist_dp *dp = oar_dist_data_parallel(m, &(oar_dist_strategy){.first_bucket_MB = 24 / 1048576.0,
                                                                       .fuse_grad_size_in_MB = 24 / 1048576.0});
    CHECK(dp != NULL);
    if (!dp) return;
    oar_dist_dp_stats st;
    CHECK(oar_dist_dp_get_stats(dp, &st) == OAR_OK && st.n_buckets == 4);
    CHECK(oar_dist_dp_bucket_numel(dp, 0) == 2 && oar_dist_dp_bucket_numel(dp, 1) == 12 &&
          oar_dist_dp_bucket_numel(dp, 3) == 24 && oar_dist_dp_bucket_params(dp, 2) == 1);
    CHECK_ERR(oar_dist_dp_bucket_params(dp, -1), "expected 0 <= i < 4, got -1");
    oar_tensor *x = oar_randn((int64_t[]){5, 4}, 2, OAR_F32);
    oar_scope_begin(); /* the steps' temporaries */
    for (int step = 0; step < 2; step++) {
        oar_module_zero_grad(m);
        oar_module_zero_grad(twin);
        CHECK(oar_dist_dp_backward(dp, oar_sum(oar_forward(m, x), NULL, 0, false)) == OAR_OK);
        CHECK(oar_backward(oar_sum(oar_forward(twin, x), NULL, 0, false), NULL, false) == OAR_OK);
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            oar_tensor *g = oar_grad_get(oar_module_parameter(m, i, NULL));
            oar_tensor *h = oar_grad_get(oar_module_parameter(twin, i, NULL));
            CHECK(g && h && t_same_bits(g, h));
        }
    }
    CHECK(oar_dist_dp_get_stats(dp, &st) == OAR_OK && st.steps == 2 && st.launched_in_backward == 8 &&
          st.launched_at_sync == 0);
    /* a second backward without zero_grad: named, not silently doubled */
    CHECK(oar_dist_dp_backward(dp, oar_sum(oar_forward(m, x), NULL, 0, false)) != OAR_OK);
    CHECK(strstr(oar_last_error(), "got a second gradient before the sync") &&
          strstr(oar_last_error(), "oar_optimizer_zero_grad"));
    oar_module_zero_grad(m);
    CHECK(oar_dist_dp_backward(dp, oar_sum(oar_forward(m, x), NULL, 0, false)) == OAR_OK); /* recovers */
    oar_scope_end();
    oar_dist_dp_free(dp);
    /* f64 parameters are refused with the name */
    oar_module *lin = oar_nn_linear(2, 2, false);
    oar_tensor *w64 = oar_zeros((int64_t[]){2, 2}, 2, OAR_F64);
    CHECK(oar_module_set(lin, "weight", w64) == OAR_OK);
    oar_release(w64);
    CHECK_ERR(oar_dist_data_parallel(lin, NULL), "expected f32 parameters, got f64 for 'weight'");
    oar_module_free(lin);
    oar_release(x);
    oar_module_free(m);
    oar_module_free(twin);
}

/* ---- compiled data parallel in one rank: the program's buckets and the same gradients */
typedef struct step_ctx {
    oar_module *m;
    oar_dist_dp *dp;
    oar_tensor *x;
} step_ctx;

static oar_status dp_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    step_ctx *c = user;
    oar_module_zero_grad(c->m);
    out[0] = oar_sum(oar_mul(oar_forward(c->m, in[0]), oar_forward(c->m, in[0])), NULL, 0, false);
    return out[0] ? oar_dist_dp_backward(c->dp, out[0]) : oar_last_status();
}

static oar_status no_sync_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)in, (void)n_in, (void)n_out;
    step_ctx *c = user;
    out[0] = NULL;
    return oar_dist_dp_no_sync(c->dp, true);
}

static void compiled(bool bucketed) {
    oar_manual_seed(6);
    oar_module *m = small_mlp();
    oar_manual_seed(6);
    oar_module *twin = small_mlp();
    /* 24-byte buckets: the gradients of 4 parameters in 4 buckets */
    oar_dist_dp *dp = oar_dist_data_parallel(m, &(oar_dist_strategy){.first_bucket_MB = 24 / 1048576.0,
                                                                       .fuse_grad_size_in_MB = 24 / 1048576.0});
    CHECK(dp != NULL);
    if (!dp) return;
    step_ctx c = {m, dp, NULL};
    oar_build_strategy bs = {0};
    if (!bucketed) CHECK(oar_build_strategy_set(&bs, "bucket_allreduce", false) == OAR_OK);
    oar_jit *jit = oar_jit_to_static(dp_step, &c, &(oar_jit_opts){.module = m, .strategy = bs});
    CHECK(jit != NULL);
    oar_dist_program_stats_reset();
    oar_tensor *x = oar_randn((int64_t[]){5, 4}, 2, OAR_F32);
    for (int step = 0; jit && step < 2; step++) {
        oar_tensor *loss = NULL;
        CHECK(oar_jit_call(jit, &x, 1, &loss, 1) == OAR_OK);
        oar_release(loss);
        oar_scope_begin();
        oar_module_zero_grad(twin);
        oar_tensor *y = oar_forward(twin, x);
        CHECK(oar_backward(oar_sum(oar_mul(y, y), NULL, 0, false), NULL, false) == OAR_OK);
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            oar_tensor *g = oar_grad_get(oar_module_parameter(m, i, NULL));
            oar_tensor *h = oar_grad_get(oar_module_parameter(twin, i, NULL));
            CHECK(g && h && t_same_bits(g, h));
        }
        oar_scope_end();
    }
    char text[8192] = "";
    if (jit) oar_jit_dump(jit, 0, text, sizeof text);
    int starts = 0, waits = 0, singles = 0;
    for (const char *p = text; (p = strstr(p, " = allreduce_start")); p++) starts++;
    for (const char *p = text; (p = strstr(p, " = allreduce_wait[inplace]")); p++) waits++;
    for (const char *p = text; (p = strstr(p, " = grad_allreduce")); p++) singles++;
    oar_dist_program_stats ps;
    CHECK(oar_dist_program_stats_get(&ps) == OAR_OK);
    if (bucketed) {
        CHECK(starts == 4 && waits == 4 && singles == 0 && ps.collectives == 8 && ps.bytes == 2 * 4 * 44);
    } else { /* the pass switched off: one synchronous node per gradient, the same results */
        CHECK(starts == 0 && waits == 0 && singles == 4 && ps.collectives == 8);
    }
    if (starts + singles == 0) printf("%s\n", text);
    /* no_sync cannot run inside a traced step */
    oar_jit *bad = oar_jit_to_static(no_sync_step, &c, &(oar_jit_opts){.module = m});
    oar_tensor *none = NULL;
    CHECK(bad != NULL);
    CHECK(bad && oar_jit_call(bad, &x, 1, &none, 1) != OAR_OK && strstr(oar_last_error(), "accumulate eagerly"));
    oar_jit_free(bad);
    /* no_sync left on when a step is compiled: refused, naming a parameter */
    CHECK(oar_dist_dp_no_sync(dp, true) == OAR_OK);
    bad = oar_jit_to_static(dp_step, &c, &(oar_jit_opts){.module = m});
    CHECK(bad && oar_jit_call(bad, &x, 1, &none, 1) != OAR_OK && strstr(oar_last_error(), "while no_sync is on"));
    CHECK(oar_dist_dp_no_sync(dp, false) == OAR_OK);
    oar_jit_free(bad);
    oar_jit_free(jit);
    oar_dist_dp_free(dp);
    oar_release(x);
    oar_module_free(m);
    oar_module_free(twin);
}

/* ---- no_sync in one rank: the accumulated gradients of plain backward, bit for bit */
static void no_sync(void) {
    oar_manual_seed(8);
    oar_module *m = small_mlp();
    oar_manual_seed(8);
    oar_module *twin = small_mlp();
    oar_dist_dp *dp = oar_dist_data_parallel(m, NULL);
    CHECK(dp != NULL);
    if (!dp) return;
    oar_tensor *x[3] = {oar_randn((int64_t[]){5, 4}, 2, OAR_F32), oar_randn((int64_t[]){3, 4}, 2, OAR_F32),
                        oar_randn((int64_t[]){4, 4}, 2, OAR_F32)};
    oar_scope_begin();
    for (int step = 0; step < 2; step++) {
        oar_module_zero_grad(m);
        oar_module_zero_grad(twin);
        for (int k = 0; k < 3; k++) {
            CHECK(oar_dist_dp_no_sync(dp, k < 2) == OAR_OK);
            CHECK(oar_dist_dp_backward(dp, oar_sum(oar_forward(m, x[k]), NULL, 0, false)) == OAR_OK);
            CHECK(oar_backward(oar_sum(oar_forward(twin, x[k]), NULL, 0, false), NULL, false) == OAR_OK);
        }
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            oar_tensor *g = oar_grad_get(oar_module_parameter(m, i, NULL));
            oar_tensor *h = oar_grad_get(oar_module_parameter(twin, i, NULL));
            CHECK(g && h && t_same_bits(g, h));
        }
    }
    oar_dist_dp_stats st;
    CHECK(oar_dist_dp_get_stats(dp, &st) == OAR_OK && st.steps == 2 && st.launched_in_backward == 2);
    oar_scope_end();
    CHECK_ERR(oar_dist_dp_no_sync(NULL, true), "the handle is NULL");
    for (int k = 0; k < 3; k++) oar_release(x[k]);
    oar_dist_dp_free(dp);
    oar_module_free(m);
    oar_module_free(twin);
}

/* ---- SyncBatchNorm over one rank is BatchNorm */
static void sync_batch_norm(void) {
    CHECK_ERR(oar_dist_sync_batch_norm(0, 1e-5, 0.1), "expected features >= 1, eps > 0 and 0 <= momentum <= 1");
    oar_module *s = oar_dist_sync_batch_norm(3, 1e-5, 0.1), *b = oar_nn_batch_norm2d(3, 1e-5, 0.1, true, true);
    CHECK(s && b);
    if (!s || !b) return;
    oar_manual_seed(9);
    oar_tensor *x = oar_randn((int64_t[]){4, 3, 2, 5}, 4, OAR_F32), *w = oar_randn((int64_t[]){4, 3, 2, 5}, 4, OAR_F32);
    oar_scope_begin();
    oar_tensor *xs = t_leaf_copy(x), *xb = t_leaf_copy(x);
    oar_tensor *ys = oar_forward(s, xs), *yb = oar_forward(b, xb);
    CHECK(ys && yb && oar_backward(oar_sum(oar_mul(ys, w), NULL, 0, false), NULL, false) == OAR_OK &&
          oar_backward(oar_sum(oar_mul(yb, w), NULL, 0, false), NULL, false) == OAR_OK);
    double dy = 0, dx = 0, dw = 0, dstat = 0;
    for (int64_t i = 0; ys && yb && i < oar_numel(x); i++) {
        dy = fmax(dy, fabs(t_at(ys, i) - t_at(yb, i)));
        dx = fmax(dx, fabs(t_at(oar_grad_get(xs), i) - t_at(oar_grad_get(xb), i)));
    }
    const char *stats[3] = {"weight", "running_mean", "running_var"};
    for (int i = 0; i < 3; i++) {
        dw = fmax(dw, fabs(t_at(oar_grad_get(oar_module_get(s, "weight")), i) -
                           t_at(oar_grad_get(oar_module_get(b, "weight")), i)));
        for (int k = 1; k < 3; k++)
            dstat = fmax(dstat, fabs(t_at(oar_module_get(s, stats[k]), i) - t_at(oar_module_get(b, stats[k]), i)));
    }
    CHECK(dy < 1e-5 && dx < 1e-5 && dw < 1e-4 && dstat < 1e-6);
    if (!(dy < 1e-5 && dx < 1e-5 && dw < 1e-4 && dstat < 1e-6))
        printf("sync_batch_norm: |dy| %g |dx| %g |dweight| %g |dstats| %g\n", dy, dx, dw, dstat);
    CHECK(t_at(oar_module_get(s, "num_batches_tracked"), 0) == 1);
    /* evaluation: the running statistics (equal to within their rounding above) */
    oar_module_train(s, false);
    oar_module_train(b, false);
    ys = oar_forward(s, x), yb = oar_forward(b, x);
    double de = ys && yb ? 0 : 1;
    for (int64_t i = 0; ys && yb && i < oar_numel(x); i++) de = fmax(de, fabs(t_at(ys, i) - t_at(yb, i)));
    CHECK(de < 1e-5);
    CHECK_ERR(oar_forward(s, oar_zeros((int64_t[]){2, 4}, 2, OAR_F32)),
              "SyncBatchNorm: expected an f32 input of shape [N, 3, ...] (num_features = 3), got f32 with 2 dims and 4 channels");
    oar_scope_end();
    oar_release(x);
    oar_release(w);
    oar_module_free(s);
    oar_module_free(b);
}

static void shard(void) {
    oar_tensor *x = oar_zeros((int64_t[]){10, 1}, 2, OAR_F32), *idx = oar_arange(0, 10, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(x, idx);
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = 2});
    CHECK_ERR(oar_loader_set_shard(l, 3, 3), "expected 0 <= rank < count, got rank 3 of count 3");
    CHECK(oar_loader_set_shard(l, 1, 3) == OAR_OK && oar_loader_num_batches(l) == 2);
    /* global batches of 6: [0..5] and the short [6..9]; rank 1 of 3 takes 2,3 then 7 */
    oar_tensor *xb, *yb;
    int64_t want[2][2] = {{2, 3}, {7, -1}}, n_want[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
        CHECK(oar_loader_next(l, &xb, &yb, NULL));
        CHECK(oar_numel(yb) == n_want[k] && ((int64_t *)oar_data(yb))[0] == want[k][0]);
        if (n_want[k] == 2) CHECK(((int64_t *)oar_data(yb))[1] == want[k][1]);
        oar_release(xb);
        oar_release(yb);
    }
    CHECK(!oar_loader_next(l, &xb, &yb, NULL));
    CHECK_ERR(oar_loader_set_shard(l, 0, 2), "the loader has started an epoch");
    oar_loader *one = oar_loader_new(d, &(oar_loader_opts){.batch_size = 3});
    CHECK(oar_dist_shard_loader(one) == OAR_OK && oar_loader_num_batches(one) == 4); /* a world of 1: all */
    oar_loader_free(one);
    oar_loader_free(l);
    oar_dataset_free(d);
    oar_release(x);
    oar_release(idx);
}

int main(void) {
    oar_set_num_threads(1);
    before_init();
    collectives();
    data_parallel();
    compiled(true);
    compiled(false);
    no_sync();
    sync_batch_norm();
    shard();
    CHECK(oar_dist_finalize() == OAR_OK && !oar_dist_initialized());
    printf("test_dist_local: %d passed, %d failed\n", t_passed, t_failed);
    return t_failed ? 1 : 0;
}
