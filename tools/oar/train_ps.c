/* `oar train --model word2vec|wide-deep`: the sparse-embedding workloads (docs/sparse-workloads.md)
 * trained through the parameter server (include/oar/ps.h). Under a launcher (`--nproc N`,
 * `oar launch`, mpirun) the first --ps-servers ranks hold the tables and the others work: each
 * worker pulls the rows its share of a global batch needs, computes their gradients and pushes
 * them, in --ps-mode sync, async or geo (--geo-k steps between exchanges). In one process the
 * same code runs with the tables in process: the reference a sync job equals. Every table, the
 * wide & deep MLP's weights included, lives on the servers (a dense table is one pulled whole).
 * Worker 0 alone prints progress and the final metrics, the last line as JSON. */
#include "cli.h"
#include "bench_util.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W2V_DIM 64
#define WD_FIELDS 8
#define WD_EMB 8
#define MAX_TABLES 8

bool train_ps_model(const char *model) {
    return model && (!strcmp(model, "word2vec") || !strcmp(model, "wide-deep"));
}

/* The workload: its data, its tables on the PS and its loss on a batch of pulled rows. */
typedef struct ps_work {
    bool w2v;
    oar_dataset *train, *test; /* test: wide & deep only */
    oar_ps *ps;
    int n_tables, id[MAX_TABLES];
    int64_t rows[MAX_TABLES];  /* each table's rows (dense tables are pulled whole) */
    const char *name[MAX_TABLES];
    char source[512];
} ps_work;

/* word2vec's initialisation: centers uniform in +-0.5/dim, contexts zero. */
static oar_status add_w2v_tables(ps_work *w) {
    int64_t v = oar_skipgram_vocab_size(w->train);
    oar_scope_begin();
    oar_tensor *in = oar_mul_scalar(oar_sub_scalar(oar_rand((int64_t[]){v, W2V_DIM}, 2, OAR_F32), 0.5), 1.0 / W2V_DIM);
    oar_tensor *out = oar_zeros((int64_t[]){v, W2V_DIM}, 2, OAR_F32);
    w->name[0] = "in", w->name[1] = "out";
    w->id[0] = in ? oar_ps_add_table(w->ps, "in", in) : -1;
    w->id[1] = out && w->id[0] >= 0 ? oar_ps_add_table(w->ps, "out", out) : -1;
    oar_scope_end();
    w->rows[0] = w->rows[1] = v;
    w->n_tables = 2;
    return w->id[1] >= 0 ? OAR_OK : oar_last_status();
}

/* wide: a weight per feature id; deep: [ids, 8] embeddings, then an MLP 64-32-1 whose weights
 * (initialised as oar_nn_linear does) are dense tables: [out, in] and a bias [1, out]. */
static oar_status add_wide_deep_tables(ps_work *w) {
    static const char *names[] = {"wide", "emb", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight",
                                  "fc3.bias"};
    int64_t ids = oar_clicks_num_ids(w->train), dims[4] = {WD_FIELDS * WD_EMB, 64, 32, 1};
    oar_status st = OAR_OK;
    oar_scope_begin();
    oar_tensor *init[MAX_TABLES] = {oar_zeros((int64_t[]){ids, 1}, 2, OAR_F32),
                                    oar_mul_scalar(oar_randn((int64_t[]){ids, WD_EMB}, 2, OAR_F32), 0.01)};
    oar_module *fc[3] = {0};
    for (int k = 0; k < 3; k++) {
        fc[k] = oar_nn_linear(dims[k], dims[k + 1], true);
        init[2 + 2 * k] = fc[k] ? oar_module_get(fc[k], "weight") : NULL;
        oar_tensor *b = fc[k] ? oar_module_get(fc[k], "bias") : NULL;
        init[3 + 2 * k] = b ? oar_reshape(b, (int64_t[]){1, dims[k + 1]}, 2) : NULL;
    }
    for (int k = 0; k < MAX_TABLES; k++) {
        w->name[k] = names[k];
        w->id[k] = st == OAR_OK && init[k] ? oar_ps_add_table(w->ps, names[k], oar_detach(init[k])) : -1;
        if (w->id[k] < 0 && st == OAR_OK) st = oar_last_status();
        w->rows[k] = init[k] ? oar_shape(init[k])[0] : 0;
    }
    oar_scope_end();
    for (int k = 0; k < 3; k++) oar_module_free(fc[k]);
    w->n_tables = MAX_TABLES;
    return st;
}

static oar_status open_data(const train_opts *o, ps_work *w) {
    if (w->w2v) {
        const char *shared = getenv("OAR_SHARED_DIR");
        if (!strcmp(o->data, "austen"))
            snprintf(w->source, sizeof w->source, "%s/data/text/austen.txt", shared ? shared : "../shared");
        else
            snprintf(w->source, sizeof w->source, "%s", o->data);
        oar_skipgram_opts so = {.seed = o->seed};
        if (!(w->train = oar_dataset_skipgram(w->source, &so))) return oar_last_status();
        return OAR_OK;
    }
    if (strcmp(o->data, "clicks") != 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: --model wide-deep trains on the synthetic click log; "
                             "expected --data clicks (or no --data), got '%s'", o->data);
    oar_clicks_opts co = {.fields = WD_FIELDS, .max_cardinality = 20000, .size = 500000, .seed = 1};
    w->train = oar_dataset_clicks(&co);
    co.offset = co.size, co.size = 20000;
    w->test = oar_dataset_clicks(&co);
    snprintf(w->source, sizeof w->source, "synthetic click log, 500000 entries + 20000 test, 8 fields, %lld ids",
             (long long)oar_clicks_num_ids(w->train));
    return w->train && w->test ? OAR_OK : oar_last_status();
}

/* Pulls table k's rows ids as a leaf that wants a gradient. */
static oar_tensor *pull_leaf(ps_work *w, int k, oar_tensor *ids) {
    oar_tensor *r = oar_ps_pull(w->ps, w->id[k], ids);
    if (r && oar_set_requires_grad(r, true) != OAR_OK) return NULL;
    return r;
}

/* The loss of a batch; rows[k] and ids[k] get the pulled leaves and their ids (NULL: unused). */
static oar_tensor *batch_loss(ps_work *w, oar_tensor *x, oar_tensor *y, oar_tensor **rows, oar_tensor **ids) {
    int64_t b = oar_shape(x)[0], width = oar_shape(x)[1];
    if (w->w2v) { /* logits: the center's in-vector dotted with each of (context, negatives)'s out-vector */
        ids[0] = oar_contiguous(oar_reshape(oar_slice(x, 1, 0, 1, 1), (int64_t[]){b}, 1));
        ids[1] = oar_contiguous(oar_reshape(oar_slice(x, 1, 1, width, 1), (int64_t[]){b * (width - 1)}, 1));
        rows[0] = pull_leaf(w, 0, ids[0]);
        rows[1] = rows[0] ? pull_leaf(w, 1, ids[1]) : NULL;
        if (!rows[1]) return NULL;
        oar_tensor *c = oar_reshape(rows[0], (int64_t[]){b, 1, W2V_DIM}, 3);
        oar_tensor *ot = oar_reshape(rows[1], (int64_t[]){b, width - 1, W2V_DIM}, 3);
        int last = -1;
        return oar_bce_with_logits(oar_sum(oar_mul(ot, c), &last, 1, false), y, OAR_REDUCE_MEAN);
    }
    ids[0] = ids[1] = oar_contiguous(oar_reshape(x, (int64_t[]){b * width}, 1));
    for (int k = 0; k < w->n_tables; k++) {
        if (k >= 2) ids[k] = oar_arange(0, (double)w->rows[k], 1, OAR_I64);
        if (!ids[k] || !(rows[k] = pull_leaf(w, k, ids[k]))) return NULL;
    }
    int dims[1] = {1};
    oar_tensor *wide = oar_sum(oar_reshape(rows[0], (int64_t[]){b, width}, 2), dims, 1, true); /* [B, 1] */
    oar_tensor *h = oar_reshape(rows[1], (int64_t[]){b, width * WD_EMB}, 2);
    for (int k = 0; k < 3; k++) {
        oar_tensor *bias = oar_reshape(rows[3 + 2 * k], (int64_t[]){oar_shape(rows[3 + 2 * k])[1]}, 1);
        h = oar_linear(h, rows[2 + 2 * k], bias);
        if (k < 2) h = oar_relu(h);
    }
    return oar_bce_with_logits(oar_add(wide, h), y, OAR_REDUCE_MEAN);
}

/* Worker 0, after training: every table pulled whole (sync: after the last update). */
static oar_status pull_all(ps_work *w, float **tables) {
    oar_status st = OAR_OK;
    for (int k = 0; st == OAR_OK && k < w->n_tables; k++) {
        oar_scope_begin();
        oar_tensor *t = oar_ps_pull(w->ps, w->id[k], oar_arange(0, (double)w->rows[k], 1, OAR_I64));
        size_t bytes = t ? sizeof(float) * (size_t)oar_numel(t) : 0;
        if (!t || !(tables[k] = malloc(bytes))) st = t ? oar_set_error(OAR_ERR_OOM, "train: out of memory") : oar_last_status();
        if (st == OAR_OK) memcpy(tables[k], oar_data(t), bytes);
        oar_scope_end();
    }
    return st;
}

/* FNV-1a over the tables' bytes: equal runs print equal digests. */
static uint64_t digest(const ps_work *w, float *const *tables, int64_t *const dims) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < w->n_tables; k++) {
        const unsigned char *p = (const unsigned char *)tables[k];
        for (size_t i = 0; i < sizeof(float) * (size_t)(w->rows[k] * dims[k]); i++) h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

/* Wide & deep's test loss and AUC from the final tables, and the truth's AUC (the best possible). */
static oar_status wide_deep_eval(ps_work *w, float *const *tables, double *loss, double *auc, double *best) {
    oar_tensor *x = NULL, *y = NULL;
    oar_status st = oar_dataset_to_tensors(w->test, &x, &y);
    if (st != OAR_OK) return st;
    int64_t n = oar_shape(x)[0], ids = w->rows[0];
    bool g = oar_set_grad_enabled(false);
    oar_scope_begin();
    oar_tensor *flat = oar_reshape(x, (int64_t[]){n * WD_FIELDS}, 1);
    oar_tensor *rows[MAX_TABLES];
    rows[0] = oar_index_select(oar_from_data(tables[0], (int64_t[]){ids, 1}, 2, OAR_F32), 0, flat);
    rows[1] = oar_index_select(oar_from_data(tables[1], (int64_t[]){ids, WD_EMB}, 2, OAR_F32), 0, flat);
    int64_t dims[4] = {WD_FIELDS * WD_EMB, 64, 32, 1};
    for (int k = 0; k < 3; k++) {
        rows[2 + 2 * k] = oar_from_data(tables[2 + 2 * k], (int64_t[]){dims[k + 1], dims[k]}, 2, OAR_F32);
        rows[3 + 2 * k] = oar_from_data(tables[3 + 2 * k], (int64_t[]){dims[k + 1]}, 1, OAR_F32);
    }
    int one = 1;
    oar_tensor *h = oar_reshape(rows[1], (int64_t[]){n, WD_FIELDS * WD_EMB}, 2);
    for (int k = 0; k < 3; k++) {
        h = oar_linear(h, rows[2 + 2 * k], rows[3 + 2 * k]);
        if (k < 2) h = oar_relu(h);
    }
    oar_tensor *score = oar_add(oar_sum(oar_reshape(rows[0], (int64_t[]){n, WD_FIELDS}, 2), &one, 1, true), h);
    st = score ? oar_auc(score, y, auc) : oar_last_status();
    if (st == OAR_OK) st = oar_item(oar_bce_with_logits(score, y, OAR_REDUCE_MEAN), loss);
    double *p = st == OAR_OK ? malloc(sizeof(double) * (size_t)n) : NULL;
    for (int64_t i = 0; p && i < n; i++) p[i] = oar_clicks_probability(w->test, i);
    if (p) st = oar_auc(oar_from_data(p, (int64_t[]){n}, 1, OAR_F64), y, best);
    free(p);
    oar_scope_end();
    oar_set_grad_enabled(g);
    oar_release(x), oar_release(y);
    return st;
}

/* word2vec's loss from the final tables on a fixed sample of 8192 centers (contexts and negatives
 * drawn for an epoch training never reaches), the same for every run of a seed. */
static oar_status w2v_eval(ps_work *w, float *const *tables, double *loss) {
    oar_loader_opts lo = {.batch_size = 8192, .shuffle = true, .seed = 12345};
    oar_loader *l = oar_loader_new(w->train, &lo);
    oar_tensor *x = NULL, *y = NULL;
    oar_status st = l ? oar_loader_start_epoch(l, 1000000) : oar_last_status();
    if (st == OAR_OK && !oar_loader_next(l, &x, &y, &st) && st == OAR_OK)
        st = oar_set_error(OAR_ERR_STATE, "train: no evaluation batch");
    bool g = oar_set_grad_enabled(false);
    oar_scope_begin();
    if (st == OAR_OK) {
        int64_t b = oar_shape(x)[0], width = oar_shape(x)[1], v = w->rows[0];
        oar_tensor *in = oar_from_data(tables[0], (int64_t[]){v, W2V_DIM}, 2, OAR_F32);
        oar_tensor *out = oar_from_data(tables[1], (int64_t[]){v, W2V_DIM}, 2, OAR_F32);
        oar_tensor *c = oar_embedding(in, oar_slice(x, 1, 0, 1, 1)), *o = oar_embedding(out, oar_slice(x, 1, 1, width, 1));
        int last = -1;
        oar_tensor *l2 = oar_bce_with_logits(oar_sum(oar_mul(o, c), &last, 1, false), y, OAR_REDUCE_MEAN);
        st = l2 ? oar_item(l2, loss) : oar_last_status();
        (void)b;
    }
    oar_scope_end();
    oar_set_grad_enabled(g);
    oar_release(x), oar_release(y);
    oar_loader_free(l);
    return st;
}

/* word2vec's nearest words to a query by cosine of the center vectors, printed. */
static void print_neighbours(const ps_work *w, const float *e, const char *word) {
    int64_t v = w->rows[0], q = oar_skipgram_id(w->train, word);
    if (q < 0) return;
    double *score = malloc(sizeof(double) * (size_t)v);
    if (!score) return;
    const float *a = e + q * W2V_DIM;
    for (int64_t i = 0; i < v; i++) {
        double dot = 0, na = 0, nb = 0;
        for (int j = 0; j < W2V_DIM; j++)
            dot += (double)a[j] * e[i * W2V_DIM + j], na += (double)a[j] * a[j], nb += (double)e[i * W2V_DIM + j] * e[i * W2V_DIM + j];
        score[i] = i == q ? -2 : dot / (sqrt(na * nb) + 1e-12);
    }
    printf("nearest to %-8s:", word);
    for (int r = 0; r < 6; r++) {
        int64_t arg = 0;
        for (int64_t i = 1; i < v; i++)
            if (score[i] > score[arg]) arg = i;
        printf(" %s", oar_skipgram_word(w->train, arg));
        score[arg] = -3;
    }
    printf("\n");
    free(score);
}

static oar_status parse_ps_opts(const train_opts *o, int world, oar_ps_opts *po) {
    const char *m = o->ps_mode ? o->ps_mode : "sync";
    po->mode = !strcmp(m, "sync") ? OAR_PS_SYNC : !strcmp(m, "async") ? OAR_PS_ASYNC : !strcmp(m, "geo") ? OAR_PS_GEO
                                                                                                      : (oar_ps_mode)-1;
    if ((int)po->mode < 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: unknown --ps-mode '%s'; expected sync, async or geo", m);
    po->servers = o->ps_servers ? o->ps_servers : 1;
    po->geo_k = o->geo_k;
    if (world > 1 && po->servers >= world)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: --ps-servers %d leaves no worker in a job of %d ranks; use "
                             "--nproc %d or more", po->servers, world, po->servers + 1);
    const char *k = o->optimizer;
    oar_optim_kind kind = !strcmp(k, "adagrad") ? OAR_OPTIM_ADAGRAD : !strcmp(k, "adam") ? OAR_OPTIM_ADAM
                        : !strcmp(k, "adamw") ? OAR_OPTIM_ADAMW : !strcmp(k, "sgd") ? OAR_OPTIM_SGD : (oar_optim_kind)-1;
    if ((int)kind < 0)
        return oar_set_error(OAR_ERR_INVALID_ARG, "train: unknown optimizer '%s' for a parameter-server model; "
                             "expected sgd, adagrad, adam or adamw", k);
    po->optim = oar_optim_defaults(kind);
    if (o->lr > 0) po->optim.lr = o->lr;
    if (o->weight_decay > 0) po->optim.weight_decay = o->weight_decay;
    return OAR_OK;
}

/* Trains; rc 0 on success. Worker 0 prints; servers serve. */
static int run(const train_opts *o, ps_work *w, int world) {
    oar_ps_opts po;
    oar_status st = parse_ps_opts(o, world, &po);
    if (st != OAR_OK) return 2;
    if (!(w->ps = oar_ps_new(&po))) return 1;
    bool server = oar_ps_is_server(w->ps);
    int workers = oar_ps_num_workers(w->ps), widx = oar_ps_worker_index(w->ps);
    if (o->batch % workers) {
        oar_set_error(OAR_ERR_INVALID_ARG, "train: the global batch %lld does not split over %d workers; use a "
                      "multiple of %d", (long long)o->batch, workers, workers);
        return 2;
    }
    oar_manual_seed(o->seed); /* every rank makes the same initial tables */
    if ((w->w2v ? add_w2v_tables(w) : add_wide_deep_tables(w)) != OAR_OK) return 1;
    if (server) return oar_ps_serve(w->ps) == OAR_OK ? 0 : 1;

    oar_loader_opts lo = {.batch_size = o->batch / workers, .shuffle = true, .drop_last = true, .seed = o->seed};
    oar_loader *l = oar_loader_new(w->train, &lo);
    if (!l || oar_loader_set_shard(l, widx, workers) != OAR_OK) {
        oar_loader_free(l);
        return 1;
    }
    int64_t per_epoch = oar_loader_num_batches(l), total = per_epoch * o->epochs;
    if (o->steps_limit && o->steps_limit < total) total = o->steps_limit;
    const char *mode = o->ps_mode ? o->ps_mode : "sync";
    if (world > 1)
        printf("parameter server: %d server%s, %d workers, mode %s, batch %lld per worker\n", world - workers,
               world - workers > 1 ? "s" : "", workers, mode, (long long)(o->batch / workers));
    else
        printf("parameter server: in process (one rank holds the tables; --nproc N trains with servers)\n");
    if (po.mode == OAR_PS_GEO && world > 1) printf("geo: %d local steps between exchanges\n", po.geo_k ? po.geo_k : 10);
    printf("model: %s, %d tables; data: %s\n", o->model, w->n_tables, w->source);
    printf("training: %lld steps of global batch %lld, %s lr %g on the servers (rows touched only)\n",
           (long long)total, (long long)o->batch, o->optimizer, po.optim.lr);
    fflush(stdout);
    double t0 = bench_now_s(), first = 0, last = 0;
    int64_t step = 0, window = total / 10 > 0 ? total / 10 : 1, n_first = 0, n_last = 0;
    int64_t report = total / 10 > 0 ? total / 10 : 1;
    for (int64_t epoch = 0; st == OAR_OK && step < total; epoch++) {
        if ((st = oar_loader_start_epoch(l, epoch)) != OAR_OK) break;
        oar_tensor *x, *y;
        while (step < total && oar_loader_next(l, &x, &y, &st)) {
            oar_scope_begin();
            oar_tensor *rows[MAX_TABLES] = {0}, *ids[MAX_TABLES] = {0};
            oar_tensor *loss = batch_loss(w, x, y, rows, ids);
            double lv = 0;
            st = loss ? oar_backward(loss, NULL, false) : oar_last_status();
            for (int k = 0; st == OAR_OK && k < w->n_tables; k++)
                if (rows[k]) st = oar_ps_push(w->ps, w->id[k], ids[k], oar_grad_get(rows[k]));
            if (st == OAR_OK) st = oar_ps_step_done(w->ps);
            if (st == OAR_OK) st = oar_item(loss, &lv);
            oar_scope_end();
            oar_release(x), oar_release(y);
            if (st != OAR_OK) break;
            if (step < window) first += lv, n_first++;
            if (step >= total - window) last += lv, n_last++;
            if (++step % report == 0 && !o->quiet) {
                double t = bench_now_s() - t0;
                printf("step %lld/%lld  loss %.4f  %.0f examples/s\n", (long long)step, (long long)total, lv,
                       (double)step * (double)o->batch / t);
                fflush(stdout);
            }
        }
    }
    double secs = bench_now_s() - t0;
    oar_loader_free(l);
    float *tables[MAX_TABLES] = {0};
    if (st == OAR_OK && widx == 0) st = pull_all(w, tables);
    if (st == OAR_OK) st = oar_ps_finish(w->ps);
    double auc = 0, best = 0, eval_loss = 0;
    if (st == OAR_OK && widx == 0)
        st = w->w2v ? w2v_eval(w, tables, &eval_loss) : wide_deep_eval(w, tables, &eval_loss, &auc, &best);
    if (st == OAR_OK && widx == 0) {
        int64_t dims[MAX_TABLES];
        for (int k = 0; k < w->n_tables; k++) dims[k] = w->w2v ? W2V_DIM : k == 0 ? 1 : k == 1 ? WD_EMB : 0;
        if (!w->w2v) { /* the MLP's tables: their widths */
            int64_t in[4] = {WD_FIELDS * WD_EMB, 64, 32, 1};
            for (int k = 0; k < 3; k++) dims[2 + 2 * k] = in[k], dims[3 + 2 * k] = in[k + 1];
        }
        if (w->w2v) {
            static const char *queries[] = {"she", "sister", "morning"};
            for (int q = 0; q < 3; q++) print_neighbours(w, tables[0], queries[q]);
        }
        char metric[96] = "", line[1024];
        if (!w->w2v) snprintf(metric, sizeof metric, ", \"test_auc\": %.6f, \"best_auc\": %.6f", auc, best);
        snprintf(line, sizeof line, "{\"model\": \"%s\", \"mode\": \"%s\", \"servers\": %d, \"workers\": %d, \"geo_k\": %d, \"steps\": %lld, "
               "\"batch\": %lld, \"loss_first\": %.6f, \"loss\": %.6f, \"eval_loss\": %.6f%s, \"seconds\": %.3f, \"examples_per_s\": %.1f, "
               "\"tables_fnv1a\": \"%016llx\"}\n",
               o->model, world > 1 ? mode : "in-process", world - workers, workers, po.mode == OAR_PS_GEO ? po.geo_k ? po.geo_k : 10 : 0,
               (long long)step, (long long)o->batch, n_first ? first / (double)n_first : 0, n_last ? last / (double)n_last : 0,
               eval_loss, metric, secs, (double)step * (double)o->batch / secs, (unsigned long long)digest(w, tables, dims));
        printf("%s", line);
        FILE *f = o->metrics ? fopen(o->metrics, "a") : NULL;
        if (o->metrics && !f) st = oar_set_error(OAR_ERR_IO, "train: cannot open %s for the metrics", o->metrics);
        if (f) fputs(line, f), fclose(f);
    }
    for (int k = 0; k < MAX_TABLES; k++) free(tables[k]);
    return st == OAR_OK ? 0 : 1;
}

/* The options of `oar train` that the parameter-server models do not take, refused by name. */
static const char *unsupported(const train_opts *o) {
    return o->resume ? "--resume" : o->checkpoint ? "--checkpoint" : o->mode ? "--mode" : o->amp ? "--amp"
         : o->profile ? "--profile" : o->clip > 0 ? "--clip" : o->label_smoothing > 0 ? "--label-smoothing"
         : o->schedule ? "--schedule" : o->context ? "--context" : o->check_nan_inf ? "--check-nan-inf" : NULL;
}

int train_ps_run(train_opts *o, int argc, char **argv) {
    const char *bad = unsupported(o);
    if (bad) {
        fprintf(stderr, "oar train: %s is not available for --model %s (trained through the parameter server: "
                        "constant lr, no checkpoint; docs/parameter-server.md)\n", bad, o->model);
        return 2;
    }
    int relaunched = train_dist_relaunch(argc, argv, o->nproc);
    if (relaunched >= 0) return relaunched;
    if (oar_dist_init(NULL) != OAR_OK) {
        fprintf(stderr, "oar train: %s\n", oar_last_error());
        return 2;
    }
    int world = oar_dist_world_size(), rank = oar_dist_rank();
    if (o->nproc && o->nproc != world) {
        fprintf(stderr, "oar train: --nproc %d, but the job has %d ranks\n", o->nproc, world);
        return 2;
    }
    /* ranks share 2 cores here: one thread each unless asked */
    if ((o->threads || world > 1) && oar_set_num_threads(o->threads ? o->threads : 1) != OAR_OK) {
        fprintf(stderr, "oar train: %s\n", oar_last_error());
        return 2;
    }
    int servers = world > 1 ? (o->ps_servers ? o->ps_servers : 1) : 0;
    if (rank != servers && !freopen("/dev/null", "w", stdout)) { /* worker 0 reports; errors reach stderr */
        fprintf(stderr, "oar train: cannot silence rank %d\n", rank);
        return 2;
    }
    ps_work w = {.w2v = !strcmp(o->model, "word2vec")};
    int rc = open_data(o, &w) == OAR_OK ? run(o, &w, world) : 1;
    if (rc) fprintf(stderr, "oar train: rank %d: %s\n", rank, oar_last_error());
    oar_ps_free(w.ps);
    oar_dataset_free(w.train);
    oar_dataset_free(w.test);
    if (oar_dist_finalize() != OAR_OK && !rc) {
        fprintf(stderr, "oar train: rank %d: %s\n", rank, oar_last_error());
        rc = 1;
    }
    return rc;
}
