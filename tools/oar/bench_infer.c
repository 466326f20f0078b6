/* `oar bench --workload resnet20-infer`: ResNet-20 inference in evaluation mode with gradients
 * off, the counterpart of resnet20_infer in ../shared/bench/torch_workloads.py (same input
 * shapes, 300 timed calls at batch 1 and 40 at batch 32 by default). --mode eager calls the
 * module; --mode static compiles the same forward with oar_jit_to_static, the path users get
 * (inference-only passes run since the program updates nothing). --disable-pass a,b switches
 * passes off by name for A/B runs in one build. Prints one JSON object. */
#include "cli.h"
#include "bench_util.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + 1e-6 * (double)ts.tv_nsec;
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    out[0] = oar_forward(user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int call(oar_module *m, oar_jit *jit, oar_tensor *x) {
    oar_scope_begin();
    oar_tensor *out[1] = {0};
    oar_status st = jit ? oar_jit_call(jit, &x, 1, out, 1) : forward_fn(m, &x, 1, out, 1);
    oar_scope_end();
    if (st != OAR_OK) fprintf(stderr, "oar bench: %s\n", oar_last_error());
    return st == OAR_OK ? 0 : 1;
}

int oar_bench_infer(int argc, char **argv) {
    const char *mode = cli_flag_value(argc, argv, "--mode"), *th = cli_flag_value(argc, argv, "--threads");
    const char *bs = cli_flag_value(argc, argv, "--batch"), *st_s = cli_flag_value(argc, argv, "--steps");
    const char *off = cli_flag_value(argc, argv, "--disable-pass"), *profile = cli_flag_value(argc, argv, "--profile");
    if (mode && strcmp(mode, "eager") != 0 && strcmp(mode, "static") != 0) {
        fprintf(stderr, "oar bench: unknown --mode %s; expected eager or static\n", mode);
        return 2;
    }
    if (profile && strcmp(profile, "timer") != 0 && strcmp(profile, "full") != 0) {
        fprintf(stderr, "oar bench: unknown --profile '%s'; expected timer or full\n", profile);
        return 2;
    }
    const char *dev = cli_flag_value(argc, argv, "--device");
    if (dev && strcmp(dev, "cpu") != 0) {
        fprintf(stderr, "oar bench: resnet20-infer times the host predictor; --device %s is for the training "
                        "workloads\n", dev);
        return 2;
    }
    bool statik = mode && !strcmp(mode, "static");
    int64_t batch = bs ? atoll(bs) : 1;
    if (batch < 1) {
        fprintf(stderr, "oar bench: expected --batch >= 1, got %s\n", bs);
        return 2;
    }
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        return 2;
    }
    int steps = st_s ? atoi(st_s) : batch == 1 ? 300 : 40, warmup = 5;
    if (steps < 1) steps = 1;
    oar_jit_opts jo = {0};
    if (cli_disable_passes(&jo.strategy, off)) return 2;

    oar_manual_seed(0);
    oar_module *m = oar_zoo_create("resnet20", NULL);
    if (!m) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        return 1;
    }
    oar_module_train(m, false);
    oar_manual_seed(1234);
    int64_t xs[4] = {batch, 3, 32, 32};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32);
    oar_jit *jit = NULL;
    if (statik) {
        jo.module = m;
        jit = oar_jit_to_static(forward_fn, m, &jo);
    }
    double *t = malloc(sizeof(double) * (size_t)steps);
    int rc = x && t && (!statik || jit) ? 0 : 1;
    oar_profiler_opts po = oar_profiler_defaults(profile && !strcmp(profile, "full") ? OAR_PROFILER_FULL
                                                                                      : OAR_PROFILER_TIMER);
    oar_no_grad_begin();
    for (int i = 0; i < warmup + steps && rc == 0; i++) {
        if (profile && i == warmup && oar_profiler_start(&po) != OAR_OK) {
            fprintf(stderr, "oar bench: %s\n", oar_last_error());
            rc = 1;
            break;
        }
        if (i == warmup) oar_memory_reset_peak(OAR_CPU);
        double t0 = now_ms();
        rc = call(m, jit, x);
        if (profile) oar_profiler_step(batch);
        if (i >= warmup) t[i - warmup] = now_ms() - t0;
    }
    oar_no_grad_end();
    if (profile) {
        oar_profiler_stop();
        char *sum = malloc(1 << 16);
        if (sum) { /* tables on stderr: stdout stays one JSON object */
            oar_profiler_summary(sum, 1 << 16, OAR_PROFILER_SORT_TOTAL, 20);
            fputs(sum, stderr);
            free(sum);
        }
    }
    if (rc == 0) {
        qsort(t, (size_t)steps, sizeof(double), bench_cmp_double);
        double med = t[steps / 2];
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("{\"workload\": \"resnet20-infer\", ");
        bench_print_settings(&(bench_settings){.mode = statik ? "static" : "eager", .batch = batch, .disabled_passes = off});
        printf(", \"steps\": %d, \"median_ms\": %.4f, \"p10_ms\": %.4f, \"p90_ms\": %.4f, \"min_ms\": %.4f, "
               "\"max_ms\": %.4f, \"samples_per_s\": %.1f, \"peak_alloc_mb\": %.2f, \"peak_rss_mb\": %.1f}\n",
               steps, med, t[steps / 10], t[steps * 9 / 10], t[0], t[steps - 1], (double)batch / med * 1e3,
               (double)oar_memory_stats_get(OAR_CPU).peak_bytes / (1 << 20), (double)ru.ru_maxrss / 1024.0);
    }
    free(t);
    oar_jit_free(jit);
    oar_release(x);
    oar_module_free(m);
    return rc;
}
