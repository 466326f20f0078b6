/* Activation layers: one module type per oar_activation kind, named as in torch (ReLU,
 * LeakyReLU, ...), so printed models read the same. The parameter is the kind's only
 * hyper-parameter; 0 selects torch's default. */
#include "nn/layers_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct act_cfg {
    oar_activation kind;
    double param; /* negative slope, alpha or beta; already resolved from 0 to the default */
} act_cfg;

#define SOFTPLUS_THRESHOLD 20.0 /* torch's default: above beta * x > 20, softplus(x) is x */

static oar_status act_forward(oar_module *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    oar_status st = oar_layer_check_io(m, in, n_in, n_out);
    if (st != OAR_OK) return st;
    const act_cfg *c = m->state;
    oar_tensor *x = in[0];
    switch (c->kind) {
    case OAR_ACT_RELU: out[0] = oar_relu(x); break;
    case OAR_ACT_LEAKY_RELU: out[0] = oar_leaky_relu(x, c->param); break;
    case OAR_ACT_ELU: out[0] = oar_elu(x, c->param); break;
    case OAR_ACT_GELU: out[0] = oar_gelu(x, false); break;
    case OAR_ACT_GELU_TANH: out[0] = oar_gelu(x, true); break;
    case OAR_ACT_SILU: out[0] = oar_silu(x); break;
    case OAR_ACT_TANH: out[0] = oar_tanh(x); break;
    case OAR_ACT_SIGMOID: out[0] = oar_sigmoid(x); break;
    case OAR_ACT_SOFTPLUS: out[0] = oar_softplus(x, c->param, SOFTPLUS_THRESHOLD); break;
    case OAR_ACT_IDENTITY: out[0] = oar_layer_identity(x); break;
    }
    return out[0] ? OAR_OK : oar_last_status();
}

static int act_describe(const oar_module *m, char *buf, size_t size) {
    const act_cfg *c = m->state;
    char v[32];
    switch (c->kind) {
    case OAR_ACT_LEAKY_RELU: return snprintf(buf, size, "negative_slope=%s", oar_layer_pyfloat(c->param, v, sizeof v));
    case OAR_ACT_ELU: return snprintf(buf, size, "alpha=%s", oar_layer_pyfloat(c->param, v, sizeof v));
    case OAR_ACT_GELU: return snprintf(buf, size, "approximate='none'");
    case OAR_ACT_GELU_TANH: return snprintf(buf, size, "approximate='tanh'");
    case OAR_ACT_SOFTPLUS:
        return snprintf(buf, size, "beta=%s, threshold=%g", oar_layer_pyfloat(c->param, v, sizeof v), SOFTPLUS_THRESHOLD);
    default: return snprintf(buf, size, "%s", "");
    }
}

/* One ops table per kind, indexed by oar_activation, for the type name. */
static const oar_module_ops act_ops[] = {
    [OAR_ACT_RELU] = {"ReLU", act_forward, free, act_describe},
    [OAR_ACT_LEAKY_RELU] = {"LeakyReLU", act_forward, free, act_describe},
    [OAR_ACT_ELU] = {"ELU", act_forward, free, act_describe},
    [OAR_ACT_GELU] = {"GELU", act_forward, free, act_describe},
    [OAR_ACT_GELU_TANH] = {"GELU", act_forward, free, act_describe},
    [OAR_ACT_SILU] = {"SiLU", act_forward, free, act_describe},
    [OAR_ACT_TANH] = {"Tanh", act_forward, free, act_describe},
    [OAR_ACT_SIGMOID] = {"Sigmoid", act_forward, free, act_describe},
    [OAR_ACT_SOFTPLUS] = {"Softplus", act_forward, free, act_describe},
    [OAR_ACT_IDENTITY] = {"Identity", act_forward, free, act_describe},
};

oar_module *oar_nn_activation(oar_activation kind, double param) {
    if ((int)kind < 0 || (size_t)kind >= sizeof act_ops / sizeof act_ops[0]) {
        oar_error(OAR_ERR_INVALID_ARG, "Activation: expected a kind from oar_activation (0 to %d), got %d",
                  (int)(sizeof act_ops / sizeof act_ops[0]) - 1, (int)kind);
        return NULL;
    }
    bool has_param = kind == OAR_ACT_LEAKY_RELU || kind == OAR_ACT_ELU || kind == OAR_ACT_SOFTPLUS;
    if (!has_param) param = 0;
    if (!isfinite(param)) {
        static const char *what[] = {[OAR_ACT_LEAKY_RELU] = "negative_slope", [OAR_ACT_ELU] = "alpha",
                                     [OAR_ACT_SOFTPLUS] = "beta"};
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected a finite %s, got %g", act_ops[kind].type_name, what[kind], param);
        return NULL;
    }
    /* 0 means torch's default: LeakyReLU(0.01), ELU(alpha=1), Softplus(beta=1) */
    if (has_param && param == 0) param = kind == OAR_ACT_LEAKY_RELU ? 0.01 : 1.0;
    return oar_layer_new(&act_ops[kind], &(act_cfg){kind, param}, sizeof(act_cfg));
}
