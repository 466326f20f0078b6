/* The op table through the public API (include/oar/ops.h): schemas for generated front ends
 * and a call by attribute names. The public flag and kind values mirror op.h's. */
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

_Static_assert((int)OAR_OP_ELEMENTWISE == (int)OAR_OPF_ELEMENTWISE && (int)OAR_OP_NONDIFF == (int)OAR_OPF_NONDIFF &&
                   (int)OAR_OP_RANDOM == (int)OAR_OPF_RANDOM && (int)OAR_OP_VIEW == (int)OAR_OPF_VIEW &&
                   (int)OAR_OP_QUANTIZABLE == (int)OAR_OPF_QUANTIZABLE && (int)OAR_OP_AMP_PROMOTE == (int)OAR_OPF_AMP_PROMOTE &&
                   (int)OAR_OP_CONTROL == (int)OAR_OPF_CONTROL && (int)OAR_OP_TO_DEVICE == (int)OAR_OPF_TO_DEVICE &&
                   (int)OAR_OP_CALLBACK == (int)OAR_OPF_CALLBACK,
               "public op flags mirror op.h");
_Static_assert((int)OAR_OP_ATTR_INT == (int)OAR_ATTR_INT && (int)OAR_OP_ATTR_DTYPE == (int)OAR_ATTR_DTYPE &&
                   (int)OAR_OP_ATTR_INTS == (int)OAR_ATTR_INTS && (int)OAR_OP_ATTR_STR == (int)OAR_ATTR_STR,
               "public attribute kinds mirror op.h");
_Static_assert(OAR_OP_MAX_INTS == OAR_ATTR_MAX_INTS && OAR_OP_MAX_STR == OAR_ATTR_STR_CAP &&
                   OAR_OP_MAX_INPUTS == OAR_MAX_INPUTS,
               "public limits mirror op.h");

int oar_op_count(void) { return OAR_OP_COUNT; }

static const oar_op_def *def_of(int op, const char *who) {
    if (op < 0 || op >= OAR_OP_COUNT) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected an op id in [0, %d), got %d; look ops up with oar_op_find",
                  who, OAR_OP_COUNT, op);
        return NULL;
    }
    return oar_op_table[op];
}

oar_status oar_op_schema_get(int op, oar_op_schema *out) {
    const oar_op_def *d = def_of(op, "oar_op_schema_get");
    if (!d) return oar_last_status();
    if (!out) return oar_error(OAR_ERR_INVALID_ARG, "oar_op_schema_get: out is NULL");
    *out = (oar_op_schema){
        .name = d->name,
        .n_inputs = d->n_inputs,
        .n_outputs = d->n_outputs,
        .n_visible = d->n_visible ? d->n_visible : (d->n_outputs >= 0 ? d->n_outputs : -1),
        .n_attrs = d->n_attrs,
        .flags = d->flags,
        .optional_inputs = d->optional_inputs,
        .mutated_inputs = d->mutated_inputs,
        .differentiable = d->grad != NULL,
    };
    return OAR_OK;
}

const char *oar_op_attr_name(int op, int i) {
    const oar_op_def *d = def_of(op, "oar_op_attr_name");
    if (!d) return NULL;
    if (i < 0 || i >= d->n_attrs) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_op_attr_name: %s has %d attributes, got index %d", d->name,
                  d->n_attrs, i);
        return NULL;
    }
    return d->attrs[i].name;
}

oar_op_attr_kind oar_op_attr_kind_of(int op, int i) {
    const oar_op_def *d = def_of(op, "oar_op_attr_kind_of");
    if (!d) return 0;
    if (i < 0 || i >= d->n_attrs) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_op_attr_kind_of: %s has %d attributes, got index %d", d->name,
                  d->n_attrs, i);
        return 0;
    }
    return (oar_op_attr_kind)d->attrs[i].kind;
}

const char *oar_op_attr_default(int op, int i) {
    const oar_op_def *d = def_of(op, "oar_op_attr_default");
    if (!d) return NULL;
    if (i < 0 || i >= d->n_attrs) {
        oar_error(OAR_ERR_INVALID_ARG, "oar_op_attr_default: %s has %d attributes, got index %d", d->name,
                  d->n_attrs, i);
        return NULL;
    }
    oar_clear_error();
    return d->attrs[i].def;
}

static const char *kind_name(int k) {
    switch (k) {
    case OAR_ATTR_INT: return "int";
    case OAR_ATTR_FLOAT: return "float";
    case OAR_ATTR_INTS: return "ints";
    case OAR_ATTR_STR: return "str";
    case OAR_ATTR_DTYPE: return "dtype";
    default: return "unknown";
    }
}

/* "dim: int, keepdim: int" for error messages. */
static void schema_text(const oar_op_def *d, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < d->n_attrs && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s: %s%s%s", i ? ", " : "", d->attrs[i].name,
                                kind_name(d->attrs[i].kind), d->attrs[i].def ? " = " : "",
                                d->attrs[i].def ? d->attrs[i].def : "");
    if (d->n_attrs == 0) snprintf(buf, size, "none");
}

/* Converts one named value to the schema's kind. */
static oar_status convert(const oar_op_def *d, const oar_attr_schema *s, const oar_op_attr_value *v, oar_attr *out) {
    switch (s->kind) {
    case OAR_ATTR_INT:
    case OAR_ATTR_DTYPE:
        if (v->kind == OAR_OP_ATTR_INT || (v->kind == OAR_OP_ATTR_DTYPE && s->kind == OAR_ATTR_DTYPE)) {
            if (s->kind == OAR_ATTR_DTYPE && (v->i < 0 || v->i >= OAR_DTYPE_COUNT))
                return oar_error(OAR_ERR_INVALID_ARG, "%s: expected attribute '%s' to be a dtype in [0, %d), got %lld",
                                 d->name, s->name, OAR_DTYPE_COUNT, (long long)v->i);
            *out = s->kind == OAR_ATTR_INT ? oar_attr_int(v->i) : oar_attr_dtype((oar_dtype)v->i);
            return OAR_OK;
        }
        if (v->kind == OAR_OP_ATTR_FLOAT && s->kind == OAR_ATTR_INT && isfinite(v->f) && v->f == floor(v->f) &&
            fabs(v->f) < 9.0e18) {
            *out = oar_attr_int((int64_t)v->f);
            return OAR_OK;
        }
        break;
    case OAR_ATTR_FLOAT:
        if (v->kind == OAR_OP_ATTR_FLOAT || v->kind == OAR_OP_ATTR_INT) {
            *out = oar_attr_float(v->kind == OAR_OP_ATTR_FLOAT ? v->f : (double)v->i);
            return OAR_OK;
        }
        break;
    case OAR_ATTR_INTS:
        if (v->kind == OAR_OP_ATTR_INTS) {
            if (v->n_ints < 0 || v->n_ints > OAR_ATTR_MAX_INTS || (v->n_ints > 0 && !v->ints))
                return oar_error(OAR_ERR_INVALID_ARG, "%s: expected attribute '%s' to hold 0 to %d integers, got %d%s",
                                 d->name, s->name, OAR_ATTR_MAX_INTS, v->n_ints, v->ints ? "" : " (ints is NULL)");
            *out = oar_attr_ints(v->ints, v->n_ints);
            return OAR_OK;
        }
        break;
    case OAR_ATTR_STR:
        if (v->kind == OAR_OP_ATTR_STR) {
            if (!v->s || strlen(v->s) >= OAR_ATTR_STR_CAP)
                return oar_error(OAR_ERR_INVALID_ARG, "%s: expected attribute '%s' to be a string of at most %d bytes, got %s",
                                 d->name, s->name, OAR_ATTR_STR_CAP - 1, v->s ? "a longer one" : "NULL");
            *out = oar_attr_str(v->s);
            return OAR_OK;
        }
        break;
    default: break;
    }
    return oar_error(OAR_ERR_INVALID_ARG, "%s: expected attribute '%s' of kind %s, got %s", d->name, s->name,
                     kind_name(s->kind), kind_name(v->kind));
}

oar_status oar_op_call_named(int op, oar_tensor *const *in, int n_in, const oar_op_attr_value *attrs, int n_attrs,
                             oar_tensor **out, int *n_out) {
    const oar_op_def *d = def_of(op, "oar_op_call_named");
    if (!d) return oar_last_status();
    if (!out || !n_out || *n_out < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected room for at least one output, got %s", d->name,
                         !out || !n_out ? "NULL" : "none");
    if (d->flags & OAR_OPF_CONTROL)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: control flow is made by oar_cond / oar_while, not called by name",
                         d->name);
    if (n_in < 0 || n_in > OAR_MAX_INPUTS || (n_in > 0 && !in))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected 0 to %d inputs, got %d%s", d->name, OAR_MAX_INPUTS,
                         n_in, in ? "" : " with a NULL array");
    if (n_attrs < 0 || (n_attrs > 0 && !attrs))
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected an attribute array, got %d with %s", d->name, n_attrs,
                         attrs ? "a bad count" : "NULL");
    char schema[256];
    oar_attr packed[OAR_MAX_ATTRS];
    bool given[OAR_MAX_ATTRS] = {false};
    for (int j = 0; j < n_attrs; j++) {
        const char *name = attrs[j].name ? attrs[j].name : "(null)";
        int i = 0;
        while (i < d->n_attrs && strcmp(d->attrs[i].name, name) != 0) i++;
        if (i == d->n_attrs) {
            schema_text(d, schema, sizeof schema);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: unknown attribute '%s'; its attributes are: %s", d->name, name,
                             schema);
        }
        if (given[i])
            return oar_error(OAR_ERR_INVALID_ARG, "%s: attribute '%s' given twice", d->name, name);
        oar_status st = convert(d, &d->attrs[i], &attrs[j], &packed[i]);
        if (st != OAR_OK) return st;
        given[i] = true;
    }
    for (int i = 0; i < d->n_attrs; i++)
        if (!given[i]) {
            if (d->attrs[i].def) {
                oar_status st = oar_attr_default(d, i, &packed[i]);
                if (st != OAR_OK) return st;
                continue;
            }
            schema_text(d, schema, sizeof schema);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: missing attribute '%s'; every attribute without a default "
                             "must be given: %s", d->name, d->attrs[i].name, schema);
        }
    oar_tensor *res[OAR_MAX_OUTPUTS];
    int n = OAR_MAX_OUTPUTS;
    oar_status st = oar_op_call((oar_op_id)op, in, n_in, packed, res, &n);
    if (st != OAR_OK) return st;
    int visible = d->n_visible ? d->n_visible : n;
    if (visible > *n_out) {
        for (int i = 0; i < n; i++) oar_tensor_unref(res[i]);
        return oar_error(OAR_ERR_INVALID_ARG, "%s: produced %d outputs but room was given for %d", d->name, visible,
                         *n_out);
    }
    /* hidden outputs (a dropout mask) stay alive through the autograd node only */
    for (int i = visible; i < n; i++) oar_tensor_unref(res[i]);
    for (int i = 0; i < visible; i++) out[i] = res[i];
    *n_out = visible;
    return OAR_OK;
}
