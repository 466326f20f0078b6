/* The CUDA backend end to end: devices and copies, the caching allocator and out-of-memory,
 * mixed-device errors, autograd across devices, and a small network trained on the GPU
 * tracking the same network on the host, compiled programs and CUDA graphs (eager = compiled =
 * replayed, bit for bit, for every zoo model). Without a GPU it checks that everything fails
 * cleanly, then skips (exit 77) with one line. Also: GPT-2-sized attention in bf16, embedding
 * backward and cross entropy (issue 19's kernels) against f32 or host references, and the
 * vision ops (grid_sample, roi_align, nms) at sizes past the sweep's against the host. */
#include "ops/op.h"
#include "zoo_step_util.h"

static oar_tensor *iota(int64_t rows, int64_t cols, double scale) {
    int64_t shape[2] = {rows, cols};
    oar_tensor *t = oar_arange(0, (double)(rows * cols), 1, OAR_F32);
    oar_tensor *r = oar_reshape(oar_mul_scalar(oar_sin(t), scale), shape, 2);
    return r;
}

static void without_gpu(void) {
    int64_t shape[1] = {4};
    oar_tensor *x = oar_ones(shape, 1, OAR_F32);
    CHECK_ERR(oar_to(x, OAR_CUDA), oar_cuda_is_built() ? "no cuda device" : "no cuda support");
    CHECK(oar_set_default_device(OAR_CUDA) != OAR_OK);
    CHECK(oar_get_default_device() == OAR_CPU);
    CHECK(oar_memory_stats_get(OAR_CUDA).reserved_bytes == 0);
    CHECK(oar_memory_set_limit(OAR_CUDA, 1 << 20) != OAR_OK);
}

static void copies(void) {
    oar_tensor *x = iota(37, 53, 3.0);
    oar_tensor *g = oar_to(x, OAR_CUDA);
    CHECK(g && oar_device_of(g) == OAR_CUDA);
    CHECK(oar_data(g) == NULL); /* host pointer refused, with a message */
    CHECK(strstr(oar_last_error(), "oar_to(t, OAR_CPU)") != NULL);
    oar_tensor *back = oar_to(g, OAR_CPU);
    CHECK(t_same_bits(back, x));
    /* non-contiguous sources both ways, and casts on the device */
    oar_tensor *xt = oar_transpose(x, 0, 1);
    oar_tensor *gt = oar_to(xt, OAR_CUDA);
    CHECK(t_same_bits(oar_to(gt, OAR_CPU), oar_contiguous(xt)));
    oar_tensor *g64 = oar_cast(oar_transpose(g, 0, 1), OAR_F64);
    CHECK(t_same_bits(oar_to(g64, OAR_CPU), oar_cast(xt, OAR_F64)));
    for (int dt = 0; dt < OAR_DTYPE_COUNT; dt++) {
        oar_tensor *c = oar_cast(x, (oar_dtype)dt);
        CHECK(t_same_bits(oar_cast(g, (oar_dtype)dt), c));
    }
    /* a large copy goes through the pinned staging buffers */
    int64_t big[1] = {3 << 20};
    oar_tensor *r = oar_randn(big, 1, OAR_F32);
    CHECK(t_same_bits(oar_to(oar_to(r, OAR_CUDA), OAR_CPU), r));
    double v = 0;
    CHECK(oar_item(oar_sum(g, NULL, 0, false), &v) == OAR_OK && v != 0);
    /* printing reads a host copy and names the device, as torch */
    char text[4096], want[4096];
    int n = oar_format(g, text, sizeof text);
    oar_format(x, want, sizeof want);
    CHECK(n == (int)strlen(text) && strstr(text, "device='cuda')") && !strncmp(text, want, strlen(want) - 1));
    CHECK(oar_format(g, NULL, 0) == n);
}

static void devices_mixed(void) {
    oar_tensor *x = iota(4, 4, 1.0), *g = oar_to(x, OAR_CUDA);
    oar_clear_error();
    CHECK(oar_add(x, g) == NULL);
    CHECK(strstr(oar_last_error(), "cpu") && strstr(oar_last_error(), "cuda"));
}

static void default_device(void) {
    int64_t shape[2] = {8, 9};
    oar_manual_seed(7);
    oar_tensor *h = oar_randn(shape, 2, OAR_F32);
    CHECK(oar_set_default_device(OAR_CUDA) == OAR_OK);
    oar_manual_seed(7);
    oar_tensor *d = oar_randn(shape, 2, OAR_F32), *z = oar_zeros(shape, 2, OAR_F32);
    CHECK(oar_device_of(d) == OAR_CUDA && oar_device_of(z) == OAR_CUDA);
    CHECK(oar_device_of(oar_zeros_like(d)) == OAR_CUDA);
    oar_set_default_device(OAR_CPU);
    CHECK(t_same_bits(oar_to(d, OAR_CPU), h)); /* the same values on every device */
}

static void allocator(void) {
    oar_memory_empty_cache(OAR_CUDA);
    oar_memory_stats s0 = oar_memory_stats_get(OAR_CUDA);
    int64_t shape[1] = {1 << 20};
    oar_tensor *a = oar_empty(shape, 1, OAR_F32);
    oar_tensor *g = oar_to(a, OAR_CUDA);
    oar_memory_stats s1 = oar_memory_stats_get(OAR_CUDA);
    CHECK(s1.current_bytes >= s0.current_bytes + (4 << 20));
    CHECK(s1.peak_bytes >= s1.current_bytes);
    oar_release(g);
    oar_memory_stats s2 = oar_memory_stats_get(OAR_CUDA);
    CHECK(s2.cached_bytes >= 4 << 20);
    CHECK(s2.reserved_bytes == s2.current_bytes + s2.cached_bytes);
    CHECK(s2.fragmentation > 0 && s2.fragmentation <= 1);
    g = oar_to(a, OAR_CUDA); /* the same size again: served from the cache */
    CHECK(oar_memory_stats_get(OAR_CUDA).n_cache_hits > s2.n_cache_hits);
    oar_release(g);
    oar_memory_empty_cache(OAR_CUDA);
    CHECK(oar_memory_stats_get(OAR_CUDA).cached_bytes == 0);
    /* a limit turns into OAR_ERR_OOM with a message, and nothing is left half-made */
    CHECK(oar_memory_set_limit(OAR_CUDA, 1 << 20) == OAR_OK);
    oar_clear_error();
    CHECK(oar_to(a, OAR_CUDA) == NULL);
    CHECK(oar_last_status() == OAR_ERR_OOM && strstr(oar_last_error(), "limit"));
    CHECK(oar_memory_set_limit(OAR_CUDA, 0) == OAR_OK);
    /* more than the GPU has: the cache is emptied, the allocation retried, then OOM */
    int64_t huge[1] = {(int64_t)1 << 40};
    oar_memory_stats s3 = oar_memory_stats_get(OAR_CUDA);
    oar_set_default_device(OAR_CUDA);
    oar_clear_error();
    CHECK(oar_empty(huge, 1, OAR_U8) == NULL);
    oar_set_default_device(OAR_CPU);
    CHECK(oar_last_status() == OAR_ERR_OOM && strstr(oar_last_error(), "out of memory"));
    CHECK(oar_memory_stats_get(OAR_CUDA).n_oom_retries == s3.n_oom_retries + 1);
    /* the device still works after it */
    CHECK(t_same_bits(oar_to(oar_to(a, OAR_CUDA), OAR_CPU), a));
}

static void autograd_across_devices(void) {
    oar_tensor *x = t_leaf_copy(iota(5, 6, 2.0));
    oar_tensor *y = oar_to(x, OAR_CUDA);
    oar_tensor *loss = oar_sum(oar_mul(y, y), NULL, 0, false);
    CHECK(loss && oar_device_of(loss) == OAR_CUDA);
    CHECK(oar_backward(loss, NULL, false) == OAR_OK);
    oar_tensor *gx = oar_grad_get(x);
    CHECK(gx && oar_device_of(gx) == OAR_CPU);
    oar_tensor *want = oar_mul_scalar(oar_detach(x), 2.0);
    for (int64_t i = 0; gx && i < 30; i += 7) CHECK_NEAR(t_at(gx, i), t_at(want, i), 1e-5);
}

/* A 2-layer MLP trained with plain SGD and gradient clipping on the GPU and on the host from
 * the same weights: the loss curves and gradient norms agree step for step. */
static void train_mlp(void) {
    int64_t xs[2] = {64, 20}, w1s[2] = {32, 20}, w2s[2] = {5, 32}, b1s[1] = {32}, b2s[1] = {5}, ys[1] = {64};
    oar_manual_seed(3);
    oar_tensor *x = oar_randn(xs, 2, OAR_F32), *y = oar_randint(0, 5, ys, 1, OAR_I64);
    oar_tensor *hp[4] = {oar_mul_scalar(oar_randn(w1s, 2, OAR_F32), 0.2), oar_zeros(b1s, 1, OAR_F32),
                         oar_mul_scalar(oar_randn(w2s, 2, OAR_F32), 0.2), oar_zeros(b2s, 1, OAR_F32)};
    oar_tensor *p[2][4];
    for (int k = 0; k < 4; k++) {
        p[0][k] = t_leaf_copy(hp[k]);
        p[1][k] = oar_to(hp[k], OAR_CUDA);
        oar_set_requires_grad(p[1][k], true);
    }
    oar_tensor *in[2][2] = {{x, y}, {oar_to(x, OAR_CUDA), oar_to(y, OAR_CUDA)}};
    double first[2] = {0}, last[2] = {0}, worst = 0;
    for (int step = 0; step < 30; step++) {
        double l[2] = {0}, norm[2] = {0};
        for (int dev = 0; dev < 2; dev++) {
            oar_scope_begin();
            oar_tensor *h = oar_relu(oar_linear(in[dev][0], p[dev][0], p[dev][1]));
            oar_tensor *loss = oar_cross_entropy(oar_linear(h, p[dev][2], p[dev][3]), in[dev][1], NULL);
            CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
            oar_item(loss, &l[dev]);
            CHECK(oar_clip_grad_norm(p[dev], 4, 1.0, 2.0, &norm[dev]) == OAR_OK); /* made of ops: GPU too */
            oar_no_grad_begin();
            for (int k = 0; k < 4; k++) {
                oar_tensor *g = oar_grad_get(p[dev][k]);
                if (g) oar_copy_(p[dev][k], oar_sub(p[dev][k], oar_mul_scalar(g, 0.1)));
                oar_zero_grad(p[dev][k]);
            }
            oar_no_grad_end();
            oar_scope_end();
        }
        CHECK_NEAR(norm[0], norm[1], 1e-5 * (1 + norm[0]));
        if (step == 0) first[0] = l[0], first[1] = l[1];
        last[0] = l[0], last[1] = l[1];
        if (fabs(l[0] - l[1]) > worst) worst = fabs(l[0] - l[1]);
    }
    printf("test_cuda: MLP loss %.5f -> %.5f on the host, %.5f -> %.5f on the GPU (largest gap %.2g)\n", first[0],
           last[0], first[1], last[1], worst);
    CHECK(last[1] < first[1] * 0.8);
    CHECK(worst < 1e-4);
}

/* AMP on the GPU: an MLP trained with autocast (bf16; f16 with the loss scaler, whose state
 * and ops then live on the GPU) from the same weights and batches as the f32 run on the host;
 * the loss curves agree within the low precision's tolerance. With the scaler, a gradient
 * made infinite on purpose makes the step skip and the scale back off. */
static void train_amp(oar_dtype low, bool use_scaler) {
    int64_t xs[2] = {128, 256}, w1s[2] = {512, 256}, w2s[2] = {10, 512}, b1s[1] = {512}, b2s[1] = {10}, ys[1] = {128};
    oar_manual_seed(11);
    oar_tensor *x = oar_randn(xs, 2, OAR_F32), *y = oar_randint(0, 10, ys, 1, OAR_I64);
    oar_tensor *hp[4] = {oar_mul_scalar(oar_randn(w1s, 2, OAR_F32), 0.06), oar_zeros(b1s, 1, OAR_F32),
                         oar_mul_scalar(oar_randn(w2s, 2, OAR_F32), 0.05), oar_zeros(b2s, 1, OAR_F32)};
    oar_tensor *p[2][4];
    oar_optimizer *opt[2];
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.1;
    for (int dev = 0; dev < 2; dev++) {
        for (int k = 0; k < 4; k++) {
            p[dev][k] = dev ? oar_to(hp[k], OAR_CUDA) : t_leaf_copy(hp[k]);
            oar_set_requires_grad(p[dev][k], true);
        }
        opt[dev] = oar_optimizer_new(p[dev], 4, &oo);
    }
    oar_grad_scaler *sc = use_scaler ? oar_grad_scaler_new(NULL) : NULL;
    oar_tensor *in[2][2] = {{x, y}, {oar_to(x, OAR_CUDA), oar_to(y, OAR_CUDA)}};
    oar_autocast_opts ac = oar_autocast_defaults();
    ac.dtype = low;
    double first[2] = {0}, last[2] = {0}, worst = 0;
    const int steps = 25;
    for (int step = 0; step < steps; step++) {
        double l[2] = {0};
        for (int dev = 0; dev < 2; dev++) {
            oar_scope_begin();
            if (dev) CHECK(oar_autocast_begin(&ac) == OAR_OK);
            oar_tensor *h = oar_relu(oar_linear(in[dev][0], p[dev][0], p[dev][1]));
            oar_tensor *logits = oar_linear(h, p[dev][2], p[dev][3]);
            oar_tensor *loss = oar_cross_entropy(logits, in[dev][1], NULL);
            if (dev) {
                CHECK(logits && oar_dtype_of(logits) == low); /* the GEMMs ran in low precision */
                oar_autocast_end();
            }
            oar_item(loss, &l[dev]);
            oar_optimizer_zero_grad(opt[dev]);
            if (dev && sc) {
                CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
                bool skipped = true;
                CHECK(oar_grad_scaler_step(sc, opt[dev], &skipped) == OAR_OK && !skipped);
                CHECK(oar_grad_scaler_update(sc) == OAR_OK);
            } else {
                CHECK(loss && oar_backward(loss, NULL, false) == OAR_OK);
                CHECK(oar_optimizer_step(opt[dev]) == OAR_OK);
            }
            oar_scope_end();
        }
        if (step == 0) first[0] = l[0], first[1] = l[1];
        last[0] = l[0], last[1] = l[1];
        if (fabs(l[0] - l[1]) > worst) worst = fabs(l[0] - l[1]);
    }
    printf("test_cuda: AMP %s%s: loss %.4f -> %.4f f32 on the host, %.4f -> %.4f on the GPU (largest gap %.2g)\n",
           oar_dtype_name(low), sc ? " + loss scaler" : "", first[0], last[0], first[1], last[1], worst);
    CHECK(last[1] < first[1] * 0.7);
    CHECK(worst < 0.03 * first[0]); /* bf16 keeps 8 bits, f16 11: a few percent at most */
    if (sc) {
        CHECK(oar_grad_scaler_get_scale(sc) == 65536.0 && oar_grad_scaler_growth_tracker(sc) == steps);
        /* an infinite gradient: amp_unscale's flag on the GPU skips the step, the scale halves */
        oar_scope_begin();
        oar_optimizer_zero_grad(opt[1]);
        oar_tensor *loss = oar_sum(oar_mul_scalar(p[1][1], 1e36), NULL, 0, false);
        CHECK(oar_backward(oar_grad_scaler_scale(sc, loss), NULL, false) == OAR_OK);
        oar_tensor *before = oar_to(p[1][1], OAR_CPU);
        bool skipped = false;
        CHECK(oar_grad_scaler_step(sc, opt[1], &skipped) == OAR_OK && skipped);
        CHECK(oar_grad_scaler_update(sc) == OAR_OK);
        CHECK(oar_grad_scaler_get_scale(sc) == 32768.0 && oar_grad_scaler_growth_tracker(sc) == 0);
        CHECK(oar_grad_scaler_skipped(sc) == 1 && t_same_bits(oar_to(p[1][1], OAR_CPU), before));
        oar_scope_end();
        oar_grad_scaler_free(sc);
    }
    oar_optimizer_free(opt[0]);
    oar_optimizer_free(opt[1]);
}

/* NCCL behind the collectives: GPU tensors go through a NCCL communicator bootstrapped over
 * the world (here the one-rank local world: only one GPU is ever lent), on oar's stream. One
 * rank: allreduce (sum, avg, max) is the identity, broadcast from rank 0 too, allgather and
 * reduce-scatter are copies; the values stay bit for bit. */
static void nccl_one_rank(void) {
    CHECK(oar_dist_init(NULL) == OAR_OK && oar_dist_world_size() == 1);
    oar_tensor *x = iota(33, 65, 2.0), *g = oar_to(x, OAR_CUDA);
    oar_clear_error();
    oar_dist_work *w = oar_dist_allreduce(g, OAR_DIST_SUM, false);
    if (!w && strstr(oar_last_error(), "built without")) {
        printf("test_cuda: NCCL: %s; checks skipped\n", oar_last_error());
        oar_dist_finalize();
        return;
    }
    CHECK(w && oar_dist_wait(w) == OAR_OK);
    CHECK(oar_dist_wait(oar_dist_allreduce(g, OAR_DIST_AVG, true)) == OAR_OK);
    CHECK(oar_dist_wait(oar_dist_allreduce(g, OAR_DIST_MAX, false)) == OAR_OK);
    CHECK(oar_dist_wait(oar_dist_broadcast(g, 0)) == OAR_OK);
    CHECK(t_same_bits(oar_to(g, OAR_CPU), x));
    oar_tensor *h = oar_to(oar_cast(x, OAR_BF16), OAR_CUDA), *out = oar_zeros_like(h);
    CHECK(oar_dist_wait(oar_dist_allgather(out, h)) == OAR_OK); /* NCCL takes bf16 */
    CHECK(t_same_bits(oar_to(out, OAR_CPU), oar_cast(x, OAR_BF16)));
    oar_tensor *rs = oar_zeros_like(g);
    CHECK(oar_dist_wait(oar_dist_reduce_scatter(rs, g, OAR_DIST_SUM)) == OAR_OK);
    CHECK(t_same_bits(oar_to(rs, OAR_CPU), x));
    CHECK(oar_dist_allgather(oar_zeros_like(x), g) == NULL && strstr(oar_last_error(), "one device"));
    CHECK(oar_dist_wait(oar_dist_barrier()) == OAR_OK);
    CHECK(oar_dist_finalize() == OAR_OK);
    printf("test_cuda: NCCL: allreduce/broadcast/allgather/reduce-scatter of GPU tensors on one rank\n");
}

/* The profiler on the GPU: each op's kernel as a span on the GPU timeline (CUDA events),
 * resolved only when asked: recording does not wait for the GPU, so issuing a queue of big
 * GEMMs takes the host far less time than the GPU spends on them. */
static void profiler_gpu(void) {
    int64_t shape[2] = {4096, 4096};
    oar_manual_seed(5);
    oar_tensor *a = oar_to(oar_randn(shape, 2, OAR_F32), OAR_CUDA), *b = oar_to(oar_randn(shape, 2, OAR_F32), OAR_CUDA);
    oar_tensor *warm = oar_matmul(a, b);
    CHECK(warm && oar_synchronize(OAR_CUDA) == OAR_OK);
    oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
    CHECK(oar_profiler_start(&po) == OAR_OK);
    const int n = 12;
    for (int i = 0; i < n; i++) oar_release(oar_matmul(a, b));
    oar_release(oar_add(oar_ones(shape, 1, OAR_F32), oar_ones(shape, 1, OAR_F32))); /* a host op */
    CHECK(oar_synchronize(OAR_CUDA) == OAR_OK);
    CHECK(oar_profiler_stop() == OAR_OK);
    oar_profiler_op_row host, dev;
    CHECK(oar_profiler_op_find("matmul", &host) == OAR_OK && host.calls == n);
    CHECK(oar_profiler_device_op_find("matmul", &dev) == OAR_OK && dev.calls == n && !strcmp(dev.impl, "cuda"));
    CHECK(oar_profiler_device_op_find("add", &dev) != OAR_OK); /* the host op has no device span */
    CHECK(oar_profiler_device_op_find("matmul", &dev) == OAR_OK);
    printf("test_cuda: profiler: %d GEMMs 4096^3 f32: host %.3f ms issuing, GPU %.3f ms (avg %.1f us, %.1f TFLOP/s)\n",
           n, host.total * 1e3, dev.total * 1e3, dev.avg * 1e6, dev.gflops_per_s * 1e-3);
    if (!getenv("OAR_TEST_CUDA_QUICK")) { /* compute-sanitizer runs GEMMs at a thousandth of their speed */
        CHECK(dev.min > 100e-6 && dev.gflops_per_s > 1e3 && dev.gflops_per_s < 2e6); /* a real GEMM's time */
        CHECK(host.total < 0.5 * dev.total); /* the host never waited for the GPU */
    }
    char *buf = malloc(1 << 16);
    oar_profiler_summary(buf, 1 << 16, OAR_PROFILER_SORT_TOTAL, 10);
    CHECK(strstr(buf, "Device kernels: ") && strstr(buf, "\n  cuda ") && strstr(buf, "Memory per device"));
    free(buf);
    const char *path = "test_cuda_trace.json";
    CHECK(oar_profiler_export_chrome_trace(path) == OAR_OK);
    FILE *f = fopen(path, "r");
    char *js = calloc(1, 1 << 22);
    size_t got = f && js ? fread(js, 1, (1 << 22) - 1, f) : 0;
    if (f) fclose(f);
    int spans = 0;
    for (const char *q = js ? js : ""; (q = strstr(q, "\"cat\":\"device kernel\"")); q++) spans++;
    CHECK(got > 0 && strstr(js, "\"cuda stream\"") && spans == n);
    free(js);
    remove(path);
    oar_release(warm);
}

/* Each zoo model trained eagerly on the GPU (moved with oar_module_to, SGD with momentum)
 * and on the host from the same initial weights and batches: the loss curves agree. */
static void train_zoo(const char *name, int steps, int64_t batch) {
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.05;
    oo.momentum = 0.9;
    zoo_run host, gpu;
    oar_manual_seed(11);
    host.m = oar_zoo_create(name, NULL);
    oar_manual_seed(11);
    gpu.m = oar_zoo_create(name, NULL);
    CHECK(oar_module_to(gpu.m, OAR_CUDA) == OAR_OK);
    host.opt = oar_optimizer_for(host.m, &oo);
    gpu.opt = oar_optimizer_for(gpu.m, &oo);
    const oar_zoo_info *info = oar_zoo_find(name);
    host.language = gpu.language = info->input == OAR_ZOO_TOKENS || info->input == OAR_ZOO_TOKENS_STATEFUL;
    host.stateful = gpu.stateful = info->input == OAR_ZOO_TOKENS_STATEFUL;
    host.vocab = gpu.vocab = info->num_classes;
    double worst = 0, first = 0, last = 0, l[2] = {0};
    bool ok = true;
    for (int step = 0; step < steps && ok; step++) {
        oar_scope_begin();
        oar_manual_seed(100 + (uint64_t)step);
        oar_tensor *x = NULL, *y = NULL, *in[2][2], *loss[2];
        zoo_batch(info, batch, 32, &x, &y);
        in[0][0] = x, in[0][1] = y, in[1][0] = oar_to(x, OAR_CUDA), in[1][1] = oar_to(y, OAR_CUDA);
        zoo_run *r[2] = {&host, &gpu};
        for (int d = 0; d < 2; d++) {
            oar_manual_seed(7 + (uint64_t)step); /* dropout draws the same masks on both devices */
            ok = ok && zoo_step_fn(r[d], in[d], 2, &loss[d], 1) == OAR_OK && oar_item(loss[d], &l[d]) == OAR_OK;
        }
        CHECK(ok);
        CHECK(!ok || oar_device_of(loss[1]) == OAR_CUDA);
        double gap = fabs(l[0] - l[1]) / (fabs(l[0]) > 1 ? fabs(l[0]) : 1);
        if (gap > worst) worst = gap;
        if (step == 0) first = l[1];
        last = l[1];
        oar_scope_end();
    }
    printf("test_cuda: %-9s %d steps on the GPU: loss %.4f -> %.4f, largest gap to the host %.2g\n", name, steps,
           first, last, worst);
    /* the GPU's convolutions and sums add in other orders than the host's, and SGD with momentum
     * carries those last-bit differences on: resnet20's 8 steps reach 2.6e-3 on an H100 */
    CHECK(ok && worst < 5e-3);
    /* a checkpoint of the GPU model (weights and optimizer state) loads on the host, bit for bit */
    char path[64];
    snprintf(path, sizeof path, "test_cuda_%s.safetensors", name);
    oar_status saved = oar_checkpoint_save(path, gpu.m, gpu.opt, steps);
    if (saved == OAR_ERR_UNSUPPORTED) { /* a build without cJSON has no safetensors */
        printf("test_cuda: %s: checkpoint skipped (%s)\n", name, oar_last_error());
    } else {
        CHECK(saved == OAR_OK);
        int64_t step = 0;
        CHECK(oar_checkpoint_load(path, host.m, host.opt, &step) == OAR_OK && step == steps);
        int diffs = 0;
        for (int i = 0; i < oar_module_num_parameters(gpu.m); i++)
            diffs += !t_same_bits(oar_module_parameter(host.m, i, NULL), oar_module_parameter(gpu.m, i, NULL));
        CHECK(diffs == 0);
        remove(path);
    }
    /* a GPU tensor written to .npy (no cJSON needed) reads back on the host bit for bit */
    snprintf(path, sizeof path, "test_cuda_%s.npy", name);
    oar_tensor *p0 = oar_module_parameter(gpu.m, 0, NULL);
    CHECK(oar_npy_save(path, p0) == OAR_OK);
    oar_tensor *back = oar_npy_load(path);
    CHECK(back && t_same_bits(back, p0));
    oar_release(back);
    remove(path);
    zoo_run_free(&host);
    zoo_run_free(&gpu);
}

/* ---- compiled programs on the GPU and CUDA graphs (docs/cuda.md, "Compiled programs and
 * CUDA graphs") */

/* y = relu(x @ w + 1), w the user's tensor (bound by reference as a parameter) */
static oar_status affine_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_relu(oar_add_scalar(oar_matmul(in[0], (oar_tensor *)user), 1.0));
    return out[0] ? OAR_OK : oar_last_status();
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in; (void)n_out;
    out[0] = oar_forward((oar_module *)user, in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

/* the mean cross-entropy of logits in[0] for labels in[1]: recorded, the count of valid
 * targets and the mean's division on the device */
static oar_status loss_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    out[0] = oar_cross_entropy(oar_mul_scalar(in[0], 2.0), in[1], NULL);
    return out[0] ? OAR_OK : oar_last_status();
}

/* dropout draws new counters every run: recorded, the counters read from device memory */
static oar_status dropout_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)user; (void)n_in; (void)n_out;
    out[0] = oar_dropout(oar_add_scalar(in[0], 1.0), 0.5, true);
    return out[0] ? OAR_OK : oar_last_status();
}

static void compiled_basics(void) {
    oar_tensor *w = oar_to(iota(16, 8, 0.5), OAR_CUDA), *xh = iota(4, 16, 2.0), *x = oar_to(xh, OAR_CUDA);
    oar_tensor *want = NULL, *y[4] = {0};
    CHECK(affine_fn(w, &x, 1, &want, 1) == OAR_OK); /* eager */
    oar_jit *f = oar_jit_to_static(affine_fn, w, NULL);
    for (int k = 0; k < 4; k++) CHECK(oar_jit_call(f, &x, 1, &y[k], 1) == OAR_OK); /* run, record, replay */
    for (int k = 0; k < 4; k++) CHECK(y[k] && oar_device_of(y[k]) == OAR_CUDA && t_same_bits(y[k], want));
    CHECK(oar_jit_num_traces(f) == 1);
    CHECK(oar_jit_cuda_graph_count(f, 0) == 1);
    printf("test_cuda: compiled affine: %d graph(s); %s\n", oar_jit_cuda_graph_count(f, 0),
           oar_jit_cuda_graph_note(f, 0));
    /* outputs are the caller's: a later run does not overwrite an earlier result */
    oar_tensor *x2 = oar_to(iota(4, 16, -1.0), OAR_CUDA), *y2 = NULL;
    CHECK(oar_jit_call(f, &x2, 1, &y2, 1) == OAR_OK && !t_same_bits(y2, y[3]) && t_same_bits(y[3], want));
    /* a GPU program is not saved (the file holds host data) */
    oar_clear_error();
    CHECK(oar_jit_save(f, "test_cuda_gpu.oar") == OAR_ERR_UNSUPPORTED && strstr(oar_last_error(), "host program"));
    /* one device per program: host inputs trace a host program, which refuses the GPU weight */
    oar_tensor *yh = NULL;
    oar_clear_error();
    CHECK(oar_jit_call(f, &xh, 1, &yh, 1) != OAR_OK && strstr(oar_last_error(), "one device"));
    oar_tensor *two[2] = {xh, x};
    oar_jit *g = oar_jit_to_static(loss_fn, NULL, NULL);
    oar_clear_error();
    CHECK(oar_jit_call(g, two, 2, &yh, 1) != OAR_OK && strstr(oar_last_error(), "one device"));
    oar_jit_free(g);
    oar_jit_free(f);
}

/* Ops that read per-run values are recorded too: cross-entropy's count of valid targets stays
 * on the device (ignore_index included), dropout reads its counters from device memory the
 * executor refreshes, so every replay equals eager bit for bit and draws a fresh mask. */
static void compiled_recorded(void) {
    int64_t n = 32;
    oar_tensor *z = oar_to(iota(n, 10, 1.5), OAR_CUDA);
    oar_tensor *lab_h = oar_randint(0, 10, &n, 1, OAR_I64);
    int64_t *lh = oar_data(lab_h);
    for (int i = 0; i < 32; i += 5) lh[i] = -100; /* ignored: the mean divides by the rest */
    oar_tensor *lab = oar_to(lab_h, OAR_CUDA);
    oar_tensor *in[2] = {z, lab}, *want = NULL, *got = NULL;
    CHECK(loss_fn(NULL, in, 2, &want, 1) == OAR_OK);
    oar_jit *f = oar_jit_to_static(loss_fn, NULL, NULL);
    for (int k = 0; k < 4; k++) CHECK(oar_jit_call(f, in, 2, &got, 1) == OAR_OK && t_same_bits(got, want));
    /* other labels in a replay: a new count, still eager's loss */
    oar_tensor *lab2 = oar_to(oar_randint(0, 10, &n, 1, OAR_I64), OAR_CUDA), *in2[2] = {z, lab2};
    CHECK(loss_fn(NULL, in2, 2, &want, 1) == OAR_OK);
    CHECK(oar_jit_call(f, in2, 2, &got, 1) == OAR_OK && t_same_bits(got, want));
    printf("test_cuda: compiled cross-entropy: %d graph(s); %s\n", oar_jit_cuda_graph_count(f, 0),
           oar_jit_cuda_graph_note(f, 0));
    CHECK(oar_jit_cuda_graph_count(f, 0) == 1);
    CHECK(strcmp(oar_jit_cuda_graph_note(f, 0), "the whole step is recorded") == 0);
    oar_jit_free(f);
    /* a label out of range is an error in a program's first (plain) run */
    oar_jit *b = oar_jit_to_static(loss_fn, NULL, NULL);
    lh[3] = 10;
    oar_tensor *bad[2] = {z, oar_to(lab_h, OAR_CUDA)};
    oar_clear_error();
    CHECK(oar_jit_call(b, bad, 2, &got, 1) != OAR_OK && strstr(oar_last_error(), "target values"));
    oar_jit_free(b);
    /* random draws: recorded, and each replay draws eager's mask for the same seed, not the last one */
    oar_jit *d = oar_jit_to_static(dropout_fn, NULL, NULL);
    oar_tensor *r[5] = {0};
    for (int k = 0; k < 5; k++) {
        oar_manual_seed(5 + (uint64_t)k);
        oar_tensor *e = NULL;
        CHECK(dropout_fn(NULL, &z, 1, &e, 1) == OAR_OK);
        oar_manual_seed(5 + (uint64_t)k);
        CHECK(oar_jit_call(d, &z, 1, &r[k], 1) == OAR_OK && t_same_bits(r[k], e));
    }
    for (int k = 2; k < 5; k++) CHECK(!t_same_bits(r[k - 1], r[k]));
    /* without reseeding, the generator moves on as eager calls move it */
    oar_manual_seed(9);
    oar_tensor *e1 = NULL, *e2 = NULL, *g1 = NULL, *g2 = NULL;
    CHECK(dropout_fn(NULL, &z, 1, &e1, 1) == OAR_OK && dropout_fn(NULL, &z, 1, &e2, 1) == OAR_OK);
    oar_manual_seed(9);
    CHECK(oar_jit_call(d, &z, 1, &g1, 1) == OAR_OK && oar_jit_call(d, &z, 1, &g2, 1) == OAR_OK);
    CHECK(t_same_bits(g1, e1) && t_same_bits(g2, e2) && !t_same_bits(g1, g2));
    printf("test_cuda: compiled dropout: %d graph(s); %s\n", oar_jit_cuda_graph_count(d, 0),
           oar_jit_cuda_graph_note(d, 0));
    CHECK(oar_jit_cuda_graph_count(d, 0) == 1);
    CHECK(strstr(oar_jit_cuda_graph_note(d, 0), "random") == NULL);
    oar_jit_free(d);
}

/* Out of memory inside a compiled step is a status, and the program runs again afterwards. */
static void compiled_oom(void) {
    oar_tensor *w = oar_to(iota(256, 256, 0.5), OAR_CUDA), *x = oar_to(iota(4096, 256, 1.0), OAR_CUDA), *y = NULL;
    oar_jit *f = oar_jit_to_static(affine_fn, w, NULL);
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_OK);
    /* the 4 MiB output handed out by the next run does not fit */
    CHECK(oar_memory_set_limit(OAR_CUDA, oar_memory_stats_get(OAR_CUDA).current_bytes + (1 << 20)) == OAR_OK);
    oar_clear_error();
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_ERR_OOM);
    CHECK(strstr(oar_last_error(), "out of memory") != NULL);
    CHECK(oar_memory_set_limit(OAR_CUDA, 0) == OAR_OK);
    oar_tensor *want = NULL;
    CHECK(affine_fn(w, &x, 1, &want, 1) == OAR_OK);
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_OK && t_same_bits(y, want));
    oar_jit_free(f);
}

/* A predictor on the GPU runs an exported host model: the host predictor's classes, and the
 * same bits at every (replayed) run. */
/* An exported model in the predictor on the GPU (host or device inputs) against the host
 * predictor. resnet20's batch norms are folded into its convs by fold_conv_bn, whose constant
 * must live on the program's device. */
static void predictor_on_gpu(const char *name) {
    oar_manual_seed(3);
    oar_module *m = oar_zoo_create(name, NULL);
    oar_module_train(m, false);
    oar_jit_opts jo = {.module = m};
    oar_jit *f = oar_jit_to_static(forward_fn, m, &jo);
    const oar_zoo_info *info = oar_zoo_find(name);
    int64_t hw = info->in_channels == 3 ? 32 : 28, shape[4] = {8, info->in_channels, hw, hw};
    oar_tensor *x = oar_randn(shape, 4, OAR_F32), *y = NULL;
    CHECK(oar_jit_call(f, &x, 1, &y, 1) == OAR_OK);
    if (oar_jit_save(f, "test_cuda_model") == OAR_ERR_UNSUPPORTED) { /* model files need cJSON */
        printf("test_cuda: GPU predictor skipped for %s (%s)\n", name, oar_last_error());
        oar_clear_error();
        oar_jit_free(f);
        oar_module_free(m);
        return;
    }
    oar_predictor_config cfg = {.model_path = "test_cuda_model"};
    oar_predictor *host = oar_predictor_create(&cfg), *gpu = oar_predictor_create_on(&cfg, OAR_CUDA);
    CHECK(host && gpu);
    const char *in = oar_predictor_input_name(host, 0), *out = oar_predictor_output_name(host, 0);
    CHECK(oar_predictor_set_input(host, in, x) == OAR_OK && oar_predictor_run(host) == OAR_OK);
    oar_tensor *want = oar_predictor_get_output(host, out), *first = NULL;
    for (int k = 0; k < 3; k++) {
        CHECK(oar_predictor_set_input(gpu, in, k == 1 ? oar_to(x, OAR_CUDA) : x) == OAR_OK); /* host or GPU */
        CHECK(oar_predictor_run(gpu) == OAR_OK);
        oar_tensor *got = oar_predictor_get_output(gpu, out);
        CHECK(got && oar_device_of(got) == OAR_CUDA);
        if (!first) first = got;
        CHECK(t_same_bits(got, first));
        oar_tensor *d = oar_amax(oar_abs(oar_sub(oar_to(got, OAR_CPU), want)), NULL, 0, false);
        double gap = 1;
        CHECK(d && oar_item(d, &gap) == OAR_OK && gap < 1e-3);
    }
    oar_predictor_free(host);
    oar_predictor_free(gpu);
    oar_jit_free(f);
    oar_module_free(m);
    remove("test_cuda_model.json");
    remove("test_cuda_model.safetensors");
}

/* Each zoo model trained on the GPU three ways from the same weights and batches, in
 * deterministic mode: eager, compiled with graphs off, compiled with graphs replayed. The
 * same kernels run in the same order, so losses and parameters are bitwise equal. */
static void compiled_zoo(const char *name, int steps, int64_t batch, oar_optim_kind kind) {
    oar_optim_opts oo = oar_optim_defaults(kind);
    oo.lr = kind == OAR_OPTIM_SGD ? 0.05 : 1e-3;
    oo.momentum = kind == OAR_OPTIM_SGD ? 0.9 : oo.momentum;
    const oar_zoo_info *info = oar_zoo_find(name);
    zoo_run r[3];
    for (int k = 0; k < 3; k++) { /* the model moved before its optimizer is made, as in train_zoo */
        oar_manual_seed(11);
        r[k].m = oar_zoo_create(name, NULL);
        CHECK(oar_module_to(r[k].m, OAR_CUDA) == OAR_OK);
        r[k].opt = oar_optimizer_for(r[k].m, &oo);
        r[k].language = info->input == OAR_ZOO_TOKENS || info->input == OAR_ZOO_TOKENS_STATEFUL;
        r[k].stateful = info->input == OAR_ZOO_TOKENS_STATEFUL;
        r[k].vocab = info->num_classes;
    }
    oar_jit *f[3] = {NULL};
    for (int k = 1; k < 3; k++) {
        oar_jit_opts jo = {.module = r[k].m, .optimizer = r[k].opt};
        CHECK(oar_build_strategy_set(&jo.strategy, "fuse_attention", false) == OAR_OK); /* as test_static_zoo */
        f[k] = oar_jit_to_static(zoo_step_fn, &r[k], &jo);
    }
    int loss_diffs = 0;
    bool ok = true;
    for (int step = 0; step < steps && ok; step++) {
        oar_scope_begin();
        oar_manual_seed(100 + (uint64_t)step);
        oar_tensor *x = NULL, *y = NULL, *loss[3] = {0};
        zoo_batch(info, batch, 16, &x, &y);
        oar_tensor *in[2] = {oar_to(x, OAR_CUDA), oar_to(y, OAR_CUDA)};
        if (step == 3) /* an edit between replays: the hyper-parameters are read per run */
            for (int k = 0; k < 3; k++) oar_optimizer_group_opts(r[k].opt, 0)->lr = oo.lr * 0.5;
        for (int k = 0; k < 3 && ok; k++) {
            oar_manual_seed(7 + (uint64_t)step); /* the same dropout masks */
            ok = oar_cuda_graphs_set_enabled(k == 2) == OAR_OK;
            ok = ok && (k == 0 ? zoo_step_fn(&r[0], in, 2, &loss[0], 1) : oar_jit_call(f[k], in, 2, &loss[k], 1)) ==
                           OAR_OK;
        }
        CHECK(ok);
        loss_diffs += ok && !(t_same_bits(loss[0], loss[1]) && t_same_bits(loss[0], loss[2]));
        oar_scope_end();
    }
    int diffs = zoo_param_grad_diffs(r[0].m, r[1].m) + zoo_param_grad_diffs(r[0].m, r[2].m);
    printf("test_cuda: %-9s %s eager / compiled / graphs on the GPU, %d steps: %d losses and %d tensors differ; "
           "%d graph(s): %s\n", name, kind == OAR_OPTIM_SGD ? "sgd " : "adam", steps, loss_diffs, diffs,
           oar_jit_cuda_graph_count(f[2], 0), oar_jit_cuda_graph_note(f[2], 0));
    CHECK(ok && loss_diffs == 0 && diffs == 0);
    /* the whole training step (forward, loss, backward, optimizer) is one graph */
    CHECK(oar_jit_cuda_graph_count(f[2], 0) == 1);
    CHECK(strcmp(oar_jit_cuda_graph_note(f[2], 0), "the whole step is recorded") == 0);
    CHECK(oar_jit_cuda_graph_count(f[1], 0) == 0); /* graphs were off for it */
    CHECK(oar_cuda_graphs_set_enabled(true) == OAR_OK);
    for (int k = 0; k < 3; k++) {
        oar_jit_free(f[k]);
        zoo_run_free(&r[k]);
    }
}

/* gpt-mini compiled with the default passes (fuse_attention on: its scale constant lives on the
 * GPU, which the pass once read through a host pointer and crashed), AdamW, batch 16, replayed
 * as a CUDA graph: the losses follow eager within fusion rounding. Then a replay whose targets
 * are out of range: nothing was checked before the launch, so the loss is NaN (no read out of
 * bounds), and the next good batch trains again. */
static void compiled_gpt_default_passes(void) {
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
    oo.lr = 1e-3;
    const oar_zoo_info *info = oar_zoo_find("gpt-mini");
    zoo_run r[2];
    for (int k = 0; k < 2; k++) {
        oar_manual_seed(21);
        r[k].m = oar_zoo_create("gpt-mini", NULL);
        CHECK(oar_module_to(r[k].m, OAR_CUDA) == OAR_OK);
        r[k].opt = oar_optimizer_for(r[k].m, &oo);
        r[k].language = true;
        r[k].stateful = false;
        r[k].vocab = info->num_classes;
    }
    oar_jit_opts jo = {.module = r[1].m, .optimizer = r[1].opt};
    oar_jit *f = oar_jit_to_static(zoo_step_fn, &r[1], &jo);
    CHECK(f != NULL);
    double worst = 0;
    bool ok = f != NULL;
    for (int step = 0; step < 4 && ok; step++) {
        oar_scope_begin();
        oar_manual_seed(300 + (uint64_t)step);
        oar_tensor *x = NULL, *y = NULL, *loss[2] = {0};
        zoo_batch(info, 16, 32, &x, &y);
        oar_tensor *in[2] = {oar_to(x, OAR_CUDA), oar_to(y, OAR_CUDA)};
        double l[2] = {0, 0};
        oar_manual_seed(9 + (uint64_t)step);
        ok = zoo_step_fn(&r[0], in, 2, &loss[0], 1) == OAR_OK && oar_item(loss[0], &l[0]) == OAR_OK;
        oar_manual_seed(9 + (uint64_t)step);
        ok = ok && oar_jit_call(f, in, 2, &loss[1], 1) == OAR_OK && oar_item(loss[1], &l[1]) == OAR_OK;
        if (ok && fabs(l[0] - l[1]) / fabs(l[0]) > worst) worst = fabs(l[0] - l[1]) / fabs(l[0]);
        oar_scope_end();
    }
    CHECK(ok && worst < 1e-4);
    CHECK(f && oar_jit_cuda_graph_count(f, 0) == 1);
    if (ok) {
        oar_scope_begin();
        oar_tensor *x = NULL, *y = NULL, *loss = NULL;
        zoo_batch(info, 16, 32, &x, &y);
        oar_tensor *bad = oar_full(oar_shape(y), oar_ndim(y), (double)info->num_classes, OAR_I64); /* out of range */
        oar_tensor *in[2] = {oar_to(x, OAR_CUDA), oar_to(bad, OAR_CUDA)};
        double l = 0;
        CHECK(oar_jit_call(f, in, 2, &loss, 1) == OAR_OK && oar_item(loss, &l) == OAR_OK && isnan(l));
        oar_scope_end();
    }
    printf("test_cuda: gpt-mini adamw default passes, batch 16, graph replays: loss rel. diff %.2e vs eager\n",
           worst);
    oar_jit_free(f);
    for (int k = 0; k < 2; k++) zoo_run_free(&r[k]);
}

/* ||a - b|| / ||b|| over all elements, in f32 on the GPU (-1 when either is missing). */
static double rel_error(oar_tensor *a, oar_tensor *b) {
    if (!a || !b) return -1;
    oar_tensor *bf = oar_cast(b, OAR_F32);
    double num = -1, den = -1;
    if (oar_item(oar_norm(oar_sub(oar_cast(a, OAR_F32), bf), 2, NULL, 0, false), &num) != OAR_OK ||
        oar_item(oar_norm(bf, 2, NULL, 0, false), &den) != OAR_OK || !(den > 0))
        return -1;
    return num / den;
}

/* GPT-2's attention shape in bf16 (the fused op's tensor-core path, causal) against the same
 * attention composed in f32 on the GPU, forward and backward: normalized errors at bf16's
 * scale. */
static void attention_bf16_gpt2(void) {
    oar_scope_begin();
    int64_t shape[4] = {2, 12, 1024, 64}, sq[2] = {1024, 1024};
    double scale = 0.125;
    oar_tensor *x[3], *w = oar_to(oar_randn(shape, 4, OAR_F32), OAR_CUDA);
    for (int i = 0; i < 3; i++) /* inputs exactly representable in bf16, so both paths see one problem */
        x[i] = oar_cast(oar_cast(oar_to(oar_randn(shape, 4, OAR_F32), OAR_CUDA), OAR_BF16), OAR_F32);
    oar_tensor *mask = oar_to(oar_triu(oar_ones(sq, 2, OAR_BOOL), 1), OAR_CUDA);
    /* the reference: f32, composed */
    for (int i = 0; i < 3; i++) CHECK(oar_set_requires_grad(x[i], true) == OAR_OK);
    oar_tensor *s = oar_mul_scalar(oar_matmul(x[0], oar_transpose(x[1], -1, -2)), scale);
    oar_tensor *ref = oar_matmul(oar_softmax(oar_masked_fill(s, mask, -INFINITY), -1), x[2]);
    oar_tensor *ref_loss = oar_sum(oar_mul(ref, w), NULL, 0, false), *gref[3] = {NULL, NULL, NULL};
    CHECK(ref_loss && oar_grad(&ref_loss, 1, NULL, x, 3, gref, NULL) == OAR_OK);
    /* bf16 through the fused op */
    oar_tensor *h[3], *gh[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        h[i] = oar_cast(oar_detach(x[i]), OAR_BF16);
        CHECK(h[i] && oar_set_requires_grad(h[i], true) == OAR_OK);
    }
    oar_tensor *out = oar_scaled_dot_product_attention(h[0], h[1], h[2], NULL, scale, true);
    oar_tensor *loss = oar_sum(oar_mul(oar_cast(out, OAR_F32), w), NULL, 0, false);
    CHECK(loss && oar_grad(&loss, 1, NULL, h, 3, gh, NULL) == OAR_OK);
    double e_out = rel_error(out, ref), e_g[3];
    for (int i = 0; i < 3; i++) e_g[i] = rel_error(gh[i], gref[i]);
    printf("test_cuda: bf16 causal attention [2, 12, 1024, 64] vs f32 composed: normalized error out %.2e, dq %.2e, "
           "dk %.2e, dv %.2e\n", e_out, e_g[0], e_g[1], e_g[2]);
    CHECK(e_out >= 0 && e_out < 1e-2);
    for (int i = 0; i < 3; i++) CHECK(e_g[i] >= 0 && e_g[i] < 2e-2);
    for (int i = 0; i < 3; i++) {
        oar_release(gref[i]);
        oar_release(gh[i]);
    }
    oar_scope_end();
}

/* embedding_backward at GPT-2's scale of indices, with many repeats: the GPU's sorted runs add
 * in index order in double as the host does, so f32 and bf16 results match the host bit for
 * bit, and twice the same. */
static void embedding_backward_large(void) {
    oar_scope_begin();
    int64_t gs[2] = {8192, 96}, is[1] = {8192};
    oar_tensor *idx = oar_randint(0, 1000, is, 1, OAR_I64); /* 1000 rows of 5000 unused */
    for (int k = 0; k < 2; k++) {
        oar_dtype dt = k ? OAR_BF16 : OAR_F32;
        oar_tensor *g = oar_cast(oar_randn(gs, 2, OAR_F32), dt);
        oar_attr a = oar_attr_int(5000);
        oar_tensor *in[2] = {g, idx}, *din[2] = {oar_to(g, OAR_CUDA), oar_to(idx, OAR_CUDA)};
        oar_tensor *host = oar_op_call1(OAR_OP_embedding_backward, in, 2, &a);
        oar_tensor *dev1 = oar_op_call1(OAR_OP_embedding_backward, din, 2, &a);
        oar_tensor *dev2 = oar_op_call1(OAR_OP_embedding_backward, din, 2, &a);
        CHECK(host && dev1 && dev2);
        CHECK(host && dev1 && t_same_bits(oar_to(dev1, OAR_CPU), host));
        CHECK(dev1 && dev2 && t_same_bits(oar_to(dev1, OAR_CPU), oar_to(dev2, OAR_CPU)));
    }
    oar_scope_end();
}

/* One op's outputs on the GPU, twice, against the host's, bit for bit (f64 inputs: the host
 * runs the reference kernel). */
static void same_bits_on_gpu(oar_op_id op, oar_tensor *const *in, int n_in, const oar_attr *a, const char *what) {
    oar_tensor *din[4] = {0}, *h[2] = {0}, *d1[2] = {0}, *d2[2] = {0};
    int nh = 2, n1 = 2, n2 = 2;
    for (int i = 0; i < n_in; i++) din[i] = oar_to(in[i], OAR_CUDA);
    bool ok = oar_op_call(op, in, n_in, a, h, &nh) == OAR_OK && oar_op_call(op, din, n_in, a, d1, &n1) == OAR_OK &&
              oar_op_call(op, din, n_in, a, d2, &n2) == OAR_OK && nh == n1 && n1 == n2;
    for (int o = 0; ok && o < nh; o++)
        ok = t_same_bits(oar_to(d1[o], OAR_CPU), h[o]) && t_same_bits(oar_to(d2[o], OAR_CPU), h[o]);
    if (!ok) printf("test_cuda: %s (%s) on the GPU differs from the host's reference: %s\n", oar_op_table[op]->name,
                    what, oar_last_error());
    CHECK(ok);
    for (int o = 0; o < 2; o++) {
        oar_tensor_unref(h[o]);
        oar_tensor_unref(d1[o]);
        oar_tensor_unref(d2[o]);
    }
}

/* The vision ops' kernels past the sweep's sizes: grid_sample's and roi_align's input gradients
 * where many points feed each input element (long runs in the sorted scatter), and nms over
 * thousands of boxes with tied scores (many mask words per row). */
static void vision_ops_large(void) {
    oar_scope_begin();
    int64_t xs[4] = {2, 8, 12, 16}, gs[4] = {2, 96, 80, 2}, ys[4] = {2, 8, 96, 80};
    oar_tensor *x = oar_randn(xs, 4, OAR_F64), *gy = oar_randn(ys, 4, OAR_F64);
    oar_tensor *grid = oar_sub_scalar(oar_mul_scalar(oar_rand(gs, 4, OAR_F64), 2.4), 1.2); /* past the borders */
    const char *modes[3] = {"bilinear", "bicubic", "nearest"}, *pads[3] = {"zeros", "reflection", "border"};
    for (int m = 0; m < 3; m++) {
        oar_attr a[3] = {oar_attr_str(modes[m]), oar_attr_str(pads[m]), oar_attr_int(m == 1)};
        oar_tensor *fw[2] = {x, grid}, *bw[3] = {gy, x, grid};
        same_bits_on_gpu(OAR_OP_grid_sample, fw, 2, a, modes[m]);
        same_bits_on_gpu(OAR_OP_grid_sample_backward, bw, 3, a, modes[m]);
    }
    int64_t xs5[5] = {1, 3, 5, 6, 7}, gs5[5] = {1, 10, 12, 14, 3}, ys5[5] = {1, 3, 10, 12, 14};
    oar_tensor *bw5[3] = {oar_randn(ys5, 5, OAR_F64), oar_randn(xs5, 5, OAR_F64),
                          oar_sub_scalar(oar_mul_scalar(oar_rand(gs5, 5, OAR_F64), 2.2), 1.1)};
    oar_attr a5[3] = {oar_attr_str("bilinear"), oar_attr_str("border"), oar_attr_int(1)};
    same_bits_on_gpu(OAR_OP_grid_sample_backward, bw5, 3, a5, "trilinear");

    /* 40 overlapping boxes over 2 images of 20 x 24, some past the border, adaptive sampling */
    enum { K = 40, NB = 3000 };
    double rows[K * 5], boxes[NB * 4], scores[NB];
    uint64_t r = 12345;
#define NEXT() ((double)((r = r * 6364136223846793005ULL + 1442695040888963407ULL) >> 11) / 9007199254740992.0)
    for (int k = 0; k < K; k++) {
        double x1 = NEXT() * 26 - 3, y1 = NEXT() * 22 - 3;
        double v[5] = {(double)(k % 2), x1, y1, x1 + 0.5 + NEXT() * 12, y1 + 0.5 + NEXT() * 10};
        memcpy(rows + k * 5, v, sizeof v);
    }
    int64_t rs[2] = {K, 5}, rx[4] = {2, 4, 20, 24}, rg[4] = {K, 4, 7, 6};
    oar_tensor *rb = oar_from_data(rows, rs, 2, OAR_F64), *rin = oar_randn(rx, 4, OAR_F64);
    int64_t size[2] = {7, 6}, shape[4] = {2, 4, 20, 24};
    oar_attr ra[5] = {oar_attr_ints(shape, 4), oar_attr_ints(size, 2), oar_attr_float(0.9), oar_attr_int(-1),
                      oar_attr_int(1)};
    oar_tensor *rfw[2] = {rin, rb}, *rbw[2] = {oar_randn(rg, 4, OAR_F64), rb};
    same_bits_on_gpu(OAR_OP_roi_align, rfw, 2, ra + 1, "adaptive, aligned");
    same_bits_on_gpu(OAR_OP_roi_align_backward, rbw, 2, ra, "adaptive, aligned");

    /* nms: boxes in clusters, scores rounded to 1/16 (ties), threshold 0.4 */
    for (int i = 0; i < NB; i++) {
        double cx = (double)(i % 37) * 9 + NEXT() * 6, cy = (double)(i % 23) * 11 + NEXT() * 6;
        double v[4] = {cx, cy, cx + 4 + NEXT() * 10, cy + 4 + NEXT() * 10};
        memcpy(boxes + i * 4, v, sizeof v);
        scores[i] = floor(NEXT() * 16) / 16;
    }
#undef NEXT
    int64_t bs[2] = {NB, 4}, ss[1] = {NB};
    oar_tensor *nin[2] = {oar_from_data(boxes, bs, 2, OAR_F64), oar_from_data(scores, ss, 1, OAR_F64)};
    oar_attr na = oar_attr_float(0.4);
    same_bits_on_gpu(OAR_OP_nms, nin, 2, &na, "3000 boxes");
    oar_scope_end();
}

/* cross_entropy over GPT-2's vocabulary (one read of each row on the GPU) against the host. */
static void cross_entropy_large_vocab(void) {
    oar_scope_begin();
    int64_t xs[2] = {64, 50257}, ts[1] = {64};
    oar_tensor *x = oar_mul_scalar(oar_randn(xs, 2, OAR_F32), 3.0), *t = oar_randint(0, 50257, ts, 1, OAR_I64);
    CHECK(oar_set_requires_grad(x, true) == OAR_OK);
    oar_tensor *xd = oar_to(oar_detach(x), OAR_CUDA);
    CHECK(oar_set_requires_grad(xd, true) == OAR_OK);
    oar_ce_opts o = oar_ce_defaults();
    o.reduction = OAR_REDUCE_NONE;
    oar_tensor *lh = oar_cross_entropy(x, t, &o), *ld = oar_cross_entropy(xd, oar_to(t, OAR_CUDA), &o);
    oar_tensor *gh = NULL, *gd = NULL, *lhs = oar_sum(lh, NULL, 0, false), *lds = oar_sum(ld, NULL, 0, false);
    CHECK(lhs && lds && oar_grad(&lhs, 1, NULL, &x, 1, &gh, NULL) == OAR_OK &&
          oar_grad(&lds, 1, NULL, &xd, 1, &gd, NULL) == OAR_OK);
    double e_loss = rel_error(ld, oar_to(lh, OAR_CUDA)), e_grad = rel_error(gd, gh ? oar_to(gh, OAR_CUDA) : NULL);
    printf("test_cuda: cross_entropy [64, 50257] f32 GPU vs host: normalized error loss %.2e, grad %.2e\n", e_loss,
           e_grad);
    CHECK(e_loss >= 0 && e_loss < 1e-6);
    CHECK(e_grad >= 0 && e_grad < 1e-5);
    oar_release(gh);
    oar_release(gd);
    oar_scope_end();
}

int main(void) {
    oar_scope_begin();
    if (!oar_cuda_is_available()) {
        without_gpu();
        oar_scope_end();
        if (t_failed) return test_summary("test_cuda");
        printf("test_cuda: %s; GPU checks skipped\n",
               oar_cuda_is_built() ? "no CUDA device on this machine" : "this build has no CUDA");
        return 77;
    }
    copies();
    devices_mixed();
    default_device();
    allocator();
    autograd_across_devices();
    train_mlp();
    profiler_gpu();
    train_amp(OAR_BF16, false);
    train_amp(OAR_F16, true);
    nccl_one_rank();
    attention_bf16_gpt2();
    embedding_backward_large();
    cross_entropy_large_vocab();
    vision_ops_large();
    oar_scope_end();
    const char *zoo[] = {"tiny", "mlp", "lenet", "resnet20", "mobilenet", "gpt-mini", "lstm-lm"};
    for (int i = 0; i < (int)(sizeof zoo / sizeof zoo[0]); i++) train_zoo(zoo[i], 8, 16);
    oar_set_deterministic(true);
    oar_scope_begin();
    compiled_basics();
    compiled_recorded();
    compiled_oom();
    predictor_on_gpu("lenet");
    predictor_on_gpu("resnet20");
    oar_scope_end();
    bool quick = getenv("OAR_TEST_CUDA_QUICK") != NULL; /* under compute-sanitizer: tiny and lenet, no timings */
    for (int i = 0; i < (int)(sizeof zoo / sizeof zoo[0]); i++)
        if (!quick || i == 0 || i == 2) compiled_zoo(zoo[i], 5, 8, OAR_OPTIM_SGD);
    compiled_zoo("mlp", 5, 8, OAR_OPTIM_ADAM); /* bias corrections change every step */
    if (!quick) compiled_gpt_default_passes();
    return test_summary("test_cuda");
}
