/* Convolution layers: Conv1d, Conv2d, ConvTranspose2d. One configuration and one forward serve
 * all three; the options are resolved once at construction (zeros become torch's defaults), so
 * describe prints what forward uses. Like torch, an unbatched input ([C, L] or [C, H, W]) is
 * run as a batch of one. */
#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct conv_cfg {
    int nsp;          /* spatial dims: 1 or 2 */
    bool transposed, bias;
    int64_t in, out, kernel;
    oar_conv_opts opts; /* resolved: stride, dilation and groups at least 1 */
} conv_cfg;

static oar_status conv_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const conv_cfg *c = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight"), *b = oar_module_local(m, "bias");
    bool batched = x->ndim == c->nsp + 2;
    if ((!batched && x->ndim != c->nsp + 1) || x->shape[batched ? 1 : 0] != c->in) {
        char s[128];
        return oar_error(OAR_ERR_SHAPE, "%s: expected an input of shape %s (in_channels = %lld), got %s; check the "
                                        "layer's in_channels and that the input is channels-first",
                         oar_module_type(m), c->nsp == 1 ? "[N, C, L] or [C, L]" : "[N, C, H, W] or [C, H, W]",
                         (long long)c->in, oar_layer_shape_str(x, s, sizeof s));
    }
    if ((st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    oar_tensor *xb = batched ? x : oar_unsqueeze(x, 0);
    oar_tensor *y = c->transposed ? oar_conv_transpose2d(xb, w, b, &c->opts)
                  : c->nsp == 1   ? oar_conv1d(xb, w, b, &c->opts)
                                  : oar_conv2d(xb, w, b, &c->opts);
    if (!batched) {
        oar_release(xb);
        oar_tensor *ys = oar_squeeze(y, 0);
        oar_release(y);
        y = ys;
    }
    out[0] = y;
    return y ? OAR_OK : oar_last_status();
}

/* "(3, 3)" for 2-d layers, "(3,)" for 1-d, as Python prints tuples. */
static int put_pair(char *buf, size_t size, int nsp, const int64_t *v) {
    if (nsp == 1) return snprintf(buf, size, "(%lld,)", (long long)v[0]);
    return snprintf(buf, size, "(%lld, %lld)", (long long)v[0], (long long)v[1]);
}

static bool all_equal(const int64_t *v, int n, int64_t want) {
    for (int i = 0; i < n; i++)
        if (v[i] != want) return false;
    return true;
}

/* torch's extra_repr: channels, kernel and stride always; the rest when not the default. */
static int conv_describe(const oar_module *m, char *buf, size_t size) {
    const conv_cfg *c = m->state;
    const oar_conv_opts *o = &c->opts;
    char p[64];
    int64_t k[2] = {c->kernel, c->kernel};
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    put_pair(p, sizeof p, c->nsp, k);
    PUT("%lld, %lld, kernel_size=%s", (long long)c->in, (long long)c->out, p);
    put_pair(p, sizeof p, c->nsp, o->stride);
    PUT(", stride=%s", p);
    if (!all_equal(o->padding, c->nsp, 0)) {
        put_pair(p, sizeof p, c->nsp, o->padding);
        PUT(", padding=%s", p);
    }
    if (!all_equal(o->dilation, c->nsp, 1)) {
        put_pair(p, sizeof p, c->nsp, o->dilation);
        PUT(", dilation=%s", p);
    }
    if (!all_equal(o->output_padding, c->nsp, 0)) {
        put_pair(p, sizeof p, c->nsp, o->output_padding);
        PUT(", output_padding=%s", p);
    }
    if (o->groups != 1) PUT(", groups=%lld", (long long)o->groups);
    if (!c->bias) PUT(", bias=false");
#undef PUT
    return (int)n;
}

static const oar_module_ops conv1d_ops = {"Conv1d", conv_forward, free, conv_describe};
static const oar_module_ops conv2d_ops = {"Conv2d", conv_forward, free, conv_describe};
static const oar_module_ops convt2d_ops = {"ConvTranspose2d", conv_forward, free, conv_describe};

/* Validates and resolves the options into c->opts; the message names the layer. */
static oar_status resolve_opts(const char *who, conv_cfg *c, const oar_conv_opts *o) {
    static const oar_conv_opts none;
    if (!o) o = &none;
    if (c->in < 1 || c->out < 1 || c->kernel < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected in_channels, out_channels and kernel_size >= 1, got %lld, "
                                              "%lld and %lld", who, (long long)c->in, (long long)c->out,
                         (long long)c->kernel);
    for (int i = 0; i < c->nsp; i++) {
        if (o->stride[i] < 0 || o->padding[i] < 0 || o->dilation[i] < 0 || o->output_padding[i] < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected stride, padding, dilation and output_padding >= 0 "
                                                  "(0 stride or dilation means 1), got %lld, %lld, %lld and %lld in "
                                                  "dim %d", who, (long long)o->stride[i], (long long)o->padding[i],
                             (long long)o->dilation[i], (long long)o->output_padding[i], i);
        c->opts.stride[i] = o->stride[i] ? o->stride[i] : 1;
        c->opts.padding[i] = o->padding[i];
        c->opts.dilation[i] = o->dilation[i] ? o->dilation[i] : 1;
        c->opts.output_padding[i] = o->output_padding[i];
        if (!c->transposed && o->output_padding[i])
            return oar_error(OAR_ERR_INVALID_ARG, "%s: output_padding applies to transposed convolutions only, got "
                                                  "%lld in dim %d; set it to 0", who, (long long)o->output_padding[i], i);
        if (c->transposed && c->opts.output_padding[i] >= c->opts.stride[i] &&
            c->opts.output_padding[i] >= c->opts.dilation[i])
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected output_padding smaller than stride or dilation, got "
                                                  "%lld with stride %lld and dilation %lld in dim %d", who,
                             (long long)c->opts.output_padding[i], (long long)c->opts.stride[i],
                             (long long)c->opts.dilation[i], i);
    }
    if (o->groups < 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected groups >= 1 (0 means 1), got %lld", who,
                         (long long)o->groups);
    c->opts.groups = o->groups ? o->groups : 1;
    if (c->in % c->opts.groups || c->out % c->opts.groups)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected in_channels (%lld) and out_channels (%lld) divisible by "
                                              "groups (%lld)", who, (long long)c->in, (long long)c->out,
                         (long long)c->opts.groups);
    return OAR_OK;
}

static oar_module *conv_new(const oar_module_ops *ops, conv_cfg c, const oar_conv_opts *opts) {
    if (resolve_opts(ops->type_name, &c, opts) != OAR_OK) return NULL;
    oar_module *m = oar_layer_new(ops, &c, sizeof c);
    if (!m) return NULL;
    /* torch's layouts: [out, in/groups, k...], transposed [in, out/groups, k...] */
    int64_t shape[4] = {c.transposed ? c.in : c.out, (c.transposed ? c.out : c.in) / c.opts.groups, c.kernel, c.kernel};
    int64_t bias_shape = c.out;
    oar_tensor *w = oar_layer_tensor(m, "weight", shape, 2 + c.nsp, OAR_F32, true);
    oar_tensor *b = c.bias && w ? oar_layer_tensor(m, "bias", &bias_shape, 1, OAR_F32, true) : NULL;
    if (!w || (c.bias && !b) || oar_layer_init_fan_in(w, b) != OAR_OK) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

oar_module *oar_nn_conv1d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts, bool bias) {
    return conv_new(&conv1d_ops, (conv_cfg){.nsp = 1, .bias = bias, .in = in, .out = out, .kernel = kernel}, opts);
}

oar_module *oar_nn_conv2d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts, bool bias) {
    return conv_new(&conv2d_ops, (conv_cfg){.nsp = 2, .bias = bias, .in = in, .out = out, .kernel = kernel}, opts);
}

oar_module *oar_nn_conv_transpose2d(int64_t in, int64_t out, int64_t kernel, const oar_conv_opts *opts, bool bias) {
    return conv_new(&convt2d_ops,
                    (conv_cfg){.nsp = 2, .transposed = true, .bias = bias, .in = in, .out = out, .kernel = kernel}, opts);
}

/* The resolved options (stride, padding, dilation, groups) of a Conv2d, for passes that rewrite
 * it (quantization); NULL for any other module. */
const oar_conv_opts *oar_layer_conv2d_opts(const oar_module *m) {
    return m && m->ops == &conv2d_ops ? &((const conv_cfg *)m->state)->opts : NULL;
}
