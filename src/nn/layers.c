/* Built-in layers without spatial structure: Linear, Embedding, Dropout, Flatten. Each is a
 * module whose state is its configuration; parameters live in the module, so loading a
 * checkpoint (oar_module_set) changes what forward uses. */
#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- Linear: y = x Wᵀ + b over the last dim */

typedef struct linear_cfg {
    int64_t in, out;
    bool bias;
} linear_cfg;

static oar_status linear_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const linear_cfg *c = m->state;
    oar_tensor *x = in[0], *w = oar_module_local(m, "weight");
    if (x->ndim < 1 || x->shape[x->ndim - 1] != c->in) {
        char s[128];
        return oar_error(OAR_ERR_SHAPE, "Linear: expected an input of shape [..., %lld] (in_features = %lld), got "
                                        "%s; check the layer's in_features or flatten the input first",
                         (long long)c->in, (long long)c->in, oar_layer_shape_str(x, s, sizeof s));
    }
    if ((st = oar_layer_check_dtype(m, x, w)) != OAR_OK) return st;
    out[0] = oar_linear(x, w, oar_module_local(m, "bias"));
    return out[0] ? OAR_OK : oar_last_status();
}

static int linear_describe(const oar_module *m, char *buf, size_t size) {
    const linear_cfg *c = m->state;
    return snprintf(buf, size, "in_features=%lld, out_features=%lld, bias=%s", (long long)c->in, (long long)c->out,
                    oar_layer_bool(c->bias));
}

static const oar_module_ops linear_ops = {"Linear", linear_forward, free, linear_describe};

oar_module *oar_nn_linear(int64_t in, int64_t out, bool bias) {
    if (in < 0 || out < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "Linear: expected in_features >= 0 and out_features >= 0, got %lld and %lld",
                  (long long)in, (long long)out);
        return NULL;
    }
    oar_module *m = oar_layer_new(&linear_ops, &(linear_cfg){in, out, bias}, sizeof(linear_cfg));
    if (!m) return NULL;
    oar_tensor *w = oar_layer_tensor(m, "weight", (int64_t[]){out, in}, 2, OAR_F32, true);
    oar_tensor *b = bias && w ? oar_layer_tensor(m, "bias", &out, 1, OAR_F32, true) : NULL;
    if (!w || (bias && !b) || oar_layer_init_fan_in(w, b) != OAR_OK) {
        oar_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- Embedding: rows of a [num, dim] table picked by integer indices */

typedef struct embedding_cfg {
    int64_t num, dim;
} embedding_cfg;

static oar_status embedding_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    if (oar_dtype_is_float(in[0]->dtype))
        return oar_error(OAR_ERR_DTYPE, "Embedding: expected integer indices (i64, i32, i8 or u8), got %s; "
                                        "convert them with oar_cast", oar_dtype_name(in[0]->dtype));
    out[0] = oar_embedding(oar_module_local(m, "weight"), in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int embedding_describe(const oar_module *m, char *buf, size_t size) {
    const embedding_cfg *c = m->state;
    return snprintf(buf, size, "%lld, %lld", (long long)c->num, (long long)c->dim);
}

static const oar_module_ops embedding_ops = {"Embedding", embedding_forward, free, embedding_describe};

oar_module *oar_nn_embedding(int64_t num, int64_t dim) {
    if (num < 0 || dim < 0) {
        oar_error(OAR_ERR_INVALID_ARG, "Embedding: expected num_embeddings >= 0 and embedding_dim >= 0, got %lld "
                                       "and %lld", (long long)num, (long long)dim);
        return NULL;
    }
    oar_module *m = oar_layer_new(&embedding_ops, &(embedding_cfg){num, dim}, sizeof(embedding_cfg));
    if (!m) return NULL;
    oar_tensor *w = oar_layer_tensor(m, "weight", (int64_t[]){num, dim}, 2, OAR_F32, true);
    if (!w || oar_init_normal_(w, 0.0, 1.0) != OAR_OK) { /* torch: normal_(0, 1) */
        oar_module_free(m);
        return NULL;
    }
    return m;
}

/* ---- Dropout: random zeroing in training, identity in evaluation */

typedef struct dropout_cfg {
    double p;
} dropout_cfg;

static oar_status dropout_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const dropout_cfg *c = m->state;
    out[0] = m->training ? oar_dropout(in[0], c->p, true) : oar_layer_identity(in[0]);
    return out[0] ? OAR_OK : oar_last_status();
}

static int dropout_describe(const oar_module *m, char *buf, size_t size) {
    char p[32];
    return snprintf(buf, size, "p=%s", oar_layer_pyfloat(((const dropout_cfg *)m->state)->p, p, sizeof p));
}

static const oar_module_ops dropout_ops = {"Dropout", dropout_forward, free, dropout_describe};

oar_module *oar_nn_dropout(double p) {
    if (!(p >= 0 && p <= 1)) {
        oar_error(OAR_ERR_INVALID_ARG, "Dropout: expected a probability p in [0, 1], got %g", p);
        return NULL;
    }
    return oar_layer_new(&dropout_ops, &(dropout_cfg){p}, sizeof(dropout_cfg));
}

/* ---- Flatten: dims start..end merged into one (a view when the layout allows) */

typedef struct flatten_cfg {
    int start, end;
} flatten_cfg;

static oar_status flatten_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const flatten_cfg *c = m->state;
    out[0] = oar_flatten(in[0], c->start, c->end);
    return out[0] ? OAR_OK : oar_last_status();
}

static int flatten_describe(const oar_module *m, char *buf, size_t size) {
    const flatten_cfg *c = m->state;
    return snprintf(buf, size, "start_dim=%d, end_dim=%d", c->start, c->end);
}

static const oar_module_ops flatten_ops = {"Flatten", flatten_forward, free, flatten_describe};

oar_module *oar_nn_flatten(int start_dim, int end_dim) {
    /* the dims are checked against each input's rank in forward, as torch does */
    return oar_layer_new(&flatten_ops, &(flatten_cfg){start_dim, end_dim}, sizeof(flatten_cfg));
}
