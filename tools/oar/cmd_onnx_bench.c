/* `oar onnx-bench MODEL.onnx --input X.npy`: the time to load the model, to compile and run it
 * once (the first call traces, runs the passes and plans memory), and the median of the later
 * runs with the 10th and 90th percentiles and the process's CPU time per timed run (cpu_ms: all
 * threads; at 1 thread on a loaded machine the steadier measure), as one JSON line.
 * bench/onnx_vs_ort.py runs it beside onnxruntime and PyTorch. --profile prints the op tables on stderr; --trace OUT.json writes every
 * call of the timed runs (op, kernel, input shapes, duration) as a Chrome trace, to compare node
 * by node with onnxruntime's profiler. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread), ms: at a load above the core count the wall
 * time is mostly waiting for a core, the CPU time is not. */
static double cpu_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int oar_cmd_onnx_bench(int argc, char **argv) {
    static const cli_flag flags[] = {{"--input", CLI_TEXT}, {"--threads", CLI_COUNT}, {"--steps", CLI_COUNT},
                                     {"--profile", CLI_NONE}, {"--trace", CLI_TEXT}};
    if (cli_check_flags("onnx-bench", argc, argv, flags, CLI_N_FLAGS(flags), 1)) return 2;
    const char *path = NULL, *input = cli_flag_value(argc, argv, "--input");
    const char *trace = cli_flag_value(argc, argv, "--trace");
    const char *th = cli_flag_value(argc, argv, "--threads"), *st = cli_flag_value(argc, argv, "--steps");
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--profile")) continue;
        if (argv[i][0] == '-') i++;
        else if (!path) path = argv[i];
    }
    if (!path || !input) {
        fprintf(stderr, "usage: oar onnx-bench MODEL.onnx --input X.npy [--threads N] [--steps N] [--profile] [--trace OUT.json]\n");
        return 2;
    }
    int steps = st ? atoi(st) : 20;
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar onnx-bench: %s\n", oar_last_error());
        return 2;
    }
    int rc = 1;
    oar_scope_begin();
    oar_tensor *x = oar_npy_load(input), *y = NULL;
    double t0 = now_ms();
    oar_onnx_model *m = x ? oar_onnx_load(path, NULL) : NULL;
    double t_load = now_ms() - t0;
    double *times = calloc((size_t)steps, sizeof(double));
    if (!m || !times || oar_onnx_num_inputs(m) != 1 || oar_onnx_num_outputs(m) < 1) goto done;
    oar_tensor *out[16] = {0};
    int n_out = oar_onnx_num_outputs(m);
    t0 = now_ms();
    if (oar_onnx_run(m, &x, 1, out, n_out) != OAR_OK) goto done;
    double t_first = now_ms() - t0;
    for (int k = 0; k < n_out; k++) oar_release(out[k]);
    oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
    bool profile = cli_has_flag(argc, argv, "--profile") || trace;
    if (profile && oar_profiler_start(&po) != OAR_OK) goto done;
    double c0 = cpu_ms();
    for (int s = 0; s < steps; s++) {
        t0 = now_ms();
        if (oar_onnx_run(m, &x, 1, out, n_out) != OAR_OK) goto done;
        times[s] = now_ms() - t0;
        for (int k = 0; k < n_out; k++) oar_release(out[k]);
        if (profile) oar_profiler_step(oar_size(x, 0));
    }
    double cpu_per_run = steps > 0 ? (cpu_ms() - c0) / steps : 0;
    if (profile) { /* the per-op tables on stderr: stdout stays one JSON line */
        oar_profiler_stop();
        if (trace && oar_profiler_export_chrome_trace(trace) != OAR_OK) goto done;
        char *sum = malloc(1 << 16);
        if (sum) {
            oar_profiler_summary(sum, 1 << 16, OAR_PROFILER_SORT_TOTAL, 25);
            fputs(sum, stderr);
            free(sum);
        }
    }
    qsort(times, (size_t)steps, sizeof(double), by_value);
    printf("{\"model\": \"%s\", \"batch\": %lld, \"threads\": %d, \"steps\": %d, \"load_ms\": %.3f, "
           "\"first_run_ms\": %.3f, \"median_ms\": %.4f, \"p10_ms\": %.4f, \"p90_ms\": %.4f, \"cpu_ms\": %.4f}\n",
           path, (long long)oar_size(x, 0), oar_get_num_threads(), steps, t_load, t_first, times[steps / 2],
           times[steps / 10], times[(steps * 9) / 10 < steps ? (steps * 9) / 10 : steps - 1], cpu_per_run);
    rc = 0;
    (void)y;
done:
    if (rc) fprintf(stderr, "oar onnx-bench: %s\n", oar_last_error());
    free(times);
    oar_onnx_free(m);
    oar_scope_end();
    return rc;
}
