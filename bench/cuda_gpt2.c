/* GPT-2-124M-shaped training on the GPU (issue 19's benchmark): d 768, 12 layers, 12 heads,
 * context 1024, vocab 50257, a tied LM head, pre-LayerNorm blocks with tanh-GELU MLPs, fused
 * causal attention; autocast bf16 (O1: f32 weights, bf16 GEMMs with f32 accumulation) and
 * AdamW. Prints one JSON line: step time (median of the timed steps, each ended by a device
 * synchronize), tokens/s, and MFU against the GPU's dense bf16 peak, counting 6 N FLOPs per
 * token (N: parameters less the position table, as nanoGPT) plus attention's 12 L T d.
 * bench/cuda_torch.py --gpt2 runs the same model in PyTorch on the same GPU.
 * Attention is the fused op (oar_scaled_dot_product_attention) or, with --attn matmul, composed
 * of batched GEMMs and a masked softmax as gpt-mini does (both on tensor cores under AMP: the
 * fused op's f16/bf16 CUDA kernel runs its products through cuBLASLt, see docs/cuda.md).
 * --profile: one more step after the timed ones under the profiler, whose op table (host and
 * GPU time per op) is printed before the JSON line, which stays last.
 * Usage: bench_cuda_gpt2 [--batch B] [--steps S] [--f32] [--attn fused|matmul] [--profile] */
#include "oar.h"
#include "tools/oar/bench_util.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = 50257, CTX = 1024, LAYERS = 12, HEADS = 12, D = 768 };

typedef struct block {
    oar_tensor *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b, *ln2_w, *ln2_b, *fc_w, *fc_b, *out_w, *out_b;
} block;

typedef struct gpt2 {
    oar_tensor *wte, *wpe, *lnf_w, *lnf_b;
    oar_tensor *mask; /* --attn matmul: [CTX, CTX] bool, true above the diagonal (the future) */
    block h[LAYERS];
    oar_tensor *params[4 + 12 * LAYERS];
    int n_params;
} gpt2;

/* A parameter on the GPU: N(0, std) or a constant, trainable. */
static oar_tensor *param(gpt2 *m, const int64_t *shape, int ndim, double std, double fill) {
    oar_tensor *t = std > 0 ? oar_mul_scalar(oar_randn(shape, ndim, OAR_F32), std) : oar_full(shape, ndim, fill, OAR_F32);
    t = oar_to(t, OAR_CUDA);
    if (!t) return NULL;
    oar_keep(t);
    oar_set_requires_grad(t, true);
    m->params[m->n_params++] = t;
    return t;
}

static bool gpt2_init(gpt2 *m) {
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * LAYERS); /* GPT-2's scaled residual init */
    m->n_params = 0;
    m->wte = param(m, (int64_t[]){VOCAB, D}, 2, std, 0);
    m->wpe = param(m, (int64_t[]){CTX, D}, 2, std, 0);
    for (int l = 0; l < LAYERS; l++) {
        block *b = &m->h[l];
        b->ln1_w = param(m, (int64_t[]){D}, 1, 0, 1);
        b->ln1_b = param(m, (int64_t[]){D}, 1, 0, 0);
        b->qkv_w = param(m, (int64_t[]){3 * D, D}, 2, std, 0);
        b->qkv_b = param(m, (int64_t[]){3 * D}, 1, 0, 0);
        b->proj_w = param(m, (int64_t[]){D, D}, 2, proj_std, 0);
        b->proj_b = param(m, (int64_t[]){D}, 1, 0, 0);
        b->ln2_w = param(m, (int64_t[]){D}, 1, 0, 1);
        b->ln2_b = param(m, (int64_t[]){D}, 1, 0, 0);
        b->fc_w = param(m, (int64_t[]){4 * D, D}, 2, std, 0);
        b->fc_b = param(m, (int64_t[]){4 * D}, 1, 0, 0);
        b->out_w = param(m, (int64_t[]){D, 4 * D}, 2, proj_std, 0);
        b->out_b = param(m, (int64_t[]){D}, 1, 0, 0);
    }
    m->lnf_w = param(m, (int64_t[]){D}, 1, 0, 1);
    m->lnf_b = param(m, (int64_t[]){D}, 1, 0, 0);
    for (int i = 0; i < m->n_params; i++)
        if (!m->params[i]) return false;
    return true;
}

/* The mean cross-entropy of next-token prediction over idx [B, T] with targets [B, T]. */
static oar_tensor *gpt2_loss(gpt2 *m, oar_tensor *idx, oar_tensor *pos, oar_tensor *targets) {
    int64_t B = oar_size(idx, 0), T = oar_size(idx, 1), hd = D / HEADS;
    oar_tensor *x = oar_add(oar_embedding(m->wte, idx), oar_embedding(m->wpe, pos));
    for (int l = 0; l < LAYERS; l++) {
        block *b = &m->h[l];
        oar_tensor *h = oar_layer_norm(x, 1, b->ln1_w, b->ln1_b, 1e-5), *qkv[3];
        oar_chunk(oar_linear(h, b->qkv_w, b->qkv_b), 3, 2, qkv, 3);
        int64_t split[4] = {B, T, HEADS, hd}, merged[3] = {B, T, D};
        for (int i = 0; i < 3; i++) qkv[i] = oar_transpose(oar_reshape(qkv[i], split, 4), 1, 2); /* [B, H, T, hd] */
        oar_tensor *y;
        if (m->mask) { /* composed: softmax(q k^T / sqrt(hd), future masked) v */
            oar_tensor *att = oar_mul_scalar(oar_matmul(qkv[0], oar_transpose(qkv[1], -2, -1)), 1.0 / sqrt((double)hd));
            y = oar_matmul(oar_softmax(oar_masked_fill(att, m->mask, -INFINITY), -1), qkv[2]);
        } else {
            y = oar_scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], NULL, 1.0 / sqrt((double)hd), true);
        }
        y = oar_reshape(oar_transpose(y, 1, 2), merged, 3);
        x = oar_add(x, oar_linear(y, b->proj_w, b->proj_b));
        h = oar_layer_norm(x, 1, b->ln2_w, b->ln2_b, 1e-5);
        x = oar_add(x, oar_linear(oar_gelu(oar_linear(h, b->fc_w, b->fc_b), true), b->out_w, b->out_b));
    }
    x = oar_layer_norm(x, 1, m->lnf_w, m->lnf_b, 1e-5);
    oar_tensor *logits = oar_linear(x, m->wte, NULL); /* the tied head */
    int64_t flat2[2] = {-1, VOCAB}, flat1 = -1;
    return oar_cross_entropy(oar_reshape(logits, flat2, 2), oar_reshape(targets, &flat1, 1), NULL);
}

/* The GPU's dense bf16 tensor-core peak in FLOP/s from its name (0: unknown). */
static double bf16_peak(const char *name) {
    if (strstr(name, "H100") && strstr(name, "PCIe")) return 756e12;
    if (strstr(name, "H100") || strstr(name, "H200") || strstr(name, "GH200")) return 989e12; /* SXM */
    if (strstr(name, "A100")) return 312e12;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int64_t batch = 8;
    int steps = 6;
    bool amp = true, composed = false, profile = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--f32")) amp = false;
        else if (!strcmp(argv[i], "--profile")) profile = true;
        else if (!strcmp(argv[i], "--attn") && i + 1 < argc && !strcmp(argv[i + 1], "matmul")) composed = true, i++;
        else if (!strcmp(argv[i], "--attn") && i + 1 < argc && !strcmp(argv[i + 1], "fused")) composed = false, i++;
        else {
            fprintf(stderr, "usage: bench_cuda_gpt2 [--batch B] [--steps S] [--f32] [--attn fused|matmul] [--profile]\n");
            return 2;
        }
    }
    if (!oar_cuda_is_available()) {
        printf("bench_cuda_gpt2: no CUDA device; nothing to measure\n");
        return 77;
    }
    if (batch < 1 || steps < 1 || steps > 100) {
        fprintf(stderr, "bench_cuda_gpt2: expected --batch >= 1 and 1 <= --steps <= 100\n");
        return 2;
    }
    struct cudaDeviceProp prop;
    char gpu[256] = "unknown";
    if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess) snprintf(gpu, sizeof gpu, "%s", prop.name);
    oar_manual_seed(1234);
    gpt2 m;
    oar_scope_begin(); /* what the set-up makes, except the kept tensors */
    bool made = gpt2_init(&m);
    int64_t sq[2] = {CTX, CTX};
    m.mask = composed ? oar_keep(oar_to(oar_triu(oar_ones(sq, 2, OAR_BOOL), 1), OAR_CUDA)) : NULL;
    made = made && (!composed || m.mask);
    oar_tensor *idx = oar_keep(oar_to(oar_randint(0, VOCAB, (int64_t[]){batch, CTX}, 2, OAR_I64), OAR_CUDA));
    oar_tensor *tgt = oar_keep(oar_to(oar_randint(0, VOCAB, (int64_t[]){batch, CTX}, 2, OAR_I64), OAR_CUDA));
    oar_tensor *pos = oar_keep(oar_to(oar_arange(0, CTX, 1, OAR_I64), OAR_CUDA));
    oar_scope_end();
    if (!made) {
        printf("{\"bench\":\"gpt2-124m\",\"error\":\"init: %s\"}\n", oar_last_error());
        return 1;
    }
    int64_t n_params = 0;
    for (int i = 0; i < m.n_params; i++) n_params += oar_numel(m.params[i]);
    int64_t n_flop_params = n_params - (int64_t)CTX * D; /* the position table does no matmul */
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAMW);
    oo.lr = 6e-4;
    oo.weight_decay = 0.1;
    oar_optimizer *opt = oar_optimizer_new(m.params, m.n_params, &oo);
    if (!opt || !idx || !tgt || !pos) {
        printf("{\"bench\":\"gpt2-124m\",\"error\":\"setup: %s\"}\n", oar_last_error());
        return 1;
    }
    oar_autocast_opts ac = oar_autocast_defaults(); /* O1, bf16 */
    const int warmup = 2;
    double t[100], first_loss = 0, last_loss = 0;
    for (int s = 0; s < warmup + steps + profile; s++) {
        bool profiled = s == warmup + steps; /* the extra step */
        if (profiled) {
            oar_profiler_opts po = oar_profiler_defaults(OAR_PROFILER_FULL);
            po.print_at_stop = true;
            oar_profiler_start(&po);
        }
        oar_synchronize(OAR_CUDA);
        double t0 = bench_now_s();
        oar_scope_begin();
        oar_optimizer_zero_grad(opt);
        if (amp) oar_autocast_begin(&ac);
        oar_tensor *loss = gpt2_loss(&m, idx, pos, tgt);
        if (amp) oar_autocast_end();
        oar_status st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
        if (st == OAR_OK) st = oar_optimizer_step(opt);
        double l = 0;
        if (st == OAR_OK) st = oar_item(loss, &l); /* waits for the step */
        oar_scope_end();
        if (st != OAR_OK) {
            printf("{\"bench\":\"gpt2-124m\",\"gpu\":\"%s\",\"batch\":%lld,\"error\":\"step %d: %s\"}\n", gpu,
                   (long long)batch, s, oar_last_error());
            return 1;
        }
        oar_synchronize(OAR_CUDA);
        if (profiled) {
            fflush(stdout);
            oar_profiler_stop();
            continue;
        }
        if (s >= warmup) t[s - warmup] = bench_now_s() - t0;
        if (s == 0) first_loss = l;
        last_loss = l;
    }
    qsort(t, (size_t)steps, sizeof t[0], cmp_double);
    double med = t[steps / 2], tokens = (double)batch * CTX;
    double flops = (6.0 * (double)n_flop_params + 12.0 * LAYERS * CTX * D) * tokens, peak = bf16_peak(gpu);
    oar_memory_stats ms = oar_memory_stats_get(OAR_CUDA);
    char mfu[32] = "null";
    if (peak > 0) snprintf(mfu, sizeof mfu, "%.4f", flops / med / peak);
    printf("{\"bench\":\"gpt2-124m\",\"impl\":\"oar\",\"mode\":\"eager\",\"attention\":\"%s\",\"precision\":\"%s\",\"gpu\":\"%s\","
           "\"params\":%lld,\"batch\":%lld,\"context\":%d,\"steps\":%d,\"step_ms\":%.3f,\"step_ms_min\":%.3f,"
           "\"step_ms_max\":%.3f,\"tokens_per_s\":%.0f,\"tflops\":%.1f,\"mfu\":%s,\"peak_tflops\":%.0f,"
           "\"loss_first\":%.4f,\"loss_last\":%.4f,\"peak_mem_gib\":%.2f}\n",
           composed ? "matmul" : "fused", amp ? "amp-bf16" : "f32", gpu, (long long)n_params, (long long)batch, CTX, steps, med * 1e3, t[0] * 1e3,
           t[steps - 1] * 1e3, tokens / med, flops / med * 1e-12, mfu, peak * 1e-12, first_loss, last_loss, (double)ms.peak_bytes / (1 << 30));
    oar_optimizer_free(opt);
    return 0;
}
