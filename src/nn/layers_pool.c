/* Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d over [N, C, H, W] or [C, H, W].
 * The options are checked and resolved at construction (stride 0 becomes the kernel size,
 * dilation 0 becomes 1) so mistakes surface when the model is built, not at the first batch. */
#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct pool_cfg {
    bool max;
    oar_pool_opts opts;
} pool_cfg;

static oar_status pool_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const pool_cfg *c = m->state;
    out[0] = c->max ? oar_max_pool2d(in[0], &c->opts) : oar_avg_pool2d(in[0], &c->opts);
    return out[0] ? OAR_OK : oar_last_status();
}

/* torch prints an int when a pair was given as one, a tuple otherwise. */
static int put_pair(char *buf, size_t size, const int64_t *v) {
    if (v[0] == v[1]) return snprintf(buf, size, "%lld", (long long)v[0]);
    return snprintf(buf, size, "(%lld, %lld)", (long long)v[0], (long long)v[1]);
}

/* torch's fields; for average pooling also the flags that differ from torch's defaults, which
 * torch's own repr leaves out. */
static int pool_describe(const oar_module *m, char *buf, size_t size) {
    const pool_cfg *c = m->state;
    const oar_pool_opts *o = &c->opts;
    char k[48], s[48], p[48], d[48];
    put_pair(k, sizeof k, o->kernel);
    put_pair(s, sizeof s, o->stride);
    put_pair(p, sizeof p, o->padding);
    if (c->max) {
        put_pair(d, sizeof d, o->dilation);
        return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=%s", k, s, p, d,
                        oar_layer_bool(o->ceil_mode));
    }
    return snprintf(buf, size, "kernel_size=%s, stride=%s, padding=%s%s%s", k, s, p,
                    o->ceil_mode ? ", ceil_mode=true" : "", o->exclude_pad ? ", count_include_pad=false" : "");
}

static const oar_module_ops max_pool_ops = {"MaxPool2d", pool_forward, free, pool_describe};
static const oar_module_ops avg_pool_ops = {"AvgPool2d", pool_forward, free, pool_describe};

static oar_module *pool_new(const oar_module_ops *ops, bool max, const oar_pool_opts *o) {
    const char *who = ops->type_name;
    if (!o) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected options with the kernel size, got NULL opts", who);
        return NULL;
    }
    pool_cfg c = {.max = max, .opts = *o};
    for (int i = 0; i < 2; i++) {
        if (o->kernel[i] < 1 || o->stride[i] < 0 || o->padding[i] < 0 || o->dilation[i] < 0) {
            oar_error(OAR_ERR_INVALID_ARG, "%s: expected kernel >= 1 and stride, padding, dilation >= 0 (0 stride "
                                           "means the kernel size), got kernel %lld, stride %lld, padding %lld, "
                                           "dilation %lld in dim %d", who, (long long)o->kernel[i],
                      (long long)o->stride[i], (long long)o->padding[i], (long long)o->dilation[i], i);
            return NULL;
        }
        if (!max && o->dilation[i] > 1) {
            oar_error(OAR_ERR_INVALID_ARG, "AvgPool2d: expected dilation 0 or 1 (average pooling has none), got %lld",
                      (long long)o->dilation[i]);
            return NULL;
        }
        if (2 * o->padding[i] > o->kernel[i]) {
            oar_error(OAR_ERR_INVALID_ARG, "%s: expected padding at most half the kernel size, got padding %lld for "
                                           "kernel %lld in dim %d", who, (long long)o->padding[i],
                      (long long)o->kernel[i], i);
            return NULL;
        }
        c.opts.stride[i] = o->stride[i] ? o->stride[i] : o->kernel[i];
        c.opts.dilation[i] = o->dilation[i] ? o->dilation[i] : 1;
    }
    return oar_layer_new(ops, &c, sizeof c);
}

oar_module *oar_nn_max_pool2d(const oar_pool_opts *opts) { return pool_new(&max_pool_ops, true, opts); }
oar_module *oar_nn_avg_pool2d(const oar_pool_opts *opts) { return pool_new(&avg_pool_ops, false, opts); }

/* ---- AdaptiveAvgPool2d: a fixed output size whatever the input's */

typedef struct adaptive_cfg {
    int64_t size[2];
} adaptive_cfg;

static oar_status adaptive_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const adaptive_cfg *c = m->state;
    out[0] = oar_adaptive_avg_pool2d(in[0], c->size[0], c->size[1]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int adaptive_describe(const oar_module *m, char *buf, size_t size) {
    char s[48];
    put_pair(s, sizeof s, ((const adaptive_cfg *)m->state)->size);
    return snprintf(buf, size, "output_size=%s", s);
}

static const oar_module_ops adaptive_ops = {"AdaptiveAvgPool2d", adaptive_forward, free, adaptive_describe};

oar_module *oar_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w) {
    if (out_h < 1 || out_w < 1) {
        oar_error(OAR_ERR_INVALID_ARG, "AdaptiveAvgPool2d: expected an output size of at least 1x1, got %lldx%lld",
                  (long long)out_h, (long long)out_w);
        return NULL;
    }
    return oar_layer_new(&adaptive_ops, &(adaptive_cfg){{out_h, out_w}}, sizeof(adaptive_cfg));
}
