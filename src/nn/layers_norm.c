/* Normalization layers: BatchNorm1d/2d, LayerNorm, GroupNorm, with torch's parameters,
 * buffers and defaults (weight ones, bias zeros, running_mean zeros, running_var ones,
 * num_batches_tracked an i64 scalar). */
#include "nn/layers_util.h"
#include "ops/dispatch.h"

#include "ops/batch_norm_factor.h"
#include "ops/increment.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- BatchNorm: batch statistics in training (updating the running ones), running
 * statistics in evaluation; without tracked statistics, batch statistics always. */

typedef struct bn_cfg {
    int nsp; /* 1: BatchNorm1d ([N, C] or [N, C, L]), 2: BatchNorm2d ([N, C, H, W]) */
    int64_t features;
    double eps, momentum; /* momentum < 0: cumulative average (torch's momentum=None) */
    bool affine, track;
} bn_cfg;

static oar_status bn_check_input(const oar_module *m, const bn_cfg *c, const oar_tensor *x) {
    bool rank_ok = c->nsp == 1 ? (x->ndim == 2 || x->ndim == 3) : x->ndim == 4;
    if (rank_ok && x->shape[1] == c->features) return OAR_OK;
    char s[128];
    long long f = (long long)c->features;
    if (c->nsp == 1)
        return oar_error(OAR_ERR_SHAPE, "%s: expected an input of shape [N, %lld] or [N, %lld, L] (num_features = "
                                        "%lld), got %s", oar_module_type(m), f, f, f, oar_layer_shape_str(x, s, sizeof s));
    return oar_error(OAR_ERR_SHAPE, "%s: expected an input of shape [N, %lld, H, W] (num_features = %lld), got %s",
                     oar_module_type(m), f, f, oar_layer_shape_str(x, s, sizeof s));
}

static oar_status bn_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const bn_cfg *c = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight"), *b = oar_module_local(m, "bias");
    if ((st = bn_check_input(m, c, x)) != OAR_OK || (st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    oar_tensor *rm = oar_module_local(m, "running_mean"), *rv = oar_module_local(m, "running_var");
    oar_tensor *nbt = oar_module_local(m, "num_batches_tracked");
    bool batch_stats = m->training || !c->track;
    bool update = m->training && c->track;
    double momentum = c->momentum;
    if (update) {
        if (nbt->numel != 1 || !(OAR_INT_DTYPES & OAR_DTYPE_BIT(nbt->dtype)))
            return oar_error(OAR_ERR_STATE, "%s: expected num_batches_tracked to be one integer, got %s of %lld "
                                            "elements; load an i64 scalar into it", oar_module_type(m),
                             oar_dtype_name(nbt->dtype), (long long)nbt->numel);
    }
    /* with momentum < 0 the op reads the factor 1 / (count + 1) from the counter at run time,
     * so a compiled step computes its own step's factor, exactly as eager mode does */
    oar_tensor *counter = update && momentum < 0 ? nbt : NULL;
    /* rm and rv are NULL without tracking; with it they are updated (training) or used (eval) */
    out[0] = oar_batch_norm_counted(x, w, b, rm, rv, counter, batch_stats, update ? momentum : 0.0, c->eps);
    if (!out[0]) return oar_last_status();
    /* counted only once the step has happened, so a failed call changes nothing; an op rather
     * than a host store, so a compiled training step counts too */
    if (update && (st = oar_increment_(nbt)) != OAR_OK) return st;
    return OAR_OK;
}

static int bn_describe(const oar_module *m, char *buf, size_t size) {
    const bn_cfg *c = m->state;
    char eps[32], mom[32];
    oar_layer_pyfloat(c->eps, eps, sizeof eps);
    if (c->momentum < 0) snprintf(mom, sizeof mom, "None");
    else oar_layer_pyfloat(c->momentum, mom, sizeof mom);
    return snprintf(buf, size, "%lld, eps=%s, momentum=%s, affine=%s, track_running_stats=%s", (long long)c->features,
                    eps, mom, oar_layer_bool(c->affine), oar_layer_bool(c->track));
}

static const oar_module_ops bn1d_ops = {"BatchNorm1d", bn_forward, free, bn_describe};
static const oar_module_ops bn2d_ops = {"BatchNorm2d", bn_forward, free, bn_describe};

static oar_status fill_ones(oar_tensor *t) { return t ? oar_init_constant_(t, 1.0) : oar_last_status(); }

static oar_module *bn_new(const oar_module_ops *ops, bn_cfg c) {
    const char *who = ops->type_name;
    if (c.features < 1 || !(c.eps >= 0) || !(c.momentum <= 1) || isinf(c.eps)) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected num_features >= 1, eps >= 0 and momentum in [0, 1] (or negative "
                                       "for a cumulative average, torch's momentum=None), got %lld, %g and %g",
                  who, (long long)c.features, c.eps, c.momentum);
        return NULL;
    }
    if (c.momentum < 0) c.momentum = -1;
    oar_module *m = oar_layer_new(ops, &c, sizeof c);
    if (!m) return NULL;
    bool ok = true;
    if (c.affine) {
        ok = fill_ones(oar_layer_tensor(m, "weight", &c.features, 1, OAR_F32, true)) == OAR_OK &&
             oar_layer_tensor(m, "bias", &c.features, 1, OAR_F32, true);
    }
    if (ok && c.track) {
        ok = oar_layer_tensor(m, "running_mean", &c.features, 1, OAR_F32, false) &&
             fill_ones(oar_layer_tensor(m, "running_var", &c.features, 1, OAR_F32, false)) == OAR_OK &&
             oar_layer_tensor(m, "num_batches_tracked", NULL, 0, OAR_I64, false);
    }
    if (!ok) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

oar_module *oar_nn_batch_norm1d(int64_t features, double eps, double momentum, bool affine, bool track) {
    return bn_new(&bn1d_ops, (bn_cfg){1, features, eps, momentum, affine, track});
}

bool oar_layer_batch_norm2d_cfg(const oar_module *m, int64_t *features, double *eps) {
    if (!m || m->ops != &bn2d_ops || !((const bn_cfg *)m->state)->track) return false;
    *features = ((const bn_cfg *)m->state)->features;
    *eps = ((const bn_cfg *)m->state)->eps;
    return true;
}

oar_module *oar_nn_batch_norm2d(int64_t features, double eps, double momentum, bool affine, bool track) {
    return bn_new(&bn2d_ops, (bn_cfg){2, features, eps, momentum, affine, track});
}

/* ---- LayerNorm: per-sample statistics over the trailing normalized_shape dims */

typedef struct ln_cfg {
    int ndim;
    int64_t shape[OAR_MAX_DIMS];
    double eps;
    bool affine;
} ln_cfg;

static oar_status ln_forward_add(oar_module *m, oar_tensor *const *in, oar_tensor **out);

static oar_status ln_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (n_in == 2 && n_out == 2 && in) return ln_forward_add(m, in, out);
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const ln_cfg *c = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight");
    if (x->ndim < c->ndim || memcmp(x->shape + x->ndim - c->ndim, c->shape, sizeof(int64_t) * (size_t)c->ndim)) {
        char want[128], got[128];
        oar_format_shape(c->shape, c->ndim, want, sizeof want);
        return oar_error(OAR_ERR_SHAPE, "LayerNorm: expected an input whose last dims are %s (normalized_shape), got "
                                        "%s", want, oar_layer_shape_str(x, got, sizeof got));
    }
    if ((st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    out[0] = oar_layer_norm(x, c->ndim, w, oar_module_local(m, "bias"), c->eps);
    return out[0] ? OAR_OK : oar_last_status();
}

/* Two inputs a, b, two outputs: y = LayerNorm(a + b) and the sum (a pre-LN transformer's residual
 * stream), by add_layer_norm, whose kernels make one pass over each row for both (the unfused
 * ops' bits), when a and b have one shape and dtype; otherwise by add and the one-input form.
 * Under autocast a GPU input takes the unfused path: there add keeps bf16 operands bf16 where
 * the mixed class would cast both to f32. */
static oar_status ln_forward_add(oar_module *m, oar_tensor *const *in, oar_tensor **out) {
    const ln_cfg *c = m->state;
    oar_tensor *a = in[0], *b = in[1];
    if (!a || !b) {
        if (oar_last_status() != OAR_OK) return oar_last_status();
        return oar_error(OAR_ERR_INVALID_ARG, "LayerNorm: expected two input tensors (a, b: normalizes a + b), got NULL");
    }
    bool fused = a->dtype == b->dtype && a->ndim == b->ndim && a->ndim >= c->ndim &&
                 !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) && oar_dtype_is_float(a->dtype) &&
                 (a->device == OAR_CPU || !oar_amp_active);
    if (!fused) {
        oar_tensor *s = oar_add(a, b);
        if (!s) return oar_last_status();
        out[0] = NULL;
        oar_status st = ln_forward(m, &s, 1, out, 1);
        out[1] = st == OAR_OK ? s : NULL;
        return st;
    }
    oar_tensor *w = oar_module_local(m, "weight");
    if (memcmp(a->shape + a->ndim - c->ndim, c->shape, sizeof(int64_t) * (size_t)c->ndim)) {
        char want[128], got[128];
        oar_format_shape(c->shape, c->ndim, want, sizeof want);
        return oar_error(OAR_ERR_SHAPE, "LayerNorm: expected inputs whose last dims are %s (normalized_shape), got "
                                        "%s", want, oar_layer_shape_str(a, got, sizeof got));
    }
    oar_status st = oar_layer_check_dtype(m, a, w);
    if (st != OAR_OK) return st;
    oar_attr at[2] = {oar_attr_int(c->ndim), oar_attr_float(c->eps)};
    oar_tensor *args[4] = {a, b, w, oar_module_local(m, "bias")}, *r[OAR_MAX_OUTPUTS];
    int n = OAR_MAX_OUTPUTS;
    if ((st = oar_op_call(OAR_OP_add_layer_norm, args, 4, at, r, &n)) != OAR_OK) return st;
    for (int i = 2; i < n; i++) oar_tensor_unref(r[i]); /* mean, rstd: kept by the autograd node */
    out[0] = oar_track(r[1]);
    out[1] = oar_track(r[0]);
    return OAR_OK;
}

static int ln_describe(const oar_module *m, char *buf, size_t size) {
    const ln_cfg *c = m->state;
    char eps[32];
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    PUT("(");
    for (int i = 0; i < c->ndim; i++) PUT("%s%lld", i ? ", " : "", (long long)c->shape[i]);
    PUT("%s), eps=%s, elementwise_affine=%s", c->ndim == 1 ? "," : "", oar_layer_pyfloat(c->eps, eps, sizeof eps),
        oar_layer_bool(c->affine));
#undef PUT
    return (int)n;
}

static const oar_module_ops ln_ops = {"LayerNorm", ln_forward, free, ln_describe};

oar_module *oar_nn_layer_norm(const int64_t *shape, int ndim, double eps, bool affine) {
    if (ndim < 1 || ndim > OAR_MAX_DIMS || !shape) {
        oar_error(OAR_ERR_INVALID_ARG, "LayerNorm: expected a normalized_shape of 1 to %d dims, got %d%s",
                  OAR_MAX_DIMS, ndim, shape ? "" : " (shape NULL)");
        return NULL;
    }
    ln_cfg c = {.ndim = ndim, .eps = eps, .affine = affine};
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 1) {
            oar_error(OAR_ERR_INVALID_ARG, "LayerNorm: expected normalized_shape sizes >= 1, got %lld in dim %d",
                      (long long)shape[i], i);
            return NULL;
        }
        c.shape[i] = shape[i];
    }
    if (!(eps >= 0) || isinf(eps)) {
        oar_error(OAR_ERR_INVALID_ARG, "LayerNorm: expected a finite eps >= 0, got %g", eps);
        return NULL;
    }
    oar_module *m = oar_layer_new(&ln_ops, &c, sizeof c);
    if (m && affine &&
        (fill_ones(oar_layer_tensor(m, "weight", c.shape, ndim, OAR_F32, true)) != OAR_OK ||
         !oar_layer_tensor(m, "bias", c.shape, ndim, OAR_F32, true))) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- GroupNorm: per-sample statistics over groups of channels */

typedef struct gn_cfg {
    int64_t groups, channels;
    double eps;
    bool affine;
} gn_cfg;

static oar_status gn_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const gn_cfg *c = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight");
    if (x->ndim < 2 || x->shape[1] != c->channels) {
        char s[128];
        return oar_error(OAR_ERR_SHAPE, "GroupNorm: expected an input of shape [N, %lld, ...] (num_channels = %lld), "
                                        "got %s", (long long)c->channels, (long long)c->channels,
                         oar_layer_shape_str(x, s, sizeof s));
    }
    if ((st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    out[0] = oar_group_norm(x, c->groups, w, oar_module_local(m, "bias"), c->eps);
    return out[0] ? OAR_OK : oar_last_status();
}

static int gn_describe(const oar_module *m, char *buf, size_t size) {
    const gn_cfg *c = m->state;
    char eps[32];
    return snprintf(buf, size, "%lld, %lld, eps=%s, affine=%s", (long long)c->groups, (long long)c->channels,
                    oar_layer_pyfloat(c->eps, eps, sizeof eps), oar_layer_bool(c->affine));
}

static const oar_module_ops gn_ops = {"GroupNorm", gn_forward, free, gn_describe};

oar_module *oar_nn_group_norm(int64_t groups, int64_t channels, double eps, bool affine) {
    if (groups < 1 || channels < 1 || channels % groups) {
        oar_error(OAR_ERR_INVALID_ARG, "GroupNorm: expected num_groups >= 1 dividing num_channels, got %lld groups "
                                       "for %lld channels", (long long)groups, (long long)channels);
        return NULL;
    }
    if (!(eps >= 0) || isinf(eps)) {
        oar_error(OAR_ERR_INVALID_ARG, "GroupNorm: expected a finite eps >= 0, got %g", eps);
        return NULL;
    }
    oar_module *m = oar_layer_new(&gn_ops, &(gn_cfg){groups, channels, eps, affine}, sizeof(gn_cfg));
    if (m && affine &&
        (fill_ones(oar_layer_tensor(m, "weight", &channels, 1, OAR_F32, true)) != OAR_OK ||
         !oar_layer_tensor(m, "bias", &channels, 1, OAR_F32, true))) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}
