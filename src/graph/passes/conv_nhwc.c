/* conv_nhwc (inference only): convolutions run on NHWC activations, oneDNN's own layout, so
 * a chain of convs needs no conversion between them. oar's convs are NCHW, and oneDNN
 * converted every input to NHWC and every output back: a quarter of ResNet-20's time at
 * batch 32. Each main-block conv2d and conv2d_act (layout nchw, f32, 4-d) becomes
 *     conv2d_act(x', w, b, r'; ..., layout=nhwc) -> y'      y = permute(y', [0, 3, 1, 2])
 * where x' (and the residual r') is the NHWC twin of x: the y' of the conv that made x when
 * there is one, else contiguous(permute(x, [0, 2, 3, 1])) (one conversion, at the network's
 * input). y, a view with y's shape and values, replaces y for every other reader; views nobody
 * reads are removed. A max or average pooling of such a view runs on the NHWC data
 * (max_pool2d_nhwc, avg_pool2d_nhwc) and its result is a twin as well. A global average pool
 * (adaptive_avg_pool2d to 1 x 1) of such a view becomes mean(y', dims 1, 2) reshaped to
 * [N, C, 1, 1]: the fast reduction on the NHWC data instead of a copy back to NCHW and the
 * pool (measured 5% of ResNet-20 at 2 threads when the pool ran its reference kernel).
 * Results are the same values in another memory order: exact up to accumulation order.
 * Only when oneDNN runs conv2d_act: other kernels have no NHWC convolution; and not for the
 * convs the direct kernels take (conv_direct.c), which stay NCHW.
 *
 * quant_nhwc is the same layouter on int8 programs (after fuse_quant): each qconv2d that
 * oneDNN's int8 kernel runs (qconv_dnnl.c: 16+ channels a group) becomes qconv2d_nhwc, whose
 * u8/i8 or f32 output is a twin; its input and f32 residual are twins too, so oneDNN's NHWC sums
 * feed the next convolution with no transpose either way. quantize and dequantize of a twin run
 * on the twin (per tensor elementwise, per channel on its dim 3), and so do qlut and qadd (an int8
 * residual block's sum), qmax_pool2d of a twin is max_pool2d_nhwc on its codes,
 * and the f32 rules above apply to the f32 twins, except the global pool's mean (summed in another
 * order): every result keeps the NCHW program's bits. A reader with no NHWC form (a direct-kernel
 * conv, the global pool) reads a contiguous copy of the NCHW view. Without VNNI, where oneDNN's
 * int8 code saturates 8-bit weights, qconv2d_nhwc runs them as an NHWC im2col and the exact GEMM
 * (2.4x faster than the NCHW program's im2col and scattered epilogue on ResNet-20). */
#include "graph/passes/passes.h"
#include "kernels/cpu/conv_direct.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <stdlib.h>
#include <string.h>

static const int64_t TO_NHWC[4] = {0, 2, 3, 1}, TO_NCHW[4] = {0, 3, 1, 2};

/* twin value of a view (permute, slice...) of an NCHW view of a twin: no twin of its own, and
 * its data is in an order a reshape may not be able to view */
enum { NO_TWIN = -1, TWIN_VIEW = -2 };

typedef struct layouter {
    oar_program *p;
    int *twin; /* per value: its NHWC twin, NO_TWIN or TWIN_VIEW */
    int cap;
    bool q;    /* quant_nhwc: the int8 convolutions are converted, not the f32 ones */
} layouter;

static bool has_kernel(oar_op_id op, const char *impl) {
    const oar_kernel_entry *k;
    int n = oar_op_kernels(op, &k);
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].impl, impl)) return true;
    return false;
}

static uint32_t permute_dyn(uint32_t dyn, const int64_t *perm) {
    uint32_t out = 0;
    for (int d = 0; d < 4; d++) out |= ((dyn >> perm[d]) & 1u) << d;
    return out;
}

static bool set_twin(layouter *l, int v, int t) {
    if (v >= l->cap) {
        int cap = l->p->n_values + 64;
        int *tw = realloc(l->twin, sizeof(int) * (size_t)cap);
        if (!tw) return false;
        for (int i = l->cap; i < cap; i++) tw[i] = NO_TWIN;
        l->twin = tw, l->cap = cap;
    }
    l->twin[v] = t;
    return true;
}

static int twin_of(const layouter *l, int v) { return v >= 0 && v < l->cap ? l->twin[v] : NO_TWIN; }

static int pos_in_block(const oar_block *b, int id) {
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

/* Appends permute(v, perm) (and a contiguous copy) at *pos; the new value or -1. */
static int emit_permute(oar_program *p, int v, const int64_t *perm, bool copy, int *pos) {
    oar_attr a = oar_attr_ints(perm, 4);
    int out, in[1] = {v};
    uint32_t dyn = permute_dyn(p->values[v].dyn_dims, perm);
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, (*pos)++, OAR_OP_permute, in, 1, &a, &out) < 0) return -1;
    p->values[out].dyn_dims = dyn;
    if (!copy) return out;
    in[0] = out;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, (*pos)++, OAR_OP_contiguous, in, 1, NULL, &out) < 0) return -1;
    p->values[out].dyn_dims = dyn;
    return out;
}

static bool convertible(const oar_program *p, const oar_node *n) {
    if (n->dead || n->block != OAR_MAIN_BLOCK) return false;
    if (n->op == OAR_OP_conv2d_act) { if (strcmp(n->attrs[5].s, "nchw") != 0) return false; }
    else if (n->op != OAR_OP_conv2d) return false;
    const oar_value *x = &p->values[n->in[0]], *w = &p->values[n->in[1]];
    if (x->meta.dtype != OAR_F32 || x->meta.ndim != 4 || w->meta.ndim != 4) return false;
    /* convs the direct NCHW kernels take run faster there than in oneDNN (docs/kernels-conv.md) */
    return !oar_conv_direct_takes(OAR_CONV_DIRECT_FORWARD, x->meta.shape[1], w->meta.shape[0], w->meta.shape[2],
                                  w->meta.shape[3], n->attrs[0].ints, n->attrs[1].ints, n->attrs[2].ints,
                                  n->attrs[3].i);
}

/* A qconv2d that oneDNN's int8 kernel runs (qconv_dnnl.c's rule), with 4-d u8/i8 data. */
static bool q_convertible(const oar_program *p, const oar_node *n) {
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->op != OAR_OP_qconv2d) return false;
    const oar_value *x = &p->values[n->in[QL_X]], *w = &p->values[n->in[QL_W]];
    if ((x->meta.dtype != OAR_U8 && x->meta.dtype != OAR_I8) || x->meta.ndim != 4 || w->meta.ndim != 4) return false;
    int64_t g = n->attrs[3].i, cg = x->meta.shape[1] / (g > 0 ? g : 1), og = w->meta.shape[0] / (g > 0 ? g : 1);
    /* (8-bit weights without VNNI: qconv2d_nhwc's exact GEMM, whose rows are the NHWC output) */
    return !oar_qconv_direct_takes(oar_cpu_use_vnni(), cg, og, n->attrs[0].ints[0] * n->attrs[0].ints[1]);
}

static bool is_root(const layouter *l, const oar_node *n) {
    return l->q ? q_convertible(l->p, n) : convertible(l->p, n);
}

/* The NHWC operand for NCHW value v: its twin, or a conversion emitted at *pos. */
static int nhwc_operand(layouter *l, int v, int *pos) {
    if (v < 0) return -1;
    int t = twin_of(l, v);
    if (t >= 0) return t;
    t = emit_permute(l->p, v, TO_NHWC, true, pos); /* and kept as v's twin: other convs of v reuse it */
    return t >= 0 && set_twin(l, v, t) ? t : -1;
}

/* Node id's output y is now computed in NHWC as yt (inserted before pos): y's readers get an
 * NCHW view of yt, which is yt's twin, and node id goes. */
static oar_status replace_by_twin(layouter *l, int id, int y, int yt, int pos) {
    oar_program *p = l->p;
    int view = emit_permute(p, yt, TO_NCHW, false, &pos);
    if (view < 0) return oar_last_status();
    p->values[view].dyn_dims = p->values[y].dyn_dims;
    oar_program_replace_uses(p, y, view);
    p->nodes[id].dead = true;
    return set_twin(l, view, yt) ? OAR_OK : oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
}

/* qconv2d -> qconv2d_nhwc on the twins of its input and residual */
static oar_status convert_q(layouter *l, int id, int pos) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    int in[QN_N], y = n->out[0], yt;
    memcpy(in, n->in, sizeof(int) * QL_N);
    for (int k = QL_N; k < QN_N; k++) in[k] = -1; /* no int8 residual (the fuse_qadd pass's) */
    oar_attr attrs[6];
    memcpy(attrs, n->attrs, sizeof attrs);
    if ((in[QL_X] = nhwc_operand(l, in[QL_X], &pos)) < 0) return oar_last_status();
    if (in[QL_RES] >= 0 && (in[QL_RES] = nhwc_operand(l, in[QL_RES], &pos)) < 0) return oar_last_status();
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_qconv2d_nhwc, in, QN_N, attrs, &yt) < 0)
        return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

/* quantize or dequantize of a twin: per tensor (0-d scale and zero point) it is elementwise, so it
 * runs on the twin and its result is one; per channel (1-d, on NCHW's dim 1) it runs on the twin's
 * channel dim, 3. qlut of a twin (elementwise, a table of 256) likewise. Each value is computed as
 * in the NCHW program, so the bits are its. */
static oar_status requant_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    bool lut = n->op == OAR_OP_qlut;
    if (n->dead || n->block != OAR_MAIN_BLOCK || (n->op != OAR_OP_quantize && n->op != OAR_OP_dequantize && !lut))
        return OAR_OK;
    int t = twin_of(l, n->in[0]), y = n->out[0], pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (t < 0 || pos < 0 || p->values[y].meta.ndim != 4) return OAR_OK;
    oar_attr attrs[2];
    memcpy(attrs, n->attrs, sizeof(oar_attr) * (lut ? 0 : n->op == OAR_OP_quantize ? 2 : 1));
    if (!lut) {
        int sd = p->values[n->in[1]].meta.ndim, zd = p->values[n->in[2]].meta.ndim;
        int64_t axis = n->attrs[0].i < 0 ? n->attrs[0].i + 4 : n->attrs[0].i;
        if (sd != zd || sd > 1 || (sd == 1 && axis != 1)) return OAR_OK;
        if (sd == 1) attrs[0] = oar_attr_int(3);
    }
    int in[3] = {t, n->in[1], n->in[2]}, yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, n->op, in, lut ? 2 : 3, attrs, &yt) < 0) return oar_last_status();
    p->values[yt].dyn_dims = p->values[t].dyn_dims;
    return replace_by_twin(l, id, y, yt, pos);
}

/* qadd of NCHW views (one at least of a twin: an int8 residual block's conv output and its input):
 * qadd of the twins, elementwise, so the same bits; its result is a twin. */
static oar_status qadd_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->op != OAR_OP_qadd) return OAR_OK;
    int y = n->out[0], pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id), in[QA_N];
    if (pos < 0 || p->values[y].meta.ndim != 4 || (twin_of(l, n->in[QA_A]) < 0 && twin_of(l, n->in[QA_B]) < 0))
        return OAR_OK;
    memcpy(in, n->in, sizeof in);
    oar_attr attrs[2] = {n->attrs[0], n->attrs[1]};
    if ((in[QA_A] = nhwc_operand(l, in[QA_A], &pos)) < 0 || (in[QA_B] = nhwc_operand(l, in[QA_B], &pos)) < 0)
        return oar_last_status();
    int yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_qadd, in, QA_N, attrs, &yt) < 0) return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

static oar_status convert(layouter *l, int id) {
    oar_program *p = l->p;
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (pos < 0) return OAR_OK;
    if (l->q) return convert_q(l, id, pos);
    const oar_node *n = &p->nodes[id];
    bool act = n->op == OAR_OP_conv2d_act;
    int x = n->in[0], w = n->in[1], b = n->in[2], r = act ? n->in[3] : -1, y = n->out[0];
    oar_attr attrs[6];
    memcpy(attrs, n->attrs, sizeof(oar_attr) * 4);
    attrs[4] = act ? n->attrs[4] : oar_attr_str("none");
    attrs[5] = oar_attr_str("nhwc");
    int xt = nhwc_operand(l, x, &pos), rt = r >= 0 ? nhwc_operand(l, r, &pos) : -1;
    if (xt < 0 || (r >= 0 && rt < 0)) return oar_last_status();
    int in[4] = {xt, w, b, rt}, yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_conv2d_act, in, 4, attrs, &yt) < 0) return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

/* adaptive_avg_pool2d(view) to 1 x 1, view an NCHW view of NHWC twin t: mean over H, W of t. */
static oar_status pool_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    /* (not in int8 programs, which keep the NCHW program's bits: the mean sums in another order) */
    if (l->q || n->dead || n->op != OAR_OP_adaptive_avg_pool2d || n->block != OAR_MAIN_BLOCK) return OAR_OK;
    if (n->attrs[0].n != 2 || n->attrs[0].ints[0] != 1 || n->attrs[0].ints[1] != 1) return OAR_OK;
    int t = twin_of(l, n->in[0]), y = n->out[0];
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (t < 0 || pos < 0) return OAR_OK;
    int64_t dims[2] = {1, 2}, shape[4] = {-1, p->values[t].meta.shape[3], 1, 1}; /* -1: any batch */
    oar_attr ma[2] = {oar_attr_ints(dims, 2), oar_attr_int(1)}, ra = oar_attr_ints(shape, 4);
    int in[1] = {t}, m, r;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_mean, in, 1, ma, &m) < 0) return oar_last_status();
    p->values[m].dyn_dims = p->values[t].dyn_dims & 1u;
    in[0] = m;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_reshape, in, 1, &ra, &r) < 0) return oar_last_status();
    p->values[r].dyn_dims = p->values[y].dyn_dims;
    oar_program_replace_uses(p, y, r);
    p->nodes[id].dead = true;
    return OAR_OK;
}

/* max_pool2d(view), view an NCHW view of NHWC twin t: max_pool2d_nhwc(t), whose result is
 * a twin too, so neither the pooling nor the next conv converts layouts (squeezenet's and
 * resnet18's max pooling between convs read the view through a strided copy). */
static oar_status max_pool_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    bool codes = n->op == OAR_OP_qmax_pool2d; /* = max_pool2d_nhwc of the u8/i8 twin */
    if (n->dead || (n->op != OAR_OP_max_pool2d && !codes) || n->block != OAR_MAIN_BLOCK) return OAR_OK;
    int t = twin_of(l, n->in[0]), y = n->out[0];
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (t < 0 || pos < 0 || p->values[y].meta.ndim != 4 || (p->values[t].meta.dtype != OAR_F32 && !codes)) return OAR_OK;
    int in[1] = {t}, yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_max_pool2d_nhwc, in, 1, n->attrs, &yt) < 0)
        return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

/* Every live reader of v is a convolution this pass converts (it will read v's twin). */
static bool read_by_convs_only(const layouter *l, int v) {
    const oar_program *p = l->p;
    int readers = 0;
    for (int i = 0; i < p->n_nodes; i++) {
        const oar_node *n = &p->nodes[i];
        if (n->dead) continue;
        for (int k = 0; k < n->n_in; k++) {
            if (n->in[k] != v) continue;
            if (k != 0 || !is_root(l, n)) return false;
            readers++;
        }
    }
    for (int b = 0; b < p->n_blocks; b++)
        for (int i = 0; i < p->blocks[b].n_out; i++)
            if (p->blocks[b].out[i] == v) return false;
    return readers > 0;
}

/* avg_pool2d(view), view an NCHW view of NHWC twin t, read only by convs: avg_pool2d_nhwc(t),
 * a twin too (the same windows, divisors and double sums: the same bits), so an average
 * pooling feeding convs (Inception's pool branches) converts no layout. Only then: where another
 * op reads the pooled NCHW view (DenseNet's transitions feed batch norms), it would read it
 * strided, off its fast kernels (densenet121, batch 1: 121 against 77 ms of CPU time). */
static oar_status avg_pool_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->op != OAR_OP_avg_pool2d || n->block != OAR_MAIN_BLOCK) return OAR_OK;
    int t = twin_of(l, n->in[0]), y = n->out[0];
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (t < 0 || pos < 0 || p->values[y].meta.ndim != 4 || p->values[t].meta.dtype != OAR_F32 ||
        !read_by_convs_only(l, y))
        return OAR_OK;
    int in[1] = {t}, yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_avg_pool2d_nhwc, in, 1, n->attrs, &yt) < 0)
        return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

/* A one-input elementwise op (clip as ReLU6, relu, ...) reading view, an NCHW view of NHWC twin
 * t, runs on t instead: its result gets a twin too, so the next conv reads it with no conversion
 * (mobilenet_v2's Clip between convs copied NHWC to NCHW and back, a quarter of its time). */
static oar_status unary_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    const oar_op_def *d = oar_op_table[n->op];
    if (n->dead || n->block != OAR_MAIN_BLOCK || !(d->flags & OAR_OPF_ELEMENTWISE) || d->n_inputs != 1 ||
        (d->flags & OAR_OPF_RANDOM) || n->n_in != 1 || n->n_out != 1)
        return OAR_OK;
    int t = twin_of(l, n->in[0]), y = n->out[0];
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id);
    if (t < 0 || pos < 0 || p->values[y].meta.ndim != 4) return OAR_OK;
    int in[1] = {t}, yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, n->op, in, 1, n->attrs, &yt) < 0) return oar_last_status();
    p->values[yt].dyn_dims = p->values[t].dyn_dims;
    return replace_by_twin(l, id, y, yt, pos);
}

/* concat of NCHW views of NHWC twins (squeezenet's fire modules join two convs' outputs on C)
 * is the concat of the twins on the matching NHWC dim, and gets a twin itself. */
static oar_status concat_nhwc(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->op != OAR_OP_concat || n->block != OAR_MAIN_BLOCK || n->n_in > OAR_MAX_INPUTS) return OAR_OK;
    int y = n->out[0], pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id), in[OAR_MAX_INPUTS];
    if (pos < 0 || p->values[y].meta.ndim != 4) return OAR_OK;
    for (int k = 0; k < n->n_in; k++)
        if ((in[k] = twin_of(l, n->in[k])) < 0) return OAR_OK;
    int64_t d = n->attrs[0].i < 0 ? n->attrs[0].i + 4 : n->attrs[0].i;
    static const int64_t NHWC_DIM[4] = {0, 3, 1, 2}; /* where NCHW dim d sits in NHWC */
    oar_attr a = oar_attr_int(NHWC_DIM[d]);
    int yt;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_concat, in, n->n_in, &a, &yt) < 0)
        return oar_last_status();
    p->values[yt].dyn_dims = permute_dyn(p->values[y].dyn_dims, TO_NHWC);
    return replace_by_twin(l, id, y, yt, pos);
}

/* A reshape was traced on a contiguous value, so it runs as a view; reading an NCHW view of an
 * NHWC twin (a conv's output flattened for a Linear, with no pooling between), or a view of
 * one (an imported file's Transpose pairs around it), it must read a contiguous copy instead:
 * the layout cannot be viewed with the new shape. Other view ops pass the mark on. */
static oar_status reshape_of_view(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->n_in < 1 || twin_of(l, n->in[0]) == NO_TWIN) return OAR_OK;
    if (n->op != OAR_OP_reshape) {
        bool view = (oar_op_table[n->op]->flags & OAR_OPF_VIEW) && n->n_out == 1;
        return !view || set_twin(l, n->out[0], TWIN_VIEW) ? OAR_OK : oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
    }
    int pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id), in[1] = {n->in[0]}, c;
    if (pos < 0) return OAR_OK;
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_contiguous, in, 1, NULL, &c) < 0) return oar_last_status();
    p->values[c].dyn_dims = p->values[in[0]].dyn_dims;
    p->nodes[id].in[0] = c;
    return OAR_OK;
}

/* int8 programs: any other reader of an NCHW view of a twin (a direct-kernel conv, the global
 * pool) reads a contiguous copy, so that it runs the kernel it runs in the NCHW program (a strided
 * input would send it to its reference: another kernel, maybe other bits). */
static oar_status contiguous_readers(layouter *l, int id) {
    oar_program *p = l->p;
    const oar_node *n = &p->nodes[id];
    if (n->dead || n->block != OAR_MAIN_BLOCK || (oar_op_table[n->op]->flags & OAR_OPF_VIEW)) return OAR_OK;
    int n_in = n->n_in; /* n moves when a node is inserted */
    for (int k = 0; k < n_in; k++) {
        int v = p->nodes[id].in[k], pos = pos_in_block(&p->blocks[OAR_MAIN_BLOCK], id), c;
        if (v < 0 || twin_of(l, v) == NO_TWIN || pos < 0) continue;
        int in[1] = {v};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_contiguous, in, 1, NULL, &c) < 0) return oar_last_status();
        p->values[c].dyn_dims = p->values[v].dyn_dims;
        for (int j = k; j < n_in; j++) /* every input reading v: one copy */
            if (p->nodes[id].in[j] == v) p->nodes[id].in[j] = c;
    }
    return OAR_OK;
}

static oar_status layout_pass(oar_program *p, bool q) {
    layouter l = {p, NULL, 0, q};
    int n_nodes = p->n_nodes;
    oar_status st = OAR_OK;
    /* main-block order, so a conv's input twin exists before the conv is converted */
    int n_main = p->blocks[OAR_MAIN_BLOCK].n_nodes;
    int *order = malloc(sizeof(int) * (size_t)(n_main + 1));
    if (!order) return oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
    if (n_main) memcpy(order, p->blocks[OAR_MAIN_BLOCK].nodes, sizeof(int) * (size_t)n_main); /* none: NULL */
    for (int i = 0; i < n_main && st == OAR_OK; i++) {
        if (order[i] >= n_nodes) continue;
        if (is_root(&l, &p->nodes[order[i]])) st = convert(&l, order[i]);
        else if ((st = pool_nhwc(&l, order[i])) == OAR_OK && (st = max_pool_nhwc(&l, order[i])) == OAR_OK &&
                 (!q || ((st = requant_nhwc(&l, order[i])) == OAR_OK && (st = qadd_nhwc(&l, order[i])) == OAR_OK)) &&
                 (st = avg_pool_nhwc(&l, order[i])) == OAR_OK &&
                 (st = unary_nhwc(&l, order[i])) == OAR_OK && (st = concat_nhwc(&l, order[i])) == OAR_OK &&
                 (st = reshape_of_view(&l, order[i])) == OAR_OK && q)
            st = contiguous_readers(&l, order[i]);
    }
    free(order);
    /* views nobody reads any more (their readers took the twin) */
    int *uses = st == OAR_OK ? malloc(sizeof(int) * (size_t)(p->n_values + 1)) : NULL;
    if (st == OAR_OK && !uses) st = oar_error(OAR_ERR_OOM, "conv_nhwc: out of memory");
    if (st == OAR_OK) {
        oar_program_use_counts(p, uses);
        for (int v = 0; v < l.cap && v < p->n_values; v++)
            if (l.twin[v] >= 0 && uses[v] == 0 && p->values[v].kind == OAR_VAL_NODE) p->nodes[p->values[v].node].dead = true;
    }
    free(uses);
    free(l.twin);
    /* a 1x1 conv of a channel concat (squeezenet's fire modules): no concat (concat_conv.c) */
    return st == OAR_OK && !q ? oar_pass_concat_conv_split(p) : st;
}

oar_status oar_pass_conv_nhwc(oar_program *p) {
    return has_kernel(OAR_OP_conv2d_act, "onednn") ? layout_pass(p, false) : OAR_OK;
}

oar_status oar_pass_quant_nhwc(oar_program *p) {
    return has_kernel(OAR_OP_qconv2d_nhwc, "onednn-int8") ? layout_pass(p, true) : OAR_OK;
}
