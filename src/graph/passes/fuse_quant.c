/* fuse_quant (inference only): int8 layers that follow each other keep their activations in
 * int8. A layer quantized at module level (src/quant/static.c) is quantize -> qconv2d/qlinear
 * giving f32, so between two such layers the program dequantizes (in the epilogue), runs ReLU
 * and pooling in f32, and quantizes again. This pass rewrites, until nothing changes:
 *
 *   relu(qop(...; f32))                  -> qop(...; act=relu)              ReLU in the epilogue
 *   gelu(qlinear(...; f32))              -> qlinear(...; act=gelu)          a dynamic layer's MLP
 *   add(qop(...; f32), r)  (either order) -> qop(..., residual=r)          ResNet's shortcut
 *   quantize(qop(...; f32), s, z)        -> qop(..., y_scale=s, y_zp=z; u8/i8)   requantized
 *   quantize(max_pool2d(u), s, z)        -> qmax_pool2d(quantize(u, s, z))
 *   quantize(reshape(u), s, z)           -> reshape(quantize(u, s, z))
 *
 * (qop: qconv2d or qlinear; s, z per tensor; r f32 of the output's shape). Each is exact, bit for bit: the epilogue applies
 * ReLU or GELU (f32 outputs only; the gelu op's own formulas, scalar and AVX2) and quantizes with the same float
 * arithmetic as the relu, gelu and quantize ops
 * (src/ops/quant.h), and quantization is monotone, so it commutes with max pooling and with any
 * reshape. A quantize moves above a pooling or reshape only when what it reads comes from
 * another of these ops, so it ends fused into an epilogue rather than on a larger tensor. Every
 * intermediate must have exactly one use. LeNet static int8 becomes one quantize of the image,
 * then int8 all the way to the last layer's f32 logits. */
#include "graph/passes/passes.h"
#include "ops/quant.h"

#include <stdlib.h>
#include <string.h>

typedef struct qfuser {
    oar_program *p;
    int *uses;
} qfuser;

static int pos_in_main(const oar_program *p, int id) {
    const oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

/* The live main-block node computing v, or -1 (inputs, parameters, constants). */
static int producer(const oar_program *p, int v) {
    if (v < 0 || p->values[v].kind != OAR_VAL_NODE) return -1;
    const oar_node *n = &p->nodes[p->values[v].node];
    return !n->dead && n->block == OAR_MAIN_BLOCK ? p->values[v].node : -1;
}

static bool is_qop(oar_op_id op) { return op == OAR_OP_qconv2d || op == OAR_OP_qlinear; }
static int act_attr(oar_op_id op) { return op == OAR_OP_qconv2d ? 4 : 0; }

/* The int8 op computing v in f32 (its only use being the caller), or -1. */
static int f32_qop(const qfuser *f, int v) {
    int pn = producer(f->p, v);
    if (pn < 0 || f->uses[v] != 1) return -1;
    const oar_node *n = &f->p->nodes[pn];
    return is_qop(n->op) && f->p->values[v].meta.dtype == OAR_F32 ? pn : -1;
}

/* v is defined before position pos of the main block (or outside any node). */
static bool defined_before(const oar_program *p, int v, int pos) {
    int pn = producer(p, v);
    return pn < 0 || pos_in_main(p, pn) < pos;
}

static void retire(oar_program *p, int node, int replacement) {
    oar_program_replace_uses(p, p->nodes[node].out[0], replacement);
    p->nodes[node].dead = true;
}

/* relu(qop(...; f32)) -> qop(...; act=relu) */
static bool fuse_relu(qfuser *f, int id) {
    oar_program *p = f->p;
    int v = p->nodes[id].in[0], pn = f32_qop(f, v);
    if (pn < 0) return false;
    oar_attr *act = &p->nodes[pn].attrs[act_attr(p->nodes[pn].op)];
    if (act->i != OAR_QACT_NONE) return false;
    act->i = OAR_QACT_RELU;
    retire(p, id, v);
    return true;
}

/* gelu(qlinear(...; f32)) -> qlinear(...; act=gelu, erf or tanh as the gelu's approximate) */
static bool fuse_gelu(qfuser *f, int id) {
    oar_program *p = f->p;
    int v = p->nodes[id].in[0], pn = f32_qop(f, v);
    if (pn < 0 || p->nodes[pn].op != OAR_OP_qlinear || p->nodes[pn].in[QL_YS] >= 0) return false;
    oar_attr *act = &p->nodes[pn].attrs[act_attr(OAR_OP_qlinear)];
    if (act->i != OAR_QACT_NONE) return false;
    act->i = p->nodes[id].attrs[0].i ? OAR_QACT_GELU_TANH : OAR_QACT_GELU_ERF;
    retire(p, id, v);
    return true;
}

/* add(qop(...; f32), r) -> qop(..., residual=r): the epilogue adds r in f32 before any ReLU, as
 * add would (f32 addition commutes exactly). */
static oar_status fuse_residual(qfuser *f, int id, bool *changed) {
    oar_program *p = f->p;
    const oar_node *a = &p->nodes[id];
    const oar_value *y = &p->values[a->out[0]];
    for (int k = 0; k < 2; k++) {
        int pn = f32_qop(f, a->in[k]), r = a->in[1 - k];
        if (pn < 0) continue;
        const oar_node *op = &p->nodes[pn];
        const oar_value *rv = &p->values[r];
        if (op->in[QL_RES] >= 0 || op->in[QL_YS] >= 0 || op->attrs[act_attr(op->op)].i != OAR_QACT_NONE) continue;
        if (rv->meta.dtype != OAR_F32 || rv->meta.ndim != y->meta.ndim || rv->dyn_dims != y->dyn_dims ||
            memcmp(rv->meta.shape, y->meta.shape, sizeof(int64_t) * (size_t)y->meta.ndim) ||
            p->values[a->in[k]].meta.ndim != y->meta.ndim ||
            memcmp(p->values[a->in[k]].meta.shape, y->meta.shape, sizeof(int64_t) * (size_t)y->meta.ndim))
            continue;
        int in[QL_N], n_attrs = oar_op_table[op->op]->n_attrs, out;
        memcpy(in, op->in, sizeof in);
        in[QL_RES] = r;
        oar_attr attrs[8];
        memcpy(attrs, op->attrs, sizeof(oar_attr) * (size_t)n_attrs);
        uint32_t dyn = y->dyn_dims;
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos_in_main(p, id), op->op, in, QL_N, attrs, &out) < 0)
            return oar_last_status();
        p->values[out].dyn_dims = dyn;
        retire(p, id, out);
        p->nodes[pn].dead = true;
        *changed = true;
        return OAR_OK;
    }
    return OAR_OK;
}

/* quantize(qop(...; f32), s, z) -> qop(..., s, z; dtype) */
static oar_status fuse_requantize(qfuser *f, int id, bool *changed) {
    oar_program *p = f->p;
    const oar_node *q = &p->nodes[id];
    int pn = f32_qop(f, q->in[0]);
    if (pn < 0 || p->nodes[pn].in[QL_YS] >= 0 || p->nodes[pn].attrs[act_attr(p->nodes[pn].op)].i >= OAR_QACT_GELU_ERF)
        return OAR_OK; /* a GELU's output stays f32 */
    const oar_node *op = &p->nodes[pn];
    int in[QL_N], n_attrs = oar_op_table[op->op]->n_attrs, out;
    memcpy(in, op->in, sizeof in);
    in[QL_YS] = q->in[1], in[QL_YZP] = q->in[2];
    oar_attr attrs[8];
    memcpy(attrs, op->attrs, sizeof(oar_attr) * (size_t)n_attrs);
    attrs[n_attrs - 1] = oar_attr_dtype((oar_dtype)q->attrs[1].i); /* "dtype" is the last attribute */
    uint32_t dyn = p->values[q->out[0]].dyn_dims;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos_in_main(p, id), op->op, in, QL_N, attrs, &out) < 0)
        return oar_last_status();
    p->values[out].dyn_dims = dyn;
    retire(p, id, out);
    p->nodes[pn].dead = true;
    *changed = true;
    return OAR_OK;
}

/* quantize(M(u), s, z) -> M'(quantize(u, s, z)) for M max_pool2d (M' qmax_pool2d) or reshape */
static oar_status hoist_quantize(qfuser *f, int id, bool *changed) {
    oar_program *p = f->p;
    const oar_node *q = &p->nodes[id];
    int v = q->in[0], mn = producer(p, v);
    if (mn < 0 || f->uses[v] != 1 || p->values[q->in[1]].meta.ndim != 0) return OAR_OK;
    oar_op_id mop = p->nodes[mn].op;
    if (mop != OAR_OP_max_pool2d && mop != OAR_OP_reshape) return OAR_OK;
    int u = p->nodes[mn].in[0], un = producer(p, u), mpos = pos_in_main(p, mn);
    if (un < 0 || f->uses[u] != 1 || p->values[u].meta.dtype != OAR_F32) return OAR_OK;
    oar_op_id uop = p->nodes[un].op;
    if (!is_qop(uop) && uop != OAR_OP_max_pool2d && uop != OAR_OP_reshape) return OAR_OK;
    if (!defined_before(p, q->in[1], mpos) || !defined_before(p, q->in[2], mpos)) return OAR_OK;
    int qin[3] = {u, q->in[1], q->in[2]}, qout, mout;
    oar_attr qattrs[2] = {q->attrs[0], q->attrs[1]}, mattrs[8];
    int n_mattrs = oar_op_table[mop]->n_attrs;
    memcpy(mattrs, p->nodes[mn].attrs, sizeof(oar_attr) * (size_t)n_mattrs);
    uint32_t udyn = p->values[u].dyn_dims, ydyn = p->values[q->out[0]].dyn_dims;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, mpos, OAR_OP_quantize, qin, 3, qattrs, &qout) < 0)
        return oar_last_status();
    p->values[qout].dyn_dims = udyn;
    oar_op_id m2 = mop == OAR_OP_max_pool2d ? OAR_OP_qmax_pool2d : OAR_OP_reshape;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos_in_main(p, id), m2, &qout, 1, mattrs, &mout) < 0)
        return oar_last_status();
    p->values[mout].dyn_dims = ydyn;
    retire(p, id, mout);
    p->nodes[mn].dead = true;
    *changed = true;
    return OAR_OK;
}

oar_status oar_pass_fuse_quant(oar_program *p) {
    qfuser f = {p, NULL};
    oar_status st = OAR_OK;
    for (bool changed = true; changed && st == OAR_OK;) {
        changed = false;
        free(f.uses);
        if (!(f.uses = malloc(sizeof(int) * (size_t)(p->n_values + 1)))) {
            st = oar_error(OAR_ERR_OOM, "fuse_quant: out of memory");
            break;
        }
        oar_program_use_counts(p, f.uses);
        for (int id = 0; id < p->n_nodes && !changed && st == OAR_OK; id++) {
            const oar_node *n = &p->nodes[id];
            if (n->dead || n->block != OAR_MAIN_BLOCK) continue;
            if (n->op == OAR_OP_relu) changed = fuse_relu(&f, id);
            else if (n->op == OAR_OP_gelu && p->values[n->in[0]].meta.dtype == OAR_F32) changed = fuse_gelu(&f, id);
            else if (n->op == OAR_OP_add) st = fuse_residual(&f, id, &changed);
            else if (n->op == OAR_OP_quantize && p->values[n->in[1]].meta.ndim == 0) {
                if ((st = fuse_requantize(&f, id, &changed)) == OAR_OK && !changed)
                    st = hoist_quantize(&f, id, &changed);
            }
        }
    }
    free(f.uses);
    return st;
}
