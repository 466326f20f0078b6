/* ResNet-20's training batch norms (batch_norm_act with residual and relu, and its backward) at
 * f32 and on bf16/f16 activations with f32 parameters, one op call at a time through dispatch
 * (the kernel dispatch picks at the current cap: OAR_CPU_ISA), on the three stages' shapes at
 * batch 32. Thread CPU time per call (the machine is shared: CPU time leaves out waiting),
 * median and min of the reps; the variants of a shape run interleaved, rep by rep. One JSON
 * line per (shape, dtype, op).
 * usage: bench_bn_half [reps (default 41)] [threads (default 1)] */
#include "oar.h"
#include "ops/op.h"
#include "oar/bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define NV 3
static const oar_dtype DT[NV] = {OAR_F32, OAR_BF16, OAR_F16};

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 41, threads = argc > 2 ? atoi(argv[2]) : 1;
    if (reps < 1 || threads < 1 || oar_set_num_threads(threads) != OAR_OK) {
        fprintf(stderr, "usage: bench_bn_half [reps >= 1] [threads >= 1]\n");
        return 2;
    }
    const int64_t shapes[3][4] = {{32, 16, 32, 32}, {32, 32, 16, 16}, {32, 64, 8, 8}};
    double *t = malloc(sizeof(double) * (size_t)(2 * NV * reps));
    for (int si = 0; si < 3 && t; si++) {
        const int64_t *sh = shapes[si], c = sh[1];
        oar_scope_begin();
        oar_tensor *x[NV], *r[NV], *g[NV], *w = oar_rand(&c, 1, OAR_F32), *b = oar_randn(&c, 1, OAR_F32);
        oar_tensor *rm = oar_zeros(&c, 1, OAR_F32), *rv = oar_ones(&c, 1, OAR_F32);
        oar_tensor *x32 = oar_randn(sh, 4, OAR_F32), *r32 = oar_randn(sh, 4, OAR_F32), *g32 = oar_randn(sh, 4, OAR_F32);
        for (int v = 0; v < NV; v++) {
            x[v] = oar_cast(x32, DT[v]);
            r[v] = oar_cast(r32, DT[v]);
            g[v] = oar_cast(g32, DT[v]);
        }
        oar_attr fa[3] = {oar_attr_int(1), oar_attr_float(0.1), oar_attr_float(1e-5)}, ba[1] = {oar_attr_int(1)};
        for (int rep = 0; rep < reps; rep++)
            for (int v = 0; v < NV; v++) {
                oar_tensor *fin[7] = {x[v], w, b, rm, rv, r[v], NULL}, *fo[OAR_MAX_OUTPUTS], *bo[OAR_MAX_OUTPUTS];
                int nf = OAR_MAX_OUTPUTS, nb = OAR_MAX_OUTPUTS;
                double t0 = cpu_s();
                if (oar_op_call(OAR_OP_batch_norm_act, fin, 7, fa, fo, &nf) != OAR_OK) goto fail;
                double t1 = cpu_s();
                oar_tensor *bin[6] = {g[v], x[v], w, fo[1], fo[2], fo[0]};
                if (oar_op_call(OAR_OP_batch_norm_act_backward, bin, 6, ba, bo, &nb) != OAR_OK) goto fail;
                double t2 = cpu_s();
                t[(0 * NV + v) * reps + rep] = t1 - t0;
                t[(1 * NV + v) * reps + rep] = t2 - t1;
                for (int i = 0; i < nf; i++) oar_release(fo[i]);
                for (int i = 0; i < nb; i++) oar_release(bo[i]);
            }
        for (int op = 0; op < 2; op++)
            for (int v = 0; v < NV; v++) {
                double *s = t + (op * NV + v) * reps;
                qsort(s, (size_t)reps, sizeof(double), bench_cmp_double);
                printf("{\"op\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld], \"dtype\": \"%s\", \"threads\": %d, "
                       "\"reps\": %d, \"median_us\": %.1f, \"min_us\": %.1f}\n",
                       op ? "batch_norm_act_backward" : "batch_norm_act", (long long)sh[0], (long long)sh[1],
                       (long long)sh[2], (long long)sh[3], oar_dtype_name(DT[v]), threads, reps, 1e6 * s[reps / 2],
                       1e6 * s[0]);
            }
        oar_scope_end();
    }
    free(t);
    return 0;
fail:
    fprintf(stderr, "bench_bn_half: %s\n", oar_last_error());
    return 1;
}
