/* Sparse-feature workloads: the data of models whose parameters are mostly embedding rows of
 * which a batch touches few (word2vec, click-through-rate models), as trained by a parameter
 * server, and the ranking metric they report. Included by oar.h. */
#ifndef OAR_SPARSE_H
#define OAR_SPARSE_H

#include "oar.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- skip-gram with negative sampling (word2vec) over a text corpus.
 * Words are runs of ASCII letters, lowercased; words seen fewer than min_count times are
 * dropped from the stream; frequent words are subsampled once, keyed by seed (kept with
 * probability (sqrt(f / t) + 1) t / f for a word of frequency f, t = subsample, as word2vec
 * does; 0 keeps all). Sample i is center position i of the kept stream: input i64
 * [2 + negatives] = (center, context, negative words...) and target f32 [1 + negatives] =
 * (1, 0, ...). The context is drawn uniformly from a window of b words each side, b drawn from
 * 1..window; negatives from the unigram distribution raised to 3/4 — all from the loader's
 * (seed, epoch, i), so every epoch pairs each center with fresh words and any worker makes the
 * same sample. Word ids are ranks by frequency (0: the most frequent). */
typedef struct oar_skipgram_opts {
    int64_t window;     /* 0: 5 */
    int64_t negatives;  /* 0: 5; at most 30 */
    int64_t min_count;  /* 0: 5 */
    double subsample;   /* < 0: 1e-3; 0: none */
    uint64_t seed;      /* the subsampling draw */
} oar_skipgram_opts;
OAR_API oar_dataset *oar_dataset_skipgram(const char *path, const oar_skipgram_opts *opts);
/* The vocabulary of a skip-gram dataset: its size, word id's text (borrowed; NULL when out of
 * range or not a skip-gram dataset), a word's id (-1 when absent) and count in the corpus. */
OAR_API int64_t oar_skipgram_vocab_size(const oar_dataset *d);
OAR_API const char *oar_skipgram_word(const oar_dataset *d, int64_t id);
OAR_API int64_t oar_skipgram_id(const oar_dataset *d, const char *word);
OAR_API int64_t oar_skipgram_count(const oar_dataset *d, int64_t id);

/* ---- a synthetic click log with a planted logistic ground truth (a CTR workload whose best
 * achievable AUC is known). Entry j has `fields` categorical features; field f takes one of
 * about max_cardinality^((f+1)/fields) values (a few for the first field, max_cardinality for
 * the last), drawn from a Zipf law of exponent zipf; its label is 1 with probability
 * sigmoid(bias + sum of the values' weights + sum over field pairs of the values' rank-`rank`
 * embedding dot products), the truth's weights drawn once from seed. Sample i is entry
 * offset + i: input i64 [fields] holds global feature ids (field f's values follow field
 * f - 1's, so one table of oar_clicks_num_ids rows serves every field), target f32 [1] the
 * label. The same seed with another offset gives a test split of the same world. */
typedef struct oar_clicks_opts {
    int64_t fields;           /* 0: 8; at most 26 */
    int64_t max_cardinality;  /* 0: 100000 */
    int64_t size;             /* entries; 0: 1000000 */
    int64_t offset;           /* the first entry */
    int64_t rank;             /* 0: 4; at most 15 */
    double zipf;              /* 0: 1.1 */
    double bias;              /* 0: -1 */
    uint64_t seed;
} oar_clicks_opts;
OAR_API oar_dataset *oar_dataset_clicks(const oar_clicks_opts *opts);
OAR_API int64_t oar_clicks_num_ids(const oar_dataset *d); /* 0 if d is not a click log */
/* The truth's click probability of sample i (NaN when out of range or not a click log): the
 * AUC of these against the labels is the best any model can reach. */
OAR_API double oar_clicks_probability(const oar_dataset *d, int64_t i);

/* ---- area under the ROC curve of scores against 0/1 labels (any float or integer dtypes,
 * n elements each): the probability that a random positive outscores a random negative, ties
 * counting one half (ranks averaged over ties). Fails when the labels are not all 0 or 1 or
 * lack one class. */
OAR_API oar_status oar_auc(oar_tensor *scores, oar_tensor *labels, double *out);

#ifdef __cplusplus
}
#endif
#endif /* OAR_SPARSE_H */
