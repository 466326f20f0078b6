/* Dynamic post-training quantization: every Linear of a model gets int8 weights (symmetric,
 * per output row by default, as torch's default dynamic qconfig) and, at each call, quantizes
 * its input to u8 over that batch's range, runs qlinear (int32 sums, exact) and gives f32.
 * The layer is rewritten in place (the model's own forward keeps calling it): its f32 "weight"
 * parameter becomes an i8 buffer "weight" beside an f32 buffer "weight_scale", so the quantized
 * model's state saves and loads by name like any other. The forward is ops only
 * (choose_qparams, quantize, qlinear), so it runs eagerly and traced alike.
 * Embedding tables (on request) become i8 rows with one scale per row, dequantized as looked up.
 * LSTM and GRU layers (as torch's quantize_dynamic does) get i8 input-to-hidden and
 * hidden-to-hidden weights and run nn/rnn_qlayer.c: gate products in int8, activations
 * quantized per call, nonlinearities in f32. */
#include "nn/module.h"
#include "nn/rnn.h"
#include "ops/quant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the quantized layer */
static oar_status dq_linear_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (n_in != 1 || n_out != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "DynamicQuantizedLinear: expected 1 input and 1 output, got %d and %d",
                         n_in, n_out);
    oar_tensor *w = oar_module_local(m, "weight"), *ws = oar_module_local(m, "weight_scale");
    oar_tensor *x = in[0], *s, *z;
    if (oar_dtype_of(x) != OAR_F32)
        return oar_error(OAR_ERR_DTYPE, "DynamicQuantizedLinear: expected an f32 input, got %s",
                         oar_dtype_name(oar_dtype_of(x)));
    oar_status st = oar_choose_qparams(x, OAR_U8, false, &s, &z);
    if (st != OAR_OK) return st;
    oar_tensor *q = oar_quantize(x, s, z, 0, OAR_U8);
    out[0] = q ? oar_qlinear(q, s, z, w, ws, oar_module_local(m, "bias"), NULL) : NULL;
    return out[0] ? OAR_OK : oar_last_status();
}

/* The weights' width is read off them: 8-bit symmetric quantization reaches +-127 on each
 * row's largest weight, 7-bit stays within [-63, 63]. */
static int dq_linear_describe(const oar_module *m, char *buf, size_t size) {
    oar_tensor *w = oar_module_local((oar_module *)m, "weight"), *ws = oar_module_local((oar_module *)m, "weight_scale");
    const int8_t *q = (const int8_t *)oar_tensor_ptr(w);
    bool w7 = true;
    for (int64_t i = 0; i < oar_numel(w); i++) w7 &= q[i] >= -63 && q[i] <= 63;
    return snprintf(buf, size, "in_features=%lld, out_features=%lld, weight=i8%s, %s", (long long)oar_shape(w)[1],
                    (long long)oar_shape(w)[0], w7 ? " within [-63, 63] (7-bit)" : "",
                    oar_ndim(ws) ? "per-channel" : "per-tensor");
}

static const oar_module_ops DQ_LINEAR_OPS = {"DynamicQuantizedLinear", dq_linear_forward, free, dq_linear_describe};

/* An Embedding table of i8 rows, one symmetric scale per row: the rows picked, times their scales. */
static oar_status q_embedding_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (n_in != 1 || n_out != 1)
        return oar_error(OAR_ERR_INVALID_ARG, "QuantizedEmbedding: expected 1 input and 1 output, got %d and %d", n_in,
                         n_out);
    oar_tensor *w = oar_module_local(m, "weight"), *ws = oar_module_local(m, "weight_scale");
    oar_tensor *rows = oar_embedding(w, in[0]), *scales = rows ? oar_embedding(oar_unsqueeze(ws, 1), in[0]) : NULL;
    out[0] = scales ? oar_mul(oar_cast(rows, OAR_F32), scales) : NULL;
    return out[0] ? OAR_OK : oar_last_status();
}

static int q_embedding_describe(const oar_module *m, char *buf, size_t size) {
    oar_tensor *w = oar_module_local((oar_module *)m, "weight");
    return snprintf(buf, size, "%lld, %lld, weight=i8 per row", (long long)oar_shape(w)[0], (long long)oar_shape(w)[1]);
}

static const oar_module_ops Q_EMBEDDING_OPS = {"QuantizedEmbedding", q_embedding_forward, free, q_embedding_describe};

/* ---- the pass */
#define MAX_TARGETS 1024

typedef struct target {
    oar_module *m;
    char path[128];
} target;

static bool skipped(const char *path, const char *const *skip) {
    for (; skip && *skip; skip++)
        if (!strcmp(*skip, path)) return true;
    return false;
}

static void collect(oar_module *m, const char *path, const oar_quant_dynamic_opts *o, target *t, int *n) {
    const char *type = oar_module_type(m);
    bool rnn = oar_rnn_info(m, NULL, NULL, NULL) && (!strcmp(type, "LSTM") || !strcmp(type, "GRU")); /* not yet int8 */
    bool want = !strcmp(type, "Linear") || rnn || (o->embeddings && !strcmp(type, "Embedding"));
    if (want && !skipped(path, o->skip) && *n < MAX_TARGETS) {
        t[*n].m = m;
        snprintf(t[*n].path, sizeof t[*n].path, "%s", path);
        (*n)++;
    }
    for (int i = 0; i < m->n_children && !rnn; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s%s%s", path, *path ? "." : "", m->children[i].name);
        collect(m->children[i].module, p, o, t, n);
    }
}

oar_status oar_sqnr(oar_tensor *ref, oar_tensor *approx, double *db) {
    if (!ref || !approx || !db || oar_numel(ref) != oar_numel(approx))
        return oar_error(OAR_ERR_INVALID_ARG, "sqnr: expected two tensors of one size and a result pointer");
    int64_t n = oar_numel(ref);
    double *a = malloc(sizeof(double) * (size_t)(n ? n : 1)), *b = malloc(sizeof(double) * (size_t)(n ? n : 1));
    oar_status st = a && b ? OAR_OK : oar_error(OAR_ERR_OOM, "sqnr: out of memory");
    if (st == OAR_OK) st = oar_copy_to_buffer(ref, a, sizeof(double) * (size_t)n, OAR_F64);
    if (st == OAR_OK) st = oar_copy_to_buffer(approx, b, sizeof(double) * (size_t)n, OAR_F64);
    if (st == OAR_OK) {
        double sig = 0, err = 0;
        for (int64_t i = 0; i < n; i++) {
            sig += a[i] * a[i];
            err += (a[i] - b[i]) * (a[i] - b[i]);
        }
        *db = err > 0 ? 10 * log10(sig / err) : INFINITY;
    }
    free(a);
    free(b);
    return st;
}

/* m's weight name is f32, 2-D, on the CPU (path: m's place in the model, for the message). */
static oar_status check_weight(oar_module *m, const char *path, const char *name) {
    oar_tensor *w = oar_module_local(m, name);
    if (!w || oar_dtype_of(w) != OAR_F32 || oar_ndim(w) != 2 || oar_device_of(w) != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_dynamic: expected %s's %s f32 of 2 dims on the CPU, got %s%s "
                                              "in '%s' (the int8 path takes f32 CPU weights; keep this layer in float "
                                              "with opts.skip); nothing was changed", oar_module_type(m), name,
                         w ? oar_dtype_name(oar_dtype_of(w)) : "none",
                         w && oar_device_of(w) != OAR_CPU ? " on another device" : "", path);
    return OAR_OK;
}

/* Every weight a target would quantize is f32, 2-D, on the CPU: checked before anything changes. */
#define MAX_RNN_LAYERS 64

static oar_status check_layer(oar_module *m, const char *path) {
    int layers;
    if (!oar_rnn_info(m, NULL, &layers, NULL)) return check_weight(m, path, "weight");
    if (layers > MAX_RNN_LAYERS)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_dynamic: expected an %s of at most %d layers, got %d in '%s'; "
                                              "nothing was changed", oar_module_type(m), MAX_RNN_LAYERS, layers, path);
    for (int k = 0; k < 2 * layers; k++) {
        char name[48];
        snprintf(name, sizeof name, "weight_%s_l%d", k % 2 ? "hh" : "ih", k / 2);
        oar_status st = check_weight(m, path, name);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* w (f32, 2-D, CPU) as i8 with symmetric scales, one per row or one for all, in bits (8, or 7:
 * scale amax / 63, as static PTQ's, so values lie within [-63, 63]); its SQNR in dB, and the
 * scales' range folded into info. q and s are tracked in the current scope. */
static oar_status quantize_weight(oar_module *m, const char *name, oar_tensor *w, bool per_tensor, int bits,
                                  oar_tensor **q, oar_tensor **s, oar_quant_layer *info, double *sqnr) {
    oar_status st = check_weight(m, "", name);
    if (st != OAR_OK) return st;
    oar_observer *ob = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                          .per_channel = !per_tensor, .axis = 0});
    if (!ob) return oar_last_status();
    oar_tensor *z = NULL;
    *q = NULL;
    st = oar_observer_observe(ob, w);
    if (st == OAR_OK) st = oar_observer_qparams(ob, s, &z);
    oar_observer_free(ob);
    if (st == OAR_OK && bits == 7) { /* the observer's amax / 127.5 made amax / 63 */
        float *sp = (float *)oar_tensor_ptr(*s);
        for (int64_t i = 0; i < oar_numel(*s); i++) sp[i] *= 127.5f / 63.0f;
    }
    if (st == OAR_OK && !(*q = oar_quantize(w, *s, z, 0, OAR_I8))) st = oar_last_status();
    if (st == OAR_OK) st = oar_sqnr(w, oar_dequantize(*q, *s, z, 0), sqnr);
    if (st != OAR_OK) return st;
    info->weights += oar_numel(w);
    for (int64_t i = 0; i < oar_numel(*s); i++) {
        float v = ((const float *)oar_tensor_ptr(*s))[i];
        info->scale_min = v < info->scale_min ? v : info->scale_min;
        info->scale_max = v > info->scale_max ? v : info->scale_max;
    }
    return OAR_OK;
}

/* Replaces m's f32 tensor name by the i8 buffer q and adds the buffer <scale_name> = s. */
static oar_status swap_weight(oar_module *m, const char *name, const char *scale_name, oar_tensor *q, oar_tensor *s) {
    oar_tensor *qd = oar_detach(q), *sd = oar_detach(s);
    oar_status st = oar_module_remove_local(m, name);
    if (st == OAR_OK) st = oar_module_add_buffer(m, name, qd);
    if (st == OAR_OK) st = oar_module_add_buffer(m, scale_name, sd);
    return st;
}

/* An LSTM or GRU: weight_ih_l{k} and weight_hh_l{k} of every layer become i8 buffers with f32
 * weight_ih_scale_l{k} / weight_hh_scale_l{k} (biases stay f32); the layer then runs
 * oar_rnn_qlayer. info's SQNR is the worst of its matrices. */
static oar_status convert_rnn(oar_module *m, bool per_tensor, int bits, oar_quant_layer *info) {
    oar_rnn_kind kind;
    int layers;
    oar_rnn_info(m, &kind, &layers, NULL);
    enum { MAX_W = 2 * MAX_RNN_LAYERS }; /* check_layer refused more */
    oar_tensor *q[MAX_W], *s[MAX_W];
    char names[MAX_W][48];
    info->weight_sqnr_db = INFINITY;
    for (int k = 0; k < 2 * layers; k++) { /* everything made before anything changes */
        double db = 0;
        snprintf(names[k], sizeof names[k], "weight_%s_l%d", k % 2 ? "hh" : "ih", k / 2);
        oar_status st = quantize_weight(m, names[k], oar_module_local(m, names[k]), per_tensor, bits, &q[k], &s[k], info,
                                       &db);
        if (st != OAR_OK) return st;
        info->weight_sqnr_db = db < info->weight_sqnr_db ? db : info->weight_sqnr_db;
    }
    snprintf(info->type, sizeof info->type, "%s", kind == OAR_RNN_LSTM ? "LSTM" : "GRU");
    for (int k = 0; k < 2 * layers; k++) {
        char scale[64];
        snprintf(scale, sizeof scale, "weight_%s_scale_l%d", k % 2 ? "hh" : "ih", k / 2);
        oar_status st = swap_weight(m, names[k], scale, q[k], s[k]);
        if (st != OAR_OK) return st;
    }
    oar_rnn_set_quantized(m);
    return OAR_OK;
}

/* Quantizes one Linear's (or Embedding's) weight per row, or an LSTM's / GRU's; fills info.
 * The layer changes only once everything is made. */
static oar_status convert_layer(oar_module *m, bool per_tensor, int bits, oar_quant_layer *info) {
    info->scale_min = INFINITY;
    info->scale_max = 0;
    if (oar_rnn_info(m, NULL, NULL, NULL)) return convert_rnn(m, per_tensor, bits, info);
    bool emb = !strcmp(oar_module_type(m), "Embedding");
    per_tensor = per_tensor && !emb; /* a table's rows are independent: always one scale each */
    oar_tensor *q, *s;
    oar_status st = quantize_weight(m, "weight", oar_module_local(m, "weight"), per_tensor, emb ? 8 : bits, &q, &s,
                                    info, &info->weight_sqnr_db);
    if (st != OAR_OK) return st;
    snprintf(info->type, sizeof info->type, "%s", emb ? "Embedding" : "Linear");
    /* the rewrite: after this point only allocation failures remain */
    st = swap_weight(m, "weight", "weight_scale", q, s);
    m->ops = emb ? &Q_EMBEDDING_OPS : &DQ_LINEAR_OPS;
    return st;
}

oar_status oar_quantize_dynamic(oar_module *m, const oar_quant_dynamic_opts *opts, oar_quant_layer *layers, int cap,
                                int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "quantize_dynamic: expected a module, got NULL");
    if (oar_module_is_training(m))
        return oar_error(OAR_ERR_STATE, "quantize_dynamic: expected a model in evaluation mode, got one in training "
                                        "mode; call oar_module_train(m, false) first");
    oar_quant_dynamic_opts o = opts ? *opts : (oar_quant_dynamic_opts){0};
    if (o.weight_bits != 0 && o.weight_bits != 7 && o.weight_bits != 8)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_dynamic: expected weight_bits 8 (or 0) or 7 (CPUs without "
                                              "VNNI; this CPU's choice: %d), got %d; nothing was changed",
                         oar_quant_fast_weight_bits(), o.weight_bits);
    int bits = o.weight_bits ? o.weight_bits : 8;
    target *t = malloc(sizeof(target) * MAX_TARGETS);
    if (!t) return oar_error(OAR_ERR_OOM, "quantize_dynamic: out of memory");
    int n = 0;
    collect(m, "", &o, t, &n);
    if (!n) {
        free(t);
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_dynamic: expected at least one Linear, LSTM or GRU to quantize "
                                              "in %s, found none (already quantized, or all skipped)", oar_module_type(m));
    }
    oar_status st = OAR_OK;
    for (int i = 0; i < n && st == OAR_OK; i++) st = check_layer(t[i].m, t[i].path);
    oar_scope_begin();
    for (int i = 0; i < n && st == OAR_OK; i++) {
        oar_quant_layer info = {0};
        snprintf(info.name, sizeof info.name, "%s", t[i].path);
        st = convert_layer(t[i].m, o.per_tensor, bits, &info);
        if (st == OAR_OK && layers && i < cap) layers[i] = info;
        if (st == OAR_OK && n_layers) (*n_layers)++;
    }
    oar_scope_end();
    free(t);
    return st;
}
