/* `oar bench --workload gemm`: GFLOP/s of each f32 GEMM backend oar has (OpenBLAS, oneDNN's
 * dnnl_sgemm, oar's kernel in AVX2 and AVX-512 tiles), forced in turn through oar_gemm on the
 * same buffers, for square shapes and the GEMMs of the zoo workloads (forward and backward
 * forms), with the backend oar's rule chooses and its fraction of peak (--peak-gflops, per
 * core). Next to them: oar_matmul (the whole op, the rule's choice) and a direct cblas_sgemm
 * with OpenBLAS threading the call itself at the same thread count. Each figure is the median
 * of the samples, with their min and max. The output is JSON, one object per shape.
 * docs/kernels-gemm.md explains the rule these figures set. */
#include "cli.h"
#include "bench_util.h"
#include "oar.h"

#ifdef OAR_HAVE_OPENBLAS
#include "kernels/cpu/gemm_blas.h"
#include "kernels/cpu/gemm_select.h"

#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* FP32 peak of one core of the reference machine: 2 FMA pipes x 8 lanes x 2 FLOP at the
 * measured 3.18 GHz (shared/bench/README.md); --peak-gflops sets another machine's. */
static double g_peak_per_core = 101.8;

typedef struct gemm_shape {
    const char *name;
    int64_t batch, m, k, n;
    bool ta, tb;  /* operand stored transposed (oar sees a transposed view) */
    bool quick;   /* part of the --quick subset */
} gemm_shape;

/* Linear layers run y = x·W^T (NT), dx = dy·W (NN), dW = dy^T·x (TN). */
static const gemm_shape SHAPES[] = {
    {"sq64", 1, 64, 64, 64, false, false, false},
    {"sq128", 1, 128, 128, 128, false, false, false},
    {"sq256", 1, 256, 256, 256, false, false, true},
    {"sq512", 1, 512, 512, 512, false, false, true},
    {"sq1024", 1, 1024, 1024, 1024, false, false, false},
    /* tiny: batch 32, 64-64-64-10 */
    {"tiny_fc_fwd_NT", 1, 32, 64, 64, false, true, true},
    {"tiny_fc_bwdX_NN", 1, 32, 64, 64, false, false, true},
    {"tiny_fc_bwdW_TN", 1, 64, 32, 64, true, false, true},
    {"tiny_head_fwd_NT", 1, 32, 64, 10, false, true, false},
    {"tiny_head_bwdX_NN", 1, 32, 10, 64, false, false, false},
    {"tiny_head_bwdW_TN", 1, 10, 32, 64, true, false, false},
    /* mlp: batch 128, 784-512-512-10 */
    {"mlp_fc1_fwd_NT", 1, 128, 784, 512, false, true, true},
    {"mlp_fc1_bwdW_TN", 1, 512, 128, 784, true, false, true},
    {"mlp_fc2_fwd_NT", 1, 128, 512, 512, false, true, false},
    {"mlp_fc2_bwdX_NN", 1, 128, 512, 512, false, false, false},
    {"mlp_fc2_bwdW_TN", 1, 512, 128, 512, true, false, false},
    {"mlp_head_fwd_NT", 1, 128, 512, 10, false, true, false},
    {"mlp_head_bwdW_TN", 1, 10, 128, 512, true, false, false},
    /* lenet fc: batch 64, 400-120-84-10 */
    {"lenet_fc1_fwd_NT", 1, 64, 400, 120, false, true, false},
    {"lenet_fc1_bwdW_TN", 1, 120, 64, 400, true, false, false},
    {"lenet_fc2_fwd_NT", 1, 64, 120, 84, false, true, false},
    /* resnet20 im2col (per image): W[co, ci*9] . col[ci*9, oh*ow], and the backward forms */
    {"resnet_c16_fwd_NN", 1, 16, 144, 1024, false, false, false},
    {"resnet_c32_fwd_NN", 1, 32, 288, 256, false, false, false},
    {"resnet_c64_fwd_NN", 1, 64, 576, 64, false, false, false},
    {"resnet_c16_bwdX_TN", 1, 144, 16, 1024, true, false, false},
    {"resnet_c64_bwdW_NT", 1, 64, 64, 576, false, true, false},
    /* gpt-mini: 8 x 128 tokens, d 256, MLP 1024 */
    {"gpt_qkv_fwd_NT", 1, 1024, 256, 768, false, true, true},
    {"gpt_qkv_bwdX_NN", 1, 1024, 768, 256, false, false, false},
    {"gpt_qkv_bwdW_TN", 1, 768, 1024, 256, true, false, false},
    {"gpt_mlp_up_fwd_NT", 1, 1024, 256, 1024, false, true, false},
    {"gpt_mlp_down_fwd_NT", 1, 1024, 1024, 256, false, true, false},
    {"gpt_attn_scores_NT", 32, 128, 64, 128, false, true, false},
    {"gpt_attn_values_NN", 32, 128, 128, 64, false, false, false},
    /* lstm-lm: batch 20, seq 35, hidden 200, vocab 10000 */
    {"lstm_gates_fwd_NT", 1, 20, 200, 800, false, true, true},
    {"lstm_gates_bwdX_NN", 1, 20, 800, 200, false, false, false},
    {"lstm_gates_bwdW_TN", 1, 800, 20, 200, true, false, false},
    {"lstm_decoder_fwd_NT", 1, 700, 200, 10000, false, true, false},
    {"lstm_decoder_bwdX_NN", 1, 700, 10000, 200, false, false, false},
    {"lstm_decoder_bwdW_TN", 1, 10000, 700, 200, true, false, false},
};

typedef struct run {
    const gemm_shape *s;
    oar_tensor *a, *b;  /* what oar_matmul sees (views when transposed) */
    float *pa, *pb, *pc; /* the same storage, for the library call */
} run;

static void call_oar(run *r) { oar_release(oar_matmul(r->a, r->b)); }

#ifdef OAR_HAVE_OPENBLAS
static void call_lib(run *r) {
    const gemm_shape *s = r->s;
    int m = (int)s->m, n = (int)s->n, k = (int)s->k;
    for (int64_t i = 0; i < s->batch; i++)
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, m, n, k,
                    1.0f, r->pa + i * s->m * s->k, s->ta ? m : k, r->pb + i * s->k * s->n, s->tb ? k : n, 0.0f,
                    r->pc + i * s->m * s->n, n);
}

/* oar's internal GEMM entry (the backend set by oar_gemm_force_backend), as the kernels call it */
static void call_gemm(run *r) {
    const gemm_shape *s = r->s;
    for (int64_t i = 0; i < s->batch; i++)
        oar_gemm(OAR_F32, s->ta, s->tb, s->m, s->n, s->k, r->pa + i * s->m * s->k, s->ta ? s->m : s->k,
                 r->pb + i * s->k * s->n, s->tb ? s->k : s->n, 0.0, r->pc + i * s->m * s->n, s->n);
}
#endif

/* GFLOP/s over back-to-back calls lasting at least min_s. */
static double sample(void (*fn)(run *), run *r, double min_s) {
    double flop = 2.0 * (double)r->s->batch * (double)r->s->m * (double)r->s->n * (double)r->s->k;
    int calls = 0;
    double t0 = bench_now_s(), dt;
    do {
        fn(r);
        calls++;
        dt = bench_now_s() - t0;
    } while (dt < min_s);
    return flop * calls / dt * 1e-9;
}

#ifdef OAR_HAVE_OPENBLAS
/* After a threaded call OpenBLAS's workers spin on sched_yield for about 0.1 s (its thread
 * timeout; also after the process's first GEMM) before they sleep. Waiting that out keeps them off
 * the cores while oar, which keeps OpenBLAS on one thread, is measured. */
static void let_blas_threads_sleep(void) {
    if (oar_get_num_threads() > 1) nanosleep(&(struct timespec){.tv_nsec = 300000000}, NULL);
}
#endif

/* A stored [batch, rows, cols] (or [batch, cols, rows] seen through a transpose). */
static oar_tensor *operand(int64_t batch, int64_t rows, int64_t cols, bool trans) {
    int64_t shape[3] = {batch, trans ? cols : rows, trans ? rows : cols};
    oar_tensor *t = oar_randn(batch > 1 ? shape : shape + 1, batch > 1 ? 3 : 2, OAR_F32);
    if (!t || !trans) return t;
    oar_tensor *v = oar_transpose(t, -1, -2);
    oar_release(t);
    return v;
}

static void stats(double *v, int n, double out[3]) {
    qsort(v, (size_t)n, sizeof(double), bench_cmp_double);
    out[0] = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    out[1] = v[0];
    out[2] = v[n - 1];
}

/* reps samples of fn: median, min, max into out */
static void measure(void (*fn)(run *), run *r, int reps, double min_s, double *scratch, double out[3]) {
    fn(r); /* warm up: caches, packing buffers, the library's state */
    for (int i = 0; i < reps; i++) scratch[i] = sample(fn, r, min_s);
    stats(scratch, reps, out);
}

static int bench_shape(const gemm_shape *s, int reps, double min_s) {
    run r = {.s = s};
    r.a = operand(s->batch, s->m, s->k, s->ta);
    r.b = operand(s->batch, s->k, s->n, s->tb);
    float *c = malloc(sizeof(float) * (size_t)(s->batch * s->m * s->n));
    double *ov = calloc((size_t)reps * 3, sizeof(double)), *lv = ov + reps, *pr = ov + 2 * reps;
    if (!r.a || !r.b || !c || !ov) {
        fprintf(stderr, "oar bench gemm: %s: %s\n", s->name, r.a && r.b ? "out of memory" : oar_last_error());
        oar_release(r.a);
        oar_release(r.b);
        free(c);
        free(ov);
        return 1;
    }
    r.pa = oar_data(r.a);
    r.pb = oar_data(r.b);
    r.pc = c;
    int nt = oar_get_num_threads();
    double o[3], l[3] = {0, 0, 0}, ratio[3] = {0, 0, 0}, peak = g_peak_per_core * nt;
    printf("{\"workload\": \"gemm\", \"name\": \"%s\", ", s->name);
    bench_print_settings(&(bench_settings){.mode = "eager", .batch = s->batch}); /* batch: of matrices */
    printf(", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"layout\": \"%c%c\", \"reps\": %d, \"peak_gflops\": %.1f",
           (long long)s->m, (long long)s->k, (long long)s->n, s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', reps, peak);
#ifdef OAR_HAVE_OPENBLAS
    let_blas_threads_sleep(); /* after the previous shape's library samples and the first GEMM */
    /* each backend forced in turn through oar_gemm; then the rule's choice, whose figure is
     * its backend's */
    double be_med[OAR_GEMM_BACKEND_COUNT] = {0};
    printf(", \"backends\": {");
    bool first = true;
    for (int b = OAR_GEMM_AUTO + 1; b < OAR_GEMM_BACKEND_COUNT; b++) {
        if (oar_gemm_force_backend((oar_gemm_backend)b) < 0) continue;
        double g[3];
        measure(call_gemm, &r, reps, min_s, pr, g);
        be_med[b] = g[0];
        printf("%s\"%s\": {\"gflops\": %.2f, \"gflops_min\": %.2f, \"gflops_max\": %.2f, \"peak_fraction\": %.3f}",
               first ? "" : ", ", oar_gemm_backend_name((oar_gemm_backend)b), g[0], g[1], g[2], g[0] / peak);
        first = false;
    }
    oar_gemm_force_backend(OAR_GEMM_AUTO);
    oar_gemm_backend chosen = oar_gemm_choose(s->ta, s->tb, s->m, s->n, s->k, nt);
    int best = OAR_GEMM_AUTO + 1;
    for (int b = best; b < OAR_GEMM_BACKEND_COUNT; b++)
        if (be_med[b] > be_med[best]) best = b;
    printf("}, \"chosen\": \"%s\", \"chosen_gflops\": %.2f, \"chosen_peak_fraction\": %.3f, \"best\": \"%s\", "
           "\"chosen_vs_best\": %.3f",
           oar_gemm_backend_name(chosen), be_med[chosen], be_med[chosen] / peak,
           oar_gemm_backend_name((oar_gemm_backend)best),
           be_med[best] > 0 ? be_med[chosen] / be_med[best] : 0.0);
#endif
    /* oar_matmul's samples, then the library's with OpenBLAS threading the call itself at the
     * same thread count (its spinning workers would distort oar's samples if interleaved) */
    call_oar(&r);
    for (int i = 0; i < reps; i++) ov[i] = sample(call_oar, &r, min_s);
#ifdef OAR_HAVE_OPENBLAS
    openblas_set_num_threads(nt);
    call_lib(&r);
    for (int i = 0; i < reps; i++) lv[i] = sample(call_lib, &r, min_s);
    openblas_set_num_threads(1);
#endif
    /* the ratio pairs the i-th oar sample with the i-th library sample */
    for (int i = 0; i < reps; i++) pr[i] = lv[i] > 0 ? ov[i] / lv[i] : 0;
    stats(pr, reps, ratio);
    stats(ov, reps, o);
    printf(", \"oar_gflops\": %.2f, \"oar_gflops_min\": %.2f, \"oar_gflops_max\": %.2f", o[0], o[1], o[2]);
#ifdef OAR_HAVE_OPENBLAS
    stats(lv, reps, l);
    printf(", \"lib\": \"openblas\", \"lib_gflops\": %.2f, \"lib_gflops_min\": %.2f, \"lib_gflops_max\": %.2f, "
           "\"ratio\": %.3f, \"ratio_min\": %.3f, \"ratio_max\": %.3f}\n", l[0], l[1], l[2], ratio[0], ratio[1],
           ratio[2]);
#else
    (void)l;
    (void)ratio;
    printf(", \"lib\": null, \"lib_gflops\": null, \"lib_gflops_min\": null, \"lib_gflops_max\": null, "
           "\"ratio\": null, \"ratio_min\": null, \"ratio_max\": null}\n");
#endif
    fflush(stdout);
    free(ov);
    free(c);
    oar_release(r.a);
    oar_release(r.b);
    return 0;
}

static int parse_count(const char *flag, const char *v, int lo, int hi, int *out) {
    char *end;
    long n = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || n < lo || n > hi) {
        fprintf(stderr, "oar bench gemm: expected %s N with %d <= N <= %d, got '%s'\n", flag, lo, hi, v);
        return 2;
    }
    *out = (int)n;
    return 0;
}

int oar_bench_gemm(int argc, char **argv) {
    bool quick = cli_has_flag(argc, argv, "--quick");
    int reps = quick ? 3 : 9;
    double min_s = quick ? 0.02 : 0.1;
    const char *v = cli_flag_value(argc, argv, "--threads");
    if (v) {
        int n, rc = parse_count("--threads", v, 1, 256, &n);
        if (rc) return rc;
        if (oar_set_num_threads(n) != OAR_OK) {
            fprintf(stderr, "oar bench gemm: %s\n", oar_last_error());
            return 1;
        }
    }
    if ((v = cli_flag_value(argc, argv, "--reps")) && parse_count("--reps", v, 1, 1000, &reps)) return 2;
    if ((v = cli_flag_value(argc, argv, "--peak-gflops"))) {
        char *end;
        g_peak_per_core = strtod(v, &end);
        if (*v == '\0' || *end != '\0' || !(g_peak_per_core > 0)) {
            fprintf(stderr, "oar bench gemm: expected --peak-gflops X (GFLOP/s of one core, > 0), got '%s'\n", v);
            return 2;
        }
    }
#ifndef OAR_HAVE_OPENBLAS
    fprintf(stderr, "oar bench gemm: built without OpenBLAS: oar runs its reference kernel and there is no library "
                    "to compare with; measuring the --quick shapes once\n");
    quick = true;
    reps = 1;
#endif
    const char *only = cli_flag_value(argc, argv, "--shape");
    size_t n_shapes = sizeof SHAPES / sizeof SHAPES[0], matched = 0;
    for (size_t i = 0; i < n_shapes; i++) matched += !only || strcmp(only, SHAPES[i].name) == 0;
    if (!matched) {
        fprintf(stderr, "oar bench gemm: unknown --shape '%s'; expected one of", only);
        for (size_t i = 0; i < n_shapes; i++) fprintf(stderr, " %s", SHAPES[i].name);
        fprintf(stderr, "\n");
        return 2;
    }
    oar_manual_seed(0);
    bool prev = oar_set_grad_enabled(false);
    int rc = 0;
    for (size_t i = 0; i < n_shapes && !rc; i++)
        if (only ? strcmp(only, SHAPES[i].name) == 0 : !quick || SHAPES[i].quick)
            rc = bench_shape(&SHAPES[i], reps, min_s);
    oar_set_grad_enabled(prev);
    return rc;
}
