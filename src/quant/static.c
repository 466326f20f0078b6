/* Static post-training quantization of a model's Linear and Conv2d layers. Calibration batches
 * run through the model while each target layer's input goes through an observer of the chosen
 * kind; then each layer is rewritten in place: weights i8 (symmetric, per output channel), the
 * input's scale and zero point fixed as buffers ("input_scale", "input_zero_point"), and forward
 * = quantize with those, then qlinear / qconv2d with int32 sums and the bias in the epilogue,
 * giving f32. Sensitive layers stay fp32 by rule: the first and the last target (in module
 * order) when asked, and any path in the skip list.
 * This is the module-level form: each int8 layer quantizes its input and dequantizes its output,
 * so the fp32 activations between layers (ReLU, pooling) stay as they are. */
#include "nn/layers_util.h"
#include "nn/module.h"
#include "ops/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the quantized layers */
static oar_status sq_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out, bool conv) {
    if (n_in != 1 || n_out != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 1 input and 1 output, got %d and %d", oar_module_type(m),
                         n_in, n_out);
    oar_tensor *s = oar_module_local(m, "input_scale"), *z = oar_module_local(m, "input_zero_point");
    oar_tensor *w = oar_module_local(m, "weight"), *ws = oar_module_local(m, "weight_scale");
    oar_tensor *b = oar_module_local(m, "bias");
    oar_tensor *q = oar_quantize(in[0], s, z, 0, OAR_U8);
    if (!q) return oar_last_status();
    out[0] = conv ? oar_qconv2d(q, s, z, w, ws, b, (const oar_conv_opts *)m->state, NULL)
                  : oar_qlinear(q, s, z, w, ws, b, NULL);
    return out[0] ? OAR_OK : oar_last_status();
}
static oar_status sq_linear_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return sq_forward(m, in, n_in, out, n_out, false);
}
static oar_status sq_conv_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    return sq_forward(m, in, n_in, out, n_out, true);
}
static int sq_describe(const oar_module *m, char *buf, size_t size) {
    oar_tensor *s = oar_module_local((oar_module *)m, "input_scale"), *w = oar_module_local((oar_module *)m, "weight");
    return snprintf(buf, size, "weight=i8 %s, input scale %.4g", oar_ndim(w) == 4 ? "[out, in, kh, kw]" : "[out, in]",
                    (double)*(const float *)oar_tensor_ptr(s));
}
static const oar_module_ops SQ_LINEAR_OPS = {"QuantizedLinear", sq_linear_forward, free, sq_describe};
static const oar_module_ops SQ_CONV_OPS = {"QuantizedConv2d", sq_conv_forward, free, sq_describe};

/* ---- calibration: the target layers' forwards are wrapped to observe their inputs */
typedef struct target {
    oar_module *m;
    const oar_module_ops *ops; /* the original */
    oar_observer *obs;
    char path[128];
    bool conv;
} target;

typedef struct calib {
    target *t;
    int n;
} calib;

static _Thread_local calib *g_calib; /* the calibration running on this thread */

static oar_status observe_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    for (int i = 0; g_calib && i < g_calib->n; i++)
        if (g_calib->t[i].m == m) {
            target *t = &g_calib->t[i];
            oar_status st = n_in >= 1 ? oar_observer_observe(t->obs, in[0]) : OAR_OK;
            if (st != OAR_OK) {
                oar_error_prefix("quantize_static: layer %s", t->path);
                return st;
            }
            return t->ops->forward(m, in, n_in, out, n_out);
        }
    return oar_error(OAR_ERR_INTERNAL, "quantize_static: a calibration hook outlived its calibration");
}

static bool in_list(const char *path, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(*list, path)) return true;
    return false;
}

static void collect(oar_module *m, const char *path, target *t, int *n, int cap) {
    const char *type = oar_module_type(m);
    bool lin = !strcmp(type, "Linear"), conv = !strcmp(type, "Conv2d") && oar_layer_conv2d_opts(m);
    if ((lin || conv) && *n < cap) {
        t[*n] = (target){.m = m, .ops = m->ops, .conv = conv};
        snprintf(t[*n].path, sizeof t[*n].path, "%s", path);
        (*n)++;
    }
    for (int i = 0; i < m->n_children; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", m->children[i].name);
        collect(m->children[i].module, p, t, n, cap);
    }
}

/* Quantizes layer t's weight (per output channel) and installs the int8 forward. */
static oar_status convert(target *t, oar_quant_layer *info) {
    oar_module *m = t->m;
    oar_tensor *w = oar_module_local(m, "weight"), *is = NULL, *iz = NULL, *s = NULL, *z = NULL, *q = NULL;
    if (!w || oar_dtype_of(w) != OAR_F32)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_static: layer %s: expected an f32 weight", t->path);
    oar_observer *wo = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                          .per_channel = true, .axis = 0});
    oar_status st = wo ? oar_observer_observe(wo, w) : oar_last_status();
    if (st == OAR_OK) st = oar_observer_qparams(wo, &s, &z);
    oar_observer_free(wo);
    if (st == OAR_OK) st = oar_observer_qparams(t->obs, &is, &iz);
    if (st == OAR_OK && !(q = oar_quantize(w, s, z, 0, OAR_I8))) st = oar_last_status();
    if (st == OAR_OK) st = oar_sqnr(w, oar_dequantize(q, s, z, 0), &info->weight_sqnr_db);
    if (st != OAR_OK) {
        oar_error_prefix("quantize_static: layer %s", t->path);
        return st;
    }
    info->weights = oar_numel(w);
    info->scale_min = info->scale_max = *(const float *)oar_tensor_ptr(is); /* the input's scale */
    snprintf(info->type, sizeof info->type, "%s", t->conv ? "Conv2d" : "Linear");
    oar_conv_opts co = t->conv ? *oar_layer_conv2d_opts(m) : (oar_conv_opts){0};
    void *state = NULL;
    if (t->conv && !(state = malloc(sizeof co))) return oar_error(OAR_ERR_OOM, "quantize_static: out of memory");
    if ((st = oar_module_remove_local(m, "weight")) == OAR_OK &&
        (st = oar_module_add_buffer(m, "weight", oar_detach(q))) == OAR_OK &&
        (st = oar_module_add_buffer(m, "weight_scale", oar_detach(s))) == OAR_OK &&
        (st = oar_module_add_buffer(m, "input_scale", oar_detach(is))) == OAR_OK)
        st = oar_module_add_buffer(m, "input_zero_point", oar_detach(iz));
    if (t->conv) { /* the conv's options become the state (Conv2d's own config is freed) */
        memcpy(state, &co, sizeof co);
        if (t->ops->destroy) t->ops->destroy(m->state);
        m->state = state;
    }
    m->ops = t->conv ? &SQ_CONV_OPS : &SQ_LINEAR_OPS;
    return st;
}

#define MAX_TARGETS 1024

oar_status oar_quantize_static(oar_module *m, oar_tensor *const *batches, int n_batches,
                               const oar_quant_static_opts *opts, oar_quant_layer *layers, int cap, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "quantize_static: expected a module, got NULL");
    if (opts && opts->weight_bits && opts->weight_bits != 8)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_static: expected weight_bits 8 (or 0) for a module, got %d; "
                         "%d-bit weights are for programs (oar_quantize_static_model)", opts->weight_bits,
                         opts->weight_bits);
    if (oar_module_is_training(m))
        return oar_error(OAR_ERR_STATE, "quantize_static: expected a model in evaluation mode, got one in training "
                                        "mode; call oar_module_train(m, false) first");
    if (n_batches < 1 || !batches)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_static: expected at least one calibration batch, got %d; "
                                              "activation ranges cannot be known without data", n_batches);
    oar_quant_static_opts o = opts ? *opts : (oar_quant_static_opts){0};
    const char *kind = o.observer ? o.observer : "minmax";
    target *all = calloc(MAX_TARGETS, sizeof(target));
    if (!all) return oar_error(OAR_ERR_OOM, "quantize_static: out of memory");
    int n_all = 0, n = 0;
    collect(m, "", all, &n_all, MAX_TARGETS);
    for (int i = 0; i < n_all; i++) { /* the rule: sensitive layers stay fp32 */
        bool keep = (o.keep_first && i == 0) || (o.keep_last && i == n_all - 1) || in_list(all[i].path, o.skip);
        if (!keep) all[n++] = all[i];
    }
    oar_status st = OAR_OK;
    if (!n) {
        st = oar_error(OAR_ERR_INVALID_ARG, "quantize_static: expected a Linear or Conv2d to quantize in %s, found %d, "
                                            "all kept in fp32 or none", oar_module_type(m), n_all);
        goto done;
    }
    oar_observer_opts oo = o.observer_opts;
    oo.per_channel = false; /* one scale per activation tensor */
    for (int i = 0; i < n && st == OAR_OK; i++)
        if (!(all[i].obs = oar_observer_create(kind, &oo))) st = oar_last_status();
    if (st != OAR_OK) goto done;
    static const oar_module_ops observing = {"Observing", observe_forward, NULL, NULL};
    calib c = {all, n};
    g_calib = &c;
    for (int i = 0; i < n; i++) all[i].m->ops = &observing;
    bool grad = oar_set_grad_enabled(false);
    for (int b = 0; b < n_batches && st == OAR_OK; b++) {
        oar_scope_begin();
        if (!oar_forward(m, batches[b])) {
            st = oar_last_status();
            oar_error_prefix("quantize_static: calibration batch %d", b);
        }
        oar_scope_end();
    }
    oar_set_grad_enabled(grad);
    for (int i = 0; i < n; i++) all[i].m->ops = all[i].ops;
    g_calib = NULL;
    oar_scope_begin();
    for (int i = 0; i < n && st == OAR_OK; i++) { /* every observer has data before anything changes */
        oar_tensor *s, *z;
        if ((st = oar_observer_qparams(all[i].obs, &s, &z)) != OAR_OK)
            oar_error_prefix("quantize_static: layer %s (never reached by the calibration batches?)", all[i].path);
    }
    for (int i = 0; i < n && st == OAR_OK; i++) {
        oar_quant_layer info = {0};
        snprintf(info.name, sizeof info.name, "%s", all[i].path);
        st = convert(&all[i], &info);
        if (st == OAR_OK && layers && i < cap) layers[i] = info;
        if (st == OAR_OK && n_layers) (*n_layers)++;
    }
    oar_scope_end();
done:
    for (int i = 0; i < n; i++) oar_observer_free(all[i].obs);
    free(all);
    return st;
}
