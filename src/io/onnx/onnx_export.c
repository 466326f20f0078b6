/* ONNX export: an inference program as a ModelProto (opset 17), packed by protobuf-c and written
 * atomically. Parameters and constants become raw_data initializers, the main block's inputs and
 * outputs the graph's, with dims that vary between calls as dim_param. The ops are translated
 * one by one (onnx_export_ops.c).
 *
 * Which program: a compiled function is traced again at its latest signature with the
 * export-safe passes only (no fusion): ONNX has no fused ops of oar's, runtimes fuse for
 * themselves, and oar_onnx_load re-fuses with the same passes, so the round trip runs the
 * same kernels. A model file already holds what its passes made; its fused ops are written as
 * their decomposition where onnx_export_ops.c knows one. */
#include "io/onnx/onnx_export.h"
#include "io/onnx/onnx_lowbit.h"

#include "graph/exec.h"
#include "graph/export.h"
#include "graph/jit.h"
#include "graph/passes/passes.h"
#include "graph/serialize.h"
#include "graph/trace.h"
#include "io/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const WHO = "onnx_save";

/* ---- the graph being built */
void *oxe_alloc(oxe_graph *g, size_t n) {
    void *p = oar_arena_alloc(g->arena, n ? n : 1);
    if (!p) oar_error(OAR_ERR_OOM, "%s: out of memory building the model", WHO);
    return p;
}

const char *oxe_strdup(oxe_graph *g, const char *s) {
    size_t n = strlen(s);
    char *d = oxe_alloc(g, n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static bool grow(oxe_graph *g, void ***items, size_t *cap, size_t n) {
    if (n < *cap) return true;
    size_t c = *cap ? 2 * *cap : 64;
    void **p = oxe_alloc(g, sizeof(void *) * c);
    if (!p) return false;
    if (n) memcpy(p, *items, sizeof(void *) * n);
    *items = p, *cap = c;
    return true;
}

/* Whether name is taken by a value or initializer already. */
static bool name_taken(const oxe_graph *g, const char *name) {
    for (int v = 0; v < g->p->n_values; v++)
        if (g->name[v] && !strcmp(g->name[v], name)) return true;
    for (size_t i = 0; i < g->n_inits; i++)
        if (!strcmp(g->inits[i]->name, name)) return true;
    for (int i = 0; i < g->n_retired; i++)
        if (!strcmp(g->retired[i], name)) return true;
    return false;
}

/* base, or base_1, base_2, ... : the first name not yet used. */
static const char *unique_name(oxe_graph *g, const char *base) {
    if (!name_taken(g, base)) return oxe_strdup(g, base);
    char buf[300];
    for (int k = 1;; k++) {
        snprintf(buf, sizeof buf, "%.280s_%d", base, k);
        if (!name_taken(g, buf)) return oxe_strdup(g, buf);
    }
}

const char *oxe_tmp(oxe_graph *g) {
    char buf[32];
    snprintf(buf, sizeof buf, "t%d", g->n_tmp++);
    return unique_name(g, buf);
}

const char *oxe_in(oxe_graph *g, int v) {
    if (v < 0) return "";
    if (g->name[v]) return g->name[v];
    const oar_value *val = &g->p->values[v];
    if (val->kind != OAR_VAL_PARAM && val->kind != OAR_VAL_CONST) {
        oar_error(OAR_ERR_INTERNAL, "%s: value %%%d is read before it is defined", WHO, v);
        return NULL;
    }
    char base[64];
    snprintf(base, sizeof base, "const%d", v);
    const char *name = unique_name(g, val->name && *val->name ? val->name : base);
    if (!name || !oxe_init_tensor(g, name, val->tensor)) return NULL;
    return g->name[v] = name;
}

const char *oxe_out(oxe_graph *g, int v) {
    if (g->name[v]) return g->name[v];
    char base[32];
    snprintf(base, sizeof base, "v%d", v);
    return g->name[v] = unique_name(g, base);
}

Onnx__NodeProto *oxe_node(oxe_graph *g, const char *op_type, const char *const *in, int n_in,
                          const char *const *out, int n_out) {
    for (int k = 0; k < n_in; k++)
        if (!in[k]) return NULL; /* a name that failed (error set) */
    for (int k = 0; k < n_out; k++)
        if (!out[k]) return NULL;
    Onnx__NodeProto *n = oxe_alloc(g, sizeof *n);
    char **ins = oxe_alloc(g, sizeof(char *) * (size_t)(n_in + 1)), **outs = oxe_alloc(g, sizeof(char *) * (size_t)(n_out + 1));
    if (!n || !ins || !outs || !grow(g, (void ***)&g->nodes, &g->cap_nodes, g->n_nodes)) return NULL;
    onnx__node_proto__init(n);
    for (int k = 0; k < n_in; k++) ins[k] = (char *)in[k];
    for (int k = 0; k < n_out; k++) outs[k] = (char *)out[k];
    char name[96];
    snprintf(name, sizeof name, "%s_%zu", op_type, g->n_nodes);
    n->name = (char *)oxe_strdup(g, name);
    n->op_type = (char *)op_type;
    n->n_input = (size_t)n_in, n->input = ins;
    n->n_output = (size_t)n_out, n->output = outs;
    if (!n->name) return NULL;
    g->nodes[g->n_nodes++] = n;
    return n;
}

Onnx__NodeProto *oxe_node1(oxe_graph *g, const char *op_type, const char *in, const char *out) {
    return oxe_node(g, op_type, &in, 1, &out, 1);
}

Onnx__NodeProto *oxe_node2(oxe_graph *g, const char *op_type, const char *a, const char *b, const char *out) {
    const char *in[2] = {a, b};
    return oxe_node(g, op_type, in, 2, &out, 1);
}

static Onnx__AttributeProto *add_attr(oxe_graph *g, Onnx__NodeProto *n, const char *name,
                                      Onnx__AttributeProto__AttributeType type) {
    if (!n) return NULL;
    Onnx__AttributeProto *a = oxe_alloc(g, sizeof *a);
    Onnx__AttributeProto **list = oxe_alloc(g, sizeof *list * (n->n_attribute + 1));
    if (!a || !list) return NULL;
    onnx__attribute_proto__init(a);
    a->name = (char *)name;
    a->has_type = true, a->type = type;
    if (n->n_attribute) memcpy(list, n->attribute, sizeof *list * n->n_attribute);
    list[n->n_attribute++] = a;
    n->attribute = list;
    return a;
}

bool oxe_attr_int(oxe_graph *g, Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = add_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = true, a->i = v;
    return a != NULL;
}

bool oxe_attr_float(oxe_graph *g, Onnx__NodeProto *n, const char *name, double v) {
    Onnx__AttributeProto *a = add_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = true, a->f = (float)v;
    return a != NULL;
}

bool oxe_attr_ints(oxe_graph *g, Onnx__NodeProto *n, const char *name, const int64_t *v, int count) {
    Onnx__AttributeProto *a = add_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *ints = a ? oxe_alloc(g, sizeof(int64_t) * (size_t)(count + 1)) : NULL;
    if (!ints) return false;
    memcpy(ints, v, sizeof(int64_t) * (size_t)count);
    a->n_ints = (size_t)count, a->ints = ints;
    return true;
}

bool oxe_attr_str(oxe_graph *g, Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = add_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    if (!a) return false;
    a->has_s = true, a->s.data = (uint8_t *)v, a->s.len = strlen(v);
    return true;
}

int32_t oxe_onnx_dtype(oar_dtype dt) {
    switch (dt) {
    case OAR_F32: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    case OAR_F64: return ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
    case OAR_F16: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16;
    case OAR_BF16: return ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16;
    case OAR_I8: return ONNX__TENSOR_PROTO__DATA_TYPE__INT8;
    case OAR_U8: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT8;
    case OAR_I32: return ONNX__TENSOR_PROTO__DATA_TYPE__INT32;
    case OAR_I64: return ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    case OAR_BOOL: return ONNX__TENSOR_PROTO__DATA_TYPE__BOOL;
    case OAR_I16: return ONNX__TENSOR_PROTO__DATA_TYPE__INT16;
    case OAR_U16: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT16;
    case OAR_U32: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT32;
    case OAR_U64: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT64;
    case OAR_F8E4M3FN: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FN;
    case OAR_F8E4M3FNUZ: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FNUZ;
    case OAR_F8E5M2: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2;
    case OAR_F8E5M2FNUZ: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2FNUZ;
    case OAR_F8E8M0: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0;
    case OAR_F4E2M1: return ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT4E2M1;
    case OAR_I4: return ONNX__TENSOR_PROTO__DATA_TYPE__INT4;
    case OAR_U4: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT4;
    case OAR_I2: return ONNX__TENSOR_PROTO__DATA_TYPE__INT2;
    case OAR_U2: return ONNX__TENSOR_PROTO__DATA_TYPE__UINT2;
    default: return 0;
    }
}

static bool add_init(oxe_graph *g, Onnx__TensorProto *t) {
    if (!grow(g, (void ***)&g->inits, &g->cap_inits, g->n_inits)) return false;
    g->inits[g->n_inits++] = t;
    return true;
}

/* A TensorProto header (name, dtype, dims) with room for nbytes of raw_data. */
static Onnx__TensorProto *new_init(oxe_graph *g, const char *name, oar_dtype dt, const int64_t *shape, int ndim,
                                   size_t nbytes) {
    int32_t type = oxe_onnx_dtype(dt);
    if (!type) {
        oar_error(OAR_ERR_UNSUPPORTED, "%s: tensor '%s' has dtype %s, which ONNX has no type for", WHO, name,
                  oar_dtype_name(dt));
        return NULL;
    }
    Onnx__TensorProto *t = oxe_alloc(g, sizeof *t);
    int64_t *dims = oxe_alloc(g, sizeof(int64_t) * (size_t)(ndim + 1));
    uint8_t *raw = oxe_alloc(g, nbytes);
    if (!t || !dims || !raw) return NULL;
    onnx__tensor_proto__init(t);
    t->name = (char *)name;
    t->has_data_type = true, t->data_type = type;
    if (ndim) memcpy(dims, shape, sizeof(int64_t) * (size_t)ndim);
    t->n_dims = (size_t)ndim, t->dims = dims;
    t->has_raw_data = true, t->raw_data.data = raw, t->raw_data.len = nbytes;
    return add_init(g, t) ? t : NULL;
}

bool oxe_init_tensor(oxe_graph *g, const char *name, const oar_tensor *t) {
    if (t->device != OAR_CPU)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: tensor '%s' is on another device; move the model to the CPU "
                                              "before exporting", WHO, name) == OAR_OK;
    oar_tensor *c = oar_contiguous((oar_tensor *)t);
    if (!c) return false;
    size_t nbytes = ox_packed_bytes(t->dtype, t->numel); /* 4- and 2-bit types packed, as ONNX wants */
    Onnx__TensorProto *p = new_init(g, name, t->dtype, t->shape, t->ndim, nbytes);
    if (p && nbytes && nbytes != (size_t)t->numel * oar_dtype_size(t->dtype))
        ox_pack(t->dtype, oar_data(c), t->numel, p->raw_data.data);
    else if (p && nbytes) memcpy(p->raw_data.data, oar_data(c), nbytes); /* x86 and ARM: little-endian, as ONNX */
    oar_release(c);
    return p != NULL;
}

const char *oxe_const_ints(oxe_graph *g, const int64_t *v, int n) {
    const char *name = oxe_tmp(g);
    int64_t dim = n;
    Onnx__TensorProto *t = name ? new_init(g, name, OAR_I64, &dim, 1, sizeof(int64_t) * (size_t)n) : NULL;
    if (!t) return NULL;
    if (n) memcpy(t->raw_data.data, v, sizeof(int64_t) * (size_t)n);
    return name;
}

const char *oxe_const_scalar(oxe_graph *g, double v, oar_dtype dt) {
    oar_tensor *s = oar_scalar(v, dt);
    const char *name = s ? oxe_tmp(g) : NULL;
    bool ok = name && oxe_init_tensor(g, name, s);
    oar_release(s);
    return ok ? name : NULL;
}

/* ---- inputs and outputs */
static Onnx__ValueInfoProto *value_info(oxe_graph *g, const char *name, const oar_meta *m, uint32_t dyn,
                                        const char *const *dim_params) {
    Onnx__ValueInfoProto *vi = oxe_alloc(g, sizeof *vi);
    Onnx__TypeProto *tp = oxe_alloc(g, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = oxe_alloc(g, sizeof *tt);
    Onnx__TensorShapeProto *sh = oxe_alloc(g, sizeof *sh);
    Onnx__TensorShapeProto__Dimension **dims = oxe_alloc(g, sizeof *dims * (size_t)(m->ndim + 1));
    if (!vi || !tp || !tt || !sh || !dims) return NULL;
    onnx__value_info_proto__init(vi);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sh);
    for (int d = 0; d < m->ndim; d++) {
        Onnx__TensorShapeProto__Dimension *dim = oxe_alloc(g, sizeof *dim);
        if (!dim) return NULL;
        onnx__tensor_shape_proto__dimension__init(dim);
        if (!((dyn >> d) & 1u)) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dim->dim_value = m->shape[d];
        } else if (dim_params && dim_params[d]) {
            dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dim->dim_param = (char *)dim_params[d];
        } /* else: left unknown */
        dims[d] = dim;
    }
    sh->n_dim = (size_t)m->ndim, sh->dim = dims;
    if (!(tt->elem_type = oxe_onnx_dtype(m->dtype))) {
        oar_error(OAR_ERR_UNSUPPORTED, "%s: '%s' has dtype %s, which ONNX has no type for", WHO, name,
                  oar_dtype_name(m->dtype));
        return NULL;
    }
    tt->has_elem_type = true;
    tt->shape = sh;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    vi->name = (char *)name;
    vi->type = tp;
    return vi;
}

/* Which dims of each value follow the inputs' dynamic dims: the program specialized at twice
 * those sizes, compared with itself (as oar_jit_save marks them). dyn[v] gets the bits. */
static oar_status mark_dynamic(const oar_program *p, uint32_t *dyn) {
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    bool any = false;
    oar_meta metas[JIT_MAX_IO];
    for (int i = 0; i < main->n_in && i < JIT_MAX_IO; i++) {
        const oar_value *v = &p->values[main->in[i]];
        metas[i] = v->meta;
        for (int d = 0; d < v->meta.ndim; d++)
            if ((v->dyn_dims >> d) & 1u) metas[i].shape[d] = v->meta.shape[d] > 0 ? 2 * v->meta.shape[d] : 1, any = true;
    }
    if (!any) return OAR_OK;
    oar_program *trial = oar_program_specialize(p, metas, main->n_in);
    if (!trial) {
        char why[512]; /* a copy: the error about to be set overwrites oar_last_error's buffer */
        snprintf(why, sizeof why, "%s", oar_last_error());
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: the inputs have dynamic dims but the program cannot run at other "
                                              "sizes (%s); declare those dims fixed in the input specs", WHO, why);
    }
    for (int v = 0; v < p->n_values && v < trial->n_values; v++)
        for (int d = 0; d < p->values[v].meta.ndim; d++)
            if (trial->values[v].meta.shape[d] != p->values[v].meta.shape[d]) dyn[v] |= 1u << d;
    oar_program_free(trial);
    return OAR_OK;
}

static oar_status fail_status(void) {
    return oar_last_status() != OAR_OK ? oar_last_status() : oar_error(OAR_ERR_OOM, "%s: out of memory", WHO);
}

/* ---- control flow: oar_cond as If, oar_while as Loop. A block's nodes are written into a
 * subgraph (a node list of its own); its parameters take the names of the values they are bound
 * to (outer names are visible in ONNX subgraphs, as outer values are in oar's blocks), and each
 * yield leaves through an Identity named for the subgraph's output. */
static oar_status translate_node(oxe_graph *g, int id, const uint32_t *dyn);

typedef struct node_list {
    Onnx__NodeProto **nodes;
    size_t n, cap;
} node_list;

static node_list begin_subgraph(oxe_graph *g) {
    node_list saved = {g->nodes, g->n_nodes, g->cap_nodes};
    g->nodes = NULL, g->n_nodes = g->cap_nodes = 0;
    return saved;
}

static Onnx__GraphProto *end_subgraph(oxe_graph *g, node_list saved, const char *name, Onnx__ValueInfoProto **ins,
                                      int n_in, Onnx__ValueInfoProto **outs, int n_out) {
    Onnx__GraphProto *sg = oxe_alloc(g, sizeof *sg);
    if (sg) {
        onnx__graph_proto__init(sg);
        sg->name = (char *)name;
        sg->n_node = g->n_nodes, sg->node = g->nodes;
        sg->n_input = (size_t)n_in, sg->input = ins;
        sg->n_output = (size_t)n_out, sg->output = outs;
    }
    g->nodes = saved.nodes, g->n_nodes = saved.n, g->cap_nodes = saved.cap;
    return sg;
}

static bool attr_graph(oxe_graph *g, Onnx__NodeProto *n, const char *name, Onnx__GraphProto *sg) {
    Onnx__AttributeProto *a = sg ? add_attr(g, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) : NULL;
    if (a) a->g = sg;
    return a != NULL;
}

static oar_status block_nodes(oxe_graph *g, int b, const uint32_t *dyn) {
    const oar_block *bl = &g->p->blocks[b];
    for (int i = 0; i < bl->n_nodes; i++) {
        if (g->p->nodes[bl->nodes[i]].dead) continue;
        oar_status st = translate_node(g, bl->nodes[i], dyn);
        if (st != OAR_OK) return st;
    }
    return OAR_OK;
}

/* The one-element predicate named pred (value v) as the bool scalar If and Loop take. */
static const char *bool_scalar(oxe_graph *g, const char *pred, int v) {
    const oar_meta *m = &g->p->values[v].meta;
    const char *b = pred, *t;
    Onnx__NodeProto *o;
    if (m->dtype != OAR_BOOL) {
        if (!(o = oxe_node1(g, "Cast", pred, t = oxe_tmp(g))) || !oxe_attr_int(g, o, "to", ONNX__TENSOR_PROTO__DATA_TYPE__BOOL))
            return NULL;
        b = t;
    }
    if (m->ndim == 0) return b;
    return oxe_node2(g, "Reshape", b, oxe_const_ints(g, NULL, 0), t = oxe_tmp(g)) ? t : NULL;
}

/* Subgraph output k: Identity of value v (the yield) named base_k, typed as value like. */
static Onnx__ValueInfoProto *yield_out(oxe_graph *g, int v, int like, const uint32_t *dyn, const char *base, int k) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s_out%d", base, k);
    const char *name = unique_name(g, buf);
    if (!name || !oxe_node1(g, "Identity", oxe_in(g, v), name)) return NULL;
    return value_info(g, name, &g->p->values[like].meta, dyn[like], NULL);
}

static oar_status export_cond(oxe_graph *g, int id, const uint32_t *dyn) {
    const oar_node *n = &g->p->nodes[id];
    Onnx__GraphProto *branch[2];
    char base[32];
    for (int k = 0; k < 2; k++) {
        const oar_block *bl = &g->p->blocks[n->blocks[k]];
        for (int i = 0; i < bl->n_in; i++)
            if (!(g->name[bl->in[i]] = oxe_in(g, n->in[1 + i]))) return fail_status();
        snprintf(base, sizeof base, "if%d_%s", id, k ? "else" : "then");
        node_list saved = begin_subgraph(g);
        Onnx__ValueInfoProto **outs = oxe_alloc(g, sizeof *outs * (size_t)(n->n_out + 1));
        oar_status st = outs ? block_nodes(g, n->blocks[k], dyn) : fail_status();
        for (int j = 0; st == OAR_OK && j < n->n_out; j++)
            if (!(outs[j] = yield_out(g, bl->out[j], n->out[j], dyn, base, j))) st = fail_status();
        branch[k] = end_subgraph(g, saved, oxe_strdup(g, base), NULL, 0, outs, n->n_out);
        if (st != OAR_OK) return st;
        if (!branch[k]) return fail_status();
    }
    g->cur = id;
    const char *cond = bool_scalar(g, oxe_in(g, n->in[0]), n->in[0]);
    const char **outs = oxe_alloc(g, sizeof *outs * (size_t)(n->n_out + 1));
    if (!cond || !outs) return fail_status();
    for (int j = 0; j < n->n_out; j++) outs[j] = oxe_out(g, n->out[j]);
    Onnx__NodeProto *o = oxe_node(g, "If", &cond, 1, outs, n->n_out);
    return o && attr_graph(g, o, "then_branch", branch[0]) && attr_graph(g, o, "else_branch", branch[1]) ? OAR_OK
                                                                                                         : fail_status();
}

/* while_loop(vars; cond block, body block) -> vars', trips: cond_fn is written once before the
 * Loop on the initial values (ONNX's Loop reads its condition first) and again at the end of the
 * body on the new values (the body's condition output); the trip count is an extra carried
 * value. */
static oar_status export_while(oxe_graph *g, int id, const uint32_t *dyn) {
    const oar_node *n = &g->p->nodes[id];
    const oar_block *cb = &g->p->blocks[n->blocks[0]], *bb = &g->p->blocks[n->blocks[1]];
    int nv = (int)n->attrs[1].i;
    const char **before = oxe_alloc(g, sizeof *before * (size_t)(g->p->n_values + 1));
    if (!before) return fail_status();
    memcpy(before, g->name, sizeof *before * (size_t)g->p->n_values);
    for (int i = 0; i < cb->n_in; i++)
        if (!(g->name[cb->in[i]] = oxe_in(g, n->in[i]))) return fail_status();
    oar_status st = block_nodes(g, n->blocks[0], dyn);
    const char *cond0 = st == OAR_OK ? bool_scalar(g, oxe_in(g, cb->out[0]), cb->out[0]) : NULL;
    if (!cond0) return st != OAR_OK ? st : fail_status();
    int n_new = 0; /* the cond block is written again in the body: its values get new names */
    for (int v = 0; v < g->p->n_values; v++) n_new += g->name[v] != before[v];
    const char **retired = oxe_alloc(g, sizeof *retired * (size_t)(g->n_retired + n_new + 1));
    if (!retired) return fail_status();
    if (g->n_retired) memcpy(retired, g->retired, sizeof *retired * (size_t)g->n_retired);
    g->retired = retired;
    for (int v = 0; v < g->p->n_values; v++)
        if (g->name[v] != before[v] && !(g->p->values[v].kind == OAR_VAL_PARAM || g->p->values[v].kind == OAR_VAL_CONST))
            g->retired[g->n_retired++] = g->name[v], g->name[v] = before[v];
    char base[32], buf[64];
    snprintf(base, sizeof base, "loop%d", id);
    static const oar_meta I64_SCALAR = {OAR_I64, 0, {0}}, BOOL_SCALAR = {OAR_BOOL, 0, {0}};
    Onnx__ValueInfoProto **ins = oxe_alloc(g, sizeof *ins * (size_t)(nv + 3));
    Onnx__ValueInfoProto **outs = oxe_alloc(g, sizeof *outs * (size_t)(nv + 3));
    const char **names = oxe_alloc(g, sizeof *names * (size_t)(nv + 3));
    if (!ins || !outs || !names) return fail_status();
    snprintf(buf, sizeof buf, "%s_iter", base);
    names[0] = unique_name(g, buf);
    snprintf(buf, sizeof buf, "%s_cond", base);
    names[1] = unique_name(g, buf);
    if (!names[0] || !names[1] || !(ins[0] = value_info(g, names[0], &I64_SCALAR, 0, NULL)) ||
        !(ins[1] = value_info(g, names[1], &BOOL_SCALAR, 0, NULL)))
        return fail_status();
    for (int i = 0; i < nv; i++) {
        snprintf(buf, sizeof buf, "%s_v%d", base, i);
        if (!(names[2 + i] = g->name[bb->in[i]] = unique_name(g, buf)) ||
            !(ins[2 + i] = value_info(g, names[2 + i], &g->p->values[n->in[i]].meta, dyn[n->in[i]], NULL)))
            return fail_status();
    }
    snprintf(buf, sizeof buf, "%s_trips", base);
    if (!(names[2 + nv] = unique_name(g, buf)) || !(ins[2 + nv] = value_info(g, names[2 + nv], &I64_SCALAR, 0, NULL)))
        return fail_status();
    node_list saved = begin_subgraph(g);
    st = block_nodes(g, n->blocks[1], dyn);
    for (int i = 0; st == OAR_OK && i < cb->n_in; i++)
        if (!(g->name[cb->in[i]] = oxe_in(g, bb->out[i]))) st = fail_status();
    if (st == OAR_OK) st = block_nodes(g, n->blocks[0], dyn);
    const char *cond = st == OAR_OK ? bool_scalar(g, oxe_in(g, cb->out[0]), cb->out[0]) : NULL;
    snprintf(buf, sizeof buf, "%s_cond_out", base);
    const char *cond_out = cond ? unique_name(g, buf) : NULL, *trips_out = oxe_tmp(g);
    if (st == OAR_OK && !(cond_out && oxe_node1(g, "Identity", cond, cond_out) &&
                          (outs[0] = value_info(g, cond_out, &BOOL_SCALAR, 0, NULL))))
        st = fail_status();
    for (int i = 0; st == OAR_OK && i < nv; i++)
        if (!(outs[1 + i] = yield_out(g, bb->out[i], n->in[i], dyn, base, i))) st = fail_status();
    if (st == OAR_OK && !(trips_out && oxe_node2(g, "Add", names[2 + nv], oxe_const_scalar(g, 1, OAR_I64), trips_out) &&
                          (outs[1 + nv] = value_info(g, trips_out, &I64_SCALAR, 0, NULL))))
        st = fail_status();
    Onnx__GraphProto *body = end_subgraph(g, saved, oxe_strdup(g, base), ins, nv + 3, outs, nv + 2);
    if (st != OAR_OK) return st;
    g->cur = id;
    const char **lin = oxe_alloc(g, sizeof *lin * (size_t)(nv + 4)), **lout = oxe_alloc(g, sizeof *lout * (size_t)(nv + 2));
    if (!body || !lin || !lout) return fail_status();
    lin[0] = "", lin[1] = cond0;
    for (int i = 0; i < nv; i++) lin[2 + i] = oxe_in(g, n->in[i]), lout[i] = oxe_out(g, n->out[i]);
    lin[2 + nv] = oxe_const_scalar(g, 0, OAR_I64);
    lout[nv] = oxe_out(g, n->out[nv]);
    Onnx__NodeProto *o = oxe_node(g, "Loop", lin, nv + 3, lout, nv + 1);
    return o && attr_graph(g, o, "body", body) ? OAR_OK : fail_status();
}

static oar_status translate_node(oxe_graph *g, int id, const uint32_t *dyn) {
    g->cur = id;
    const oar_node *n = &g->p->nodes[id];
    if (n->op == OAR_OP_cond) return export_cond(g, id, dyn);
    if (n->op == OAR_OP_while_loop) return export_while(g, id, dyn);
    return oxe_translate(g, id);
}

/* Writes the model bytes atomically. */
static oar_status write_file(const char *path, const Onnx__ModelProto *model) {
    size_t size = onnx__model_proto__get_packed_size(model);
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return oar_error(OAR_ERR_OOM, "%s: out of memory packing a model of %zu bytes", WHO, size);
    onnx__model_proto__pack(model, buf);
    oar_io_writer *w = oar_io_writer_open(path, WHO);
    oar_status st = w ? oar_io_writer_write(w, buf, size) : oar_last_status();
    if (w) st = st == OAR_OK ? oar_io_writer_commit(w) : (oar_io_writer_abort(w), st);
    free(buf);
    return st;
}

/* The program p (inference, export passes run) as an ONNX file at path. */
static oar_status export_program(const oar_program *p, const char *const *in_names, const char *const *out_names,
                                 const char *path, const oar_onnx_save_opts *opts) {
    if (p->n_grad_writes)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected an inference program, got a training step (it computes "
                                              "gradients); export a forward function with the model in eval mode", WHO);
    int w = oar_program_state_writer(p);
    if (w >= 0)
        return oar_error(OAR_ERR_UNSUPPORTED, "%s: expected an inference program, got one that updates state in place "
                                              "(node %d, %s); export with the model in eval mode", WHO, w,
                         oar_op_table[p->nodes[w].op]->name);
    oxe_graph g = {.p = p, .opset = oxe_opset_needed(p)};
    uint32_t *dyn = calloc((size_t)p->n_values + 1, sizeof *dyn);
    g.arena = oar_arena_create(1 << 16);
    g.name = calloc((size_t)p->n_values + 1, sizeof *g.name);
    oar_status st = OAR_OK;
    if (!dyn || !g.arena || !g.name) {
        st = oar_error(OAR_ERR_OOM, "%s: out of memory", WHO);
        goto done;
    }
    if ((st = mark_dynamic(p, dyn)) != OAR_OK) goto done;
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    Onnx__ValueInfoProto **ins = oxe_alloc(&g, sizeof *ins * (size_t)(main->n_in + 1));
    Onnx__ValueInfoProto **outs = oxe_alloc(&g, sizeof *outs * (size_t)(main->n_out + 1));
    if (!ins || !outs) goto failed;
    /* dynamic dims: dim 0 of a single dynamic batch is "batch", others "<input>_dim<d>"; outputs
     * name them only when one dim_param is used in all (else left unknown, as ONNX allows) */
    const char *batch = opts && opts->dim_param && *opts->dim_param ? opts->dim_param : "batch";
    const char *params[JIT_MAX_IO][OAR_MAX_DIMS] = {{0}};
    int n_params = 0;
    bool batch_used = false;
    if (main->n_in > JIT_MAX_IO) {
        st = oar_error(OAR_ERR_UNSUPPORTED, "%s: the program has %d inputs; at most %d are exported", WHO, main->n_in,
                       JIT_MAX_IO);
        goto done;
    }
    for (int i = 0; i < main->n_in; i++) {
        const oar_value *v = &p->values[main->in[i]];
        for (int d = 0; d < v->meta.ndim; d++)
            if ((v->dyn_dims >> d) & 1u) {
                char buf[160];
                snprintf(buf, sizeof buf, "%s_dim%d", in_names[i], d);
                params[i][d] = d == 0 ? batch : oxe_strdup(&g, buf);
                if (d > 0 || !batch_used) n_params++; /* every input's dim 0 is the one batch */
                batch_used |= d == 0;
            }
        if (!(g.name[main->in[i]] = unique_name(&g, in_names[i]))) goto failed;
        if (!(ins[i] = value_info(&g, g.name[main->in[i]], &v->meta, v->dyn_dims, params[i]))) goto failed;
    }
    const char *one[OAR_MAX_DIMS];
    for (int d = 0; d < OAR_MAX_DIMS; d++) one[d] = n_params == 1 ? batch : NULL;
    /* an output produced by a node takes the output's name; others get an Identity below */
    bool *via_identity = oxe_alloc(&g, sizeof(bool) * (size_t)(main->n_out + 1));
    if (!via_identity) goto failed;
    for (int k = 0; k < main->n_out; k++) {
        int v = main->out[k];
        if (p->values[v].kind == OAR_VAL_NODE && !g.name[v] && !name_taken(&g, out_names[k]))
            g.name[v] = oxe_strdup(&g, out_names[k]);
        else via_identity[k] = true;
    }
    if ((st = block_nodes(&g, OAR_MAIN_BLOCK, dyn)) != OAR_OK) goto done;
    for (int k = 0; k < main->n_out; k++) {
        int v = main->out[k];
        const char *name = via_identity[k] ? unique_name(&g, out_names[k]) : g.name[v];
        if (!name || (via_identity[k] && !oxe_node1(&g, "Identity", oxe_in(&g, v), name))) goto failed;
        if (!(outs[k] = value_info(&g, name, &p->values[v].meta, dyn[v], one))) goto failed;
    }
    Onnx__GraphProto graph = ONNX__GRAPH_PROTO__INIT;
    graph.name = "oar";
    graph.n_node = g.n_nodes, graph.node = g.nodes;
    graph.n_initializer = g.n_inits, graph.initializer = g.inits;
    graph.n_input = (size_t)main->n_in, graph.input = ins;
    graph.n_output = (size_t)main->n_out, graph.output = outs;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    opset.domain = "";
    opset.has_version = true, opset.version = g.opset;
    char version[32];
    snprintf(version, sizeof version, "%d.%d.%d", OAR_VERSION_MAJOR, OAR_VERSION_MINOR, OAR_VERSION_PATCH);
    Onnx__ModelProto model = ONNX__MODEL_PROTO__INIT;
    model.has_ir_version = true, model.ir_version = oxe_ir_version(g.opset);
    model.n_opset_import = 1, model.opset_import = opsets;
    model.producer_name = "oar";
    model.producer_version = opts && opts->producer_version ? (char *)opts->producer_version : version;
    model.graph = &graph;
    st = write_file(path, &model);
    goto done;
failed:
    st = oar_last_status() != OAR_OK ? oar_last_status() : oar_error(OAR_ERR_OOM, "%s: out of memory", WHO);
done:
    free(dyn);
    free(g.name);
    if (g.arena) oar_arena_destroy(g.arena);
    return st;
}

/* The passes that never make ops ONNX lacks, and fuse_elementwise: the weights fold_conv_bn folds
 * are computed as the compiled function computes them (a fused chain rounds as its kernel does),
 * so the folded initializers have its bits; a fused chain left on activations is written as its
 * instructions, and oar_onnx_load fuses it again. */
static uint64_t export_passes(void) {
    static const char *const safe[] = {"dead_code", "cse", "constant_folding", "amp_casts", "fold_conv_bn",
                                       "fuse_elementwise"};
    uint64_t mask = 0;
    for (size_t i = 0; i < sizeof safe / sizeof *safe; i++) {
        int k = oar_pass_find(safe[i]);
        if (k >= 0) mask |= 1ull << k;
    }
    return mask;
}

/* The export passes, then the parameters frozen as constants (the file fixes their values) and
 * folded again: what fold_conv_bn computes from them at each run (the folded weights) becomes
 * initializers, with the same kernels, so the same bits. */
static oar_status export_passes_run(oar_program *p) {
    oar_status st = oar_passes_run(p, export_passes(), false);
    for (int v = 0; v < p->n_values && st == OAR_OK; v++)
        if (p->values[v].kind == OAR_VAL_PARAM) p->values[v].kind = OAR_VAL_CONST;
    uint64_t fold = 0;
    int k = oar_pass_find("constant_folding"), dc = oar_pass_find("dead_code");
    if (k >= 0) fold |= 1ull << k;
    if (dc >= 0) fold |= 1ull << dc;
    return st == OAR_OK ? oar_passes_run(p, fold, false) : st;
}

/* f traced again at its latest signature, with the export passes. */
static oar_program *retrace(oar_jit *f) {
    const jit_entry *en = f->last;
    oar_trace *t = oar_trace_begin(f->sources, f->n_sources);
    if (!t) return NULL;
    oar_tensor *sym[JIT_MAX_IO] = {0}, *res[JIT_MAX_IO] = {0};
    oar_status st = OAR_OK;
    for (int i = 0; i < en->n_in && st == OAR_OK; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "input%d", i);
        if (!(sym[i] = oar_trace_input(t, &en->meta[i], en->dyn[i], f->input_names[i][0] ? f->input_names[i] : nm)))
            st = oar_last_status();
    }
    if (st == OAR_OK) {
        oar_error_watch watch;
        oar_error_watch_begin(&watch);
        oar_scope_begin();
        st = f->fn(f->user, sym, en->n_in, res, en->n_out);
        for (int k = 0; st == OAR_OK && k < en->n_out; k++) oar_keep(res[k]);
        oar_scope_end();
        oar_error_watch_end(&watch);
        if (st != OAR_OK) memset(res, 0, sizeof res);
        if (st == OAR_OK && watch.first != OAR_OK)
            st = oar_error(watch.first, "%s: a call inside the traced function failed: %s", WHO, watch.message);
        if (st != OAR_OK && oar_last_status() == OAR_OK) st = oar_error(st, "%s: the traced function failed", WHO);
    }
    oar_program *prog = NULL;
    oar_run_hooks hooks = {0};
    st = oar_trace_end(t, st, res, en->n_out, &prog, &hooks);
    oar_run_hooks_free(&hooks);
    for (int i = 0; i < en->n_in; i++) oar_tensor_unref(sym[i]);
    for (int k = 0; k < en->n_out; k++) oar_release(res[k]);
    if (st != OAR_OK) return NULL;
    oar_program_generalize_reshapes(prog);
    if (export_passes_run(prog) != OAR_OK) {
        oar_program_free(prog);
        return NULL;
    }
    return prog;
}

static oar_status check_path(const char *path) {
    if (!path || !*path)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a file path (model.onnx), got %s", WHO,
                         path ? "\"\"" : "NULL");
    return OAR_OK;
}

oar_status oar_onnx_save(oar_jit *f, const char *path, const oar_onnx_save_opts *opts) {
    if (!f) return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a compiled function, got NULL", WHO);
    oar_status st = check_path(path);
    if (st != OAR_OK) return st;
    if (!f->last || !f->last->program)
        return oar_error(OAR_ERR_STATE, "%s: the function has no program yet; call it once with oar_jit_call (an "
                                        "example batch) and then save", WHO);
    oar_program *p = retrace(f);
    if (!p) {
        oar_error_prefix("%s", WHO);
        return oar_last_status();
    }
    const char *in_names[JIT_MAX_IO], *out_names[JIT_MAX_IO];
    char in_buf[JIT_MAX_IO][64], out_buf[JIT_MAX_IO][64];
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < main->n_in && i < JIT_MAX_IO; i++) {
        snprintf(in_buf[i], sizeof in_buf[i], "%s", f->input_names[i][0] ? f->input_names[i] : "");
        if (!in_buf[i][0]) snprintf(in_buf[i], sizeof in_buf[i], "input%d", i);
        in_names[i] = in_buf[i];
    }
    for (int k = 0; k < main->n_out && k < JIT_MAX_IO; k++) {
        snprintf(out_buf[k], sizeof out_buf[k], "%s", f->output_names[k][0] ? f->output_names[k] : "");
        if (!out_buf[k][0]) snprintf(out_buf[k], sizeof out_buf[k], "output%d", k);
        out_names[k] = out_buf[k];
    }
    st = export_program(p, in_names, out_names, path, opts);
    oar_program_free(p);
    return st;
}

oar_status oar_onnx_save_model(const char *model_path, const char *path, const oar_onnx_save_opts *opts) {
    oar_init();
    oar_status st = check_path(path);
    if (st != OAR_OK) return st;
    if (!model_path || !*model_path)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected a model path (\"dir/model\" for dir/model.json and "
                                              "dir/model.safetensors), got %s", WHO, model_path ? "\"\"" : "NULL");
    oar_program_io io = {0};
    oar_program *p = oar_program_load_io(model_path, &io);
    if (!p) {
        oar_error_prefix("%s", WHO);
        return oar_last_status();
    }
    st = export_passes_run(p);
    if (st == OAR_OK) st = export_program(p, io.input_names, io.output_names, path, opts);
    oar_program_free(p);
    return st;
}
