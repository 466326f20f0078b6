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

/* Value inputs: graph inputs read where oar needs values at compile time (shapes, axes), in the
 * main graph or a subgraph. A Loop with scan outputs is unrolled (onnx_ops_control.c), so its
 * trip count and condition are known inputs too. */
static bool any_seq_io(const ox_io *io, int n) {
    for (int k = 0; k < n; k++)
        if (io[k].kind != OX_TENSOR) return true;
    return false;
}

/* A Loop carrying a sequence or optional is unrolled too (oar's while_loop carries tensors), and
 * an If giving one is run in place, so their conditions must be known: compiled per value. */
static uint32_t control_known(const ox_node *n) {
    if (!strcmp(n->p->op_type, "Loop") && n->n_sub == 1) {
        const ox_graph *b = n->sub[0];
        bool unroll = n->n_out > n->n_in - 2 || any_seq_io(b->in, b->n_in) || any_seq_io(b->out, b->n_out);
        return unroll ? 0x3u : 0u;
    }
    if (!strcmp(n->p->op_type, "If") && n->n_sub == 2)
        return any_seq_io(n->sub[0]->out, n->sub[0]->n_out) || any_seq_io(n->sub[1]->out, n->sub[1]->n_out) ? 0x1u
                                                                                                              : 0u;
    return 0;
}

static void find_value_inputs(oar_onnx_model *m, const ox_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ox_node *n = &g->nodes[i];
        uint32_t known = n->op->known | control_known(n);
        for (int k = 0; k < n->n_in && k < 32; k++)
            if ((known >> k) & 1u)
                for (int j = 0; j < m->n_in; j++)
                    if (n->in[k] == m->in[j].value && !m->value_input[j] && m->in[j].kind == OX_TENSOR) {
                        m->value_input[j] = true;
                        m->n_value_inputs++;
                    }
        for (int k = 0; k < n->n_sub; k++) find_value_inputs(m, n->sub[k]);
    }
}

/* A Loop (at any depth) that stops on a condition: run on zeros at load, it may never stop. */
static bool has_conditional_loop(const ox_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const ox_node *n = &g->nodes[i];
        if (!strcmp(n->p->op_type, "Loop") && n->n_in > 1 && n->in[1] >= 0) return true;
        for (int k = 0; k < n->n_sub; k++)
            if (has_conditional_loop(n->sub[k])) return true;
    }
    return false;
}

/* Operators whose output sizes depend on the data (onnx_ops_dynamic.c), at any depth. */
static bool has_data_sized(const ox_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const char *op = g->nodes[i].p->op_type;
        if (!strcmp(op, "NonZero") || !strcmp(op, "NonMaxSuppression")) return true;
        for (int k = 0; k < g->nodes[i].n_sub; k++)
            if (has_data_sized(g->nodes[i].sub[k])) return true;
    }
    return false;
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
    if (st == OAR_OK) st = ox_read_model_graph(m, dir);
    if (opts) m->opts = *opts;
    if (st == OAR_OK) find_value_inputs(m, &m->g);
    if (st == OAR_OK) m->seq_io = any_seq_io(m->in, m->n_in) || any_seq_io(m->out, m->n_out);
    if (st == OAR_OK) m->eager = has_data_sized(&m->g);
    if (st == OAR_OK && m->eager && m->seq_io)
        st = oar_error(OAR_ERR_UNSUPPORTED, "onnx: the model has operators whose output sizes depend on the data "
                                            "(NonZero, NonMaxSuppression) and sequence or optional inputs or "
                                            "outputs; oar runs such models eagerly with tensor inputs and outputs only");
    /* static inputs: compile now (and run on zeros), so the whole translation is checked at
     * load; not with a Loop that stops on a condition, which on zeros may run forever */
    bool fixed = st == OAR_OK && !m->n_value_inputs && !has_conditional_loop(&m->g) && !any_seq_io(m->in, m->n_in);
    for (int i = 0; i < m->n_in && fixed; i++) {
        fixed = m->in[i].ndim >= 0;
        for (int d = 0; fixed && d < m->in[i].ndim; d++) fixed = m->in[i].shape[d] >= 0;
    }
    if (fixed) { /* (sequence or optional outputs: through oar_onnx_run_values) */
        oar_onnx_value in[OX_MAX_IO] = {0}, out[OX_MAX_IO] = {0};
        oar_scope_begin();
        for (int i = 0; i < m->n_in && st == OAR_OK; i++)
            if (!(in[i].tensor = oar_zeros(m->in[i].shape, m->in[i].ndim, m->in[i].dtype))) st = oar_last_status();
        if (st == OAR_OK) st = oar_onnx_run_values(m, in, m->n_in, out, m->n_out);
        for (int k = 0; k < m->n_out; k++) oar_onnx_value_clear(&out[k]);
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
    ox_graph_free(&m->g);
    free(m->used);
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

int oar_onnx_input_kind(const oar_onnx_model *m, int i) { return m && i >= 0 && i < m->n_in ? (int)m->in[i].kind : -1; }
int oar_onnx_output_kind(const oar_onnx_model *m, int k) {
    return m && k >= 0 && k < m->n_out ? (int)m->out[k].kind : -1;
}

const char *oar_onnx_output_name(const oar_onnx_model *m, int k) {
    return m && k >= 0 && k < m->n_out ? m->out[k].name : NULL;
}

static void format_io(const ox_io *io, char *buf, size_t size) {
    static const char *const kinds[] = {"", "sequence of ", "optional ", "optional sequence of "};
    size_t n = (size_t)snprintf(buf, size, "%s %s%s", io->name, kinds[io->kind],
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
static ox_variant *variant_for(oar_onnx_model *m, oar_tensor *const *in, const int *in_n) {
    for (int k = 0; k < m->n_variants; k++) {
        ox_variant *v = &m->variants[k];
        bool same = true;
        for (int i = 0; i < m->n_in && same; i++)
            if (m->value_input[i]) same = in[i]->storage && same_value(v->values[i], in[i]);
            else if (m->in[i].kind != OX_TENSOR) same = v->in_n[i] == in_n[i];
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
    memcpy(v->in_n, in_n, sizeof v->in_n);
    oar_jit_opts jo = {.strategy = m->opts.strategy};
    if (!(v->jit = oar_jit_to_static(ox_interpret, v, &jo))) return NULL;
    for (int i = 0, j = 0; i < m->n_in; i++) {
        if (!m->value_input[i]) {
            int n = m->in[i].kind == OX_TENSOR ? 1 : in_n[i];
            for (int t = 0; t < n && j < JIT_MAX_IO; t++) {
                if (m->in[i].kind == OX_TENSOR) snprintf(v->jit->input_names[j++], 64, "%s", m->in[i].name);
                else snprintf(v->jit->input_names[j++], 64, "%.50s[%d]", m->in[i].name, t);
            }
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
    for (int k = 0; k < m->n_out && !m->seq_io; k++)
        snprintf(v->jit->output_names[k], sizeof v->jit->output_names[k], "%s", m->out[k].name);
    v->last_use = ++m->tick;
    m->n_variants++;
    return v;
}

/* Checks tensor input i against its declaration. */
static oar_status check_input(const oar_onnx_model *m, int i, const oar_tensor *x, const char *what) {
    const ox_io *io = &m->in[i];
    OAR_CHECK_HANDLE("onnx_run", x, oar_last_status());
    bool ok = x && (io->dtype == OAR_DTYPE_COUNT || x->dtype == io->dtype) && (io->ndim < 0 || x->ndim == io->ndim);
    for (int d = 0; ok && io->ndim >= 0 && d < io->ndim; d++) ok = io->shape[d] < 0 || io->shape[d] == x->shape[d];
    if (ok) return OAR_OK;
    char want[300], got[300];
    format_io(io, want, sizeof want);
    if (!x) snprintf(got, sizeof got, "NULL");
    else {
        oar_meta mt;
        oar_meta_from(&mt, x);
        oar_meta_format(&mt, 0, got, sizeof got);
    }
    return oar_error(x ? (x->dtype != io->dtype ? OAR_ERR_DTYPE : OAR_ERR_SHAPE) : OAR_ERR_INVALID_ARG,
                     "onnx_run: input %d%s expects %s ('?': any size), got %s", i, what, want, got);
}

/* A model with operators whose output sizes depend on the data cannot be one fixed-shape
 * program: it is interpreted node by node on every run, each translation running eagerly on
 * oar's kernels (no trace, no passes; value inputs are simply known). Outputs as oar_jit_call
 * gives them: new references, or the caller's scope's. */
static oar_status run_eager(oar_onnx_model *m, oar_tensor *const *in, oar_tensor **out, int n_out) {
    ox_variant v = {.m = m};
    oar_tensor *rest[JIT_MAX_IO];
    int n_rest = 0;
    for (int i = 0; i < m->n_in; i++) {
        if (m->value_input[i]) v.values[i] = in[i];
        else rest[n_rest++] = in[i];
    }
    m->last = NULL;
    if (oar_active_trace)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx_run: the model has operators whose output sizes depend on the "
                                              "data (NonZero, NonMaxSuppression), so it runs eagerly; it cannot be "
                                              "called inside a traced function");
    oar_scope_begin();
    oar_status st = ox_interpret(&v, rest, n_rest, out, n_out);
    for (int k = 0; k < n_out; k++)
        if (st == OAR_OK) oar_keep(out[k]);
        else out[k] = NULL;
    oar_scope_end();
    return st;
}

/* Runs the variant for these inputs: per graph input its tensor (NULL for a sequence or an empty
 * optional) and, for those, in_n (the length; -1: empty); flat: the jit's inputs. The outputs
 * come flattened into out (at most n_out); *n_got: how many. */
static oar_status run_flat(oar_onnx_model *m, oar_tensor *const *tin, const int *in_n, oar_tensor *const *flat,
                           int n_flat, oar_tensor **out, int n_out, int *n_got) {
    if (m->eager) {
        *n_got = m->n_out;
        return m->n_out > n_out ? oar_error(OAR_ERR_INTERNAL, "onnx_run: fewer output slots than outputs")
                                : run_eager(m, tin, out, m->n_out);
    }
    ox_variant *v = variant_for(m, tin, in_n);
    if (!v) return oar_last_status();
    oar_tensor *rest[JIT_MAX_IO];
    int n_rest = 0;
    for (int i = 0, j = 0; i < m->n_in; i++) {
        int n = m->in[i].kind == OX_TENSOR ? 1 : in_n[i] > 0 ? in_n[i] : 0;
        for (int t = 0; t < n; t++, j++)
            if (!m->value_input[i]) {
                if (n_rest == JIT_MAX_IO)
                    return oar_error(OAR_ERR_UNSUPPORTED, "onnx_run: the inputs hold more than %d tensors (a "
                                                          "sequence counts its elements); oar's compiled functions "
                                                          "take at most %d", JIT_MAX_IO, JIT_MAX_IO);
                rest[n_rest++] = flat[j];
            }
    }
    (void)n_flat;
    m->last = v;
    if (m->seq_io && !v->probed) { /* learn what the outputs are: one run untraced */
        oar_scope_begin();
        v->probing = true;
        oar_status st = ox_interpret(v, rest, n_rest, NULL, 0);
        v->probing = false;
        oar_scope_end();
        if (st != OAR_OK) return st;
        v->probed = true;
    }
    int n = m->n_out;
    if (m->seq_io) {
        n = 0;
        for (int k = 0; k < m->n_out; k++) n += v->out_n[k];
    }
    if (n > n_out || n > JIT_MAX_IO)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx_run: the outputs hold %d tensors (a sequence counts its "
                                              "elements); oar's compiled functions give at most %d", n, JIT_MAX_IO);
    *n_got = n;
    return oar_jit_call(v->jit, rest, n_rest, out, n);
}

oar_status oar_onnx_run_values(oar_onnx_model *m, const oar_onnx_value *in, int n_in, oar_onnx_value *out, int n_out) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "onnx_run_values: expected a model, got NULL");
    if (n_in != m->n_in || n_out != m->n_out || (n_in && !in) || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_run_values: the model takes %d inputs and gives %d outputs, got "
                                              "n_in = %d, n_out = %d", m->n_in, m->n_out, n_in, n_out);
    oar_tensor *tin[OX_MAX_IO] = {0}, *flat[JIT_MAX_IO];
    int in_n[OX_MAX_IO] = {0}, n_flat = 0;
    static const char *const kinds[] = {"a tensor", "a sequence", "an optional tensor", "an optional sequence"};
    for (int i = 0; i < n_in; i++) {
        const oar_onnx_value *x = &in[i];
        ox_kind k = m->in[i].kind;
        bool ok = x->kind == OAR_ONNX_TENSOR ? k == OX_TENSOR || k == OX_OPT_TENSOR
                : x->kind == OAR_ONNX_SEQUENCE ? k == OX_SEQ || k == OX_OPT_SEQ
                : x->kind == OAR_ONNX_NONE && (k == OX_OPT_TENSOR || k == OX_OPT_SEQ);
        if (!ok)
            return oar_error(OAR_ERR_INVALID_ARG, "onnx_run_values: input %d ('%s') is declared %s; got %s", i,
                             m->in[i].name, kinds[k], x->kind == OAR_ONNX_TENSOR ? "a tensor" : x->kind ==
                             OAR_ONNX_SEQUENCE ? "a sequence" : x->kind == OAR_ONNX_NONE ? "an empty optional"
                                                                                          : "an unknown kind");
        int n = x->kind == OAR_ONNX_TENSOR ? 1 : x->kind == OAR_ONNX_SEQUENCE ? x->n : 0;
        if (x->kind == OAR_ONNX_SEQUENCE && (x->n < 0 || (x->n && !x->items)))
            return oar_error(OAR_ERR_INVALID_ARG, "onnx_run_values: input %d is a sequence of %d elements with "
                                                  "items %s; expected n >= 0 and the elements", i, x->n,
                             x->items ? "given" : "NULL");
        if (n_flat + n > JIT_MAX_IO)
            return oar_error(OAR_ERR_UNSUPPORTED, "onnx_run_values: the inputs hold more than %d tensors (a sequence "
                                                  "counts its elements); oar's compiled functions take at most %d",
                             JIT_MAX_IO, JIT_MAX_IO);
        for (int t = 0; t < n; t++) {
            oar_tensor *e = x->kind == OAR_ONNX_TENSOR ? x->tensor : x->items[t];
            char what[64] = "";
            if (x->kind == OAR_ONNX_SEQUENCE) snprintf(what, sizeof what, " (element %d)", t);
            oar_status st = check_input(m, i, e, what);
            if (st != OAR_OK) return st;
            if (t && e->dtype != flat[n_flat - 1]->dtype)
                return oar_error(OAR_ERR_DTYPE, "onnx_run_values: input %d's element %d is %s, element 0 %s; a "
                                                "sequence's elements share one dtype", i, t,
                                 oar_dtype_name(e->dtype), oar_dtype_name(flat[n_flat - 1]->dtype));
            flat[n_flat++] = e;
        }
        if (k == OX_TENSOR || (k == OX_OPT_TENSOR && x->kind == OAR_ONNX_TENSOR)) tin[i] = x->tensor;
        else in_n[i] = x->kind == OAR_ONNX_NONE ? -1 : n;
        if (k == OX_OPT_TENSOR) in_n[i] = x->kind == OAR_ONNX_NONE ? -1 : 1;
        if (m->value_input[i] && !tin[i])
            return oar_error(OAR_ERR_INVALID_ARG, "onnx_run_values: input %d gives shapes or axes; expected a tensor",
                             i);
    }
    oar_tensor *res[JIT_MAX_IO] = {0};
    int n_got = 0;
    oar_status st = run_flat(m, tin, in_n, flat, n_flat, res, JIT_MAX_IO, &n_got);
    if (st != OAR_OK) return st;
    const ox_variant *v = m->last;
    for (int k = 0, j = 0; k < n_out; k++) {
        oar_onnx_value *y = &out[k];
        memset(y, 0, sizeof *y);
        if (!m->seq_io) {
            y->tensor = res[j++];
            continue;
        }
        if (v->out_kind[k] == OX_TENSOR) {
            y->tensor = res[j++];
            continue;
        }
        y->kind = v->out_kind[k] == OX_SEQ ? OAR_ONNX_SEQUENCE : OAR_ONNX_NONE;
        y->n = v->out_n[k];
        if (y->n && !(y->items = malloc(sizeof *y->items * (size_t)y->n))) {
            for (int q = 0; q < k; q++) oar_onnx_value_clear(&out[q]);
            return oar_error(OAR_ERR_OOM, "onnx_run_values: out of memory");
        }
        for (int t = 0; t < y->n; t++) y->items[t] = res[j++];
    }
    return OAR_OK;
}

void oar_onnx_value_clear(oar_onnx_value *v) {
    if (!v) return;
    oar_release(v->tensor);
    for (int t = 0; t < v->n && v->items; t++) oar_release(v->items[t]);
    free(v->items);
    memset(v, 0, sizeof *v);
}

oar_status oar_onnx_run(oar_onnx_model *m, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    if (!m) return oar_error(OAR_ERR_INVALID_ARG, "onnx_run: expected a model, got NULL");
    if (n_in != m->n_in || n_out != m->n_out || (n_in && !in) || !out)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_run: the model takes %d inputs and gives %d outputs, got n_in = "
                                              "%d, n_out = %d", m->n_in, m->n_out, n_in, n_out);
    if (m->seq_io)
        return oar_error(OAR_ERR_INVALID_ARG, "onnx_run: the model's inputs or outputs include sequences or "
                                              "optionals; run it with oar_onnx_run_values");
    for (int i = 0; i < n_in; i++) {
        oar_status st = check_input(m, i, in[i], "");
        if (st != OAR_OK) return st;
    }
    int in_n[OX_MAX_IO] = {0}, n_got = 0;
    return run_flat(m, in, in_n, in, n_in, out, n_out, &n_got);
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
    PUT("\n%d nodes, %d initializers\n", m->g.n_nodes, m->g.n_init);
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
    const ox_node *nodes = m->g.nodes;
    for (int i = 0; i < m->g.n_nodes; i++) { /* each op type once, with its count, in order of appearance */
        const char *op = nodes[i].p->op_type;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(nodes[j].p->op_type, op);
        if (seen) continue;
        int count = 0;
        for (int j = i; j < m->g.n_nodes; j++) count += !strcmp(nodes[j].p->op_type, op);
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
    if (m->eager)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx_save_program: the model has operators whose output sizes depend "
                                              "on the data (NonZero, NonMaxSuppression) and runs eagerly: there is no "
                                              "fixed-shape program to save; run the .onnx file itself");
    if (!m->last)
        return oar_error(OAR_ERR_STATE, "onnx_save_program: the model has no compiled program yet; run it once with "
                                        "oar_onnx_run (example inputs) and then save");
    if (m->n_value_inputs)
        return oar_error(OAR_ERR_UNSUPPORTED, "onnx_save_program: the model takes shapes or axes as inputs, which "
                                              "its program holds as constants; an oar model file would lose them");
    return oar_jit_save(m->last->jit, path);
}
