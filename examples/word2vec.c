/* Trains word2vec (skip-gram with negative sampling) on Jane Austen's novels, eagerly, with
 * Adagrad on the two embedding tables, and prints the nearest words (cosine) to a few queries.
 * The sparse-embedding workload a parameter server trains; here in one process.
 * Data: ../shared/data/text/austen.txt (or $OAR_SHARED_DIR/data/text/austen.txt).
 *
 *   example_word2vec [--steps N] [--dim D] [--batch B] [--lr X] [--seed S]
 * Exits 1 when the loss does not fall, or a query's neighbours share nothing with what the
 * corpus makes them (given enough steps); 77 when the corpus is absent. */
#include "oar.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sgns {
    oar_tensor *in, *out; /* [V, D] center and context vectors */
} sgns;

/* Logits of (center, context, negatives...) rows: dot products of the center's vector with each
 * of the others' output vectors. x is i64 [B, 2 + K]; the result f32 [B, 1 + K]. */
static oar_tensor *sgns_logits(const sgns *m, oar_tensor *x) {
    int64_t w = oar_shape(x)[1];
    oar_tensor *center = oar_embedding(m->in, oar_slice(x, 1, 0, 1, 1));  /* [B, 1, D] */
    oar_tensor *others = oar_embedding(m->out, oar_slice(x, 1, 1, w, 1)); /* [B, 1 + K, D] */
    int last = -1;
    return oar_sum(oar_mul(others, center), &last, 1, false);
}

/* The k words nearest to word id q by cosine of the center vectors (excluding q). */
static void nearest(oar_dataset *d, const float *e, int64_t v, int64_t dim, int64_t q, int k, int64_t *best) {
    double *score = malloc(sizeof(double) * (size_t)v);
    const float *a = e + q * dim;
    for (int64_t i = 0; i < v; i++) {
        double dot = 0, na = 0, nb = 0;
        for (int64_t j = 0; j < dim; j++) {
            dot += (double)a[j] * e[i * dim + j];
            na += (double)a[j] * a[j];
            nb += (double)e[i * dim + j] * e[i * dim + j];
        }
        score[i] = i == q ? -2 : dot / (sqrt(na * nb) + 1e-12);
    }
    for (int r = 0; r < k; r++) {
        int64_t arg = 0;
        for (int64_t i = 1; i < v; i++)
            if (score[i] > score[arg]) arg = i;
        best[r] = arg;
        score[arg] = -3;
    }
    (void)d;
    free(score);
}

int main(int argc, char **argv) {
    int64_t steps = 3000, dim = 64, batch = 512;
    double lr = 0.2;
    uint64_t seed = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--steps")) steps = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--dim")) dim = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--lr")) lr = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed")) seed = (uint64_t)atoll(argv[i + 1]);
        else {
            fprintf(stderr, "example_word2vec: unknown flag %s; expected --steps --dim --batch --lr --seed\n", argv[i]);
            return 2;
        }
    }
    const char *shared = getenv("OAR_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/text/austen.txt", shared ? shared : "../shared");
    oar_skipgram_opts so = {.seed = seed};
    oar_dataset *d = oar_dataset_skipgram(path, &so);
    if (!d) {
        printf("example_word2vec: skipped: %s\n", oar_last_error());
        return 77;
    }
    int64_t v = oar_skipgram_vocab_size(d);
    printf("word2vec on %s: %lld words, %lld centers, dim %lld, batch %lld, Adagrad lr %g, %lld steps\n", path,
           (long long)v, (long long)oar_dataset_size(d), (long long)dim, (long long)batch, lr, (long long)steps);
    oar_manual_seed(seed);
    sgns m;
    /* word2vec's initialisation: centers uniform in +-0.5/dim, contexts zero */
    oar_scope_begin();
    m.in = oar_keep(oar_mul_scalar(oar_sub_scalar(oar_rand((int64_t[]){v, dim}, 2, OAR_F32), 0.5), 1.0 / (double)dim));
    oar_scope_end();
    m.out = oar_zeros((int64_t[]){v, dim}, 2, OAR_F32);
    oar_set_requires_grad(m.in, true);
    oar_set_requires_grad(m.out, true);
    oar_optim_opts oo = oar_optim_defaults(OAR_OPTIM_ADAGRAD);
    oo.lr = lr;
    oar_tensor *params[2] = {m.in, m.out};
    oar_optimizer *opt = oar_optimizer_new(params, 2, &oo);
    oar_loader_opts lo = {.batch_size = batch, .shuffle = true, .drop_last = true, .seed = seed};
    oar_loader *l = oar_loader_new(d, &lo);
    double first = 0, last = 0;
    int64_t window = steps / 10 > 0 ? steps / 10 : 1, n_first = 0, n_last = 0;
    oar_status st = OAR_OK;
    for (int64_t step = 0, epoch = 0; step < steps && st == OAR_OK; epoch++) {
        if ((st = oar_loader_start_epoch(l, epoch)) != OAR_OK) break;
        oar_tensor *x, *y;
        while (step < steps && oar_loader_next(l, &x, &y, &st)) {
            oar_scope_begin();
            oar_optimizer_zero_grad(opt);
            oar_tensor *loss = oar_bce_with_logits(sgns_logits(&m, x), y, OAR_REDUCE_MEAN);
            double lv = 0;
            if (!loss || (st = oar_backward(loss, NULL, false)) != OAR_OK || (st = oar_optimizer_step(opt)) != OAR_OK ||
                (st = oar_item(loss, &lv)) != OAR_OK) {
                if (st == OAR_OK) st = oar_last_status();
            }
            oar_scope_end();
            oar_release(x);
            oar_release(y);
            if (step < window) first += lv, n_first++;
            if (step >= steps - window) last += lv, n_last++;
            if (++step % (steps / 5 > 0 ? steps / 5 : 1) == 0)
                printf("  step %lld  loss %.4f\n", (long long)step, lv);
        }
    }
    if (st != OAR_OK) {
        fprintf(stderr, "example_word2vec: %s\n", oar_last_error());
        return 1;
    }
    first /= (double)n_first;
    last /= (double)n_last;
    printf("mean loss: first %lld steps %.4f, last %lld steps %.4f\n", (long long)n_first, first, (long long)n_last, last);
    int rc = last < first ? 0 : 1;
    if (rc) fprintf(stderr, "example_word2vec: the loss did not fall\n");

    float *e = malloc(sizeof(float) * (size_t)(v * dim));
    oar_copy_to_buffer(m.in, e, sizeof(float) * (size_t)(v * dim), OAR_F32);
    /* each query with words its neighbours should include after a few thousand steps */
    static const char *queries[][4] = {{"she", "he", "her", "him"}, {"elinor", "marianne", "edward", "jane"},
                                       {"sister", "mother", "brother", "daughter"}, {"day", "morning", "evening", "night"}};
    for (size_t qi = 0; qi < sizeof queries / sizeof queries[0]; qi++) {
        int64_t q = oar_skipgram_id(d, queries[qi][0]), best[8];
        if (q < 0) continue;
        nearest(d, e, v, dim, q, 8, best);
        printf("  %-8s ->", queries[qi][0]);
        bool hit = false;
        for (int r = 0; r < 8; r++) {
            const char *w = oar_skipgram_word(d, best[r]);
            printf(" %s", w);
            for (int k = 1; k < 4; k++) hit |= !strcmp(w, queries[qi][k]);
        }
        printf("%s\n", hit ? "" : "   (none of the expected neighbours)");
        if (!hit && steps >= 2000) rc = 1;
    }
    free(e);
    oar_loader_free(l);
    oar_optimizer_free(opt);
    oar_release(m.in);
    oar_release(m.out);
    oar_dataset_free(d);
    return rc;
}
