/* The parameter server's row-restricted update (src/dist/ps_rows.h): touched rows get exactly the
 * update a dense optimizer makes on them (compared bit for bit with oar_optimizer on the touched
 * rows alone), untouched rows and their optimizer state stay bit for bit as they were, SGD and
 * Adagrad equal a dense update of the whole table, LAMB is refused; and the cost against a
 * dense update of the whole table, measured and printed (not checked: timings on a shared
 * machine are not reliable enough to fail a test on). */
#include "test_util.h"
#include "dist/ps_rows.h"

#include <math.h>
#include <time.h>

#define R 40
#define D 6
#define STEPS 4

static float frand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) / 9007199254740992.0 - 0.5);
}

/* Rows touched by step s: the same set for steps 0-2, another (overlapping) at step 3. */
static int touched_rows(int s, int64_t *rows) {
    static const int64_t late[] = {2, 4, 30};
    if (s == STEPS - 1) {
        memcpy(rows, late, sizeof late);
        return 3;
    }
    int n = 0;
    for (int64_t r = 1; r < R; r += 3) rows[n++] = r;
    return n;
}

static bool in_set(const int64_t *rows, int n, int64_t r) {
    for (int i = 0; i < n; i++)
        if (rows[i] == r) return true;
    return false;
}

static void check_kind(const char *what, oar_optim_opts oo, bool dense_equal) {
    uint64_t seed = 7;
    float init[R * D], param[R * D], grad[R * D] = {0}, grads[STEPS][R * D];
    for (int i = 0; i < R * D; i++) init[i] = param[i] = frand(&seed);
    for (int s = 0; s < STEPS; s++)
        for (int i = 0; i < R * D; i++) grads[s][i] = frand(&seed);
    ps_rows pr;
    CHECK(ps_rows_init(&pr, &oo, R, D, what) == OAR_OK);
    float slot0[OAR_SLOT_COUNT][R * D];
    for (int k = 1; k < OAR_SLOT_COUNT; k++)
        if (pr.slot[k]) memcpy(slot0[k], pr.slot[k], sizeof slot0[k]);
    int64_t set[R], late[R];
    int n_set = touched_rows(0, set), n_late = touched_rows(STEPS - 1, late);
    /* reference 1: a dense optimizer on the rows of the first set alone, for the first 3 steps */
    oar_tensor *sub = oar_empty((int64_t[]){n_set, D}, 2, OAR_F32), *subg = oar_empty((int64_t[]){n_set, D}, 2, OAR_F32);
    for (int i = 0; i < n_set; i++) memcpy((float *)oar_data(sub) + i * D, init + set[i] * D, sizeof(float) * D);
    oar_set_requires_grad(sub, true);
    oar_optimizer *ref = oar_optimizer_new(&sub, 1, &oo);
    /* reference 2: a dense optimizer on the whole table, zero gradient on the rows not touched */
    oar_tensor *full = oar_from_data(init, (int64_t[]){R, D}, 2, OAR_F32), *fullg = oar_zeros((int64_t[]){R, D}, 2, OAR_F32);
    oar_set_requires_grad(full, true);
    oar_optimizer *dense = oar_optimizer_new(&full, 1, &oo);
    for (int s = 0; s < STEPS; s++) {
        int64_t rows[R];
        int n = touched_rows(s, rows);
        float *fg = oar_data(fullg);
        memset(fg, 0, sizeof(float) * R * D);
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < D; j++) grad[rows[i] * D + j] += grads[s][rows[i] * D + j];
            memcpy(fg + rows[i] * D, grads[s] + rows[i] * D, sizeof(float) * D);
            ps_rows_touch(&pr, rows[i]);
        }
        CHECK(ps_rows_apply(&pr, param, grad, 1.0) == OAR_OK);
        t_give_grad(full, fullg);
        CHECK(oar_optimizer_step(dense) == OAR_OK);
        if (s < STEPS - 1) {
            for (int i = 0; i < n_set; i++)
                memcpy((float *)oar_data(subg) + i * D, grads[s] + set[i] * D, sizeof(float) * D);
            t_give_grad(sub, subg);
            CHECK(oar_optimizer_step(ref) == OAR_OK);
        }
        if (s == STEPS - 2) { /* the touched rows as the dense update of them alone, bit for bit */
            bool same = true;
            for (int i = 0; i < n_set; i++)
                same &= !memcmp(param + set[i] * D, (float *)oar_data(sub) + i * D, sizeof(float) * D);
            if (!same) fprintf(stderr, "%s: touched rows differ from a dense update of them\n", what);
            CHECK(same);
        }
    }
    /* rows never touched, and their state, exactly as they were */
    bool kept = true;
    for (int64_t r = 0; r < R; r++) {
        if (in_set(set, n_set, r) || in_set(late, n_late, r)) continue;
        kept &= !memcmp(param + r * D, init + r * D, sizeof(float) * D);
        for (int k = 1; k < OAR_SLOT_COUNT; k++)
            if (pr.slot[k]) kept &= !memcmp(pr.slot[k] + r * D, slot0[k] + r * D, sizeof(float) * D);
    }
    if (!kept) fprintf(stderr, "%s: an untouched row or its state changed\n", what);
    CHECK(kept);
    /* the gradient buffer is cleared and the step count is the table's */
    bool zero = true;
    for (int i = 0; i < R * D; i++) zero &= grad[i] == 0;
    CHECK(zero && pr.t == STEPS && pr.n_touched == 0);
    if (dense_equal) {
        bool same = !memcmp(param, oar_data(full), sizeof(float) * R * D);
        if (!same) fprintf(stderr, "%s: differs from a dense update of the whole table\n", what);
        CHECK(same);
    }
    printf("  %-22s touched rows = dense update of them%s; untouched rows and state unchanged\n", what,
           dense_equal ? "; whole table = dense update" : "");
    ps_rows_free(&pr);
    oar_optimizer_free(ref), oar_optimizer_free(dense);
    oar_release(sub), oar_release(subg), oar_release(full), oar_release(fullg);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Adam on a 50k x 32 table, 512 rows pushed per step: the row update against a dense step. */
static void measure(void) {
    enum { ROWS = 50000, DIM = 32, PUSHED = 512, REPS = 9 };
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAM);
    ps_rows pr;
    CHECK(ps_rows_init(&pr, &oo, ROWS, DIM, "bench") == OAR_OK);
    oar_tensor *p = oar_zeros((int64_t[]){ROWS, DIM}, 2, OAR_F32), *g = oar_zeros((int64_t[]){ROWS, DIM}, 2, OAR_F32);
    float *pd = oar_data(p), *gd = oar_data(g);
    oar_tensor *leaf = oar_zeros((int64_t[]){ROWS, DIM}, 2, OAR_F32);
    oar_set_requires_grad(leaf, true);
    oar_optimizer *dense = oar_optimizer_new(&leaf, 1, &oo);
    t_give_grad(leaf, g);
    double ts[REPS], td[REPS];
    uint64_t seed = 3;
    for (int k = 0; k < REPS; k++) {
        for (int i = 0; i < PUSHED; i++) {
            int64_t r = (int64_t)((frand(&seed) + 0.5f) * (ROWS - 1));
            for (int j = 0; j < DIM; j++) gd[r * DIM + j] += 0.01f;
            ps_rows_touch(&pr, r);
        }
        double t0 = now_ms();
        CHECK(ps_rows_apply(&pr, pd, gd, 0.5) == OAR_OK);
        ts[k] = now_ms() - t0;
        t0 = now_ms();
        CHECK(oar_optimizer_step(dense) == OAR_OK);
        td[k] = now_ms() - t0;
    }
    qsort(ts, REPS, sizeof(double), cmp_double);
    qsort(td, REPS, sizeof(double), cmp_double);
    printf("  Adam on a %d x %d table, %d rows pushed: row update %.3f ms (range %.3f-%.3f), dense step %.3f ms "
           "(%.3f-%.3f): %.1fx less time, median of %d\n", ROWS, DIM, PUSHED, ts[REPS / 2], ts[0], ts[REPS - 1],
           td[REPS / 2], td[0], td[REPS - 1], td[REPS / 2] / ts[REPS / 2], REPS);
    /* a measurement, not a check: the shared machine's load makes single timings swing 10x */
    ps_rows_free(&pr);
    oar_optimizer_free(dense);
    oar_release(p), oar_release(g), oar_release(leaf);
}

int main(void) {
    oar_optim_opts sgd = oar_optim_defaults(OAR_OPTIM_SGD);
    sgd.lr = 0.1;
    check_kind("SGD", sgd, true);
    oar_optim_opts mom = sgd;
    mom.momentum = 0.9, mom.dampening = 0.1, mom.weight_decay = 0.01;
    check_kind("SGD momentum + decay", mom, false);
    oar_optim_opts ada = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    ada.lr = 0.05, ada.lr_decay = 0.01, ada.initial_accumulator = 0.1;
    check_kind("Adagrad", ada, true);
    check_kind("Adam (lazy)", oar_optim_defaults(OAR_OPTIM_ADAM), false);
    check_kind("AdamW (lazy)", oar_optim_defaults(OAR_OPTIM_ADAMW), false);
    oar_optim_opts rms = oar_optim_defaults(OAR_OPTIM_RMSPROP);
    rms.centered = true, rms.momentum = 0.5;
    check_kind("RMSprop (lazy)", rms, false);
    ps_rows pr;
    CHECK_ERR(ps_rows_init(&pr, &(oar_optim_opts){.kind = OAR_OPTIM_LAMB, .lr = 0.01}, 4, 4, "t"),
              "LAMB cannot update a table row by row");
    measure();
    return test_summary("test_ps_rows");
}
