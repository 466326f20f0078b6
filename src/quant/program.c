/* Static post-training quantization of a compiled inference program (docs/quant.md).
 *
 *   1. BatchNorm in inference mode is folded into the conv2d before it (the fold_conv_bn pass),
 *      so the int8 convs see the folded weights and nothing stays f32 between them.
 *   2. Targets: the main block's f32 conv2d and linear nodes whose weight (and bias) are fixed,
 *      i.e. computed from parameters and constants only. Every other op (softmax, layer_norm,
 *      pooling, additions) stays f32 by construction; the rule also keeps the first / last
 *      target and any named one (the weight parameter's name without ".weight") in fp32.
 *   3. Calibration: a copy of the program gets the observation points as extra outputs (each
 *      target's input, output, and its weight and bias when the fold computed them), as
 *      onnxruntime's calibrators augment the graph, and runs on the calibration batches; the
 *      inputs feed one observer each.
 *   4. Rewrite: each target becomes quantize(x, s, z) -> qconv2d / qlinear (i8 weights,
 *      symmetric per output channel, f32 output) with the calibrated s, z and the quantized
 *      weights bound as new parameters. The inference pass fuse_quant then keeps the chain in
 *      int8 (ReLU and requantization in the epilogues, quantize moved above pooling/reshape).
 *   5. Report: per layer the weight SQNR and the output SQNR of the quantized program against
 *      the f32 one over the calibration batches (errors of earlier layers included, so the
 *      layer where the SQNR drops is the one that hurts). */
#include "quant/program.h"

#include "graph/exec.h"
#include "graph/export.h"
#include "graph/passes/passes.h"
#include "graph/serialize.h"
#include "kernels/cpu/cpu_kernels.h"
#include "ops/quant.h"
#include "ops/quant_add.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct qtarget {
    int node;
    bool conv;
    char name[128];
    int x, y, w, b;          /* value ids in the program (b -1: no bias) */
    int out_w, out_b;        /* their output slots in the calibration program, -1: a parameter */
    oar_observer *obs;
    oar_tensor *wt, *bt;     /* the f32 weight and bias (borrowed from the program or a run) */
    double ref2, err2;       /* output SQNR sums */
    int qx, vxs, vxz;        /* after the rewrite: the quantized input and its qparams' values */
    int given;               /* index into the given qparams (QAT), -1: calibrated */
    float xs;
    int32_t xz;
} qtarget;

/* A residual addition made int8: add(a, b) [-> relu] -> y, one of a, b an int8 layer's output and
 * y read by an int8 layer, becomes qadd(quantize(a), quantize(b); relu) -> u8 with y's qparams. */
typedef struct qresid {
    int node, relu, a, b, y; /* the add and relu nodes (relu -1: none), its operands and result (value ids) */
    oar_observer *obs[2];    /* a's and b's observers; NULL where a target reads the operand (its qparams) */
} qresid;

typedef struct qctx {
    oar_program *p;
    qtarget *t;
    int n;
    const oar_quant_given *g; /* NULL: the qparams come from calibration */
    int weight_bits;          /* 8 or 7 */
    qresid *r;                /* the residual additions made int8 (with int8_residual, and no given qparams) */
    int n_r;
} qctx;

static int given_index(const oar_quant_given *g, const char *name) {
    for (int i = 0; g && i < g->n; i++)
        if (!strcmp(g->names[i], name)) return i;
    return -1;
}

static bool in_list(const char *name, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(*list, name)) return true;
    return false;
}

/* v is computed from parameters and constants only (depth-limited), by main-block nodes without effects. */
static bool fixed_value(const oar_program *p, const bool *mut, int v, int depth) {
    if (v < 0) return true;
    const oar_value *val = &p->values[v];
    if (val->kind == OAR_VAL_PARAM || val->kind == OAR_VAL_CONST) return !mut[v];
    if (val->kind != OAR_VAL_NODE || depth > 16) return false;
    const oar_node *n = &p->nodes[val->node];
    if (n->dead || n->block != OAR_MAIN_BLOCK || n->n_blocks || oar_node_has_effects(p, n)) return false;
    for (int k = 0; k < n->n_in; k++)
        if (!fixed_value(p, mut, n->in[k], depth + 1)) return false;
    return true;
}

/* The layer's name: its weight parameter's name without ".weight" (before the BN fold), else "node<id>". */
static void layer_name(const oar_program *p, const oar_node *n, int id, char *buf, size_t size) {
    const char *w = n->in[1] >= 0 ? p->values[n->in[1]].name : NULL;
    size_t len = w ? strlen(w) : 0;
    if (w && p->values[n->in[1]].kind == OAR_VAL_PARAM) {
        if (len > 7 && !strcmp(w + len - 7, ".weight")) len -= 7;
        snprintf(buf, size, "%.*s", (int)len, w);
    } else snprintf(buf, size, "node%d", id);
}

/* Runs p (one input) on x; out receives n_out new references. */
static oar_status run_once(const oar_program *p, oar_tensor *x, oar_tensor **out, int n_out) {
    oar_meta m;
    oar_meta_from(&m, x);
    oar_program *sp = oar_program_specialize(p, &m, 1);
    if (!sp) return oar_last_status();
    oar_exec *e = oar_exec_create(sp);
    oar_status st = e ? oar_exec_run(e, &x, 1, out, n_out) : oar_last_status();
    oar_exec_free(e);
    oar_program_free(sp);
    return st;
}

/* A copy of p whose main block also yields the values vals[0..n) (after its own outputs). */
static oar_program *with_outputs(const oar_program *p, const int *vals, int n) {
    oar_program *c = oar_program_copy(p);
    for (int i = 0; c && i < n; i++)
        if (oar_program_add_output(c, OAR_MAIN_BLOCK, vals[i]) != OAR_OK) {
            oar_program_free(c);
            return NULL;
        }
    return c;
}

static oar_status check_batches(const oar_program *p, oar_tensor *const *batches, int n) {
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    if (main->n_in != 1)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_program: expected a program of one input, got %d inputs",
                         main->n_in);
    if (n < 1 || !batches)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected at least one calibration batch, got %d; "
                                              "activation ranges cannot be known without data", n);
    const oar_value *in = &p->values[main->in[0]];
    for (int b = 0; b < n; b++) {
        oar_tensor *x = batches[b];
        bool ok = x && oar_dtype_of(x) == in->meta.dtype && oar_ndim(x) == in->meta.ndim;
        for (int d = 0; ok && d < in->meta.ndim; d++)
            ok = ((in->dyn_dims >> d) & 1u) || oar_shape(x)[d] == in->meta.shape[d];
        if (!ok) {
            char want[128];
            oar_meta_format(&in->meta, in->dyn_dims, want, sizeof want);
            return oar_error(OAR_ERR_SHAPE, "quantize_program: calibration batch %d does not fit the program's "
                                            "input %s; give batches of the exported input's dtype and shape", b, want);
        }
    }
    return OAR_OK;
}

/* Finds the targets (after the BN fold), names kept from before the fold. */
static oar_status find_targets(qctx *c, const oar_quant_static_opts *o, const char (*names)[128], int n_names) {
    oar_program *p = c->p;
    bool *mut = oar_pass_mutable_values(p);
    if (!mut) return oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    int n_all = 0;
    for (int i = 0; i < main->n_nodes; i++) {
        int id = main->nodes[i];
        const oar_node *n = &p->nodes[id];
        bool conv = n->op == OAR_OP_conv2d, lin = n->op == OAR_OP_linear;
        if (n->dead || (!conv && !lin) || p->values[n->in[0]].meta.dtype != OAR_F32) continue;
        if (!fixed_value(p, mut, n->in[1], 0) || !fixed_value(p, mut, n->in[2], 0)) continue;
        qtarget *t = &c->t[n_all++];
        *t = (qtarget){.node = id, .conv = conv, .x = n->in[0], .y = n->out[0], .w = n->in[1], .b = n->in[2],
                       .out_w = -1, .out_b = -1};
        if (id < n_names) snprintf(t->name, sizeof t->name, "%s", names[id]);
        else snprintf(t->name, sizeof t->name, "node%d", id); /* (passes add no conv2d or linear) */
        t->given = given_index(c->g, t->name);
    }
    free(mut);
    c->n = 0;
    for (int i = 0; i < n_all; i++) { /* the rule: sensitive layers stay fp32 */
        bool keep = (o->keep_first && i == 0) || (o->keep_last && i == n_all - 1) || in_list(c->t[i].name, o->skip) ||
                    (c->g && c->t[i].given < 0);
        if (!keep) c->t[c->n++] = c->t[i];
    }
    if (!c->n)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected a conv2d or linear with fixed weights to "
                                              "quantize, found %d, all kept in fp32 or none (was the model exported "
                                              "with fusions on? use oar_quant_export_strategy)", n_all);
    return OAR_OK;
}

/* The first target reading v as its input, or NULL. */
static qtarget *target_reading(const qctx *c, int v) {
    for (int i = 0; i < c->n; i++)
        if (c->t[i].x == v) return &c->t[i];
    return NULL;
}

static bool target_output(const qctx *c, int v) {
    for (int i = 0; i < c->n; i++)
        if (c->t[i].y == v) return true;
    return false;
}

static bool same_meta(const oar_value *a, const oar_value *b) {
    return a->meta.dtype == OAR_F32 && b->meta.dtype == OAR_F32 && a->meta.ndim == b->meta.ndim &&
           a->dyn_dims == b->dyn_dims && !memcmp(a->meta.shape, b->meta.shape, sizeof(int64_t) * (size_t)a->meta.ndim);
}

/* The residual additions to make int8: add(a, b) of two f32 values of the sum's shape, one of them
 * a target's output, the sum (or the relu that alone reads it) read by a target (its int8 codes
 * are needed anyway). Others (a transformer's residual between layer norms) stay f32. */
static oar_status find_residuals(qctx *c) {
    oar_program *p = c->p;
    int *uses = malloc(sizeof(int) * (size_t)(p->n_values + 1));
    c->r = calloc((size_t)p->n_nodes + 1, sizeof(qresid));
    if (!uses || !c->r) {
        free(uses);
        return oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    }
    oar_program_use_counts(p, uses);
    const oar_block *main = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < main->n_nodes; i++) {
        const oar_node *n = &p->nodes[main->nodes[i]];
        if (n->dead || n->op != OAR_OP_add || n->n_in != 2 || n->in[0] == n->in[1]) continue;
        int a = n->in[0], b = n->in[1], y = n->out[0], relu = -1;
        if (!same_meta(&p->values[a], &p->values[y]) || !same_meta(&p->values[b], &p->values[y])) continue;
        if (!target_output(c, a) && !target_output(c, b)) continue;
        for (int k = i + 1; k < main->n_nodes && uses[y] == 1 && relu < 0; k++) { /* its one reader a relu? */
            const oar_node *r = &p->nodes[main->nodes[k]];
            if (!r->dead && r->op == OAR_OP_relu && r->in[0] == y) relu = main->nodes[k];
        }
        bool out = false; /* the sum itself a block output: keep it */
        for (int k = 0; k < main->n_out; k++) out |= main->out[k] == y;
        if (out) relu = -1;
        int yv = relu >= 0 ? p->nodes[relu].out[0] : y;
        if (out || !target_reading(c, yv)) continue;
        c->r[c->n_r++] = (qresid){.node = main->nodes[i], .relu = relu, .a = a, .b = b, .y = yv};
    }
    free(uses);
    return OAR_OK;
}

/* Calibration: observers on the targets' inputs; weights and biases the fold computes are fetched. */
static oar_status calibrate(qctx *c, oar_tensor *const *batches, int n_batches, const char *kind,
                            const oar_observer_opts *oo, oar_tensor ***fetched, int *n_fetched) {
    oar_program *p = c->p;
    int base = p->blocks[OAR_MAIN_BLOCK].n_out, n_out = base;
    int *vals = malloc(sizeof(int) * (size_t)(3 * c->n + 2 * c->n_r + 1));
    if (!vals) return oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    int n_vals = 0;
    for (int i = 0; i < c->n; i++) {
        qtarget *t = &c->t[i];
        vals[n_vals++] = t->x;
        if (p->values[t->w].kind == OAR_VAL_NODE) t->out_w = n_vals, vals[n_vals++] = t->w;
        if (t->b >= 0 && p->values[t->b].kind == OAR_VAL_NODE) t->out_b = n_vals, vals[n_vals++] = t->b;
    }
    for (int i = 0; i < c->n_r; i++) /* residual operands no target reads (a conv's f32 output) */
        for (int k = 0; k < 2; k++) {
            int v = k ? c->r[i].b : c->r[i].a;
            if (!target_reading(c, v)) vals[n_vals++] = v;
        }
    n_out += n_vals;
    oar_program *cp = with_outputs(p, vals, n_vals);
    oar_tensor **out = calloc((size_t)n_out + 1, sizeof(oar_tensor *));
    oar_status st = cp && out ? OAR_OK : oar_last_status();
    if (cp && !out) st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    for (int i = 0; i < c->n && st == OAR_OK; i++)
        if (!(c->t[i].obs = oar_observer_create(kind, oo))) st = oar_last_status();
    for (int i = 0; i < c->n_r && st == OAR_OK; i++)
        for (int k = 0; k < 2 && st == OAR_OK; k++)
            if (!target_reading(c, k ? c->r[i].b : c->r[i].a) && !(c->r[i].obs[k] = oar_observer_create(kind, oo)))
                st = oar_last_status();
    bool grad = oar_set_grad_enabled(false);
    for (int b = 0; b < n_batches && st == OAR_OK; b++) {
        if ((st = run_once(cp, batches[b], out, n_out)) != OAR_OK) {
            oar_error_prefix("quantize_program: calibration batch %d", b);
            break;
        }
        int k = base;
        for (int i = 0; i < c->n && st == OAR_OK; i++) {
            qtarget *t = &c->t[i];
            if ((st = oar_observer_observe(t->obs, out[k++])) != OAR_OK)
                oar_error_prefix("quantize_program: layer %s, calibration batch %d", t->name, b);
            if (t->out_w >= 0) k++;
            if (t->out_b >= 0) k++;
        }
        for (int i = 0; i < c->n_r && st == OAR_OK; i++)
            for (int j = 0; j < 2 && st == OAR_OK; j++)
                if (c->r[i].obs[j] && (st = oar_observer_observe(c->r[i].obs[j], out[k++])) != OAR_OK)
                    oar_error_prefix("quantize_program: residual addition %d, calibration batch %d", i, b);
        for (int j = 0; j < n_out; j++) {
            if (b == 0 && j >= base) continue; /* the first batch's are kept for the weights */
            oar_release(out[j]);
            out[j] = NULL;
        }
        if (b == 0) {
            *fetched = out;
            *n_fetched = n_out;
            out = calloc((size_t)n_out + 1, sizeof(oar_tensor *));
            if (!out) st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
        }
    }
    oar_set_grad_enabled(grad);
    for (int i = 0; i < c->n && st == OAR_OK; i++) {
        qtarget *t = &c->t[i];
        t->wt = t->out_w >= 0 ? (*fetched)[base + t->out_w] : p->values[t->w].tensor;
        t->bt = t->b < 0 ? NULL : t->out_b >= 0 ? (*fetched)[base + t->out_b] : p->values[t->b].tensor;
    }
    free(out);
    free(vals);
    oar_program_free(cp);
    return st;
}

static int add_param(oar_program *p, oar_tensor *t, const char *layer, const char *what) {
    char name[192];
    snprintf(name, sizeof name, "%s.%s", layer, what);
    return oar_program_add_tensor(p, OAR_VAL_PARAM, t, name);
}

static int pos_in_main(const oar_program *p, int id) {
    const oar_block *b = &p->blocks[OAR_MAIN_BLOCK];
    for (int i = 0; i < b->n_nodes; i++)
        if (b->nodes[i] == id) return i;
    return -1;
}

/* Target t becomes quantize -> qconv2d / qlinear giving f32; *qout receives the new output value. */
static oar_status rewrite(qctx *c, qtarget *t, oar_quant_layer *info, int *qout) {
    oar_program *p = c->p;
    oar_tensor *xs, *xz, *ws = NULL, *wz = NULL, *wq = NULL;
    oar_status st = OAR_OK;
    if (t->given >= 0) { /* learned (QAT): they take the place of calibration */
        xs = oar_scalar(c->g->scales[t->given], OAR_F32);
        xz = oar_scalar(c->g->zero_points[t->given], OAR_I32);
        if (!xs || !xz) st = oar_last_status();
    } else {
        st = oar_observer_qparams(t->obs, &xs, &xz);
    }
    if (st != OAR_OK) {
        oar_error_prefix("quantize_program: layer %s (never reached by the calibration batches?)", t->name);
        return st;
    }
    oar_observer *wo = oar_observer_create("minmax", &(oar_observer_opts){.dtype = OAR_I8, .symmetric = true,
                                                                          .per_channel = true, .axis = 0});
    st = wo ? oar_observer_observe(wo, t->wt) : oar_last_status();
    if (st == OAR_OK) st = oar_observer_qparams(wo, &ws, &wz);
    oar_observer_free(wo);
    if (st == OAR_OK && c->weight_bits == 7) { /* amax / 63 for amax / 127.5: values within [-63, 63] */
        float *s = (float *)oar_tensor_ptr(ws);
        for (int64_t i = 0; i < oar_numel(ws); i++) s[i] *= 127.5f / 63.0f;
    }
    if (st == OAR_OK && !(wq = oar_quantize(t->wt, ws, wz, 0, OAR_I8))) st = oar_last_status();
    if (st == OAR_OK) st = oar_sqnr(t->wt, oar_dequantize(wq, ws, wz, 0), &info->weight_sqnr_db);
    if (st != OAR_OK) {
        oar_error_prefix("quantize_program: layer %s", t->name);
        return st;
    }
    snprintf(info->name, sizeof info->name, "%s", t->name);
    snprintf(info->type, sizeof info->type, "%s", t->conv ? "Conv2d" : "Linear");
    info->weights = oar_numel(t->wt);
    info->scale_min = info->scale_max = *(const float *)oar_data(xs);
    t->xs = *(const float *)oar_data(xs);
    t->xz = *(const int32_t *)oar_data(xz);
    const qtarget *same = NULL; /* a layer reading the same value with the same qparams (a projection
                                   shortcut beside a block's first conv) shares its quantize */
    for (const qtarget *u = c->t; u < t && !same; u++)
        if (u->x == t->x && u->xs == t->xs && u->xz == t->xz) same = u;
    int vxs = same ? same->vxs : add_param(p, xs, t->name, "input_scale");
    int vxz = same ? same->vxz : add_param(p, xz, t->name, "input_zero_point");
    int vw = add_param(p, wq, t->name, "weight"), vws = add_param(p, ws, t->name, "weight_scale");
    int vb = t->b < 0 ? -1 : p->values[t->b].kind == OAR_VAL_NODE ? add_param(p, t->bt, t->name, "bias") : t->b;
    if (vxs < 0 || vxz < 0 || vw < 0 || vws < 0 || (t->b >= 0 && vb < 0)) return oar_last_status();
    int pos = pos_in_main(p, t->node), qx = same ? same->qx : -1;
    uint32_t xdyn = p->values[t->x].dyn_dims, ydyn = p->values[t->y].dyn_dims;
    if (!same) {
        oar_attr qa[2] = {oar_attr_int(0), oar_attr_dtype(OAR_U8)};
        int qin[3] = {t->x, vxs, vxz};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_quantize, qin, 3, qa, &qx) < 0)
            return oar_last_status();
        p->values[qx].dyn_dims = xdyn;
    }
    t->qx = qx, t->vxs = vxs, t->vxz = vxz;
    int in[QL_N] = {[QL_X] = qx, [QL_XS] = vxs, [QL_XZP] = vxz, [QL_W] = vw, [QL_WS] = vws, [QL_BIAS] = vb,
                    [QL_YS] = -1, [QL_YZP] = -1, [QL_RES] = -1};
    oar_attr attrs[6];
    int na = 0;
    if (t->conv)
        for (; na < 4; na++) attrs[na] = p->nodes[t->node].attrs[na]; /* stride, padding, dilation, groups */
    attrs[na++] = oar_attr_int(OAR_QACT_NONE);
    attrs[na++] = oar_attr_dtype(OAR_F32);
    if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, t->conv ? OAR_OP_qconv2d : OAR_OP_qlinear, in, QL_N, attrs,
                             qout) < 0)
        return oar_last_status();
    p->values[*qout].dyn_dims = ydyn;
    oar_program_replace_uses(p, t->y, *qout);
    p->nodes[t->node].dead = true;
    return OAR_OK;
}

/* The u8 codes of an f32 value (by its id before the rewrite) and their qparams' values. */
typedef struct qcodes {
    int v, q, s, z;
} qcodes;

static const qcodes *codes_of(const qcodes *m, int n, int v) {
    for (int i = 0; i < n; i++)
        if (m[i].v == v) return &m[i];
    return NULL;
}

/* Operand k of residual r as u8 codes: known codes (a qadd's result), a target's quantize of it,
 * or a new quantize (its own observer's qparams) of its f32 value now (q_y: the targets' new outputs)
 * at *pos. */
static oar_status operand_codes(qctx *c, qresid *r, int k, const int *q_y, qcodes *m, int *n_m, int *pos,
                                qcodes *out) {
    oar_program *p = c->p;
    int v = k ? r->b : r->a;
    const qcodes *known = codes_of(m, *n_m, v);
    const qtarget *t = target_reading(c, v);
    if (known) *out = *known;
    else if (t) *out = (qcodes){v, t->qx, t->vxs, t->vxz};
    else {
        oar_tensor *xs, *xz;
        oar_status st = oar_observer_qparams(r->obs[k], &xs, &xz);
        if (st != OAR_OK) return st;
        char name[160];
        snprintf(name, sizeof name, "residual%d.%s", (int)(r - c->r), k ? "b" : "a");
        int cur = v;
        for (int i = 0; i < c->n; i++)
            if (c->t[i].y == v) cur = q_y[i];
        int vs = add_param(p, xs, name, "scale"), vz = add_param(p, xz, name, "zero_point"), q;
        if (vs < 0 || vz < 0) return oar_last_status();
        oar_attr qa[2] = {oar_attr_int(0), oar_attr_dtype(OAR_U8)};
        int qin[3] = {cur, vs, vz};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, (*pos)++, OAR_OP_quantize, qin, 3, qa, &q) < 0)
            return oar_last_status();
        p->values[q].dyn_dims = p->values[cur].dyn_dims;
        *out = (qcodes){v, q, vs, vz};
    }
    m[(*n_m)++] = *out;
    return OAR_OK;
}

/* Each residual addition becomes qadd on u8 codes, giving y's codes with the qparams of the target
 * that reads y: that target's quantize of y goes (its readers take the qadd's result), and any f32
 * reader of y reads dequantize(codes). fuse_quant then puts the operands' quantizes into their
 * convs' epilogues, so no f32 block output is left where only int8 layers read it. */
static oar_status rewrite_residuals(qctx *c, const int *q_y) {
    oar_program *p = c->p;
    qcodes *m = calloc((size_t)(3 * c->n_r + 1), sizeof *m);
    if (!m) return oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    int n_m = 0;
    oar_status st = OAR_OK;
    for (int i = 0; i < c->n_r && st == OAR_OK; i++) {
        qresid *r = &c->r[i];
        qtarget *t = target_reading(c, r->y);
        int pos = pos_in_main(p, r->node), qy, dq;
        qcodes ca, cb;
        if ((st = operand_codes(c, r, 0, q_y, m, &n_m, &pos, &ca)) != OAR_OK ||
            (st = operand_codes(c, r, 1, q_y, m, &n_m, &pos, &cb)) != OAR_OK)
            break;
        int in[QA_N] = {ca.q, ca.s, ca.z, cb.q, cb.s, cb.z, t->vxs, t->vxz};
        oar_attr at[2] = {oar_attr_int(r->relu >= 0 ? OAR_QACT_RELU : OAR_QACT_NONE), oar_attr_dtype(OAR_U8)};
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos++, OAR_OP_qadd, in, QA_N, at, &qy) < 0) {
            st = oar_last_status();
            break;
        }
        p->values[qy].dyn_dims = p->values[r->y].dyn_dims;
        int din[3] = {qy, t->vxs, t->vxz};
        oar_attr da = oar_attr_int(0);
        if (oar_pass_insert_node(p, OAR_MAIN_BLOCK, pos, OAR_OP_dequantize, din, 3, &da, &dq) < 0) {
            st = oar_last_status();
            break;
        }
        p->values[dq].dyn_dims = p->values[r->y].dyn_dims;
        int old_q = t->qx;
        oar_program_replace_uses(p, r->y, dq); /* f32 readers (dead_code drops it when none is left) */
        oar_program_replace_uses(p, old_q, qy);
        for (int k = 0; k < c->n; k++) /* targets that shared that quantize read the codes */
            if (c->t[k].qx == old_q) c->t[k].qx = qy;
        m[n_m++] = (qcodes){r->y, qy, t->vxs, t->vxz};
    }
    free(m);
    if (st != OAR_OK) oar_error_prefix("quantize_program: residual additions");
    return st;
}

/* Output SQNR per layer: the f32 program and the quantized one on the calibration batches. */
static oar_status output_sqnr(qctx *c, const oar_program *ref, const int *ref_y, const int *q_y,
                              oar_tensor *const *batches, int n_batches) {
    oar_program *rp = with_outputs(ref, ref_y, c->n), *qp = with_outputs(c->p, q_y, c->n);
    int rb = ref->blocks[OAR_MAIN_BLOCK].n_out, qb = c->p->blocks[OAR_MAIN_BLOCK].n_out;
    oar_tensor **ro = calloc((size_t)(rb + c->n + 1), sizeof(oar_tensor *));
    oar_tensor **qo = calloc((size_t)(qb + c->n + 1), sizeof(oar_tensor *));
    oar_status st = rp && qp ? OAR_OK : oar_last_status();
    if (st == OAR_OK && (!ro || !qo)) st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    bool grad = oar_set_grad_enabled(false);
    for (int b = 0; b < n_batches && st == OAR_OK; b++) {
        if ((st = run_once(rp, batches[b], ro, rb + c->n)) == OAR_OK) st = run_once(qp, batches[b], qo, qb + c->n);
        for (int i = 0; i < c->n && st == OAR_OK; i++) {
            oar_tensor *r = oar_contiguous(ro[rb + i]), *q = oar_contiguous(qo[qb + i]);
            const float *rd = oar_data(r), *qd = oar_data(q);
            for (int64_t k = 0, n = oar_numel(r); k < n; k++) {
                double d = (double)rd[k] - (double)qd[k];
                c->t[i].ref2 += (double)rd[k] * rd[k];
                c->t[i].err2 += d * d;
            }
            oar_release(r);
            oar_release(q);
        }
        for (int j = 0; j < rb + c->n; j++) oar_release(ro[j]), ro[j] = NULL;
        for (int j = 0; j < qb + c->n; j++) oar_release(qo[j]), qo[j] = NULL;
    }
    oar_set_grad_enabled(grad);
    free(ro);
    free(qo);
    oar_program_free(rp);
    oar_program_free(qp);
    return st;
}

#define MAX_TARGETS 4096

static oar_status quant_program(oar_program *p, oar_tensor *const *batches, int n_batches,
                                const oar_quant_static_opts *opts, const oar_quant_given *g, oar_quant_layer *layers,
                                int cap, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!p) return oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected a program, got NULL");
    if (p->n_grad_writes || oar_program_state_writer(p) >= 0)
        return oar_error(OAR_ERR_UNSUPPORTED, "quantize_program: expected an inference program, got a training step "
                                              "(it writes gradients or state); export the model in eval mode");
    oar_status st = check_batches(p, batches, n_batches);
    if (st != OAR_OK) return st;
    oar_quant_static_opts o = opts ? *opts : (oar_quant_static_opts){.weight_bits = g ? g->weight_bits : 0};
    if (o.weight_bits != 0 && o.weight_bits != 7 && o.weight_bits != 8)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected weight_bits 8 (or 0) or 7, got %d",
                         o.weight_bits);
    oar_observer_opts oo = o.observer_opts;
    oo.per_channel = false; /* one scale per activation tensor */
    oo.dtype = OAR_U8;      /* what the int8 kernels take */
    oo.symmetric = false;
    char (*names)[128] = calloc((size_t)p->n_nodes + 1, sizeof *names);
    qctx c = {p, calloc(MAX_TARGETS, sizeof(qtarget)), 0, g, o.weight_bits ? o.weight_bits : 8};
    oar_tensor **fetched = NULL; /* the first calibration run's outputs (the folded weights among them) */
    int n_fetched = 0, *ref_y = NULL, *q_y = NULL;
    oar_program *ref = NULL;
    if (!names || !c.t) {
        st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
        goto done;
    }
    int n_names = p->n_nodes;
    for (int id = 0; id < n_names; id++) layer_name(p, &p->nodes[id], id, names[id], sizeof names[id]);
    if ((st = oar_pass_fold_conv_bn(p)) != OAR_OK || (st = oar_pass_dead_code(p)) != OAR_OK ||
        (st = oar_program_verify(p)) != OAR_OK) {
        oar_error_prefix("quantize_program: folding batch norms");
        goto done;
    }
    oar_program_compact(p);
    if ((st = find_targets(&c, &o, (const char(*)[128])names, n_names)) != OAR_OK) goto done;
    /* (QAT's given qparams cover the layers' inputs only: its adds were trained in f32) */
    if (!g && o.int8_residual && (st = find_residuals(&c)) != OAR_OK) goto done;
    for (int i = 0; g && i < g->n; i++) { /* every layer given qparams is a target */
        bool found = false;
        for (int k = 0; k < c.n && !found; k++) found = c.t[k].given == i;
        if (!found) {
            st = oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected a conv2d or linear with fixed weights "
                                                "named %s (its weight parameter without .weight), found none; export "
                                                "the model with oar_quant_export_strategy", g->names[i]);
            goto done;
        }
    }
    oar_scope_begin();
    st = calibrate(&c, batches, n_batches, o.observer ? o.observer : "minmax", &oo, &fetched, &n_fetched);
    if (st == OAR_OK && !(ref = oar_program_copy(p))) st = oar_last_status();
    ref_y = malloc(sizeof(int) * (size_t)(c.n + 1));
    q_y = malloc(sizeof(int) * (size_t)(c.n + 1));
    if (st == OAR_OK && (!ref_y || !q_y)) st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    for (int i = 0; i < c.n && st == OAR_OK; i++) { /* every observer has data before anything changes */
        oar_tensor *s, *z;
        if ((st = oar_observer_qparams(c.t[i].obs, &s, &z)) != OAR_OK)
            oar_error_prefix("quantize_program: layer %s (never reached by the calibration batches?)", c.t[i].name);
    }
    oar_quant_layer *info = calloc((size_t)c.n + 1, sizeof *info);
    if (st == OAR_OK && !info) st = oar_error(OAR_ERR_OOM, "quantize_program: out of memory");
    for (int i = 0; i < c.n && st == OAR_OK; i++) {
        ref_y[i] = c.t[i].y;
        st = rewrite(&c, &c.t[i], &info[i], &q_y[i]);
    }
    if (st == OAR_OK && c.n_r) st = rewrite_residuals(&c, q_y);
    if (st == OAR_OK) oar_program_compact(p);
    if (st == OAR_OK && (st = oar_program_verify(p)) != OAR_OK) oar_error_prefix("quantize_program: the rewrite");
    if (st == OAR_OK) st = output_sqnr(&c, ref, ref_y, q_y, batches, n_batches);
    if (st == OAR_OK && (st = oar_pass_dead_code(p)) == OAR_OK) oar_program_compact(p);
    for (int i = 0; i < c.n && st == OAR_OK; i++) {
        info[i].output_sqnr_db = c.t[i].err2 > 0 ? 10 * log10(c.t[i].ref2 / c.t[i].err2) : INFINITY;
        if (layers && i < cap) layers[i] = info[i];
        if (n_layers) (*n_layers)++;
    }
    free(info);
    oar_scope_end();
done:
    for (int i = 0; c.t && i < c.n; i++) oar_observer_free(c.t[i].obs);
    for (int i = 0; c.r && i < c.n_r; i++) oar_observer_free(c.r[i].obs[0]), oar_observer_free(c.r[i].obs[1]);
    free(c.r);
    for (int j = 0; j < n_fetched; j++) oar_release(fetched[j]);
    free(fetched);
    free(c.t);
    free(names);
    free(ref_y);
    free(q_y);
    oar_program_free(ref);
    return st;
}

oar_status oar_quant_program_static(oar_program *p, oar_tensor *const *batches, int n_batches,
                                    const oar_quant_static_opts *opts, oar_quant_layer *layers, int cap,
                                    int *n_layers) {
    return quant_program(p, batches, n_batches, opts, NULL, layers, cap, n_layers);
}

int oar_quant_fast_weight_bits(void) {
#if defined(__x86_64__) || defined(_M_X64)
    /* without VNNI, qlinear's GEMM, the direct AVX2 convolution and oneDNN's int8 code take
       vpmaddubsw, exact only on 7-bit weights; below AVX2 the reference runs any width */
    return oar_cpu_use_vnni() || !oar_cpu_has_avx2() ? 8 : 7;
#else
    return 8; /* the reference either way */
#endif
}

oar_status oar_quant_program_given(oar_program *p, oar_tensor *const *batches, int n_batches,
                                   const oar_quant_given *g, oar_quant_layer *layers, int cap, int *n_layers) {
    if (!g || g->n < 1)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_program: expected given qparams for at least one layer, got "
                                              "none");
    for (int i = 0; i < g->n; i++)
        if (!(g->scales[i] > 0 && g->scales[i] < INFINITY))
            return oar_error(OAR_ERR_NUMERIC, "quantize_program: layer %s: expected a positive finite activation "
                                              "scale, got %g; was the layer trained on finite data?", g->names[i],
                             (double)g->scales[i]);
    return quant_program(p, batches, n_batches, NULL, g, layers, cap, n_layers);
}

void oar_quant_export_strategy(oar_build_strategy *s) {
    static const char *const off[] = {"fold_conv_bn", "fuse_conv_act", "fuse_quant", "conv_nhwc", "fuse_linear_act",
                                      "fuse_bn_act", "fuse_elementwise", "fuse_add_layer_norm", "inplace"};
    *s = (oar_build_strategy){0};
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) oar_build_strategy_set(s, off[i], false);
}

oar_status oar_quantize_static_model(const char *model_path, const char *out_path, oar_tensor *const *batches,
                                     int n_batches, const oar_quant_static_opts *opts, oar_quant_layer *layers,
                                     int cap, int *n_layers) {
    if (n_layers) *n_layers = 0;
    if (!model_path || !out_path)
        return oar_error(OAR_ERR_INVALID_ARG, "quantize_static_model: expected a model path and an output path, got %s",
                         model_path ? "no output path" : "no model path");
    oar_program_io io;
    oar_program *p = oar_program_load_io(model_path, &io);
    if (!p) return oar_last_status();
    oar_status st = oar_quant_program_static(p, batches, n_batches, opts, layers, cap, n_layers);
    if (st == OAR_OK) st = oar_program_save(p, out_path, io.input_names, io.output_names);
    if (st != OAR_OK) oar_error_prefix("quantize_static_model %s", model_path);
    oar_program_free(p);
    return st;
}
