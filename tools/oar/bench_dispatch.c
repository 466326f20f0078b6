/* Framework overhead per small eager op: a 64-element f32 add, with and without autograd
 * recording. Medians over repeated timed blocks; the spread is reported too. With
 * --compare-torch the same measurement runs in PyTorch (Debian's python3-torch) in the same
 * run, and the ratio is printed. */
#include "cli.h"
#include "bench_util.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* us per op for `iters` adds, repeated `reps` times: median, min, max */
static void time_adds(oar_tensor *a, oar_tensor *b, int iters, int reps, double out[3]) {
    double *t = malloc(sizeof(double) * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        for (int i = 0; i < iters; i++) oar_release(oar_add(a, b));
        t[r] = (bench_now_s() - t0) / iters * 1e6;
    }
    qsort(t, (size_t)reps, sizeof(double), bench_cmp_double);
    out[0] = t[reps / 2];
    out[1] = t[0];
    out[2] = t[reps - 1];
    free(t);
}

static double torch_us(int grad) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import torch,time;torch.set_num_threads(1);"
             "a=torch.randn(64,requires_grad=%s);b=torch.randn(64);n=20000;ts=[]\n"
             "for r in range(7):\n t=time.perf_counter()\n for i in range(n): a+b\n"
             " ts.append((time.perf_counter()-t)/n*1e6)\nprint(sorted(ts)[3])\" 2>/dev/null",
             grad ? "True" : "False");
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    double v = -1;
    if (fscanf(p, "%lf", &v) != 1) v = -1;
    pclose(p);
    return v;
}

int oar_bench_dispatch(int argc, char **argv) {
    int iters = cli_has_flag(argc, argv, "--quick") ? 2000 : 100000, reps = 9;
    int64_t n = 64;
    oar_manual_seed(0);
    oar_tensor *a = oar_randn(&n, 1, OAR_F32), *b = oar_randn(&n, 1, OAR_F32);
    double nograd[3], grad[3];
    time_adds(a, b, iters / 10, 1, nograd); /* warm caches and the allocator */
    time_adds(a, b, iters, reps, nograd);
    oar_set_requires_grad(a, true);
    time_adds(a, b, iters / 10, 1, grad);
    time_adds(a, b, iters, reps, grad);
    printf("{\"workload\": \"dispatch\", ");
    bench_print_settings(&(bench_settings){.mode = "eager", .batch = -1}); /* one op on 64 elements: no batch */
    printf(", \"op\": \"add\", \"numel\": 64, "
           "\"us_per_op_nograd\": %.4f, \"us_per_op_nograd_min\": %.4f, \"us_per_op_nograd_max\": %.4f, "
           "\"us_per_op_grad\": %.4f, \"us_per_op_grad_min\": %.4f, \"us_per_op_grad_max\": %.4f",
           nograd[0], nograd[1], nograd[2], grad[0], grad[1], grad[2]);
    if (cli_has_flag(argc, argv, "--compare-torch")) {
        double tn = torch_us(0), tg = torch_us(1);
        if (tn > 0 && tg > 0)
            printf(", \"torch_us_per_op_nograd\": %.4f, \"torch_us_per_op_grad\": %.4f, "
                   "\"speedup_nograd\": %.2f, \"speedup_grad\": %.2f",
                   tn, tg, tn / nograd[0], tg / grad[0]);
        else
            printf(", \"torch\": \"unavailable (install python3-torch)\"");
    }
    printf("}\n");
    oar_release(a);
    oar_release(b);
    return 0;
}
