/* Distributed benchmarks (bench/dist.sh runs them; docs/dist.md has the results). JSON lines.
 *   dist_bench allreduce            per size: raw MPI_Allreduce on the main thread, oar's
 *                                   fixed rank-order allreduce and oar's MPI allreduce (both
 *                                   through oar's engine); median of 30 (the three take turns
 *                                   within each repetition), bus bandwidth
 *   dist_bench train MODEL B STEPS [eager|static [BUCKET_MB]]  data-parallel training steps of a
 *                                   zoo model on random data at per-rank batch B: samples/s over
 *                                   all ranks, and how much of the bucket communication was hidden
 *                                   behind backward; static: the step compiled (buckets made by the
 *                                   compiler); BUCKET_MB: fuse_grad_size_in_MB (default 32)
 * Run under mpirun (any N, 1 included); 1 thread per rank. */
#include "oar.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

static void die(const char *what) {
    fprintf(stderr, "dist_bench: %s: %s\n", what, oar_last_error());
    exit(1);
}

/* The three allreduces take turns within each repetition (after a barrier each), so a busy
 * machine slows them alike; paired: the median over repetitions of raw time / fixed time. */
static int allreduce(void) {
    int n = oar_dist_world_size(), r = oar_dist_rank();
    const int64_t sizes[] = {1024, 16384, 262144, 524288, 1048576, 2097152, 8388608}; /* floats: 4 KiB .. 32 MiB */
    enum { REPS = 30, N_SIZES = sizeof sizes / sizeof *sizes };
    for (int s = 0; s < N_SIZES; s++) {
        int64_t count = sizes[s];
        oar_tensor *t = oar_randn(&count, 1, OAR_F32);
        double raw[REPS], fixed[REPS], mpi[REPS], paired[REPS];
        for (int k = -2; k < REPS; k++) { /* two warm-ups */
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            MPI_Allreduce(MPI_IN_PLACE, oar_data(t), (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            double t1 = now();
            if (oar_dist_wait(oar_dist_barrier()) != OAR_OK) die("barrier");
            double t2 = now();
            if (oar_dist_wait(oar_dist_allreduce(t, OAR_DIST_AVG, true)) != OAR_OK) die("allreduce");
            double t3 = now();
            if (oar_dist_wait(oar_dist_barrier()) != OAR_OK) die("barrier");
            double t4 = now();
            if (oar_dist_wait(oar_dist_allreduce(t, OAR_DIST_AVG, false)) != OAR_OK) die("allreduce");
            double t5 = now();
            if (k < 0) continue;
            raw[k] = t1 - t0, fixed[k] = t3 - t2, mpi[k] = t5 - t4, paired[k] = raw[k] / fixed[k];
        }
        double bytes = 4.0 * (double)count, f = n > 1 ? 2.0 * (n - 1) / n : 1.0;
        double mr = median(raw, REPS), mf = median(fixed, REPS), mm = median(mpi, REPS), mp = median(paired, REPS);
        if (r == 0)
            printf("{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %.0f, \"raw_mpi_us\": %.1f, \"oar_fixed_us\": %.1f, "
                   "\"oar_mpi_us\": %.1f, \"raw_mpi_busbw_GBs\": %.3f, \"oar_fixed_busbw_GBs\": %.3f, "
                   "\"oar_mpi_busbw_GBs\": %.3f, \"fixed_vs_raw\": %.3f, \"fixed_vs_raw_paired\": %.3f, "
                   "\"spread_fixed_us\": [%.1f, %.1f]}\n",
                   n, bytes, 1e6 * mr, 1e6 * mf, 1e6 * mm, bytes / mr * f / 1e9, bytes / mf * f / 1e9,
                   bytes / mm * f / 1e9, mr / mf, mp, 1e6 * fixed[0], 1e6 * fixed[REPS - 1]);
        oar_release(t);
    }
    return 0;
}

typedef struct step_ctx {
    oar_module *m;
    oar_dist_dp *dp;
    oar_optimizer *opt;
    const oar_zoo_info *info;
    int64_t batch, t;
} step_ctx;

static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    step_ctx *c = user;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *logits = oar_forward(c->m, in[0]);
    if (c->info->input == OAR_ZOO_TOKENS)
        logits = oar_reshape(logits, (int64_t[]){c->batch * c->t, c->info->num_classes}, 2);
    out[0] = oar_cross_entropy(logits, in[1], NULL);
    oar_status st = out[0] ? oar_dist_dp_backward(c->dp, out[0]) : oar_last_status();
    return st == OAR_OK ? oar_optimizer_step(c->opt) : st;
}

static int train(const char *name, int64_t batch, int steps, bool compiled, double bucket_mb) {
    const oar_zoo_info *info = oar_zoo_find(name);
    if (!info) die("unknown model");
    oar_manual_seed(1);
    oar_module *m = oar_zoo_create(name, NULL);
    if (!m) die("model");
    oar_dist_strategy strategy = {.fuse_grad_size_in_MB = bucket_mb};
    oar_dist_dp *dp = oar_dist_data_parallel(m, &strategy);
    if (!dp) die("data_parallel");
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    oo.momentum = 0.9;
    oar_optimizer *opt = oar_optimizer_for(m, &oo);
    oar_manual_seed(100 + (uint64_t)oar_dist_rank());
    oar_tensor *x, *y;
    int64_t t = info->context ? info->context : 1;
    if (info->input == OAR_ZOO_TOKENS) {
        x = oar_randint(0, info->num_classes, (int64_t[]){batch, t}, 2, OAR_I64);
        y = oar_randint(0, info->num_classes, (int64_t[]){batch * t}, 1, OAR_I64);
    } else {
        int64_t side = info->in_channels == 1 ? 28 : 32; /* the zoo's images: MNIST-like or CIFAR-like */
        int64_t img[] = {batch, info->in_channels, side, side}, feat[] = {batch, info->in_channels};
        x = info->input == OAR_ZOO_IMAGE ? oar_randn(img, 4, OAR_F32) : oar_randn(feat, 2, OAR_F32);
        y = oar_randint(0, info->num_classes, (int64_t[]){batch}, 1, OAR_I64);
    }
    step_ctx c = {m, dp, opt, info, batch, t};
    oar_jit *jit = NULL;
    if (compiled) {
        oar_input_spec specs[2] = {{oar_dtype_of(x), oar_ndim(x), {0}, "x"}, {OAR_I64, 1, {oar_shape(y)[0]}, "y"}};
        memcpy(specs[0].shape, oar_shape(x), sizeof(int64_t) * (size_t)oar_ndim(x));
        if (!(jit = oar_jit_to_static(step_fn, &c, &(oar_jit_opts){.specs = specs, .n_specs = 2, .module = m,
                                                                   .optimizer = opt})))
            die("compile");
    }
    double *times = malloc(sizeof(double) * (size_t)steps);
    oar_dist_dp_stats before = {0};
    oar_dist_program_stats pbefore = {0};
    for (int k = -3; k < steps; k++) {
        if (k == 0) oar_dist_dp_get_stats(dp, &before), oar_dist_program_stats_get(&pbefore);
        double t0 = now();
        oar_scope_begin();
        oar_tensor *in[2] = {x, y}, *loss = NULL;
        if ((jit ? oar_jit_call(jit, in, 2, &loss, 1) : step_fn(&c, in, 2, &loss, 1)) != OAR_OK) die("step");
        if (jit) oar_release(loss);
        oar_scope_end();
        if (k >= 0) times[k] = now() - t0;
    }
    oar_dist_dp_stats after;
    oar_dist_dp_get_stats(dp, &after);
    oar_dist_program_stats pafter;
    oar_dist_program_stats_get(&pafter);
    double med = median(times, steps), comm = after.comm_seconds - before.comm_seconds;
    double exposed = after.exposed_seconds - before.exposed_seconds;
    int buckets = after.n_buckets;
    if (jit) {
        comm = pafter.comm_seconds - pbefore.comm_seconds;
        exposed = pafter.exposed_seconds - pbefore.exposed_seconds;
        buckets = (int)((pafter.collectives - pbefore.collectives) / steps);
    }
    int n = oar_dist_world_size();
    if (oar_dist_rank() == 0)
        printf("{\"bench\": \"train\", \"model\": \"%s\", \"mode\": \"%s\", \"ranks\": %d, \"batch_per_rank\": %lld, "
               "\"step_ms\": %.2f, \"step_ms_spread\": [%.2f, %.2f], \"samples_per_s\": %.1f, \"bucket_mb\": %g, \"buckets\": %d, "
               "\"comm_ms_per_step\": %.3f, \"exposed_ms_per_step\": %.3f, \"hidden_fraction\": %.3f}\n",
               name, jit ? "static" : "eager", n, (long long)batch, 1e3 * med, 1e3 * times[0], 1e3 * times[steps - 1],
               (double)(n * batch) / med, bucket_mb > 0 ? bucket_mb : 32.0, buckets, 1e3 * comm / steps, 1e3 * exposed / steps,
               comm > 0 ? 1.0 - exposed / comm : 0.0);
    oar_jit_free(jit);
    free(times);
    oar_release(x);
    oar_release(y);
    oar_dist_dp_free(dp);
    oar_optimizer_free(opt);
    oar_module_free(m);
    return 0;
}

int main(int argc, char **argv) {
    oar_set_num_threads(1);
    if (oar_dist_init(NULL) != OAR_OK) die("init");
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "allreduce")) {
        if (oar_dist_world_size() < 2) {
            fprintf(stderr, "dist_bench allreduce: run it under mpirun with 2 or more ranks\n");
            return 2;
        }
        rc = allreduce();
    } else if (argc >= 5 && !strcmp(argv[1], "train")) {
        rc = train(argv[2], atoll(argv[3]), atoi(argv[4]), argc >= 6 && !strcmp(argv[5], "static"),
                   argc >= 7 ? atof(argv[6]) : 0.0);
    } else {
        fprintf(stderr, "usage: dist_bench allreduce | train MODEL BATCH STEPS [eager|static [BUCKET_MB]]\n");
    }
    if (oar_dist_finalize() != OAR_OK) die("finalize");
    return rc;
}
