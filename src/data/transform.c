/* Per-sample transforms applied by the loader to f32 inputs, in place in the batch buffer.
 * Channels are the sample's first dim; crops and flips act on the last two / last dim. Random
 * choices come from (epoch's sample key, sample index, transform slot) only. */
#include "data/data.h"

#include <math.h>
#include <string.h>

static int norm_channels(const oar_transform *t) { return t->n_channels > 0 ? t->n_channels : 1; }
static const double *norm_mean(const oar_transform *t) { return t->means ? t->means : t->mean; }
static const double *norm_std(const oar_transform *t) { return t->stds ? t->stds : t->std; }

static oar_status check_one(const oar_transform *t, int k, const oar_dataset *d) {
    int64_t channels = d->in_ndim >= 1 ? d->in_shape[0] : 1;
    switch (t->kind) {
    case OAR_TF_NORMALIZE: {
        int nc = norm_channels(t);
        if (!t->means != !t->stds)
            return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d (normalize): expected both means and "
                             "stds, or neither, got only %s", k, t->means ? "means" : "stds");
        if (nc != 1 && nc != channels)
            return oar_error(OAR_ERR_SHAPE, "loader: transform %d (normalize): expected n_channels 1 "
                             "or %lld (the sample's first dim), got %d", k, (long long)channels, t->n_channels);
        if (nc > 16 && !t->means)
            return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d (normalize): %d channels do not fit "
                             "mean[16]/std[16]; pass them through means and stds", k, nc);
        const double *mean = norm_mean(t), *std = norm_std(t);
        for (int c = 0; c < nc; c++)
            if (!isfinite(mean[c]) || !isfinite(std[c]) || std[c] == 0.0)
                return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d (normalize): expected a "
                                 "finite mean and a finite non-zero std for channel %d, got mean=%g "
                                 "std=%g", k, c, mean[c], std[c]);
        return OAR_OK;
    }
    case OAR_TF_RANDOM_CROP:
        if (d->in_ndim < 2)
            return oar_error(OAR_ERR_SHAPE, "loader: transform %d (random crop): expected samples "
                             "with at least 2 dims (..., H, W), got %d", k, d->in_ndim);
        if (t->padding < 0 || t->padding > (1 << 20))
            return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d (random crop): expected "
                             "0 <= padding <= 2^20, got %lld", k, (long long)t->padding);
        return OAR_OK;
    case OAR_TF_HFLIP:
        if (d->in_ndim < 1)
            return oar_error(OAR_ERR_SHAPE, "loader: transform %d (horizontal flip): expected "
                             "samples with at least 1 dim, got a scalar", k);
        if (!(t->p >= 0.0 && t->p <= 1.0))
            return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d (horizontal flip): expected "
                             "a probability 0 <= p <= 1, got %g", k, t->p);
        return OAR_OK;
    }
    return oar_error(OAR_ERR_INVALID_ARG, "loader: transform %d: unknown kind %d", k, (int)t->kind);
}

oar_status oar_transforms_check(const oar_transform *tf, int n, const oar_dataset *d) {
    if (n < 0 || n > OAR_DATA_MAX_SLOTS - 1 || (n > 0 && !tf))
        return oar_error(OAR_ERR_INVALID_ARG, "loader: expected 0..%d transforms in an array, got %d%s",
                         OAR_DATA_MAX_SLOTS - 1, n, n > 0 && !tf ? " with a NULL array" : "");
    if (n > 0 && d->in_dtype != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "loader: transforms expect f32 inputs, got %s samples; "
                         "convert the data or drop the transforms", oar_dtype_name(d->in_dtype));
    for (int k = 0; k < n; k++) {
        oar_status st = check_one(&tf[k], k, d);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

static void normalize(const oar_transform *t, const oar_dataset *d, float *x) {
    int nc = norm_channels(t);
    int64_t plane = nc == 1 ? d->in_numel : d->in_numel / nc;
    const double *mean = norm_mean(t), *std = norm_std(t);
    for (int c = 0; c < nc; c++) {
        /* (x - mean) / std in f32, as torchvision computes it */
        float m = (float)mean[c], s = (float)std[c];
        float *p = x + c * plane;
        for (int64_t k = 0; k < plane; k++) p[k] = (p[k] - m) / s;
    }
}

/* Pads by `padding` zeros on every side and crops back at offset (dy, dx) in [0, 2*padding]. */
static void random_crop(const oar_transform *t, const oar_dataset *d, float *x, float *scratch,
                        uint64_t key, int64_t i, int slot) {
    int64_t H = d->in_shape[d->in_ndim - 2], W = d->in_shape[d->in_ndim - 1], p = t->padding;
    if (H * W == 0) return;
    int64_t dy = (int64_t)oar_data_draw(key, i, slot, 0, (uint64_t)(2 * p + 1)) - p;
    int64_t dx = (int64_t)oar_data_draw(key, i, slot, 1, (uint64_t)(2 * p + 1)) - p;
    if (dy == 0 && dx == 0) return;
    memcpy(scratch, x, d->in_bytes);
    /* output column c reads input column c + dx: valid for c in [x0, x1) */
    int64_t x0 = dx < 0 ? -dx : 0, x1 = dx > 0 ? W - dx : W;
    for (int64_t plane = 0; plane < d->in_numel / (H * W); plane++) {
        const float *src = scratch + plane * H * W;
        float *dst = x + plane * H * W;
        for (int64_t r = 0; r < H; r++) {
            float *row = dst + r * W;
            int64_t sr = r + dy;
            if (sr < 0 || sr >= H || x1 <= x0) {
                memset(row, 0, sizeof(float) * (size_t)W);
                continue;
            }
            memset(row, 0, sizeof(float) * (size_t)x0);
            memcpy(row + x0, src + sr * W + x0 + dx, sizeof(float) * (size_t)(x1 - x0));
            memset(row + x1, 0, sizeof(float) * (size_t)(W - x1));
        }
    }
}

static void hflip(const oar_transform *t, const oar_dataset *d, float *x, uint64_t key, int64_t i,
                  int slot) {
    if (!(oar_data_uniform(key, i, slot) < t->p)) return;
    int64_t W = d->in_shape[d->in_ndim - 1];
    if (W == 0) return;
    for (int64_t r = 0; r < d->in_numel / W; r++) {
        float *row = x + r * W;
        for (int64_t a = 0, b = W - 1; a < b; a++, b--) {
            float tmp = row[a];
            row[a] = row[b];
            row[b] = tmp;
        }
    }
}

void oar_transforms_apply(const oar_transform *tf, int n, const oar_dataset *d, float *x,
                          float *scratch, uint64_t key, int64_t i) {
    for (int k = 0; k < n; k++) {
        int slot = 1 + k; /* slot 0 belongs to the dataset's own draws */
        switch (tf[k].kind) {
        case OAR_TF_NORMALIZE: normalize(&tf[k], d, x); break;
        case OAR_TF_RANDOM_CROP: random_crop(&tf[k], d, x, scratch, key, i, slot); break;
        case OAR_TF_HFLIP: hflip(&tf[k], d, x, key, i, slot); break;
        }
    }
}
