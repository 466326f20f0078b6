/* Quantization-aware training (docs/quant.md). oar_qat_prepare rewrites each Linear and Conv2d of a
 * module (minus the ones the rule keeps in fp32) in place into a layer that trains through fake
 * quantization:
 *
 *   weight: fake_quant per output channel, symmetric i8, scale = max|w[c]| / 127.5 recomputed from
 *           the current weight at every call (what the PTQ rewrite's minmax weight observer gives);
 *   input:  fake_quant per tensor, symmetric u8 (zero point 128), scale = a moving average of the
 *           batches' abs-max scales, PaddleSlim's moving_average_abs_max with its bias correction:
 *           sum = r * sum + s_batch, count = r * count + 1, scale = sum / count (r the momentum).
 *
 * Gradients pass straight through fake_quant (where not clamped); the scales are computed with
 * gradients off. Everything is ops, the moving-average write included (ema_update with momentum 1
 * stores the new value), so a traced training step (oar_jit_to_static) updates the buffers as the
 * eager step does, and NaN/Inf in a layer's input fails choose_qparams in both modes. In
 * evaluation mode the stored average is used, not updated.
 *
 * Options: 7-bit weights (scale max|w[c]| / 63, as the PTQ rewrite's 7-bit scale) and 7-bit inputs
 * (reduce_range: u8 [0, 127], zero point 64); fuse_bn (ConvBn-fused, qat_bn.c): a conv followed by
 * its BatchNorm2d fake-quantizes the folded weight w * f and divides its output by f, torch's ConvBn2d.
 *
 * oar_qat_convert exports the module (the layers back to plain Linear/Conv2d, fusions off) and
 * hands the program to the static PTQ rewrite (program.c) with the learned activation scales in
 * place of calibration: the int8 program is the one PTQ makes for those scales. */
#include "nn/layers_util.h"
#include "nn/module.h"
#include "oar/quant.h"
#include "quant/program.h"
#include "quant/qat_bn.h"

#include "graph/serialize.h"
#include "ops/ema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct qat_layer {
    const oar_module_ops *orig; /* the layer's own ops and state, given back by convert */
    void *orig_state;
    bool conv;
    oar_conv_opts co;
    double momentum;            /* weight of the old average */
    bool learned;               /* oar_qat_learn_scales: the input scale is the parameter "act_scale" (LSQ) */
    int weight_bits;            /* 8, or 7: weights within [-63, 63] */
    bool reduce_range;          /* input on u8 [0, 127] with zero point 64, else [0, 255] with 128 */
    oar_module *bn;             /* ConvBn-fused: the BatchNorm2d after the conv, folded into the weight */
    char path[128];
} qat_layer;

#define QAT_EPS 1.1920929e-07 /* FLT_EPSILON: the least scale, as oar_qparams_from_range */

/* The input's scale: updated from this batch in training, the stored average in evaluation. */
static oar_tensor *act_scale(oar_module *m, const qat_layer *q, oar_tensor *x) {
    oar_tensor *sum = oar_module_local(m, "act_scale_sum"), *cnt = oar_module_local(m, "act_scale_count");
    if (!m->training) {
        if (!oar_is_tracing() && *(const float *)oar_data(cnt) <= 0) {
            oar_error(OAR_ERR_STATE, "qat: layer %s: expected a trained activation scale, got none (the layer never "
                                     "ran in training mode); train at least one step before evaluating",
                      q->path);
            return NULL;
        }
        return oar_div(sum, cnt);
    }
    oar_tensor *sb, *zb;
    if (oar_choose_qparams(x, OAR_U8, true, &sb, &zb) != OAR_OK) return NULL; /* NaN/Inf: an error */
    if (q->reduce_range) sb = oar_mul_scalar(sb, 127.5 / 63.5); /* abs-max / 63.5: the 7-bit range */
    oar_tensor *nsum = oar_add(oar_mul_scalar(sum, q->momentum), sb);
    oar_tensor *ncnt = oar_add_scalar(oar_mul_scalar(cnt, q->momentum), 1.0);
    oar_tensor *s = nsum && ncnt ? oar_div(nsum, ncnt) : NULL;
    if (!s || oar_ema_update_(sum, nsum, 1.0, 1.0) != OAR_OK || oar_ema_update_(cnt, ncnt, 1.0, 1.0) != OAR_OK)
        return NULL;
    return s;
}

/* A learned scale: the parameter; training still checks the input for NaN/Inf (choose_qparams). */
static oar_tensor *learned_check(oar_module *m, oar_tensor *x) {
    oar_tensor *s, *z;
    if (m->training && oar_choose_qparams(x, OAR_U8, true, &s, &z) != OAR_OK) return NULL;
    return oar_module_local(m, "act_scale");
}

/* The weight's per-output-channel scale: max |w[c]| / 127.5, at least QAT_EPS (the minmax weight
 * observer's); for 7 bits times 127.5 / 63 in float, as the PTQ rewrite scales it. */
static oar_tensor *weight_scale(oar_tensor *w, int bits) {
    int dims[OAR_MAX_DIMS], nd = 0;
    for (int d = 1; d < oar_ndim(w); d++) dims[nd++] = d;
    oar_tensor *s = oar_maximum_scalar(oar_div_scalar(oar_amax(oar_abs(w), dims, nd, false), 127.5), QAT_EPS);
    return bits == 7 ? oar_mul_scalar(s, (double)(127.5f / 63.0f)) : s;
}

static oar_status qat_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const qat_layer *q = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight"), *b = oar_module_local(m, "bias");
    if ((st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    oar_tensor *f = NULL; /* ConvBn: the fold factor; the weight fake-quantized is the folded w * f */
    if (q->bn) {
        int64_t co = oar_shape(w)[0], s4[4] = {co, 1, 1, 1};
        if (!(f = oar_qat_bn_factor(q->bn)) || !(w = oar_mul(w, oar_reshape(f, s4, 4)))) {
            oar_error_prefix("qat: layer %s", q->path);
            return oar_last_status();
        }
    }
    bool grad = oar_set_grad_enabled(false);
    oar_tensor *xs = q->learned ? learned_check(m, x) : act_scale(m, q, x), *ws = xs ? weight_scale(w, q->weight_bits) : NULL;
    oar_set_grad_enabled(grad);
    int64_t xzp = q->reduce_range ? 64 : 128, xmax = q->reduce_range ? 127 : 255;
    oar_tensor *xz = oar_scalar((double)xzp, OAR_I32), *wz = oar_zeros((int64_t[]){oar_shape(w)[0]}, 1, OAR_I32);
    oar_tensor *xq = NULL;
    if (xs && ws && q->learned) { /* LSQ's gradient scale 1 / sqrt(features * qmax), per sample (batch-free) */
        int64_t per = oar_ndim(x) > 1 && oar_shape(x)[0] ? oar_numel(x) / oar_shape(x)[0] : oar_numel(x);
        oar_tensor *zf = oar_scalar((double)xzp, OAR_F32);
        xq = oar_fake_quant_lsq(x, xs, zf, 0, xmax, 1.0 / sqrt((double)(per ? per : 1) * (double)xmax));
        oar_release(zf);
    } else if (xs && ws) {
        xq = oar_fake_quant(x, xs, xz, 0, 0, xmax);
    }
    int64_t wmax = q->weight_bits == 7 ? 63 : 127;
    oar_tensor *wq = xq ? oar_fake_quant(w, ws, wz, 0, -wmax - 1, wmax) : NULL;
    oar_release(xz);
    oar_release(wz);
    if (wq && f) { /* conv(x, fq(w f)) / f + b: BN (the next module) sees the unfolded scale */
        int64_t s4[4] = {1, oar_shape(w)[0], 1, 1};
        out[0] = oar_div(oar_conv2d(xq, wq, NULL, &q->co), oar_reshape(f, s4, 4));
        if (out[0] && b) out[0] = oar_add(out[0], oar_reshape(b, s4, 4));
    } else if (wq) {
        out[0] = q->conv ? oar_conv2d(xq, wq, b, &q->co) : oar_linear(xq, wq, b);
    }
    if (!wq || !out[0]) {
        oar_error_prefix("qat: layer %s", q->path);
        return oar_last_status();
    }
    return OAR_OK;
}

static void qat_destroy(void *state) {
    qat_layer *q = state;
    if (q->orig->destroy) q->orig->destroy(q->orig_state);
    free(q);
}

static int qat_describe(const oar_module *m, char *buf, size_t size) {
    const qat_layer *q = m->state;
    const char *in = q->reduce_range ? "u8 [0, 127]" : "u8";
    if (q->learned)
        return snprintf(buf, size, "fake-quant weight %d-bit per channel, input %s learned scale (LSQ)", q->weight_bits,
                        in);
    return snprintf(buf, size, "fake-quant weight %d-bit per channel%s, input %s moving abs-max (momentum %g)",
                    q->weight_bits, q->bn ? " folded with the next BatchNorm2d" : "", in, q->momentum);
}

static const oar_module_ops QAT_LINEAR_OPS = {"QATLinear", qat_forward, qat_destroy, qat_describe};
static const oar_module_ops QAT_CONV_OPS = {"QATConv2d", qat_forward, qat_destroy, qat_describe};

static bool is_qat(const oar_module *m) { return m->ops == &QAT_LINEAR_OPS || m->ops == &QAT_CONV_OPS; }

/* ---- the layers of a module, in module order */
typedef struct qat_ref {
    oar_module *m;
    char path[128];
} qat_ref;

typedef bool (*qat_pick)(const oar_module *m);
static bool pick_plain(const oar_module *m) {
    const char *type = oar_module_type(m);
    return !strcmp(type, "Linear") || (!strcmp(type, "Conv2d") && oar_layer_conv2d_opts(m));
}

static void collect(oar_module *m, const char *path, qat_pick pick, qat_ref *t, int *n, int cap) {
    if (pick(m)) {
        if (*n < cap) {
            t[*n].m = m;
            snprintf(t[*n].path, sizeof t[*n].path, "%s", path);
        }
        (*n)++;
    }
    for (int i = 0; i < m->n_children; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", m->children[i].name);
        collect(m->children[i].module, p, pick, t, n, cap);
    }
}

static bool in_list(const char *path, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(*list, path)) return true;
    return false;
}

#define QAT_MAX 1024

static oar_status install(oar_module *m, const char *path, double momentum, int bits, bool reduce, oar_module *bn) {
    qat_layer *q = calloc(1, sizeof *q);
    if (!q) return oar_error(OAR_ERR_OOM, "qat_prepare: out of memory");
    const oar_conv_opts *co = oar_layer_conv2d_opts(m);
    *q = (qat_layer){.orig = m->ops, .orig_state = m->state, .conv = co != NULL, .momentum = momentum,
                      .weight_bits = bits, .reduce_range = reduce, .bn = bn};
    if (co) q->co = *co;
    snprintf(q->path, sizeof q->path, "%s", path);
    oar_tensor *sum = oar_scalar(0, OAR_F32), *cnt = oar_scalar(0, OAR_F32);
    oar_status st = sum && cnt ? oar_module_add_buffer(m, "act_scale_sum", sum) : oar_last_status();
    if (st == OAR_OK) st = oar_module_add_buffer(m, "act_scale_count", cnt);
    oar_release(sum);
    oar_release(cnt);
    if (st != OAR_OK) {
        free(q);
        return st;
    }
    m->state = q;
    m->ops = q->conv ? &QAT_CONV_OPS : &QAT_LINEAR_OPS;
    return OAR_OK;
}

oar_status oar_qat_prepare(oar_module *m, const oar_qat_opts *opts, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "qat_prepare: expected a module, got NULL");
    oar_qat_opts o = opts ? *opts : (oar_qat_opts){0};
    double r = o.momentum ? o.momentum : 0.9;
    if (!(r > 0 && r < 1))
        return oar_error(OAR_ERR_INVALID_ARG, "qat_prepare: expected a momentum in (0, 1) (the old average's weight; "
                                              "0 means 0.9), got %g", o.momentum);
    int bits = o.weight_bits ? o.weight_bits : 8;
    if (bits != 7 && bits != 8)
        return oar_error(OAR_ERR_INVALID_ARG, "qat_prepare: expected weight_bits 8 (or 0) or 7 (CPUs without VNNI), "
                                              "got %d", o.weight_bits);
    qat_ref *t = calloc(QAT_MAX, sizeof *t);
    if (!t) return oar_error(OAR_ERR_OOM, "qat_prepare: out of memory");
    int n = 0, n_all = 0;
    collect(m, "", is_qat, t, &n, QAT_MAX);
    oar_status st = OAR_OK;
    if (n) {
        st = oar_error(OAR_ERR_STATE, "qat_prepare: expected a module not yet prepared, got one whose layer %s is "
                                      "already %s; prepare once (train it, or convert it with oar_qat_convert)",
                       *t[0].path ? t[0].path : "(the module itself)", oar_module_type(t[0].m));
        goto done;
    }
    collect(m, "", pick_plain, t, &n_all, QAT_MAX);
    if (n_all > QAT_MAX) {
        st = oar_error(OAR_ERR_UNSUPPORTED, "qat_prepare: expected at most %d Linear and Conv2d layers, got %d",
                       QAT_MAX, n_all);
        goto done;
    }
    for (int i = 0; i < n_all; i++) { /* the rule of PTQ: sensitive layers stay fp32 */
        bool keep = (o.keep_first && i == 0) || (o.keep_last && i == n_all - 1) || in_list(t[i].path, o.skip);
        if (!keep) t[n++] = t[i];
    }
    if (!n) {
        st = oar_error(OAR_ERR_INVALID_ARG, "qat_prepare: expected a Linear or Conv2d to quantize in %s, found %d, "
                                            "all kept in fp32 or none", oar_module_type(m), n_all);
        goto done;
    }
    int fused = 0;
    for (int i = 0; i < n && o.fuse_bn; i++) fused += oar_qat_bn_after(t[i].m) != NULL;
    if (o.fuse_bn && !fused) {
        st = oar_error(OAR_ERR_INVALID_ARG, "qat_prepare: expected (for fuse_bn) a Conv2d followed by a BatchNorm2d of "
                                            "its output channels among the same parent's children, found none in %s "
                                            "(%d layers to quantize); prepare without fuse_bn", oar_module_type(m), n);
        goto done;
    }
    for (int i = 0; i < n && st == OAR_OK; i++) {
        oar_module *bn = o.fuse_bn ? oar_qat_bn_after(t[i].m) : NULL;
        if ((st = install(t[i].m, t[i].path, r, bits, o.reduce_range, bn)) == OAR_OK && n_layers) (*n_layers)++;
    }
done:
    free(t);
    return st;
}

/* The QAT layers of m, in module order (at most cap; returns how many there are). */
static int qat_layers(oar_module *m, qat_ref *t, int cap) {
    int n = 0;
    collect(m, "", is_qat, t, &n, cap);
    return n;
}

oar_status oar_qat_scales(oar_module *m, char (*names)[128], float *scales, int cap, int *n_layers) {
    *n_layers = 0;
    qat_ref *t = calloc(QAT_MAX, sizeof *t);
    if (!t) return oar_error(OAR_ERR_OOM, "qat: out of memory");
    int n = qat_layers(m, t, QAT_MAX);
    oar_status st = OAR_OK;
    if (!n)
        st = oar_error(OAR_ERR_STATE, "qat: expected a module prepared with oar_qat_prepare, got %s with no "
                                      "QAT layer; prepare it and train it first", oar_module_type(m));
    oar_scope_begin();
    for (int i = 0; i < n && i < cap && st == OAR_OK; i++) {
        oar_module *l = t[i].m;
        if (((const qat_layer *)l->state)->learned) {
            scales[i] = *(const float *)oar_data(oar_module_local(l, "act_scale"));
            snprintf(names[i], 128, "%s", t[i].path);
            (*n_layers)++;
            continue;
        }
        if (*(const float *)oar_data(oar_module_local(l, "act_scale_count")) <= 0) {
            st = oar_error(OAR_ERR_STATE, "qat: layer %s: expected a trained activation scale, got none (the "
                                          "layer never ran in training mode); train at least one step first",
                           t[i].path);
            break;
        }
        oar_tensor *s = oar_div(oar_module_local(l, "act_scale_sum"), oar_module_local(l, "act_scale_count"));
        if (!s) st = oar_last_status();
        else scales[i] = *(const float *)oar_data(s);
        snprintf(names[i], 128, "%s", t[i].path);
        (*n_layers)++;
    }
    oar_scope_end();
    free(t);
    return st;
}

oar_status oar_qat_learn_scales(oar_module *m, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "qat_learn_scales: expected a module, got NULL");
    qat_ref *t = calloc(QAT_MAX, sizeof *t);
    char (*names)[128] = calloc(QAT_MAX, sizeof *names);
    float *scales = calloc(QAT_MAX, sizeof *scales);
    int n = 0;
    oar_status st = t && names && scales ? OAR_OK : oar_error(OAR_ERR_OOM, "qat: out of memory");
    if (st == OAR_OK) n = qat_layers(m, t, QAT_MAX);
    for (int i = 0; i < n && st == OAR_OK; i++)
        if (((const qat_layer *)t[i].m->state)->learned)
            st = oar_error(OAR_ERR_STATE, "qat_learn_scales: expected moving-average scales, got layer %s's already "
                                          "learnable; call it once", t[i].path);
    int ns = 0; /* every layer has its average (trained) before anything changes */
    if (st == OAR_OK && (st = oar_qat_scales(m, names, scales, QAT_MAX, &ns)) != OAR_OK)
        oar_error_prefix("qat_learn_scales");
    for (int i = 0; i < n && st == OAR_OK; i++) {
        oar_tensor *p = oar_scalar(scales[i], OAR_F32);
        if (!p || (st = oar_module_add_parameter(t[i].m, "act_scale", p)) != OAR_OK) {
            if (!p) st = oar_last_status();
            break;
        }
        oar_release(p);
        ((qat_layer *)t[i].m->state)->learned = true;
        if (n_layers) (*n_layers)++;
    }
    free(t);
    free(names);
    free(scales);
    return st;
}

oar_status oar_qat_freeze_bn(oar_module *m, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "qat_freeze_bn: expected a module, got NULL");
    qat_ref *t = calloc(QAT_MAX, sizeof *t);
    if (!t) return oar_error(OAR_ERR_OOM, "qat: out of memory");
    int n = qat_layers(m, t, QAT_MAX), fused = 0;
    oar_status st = OAR_OK;
    for (int i = 0; i < n; i++) fused += ((const qat_layer *)t[i].m->state)->bn != NULL;
    if (!fused)
        st = oar_error(OAR_ERR_STATE, "qat_freeze_bn: expected a module prepared with fuse_bn (conv and BatchNorm "
                                      "fused), got %s with %d QAT layers and no fused BatchNorm; prepare it with "
                                      "oar_qat_opts.fuse_bn", oar_module_type(m), n);
    for (int i = 0; i < n && st == OAR_OK; i++) {
        oar_module *bn = ((const qat_layer *)t[i].m->state)->bn;
        if (bn && (st = oar_qat_bn_freeze(bn)) == OAR_OK && n_layers) (*n_layers)++;
    }
    free(t);
    return st;
}

/* Gives the QAT layers their own ops back (plain Linear/Conv2d) or the QAT ones again. */
static void swap_ops(qat_ref *t, int n, qat_layer **held, bool plain) {
    for (int i = 0; i < n; i++) {
        oar_module *l = t[i].m;
        if (plain) {
            held[i] = l->state;
            l->ops = held[i]->orig;
            l->state = held[i]->orig_state;
        } else {
            l->ops = held[i]->conv ? &QAT_CONV_OPS : &QAT_LINEAR_OPS;
            l->state = held[i];
        }
    }
}

static oar_status forward_fn(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in;
    (void)n_out;
    return oar_forward_n(user, in, 1, out, 1);
}

/* Exports m (its QAT layers plain) at path, traced on x with a dynamic batch. */
static oar_status export_plain(oar_module *m, oar_tensor *x, const oar_qat_convert_opts *o, const char *path) {
    oar_input_spec spec = {.dtype = oar_dtype_of(x), .ndim = oar_ndim(x), .name = o->input_name};
    for (int d = 0; d < spec.ndim; d++) spec.shape[d] = d ? oar_shape(x)[d] : -1;
    const char *out_name = o->output_name;
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1, .output_names = out_name ? &out_name : NULL,
                       .n_output_names = out_name ? 1 : 0, .module = m};
    oar_quant_export_strategy(&jo.strategy);
    oar_jit *f = oar_jit_to_static(forward_fn, m, &jo);
    if (!f) return oar_last_status();
    oar_tensor *y = NULL;
    oar_status st = oar_jit_call(f, &x, 1, &y, 1);
    if (st == OAR_OK) st = oar_jit_save(f, path);
    oar_release(y);
    oar_jit_free(f);
    return st;
}

static void remove_model(const char *path) {
    static const char *const suffix[] = {".json", ".safetensors"};
    for (int i = 0; i < 2; i++) {
        char *f = oar_model_file(path, suffix[i]);
        if (f) remove(f);
        free(f);
    }
}

oar_status oar_qat_convert(oar_module *m, oar_tensor *const *batches, int n_batches, const char *out_path,
                           const oar_qat_convert_opts *opts, oar_quant_layer *layers, int cap, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m || !out_path)
        return oar_error(OAR_ERR_INVALID_ARG, "qat_convert: expected a module and an output path, got %s",
                         m ? "no output path" : "no module");
    if (n_batches < 1 || !batches || !batches[0])
        return oar_error(OAR_ERR_INVALID_ARG, "qat_convert: expected at least one batch (it shapes the exported "
                                              "input and measures each layer's output SQNR), got %d", n_batches);
    oar_qat_convert_opts o = opts ? *opts : (oar_qat_convert_opts){0};
    qat_ref *t = calloc(QAT_MAX, sizeof *t);
    char (*names)[128] = calloc(QAT_MAX, sizeof *names);
    float *scales = calloc(QAT_MAX, sizeof *scales);
    int32_t *zps = calloc(QAT_MAX, sizeof *zps);
    const char **name_ptrs = calloc(QAT_MAX, sizeof *name_ptrs);
    qat_layer **held = calloc(QAT_MAX, sizeof *held);
    oar_program *p = NULL;
    int n = 0;
    bool exported = false;
    oar_status st = OAR_OK;
    if (!t || !names || !scales || !zps || !name_ptrs || !held) st = oar_error(OAR_ERR_OOM, "qat: out of memory");
    if (st == OAR_OK) st = oar_qat_scales(m, names, scales, QAT_MAX, &n);
    if (st != OAR_OK) goto done;
    int nq = qat_layers(m, t, QAT_MAX), bits = 8;
    for (int i = 0; i < n; i++) {
        const qat_layer *q = t[i].m->state;
        zps[i] = q->reduce_range ? 64 : 128, name_ptrs[i] = names[i];
        bits = q->weight_bits; /* one width for the module (prepare's) */
    }
    bool training = oar_module_is_training(m);
    oar_module_train(m, false);
    swap_ops(t, nq, held, true);
    st = export_plain(m, batches[0], &o, out_path);
    swap_ops(t, nq, held, false);
    oar_module_train(m, training);
    if (st != OAR_OK) goto done;
    exported = true;
    oar_program_io io;
    if (!(p = oar_program_load_io(out_path, &io))) {
        st = oar_last_status();
        goto done;
    }
    oar_quant_given g = {.names = name_ptrs, .scales = scales, .zero_points = zps, .n = n, .weight_bits = bits};
    st = oar_quant_program_given(p, batches, n_batches, &g, layers, cap, n_layers);
    if (st == OAR_OK) st = oar_program_save(p, out_path, io.input_names, io.output_names);
done:
    if (st != OAR_OK && exported) remove_model(out_path); /* nothing is left when anything failed */
    if (st != OAR_OK) oar_error_prefix("qat_convert");
    oar_program_free(p);
    free(held);
    free(t);
    free(names);
    free(scales);
    free(zps);
    free(name_ptrs);
    return st;
}
