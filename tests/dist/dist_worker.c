/* The program the distributed tests launch (dist.sh runs it under mpirun, and alone as the
 * one-process reference). Modes:
 *   train STEPS BATCH OUT [mpi|static|accumK]  an MLP trained data parallel on a fixed synthetic set,
 *                                loader sharded by rank, gradients clipped to a global norm; rank 0
 *                                writes each step's global loss and clip norm and the final
 *                                parameters (%a, exact) to OUT. static: the step compiled
 *                                (oar_jit_to_static), its allreduces bucketed by the compiler;
 *                                accumK: each step accumulates K micro-batches (K-1 under no_sync)
 *   syncbn STEPS BATCH OUT [plain|static]  linear, SyncBatchNorm, tanh, linear trained data parallel;
 *                                OUT as for train, with the running statistics after the
 *                                parameters; plain: BatchNorm instead (the one-process reference)
 *   cbuckets                     compiled data parallel: the program's buckets as configured, each
 *                                started before backward ends (overlap), waits just before the
 *                                optimizer
 *   sampler                      every sample once per epoch across ranks, in the order of one
 *                                process at batch N*B
 *   buckets                      bucket count and sizes as configured; every bucket launched
 *                                from a gradient hook (during backward), some communication hidden
 *   hooks                        a communication hook in C (oar_dist_dp_set_comm_hook) averaging each
 *                                bucket with its own allreduce: called in bucket order during
 *                                backward, the parameters bit for bit those of the built-in average;
 *                                its errors
 *   unused                       a parameter only rank 0 uses and one nobody uses: no hang, and the
 *                                gradients equal a plain allreduce of each rank's own
 *   kill KILLTIME                the last rank SIGKILLs itself mid-training; the others must stop
 *                                with an error naming it (prints "detected after N ms: ...")
 *   mismatch                     rank 1 builds a different model: creation fails naming both
 *   stall                        rank 1 skips a collective: rank 0 fails after the timeout naming it
 *   compare A B LOSS_TOL PARAM_TOL  two train outputs: the largest relative difference of the
 *                                losses and clip norms and the largest absolute parameter
 *                                difference, within the bounds given (0 0: bitwise equal)
 * Exit 0 on success. */
#include "oar.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            failures++;                                                              \
            fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", oar_dist_rank(), __FILE__, \
                    __LINE__, #cond);                                                \
            fprintf(stderr, __VA_ARGS__);                                            \
            fprintf(stderr, " (last error: %s)\n", oar_last_error());                \
        }                                                                            \
    } while (0)
#define MUST(st)                                                                     \
    do {                                                                             \
        if ((st) != OAR_OK) {                                                        \
            fprintf(stderr, "rank %d: %s:%d: %s\n", oar_dist_rank(), __FILE__, __LINE__, \
                    oar_last_error());                                               \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static oar_module *mlp(int64_t in, int64_t hidden, int64_t out) {
    oar_module *layers[] = {oar_nn_linear(in, hidden, true), oar_nn_activation(OAR_ACT_TANH, 0),
                            oar_nn_linear(hidden, hidden, true), oar_nn_activation(OAR_ACT_TANH, 0),
                            oar_nn_linear(hidden, out, true)};
    return oar_nn_sequential(layers, 5);
}

/* 192 samples, 8 features, 4 classes from a fixed random linear rule (same on every rank). */
static oar_dataset *synthetic(int64_t n) {
    oar_manual_seed(1234);
    oar_tensor *x = oar_randn((int64_t[]){n, 8}, 2, OAR_F32);
    oar_tensor *w = oar_randn((int64_t[]){8, 4}, 2, OAR_F32);
    oar_tensor *scores = oar_matmul(x, w), *y = oar_argmax(scores, 1, false);
    oar_dataset *d = oar_dataset_tensors(x, y);
    oar_release(x);
    oar_release(w);
    oar_release(scores);
    oar_release(y);
    return d;
}

static float *flat_params(oar_module *m, int64_t *n_out) {
    int64_t n = oar_module_count_elements(m, false), at = 0;
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < oar_module_num_parameters(m); i++) {
        oar_tensor *p = oar_module_parameter(m, i, NULL);
        memcpy(v + at, oar_data(p), sizeof(float) * (size_t)oar_numel(p));
        at += oar_numel(p);
    }
    *n_out = n;
    return v;
}

/* Every rank's parameters must be bitwise identical: min and max over ranks equal ours. */
static void expect_identical_params(oar_module *m) {
    int64_t n;
    float *mine = flat_params(m, &n);
    oar_tensor *lo = oar_from_data(mine, &n, 1, OAR_F32), *hi = oar_from_data(mine, &n, 1, OAR_F32);
    MUST(oar_dist_wait(oar_dist_allreduce(lo, OAR_DIST_MIN, false)));
    MUST(oar_dist_wait(oar_dist_allreduce(hi, OAR_DIST_MAX, false)));
    EXPECT(!memcmp(oar_data(lo), mine, sizeof(float) * (size_t)n) && !memcmp(oar_data(hi), mine, sizeof(float) * (size_t)n),
           "parameters differ between ranks");
    oar_release(lo);
    oar_release(hi);
    free(mine);
}

/* One training step, run eagerly or compiled: the same code either way. */
typedef struct train_ctx {
    oar_module *m;
    oar_dist_dp *dp;
    oar_optimizer *opt;
    oar_tensor **params;
    int np;
} train_ctx;

static oar_status train_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    train_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->m, in[0]), in[1], NULL);
    oar_status st = loss ? oar_dist_dp_backward(c->dp, loss) : oar_last_status();
    oar_tensor *norm = st == OAR_OK ? oar_clip_grad_norm_total(c->params, c->np, 1.0, 2.0) : NULL;
    if (st == OAR_OK && !norm) st = oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    out[0] = loss;
    out[1] = norm;
    return st;
}

static oar_jit *compile_train_step(train_ctx *c, oar_tensor *x, oar_tensor *y) {
    oar_input_spec specs[2] = {{oar_dtype_of(x), 2, {-1, oar_shape(x)[1]}, "x"}, {oar_dtype_of(y), 1, {-1}, "y"}};
    oar_jit_opts jo = {.specs = specs, .n_specs = 2, .module = c->m, .optimizer = c->opt};
    return oar_jit_to_static(train_step, c, &jo);
}

/* An optimizer step over accum micro-batches: all but the last backward under no_sync (local
 * accumulation), the last one averages the sums across ranks. Eager. */
static oar_status accum_micro_step(train_ctx *c, oar_tensor *x, oar_tensor *y, int micro, int accum,
                                   oar_tensor **res) {
    if (micro == 0) oar_optimizer_zero_grad(c->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->m, x), y, NULL);
    if (!loss) return oar_last_status();
    if (micro < accum - 1) {
        oar_status st = oar_dist_dp_no_sync(c->dp, true);
        if (st == OAR_OK) st = oar_dist_dp_backward(c->dp, loss);
        oar_status st2 = oar_dist_dp_no_sync(c->dp, false);
        return st != OAR_OK ? st : st2;
    }
    oar_status st = oar_dist_dp_backward(c->dp, loss);
    oar_tensor *norm = st == OAR_OK ? oar_clip_grad_norm_total(c->params, c->np, 1.0, 2.0) : NULL;
    if (st == OAR_OK && !norm) st = oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    res[0] = loss;
    res[1] = norm;
    return st;
}

/* kill mode: a survivor's failure, with the time since the victim wrote its clock before dying */
static void report_death(const char *killfile, double t_sync) {
    FILE *k = fopen(killfile, "r");
    double killed = 0;
    if (k && fscanf(k, "%lf", &killed) == 1)
        printf("rank %d: detected after %.0f ms: %s\n", oar_dist_rank(), wall_ms() - killed, oar_last_error());
    else
        printf("rank %d: detected (sync began %.0f ms ago): %s\n", oar_dist_rank(), wall_ms() - t_sync, oar_last_error());
    fflush(stdout);
    exit(3);
}

static int train(int steps, int64_t batch, const char *out, bool mpi_allreduce, bool compiled, int accum,
                 int kill_at, const char *killfile) {
    oar_dataset *d = synthetic(192);
    oar_manual_seed(7 + (uint64_t)oar_dist_rank()); /* different inits: the broadcast must fix them */
    oar_module *m = mlp(8, 32, 4);
    oar_dist_strategy s = {.fuse_grad_size_in_MB = 0.004, .first_bucket_MB = 0.0005, .mpi_allreduce = mpi_allreduce};
    oar_dist_dp *dp = oar_dist_data_parallel(m, &s);
    MUST(dp ? OAR_OK : oar_last_status());
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    oo.momentum = 0.9;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = batch, .shuffle = true, .seed = 99});
    MUST(oar_dist_shard_loader(l));
    int np = oar_module_num_parameters(m);
    oar_tensor **params = malloc(sizeof(oar_tensor *) * (size_t)np);
    for (int i = 0; i < np; i++) params[i] = oar_module_parameter(m, i, NULL);
    train_ctx ctx = {m, dp, opt, params, np};
    oar_jit *jit = NULL;
    FILE *f = oar_dist_rank() == 0 && out ? fopen(out, "w") : NULL;
    int step = 0, micro = 0;
    oar_dist_program_stats_reset();
    for (int64_t epoch = 0; step < steps; epoch++) {
        MUST(oar_loader_start_epoch(l, epoch));
        oar_tensor *x, *y;
        oar_status st;
        while (step < steps && oar_loader_next(l, &x, &y, &st)) {
            if (step == kill_at && oar_dist_rank() == oar_dist_world_size() - 1) {
                FILE *k = fopen(killfile, "w");
                fprintf(k, "%.3f\n", wall_ms());
                fclose(k);
                raise(SIGKILL);
            }
            oar_scope_begin();
            oar_tensor *res[2] = {NULL, NULL}, *batch[2] = {x, y};
            double t_sync = wall_ms();
            if (compiled && !jit) MUST((jit = compile_train_step(&ctx, x, y)) ? OAR_OK : oar_last_status());
            if (accum > 1) {
                MUST(accum_micro_step(&ctx, x, y, micro, accum, res));
                if (++micro < accum) { /* accumulated locally; the step ends with the last micro-batch */
                    oar_scope_end();
                    oar_release(x);
                    oar_release(y);
                    continue;
                }
                micro = 0;
            }
            st = jit ? oar_jit_call(jit, batch, 2, res, 2) : accum > 1 ? OAR_OK : train_step(&ctx, batch, 2, res, 2);
            if (st != OAR_OK && kill_at >= 0) report_death(killfile, t_sync);
            MUST(st);
            double norm = 0, gl = 0;
            MUST(oar_item(res[1], &norm));
            oar_tensor *global = oar_from_data(oar_data(res[0]), NULL, 0, OAR_F32);
            /* the dead rank may have left during this step's loss average rather than its buckets */
            st = oar_dist_wait(oar_dist_allreduce(global, OAR_DIST_AVG, true));
            if (st != OAR_OK && kill_at >= 0) report_death(killfile, t_sync);
            MUST(st);
            MUST(oar_item(global, &gl));
            if (f) fprintf(f, "step %d loss %a norm %a\n", step, (float)gl, norm);
            if (jit) {
                oar_release(res[0]);
                oar_release(res[1]);
            }
            oar_scope_end();
            oar_release(x);
            oar_release(y);
            step++;
        }
        MUST(st);
    }
    expect_identical_params(m);
    if (f) {
        int64_t n;
        float *v = flat_params(m, &n);
        for (int64_t i = 0; i < n; i++) fprintf(f, "param %lld %a\n", (long long)i, v[i]);
        free(v);
        fclose(f);
    }
    oar_dist_dp_stats ds;
    oar_dist_dp_get_stats(dp, &ds);
    oar_dist_program_stats ps;
    oar_dist_program_stats_get(&ps);
    if (oar_dist_rank() == 0 && !jit)
        printf("train: %d ranks, %d buckets, %lld steps, %lld launched in backward, %lld at sync, comm %.3f s, "
               "exposed %.3f s\n", oar_dist_world_size(), ds.n_buckets, (long long)ds.steps,
               (long long)ds.launched_in_backward, (long long)ds.launched_at_sync, ds.comm_seconds, ds.exposed_seconds);
    if (oar_dist_rank() == 0 && jit)
        printf("train (compiled): %d ranks, %lld bucket allreduces by the program, comm %.3f s, exposed %.3f s\n",
               oar_dist_world_size(), (long long)ps.collectives, ps.comm_seconds, ps.exposed_seconds);
    if (jit) EXPECT(ps.collectives > 0 && ds.steps == 0, "compiled: %lld program allreduces, %lld eager syncs",
                    (long long)ps.collectives, (long long)ds.steps);
    oar_jit_free(jit);
    free(params);
    oar_loader_free(l);
    oar_optimizer_free(opt);
    oar_dist_dp_free(dp);
    oar_module_free(m);
    oar_dataset_free(d);
    return 0;
}

static int sampler(void) {
    const int64_t n = 103, b = 4;
    int r = oar_dist_rank(), w = oar_dist_world_size();
    oar_tensor *x = oar_zeros((int64_t[]){n, 1}, 2, OAR_F32), *idx = oar_arange(0, (double)n, 1, OAR_I64);
    oar_dataset *d = oar_dataset_tensors(x, idx);
    oar_loader *mine = oar_loader_new(d, &(oar_loader_opts){.batch_size = b, .shuffle = true, .seed = 5});
    oar_loader *whole = oar_loader_new(d, &(oar_loader_opts){.batch_size = b * w, .shuffle = true, .seed = 5});
    MUST(oar_dist_shard_loader(mine));
    EXPECT(oar_loader_set_shard(mine, w, w) != OAR_OK && strstr(oar_last_error(), "rank"), "bad shard accepted");
    int64_t nb = oar_loader_num_batches(mine);
    EXPECT(nb == oar_loader_num_batches(whole), "%lld batches, one process has %lld", (long long)nb,
           (long long)oar_loader_num_batches(whole));
    for (int64_t epoch = 0; epoch < 2; epoch++) {
        oar_loader_start_epoch(mine, epoch);
        oar_loader_start_epoch(whole, epoch);
        /* each global batch: every rank's part, gathered in rank order, is one process's batch */
        for (int64_t k = 0; k < nb; k++) {
            oar_tensor *xi, *yi, *xw, *yw;
            MUST(oar_loader_next(mine, &xi, &yi, NULL) ? OAR_OK : oar_last_status());
            MUST(oar_loader_next(whole, &xw, &yw, NULL) ? OAR_OK : oar_last_status());
            int64_t part[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, all[8 * 16];
            memcpy(part, oar_data(yi), sizeof(int64_t) * (size_t)oar_numel(yi));
            oar_tensor *pt = oar_from_data(part, (int64_t[]){8}, 1, OAR_I64);
            oar_tensor *at = oar_zeros((int64_t[]){8 * w}, 1, OAR_I64);
            MUST(oar_dist_wait(oar_dist_allgather(at, pt)));
            memcpy(all, oar_data(at), sizeof(int64_t) * 8 * (size_t)w);
            int64_t got = 0, *want = oar_data(yw);
            bool same = true;
            for (int q = 0; q < 8 * w; q++)
                if (all[q] >= 0) same &= got < oar_numel(yw) && all[q] == want[got], got++;
            EXPECT(same && got == oar_numel(yw), "epoch %lld batch %lld: the ranks' parts are not one process's batch",
                   (long long)epoch, (long long)k);
            oar_release(pt);
            oar_release(at);
            oar_release(xi);
            oar_release(yi);
            oar_release(xw);
            oar_release(yw);
        }
        oar_tensor *xi, *yi;
        EXPECT(!oar_loader_next(mine, &xi, &yi, NULL), "more batches than one process");
    }
    if (r == 0) printf("sampler: %d ranks cover %lld samples once per epoch, in one process's order\n", w, (long long)n);
    oar_loader_free(mine);
    oar_loader_free(whole);
    oar_dataset_free(d);
    oar_release(x);
    oar_release(idx);
    return 0;
}

static int buckets(void) {
    oar_manual_seed(3);
    /* parameters, last first: 2.bias 4, 2.weight 256, 1.bias 64, 1.weight 4096, 0.bias 64, 0.weight 512 */
    oar_module *layers[] = {oar_nn_linear(8, 64, true), oar_nn_linear(64, 64, true), oar_nn_linear(64, 4, true)};
    oar_module *m = oar_nn_sequential(layers, 3);
    /* first bucket 1 KiB (256 floats): 2.bias alone; then 4 KiB (1024 floats): 2.weight + 1.bias,
     * 1.weight alone (larger than a bucket), 0.bias + 0.weight */
    oar_dist_strategy s = {.first_bucket_MB = 1024.0 / 1048576.0, .fuse_grad_size_in_MB = 4096.0 / 1048576.0};
    oar_dist_dp *dp = oar_dist_data_parallel(m, &s);
    MUST(dp ? OAR_OK : oar_last_status());
    const int64_t want_numel[] = {4, 320, 4096, 576};
    const int want_params[] = {1, 2, 1, 2};
    oar_dist_dp_stats ds;
    oar_dist_dp_get_stats(dp, &ds);
    EXPECT(ds.n_buckets == 4, "%d buckets, expected 4", ds.n_buckets);
    for (int i = 0; i < 4 && i < ds.n_buckets; i++)
        EXPECT(oar_dist_dp_bucket_numel(dp, i) == want_numel[i] && oar_dist_dp_bucket_params(dp, i) == want_params[i],
               "bucket %d: %lld elements in %d parameters, expected %lld in %d", i,
               (long long)oar_dist_dp_bucket_numel(dp, i), oar_dist_dp_bucket_params(dp, i),
               (long long)want_numel[i], want_params[i]);
    EXPECT(oar_dist_dp_bucket_numel(dp, 4) < 0 && strstr(oar_last_error(), "expected 0 <= i < 4"), "bad index");
    /* the default strategy: one bucket of 1 MiB holds this whole model */
    oar_dist_dp *dflt = oar_dist_data_parallel(m, NULL);
    oar_dist_dp_get_stats(dflt, &ds);
    EXPECT(ds.n_buckets == 1 && oar_dist_dp_bucket_numel(dflt, 0) == 4996, "default: %d buckets", ds.n_buckets);
    oar_dist_dp_free(dflt);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_manual_seed(11 + (uint64_t)oar_dist_rank());
    const int steps = 20;
    for (int k = 0; k < steps; k++) {
        oar_scope_begin();
        oar_optimizer_zero_grad(opt);
        oar_tensor *x = oar_randn((int64_t[]){512, 8}, 2, OAR_F32);
        MUST(oar_dist_dp_backward(dp, oar_mean(oar_mul(oar_forward(m, x), oar_forward(m, x)), NULL, 0, false)));
        MUST(oar_optimizer_step(opt));
        oar_scope_end();
    }
    oar_dist_dp_get_stats(dp, &ds);
    EXPECT(ds.steps == steps && ds.launched_in_backward == 4 * steps && ds.launched_at_sync == 0,
           "%lld steps, %lld launched in backward, %lld at sync", (long long)ds.steps,
           (long long)ds.launched_in_backward, (long long)ds.launched_at_sync);
    EXPECT(ds.comm_seconds > ds.exposed_seconds, "no communication overlapped backward: comm %.6f s, exposed %.6f s",
           ds.comm_seconds, ds.exposed_seconds);
    expect_identical_params(m);
    if (oar_dist_rank() == 0)
        printf("buckets: 4 buckets as configured, all %lld launched from hooks; comm %.4f s of which %.4f s exposed\n",
               (long long)ds.launched_in_backward, ds.comm_seconds, ds.exposed_seconds);
    oar_dist_dp_free(dp);
    oar_optimizer_free(opt);
    oar_module_free(m);
    return 0;
}

/* The C side of a communication hook: each bucket's buffer averaged by an allreduce of its own. */
typedef struct hook_ctx {
    oar_dist_work *work[8];
    int order[8], calls, fail_at;
} hook_ctx;

static oar_status avg_hook(oar_dist_dp *dp, int bucket, void *user) {
    hook_ctx *h = user;
    if (h->calls == h->fail_at) return oar_set_error(OAR_ERR_STATE, "avg_hook: told to fail");
    h->order[h->calls++ % 8] = bucket;
    oar_tensor *buf = oar_dist_dp_bucket_buffer(dp, bucket);
    if (!buf || bucket >= 8) return oar_last_status();
    h->work[bucket] = oar_dist_allreduce(buf, OAR_DIST_AVG, true);
    return h->work[bucket] ? OAR_OK : oar_last_status();
}

static int hooks(void) {
    oar_module *nets[2];
    oar_dist_dp *dps[2];
    oar_optimizer *opts[2];
    oar_dist_strategy s = {.first_bucket_MB = 1024.0 / 1048576.0, .fuse_grad_size_in_MB = 4096.0 / 1048576.0};
    hook_ctx h = {.fail_at = -1};
    for (int k = 0; k < 2; k++) { /* the same model twice: [0] with the hook, [1] built-in */
        oar_manual_seed(3);
        oar_module *layers[] = {oar_nn_linear(8, 64, true), oar_nn_linear(64, 64, true), oar_nn_linear(64, 4, true)};
        nets[k] = oar_nn_sequential(layers, 3);
        dps[k] = oar_dist_data_parallel(nets[k], &s);
        MUST(dps[k] ? OAR_OK : oar_last_status());
        oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
        oo.lr = 0.05;
        opts[k] = oar_optimizer_for(nets[k], &oo);
    }
    EXPECT(oar_dist_dp_set_comm_hook(dps[0], NULL, &h) != OAR_OK && strstr(oar_last_error(), "expected a handle"),
           "a NULL hook");
    MUST(oar_dist_dp_set_comm_hook(dps[0], avg_hook, &h));
    EXPECT(oar_dist_dp_set_comm_hook(dps[0], avg_hook, &h) != OAR_OK && strstr(oar_last_error(), "only be called once"),
           "a second hook");
    EXPECT(!oar_dist_dp_bucket_buffer(dps[0], 4) && strstr(oar_last_error(), "expected 0 <= i < 4"), "bad bucket");
    EXPECT(!oar_dist_dp_bucket_param(dps[0], 0, 1) && strstr(oar_last_error(), "parameter 1"), "bad parameter");
    EXPECT(oar_dist_dp_bucket_param(dps[0], 0, 0) && oar_dist_dp_bucket_buffer(dps[0], 1) &&
           oar_numel(oar_dist_dp_bucket_buffer(dps[0], 1)) == 320, "bucket 1's buffer: 320 elements");
    for (int step = 0; step < 6; step++) {
        oar_manual_seed(21 + (uint64_t)step * 7 + (uint64_t)oar_dist_rank());
        oar_scope_begin();
        oar_tensor *x = oar_randn((int64_t[]){64, 8}, 2, OAR_F32);
        for (int k = 0; k < 2; k++) {
            oar_optimizer_zero_grad(opts[k]);
            h.calls = 0;
            MUST(oar_dist_dp_backward(dps[k], oar_mean(oar_mul(oar_forward(nets[k], x), oar_forward(nets[k], x)),
                                                       NULL, 0, false)));
            if (k == 0) { /* the hook's works: waited for before the optimizer reads .grad */
                for (int b = 0; b < 4; b++) MUST(oar_dist_wait(h.work[b]));
                EXPECT(h.calls == 4 && h.order[0] == 0 && h.order[1] == 1 && h.order[2] == 2 && h.order[3] == 3,
                       "hook calls %d, order %d %d %d %d", h.calls, h.order[0], h.order[1], h.order[2], h.order[3]);
            }
            MUST(oar_optimizer_step(opts[k]));
        }
        oar_scope_end();
    }
    oar_dist_dp_stats ds;
    oar_dist_dp_get_stats(dps[0], &ds);
    EXPECT(ds.launched_in_backward == 24 && ds.launched_at_sync == 0, "%lld hook calls in backward, %lld at sync",
           (long long)ds.launched_in_backward, (long long)ds.launched_at_sync);
    int64_t na, nb;
    float *a = flat_params(nets[0], &na), *b = flat_params(nets[1], &nb);
    EXPECT(na == nb && !memcmp(a, b, sizeof(float) * (size_t)na), "the hook's parameters differ from the built-in's");
    free(a);
    free(b);
    /* a failing hook fails the sync with its message (every rank's fails alike here) */
    h.fail_at = 1;
    h.calls = 0;
    oar_scope_begin();
    oar_optimizer_zero_grad(opts[0]);
    oar_tensor *x = oar_randn((int64_t[]){64, 8}, 2, OAR_F32);
    oar_status st = oar_dist_dp_backward(dps[0], oar_mean(oar_forward(nets[0], x), NULL, 0, false));
    EXPECT(st != OAR_OK && strstr(oar_last_error(), "communication hook failed on bucket 1: avg_hook: told to fail"),
           "a failing hook");
    if (h.work[0] && h.calls > 0) oar_dist_wait(h.work[0]);
    oar_scope_end();
    expect_identical_params(nets[0]);
    if (oar_dist_rank() == 0) printf("hooks: a C hook in bucket order gives the built-in average's bits\n");
    for (int k = 0; k < 2; k++) {
        oar_dist_dp_free(dps[k]);
        oar_optimizer_free(opts[k]);
        oar_module_free(nets[k]);
    }
    return 0;
}

/* Compiled data parallel: the same model and strategy as buckets(), its step compiled. The
 * compiler groups gradients in the order backward makes them, so the membership may differ
 * from the eager buckets (reverse parameter order); the sizes obey the same capacities. */
typedef struct cb_ctx {
    oar_module *m;
    oar_dist_dp *dp;
    oar_optimizer *opt;
} cb_ctx;

static oar_status cb_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    cb_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *y = oar_forward(c->m, in[0]);
    out[0] = oar_mean(oar_mul(y, y), NULL, 0, false);
    oar_status st = out[0] ? oar_dist_dp_backward(c->dp, out[0]) : oar_last_status();
    return st == OAR_OK ? oar_optimizer_step(c->opt) : st;
}

static int cbuckets(void) {
    oar_manual_seed(3);
    oar_module *layers[] = {oar_nn_linear(8, 64, true), oar_nn_linear(64, 64, true), oar_nn_linear(64, 4, true)};
    oar_module *m = oar_nn_sequential(layers, 3);
    oar_dist_strategy s = {.first_bucket_MB = 1024.0 / 1048576.0, .fuse_grad_size_in_MB = 4096.0 / 1048576.0};
    oar_dist_dp *dp = oar_dist_data_parallel(m, &s);
    MUST(dp ? OAR_OK : oar_last_status());
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    cb_ctx c = {m, dp, opt};
    oar_input_spec spec = {OAR_F32, 2, {512, 8}, "x"};
    oar_jit *jit = oar_jit_to_static(cb_step, &c, &(oar_jit_opts){.specs = &spec, .n_specs = 1, .module = m,
                                                                  .optimizer = opt});
    MUST(jit ? OAR_OK : oar_last_status());
    oar_manual_seed(11 + (uint64_t)oar_dist_rank());
    oar_dist_program_stats_reset();
    const int steps = 20;
    for (int k = 0; k < steps; k++) {
        oar_tensor *x = oar_randn((int64_t[]){512, 8}, 2, OAR_F32), *loss = NULL;
        MUST(oar_jit_call(jit, &x, 1, &loss, 1));
        oar_release(loss);
        oar_release(x);
    }
    /* the program: where the starts and waits sit among the other nodes */
    int len = oar_jit_dump(jit, 0, NULL, 0);
    char *text = malloc((size_t)len + 1);
    oar_jit_dump(jit, 0, text, (size_t)len + 1);
    int line = 0, n_start = 0, n_wait = 0, first_start = -1, last_start = -1, first_wait = -1, last_backward = -1;
    int first_update = -1, n_grad = 0;
    int64_t sizes[16] = {0};
    for (char *p = text; *p; line++) {
        char *end = strchr(p, '\n');
        if (end) *end = 0;
        char *meta = strstr(p, ": f32[");
        if (strstr(p, " = allreduce_start")) {
            if (n_start < 16 && meta) sscanf(meta, ": f32[%lld]", (long long *)&sizes[n_start]);
            n_start++;
            if (first_start < 0) first_start = line;
            last_start = line;
        } else if (strstr(p, " = allreduce_wait")) {
            n_wait++;
            if (first_wait < 0) first_wait = line;
        } else if (strstr(p, " = grad_allreduce")) {
            n_grad++;
        } else if (strstr(p, "_backward(") || strstr(p, "matmul(") || strstr(p, "sum(")) {
            last_backward = line;
        } else if (strstr(p, "optimizer_update") && first_update < 0) {
            first_update = line;
        }
        p = end ? end + 1 : p + strlen(p);
    }
    int64_t total = 0;
    for (int i = 0; i < n_start && i < 16; i++) {
        total += sizes[i];
        EXPECT(sizes[i] <= (i == 0 ? 256 : 1024) || sizes[i] == 4096, "bucket %d holds %lld floats", i,
               (long long)sizes[i]);
    }
    EXPECT(n_start >= 4 && n_start == n_wait && n_grad == 0 && total == 4996,
           "%d starts, %d waits, %d unbucketed, %lld elements (expected >= 4 buckets of 4996 in all)", n_start, n_wait,
           n_grad, (long long)total);
    EXPECT(first_start < last_backward, "the first bucket starts at line %d, after backward's last node (%d)",
           first_start, last_backward);
    EXPECT(first_wait > last_start && (first_update < 0 || first_wait < first_update),
           "waits from line %d, starts until %d, first update %d", first_wait, last_start, first_update);
    oar_dist_program_stats ps;
    oar_dist_program_stats_get(&ps);
    EXPECT(ps.collectives == (int64_t)n_start * steps && ps.bytes == 4996 * 4 * (int64_t)steps,
           "%lld program allreduces of %lld bytes", (long long)ps.collectives, (long long)ps.bytes);
    EXPECT(ps.comm_seconds > ps.exposed_seconds, "no communication overlapped backward: comm %.6f s, exposed %.6f s",
           ps.comm_seconds, ps.exposed_seconds);
    expect_identical_params(m);
    if (oar_dist_rank() == 0)
        printf("cbuckets: %d buckets (%lld, %lld, %lld, %lld ... floats), started from line %d while backward runs to "
               "line %d; comm %.4f s of which %.4f s exposed\n", n_start, (long long)sizes[0], (long long)sizes[1],
               (long long)sizes[2], (long long)sizes[3], first_start, last_backward, ps.comm_seconds,
               ps.exposed_seconds);
    free(text);
    oar_jit_free(jit);
    oar_dist_dp_free(dp);
    oar_optimizer_free(opt);
    oar_module_free(m);
    return 0;
}

typedef struct sbn_ctx {
    oar_module *m;
    oar_dist_dp *dp;
    oar_optimizer *opt;
} sbn_ctx;

static oar_status sbn_step(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    sbn_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *loss = oar_cross_entropy(oar_forward(c->m, in[0]), in[1], NULL);
    oar_status st = loss ? oar_dist_dp_backward(c->dp, loss) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    out[0] = loss;
    return st;
}

/* static: the training step compiled (oar_jit_to_static), SyncBatchNorm's sums and the bucket
 * allreduces nodes of the program; it must give the eager step's bits */
static int syncbn(int steps, int64_t batch, const char *out, bool plain, bool compiled) {
    oar_dataset *d = synthetic(192);
    oar_manual_seed(7);
    oar_module *layers[4]; /* one by one, the norm last: the linears draw the same initial values */
    layers[0] = oar_nn_linear(8, 16, true);
    layers[3] = oar_nn_linear(16, 4, true);
    layers[2] = oar_nn_activation(OAR_ACT_TANH, 0);
    layers[1] = plain ? oar_nn_batch_norm1d(16, 1e-5, 0.1, true, true) : oar_dist_sync_batch_norm(16, 1e-5, 0.1);
    oar_module *m = oar_nn_sequential(layers, 4);
    oar_dist_dp *dp = oar_dist_data_parallel(m, NULL);
    MUST(dp ? OAR_OK : oar_last_status());
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = batch, .shuffle = true, .seed = 99});
    MUST(oar_dist_shard_loader(l));
    FILE *f = oar_dist_rank() == 0 && out ? fopen(out, "w") : NULL;
    int step = 0;
    sbn_ctx ctx = {m, dp, opt};
    oar_jit *jit = NULL;
    for (int64_t epoch = 0; step < steps; epoch++) {
        MUST(oar_loader_start_epoch(l, epoch));
        oar_tensor *x, *y;
        oar_status st;
        while (step < steps && oar_loader_next(l, &x, &y, &st)) {
            oar_scope_begin();
            oar_tensor *loss = NULL, *batch_in[2] = {x, y};
            if (compiled && !jit) {
                oar_input_spec specs[2] = {{OAR_F32, 2, {oar_shape(x)[0], 8}, "x"}, {oar_dtype_of(y), 1, {oar_shape(y)[0]}, "y"}};
                jit = oar_jit_to_static(sbn_step, &ctx, &(oar_jit_opts){.specs = specs, .n_specs = 2, .module = m,
                                                                       .optimizer = opt});
                MUST(jit ? OAR_OK : oar_last_status());
            }
            MUST(jit ? oar_jit_call(jit, batch_in, 2, &loss, 1) : sbn_step(&ctx, batch_in, 2, &loss, 1));
            double gl = 0;
            oar_tensor *global = oar_from_data(oar_data(oar_detach(loss)), NULL, 0, OAR_F32);
            if (jit) oar_release(loss);
            MUST(oar_dist_wait(oar_dist_allreduce(global, OAR_DIST_AVG, true)));
            MUST(oar_item(global, &gl));
            if (f) fprintf(f, "step %d loss %a norm %a\n", step, (float)gl, gl);
            oar_scope_end();
            oar_release(x);
            oar_release(y);
            step++;
        }
        MUST(st);
    }
    expect_identical_params(m);
    if (f) {
        int64_t n, k = 0;
        float *v = flat_params(m, &n);
        for (int64_t i = 0; i < n; i++) fprintf(f, "param %lld %a\n", (long long)k++, v[i]);
        free(v);
        const char *stats[2] = {"1.running_mean", "1.running_var"};
        for (int s = 0; s < 2; s++) {
            oar_tensor *t = oar_module_get(m, stats[s]);
            const float *p = oar_data(t);
            for (int64_t i = 0; i < oar_numel(t); i++) fprintf(f, "param %lld %a\n", (long long)k++, p[i]);
        }
        double tracked = 0; /* the batches counted: one per step, compiled or not */
        MUST(oar_item(oar_module_get(m, "1.num_batches_tracked"), &tracked));
        fprintf(f, "param %lld %a\n", (long long)k++, (float)tracked);
        fclose(f);
    }
    oar_jit_free(jit);
    /* evaluation: the running statistics, no collective */
    oar_module_train(m, false);
    oar_tensor *x1 = oar_randn((int64_t[]){3, 8}, 2, OAR_F32), *o = oar_forward(m, x1);
    MUST(o ? OAR_OK : oar_last_status());
    oar_release(o);
    oar_release(x1);
    oar_loader_free(l);
    oar_optimizer_free(opt);
    oar_dist_dp_free(dp);
    oar_module_free(m);
    oar_dataset_free(d);
    return 0;
}

typedef struct branchy {
    oar_module *fc, *head, *branch, *never;
    bool use_branch;
} branchy;

static oar_status branchy_forward(oar_module *self, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    branchy *b = oar_module_state(self);
    oar_tensor *h = oar_tanh(oar_forward(b->fc, in[0]));
    oar_tensor *y = oar_forward(b->head, h);
    if (b->use_branch) y = oar_add(y, oar_forward(b->branch, h));
    out[0] = y;
    return y ? OAR_OK : oar_last_status();
}

static oar_module *branchy_new(branchy *b, bool use_branch) {
    static const oar_module_ops ops = {.type_name = "Branchy", .forward = branchy_forward};
    oar_module *m = oar_module_new(&ops, b);
    b->use_branch = use_branch;
    oar_module_add_child(m, "fc", b->fc = oar_nn_linear(6, 10, true));
    oar_module_add_child(m, "head", b->head = oar_nn_linear(10, 3, true));
    oar_module_add_child(m, "branch", b->branch = oar_nn_linear(10, 3, true));
    oar_module_add_child(m, "never", b->never = oar_nn_linear(3, 3, true));
    return m;
}

static int unused(void) {
    int r = oar_dist_rank();
    branchy bs, bt;
    oar_manual_seed(21);
    oar_module *m = branchy_new(&bs, r == 0);
    oar_manual_seed(21);
    oar_module *twin = branchy_new(&bt, r == 0); /* same init on every rank: rank 0's values */
    oar_dist_dp *dp = oar_dist_data_parallel(m, &(oar_dist_strategy){.first_bucket_MB = 1e-4,
                                                                      .fuse_grad_size_in_MB = 1e-4});
    MUST(dp ? OAR_OK : oar_last_status());
    for (int k = 0; k < 3; k++) {
        oar_scope_begin();
        oar_manual_seed(100 + (uint64_t)(10 * k + r));
        oar_tensor *x = oar_randn((int64_t[]){5, 6}, 2, OAR_F32);
        oar_module_zero_grad(m);
        oar_module_zero_grad(twin);
        MUST(oar_dist_dp_backward(dp, oar_sum(oar_forward(m, x), NULL, 0, false)));
        MUST(oar_backward(oar_sum(oar_forward(twin, x), NULL, 0, false), NULL, false));
        for (int i = 0; i < oar_module_num_parameters(m); i++) {
            const char *name;
            oar_tensor *p = oar_module_parameter(m, i, &name), *q = oar_module_parameter(twin, i, NULL);
            oar_tensor *want = oar_grad_get(q) ? oar_detach(oar_grad_get(q)) : oar_zeros(oar_shape(q), oar_ndim(q), OAR_F32);
            want = oar_add(want, oar_zeros(oar_shape(q), oar_ndim(q), OAR_F32)); /* our own copy */
            MUST(oar_dist_wait(oar_dist_allreduce(want, OAR_DIST_AVG, true)));
            bool never = !strncmp(name, "never.", 6);
            oar_tensor *g = oar_grad_get(p);
            if (never) {
                EXPECT(!g, "'%s' is used by no rank but got a gradient", name);
            } else {
                EXPECT(g && oar_numel(g) == oar_numel(want) &&
                       !memcmp(oar_data(g), oar_data(want), sizeof(float) * (size_t)oar_numel(g)),
                       "step %d: the gradient of '%s' is not the average of the ranks' own gradients (%g vs %g)", k, name,
                       g ? (double)((float *)oar_data(g))[0] : -1.0, (double)((float *)oar_data(want))[0]);
            }
        }
        oar_scope_end();
    }
    if (r == 0) printf("unused: branch used by rank 0 only, 'never' by none: no hang, averages exact\n");
    oar_dist_dp_free(dp);
    oar_module_free(m);
    oar_module_free(twin);
    return 0;
}

static int mismatch(void) {
    int r = oar_dist_rank();
    oar_module *m = mlp(8, r == 1 ? 24 : 32, 4);
    oar_clear_error();
    oar_dist_dp *dp = oar_dist_data_parallel(m, NULL);
    EXPECT(!dp, "a model that differs between ranks was accepted");
    const char *e = oar_last_error();
    EXPECT(strstr(e, "mismatched collective") && strstr(e, "rank 0") && strstr(e, "rank 1") && strstr(e, "the model"),
           "the message does not name both ranks and the model: %s", e);
    printf("rank %d: model mismatch reported: %s\n", r, e);
    oar_module_free(m);
    /* the same model cut into different buckets (rank 1 was given other sizes): the first
     * bucket's allreduce fails on both ranks, naming the parameters each put in it */
    oar_manual_seed(2);
    m = mlp(8, 32, 4);
    oar_dist_strategy tiny = {.first_bucket_MB = 1e-4, .fuse_grad_size_in_MB = 1e-4};
    oar_dist_dp *dp2 = oar_dist_data_parallel(m, r == 1 ? &tiny : NULL);
    MUST(dp2 ? OAR_OK : oar_last_status());
    oar_tensor *x = oar_randn((int64_t[]){4, 8}, 2, OAR_F32);
    oar_status st = oar_dist_dp_backward(dp2, oar_sum(oar_forward(m, x), NULL, 0, false));
    e = oar_last_error();
    EXPECT(st != OAR_OK && strstr(e, "gradient bucket 0 (4.bias") && strstr(e, "rank 0") && strstr(e, "rank 1") &&
           strstr(e, "4.weight"), "expected a bucket mismatch naming both ranks and parameters, got: %s", e);
    printf("rank %d: bucket mismatch reported: %s\n", r, e);
    if (!failures) printf("rank %d: mismatch OK\n", r);
    fflush(stdout);
    exit(failures ? 1 : 0); /* unmatched messages are in flight: MPI cannot finish cleanly */
}

static int stall(void) {
    int r = oar_dist_rank();
    oar_tensor *t = oar_zeros((int64_t[]){4}, 1, OAR_F32);
    if (r == 1) {
        sleep(4); /* skips the collective, then leaves */
        oar_release(t);
        return 0;
    }
    double t0 = wall_ms();
    oar_status st = oar_dist_wait(oar_dist_allreduce(t, OAR_DIST_SUM, true));
    double ms = wall_ms() - t0;
    EXPECT(st != OAR_OK && strstr(oar_last_error(), "no progress") && strstr(oar_last_error(), "rank 1"),
           "expected a timeout naming rank 1, got status %d", (int)st);
    EXPECT(ms >= 900 && ms < 3000, "the timeout took %.0f ms, expected about 1000", ms);
    printf("rank %d: stall reported after %.0f ms: %s\n", r, ms, oar_last_error());
    if (!failures) printf("rank %d: stall OK\n", r);
    fflush(stdout);
    exit(failures ? 1 : 0); /* a collective is in flight: MPI cannot finish cleanly */
}

/* Reads a train output: n losses, norms, parameters. */
static int read_run(const char *path, double *loss, double *norm, double *param, int cap, int *n_steps) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char kind[16], a[64], b[64], c[64];
    int k, steps = 0, params = 0;
    while (fscanf(f, "%15s %d", kind, &k) == 2) {
        if (!strcmp(kind, "step") && fscanf(f, "%63s %63s %63s %63s", a, b, c, a) == 4 && k < cap) {
            loss[k] = strtod(b, NULL);
            norm[k] = strtod(a, NULL);
            steps = k + 1;
        } else if (!strcmp(kind, "param") && fscanf(f, "%63s", a) == 1 && k < cap) {
            param[k] = strtod(a, NULL);
            params = k + 1;
        }
    }
    fclose(f);
    *n_steps = steps;
    return params;
}

static int compare(const char *pa, const char *pb, double loss_tol, double param_tol) {
    enum { CAP = 1 << 16 };
    double *v = calloc(6 * CAP, sizeof(double));
    int sa, sb;
    int na = read_run(pa, v, v + CAP, v + 2 * CAP, CAP, &sa), nb = read_run(pb, v + 3 * CAP, v + 4 * CAP, v + 5 * CAP, CAP, &sb);
    EXPECT(na > 0 && na == nb && sa > 0 && sa == sb, "%s and %s: %d/%d parameters, %d/%d steps", pa, pb, na, nb, sa, sb);
    double dl = 0, dn = 0, dp = 0;
    for (int k = 0; k < sa && k < sb; k++) {
        dl = fmax(dl, fabs(v[k] - v[3 * CAP + k]) / fabs(v[k]));
        dn = fmax(dn, fabs(v[CAP + k] - v[4 * CAP + k]) / fabs(v[CAP + k]));
    }
    for (int k = 0; k < na && k < nb; k++) dp = fmax(dp, fabs(v[2 * CAP + k] - v[5 * CAP + k]));
    printf("compare %s %s: %d steps, losses within %.3g (relative), clip norms %.3g, parameters %.3g (absolute)\n",
           pa, pb, sa, dl, dn, dp);
    EXPECT(dl <= loss_tol && dn <= loss_tol && dp <= param_tol, "beyond the bounds %g (losses, norms), %g (parameters)",
           loss_tol, param_tol);
    free(v);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dist_worker train|sampler|buckets|cbuckets|unused|kill|mismatch|stall ...\n");
        return 2;
    }
    oar_set_num_threads(1);
    MUST(oar_dist_init(NULL));
    const char *mode = argv[1];
    int rc = 0;
    if (!strcmp(mode, "train") && argc >= 5)
        rc = train(atoi(argv[2]), atoll(argv[3]), argv[4], argc > 5 && !strcmp(argv[5], "mpi"),
                   argc > 5 && !strcmp(argv[5], "static"), argc > 5 && !strncmp(argv[5], "accum", 5) ? atoi(argv[5] + 5) : 1,
                   -1, NULL);
    else if (!strcmp(mode, "kill") && argc >= 3) rc = train(1000000, 8, NULL, false, false, 1, 5, argv[2]);
    else if (!strcmp(mode, "cbuckets")) rc = cbuckets();
    else if (!strcmp(mode, "syncbn") && argc >= 5)
        rc = syncbn(atoi(argv[2]), atoll(argv[3]), argv[4], argc > 5 && !strcmp(argv[5], "plain"),
                    argc > 5 && !strcmp(argv[5], "static"));
    else if (!strcmp(mode, "compare") && argc >= 6) rc = compare(argv[2], argv[3], atof(argv[4]), atof(argv[5]));
    else if (!strcmp(mode, "sampler")) rc = sampler();
    else if (!strcmp(mode, "buckets")) rc = buckets();
    else if (!strcmp(mode, "hooks")) rc = hooks();
    else if (!strcmp(mode, "unused")) rc = unused();
    else if (!strcmp(mode, "mismatch")) rc = mismatch();
    else if (!strcmp(mode, "stall")) rc = stall();
    else {
        fprintf(stderr, "dist_worker: unknown mode or missing arguments: %s\n", mode);
        return 2;
    }
    MUST(oar_dist_finalize());
    return rc || failures ? 1 : 0;
}
