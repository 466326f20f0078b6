/* A byte corpus for language models. Sample i is T consecutive bytes as i64 token ids and the
 * target is the same window one byte later. Sequential windows tile the corpus; random windows
 * start at an offset drawn from (seed, epoch, i), so every epoch sees fresh windows and any
 * worker computes the same one. The epoch has as many windows either way. */
#include "data/data.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct text_dataset {
    oar_dataset base;
    oar_bytes bytes;
    int64_t lo, n;  /* the byte range [lo, lo + n) this dataset draws from */
    int64_t T;
    bool random_windows;
} text_dataset;

static oar_status text_copy(const oar_dataset *d, int64_t i, uint64_t key, void *input, void *target) {
    const text_dataset *s = (const text_dataset *)d;
    int64_t T = s->T;
    /* valid starts are [lo, lo + n - T - 1]: the target needs one byte past the window */
    int64_t start = s->lo + (s->random_windows ? (int64_t)oar_data_draw(key, i, 0, 0, (uint64_t)(s->n - T)) : i * T);
    const uint8_t *p = s->bytes.data + start;
    int64_t *x = input, *y = target;
    for (int64_t k = 0; k < T; k++) {
        x[k] = p[k];
        y[k] = p[k + 1];
    }
    return OAR_OK;
}

static void text_destroy(oar_dataset *d) {
    text_dataset *s = (text_dataset *)d;
    oar_bytes_free(&s->bytes);
    free(s);
}

static const oar_dataset_vt text_vt = {text_copy, text_destroy};

oar_dataset *oar_dataset_text_range(const char *path, int64_t T, bool random_windows, double begin, double end) {
    if (T < 1) {
        oar_error(OAR_ERR_INVALID_ARG, "dataset_text: expected a window length T >= 1, got %lld",
                  (long long)T);
        return NULL;
    }
    if (!(begin >= 0 && begin < end && end <= 1)) {
        oar_error(OAR_ERR_INVALID_ARG, "dataset_text: expected 0 <= begin < end <= 1, got begin=%g end=%g", begin, end);
        return NULL;
    }
    text_dataset *s = OAR_NEW(text_dataset);
    if (!s) return NULL;
    s->T = T;
    s->random_windows = random_windows;
    oar_status st = oar_read_file("text", path, &s->bytes);
    int64_t size = (int64_t)s->bytes.size;
    s->lo = (int64_t)(begin * (double)size);
    s->n = (int64_t)(end * (double)size) - s->lo;
    if (st == OAR_OK && s->n < T + 1)
    {
        char range[64] = "";
        if (begin > 0 || end < 1) snprintf(range, sizeof range, " in [%g, %g) of the file", begin, end);
        st = oar_error(OAR_ERR_FORMAT, "text: '%s' has %lld bytes%s; windows of T=%lld with targets shifted by "
                       "one need at least %lld", path, (long long)s->n, range, (long long)T, (long long)T + 1);
    }
    int64_t shape[1] = {T};
    if (st == OAR_OK)
        st = oar_dataset_init(&s->base, &text_vt, (s->n - 1) / T, OAR_I64, shape, 1, OAR_I64, shape, 1);
    if (st != OAR_OK) {
        text_destroy(&s->base);
        return NULL;
    }
    return &s->base;
}

oar_dataset *oar_dataset_text(const char *path, int64_t T, bool random_windows) {
    return oar_dataset_text_range(path, T, random_windows, 0.0, 1.0);
}
