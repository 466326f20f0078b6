/* Loading a program from its model files. Nothing is trusted. In order:
 *   1. the JSON: format and version, then every entry (ids in range and each value defined
 *      exactly once, names, dtypes, ranks, dims, sizes, op names, attribute names and kinds
 *      against the op's schema, input and output counts, block nesting);
 *   2. the weights: every parameter and constant present with its dtype and shape, nothing
 *      unexpected, the metadata consistent (all problems in one message);
 *   3. oar_program_verify: definition before use, block scoping, and inference re-run on
 *      every node against the recorded output metas.
 * The program is built directly in the IR's tables so that value ids stay those of the file. */
#include "graph/serialize.h"
#include "io/io.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const WHO = "program_load";

#ifdef OAR_HAVE_CJSON
#include <cjson/cJSON.h>

enum { V_UNDEF = 0, V_DEFINED, V_META, V_CLAIMED };

typedef struct reader {
    char jlabel[300], wlabel[300]; /* "'dir/m.json'" or "<json buffer>", for messages */
    cJSON *root;
    oar_program *p;
    int n_values, n_blocks;
    unsigned char *state;     /* per value: V_* */
    const char **tensor_key;  /* per value: its tensor's name in the weights (params; in root) */
    int *owner;               /* per block: the node that owns it, -1 */
    int n_out;
    const char **out_names;   /* in the program's arena */
} reader;

static oar_status fail(const reader *r, oar_status st, const char *fmt, ...) OAR_PRINTF(3, 4);
static oar_status fail(const reader *r, oar_status st, const char *fmt, ...) {
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return oar_error(st, "%s: %s: %s", WHO, r->jlabel, msg);
}

static oar_status oom(const reader *r) { return fail(r, OAR_ERR_OOM, "out of memory"); }

/* ---- JSON helpers */
static const char *kind_of(const cJSON *v) {
    if (!v) return "nothing";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNull(v)) return "null";
    return "an unknown value";
}

/* The member key of obj (NULL when absent); a key given twice is an error. */
static oar_status field(const reader *r, const cJSON *obj, const char *key, const char *where, const cJSON **out) {
    *out = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!c->string || strcmp(c->string, key) != 0) continue;
        if (*out) return fail(r, OAR_ERR_FORMAT, "%s has two '%s' fields", where, key);
        *out = c;
    }
    return OAR_OK;
}

static oar_status need(const reader *r, const cJSON *obj, const char *key, const char *where, const cJSON **out,
                       bool (*is)(const cJSON *), const char *what) {
    oar_status st = field(r, obj, key, where, out);
    if (st != OAR_OK) return st;
    if (!*out || !is(*out))
        return fail(r, OAR_ERR_FORMAT, "%s: expected '%s' to be %s, got %s", where, key, what, kind_of(*out));
    return OAR_OK;
}
static bool is_array(const cJSON *v) { return cJSON_IsArray(v); }
static bool is_string(const cJSON *v) { return cJSON_IsString(v) && v->valuestring; }
static bool is_name(const cJSON *v) { return is_string(v) && v->valuestring[0]; }

/* Strict decimal: optional '-', digits, no overflow. */
static bool parse_i64(const char *s, int64_t *out) {
    bool neg = *s == '-';
    s += neg;
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > ((uint64_t)INT64_MAX + 1 - d) / 10) return false;
        v = v * 10 + d;
    }
    if (!neg && v > (uint64_t)INT64_MAX) return false;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* An integer: a JSON number that is whole and within +-2^53, or a decimal string (for larger
 * values). */
static bool json_i64(const cJSON *v, int64_t *out) {
    if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        if (!isfinite(x) || floor(x) != x || x < -9007199254740992.0 || x > 9007199254740992.0) return false;
        *out = (int64_t)x;
        return true;
    }
    return cJSON_IsString(v) && v->valuestring && parse_i64(v->valuestring, out);
}

/* An integer in [lo, hi], described in the message as what. */
static oar_status get_int(const reader *r, const cJSON *v, int64_t lo, int64_t hi, const char *where, const char *what,
                          int64_t *out) {
    if (!json_i64(v, out))
        return fail(r, OAR_ERR_FORMAT, "%s: expected %s to be an integer, got %s", where, what, kind_of(v));
    if (*out < lo || *out > hi)
        return fail(r, OAR_ERR_FORMAT, "%s: %s is %lld; expected %lld to %lld", where, what, (long long)*out,
                    (long long)lo, (long long)hi);
    return OAR_OK;
}

/* A value id in [lo, n_values). */
static oar_status get_id(const reader *r, const cJSON *v, int lo, const char *where, const char *what, int *out) {
    int64_t x;
    if (!json_i64(v, &x))
        return fail(r, OAR_ERR_FORMAT, "%s: expected %s to be a value id, got %s", where, what, kind_of(v));
    if (x < lo || x >= r->n_values)
        return fail(r, OAR_ERR_FORMAT, "%s: %s is value %lld, but the program has values 0 to %d", where, what,
                    (long long)x, r->n_values - 1);
    *out = (int)x;
    return OAR_OK;
}

/* ---- metas: "dtype", "shape" (-1: dynamic) and "traced_shape" (the sizes at tracing) */
static oar_status get_dtype(const reader *r, const cJSON *obj, const char *where, oar_dtype *dt) {
    const cJSON *v;
    oar_status st = need(r, obj, "dtype", where, &v, is_string, "a dtype name");
    if (st != OAR_OK) return st;
    for (int k = 0; k < OAR_DTYPE_COUNT; k++)
        if (!strcmp(v->valuestring, oar_dtype_name((oar_dtype)k))) {
            *dt = (oar_dtype)k;
            return OAR_OK;
        }
    return fail(r, OAR_ERR_FORMAT, "%s: dtype '%.40s' is not one oar knows (f32, f64, f16, bf16, i8, u8, i16, u16, "
                                   "i32, u32, i64, u64, bool)", where, v->valuestring);
}

static oar_status get_meta(const reader *r, const cJSON *obj, const char *where, bool dynamic_ok, oar_meta *m,
                           uint32_t *dyn) {
    memset(m, 0, sizeof *m);
    *dyn = 0;
    const cJSON *shape, *traced;
    oar_status st = get_dtype(r, obj, where, &m->dtype);
    if (st == OAR_OK) st = need(r, obj, "shape", where, &shape, is_array, "an array of sizes");
    if (st == OAR_OK) st = field(r, obj, "traced_shape", where, &traced);
    if (st != OAR_OK) return st;
    int nd = cJSON_GetArraySize(shape);
    if (nd > OAR_MAX_DIMS)
        return fail(r, OAR_ERR_UNSUPPORTED, "%s: the shape has %d dims; oar supports at most %d", where, nd, OAR_MAX_DIMS);
    if (traced && (!cJSON_IsArray(traced) || cJSON_GetArraySize(traced) != nd))
        return fail(r, OAR_ERR_FORMAT, "%s: expected 'traced_shape' to be an array of %d sizes like 'shape', got %s%s",
                    where, nd, kind_of(traced), cJSON_IsArray(traced) ? " of another length" : "");
    m->ndim = nd;
    const cJSON *c = shape->child, *t = traced ? traced->child : NULL;
    char what[40];
    for (int d = 0; d < nd; d++, c = c->next, t = t ? t->next : NULL) {
        int64_t x, y;
        snprintf(what, sizeof what, "shape[%d]", d);
        if ((st = get_int(r, c, dynamic_ok ? -1 : 0, INT64_MAX, where, what, &x)) != OAR_OK) return st;
        if (t) {
            snprintf(what, sizeof what, "traced_shape[%d]", d);
            if ((st = get_int(r, t, 0, INT64_MAX, where, what, &y)) != OAR_OK) return st;
            if (x >= 0 && y != x)
                return fail(r, OAR_ERR_FORMAT, "%s: traced_shape[%d] is %lld but shape[%d] is %lld; they differ only "
                                               "at dynamic (-1) dims", where, d, (long long)y, d, (long long)x);
        } else {
            y = x < 0 ? 1 : x; /* no traced size given: a dynamic dim is checked at size 1 */
        }
        if (x < 0) *dyn |= 1u << d;
        m->shape[d] = y;
    }
    int64_t numel;
    if (!oar_io_shape_numel(m->shape, nd, &numel)) {
        char sh[200];
        oar_format_shape(m->shape, nd, sh, sizeof sh);
        return fail(r, OAR_ERR_FORMAT, "%s: shape %s has too many elements", where, sh);
    }
    return OAR_OK;
}

static bool same_meta(const oar_meta *a, const oar_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static void describe(const oar_meta *m, uint32_t dyn, char *buf, size_t size) {
    oar_meta_format(m, dyn, buf, size);
}

/* ---- top-level entries */
static oar_status define(reader *r, const cJSON *obj, const char *where, int *id, unsigned char state) {
    const cJSON *v = NULL;
    *id = -1;
    oar_status st = field(r, obj, "value", where, &v);
    if (st == OAR_OK) st = get_id(r, v, 0, where, "'value'", id);
    if (st != OAR_OK) return st;
    if (r->state[*id] != V_UNDEF)
        return fail(r, OAR_ERR_FORMAT, "%s: value %d is defined twice (each value id appears once in inputs, params "
                                       "and values)", where, *id);
    r->state[*id] = state;
    return OAR_OK;
}

static oar_status read_inputs(reader *r, const cJSON *inputs) {
    oar_program *p = r->p;
    int n = cJSON_GetArraySize(inputs), i = 0;
    oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    b->in = oar_malloc(sizeof(int) * (size_t)(n + 1));
    if (!b->in) return oom(r);
    b->cap_in = n + 1;
    char where[64];
    for (const cJSON *e = inputs->child; e; e = e->next, i++) {
        snprintf(where, sizeof where, "inputs[%d]", i);
        if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
        const cJSON *name;
        int id = -1;
        oar_status st = need(r, e, "name", where, &name, is_name, "a non-empty string");
        if (st == OAR_OK) st = define(r, e, where, &id, V_DEFINED);
        if (st != OAR_OK) return st;
        for (int k = 0; k < i; k++)
            if (!strcmp(p->values[b->in[k]].name, name->valuestring))
                return fail(r, OAR_ERR_FORMAT, "%s: the input name '%.200s' is used twice", where, name->valuestring);
        oar_value *v = &p->values[id];
        if ((st = get_meta(r, e, where, true, &v->meta, &v->dyn_dims)) != OAR_OK) return st;
        v->kind = OAR_VAL_INPUT;
        v->block = OAR_MAIN_BLOCK;
        v->node = -1;
        if (!(v->name = oar_program_strdup(p, name->valuestring))) return oom(r);
        b->in[b->n_in++] = id;
    }
    return OAR_OK;
}

static oar_status read_params(reader *r, const cJSON *params) {
    oar_program *p = r->p;
    int i = 0;
    char where[64];
    for (const cJSON *e = params->child; e; e = e->next, i++) {
        snprintf(where, sizeof where, "params[%d]", i);
        if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
        const cJSON *name, *kind, *tensor;
        int id = -1;
        oar_status st = need(r, e, "name", where, &name, is_name, "a non-empty string");
        if (st == OAR_OK) st = need(r, e, "kind", where, &kind, is_string, "\"param\" or \"const\"");
        if (st == OAR_OK) st = field(r, e, "tensor", where, &tensor);
        if (st == OAR_OK) st = define(r, e, where, &id, V_DEFINED);
        if (st != OAR_OK) return st;
        oar_value *v = &p->values[id];
        if (!strcmp(kind->valuestring, "param")) v->kind = OAR_VAL_PARAM;
        else if (!strcmp(kind->valuestring, "const")) v->kind = OAR_VAL_CONST;
        else return fail(r, OAR_ERR_FORMAT, "%s: kind is '%.40s'; expected \"param\" or \"const\"", where, kind->valuestring);
        if (tensor && !is_name(tensor))
            return fail(r, OAR_ERR_FORMAT, "%s: expected 'tensor' to be a non-empty string, got %s", where,
                        kind_of(tensor));
        if ((st = get_meta(r, e, where, false, &v->meta, &v->dyn_dims)) != OAR_OK) return st;
        v->block = OAR_MAIN_BLOCK;
        v->node = -1;
        if (!(v->name = oar_program_strdup(p, name->valuestring))) return oom(r);
        r->tensor_key[id] = tensor ? tensor->valuestring : name->valuestring;
    }
    return OAR_OK;
}

static oar_status read_values(reader *r, const cJSON *values) {
    int i = 0;
    char where[64];
    for (const cJSON *e = values->child; e; e = e->next, i++) {
        snprintf(where, sizeof where, "values[%d]", i);
        if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
        int id = -1;
        oar_status st = define(r, e, where, &id, V_META);
        if (st != OAR_OK) return st;
        oar_value *v = &r->p->values[id];
        if ((st = get_meta(r, e, where, true, &v->meta, &v->dyn_dims)) != OAR_OK) return st;
        v->node = -1;
        const cJSON *name;
        if ((st = field(r, e, "name", where, &name)) != OAR_OK) return st;
        if (name && !is_string(name))
            return fail(r, OAR_ERR_FORMAT, "%s: expected 'name' to be a string, got %s", where, kind_of(name));
        if (name && !(v->name = oar_program_strdup(r->p, name->valuestring))) return oom(r);
    }
    return OAR_OK;
}

/* ---- attributes by name, checked against the op's schema */
static const char *attr_kind_name(oar_attr_kind k) {
    switch (k) {
    case OAR_ATTR_INT: return "an integer";
    case OAR_ATTR_FLOAT: return "a number (or \"inf\", \"-inf\", \"nan\")";
    case OAR_ATTR_INTS: return "an array of integers";
    case OAR_ATTR_STR: return "a string";
    case OAR_ATTR_DTYPE: return "a dtype name (f32, f64, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64, bool)";
    default: return "nothing";
    }
}

static bool read_attr(const cJSON *v, oar_attr_kind kind, oar_attr *a) {
    int64_t x;
    switch (kind) {
    case OAR_ATTR_INT:
        if (cJSON_IsBool(v)) {
            *a = oar_attr_int(cJSON_IsTrue(v) ? 1 : 0);
            return true;
        }
        if (!json_i64(v, &x)) return false;
        *a = oar_attr_int(x);
        return true;
    case OAR_ATTR_FLOAT:
        if (cJSON_IsNumber(v)) {
            *a = oar_attr_float(v->valuedouble);
            return true;
        }
        if (!cJSON_IsString(v) || !v->valuestring) return false;
        if (!strcmp(v->valuestring, "inf")) *a = oar_attr_float(INFINITY);
        else if (!strcmp(v->valuestring, "-inf")) *a = oar_attr_float(-INFINITY);
        else if (!strcmp(v->valuestring, "nan")) *a = oar_attr_float(NAN);
        else return false;
        return true;
    case OAR_ATTR_INTS: {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) > OAR_ATTR_MAX_INTS) return false;
        int64_t ints[OAR_ATTR_MAX_INTS];
        int n = 0;
        for (const cJSON *c = v->child; c; c = c->next)
            if (!json_i64(c, &ints[n++])) return false;
        *a = oar_attr_ints(ints, n);
        return true;
    }
    case OAR_ATTR_STR:
        if (!cJSON_IsString(v) || !v->valuestring || strlen(v->valuestring) >= OAR_ATTR_STR_CAP) return false;
        *a = oar_attr_str(v->valuestring);
        return true;
    case OAR_ATTR_DTYPE: {
        oar_dtype dt;
        if (json_i64(v, &x) && oar_dtype_valid((oar_dtype)x)) { /* files written before dtypes had names */
            *a = oar_attr_dtype((oar_dtype)x);
            return true;
        }
        if (!cJSON_IsString(v) || !oar_dtype_from_name(v->valuestring, &dt)) return false;
        *a = oar_attr_dtype(dt);
        return true;
    }
    default: return false;
    }
}

static oar_status read_attrs(const reader *r, const cJSON *node, const oar_op_def *d, const char *where,
                             oar_attr *attrs) {
    const cJSON *obj;
    oar_status st = field(r, node, "attrs", where, &obj);
    if (st != OAR_OK) return st;
    if (obj && !cJSON_IsObject(obj))
        return fail(r, OAR_ERR_FORMAT, "%s: expected 'attrs' to be an object, got %s", where, kind_of(obj));
    char names[400];
    int len = 0;
    names[0] = '\0';
    for (int k = 0; k < d->n_attrs && len < (int)sizeof names; k++)
        len += snprintf(names + len, sizeof names - (size_t)len, "%s%s", k ? ", " : "", d->attrs[k].name);
    bool seen[OAR_MAX_ATTRS] = {0};
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next) {
        const char *an = c->string ? c->string : "";
        int k = 0;
        while (k < d->n_attrs && strcmp(d->attrs[k].name, an) != 0) k++;
        if (k == d->n_attrs)
            return fail(r, OAR_ERR_UNSUPPORTED, "%s: op %s has no attribute '%.60s' (it takes %s); the model may need "
                                                "a newer oar", where, d->name, an, d->n_attrs ? names : "none");
        if (seen[k]) return fail(r, OAR_ERR_FORMAT, "%s: attribute '%s' is given twice", where, an);
        seen[k] = true;
        if (!read_attr(c, d->attrs[k].kind, &attrs[k])) {
            oar_attr_kind want = d->attrs[k].kind;
            const char *got = kind_of(c);
            if (want == OAR_ATTR_INTS && cJSON_IsArray(c))
                got = cJSON_GetArraySize(c) > OAR_ATTR_MAX_INTS ? "an array of more than 16 entries"
                                                                : "an array with an entry that is not an integer";
            else if (want == OAR_ATTR_STR && cJSON_IsString(c))
                got = "a string of 64 bytes or more";
            else if (want == OAR_ATTR_INT && cJSON_IsNumber(c))
                got = "a number that is not a whole number within +-2^53 (write larger integers as strings)";
            else if (want == OAR_ATTR_FLOAT && cJSON_IsString(c))
                got = "a string other than \"inf\", \"-inf\" and \"nan\"";
            return fail(r, OAR_ERR_FORMAT, "%s: expected attribute '%s' of %s to be %s, got %s", where, an, d->name,
                        attr_kind_name(want), got);
        }
    }
    for (int k = 0; k < d->n_attrs; k++) {
        if (!seen[k])
            return fail(r, OAR_ERR_FORMAT, "%s: attribute '%s' of %s is missing (it takes %s)", where, d->attrs[k].name,
                        d->name, names);
        /* control flow's "closure" points at tracing-time state; saved programs hold 0 */
        if ((d->flags & OAR_OPF_CONTROL) && !strcmp(d->attrs[k].name, "closure") && attrs[k].i != 0)
            return fail(r, OAR_ERR_FORMAT, "%s: attribute 'closure' of %s is %lld; model files hold 0 (it refers to "
                                           "state of the process that traced the program)", where, d->name,
                        (long long)attrs[k].i);
    }
    return OAR_OK;
}

/* ---- blocks and nodes */
static oar_status read_id_list(reader *r, const cJSON *obj, const char *key, const char *where, int **out, int *n,
                               int lo) {
    const cJSON *arr;
    oar_status st = need(r, obj, key, where, &arr, is_array, "an array of value ids");
    if (st != OAR_OK) return st;
    *n = cJSON_GetArraySize(arr);
    *out = oar_malloc(sizeof(int) * (size_t)(*n + 1));
    if (!*out) return oom(r);
    int i = 0;
    char what[48];
    for (const cJSON *c = arr->child; c; c = c->next, i++) {
        snprintf(what, sizeof what, "%s[%d]", key, i);
        if ((st = get_id(r, c, lo, where, what, &(*out)[i])) != OAR_OK) return st;
    }
    return OAR_OK;
}

/* Ops that gained trailing optional inputs: a model saved before lists the older count
 * (batch_norm and batch_norm_act gained num_batches_tracked); -1 for every other op. */
static int older_input_count(int op) {
    if (op == OAR_OP_batch_norm) return 5;
    if (op == OAR_OP_batch_norm_act) return 6;
    if (op == OAR_OP_qconv2d_nhwc) return 9; /* before its int8 residual's four parameters */
    return -1;
}

static oar_status read_node(reader *r, const cJSON *e, int b, const char *block_where, int index) {
    oar_program *p = r->p;
    char where[160];
    snprintf(where, sizeof where, "%s.nodes[%d]", block_where, index);
    if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
    const cJSON *opv, *ins, *outs, *blocks;
    oar_status st = need(r, e, "op", where, &opv, is_string, "an op name");
    if (st != OAR_OK) return st;
    int op = oar_op_find(opv->valuestring);
    if (op < 0)
        return fail(r, OAR_ERR_UNSUPPORTED, "%s: op '%.60s' is not one this oar (%s) knows; the model may need a newer "
                                            "oar", where, opv->valuestring, oar_version());
    const oar_op_def *d = oar_op_table[op];
    snprintf(where + strlen(where), sizeof where - strlen(where), " (%s)", d->name);
    if ((st = need(r, e, "inputs", where, &ins, is_array, "an array of value ids")) != OAR_OK) return st;
    if ((st = need(r, e, "outputs", where, &outs, is_array, "an array of value ids")) != OAR_OK) return st;
    if ((st = field(r, e, "blocks", where, &blocks)) != OAR_OK) return st;
    if (blocks && !cJSON_IsArray(blocks))
        return fail(r, OAR_ERR_FORMAT, "%s: expected 'blocks' to be an array of block indices, got %s", where,
                    kind_of(blocks));
    int n_in = cJSON_GetArraySize(ins), n_out = cJSON_GetArraySize(outs), n_blocks = blocks ? cJSON_GetArraySize(blocks) : 0;
    if (n_in == older_input_count(op)) n_in = d->n_inputs; /* the added inputs are absent (-1) */
    if (d->n_inputs >= 0 ? n_in != d->n_inputs : n_in < 1 || n_in > OAR_MAX_INPUTS)
        return fail(r, OAR_ERR_FORMAT, "%s: expected %s%d inputs, got %d", where, d->n_inputs < 0 ? "1 to " : "",
                    d->n_inputs < 0 ? OAR_MAX_INPUTS : d->n_inputs, n_in);
    if (d->n_outputs >= 0 ? n_out != d->n_outputs : n_out < 1 || n_out > OAR_MAX_OUTPUTS)
        return fail(r, OAR_ERR_FORMAT, "%s: expected %s%d outputs, got %d", where, d->n_outputs < 0 ? "1 to " : "",
                    d->n_outputs < 0 ? OAR_MAX_OUTPUTS : d->n_outputs, n_out);
    if (n_blocks > 64) return fail(r, OAR_ERR_FORMAT, "%s: has %d blocks; expected at most 64", where, n_blocks);
    oar_attr attrs[OAR_MAX_ATTRS + 1];
    memset(attrs, 0, sizeof attrs);
    if ((st = read_attrs(r, e, d, where, attrs)) != OAR_OK) return st;

    int id = p->n_nodes;
    oar_node *n = &p->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = (oar_op_id)op;
    n->block = b;
    n->in = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(n_in + 1));
    n->out = oar_arena_alloc(p->arena, sizeof(int) * (size_t)(n_out + 1));
    n->attrs = oar_arena_alloc(p->arena, sizeof(oar_attr) * (size_t)(d->n_attrs + 1));
    n->blocks = n_blocks ? oar_arena_alloc(p->arena, sizeof(int) * (size_t)n_blocks) : NULL;
    if (!n->in || !n->out || !n->attrs || (n_blocks && !n->blocks)) return oom(r);
    memcpy(n->attrs, attrs, sizeof(oar_attr) * (size_t)d->n_attrs);
    p->n_nodes++; /* the node exists from here on; its arrays are filled below */
    n->n_in = n_in;
    int k = 0;
    char what[48];
    for (const cJSON *c = ins->child; c; c = c->next, k++) {
        snprintf(what, sizeof what, "input %d", k);
        if ((st = get_id(r, c, -1, where, what, &n->in[k])) != OAR_OK) return st;
        if (n->in[k] < 0 && !(k < 32 && (d->optional_inputs >> k) & 1u))
            return fail(r, OAR_ERR_FORMAT, "%s: input %d is absent (-1), but %s requires it", where, k, d->name);
    }
    for (; k < n_in; k++) n->in[k] = -1;
    k = 0;
    for (const cJSON *c = outs->child; c; c = c->next, k++) {
        int v;
        snprintf(what, sizeof what, "output %d", k);
        if ((st = get_id(r, c, 0, where, what, &v)) != OAR_OK) return st;
        if (r->state[v] != V_META)
            return fail(r, OAR_ERR_FORMAT, "%s: output %d is value %d, which %s", where, k, v,
                        r->state[v] == V_CLAIMED ? "is already defined by another node or block"
                                                 : "is an input or parameter; node outputs are listed in 'values'");
        r->state[v] = V_CLAIMED;
        oar_value *val = &p->values[v];
        val->kind = OAR_VAL_NODE;
        val->node = id;
        val->out_index = k;
        val->block = b;
        n->out[k] = v;
        n->n_out = k + 1;
    }
    k = 0;
    for (const cJSON *c = blocks ? blocks->child : NULL; c; c = c->next, k++) {
        int64_t sb;
        snprintf(what, sizeof what, "blocks[%d]", k);
        if (r->n_blocks < 2)
            return fail(r, OAR_ERR_FORMAT, "%s: lists sub-blocks, but the file has only the main block", where);
        if ((st = get_int(r, c, 1, r->n_blocks - 1, where, what, &sb)) != OAR_OK) return st;
        if (r->owner[sb] >= 0)
            return fail(r, OAR_ERR_FORMAT, "%s: block %lld already belongs to node %d; each block has one owner", where,
                        (long long)sb, r->owner[sb]);
        if (p->blocks[sb].parent != b)
            return fail(r, OAR_ERR_FORMAT, "%s: block %lld has parent %d; expected %d, the block of this node", where,
                        (long long)sb, p->blocks[sb].parent, b);
        r->owner[sb] = id;
        n->blocks[k] = (int)sb;
        n->n_blocks = k + 1;
    }
    return OAR_OK;
}

static oar_status read_block(reader *r, const cJSON *e, int b) {
    oar_program *p = r->p;
    oar_block *bl = &p->blocks[b];
    char where[64];
    snprintf(where, sizeof where, "blocks[%d]", b);
    const cJSON *nodes;
    int *in = NULL, n_in = 0;
    oar_status st = read_id_list(r, e, "inputs", where, &in, &n_in, 0);
    if (st != OAR_OK) {
        free(in);
        return st;
    }
    if (b == OAR_MAIN_BLOCK) {
        bool same = n_in == bl->n_in && (n_in == 0 || !memcmp(in, bl->in, sizeof(int) * (size_t)n_in));
        free(in);
        if (!same)
            return fail(r, OAR_ERR_FORMAT, "%s: the main block's inputs must be the values of 'inputs', in order", where);
    } else {
        bl->in = in;
        bl->cap_in = n_in + 1;
        for (int i = 0; i < n_in; i++) {
            int v = in[i];
            if (r->state[v] != V_META)
                return fail(r, OAR_ERR_FORMAT, "%s: input %d is value %d, which %s", where, i, v,
                            r->state[v] == V_CLAIMED ? "is already defined by a node or another block"
                                                     : "is an input or parameter of the program; block inputs are "
                                                       "listed in 'values'");
            r->state[v] = V_CLAIMED;
            p->values[v].kind = OAR_VAL_INPUT;
            p->values[v].block = b;
            bl->n_in = i + 1;
        }
    }
    if ((st = need(r, e, "nodes", where, &nodes, is_array, "an array of nodes")) != OAR_OK) return st;
    int n = cJSON_GetArraySize(nodes), i = 0;
    bl->nodes = oar_malloc(sizeof(int) * (size_t)(n + 1));
    if (!bl->nodes) return oom(r);
    bl->cap_nodes = n + 1;
    for (const cJSON *c = nodes->child; c; c = c->next, i++) {
        int id = p->n_nodes;
        if ((st = read_node(r, c, b, where, i)) != OAR_OK) return st;
        bl->nodes[bl->n_nodes++] = id;
    }
    int *out = NULL, n_out = 0;
    st = read_id_list(r, e, "outputs", where, &out, &n_out, 0);
    bl->out = out;
    bl->cap_out = n_out + 1;
    if (st == OAR_OK) bl->n_out = n_out;
    return st;
}

static oar_status read_blocks(reader *r, const cJSON *blocks) {
    oar_program *p = r->p;
    int nb = cJSON_GetArraySize(blocks);
    if (nb < 1) return fail(r, OAR_ERR_FORMAT, "'blocks' is empty; expected the main block first");
    r->n_blocks = nb;
    r->owner = malloc(sizeof(int) * (size_t)nb);
    if (!r->owner) return oom(r);
    /* parents first (a node's sub-block may come later in the list), and the node count */
    int64_t total = 0;
    int b = 0;
    char where[64];
    for (const cJSON *e = blocks->child; e; e = e->next, b++) {
        snprintf(where, sizeof where, "blocks[%d]", b);
        if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
        if (b > 0 && oar_program_add_block(p, -1) != b) return oom(r);
        r->owner[b] = -1;
        const cJSON *parent, *nodes;
        int64_t par;
        oar_status st = field(r, e, "parent", where, &parent);
        if (st == OAR_OK) st = get_int(r, parent, -1, nb - 1, where, "'parent'", &par);
        if (st == OAR_OK) st = need(r, e, "nodes", where, &nodes, is_array, "an array of nodes");
        if (st != OAR_OK) return st;
        if (b == 0 ? par != -1 : par < 0 || par == b)
            return fail(r, OAR_ERR_FORMAT, "%s: parent is %lld; expected %s", where, (long long)par,
                        b == 0 ? "-1 for the main block" : "the index of another block");
        p->blocks[b].parent = (int)par;
        total += cJSON_GetArraySize(nodes);
    }
    if (total > INT_MAX / 2) return fail(r, OAR_ERR_FORMAT, "the program has %lld nodes; too many", (long long)total);
    p->nodes = oar_malloc(sizeof(oar_node) * (size_t)(total + 1));
    if (!p->nodes) return oom(r);
    p->cap_nodes = (int)total + 1;
    b = 0;
    for (const cJSON *e = blocks->child; e; e = e->next, b++) {
        oar_status st = read_block(r, e, b);
        if (st != OAR_OK) return st;
    }
    /* every sub-block has an owner, and ownership leads back to the main block */
    for (b = 1; b < nb; b++) {
        if (r->owner[b] < 0)
            return fail(r, OAR_ERR_FORMAT, "blocks[%d] belongs to no node; every block but the main one is a node's", b);
        int x = b, steps = 0;
        while (x != OAR_MAIN_BLOCK && steps++ <= nb) x = p->blocks[x].parent;
        if (x != OAR_MAIN_BLOCK)
            return fail(r, OAR_ERR_FORMAT, "blocks[%d] is nested inside itself (its parents form a cycle)", b);
    }
    return OAR_OK;
}

/* The declared outputs: names, and the main block's outputs with their metas. */
static oar_status read_outputs(reader *r, const cJSON *outputs) {
    oar_program *p = r->p;
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    int n = cJSON_GetArraySize(outputs);
    if (n != main->n_out)
        return fail(r, OAR_ERR_FORMAT, "'outputs' lists %d outputs but the main block yields %d", n, main->n_out);
    r->n_out = n;
    r->out_names = oar_arena_alloc(p->arena, sizeof(char *) * (size_t)(n + 1));
    if (!r->out_names) return oom(r);
    int i = 0;
    char where[64];
    for (const cJSON *e = outputs->child; e; e = e->next, i++) {
        snprintf(where, sizeof where, "outputs[%d]", i);
        if (!cJSON_IsObject(e)) return fail(r, OAR_ERR_FORMAT, "%s: expected an object, got %s", where, kind_of(e));
        const cJSON *name, *value;
        int id = -1;
        oar_status st = need(r, e, "name", where, &name, is_name, "a non-empty string");
        if (st == OAR_OK) st = field(r, e, "value", where, &value);
        if (st == OAR_OK) st = get_id(r, value, 0, where, "'value'", &id);
        if (st != OAR_OK) return st;
        if (id != main->out[i])
            return fail(r, OAR_ERR_FORMAT, "%s: value is %d but the main block's output %d is value %d", where, id, i,
                        main->out[i]);
        for (int k = 0; k < i; k++)
            if (!strcmp(r->out_names[k], name->valuestring))
                return fail(r, OAR_ERR_FORMAT, "%s: the output name '%.200s' is used twice", where, name->valuestring);
        oar_meta m;
        uint32_t dyn;
        if ((st = get_meta(r, e, where, true, &m, &dyn)) != OAR_OK) return st;
        const oar_value *v = &p->values[id];
        uint32_t vdyn = v->dyn_dims & (v->meta.ndim >= 32 ? ~0u : (1u << v->meta.ndim) - 1);
        /* a dynamic dim's traced size is informational: compare sizes only where both are fixed */
        bool ok = m.dtype == v->meta.dtype && m.ndim == v->meta.ndim && dyn == vdyn;
        for (int d = 0; ok && d < m.ndim; d++) ok = ((dyn >> d) & 1u) || m.shape[d] == v->meta.shape[d];
        if (!ok) {
            char a[200], b[200];
            describe(&m, dyn, a, sizeof a);
            describe(&v->meta, vdyn, b, sizeof b);
            return fail(r, OAR_ERR_FORMAT, "%s: '%.100s' is declared %s but value %d is %s", where, name->valuestring, a,
                        id, b);
        }
        if (!(r->out_names[i] = oar_program_strdup(p, name->valuestring))) return oom(r);
    }
    return OAR_OK;
}

static oar_status check_format(reader *r) {
    const cJSON *root = r->root, *fmt, *ver;
    oar_status st = field(r, root, "format", "the file", &fmt);
    if (st == OAR_OK) st = field(r, root, "version", "the file", &ver);
    if (st != OAR_OK) return st;
    if (!cJSON_IsString(fmt) || !fmt->valuestring || strcmp(fmt->valuestring, OAR_PROGRAM_FORMAT) != 0)
        return fail(r, OAR_ERR_FORMAT, "not an oar model: expected \"format\": \"%s\", got %s%.60s%s",
                    OAR_PROGRAM_FORMAT, cJSON_IsString(fmt) ? "\"" : kind_of(fmt),
                    cJSON_IsString(fmt) && fmt->valuestring ? fmt->valuestring : "", cJSON_IsString(fmt) ? "\"" : "");
    int64_t v;
    if (!json_i64(ver, &v))
        return fail(r, OAR_ERR_FORMAT, "expected \"version\" to be an integer (this oar reads version %d), got %s",
                    OAR_PROGRAM_VERSION, kind_of(ver));
    if (v != OAR_PROGRAM_VERSION)
        return fail(r, OAR_ERR_UNSUPPORTED, "model format version %lld is not supported: this oar (%s) reads version "
                                            "%d%s", (long long)v, oar_version(), OAR_PROGRAM_VERSION,
                    v > OAR_PROGRAM_VERSION ? "; the model may need a newer oar" : "");
    return OAR_OK;
}

/* Phase 1: the program from the JSON text. */
static oar_status read_program(reader *r, const char *json, size_t len) {
    if (len > OAR_PROGRAM_MAX_JSON_BYTES)
        return fail(r, OAR_ERR_FORMAT, "the file has %zu bytes; the limit is %llu", len, OAR_PROGRAM_MAX_JSON_BYTES);
    if (!oar_io_valid_utf8(json, len)) return fail(r, OAR_ERR_FORMAT, "the file is not valid UTF-8 text");
    /* a NUL-terminated copy, so no reader can run past the end */
    char *text = malloc(len + 1);
    if (!text) return oom(r);
    memcpy(text, json, len);
    text[len] = '\0';
    const char *end = NULL;
    r->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    oar_status st = OAR_OK;
    if (!r->root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        st = fail(r, OAR_ERR_FORMAT, "not valid JSON (error near byte %zu of %zu: \"%.24s\"); truncated file?", at, len,
                  text + at);
    } else {
        for (const char *c = end; c && c < text + len && st == OAR_OK; c++)
            if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r')
                st = fail(r, OAR_ERR_FORMAT, "unexpected text after the JSON object (at byte %zu)", (size_t)(c - text));
        if (st == OAR_OK && !cJSON_IsObject(r->root))
            st = fail(r, OAR_ERR_FORMAT, "expected a JSON object, got %s", kind_of(r->root));
    }
    free(text);
    if (st == OAR_OK) st = check_format(r);
    if (st != OAR_OK) return st;

    const cJSON *inputs, *outputs, *params, *values, *blocks;
    const char *top = "the file";
    if ((st = need(r, r->root, "inputs", top, &inputs, is_array, "an array")) != OAR_OK) return st;
    if ((st = need(r, r->root, "outputs", top, &outputs, is_array, "an array")) != OAR_OK) return st;
    if ((st = need(r, r->root, "params", top, &params, is_array, "an array")) != OAR_OK) return st;
    if ((st = need(r, r->root, "values", top, &values, is_array, "an array")) != OAR_OK) return st;
    if ((st = need(r, r->root, "blocks", top, &blocks, is_array, "an array")) != OAR_OK) return st;
    int64_t nv = (int64_t)cJSON_GetArraySize(inputs) + cJSON_GetArraySize(params) + cJSON_GetArraySize(values);
    if (nv > INT_MAX / 2) return fail(r, OAR_ERR_FORMAT, "the program has %lld values; too many", (long long)nv);
    r->n_values = (int)nv;
    if (!(r->p = oar_program_new())) return oom(r);
    oar_program *p = r->p;
    p->values = oar_malloc(sizeof(oar_value) * (size_t)(nv + 1));
    r->state = calloc((size_t)nv + 1, 1);
    r->tensor_key = calloc((size_t)nv + 1, sizeof(char *));
    if (!p->values || !r->state || !r->tensor_key) return oom(r);
    p->n_values = r->n_values;
    p->cap_values = r->n_values + 1;
    for (int v = 0; v < r->n_values; v++) p->values[v].node = -1;
    if ((st = read_inputs(r, inputs)) != OAR_OK) return st;
    if ((st = read_params(r, params)) != OAR_OK) return st;
    if ((st = read_values(r, values)) != OAR_OK) return st;
    if ((st = read_blocks(r, blocks)) != OAR_OK) return st;
    for (int v = 0; v < r->n_values; v++)
        if (r->state[v] == V_META)
            return fail(r, OAR_ERR_FORMAT, "value %d is listed in 'values' but no node or block defines it", v);
    return read_outputs(r, outputs);
}

/* ---- phase 2: the weights */
typedef struct problems {
    char text[760];
    size_t len;
    int n, shown, missing, unexpected, mismatched, other;
} problems;

static void problem(problems *pr, int *counter, const char *fmt, ...) OAR_PRINTF(3, 4);
static void problem(problems *pr, int *counter, const char *fmt, ...) {
    (*counter)++;
    pr->n++;
    char item[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(item, sizeof item, fmt, ap);
    va_end(ap);
    size_t need = strlen(item) + 2;
    if (pr->len + need + 16 >= sizeof pr->text || pr->shown < pr->n - 1) return;
    pr->len += (size_t)snprintf(pr->text + pr->len, sizeof pr->text - pr->len, "%s%s", pr->shown ? "; " : "", item);
    pr->shown++;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool names_match(const char *list_json, const char *const *names, int n) {
    cJSON *a = cJSON_Parse(list_json);
    bool ok = cJSON_IsArray(a) && cJSON_GetArraySize(a) == n;
    int i = 0;
    for (const cJSON *c = ok ? a->child : NULL; c && ok; c = c->next, i++)
        ok = cJSON_IsString(c) && c->valuestring && !strcmp(c->valuestring, names[i]);
    cJSON_Delete(a);
    return ok;
}

static oar_status bind_weights(reader *r, oar_tensor_dict *d) {
    oar_program *p = r->p;
    problems pr = {0};
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    const char **in_names = malloc(sizeof(char *) * (size_t)(main->n_in + 1));
    const char **keys = malloc(sizeof(char *) * (size_t)(p->n_values + 1));
    if (!in_names || !keys) {
        free(in_names);
        free(keys);
        return oom(r);
    }
    int n_keys = 0;
    for (int i = 0; i < main->n_in; i++) in_names[i] = p->values[main->in[i]].name;
    const char *fmt = oar_dict_meta(d, "format"), *ver = oar_dict_meta(d, "format_version");
    const char *ins = oar_dict_meta(d, "inputs"), *outs = oar_dict_meta(d, "outputs");
    char version[16];
    snprintf(version, sizeof version, "%d", OAR_PROGRAM_VERSION);
    if (fmt && strcmp(fmt, OAR_PROGRAM_FORMAT) != 0)
        problem(&pr, &pr.other, "its metadata says format '%.40s', expected '%s'", fmt, OAR_PROGRAM_FORMAT);
    if (ver && strcmp(ver, version) != 0)
        problem(&pr, &pr.other, "its metadata says format_version '%.20s', expected '%s'", ver, version);
    if (ins && !names_match(ins, in_names, main->n_in))
        problem(&pr, &pr.mismatched, "its metadata names the inputs %.120s, the program differently", ins);
    if (outs && !names_match(outs, r->out_names, r->n_out))
        problem(&pr, &pr.mismatched, "its metadata names the outputs %.120s, the program differently", outs);
    char a[200], b[200];
    for (int v = 0; v < p->n_values; v++) {
        const oar_value *val = &p->values[v];
        if (val->kind != OAR_VAL_PARAM && val->kind != OAR_VAL_CONST) continue;
        const char *key = r->tensor_key[v];
        oar_tensor *t = d ? oar_dict_get(d, key) : NULL;
        if (!t) {
            describe(&val->meta, 0, a, sizeof a);
            problem(&pr, &pr.missing, "missing '%.200s' (%s)", key, a);
            continue;
        }
        keys[n_keys++] = key;
        oar_meta m;
        oar_meta_from(&m, t);
        if (!same_meta(&m, &val->meta)) {
            describe(&m, 0, a, sizeof a);
            describe(&val->meta, 0, b, sizeof b);
            problem(&pr, &pr.mismatched, "'%.200s' is %s in the weights, %s in the program", key, a, b);
        }
    }
    qsort(keys, (size_t)n_keys, sizeof *keys, cmp_str);
    for (int i = 0; d && i < d->n; i++)
        if (!bsearch(&d->names[i], keys, (size_t)n_keys, sizeof *keys, cmp_str))
            problem(&pr, &pr.unexpected, "unexpected '%.200s'", d->names[i]);
    free(in_names);
    free(keys);
    if (pr.n) {
        char more[32] = "";
        if (pr.shown < pr.n) snprintf(more, sizeof more, " (+%d more)", pr.n - pr.shown);
        return oar_error(OAR_ERR_FORMAT, "%s: %s does not fit %s (%d problem%s: %d missing, %d unexpected, %d "
                                         "mismatched, %d other): %s%s",
                         WHO, r->wlabel, r->jlabel, pr.n, pr.n == 1 ? "" : "s", pr.missing, pr.unexpected,
                         pr.mismatched, pr.other, pr.text, more);
    }
    for (int v = 0; v < p->n_values; v++) {
        oar_value *val = &p->values[v];
        if (val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST)
            val->tensor = oar_retain(oar_dict_get(d, r->tensor_key[v]));
    }
    return OAR_OK;
}

/* ---- the three phases */
static void reader_free(reader *r) {
    cJSON_Delete(r->root);
    free(r->state);
    free(r->tensor_key);
    free(r->owner);
}

/* Prefixes the verifier's message with the file and, when it names a node, where the node is in
 * the file (node ids are the order of the nodes in 'blocks'). */
static void verify_failed(const reader *r) {
    const oar_program *p = r->p;
    const char *at = strstr(oar_last_error(), "program: node ");
    int id = -1;
    if (at && sscanf(at, "program: node %d", &id) == 1 && id >= 0 && id < p->n_nodes) {
        const oar_block *bl = &p->blocks[p->nodes[id].block];
        for (int i = 0; i < bl->n_nodes; i++)
            if (bl->nodes[i] == id) {
                oar_error_prefix("%s: %s: blocks[%d].nodes[%d]", WHO, r->jlabel, p->nodes[id].block, i);
                return;
            }
    }
    oar_error_prefix("%s: %s", WHO, r->jlabel);
}

static oar_program *finish(reader *r, oar_status st, oar_program_io *io) {
    oar_program *p = r->p;
    if (st == OAR_OK && (st = oar_program_verify(p)) != OAR_OK) verify_failed(r);
    if (st == OAR_OK && io) {
        const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
        const char **in = oar_arena_alloc(p->arena, sizeof(char *) * (size_t)(main->n_in + 1));
        if (!in) {
            st = oom(r);
        } else {
            for (int i = 0; i < main->n_in; i++) in[i] = p->values[main->in[i]].name;
            *io = (oar_program_io){main->n_in, r->n_out, in, r->out_names};
        }
    }
    reader_free(r);
    if (st != OAR_OK) {
        oar_program_free(p);
        return NULL;
    }
    return p;
}

oar_program *oar_program_load_buffers_io(const char *json, size_t json_len, const void *weights, size_t weights_len,
                                         oar_program_io *io) {
    if (io) memset(io, 0, sizeof *io);
    reader r = {.jlabel = "<json buffer>", .wlabel = "<weights buffer>"};
    if (!json || (!weights && weights_len)) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected the bytes of the program and of the weights, got NULL for %s", WHO,
                  !json ? "the program" : "the weights");
        return NULL;
    }
    oar_status st = read_program(&r, json, json_len);
    if (st == OAR_OK) {
        oar_tensor_dict *d = NULL;
        if (weights) {
            d = oar_safetensors_load_buffer(weights, weights_len);
            if (!d) {
                st = oar_last_status();
                oar_error_prefix("%s: the weights", WHO);
            }
        }
        if (st == OAR_OK) st = bind_weights(&r, d);
        oar_dict_free(d);
    }
    return finish(&r, st, io);
}

oar_program *oar_program_load_buffers(const char *json, size_t json_len, const void *weights, size_t weights_len) {
    return oar_program_load_buffers_io(json, json_len, weights, weights_len, NULL);
}

oar_program *oar_program_load_io(const char *path, oar_program_io *io) {
    if (io) memset(io, 0, sizeof *io);
    if (!path || !*path) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected a model path (\"dir/model\" for dir/model.json and "
                                       "dir/model.safetensors), got %s", WHO, path ? "\"\"" : "NULL");
        return NULL;
    }
    char *jpath = oar_model_file(path, ".json"), *wpath = oar_model_file(path, ".safetensors");
    reader r = {0};
    oar_status st = OAR_OK;
    oar_io_source src = {.fd = -1};
    char *text = NULL;
    if (!jpath || !wpath) {
        st = oar_error(OAR_ERR_OOM, "%s: out of memory", WHO);
        goto done;
    }
    snprintf(r.jlabel, sizeof r.jlabel, "'%.280s'", jpath);
    snprintf(r.wlabel, sizeof r.wlabel, "'%.280s'", wpath);
    if ((st = oar_io_source_open_file(&src, jpath, WHO)) != OAR_OK) goto done;
    if (src.size > OAR_PROGRAM_MAX_JSON_BYTES) {
        st = fail(&r, OAR_ERR_FORMAT, "the file has %llu bytes; the limit is %llu", (unsigned long long)src.size,
                  OAR_PROGRAM_MAX_JSON_BYTES);
        goto done;
    }
    text = malloc((size_t)src.size + 1);
    if (!text) {
        st = oom(&r);
        goto done;
    }
    if ((st = oar_io_source_read(&src, 0, text, (size_t)src.size)) != OAR_OK) goto done;
    if ((st = read_program(&r, text, (size_t)src.size)) != OAR_OK) goto done;
    oar_tensor_dict *d = oar_safetensors_load(wpath);
    if (!d) {
        st = oar_last_status();
        oar_error_prefix("%s", WHO);
        goto done;
    }
    st = bind_weights(&r, d);
    oar_dict_free(d);
done:
    oar_io_source_close(&src);
    free(text);
    free(jpath);
    free(wpath);
    return finish(&r, st, io);
}

oar_program *oar_program_load(const char *path) { return oar_program_load_io(path, NULL); }

#else /* !OAR_HAVE_CJSON */

static void *no_cjson(void) {
    oar_error(OAR_ERR_UNSUPPORTED, "%s: oar was built without cJSON, which model files need; install cJSON and "
                                   "reconfigure", WHO);
    return NULL;
}
oar_program *oar_program_load(const char *path) { return no_cjson(); }
oar_program *oar_program_load_io(const char *path, oar_program_io *io) { return no_cjson(); }
oar_program *oar_program_load_buffers(const char *json, size_t json_len, const void *weights, size_t weights_len) {
    return no_cjson();
}
oar_program *oar_program_load_buffers_io(const char *json, size_t json_len, const void *weights, size_t weights_len,
                                         oar_program_io *io) {
    return no_cjson();
}

#endif
