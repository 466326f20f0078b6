/* The graph reader: every value defined once in its graph and before use, no cycles, every
 * operator translated at the model's opset, the initializers read; and the subgraphs of
 * control-flow nodes (If's branches, Loop's body) read the same way, each in a scope of its own
 * whose names hide the enclosing graphs' (ONNX lets a subgraph read any value of the graphs
 * around it). A node with subgraphs depends on the outer values they read (its captures), so
 * the sort orders it after their producers and a subgraph reading its own node's output is a
 * cycle. Value ids are one space over all graphs. */
#include "io/onnx/onnx_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- value names: open addressing over one graph's strings (borrowed from the proto) */
typedef struct scope {
    size_t cap;
    const char **keys;
    int *vals;
    const struct scope *parent;
    int id;
} scope;

static size_t hash_str(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static int map_find(const scope *m, const char *k) {
    for (size_t i = hash_str(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return -1;
        if (!strcmp(m->keys[i], k)) return m->vals[i];
    }
}

/* The innermost definition of k in s or the scopes around it. */
static int lookup(const scope *s, const char *k) {
    for (; s; s = s->parent) {
        int v = map_find(s, k);
        if (v >= 0) return v;
    }
    return -1;
}

static void map_put(scope *m, const char *k, int v) {
    size_t i = hash_str(k) & (m->cap - 1);
    while (m->keys[i]) i = (i + 1) & (m->cap - 1);
    m->keys[i] = k;
    m->vals[i] = v;
}

typedef struct loader {
    oar_onnx_model *m;
    const char *dir;
    int cap_values;
    int *vscope;        /* per value: the id of the scope (graph) that defines it */
    int *producer;      /* per value: the node of its graph that writes it, -1 for inputs and initializers */
    int n_scopes;
} loader;

static oar_status new_value(loader *L, scope *s, const char *name, const char *what, int *id) {
    if (!name || !*name)
        return oar_error(OAR_ERR_FORMAT, "onnx: %s has an empty name; expected a value name", what);
    if (map_find(s, name) >= 0)
        return oar_error(OAR_ERR_FORMAT, "onnx: value '%.200s' is defined twice (again as %s); a graph defines "
                                         "each value once", name, what);
    oar_onnx_model *m = L->m;
    if (m->n_values == L->cap_values) {
        int cap = L->cap_values ? 2 * L->cap_values : 64;
        const char **names = realloc(m->value_names, sizeof(char *) * (size_t)cap);
        if (names) m->value_names = names;
        int *vs = realloc(L->vscope, sizeof(int) * (size_t)cap);
        if (vs) L->vscope = vs;
        int *pr = realloc(L->producer, sizeof(int) * (size_t)cap);
        if (pr) L->producer = pr;
        if (!names || !vs || !pr) return oar_error(OAR_ERR_OOM, "onnx: out of memory for %d value names", cap);
        L->cap_values = cap;
    }
    *id = m->n_values++;
    m->value_names[*id] = name;
    L->vscope[*id] = s->id;
    L->producer[*id] = -1;
    map_put(s, name, *id);
    return OAR_OK;
}

/* The tensor type inside a sequence or optional type (sequences of tensors, optionals of a tensor
 * or of such a sequence); NULL with the error set for maps, sparse tensors and nesting deeper. */
static const Onnx__TypeProto *unwrap_type(const Onnx__TypeProto *tp, ox_kind *kind, const char *what,
                                          const char *name) {
    *kind = OX_TENSOR;
    if (tp->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
        tp = tp->optional_type ? tp->optional_type->elem_type : NULL;
        *kind = OX_OPT_TENSOR;
        if (tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
            tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
            *kind = OX_OPT_SEQ;
        }
    } else if (tp->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
        tp = tp->sequence_type ? tp->sequence_type->elem_type : NULL;
        *kind = OX_SEQ;
    }
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
        oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s '%.200s' is not a tensor, a sequence of tensors or an optional of "
                                       "either (maps, sparse tensors and sequences of sequences are not supported)",
                  what, name);
        return NULL;
    }
    return tp;
}

oar_status ox_read_io(const Onnx__ValueInfoProto *v, ox_io *io, const char *what, bool type_optional) {
    io->name = v->name;
    const Onnx__TypeProto *tp = v->type;
    io->ndim = -1;
    io->dtype = OAR_DTYPE_COUNT;
    io->kind = OX_TENSOR;
    if (!tp && type_optional) return OAR_OK; /* an output's type is optional: the program gives it */
    if (!tp) return oar_error(OAR_ERR_FORMAT, "onnx: %s '%.200s' has no type; expected a tensor type", what, v->name);
    if (!(tp = unwrap_type(tp, &io->kind, what, v->name))) return oar_last_status();
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt->has_elem_type && (type_optional || io->kind != OX_TENSOR)) return OAR_OK;
    if (!ox_dtype_from_onnx(tt->elem_type, &io->dtype))
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s '%.200s' has dtype %s; oar supports float, double, float16, "
                                              "bfloat16, int8, uint8, int16, uint16, int32, uint32, int64, uint64 "
                                              "and bool", what, v->name,
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

/* Value v read by a node of the graph of scope sid: the node of that graph it waits for, or -1. */
static int dep(const loader *L, int sid, int v) { return v >= 0 && L->vscope[v] == sid ? L->producer[v] : -1; }

/* Kahn's order over the nodes (inputs and captures); a node left unordered sits on a cycle. Of
 * the nodes ready, the one listed first goes first, so a graph already in order keeps the file's
 * order. Why: the program's node order decides which of two convs feeding an add takes it as a
 * residual (fuse_conv_act), so an exported oar program re-imported in any other order fused the
 * other way, and oneDNN's avx2 kernels sum conv + bias + residual in an order that is then one
 * ulp apart (resnet20's downsampling blocks at OAR_CPU_ISA=avx2/generic). */
static oar_status sort_nodes(loader *L, int sid, ox_node *raw, int n, ox_node *sorted) {
    int nv = L->m->n_values;
    int *pending = oar_malloc(sizeof(int) * (size_t)(n + 1)), *queue = oar_malloc(sizeof(int) * (size_t)(n + 1));
    int *users_start = oar_malloc(sizeof(int) * (size_t)(nv + 2));
    int total = 0;
    for (int i = 0; i < n; i++) total += raw[i].n_in + raw[i].n_cap;
    int *users = oar_malloc(sizeof(int) * (size_t)(total + 1));
    int *fill = oar_malloc(sizeof(int) * (size_t)(nv + 1));
    oar_status st = pending && queue && users_start && users && fill ? OAR_OK : OAR_ERR_OOM;
#define EACH_DEP(i, v) \
    for (int k_ = 0, v; k_ < raw[i].n_in + raw[i].n_cap; k_++) \
        if ((v = k_ < raw[i].n_in ? raw[i].in[k_] : raw[i].cap[k_ - raw[i].n_in]), dep(L, sid, v) >= 0)
    if (st == OAR_OK) {
        for (int i = 0; i < n; i++) EACH_DEP(i, v) users_start[v + 1]++, pending[i]++;
        for (int v = 0; v < nv; v++) users_start[v + 1] += users_start[v];
        for (int i = 0; i < n; i++) EACH_DEP(i, v) users[users_start[v] + fill[v]++] = i;
    }
#undef EACH_DEP
    int ready = 0, placed = 0;
    for (int i = 0; st == OAR_OK && i < n; i++)
        if (!pending[i]) heap_push(queue, &ready, i);
    while (st == OAR_OK && ready) {
        int i = heap_pop(queue, &ready);
        sorted[placed++] = raw[i];
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
        st = oar_error(OAR_ERR_FORMAT, "onnx: the graph has a cycle through node '%.200s' (%s)%s; expected an "
                                       "acyclic graph", raw[stuck].p->name ? raw[stuck].p->name : "",
                       raw[stuck].p->op_type ? raw[stuck].p->op_type : "?",
                       raw[stuck].n_cap ? " (counting the values its subgraphs read)" : "");
    }
    free(pending);
    free(queue);
    free(users_start);
    free(users);
    free(fill);
    return st;
}

static oar_status read_graph(loader *L, const Onnx__GraphProto *g, const scope *parent, int depth, ox_graph *out,
                             const char *what);

static const char *node_name(const Onnx__NodeProto *p) { return p->name ? p->name : ""; }

/* The graph attribute `name` of node p, or NULL with the error set. */
static const Onnx__GraphProto *graph_attr(const Onnx__NodeProto *p, const char *name) {
    for (size_t i = 0; i < p->n_attribute; i++) {
        const Onnx__AttributeProto *a = p->attribute[i];
        if (a->name && !strcmp(a->name, name)) {
            if (a->g) return a->g;
            oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' (%s): attribute '%s' is not a graph; expected a GraphProto",
                      node_name(p), p->op_type, name);
            return NULL;
        }
    }
    oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' (%s) has no '%s' attribute; expected a subgraph there",
              node_name(p), p->op_type, name);
    return NULL;
}

static oar_status sub_error(const Onnx__NodeProto *p, const char *fmt, ...) OAR_PRINTF(2, 3);
static oar_status sub_error(const Onnx__NodeProto *p, const char *fmt, ...) {
    char what[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' (%s): %s", node_name(p), p->op_type, what);
}

static const char *dt_name(oar_dtype t) { return t == OAR_DTYPE_COUNT ? "not given" : oar_dtype_name(t); }

/* The signature rules of If and Loop against their subgraphs. */
static oar_status check_signature(const ox_node *n) {
    const Onnx__NodeProto *p = n->p;
    if (n->n_sub == 2) { /* If */
        if (n->n_in != 1) return sub_error(p, "expected 1 input (the condition), got %d", n->n_in);
        for (int k = 0; k < 2; k++) {
            const ox_graph *b = n->sub[k];
            const char *which = k ? "else_branch" : "then_branch";
            if (b->n_in) return sub_error(p, "%s has %d inputs; expected none (a branch reads outer values)", which, b->n_in);
            if (b->n_out != n->n_out)
                return sub_error(p, "%s has %d outputs; expected %d, one per output of the If", which, b->n_out,
                                 n->n_out);
        }
        for (int j = 0; j < n->n_out; j++) {
            oar_dtype a = n->sub[0]->out[j].dtype, b = n->sub[1]->out[j].dtype;
            if (a != OAR_DTYPE_COUNT && b != OAR_DTYPE_COUNT && a != b)
                return sub_error(p, "output %d is %s in then_branch and %s in else_branch; expected the same dtype", j,
                                 oar_dtype_name(a), oar_dtype_name(b));
        }
        return OAR_OK;
    }
    const ox_graph *b = n->sub[0];
    if (!strcmp(p->op_type, "SequenceMap")) {
        if (n->n_in < 1 || n->n_out < 1 || b->n_in != n->n_in || b->n_out != n->n_out)
            return sub_error(p, "the body has %d inputs and %d outputs for a SequenceMap with %d inputs and %d "
                                "outputs; expected as many (and at least one of each)", b->n_in, b->n_out, n->n_in,
                             n->n_out);
        return OAR_OK;
    }
    if (!strcmp(p->op_type, "Scan")) {
        int64_t m = -1;
        for (size_t i = 0; i < p->n_attribute; i++)
            if (p->attribute[i]->name && !strcmp(p->attribute[i]->name, "num_scan_inputs") && p->attribute[i]->has_i)
                m = p->attribute[i]->i;
        if (m < 1 || m > n->n_in)
            return sub_error(p, "num_scan_inputs is %lld; expected 1 to %d (the number of inputs)", (long long)m,
                             n->n_in);
        if (b->n_in != n->n_in || b->n_out != n->n_out || n->n_out < n->n_in - m)
            return sub_error(p, "the body has %d inputs and %d outputs for a Scan with %d inputs (%lld scanned) and "
                                "%d outputs; expected the states then one slice per scanned input in, the states "
                                "then the scan outputs out", b->n_in, b->n_out, n->n_in, (long long)m, n->n_out);
        return OAR_OK;
    }
    /* Loop */
    if (n->n_in < 2) return sub_error(p, "expected at least 2 inputs (M and cond, either may be \"\"), got %d", n->n_in);
    if (n->in[0] < 0 && n->in[1] < 0)
        return sub_error(p, "neither a trip count M nor a condition is given, so the loop never ends; give one");
    int nv = n->n_in - 2;
    if (b->n_in != 2 + nv)
        return sub_error(p, "the body has %d inputs; expected %d (the iteration number, the condition, then one per "
                            "loop-carried value)", b->n_in, 2 + nv);
    if (b->n_out < 1 + nv || n->n_out != b->n_out - 1)
        return sub_error(p, "the body has %d outputs for a Loop with %d loop-carried values and %d outputs; expected "
                            "the condition, the loop-carried values and the scan outputs (one more than the Loop's)",
                         b->n_out, nv, n->n_out);
    if ((b->in[0].dtype != OAR_DTYPE_COUNT && b->in[0].dtype != OAR_I64) ||
        (b->in[1].dtype != OAR_DTYPE_COUNT && b->in[1].dtype != OAR_BOOL) ||
        (b->out[0].dtype != OAR_DTYPE_COUNT && b->out[0].dtype != OAR_BOOL))
        return sub_error(p, "the body's first inputs are %s and %s and its first output %s; expected the iteration "
                            "number (int64), the condition (bool) and the next condition (bool)",
                         dt_name(b->in[0].dtype), dt_name(b->in[1].dtype), dt_name(b->out[0].dtype));
    return OAR_OK;
}

/* The subgraphs of node n (If, Loop, Scan, SequenceMap), read in a scope inside s; its captures: the values of s
 * and the scopes around it that they read. */
static oar_status read_subgraphs(loader *L, const scope *s, int depth, ox_node *n) {
    const Onnx__NodeProto *p = n->p;
    const char *names[2] = {NULL, NULL};
    if (!strcmp(p->op_type, "If")) names[0] = "then_branch", names[1] = "else_branch";
    else if (!strcmp(p->op_type, "Loop") || !strcmp(p->op_type, "Scan") || !strcmp(p->op_type, "SequenceMap"))
        names[0] = "body";
    else return OAR_OK;
    if (depth >= OX_MAX_DEPTH)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: node '%.200s' (%s) is nested %d subgraphs deep; at most %d are "
                                              "supported", node_name(p), p->op_type, depth + 1, OX_MAX_DEPTH);
    oar_status st = OAR_OK;
    for (int k = 0; k < 2 && names[k] && st == OAR_OK; k++) {
        const Onnx__GraphProto *g = graph_attr(p, names[k]);
        if (!g) return oar_last_status();
        ox_graph *sg = calloc(1, sizeof *sg);
        if (!sg) return OAR_ERR_OOM;
        n->sub[n->n_sub++] = sg;
        char what[300];
        snprintf(what, sizeof what, "%s of node '%.150s' (%s)", names[k], node_name(p), p->op_type);
        int sid = L->n_scopes; /* the id read_graph gives it */
        if ((st = read_graph(L, g, s, depth + 1, sg, what)) != OAR_OK) break;
        /* its free values: read by its nodes or outputs, defined outside it (in s or around s) */
        int n_refs = sg->n_out;
        for (int i = 0; i < sg->n_nodes; i++) n_refs += sg->nodes[i].n_in + sg->nodes[i].n_cap;
        int *cap = realloc(n->cap, sizeof(int) * (size_t)(n->n_cap + n_refs + 1));
        if (!cap) return OAR_ERR_OOM;
        n->cap = cap;
        for (int i = -1; i < sg->n_nodes; i++) {
            const ox_node *x = i >= 0 ? &sg->nodes[i] : NULL;
            int cnt = x ? x->n_in + x->n_cap : sg->n_out;
            for (int j = 0; j < cnt; j++) {
                int v = !x ? sg->out[j].value : j < x->n_in ? x->in[j] : x->cap[j - x->n_in];
                if (v < 0 || L->vscope[v] >= sid) continue; /* scopes made from sid on are inside this one */
                bool seen = false;
                for (int c = 0; c < n->n_cap && !seen; c++) seen = n->cap[c] == v;
                if (!seen) n->cap[n->n_cap++] = v;
            }
        }
    }
    return st == OAR_OK ? check_signature(n) : st;
}

static oar_status read_nodes(loader *L, scope *s, int depth, const Onnx__GraphProto *g, ox_graph *out) {
    oar_onnx_model *m = L->m;
    ox_node *raw = calloc(g->n_node + 1, sizeof(ox_node));
    if (!raw) return OAR_ERR_OOM;
    char missing[1024] = "";
    size_t nm = 0;
    oar_status st = OAR_OK;
    /* outputs first, so inputs may name values of nodes listed later (sorted below) */
    for (size_t i = 0; st == OAR_OK && i < g->n_node; i++) {
        const Onnx__NodeProto *p = g->node[i];
        ox_node *n = &raw[i];
        n->p = p;
        if (!p->op_type) {
            st = oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' has no op_type", node_name(p));
            break;
        }
        if (p->n_input > OX_MAX_NODE_IO || p->n_output > OX_MAX_NODE_IO) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: node '%.200s' (%s) has %zu inputs and %zu outputs; at most "
                                                "%d each are supported", node_name(p), p->op_type,
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
        snprintf(what, sizeof what, "an output of node '%.200s' (%s)", node_name(p), p->op_type);
        for (int k = 0; k < n->n_out && st == OAR_OK; k++) {
            n->out[k] = -1;
            if (p->output[k] && *p->output[k]) st = new_value(L, s, p->output[k], what, &n->out[k]);
            if (st == OAR_OK && n->out[k] >= 0) L->producer[n->out[k]] = (int)i;
        }
        if (st != OAR_OK) break;
        const char *domain = p->domain && *p->domain && strcmp(p->domain, "ai.onnx") ? p->domain : NULL;
        n->op = !domain ? ox_find_op(p->op_type) : !strcmp(domain, "com.microsoft") ? ox_find_ms_op(p->op_type) : NULL;
        if (!n->op || m->opset < n->op->since) {
            char one[300];
            if (domain)
                snprintf(one, sizeof one, "'%.60s' (%.60s in domain %.60s)", node_name(p), p->op_type, domain);
            else if (n->op)
                snprintf(one, sizeof one, "'%.60s' (%.60s at opset %lld: translated from opset %d)", node_name(p),
                         p->op_type, (long long)m->opset, n->op->since);
            else snprintf(one, sizeof one, "'%.60s' (%.60s)", node_name(p), p->op_type);
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
            n->in[k] = name && *name ? lookup(s, name) : -1;
            if (name && *name && n->in[k] < 0)
                st = oar_error(OAR_ERR_FORMAT, "onnx: node '%.200s' (%s) reads '%.200s', which no graph input, "
                                               "initializer or node defines%s", node_name(n->p), n->p->op_type, name,
                               s->parent ? " (in its subgraph or the graphs around it)" : "");
        }
        if (st == OAR_OK) st = read_subgraphs(L, s, depth, n);
    }
    out->nodes = calloc(g->n_node + 1, sizeof(ox_node));
    if (st == OAR_OK && !out->nodes) st = OAR_ERR_OOM;
    if (st == OAR_OK) st = sort_nodes(L, s->id, raw, (int)g->n_node, out->nodes);
    if (st == OAR_OK) out->n_nodes = (int)g->n_node;
    else { /* the nodes go with a graph of their own to free */
        free(out->nodes);
        out->nodes = raw;
        out->n_nodes = (int)g->n_node;
        return st;
    }
    free(raw);
    return st;
}

/* Reads g (the main graph when parent is NULL: its inputs and outputs go to m->in/out). */
static oar_status read_graph(loader *L, const Onnx__GraphProto *g, const scope *parent, int depth, ox_graph *out,
                             const char *what) {
    oar_onnx_model *m = L->m;
    out->p = g;
    if (g->n_sparse_initializer)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx: %s has %zu sparse initializers; not supported", what,
                         g->n_sparse_initializer);
    size_t n_names = g->n_input + g->n_initializer;
    for (size_t i = 0; i < g->n_node; i++) n_names += g->node[i]->n_output;
    scope s = {.parent = parent, .id = L->n_scopes++};
    for (s.cap = 16; s.cap < 2 * n_names + 2; s.cap *= 2) {}
    s.keys = calloc(s.cap, sizeof(char *));
    s.vals = calloc(s.cap, sizeof(int));
    out->init = calloc(g->n_initializer + 1, sizeof(oar_tensor *));
    out->init_value = calloc(g->n_initializer + 1, sizeof(int));
    if (parent) {
        out->in = calloc(g->n_input + 1, sizeof(ox_io));
        out->out = calloc(g->n_output + 1, sizeof(ox_io));
    }
    oar_status st = OAR_OK;
    if (!s.keys || !s.vals || !out->init || !out->init_value || (parent && (!out->in || !out->out))) st = OAR_ERR_OOM;
    for (size_t i = 0; i < g->n_initializer && st == OAR_OK; i++) {
        Onnx__TensorProto *t = g->initializer[i];
        char iw[300];
        snprintf(iw, sizeof iw, "initializer '%.200s'", t->name ? t->name : "");
        st = new_value(L, &s, t->name, iw, &out->init_value[i]);
        if (st != OAR_OK) break;
        if (!(out->init[i] = ox_tensor_from_proto(t, L->dir, iw, true))) st = oar_last_status();
        else out->n_init++;
    }
    for (size_t i = 0; i < g->n_input && st == OAR_OK; i++) {
        const Onnx__ValueInfoProto *v = g->input[i];
        if (!parent && v->name && map_find(&s, v->name) >= 0) continue; /* an initializer listed as input (IR < 4) */
        if (!parent && m->n_in == OX_MAX_IO) {
            st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: the graph has more than %d inputs", OX_MAX_IO);
            break;
        }
        ox_io *io = parent ? &out->in[out->n_in] : &m->in[m->n_in];
        if ((st = ox_read_io(v, io, parent ? "subgraph input" : "graph input", parent != NULL)) != OAR_OK) break;
        st = new_value(L, &s, v->name, parent ? "a subgraph input" : "a graph input", &io->value);
        if (parent) out->n_in++;
        else m->n_in++;
    }
    if (st == OAR_OK) st = read_nodes(L, &s, depth, g, out);
    if (st == OAR_OK && g->n_output == 0) st = oar_error(OAR_ERR_FORMAT, "onnx: %s has no outputs", what);
    if (st == OAR_OK && !parent && g->n_output > OX_MAX_IO)
        st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: the graph has %zu outputs; at most %d are supported", g->n_output,
                       OX_MAX_IO);
    for (size_t k = 0; k < g->n_output && st == OAR_OK; k++) {
        ox_io *io = parent ? &out->out[k] : &m->out[k];
        if ((st = ox_read_io(g->output[k], io, parent ? "subgraph output" : "graph output", true)) != OAR_OK) break;
        io->value = io->name ? lookup(&s, io->name) : -1;
        if (io->value < 0)
            st = oar_error(OAR_ERR_FORMAT, "onnx: %s: output '%.200s' is not defined by any node, input or "
                                           "initializer%s", what, io->name ? io->name : "",
                           parent ? " of it or of the graphs around it" : "");
        if (parent) out->n_out++;
        else m->n_out++;
    }
    free(s.keys);
    free(s.vals);
    return st;
}

static void mark_used(bool *used, const ox_graph *g, const ox_io *outs, int n_out) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ox_node *n = &g->nodes[i];
        for (int k = 0; k < n->n_in; k++)
            if (n->in[k] >= 0) used[n->in[k]] = true;
        for (int k = 0; k < n->n_cap; k++) used[n->cap[k]] = true;
        for (int k = 0; k < n->n_sub; k++) mark_used(used, n->sub[k], n->sub[k]->out, n->sub[k]->n_out);
    }
    for (int k = 0; k < n_out; k++)
        if (outs[k].value >= 0) used[outs[k].value] = true;
}

oar_status ox_read_model_graph(oar_onnx_model *m, const char *dir) {
    loader L = {.m = m, .dir = dir};
    oar_status st = read_graph(&L, m->proto->graph, NULL, 0, &m->g, "the graph");
    free(L.vscope);
    free(L.producer);
    if (st != OAR_OK) return st;
    if (!(m->used = calloc((size_t)m->n_values + 1, sizeof(bool)))) return OAR_ERR_OOM;
    mark_used(m->used, &m->g, m->out, m->n_out);
    return OAR_OK;
}

void ox_graph_free(ox_graph *g) {
    for (int i = 0; i < g->n_init; i++) oar_tensor_unref(g->init[i]);
    for (int i = 0; i < g->n_nodes; i++) {
        ox_node *n = &g->nodes[i];
        free(n->in);
        free(n->cap);
        for (int k = 0; k < n->n_sub; k++) {
            ox_graph_free(n->sub[k]);
            free(n->sub[k]);
        }
    }
    free(g->nodes);
    free(g->init);
    free(g->init_value);
    free(g->in);
    free(g->out);
    memset(g, 0, sizeof *g);
}
