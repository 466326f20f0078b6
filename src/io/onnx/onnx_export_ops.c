/* oar ops as ONNX nodes (opset 17). Each entry writes one oar node as one or a few standard
 * nodes with the same meaning; ops ONNX lacks at opset 17 are written as their decomposition
 * (gelu with Erf or Tanh, silu as x * sigmoid(x)). Sizes that vary between calls are never
 * written as numbers: reshape keeps its -1, expand writes 1 where the input already has the
 * size, and linear over more than two dims flattens with -1. */
#include "io/onnx/onnx_export.h"
#include "ops/fused_ew.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef oar_status (*oxe_fn)(oxe_graph *g, const oar_node *n);

/* ---- reading the node */
static const oar_attr *attr(const oar_node *n, const char *name) {
    const oar_op_def *d = oar_op_table[n->op];
    for (int k = 0; k < d->n_attrs; k++)
        if (!strcmp(d->attrs[k].name, name)) return &n->attrs[k];
    return NULL;
}
static int64_t attr_i(const oar_node *n, const char *name) { return attr(n, name)->i; }
static const char *attr_s(const oar_node *n, const char *name) {
    const oar_attr *a = attr(n, name);
    return a && a->kind == OAR_ATTR_STR ? a->s : "";
}
static const oar_meta *meta(const oxe_graph *g, int v) { return &g->p->values[v].meta; }
#define IN(k) oxe_in(g, n->in[k])
#define OUT(k) oxe_out(g, n->out[k])
#define OK(x) ((x) ? OAR_OK : fail(g))

static oar_status fail(oxe_graph *g) {
    return oar_last_status() != OAR_OK ? oar_last_status() : oar_error(OAR_ERR_OOM, "onnx_save: out of memory");
}

static oar_status refuse(oxe_graph *g, const oar_node *n, const char *why) {
    return oar_error(OAR_ERR_UNSUPPORTED, "onnx_save: node %d (%s): %s", g->cur, oar_op_table[n->op]->name, why);
}

/* ---- one-to-one ops */
static const struct {
    oar_op_id op;
    const char *onnx;
} g_simple[] = {
    {OAR_OP_neg, "Neg"},       {OAR_OP_abs, "Abs"},         {OAR_OP_exp, "Exp"},           {OAR_OP_log, "Log"},
    {OAR_OP_sqrt, "Sqrt"},     {OAR_OP_sin, "Sin"},         {OAR_OP_cos, "Cos"},           {OAR_OP_tanh, "Tanh"},
    {OAR_OP_sigmoid, "Sigmoid"}, {OAR_OP_relu, "Relu"},     {OAR_OP_erf, "Erf"},           {OAR_OP_sign, "Sign"},
    {OAR_OP_floor, "Floor"},   {OAR_OP_ceil, "Ceil"},       {OAR_OP_round, "Round"},       {OAR_OP_add, "Add"},
    {OAR_OP_sub, "Sub"},       {OAR_OP_mul, "Mul"},         {OAR_OP_div, "Div"},           {OAR_OP_pow, "Pow"},
    {OAR_OP_maximum, "Max"},   {OAR_OP_minimum, "Min"},     {OAR_OP_eq, "Equal"},          {OAR_OP_lt, "Less"},
    {OAR_OP_le, "LessOrEqual"}, {OAR_OP_gt, "Greater"},     {OAR_OP_ge, "GreaterOrEqual"}, {OAR_OP_logical_and, "And"},
    {OAR_OP_logical_or, "Or"}, {OAR_OP_logical_not, "Not"}, {OAR_OP_where, "Where"},       {OAR_OP_matmul, "MatMul"},
    {OAR_OP_contiguous, "Identity"}, {OAR_OP_asin, "Asin"},  {OAR_OP_acos, "Acos"},       {OAR_OP_atan, "Atan"},
#ifdef OAR_HAVE_OPENBLAS
    {OAR_OP_linalg_det, "Det"}, /* [..., M, M] -> [...] in both */
#endif
    {OAR_OP_sinh, "Sinh"},     {OAR_OP_asinh, "Asinh"},     {OAR_OP_atanh, "Atanh"},     {OAR_OP_cosh, "Cosh"},
    {OAR_OP_acosh, "Acosh"},
};

static oar_status simple(oxe_graph *g, const oar_node *n) {
    for (size_t i = 0; i < sizeof g_simple / sizeof *g_simple; i++)
        if (g_simple[i].op == n->op) {
            const char *in[3];
            for (int k = 0; k < n->n_in && k < 3; k++) in[k] = IN(k);
            const char *out = OUT(0);
            return OK(oxe_node(g, g_simple[i].onnx, in, n->n_in, &out, 1));
        }
    return OAR_ERR_INTERNAL;
}

/* ---- elementwise with attributes or decompositions */
static const char *simple_name(oar_op_id op) {
    for (size_t i = 0; i < sizeof g_simple / sizeof *g_simple; i++)
        if (g_simple[i].op == op) return g_simple[i].onnx;
    return NULL;
}

/* Gelu is an ONNX op from opset 20 only: x * 0.5 * (1 + erf(x / sqrt 2)), or the tanh form
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
static bool emit_gelu(oxe_graph *g, const char *x, const char *y, oar_dtype dt, bool tanh_form) {
    const char *inner = oxe_tmp(g), *e = oxe_tmp(g), *onep = oxe_tmp(g), *half = oxe_tmp(g);
    bool ok;
    if (!tanh_form) {
        ok = oxe_node2(g, "Div", x, oxe_const_scalar(g, sqrt(2.0), dt), inner) && oxe_node1(g, "Erf", inner, e);
    } else {
        const char *x3 = oxe_tmp(g), *x3s = oxe_tmp(g), *sum = oxe_tmp(g);
        ok = oxe_node2(g, "Pow", x, oxe_const_scalar(g, 3.0, dt), x3) &&
             oxe_node2(g, "Mul", x3, oxe_const_scalar(g, 0.044715, dt), x3s) && oxe_node2(g, "Add", x, x3s, sum) &&
             oxe_node2(g, "Mul", sum, oxe_const_scalar(g, sqrt(2.0 / M_PI), dt), inner) &&
             oxe_node1(g, "Tanh", inner, e);
    }
    return ok && oxe_node2(g, "Add", e, oxe_const_scalar(g, 1.0, dt), onep) &&
           oxe_node2(g, "Mul", x, oxe_const_scalar(g, 0.5, dt), half) && oxe_node2(g, "Mul", half, onep, y);
}

/* y = op(x) for the attribute-free unary ops and gelu (approximate: its attribute); false with
 * no error set when op is not one of them. */
static bool emit_unary(oxe_graph *g, oar_op_id op, int approximate, const char *x, const char *y, oar_dtype dt) {
    const char *t;
    switch (op) {
    case OAR_OP_square: return oxe_node2(g, "Mul", x, x, y);
    case OAR_OP_rsqrt: t = oxe_tmp(g); return oxe_node1(g, "Sqrt", x, t) && oxe_node1(g, "Reciprocal", t, y);
    case OAR_OP_silu: t = oxe_tmp(g); return oxe_node1(g, "Sigmoid", x, t) && oxe_node2(g, "Mul", x, t, y);
    /* ONNX has none of these four: written as their definitions (so to rounding, not bit for bit) */
    case OAR_OP_log1p:
        t = oxe_tmp(g);
        return oxe_node2(g, "Add", x, oxe_const_scalar(g, 1.0, dt), t) && oxe_node1(g, "Log", t, y);
    case OAR_OP_expm1:
        t = oxe_tmp(g);
        return oxe_node1(g, "Exp", x, t) && oxe_node2(g, "Sub", t, oxe_const_scalar(g, 1.0, dt), y);
    case OAR_OP_exp2: return oxe_node2(g, "Pow", oxe_const_scalar(g, 2.0, dt), x, y);
    case OAR_OP_erfc:
        t = oxe_tmp(g);
        return oxe_node1(g, "Erf", x, t) && oxe_node2(g, "Sub", oxe_const_scalar(g, 1.0, dt), t, y);
    case OAR_OP_gelu: return emit_gelu(g, x, y, dt, approximate == 1);
    default: return simple_name(op) && oxe_node1(g, simple_name(op), x, y);
    }
}

static oar_status ne(oxe_graph *g, const oar_node *n) {
    const char *t = oxe_tmp(g);
    return OK(oxe_node2(g, "Equal", IN(0), IN(1), t) && oxe_node1(g, "Not", t, OUT(0)));
}

/* bitwise ops: on bool the logical ops (opset 1), on integers the Bitwise ops of opset 18, which
 * oxe_opset_needed asked for (bitwise_not takes integers only). */
static oar_status bitwise(oxe_graph *g, const oar_node *n) {
    bool logical = meta(g, n->in[0])->dtype == OAR_BOOL;
    const char *op = n->op == OAR_OP_bitwise_and ? (logical ? "And" : "BitwiseAnd")
                   : n->op == OAR_OP_bitwise_or  ? (logical ? "Or" : "BitwiseOr")
                   : n->op == OAR_OP_bitwise_xor ? (logical ? "Xor" : "BitwiseXor")
                                                  : "BitwiseNot";
    return OK(n->n_in == 1 ? oxe_node1(g, op, IN(0), OUT(0)) : oxe_node2(g, op, IN(0), IN(1), OUT(0)));
}

/* BitShift is defined on unsigned types only (u8 in oar), with the same out-of-range rule. */
static oar_status shift(oxe_graph *g, const oar_node *n) {
    oar_dtype dt = meta(g, n->in[0])->dtype;
    if (dt != OAR_U8) {
        char why[96];
        snprintf(why, sizeof why, "ONNX's BitShift takes unsigned integers only, got %s", oar_dtype_name(dt));
        return refuse(g, n, why);
    }
    Onnx__NodeProto *o = oxe_node2(g, "BitShift", IN(0), IN(1), OUT(0));
    return OK(o && oxe_attr_str(g, o, "direction", n->op == OAR_OP_bitwise_left_shift ? "LEFT" : "RIGHT"));
}

/* The opset that introduced a dtype (0: any): float8 with Cast-19, int4/uint4 21, float4e2m1
 * 23, float8e8m0 24, int2/uint2 25. */
static int dtype_opset(oar_dtype dt) {
    switch (dt) {
    case OAR_F8E4M3FN: case OAR_F8E4M3FNUZ: case OAR_F8E5M2: case OAR_F8E5M2FNUZ: return 19;
    case OAR_I4: case OAR_U4: return 21;
    case OAR_F4E2M1: return 23;
    case OAR_F8E8M0: return 24;
    case OAR_I2: case OAR_U2: return 25;
    default: return 0;
    }
}

int oxe_opset_needed(const oar_program *p) {
    int opset = OXE_OPSET;
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        bool bw = n->op == OAR_OP_bitwise_and || n->op == OAR_OP_bitwise_or || n->op == OAR_OP_bitwise_xor ||
                  n->op == OAR_OP_bitwise_not;
        if (bw && p->values[n->in[0]].meta.dtype != OAR_BOOL && opset < OXE_OPSET_BITWISE) opset = OXE_OPSET_BITWISE;
    }
    for (int v = 0; v < p->n_values; v++) {
        int need = dtype_opset(p->values[v].meta.dtype);
        if (need > opset) opset = need;
    }
    return opset;
}

/* The IR version that goes with an opset: 8 for 17 and 18 (ONNX 1.12, 1.13), 9 for 19-20 (the
 * float8 types), 10 for 21-22 (int4), 11 for 23 (float4), 12 for 24 (float8e8m0), 13 for 25
 * (int2). */
int oxe_ir_version(int opset) {
    return opset <= 18 ? 8 : opset <= 20 ? 9 : opset <= 22 ? 10 : opset == 23 ? 11 : opset == 24 ? 12 : 13;
}

static oar_status unary(oxe_graph *g, const oar_node *n) {
    int approximate = n->op == OAR_OP_gelu ? (int)n->attrs[0].i : -1;
    return OK(emit_unary(g, n->op, approximate, IN(0), OUT(0), meta(g, n->in[0])->dtype));
}

static oar_status leaky_relu(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node1(g, "LeakyRelu", IN(0), OUT(0));
    return OK(o && oxe_attr_float(g, o, "alpha", n->attrs[0].f));
}

static oar_status elu(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node1(g, "Elu", IN(0), OUT(0));
    return OK(o && oxe_attr_float(g, o, "alpha", n->attrs[0].f));
}

static oar_status clip(oxe_graph *g, const oar_node *n) {
    oar_dtype dt = meta(g, n->in[0])->dtype;
    double lo = n->attrs[0].f, hi = n->attrs[1].f;
    const char *in[3] = {IN(0), isinf(lo) ? "" : oxe_const_scalar(g, lo, dt), isinf(hi) ? "" : oxe_const_scalar(g, hi, dt)};
    const char *out = OUT(0);
    return OK(oxe_node(g, "Clip", in, 3, &out, 1));
}

static oar_status cast(oxe_graph *g, const oar_node *n) {
    int32_t to = oxe_onnx_dtype((oar_dtype)n->attrs[0].i);
    if (!to) return refuse(g, n, "the target dtype has no ONNX type");
    Onnx__NodeProto *o = oxe_node1(g, "Cast", IN(0), OUT(0));
    /* oar's cast gives a float8 overflow inf or NaN (torch's rule): ONNX's saturate=0 */
    oar_dtype dt = (oar_dtype)n->attrs[0].i;
    bool f8 = oar_dtype_is_lowbit(dt) && oar_dtype_is_float(dt) && dt != OAR_F4E2M1;
    return OK(o && oxe_attr_int(g, o, "to", to) && (!f8 || oxe_attr_int(g, o, "saturate", 0)));
}

static oar_status identity(oxe_graph *g, const oar_node *n) {
    if (n->op == OAR_OP_dropout && attr_i(n, "training"))
        return refuse(g, n, "dropout in training mode draws random masks; export with the model in eval mode");
    return OK(oxe_node1(g, "Identity", IN(0), OUT(0)));
}

/* ---- reductions */
static oar_status reduce(oxe_graph *g, const oar_node *n) {
    const char *op = n->op == OAR_OP_sum ? "ReduceSum" : n->op == OAR_OP_mean ? "ReduceMean"
                   : n->op == OAR_OP_amax ? "ReduceMax" : n->op == OAR_OP_amin ? "ReduceMin" : "ReduceProd";
    const oar_attr *dims = attr(n, "dims");
    bool keep = attr_i(n, "keepdim") != 0;
    Onnx__NodeProto *o;
    if (n->op == OAR_OP_sum || g->opset >= 18) { /* axes as an input (ReduceSum from opset 13, the rest 18) */
        const char *in[2] = {IN(0), dims->n ? oxe_const_ints(g, dims->ints, dims->n) : ""};
        const char *out = OUT(0);
        o = oxe_node(g, op, in, dims->n ? 2 : 1, &out, 1);
    } else {
        o = oxe_node1(g, op, IN(0), OUT(0));
        if (o && dims->n && !oxe_attr_ints(g, o, "axes", dims->ints, dims->n)) return fail(g);
    }
    return OK(o && oxe_attr_int(g, o, "keepdims", keep));
}

static oar_status arg_extreme(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node1(g, n->op == OAR_OP_argmax ? "ArgMax" : "ArgMin", IN(0), OUT(0));
    return OK(o && oxe_attr_int(g, o, "axis", attr_i(n, "dim")) && oxe_attr_int(g, o, "keepdims", attr_i(n, "keepdim")));
}

static oar_status softmax(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node1(g, n->op == OAR_OP_softmax ? "Softmax" : "LogSoftmax", IN(0), OUT(0));
    return OK(o && oxe_attr_int(g, o, "axis", n->attrs[0].i));
}

static oar_status cumsum(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node2(g, "CumSum", IN(0), oxe_const_ints(g, &n->attrs[0].i, 1), OUT(0));
    return OK(o && oxe_attr_int(g, o, "reverse", attr_i(n, "reverse")));
}

/* ---- shapes and indexing */
static oar_status reshape(oxe_graph *g, const oar_node *n) {
    const oar_attr *s = &n->attrs[0];
    bool zero = false;
    for (int d = 0; d < s->n; d++) zero |= s->ints[d] == 0;
    Onnx__NodeProto *o = oxe_node2(g, "Reshape", IN(0), oxe_const_ints(g, s->ints, s->n), OUT(0));
    return OK(o && (!zero || oxe_attr_int(g, o, "allowzero", 1))); /* a 0 is a size, not "copy the dim" */
}

static oar_status permute(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node1(g, "Transpose", IN(0), OUT(0));
    return OK(o && oxe_attr_ints(g, o, "perm", n->attrs[0].ints, n->attrs[0].n));
}

static oar_status slice(oxe_graph *g, const oar_node *n) {
    int64_t dim = attr_i(n, "dim"), start = attr_i(n, "start"), end = attr_i(n, "end"), step = attr_i(n, "step");
    const char *in[5] = {IN(0), oxe_const_ints(g, &start, 1), oxe_const_ints(g, &end, 1), oxe_const_ints(g, &dim, 1),
                         oxe_const_ints(g, &step, 1)};
    const char *out = OUT(0);
    return OK(oxe_node(g, "Slice", in, 5, &out, 1));
}

static oar_status flip(oxe_graph *g, const oar_node *n) {
    const oar_attr *dims = &n->attrs[0];
    int64_t starts[OAR_MAX_DIMS], ends[OAR_MAX_DIMS], steps[OAR_MAX_DIMS];
    for (int i = 0; i < dims->n; i++) starts[i] = -1, ends[i] = INT64_MIN, steps[i] = -1;
    const char *in[5] = {IN(0), oxe_const_ints(g, starts, dims->n), oxe_const_ints(g, ends, dims->n),
                         oxe_const_ints(g, dims->ints, dims->n), oxe_const_ints(g, steps, dims->n)};
    const char *out = OUT(0);
    return OK(oxe_node(g, "Slice", in, 5, &out, 1));
}

/* Expand broadcasts the shape against the input's: 1 keeps the input's size, which is how a
 * dynamic dim the input carries stays dynamic. */
static oar_status expand(oxe_graph *g, const oar_node *n) {
    const oar_meta *x = meta(g, n->in[0]), *y = meta(g, n->out[0]);
    int64_t shape[OAR_MAX_DIMS];
    for (int d = 0; d < y->ndim; d++) {
        int xd = d - (y->ndim - x->ndim);
        shape[d] = xd >= 0 && x->shape[xd] == y->shape[d] ? 1 : y->shape[d];
    }
    return OK(oxe_node2(g, "Expand", IN(0), oxe_const_ints(g, shape, y->ndim), OUT(0)));
}

static oar_status squeeze(oxe_graph *g, const oar_node *n) {
    return OK(oxe_node2(g, n->op == OAR_OP_squeeze ? "Squeeze" : "Unsqueeze", IN(0),
                        oxe_const_ints(g, &n->attrs[0].i, 1), OUT(0)));
}

static oar_status concat(oxe_graph *g, const oar_node *n) {
    const char *in[OAR_MAX_INPUTS];
    int64_t dim = n->attrs[0].i;
    for (int k = 0; k < n->n_in; k++) {
        in[k] = IN(k);
        if (n->op == OAR_OP_stack) { /* stack: each input with a new dim, then concat */
            const char *t = oxe_tmp(g);
            if (!oxe_node2(g, "Unsqueeze", in[k], oxe_const_ints(g, &dim, 1), t)) return fail(g);
            in[k] = t;
        }
    }
    const char *out = OUT(0);
    Onnx__NodeProto *o = oxe_node(g, "Concat", in, n->n_in, &out, 1);
    return OK(o && oxe_attr_int(g, o, "axis", dim));
}

static oar_status split(oxe_graph *g, const oar_node *n) {
    int64_t dim = n->attrs[0].i, sizes[OAR_MAX_OUTPUTS];
    const char *out[OAR_MAX_OUTPUTS];
    for (int k = 0; k < n->n_out; k++) sizes[k] = meta(g, n->out[k])->shape[dim], out[k] = OUT(k);
    const char *in[2] = {IN(0), oxe_const_ints(g, sizes, n->n_out)};
    Onnx__NodeProto *o = oxe_node(g, "Split", in, 2, out, n->n_out);
    return OK(o && oxe_attr_int(g, o, "axis", dim));
}

static oar_status gather(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o;
    if (n->op == OAR_OP_embedding) o = oxe_node2(g, "Gather", IN(0), IN(1), OUT(0));
    else if (n->op == OAR_OP_index_select) o = oxe_node2(g, "Gather", IN(0), IN(1), OUT(0));
    else o = oxe_node2(g, "GatherElements", IN(0), IN(1), OUT(0));
    int64_t axis = n->op == OAR_OP_embedding ? 0 : attr_i(n, "dim");
    return OK(o && oxe_attr_int(g, o, "axis", axis));
}

static oar_status masked_fill(oxe_graph *g, const oar_node *n) {
    const char *in[3] = {IN(1), oxe_const_scalar(g, n->attrs[0].f, meta(g, n->in[0])->dtype), IN(0)};
    const char *out = OUT(0);
    return OK(oxe_node(g, "Where", in, 3, &out, 1));
}

static oar_status trilu(oxe_graph *g, const oar_node *n) {
    Onnx__NodeProto *o = oxe_node2(g, "Trilu", IN(0), oxe_const_ints(g, &n->attrs[0].i, 1), OUT(0));
    return OK(o && oxe_attr_int(g, o, "upper", n->op == OAR_OP_triu));
}

/* oar's pads are (before, after) pairs from the last dim, as torch; ONNX's all befores, then
 * all afters, from the first dim. */
static oar_status pad(oxe_graph *g, const oar_node *n) {
    const oar_attr *p = &n->attrs[0];
    int nd = meta(g, n->in[0])->ndim;
    int64_t pads[2 * OAR_MAX_DIMS] = {0};
    for (int i = 0; 2 * i + 1 < p->n; i++) pads[nd - 1 - i] = p->ints[2 * i], pads[2 * nd - 1 - i] = p->ints[2 * i + 1];
    int64_t mode = n->attrs[1].i;
    const char *in[3] = {IN(0), oxe_const_ints(g, pads, 2 * nd),
                         oxe_const_scalar(g, n->attrs[2].f, meta(g, n->in[0])->dtype)};
    const char *out = OUT(0);
    Onnx__NodeProto *o = oxe_node(g, "Pad", in, mode == OAR_PAD_CONSTANT ? 3 : 2, &out, 1);
    return OK(o && oxe_attr_str(g, o, "mode", mode == OAR_PAD_CONSTANT ? "constant" : mode == OAR_PAD_REFLECT ? "reflect" : "edge"));
}

static oar_status topk(oxe_graph *g, const oar_node *n) {
    const char *out[2] = {OUT(0), OUT(1)};
    const char *in[2] = {IN(0), oxe_const_ints(g, &n->attrs[0].i, 1)};
    Onnx__NodeProto *o = oxe_node(g, "TopK", in, 2, out, 2);
    return OK(o && oxe_attr_int(g, o, "axis", attr_i(n, "dim")) && oxe_attr_int(g, o, "largest", attr_i(n, "largest")) &&
              oxe_attr_int(g, o, "sorted", attr_i(n, "sorted")));
}

static oar_status einsum(oxe_graph *g, const oar_node *n) {
    const char *in[2] = {IN(0), n->n_in > 1 ? IN(1) : NULL};
    const char *out = OUT(0);
    Onnx__NodeProto *o = oxe_node(g, "Einsum", in, n->n_in, &out, 1);
    return OK(o && oxe_attr_str(g, o, "equation", oxe_strdup(g, n->attrs[0].s)));
}

/* ---- layers */
/* linear(x [..., K], w [N, K], b [N]?): Gemm for 2-D x; otherwise flattened to [-1, K] and back,
 * so that the re-imported program has the same one linear op. */
static oar_status linear(oxe_graph *g, const oar_node *n, const char *out_name) {
    const oar_meta *x = meta(g, n->in[0]), *y = meta(g, n->out[0]);
    const char *in[3] = {IN(0), IN(1), n->n_in > 2 && n->in[2] >= 0 ? IN(2) : NULL};
    int n_in = in[2] ? 3 : 2;
    if (x->ndim == 2) {
        Onnx__NodeProto *o = oxe_node(g, "Gemm", in, n_in, &out_name, 1);
        return OK(o && oxe_attr_int(g, o, "transB", 1));
    }
    int64_t flat[2] = {-1, x->shape[x->ndim - 1]}, back[OAR_MAX_DIMS];
    int n_lead = y->ndim - 1;
    for (int d = 0; d < y->ndim; d++) back[d] = y->shape[d];
    if (n_lead > 1) { /* the leading dims: -1 for the first, which carries the batch */
        for (int d = 1; d < n_lead; d++)
            if (g->p->values[n->in[0]].dyn_dims >> d & 1u)
                return refuse(g, n, "x has a dynamic dim other than the first; only the first may vary");
        back[0] = -1;
    } else {
        back[0] = -1;
    }
    const char *x2 = oxe_tmp(g), *y2 = oxe_tmp(g);
    if (!oxe_node2(g, "Reshape", in[0], oxe_const_ints(g, flat, 2), x2)) return fail(g);
    in[0] = x2;
    Onnx__NodeProto *o = oxe_node(g, "Gemm", in, n_in, &y2, 1);
    if (!o || !oxe_attr_int(g, o, "transB", 1)) return fail(g);
    return OK(oxe_node2(g, "Reshape", y2, oxe_const_ints(g, back, y->ndim), out_name));
}

static oar_status linear_op(oxe_graph *g, const oar_node *n) { return linear(g, n, OUT(0)); }

/* The spatial attributes of conv and pooling: ONNX pads are begins then ends. */
static bool spatial(oxe_graph *g, Onnx__NodeProto *o, const oar_node *n, int nsp, bool conv) {
    const oar_attr *s = attr(n, "stride"), *p = attr(n, "padding"), *d = attr(n, "dilation");
    int64_t pads[6], one[3] = {1, 1, 1};
    for (int i = 0; i < nsp; i++) pads[i] = pads[nsp + i] = p->ints[i];
    bool ok = o && oxe_attr_ints(g, o, "strides", s->n ? s->ints : one, nsp) && oxe_attr_ints(g, o, "pads", pads, 2 * nsp);
    if (ok && d) ok = oxe_attr_ints(g, o, "dilations", d->n ? d->ints : one, nsp);
    if (ok && conv) ok = oxe_attr_int(g, o, "group", attr_i(n, "groups"));
    return ok;
}

static oar_status conv(oxe_graph *g, const oar_node *n, const char *out_name) {
    const oar_meta *w = meta(g, n->in[1]);
    int nsp = w->ndim - 2;
    const char *in[3] = {IN(0), IN(1), n->n_in > 2 && n->in[2] >= 0 ? IN(2) : NULL};
    Onnx__NodeProto *o = oxe_node(g, "Conv", in, in[2] ? 3 : 2, &out_name, 1);
    return OK(o && oxe_attr_ints(g, o, "kernel_shape", w->shape + 2, nsp) && spatial(g, o, n, nsp, true));
}

static oar_status conv_op(oxe_graph *g, const oar_node *n) { return conv(g, n, OUT(0)); }

static oar_status conv_transpose(oxe_graph *g, const oar_node *n) {
    const oar_meta *w = meta(g, n->in[1]);
    int nsp = w->ndim - 2; /* conv_transpose2d or conv_transpose3d */
    const char *in[3] = {IN(0), IN(1), n->n_in > 2 && n->in[2] >= 0 ? IN(2) : NULL};
    const char *out = OUT(0);
    Onnx__NodeProto *o = oxe_node(g, "ConvTranspose", in, in[2] ? 3 : 2, &out, 1);
    const oar_attr *op = attr(n, "output_padding");
    int64_t zero[3] = {0, 0, 0};
    return OK(o && oxe_attr_ints(g, o, "kernel_shape", w->shape + 2, nsp) && spatial(g, o, n, nsp, true) &&
              oxe_attr_ints(g, o, "output_padding", op->n ? op->ints : zero, nsp));
}

static oar_status pool(oxe_graph *g, const oar_node *n) {
    bool three = n->op == OAR_OP_max_pool3d || n->op == OAR_OP_avg_pool3d;
    int nsp = three ? 3 : 2;
    if (meta(g, n->in[0])->ndim != nsp + 2)
        return refuse(g, n, three ? "expected a 5-D input [N, C, D, H, W] (ONNX pools batches)"
                                  : "expected a 4-D input [N, C, H, W] (ONNX pools batches)");
    if (n->op == OAR_OP_avg_pool3d && attr_i(n, "divisor_override"))
        return refuse(g, n, "divisor_override (ONNX's AveragePool divides by the window's count)");
    /* ONNX's MaxPool takes u8/i8 */
    bool max = n->op == OAR_OP_max_pool2d || n->op == OAR_OP_qmax_pool2d || n->op == OAR_OP_max_pool3d;
    Onnx__NodeProto *o = oxe_node1(g, max ? "MaxPool" : "AveragePool", IN(0), OUT(0));
    const oar_attr *k = attr(n, "kernel");
    bool ok = o && oxe_attr_ints(g, o, "kernel_shape", k->ints, nsp) && spatial(g, o, n, nsp, false) &&
              oxe_attr_int(g, o, "ceil_mode", attr_i(n, "ceil_mode"));
    if (ok && !max) ok = oxe_attr_int(g, o, "count_include_pad", attr_i(n, "count_include_pad"));
    return OK(ok);
}

/* max_pool2d_nhwc and avg_pool2d_nhwc (conv_nhwc's pooling of NHWC data): MaxPool or
 * AveragePool between Transposes to NCHW and back, as conv2d_act in that layout. */
static oar_status max_pool_nhwc(oxe_graph *g, const oar_node *n) {
    bool avg = n->op == OAR_OP_avg_pool2d_nhwc;
    static const int64_t TO_NCHW[4] = {0, 3, 1, 2}, TO_NHWC[4] = {0, 2, 3, 1};
    const char *xt = oxe_tmp(g), *yt = oxe_tmp(g);
    Onnx__NodeProto *o = oxe_node1(g, "Transpose", IN(0), xt);
    if (!o || !oxe_attr_ints(g, o, "perm", TO_NCHW, 4)) return fail(g);
    const oar_attr *k = attr(n, "kernel");
    o = oxe_node1(g, avg ? "AveragePool" : "MaxPool", xt, yt);
    if (!o || !oxe_attr_ints(g, o, "kernel_shape", k->ints, 2) || !spatial(g, o, n, 2, false) ||
        !oxe_attr_int(g, o, "ceil_mode", attr_i(n, "ceil_mode")) ||
        (avg && !oxe_attr_int(g, o, "count_include_pad", attr_i(n, "count_include_pad"))))
        return fail(g);
    o = oxe_node1(g, "Transpose", yt, OUT(0));
    return OK(o && oxe_attr_ints(g, o, "perm", TO_NHWC, 4));
}

/* Output 1x1 is GlobalAveragePool; bins that divide the input evenly are a plain average pool. */
static oar_status adaptive_pool(oxe_graph *g, const oar_node *n) {
    const oar_meta *x = meta(g, n->in[0]), *y = meta(g, n->out[0]);
    if (x->ndim != 4) return refuse(g, n, "expected a 4-D input [N, C, H, W]");
    if (y->shape[2] == 1 && y->shape[3] == 1) return OK(oxe_node1(g, "GlobalAveragePool", IN(0), OUT(0)));
    if (x->shape[2] % y->shape[2] || x->shape[3] % y->shape[3])
        return refuse(g, n, "output bins that do not divide the input evenly have no ONNX op (AveragePool needs "
                            "one kernel size)");
    int64_t k[2] = {x->shape[2] / y->shape[2], x->shape[3] / y->shape[3]};
    Onnx__NodeProto *o = oxe_node1(g, "AveragePool", IN(0), OUT(0));
    return OK(o && oxe_attr_ints(g, o, "kernel_shape", k, 2) && oxe_attr_ints(g, o, "strides", k, 2));
}

/* A per-channel constant of value v, for a missing weight or bias. */
static const char *filled(oxe_graph *g, const int64_t *shape, int ndim, double v, oar_dtype dt) {
    oar_tensor *t = oar_full(shape, ndim, v, dt);
    const char *name = t ? oxe_tmp(g) : NULL;
    bool ok = name && oxe_init_tensor(g, name, t);
    oar_release(t);
    return ok ? name : NULL;
}

static oar_status batch_norm(oxe_graph *g, const oar_node *n, const char *out_name) {
    if (attr_i(n, "training")) return refuse(g, n, "batch norm in training mode; export with the model in eval mode");
    const oar_meta *x = meta(g, n->in[0]);
    int64_t c = x->shape[1];
    const char *in[5] = {IN(0), n->in[1] >= 0 ? IN(1) : filled(g, &c, 1, 1.0, x->dtype),
                         n->in[2] >= 0 ? IN(2) : filled(g, &c, 1, 0.0, x->dtype), IN(3), IN(4)};
    Onnx__NodeProto *o = oxe_node(g, "BatchNormalization", in, 5, &out_name, 1);
    return OK(o && oxe_attr_float(g, o, "epsilon", attr(n, "eps")->f));
}

static oar_status batch_norm_op(oxe_graph *g, const oar_node *n) { return batch_norm(g, n, OUT(0)); }

/* LayerNormalization of x (value xv's meta, named x) over its last nd dims, with the weight and
 * bias values wv, bv (-1: absent; ONNX needs a Scale, so ones are written for it). */
static oar_status layer_norm_of(oxe_graph *g, const oar_node *n, const char *x, int xv, int wv, int bv,
                                const char *out) {
    const oar_meta *m = meta(g, xv);
    int nd = (int)attr_i(n, "normalized_ndim");
    const int64_t *shape = m->shape + m->ndim - nd;
    const char *in[3] = {x, wv >= 0 ? oxe_in(g, wv) : filled(g, shape, nd, 1.0, m->dtype), bv >= 0 ? oxe_in(g, bv) : NULL};
    Onnx__NodeProto *o = oxe_node(g, "LayerNormalization", in, in[2] ? 3 : 2, &out, 1);
    return OK(o && oxe_attr_int(g, o, "axis", -nd) && oxe_attr_float(g, o, "epsilon", attr(n, "eps")->f));
}

static oar_status layer_norm(oxe_graph *g, const oar_node *n) {
    return layer_norm_of(g, n, IN(0), n->in[0], n->n_in > 1 ? n->in[1] : -1, n->n_in > 2 ? n->in[2] : -1, OUT(0));
}

/* add_layer_norm(a, b, weight?, bias?) -> sum, y: Add, then LayerNormalization of the sum. */
static oar_status add_layer_norm(oxe_graph *g, const oar_node *n) {
    if (!oxe_node2(g, "Add", IN(0), IN(1), OUT(0))) return fail(g);
    return layer_norm_of(g, n, OUT(0), n->in[0], n->n_in > 2 ? n->in[2] : -1, n->n_in > 3 ? n->in[3] : -1, OUT(1));
}

/* group_norm(x, weight?, bias?; groups, eps): ONNX has GroupNormalization from opset 18 only. At
 * opset 17 it is InstanceNormalization of x viewed as [N, groups, -1] (unit scale, zero bias:
 * each group normalized over its channels and positions), reshaped back to Shape(x) (so a
 * dynamic batch stays dynamic), then the per-channel weight and bias broadcast as [C, 1, ...]. */
static oar_status group_norm(oxe_graph *g, const oar_node *n) {
    const oar_meta *x = meta(g, n->in[0]);
    if (x->ndim < 2) return refuse(g, n, "expected an input [N, C, ...]");
    int64_t groups = attr_i(n, "groups"), grouped[3] = {0, groups, -1}, per_channel[OAR_MAX_DIMS];
    per_channel[0] = x->shape[1];
    for (int d = 1; d < x->ndim - 1; d++) per_channel[d] = 1;
    bool has_w = n->n_in > 1 && n->in[1] >= 0, has_b = n->n_in > 2 && n->in[2] >= 0;
    const char *xg = oxe_tmp(g), *ng = oxe_tmp(g), *shape = oxe_tmp(g), *y = has_w || has_b ? oxe_tmp(g) : OUT(0);
    const char *in[3] = {xg, filled(g, &groups, 1, 1.0, x->dtype), filled(g, &groups, 1, 0.0, x->dtype)};
    if (!in[1] || !in[2] || !oxe_node2(g, "Reshape", IN(0), oxe_const_ints(g, grouped, 3), xg)) return fail(g);
    Onnx__NodeProto *o = oxe_node(g, "InstanceNormalization", in, 3, &ng, 1);
    if (!o || !oxe_attr_float(g, o, "epsilon", attr(n, "eps")->f) || !oxe_node1(g, "Shape", IN(0), shape) ||
        !oxe_node2(g, "Reshape", ng, shape, y))
        return fail(g);
    for (int k = 1; k <= 2; k++) {
        if (!(k == 1 ? has_w : has_b)) continue;
        const char *v = oxe_tmp(g), *out = k == 1 && has_b ? oxe_tmp(g) : OUT(0);
        if (!oxe_node2(g, "Reshape", IN(k), oxe_const_ints(g, per_channel, x->ndim - 1), v) ||
            !oxe_node2(g, k == 1 ? "Mul" : "Add", y, v, out))
            return fail(g);
        y = out;
    }
    return OAR_OK;
}

/* ---- fused ops (in model files saved after the fusion passes): their decomposition */
static oar_status linear_act(oxe_graph *g, const oar_node *n) {
    int64_t k = attr_i(n, "activation");
    if (k == OAR_LINEAR_ACT_NONE) return linear(g, n, OUT(0));
    const char *y = oxe_tmp(g);
    oar_status st = linear(g, n, y);
    if (st != OAR_OK) return st;
    oar_dtype dt = meta(g, n->out[0])->dtype;
    if (k == OAR_LINEAR_ACT_RELU) return OK(oxe_node1(g, "Relu", y, OUT(0)));
    if (k == OAR_LINEAR_ACT_GELU || k == OAR_LINEAR_ACT_GELU_TANH)
        return OK(emit_gelu(g, y, OUT(0), dt, k == OAR_LINEAR_ACT_GELU_TANH));
    return refuse(g, n, "an unknown activation");
}

/* conv2d_act: Conv [+ Add] [+ Relu or Clip(0, 6) for relu6]; in the NHWC layout of the conv_nhwc pass the activations
 * are transposed to NCHW around it (ONNX's Conv is NCHW; runtimes pick their own layouts). */
static oar_status conv2d_act(oxe_graph *g, const oar_node *n) {
    bool nhwc = !strcmp(attr_s(n, "layout"), "nhwc");
    if (!nhwc && strcmp(attr_s(n, "layout"), "nchw")) return refuse(g, n, "an unknown layout");
    static const int64_t TO_NCHW[4] = {0, 3, 1, 2}, TO_NHWC[4] = {0, 2, 3, 1};
    bool relu6 = !strcmp(attr_s(n, "act"), "relu6");
    bool relu = relu6 || !strcmp(attr_s(n, "act"), "relu"), res = n->n_in > 3 && n->in[3] >= 0;
    const char *x = IN(0), *r = res ? IN(3) : NULL, *out = OUT(0);
    if (nhwc) {
        const char *xt = oxe_tmp(g), *rt = res ? oxe_tmp(g) : NULL;
        Onnx__NodeProto *o = oxe_node1(g, "Transpose", x, xt);
        if (!o || !oxe_attr_ints(g, o, "perm", TO_NCHW, 4)) return fail(g);
        if (res && (!(o = oxe_node1(g, "Transpose", r, rt)) || !oxe_attr_ints(g, o, "perm", TO_NCHW, 4))) return fail(g);
        x = xt, r = rt, out = oxe_tmp(g);
    }
    const char *y = relu || res ? oxe_tmp(g) : out;
    const char *in[3] = {x, IN(1), n->n_in > 2 && n->in[2] >= 0 ? IN(2) : NULL};
    const oar_meta *w = meta(g, n->in[1]);
    Onnx__NodeProto *c = oxe_node(g, "Conv", in, in[2] ? 3 : 2, &y, 1);
    if (!c || !oxe_attr_ints(g, c, "kernel_shape", w->shape + 2, 2) || !spatial(g, c, n, 2, true)) return fail(g);
    if (res) {
        const char *sum = relu ? oxe_tmp(g) : out;
        if (!oxe_node2(g, "Add", y, r, sum)) return fail(g);
        y = sum;
    }
    if (relu && !relu6 && !oxe_node1(g, "Relu", y, out)) return fail(g);
    if (relu6) { /* Clip(y, 0, 6) */
        oar_dtype dt = meta(g, n->in[0])->dtype;
        const char *cin[3] = {y, oxe_const_scalar(g, 0.0, dt), oxe_const_scalar(g, 6.0, dt)};
        if (!oxe_node(g, "Clip", cin, 3, &out, 1)) return fail(g);
    }
    if (!nhwc) return OAR_OK;
    Onnx__NodeProto *o = oxe_node1(g, "Transpose", out, OUT(0));
    return OK(o && oxe_attr_ints(g, o, "perm", TO_NHWC, 4));
}

/* fused_attention(q, k, v, mask?; scale, causal): softmax(q kᵀ scale, -inf where masked) v. The
 * causal mask (key j after query i) is a constant of the static sizes L and S. */
static oar_status fused_attention(oxe_graph *g, const oar_node *n) {
    const oar_meta *q = meta(g, n->in[0]), *k = meta(g, n->in[1]);
    int nd = q->ndim;
    int64_t L = q->shape[nd - 2], S = k->shape[nd - 2], perm[OAR_MAX_DIMS];
    for (int d = 0; d < nd; d++) perm[d] = d;
    perm[nd - 2] = nd - 1, perm[nd - 1] = nd - 2;
    oar_dtype dt = q->dtype;
    const char *kt = oxe_tmp(g), *s0 = oxe_tmp(g), *s = oxe_tmp(g), *p = oxe_tmp(g);
    Onnx__NodeProto *o = oxe_node1(g, "Transpose", IN(1), kt);
    if (!o || !oxe_attr_ints(g, o, "perm", perm, nd) || !oxe_node2(g, "MatMul", IN(0), kt, s0) ||
        !oxe_node2(g, "Mul", s0, oxe_const_scalar(g, attr(n, "scale")->f, dt), s))
        return fail(g);
    const char *masks[2] = {n->n_in > 3 && n->in[3] >= 0 ? IN(3) : NULL, NULL};
    if (attr_i(n, "causal")) {
        if ((double)L * (double)S > 1 << 26) return refuse(g, n, "a causal mask above 2^26 entries");
        oar_tensor *m = oar_zeros((int64_t[]){L, S}, 2, OAR_BOOL);
        bool *b = m ? oar_data(m) : NULL;
        for (int64_t i = 0; b && i < L; i++)
            for (int64_t j = i + 1; j < S; j++) b[i * S + j] = true;
        masks[1] = m ? oxe_tmp(g) : NULL;
        bool ok = masks[1] && oxe_init_tensor(g, masks[1], m);
        oar_release(m);
        if (!ok) return fail(g);
    }
    for (int i = 0; i < 2; i++) {
        if (!masks[i]) continue;
        const char *in[3] = {masks[i], oxe_const_scalar(g, -INFINITY, dt), s}, *t = oxe_tmp(g);
        if (!oxe_node(g, "Where", in, 3, &t, 1)) return fail(g);
        s = t;
    }
    o = oxe_node1(g, "Softmax", s, p);
    return OK(o && oxe_attr_int(g, o, "axis", -1) && oxe_node2(g, "MatMul", p, IN(2), OUT(0)));
}

/* fused_elementwise: its instructions one node each (registers: the inputs, then each result). */
static oar_status fused_elementwise(oxe_graph *g, const oar_node *n) {
    oar_few_instr code[OAR_FEW_MAX_CODE];
    int n_code = 0;
    if (oar_few_decode(n->attrs, n->n_in, code, &n_code) != OAR_OK) return oar_last_status();
    const char *reg[OAR_FEW_MAX_REGS];
    for (int k = 0; k < n->n_in; k++) reg[k] = IN(k);
    oar_dtype dt = meta(g, n->out[0])->dtype;
    for (int k = 0; k < n_code; k++) {
        const oar_few_info *f = oar_few_info_of(code[k].opcode);
        const char *y = k == n_code - 1 ? OUT(0) : oxe_tmp(g);
        bool ok;
        if (f->arity == 2) {
            const char *name = simple_name(f->op);
            if (!name) return refuse(g, n, "an instruction (a backward op) that inference programs do not have");
            ok = oxe_node2(g, name, reg[code[k].a], reg[code[k].b], y);
        } else {
            ok = emit_unary(g, f->op, f->approximate, reg[code[k].a], y, dt);
        }
        if (!ok) return fail(g);
        reg[n->n_in + k] = y;
    }
    return OAR_OK;
}

static oar_status batch_norm_act(oxe_graph *g, const oar_node *n) {
    bool res = n->n_in > 5 && n->in[5] >= 0;
    const char *y = oxe_tmp(g);
    oar_status st = batch_norm(g, n, y);
    if (st != OAR_OK) return st;
    if (res) {
        const char *sum = oxe_tmp(g);
        if (!oxe_node2(g, "Add", y, IN(5), sum)) return fail(g);
        y = sum;
    }
    return OK(oxe_node1(g, "Relu", y, OUT(0)));
}

/* ---- quantized ops (src/quant) in the QDQ form: quantize and dequantize are QuantizeLinear and
 * DequantizeLinear; qconv2d and qlinear are DequantizeLinear of x and of the weight (per output
 * channel: axis 0), the float Conv or Gemm, [Add residual], [Relu], [QuantizeLinear to the
 * output's scale]. Runtimes fuse that pattern into their int8 kernels (onnxruntime's QDQ
 * transformer), and every ONNX consumer can run it. oar sums exactly in int32 and scales once;
 * the float form rounds each product, so values near a rounding boundary of the requantization
 * may land one step apart. */
static bool has_in(const oar_node *n, int k) { return n->n_in > k && n->in[k] >= 0; }

/* Zero point value v (oar keeps it as i32) as the quantized dtype dt, which ONNX requires it to
 * have: a Cast (constant-folded by runtimes; the values are in dt's range, quantize checks). */
static const char *zero_point_as(oxe_graph *g, int v, oar_dtype dt) {
    if (meta(g, v)->dtype == dt) return oxe_in(g, v);
    const char *t = oxe_tmp(g);
    Onnx__NodeProto *o = oxe_node1(g, "Cast", oxe_in(g, v), t);
    return o && oxe_attr_int(g, o, "to", oxe_onnx_dtype(dt)) ? t : NULL;
}

static oar_status quantize_op(oxe_graph *g, const oar_node *n) {
    bool q = n->op == OAR_OP_quantize;
    const oar_meta *sm = meta(g, n->in[1]);
    oar_dtype dt = q ? (oar_dtype)attr(n, "dtype")->i : meta(g, n->in[0])->dtype;
    const char *in[3] = {IN(0), IN(1), has_in(n, 2) ? zero_point_as(g, n->in[2], dt) : filled(g, sm->shape, sm->ndim, 0.0, dt)};
    const char *out = OUT(0);
    Onnx__NodeProto *o = in[2] ? oxe_node(g, q ? "QuantizeLinear" : "DequantizeLinear", in, 3, &out, 1) : NULL;
    return OK(o && (sm->ndim == 0 || oxe_attr_int(g, o, "axis", attr_i(n, "axis"))));
}

/* qconv2d / qlinear (conv: qconv2d's attributes) reading x (the name of NCHW data) and the f32
 * residual res (NULL: none), with ReLU or not, writing out: the QDQ form above. */
static oar_status qop_emit(oxe_graph *g, const oar_node *n, bool conv, const char *xin, const char *resin, bool relu,
                           const char *out_name) {
    const oar_meta *x = meta(g, n->in[QL_X]), *w = meta(g, n->in[QL_W]);
    bool res = resin != NULL;
    if (!conv && meta(g, n->out[0])->dtype == OAR_I32) { /* the raw sums (an imported MatMulInteger): itself */
        static const int64_t T[2] = {1, 0};
        const char *wt = oxe_tmp(g), *mi[3] = {IN(QL_X), wt, zero_point_as(g, n->in[QL_XZP], x->dtype)}, *out = OUT(0);
        Onnx__NodeProto *t = oxe_node1(g, "Transpose", IN(QL_W), wt);
        return OK(t && oxe_attr_ints(g, t, "perm", T, 2) && mi[2] && oxe_node(g, "MatMulInteger", mi, 3, &out, 1));
    }
    bool requant = meta(g, n->out[0])->dtype != OAR_F32;
    if (requant && !(has_in(n, QL_YS) && has_in(n, QL_YZP))) return refuse(g, n, "an int8 output without its scale");
    if (attr_i(n, "activation") >= OAR_QACT_GELU_ERF)
        return refuse(g, n, "a GELU in the int8 epilogue (export the program before the fuse_quant pass)");
    const char *xf = oxe_tmp(g), *wf = oxe_tmp(g), *y = relu || res || requant ? oxe_tmp(g) : out_name;
    const char *dx[3] = {xin, IN(QL_XS), zero_point_as(g, n->in[QL_XZP], x->dtype)}, *dw[2] = {IN(QL_W), IN(QL_WS)};
    Onnx__NodeProto *o;
    if (!dx[2] || !oxe_node(g, "DequantizeLinear", dx, 3, &xf, 1) || !(o = oxe_node(g, "DequantizeLinear", dw, 2, &wf, 1)) ||
        (meta(g, n->in[QL_WS])->ndim == 1 && !oxe_attr_int(g, o, "axis", 0)))
        return fail(g);
    const char *in[3] = {xf, wf, has_in(n, QL_BIAS) ? IN(QL_BIAS) : NULL};
    if (conv) {
        o = oxe_node(g, "Conv", in, in[2] ? 3 : 2, &y, 1);
        if (!o || !oxe_attr_ints(g, o, "kernel_shape", w->shape + 2, 2) || !spatial(g, o, n, 2, true)) return fail(g);
    } else if (x->ndim == 2) {
        o = oxe_node(g, "Gemm", in, in[2] ? 3 : 2, &y, 1);
        if (!o || !oxe_attr_int(g, o, "transB", 1)) return fail(g);
    } else { /* [..., K] times wᵀ, then the bias */
        const char *wt = oxe_tmp(g), *m = in[2] ? oxe_tmp(g) : y;
        static const int64_t T[2] = {1, 0};
        if (!(o = oxe_node1(g, "Transpose", wf, wt)) || !oxe_attr_ints(g, o, "perm", T, 2) ||
            !oxe_node2(g, "MatMul", xf, wt, m) || (in[2] && !oxe_node2(g, "Add", m, in[2], y)))
            return fail(g);
    }
    if (res) {
        const char *sum = relu || requant ? oxe_tmp(g) : out_name;
        if (!oxe_node2(g, "Add", y, resin, sum)) return fail(g);
        y = sum;
    }
    if (relu) {
        const char *r = requant ? oxe_tmp(g) : out_name;
        if (!oxe_node1(g, "Relu", y, r)) return fail(g);
        y = r;
    }
    if (!requant) return OAR_OK;
    const char *qin[3] = {y, IN(QL_YS), zero_point_as(g, n->in[QL_YZP], meta(g, n->out[0])->dtype)};
    return OK(qin[2] && oxe_node(g, "QuantizeLinear", qin, 3, &out_name, 1));
}

static oar_status qop(oxe_graph *g, const oar_node *n) {
    return qop_emit(g, n, n->op == OAR_OP_qconv2d, IN(QL_X), has_in(n, QL_RES) ? IN(QL_RES) : NULL,
                    attr_i(n, "activation") == OAR_QACT_RELU, OUT(0));
}

/* qadd's definition: DequantizeLinear of both, Add, [Relu], QuantizeLinear (names; zero points
 * already of their data's dtype), which the importer reads back as qadd. */
static bool qadd_emit(oxe_graph *g, const char *const da[3], const char *const db[3], const char *ys, const char *yzp,
                      bool relu, const char *out) {
    const char *af = oxe_tmp(g), *bf = oxe_tmp(g), *sum = oxe_tmp(g), *r = relu ? oxe_tmp(g) : sum;
    const char *qy[3] = {r, ys, yzp};
    return da[2] && db[2] && yzp && oxe_node(g, "DequantizeLinear", da, 3, &af, 1) &&
           oxe_node(g, "DequantizeLinear", db, 3, &bf, 1) && oxe_node2(g, "Add", af, bf, sum) &&
           (!relu || oxe_node1(g, "Relu", sum, r)) && oxe_node(g, "QuantizeLinear", qy, 3, &out, 1);
}

/* qconv2d_nhwc: its NHWC input transposed to NCHW, qconv2d's QDQ form, the result transposed back;
 * an f32 residual transposed to NCHW for the Add; an int8 residual (fuse_qadd's) decomposed back
 * into the conv's codes (no activation) and qadd's chain on the NHWC codes. */
static oar_status qconv_nhwc(oxe_graph *g, const oar_node *n) {
    static const int64_t TO_NCHW[4] = {0, 3, 1, 2}, TO_NHWC[4] = {0, 2, 3, 1};
    bool relu = attr_i(n, "activation") == OAR_QACT_RELU, res = has_in(n, QL_RES);
    bool qres = res && meta(g, n->in[QL_RES])->dtype != OAR_F32;
    const char *xt = oxe_tmp(g), *rt = res && !qres ? oxe_tmp(g) : NULL, *yt = oxe_tmp(g);
    const char *y = qres ? oxe_tmp(g) : OUT(0);
    Onnx__NodeProto *o = oxe_node1(g, "Transpose", IN(QL_X), xt);
    if (!o || !oxe_attr_ints(g, o, "perm", TO_NCHW, 4)) return fail(g);
    if (rt && (!(o = oxe_node1(g, "Transpose", IN(QL_RES), rt)) || !oxe_attr_ints(g, o, "perm", TO_NCHW, 4)))
        return fail(g);
    oar_status st = qop_emit(g, n, true, xt, rt, relu && !qres, yt);
    if (st != OAR_OK) return st;
    o = oxe_node1(g, "Transpose", yt, y);
    if (!o || !oxe_attr_ints(g, o, "perm", TO_NHWC, 4)) return fail(g);
    if (!qres) return OAR_OK;
    oar_dtype dt = meta(g, n->out[0])->dtype;
    const char *dc[3] = {y, IN(QL_YS), zero_point_as(g, n->in[QL_YZP], dt)};
    const char *dr[3] = {IN(QL_RES), IN(QN_RS), zero_point_as(g, n->in[QN_RZP], meta(g, n->in[QL_RES])->dtype)};
    return OK(qadd_emit(g, dc, dr, IN(QN_OS), zero_point_as(g, n->in[QN_OZP], dt), relu, OUT(0)));
}

/* qadd: the QDQ chain it is defined as (DequantizeLinear of both, Add, Relu, QuantizeLinear), which
 * the importer reads back as qadd. */
static oar_status qadd_op(oxe_graph *g, const oar_node *n) {
    const char *da[3] = {IN(QA_A), IN(QA_AS), zero_point_as(g, n->in[QA_AZP], meta(g, n->in[QA_A])->dtype)};
    const char *db[3] = {IN(QA_B), IN(QA_BS), zero_point_as(g, n->in[QA_BZP], meta(g, n->in[QA_B])->dtype)};
    return OK(qadd_emit(g, da, db, IN(QA_YS), zero_point_as(g, n->in[QA_YZP], meta(g, n->out[0])->dtype),
                        attr_i(n, "activation") == OAR_QACT_RELU, OUT(0)));
}

/* qlut(x, table): Gather of the table at x's codes as int32 (i8 codes shifted by 128 to their entry). */
static oar_status qlut_op(oxe_graph *g, const oar_node *n) {
    const char *idx = oxe_tmp(g);
    Onnx__NodeProto *o = oxe_node1(g, "Cast", IN(0), idx);
    if (!o || !oxe_attr_int(g, o, "to", oxe_onnx_dtype(OAR_I32))) return fail(g);
    if (meta(g, n->in[0])->dtype == OAR_I8) {
        const char *off = filled(g, NULL, 0, 128.0, OAR_I32), *shifted = oxe_tmp(g);
        if (!off || !oxe_node2(g, "Add", idx, off, shifted)) return fail(g);
        idx = shifted;
    }
    return OK(oxe_node2(g, "Gather", IN(1), idx, OUT(0)));
}

/* ---- the table */
static const struct {
    oar_op_id op;
    oxe_fn fn;
} g_ops[] = {
    {OAR_OP_neg, simple}, {OAR_OP_abs, simple}, {OAR_OP_exp, simple}, {OAR_OP_log, simple}, {OAR_OP_sqrt, simple},
    {OAR_OP_sin, simple}, {OAR_OP_cos, simple}, {OAR_OP_tanh, simple}, {OAR_OP_sigmoid, simple}, {OAR_OP_relu, simple},
    {OAR_OP_erf, simple}, {OAR_OP_sign, simple}, {OAR_OP_floor, simple}, {OAR_OP_ceil, simple}, {OAR_OP_round, simple},
    {OAR_OP_add, simple}, {OAR_OP_sub, simple}, {OAR_OP_mul, simple}, {OAR_OP_div, simple}, {OAR_OP_pow, simple},
    {OAR_OP_maximum, simple}, {OAR_OP_minimum, simple}, {OAR_OP_eq, simple}, {OAR_OP_lt, simple}, {OAR_OP_le, simple},
    {OAR_OP_gt, simple}, {OAR_OP_ge, simple}, {OAR_OP_logical_and, simple}, {OAR_OP_logical_or, simple},
    {OAR_OP_logical_not, simple}, {OAR_OP_where, simple}, {OAR_OP_matmul, simple}, {OAR_OP_contiguous, simple},
    {OAR_OP_ne, ne}, {OAR_OP_square, unary}, {OAR_OP_rsqrt, unary}, {OAR_OP_silu, unary},
    {OAR_OP_asin, simple}, {OAR_OP_acos, simple}, {OAR_OP_atan, simple}, {OAR_OP_sinh, simple},
    {OAR_OP_asinh, simple}, {OAR_OP_atanh, simple}, {OAR_OP_log1p, unary}, {OAR_OP_expm1, unary},
    {OAR_OP_exp2, unary}, {OAR_OP_erfc, unary}, {OAR_OP_cosh, simple}, {OAR_OP_acosh, simple},
    {OAR_OP_bitwise_and, bitwise}, {OAR_OP_bitwise_or, bitwise}, {OAR_OP_bitwise_xor, bitwise},
    {OAR_OP_bitwise_not, bitwise}, {OAR_OP_bitwise_left_shift, shift}, {OAR_OP_bitwise_right_shift, shift},
#ifdef OAR_HAVE_OPENBLAS
    {OAR_OP_linalg_det, simple},
#endif
    {OAR_OP_leaky_relu, leaky_relu}, {OAR_OP_elu, elu}, {OAR_OP_gelu, unary}, {OAR_OP_clip, clip}, {OAR_OP_cast, cast},
    {OAR_OP_dropout, identity}, {OAR_OP_sum, reduce}, {OAR_OP_mean, reduce}, {OAR_OP_amax, reduce},
    {OAR_OP_amin, reduce}, {OAR_OP_prod, reduce}, {OAR_OP_argmax, arg_extreme}, {OAR_OP_argmin, arg_extreme},
    {OAR_OP_softmax, softmax}, {OAR_OP_log_softmax, softmax}, {OAR_OP_cumsum, cumsum}, {OAR_OP_reshape, reshape},
    {OAR_OP_permute, permute}, {OAR_OP_slice, slice}, {OAR_OP_flip, flip}, {OAR_OP_expand, expand},
    {OAR_OP_squeeze, squeeze}, {OAR_OP_unsqueeze, squeeze}, {OAR_OP_concat, concat}, {OAR_OP_stack, concat},
    {OAR_OP_split, split}, {OAR_OP_chunk, split}, {OAR_OP_embedding, gather}, {OAR_OP_index_select, gather},
    {OAR_OP_gather, gather}, {OAR_OP_masked_fill, masked_fill}, {OAR_OP_tril, trilu}, {OAR_OP_triu, trilu},
    {OAR_OP_pad, pad}, {OAR_OP_topk, topk}, {OAR_OP_einsum, einsum}, {OAR_OP_linear, linear_op},
    {OAR_OP_conv1d, conv_op}, {OAR_OP_conv2d, conv_op}, {OAR_OP_conv_transpose2d, conv_transpose},
    {OAR_OP_max_pool2d, pool}, {OAR_OP_avg_pool2d, pool},
    {OAR_OP_conv3d, conv_op}, {OAR_OP_conv_transpose3d, conv_transpose}, {OAR_OP_max_pool3d, pool}, {OAR_OP_avg_pool3d, pool}, {OAR_OP_adaptive_avg_pool2d, adaptive_pool},
    {OAR_OP_batch_norm, batch_norm_op}, {OAR_OP_layer_norm, layer_norm}, {OAR_OP_group_norm, group_norm}, {OAR_OP_linear_act, linear_act},
    {OAR_OP_conv2d_act, conv2d_act}, {OAR_OP_batch_norm_act, batch_norm_act},
    {OAR_OP_fused_elementwise, fused_elementwise}, {OAR_OP_fused_attention, fused_attention},
    {OAR_OP_add_layer_norm, add_layer_norm}, {OAR_OP_quantize, quantize_op}, {OAR_OP_dequantize, quantize_op},
    {OAR_OP_qlinear, qop}, {OAR_OP_qconv2d, qop}, {OAR_OP_qconv2d_nhwc, qconv_nhwc}, {OAR_OP_qlut, qlut_op}, {OAR_OP_qadd, qadd_op}, {OAR_OP_qmax_pool2d, pool}, {OAR_OP_max_pool2d_nhwc, max_pool_nhwc},
    {OAR_OP_avg_pool2d_nhwc, max_pool_nhwc},
};
#define N_OPS (sizeof g_ops / sizeof *g_ops)

void oxe_list_ops(char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_OPS && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", oar_op_table[g_ops[i].op]->name);
}

/* ops with no ONNX counterpart to write them as, and why (the generic message lists the others) */
static const struct {
    oar_op_id op;
    const char *why;
} g_refused[] = {
    {OAR_OP_ctc_loss, "ONNX (opset 17) has no CTC loss operator; export the model without its loss"},
};

oar_status oxe_translate(oxe_graph *g, int node) {
    const oar_node *n = &g->p->nodes[node];
    for (size_t i = 0; i < N_OPS; i++)
        if (g_ops[i].op == n->op) return g_ops[i].fn(g, n);
    for (size_t i = 0; i < sizeof g_refused / sizeof *g_refused; i++)
        if (g_refused[i].op == n->op) return refuse(g, n, g_refused[i].why);
    char ops[2048];
    oxe_list_ops(ops, sizeof ops);
    return oar_error(OAR_ERR_UNSUPPORTED, "onnx_save: node %d (%s) has no ONNX mapping; the export supports %s", node,
                     oar_op_table[n->op]->name, ops);
}
