/* Process groups through the C API (include/oar/dist.h), run by groups.sh under mpirun:
 *
 *   dist_groups api      3 ranks: groups {0, 2} and {1}; collectives within them against values
 *                        computed by hand, rank translation, a non-member's errors, bad ranks,
 *                        ranks that differ between ranks, data parallel and SyncBatchNorm
 *                        over {0, 2}
 *   dist_groups dead     3 ranks: rank 2 exits during group {1, 2}'s collective; rank 1's wait
 *                        fails naming it (rank 0, outside the group, is not involved)
 * Exit 0 on success. */
#include "oar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, ...)                                                                        \
    do {                                                                                         \
        if (!(cond)) {                                                                           \
            failures++;                                                                          \
            fprintf(stderr, "rank %d: FAILED %s:%d: %s: ", oar_dist_rank(), __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fprintf(stderr, " (last error: %s)\n", oar_last_error());                            \
        }                                                                                        \
    } while (0)
#define MUST(st)                                                                                 \
    do {                                                                                         \
        if ((st) != OAR_OK) {                                                                    \
            fprintf(stderr, "rank %d: %s:%d: %s\n", oar_dist_rank(), __FILE__, __LINE__, oar_last_error()); \
            exit(1);                                                                             \
        }                                                                                        \
    } while (0)

static float *f32(oar_tensor *t) { return oar_data(t); }

/* x of world rank r for the SyncBatchNorm check: [2, 3, 2] values that differ between ranks */
static oar_tensor *sbn_input(int r) {
    oar_tensor *x = oar_zeros((int64_t[]){2, 3, 2}, 3, OAR_F32);
    for (int i = 0; i < 12; i++) f32(x)[i] = (float)(sin(0.37 * i + r) * (1 + r) + 0.1 * r);
    return x;
}

/* SyncBatchNorm over {0, 2} (ranks 0 and 2): y, the input gradient and the running statistics
 * equal one BatchNorm's over the group's merged batch [x0; x2]; rank 1 is refused the layer and
 * its own one-rank group's layer is a BatchNorm of its batch. */
static void sync_batch_norm_over(oar_dist_group *even, oar_dist_group *solo) {
    int me = oar_dist_rank();
    if (me == 1) {
        oar_clear_error();
        EXPECT(!oar_dist_sync_batch_norm_group(3, 1e-5, 0.1, even) && strstr(oar_last_error(), "not a member"),
               "a SyncBatchNorm over a group this rank is not in");
        even = solo;
    }
    oar_module *sbn = oar_dist_sync_batch_norm_group(3, 1e-5, 0.1, even);
    oar_module *bn = oar_nn_batch_norm1d(3, 1e-5, 0.1, true, true);
    MUST(sbn && bn ? OAR_OK : oar_last_status());
    oar_tensor *x = sbn_input(me), *coef = sbn_input(7); /* loss = sum(y * coef): a gradient that differs per element */
    oar_set_requires_grad(x, true);
    oar_tensor *y = oar_forward(sbn, x);
    MUST(y ? oar_backward(oar_sum(oar_mul(y, coef), NULL, 0, false), NULL, false) : oar_last_status());
    /* the reference: one BatchNorm over the group's batches, this rank's rows picked out */
    oar_tensor *parts[2] = {sbn_input(me == 1 ? 1 : 0), sbn_input(2)};
    oar_tensor *all = oar_concat(parts, me == 1 ? 1 : 2, 0);
    oar_set_requires_grad(all, true);
    oar_tensor *coefs[2] = {coef, coef};
    oar_tensor *ya = oar_forward(bn, all);
    MUST(ya ? oar_backward(oar_sum(oar_mul(ya, oar_concat(coefs, me == 1 ? 1 : 2, 0)), NULL, 0, false), NULL, false)
            : oar_last_status());
    int off = me == 2 ? 12 : 0;
    float *gx = oar_data(oar_grad_get(x)), *ga = oar_data(oar_grad_get(all));
    double dy = 0, dg = 0, dm = 0, dv = 0;
    for (int i = 0; i < 12; i++) {
        dy = fmax(dy, fabs(f32(y)[i] - f32(ya)[off + i]));
        dg = fmax(dg, fabs(gx[i] - ga[off + i]));
    }
    for (int c = 0; c < 3; c++) {
        dm = fmax(dm, fabs(f32(oar_module_get(sbn, "running_mean"))[c] - f32(oar_module_get(bn, "running_mean"))[c]));
        dv = fmax(dv, fabs(f32(oar_module_get(sbn, "running_var"))[c] - f32(oar_module_get(bn, "running_var"))[c]));
    }
    EXPECT(dy < 1e-5 && dg < 1e-5 && dm < 1e-6 && dv < 1e-6,
           "SyncBatchNorm over the group vs BatchNorm over its merged batch: |dy| %g, |dx grad| %g, running "
           "mean %g, var %g", dy, dg, dm, dv);
    oar_module_free(sbn);
    oar_module_free(bn);
}

static int api(void) {
    int me = oar_dist_rank();
    EXPECT(oar_dist_world_size() == 3, "run with 3 ranks");
    oar_dist_group *even = oar_dist_new_group((int[]){2, 0}, 2); /* sorted: group rank 1 is world rank 2 */
    oar_dist_group *solo = oar_dist_new_group((int[]){1}, 1);
    MUST(even && solo ? OAR_OK : oar_last_status());
    int want_rank = me == 0 ? 0 : me == 2 ? 1 : -1;
    EXPECT(oar_dist_group_rank(even) == want_rank, "rank %d in {0, 2}", oar_dist_group_rank(even));
    EXPECT(oar_dist_group_size(even) == (me == 1 ? -1 : 2), "size %d", oar_dist_group_size(even));
    EXPECT(oar_dist_group_n_ranks(even) == 2 && oar_dist_group_global_rank(even, 1) == 2 &&
           oar_dist_group_rank_of(even, 2) == 1 && oar_dist_group_rank_of(even, 1) == -1, "rank translation");
    oar_clear_error();
    EXPECT(oar_dist_group_global_rank(even, 2) == -1 && strstr(oar_last_error(), "group's size"),
           "an out-of-range group rank");
    oar_tensor *t = oar_full((int64_t[]){3}, 1, (double)(me + 1), OAR_F32);
    if (me != 1) {
        MUST(oar_dist_wait(oar_dist_group_allreduce(even, t, OAR_DIST_SUM, true)));
        EXPECT(f32(t)[0] == 4.0f && f32(t)[2] == 4.0f, "sum over {0, 2}: %g", f32(t)[0]);
        oar_tensor *b = oar_full((int64_t[]){2}, 1, (double)me, OAR_F32);
        MUST(oar_dist_wait(oar_dist_group_broadcast(even, b, 1))); /* group rank 1 = world rank 2 */
        EXPECT(f32(b)[0] == 2.0f && f32(b)[1] == 2.0f, "broadcast from world rank 2: %g", f32(b)[0]);
        oar_tensor *out = oar_zeros((int64_t[]){4}, 1, OAR_F32);
        oar_tensor *in = oar_full((int64_t[]){2}, 1, (double)me, OAR_F32);
        MUST(oar_dist_wait(oar_dist_group_allgather(even, out, in)));
        EXPECT(f32(out)[0] == 0 && f32(out)[1] == 0 && f32(out)[2] == 2 && f32(out)[3] == 2, "allgather");
        oar_clear_error();
        EXPECT(!oar_dist_group_allgather(even, oar_zeros((int64_t[]){6}, 1, OAR_F32), in) &&
               strstr(oar_last_error(), "the group's size"), "a world-sized output refused");
        EXPECT(!oar_dist_group_broadcast(even, b, 2) && strstr(oar_last_error(), "expected 0 <= root < 2"),
               "a root outside the group refused");
        MUST(oar_dist_wait(oar_dist_group_barrier(even)));
        oar_release(b);
        oar_release(out);
        oar_release(in);
        /* point to point within the group: group rank 0 (world 0) sends to group rank 1 (world 2) */
        oar_tensor *m = oar_full((int64_t[]){1}, 1, me == 0 ? 7.0 : 0.0, OAR_F32);
        MUST(oar_dist_wait(me == 0 ? oar_dist_group_send(even, m, 1, 5) : oar_dist_group_recv(even, m, 0, 5)));
        EXPECT(f32(m)[0] == 7.0f, "send/recv within the group: %g", f32(m)[0]);
        oar_release(m);
    } else {
        oar_clear_error();
        EXPECT(!oar_dist_group_allreduce(even, t, OAR_DIST_SUM, true), "a non-member's allreduce was accepted");
        const char *e = oar_last_error();
        EXPECT(strstr(e, "rank 1 is not a member of the group of ranks [0, 2]"), "message: %s", e);
        MUST(oar_dist_wait(oar_dist_group_allreduce(solo, t, OAR_DIST_SUM, true)));
        EXPECT(f32(t)[0] == 2.0f, "a one-rank group's sum is the value: %g", f32(t)[0]);
    }
    oar_release(t);

    /* errors: bad ranks are refused before any communication, on every rank alike */
    oar_clear_error();
    EXPECT(!oar_dist_new_group((int[]){0, 3}, 2) && strstr(oar_last_error(), "expected ranks in [0, 3)") &&
           strstr(oar_last_error(), "got rank 3"), "rank 3 of 3");
    EXPECT(!oar_dist_new_group((int[]){1, 1}, 2) && strstr(oar_last_error(), "rank 1 twice"), "a repeat");
    EXPECT(!oar_dist_new_group(NULL, 0) && strstr(oar_last_error(), "at least one rank"), "no ranks");
    /* ranks that differ between ranks: every rank fails, naming both lists */
    oar_dist_group *bad = oar_dist_new_group(me == 2 ? (int[]){1, 2} : (int[]){0, 1}, 2);
    EXPECT(!bad && strstr(oar_last_error(), "[0, 1]") && strstr(oar_last_error(), "[1, 2]") &&
           strstr(oar_last_error(), "same ranks"), "differing new_group calls");

    /* data parallel over {0, 2}: rank 2 starts from other values, gets group rank 0's (world 0's),
     * and the gradients are the average over the two (rank 1 trains alone, untouched) */
    oar_manual_seed(me == 2 ? 5 : 3);
    oar_module *lin = oar_nn_linear(4, 2, true);
    if (me != 1) {
        oar_dist_strategy s = {.group = even};
        oar_dist_dp *dp = oar_dist_data_parallel(lin, &s);
        MUST(dp ? OAR_OK : oar_last_status());
        oar_tensor *x = oar_full((int64_t[]){1, 4}, 2, (double)(me + 1), OAR_F32);
        MUST(oar_dist_dp_backward(dp, oar_sum(oar_forward(lin, x), NULL, 0, false)));
        const char *name;
        oar_tensor *w = oar_module_parameter(lin, 0, &name);
        oar_tensor *g = oar_grad_get(w);
        /* d sum(W x + b) / dW = x (each row); the average over x = 1 and x = 3 is 2 */
        EXPECT(g && f32(g)[0] == 2.0f && f32(g)[7] == 2.0f, "the group-averaged gradient: %g", g ? f32(g)[0] : -1.0);
        oar_tensor *w0 = oar_zeros((int64_t[]){8}, 1, OAR_F32);
        memcpy(oar_data(w0), oar_data(w), 8 * sizeof(float));
        oar_tensor *hi = oar_zeros((int64_t[]){8}, 1, OAR_F32);
        memcpy(oar_data(hi), oar_data(w0), 8 * sizeof(float));
        MUST(oar_dist_wait(oar_dist_group_allreduce(even, hi, OAR_DIST_MAX, true)));
        MUST(oar_dist_wait(oar_dist_group_allreduce(even, w0, OAR_DIST_MIN, true)));
        EXPECT(!memcmp(oar_data(hi), oar_data(w0), 8 * sizeof(float)), "the group's ranks hold different weights");
        oar_release(x);
        oar_release(w0);
        oar_release(hi);
        oar_dist_dp_free(dp);
    } else {
        oar_dist_strategy s = {.group = even};
        oar_clear_error();
        EXPECT(!oar_dist_data_parallel(lin, &s) && strstr(oar_last_error(), "not a member"),
               "data parallel over a group this rank is not in");
    }
    oar_module_free(lin);
    sync_batch_norm_over(even, solo);
    MUST(oar_dist_group_free(even));
    MUST(oar_dist_group_free(solo));
    MUST(oar_dist_wait(oar_dist_barrier()));
    if (!failures) printf("rank %d: groups OK\n", me);
    return failures ? 1 : 0;
}

static int dead(void) {
    int me = oar_dist_rank();
    oar_dist_group *g = oar_dist_new_group((int[]){1, 2}, 2);
    MUST(g ? OAR_OK : oar_last_status());
    oar_tensor *t = oar_ones((int64_t[]){4}, 1, OAR_F32);
    if (me == 2) { /* dies before the group's collective, once the others have left new_group */
        usleep(500 * 1000);
        fflush(stdout);
        _exit(3);
    }
    if (me == 1) {
        oar_status st = oar_dist_wait(oar_dist_group_allreduce(g, t, OAR_DIST_SUM, true));
        EXPECT(st != OAR_OK && strstr(oar_last_error(), "rank 2") && strstr(oar_last_error(), "died") &&
               strstr(oar_last_error(), "rank 1 stops"),
               "expected the group's allreduce to fail naming rank 2, got status %d", (int)st);
        printf("rank 1: dead peer in the group reported: %s\n", oar_last_error());
    }
    if (me == 0) sleep(2); /* not in the group: waits for the job to end */
    if (!failures) printf("rank %d: dead OK\n", me);
    fflush(stdout);
    exit(failures ? 1 : 0); /* MPI cannot finish with a dead rank */
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dist_groups api|dead\n");
        return 2;
    }
    oar_set_num_threads(1);
    MUST(oar_dist_init(NULL));
    int rc;
    if (!strcmp(argv[1], "api")) rc = api();
    else if (!strcmp(argv[1], "dead")) rc = dead();
    else {
        fprintf(stderr, "dist_groups: unknown mode %s\n", argv[1]);
        return 2;
    }
    MUST(oar_dist_finalize());
    return rc || failures ? 1 : 0;
}
