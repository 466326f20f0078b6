/* fuse_qadd (inference, after quant_nhwc): an int8 residual addition goes into the epilogue of
 * the convolution that makes one of its operands,
 *
 *   qadd(qconv2d_nhwc(...; activation none, dtype D), r; act, D)  (either order)
 *     -> qconv2d_nhwc(..., residual = r, r's scale and zero point, qadd's y_scale and y_zp; act, D)
 *
 * when the conv's codes are read by that qadd alone, it has no residual of its own, and the qadd
 * dequantizes them with the conv's own y_scale and y_zp (the same values, or equal constants).
 * The fused epilogue rounds the conv's value to those codes and then does qadd's float operations
 * (src/ops/quant_conv_nhwc.c), so the result has the two ops' bits, without writing the codes and
 * reading them back. ResNet's int8 block tails (static PTQ with int8_residual) become their second
 * convolution's epilogue. */
#include "graph/passes/passes.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <stdlib.h>
#include <string.h>

static int pos_in_main(const oar_program *p, int id) {
    const oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

/* Values a and b hold the same one number: one value, or two CPU constants of one dtype and value. */
static bool same_scalar(const oar_program *p, int a, int b) {
    if (a == b) return true;
    if (a < 0 || b < 0) return false;
    const oar_value *va = &p->values[a], *vb = &p->values[b];
    if (va->kind != OAR_VAL_CONST || vb->kind != OAR_VAL_CONST || !va->tensor || !vb->tensor) return false;
    const oar_tensor *x = va->tensor, *y = vb->tensor;
    if (x->numel != 1 || y->numel != 1 || x->dtype != y->dtype || x->device != OAR_CPU || y->device != OAR_CPU)
        return false;
    const oar_dtype_traits *t = &oar_dtypes[x->dtype];
    return t->is_float ? t->load(oar_tensor_ptr(x)) == t->load(oar_tensor_ptr(y))
                       : t->load_i64(oar_tensor_ptr(x)) == t->load_i64(oar_tensor_ptr(y));
}

/* The conv making qadd node q's operand k (QA_A or QA_B) when the rule applies, else -1. */
static int fusable_conv(const oar_program *p, const oar_node *q, int k, const int *uses) {
    int v = q->in[k];
    const oar_value *val = &p->values[v];
    if (val->kind != OAR_VAL_NODE || uses[v] != 1) return -1;
    int c = val->node;
    const oar_node *n = &p->nodes[c];
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->op != OAR_OP_qconv2d_nhwc || n->out[0] != v) return -1;
    if (n->attrs[4].i != OAR_QACT_NONE || n->attrs[5].i != q->attrs[1].i || n->in[QL_RES] >= 0) return -1;
    int s = k == QA_A ? QA_AS : QA_BS, z = k == QA_A ? QA_AZP : QA_BZP;
    return same_scalar(p, n->in[QL_YS], q->in[s]) && same_scalar(p, n->in[QL_YZP], q->in[z]) ? c : -1;
}

static oar_status fuse_one(oar_program *p, int qid, const int *uses) {
    const oar_node *q = &p->nodes[qid];
    if (q->dead || q->block != OAR_MAIN_BLOCK || q->op != OAR_OP_qadd) return OAR_OK;
    int k = QA_A, c = fusable_conv(p, q, QA_A, uses);
    if (c < 0) k = QA_B, c = fusable_conv(p, q, QA_B, uses);
    int pos = pos_in_main(p, qid);
    if (c < 0 || pos < 0) return OAR_OK;
    int r = k == QA_A ? QA_B : QA_A, in[QN_N];
    memcpy(in, p->nodes[c].in, sizeof(int) * QL_N);
    in[QL_RES] = q->in[r];
    in[QN_RS] = q->in[r == QA_A ? QA_AS : QA_BS], in[QN_RZP] = q->in[r == QA_A ? QA_AZP : QA_BZP];
    in[QN_OS] = q->in[QA_YS], in[QN_OZP] = q->in[QA_YZP];
    oar_attr attrs[6];
    memcpy(attrs, p->nodes[c].attrs, sizeof attrs);
    attrs[4] = q->attrs[0], attrs[5] = q->attrs[1];
    int y = q->out[0], yf;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_qconv2d_nhwc, in, QN_N, attrs, &yf) < 0)
        return oar_last_status();
    p->values[yf].dyn_dims = p->values[y].dyn_dims;
    oar_program_replace_uses(p, y, yf);
    p->nodes[qid].dead = true;
    p->nodes[c].dead = true;
    return OAR_OK;
}

oar_status oar_pass_fuse_qadd(oar_program *p) {
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    if (!uses) return oar_error(OAR_ERR_OOM, "fuse_qadd: out of memory");
    oar_program_use_counts(p, uses);
    oar_status st = OAR_OK;
    int n_nodes = p->n_nodes; /* not the nodes this pass adds */
    for (int i = 0; i < n_nodes && st == OAR_OK; i++) st = fuse_one(p, i, uses);
    free(uses);
    return st;
}
