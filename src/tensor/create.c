/* Public tensor creation: filled, ranges, identity, from user memory, random. */
#include "tensor/tensor.h"
#include "base/device.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Thread_local oar_device oar_default_device = OAR_CPU;

oar_status oar_set_default_device(oar_device dev) {
    if (dev != OAR_CPU && !oar_device_use(dev, "set_default_device")) return oar_last_status();
    oar_default_device = dev;
    return OAR_OK;
}

oar_device oar_get_default_device(void) { return oar_default_device; }

oar_status oar_tensor_fill(oar_tensor *t, double v) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    if (!t->numel) return OAR_OK;
    if (t->device != OAR_CPU) {
        const oar_device_ops *ops = oar_device_use(t->device, "fill");
        return ops ? ops->fill(oar_tensor_ptr(t), t->dtype, t->numel, v) : oar_last_status();
    }
    char *p = oar_tensor_ptr(t);
    if (v == 0.0) {
        memset(p, 0, (size_t)t->numel * tr->size);
    } else {
        tr->store(p, v);
        for (int64_t i = 1; i < t->numel; i++) memcpy(p + i * (int64_t)tr->size, p, tr->size);
    }
    return OAR_OK;
}

static oar_tensor *filled_on(oar_device dev, const int64_t *shape, int ndim, double v, oar_dtype dt) {
    if (ndim > 0 && !shape) {
        oar_error(OAR_ERR_INVALID_ARG, "full: shape is NULL but ndim is %d", ndim);
        return NULL;
    }
    oar_tensor *t = oar_tensor_new_on(dev, dt, shape, ndim);
    if (!t) return NULL;
    if (oar_tensor_fill(t, v) != OAR_OK) {
        oar_tensor_unref(t);
        return NULL;
    }
    return oar_track(t);
}

static oar_tensor *filled(const int64_t *shape, int ndim, double v, oar_dtype dt) {
    return filled_on(oar_default_device, shape, ndim, v, dt);
}

/* A tensor made on the host moved to the default device (ranges, random and user data are
 * made on the host, so every device gets the same values). */
static oar_tensor *to_default_device(oar_tensor *host) {
    if (!host || oar_default_device == OAR_CPU) return host;
    oar_tensor *t = oar_tensor_new_on(oar_default_device, host->dtype, host->shape, host->ndim);
    if (t && oar_tensor_copy_strided(t, host) != OAR_OK) {
        oar_tensor_unref(t);
        t = NULL;
    }
    oar_release(host);
    return t ? oar_track(t) : NULL;
}

oar_tensor *oar_empty(const int64_t *shape, int ndim, oar_dtype dt) {
    return oar_track(oar_tensor_new_on(oar_default_device, dt, shape, ndim));
}
oar_tensor *oar_zeros(const int64_t *shape, int ndim, oar_dtype dt) { return filled(shape, ndim, 0.0, dt); }
oar_tensor *oar_ones(const int64_t *shape, int ndim, oar_dtype dt) { return filled(shape, ndim, 1.0, dt); }
oar_tensor *oar_full(const int64_t *shape, int ndim, double v, oar_dtype dt) { return filled(shape, ndim, v, dt); }
oar_tensor *oar_scalar(double v, oar_dtype dt) { return filled(NULL, 0, v, dt); }

oar_tensor *oar_zeros_like(const oar_tensor *t) {
    OAR_CHECK_HANDLE("zeros_like", t, NULL);
    if (!t) return NULL;
    return filled_on(t->device, t->shape, t->ndim, 0.0, t->dtype);
}
oar_tensor *oar_ones_like(const oar_tensor *t) {
    OAR_CHECK_HANDLE("ones_like", t, NULL);
    if (!t) return NULL;
    return filled_on(t->device, t->shape, t->ndim, 1.0, t->dtype);
}

oar_tensor *oar_arange(double start, double end, double step, oar_dtype dt) {
    if (step == 0.0 || !isfinite(start) || !isfinite(end) || !isfinite(step) ||
        (end - start) / step < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "arange: expected finite bounds and a non-zero step pointing "
                                       "from start to end, got start=%g end=%g step=%g", start, end, step);
        return NULL;
    }
    int64_t n = (int64_t)ceil((end - start) / step);
    oar_tensor *t = oar_tensor_new(dt, &n, 1);
    if (!t) return NULL;
    const oar_dtype_traits *tr = &oar_dtypes[dt];
    for (int64_t i = 0; i < n; i++) tr->store(oar_tensor_ptr(t) + i * (int64_t)tr->size, start + (double)i * step);
    return to_default_device(oar_track(t));
}

oar_tensor *oar_linspace(double start, double end, int64_t steps, oar_dtype dt) {
    if (steps < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "linspace: expected steps >= 0, got %lld", (long long)steps);
        return NULL;
    }
    oar_tensor *t = oar_tensor_new(dt, &steps, 1);
    if (!t) return NULL;
    const oar_dtype_traits *tr = &oar_dtypes[dt];
    double delta = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
    for (int64_t i = 0; i < steps; i++) {
        /* fill from both ends so the last value is exactly end, like torch */
        double v = i < steps / 2 ? start + delta * (double)i : end - delta * (double)(steps - 1 - i);
        tr->store(oar_tensor_ptr(t) + i * (int64_t)tr->size, v);
    }
    return to_default_device(oar_track(t));
}

oar_tensor *oar_eye(int64_t n, int64_t m, oar_dtype dt) {
    if (m < 0) m = n;
    int64_t shape[2] = {n, m};
    oar_tensor *t = filled_on(OAR_CPU, shape, 2, 0.0, dt);
    if (!t) return NULL;
    const oar_dtype_traits *tr = &oar_dtypes[dt];
    for (int64_t i = 0; i < n && i < m; i++) tr->store(oar_tensor_ptr(t) + (i * m + i) * (int64_t)tr->size, 1.0);
    return to_default_device(t);
}

oar_tensor *oar_from_data(const void *data, const int64_t *shape, int ndim, oar_dtype dt) {
    oar_tensor *t = oar_tensor_new(dt, shape, ndim);
    if (!t) return NULL;
    if (t->numel && !data) {
        oar_tensor_unref(t);
        oar_error(OAR_ERR_INVALID_ARG, "from_data: data is NULL for %lld elements", (long long)t->numel);
        return NULL;
    }
    if (t->numel) memcpy(oar_tensor_ptr(t), data, (size_t)t->numel * oar_dtypes[dt].size);
    return to_default_device(oar_track(t));
}

oar_tensor *oar_from_blob(void *data, const int64_t *shape, int ndim, oar_dtype dt,
                          void (*deleter)(void *, void *), void *ctx) {
    oar_tensor *t = oar_tensor_shell(dt, shape, ndim);
    if (!t) return NULL;
    if (t->numel && !data) {
        oar_error(OAR_ERR_INVALID_ARG, "from_blob: data is NULL for %lld elements", (long long)t->numel);
        oar_tensor_struct_free(t);
        return NULL;
    }
    oar_storage *s = OAR_NEW(oar_storage);
    if (!s) {
        oar_tensor_struct_free(t);
        return NULL;
    }
    s->refcount = 1;
    s->data = data;
    s->nbytes = (size_t)t->numel * oar_dtypes[dt].size;
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    t->storage = s;
    return oar_track(t);
}

/* ---- random: element i uses counter (reserved offset + i) */
typedef struct rand_job {
    oar_tensor *t;
    oar_rng_state s;
    int kind; /* 0 uniform, 1 normal, 2 integer */
    int64_t low, span;
} rand_job;

static void rand_range(void *ctx, int64_t b, int64_t e) {
    rand_job *j = ctx;
    const oar_dtype_traits *tr = &oar_dtypes[j->t->dtype];
    char *p = oar_tensor_ptr(j->t);
    for (int64_t i = b; i < e; i++) {
        char *dst = p + i * (int64_t)tr->size;
        if (j->kind == 0) {
            double u = oar_rng_uniform(j->s, (uint64_t)i);
            /* rounding to a narrow float type may reach 1.0; keep the interval half-open */
            tr->store(dst, u);
            if (tr->load(dst) >= 1.0) tr->store(dst, nextafter(1.0, 0.0));
        } else if (j->kind == 1) {
            tr->store(dst, oar_rng_normal(j->s, (uint64_t)i));
        } else {
            uint32_t w[4];
            oar_philox(j->s.seed, j->s.offset + (uint64_t)i, w);
            uint64_t r = ((uint64_t)w[0] << 32) | w[1];
            tr->store_i64(dst, j->low + (int64_t)(r % (uint64_t)j->span));
        }
    }
}

static oar_tensor *random_tensor(const int64_t *shape, int ndim, oar_dtype dt, int kind, int64_t low,
                                 int64_t span) {
    oar_tensor *t = oar_tensor_new(dt, shape, ndim);
    if (!t) return NULL;
    rand_job j = {.t = t, .s = oar_rng_reserve((uint64_t)t->numel), .kind = kind, .low = low, .span = span};
    oar_parallel_for(t->numel, 16384, rand_range, &j);
    return to_default_device(oar_track(t));
}

oar_tensor *oar_rand(const int64_t *shape, int ndim, oar_dtype dt) {
    if (!oar_dtype_is_float(dt)) {
        oar_error(OAR_ERR_DTYPE, "rand: expected a floating dtype, got %s", oar_dtype_name(dt));
        return NULL;
    }
    return random_tensor(shape, ndim, dt, 0, 0, 0);
}

oar_tensor *oar_randn(const int64_t *shape, int ndim, oar_dtype dt) {
    if (!oar_dtype_is_float(dt)) {
        oar_error(OAR_ERR_DTYPE, "randn: expected a floating dtype, got %s", oar_dtype_name(dt));
        return NULL;
    }
    return random_tensor(shape, ndim, dt, 1, 0, 0);
}

oar_tensor *oar_randint(int64_t low, int64_t high, const int64_t *shape, int ndim, oar_dtype dt) {
    if (high <= low) {
        oar_error(OAR_ERR_INVALID_ARG, "randint: expected low < high, got low=%lld high=%lld",
                  (long long)low, (long long)high);
        return NULL;
    }
    return random_tensor(shape, ndim, dt, 2, low, high - low);
}
