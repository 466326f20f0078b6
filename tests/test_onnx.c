/* ONNX import (issue 18), with models built here through protobuf-c: initializers as raw_data,
 * typed fields and external data; dim_param as a dynamic dim; Shape arithmetic folded for each
 * input shape; multiple outputs; absent optional inputs and outputs; the compiled program run by
 * the predictor bit for bit; and every kind of bad file refused with a message (unsupported op
 * or attribute value, cycles, undefined or duplicate values, wrong tensor sizes, absurd shapes,
 * truncated or garbage protobuf). The models also form the fuzz corpus
 * (OAR_WRITE_ONNX_CORPUS=DIR writes them), which is replayed here with the crashers. */
#include "test_util.h"

#ifndef OAR_HAVE_PROTOBUF_C
int main(void) {
    printf("test_onnx: skipped: oar was built without protobuf-c, so ONNX import is left out\n");
    return 77;
}
#else
#include "onnx.pb-c.h"
#include "io/onnx/onnx_internal.h"
#include "tensor/tensor.h"

#include <dirent.h>
#include <unistd.h>

/* ---- a small model builder; everything it allocates is freed by arena_free */
static void *arena[8192];
static int n_arena;
static void *A(size_t n) {
    void *p = calloc(1, n);
    if (n_arena < 8192) arena[n_arena++] = p;
    return p;
}
static void arena_free(void) {
    for (int i = 0; i < n_arena; i++) free(arena[i]);
    n_arena = 0;
}
static char *S(const char *s) { return strcpy(A(strlen(s) + 1), s); }

typedef struct mb {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    Onnx__NodeProto *nodes[32];
    Onnx__TensorProto *inits[16];
    Onnx__ValueInfoProto *ins[8], *outs[8];
} mb;

static void mb_init(mb *m, int64_t opset) {
    memset(m, 0, sizeof *m);
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = S("");
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.producer_name = S("test_onnx");
    m->model.graph = &m->graph;
    m->graph.node = m->nodes;
    m->graph.initializer = m->inits;
    m->graph.input = m->ins;
    m->graph.output = m->outs;
}

/* "a,b" -> a list of strings ("" stays, for absent optional values) */
static char **split_names(const char *list, size_t *n) {
    char **out = A(sizeof(char *) * 16);
    *n = 0;
    if (!list) return out;
    const char *p = list;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char *s = A(len + 1);
        memcpy(s, p, len);
        out[(*n)++] = s;
        if (!e) break;
        p = e + 1;
    }
    return out;
}

static Onnx__NodeProto *node(mb *m, const char *op, const char *name, const char *ins, const char *outs) {
    Onnx__NodeProto *n = A(sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = S(op);
    n->name = S(name);
    n->input = split_names(ins, &n->n_input);
    n->output = split_names(outs, &n->n_output);
    n->attribute = A(sizeof(Onnx__AttributeProto *) * 8);
    m->nodes[m->graph.n_node++] = n;
    return n;
}

static Onnx__AttributeProto *attr(Onnx__NodeProto *n, const char *name, Onnx__AttributeProto__AttributeType type) {
    Onnx__AttributeProto *a = A(sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = S(name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}
static void attr_i(Onnx__NodeProto *n, const char *name, int64_t v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}
static Onnx__NodeProto *attr_i_ret(Onnx__NodeProto *n, const char *name, int64_t v) {
    attr_i(n, name, v);
    return n;
}
static void attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = A(sizeof(int64_t) * (k + 1));
    memcpy(a->ints, v, sizeof(int64_t) * k);
    a->n_ints = k;
}
static void attr_s(Onnx__NodeProto *n, const char *name, const char *v) {
    Onnx__AttributeProto *a = attr(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    a->has_s = 1;
    a->s.data = (uint8_t *)S(v);
    a->s.len = strlen(v);
}

/* dims "N,4": a number is a dim_value, a name a dim_param */
static Onnx__ValueInfoProto *vinfo(const char *name, int elem, const char *dims) {
    Onnx__ValueInfoProto *v = A(sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = S(name);
    Onnx__TypeProto *t = A(sizeof *t);
    onnx__type_proto__init(t);
    Onnx__TypeProto__Tensor *tt = A(sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    Onnx__TensorShapeProto *sh = A(sizeof *sh);
    onnx__tensor_shape_proto__init(sh);
    size_t n;
    char **ds = split_names(dims, &n);
    sh->dim = A(sizeof(void *) * (n + 1));
    for (size_t i = 0; dims && i < n; i++) {
        Onnx__TensorShapeProto__Dimension *d = A(sizeof *d);
        onnx__tensor_shape_proto__dimension__init(d);
        if (ds[i][0] >= '0' && ds[i][0] <= '9') {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            d->dim_value = atoll(ds[i]);
        } else {
            d->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            d->dim_param = ds[i];
        }
        sh->dim[sh->n_dim++] = d;
    }
    tt->shape = sh;
    t->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    t->tensor_type = tt;
    v->type = t;
    return v;
}
static void input(mb *m, const char *name, int elem, const char *dims) { m->ins[m->graph.n_input++] = vinfo(name, elem, dims); }
static void output(mb *m, const char *name, int elem) { m->outs[m->graph.n_output++] = vinfo(name, elem, NULL); }

enum { AS_RAW, AS_TYPED, AS_EXTERNAL };
static Onnx__TensorProto *init_f(mb *m, const char *name, const int64_t *dims, int nd, const float *data, int how) {
    Onnx__TensorProto *t = A(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = S(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t->dims = A(sizeof(int64_t) * (size_t)(nd + 1));
    memcpy(t->dims, dims, sizeof(int64_t) * (size_t)nd);
    t->n_dims = (size_t)nd;
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= dims[d];
    if (how == AS_RAW) {
        t->has_raw_data = 1;
        t->raw_data.len = (size_t)n * 4;
        t->raw_data.data = A((size_t)n * 4 + 1);
        memcpy(t->raw_data.data, data, (size_t)n * 4);
    } else if (how == AS_TYPED) {
        t->n_float_data = (size_t)n;
        t->float_data = A((size_t)n * 4 + 1);
        memcpy(t->float_data, data, (size_t)n * 4);
    }
    m->inits[m->graph.n_initializer++] = t;
    return t;
}
static Onnx__TensorProto *init_i64(mb *m, const char *name, const int64_t *v, int64_t n) {
    Onnx__TensorProto *t = A(sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = S(name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    t->dims = A(sizeof(int64_t));
    t->dims[0] = n;
    t->n_dims = 1;
    t->int64_data = A(sizeof(int64_t) * (size_t)(n + 1));
    memcpy(t->int64_data, v, sizeof(int64_t) * (size_t)n);
    t->n_int64_data = (size_t)n;
    m->inits[m->graph.n_initializer++] = t;
    return t;
}

static uint8_t *pack(mb *m, size_t *n) {
    *n = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = A(*n + 1);
    onnx__model_proto__pack(&m->model, buf);
    return buf;
}

/* ---- the corpus: every model built here, valid or hostile, optionally written out */
static const char *corpus_dir;
static void save_corpus(const char *name, const uint8_t *buf, size_t n) {
    if (!corpus_dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.onnx", corpus_dir, name);
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(buf, 1, n, f);
        fclose(f);
    }
}

static oar_onnx_model *load_mb(mb *m, const char *name, const char *dir) {
    size_t n;
    uint8_t *buf = pack(m, &n);
    save_corpus(name, buf, n);
    return oar_onnx_load_buffer(buf, n, dir, NULL);
}

/* The load fails with status st and a message containing every given part. */
static void expect_refused(mb *m, const char *name, oar_status st, const char *part1, const char *part2) {
    oar_clear_error();
    oar_onnx_model *x = load_mb(m, name, NULL);
    CHECK(x == NULL);
    CHECK(oar_last_status() == st);
    CHECK(strstr(oar_last_error(), part1) != NULL);
    if (part2) CHECK(strstr(oar_last_error(), part2) != NULL);
    if (x == NULL && (oar_last_status() != st || !strstr(oar_last_error(), part1)))
        fprintf(stderr, "  %s: got %s\n", name, oar_last_error());
    oar_onnx_free(x);
}

static double max_diff(oar_tensor *a, oar_tensor *b) {
    if (!a || !b || oar_numel(a) != oar_numel(b)) return INFINITY;
    double d = 0;
    for (int64_t i = 0; i < oar_numel(a); i++) d = fmax(d, fabs(t_at(a, i) - t_at(b, i)));
    return d;
}

static const float W1[12] = {0.5f, -1, 0.25f, 2, 1, 0.5f, -0.5f, 1, -1, 1.5f, 0.75f, -0.25f}; /* [3, 4] */
static const float B1[3] = {0.1f, -0.2f, 0.3f};
static const float W2[6] = {1, -1, 0.5f, 0.25f, 2, -0.5f}; /* [2, 3] */

/* x [N, 4] -> Gemm(W1ᵀ, B1) -> Relu (output "hidden") -> Gemm(W2ᵀ) -> Softmax (output "y");
 * W1 as raw_data, B1 in float_data, W2 as raw_data. */
static void build_mlp(mb *m) {
    mb_init(m, 13);
    input(m, "x", 1, "N,4");
    int64_t d1[2] = {3, 4}, db[1] = {3}, d2[2] = {2, 3};
    init_f(m, "W1", d1, 2, W1, AS_RAW);
    init_f(m, "B1", db, 1, B1, AS_TYPED);
    init_f(m, "W2", d2, 2, W2, AS_RAW);
    attr_i(node(m, "Gemm", "fc1", "x,W1,B1", "h0"), "transB", 1);
    node(m, "Relu", "relu", "h0", "hidden");
    Onnx__NodeProto *g = node(m, "Gemm", "fc2", "hidden,W2", "logits");
    attr_i(g, "transB", 1);
    attr_i(node(m, "Softmax", "sm", "logits", "y"), "axis", 1);
    output(m, "y", 1);
    output(m, "hidden", 1);
}

static void test_mlp(void) {
    mb m;
    build_mlp(&m);
    oar_onnx_model *model = load_mb(&m, "mlp", NULL);
    CHECK(model != NULL);
    if (!model) return;
    CHECK(oar_onnx_num_inputs(model) == 1 && oar_onnx_num_outputs(model) == 2);
    oar_input_spec s;
    CHECK(oar_onnx_input_spec(model, 0, &s) == OAR_OK);
    CHECK(s.ndim == 2 && s.shape[0] == -1 && s.shape[1] == 4 && s.dtype == OAR_F32 && !strcmp(s.name, "x"));
    CHECK(!strcmp(oar_onnx_output_name(model, 1), "hidden"));
    int64_t ws1[2] = {3, 4}, ws2[2] = {2, 3}, bs[1] = {3};
    for (int64_t batch = 2; batch <= 5; batch += 3) { /* two sizes of the dynamic dim */
        oar_scope_begin();
        int64_t xs[2] = {batch, 4};
        oar_tensor *x = oar_randn(xs, 2, OAR_F32), *out[2] = {0};
        CHECK(oar_onnx_run(model, &x, 1, out, 2) == OAR_OK);
        oar_tensor *h = oar_relu(oar_linear(x, oar_from_data(W1, ws1, 2, OAR_F32), oar_from_data(B1, bs, 1, OAR_F32)));
        oar_tensor *y = oar_softmax(oar_linear(h, oar_from_data(W2, ws2, 2, OAR_F32), NULL), 1);
        CHECK(out[0] && oar_size(out[0], 0) == batch && oar_size(out[0], 1) == 2);
        CHECK(max_diff(out[0], y) < 1e-6);
        CHECK(max_diff(out[1], h) < 1e-6);
        oar_scope_end();
    }
    /* a wrong input is refused with what was expected */
    oar_scope_begin();
    int64_t bad[2] = {2, 5};
    oar_tensor *x = oar_zeros(bad, 2, OAR_F32), *out[2];
    CHECK_ERR(oar_onnx_run(model, &x, 1, out, 2), "input 0 expects x f32[?, 4]");
    oar_scope_end();
    char text[2048];
    CHECK(oar_onnx_describe(model, text, sizeof text) > 0 && strstr(text, "Gemm x2") && strstr(text, "x f32[?, 4]"));
    oar_onnx_free(model);
}

/* Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as exporters write x.view(x.size(0), -1):
 * folded for each batch size, so the program holds a reshape and no shape arithmetic. */
static void test_shape_folding(void) {
    mb m;
    mb_init(&m, 13);
    input(&m, "x", 1, "batch,2,3");
    int64_t zero[1] = {0}, minus1[1] = {-1};
    init_i64(&m, "zero", zero, 1);
    init_i64(&m, "minus1", minus1, 1);
    init_i64(&m, "axes0", zero, 1);
    node(&m, "Shape", "shape", "x", "s");
    attr_i(node(&m, "Gather", "gather", "s,zero", "n1"), "axis", 0);
    node(&m, "Squeeze", "squeeze", "n1,axes0", "n");
    node(&m, "Unsqueeze", "unsqueeze", "n,axes0", "nn");
    attr_i(node(&m, "Concat", "concat", "nn,minus1", "shape2"), "axis", 0);
    node(&m, "Reshape", "reshape", "x,shape2", "y");
    output(&m, "y", 1);
    oar_onnx_model *model = load_mb(&m, "shape_folding", NULL);
    CHECK(model != NULL);
    if (!model) return;
    for (int64_t batch = 1; batch <= 3; batch += 2) {
        oar_scope_begin();
        int64_t xs[3] = {batch, 2, 3};
        oar_tensor *x = oar_randn(xs, 3, OAR_F32), *y = NULL;
        CHECK(oar_onnx_run(model, &x, 1, &y, 1) == OAR_OK);
        CHECK(y && oar_ndim(y) == 2 && oar_size(y, 0) == batch && oar_size(y, 1) == 6);
        CHECK(y && t_same_bits(x, y));
        char prog[8192] = "";
        CHECK(oar_onnx_dump(model, prog, sizeof prog) > 0);
        CHECK(!strstr(prog, "concat") && !strstr(prog, "index_select")); /* folded away */
        oar_scope_end();
    }
    oar_onnx_free(model);
}

/* Relu -> NonZero -> Transpose: the output's size depends on the data, so the model runs eagerly
 * node by node: one row per positive input, its coordinates in row-major order; other data gives
 * another size; no program to save; refused inside a traced function. */
static oar_status run_in_trace(void *user, oar_tensor *const *in, int n_in, oar_tensor **out, int n_out) {
    (void)n_in, (void)n_out;
    return oar_onnx_run(user, in, 1, out, 1);
}

static void test_data_sized(void) {
    mb m;
    mb_init(&m, 13);
    input(&m, "x", 1, "2,3");
    node(&m, "Relu", "relu", "x", "r");
    node(&m, "NonZero", "nonzero", "r", "nz");
    attr_ints(node(&m, "Transpose", "transpose", "nz", "y"), "perm", (const int64_t[]){1, 0}, 2);
    output(&m, "y", 7);
    oar_onnx_model *model = load_mb(&m, "data_sized", NULL);
    CHECK(model != NULL);
    if (!model) return;
    oar_scope_begin();
    const float a[6] = {1, -1, 0, 0, 2, 3}, b[6] = {-1, -1, -1, -1, 5, -1};
    int64_t xs[2] = {2, 3};
    oar_tensor *x = oar_from_data(a, xs, 2, OAR_F32), *y = NULL;
    CHECK(oar_onnx_run(model, &x, 1, &y, 1) == OAR_OK);
    const int64_t want[6] = {0, 0, 1, 1, 1, 2};
    CHECK(y && oar_ndim(y) == 2 && oar_size(y, 0) == 3 && oar_size(y, 1) == 2);
    for (int i = 0; y && i < 6; i++) CHECK(t_at(y, i) == want[i]);
    oar_tensor *x2 = oar_from_data(b, xs, 2, OAR_F32), *y2 = NULL;
    CHECK(oar_onnx_run(model, &x2, 1, &y2, 1) == OAR_OK);
    CHECK(y2 && oar_size(y2, 0) == 1 && t_at(y2, 0) == 1 && t_at(y2, 1) == 1);
    CHECK(oar_onnx_save_program(model, "/nonexistent/never") == OAR_ERR_UNSUPPORTED);
    CHECK(strstr(oar_last_error(), "runs eagerly") != NULL);
    oar_input_spec spec = {OAR_F32, 2, {2, 3}, "x"};
    oar_jit_opts jo = {.specs = &spec, .n_specs = 1};
    oar_jit *f = oar_jit_to_static(run_in_trace, model, &jo);
    oar_tensor *y3 = NULL;
    CHECK(f && oar_jit_call(f, &x, 1, &y3, 1) != OAR_OK);
    CHECK(strstr(oar_last_error(), "cannot be called inside a traced function") != NULL);
    oar_jit_free(f);
    oar_release(y), oar_release(y2);
    oar_scope_end();
    oar_onnx_free(model);
}

/* Conv + BatchNormalization + Relu + MaxPool + GlobalAveragePool + Flatten: against the same ops
 * called eagerly, and the program saved for the predictor gives the same bits. */
static void test_cnn_predictor(void) {
    mb m;
    mb_init(&m, 13);
    input(&m, "image", 1, "2,3,8,8");
    float w[4 * 3 * 3 * 3], ones[4], zeros4[4], mean[4] = {0.1f, -0.1f, 0.2f, 0}, var[4] = {1, 2, 0.5f, 1.5f};
    for (int i = 0; i < 108; i++) w[i] = (float)((i * 37 % 17) - 8) / 16.0f;
    for (int i = 0; i < 4; i++) ones[i] = 1.0f + 0.1f * (float)i, zeros4[i] = 0.05f * (float)i;
    int64_t wd[4] = {4, 3, 3, 3}, cd[1] = {4};
    init_f(&m, "w", wd, 4, w, AS_RAW);
    init_f(&m, "gamma", cd, 1, ones, AS_TYPED);
    init_f(&m, "beta", cd, 1, zeros4, AS_TYPED);
    init_f(&m, "mean", cd, 1, mean, AS_RAW);
    init_f(&m, "var", cd, 1, var, AS_RAW);
    int64_t pads[4] = {1, 1, 1, 1}, k2[2] = {2, 2};
    attr_ints(node(&m, "Conv", "conv", "image,w", "c"), "pads", pads, 4);
    node(&m, "BatchNormalization", "bn", "c,gamma,beta,mean,var", "b");
    node(&m, "Relu", "relu", "b", "r");
    Onnx__NodeProto *mp = node(&m, "MaxPool", "pool", "r", "p");
    attr_ints(mp, "kernel_shape", k2, 2);
    attr_ints(mp, "strides", k2, 2);
    node(&m, "GlobalAveragePool", "gap", "p", "g");
    node(&m, "Flatten", "flat", "g", "y");
    output(&m, "y", 1);
    oar_onnx_model *model = load_mb(&m, "cnn", NULL);
    CHECK(model != NULL);
    if (!model) return;
    oar_scope_begin();
    int64_t xs[4] = {2, 3, 8, 8};
    oar_tensor *x = oar_randn(xs, 4, OAR_F32), *y = NULL;
    CHECK(oar_onnx_run(model, &x, 1, &y, 1) == OAR_OK);
    oar_conv_opts co = {.padding = {1, 1}};
    oar_pool_opts po = {.kernel = {2, 2}, .stride = {2, 2}};
    oar_tensor *e = oar_conv2d(x, oar_from_data(w, wd, 4, OAR_F32), NULL, &co);
    e = oar_batch_norm(e, oar_from_data(ones, cd, 1, OAR_F32), oar_from_data(zeros4, cd, 1, OAR_F32),
                       oar_from_data(mean, cd, 1, OAR_F32), oar_from_data(var, cd, 1, OAR_F32), false, 0.1, 1e-5);
    int hw[2] = {2, 3};
    e = oar_flatten(oar_mean(oar_max_pool2d(oar_relu(e), &po), hw, 2, true), 1, -1);
    CHECK(y && oar_ndim(y) == 2 && oar_size(y, 1) == 4);
    CHECK(max_diff(y, e) < 1e-5);
    char dir[] = "/tmp/oar_onnx_predXXXXXX", path[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/cnn", dir);
    CHECK(oar_onnx_save_program(model, path) == OAR_OK);
    oar_predictor *p = oar_predictor_create(&(oar_predictor_config){.model_path = path});
    CHECK(p != NULL);
    if (p) {
        CHECK(oar_predictor_set_input(p, "image", x) == OAR_OK);
        CHECK(oar_predictor_run(p) == OAR_OK);
        oar_tensor *py = oar_predictor_get_output(p, "y");
        CHECK(t_same_bits(py, y));
        oar_predictor_free(p);
    }
    char f[300];
    snprintf(f, sizeof f, "%s/cnn.json", dir), unlink(f);
    snprintf(f, sizeof f, "%s/cnn.safetensors", dir), unlink(f);
    rmdir(dir);
    oar_scope_end();
    oar_onnx_free(model);
}

/* Absent optional inputs ("") and outputs; external data next to the model file. */
static void test_optional_and_external(void) {
    mb m;
    mb_init(&m, 13);
    input(&m, "x", 1, "2,4");
    float hi = 0.5f;
    int64_t none[1] = {0};
    Onnx__TensorProto *t = init_f(&m, "hi", none, 0, &hi, AS_RAW);
    (void)t;
    float wv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t wd[2] = {2, 4};
    Onnx__TensorProto *ext = init_f(&m, "w", wd, 2, wv, AS_EXTERNAL);
    ext->has_data_location = 1;
    ext->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    ext->external_data = A(sizeof(void *) * 3);
    const char *kv[3][2] = {{"location", "w.bin"}, {"offset", "4"}, {"length", "32"}};
    for (int i = 0; i < 3; i++) {
        Onnx__StringStringEntryProto *e = A(sizeof *e);
        onnx__string_string_entry_proto__init(e);
        e->key = S(kv[i][0]);
        e->value = S(kv[i][1]);
        ext->external_data[ext->n_external_data++] = e;
    }
    node(&m, "Clip", "clip", "x,,hi", "c");                 /* min absent */
    node(&m, "Add", "add", "c,w", "s");
    attr_i(node(&m, "Split", "split", "s", "a,"), "axis", 1); /* the second half unused */
    Onnx__NodeProto *sp = m.nodes[m.graph.n_node - 1];
    attr_i(sp, "num_outputs", 2);
    m.opset.version = 18;
    output(&m, "a", 1);
    char dir[] = "/tmp/oar_onnx_extXXXXXX", path[300];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    FILE *f = fopen(path, "wb");
    float pad = 0;
    fwrite(&pad, 4, 1, f), fwrite(wv, 4, 8, f), fclose(f);
    size_t n;
    uint8_t *buf = pack(&m, &n);
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    f = fopen(path, "wb");
    fwrite(buf, 1, n, f), fclose(f);
    oar_onnx_model *model = oar_onnx_load(path, NULL);
    CHECK(model != NULL);
    if (model) {
        oar_scope_begin();
        float xv[8] = {-3, 0.25f, 1, 0, 2, -1, 0.75f, 0.5f};
        int64_t xs[2] = {2, 4};
        oar_tensor *x = oar_from_data(xv, xs, 2, OAR_F32), *y = NULL;
        CHECK(oar_onnx_run(model, &x, 1, &y, 1) == OAR_OK);
        /* min(x, 0.5) + w, first two columns */
        CHECK(y && oar_size(y, 1) == 2 && t_at(y, 0) == -3 + 1 && t_at(y, 1) == 0.25 + 2 && t_at(y, 2) == 0.5 + 5);
        oar_scope_end();
        oar_onnx_free(model);
    }
    /* from memory, external data needs a directory */
    oar_onnx_model *mem = oar_onnx_load_buffer(buf, n, NULL, NULL);
    CHECK(mem == NULL && strstr(oar_last_error(), "external file 'w.bin'"));
    oar_onnx_free(mem);
    /* a location outside the model's directory, a missing file */
    ext->external_data[0]->value = S("../w.bin");
    expect_refused(&m, "bad_external_location", OAR_ERR_FORMAT, "leaves the model's directory", NULL);
    ext->external_data[0]->value = S("missing.bin");
    oar_clear_error();
    mem = load_mb(&m, "bad_external_missing", dir);
    CHECK(mem == NULL && oar_last_status() == OAR_ERR_IO && strstr(oar_last_error(), "missing.bin"));
    oar_onnx_free(mem);
    unlink(path);
    snprintf(path, sizeof path, "%s/w.bin", dir);
    unlink(path);
    rmdir(dir);
}

static void test_refused(void) {
    mb m;
    /* an operator oar does not translate: node, op type, opset and the supported list */
    build_mlp(&m);
    m.nodes[1]->op_type = S("FancyRelu");
    expect_refused(&m, "unsupported_op", OAR_ERR_UNSUPPORTED, "node 'relu' (FancyRelu)", "Supported (ai.onnx): Abs");
    build_mlp(&m);
    m.nodes[1]->domain = S("com.example");
    expect_refused(&m, "unsupported_domain", OAR_ERR_UNSUPPORTED, "in domain com.example", NULL);
    /* an attribute value oar does not support */
    mb_init(&m, 13);
    input(&m, "x", 1, "1,1,4,4");
    float w[9] = {0};
    int64_t wd[4] = {1, 1, 3, 3};
    init_f(&m, "w", wd, 4, w, AS_RAW);
    attr_s(node(&m, "Conv", "conv7", "x,w", "y"), "auto_pad", "DIAGONAL");
    output(&m, "y", 1);
    expect_refused(&m, "unsupported_attr", OAR_ERR_UNSUPPORTED, "node 'conv7' (Conv, opset 13): auto_pad='DIAGONAL'",
                   "SAME_UPPER");
    /* opsets past what oar knows */
    build_mlp(&m);
    m.opset.version = 99;
    expect_refused(&m, "opset_99", OAR_ERR_UNSUPPORTED, "opset 99", NULL);
    /* a cycle */
    mb_init(&m, 13);
    input(&m, "x", 1, "2");
    node(&m, "Add", "a", "x,b", "a_out");
    node(&m, "Relu", "b", "a_out", "b");
    output(&m, "b", 1);
    expect_refused(&m, "cycle", OAR_ERR_FORMAT, "cycle through node", NULL);
    /* an undefined value, a value defined twice */
    mb_init(&m, 13);
    input(&m, "x", 1, "2");
    node(&m, "Relu", "r", "nowhere", "y");
    output(&m, "y", 1);
    expect_refused(&m, "undefined", OAR_ERR_FORMAT, "reads 'nowhere'", NULL);
    mb_init(&m, 13);
    input(&m, "x", 1, "2");
    node(&m, "Relu", "r1", "x", "y");
    node(&m, "Relu", "r2", "x", "y");
    output(&m, "y", 1);
    expect_refused(&m, "duplicate", OAR_ERR_FORMAT, "'y' is defined twice", NULL);
    /* tensors whose data does not match their dims; absurd and negative dims */
    build_mlp(&m);
    m.inits[0]->raw_data.len -= 4;
    expect_refused(&m, "short_raw_data", OAR_ERR_FORMAT, "raw_data has 44 bytes, expected 48", NULL);
    build_mlp(&m);
    m.inits[1]->n_float_data = 2;
    expect_refused(&m, "short_float_data", OAR_ERR_FORMAT, "expected 3 values", NULL);
    build_mlp(&m);
    m.inits[0]->dims[0] = (int64_t)1 << 40;
    m.inits[0]->dims[1] = (int64_t)1 << 40;
    expect_refused(&m, "absurd_dims", OAR_ERR_FORMAT, "whole tensor under", NULL);
    build_mlp(&m);
    m.inits[0]->dims[0] = -3;
    expect_refused(&m, "negative_dim", OAR_ERR_FORMAT, "dim 0 is -3", NULL);
    build_mlp(&m);
    m.ins[0]->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__STRING;
    expect_refused(&m, "string_input", OAR_ERR_UNSUPPORTED, "graph input 'x' has dtype string", NULL);
    /* a shape computed from the input's data cannot be compiled */
    mb_init(&m, 13);
    input(&m, "x", 1, "2,3");
    input(&m, "k", 7, "2");
    int64_t one[2] = {1, 1};
    init_i64(&m, "one", one, 2);
    node(&m, "Add", "add", "k,one", "shape");
    node(&m, "Reshape", "reshape", "x,shape", "y");
    output(&m, "y", 1);
    expect_refused(&m, "data_dependent_shape", OAR_ERR_UNSUPPORTED, "must be known when the model is compiled", NULL);
    /* truncated and malformed protobuf, an empty model */
    build_mlp(&m);
    size_t n;
    uint8_t *buf = pack(&m, &n);
    for (size_t cut = 1; cut < n; cut += n / 7) {
        save_corpus(cut == 1 ? "truncated_1" : "truncated", buf, cut);
        oar_clear_error();
        oar_onnx_model *x = oar_onnx_load_buffer(buf, cut, NULL, NULL);
        CHECK(x == NULL && oar_last_status() != OAR_OK && oar_last_error()[0]);
        oar_onnx_free(x);
    }
    uint8_t junk[64];
    for (int i = 0; i < 64; i++) junk[i] = (uint8_t)(i * 73 + 11);
    save_corpus("junk", junk, sizeof junk);
    oar_clear_error();
    CHECK(oar_onnx_load_buffer(junk, sizeof junk, NULL, NULL) == NULL && strstr(oar_last_error(), "malformed"));
    CHECK(oar_onnx_load_buffer("", 0, NULL, NULL) == NULL && strstr(oar_last_error(), "no graph"));
    CHECK(oar_onnx_load("/nonexistent/model.onnx", NULL) == NULL && oar_last_status() == OAR_ERR_IO);
}

/* Every corpus file and crasher: it loads, or it is refused with a message; never a crash. */
static void replay(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix))) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        oar_clear_error();
        oar_onnx_model *m = oar_onnx_load_buffer(buf, len, NULL, NULL);
        CHECK(m != NULL || (oar_last_status() != OAR_OK && oar_last_error()[0]));
        oar_onnx_free(m);
        n++;
    }
    closedir(d);
    printf("test_onnx: replayed %d files of %s (%s*)\n", n, dir, prefix);
}

/* An initializer that takes over the parsed bytes is tracked storage (a uid), as oar's own
 * tensors are: the conv kernels name packed weights by it. Untracked, every call of an imported
 * CNN reordered every weight again (resnet18 at batch 1: a quarter of its time). */
static void test_stolen_initializer_tracked(void) {
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    int64_t dims[2] = {2, 2};
    t.n_dims = 2, t.dims = dims, t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t.has_raw_data = 1, t.raw_data.len = 4 * sizeof(float), t.raw_data.data = malloc(t.raw_data.len);
    memset(t.raw_data.data, 0, t.raw_data.len);
    oar_tensor *x = ox_tensor_from_proto(&t, NULL, "w", true);
    CHECK(x != NULL && t.raw_data.data == NULL); /* stolen: no copy */
    CHECK(x && x->storage->uid != 0);
    if (x) oar_tensor_unref(x);
    free(t.raw_data.data);
}

/* Typed fields of the interchange integers (onnx.proto): int16/uint16 in int32_data, uint32/uint64
 * in uint64_data (a uint64 above 2^63 whole); a field that does not hold them is refused. */
static void test_typed_int_fields(void) {
    int64_t dims[1] = {3};
    int32_t i32[3] = {-32768, 32767, -1};
    uint64_t u64[3] = {18446744073709551615ull, 9223372036854775808ull, 7};
    const int16_t want_i16[3] = {-32768, 32767, -1};
    const uint16_t want_u16[3] = {32768, 32767, 65535}; /* int32_data holds the bits of a uint16 too */
    const uint32_t want_u32[3] = {4294967295u, 0, 7};
    struct { int32_t type; oar_dtype dt; bool wide; const void *want; } k[4] = {
        {ONNX__TENSOR_PROTO__DATA_TYPE__INT16, OAR_I16, false, want_i16},
        {ONNX__TENSOR_PROTO__DATA_TYPE__UINT16, OAR_U16, false, want_u16},
        {ONNX__TENSOR_PROTO__DATA_TYPE__UINT32, OAR_U32, true, want_u32},
        {ONNX__TENSOR_PROTO__DATA_TYPE__UINT64, OAR_U64, true, u64}};
    for (int i = 0; i < 4; i++) {
        Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
        t.n_dims = 1, t.dims = dims, t.data_type = k[i].type;
        if (k[i].wide) t.n_uint64_data = 3, t.uint64_data = u64;
        else t.n_int32_data = 3, t.int32_data = i32;
        oar_tensor *x = ox_tensor_from_proto(&t, NULL, "w", false);
        CHECK(x && x->dtype == k[i].dt && !memcmp(oar_tensor_ptr(x), k[i].want, 3 * oar_dtype_size(k[i].dt)));
        if (x) oar_tensor_unref(x);
        t.n_uint64_data = 0, t.n_int32_data = 0; /* the typed field left empty: refused */
        if (k[i].wide) t.n_int32_data = 3, t.int32_data = i32;
        else t.n_uint64_data = 3, t.uint64_data = u64;
        CHECK_ERR(ox_tensor_from_proto(&t, NULL, "w", false), "expected 3 values (its dims)");
    }
}

/* The low-bit types (onnx.proto): float8 codes one per int32_data or raw byte; int4/uint4/
 * float4e2m1 two per byte and int2/uint2 four, first element in the lowest bits, in raw_data
 * and in int32_data alike; a size that does not match the packed count is refused. */
static void test_packed_lowbit_fields(void) {
    int64_t five[1] = {5};
    /* int4 [-8, 7, -1, 3, 5]: bytes 0x78 (7 high, -8 = 0x8 low), 0x3F, 0x05 */
    uint8_t raw_i4[3] = {0x78, 0x3F, 0x05};
    const int8_t want_i4[5] = {-8, 7, -1, 3, 5};
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.n_dims = 1, t.dims = five, t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT4;
    t.has_raw_data = 1, t.raw_data.len = 3, t.raw_data.data = raw_i4;
    oar_tensor *x = ox_tensor_from_proto(&t, NULL, "w", true);
    CHECK(x && x->dtype == OAR_I4 && !memcmp(oar_tensor_ptr(x), want_i4, 5));
    if (x) oar_tensor_unref(x);
    t.raw_data.len = 5; /* one byte per element is not ONNX's layout */
    CHECK_ERR(ox_tensor_from_proto(&t, NULL, "w", false), "raw_data has 5 bytes, expected 3");
    int32_t i32_i4[3] = {0x78, 0x3F, 0x05};
    t.has_raw_data = 0, t.n_int32_data = 3, t.int32_data = i32_i4;
    x = ox_tensor_from_proto(&t, NULL, "w", false);
    CHECK(x && !memcmp(oar_tensor_ptr(x), want_i4, 5));
    if (x) oar_tensor_unref(x);
    t.n_int32_data = 5;
    CHECK_ERR(ox_tensor_from_proto(&t, NULL, "w", false), "expected 3 values (its dims, packed)");
    /* uint2 [1, 2, 3, 0, 3]: 0x39, 0x03 */
    uint8_t raw_u2[2] = {0x39, 0x03};
    const uint8_t want_u2[5] = {1, 2, 3, 0, 3};
    Onnx__TensorProto u = ONNX__TENSOR_PROTO__INIT;
    u.n_dims = 1, u.dims = five, u.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__UINT2;
    u.has_raw_data = 1, u.raw_data.len = 2, u.raw_data.data = raw_u2;
    x = ox_tensor_from_proto(&u, NULL, "w", false);
    CHECK(x && x->dtype == OAR_U2 && !memcmp(oar_tensor_ptr(x), want_u2, 5));
    if (x) oar_tensor_unref(x);
    /* int2 sign-extends: 0b11 is -1, 0b10 is -2 */
    u.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT2;
    const int8_t want_i2[5] = {1, -2, -1, 0, -1};
    x = ox_tensor_from_proto(&u, NULL, "w", false);
    CHECK(x && x->dtype == OAR_I2 && !memcmp(oar_tensor_ptr(x), want_i2, 5));
    if (x) oar_tensor_unref(x);
    /* float8 codes in int32_data: one each, the bits as they are */
    int32_t codes[3] = {0x7E, 0xFE, 0x80};
    int64_t three[1] = {3};
    Onnx__TensorProto f = ONNX__TENSOR_PROTO__INIT;
    f.n_dims = 1, f.dims = three, f.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FNUZ;
    f.n_int32_data = 3, f.int32_data = codes;
    x = ox_tensor_from_proto(&f, NULL, "w", false);
    const uint8_t *c = x ? (const uint8_t *)oar_tensor_ptr(x) : NULL;
    CHECK(x && x->dtype == OAR_F8E4M3FNUZ && c[0] == 0x7E && c[1] == 0xFE && c[2] == 0x80);
    if (x) oar_tensor_unref(x);
}

/* Cast and CastLike to float8 by the saturate attribute (default 1: the largest finite value;
 * 0: NaN or inf per format), float8e8m0's round_mode (only "up", the default, is oar's), in one
 * compiled model; the codes expected are oar_lowbit_encode's (test_lowbit checks it against the
 * formats' bit fields). */
static void test_cast_saturate(void) {
    mb m;
    mb_init(&m, 24);
    input(&m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "6");
    input(&m, "like", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2, "1");
    node(&m, "CastLike", "a", "x,like", "sat");
    attr_i(node(&m, "CastLike", "b", "x,like", "nosat"), "saturate", 0);
    attr_i(attr_i_ret(node(&m, "Cast", "c", "x", "fnuz"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FNUZ),
           "saturate", 0);
    attr_i(node(&m, "Cast", "d", "x", "e8m0"), "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0);
    output(&m, "sat", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2);
    output(&m, "nosat", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E5M2);
    output(&m, "fnuz", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E4M3FNUZ);
    output(&m, "e8m0", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0);
    oar_onnx_model *model = load_mb(&m, "cast_saturate", NULL);
    CHECK(model != NULL);
    if (!model) return;
    oar_scope_begin();
    const float xv[6] = {1e6f, -1e6f, INFINITY, NAN, 1.1f, -0.0f};
    oar_tensor *in[2] = {oar_from_data(xv, (int64_t[]){6}, 1, OAR_F32),
                         oar_cast(oar_from_data((float[]){1.0f}, (int64_t[]){1}, 1, OAR_F32), OAR_F8E5M2)};
    oar_tensor *out[4] = {0};
    CHECK(oar_onnx_run(model, in, 2, out, 4) == OAR_OK);
    const oar_dtype dts[4] = {OAR_F8E5M2, OAR_F8E5M2, OAR_F8E4M3FNUZ, OAR_F8E8M0};
    const bool sat[4] = {true, false, false, true};
    for (int k = 0; k < 4; k++) {
        CHECK(out[k] && oar_dtype_of(out[k]) == dts[k]);
        const uint8_t *c = out[k] ? (const uint8_t *)oar_data(out[k]) : NULL;
        for (int i = 0; c && i < 6; i++) CHECK(c[i] == oar_lowbit_encode(dts[k], xv[i], sat[k]));
    }
    /* the values themselves: saturated 57344, not saturated inf; fnuz overflow is NaN (0x80) */
    CHECK(out[0] && t_at(out[0], 0) == 57344.0 && t_at(out[0], 2) == 57344.0 && isnan(t_at(out[0], 3)));
    CHECK(out[1] && isinf(t_at(out[1], 0)) && t_at(out[1], 1) < 0 && isinf(t_at(out[1], 2)));
    CHECK(out[2] && ((const uint8_t *)oar_data(out[2]))[0] == 0x80 && ((const uint8_t *)oar_data(out[2]))[5] == 0);
    oar_scope_end();
    oar_onnx_free(model);
    /* round_mode "down" or "nearest" to e8m0: refused, naming it */
    mb r;
    mb_init(&r, 24);
    input(&r, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, "2");
    Onnx__NodeProto *n = node(&r, "Cast", "c", "x", "y");
    attr_i(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0);
    attr_s(n, "round_mode", "nearest");
    output(&r, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT8E8M0);
    expect_refused(&r, "cast_round_mode", OAR_ERR_UNSUPPORTED, "round_mode 'nearest'", "rounds up");
}

int main(void) {
    corpus_dir = getenv("OAR_WRITE_ONNX_CORPUS");
    test_cast_saturate();
    arena_free();
    test_packed_lowbit_fields();
    test_stolen_initializer_tracked();
    test_typed_int_fields();
    test_mlp();
    arena_free();
    test_shape_folding();
    arena_free();
    test_data_sized();
    arena_free();
    test_cnn_predictor();
    arena_free();
    test_optional_and_external();
    arena_free();
    test_refused();
    arena_free();
    const char *src = getenv("OAR_SOURCE_DIR");
    if (src) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/onnx", src);
        replay(dir, "");
        snprintf(dir, sizeof dir, "%s/tests/fuzz/crashers", src);
        replay(dir, "onnx-");
    }
    return test_summary("test_onnx");
}
#endif
