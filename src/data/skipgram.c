/* Skip-gram with negative sampling over a text corpus (the word2vec workload, see
 * include/oar/sparse.h). Built once: the vocabulary (ids by falling count), the word stream
 * with rare words dropped and frequent ones subsampled, and the cumulative unigram^0.75 table
 * the negatives are drawn from by binary search. A sample only draws numbers: the window, the
 * context position and the negatives come from (epoch key, i), one slot per two draws (the
 * input is i64, so no transform ever uses the other slots). */
#include "data/data.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SG_MAX_NEGATIVES (2 * (OAR_DATA_MAX_SLOTS - 1))

typedef struct sg_word {
    char *text;
    int64_t count;
} sg_word;

typedef struct skipgram_dataset {
    oar_dataset base;
    int64_t window, negatives;
    sg_word *vocab;       /* by id: falling count, then text */
    int64_t n_vocab;
    int32_t *stream;      /* the kept words' ids */
    int64_t n_stream;
    double *unigram_cdf;  /* cumulative count^0.75, normalised to end at 1 */
    char *text_store;     /* the vocabulary's text, one block */
} skipgram_dataset;

/* ---- counting words: an open-addressing table from word text to count */
typedef struct word_table {
    const char **key;
    size_t *len;
    int64_t *count;
    size_t cap, n;
} word_table;

static uint64_t hash_word(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)tolower((unsigned char)s[i])) * 1099511628211ull;
    return h;
}

static bool same_word(const char *a, size_t na, const char *b, size_t nb) {
    if (na != nb) return false;
    for (size_t i = 0; i < na; i++)
        if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i])) return false;
    return true;
}

static bool table_grow(word_table *t) {
    word_table g = {0};
    g.cap = t->cap ? t->cap * 2 : 1 << 14;
    g.key = calloc(g.cap, sizeof *g.key);
    g.len = calloc(g.cap, sizeof *g.len);
    g.count = calloc(g.cap, sizeof *g.count);
    if (!g.key || !g.len || !g.count) {
        free(g.key), free(g.len), free(g.count);
        return false;
    }
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->key[i]) continue;
        size_t at = hash_word(t->key[i], t->len[i]) & (g.cap - 1);
        while (g.key[at]) at = (at + 1) & (g.cap - 1);
        g.key[at] = t->key[i], g.len[at] = t->len[i], g.count[at] = t->count[i];
        g.n++;
    }
    free(t->key), free(t->len), free(t->count);
    *t = g;
    return true;
}

/* The slot of word s (made with count 0 if new); SIZE_MAX when out of memory. */
static size_t table_slot(word_table *t, const char *s, size_t n) {
    if ((t->n + 1) * 2 > t->cap && !table_grow(t)) return SIZE_MAX;
    size_t at = hash_word(s, n) & (t->cap - 1);
    while (t->key[at] && !same_word(t->key[at], t->len[at], s, n)) at = (at + 1) & (t->cap - 1);
    if (!t->key[at]) {
        t->key[at] = s, t->len[at] = n;
        t->n++;
    }
    return at;
}

/* The slot holding word s; SIZE_MAX when absent. */
static size_t table_find(const word_table *t, const char *s, size_t n) {
    size_t at = hash_word(s, n) & (t->cap - 1);
    while (t->key[at] && !same_word(t->key[at], t->len[at], s, n)) at = (at + 1) & (t->cap - 1);
    return t->key[at] ? at : SIZE_MAX;
}

static void table_free(word_table *t) { free(t->key), free(t->len), free(t->count); }

/* The next word at or after *p: its start and length; false at the end. */
static bool next_word(const char **p, const char *end, const char **w, size_t *n) {
    const char *s = *p;
    while (s < end && !isalpha((unsigned char)*s)) s++;
    if (s == end) return false;
    const char *e = s;
    while (e < end && isalpha((unsigned char)*e)) e++;
    *w = s, *n = (size_t)(e - s), *p = e;
    return true;
}

static int by_count_then_text(const void *a, const void *b) {
    const sg_word *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->text, y->text);
}

/* ---- the dataset */
static int64_t draw_negative(const skipgram_dataset *s, uint64_t key, int64_t i, int k) {
    /* 53 random bits as a uniform in [0, 1), then the first id whose cumulative weight passes it */
    double u = (double)oar_data_draw(key, i, 1 + k / 2, k % 2, 1ull << 53) / 9007199254740992.0;
    int64_t lo = 0, hi = s->n_vocab - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (s->unigram_cdf[mid] > u) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

static oar_status sg_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const skipgram_dataset *s = (const skipgram_dataset *)d;
    int64_t b = 1 + (int64_t)oar_data_draw(key, i, 0, 0, (uint64_t)s->window);
    int64_t lo = i - b < 0 ? 0 : i - b, hi = i + b >= s->n_stream ? s->n_stream - 1 : i + b;
    /* a position in [lo, hi] other than i: draw among hi - lo of them and step over i */
    int64_t at = lo + (int64_t)oar_data_draw(key, i, 0, 1, (uint64_t)(hi - lo));
    if (at >= i) at++;
    int64_t *x = input;
    float *y = target;
    x[0] = s->stream[i];
    x[1] = s->stream[at];
    y[0] = 1.0f;
    for (int k = 0; k < s->negatives; k++) {
        x[2 + k] = draw_negative(s, key, i, k);
        y[1 + k] = 0.0f;
    }
    return OAR_OK;
}

static void sg_destroy(oar_dataset *d) {
    skipgram_dataset *s = (skipgram_dataset *)d;
    free(s->vocab);
    free(s->text_store);
    free(s->stream);
    free(s->unigram_cdf);
    free(s);
}

static const oar_dataset_vt skipgram_vt = {sg_copy, sg_destroy};

static oar_status resolve(const oar_skipgram_opts *o, oar_skipgram_opts *r) {
    *r = o ? *o : (oar_skipgram_opts){.subsample = -1};
    if (!r->window) r->window = 5;
    if (!r->negatives) r->negatives = 5;
    if (!r->min_count) r->min_count = 5;
    if (r->subsample < 0) r->subsample = 1e-3;
    if (r->window < 1 || r->negatives < 1 || r->negatives > SG_MAX_NEGATIVES || r->min_count < 1 ||
        !(r->subsample >= 0 && r->subsample < 1))
        return oar_error(OAR_ERR_INVALID_ARG,
                         "dataset_skipgram: expected window >= 1, 1 <= negatives <= %d, min_count >= 1 and "
                         "0 <= subsample < 1, got window %lld, negatives %lld, min_count %lld, subsample %g",
                         SG_MAX_NEGATIVES, (long long)r->window, (long long)r->negatives, (long long)r->min_count,
                         r->subsample);
    return OAR_OK;
}

/* The vocabulary: words with at least min_count occurrences, by falling count. */
static oar_status build_vocab(skipgram_dataset *s, word_table *t, int64_t min_count, int64_t **id_of_slot) {
    int64_t n = 0;
    size_t text_bytes = 0;
    for (size_t k = 0; k < t->cap; k++)
        if (t->key[k] && t->count[k] >= min_count) n++, text_bytes += t->len[k] + 1;
    s->vocab = calloc((size_t)(n ? n : 1), sizeof *s->vocab);
    s->text_store = malloc(text_bytes ? text_bytes : 1);
    *id_of_slot = malloc(sizeof(int64_t) * t->cap);
    if (!s->vocab || !s->text_store || !*id_of_slot) return oar_error(OAR_ERR_OOM, "dataset_skipgram: out of memory");
    char *w = s->text_store;
    n = 0;
    for (size_t k = 0; k < t->cap; k++) {
        if (!t->key[k] || t->count[k] < min_count) continue;
        for (size_t c = 0; c < t->len[k]; c++) w[c] = (char)tolower((unsigned char)t->key[k][c]);
        w[t->len[k]] = '\0';
        s->vocab[n++] = (sg_word){w, t->count[k]};
        w += t->len[k] + 1;
    }
    qsort(s->vocab, (size_t)n, sizeof *s->vocab, by_count_then_text);
    s->n_vocab = n;
    /* each table slot's id, through the sorted order (the text pointers are unique) */
    for (size_t k = 0; k < t->cap; k++) (*id_of_slot)[k] = -1;
    for (int64_t id = 0; id < n; id++) {
        (*id_of_slot)[table_find(t, s->vocab[id].text, strlen(s->vocab[id].text))] = id;
    }
    return OAR_OK;
}

oar_dataset *oar_dataset_skipgram(const char *path, const oar_skipgram_opts *opts) {
    oar_skipgram_opts o;
    if (resolve(opts, &o) != OAR_OK) return NULL;
    skipgram_dataset *s = OAR_NEW(skipgram_dataset);
    if (!s) return NULL;
    s->window = o.window;
    s->negatives = o.negatives;
    oar_bytes bytes = {0};
    word_table t = {0};
    int64_t *id_of_slot = NULL;
    oar_status st = oar_read_file("skipgram", path, &bytes);
    const char *begin = (const char *)bytes.data, *end = begin + bytes.size, *p, *w;
    size_t n;
    for (p = begin; st == OAR_OK && next_word(&p, end, &w, &n);) {
        size_t at = table_slot(&t, w, n);
        if (at == SIZE_MAX) st = oar_error(OAR_ERR_OOM, "dataset_skipgram: out of memory counting words");
        else t.count[at]++;
    }
    if (st == OAR_OK) st = build_vocab(s, &t, o.min_count, &id_of_slot);
    if (st == OAR_OK && s->n_vocab < 2)
        st = oar_error(OAR_ERR_FORMAT, "skipgram: '%s' has %lld distinct words seen at least %lld times; expected at "
                       "least 2 (a smaller min_count, or a larger corpus)", path, (long long)s->n_vocab,
                       (long long)o.min_count);
    int64_t kept_total = 0;
    for (int64_t id = 0; st == OAR_OK && id < s->n_vocab; id++) kept_total += s->vocab[id].count;
    /* the stream, subsampled once: word occurrence j is kept with word2vec's probability */
    if (st == OAR_OK && !(s->stream = malloc(sizeof(int32_t) * (size_t)kept_total)))
        st = oar_error(OAR_ERR_OOM, "dataset_skipgram: out of memory for %lld words", (long long)kept_total);
    oar_epoch_keys keys = oar_data_epoch_keys(o.seed, 0);
    int64_t j = 0;
    for (p = begin; st == OAR_OK && next_word(&p, end, &w, &n); j++) {
        int64_t id = id_of_slot[table_find(&t, w, n)];
        if (id < 0) continue;
        if (o.subsample > 0) {
            double f = (double)s->vocab[id].count / (double)kept_total;
            double keep = (sqrt(f / o.subsample) + 1) * o.subsample / f;
            if (keep < 1 && oar_data_uniform(keys.sample, j, 0) >= keep) continue;
        }
        s->stream[s->n_stream++] = (int32_t)id;
    }
    if (st == OAR_OK && s->n_stream < 2)
        st = oar_error(OAR_ERR_FORMAT, "skipgram: '%s' keeps %lld words after subsampling; expected at least 2",
                       path, (long long)s->n_stream);
    if (st == OAR_OK && !(s->unigram_cdf = malloc(sizeof(double) * (size_t)s->n_vocab)))
        st = oar_error(OAR_ERR_OOM, "dataset_skipgram: out of memory");
    double acc = 0;
    for (int64_t id = 0; st == OAR_OK && id < s->n_vocab; id++)
        s->unigram_cdf[id] = acc += pow((double)s->vocab[id].count, 0.75);
    for (int64_t id = 0; st == OAR_OK && id < s->n_vocab; id++) s->unigram_cdf[id] /= acc;
    if (st == OAR_OK) s->unigram_cdf[s->n_vocab - 1] = 1.0; /* no draw may pass the end by rounding */
    int64_t in_shape[1] = {2 + o.negatives}, tgt_shape[1] = {1 + o.negatives};
    if (st == OAR_OK)
        st = oar_dataset_init(&s->base, &skipgram_vt, s->n_stream, OAR_I64, in_shape, 1, OAR_F32, tgt_shape, 1);
    table_free(&t);
    free(id_of_slot);
    oar_bytes_free(&bytes);
    if (st != OAR_OK) {
        sg_destroy(&s->base);
        return NULL;
    }
    return &s->base;
}

static const skipgram_dataset *as_skipgram(const oar_dataset *d) {
    return d && d->vt == &skipgram_vt ? (const skipgram_dataset *)d : NULL;
}

int64_t oar_skipgram_vocab_size(const oar_dataset *d) {
    const skipgram_dataset *s = as_skipgram(d);
    return s ? s->n_vocab : 0;
}

const char *oar_skipgram_word(const oar_dataset *d, int64_t id) {
    const skipgram_dataset *s = as_skipgram(d);
    return s && id >= 0 && id < s->n_vocab ? s->vocab[id].text : NULL;
}

int64_t oar_skipgram_count(const oar_dataset *d, int64_t id) {
    const skipgram_dataset *s = as_skipgram(d);
    return s && id >= 0 && id < s->n_vocab ? s->vocab[id].count : 0;
}

int64_t oar_skipgram_id(const oar_dataset *d, const char *word) {
    const skipgram_dataset *s = as_skipgram(d);
    for (int64_t id = 0; s && word && id < s->n_vocab; id++)
        if (!strcmp(s->vocab[id].text, word)) return id;
    return -1;
}
