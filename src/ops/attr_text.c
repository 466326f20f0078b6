/* Attributes as text, "name=value name=value": ints as 1,2,3, floats as 0.5 or inf, strings
 * verbatim (no spaces). Used by test tables and golden files, and by model files later. An
 * attribute left out takes its schema's default (the same text syntax), if it has one. */
#include "ops/op.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Finds "name=" at a word start in text; returns the value and its length. */
static const char *find_value(const char *text, const char *name, size_t *len) {
    size_t nl = strlen(name);
    for (const char *s = text; s && *s;) {
        while (*s == ' ') s++;
        if (strncmp(s, name, nl) == 0 && s[nl] == '=') {
            const char *v = s + nl + 1;
            *len = strcspn(v, " ");
            return v;
        }
        s = strchr(s, ' ');
    }
    return NULL;
}

/* One value of attribute i of d, from its text val (len bytes). */
static oar_status parse_value(const oar_op_def *d, int i, const char *v, size_t len, oar_attr *out) {
    char val[OAR_ATTR_STR_CAP * 4];
    if (len >= sizeof val)
        return oar_error(OAR_ERR_FORMAT, "%s: attribute '%s' is too long", d->name, d->attrs[i].name);
    memcpy(val, v, len);
    val[len] = '\0';
    char *end = val;
    switch (d->attrs[i].kind) {
    case OAR_ATTR_INT:
        if (strcmp(val, "true") == 0 || strcmp(val, "false") == 0) {
            *out = oar_attr_int(val[0] == 't');
            end = val + len;
        } else *out = oar_attr_int(strtoll(val, &end, 10));
        break;
    case OAR_ATTR_FLOAT: *out = oar_attr_float(strtod(val, &end)); break;
    case OAR_ATTR_DTYPE: {
        oar_dtype dt;
        if (!oar_dtype_from_name(val, &dt))
            return oar_error(OAR_ERR_FORMAT, "%s: expected attribute '%s' to be a dtype name (f32, f64, f16, "
                                             "bf16, i8, u8, i16, u16, i32, u32, i64, u64, bool), got '%s'", d->name,
                             d->attrs[i].name, val);
        *out = oar_attr_dtype(dt);
        end = val + len;
        break;
    }
    case OAR_ATTR_STR:
        if (len >= OAR_ATTR_STR_CAP)
            return oar_error(OAR_ERR_FORMAT, "%s: attribute '%s' is longer than %d characters", d->name,
                             d->attrs[i].name, OAR_ATTR_STR_CAP - 1);
        *out = oar_attr_str(val);
        end = val + len;
        break;
    case OAR_ATTR_INTS: {
        int64_t ints[OAR_ATTR_MAX_INTS];
        int n = 0;
        while (*end) {
            if (n == OAR_ATTR_MAX_INTS)
                return oar_error(OAR_ERR_FORMAT, "%s: attribute '%s' has more than %d entries", d->name,
                                 d->attrs[i].name, OAR_ATTR_MAX_INTS);
            char *next;
            ints[n++] = strtoll(end, &next, 10);
            if (next == end) break;
            end = next;
            if (*end == ',') end++;
        }
        *out = oar_attr_ints(ints, n);
        break;
    }
    default: return oar_error(OAR_ERR_INTERNAL, "%s: attribute kind %d", d->name, (int)d->attrs[i].kind);
    }
    if (*end != '\0')
        return oar_error(OAR_ERR_FORMAT, "%s: cannot read attribute %s=%s", d->name, d->attrs[i].name, val);
    return OAR_OK;
}

oar_status oar_attr_default(const oar_op_def *d, int i, oar_attr *out) {
    const char *t = d->attrs[i].def;
    if (!t) return oar_error(OAR_ERR_INVALID_ARG, "%s: attribute '%s' has no default", d->name, d->attrs[i].name);
    return parse_value(d, i, t, strlen(t), out);
}

oar_status oar_attrs_parse(const oar_op_def *d, const char *text, oar_attr *out) {
    if (!text) text = "";
    for (int i = 0; i < d->n_attrs; i++) {
        size_t len;
        const char *v = find_value(text, d->attrs[i].name, &len);
        oar_status st;
        if (v) st = parse_value(d, i, v, len, &out[i]);
        else if (d->attrs[i].def) st = oar_attr_default(d, i, &out[i]);
        else
            return oar_error(OAR_ERR_FORMAT, "%s: attribute '%s' is missing from \"%s\"", d->name,
                             d->attrs[i].name, text);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

int oar_attrs_format(const oar_op_def *d, const oar_attr *a, char *buf, size_t size) {
    size_t n = 0;
    if (size) buf[0] = '\0';
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    for (int i = 0; i < d->n_attrs; i++) {
        PUT("%s%s=", i ? " " : "", d->attrs[i].name);
        switch (a[i].kind) {
        case OAR_ATTR_INT: PUT("%lld", (long long)a[i].i); break;
        case OAR_ATTR_FLOAT: PUT("%.17g", a[i].f); break;
        case OAR_ATTR_STR: PUT("%s", a[i].s); break;
        case OAR_ATTR_DTYPE: PUT("%s", oar_dtype_name((oar_dtype)a[i].i)); break;
        case OAR_ATTR_INTS:
            for (int k = 0; k < a[i].n; k++) PUT("%s%lld", k ? "," : "", (long long)a[i].ints[k]);
            break;
        default: break;
        }
    }
#undef PUT
    return (int)n;
}
