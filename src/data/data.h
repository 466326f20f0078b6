/* Internal data layer: the dataset interface every reader implements, the whole-file reader,
 * counter-based randomness for shuffling and augmentation, and the transforms. */
#ifndef OAR_DATA_H
#define OAR_DATA_H

#include "tensor/tensor.h"

/* ---- datasets (dataset.c). A reader embeds oar_dataset as its first member. */
typedef struct oar_dataset_vt {
    /* Writes sample i into input/target: contiguous buffers of the sample shapes and dtypes.
     * key is the epoch's sample key (for readers that draw random numbers, e.g. text windows).
     * Must be safe to call from several threads at once and must not allocate per sample. */
    oar_status (*copy)(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target);
    void (*destroy)(oar_dataset *d);
} oar_dataset_vt;

struct oar_dataset {
    const oar_dataset_vt *vt;
    int64_t size;
    oar_dtype in_dtype, tgt_dtype;
    int in_ndim, tgt_ndim;                /* per sample; at most OAR_MAX_DIMS - 1 */
    int64_t in_shape[OAR_MAX_DIMS], tgt_shape[OAR_MAX_DIMS];
    int64_t in_numel, tgt_numel;
    size_t in_bytes, tgt_bytes;           /* one sample */
};

/* Fills the sample layout fields from dtypes and shapes; checks the dims fit a batch. */
oar_status oar_dataset_init(oar_dataset *d, const oar_dataset_vt *vt, int64_t size,
                            oar_dtype in_dt, const int64_t *in_shape, int in_ndim,
                            oar_dtype tgt_dt, const int64_t *tgt_shape, int tgt_ndim);

/* ---- whole-file reader (bytes.c): gzip (by its magic bytes) is inflated through zlib. */
typedef struct oar_bytes {
    uint8_t *data;  /* size bytes plus a terminating 0, so text parsers may use C strings */
    size_t size;
} oar_bytes;
/* what names the caller in messages ("idx", "csv", ...). */
oar_status oar_read_file(const char *what, const char *path, oar_bytes *out);
void oar_bytes_free(oar_bytes *b);

/* ---- counter-based randomness (sample_rng.c): everything is a pure function of
 * (seed, epoch, index), so results never depend on threads or timing. */
typedef struct oar_epoch_keys {
    uint64_t shuffle;  /* keys the epoch's permutation */
    uint64_t sample;   /* keys per-sample draws: dataset (slot 0) and transforms (slot 1 + t) */
} oar_epoch_keys;
#define OAR_DATA_MAX_SLOTS 16
oar_epoch_keys oar_data_epoch_keys(uint64_t seed, int64_t epoch);
/* Uniform integer in [0, n) for (sample i, slot) under an epoch's sample key. */
uint64_t oar_data_draw(uint64_t key, int64_t i, int slot, int word, uint64_t n);
/* Uniform double in [0, 1) for (sample i, slot). */
double oar_data_uniform(uint64_t key, int64_t i, int slot);
/* perm <- a permutation of [0, n) (Fisher–Yates keyed by the shuffle key). */
void oar_data_permutation(uint64_t key, int64_t *perm, int64_t n);

/* ---- transforms (transform.c) */
/* Checks each transform against the dataset's input samples (f32, fitting dims). */
oar_status oar_transforms_check(const oar_transform *tf, int n, const oar_dataset *d);
/* Applies the transforms in order to one f32 input sample in place. scratch holds one sample;
 * key/i select the sample's random draws. */
void oar_transforms_apply(const oar_transform *tf, int n, const oar_dataset *d, float *x,
                          float *scratch, uint64_t key, int64_t i);

#endif
