/* `oar bench --workload peak`: the machine's fp32 FMA peak, measured, so that benchmarks
 * quote fractions of this machine's ceiling rather than of a figure for another CPU. Twelve
 * independent FMA chains (enough to hide the FMA latency on two pipes) in the widest vector
 * width oar's CPU switch allows (oar_get_cpu_isa: AVX-512 where the CPU has it and the cap
 * allows, else AVX2), so a capped run quotes fractions of the capped ceiling. Best of nine,
 * on 1 thread and on oar's thread count. */
#include "cli.h"
#include "bench_util.h"
#include "oar.h"

#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define CHAINS 12

static volatile float g_sink;

__attribute__((target("avx512f"))) static double fma_loop_512(int64_t iters) {
    __m512 acc[CHAINS], a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    float s = 0;
    for (int c = 0; c < CHAINS; c++) s += _mm512_reduce_add_ps(acc[c]);
    g_sink = s;
    return (double)iters * CHAINS * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double fma_loop_256(int64_t iters) {
    __m256 acc[CHAINS], a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
    for (int64_t i = 0; i < iters; i++)
        for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    float lanes[8], s = 0;
    for (int c = 0; c < CHAINS; c++) {
        _mm256_storeu_ps(lanes, acc[c]);
        for (int k = 0; k < 8; k++) s += lanes[k];
    }
    g_sink = s;
    return (double)iters * CHAINS * 8 * 2;
}

typedef struct peak_ctx {
    bool wide;
    int64_t iters;
} peak_ctx;

static void run_chunks(void *p, int64_t begin, int64_t end) {
    const peak_ctx *c = p;
    for (int64_t k = begin; k < end; k++) c->wide ? fma_loop_512(c->iters) : fma_loop_256(c->iters);
}

/* GFLOP/s of `threads` copies of the loop run at once on the pool (best of 9). */
static double measure(const peak_ctx *c, int threads) {
    double flop_per_chunk = (double)c->iters * CHAINS * (c->wide ? 16 : 8) * 2, best = 0;
    for (int rep = 0; rep < 9; rep++) {
        double t0 = bench_now_s();
        if (threads == 1) run_chunks((void *)c, 0, 1);
        else oar_parallel_for(threads, 1, run_chunks, (void *)c);
        double g = flop_per_chunk * threads / (bench_now_s() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}

int oar_bench_peak(int argc, char **argv) {
    const char *th = cli_flag_value(argc, argv, "--threads");
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        return 1;
    }
    oar_cpu_isa isa = oar_get_cpu_isa();
    if (isa < OAR_CPU_ISA_AVX2) {
        fprintf(stderr, "oar bench: the peak probe needs AVX2 and FMA; the ISA in use is %s (the CPU has %s; "
                        "OAR_CPU_ISA caps it)\n", oar_cpu_isa_name(isa), oar_cpu_isa_name(oar_cpu_isa_native()));
        return 1;
    }
    peak_ctx c = {.wide = isa >= OAR_CPU_ISA_AVX512, .iters = 4000000};
    int n = oar_get_num_threads();
    double one = measure(&c, 1), all = n > 1 ? measure(&c, n) : one;
    /* the probe's width is the ISA the kernels use (bench_isa): AVX-512 where the cap allows it */
    printf("{\"workload\": \"peak\", ");
    bench_print_settings(&(bench_settings){.mode = "eager", .batch = -1});
    printf(", \"probe\": \"%s\", \"gflops_1t\": %.1f, \"gflops_all\": %.1f}\n", c.wide ? "avx512" : "avx2", one, all);
    (void)n;
    return 0;
}
#else
int oar_bench_peak(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "oar bench: the peak probe is written for x86-64\n");
    return 1;
}
#endif
