/* Helpers shared by the built-in layers; see layers_util.h. */
#include "nn/layers_util.h"
#include "ops/dispatch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

oar_module *oar_layer_new(const oar_module_ops *ops, const void *cfg, size_t size) {
    void *state = oar_malloc(size);
    if (!state) return NULL;
    memcpy(state, cfg, size);
    oar_module *m = oar_module_new(ops, state);
    if (!m) free(state);
    return m;
}

oar_tensor *oar_layer_tensor(oar_module *m, const char *name, const int64_t *shape, int ndim, oar_dtype dt,
                             bool param) {
    oar_tensor *t = oar_tensor_new(dt, shape, ndim);
    if (!t) return NULL;
    if (t->numel > 0) memset(oar_tensor_ptr(t), 0, (size_t)t->numel * oar_dtypes[dt].size);
    oar_status st = param ? oar_module_add_parameter(m, name, t) : oar_module_add_buffer(m, name, t);
    oar_tensor_unref(t); /* the module holds its own reference now */
    return st == OAR_OK ? t : NULL;
}

oar_status oar_layer_init_fan_in(oar_tensor *weight, oar_tensor *bias) {
    double fan_in = weight->ndim >= 2 ? (double)weight->shape[1] : 0;
    for (int d = 2; d < weight->ndim; d++) fan_in *= (double)weight->shape[d];
    /* torch skips empty tensors (kaiming would divide by a zero fan) */
    if (weight->numel > 0) {
        oar_status st = oar_init_kaiming_uniform_(weight, sqrt(5.0), OAR_FAN_IN);
        if (st != OAR_OK) return st;
    }
    if (!bias) return OAR_OK;
    double bound = fan_in > 0 ? 1.0 / sqrt(fan_in) : 0.0;
    return oar_init_uniform_(bias, -bound, bound);
}

oar_status oar_layer_check_io(const oar_module *m, oar_tensor *const *in, int n_in, int n_out) {
    const char *who = oar_module_type(m);
    if (n_in != 1 || n_out != 1 || !in)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected one input and one output, got %d input%s and %d output%s; "
                                              "call it with oar_forward", who, n_in, n_in == 1 ? "" : "s", n_out,
                         n_out == 1 ? "" : "s");
    if (in[0]) return OAR_OK;
    if (oar_last_status() != OAR_OK) return oar_last_status(); /* an earlier failure made the NULL */
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected an input tensor, got NULL", who);
}

oar_status oar_layer_check_dtype(const oar_module *m, const oar_tensor *x, const oar_tensor *p) {
    /* under autocast the ops cast their inputs themselves (O2: f32 data into bf16 layers) */
    if (!p || x->dtype == p->dtype || oar_amp_active) return OAR_OK;
    return oar_error(OAR_ERR_DTYPE, "%s: expected an input of dtype %s (the parameters' dtype), got %s; convert it "
                                    "with oar_cast", oar_module_type(m), oar_dtype_name(p->dtype),
                     oar_dtype_name(x->dtype));
}

const char *oar_layer_shape_str(const oar_tensor *t, char *buf, size_t size) {
    oar_format_shape(t->shape, t->ndim, buf, size);
    return buf;
}

const char *oar_layer_pyfloat(double v, char *buf, size_t size) {
    if (isnan(v)) {
        snprintf(buf, size, "nan");
        return buf;
    }
    if (isinf(v)) {
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
        return buf;
    }
    /* the fewest significant digits that read back as v, as Python's repr chooses */
    char e[48];
    int digits = 1;
    for (; digits < 17; digits++) {
        snprintf(e, sizeof e, "%.*e", digits - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    snprintf(e, sizeof e, "%.*e", digits - 1, v);
    int exp10 = atoi(strchr(e, 'e') + 1);
    if (exp10 < -4 || exp10 >= 16) { /* Python's switch to scientific notation */
        snprintf(buf, size, "%s", e);
        return buf;
    }
    int decimals = digits - 1 - exp10;
    snprintf(buf, size, "%.*f", decimals > 0 ? decimals : 1, v); /* "1.0", never "1" */
    return buf;
}

const char *oar_layer_bool(bool b) { return b ? "true" : "false"; }

oar_tensor *oar_layer_identity(oar_tensor *x) { return oar_reshape(x, x->shape, x->ndim); }
