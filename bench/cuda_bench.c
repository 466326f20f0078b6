/* GPU micro-benchmarks, printed as JSON lines (tests/cuda/run_on_device.sh runs them beside
 * bench/cuda_torch.py on the same GPU):
 *   gemm      oar_matmul against the same product called straight on cuBLASLt, f32 (TF32 off)
 *             and bf16, 4096^3: the framework's cost around the library call;
 *   bandwidth cudaMemcpy device-to-device against oar_add over 256 Mi floats;
 *   overhead  host time per eager op call (oar_add on 1-element GPU tensors), beside one bare
 *             launch through the CUDA runtime (a 4-byte memset), the floor;
 *   mlp       an eager training step (784-512-512-10 MLP, batch 256, SGD) on the GPU;
 *   zoo       a training step of each zoo model (SGD with momentum) on the GPU: eager, compiled
 *             (oar_jit_to_static) with CUDA graphs off, and compiled replaying CUDA graphs.
 * Each time is wall clock over a batch of calls ended by a device synchronize (medians of 7
 * repetitions). */
#include "oar.h"
#include "tools/oar/bench_util.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 7

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

/* Seconds per call of fn(ctx) over iters calls after a warm-up. */
static double time_gpu(void (*fn)(void *), void *ctx, int iters) {
    fn(ctx);
    oar_synchronize(OAR_CUDA);
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        oar_synchronize(OAR_CUDA);
        double h0 = bench_now_s();
        for (int i = 0; i < iters; i++) fn(ctx);
        oar_synchronize(OAR_CUDA);
        t[r] = (bench_now_s() - h0) / iters;
    }
    return median(t, REPS);
}

typedef struct mm_ctx { oar_tensor *a, *b; } mm_ctx;
static void run_matmul(void *p) {
    mm_ctx *c = p;
    oar_scope_begin();
    oar_matmul(c->a, c->b);
    oar_scope_end();
}

typedef struct lt_ctx {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t l;
    cublasLtMatmulAlgo_t algo;
    void *a, *b, *d, *ws;
    size_t ws_bytes;
    bool f64;
} lt_ctx;
static void run_lt(void *p) {
    lt_ctx *c = p;
    float one = 1, zero = 0;
    cublasLtMatmul(c->h, c->op, &one, c->a, c->l, c->b, c->l, &zero, c->d, c->l, c->d, c->l, &c->algo, c->ws,
                   c->ws_bytes, 0);
}

static void bench_gemm(oar_dtype dt, int64_t n) {
    int64_t shape[2] = {n, n};
    oar_set_default_device(OAR_CUDA);
    mm_ctx m = {oar_cast(oar_randn(shape, 2, OAR_F32), dt), oar_cast(oar_randn(shape, 2, OAR_F32), dt)};
    oar_set_default_device(OAR_CPU);
    double t_oar = time_gpu(run_matmul, &m, 10);
    /* the same product on cuBLASLt directly, with the heuristic's first choice */
    lt_ctx c = {.ws_bytes = (size_t)32 << 20};
    cudaDataType_t io = dt == OAR_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtCreate(&c.h);
    cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&c.l, io, (uint64_t)n, (uint64_t)n, n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &c.ws_bytes, sizeof c.ws_bytes);
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    cublasLtMatmulAlgoGetHeuristic(c.h, c.op, c.l, c.l, c.l, c.l, pref, 1, &res, &nres);
    c.algo = res.algo;
    size_t bytes = (size_t)(n * n) * oar_dtype_size(dt);
    c.a = oar_device_ptr(m.b); /* the same random operands (C^T = B^T A^T in column-major terms) */
    c.b = oar_device_ptr(m.a);
    cudaMalloc(&c.d, bytes);
    cudaMalloc(&c.ws, c.ws_bytes);
    oar_synchronize(OAR_CUDA);
    double t_lt = 0;
    {
        double t[REPS];
        run_lt(&c);
        cudaDeviceSynchronize();
        for (int r = 0; r < REPS; r++) {
            double h0 = bench_now_s();
            for (int i = 0; i < 10; i++) run_lt(&c);
            cudaDeviceSynchronize();
            t[r] = (bench_now_s() - h0) / 10;
        }
        t_lt = median(t, REPS);
    }
    double flops = 2.0 * (double)n * (double)n * (double)n;
    printf("{\"bench\":\"gemm\",\"dtype\":\"%s\",\"n\":%lld,\"oar_ms\":%.4f,\"cublaslt_ms\":%.4f,"
           "\"oar_tflops\":%.1f,\"cublaslt_tflops\":%.1f,\"oar_vs_cublaslt\":%.3f}\n",
           oar_dtype_name(dt), (long long)n, t_oar * 1e3, t_lt * 1e3, flops / t_oar * 1e-12, flops / t_lt * 1e-12,
           t_lt / t_oar);
    cudaFree(c.d);
    cudaFree(c.ws);
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(c.l);
    cublasLtMatmulDescDestroy(c.op);
    cublasLtDestroy(c.h);
    oar_release(m.a);
    oar_release(m.b);
}

typedef struct bw_ctx { void *dst, *src; size_t bytes; oar_tensor *x, *y; } bw_ctx;
static void run_copy(void *p) {
    bw_ctx *c = p;
    cudaMemcpyAsync(c->dst, c->src, c->bytes, cudaMemcpyDeviceToDevice, 0);
}
static void run_add(void *p) {
    bw_ctx *c = p;
    oar_scope_begin();
    oar_add(c->x, c->y);
    oar_scope_end();
}

static void bench_bandwidth(void) {
    int64_t n = (int64_t)256 << 20;
    bw_ctx c = {.bytes = (size_t)n * 4};
    cudaMalloc(&c.dst, c.bytes);
    cudaMalloc(&c.src, c.bytes);
    cudaMemset(c.src, 0, c.bytes);
    cudaDeviceSynchronize();
    double t_copy;
    {
        double t[REPS];
        run_copy(&c);
        cudaDeviceSynchronize();
        for (int r = 0; r < REPS; r++) {
            double h0 = bench_now_s();
            for (int i = 0; i < 5; i++) run_copy(&c);
            cudaDeviceSynchronize();
            t[r] = (bench_now_s() - h0) / 5;
        }
        t_copy = median(t, REPS);
    }
    cudaFree(c.dst);
    cudaFree(c.src);
    oar_set_default_device(OAR_CUDA);
    c.x = oar_ones(&n, 1, OAR_F32);
    c.y = oar_ones(&n, 1, OAR_F32);
    oar_set_default_device(OAR_CPU);
    double t_add = time_gpu(run_add, &c, 5);
    double copy_gbs = 2.0 * (double)c.bytes / t_copy * 1e-9, add_gbs = 3.0 * (double)c.bytes / t_add * 1e-9;
    printf("{\"bench\":\"bandwidth\",\"elements\":%lld,\"copy_gbs\":%.0f,\"add_gbs\":%.0f,\"add_vs_copy\":%.3f}\n",
           (long long)n, copy_gbs, add_gbs, add_gbs / copy_gbs);
    oar_release(c.x);
    oar_release(c.y);
}

static void bench_overhead(void) {
    int64_t one[1] = {1};
    oar_set_default_device(OAR_CUDA);
    oar_tensor *a = oar_ones(one, 1, OAR_F32), *b = oar_ones(one, 1, OAR_F32);
    oar_set_default_device(OAR_CPU);
    const int calls = 20000;
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        oar_synchronize(OAR_CUDA);
        oar_scope_begin();
        double h0 = bench_now_s();
        for (int i = 0; i < calls; i++) {
            oar_tensor *c = oar_add(a, b);
            oar_release(c);
        }
        double h1 = bench_now_s();
        oar_scope_end();
        oar_synchronize(OAR_CUDA);
        t[r] = (h1 - h0) / calls;
    }
    /* the floor: one launch through the CUDA runtime (a 4-byte memset on oar's stream) */
    double f[REPS];
    void *dst = oar_device_ptr(a);
    for (int r = 0; r < REPS; r++) {
        oar_synchronize(OAR_CUDA);
        double h0 = bench_now_s();
        for (int i = 0; i < calls; i++) cudaMemsetAsync(dst, 0, 4, 0);
        f[r] = (bench_now_s() - h0) / calls;
        cudaDeviceSynchronize();
    }
    printf("{\"bench\":\"overhead\",\"op\":\"add\",\"host_us_per_call\":%.2f,\"launch_floor_us\":%.2f}\n",
           median(t, REPS) * 1e6, median(f, REPS) * 1e6);
    oar_release(a);
    oar_release(b);
}

typedef struct mlp_ctx { oar_tensor *x, *y, *p[6]; } mlp_ctx;
static void run_mlp(void *v) {
    mlp_ctx *c = v;
    oar_scope_begin();
    oar_tensor *h = oar_relu(oar_linear(c->x, c->p[0], c->p[1]));
    h = oar_relu(oar_linear(h, c->p[2], c->p[3]));
    oar_tensor *loss = oar_cross_entropy(oar_linear(h, c->p[4], c->p[5]), c->y, NULL);
    oar_backward(loss, NULL, false);
    oar_no_grad_begin();
    for (int k = 0; k < 6; k++) {
        oar_tensor *g = oar_grad_get(c->p[k]);
        if (g) oar_copy_(c->p[k], oar_sub(c->p[k], oar_mul_scalar(g, 0.01)));
        oar_zero_grad(c->p[k]);
    }
    oar_no_grad_end();
    oar_scope_end();
}

static void bench_mlp(void) {
    int64_t xs[2] = {256, 784}, ys[1] = {256};
    int64_t shapes[6][2] = {{512, 784}, {512, 0}, {512, 512}, {512, 0}, {10, 512}, {10, 0}};
    mlp_ctx c;
    oar_set_default_device(OAR_CUDA);
    c.x = oar_randn(xs, 2, OAR_F32);
    c.y = oar_randint(0, 10, ys, 1, OAR_I64);
    for (int k = 0; k < 6; k++) {
        c.p[k] = oar_mul_scalar(oar_randn(shapes[k], shapes[k][1] ? 2 : 1, OAR_F32), 0.03);
        oar_set_requires_grad(c.p[k], true);
    }
    oar_set_default_device(OAR_CPU);
    double t = time_gpu(run_mlp, &c, 20);
    printf("{\"bench\":\"mlp\",\"mode\":\"eager\",\"batch\":256,\"step_ms\":%.4f}\n", t * 1e3);
}

/* One eager training step of a zoo model on the GPU: forward, cross-entropy, backward, SGD
 * with momentum; inputs made once on the GPU. */
typedef struct zoo_ctx {
    oar_module *m;
    oar_optimizer *opt;
    oar_tensor *x, *y;
    const oar_zoo_info *info;
    oar_jit *jit; /* the step compiled */
} zoo_ctx;

/* One step as a function of (x, y) -> loss, run eagerly or compiled. */
static oar_status zoo_step(void *v, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    zoo_ctx *c = v;
    oar_optimizer_zero_grad(c->opt);
    oar_tensor *z;
    if (c->info->input == OAR_ZOO_TOKENS_STATEFUL) {
        oar_tensor *args[3] = {in[0], NULL, NULL}, *o[3];
        z = oar_forward_n(c->m, args, 3, o, 3) == OAR_OK ? o[0] : NULL;
    } else {
        z = oar_forward(c->m, in[0]);
    }
    int64_t s2[2] = {-1, c->info->num_classes}, flat = -1;
    bool tokens = c->info->input == OAR_ZOO_TOKENS || c->info->input == OAR_ZOO_TOKENS_STATEFUL;
    oar_tensor *loss = tokens ? oar_cross_entropy(oar_reshape(z, s2, 2), oar_reshape(in[1], &flat, 1), NULL)
                              : oar_cross_entropy(z, in[1], NULL);
    oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
    if (st == OAR_OK) st = oar_optimizer_step(c->opt);
    out[0] = loss;
    return st;
}

static void run_zoo_step(void *v) {
    zoo_ctx *c = v;
    oar_scope_begin();
    oar_tensor *in[2] = {c->x, c->y}, *loss = NULL;
    if (c->jit) oar_jit_call(c->jit, in, 2, &loss, 1);
    else zoo_step(c, in, 2, &loss, 1);
    oar_scope_end();
}

static void bench_zoo(const char *name, int64_t batch) {
    zoo_ctx c = {.info = oar_zoo_find(name)};
    oar_manual_seed(1);
    c.m = oar_zoo_create(name, NULL);
    if (!c.m || oar_module_to(c.m, OAR_CUDA) != OAR_OK) {
        printf("{\"bench\":\"zoo\",\"model\":\"%s\",\"error\":\"%s\"}\n", name, oar_last_error());
        return;
    }
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    oo.momentum = 0.9;
    c.opt = oar_optimizer_for(c.m, &oo);
    oar_set_default_device(OAR_CUDA);
    int64_t t = c.info->context;
    switch (c.info->input) {
    case OAR_ZOO_FEATURES:
        c.x = oar_randn((int64_t[]){batch, c.info->in_channels}, 2, OAR_F32);
        break;
    case OAR_ZOO_IMAGE: {
        int64_t hw = c.info->in_channels == 3 ? 32 : 28;
        c.x = oar_randn((int64_t[]){batch, c.info->in_channels, hw, hw}, 4, OAR_F32);
        break;
    }
    case OAR_ZOO_TOKENS:
        c.x = oar_randint(0, c.info->num_classes, (int64_t[]){batch, t}, 2, OAR_I64);
        c.y = oar_randint(0, c.info->num_classes, (int64_t[]){batch, t}, 2, OAR_I64);
        break;
    case OAR_ZOO_TOKENS_STATEFUL:
        c.x = oar_randint(0, c.info->num_classes, (int64_t[]){t, batch}, 2, OAR_I64);
        c.y = oar_randint(0, c.info->num_classes, (int64_t[]){t, batch}, 2, OAR_I64);
        break;
    }
    if (!c.y) c.y = oar_randint(0, c.info->num_classes, (int64_t[]){batch}, 1, OAR_I64);
    oar_set_default_device(OAR_CPU);
    /* eager, then compiled with graphs off and on (each compiled run from its own trace) */
    const char *modes[3] = {"eager", "static", "static+graphs"};
    for (int k = 0; k < 3; k++) {
        oar_clear_error();
        if (k) {
            oar_cuda_graphs_set_enabled(k == 2);
            oar_jit_opts jo = {.module = c.m, .optimizer = c.opt};
            c.jit = oar_jit_to_static(zoo_step, &c, &jo);
        }
        double ms = time_gpu(run_zoo_step, &c, 10) * 1e3;
        if (oar_last_status() != OAR_OK)
            printf("{\"bench\":\"zoo\",\"model\":\"%s\",\"mode\":\"%s\",\"error\":\"%s\"}\n", name, modes[k],
                   oar_last_error());
        else
            printf("{\"bench\":\"zoo\",\"model\":\"%s\",\"mode\":\"%s\",\"batch\":%lld,\"step_ms\":%.4f,"
                   "\"cuda_graphs\":%d}\n", name, modes[k], (long long)batch, ms,
                   c.jit ? oar_jit_cuda_graph_count(c.jit, 0) : 0);
        if (k == 2 && c.jit) fprintf(stderr, "cuda_bench: %s: CUDA graphs: %s\n", name, oar_jit_cuda_graph_note(c.jit, 0));
        oar_jit_free(c.jit);
        c.jit = NULL;
    }
    oar_cuda_graphs_set_enabled(true);
    oar_release(c.x);
    oar_release(c.y);
    oar_optimizer_free(c.opt);
    oar_module_free(c.m);
}

/* `bench_cuda --profile MODEL`: oar's op tables over the timed training steps on the GPU: the
 * host's time per op (launch cost) and, from CUDA events, each op's time on the GPU. */
static int profile_zoo(const char *name) {
    const oar_zoo_info *info = oar_zoo_find(name);
    if (!info) {
        fprintf(stderr, "cuda_bench: unknown model '%s'\n", name);
        return 2;
    }
    bench_zoo(name, 16); /* warm-up, and the step's time */
    oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
    po.print_at_stop = true;
    oar_profiler_start(&po);
    bench_zoo(name, 16);
    oar_profiler_stop();
    return 0;
}

int main(int argc, char **argv) {
    if (!oar_cuda_is_available()) {
        printf("cuda_bench: no CUDA device; nothing to measure\n");
        return 77;
    }
    if (argc == 3 && !strcmp(argv[1], "--profile")) return profile_zoo(argv[2]);
    bench_overhead();
    bench_bandwidth();
    bench_gemm(OAR_F32, 4096);
    bench_gemm(OAR_BF16, 4096);
    bench_mlp();
    const struct { const char *name; int64_t batch; } zoo[] = {
        {"tiny", 64}, {"mlp", 64}, {"lenet", 64}, {"resnet20", 32}, {"mobilenet", 32}, {"gpt-mini", 16}, {"lstm-lm", 20}};
    for (int i = 0; i < (int)(sizeof zoo / sizeof zoo[0]); i++) bench_zoo(zoo[i].name, zoo[i].batch);
    return 0;
}
