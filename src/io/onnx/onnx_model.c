/* oar_onnx_load: the protobuf parsed, the graph checked (every value defined once and before
 * use, no cycles, every operator translated at the model's opset), the initializers read, and a
 * compiled function made whose body interprets the graph (onnx_run.c). */
#include "io/onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#define OX_MAX_FILE_BYTES ((size_t)1 << 34) /* 16 GiB: the protobuf limit is 2 GiB, external data aside */

/* ---- value names: open addressing over the graph's strings (borrowed from the proto) */
typedef struct name_map {
    size_t cap;
    const char **keys;
    int *vals;
} name_map;

static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static int map_find(const name_map *m, const char *k) {
    for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (!strcmp(m->keys[i], k)) return m->vals[i];
    }
}

static void map_put(name_map *m, const char *k, int v) {
    size_t i = hash_str(k) & (m->cap - 1);
    while (m->keys[i]) i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

/* ---- loading */
typedef struct loader {
    oar_onnx_model *m;
    const Onnx__GraphProto *g;
    name_map names;
    int *producer;      /* per value: the node that writes it, -1 for inputs and initializers */
} loader;

static oar_status new_value(loader *L, const char *name, const char *what, int *id) {
    if (!name || !*name)
        return oar_error(OAR_ERR_FORMAT, "onnx: %s has an empty name; expected a value name", what);
    if (map_find(&L->names, name) >= 0)
        return oar_error(OAR_ERR_FORMAT, "onnx: value '%.200s' is defined twice (again as %s); a graph defines "
                                         "each value once", name, what);
    *id = L->m->n_values++;
    L->m->value_names[*id] = name;
    map_put(&L->names, name, *id);
    return OAR_OK;
}

static oar_status read_io(const Onnx__ValueInfoProto *v, ox_io *io, const char *what) {
    io->name = v->name;
    const Onnx__TypeProto *tp = v->type;
    io->ndim = -1;
    if (!tp && !strcmp(what, "graph output")) { /* an output's type is optional: the program gives it */
        io->dtype = OAR_DTYPE_COUNT;
        return OAR_OK;
    }
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s '%.200s' is not a tensor (sequences, maps and optionals are "
                                              "not supported)", what, v->name);
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!ox_dtype_from_onnx(tt->elem_type, &io->dtype))
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s '%.200s' has dtype %s; oar supports float, double, float16, "
                                              "bfloat16, int8, uint8, int32, int64 and bool", what, v->name,
                         ox_onnx_type_name(tt->elem_type));
    io->ndim = -1; /* no shape given: any rank */
    if (!tt->shape) return OAR_OK;
    if (tt->shape->n_dim > OAR_MAX_DIMS)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s '%.200s' has %zu dims; oar supports at most %d", what,
                         v->name, tt->shape->n_dim, OAR_MAX_DIMS);
    io->ndim = (int)tt->shape->n_dim;
    for (int d = 0; d < io->ndim; d++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[d];
        bool fixed = dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (fixed && dim->dim_value < 0)
            return oar_error(OAR_ERR_FORMAT, "onnx: %s '%.200s' dim %d is %lld; expected a size >= 0", what, v->name,
                             d, (long long)dim->dim_value);
        io->shape[d] = fixed ? dim->dim_value : -1;
    }
    return OAR_OK;
}

/* The opset of the default domain, and every other domain refused unless unused. */
static oar_status read_opsets(oar_onnx_model *m) {
    const Onnx__ModelProto *p = m->proto;
    m->opset = -1;
    for (size_t i = 0; i < p->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *o = p->opset_import[i];
        if (!o->domain || !*o->domain || !strcmp(o->domain, "ai.onnx")) m->opset = o->version;
    }
    if (m->opset < 0) {
        if (p->n_opset_import)
            return oar_error(OAR_ERR_FORMAT, "onnx: the model imports no opset of the default domain (ai.onnx)");
        m->opset = 1; /* IR version 1-2 models carry none */
    }
    if (m->opset > 25)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: the model uses opset %lld; oar translates opsets up to 25",
                         (long long)m->opset);
    return OAR_OK;
}

/* A min-heap of node indices (the ready nodes of the sort below). */
static void heap_push(int *h, int *n, int v) {
    int i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = v;
}

static int heap_pop(int *h, int *n) {
    int top = h[0], v = h[--*n], i = 0;
    for (int c; (c = 2 * i + 1) < *n; i = c) {
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
    }
    h[i] = v;
    return top;
}

/* Kahn's order over the nodes; a node left unordered sits on a cycle. Of the nodes ready, the
 * one listed first goes first, so a graph already in order keeps the file's order. Why: the
 * program's node order decides which of two convs feeding an add takes it as a residual
 * (fuse_conv_act), so an exported oar program re-imported in any other order fused the other
 * way, and oneDNN's avx2 kernels sum conv + bias + residual in an order that is then one ulp
 * apart (resnet20's downsampling blocks at OAR_CPU_ISA=avx2/generic). */
static oar_status sort_nodes(loader *L, ox_node *raw, int n) {
    oar_onnx_model *m = L->m;
    int *pending = oar_malloc(sizeof(int) * (size_t)(n + 1)), *queue = oar_malloc(sizeof(int) * (size_t)(n + 1));
    int *users_start = oar_malloc(sizeof(int) * (size_t)(m->n_values + 2));
    int total = 0;
    for (int i = 0; i < n; i++) total += raw[i].n_in;
    int *users = oar_malloc(sizeof(int) * (size_t)(total + 1));
    oar_status st = pending && queue && users_start && users ? OAR_OK : OAR_ERR_OOM;
    if (st == OAR_OK) {
        for (int i = 0; i < n; i++)
            for (int k = 0; k < raw[i].n_in; k++)
                if (raw[i].in[k] >= 0 && L->producer[raw[i].in[k]] >= 0) users_start[raw[i].in[k] + 1]++, pending[i]++;
        for (int v = 0; v < m->n_values; v++) users_start[v + 1] += users_start[v];
        int *fill = oar_malloc(sizeof(int) * (size_t)(m->n_values + 1));
        if (!fill) st = OAR_ERR_OOM;
        for (int i = 0; st == OAR_OK && i < n; i++)
            for (int k = 0; k < raw[i].n_in; k++) {
                int v = raw[i].in[k];
                if (v >= 0 && L->producer[v] >= 0) users[users_start[v] + fill[v]++] = i;
            }
        free(fill);
    }
    int ready = 0, placed = 0;
    for (int i = 0; st == OAR_OK && i < n; i++)
        if (!pending[i]) heap_push(queue, &ready, i);
    while (st == OAR_OK && ready) {
        int i = heap_pop(queue, &ready);
        m->nodes[placed++] = raw[i];
        for (int k = 0; k < raw[i].n_out; k++) {
            int v = raw[i].out[k];
            if (v < 0) continue;
            for (int u = users_start[v]; u < users_start[v + 1]; u++)
                if (--pending[users[u]] == 0) heap_push(queue, &ready, users[u]);
        }
    }
    if (st == OAR_OK && placed < n) {
        int stuck = 0;
        while (!pending[stuck]) stuck++;
        st = oar_error(OAR_ERR_FORMAT, "onnx: the graph has a cycle through node '%.200s' (%s); expected an acyclic "
                                       "graph", raw[stuck].p->name ? raw[stuck].p->name : "",
                       raw[stuck].p->op_type ? raw[stuck].p->op_type : "?");
    }
    free(pending);
    free(queue);
    free(users_start);
    free(users);
    return st;
}

static oar_status read_nodes(loader *L) {
    oar_onnx_model *m = L->m;
    const Onnx__GraphProto *g = L->g;
    ox_node *raw = oar_malloc(sizeof(ox_node) * (g->n_node + 1));
    if (!raw) return OAR_ERR_OOM;
    char missing[1024] = "";
    size_t nm = 0;
    oar_status st = OAR_OK;
    /* outputs first, so inputs may name values of nodes listed later (sorted below) */
    for (size_t i = 0; st == OAR_OK && i < g->n_node; i++) {
        const Onnx__NodeProto *p = g->node[i];
        ox_node *n = &raw[i];
        n->p = p;
        if (p->n_input > OX_MAX_NODE_IO || p->n_output > OX_MAX_NODE_IO) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: node '%.200s' (%s) has %zu inputs and %zu outputs; at most "
                                                "%d each are supported", p->name ? p->name : "", p->op_type,
                           p->n_input, p->n_output, OX_MAX_NODE_IO);
            break;
        }
        n->n_in = (int)p->n_input;
        n->n_out = (int)p->n_output;
        n->in = oar_malloc(sizeof(int) * (p->n_input + p->n_output + 1));
        if (!n->in) {
            st = OAR_ERR_OOM;
            break;
        }
        n->out = n->in + n->n_in;
        char what[300];
        snprintf(what, sizeof what, "an output of node '%.200s' (%s)", p->name ? p->name : "", p->op_type);
        for (int k = 0; k < n->n_out && st == OAR_OK; k++) {
            n->out[k] = -1;
            if (p->output[k] && *p->output[k]) st = new_value(L, p->output[k], what, &n->out[k]);
            if (st == OAR_OK && n->out[k] >= 0) L->producer[n->out[k]] = (int)i;
        }
        if (st != OAR_OK) break;
        const char *domain = p->domain && *p->domain && strcmp(p->domain, "ai.onnx") ? p->domain : NULL;
        n->op = domain ? NULL : ox_find_op(p->op_type ? p->op_type : "");
        if (!n->op || m->opset < n->op->since) {
            char one[300];
            if (domain)
                snprintf(one, sizeof one, "'%.60s' (%.60s in domain %.60s)", p->name ? p->name : "", p->op_type,
                         domain);
            else if (n->op)
                snprintf(one, sizeof one, "'%.60s' (%.60s at opset %lld: translated from opset %d)",
                         p->name ? p->name : "", p->op_type, (long long)m->opset, n->op->since);
            else snprintf(one, sizeof one, "'%.60s' (%.60s)", p->name ? p->name : "", p->op_type ? p->op_type : "");
            if (nm < sizeof missing) nm += (size_t)snprintf(missing + nm, sizeof missing - nm, "%s%s", nm ? ", " : "", one);
        }
    }
    if (st == OAR_OK && nm) {
        char ops[2048];
        ox_list_ops(ops, sizeof ops);
        st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: the model (opset %lld) uses operators oar does not translate: "
                                            "node %s. Supported (ai.onnx): %s", (long long)m->opset, missing, ops);
    }
    for (size_t i = 0; st == OAR_OK && i < g->n_node; i++) {
        ox_node *n = &raw[i];
        for (int k = 0; k < n->n_in && st == OAR_OK; k++) {
            const char *name = n->p->input[k];
            n->in[k] = name && *name ? map_find(&L->names, name) : -1;
            if (name && *name && n->in[k] < 0)
                st = oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' (%s) reads '%.200s', which no graph input, "
                                               "initializer or node defines", n->p->name ? n->p->name : "",
                               n->p->op_type, name);
        }
    }
    if (st == OAR_OK) st = sort_nodes(L, raw, (int)g->n_node);
    if (st != OAR_OK)
        for (size_t i = 0; i < g->n_node; i++) free(raw[i].in);
    else m->n_nodes = (int)g->n_node;
    free(raw);
    return st;
}

static oar_status read_graph(loader *L, const char *dir) {
    oar_onnx_model *m = L->m;
    const Onnx__GraphProto *g = L->g;
    if (g->n_sparse_initializer)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: the graph has %zu sparse initializers; not supported",
                         g->n_sparse_initializer);
    size_t n_names = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) n_names += g->node[i]->n_output;
    m->value_names = oar_malloc(sizeof(char *) * (n_names + 1));
    L->producer = oar_malloc(sizeof(int) * (n_names + 1));
    m->nodes = oar_malloc(sizeof(ox_node) * (g->n_node + 1));
    m->init = oar_malloc(sizeof(oar_tensor *) * (g->n_initializer + 1));
    m->init_value = oar_malloc(sizeof(int) * (g->n_initializer + 1));
    for (L->names.cap = 16; L->names.cap < 2 * n_names + 2; L->names.cap *= 2) {}
    L->names.keys = oar_malloc(sizeof(char *) * L->names.cap);
    L->names.vals = oar_malloc(sizeof(int) * L->names.cap);
    if (!m->value_names || !L->producer || !m->nodes || !m->init || !m->init_value || !L->names.keys ||
        !L->names.vals)
        return OAR_ERR_OOM;
    for (size_t i = 0; i < n_names; i++) L->producer[i] = -1;
    oar_status st = OAR_OK;
    for (size_t i = 0; i < g->n_initializer && st == OAR_OK; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        char what[300];
        snprintf(what, sizeof what, "initializer '%.200s'", t->name ? t->name : "");
        st = new_value(L, t->name, what, &m->init_value[i]);
        if (st != OAR_OK) break;
        if (!(m->init[i] = ox_tensor_from_proto(t, dir, what, true))) st = oar_last_status();
        else m->n_init++;
    }
    for (size_t i = 0; i < g->n_input && st == OAR_OK; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        if (v->name && map_find(&L->names, v->name) >= 0) continue; /* an initializer listed as input (IR < 4) */
        if (m->n_in == OX_MAX_IO)
            return oar_error(OAR_ERR_UNSUPPORTED, "onnx: the graph has more than %d inputs", OX_MAX_IO);
        ox_io *io = &m->in[m->n_in];
        if ((st = read_io(v, io, "graph input")) != OAR_OK) break;
        st = new_value(L, v->name, "a graph input", &io->value);
        m->n_in++;
    }
    if (st == OAR_OK) st = read_nodes(L);
    if (st == OAR_OK && g->n_output == 0) st = oar_error(OAR_ERR_FORMAT, "onnx: the graph has no outputs");
    if (st == OAR_OK && g->n_output > OX_MAX_IO)
        st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: the graph has %zu outputs; at most %d are supported", g->n_output,
                       OX_MAX_IO);
    for (size_t k = 0; k < g->n_output && st == OAR_OK; k++) {
        ox_io *io = &m->out[k];
        if ((st = read_io(g->output[k], io, "graph output")) != OAR_OK) break;
        io->value = io->name ? map_find(&L->names, io->name) : -1;
        if (io->value < 0)
            st = oar_error(OAR_ERR_FORMAT, "onnx: graph output '%.200s' is not defined by any node, input or "
                                           "initializer", io->name ? io->name : "");
        m->n_out++;
    }
    return st;
}

static oar_onnx_model *load(Onnx__ModelProto *proto, const char *dir, const oar_onnx_opts *opts, const char *what) {
    oar_onnx_model *m = OAR_NEW(oar_onnx_model);
    if (!m) {
        onnx__model_proto__free_unpacked(proto, NULL);
        return NULL;
    }
    m->proto = proto;
    oar_status st = proto->graph ? read_opsets(m)
                                 : oar_error(OAR_ERR_FORMAT, "onnx: the model has no graph");
    loader L = {.m = m, .g = proto->graph};
    if (st == OAR_OK) st = read_graph(&L, dir);
    free(L.names.keys);
    free(L.names.vals);
    free(L.producer);
    if (opts) m->opts = *opts;
    /* value inputs: graph inputs read where oar needs values at compile time (shapes, axes) */
    for (int i = 0; st == OAR_OK && i < m->n_nodes; i++)
        for (int k = 0; k < m->nodes[i].n_in && k < 32; k++)
            if ((m->nodes[i].op->known >> k) & 1u)
                for (int j = 0; j < m->n_in; j++)
                    if (m->nodes[i].in[k] == m->in[j].value && !m->value_input[j]) {
                        m->value_input[j] = true;
                        m->n_value_inputs++;
                    }
    /* static inputs: compile now, so the whole translation is checked at load */
    bool fixed = st == OAR_OK && !m->n_value_inputs;
    for (int i = 0; i < m->n_in && fixed; i++) {
        fixed = m->in[i].ndim >= 0;
        for (int d = 0; fixed && d < m->in[i].ndim; d++) fixed = m->in[i].shape[d] >= 0;
    }
    if (fixed) {
        oar_tensor *in[OX_MAX_IO] = {0}, *out[OX_MAX_IO] = {0};
        oar_scope_begin();
        for (int i = 0; i < m->n_in && st == OAR_OK; i++)
            if (!(in[i] = oar_zeros(m->in[i].shape, m->in[i].ndim, m->in[i].dtype))) st = oar_last_status();
        if (st == OAR_OK) st = oar_onnx_run(m, in, m->n_in, out, m->n_out);
        oar_scope_end();
    }
    if (st != OAR_OK) {
        oar_error_prefix("onnx_load: %s", what);
        oar_onnx_free(m);
        return NULL;
    }
    return m;
}

oar_onnx_model *oar_onnx_load_buffer(const void *data, size_t size, const char *dir, const oar_onnx_opts *opts) {
    oar_init();
    if (!data && size) {
        oar_error(OAR_ERR_INVALID_ARG, "onnx_load_buffer: expected data, got NULL");
        return NULL;
    }
    Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, size, data);
    if (!p) {
        oar_error(OAR_ERR_FORMAT, "onnx_load: the data (%zu bytes) is not a valid ONNX ModelProto: malformed or "
                                  "truncated protobuf", size);
        return NULL;
    }
    return load(p, dir, opts, "(from memory)");
}

oar_onnx_model *oar_onnx_load(const char *path, const oar_onnx_opts *opts) {
    oar_init();
    if (!path) {
        oar_error(OAR_ERR_INVALID_ARG, "onnx_load: expected a path, got NULL");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        oar_error(OAR_ERR_IO, "onnx_load: cannot open '%s'", path);
        return NULL;
    }
    /* mapped, not read: the pages come from the page cache, and protobuf-c copies what it keeps */
    int fd = fileno(f);
    struct stat sb;
    size_t size = fstat(fd, &sb) == 0 && sb.st_size >= 0 ? (size_t)sb.st_size : 0;
    if (size > OX_MAX_FILE_BYTES) {
        fclose(f);
        oar_error(OAR_ERR_UNSUPPORTED, "onnx_load: '%s' has %zu bytes; at most %zu are supported", path, size,
                  OX_MAX_FILE_BYTES);
        return NULL;
    }
    void *map = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    fclose(f);
    if (size && map == MAP_FAILED) {
        oar_error(OAR_ERR_IO, "onnx_load: cannot map '%s'", path);
        return NULL;
    }
    Onnx__ModelProto *p = onnx__model_proto__unpack(NULL, size, map);
    if (map) munmap(map, size);
    if (!p) {
        oar_error(OAR_ERR_FORMAT, "onnx_load: '%s' (%zu bytes) is not a valid ONNX model: malformed or truncated "
                                  "protobuf", path, size);
        return NULL;
    }
    char dir[4096], what[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    snprintf(what, sizeof what, "'%s'", path);
    return load(p, dir, opts, what);
}

void oar_onnx_free(oar_onnx_model *m) {
    if (!m) return;
    for (int v = 0; v < m->n_variants; v++) {
        oar_jit_free(m->variants[v].jit);
        for (int i = 0; i < m->n_in; i++) oar_tensor_unref(m->variants[v].values[i]);
    }
    for (int i = 0; i < m->n_init; i++) oar_tensor_unref(m->init[i]);
    for (int i = 0; i < m->n_nodes; i++) free(m->nodes[i].in);
    free(m->init);
    free(m->init_value);
    free(m->nodes);
    free(m->value_names);
    onnx__model_proto__free_unpacked(m->proto, NULL);
    free(m);
}

int oar_onnx_num_inputs(const oar_onnx_model *m) { return m ? m->n_in : 0; }
int oar_onnx_num_outputs(const oar_onnx_model *m) { return m ? m->n_out : 0; }

oar_status oar_onnx_input_spec(const oar_onnx_model *m, int i, oar_input_spec *out) {
    if (!m || !out || i < 0 || i >= m->n_in)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_input_spec: expected a model, an output struct and i in [0, %d), "
                                              "got i = %d", m ? m->n_in : 0, i);
    memset(out, 0, sizeof *out);
    out->dtype = m->in[i].dtype;
    out->ndim = m->in[i].ndim < 0 ? 0 : m->in[i].ndim;
    memcpy(out->shape, m->in[i].shape, sizeof(int64_t) * (size_t)out->ndim);
    out->name = m->in[i].name;
    return OAR_OK;
}

const char *oar_onnx_output_name(const oar_onnx_model *m, int k) {
    return m && k >= 0 && k < m->n_out ? m->out[k].name : NULL;
}

static void format_io(const ox_io *io, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s %s", io->name,
                                io->dtype == OAR_DTYPE_COUNT ? "(type not given)" : oar_dtype_name(io->dtype));
    if (io->ndim < 0) {
        snprintf(buf + n, size - n, "[any rank]");
        return;
    }
    for (int d = 0; d < io->ndim && n < size; d++) {
        if (io->shape[d] < 0) n += (size_t)snprintf(buf + n, size - n, "%s?", d ? ", " : "[");
        else n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "[", (long long)io->shape[d]);
    }
    if (n < size) snprintf(buf + n, size - n, "%s]", io->ndim ? "" : "[");
}

static bool same_value(const oar_tensor *a, const oar_tensor *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim))
        return false;
    size_t n = (size_t)a->numel * oar_dtypes[a->dtype].size;
    const oar_tensor *c = b->contiguous ? b : NULL;
    return c && !memcmp(oar_tensor_ptr(a), oar_tensor_ptr(c), n);
}

/* The compiled function for the value inputs' values in `in`: cached, else made (the least
 * recently used goes when the cache is full). */
static ox_variant *variant_for(oar_onnx_model *m, oar_tensor *const *in) {
    for (int k = 0; k < m->n_variants; k++) {
        ox_variant *v = &m->variants[k];
        bool same = true;
        for (int i = 0; i < m->n_in && same; i++)
            if (m->value_input[i]) same = in[i]->storage && same_value(v->values[i], in[i]);
        if (same) {
            v->last_use = ++m->tick;
            return v;
        }
    }
    for (int i = 0; i < m->n_in; i++)
        if (m->value_input[i] && (!in[i]->storage || in[i]->device != OAR_CPU)) {
            oar_error(OAR_ERR_INVALID_ARG, "onnx_run: input '%s' gives shapes or axes to the model, so it must be a "
                                           "host tensor with data", m->in[i].name);
            return NULL;
        }
    if (m->n_variants == OX_MAX_VARIANTS) {
        int lru = 0;
        for (int k = 1; k < m->n_variants; k++)
            if (m->variants[k].last_use < m->variants[lru].last_use) lru = k;
        ox_variant *v = &m->variants[lru];
        oar_jit_free(v->jit);
        for (int i = 0; i < m->n_in; i++) oar_tensor_unref(v->values[i]);
        *v = m->variants[--m->n_variants];
        memset(&m->variants[m->n_variants], 0, sizeof *v);
        if (m->last == &m->variants[m->n_variants]) m->last = v;
        else if (m->last == v) m->last = NULL;
    }
    ox_variant *v = &m->variants[m->n_variants];
    memset(v, 0, sizeof *v);
    v->m = m;
    oar_jit_opts jo = {.strategy = m->opts.strategy};
    if (!(v->jit = oar_jit_to_static(ox_interpret, v, &jo))) return NULL;
    for (int i = 0, j = 0; i < m->n_in; i++) {
        if (!m->value_input[i]) {
            snprintf(v->jit->input_names[j++], sizeof v->jit->input_names[0], "%s", m->in[i].name);
            continue;
        }
        oar_tensor *c = oar_tensor_new(in[i]->dtype, in[i]->shape, in[i]->ndim);
        if (!c || oar_tensor_copy_strided(c, in[i]) != OAR_OK) {
            oar_tensor_unref(c);
            for (int k = 0; k < i; k++) oar_tensor_unref(v->values[k]);
            oar_jit_free(v->jit);
            memset(v, 0, sizeof *v);
            return NULL;
        }
        v->values[i] = c;
    }
    for (int k = 0; k < m->n_out; k++)
        snprintf(v->jit->output_names[k], sizeof v->jit->output_names[k], "%s", m->out[k].name);
    v->last_use = ++m->tick;
    m->n_variants++;
    return v;
}

oar_status oar_onnx_run(oar_onnx_model *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "onnx_run: expected a model, got NULL");
    if (n_in != m->n_in || n_out != m->n_out || (n_in && !in) || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_run: the model takes %d inputs and gives %d outputs, got n_in = "
                                              "%d, n_out = %d", m->n_in, m->n_out, n_in, n_out);
    for (int i = 0; i < n_in; i++) {
        const ox_io *io = &m->in[i];
        const oar_tensor *x = in[i];
        OAR_CHECK_HANDLE("onnx_run", x, oar_last_status());
        bool ok = x && x->dtype == io->dtype && (io->ndim < 0 || x->ndim == io->ndim);
        for (int d = 0; ok && io->ndim >= 0 && d < io->ndim; d++) ok = io->shape[d] < 0 || io->shape[d] == x->shape[d];
        if (!ok) {
            char want[300], got[300];
            format_io(io, want, sizeof want);
            if (!x) snprintf(got, sizeof got, "NULL");
            else {
                oar_meta mt;
                oar_meta_from(&mt, x);
                oar_meta_format(&mt, 0, got, sizeof got);
            }
            return oar_error(x ? (x->dtype != io->dtype ? OAR_ERR_DTYPE : OAR_ERR_SHAPE) : OAR_ERR_INVALID_ARG,
                             "onnx_run: input %d expects %s ('?': any size), got %s", i, want, got);
        }
    }
    ox_variant *v = variant_for(m, in);
    if (!v) return oar_last_status();
    oar_tensor *rest[OX_MAX_IO];
    int n_rest = 0;
    for (int i = 0; i < n_in; i++)
        if (!m->value_input[i]) rest[n_rest++] = in[i];
    m->last = v;
    return oar_jit_call(v->jit, rest, n_rest, out, n_out);
}

int oar_onnx_describe(const oar_onnx_model *m, char *buf, size_t size) {
    if (!m) return -1;
    size_t n = 0;
#define PUT(...) n += (size_t)snprintf(n < size ? buf + n : NULL, n < size ? size - n : 0, __VA_ARGS__)
    const Onnx__ModelProto *p = m->proto;
    PUT("onnx model: ir_version %lld, producer %s %s, opset %lld", (long long)p->ir_version,
        p->producer_name ? p->producer_name : "?", p->producer_version ? p->producer_version : "",
        (long long)m->opset);
    for (size_t i = 0; i < p->n_opset_import; i++)
        if (p->opset_import[i]->domain && *p->opset_import[i]->domain)
            PUT(", %s %lld", p->opset_import[i]->domain, (long long)p->opset_import[i]->version);
    PUT("\n%d nodes, %d initializers\n", m->n_nodes, m->n_init);
    char line[400];
    for (int i = 0; i < m->n_in; i++) {
        format_io(&m->in[i], line, sizeof line);
        PUT("input  %s\n", line);
    }
    for (int k = 0; k < m->n_out; k++) {
        format_io(&m->out[k], line, sizeof line);
        PUT("output %s\n", line);
    }
    PUT("operators:");
    for (int i = 0; i < m->n_nodes; i++) { /* each op type once, with its count, in order of appearance */
        const char *op = m->nodes[i].p->op_type;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(m->nodes[j].p->op_type, op);
        if (seen) continue;
        int count = 0;
        for (int j = i; j < m->n_nodes; j++) count += !strcmp(m->nodes[j].p->op_type, op);
        PUT(" %s x%d", op, count);
    }
    PUT("\n");
#undef PUT
    return (int)n;
}

int oar_onnx_dump(const oar_onnx_model *m, char *buf, size_t size) {
    const oar_jit *f = m && m->last ? m->last->jit : NULL;
    if (!f || !f->last) return -1;
    for (int i = 0; i < f->n_entries; i++)
        if (&f->entries[i] == f->last) return oar_jit_dump(f, i, buf, size);
    return -1;
}

oar_status oar_onnx_save_program(oar_onnx_model *m, const char *path) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "onnx_save_program: expected a model, got NULL");
    if (!m->last)
        return oar_error(OAR_ERR_STATE, "onnx_save_program: the model has no compiled program yet; run it once with "
                                        "oar_onnx_run (example inputs) and then save");
    if (m->n_value_inputs)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx_save_program: the model takes shapes or axes as inputs, which "
                                              "its program holds as constants; an oar model file would lose them");
    return oar_jit_save(m->last->jit, path);
}
