/* Observers: statistics of the tensors a calibration run sees, turned into scale and zero point.
 * A small registry of kinds; each keeps per channel (or one for the tensor) the running min and
 * max, and the histogram kinds a histogram of |x| over [0, the largest |x| seen] that picks a
 * clipping threshold T:
 *   minmax          the range seen (torch's MinMaxObserver, bit for bit: tests/golden)
 *   moving_average  min and max averaged over batches, old * m + new * (1 - m) (torch's
 *                   MovingAverageMinMaxObserver; PaddleSlim's moving_average_abs_max when symmetric)
 *   percentile      T = the given percentile of |x|
 *   kl              T minimizing KL(P || Q) between the clipped histogram and its 128-level
 *                   quantization (TensorRT's entropy calibration)
 *   mse             T minimizing the expected squared quantization error over the histogram
 * The histogram kinds give [-T, T] when symmetric, else the seen range clipped to it. */
#include "ops/quant.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

typedef struct obs_kind obs_kind;

struct oar_observer {
    const obs_kind *kind;
    oar_observer_opts o;
    int64_t channels, batches;
    float *lo, *hi;
    double *hist; /* [channels][bins] counts of |x| */
    float *hmax;  /* [channels]: the histogram's range [0, hmax] */
};

struct obs_kind {
    const char *name;
    bool histogram;
    float (*threshold)(const oar_observer *o, int64_t c); /* histogram kinds */
};

/* ---- histogram thresholds */
static const double *hist_of(const oar_observer *o, int64_t c) { return o->hist + c * o->o.bins; }

static float thr_percentile(const oar_observer *o, int64_t c) {
    const double *h = hist_of(o, c);
    double total = 0, run = 0;
    for (int i = 0; i < o->o.bins; i++) total += h[i];
    for (int i = 0; i < o->o.bins; i++) {
        run += h[i];
        if (run >= total * o->o.percentile / 100) return o->hmax[c] * (float)(i + 1) / (float)o->o.bins;
    }
    return o->hmax[c];
}

/* half the levels of the target type: |x| maps onto 128 steps for 8 bits */
#define KL_LEVELS 128

static float thr_kl(const oar_observer *o, int64_t c) {
    const double *h = hist_of(o, c);
    /* |x| spans 128 levels of a signed grid; non-negative data on an affine grid gets all 256 */
    int levels = o->lo[c] >= 0 && !o->o.symmetric ? 2 * KL_LEVELS : KL_LEVELS;
    if (o->o.reduce_range) levels /= 2; /* a 7-bit grid */
    int nb = o->o.bins, best = nb;
    double best_kl = INFINITY;
    double *p = malloc(sizeof(double) * (size_t)nb), *q = malloc(sizeof(double) * (size_t)nb);
    if (!p || !q) {
        free(p);
        free(q);
        return o->hmax[c];
    }
    double tail = 0;
    for (int i = 0; i < nb; i++) tail += h[i];
    for (int i = levels; i <= nb; i++) {
        double outliers = 0;
        for (int k = i; k < nb; k++) outliers += h[k];
        memcpy(p, h, sizeof(double) * (size_t)i);
        p[i - 1] += outliers;
        /* Q: hist[0, i) merged into `levels` groups, each spread over its non-empty bins */
        for (int g = 0; g < levels; g++) {
            int b0 = (int)((int64_t)g * i / levels), b1 = (int)((int64_t)(g + 1) * i / levels);
            double sum = 0;
            int nz = 0;
            for (int k = b0; k < b1; k++) {
                sum += h[k];
                nz += h[k] > 0;
            }
            for (int k = b0; k < b1; k++) q[k] = h[k] > 0 ? sum / nz : 0;
        }
        double ps = 0, qs = 0, kl = 0;
        for (int k = 0; k < i; k++) {
            ps += p[k];
            qs += q[k];
        }
        for (int k = 0; k < i && ps > 0 && qs > 0; k++)
            if (p[k] > 0) kl += q[k] > 0 ? p[k] / ps * log((p[k] / ps) / (q[k] / qs)) : p[k] / ps * 1e3;
        if (kl < best_kl) {
            best_kl = kl;
            best = i;
        }
    }
    free(p);
    free(q);
    (void)tail;
    return o->hmax[c] * (float)best / (float)nb;
}

static float thr_mse(const oar_observer *o, int64_t c) {
    const double *h = hist_of(o, c);
    int nb = o->o.bins;
    int32_t qmin, qmax;
    oar_qrange_reduced(o->o.dtype, o->o.reduce_range, &qmin, &qmax);
    double levels = (qmax - qmin) / 2.0, width = o->hmax[c] / nb, best_err = INFINITY;
    float best = o->hmax[c];
    for (int j = 1; j <= 128; j++) {
        double t = o->hmax[c] * j / 128.0, step = t / levels, err = 0;
        for (int i = 0; i < nb; i++) {
            if (!h[i]) continue;
            double v = (i + 0.5) * width, r = v >= t ? t : nearbyint(v / step) * step;
            err += h[i] * (v - r) * (v - r);
        }
        if (err < best_err) {
            best_err = err;
            best = (float)t;
        }
    }
    return best;
}

static const obs_kind KINDS[] = {
    {"minmax", false, NULL},
    {"moving_average", false, NULL},
    {"percentile", true, thr_percentile},
    {"kl", true, thr_kl},
    {"mse", true, thr_mse},
};
#define N_KINDS ((int)(sizeof KINDS / sizeof KINDS[0]))

int oar_observer_kinds(const char **names, int cap) {
    for (int i = 0; i < N_KINDS && i < cap && names; i++) names[i] = KINDS[i].name;
    return N_KINDS;
}

oar_observer *oar_observer_create(const char *kind, const oar_observer_opts *opts) {
    const obs_kind *k = NULL;
    for (int i = 0; i < N_KINDS && kind; i++)
        if (!strcmp(kind, KINDS[i].name)) k = &KINDS[i];
    if (!k) {
        oar_error(OAR_ERR_INVALID_ARG, "observer: expected kind minmax, moving_average, percentile, kl or mse, got '%s'",
                  kind ? kind : "(null)");
        return NULL;
    }
    oar_observer_opts o = opts ? *opts : (oar_observer_opts){0};
    if (o.dtype == OAR_F32) o.dtype = OAR_U8;
    if (o.dtype != OAR_U8 && o.dtype != OAR_I8) {
        oar_error(OAR_ERR_DTYPE, "observer: expected dtype u8 or i8, got %s", oar_dtype_name(o.dtype));
        return NULL;
    }
    if (o.reduce_range && o.symmetric && o.dtype == OAR_U8) {
        oar_error(OAR_ERR_INVALID_ARG, "observer %s: expected reduce_range with affine u8 or with i8, got it with "
                                       "symmetric u8 (its zero point 128 lies outside the 7-bit range [0, 127]; torch "
                                       "refuses it too); use affine u8 or symmetric i8", k->name);
        return NULL;
    }
    if (!o.momentum) o.momentum = 0.9;
    if (!o.percentile) o.percentile = 99.99;
    if (!o.bins) o.bins = 2048;
    if (o.momentum < 0 || o.momentum >= 1 || o.percentile <= 0 || o.percentile > 100 || o.bins < 2 * KL_LEVELS ||
        o.bins > (1 << 20)) {
        oar_error(OAR_ERR_INVALID_ARG, "observer %s: expected momentum in [0, 1), percentile in (0, 100] and bins in "
                                       "[256, 2^20], got %g, %g and %d", k->name, o.momentum, o.percentile, o.bins);
        return NULL;
    }
    oar_observer *ob = calloc(1, sizeof *ob);
    if (!ob) {
        oar_error(OAR_ERR_OOM, "observer: out of memory");
        return NULL;
    }
    ob->kind = k;
    ob->o = o;
    return ob;
}

void oar_observer_free(oar_observer *o) {
    if (!o) return;
    free(o->lo);
    free(o->hi);
    free(o->hist);
    free(o->hmax);
    free(o);
}

/* Re-bins channel c's histogram onto [0, nmax]: each old bin's count moves to the bin of its centre. */
static void rebin(oar_observer *o, int64_t c, float nmax) {
    double *h = o->hist + c * o->o.bins;
    int nb = o->o.bins;
    if (o->hmax[c] > 0) {
        double *old = malloc(sizeof(double) * (size_t)nb);
        if (old) {
            memcpy(old, h, sizeof(double) * (size_t)nb);
            memset(h, 0, sizeof(double) * (size_t)nb);
            for (int i = 0; i < nb; i++) {
                int j = (int)(((i + 0.5) / nb) * o->hmax[c] / nmax * nb);
                h[j < nb ? j : nb - 1] += old[i];
            }
            free(old);
        }
    }
    o->hmax[c] = nmax;
}

static oar_status alloc_state(oar_observer *o, int64_t channels) {
    o->channels = channels;
    o->lo = malloc(sizeof(float) * (size_t)channels);
    o->hi = malloc(sizeof(float) * (size_t)channels);
    if (o->kind->histogram) {
        o->hist = calloc((size_t)(channels * o->o.bins), sizeof(double));
        o->hmax = calloc((size_t)channels, sizeof(float));
    }
    if (!o->lo || !o->hi || (o->kind->histogram && (!o->hist || !o->hmax)))
        return oar_error(OAR_ERR_OOM, "observer %s: out of memory for %lld channels", o->kind->name, (long long)channels);
    return OAR_OK;
}

oar_status oar_observer_observe(oar_observer *o, oar_tensor *x) {
    if (!o || !x) return oar_error(OAR_ERR_INVALID_ARG, "observer: expected an observer and a tensor, got NULL");
    const char *name = o->kind->name;
    int nd = oar_ndim(x);
    const int64_t *shape = oar_shape(x);
    if (!oar_dtypes[oar_dtype_of(x)].is_float)
        return oar_error(OAR_ERR_DTYPE, "observer %s: expected a floating tensor, got %s", name,
                         oar_dtype_name(oar_dtype_of(x)));
    int ax = o->o.per_channel ? oar_dim_index(o->o.axis, nd) : 0;
    if (o->o.per_channel && (ax < 0 || nd == 0)) return oar_dim_error("observer", o->o.axis, nd);
    int64_t ch = o->o.per_channel ? shape[ax] : 1, inner = 1, n = oar_numel(x);
    if (o->channels && ch != o->channels)
        return oar_error(OAR_ERR_SHAPE, "observer %s: expected %lld channels along axis %d as before, got %lld", name,
                         (long long)o->channels, ax, (long long)ch);
    if (n == 0) return OAR_OK; /* an empty batch adds nothing */
    if (o->o.per_channel)
        for (int d = ax + 1; d < nd; d++) inner *= shape[d];
    float *v = malloc(sizeof(float) * (size_t)n), *bmin = malloc(sizeof(float) * (size_t)ch),
          *bmax = malloc(sizeof(float) * (size_t)ch);
    oar_status st = OAR_OK;
    if (!v || !bmin || !bmax) {
        st = oar_error(OAR_ERR_OOM, "observer %s: out of memory", name);
        goto done;
    }
    if ((st = oar_copy_to_buffer(x, v, sizeof(float) * (size_t)n, OAR_F32)) != OAR_OK) goto done;
    for (int64_t c = 0; c < ch; c++) bmin[c] = INFINITY, bmax[c] = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) {
            st = oar_error(OAR_ERR_NUMERIC, "observer %s: expected finite calibration data, got %g at element %lld of "
                                            "batch %lld; check the input pipeline", name, (double)v[i], (long long)i,
                           (long long)o->batches);
            goto done;
        }
        int64_t c = (i / inner) % ch;
        bmin[c] = v[i] < bmin[c] ? v[i] : bmin[c];
        bmax[c] = v[i] > bmax[c] ? v[i] : bmax[c];
    }
    if (!o->channels && (st = alloc_state(o, ch)) != OAR_OK) goto done;
    for (int64_t c = 0; c < ch; c++) {
        if (o->batches == 0 || strcmp(name, "moving_average")) {
            o->lo[c] = o->batches && o->lo[c] < bmin[c] ? o->lo[c] : bmin[c];
            o->hi[c] = o->batches && o->hi[c] > bmax[c] ? o->hi[c] : bmax[c];
        } else { /* torch: min + c * (new - min), in float */
            float k = (float)(1 - o->o.momentum);
            o->lo[c] = o->lo[c] + k * (bmin[c] - o->lo[c]);
            o->hi[c] = o->hi[c] + k * (bmax[c] - o->hi[c]);
        }
        float amax = fabsf(bmin[c]) > fabsf(bmax[c]) ? fabsf(bmin[c]) : fabsf(bmax[c]);
        if (o->kind->histogram && amax > o->hmax[c]) rebin(o, c, amax);
    }
    if (o->kind->histogram)
        for (int64_t i = 0; i < n; i++) {
            int64_t c = (i / inner) % ch;
            if (o->hmax[c] <= 0) continue;
            int b = (int)(fabsf(v[i]) / o->hmax[c] * (float)o->o.bins);
            o->hist[c * o->o.bins + (b < o->o.bins ? b : o->o.bins - 1)] += 1;
        }
    o->batches++;
done:
    free(v);
    free(bmin);
    free(bmax);
    return st;
}

oar_status oar_observer_qparams(oar_observer *o, oar_tensor **scale, oar_tensor **zero_point) {
    if (!o || !scale || !zero_point) return oar_error(OAR_ERR_INVALID_ARG, "observer qparams: expected non-NULL arguments");
    if (!o->channels)
        return oar_error(OAR_ERR_STATE, "observer %s: no data observed; run calibration batches (non-empty) through "
                                        "it first", o->kind->name);
    int64_t ch = o->channels;
    float *s = malloc(sizeof(float) * (size_t)ch);
    int32_t *z = malloc(sizeof(int32_t) * (size_t)ch);
    if (!s || !z) {
        free(s);
        free(z);
        return oar_error(OAR_ERR_OOM, "observer %s: out of memory", o->kind->name);
    }
    for (int64_t c = 0; c < ch; c++) {
        float lo = o->lo[c], hi = o->hi[c];
        if (o->kind->histogram && o->hmax[c] > 0) {
            float t = o->kind->threshold(o, c);
            if (o->o.symmetric) lo = -t, hi = t;
            else lo = lo < -t ? -t : lo, hi = hi > t ? t : hi;
        }
        int32_t qmin, qmax;
        oar_qrange_reduced(o->o.dtype, o->o.reduce_range, &qmin, &qmax);
        oar_qparams_from_qrange(lo, hi, o->o.dtype, o->o.symmetric, qmin, qmax, &s[c], &z[c]);
    }
    int64_t shape[1] = {ch};
    int nd = o->o.per_channel ? 1 : 0;
    *scale = oar_from_data(s, shape, nd, OAR_F32);
    *zero_point = oar_from_data(z, shape, nd, OAR_I32);
    free(s);
    free(z);
    return *scale && *zero_point ? OAR_OK : oar_last_status();
}
