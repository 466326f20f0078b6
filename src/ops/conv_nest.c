/* The convolution loop nest and its checks (conv_nest.h). */
#include "ops/conv_nest.h"

#include <string.h>

/* Sizes are computed in 128 bits: a model file may pair a huge dim with a huge attribute, and
 * that must be an error, not an overflow. Results past int64 saturate (and are then refused). */
typedef __int128 wide;
static int64_t sat64(wide v) { return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v; }

static int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    wide span = (wide)in + 2 * (wide)p - (wide)d * (k - 1) - 1;
    return span < 0 ? 0 : sat64(span / s + 1);
}

oar_status oar_conv_read_list(const char *op, const char *what, const oar_attr *a, int nsp, int64_t min,
                              int64_t *out) {
    char s[128];
    if (a->n != nsp) {
        oar_format_shape(a->ints, a->n, s, sizeof s);
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s to have %d entr%s, got %s", op, what, nsp,
                         nsp == 1 ? "y" : "ies", s);
    }
    for (int i = 0; i < nsp; i++) {
        if (a->ints[i] < min) {
            oar_format_shape(a->ints, a->n, s, sizeof s);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s entries >= %lld, got %s", op, what,
                             (long long)min, s);
        }
        out[i] = a->ints[i];
    }
    return OAR_OK;
}

oar_status oar_conv_read_params(const char *op, const oar_attr *stride, const oar_attr *pad, const oar_attr *dil,
                                const oar_attr *groups, int nsp, oar_conv_geom *g) {
    oar_status st;
    for (int i = 0; i < 3; i++) g->s[i] = 1, g->p[i] = 0, g->d[i] = 1;
    if ((st = oar_conv_read_list(op, "stride", stride, nsp, 1, g->s + 3 - nsp)) != OAR_OK) return st;
    if ((st = oar_conv_read_list(op, "padding", pad, nsp, 0, g->p + 3 - nsp)) != OAR_OK) return st;
    if ((st = oar_conv_read_list(op, "dilation", dil, nsp, 1, g->d + 3 - nsp)) != OAR_OK) return st;
    if (groups->i < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected groups >= 1, got %lld", op, (long long)groups->i);
    g->groups = groups->i;
    return OAR_OK;
}

oar_status oar_conv_fill_geom(const char *op, const int64_t *xs, const int64_t *ws, const char *xn, const char *wn,
                              int nsp, oar_conv_geom *g) {
    const int lead = 3 - nsp; /* unit dims in front of the given ones */
    g->n = xs[0], g->ci = xs[1], g->co = ws[0];
    for (int i = 0; i < 3; i++) {
        g->sp[i] = i < lead ? 1 : xs[2 + i - lead];
        g->k[i] = i < lead ? 1 : ws[2 + i - lead];
    }
    if (g->co % g->groups != 0)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.shape[0] (out channels) divisible by groups, got "
                                        "%lld %% %lld != 0", op, wn, (long long)g->co, (long long)g->groups);
    if ((wide)ws[1] * g->groups != g->ci)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s.shape[1] * groups == %s.shape[1], got %lld * %lld "
                                        "!= %lld", op, wn, xn, (long long)ws[1], (long long)g->groups,
                         (long long)g->ci);
    char a[64], b[64];
    oar_format_shape(ws + 2, nsp, b, sizeof b);
    if (g->ci < 1 || g->k[0] < 1 || g->k[1] < 1 || g->k[2] < 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected at least one input channel and a kernel of size >= 1, "
                                        "got %lld channels and kernel %s", op, (long long)g->ci, b);
    bool too_big = false, empty = false;
    for (int i = 0; i < 3; i++) {
        g->o[i] = conv_out_size(g->sp[i], g->k[i], g->s[i], g->p[i], g->d[i]);
        too_big |= g->o[i] == INT64_MAX;
        empty |= g->o[i] < 1;
    }
    if (too_big) {
        oar_format_shape(xs + 2, nsp, a, sizeof a);
        oar_format_shape(g->p + lead, nsp, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one from input %s and "
                                        "padding %s", op, a, b);
    }
    if (empty) {
        int64_t in[3], k[3];
        for (int i = 0; i < 3; i++) {
            in[i] = sat64((wide)g->sp[i] + 2 * (wide)g->p[i]);
            k[i] = sat64((wide)g->d[i] * (g->k[i] - 1) + 1);
        }
        oar_format_shape(in + lead, nsp, a, sizeof a);
        oar_format_shape(k + lead, nsp, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected the padded input %s to be at least as large as the "
                                        "dilated kernel %s; use a smaller kernel or dilation, or more padding",
                         op, a, b);
    }
    return OAR_OK;
}

oar_status oar_conv_take_grid(const char *op, const oar_tensor *gy, int nsp, oar_conv_geom *g, const char *xn) {
    const int lead = 3 - nsp;
    bool fits = true;
    for (int i = 0; i < nsp; i++) fits &= gy->shape[2 + i] <= g->o[lead + i];
    if (!fits) {
        char a[64], b[64];
        oar_format_shape(g->o + lead, nsp, a, sizeof a);
        oar_format_shape(gy->shape + 2, nsp, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad's spatial size to be at most the conv output %s of %s, "
                                        "got %s", op, a, xn, b);
    }
    for (int i = 0; i < nsp; i++) g->o[lead + i] = gy->shape[2 + i];
    return OAR_OK;
}

oar_status oar_conv_check_ndim(const char *op, const oar_tensor *t, const char *name, int nd, const char *layout) {
    if (t->ndim == nd) return OAR_OK;
    char s[128];
    oar_format_shape(t->shape, t->ndim, s, sizeof s);
    bool unbatched = nd >= 4 && t->ndim == nd - 1 && !strcmp(name, "x");
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s to be %d-d %s, got shape %s%s", op, name, nd, layout, s,
                     unbatched ? "; add a batch dim with oar_unsqueeze(x, 0)" : "");
}

oar_status oar_conv_check_dtypes(const char *op, oar_tensor *const *in, int n, const char *const *names) {
    for (int i = 0; i < n; i++) {
        if (!in[i]) continue;
        oar_status st = oar_check_float(op, in[i], names[i]);
        if (st != OAR_OK) return st;
        if (in[i]->dtype != in[0]->dtype)
            return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have %s's dtype %s, got %s; convert it with "
                                            "oar_cast", op, names[i], names[0], oar_dtype_name(in[0]->dtype),
                             oar_dtype_name(in[i]->dtype));
    }
    return OAR_OK;
}

oar_status oar_conv_check_bias(const char *op, const oar_tensor *b, int64_t channels) {
    if (!b || (b->ndim == 1 && b->shape[0] == channels)) return OAR_OK;
    char s[128];
    oar_format_shape(b->shape, b->ndim, s, sizeof s);
    return oar_error(OAR_ERR_SHAPE, "%s: expected bias of shape [%lld] (one per output channel), got %s", op,
                     (long long)channels, s);
}

/* ---- the reference loop nest, in double */
/* Visits every (output position, weight tap) pair that lands inside x; the map decides which
 * of the three operands accumulates. */
static void conv_nest(oar_conv_map m, const oar_conv_geom *g, double *x, double *w, double *y) {
    int64_t cig = g->ci / g->groups, cog = g->co / g->groups;
    const int64_t *sp = g->sp, *k = g->k, *o = g->o, *s = g->s, *p = g->p, *d = g->d;
    int64_t xplane = sp[0] * sp[1] * sp[2], kvol = k[0] * k[1] * k[2];
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t co = 0; co < g->co; co++) {
            int64_t c0 = co / cog * cig;
            double *yc = y + (n * g->co + co) * o[0] * o[1] * o[2];
            for (int64_t oz = 0; oz < o[0]; oz++)
                for (int64_t oy = 0; oy < o[1]; oy++)
                    for (int64_t ox = 0; ox < o[2]; ox++) {
                        double *yo = yc + (oz * o[1] + oy) * o[2] + ox;
                        for (int64_t ci = 0; ci < cig; ci++) {
                            double *xc = x + (n * g->ci + c0 + ci) * xplane, *wc = w + (co * cig + ci) * kvol;
                            for (int64_t kz = 0; kz < k[0]; kz++) {
                                int64_t iz = oz * s[0] - p[0] + kz * d[0];
                                if (iz < 0 || iz >= sp[0]) continue;
                                for (int64_t ky = 0; ky < k[1]; ky++) {
                                    int64_t iy = oy * s[1] - p[1] + ky * d[1];
                                    if (iy < 0 || iy >= sp[1]) continue;
                                    for (int64_t kx = 0; kx < k[2]; kx++) {
                                        int64_t ix = ox * s[2] - p[2] + kx * d[2];
                                        if (ix < 0 || ix >= sp[2]) continue;
                                        double *xi = xc + (iz * sp[1] + iy) * sp[2] + ix;
                                        double *wk = wc + (kz * k[1] + ky) * k[2] + kx;
                                        switch (m) {
                                        case OAR_CONV_FORWARD: *yo += *xi * *wk; break;
                                        case OAR_CONV_GRAD_INPUT: *xi += *yo * *wk; break;
                                        case OAR_CONV_GRAD_WEIGHT: *wk += *yo * *xi; break;
                                        }
                                    }
                                }
                            }
                        }
                    }
        }
}

/* A tensor as a double array: f64 data in place, other float types converted. */
static double *dbuf_get(const oar_tensor *t, bool load) {
    if (t->dtype == OAR_F64) return (double *)oar_tensor_ptr(t);
    double *p = oar_alloc(sizeof(double) * (size_t)t->numel);
    if (!p || !load) return p;
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    const char *src = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) p[i] = tr->load(src + i * (int64_t)tr->size);
    return p;
}

static void dbuf_put(double *p, const oar_tensor *t, bool store) {
    if (t->dtype == OAR_F64) return;
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    char *dst = oar_tensor_ptr(t);
    if (store)
        for (int64_t i = 0; i < t->numel; i++) tr->store(dst + i * (int64_t)tr->size, p[i]);
    oar_free(p, sizeof(double) * (size_t)t->numel);
}

oar_status oar_conv_ref_run(oar_conv_map m, const oar_conv_geom *g, oar_tensor *x, oar_tensor *w, oar_tensor *y,
                            const oar_tensor *bias) {
    oar_tensor *t[3] = {x, w, y};
    int oi = m == OAR_CONV_FORWARD ? 2 : m == OAR_CONV_GRAD_INPUT ? 0 : 1;
    if (t[oi]->numel == 0) return OAR_OK;
    double *d[3] = {0};
    oar_status st = OAR_OK;
    for (int i = 0; i < 3 && st == OAR_OK; i++)
        if (!(d[i] = dbuf_get(t[i], i != oi))) st = OAR_ERR_OOM;
    if (st == OAR_OK) {
        oar_tensor *o = t[oi];
        memset(d[oi], 0, sizeof(double) * (size_t)o->numel);
        if (bias) {
            const oar_dtype_traits *tr = &oar_dtypes[bias->dtype];
            int64_t ch = o->shape[1], plane = o->numel / (o->shape[0] * ch);
            for (int64_t i = 0; i < o->numel; i++)
                d[oi][i] = tr->load(oar_tensor_ptr(bias) + (i / plane % ch) * (int64_t)tr->size);
        }
        conv_nest(m, g, d[0], d[1], d[2]);
    }
    for (int i = 0; i < 3; i++)
        if (d[i]) dbuf_put(d[i], t[i], st == OAR_OK && i == oi);
    return st;
}

oar_tensor *oar_conv_dense(oar_tensor *t) { return t && !t->contiguous ? oar_contiguous(t) : t; }

oar_status oar_conv_grads_done(const oar_grad_ctx *g) {
    for (int i = 0; i < g->n_in; i++)
        if (g->needs[i] && g->in[i] && !g->gin[i])
            return oar_last_status() != OAR_OK ? oar_last_status()
                                               : oar_error(OAR_ERR_INTERNAL, "conv: a gradient rule produced no "
                                                                             "gradient; please report this");
    return OAR_OK;
}
