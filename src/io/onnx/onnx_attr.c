/* What translations read from a node: attributes with their defaults, inputs whose values must
 * be known at load time (shapes, axes, pads), and errors that name the node. */
#include "io/onnx/onnx_internal.h"

#include <stdio.h>
#include <string.h>

oar_status ox_fail(const ox_ctx *c, oar_status s, const char *fmt, ...) {
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const Onnx__NodeProto *p = c->node->p;
    return oar_error(s, "onnx: node '%.200s' (%s, opset %lld): %s", p->name ? p->name : "", p->op_type,
                     (long long)c->opset, what);
}

const Onnx__AttributeProto *ox_attr(const ox_ctx *c, const char *name) {
    const Onnx__NodeProto *p = c->node->p;
    for (size_t i = 0; i < p->n_attribute; i++)
        if (p->attribute[i]->name && !strcmp(p->attribute[i]->name, name)) return p->attribute[i];
    return NULL;
}

int64_t ox_attr_int(const ox_ctx *c, const char *name, int64_t def) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_i ? a->i : def;
}

double ox_attr_float(const ox_ctx *c, const char *name, double def) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    return a && a->has_f ? a->f : def;
}

const char *ox_attr_str(const ox_ctx *c, const char *name, const char *def, char *buf, size_t size) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a || !a->has_s) return def;
    snprintf(buf, size, "%.*s", (int)(a->s.len < size ? a->s.len : size - 1), (const char *)a->s.data);
    return buf;
}

int ox_attr_ints(const ox_ctx *c, const char *name, int64_t *buf, int max) {
    const Onnx__AttributeProto *a = ox_attr(c, name);
    if (!a) return 0;
    if (a->n_ints > (size_t)max) {
        ox_fail(c, OAR_ERR_UNSUPPORTED, "attribute %s has %zu values; at most %d are supported", name, a->n_ints, max);
        return -1;
    }
    memcpy(buf, a->ints, sizeof(int64_t) * a->n_ints);
    return (int)a->n_ints;
}

int ox_known_ints(const ox_ctx *c, int k, int64_t *buf, int max) {
    oar_tensor *t = k < c->n_in ? c->in[k] : NULL;
    if (!t) return 0;
    if (!t->storage) {
        ox_fail(c, OAR_ERR_UNSUPPORTED, "input %d ('%s') must be known when the model is compiled (a constant, or "
                                        "computed from shapes), but it depends on the graph's inputs' values",
                k, c->node->p->input[k]);
        return -1;
    }
    if (t->dtype != OAR_I64 && t->dtype != OAR_I32) {
        ox_fail(c, OAR_ERR_DTYPE, "input %d ('%s') must be int64 or int32, got %s", k, c->node->p->input[k],
                oar_dtype_name(t->dtype));
        return -1;
    }
    if (t->numel > max || t->ndim > 1) {
        ox_fail(c, OAR_ERR_UNSUPPORTED, "input %d ('%s') must be a list of at most %d values, got %lld values in %d "
                                        "dims", k, c->node->p->input[k], max, (long long)t->numel, t->ndim);
        return -1;
    }
    if (oar_copy_to_buffer(t, buf, sizeof(int64_t) * (size_t)max, OAR_I64) != OAR_OK) return -1;
    return (int)t->numel;
}

bool ox_known_scalar(const ox_ctx *c, int k, double *out) {
    oar_tensor *t = k < c->n_in ? c->in[k] : NULL;
    if (!t || !t->storage || t->numel != 1) {
        ox_fail(c, OAR_ERR_UNSUPPORTED, "input %d must be a one-element tensor known when the model is compiled", k);
        return false;
    }
    return oar_item(t, out) == OAR_OK;
}

int ox_axis(const ox_ctx *c, int64_t axis, int rank, const char *what) {
    if (axis < -rank || axis >= (rank ? rank : 1)) {
        ox_fail(c, OAR_ERR_INVALID_ARG, "%s %lld is out of range for rank %d; expected [-%d, %d)", what,
                (long long)axis, rank, rank, rank);
        return -1;
    }
    return (int)(axis < 0 ? axis + rank : axis);
}
