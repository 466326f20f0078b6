/* `oar bench --workload tiny|mlp|lenet|resnet20|gpt-mini|lstm-lm`: the time of one eager
 * training step (forward, loss, backward, optimizer step, zero_grad) on the shapes of the
 * reference workloads in ../shared/bench/torch_workloads.py: fixed random inputs, the same
 * optimizers, the median over the timed steps. Prints one JSON object. */
#include "cli.h"
#include "bench_util.h"
#include "oar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

typedef struct workload {
    const char *name;
    int64_t batch, context;   /* defaults: samples per step; tokens per sequence (language models) */
    bool tokens;
    int default_steps;
} workload;

static const workload WORKLOADS[] = {
    {"tiny", 32, 0, false, 300}, {"mlp", 128, 0, false, 50}, {"lenet", 64, 0, false, 50},
    {"resnet20", 32, 0, false, 10}, {"gpt-mini", 8, 128, true, 10}, {"lstm-lm", 20, 35, true, 10},
};

static const workload *find_workload(const char *name) {
    for (size_t i = 0; i < sizeof WORKLOADS / sizeof WORKLOADS[0]; i++)
        if (name && !strcmp(WORKLOADS[i].name, name)) return &WORKLOADS[i];
    return NULL;
}

bool bench_train_known(const char *name) { return find_workload(name) != NULL; }

typedef struct bench_state {
    oar_module *m;
    oar_optimizer *opt;
    oar_tensor *x, *y, *h, *c; /* h, c: lstm-lm's carried state */
    oar_tensor **params;
    int n_params;
    const char *name;
    oar_jit *jit; /* --mode static: the step compiled */
    oar_device dev;
    oar_autocast_opts amp; /* --amp O1|O2: the forward under autocast (enabled false: f32) */
    oar_amp_masters *masters; /* --amp O2: low parameters, f32 masters the optimizer steps */
    oar_grad_scaler *scaler;  /* --amp-dtype fp16: dynamic loss scaling */
} bench_state;

/* The workload's model, optimizer and fixed random batch of batch samples (sequences of
 * context tokens for the language models). */
static oar_status setup(const char *name, int64_t batch, int64_t context, oar_device dev, bench_state *b) {
    memset(b, 0, sizeof *b);
    b->dev = dev;
    b->name = name;
    oar_manual_seed(0);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_SGD);
    oo.lr = 0.01;
    oo.momentum = 0.9;
    b->m = oar_zoo_create(name, NULL);
    if (!b->m) return oar_last_status();
    oar_manual_seed(1234);
    if (!strcmp(name, "tiny") || !strcmp(name, "mlp") || !strcmp(name, "lenet") || !strcmp(name, "resnet20")) {
        int64_t xs[4][4] = {{batch, 64}, {batch, 784}, {batch, 1, 28, 28}, {batch, 3, 32, 32}};
        int which = !strcmp(name, "tiny") ? 0 : !strcmp(name, "mlp") ? 1 : !strcmp(name, "lenet") ? 2 : 3;
        int nd = which < 2 ? 2 : 4;
        b->x = oar_randn(xs[which], nd, OAR_F32);
        b->y = oar_randint(0, 10, xs[which], 1, OAR_I64);
        if (which == 3) {
            oo.lr = 0.1;
            oo.weight_decay = 5e-4;
        }
    } else if (!strcmp(name, "gpt-mini")) {
        int64_t s[2] = {batch, context};
        b->x = oar_randint(0, 256, s, 2, OAR_I64);
        b->y = oar_randint(0, 256, s, 2, OAR_I64);
        oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
        oo.lr = 3e-4;
        oo.weight_decay = 0.1;
    } else {
        int64_t s[2] = {context, batch}, hs[3] = {2, batch, 200};
        b->x = oar_randint(0, 10000, s, 2, OAR_I64);
        b->y = oar_randint(0, 10000, s, 2, OAR_I64);
        b->h = oar_zeros(hs, 3, OAR_F32);
        b->c = oar_zeros(hs, 3, OAR_F32);
        oo.lr = 1.0;
        oo.momentum = 0;
    }
    if (dev != OAR_CPU) { /* the model and the batch on the GPU, before the optimizer makes its state */
        oar_tensor **io[4] = {&b->x, &b->y, &b->h, &b->c};
        if (oar_module_to(b->m, dev) != OAR_OK) return oar_last_status();
        for (int i = 0; i < 4; i++)
            if (*io[i]) {
                oar_tensor *moved = oar_to(*io[i], dev);
                oar_release(*io[i]);
                *io[i] = moved;
            }
    }
    b->opt = oar_optimizer_for(b->m, &oo);
    b->n_params = oar_module_num_parameters(b->m);
    b->params = malloc(sizeof(oar_tensor *) * (size_t)b->n_params);
    for (int i = 0; i < b->n_params; i++) b->params[i] = oar_module_parameter(b->m, i, NULL);
    return b->x && b->y && b->opt ? OAR_OK : oar_last_status();
}

/* One training step as a function of its inputs (x, y, and lstm-lm's carried h, c), so the
 * same code runs eagerly and compiled: outputs are the loss (and the next h, c). */
static oar_status step_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    bench_state *b = user;
    oar_optimizer_zero_grad(b->opt);
    oar_profiler_range_push("forward"); /* forward and loss: a phase of the profiler's overview */
    if (b->amp.enabled && oar_autocast_begin(&b->amp) != OAR_OK) {
        oar_profiler_range_pop();
        return oar_last_status();
    }
    oar_tensor *loss;
    if (b->h) { /* truncated BPTT: the state carries over, detached */
        oar_tensor *hin[3] = {in[0], oar_detach(in[2]), oar_detach(in[3])}, *o[3];
        if (oar_forward_n(b->m, hin, 3, o, 3) != OAR_OK) {
            if (b->amp.enabled) oar_autocast_end();
            oar_profiler_range_pop();
            return oar_last_status();
        }
        int64_t s2[2] = {-1, 10000}, flat = -1;
        loss = oar_cross_entropy(oar_reshape(o[0], s2, 2), oar_reshape(in[1], &flat, 1), NULL);
        out[1] = oar_detach(o[1]);
        out[2] = oar_detach(o[2]);
    } else if (b->name[0] == 'g') {
        int64_t s2[2] = {-1, 256}, flat = -1;
        loss = oar_cross_entropy(oar_reshape(oar_forward(b->m, in[0]), s2, 2), oar_reshape(in[1], &flat, 1), NULL);
    } else {
        loss = oar_cross_entropy(oar_forward(b->m, in[0]), in[1], NULL);
    }
    if (b->amp.enabled) oar_autocast_end();
    oar_profiler_range_pop();
    oar_tensor *root = loss && b->scaler ? oar_grad_scaler_scale(b->scaler, loss) : loss;
    oar_status st = root ? oar_backward(root, NULL, false) : oar_last_status();
    if (st == OAR_OK && b->masters) st = oar_amp_masters_sync_grads(b->masters);
    if (st == OAR_OK && b->h && b->scaler) st = oar_grad_scaler_unscale(b->scaler, b->opt);
    if (st == OAR_OK && b->h) st = oar_clip_grad_norm(b->params, b->n_params, 0.25, 2.0, NULL);
    bool skipped = false; /* compiled: decided in the program (the sync then keeps the parameters' bits) */
    if (st == OAR_OK) st = b->scaler ? oar_grad_scaler_step(b->scaler, b->opt, &skipped) : oar_optimizer_step(b->opt);
    if (st == OAR_OK && b->masters && !skipped) st = oar_amp_masters_sync_params(b->masters);
    if (st == OAR_OK && b->scaler) st = oar_grad_scaler_update(b->scaler);
    out[0] = loss;
    (void)n_in;
    (void)n_out;
    return st;
}

static oar_status train_step(bench_state *b) {
    oar_scope_begin();
    oar_tensor *in[4] = {b->x, b->y, b->h, b->c}, *out[3] = {0};
    int n_in = b->h ? 4 : 2, n_out = b->h ? 3 : 1;
    oar_status st = b->jit ? oar_jit_call(b->jit, in, n_in, out, n_out) : step_fn(b, in, n_in, out, n_out);
    if (st == OAR_OK && b->dev != OAR_CPU) st = oar_synchronize(b->dev); /* the step's kernels are done */
    if (st == OAR_OK && b->h) {
        oar_release(b->h);
        oar_release(b->c);
        b->h = oar_keep(out[1]);
        b->c = oar_keep(out[2]);
    }
    oar_scope_end();
    return st;
}

static void teardown(bench_state *b) {
    oar_jit_free(b->jit);
    oar_release(b->x);
    oar_release(b->y);
    oar_release(b->h);
    oar_release(b->c);
    oar_optimizer_free(b->opt);
    oar_grad_scaler_free(b->scaler);
    oar_amp_masters_free(b->masters);
    oar_module_free(b->m);
    free(b->params);
}

/* --amp O2: the module's parameters to the low dtype, the optimizer (same options) over the f32
 * masters, which the clip then sees. */
static oar_status decorate(bench_state *b, oar_dtype dt) {
    oar_optim_opts oo = *oar_optimizer_group_opts(b->opt, 0);
    oar_amp_decorate_opts d = oar_amp_decorate_defaults();
    d.dtype = dt;
    oar_optimizer_free(b->opt);
    b->opt = NULL;
    if (!(b->masters = oar_amp_decorate(b->m, &d)) || !(b->opt = oar_amp_masters_optimizer(b->masters, &oo)))
        return oar_last_status();
    for (int i = 0; i < b->n_params && i < oar_amp_masters_count(b->masters); i++)
        b->params[i] = oar_amp_master(b->masters, i, NULL);
    return OAR_OK;
}

int oar_bench_train(int argc, char **argv) {
    const char *name = cli_flag_value(argc, argv, "--workload"), *mode = cli_flag_value(argc, argv, "--mode");
    const char *th = cli_flag_value(argc, argv, "--threads"), *st_s = cli_flag_value(argc, argv, "--steps");
    const workload *w = find_workload(name);
    if (!w) {
        fprintf(stderr, "oar bench: '%s' has no training workload to time; expected tiny, mlp, lenet, resnet20, "
                        "gpt-mini or lstm-lm\n", name ? name : "(none)");
        return 2;
    }
    const char *bs = cli_flag_value(argc, argv, "--batch"), *ctx_s = cli_flag_value(argc, argv, "--context");
    int64_t batch = bs ? atoll(bs) : w->batch, context = ctx_s ? atoll(ctx_s) : w->context;
    if (ctx_s && !w->tokens) {
        fprintf(stderr, "oar bench: --context is for the language models (gpt-mini, lstm-lm), not %s\n", w->name);
        return 2;
    }
    /* gpt-mini's position table has the model's context; lstm-lm unrolls any length */
    int64_t max_ctx = !strcmp(w->name, "gpt-mini") ? oar_zoo_find("gpt-mini")->context : 0;
    if (batch < 1 || (w->tokens && context < 1) || (max_ctx && context > max_ctx)) {
        fprintf(stderr, "oar bench: expected --batch >= 1%s, got --batch %lld --context %lld\n",
                max_ctx ? " and 1 <= --context <= the model's context" : w->tokens ? " and --context >= 1" : "",
                (long long)batch, (long long)context);
        if (max_ctx) fprintf(stderr, "oar bench: %s's context is %lld tokens\n", w->name, (long long)max_ctx);
        return 2;
    }
    int64_t items = w->tokens ? batch * context : batch;
    if (mode && strcmp(mode, "eager") != 0 && strcmp(mode, "static") != 0) {
        fprintf(stderr, "oar bench: unknown --mode %s; expected eager or static\n", mode);
        return 2;
    }
    bool statik = mode && !strcmp(mode, "static");
    const char *dev_s = cli_flag_value(argc, argv, "--device");
    if (dev_s && strcmp(dev_s, "cpu") != 0 && strcmp(dev_s, "cuda") != 0) {
        fprintf(stderr, "oar bench: unknown --device %s; expected cpu or cuda\n", dev_s);
        return 2;
    }
    oar_device dev = dev_s && !strcmp(dev_s, "cuda") ? OAR_CUDA : OAR_CPU;
    if (dev == OAR_CUDA && !oar_cuda_is_available()) {
        fprintf(stderr, "oar bench: --device cuda: %s\n",
                oar_cuda_is_built() ? "no CUDA device on this machine" : "this build has no CUDA (install the toolkit)");
        return 2;
    }
    if (th && oar_set_num_threads(atoi(th)) != OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        return 2;
    }
    const char *profile = cli_flag_value(argc, argv, "--profile");
    if (profile && strcmp(profile, "timer") != 0 && strcmp(profile, "full") != 0) {
        fprintf(stderr, "oar bench: unknown --profile '%s'; expected timer or full\n", profile);
        return 2;
    }
    /* --amp O1|O2 [--amp-dtype bf16|fp16]: autocast around the forward; O2 adds f32 masters,
     * fp16 dynamic loss scaling (as oar train --amp) */
    const char *amp = cli_flag_value(argc, argv, "--amp"), *amp_dt = cli_flag_value(argc, argv, "--amp-dtype");
    if ((amp && strcmp(amp, "O1") != 0 && strcmp(amp, "O2") != 0) ||
        (amp_dt && (!amp || (strcmp(amp_dt, "bf16") && strcmp(amp_dt, "fp16"))))) {
        fprintf(stderr, "oar bench: expected --amp O1 or O2 and --amp-dtype bf16 or fp16, got --amp %s --amp-dtype %s\n",
                amp ? amp : "(none)", amp_dt ? amp_dt : "(none)");
        return 2;
    }
    int steps = st_s ? atoi(st_s) : w->default_steps, warmup = 3;
    bench_state b;
    if (setup(w->name, batch, context, dev, &b) != OAR_OK) {
        fprintf(stderr, "oar bench: %s\n", oar_last_error());
        teardown(&b);
        return 1;
    }
    if (amp) {
        b.amp = oar_autocast_defaults();
        b.amp.dtype = amp_dt && !strcmp(amp_dt, "fp16") ? OAR_F16 : OAR_BF16;
        b.amp.level = !strcmp(amp, "O2") ? OAR_AMP_O2 : OAR_AMP_O1;
        if ((b.amp.level == OAR_AMP_O2 && decorate(&b, b.amp.dtype) != OAR_OK) ||
            (b.amp.dtype == OAR_F16 && !(b.scaler = oar_grad_scaler_new(NULL)))) {
            fprintf(stderr, "oar bench: %s\n", oar_last_error());
            teardown(&b);
            return 1;
        }
    }
    if (statik) {
        const oar_state_source *src[2];
        int n_src = 0;
        if (b.scaler) src[n_src++] = oar_grad_scaler_state_source(b.scaler);
        if (b.masters) src[n_src++] = oar_amp_masters_state_source(b.masters);
        oar_jit_opts jo = {.module = b.m, .optimizer = b.opt, .state_sources = src, .n_state_sources = n_src};
        /* --disable-pass A,B: the same binary with passes off, for A/B timings */
        if (cli_disable_passes(&jo.strategy, cli_flag_value(argc, argv, "--disable-pass"))) {
            teardown(&b);
            return 2;
        }
        b.jit = oar_jit_to_static(step_fn, &b, &jo);
    }
    double *t = malloc(sizeof(double) * (size_t)(steps > 0 ? steps : 1));
    int64_t peak_alloc = 0;
    /* --profile: the profiler runs over the timed steps (its overhead is the difference) */
    oar_profiler_opts po = oar_profiler_defaults(profile && !strcmp(profile, "full") ? OAR_PROFILER_FULL
                                                                                      : OAR_PROFILER_TIMER);
    po.items_unit = w->tokens ? "tokens" : "samples";
    for (int i = 0; i < warmup + steps; i++) {
        if (profile && i == warmup && oar_profiler_start(&po) != OAR_OK) {
            fprintf(stderr, "oar bench: %s\n", oar_last_error());
            free(t);
            teardown(&b);
            return 1;
        }
        if (i == warmup) oar_memory_reset_peak(dev);
        double t0 = bench_now_s();
        if (train_step(&b) != OAR_OK) {
            fprintf(stderr, "oar bench: %s\n", oar_last_error());
            free(t);
            teardown(&b);
            return 1;
        }
        if (profile) oar_profiler_step(items);
        if (i >= warmup) t[i - warmup] = (bench_now_s() - t0) * 1e3;
    }
    if (profile) {
        oar_profiler_stop();
        char *sum = malloc(1 << 16);
        if (sum) { /* the tables go to stderr: stdout stays one JSON object */
            oar_profiler_summary(sum, 1 << 16, OAR_PROFILER_SORT_TOTAL, 15);
            fputs(sum, stderr);
            free(sum);
        }
    }
    peak_alloc = oar_memory_stats_get(dev).peak_bytes; /* on the device the step ran on */
    qsort(t, (size_t)steps, sizeof(double), bench_cmp_double);
    double med = t[steps / 2];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const char *off = cli_flag_value(argc, argv, "--disable-pass");
    printf("{\"workload\": \"%s\", ", w->name);
    bench_print_settings(&(bench_settings){.mode = statik ? "static" : "eager", .batch = batch,
                                           .context = w->tokens ? context : 0, .disabled_passes = off,
                                           .device = dev == OAR_CUDA ? "cuda" : "cpu"});
    printf(", \"steps\": %d, \"median_ms\": %.4f, \"min_ms\": %.4f, \"max_ms\": %.4f, \"samples_per_s\": %.1f", steps,
           med, t[0], t[steps - 1], (double)batch / med * 1e3);
    if (w->tokens) printf(", \"tokens_per_s\": %.1f", (double)items / med * 1e3);
    if (profile) printf(", \"profile\": \"%s\"", profile);
    if (amp) printf(", \"amp\": \"%s %s\"", amp, oar_dtype_name(b.amp.dtype));
    oar_program_memory_stats ms;
    if (statik && oar_program_memory_stats_get(b.jit, 0, &ms) == OAR_OK) /* the planner's arena: activations */
        printf(", \"planned_arena_mb\": %.2f", (double)ms.planned_arena_bytes / (1 << 20));
    if (statik && dev == OAR_CUDA) { /* compiled on the GPU: the step replays CUDA graphs (the note: stderr) */
        printf(", \"cuda_graphs\": %d", oar_jit_cuda_graph_count(b.jit, 0));
        fprintf(stderr, "oar bench: CUDA graphs: %s\n", oar_jit_cuda_graph_note(b.jit, 0));
    }
    printf(", \"peak_alloc_mb\": %.2f, \"peak_rss_mb\": %.1f}\n", (double)peak_alloc / (1 << 20),
           (double)ru.ru_maxrss / 1024.0);
    free(t);
    teardown(&b);
    return 0;
}

/* ---- the workloads step by step, for `oar profile` */

bench_state *bench_workload_open(const char *name, int64_t *items, const char **unit) {
    const workload *w = find_workload(name);
    if (!w) {
        oar_set_error(OAR_ERR_INVALID_ARG, "unknown workload '%s'; expected tiny, mlp, lenet, resnet20, gpt-mini "
                                           "or lstm-lm", name ? name : "(none)");
        return NULL;
    }
    bench_state *b = malloc(sizeof *b);
    if (!b) {
        oar_set_error(OAR_ERR_OOM, "out of memory");
        return NULL;
    }
    if (setup(w->name, w->batch, w->context, OAR_CPU, b) != OAR_OK) {
        teardown(b);
        free(b);
        return NULL;
    }
    *items = w->tokens ? w->batch * w->context : w->batch;
    *unit = w->tokens ? "tokens" : "samples";
    return b;
}

oar_status bench_workload_step(bench_state *b) { return train_step(b); }

void bench_workload_close(bench_state *b) {
    if (!b) return;
    teardown(b);
    free(b);
}
