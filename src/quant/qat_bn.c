/* ConvBn-fused QAT: which BatchNorm2d a conv folds, the fold factor, and frozen BN statistics.
 *
 * A fused conv (qat.c) trains torch's ConvBn2d scheme: the weight seen by fake quantization is the
 * folded one, w * f with f = gamma / sqrt(running_var + eps), and the conv's output is divided by
 * f again (plus the conv's bias) before the BatchNorm module, which runs as before (batch
 * statistics and running updates in training, running statistics in evaluation). In evaluation,
 * or once frozen, BN(conv(x, fq(w f)) / f) is conv(x, fq(w f)) + (b - mean) f + beta up to float
 * rounding: the folded int8 layer convert writes. */
#include "quant/qat_bn.h"

#include "nn/layers_util.h"

#include <stdio.h>
#include <stdlib.h>

oar_module *oar_qat_bn_after(oar_module *conv) {
    const oar_conv_opts *co = oar_layer_conv2d_opts(conv);
    oar_module *p = conv ? conv->parent : NULL;
    if (!co || !p) return NULL;
    for (int i = 0; i + 1 < p->n_children; i++) {
        if (p->children[i].module != conv) continue;
        oar_module *bn = p->children[i + 1].module;
        int64_t features = 0;
        double eps = 0;
        oar_tensor *w = oar_module_local(conv, "weight");
        if (oar_layer_batch_norm2d_cfg(bn, &features, &eps) && w && oar_shape(w)[0] == features) return bn;
        return NULL;
    }
    return NULL;
}

/* ---- frozen statistics: BN's own forward, run as in evaluation */
typedef struct frozen_bn {
    const oar_module_ops *orig;
    void *orig_state;
} frozen_bn;

static const oar_module_ops FROZEN_BN_OPS;

static oar_status frozen_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    frozen_bn *f = m->state;
    bool training = m->training;
    m->ops = f->orig, m->state = f->orig_state, m->training = false;
    oar_status st = f->orig->forward(m, in, n_in, out, n_out);
    m->ops = &FROZEN_BN_OPS, m->state = f, m->training = training;
    return st;
}

static void frozen_destroy(void *state) {
    frozen_bn *f = state;
    if (f->orig->destroy) f->orig->destroy(f->orig_state);
    free(f);
}

static int frozen_describe(const oar_module *m, char *buf, size_t size) {
    const frozen_bn *f = m->state;
    oar_module tmp = *m; /* the original layer's description, with its own state */
    tmp.ops = f->orig, tmp.state = f->orig_state;
    int n = f->orig->describe ? f->orig->describe(&tmp, buf, size) : 0;
    n += snprintf(n >= 0 && (size_t)n < size ? buf + n : NULL, n >= 0 && (size_t)n < size ? size - (size_t)n : 0,
                  ", statistics frozen (qat)");
    return n;
}

static const oar_module_ops FROZEN_BN_OPS = {"BatchNorm2d", frozen_forward, frozen_destroy, frozen_describe};

bool oar_qat_bn_is_frozen(const oar_module *bn) { return bn && bn->ops == &FROZEN_BN_OPS; }

oar_status oar_qat_bn_freeze(oar_module *bn) {
    if (oar_qat_bn_is_frozen(bn)) return OAR_OK;
    frozen_bn *f = malloc(sizeof *f);
    if (!f) return oar_error(OAR_ERR_OOM, "qat_freeze_bn: out of memory");
    *f = (frozen_bn){bn->ops, bn->state};
    bn->ops = &FROZEN_BN_OPS, bn->state = f;
    return OAR_OK;
}

/* The BN module's own config, whether frozen or not. */
static bool bn_cfg(oar_module *bn, int64_t *features, double *eps) {
    if (!oar_qat_bn_is_frozen(bn)) return oar_layer_batch_norm2d_cfg(bn, features, eps);
    oar_module tmp = *bn;
    tmp.ops = ((frozen_bn *)bn->state)->orig, tmp.state = ((frozen_bn *)bn->state)->orig_state;
    return oar_layer_batch_norm2d_cfg(&tmp, features, eps);
}

oar_tensor *oar_qat_bn_factor(oar_module *bn) {
    int64_t features = 0;
    double eps = 0;
    if (!bn_cfg(bn, &features, &eps)) {
        oar_error(OAR_ERR_STATE, "qat: expected a BatchNorm2d with running statistics to fold, got %s",
                  bn ? oar_module_type(bn) : "none");
        return NULL;
    }
    oar_tensor *g = oar_module_local(bn, "weight"), *rv = oar_module_local(bn, "running_var");
    oar_tensor *f = oar_rsqrt(oar_add_scalar(rv, eps));
    return g && f ? oar_mul(f, g) : f;
}
