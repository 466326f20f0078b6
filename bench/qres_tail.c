/* One ResNet-20 block tail, three ways (docs/quant.md, "Int8 block tails in the conv epilogue"):
 *   fused:     qconv2d_nhwc with the int8 residual in its epilogue (the fuse_qadd pass's op);
 *   conv_qadd: qconv2d_nhwc giving u8 codes, then qadd of those and the residual's codes;
 *   f32_tail:  qconv2d_nhwc with an f32 residual giving f32 (ReLU in the epilogue), then quantize
 *              (the default static program's tail);
 * and conv_only (qconv2d_nhwc giving codes, nothing else) for the convolution's own share. A 3x3
 * conv of C -> C channels on N x S x S, S = 32, 16, 8 for C = 16, 32, 64 (the three stages), with
 * the weight width oar_quant_fast_weight_bits() picks (8 with VNNI, 7 without), 1 thread. CPU time
 * per call (process CPU time, which other processes' load leaves alone); the variants alternate
 * rep by rep; prints one JSON line per stage with the median and the fastest rep of each.
 * usage: bench_qres_tail [batch (32)] [reps (15)] [calls per rep (20)] */
#define _POSIX_C_SOURCE 200809L
#include "oar.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { FUSED, CONV_QADD, F32_TAIL, CONV_ONLY, N_VARIANTS };
static const char *const NAMES[N_VARIANTS] = {"fused", "conv_qadd", "f32_tail", "conv_only"};

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct tail {
    oar_tensor *x, *xs, *xz, *w, *ws, *b, *ys, *yz, *r, *rf, *rs, *rz, *os, *oz;
    oar_attr conv[6];
} tail;

static oar_status run(const tail *t, int v) {
    oar_attr a[6];
    for (int i = 0; i < 6; i++) a[i] = t->conv[i];
    oar_tensor *in[QN_N] = {t->x, t->xs, t->xz, t->w, t->ws, t->b, t->ys, t->yz, NULL, NULL, NULL, NULL, NULL};
    oar_tensor *y = NULL;
    if (v == FUSED) {
        in[QL_RES] = t->r, in[QN_RS] = t->rs, in[QN_RZP] = t->rz, in[QN_OS] = t->os, in[QN_OZP] = t->oz;
        a[4] = oar_attr_int(OAR_QACT_RELU);
        y = oar_op_call1(OAR_OP_qconv2d_nhwc, in, QN_N, a);
    } else if (v == CONV_QADD || v == CONV_ONLY) {
        oar_tensor *codes = oar_op_call1(OAR_OP_qconv2d_nhwc, in, QN_N, a);
        oar_tensor *qa[QA_N] = {codes, t->ys, t->yz, t->r, t->rs, t->rz, t->os, t->oz};
        oar_attr qat[2] = {oar_attr_int(OAR_QACT_RELU), oar_attr_dtype(OAR_U8)};
        y = v == CONV_ONLY || !codes ? codes : oar_op_call1(OAR_OP_qadd, qa, QA_N, qat);
    } else {
        in[QL_YS] = in[QL_YZP] = NULL, in[QL_RES] = t->rf;
        a[4] = oar_attr_int(OAR_QACT_RELU), a[5] = oar_attr_dtype(OAR_F32);
        oar_tensor *f = oar_op_call1(OAR_OP_qconv2d_nhwc, in, QN_N, a);
        y = f ? oar_quantize(f, t->os, t->oz, 0, OAR_U8) : NULL;
    }
    return y ? OAR_OK : oar_last_status();
}

int main(int argc, char **argv) {
    int64_t batch = argc > 1 ? atoll(argv[1]) : 32;
    int reps = argc > 2 ? atoi(argv[2]) : 15, calls = argc > 3 ? atoi(argv[3]) : 20;
    if (batch < 1 || reps < 1 || calls < 1) {
        fprintf(stderr, "usage: bench_qres_tail [batch >= 1] [reps >= 1] [calls per rep >= 1]\n");
        return 2;
    }
    oar_init();
    oar_set_num_threads(1);
    oar_manual_seed(1);
    int bits = oar_quant_fast_weight_bits();
    for (int stage = 0; stage < 3; stage++) {
        int64_t c = 16 << stage, s = 32 >> stage, lo = bits == 8 ? -128 : -64;
        oar_scope_begin();
        /* scales with no small ratio between them, as calibration gives (ratios like 5/6 would put
           a sixth of the sums exactly on a half-integer of the output scale, where the fast kernels
           divide) */
        tail t = {.x = oar_randint(0, 256, (int64_t[]){batch, s, s, c}, 4, OAR_U8),
                  .xs = oar_scalar(0.0213, OAR_F32), .xz = oar_scalar(0, OAR_I32),
                  .w = oar_randint(lo, -lo, (int64_t[]){c, c, 3, 3}, 4, OAR_I8), .ws = oar_scalar(0.00197, OAR_F32),
                  .b = oar_randn((int64_t[]){c}, 1, OAR_F32), .ys = oar_scalar(0.05131, OAR_F32),
                  .yz = oar_scalar(128, OAR_I32), .r = oar_randint(0, 256, (int64_t[]){batch, s, s, c}, 4, OAR_U8),
                  .rf = oar_randn((int64_t[]){batch, s, s, c}, 4, OAR_F32), .rs = oar_scalar(0.03971, OAR_F32),
                  .rz = oar_scalar(0, OAR_I32), .os = oar_scalar(0.06113, OAR_F32), .oz = oar_scalar(0, OAR_I32),
                  .conv = {oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_ints((int64_t[]){1, 1}, 2),
                           oar_attr_ints((int64_t[]){1, 1}, 2), oar_attr_int(1), oar_attr_int(OAR_QACT_NONE),
                           oar_attr_dtype(OAR_U8)}};
        double *ms = malloc(sizeof(double) * (size_t)(N_VARIANTS * reps));
        if (!ms) return 1;
        for (int rep = -1; rep < reps; rep++) /* rep -1: warm-up (primitives, packed weights) */
            for (int v = 0; v < N_VARIANTS; v++) {
                double t0 = cpu_ms();
                for (int k = 0; k < calls; k++) {
                    oar_scope_begin();
                    oar_status st = run(&t, v);
                    oar_scope_end();
                    if (st != OAR_OK) {
                        fprintf(stderr, "bench_qres_tail: %s: %s\n", NAMES[v], oar_last_error());
                        return 1;
                    }
                }
                if (rep >= 0) ms[v * reps + rep] = (cpu_ms() - t0) / calls;
            }
        printf("{\"batch\": %lld, \"channels\": %lld, \"size\": %lld, \"weight_bits\": %d, \"vnni\": %s",
               (long long)batch, (long long)c, (long long)s, bits, oar_cpu_use_vnni() ? "true" : "false");
        for (int v = 0; v < N_VARIANTS; v++) {
            qsort(ms + v * reps, (size_t)reps, sizeof(double), cmp_double);
            printf(", \"%s_ms\": %.4f, \"%s_min_ms\": %.4f", NAMES[v], ms[v * reps + reps / 2], NAMES[v], ms[v * reps]);
        }
        printf("}\n");
        free(ms);
        oar_scope_end();
    }
    return 0;
}
