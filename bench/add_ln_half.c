/* The residual add + layer_norm of gpt-mini's blocks ([1024, 256]: batch 8 x 128 tokens, width
 * 256) fused and unfused, forward (add_layer_norm against add then layer_norm) and backward
 * (layer_norm_backward_add against layer_norm_backward then add), at f32 and on bf16/f16 with
 * f32 parameters (O2's mixed form), one op call at a time through dispatch at the current cap
 * (OAR_CPU_ISA). Thread CPU time per pair, median and min of the reps; the variants run
 * interleaved, rep by rep, in alternating order. One JSON line per (dtype, direction, variant).
 * usage: bench_add_ln_half [reps (default 41)] [rows (default 1024)] [width (default 256)] */
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

static void drop(oar_tensor **t, int n) {
    for (int i = 0; i < n; i++) oar_release(t[i]);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 41;
    int64_t rows = argc > 2 ? atoll(argv[2]) : 1024, m = argc > 3 ? atoll(argv[3]) : 256;
    if (reps < 1 || rows < 1 || m < 1 || oar_set_num_threads(1) != OAR_OK) {
        fprintf(stderr, "usage: bench_add_ln_half [reps >= 1] [rows >= 1] [width >= 1]\n");
        return 2;
    }
    int64_t sh[2] = {rows, m};
    double *t = malloc(sizeof(double) * (size_t)(4 * NV * reps));
    if (!t) return 1;
    oar_scope_begin();
    oar_tensor *w = oar_rand(&m, 1, OAR_F32), *bias = oar_randn(&m, 1, OAR_F32);
    oar_tensor *a[NV], *b[NV], *g[NV], *r[NV];
    for (int v = 0; v < NV; v++) {
        a[v] = oar_cast(oar_randn(sh, 2, OAR_F32), DT[v]);
        b[v] = oar_cast(oar_randn(sh, 2, OAR_F32), DT[v]);
        g[v] = oar_cast(oar_randn(sh, 2, OAR_F32), DT[v]);
        r[v] = oar_cast(oar_randn(sh, 2, OAR_F32), DT[v]);
    }
    oar_attr at[2] = {oar_attr_int(1), oar_attr_float(1e-5)};
    for (int rep = 0; rep < reps; rep++)
        for (int v = 0; v < NV; v++) {
            oar_tensor *o[OAR_MAX_OUTPUTS], *o2[OAR_MAX_OUTPUTS], *s;
            int n = OAR_MAX_OUTPUTS, n2 = OAR_MAX_OUTPUTS;
            /* forward, then the backward with the forward's statistics; whichever variant runs
             * second finds the inputs in cache, so the order alternates rep by rep */
            const bool fused_first = rep % 2 == 0;
            oar_tensor *fin[4] = {a[v], b[v], w, bias};
            double tf[2] = {0, 0}, tb[2] = {0, 0};
            for (int pass = 0; pass < 2; pass++) {
                double t0 = cpu_s();
                if ((pass == 0) == fused_first) {
                    if (oar_op_call(OAR_OP_add_layer_norm, fin, 4, at, o, &n) != OAR_OK) goto fail;
                    tf[0] = cpu_s() - t0;
                } else {
                    if (oar_op_call(OAR_OP_add, (oar_tensor *[]){a[v], b[v]}, 2, NULL, &s, &(int){1}) != OAR_OK ||
                        oar_op_call(OAR_OP_layer_norm, (oar_tensor *[]){s, w, bias}, 3, at, o2, &n2) != OAR_OK)
                        goto fail;
                    tf[1] = cpu_s() - t0;
                }
            }
            oar_tensor *bin[6] = {g[v], o[0], w, o[2], o[3], r[v]}, *d[OAR_MAX_OUTPUTS], *d2[OAR_MAX_OUTPUTS], *sum;
            int nd = OAR_MAX_OUTPUTS, nd2 = OAR_MAX_OUTPUTS;
            for (int pass = 0; pass < 2; pass++) {
                double t0 = cpu_s();
                if ((pass == 0) == fused_first) {
                    if (oar_op_call(OAR_OP_layer_norm_backward_add, bin, 6, at, d, &nd) != OAR_OK) goto fail;
                    tb[0] = cpu_s() - t0;
                } else {
                    if (oar_op_call(OAR_OP_layer_norm_backward, bin, 5, at, d2, &nd2) != OAR_OK ||
                        oar_op_call(OAR_OP_add, (oar_tensor *[]){d2[0], r[v]}, 2, NULL, &sum, &(int){1}) != OAR_OK)
                        goto fail;
                    tb[1] = cpu_s() - t0;
                }
            }
            t[(0 * NV + v) * reps + rep] = tf[0];
            t[(1 * NV + v) * reps + rep] = tf[1];
            t[(2 * NV + v) * reps + rep] = tb[0];
            t[(3 * NV + v) * reps + rep] = tb[1];
            drop(o, n);
            drop(o2, n2);
            drop(d, nd);
            drop(d2, nd2);
            oar_release(s);
            oar_release(sum);
        }
    static const char *what[4][2] = {{"forward", "fused"}, {"forward", "unfused"}, {"backward", "fused"},
                                     {"backward", "unfused"}};
    for (int v = 0; v < NV; v++)
        for (int k = 0; k < 4; k++) {
            double *x = t + (k * NV + v) * reps;
            qsort(x, (size_t)reps, sizeof(double), bench_cmp_double);
            printf("{\"dtype\": \"%s\", \"shape\": [%lld, %lld], \"direction\": \"%s\", \"variant\": \"%s\", \"reps\": %d, "
                   "\"median_us\": %.1f, \"min_us\": %.1f}\n",
                   oar_dtype_name(DT[v]), (long long)rows, (long long)m, what[k][0], what[k][1], reps,
                   1e6 * x[reps / 2], 1e6 * x[0]);
        }
    oar_scope_end();
    free(t);
    return 0;
fail:
    fprintf(stderr, "bench_add_ln_half: %s\n", oar_last_error());
    return 1;
}
