/* Saving a program: path.safetensors (the tensors of its parameters and constants, with the
 * format, version and input/output names as metadata) and then path.json (the program), each
 * written atomically. The JSON is laid out for reading and diffing: one input, parameter, value
 * or node per line (docs/model-format.md). */
#include "graph/serialize.h"
#include "io/io.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const WHO = "program_save";

#ifdef OAR_HAVE_CJSON
#include <cjson/cJSON.h>

/* ---- a growable text buffer */
typedef struct text {
    char *s;
    size_t n, cap;
    bool oom;
} text;

static void put_n(text *t, const char *s, size_t n) {
    if (t->oom) return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->n + n + 1) cap *= 2;
        char *p = realloc(t->s, cap);
        if (!p) {
            t->oom = true;
            return;
        }
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = '\0';
}
static void put(text *t, const char *s) { put_n(t, s, strlen(s)); }

/* item in one line, with a space after each ':' and ',' outside strings; frees item. */
static void put_json(text *t, cJSON *item) {
    char *s = item ? cJSON_PrintUnformatted(item) : NULL;
    cJSON_Delete(item);
    if (!s) {
        t->oom = true;
        return;
    }
    bool in_str = false, esc = false;
    const char *run = s;
    for (const char *c = s; *c; c++) {
        if (in_str) {
            if (esc) esc = false;
            else if (*c == '\\') esc = true;
            else if (*c == '"') in_str = false;
        } else if (*c == '"') {
            in_str = true;
        } else if (*c == ':' || *c == ',') {
            put_n(t, run, (size_t)(c - run + 1));
            put_n(t, " ", 1);
            run = c + 1;
        }
    }
    put(t, run);
    cJSON_free(s);
}

/* ---- numbers: integers within +-2^53 are JSON numbers, larger ones decimal strings (JSON
 * readers hold numbers as doubles); floats in the shortest text that reads back exactly, and
 * "inf", "-inf", "nan" as strings. */
#define EXACT_INT 9007199254740992LL

static cJSON *json_int(int64_t v) {
    char num[32];
    snprintf(num, sizeof num, "%lld", (long long)v);
    return v >= -EXACT_INT && v <= EXACT_INT ? cJSON_CreateRaw(num) : cJSON_CreateString(num);
}

static cJSON *json_float(double v) {
    if (isnan(v)) return cJSON_CreateString("nan");
    if (isinf(v)) return cJSON_CreateString(v > 0 ? "inf" : "-inf");
    char num[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, v);
        if (strtod(num, NULL) == v) break;
    }
    return cJSON_CreateRaw(num);
}

static bool add(cJSON *obj, const char *key, cJSON *item) {
    if (!item) return false;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

static bool push(cJSON *arr, cJSON *item) {
    if (!item) return false;
    if (!cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

static cJSON *int_array(const int *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        if (!push(a, json_int(v[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

/* "dtype", "shape" (-1 for dynamic dims) and, when a dim is dynamic, "traced_shape". */
static bool add_meta(cJSON *o, const oar_meta *m, uint32_t dyn) {
    if (!add(o, "dtype", cJSON_CreateString(oar_dtype_name(m->dtype)))) return false;
    cJSON *shape = cJSON_CreateArray(), *traced = NULL;
    if (!add(o, "shape", shape)) return false;
    bool any = false;
    for (int d = 0; d < m->ndim; d++) {
        bool dynamic = (dyn >> d) & 1u;
        any |= dynamic;
        if (!push(shape, json_int(dynamic ? -1 : m->shape[d]))) return false;
    }
    if (!any) return true;
    if (!add(o, "traced_shape", traced = cJSON_CreateArray())) return false;
    for (int d = 0; d < m->ndim; d++)
        if (!push(traced, json_int(m->shape[d]))) return false;
    return true;
}

/* ---- what is saved, and under which ids */
typedef struct saver {
    const oar_program *p;
    int *vmap;            /* old value id -> new id, or -1 */
    int *bmap;            /* old block id -> new id, or -1 */
    int *border;          /* new block id -> old id */
    int n_blocks;
    int n_tensors;
    oar_tensor **tensors; /* distinct tensors, in order of their first value */
    char **keys;          /* their names in the weights file (owned) */
    int *vkey;            /* old value id -> index into keys, or -1 */
    char **vname;         /* old value id -> generated name of an unnamed param/const (owned) */
    char *main_in;        /* old value id -> whether it is an input of the main block */
} saver;

static void saver_free(saver *s) {
    for (int i = 0; i < s->n_tensors; i++) free(s->keys[i]);
    if (s->vname)
        for (int v = 0; v < s->p->n_values; v++) free(s->vname[v]);
    free(s->vmap);
    free(s->bmap);
    free(s->border);
    free(s->tensors);
    free(s->keys);
    free(s->vkey);
    free(s->vname);
    free(s->main_in);
}

static char *dup_printf(const char *fmt, const char *a, long long b) {
    int n = snprintf(NULL, 0, fmt, a, b);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) snprintf(s, (size_t)n + 1, fmt, a, b);
    return s;
}

static bool key_taken(const saver *s, const char *key) {
    if (!strcmp(key, "__metadata__")) return true;
    for (int i = 0; i < s->n_tensors; i++)
        if (!strcmp(s->keys[i], key)) return true;
    return false;
}

/* Marks the blocks reachable from the main block through live nodes and every value they
 * define or use; numbers both densely in their original order. */
static oar_status plan(saver *s) {
    const oar_program *p = s->p;
    int nv = p->n_values, nb = p->n_blocks;
    s->vmap = malloc(sizeof(int) * (size_t)(nv + 1));
    s->bmap = malloc(sizeof(int) * (size_t)(nb + 1));
    s->border = malloc(sizeof(int) * (size_t)(nb + 1));
    s->vkey = malloc(sizeof(int) * (size_t)(nv + 1));
    s->vname = calloc((size_t)nv + 1, sizeof(char *));
    s->main_in = calloc((size_t)nv + 1, 1);
    s->tensors = malloc(sizeof(oar_tensor *) * (size_t)(nv + 1));
    s->keys = malloc(sizeof(char *) * (size_t)(nv + 1));
    int *stack = malloc(sizeof(int) * (size_t)(nb + 1));
    if (!s->vmap || !s->bmap || !s->border || !s->vkey || !s->vname || !s->main_in || !s->tensors || !s->keys || !stack) {
        free(stack);
        return oar_error(OAR_ERR_OOM, "%s: out of memory planning a program of %d values", WHO, nv);
    }
    for (int v = 0; v < nv; v++) s->vmap[v] = -1, s->vkey[v] = -1;
    for (int b = 0; b < nb; b++) s->bmap[b] = -1;
    for (int i = 0; i < p->blocks[OAR_MAIN_BLOCK].n_in; i++) s->main_in[p->blocks[OAR_MAIN_BLOCK].in[i]] = 1;
    int top = 0;
    s->bmap[OAR_MAIN_BLOCK] = 0;
    stack[top++] = OAR_MAIN_BLOCK;
    oar_status st = OAR_OK;
    while (top && st == OAR_OK) {
        const oar_block *bl = &p->blocks[stack[--top]];
        for (int i = 0; i < bl->n_in; i++) s->vmap[bl->in[i]] = 0;
        for (int i = 0; i < bl->n_out; i++) s->vmap[bl->out[i]] = 0;
        for (int i = 0; i < bl->n_nodes && st == OAR_OK; i++) {
            const oar_node *n = &p->nodes[bl->nodes[i]];
            if (n->dead) continue;
            for (int k = 0; k < n->n_in; k++)
                if (n->in[k] >= 0) s->vmap[n->in[k]] = 0;
            for (int k = 0; k < n->n_out; k++) s->vmap[n->out[k]] = 0;
            for (int k = 0; k < n->n_blocks; k++) {
                int sb = n->blocks[k];
                if (s->bmap[sb] >= 0) {
                    st = oar_error(OAR_ERR_INVALID_ARG, "%s: block %d belongs to two nodes; a model file gives each "
                                                        "sub-block one owner", WHO, sb);
                    break;
                }
                s->bmap[sb] = 0;
                stack[top++] = sb;
            }
        }
    }
    free(stack);
    if (st != OAR_OK) return st;
    for (int b = 0, k = 0; b < nb; b++)
        if (s->bmap[b] >= 0) s->border[k] = b, s->bmap[b] = k++, s->n_blocks = k;
    for (int v = 0, k = 0; v < nv; v++)
        if (s->vmap[v] >= 0) s->vmap[v] = k++;

    /* tensors: one per distinct bound tensor, under a unique key */
    for (int v = 0; v < nv; v++) {
        const oar_value *val = &p->values[v];
        if (s->vmap[v] >= 0 && val->name && !oar_io_valid_utf8(val->name, strlen(val->name)))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: the name of value %d is not valid UTF-8", WHO, v);
        if (s->vmap[v] < 0 || (val->kind != OAR_VAL_PARAM && val->kind != OAR_VAL_CONST)) continue;
        if (!val->name || !*val->name) {
            s->vname[v] = dup_printf("%s.%lld", val->kind == OAR_VAL_PARAM ? "param" : "const", s->vmap[v]);
            if (!s->vname[v]) return oar_error(OAR_ERR_OOM, "%s: out of memory naming value %d", WHO, v);
        }
        const char *name = s->vname[v] ? s->vname[v] : val->name;
        for (int i = 0; i < s->n_tensors && s->vkey[v] < 0; i++)
            if (s->tensors[i] == val->tensor) s->vkey[v] = i;
        if (s->vkey[v] >= 0) continue;
        char *key = oar_io_strdup(name);
        for (long long k = 1; key && key_taken(s, key); k++) {
            free(key);
            key = dup_printf("%s.%lld", name, k);
        }
        if (!key) return oar_error(OAR_ERR_OOM, "%s: out of memory naming tensor '%.200s'", WHO, name);
        s->vkey[v] = s->n_tensors;
        s->keys[s->n_tensors] = key;
        s->tensors[s->n_tensors++] = val->tensor;
    }
    return OAR_OK;
}

/* ---- the JSON text */
static cJSON *io_entry(const saver *s, const char *name, int v) {
    const oar_value *val = &s->p->values[v];
    cJSON *o = cJSON_CreateObject();
    if (o && add(o, "name", cJSON_CreateString(name)) && add(o, "value", json_int(s->vmap[v])) &&
        add_meta(o, &val->meta, val->dyn_dims))
        return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *param_entry(const saver *s, int v) {
    const oar_value *val = &s->p->values[v];
    const char *name = s->vname[v] ? s->vname[v] : val->name, *key = s->keys[s->vkey[v]];
    cJSON *o = cJSON_CreateObject();
    if (o && add(o, "name", cJSON_CreateString(name)) && add(o, "value", json_int(s->vmap[v])) &&
        add(o, "kind", cJSON_CreateString(val->kind == OAR_VAL_PARAM ? "param" : "const")) &&
        add_meta(o, &val->meta, 0) && (!strcmp(key, name) || add(o, "tensor", cJSON_CreateString(key))))
        return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *value_entry(const saver *s, int v) {
    const oar_value *val = &s->p->values[v];
    cJSON *o = cJSON_CreateObject();
    if (o && add(o, "value", json_int(s->vmap[v])) &&
        (!val->name || !*val->name || add(o, "name", cJSON_CreateString(val->name))) &&
        add_meta(o, &val->meta, val->dyn_dims))
        return o;
    cJSON_Delete(o);
    return NULL;
}

static cJSON *attr_json(const oar_attr *a) {
    switch (a->kind) {
    case OAR_ATTR_INT: return json_int(a->i);
    case OAR_ATTR_DTYPE: return oar_dtype_valid((oar_dtype)a->i) ? cJSON_CreateString(oar_dtype_name((oar_dtype)a->i)) : NULL;
    case OAR_ATTR_FLOAT: return json_float(a->f);
    case OAR_ATTR_STR: {
        char str[OAR_ATTR_STR_CAP];
        memcpy(str, a->s, sizeof str);
        str[sizeof str - 1] = '\0';
        return oar_io_valid_utf8(str, strlen(str)) ? cJSON_CreateString(str) : NULL;
    }
    case OAR_ATTR_INTS: {
        cJSON *arr = cJSON_CreateArray();
        int n = a->n < 0 ? 0 : a->n > OAR_ATTR_MAX_INTS ? OAR_ATTR_MAX_INTS : a->n;
        for (int k = 0; arr && k < n; k++)
            if (!push(arr, json_int(a->ints[k]))) {
                cJSON_Delete(arr);
                return NULL;
            }
        return arr;
    }
    default: return NULL;
    }
}

static oar_status node_entry(const saver *s, int id, cJSON **out) {
    const oar_node *n = &s->p->nodes[id];
    const oar_op_def *d = oar_op_table[n->op];
    cJSON *o = cJSON_CreateObject(), *ins = NULL, *outs = NULL;
    bool ok = o && add(o, "op", cJSON_CreateString(d->name)) && add(o, "inputs", ins = cJSON_CreateArray()) &&
              add(o, "outputs", outs = cJSON_CreateArray());
    for (int k = 0; ok && k < n->n_in; k++) ok = push(ins, json_int(n->in[k] < 0 ? -1 : s->vmap[n->in[k]]));
    for (int k = 0; ok && k < n->n_out; k++) ok = push(outs, json_int(s->vmap[n->out[k]]));
    if (ok && d->n_attrs) {
        cJSON *attrs = cJSON_CreateObject();
        ok = add(o, "attrs", attrs);
        for (int k = 0; ok && k < d->n_attrs; k++) {
            /* control flow's "closure" points at tracing-time state (gradient rules): not saved */
            bool closure = (d->flags & OAR_OPF_CONTROL) && !strcmp(d->attrs[k].name, "closure");
            cJSON *a = closure ? json_int(0) : attr_json(&n->attrs[k]);
            if (!a && n->attrs[k].kind == OAR_ATTR_STR) {
                cJSON_Delete(o);
                return oar_error(OAR_ERR_INVALID_ARG, "%s: node %d (%s): attribute '%s' is not valid UTF-8", WHO, id,
                                 d->name, d->attrs[k].name);
            }
            ok = add(attrs, d->attrs[k].name, a);
        }
    }
    if (ok && n->n_blocks) {
        cJSON *blocks = cJSON_CreateArray();
        ok = add(o, "blocks", blocks);
        for (int k = 0; ok && k < n->n_blocks; k++) ok = push(blocks, json_int(s->bmap[n->blocks[k]]));
    }
    if (!ok) {
        cJSON_Delete(o);
        return oar_error(OAR_ERR_OOM, "%s: out of memory writing node %d", WHO, id);
    }
    *out = o;
    return OAR_OK;
}

static void put_list_start(text *t, const char *key) {
    put(t, ",\n  \"");
    put(t, key);
    put(t, "\": [");
}

static oar_status build_json(const saver *s, const char *const *in_names, const char *const *out_names, text *t) {
    const oar_program *p = s->p;
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    char head[200];
    snprintf(head, sizeof head, "{\n  \"format\": \"%s\",\n  \"version\": %d,\n  \"oar_version\": \"%s\"",
             OAR_PROGRAM_FORMAT, OAR_PROGRAM_VERSION, oar_version());
    put(t, head);
    put_list_start(t, "inputs");
    for (int i = 0; i < main->n_in; i++) {
        put(t, i ? ",\n    " : "\n    ");
        put_json(t, io_entry(s, in_names[i], main->in[i]));
    }
    put(t, main->n_in ? "\n  ]" : "]");
    put_list_start(t, "outputs");
    for (int i = 0; i < main->n_out; i++) {
        put(t, i ? ",\n    " : "\n    ");
        put_json(t, io_entry(s, out_names[i], main->out[i]));
    }
    put(t, main->n_out ? "\n  ]" : "]");
    put_list_start(t, "params");
    int k = 0;
    for (int v = 0; v < p->n_values; v++) {
        if (s->vmap[v] < 0 || s->vkey[v] < 0) continue;
        put(t, k++ ? ",\n    " : "\n    ");
        put_json(t, param_entry(s, v));
    }
    put(t, k ? "\n  ]" : "]");
    /* metas of node outputs and sub-block inputs */
    put_list_start(t, "values");
    k = 0;
    for (int v = 0; v < p->n_values; v++) {
        const oar_value *val = &p->values[v];
        if (s->vmap[v] < 0 || val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST) continue;
        if (s->main_in[v]) continue;
        put(t, k++ ? ",\n    " : "\n    ");
        put_json(t, value_entry(s, v));
    }
    put(t, k ? "\n  ]" : "]");
    put_list_start(t, "blocks");
    for (int nb = 0; nb < s->n_blocks; nb++) {
        const oar_block *bl = &p->blocks[s->border[nb]];
        int *ids = malloc(sizeof(int) * (size_t)(bl->n_in + bl->n_out + 1));
        if (!ids) return oar_error(OAR_ERR_OOM, "%s: out of memory writing block %d", WHO, nb);
        for (int i = 0; i < bl->n_in; i++) ids[i] = s->vmap[bl->in[i]];
        for (int i = 0; i < bl->n_out; i++) ids[bl->n_in + i] = s->vmap[bl->out[i]];
        cJSON *head_obj = cJSON_CreateObject();
        bool ok = head_obj && add(head_obj, "parent", json_int(nb ? s->bmap[bl->parent] : -1)) &&
                  add(head_obj, "inputs", int_array(ids, bl->n_in)) &&
                  add(head_obj, "outputs", int_array(ids + bl->n_in, bl->n_out));
        free(ids);
        if (!ok) {
            cJSON_Delete(head_obj);
            return oar_error(OAR_ERR_OOM, "%s: out of memory writing block %d", WHO, nb);
        }
        /* {"parent": -1, "inputs": [..], "outputs": [..], "nodes": [ one node a line ]} */
        text h = {0};
        put_json(&h, head_obj);
        if (h.oom) {
            free(h.s);
            return oar_error(OAR_ERR_OOM, "%s: out of memory writing block %d", WHO, nb);
        }
        put(t, nb ? ",\n    " : "\n    ");
        put_n(t, h.s, h.n - 1); /* without the closing brace */
        free(h.s);
        put(t, ", \"nodes\": [");
        int shown = 0;
        for (int i = 0; i < bl->n_nodes; i++) {
            if (p->nodes[bl->nodes[i]].dead) continue;
            cJSON *node = NULL;
            oar_status st = node_entry(s, bl->nodes[i], &node);
            if (st != OAR_OK) return st;
            put(t, shown++ ? ",\n      " : "\n      ");
            put_json(t, node);
        }
        put(t, shown ? "\n    ]}" : "]}");
    }
    put(t, s->n_blocks ? "\n  ]\n}\n" : "]\n}\n");
    if (t->oom) return oar_error(OAR_ERR_OOM, "%s: out of memory writing the program", WHO);
    return OAR_OK;
}

/* ---- arguments */
static oar_status check_names(const char *what, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        const char *s = names[i];
        if (!s || !*s) return oar_error(OAR_ERR_INVALID_ARG, "%s: %s name %d is %s; expected a non-empty name", WHO,
                                        what, i, s ? "empty" : "NULL");
        if (!oar_io_valid_utf8(s, strlen(s)))
            return oar_error(OAR_ERR_INVALID_ARG, "%s: %s name %d is not valid UTF-8", WHO, what, i);
    }
    int dup = oar_io_find_duplicate(names, n);
    if (dup >= 0)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: the %s name '%.200s' is given twice; names must be distinct", WHO,
                         what, names[dup]);
    return OAR_OK;
}

/* The names to save: given, else the inputs' own names, else "<prefix><i>" (into store). */
static const char **pick_names(const char *const *given, const oar_program *p, const int *ids, int n,
                               const char *prefix, char (*store)[24]) {
    const char **names = malloc(sizeof(char *) * (size_t)(n + 1));
    if (!names) return NULL;
    for (int i = 0; i < n; i++) {
        if (given) {
            names[i] = given[i];
        } else if (ids && p->values[ids[i]].name && *p->values[ids[i]].name) {
            names[i] = p->values[ids[i]].name;
        } else {
            snprintf(store[i], sizeof store[i], "%s%d", prefix, i);
            names[i] = store[i];
        }
    }
    return names;
}

static cJSON *string_array(const char *const *names, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++)
        if (!push(a, cJSON_CreateString(names[i]))) {
            cJSON_Delete(a);
            return NULL;
        }
    return a;
}

oar_status oar_program_save(const oar_program *p, const char *path, const char *const *input_names,
                            const char *const *output_names) {
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a program, got NULL", WHO);
    if (!path || !*path)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a path (\"dir/model\" for dir/model.json and "
                                              "dir/model.safetensors), got %s", WHO, path ? "\"\"" : "NULL");
    oar_status st = oar_program_verify(p);
    if (st != OAR_OK) {
        oar_error_prefix("%s: '%.300s': the program does not verify", WHO, path);
        return st;
    }
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    char (*store)[24] = malloc(sizeof *store * (size_t)(main->n_in + main->n_out + 1));
    const char **in_names = store ? pick_names(input_names, p, main->in, main->n_in, "input", store) : NULL;
    const char **out_names = store ? pick_names(output_names, p, NULL, main->n_out, "output", store + main->n_in) : NULL;
    saver s = {.p = p};
    text t = {0};
    char *jpath = oar_model_file(path, ".json"), *wpath = oar_model_file(path, ".safetensors");
    char *in_list = NULL, *out_list = NULL;
    if (!in_names || !out_names || !jpath || !wpath) {
        st = oar_error(OAR_ERR_OOM, "%s: out of memory saving '%.300s'", WHO, path);
        goto done;
    }
    if ((st = check_names("input", in_names, main->n_in)) != OAR_OK) goto done;
    if ((st = check_names("output", out_names, main->n_out)) != OAR_OK) goto done;
    if ((st = plan(&s)) != OAR_OK) goto done;
    if ((st = build_json(&s, in_names, out_names, &t)) != OAR_OK) goto done;

    /* the weights, with what identifies them as this program's (like Paddle's .pdiparams.info) */
    cJSON *il = string_array(in_names, main->n_in), *ol = string_array(out_names, main->n_out);
    in_list = il ? cJSON_PrintUnformatted(il) : NULL;
    out_list = ol ? cJSON_PrintUnformatted(ol) : NULL;
    cJSON_Delete(il);
    cJSON_Delete(ol);
    if (!in_list || !out_list) {
        st = oar_error(OAR_ERR_OOM, "%s: out of memory saving '%.300s'", WHO, path);
        goto done;
    }
    char version[16];
    snprintf(version, sizeof version, "%d", OAR_PROGRAM_VERSION);
    const char *meta_keys[] = {"format", "format_version", "oar_version", "inputs", "outputs"};
    const char *meta_values[] = {OAR_PROGRAM_FORMAT, version, oar_version(), in_list, out_list};
    st = oar_safetensors_save(wpath, (const char *const *)s.keys, s.tensors, s.n_tensors, meta_keys, meta_values, 5);
    if (st != OAR_OK) {
        oar_error_prefix("%s: '%.300s'", WHO, path);
        goto done;
    }
    oar_io_writer *w = oar_io_writer_open(jpath, WHO);
    if (!w) {
        st = oar_last_status();
        goto done;
    }
    if ((st = oar_io_writer_write(w, t.s, t.n)) != OAR_OK) {
        oar_io_writer_abort(w);
        goto done;
    }
    st = oar_io_writer_commit(w);
done:
    saver_free(&s);
    free(t.s);
    free(jpath);
    free(wpath);
    cJSON_free(in_list);
    cJSON_free(out_list);
    free(in_names);
    free(out_names);
    free(store);
    return st;
}

#else /* !OAR_HAVE_CJSON */

oar_status oar_program_save(const oar_program *p, const char *path, const char *const *input_names,
                            const char *const *output_names) {
    return oar_error(OAR_ERR_UNSUPPORTED, "%s: oar was built without cJSON, which model files need; install cJSON "
                                          "and reconfigure", WHO);
}

#endif
