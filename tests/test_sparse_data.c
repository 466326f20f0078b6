/* The sparse-feature workloads' data (include/oar/sparse.h): the skip-gram dataset's
 * vocabulary, windows and negative-sampling law; the click log's determinism, id ranges and
 * calibrated labels; AUC against its definition (all pairs, ties one half); bad input. */
#include "test_util.h"

#include <math.h>
#include <unistd.h>

static const char *CORPUS =
    "The cat sat on the mat. The dog sat on the log! A cat, a dog; the end.\n"
    "THE cat's mat -- the dog's log. the the the";

static char corpus_path[256];

static void write_corpus(void) {
    snprintf(corpus_path, sizeof corpus_path, "/tmp/oar_test_sparse_%d.txt", (int)getpid());
    FILE *f = fopen(corpus_path, "w");
    fputs(CORPUS, f);
    fclose(f);
}

/* The samples of one loader epoch, as i64 inputs [n, 2 + K]. */
static int64_t *epoch_inputs(oar_dataset *d, int64_t epoch, int64_t *n, int64_t *width) {
    oar_loader_opts lo = {.batch_size = oar_dataset_size(d), .seed = 7};
    oar_loader *l = oar_loader_new(d, &lo);
    oar_tensor *x = NULL, *y = NULL;
    CHECK(oar_loader_start_epoch(l, epoch) == OAR_OK);
    CHECK(oar_loader_next(l, &x, &y, NULL));
    *n = oar_shape(x)[0];
    *width = oar_shape(x)[1];
    int64_t *buf = malloc(sizeof(int64_t) * (size_t)oar_numel(x));
    oar_copy_to_buffer(x, buf, sizeof(int64_t) * (size_t)oar_numel(x), OAR_I64);
    CHECK(t_at(y, 0) == 1.0 && t_at(y, 1) == 0.0);
    oar_release(x);
    oar_release(y);
    oar_loader_free(l);
    return buf;
}

static void test_skipgram_small(void) {
    write_corpus();
    oar_skipgram_opts o = {.window = 2, .negatives = 3, .min_count = 2, .subsample = 0};
    oar_dataset *d = oar_dataset_skipgram(corpus_path, &o);
    CHECK(d != NULL);
    if (!d) return;
    /* words seen twice or more, by falling count: the (10), then cat/dog/log/mat/on/sat... */
    CHECK(!strcmp(oar_skipgram_word(d, 0), "the") && oar_skipgram_count(d, 0) == 10);
    CHECK(oar_skipgram_id(d, "the") == 0 && oar_skipgram_id(d, "end") == -1); /* "end" is seen once */
    int64_t v = oar_skipgram_vocab_size(d);
    for (int64_t id = 1; id < v; id++) CHECK(oar_skipgram_count(d, id) <= oar_skipgram_count(d, id - 1));
    int64_t kept = 0;
    for (int64_t id = 0; id < v; id++) kept += oar_skipgram_count(d, id);
    CHECK(oar_dataset_size(d) == kept); /* no subsampling: every kept occurrence is a center */

    int64_t n, w;
    int64_t *a = epoch_inputs(d, 0, &n, &w), *b = epoch_inputs(d, 0, &n, &w), *c = epoch_inputs(d, 1, &n, &w);
    CHECK(w == 2 + 3);
    CHECK(!memcmp(a, b, sizeof(int64_t) * (size_t)(n * w))); /* the same epoch, the same samples */
    CHECK(memcmp(a, c, sizeof(int64_t) * (size_t)(n * w)) != 0); /* another epoch, fresh draws */
    for (int64_t i = 0; i < n * w; i++) CHECK(a[i] >= 0 && a[i] < v);
    free(a), free(b), free(c);
    oar_dataset_free(d);
}

/* Austen's novels: a vocabulary of the expected size led by function words, and negatives that
 * follow count^0.75 (the four most frequent words' draws within 5 sd over 1.2M draws). */
static void test_skipgram_laws(const char *path) {
    oar_skipgram_opts o = {.window = 3, .negatives = 6, .min_count = 5, .subsample = 0};
    oar_dataset *d = oar_dataset_skipgram(path, &o);
    CHECK(d != NULL);
    if (!d) return;
    int64_t v = oar_skipgram_vocab_size(d);
    printf("  austen: %lld words in the vocabulary, %lld centers; most frequent: %s %s %s\n", (long long)v,
           (long long)oar_dataset_size(d), oar_skipgram_word(d, 0), oar_skipgram_word(d, 1), oar_skipgram_word(d, 2));
    CHECK(!strcmp(oar_skipgram_word(d, 0), "the") || !strcmp(oar_skipgram_word(d, 0), "to"));
    CHECK(v > 5000 && v < 20000);
    double z = 0;
    for (int64_t id = 0; id < v; id++) z += pow((double)oar_skipgram_count(d, id), 0.75);
    int64_t n = 200000, hits[4] = {0}, total = 0;
    oar_tensor *x = NULL, *y = NULL;
    for (int64_t i = 0; i < n; i++) {
        CHECK(oar_dataset_get(d, i, &x, &y) == OAR_OK);
        int64_t s[8];
        oar_copy_to_buffer(x, s, sizeof s, OAR_I64);
        for (int k = 0; k < 6; k++, total++)
            if (s[2 + k] < 4) hits[s[2 + k]]++;
        oar_release(x);
        oar_release(y);
    }
    for (int id = 0; id < 4; id++) {
        double p = pow((double)oar_skipgram_count(d, id), 0.75) / z, want = p * (double)total;
        double sd = sqrt(want * (1 - p));
        CHECK(fabs((double)hits[id] - want) < 5 * sd);
        if (fabs((double)hits[id] - want) >= 5 * sd)
            printf("  negative %s drawn %lld times, expected %.0f +- %.0f\n", oar_skipgram_word(d, id),
                   (long long)hits[id], want, sd);
    }
    oar_dataset_free(d);
}

static void test_skipgram_errors(void) {
    write_corpus();
    oar_skipgram_opts o = {.negatives = 31};
    CHECK(oar_dataset_skipgram(corpus_path, &o) == NULL);
    CHECK(strstr(oar_last_error(), "negatives") != NULL);
    o = (oar_skipgram_opts){.min_count = 100};
    CHECK(oar_dataset_skipgram(corpus_path, &o) == NULL);
    CHECK(strstr(oar_last_error(), "smaller min_count") != NULL);
    CHECK(oar_dataset_skipgram("/nonexistent/corpus.txt", NULL) == NULL);
    CHECK(strstr(oar_last_error(), "/nonexistent/corpus.txt") != NULL);
    CHECK(oar_skipgram_vocab_size(NULL) == 0 && oar_skipgram_word(NULL, 0) == NULL);
    remove(corpus_path);
}

static void test_clicks(void) {
    oar_clicks_opts o = {.fields = 6, .max_cardinality = 1000, .size = 20000, .seed = 11};
    oar_dataset *d = oar_dataset_clicks(&o);
    CHECK(d != NULL);
    if (!d) return;
    oar_tensor *x = NULL, *y = NULL, *x2 = NULL, *y2 = NULL;
    CHECK(oar_dataset_to_tensors(d, &x, &y) == OAR_OK);
    CHECK(oar_dataset_to_tensors(d, &x2, &y2) == OAR_OK);
    CHECK(t_same_bits(x, x2) && t_same_bits(y, y2));
    int64_t ids = oar_clicks_num_ids(d), n = oar_shape(x)[0];
    CHECK(ids > 1000 && ids < 6 * 1000);
    int64_t *xb = malloc(sizeof(int64_t) * (size_t)(n * 6));
    oar_copy_to_buffer(x, xb, sizeof(int64_t) * (size_t)(n * 6), OAR_I64);
    bool in_range = true, fields_ordered = true;
    for (int64_t i = 0; i < n; i++)
        for (int f = 0; f < 6; f++) {
            in_range &= xb[i * 6 + f] >= 0 && xb[i * 6 + f] < ids;
            if (f) fields_ordered &= xb[i * 6 + f] > xb[i * 6 + f - 1]; /* field f's ids follow field f-1's */
        }
    CHECK(in_range && fields_ordered);
    /* labels are calibrated to the truth: their mean is the mean probability, within 5 sd */
    double *pb = malloc(sizeof(double) * (size_t)n), mean_p = 0, mean_y = 0, var = 0;
    for (int64_t i = 0; i < n; i++) {
        pb[i] = oar_clicks_probability(d, i);
        CHECK(pb[i] > 0 && pb[i] < 1);
        mean_p += pb[i];
        var += pb[i] * (1 - pb[i]);
    }
    oar_tensor *p = oar_from_data(pb, (int64_t[]){n}, 1, OAR_F64);
    for (int64_t i = 0; i < n; i++) mean_y += t_at(y, i);
    CHECK(fabs(mean_y - mean_p) < 5 * sqrt(var));
    double best = 0;
    CHECK(oar_auc(p, y, &best) == OAR_OK);
    printf("  click log: %lld ids, click rate %.3f (truth %.3f), best achievable AUC %.4f\n", (long long)ids,
           mean_y / (double)n, mean_p / (double)n, best);
    CHECK(best > 0.65 && best < 0.95);
    /* another offset of the same seed: other entries of the same world */
    oar_clicks_opts t = o;
    t.offset = o.size;
    oar_dataset *test = oar_dataset_clicks(&t);
    CHECK(oar_clicks_num_ids(test) == ids);
    CHECK(isnan(oar_clicks_probability(test, n)) && isnan(oar_clicks_probability(NULL, 0)));
    o.rank = 16;
    CHECK(oar_dataset_clicks(&o) == NULL);
    CHECK(strstr(oar_last_error(), "rank") != NULL);
    oar_dataset_free(test);
    free(xb), free(pb);
    oar_release(x), oar_release(y), oar_release(x2), oar_release(y2), oar_release(p);
    oar_dataset_free(d);
}

/* AUC's definition: over all (positive, negative) pairs, 1 when the positive scores higher,
 * one half on a tie. */
static double auc_by_pairs(const float *s, const float *l, int n) {
    double wins = 0, pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (l[i] == 1 && l[j] == 0) pairs++, wins += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
    return wins / pairs;
}

static void test_auc(void) {
    oar_manual_seed(2);
    for (int trial = 0; trial < 20; trial++) {
        int n = 5 + trial * 7;
        float s[200], l[200];
        for (int i = 0; i < n; i++) {
            s[i] = (float)((i * 7919 + trial * 31) % 13) / 4; /* many ties */
            l[i] = (float)(((i * 2654435761u + (unsigned)trial) >> 7) & 1);
        }
        l[0] = 0, l[1] = 1;
        oar_tensor *st = oar_from_data(s, (int64_t[]){n}, 1, OAR_F32), *lt = oar_from_data(l, (int64_t[]){n}, 1, OAR_F32);
        double got = -1;
        CHECK(oar_auc(st, lt, &got) == OAR_OK);
        CHECK_NEAR(got, auc_by_pairs(s, l, n), 1e-12);
        oar_release(st), oar_release(lt);
    }
    float s[4] = {0.1f, 0.2f, 0.3f, 0.4f}, l[4] = {0, 0, 1, 1}, bad[4] = {0, 2, 1, 1}, one[4] = {1, 1, 1, 1};
    oar_tensor *st = oar_from_data(s, (int64_t[]){4}, 1, OAR_F32), *lt = oar_from_data(l, (int64_t[]){4}, 1, OAR_F32);
    double a = 0;
    CHECK(oar_auc(st, lt, &a) == OAR_OK && a == 1.0);
    oar_tensor *neg = oar_neg(st);
    CHECK(oar_auc(neg, lt, &a) == OAR_OK && a == 0.0);
    oar_tensor *bt = oar_from_data(bad, (int64_t[]){4}, 1, OAR_F32), *ot = oar_from_data(one, (int64_t[]){4}, 1, OAR_F32);
    CHECK_ERR(oar_auc(st, bt, &a), "labels 0 or 1, got 2");
    CHECK_ERR(oar_auc(st, ot, &a), "both classes");
    oar_tensor *short_l = oar_from_data(l, (int64_t[]){3}, 1, OAR_F32);
    CHECK_ERR(oar_auc(st, short_l, &a), "as many labels as scores");
    CHECK_ERR(oar_auc(NULL, lt, &a), "got NULL");
    oar_release(st), oar_release(lt), oar_release(neg), oar_release(bt), oar_release(ot), oar_release(short_l);
}

int main(void) {
    test_skipgram_small();
    test_skipgram_errors();
    test_clicks();
    test_auc();
    const char *shared = getenv("OAR_SHARED_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/data/text/austen.txt", shared ? shared : "../shared");
    FILE *f = fopen(path, "r");
    if (f) {
        fclose(f);
        test_skipgram_laws(path);
    } else {
        printf("  skipping the Austen checks: %s not found (../shared is absent)\n", path);
    }
    return test_summary("test_sparse_data");
}
