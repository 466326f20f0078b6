/* The parameter-server tests' program (ps.sh runs it under mpirun: rank 0 serves, the others
 * work). The workload: a factorization machine (a weight per feature id plus rank-8 pairwise
 * interactions, both embedding tables) on a synthetic click log with a planted truth.
 *   local STEPS BATCH OUT          one process, the tables in memory, batch BATCH
 *   sync|async|geo STEPS BATCH OUT [SERVERS]  the PS job (SERVERS ranks serve, default 1), batch
 *                                  BATCH per worker; worker 0 writes OUT
 *   kill OUT                       the server is SIGKILLed mid-training: every worker must fail
 *                                  naming rank 0 within 2 s of the kill ("detected after N ms":
 *                                  from the kill, whose time the killer writes to OUT, to the
 *                                  worker's failed step)
 *   compare A B TOL                two OUTs: the largest table difference within TOL, and the
 *                                  final losses
 *   converged A B MARGIN           B's test AUC within MARGIN of A's
 * OUT holds the last 20 steps' mean loss, the test AUC and both tables (%a, exact). */
#include "oar.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FIELDS 6
#define DIM 8
#define TEST_SIZE 4000

#define MUST(st)                                                                            \
    do {                                                                                    \
        if ((st) != OAR_OK) {                                                               \
            fprintf(stderr, "rank %d: %s:%d: %s\n", oar_dist_rank(), __FILE__, __LINE__, oar_last_error()); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The kill's time, passed from the killer to the workers: written whole (rename) after the kill. */
static void write_kill_time(const char *out, double ms) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *k = fopen(tmp, "w");
    if (!k) return;
    fprintf(k, "%.3f\n", ms);
    fclose(k);
    rename(tmp, out);
}

/* A worker can see the death before the killer has written the time: it waits up to 10 s for it. */
static bool read_kill_time(const char *out, double *ms) {
    for (int i = 0; i < 1000; i++) {
        FILE *k = fopen(out, "r");
        bool ok = k && fscanf(k, "%lf", ms) == 1;
        if (k) fclose(k);
        if (ok) return true;
        struct timespec pause = {0, 10 * 1000000};
        nanosleep(&pause, NULL);
    }
    return false;
}

static oar_clicks_opts log_opts(bool test) {
    return (oar_clicks_opts){.fields = FIELDS, .max_cardinality = 2000, .size = test ? TEST_SIZE : 40000,
                             .offset = test ? 40000 : 0, .seed = 5};
}

/* The FM's logits from the rows of its ids: w [B*F, 1] and v [B*F, D]. */
static oar_tensor *fm_logits(oar_tensor *w, oar_tensor *v, int64_t b) {
    oar_tensor *wide = oar_sum(oar_reshape(w, (int64_t[]){b, FIELDS}, 2), (int[]){1}, 1, true);
    oar_tensor *e = oar_reshape(v, (int64_t[]){b, FIELDS, DIM}, 3);
    oar_tensor *s = oar_sum(e, (int[]){1}, 1, false), *s2 = oar_sum(oar_mul(e, e), (int[]){1}, 1, false);
    oar_tensor *pair = oar_sum(oar_sub(oar_mul(s, s), s2), (int[]){1}, 1, true);
    return oar_add(wide, oar_mul_scalar(pair, 0.5));
}

/* Where a step's rows come from and where their gradients go: the PS, or local tables. */
typedef struct tables {
    oar_ps *ps;
    int id[2];
    oar_tensor *local[2];    /* local mode: the tables */
    oar_optimizer *opt[2];
} tables;

static oar_tensor *rows(tables *t, int k, oar_tensor *ids) {
    if (t->ps) return oar_ps_pull(t->ps, t->id[k], ids);
    return oar_index_select(t->local[k], 0, ids);
}

static oar_status push(tables *t, int k, oar_tensor *ids, oar_tensor *g) {
    if (t->ps) return oar_ps_push(t->ps, t->id[k], ids, g);
    /* one process: the gathered gradient, added up row by row in order as a server does */
    oar_tensor *dense = oar_zeros(oar_shape(t->local[k]), 2, OAR_F32);
    float *d = oar_data(dense);
    const float *gv = oar_data(g);
    const int64_t *iv = oar_data(ids);
    int64_t dim = oar_shape(t->local[k])[1];
    for (int64_t i = 0; i < oar_shape(ids)[0]; i++)
        for (int64_t j = 0; j < dim; j++) d[iv[i] * dim + j] += gv[i * dim + j];
    oar_tensor *leaf = t->local[k];
    oar_optimizer_zero_grad(t->opt[k]);
    oar_status st = oar_backward(oar_sum(oar_mul(leaf, dense), NULL, 0, false), NULL, false);
    return st == OAR_OK ? oar_optimizer_step(t->opt[k]) : st;
}

static double test_auc(const float *w, const float *v) {
    oar_clicks_opts o = log_opts(true);
    oar_dataset *d = oar_dataset_clicks(&o);
    oar_tensor *x, *y;
    MUST(oar_dataset_to_tensors(d, &x, &y));
    oar_scope_begin();
    int64_t n = oar_shape(x)[0], ids = oar_clicks_num_ids(d);
    oar_tensor *wt = oar_from_data(w, (int64_t[]){ids, 1}, 2, OAR_F32), *vt = oar_from_data(v, (int64_t[]){ids, DIM}, 2, OAR_F32);
    oar_tensor *flat = oar_reshape(x, (int64_t[]){n * FIELDS}, 1);
    double auc = 0;
    MUST(oar_auc(fm_logits(oar_index_select(wt, 0, flat), oar_index_select(vt, 0, flat), n), y, &auc));
    oar_scope_end();
    oar_release(x), oar_release(y);
    oar_dataset_free(d);
    return auc;
}

static int train(const char *mode, int steps, int64_t batch, const char *out, int kill_after, int servers) {
    bool local = !strcmp(mode, "local");
    oar_clicks_opts o = log_opts(false);
    oar_dataset *d = oar_dataset_clicks(&o);
    int64_t ids = oar_clicks_num_ids(d);
    oar_manual_seed(3);
    oar_tensor *init[2] = {oar_zeros((int64_t[]){ids, 1}, 2, OAR_F32), oar_randn((int64_t[]){ids, DIM}, 2, OAR_F32)};
    oar_tensor *small = oar_mul_scalar(init[1], 0.05);
    oar_release(init[1]);
    init[1] = small;
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    oo.lr = 0.05;
    tables t = {0};
    if (!local) {
        oar_ps_opts po = {.servers = servers, .geo_k = 5, .optim = oo};
        po.mode = !strcmp(mode, "sync") ? OAR_PS_SYNC : !strcmp(mode, "async") ? OAR_PS_ASYNC : OAR_PS_GEO;
        MUST((t.ps = oar_ps_new(&po)) ? OAR_OK : oar_last_status());
        t.id[0] = oar_ps_add_table(t.ps, "wide", init[0]);
        t.id[1] = oar_ps_add_table(t.ps, "pairs", init[1]);
        MUST(t.id[0] >= 0 && t.id[1] >= 0 ? OAR_OK : oar_last_status());
        if (oar_ps_is_server(t.ps)) {
            oar_status st = OAR_OK;
            if (kill_after >= 0) { /* serve a while, then die */
                pid_t me = getpid();
                if (fork() == 0) {
                    struct timespec pause = {0, 300 * 1000000};
                    nanosleep(&pause, NULL);
                    /* the time of the kill itself: the file is written after it, so a loaded machine
                     * that delays this child adds nothing to the latency the workers measure */
                    double killed = wall_ms();
                    kill(me, SIGKILL);
                    write_kill_time(out, killed);
                    _exit(0);
                }
            }
            st = oar_ps_serve(t.ps);
            MUST(st);
            oar_ps_free(t.ps);
            oar_release(init[0]), oar_release(init[1]);
            oar_dataset_free(d);
            return 0;
        }
    } else {
        for (int k = 0; k < 2; k++) {
            t.local[k] = oar_clone(init[k]);
            oar_set_requires_grad(t.local[k], true);
            t.opt[k] = oar_optimizer_new(&t.local[k], 1, &oo);
        }
    }
    oar_loader *l = oar_loader_new(d, &(oar_loader_opts){.batch_size = batch, .shuffle = true, .seed = 17});
    if (t.ps) MUST(oar_loader_set_shard(l, oar_ps_worker_index(t.ps), oar_ps_num_workers(t.ps)));
    double tail = 0, t0 = wall_ms();
    int n_tail = 0, step = 0;
    for (int64_t epoch = 0; step < steps; epoch++) {
        MUST(oar_loader_start_epoch(l, epoch));
        oar_tensor *x, *y;
        oar_status st;
        while (step < steps && oar_loader_next(l, &x, &y, &st)) {
            oar_scope_begin();
            int64_t b = oar_shape(x)[0];
            oar_tensor *flat = oar_contiguous(oar_reshape(x, (int64_t[]){b * FIELDS}, 1));
            oar_tensor *r[2] = {rows(&t, 0, flat), rows(&t, 1, flat)};
            if (!r[0] || !r[1]) st = oar_last_status();
            for (int k = 0; st == OAR_OK && k < 2; k++) {
                r[k] = oar_detach(r[k]);
                st = oar_set_requires_grad(r[k], true);
            }
            oar_tensor *loss = st == OAR_OK ? oar_bce_with_logits(fm_logits(r[0], r[1], b), y, OAR_REDUCE_MEAN) : NULL;
            if (st == OAR_OK) st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
            for (int k = 0; st == OAR_OK && k < 2; k++) st = push(&t, k, flat, oar_grad_get(r[k]));
            if (st == OAR_OK && t.ps) st = oar_ps_step_done(t.ps);
            double lv = 0;
            if (st == OAR_OK) st = oar_item(loss, &lv);
            oar_scope_end();
            oar_release(x), oar_release(y);
            if (st != OAR_OK) {
                double now = wall_ms(), killed = 0;
                if (kill_after >= 0 && read_kill_time(out, &killed))
                    printf("rank %d: detected after %.0f ms: %s\n", oar_dist_rank(), now - killed, oar_last_error());
                else
                    fprintf(stderr, "rank %d: %s\n", oar_dist_rank(), oar_last_error());
                exit(1);
            }
            if (step >= steps - 20) tail += lv, n_tail++;
            step++;
        }
    }
    double seconds = (wall_ms() - t0) / 1e3;
    /* the final tables: worker 0 pulls every row (in sync mode, after the last update) */
    bool writer = local || oar_ps_worker_index(t.ps) == 0;
    oar_tensor *all = oar_arange(0, (double)ids, 1, OAR_I64), *final[2] = {0};
    if (writer)
        for (int k = 0; k < 2; k++) MUST((final[k] = t.ps ? oar_ps_pull(t.ps, t.id[k], all) : oar_clone(t.local[k]))
                                             ? OAR_OK : oar_last_status());
    if (t.ps) MUST(oar_ps_finish(t.ps));
    if (writer) {
        double auc = test_auc(oar_data(final[0]), oar_data(final[1]));
        FILE *f = fopen(out, "w");
        fprintf(f, "%.17g %.17g %lld\n", tail / n_tail, auc, (long long)ids);
        for (int k = 0; k < 2; k++) {
            const float *v = oar_data(final[k]);
            for (int64_t i = 0; i < oar_numel(final[k]); i++) fprintf(f, "%a\n", (double)v[i]);
        }
        fclose(f);
        int workers = local ? 1 : oar_ps_num_workers(t.ps);
        printf("%s: %d steps, batch %lld%s: loss %.5f (last 20 steps), test AUC %.4f, %.0f examples/s\n", mode, steps,
               (long long)batch, local ? "" : " per worker", tail / n_tail, auc, (double)steps * batch * workers / seconds);
    }
    oar_release(all), oar_release(final[0]), oar_release(final[1]);
    for (int k = 0; k < 2; k++) oar_optimizer_free(t.opt[k]), oar_release(t.local[k]), oar_release(init[k]);
    oar_ps_free(t.ps);
    oar_loader_free(l);
    oar_dataset_free(d);
    return 0;
}

/* An OUT file's loss, AUC and tables; *v is the caller's to free (NULL on failure). */
static bool read_out(const char *path, double *loss, double *auc, float **v, int64_t *n) {
    FILE *f = fopen(path, "r");
    long long ids = 0;
    *v = NULL;
    bool ok = f && fscanf(f, "%lf %lf %lld", loss, auc, &ids) == 3 && ids > 0;
    *n = ids * (1 + DIM);
    if (ok) ok = (*v = malloc(sizeof(float) * (size_t)*n)) != NULL;
    for (int64_t i = 0; ok && i < *n; i++) {
        double x;
        ok = fscanf(f, "%la", &x) == 1;
        (*v)[i] = (float)x;
    }
    if (f) fclose(f);
    if (!ok) free(*v), *v = NULL;
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: ps_job local|sync|async|geo STEPS BATCH OUT [SERVERS] | kill OUT | compare A B TOL | "
                        "converged A B MARGIN\n");
        return 2;
    }
    oar_set_num_threads(1);
    const char *mode = argv[1];
    if (!strcmp(mode, "compare") || !strcmp(mode, "converged")) {
        double la, lb, aa, ab, tol = argc > 4 ? atof(argv[4]) : 0;
        float *a = NULL, *b = NULL;
        int64_t na = 0, nb = 0;
        bool ok = argc >= 5 && read_out(argv[2], &la, &aa, &a, &na) && read_out(argv[3], &lb, &ab, &b, &nb) && na == nb;
        double diff = 0;
        for (int64_t i = 0; ok && i < na; i++) diff = fmax(diff, fabs((double)a[i] - (double)b[i]));
        free(a), free(b);
        if (!ok) {
            fprintf(stderr, "ps_job %s: cannot read two outputs of the same tables\n", mode);
            return 1;
        }
        printf("%s: loss %.6f vs %.6f, test AUC %.4f vs %.4f, largest table difference %.3g\n", mode, la, lb, aa, ab, diff);
        if (!strcmp(mode, "compare")) return diff <= tol ? 0 : 1;
        return ab >= aa - tol ? 0 : 1;
    }
    bool local = !strcmp(mode, "local");
    if (!local) MUST(oar_dist_init(NULL));
    int rc;
    if (!strcmp(mode, "kill") && argc >= 3) rc = train("sync", 1000000, 16, argv[2], 1, 1);
    else if (argc >= 5) rc = train(mode, atoi(argv[2]), atoll(argv[3]), argv[4], -1, argc > 5 ? atoi(argv[5]) : 1);
    else {
        fprintf(stderr, "ps_job: missing arguments for %s\n", mode);
        return 2;
    }
    if (!local) MUST(oar_dist_finalize());
    return rc;
}
