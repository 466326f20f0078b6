/* Parameter initializers. Each fills a tensor in place from the global counter-based
 * generator, outside autograd, with torch's fan and gain conventions. */
#include "nn/module.h"

#include <math.h>
#include <stdlib.h>

static oar_status check(const char *who, oar_tensor *t) {
    OAR_CHECK_HANDLE(who, t, oar_last_status());
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: tensor is NULL", who);
    if (!oar_dtypes[t->dtype].is_float)
        return oar_error(OAR_ERR_DTYPE, "%s: expected a floating tensor, got %s", who, oar_dtype_name(t->dtype));
    return OAR_OK;
}

/* Writes draw(i) into element i (row-major), whatever t's layout. */
static oar_status fill(oar_tensor *t, double (*draw)(oar_rng_state, uint64_t, const double *), const double *p) {
    oar_rng_state s = oar_rng_reserve((uint64_t)t->numel);
    oar_tensor *tmp = oar_tensor_new(OAR_F64, t->shape, t->ndim);
    if (!tmp) return oar_last_status();
    double *d = (double *)oar_tensor_ptr(tmp);
    for (int64_t i = 0; i < t->numel; i++) d[i] = draw(s, (uint64_t)i, p);
    oar_tensor_copy_strided(t, tmp);
    oar_tensor_unref(tmp);
    t->storage->version++;
    return OAR_OK;
}

static double draw_uniform(oar_rng_state s, uint64_t i, const double *p) { return p[0] + (p[1] - p[0]) * oar_rng_uniform(s, i); }
static double draw_normal(oar_rng_state s, uint64_t i, const double *p) { return p[0] + p[1] * oar_rng_normal(s, i); }
static double draw_constant(oar_rng_state s, uint64_t i, const double *p) { (void)s; (void)i; return p[0]; }

oar_status oar_init_uniform_(oar_tensor *t, double low, double high) {
    oar_status st = check("init_uniform_", t);
    if (st != OAR_OK) return st;
    if (!(low <= high)) return oar_error(OAR_ERR_INVALID_ARG, "init_uniform_: expected low <= high, got %g > %g", low, high);
    double p[2] = {low, high};
    return fill(t, draw_uniform, p);
}

oar_status oar_init_normal_(oar_tensor *t, double mean, double std) {
    oar_status st = check("init_normal_", t);
    if (st != OAR_OK) return st;
    if (!(std >= 0)) return oar_error(OAR_ERR_INVALID_ARG, "init_normal_: expected std >= 0, got %g", std);
    double p[2] = {mean, std};
    return fill(t, draw_normal, p);
}

oar_status oar_init_constant_(oar_tensor *t, double value) {
    oar_status st = check("init_constant_", t);
    if (st != OAR_OK) return st;
    double p[1] = {value};
    return fill(t, draw_constant, p);
}

/* fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (torch's rule). */
static oar_status fans(const char *who, const oar_tensor *t, double *fan_in, double *fan_out) {
    if (t->ndim < 2) {
        char s[64];
        oar_format_shape(t->shape, t->ndim, s, sizeof s);
        return oar_error(OAR_ERR_SHAPE, "%s: expected a tensor with at least 2 dims to compute fan in and "
                                        "fan out, got shape %s", who, s);
    }
    double rf = 1;
    for (int d = 2; d < t->ndim; d++) rf *= (double)t->shape[d];
    *fan_in = (double)t->shape[1] * rf;
    *fan_out = (double)t->shape[0] * rf;
    return OAR_OK;
}

oar_status oar_init_xavier_uniform_(oar_tensor *t, double gain) {
    double fi = 0, fo = 0;
    oar_status st = check("init_xavier_uniform_", t);
    if (st == OAR_OK) st = fans("init_xavier_uniform_", t, &fi, &fo);
    if (st != OAR_OK) return st;
    double a = gain * sqrt(6.0 / (fi + fo));
    return oar_init_uniform_(t, -a, a);
}

oar_status oar_init_xavier_normal_(oar_tensor *t, double gain) {
    double fi = 0, fo = 0;
    oar_status st = check("init_xavier_normal_", t);
    if (st == OAR_OK) st = fans("init_xavier_normal_", t, &fi, &fo);
    if (st != OAR_OK) return st;
    return oar_init_normal_(t, 0, gain * sqrt(2.0 / (fi + fo)));
}

static oar_status kaiming_std(const char *who, oar_tensor *t, double a, oar_fan_mode mode, double *std) {
    double fi = 0, fo = 0;
    oar_status st = check(who, t);
    if (st == OAR_OK) st = fans(who, t, &fi, &fo);
    if (st != OAR_OK) return st;
    double fan = mode == OAR_FAN_OUT ? fo : fi;
    if (fan <= 0) return oar_error(OAR_ERR_SHAPE, "%s: cannot initialize a tensor with a zero-size fan", who);
    *std = sqrt(2.0 / (1 + a * a)) / sqrt(fan);
    return OAR_OK;
}

oar_status oar_init_kaiming_uniform_(oar_tensor *t, double a, oar_fan_mode mode) {
    double std = 0;
    oar_status st = kaiming_std("init_kaiming_uniform_", t, a, mode, &std);
    if (st != OAR_OK) return st;
    double bound = sqrt(3.0) * std;
    return oar_init_uniform_(t, -bound, bound);
}

oar_status oar_init_kaiming_normal_(oar_tensor *t, double a, oar_fan_mode mode) {
    double std = 0;
    oar_status st = kaiming_std("init_kaiming_normal_", t, a, mode, &std);
    if (st != OAR_OK) return st;
    return oar_init_normal_(t, 0, std);
}

/* A (semi-)orthogonal matrix: Gram-Schmidt on the rows (or columns) of a normal draw, which
 * equals QR with a positive diagonal in R, the same distribution torch samples. */
oar_status oar_init_orthogonal_(oar_tensor *t, double gain) {
    oar_status st = check("init_orthogonal_", t);
    if (st != OAR_OK) return st;
    if (t->ndim < 2)
        return oar_error(OAR_ERR_SHAPE, "init_orthogonal_: expected a tensor with at least 2 dims, got %d", t->ndim);
    int64_t rows = t->shape[0], cols = t->numel / (rows ? rows : 1);
    if (rows == 0 || cols == 0) return OAR_OK;
    bool tr = rows > cols; /* orthonormalize the shorter side */
    int64_t k = tr ? cols : rows, len = tr ? rows : cols;
    double *v = malloc(sizeof(double) * (size_t)(k * len));
    if (!v) return oar_error(OAR_ERR_OOM, "init_orthogonal_: out of memory");
    oar_rng_state s = oar_rng_reserve((uint64_t)(k * len));
    for (int64_t i = 0; i < k * len; i++) v[i] = oar_rng_normal(s, (uint64_t)i);
    for (int64_t i = 0; i < k; i++) {
        double *vi = v + i * len;
        for (int pass = 0; pass < 2; pass++) /* twice, for orthogonality in floating point */
            for (int64_t j = 0; j < i; j++) {
                double *vj = v + j * len, dot = 0;
                for (int64_t e = 0; e < len; e++) dot += vi[e] * vj[e];
                for (int64_t e = 0; e < len; e++) vi[e] -= dot * vj[e];
            }
        double nrm = 0;
        for (int64_t e = 0; e < len; e++) nrm += vi[e] * vi[e];
        nrm = sqrt(nrm);
        for (int64_t e = 0; e < len; e++) vi[e] = nrm > 0 ? vi[e] / nrm : 0;
    }
    oar_tensor *tmp = oar_tensor_new(OAR_F64, t->shape, t->ndim);
    if (!tmp) {
        free(v);
        return oar_last_status();
    }
    double *d = (double *)oar_tensor_ptr(tmp);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) d[r * cols + c] = gain * (tr ? v[c * len + r] : v[r * len + c]);
    free(v);
    oar_tensor_copy_strided(t, tmp);
    oar_tensor_unref(tmp);
    t->storage->version++;
    return OAR_OK;
}
