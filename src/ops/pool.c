/* Pooling over the last two (2-d) or three (3-d) dims of [C, (D,) H, W] or [N, C, (D,) H, W]
 * tensors, with PyTorch's output sizes (ceil_mode), window clipping (count_include_pad) and
 * adaptive bins (2-d). The 2-d and 3-d ops are one code with the rank as a parameter: a 2-d
 * window is a 3-d one of unit depth. Backward ops: max pooling scatters the gradient to each
 * window's argmax (recomputed from x, so nothing but x is saved) and its second-order partner
 * gathers from the argmax; average pooling and its backward are adjoint linear maps, so each
 * one's rule is the other. */
#include "ops/op.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Spatial entries are [depth, height, width]; a 2-d pool has a unit leading one. */
typedef struct pgeom {
    int nsp;        /* 2 or 3 */
    int64_t planes; /* the leading (batch and channel) dims' product */
    int64_t sp[3], o[3], k[3], s[3], p[3], d[3];
    int64_t divisor; /* avg_pool3d's divisor_override; 0: none */
    bool ceil_mode, include_pad;
} pgeom;

/* The ops of each rank, for the gradient rules. */
static const oar_op_id MAX_BWD[2] = {OAR_OP_max_pool2d_backward, OAR_OP_max_pool3d_backward};
static const oar_op_id MAX_GATHER[2] = {OAR_OP_max_pool2d_gather, OAR_OP_max_pool3d_gather};
static const oar_op_id AVG[2] = {OAR_OP_avg_pool2d, OAR_OP_avg_pool3d};
static const oar_op_id AVG_BWD[2] = {OAR_OP_avg_pool2d_backward, OAR_OP_avg_pool3d_backward};
/* a rule's rank: from its window attribute (the input's rank cannot tell an unbatched 3-d
 * pool from a batched 2-d one) */
static int rank_ix(const oar_attr *kernel) { return kernel->n == 3; }

/* torch's pooling_output_shape: floor (or ceil) division, and with ceil_mode no window may
 * start beyond the input and its left padding. */
/* In 128 bits, so that huge attributes from a model file give an error instead of overflowing;
 * a result past int64 saturates to INT64_MAX (refused by the caller). */
static int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    typedef __int128 wide;
    wide num = (wide)in + 2 * (wide)p - (wide)d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    wide out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= (wide)in + p) out--;
    return out > INT64_MAX ? INT64_MAX : out < INT64_MIN ? INT64_MIN : (int64_t)out;
}

/* "2 x 3" (or "1 x 2 x 3") for messages. */
static const char *by(const int64_t *v, int n, char *buf, size_t size) {
    int at = 0;
    buf[0] = 0;
    for (int i = 0; i < n && at >= 0 && (size_t)at < size; i++)
        at += snprintf(buf + at, size - (size_t)at, i ? " x %lld" : "%lld", (long long)v[i]);
    return buf;
}

static oar_status check_input_shape(const char *op, const char *name, const int64_t *xs, int nd, int nsp) {
    char s[128];
    oar_format_shape(xs, nd, s, sizeof s);
    if (nd != nsp + 1 && nd != nsp + 2)
        return oar_error(OAR_ERR_SHAPE, "%s: expected %s to be %s, got shape %s", op, name,
                         nsp == 2 ? "3-d [C, H, W] or 4-d [N, C, H, W]" : "4-d [C, D, H, W] or 5-d [N, C, D, H, W]", s);
    for (int d = nd - nsp - 1; d < nd; d++)
        if (xs[d] < 1)
            return oar_error(OAR_ERR_SHAPE, "%s: expected %s to have non-zero channels%s, height and width, got "
                                            "shape %s", op, name, nsp == 3 ? ", depth" : "", s);
    return OAR_OK;
}

static oar_status read_list(const char *op, const char *what, const oar_attr *a, int nsp, int64_t min, int64_t *out) {
    char s[128];
    oar_format_shape(a->ints, a->n, s, sizeof s);
    if (a->n != nsp)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s to have %d entries (%s), got %s", op, what, nsp,
                         nsp == 2 ? "height, width" : "depth, height, width", s);
    for (int i = 0; i < nsp; i++)
        if (a->ints[i] < min)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected %s entries >= %lld, got %s", op, what, (long long)min, s);
    memcpy(out, a->ints, sizeof(int64_t) * (size_t)nsp);
    return OAR_OK;
}

/* Window parameters (dil NULL: 1) for an input of shape xs, checked as torch checks them. */
static oar_status pool_geom(const char *op, const char *xname, const int64_t *xs, int nd, int nsp,
                            const oar_attr *ker, const oar_attr *str, const oar_attr *pad, const oar_attr *dil,
                            bool ceil_mode, pgeom *g) {
    oar_status st;
    const int lead = 3 - nsp;
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int i = 0; i < 3; i++) g->sp[i] = g->k[i] = g->s[i] = g->d[i] = 1;
    if ((st = check_input_shape(op, xname, xs, nd, nsp)) != OAR_OK) return st;
    if ((st = read_list(op, "kernel", ker, nsp, 1, g->k + lead)) != OAR_OK) return st;
    if ((st = read_list(op, "stride", str, nsp, 1, g->s + lead)) != OAR_OK) return st;
    if ((st = read_list(op, "padding", pad, nsp, 0, g->p + lead)) != OAR_OK) return st;
    if (dil && (st = read_list(op, "dilation", dil, nsp, 1, g->d + lead)) != OAR_OK) return st;
    char a[64], b[64], c[64], e[64];
    for (int i = lead; i < 3; i++)
        if (g->p[i] > g->k[i] / 2) {
            oar_format_shape(g->p + lead, nsp, a, sizeof a);
            oar_format_shape(g->k + lead, nsp, b, sizeof b);
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected padding at most half the kernel, got padding %s for "
                                                  "kernel %s; pad the input with oar_pad for more", op, a, b);
        }
    g->planes = 1;
    for (int i = 0; i < nd - nsp; i++) g->planes *= xs[i];
    bool huge = false, empty = false;
    for (int i = lead; i < 3; i++) {
        g->sp[i] = xs[nd - 3 + i];
        g->o[i] = pool_out_size(g->sp[i], g->k[i], g->s[i], g->p[i], g->d[i], ceil_mode);
        huge |= g->o[i] == INT64_MAX;
        empty |= g->o[i] < 1;
    }
    g->o[0] = lead ? 1 : g->o[0];
    g->ceil_mode = ceil_mode;
    if (huge) {
        oar_format_shape(g->p + lead, nsp, b, sizeof b);
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output size below 2^63, got a larger one from input %s with "
                                        "padding %s", op, by(g->sp + lead, nsp, a, sizeof a), b);
    }
    if (empty) {
        oar_format_shape(g->k + lead, nsp, c, sizeof c);
        oar_format_shape(g->p + lead, nsp, e, sizeof e);
        char f[64], h[64], dl[64];
        oar_format_shape(g->d + lead, nsp, dl, sizeof dl);
        return oar_error(OAR_ERR_SHAPE, "%s: expected an output of at least %s, got %s from input %s with kernel %s, "
                                        "padding %s, dilation %s; use a smaller kernel or more padding", op,
                         nsp == 2 ? "1 x 1" : "1 x 1 x 1", by(g->o + lead, nsp, f, sizeof f),
                         by(g->sp + lead, nsp, h, sizeof h), c, e, dl);
    }
    return OAR_OK;
}

static void pooled_meta(oar_meta *m, oar_dtype dt, const int64_t *xs, int nd, const pgeom *g) {
    m->dtype = dt;
    m->ndim = nd;
    memcpy(m->shape, xs, sizeof(int64_t) * (size_t)nd);
    for (int i = 0; i < g->nsp; i++) m->shape[nd - g->nsp + i] = g->o[3 - g->nsp + i];
}

/* t's shape must equal want (an output or input shape the op computed). */
static oar_status check_shape_is(const char *op, const char *name, const oar_tensor *t, const int64_t *want,
                                 int nd, const char *why) {
    if (t->ndim == nd && !memcmp(t->shape, want, sizeof(int64_t) * (size_t)nd)) return OAR_OK;
    char a[128], b[128];
    oar_format_shape(want, nd, a, sizeof a);
    oar_format_shape(t->shape, t->ndim, b, sizeof b);
    return oar_error(OAR_ERR_SHAPE, "%s: expected %s of shape %s (%s), got %s", op, name, a, why, b);
}

static oar_status check_pair_dtypes(const char *op, oar_tensor *const *in, const char *n0, const char *n1) {
    oar_status st;
    if ((st = oar_check_float(op, in[0], n0)) != OAR_OK) return st;
    if (in[1]->dtype != in[0]->dtype)
        return oar_error(OAR_ERR_DTYPE, "%s: expected %s to have %s's dtype %s, got %s; convert it with oar_cast",
                         op, n1, n0, oar_dtype_name(in[0]->dtype), oar_dtype_name(in[1]->dtype));
    return OAR_OK;
}

/* Accumulation buffer in double for the scatter-style backward kernels. */
static double *zeroed_doubles(int64_t n) {
    double *p = oar_alloc(sizeof(double) * (size_t)n);
    if (p) memset(p, 0, sizeof(double) * (size_t)n);
    return p;
}

static void store_doubles(oar_tensor *t, double *p) {
    const oar_dtype_traits *tr = &oar_dtypes[t->dtype];
    char *dst = oar_tensor_ptr(t);
    for (int64_t i = 0; i < t->numel; i++) tr->store(dst + i * (int64_t)tr->size, p[i]);
    oar_free(p, sizeof(double) * (size_t)t->numel);
}

static int64_t in_volume(const pgeom *g) { return g->sp[0] * g->sp[1] * g->sp[2]; }
static int64_t out_volume(const pgeom *g) { return g->o[0] * g->o[1] * g->o[2]; }

/* Visits every output position (plane p, flat index o in its output volume) with its
 * coordinates. */
#define FOR_OUTPUTS(g, P, O, oz, oy, ox)                                  \
    for (int64_t P = 0; P < (g)->planes; P++)                               \
        for (int64_t oz = 0, O = 0; oz < (g)->o[0]; oz++)                   \
            for (int64_t oy = 0; oy < (g)->o[1]; oy++)                      \
                for (int64_t ox = 0; ox < (g)->o[2]; ox++, O++)

/* Table entries of the 2-d and 3-d op of one kind, each fixing its rank and name. */
#define RANKED_INFER(fn, tag, nsp, name)                                                                          \
    static oar_status fn##_##tag(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) { \
        (void)n_in;                                                                                               \
        return fn(name, nsp, in, a, out, n_out);                                                                  \
    }
#define RANKED_REF(fn, tag, nsp, name)                                                                           \
    static oar_status fn##_##tag(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,    \
                                 int n_out, const oar_attr *a) {                                                 \
        (void)ctx; (void)n_in; (void)n_out;                                                                      \
        return fn(name, nsp, in, out, a);                                                                        \
    }

/* ================================================================ max pooling */
/* attrs: kernel, stride, padding, dilation, ceil_mode; x is input 0 of max_poolNd and input 1
 * of its backward ops. */
static oar_status max_geom(const char *op, int nsp, const oar_tensor *x, const oar_attr *a, pgeom *g) {
    return pool_geom(op, "x", x->shape, x->ndim, nsp, &a[0], &a[1], &a[2], &a[3], a[4].i != 0, g);
}

/* Index in the plane's volume of the window's maximum, chosen as torch does: the first largest
 * value, a NaN winning; -1 when the window holds no input element. */
static int64_t window_argmax(const pgeom *g, const oar_dtype_traits *tr, const char *plane, int64_t oz, int64_t oy,
                             int64_t ox) {
    int64_t best_i = -1;
    double best = -INFINITY;
    for (int64_t kz = 0; kz < g->k[0]; kz++) {
        int64_t iz = oz * g->s[0] - g->p[0] + kz * g->d[0];
        if (iz < 0 || iz >= g->sp[0]) continue;
        for (int64_t ky = 0; ky < g->k[1]; ky++) {
            int64_t iy = oy * g->s[1] - g->p[1] + ky * g->d[1];
            if (iy < 0 || iy >= g->sp[1]) continue;
            for (int64_t kx = 0; kx < g->k[2]; kx++) {
                int64_t ix = ox * g->s[2] - g->p[2] + kx * g->d[2];
                if (ix < 0 || ix >= g->sp[2]) continue;
                int64_t i = (iz * g->sp[1] + iy) * g->sp[2] + ix;
                double v = tr->load(plane + i * (int64_t)tr->size);
                if (best_i < 0 || v > best || isnan(v)) {
                    best = v;
                    best_i = i;
                }
            }
        }
    }
    return best_i;
}

static oar_status max_pool_infer(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                 int *n_out) {
    pgeom g;
    oar_status st = oar_check_float(op, in[0], "x");
    if (st == OAR_OK) st = max_geom(op, nsp, in[0], a, &g);
    if (st != OAR_OK) return st;
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, &g);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_pool_ref(const char *op, int nsp, oar_tensor *const *in, oar_tensor *const *out,
                               const oar_attr *a) {
    pgeom g;
    max_geom(op, nsp, in[0], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size, iv = in_volume(&g), ov = out_volume(&g);
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    FOR_OUTPUTS(&g, p, o, oz, oy, ox) {
        const char *xp = x + p * iv * es;
        int64_t i = window_argmax(&g, tr, xp, oz, oy, ox);
        tr->store(y + (p * ov + o) * es, i < 0 ? -INFINITY : tr->load(xp + i * es));
    }
    return OAR_OK;
}

static oar_tensor *max_call(oar_op_id op, oar_tensor *a0, oar_tensor *x, const oar_attr *attrs) {
    oar_tensor *in[2] = {a0, x};
    return oar_op_call1(op, in, 2, attrs);
}

static oar_status max_pool_grad(oar_grad_ctx *g) {
    g->gin[0] = max_call(MAX_BWD[rank_ix(&g->attrs[0])], g->gout[0], g->in[0], g->attrs);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

/* torch's defaults but stride's (torch: the kernel size, which a table value cannot say) */
#define MAX_ATTRS(ZERO, ONE) {"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS, ZERO}, \
                  {"dilation", OAR_ATTR_INTS, ONE}, {"ceil_mode", OAR_ATTR_INT, "false"}

RANKED_INFER(max_pool_infer, 2, 2, "max_pool2d")
RANKED_INFER(max_pool_infer, 3, 3, "max_pool3d")
RANKED_REF(max_pool_ref, 2, 2, "max_pool2d")
RANKED_REF(max_pool_ref, 3, 3, "max_pool3d")

const oar_op_def oar_opdef_max_pool2d = {
    .name = "max_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0", "1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_pool_infer_2, .reference = max_pool_ref_2, .grad = max_pool_grad,
};

const oar_op_def oar_opdef_max_pool3d = {
    .name = "max_pool3d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0,0", "1,1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_pool_infer_3, .reference = max_pool_ref_3, .grad = max_pool_grad,
};

/* ---- max_poolNd_backward(grad, x): grad added at each window's argmax in x. The result is
 * linear in grad (adjoint: max_poolNd_gather) and piecewise constant in x (zero gradient). */
static oar_status max_bwd_infer(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                int *n_out) {
    pgeom g;
    oar_status st = check_pair_dtypes(op, in, "grad", "x");
    if (st == OAR_OK) st = max_geom(op, nsp, in[1], a, &g);
    if (st != OAR_OK) return st;
    oar_meta m;
    pooled_meta(&m, in[1]->dtype, in[1]->shape, in[1]->ndim, &g);
    if ((st = check_shape_is(op, "grad", in[0], m.shape, m.ndim, "the pooling's output for x")) != OAR_OK) return st;
    oar_meta_from(out, in[1]);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_bwd_ref(const char *op, int nsp, oar_tensor *const *in, oar_tensor *const *out,
                              const oar_attr *a) {
    pgeom g;
    max_geom(op, nsp, in[1], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[1]->dtype];
    int64_t es = (int64_t)tr->size, iv = in_volume(&g), ov = out_volume(&g);
    double *dx = zeroed_doubles(out[0]->numel);
    if (!dx) return OAR_ERR_OOM;
    const char *gy = oar_tensor_ptr(in[0]), *x = oar_tensor_ptr(in[1]);
    FOR_OUTPUTS(&g, p, o, oz, oy, ox) {
        int64_t i = window_argmax(&g, tr, x + p * iv * es, oz, oy, ox);
        if (i >= 0) dx[p * iv + i] += tr->load(gy + (p * ov + o) * es);
    }
    store_doubles(out[0], dx);
    return OAR_OK;
}

static oar_status max_bwd_grad(oar_grad_ctx *g) {
    if (g->needs[0]) {
        g->gin[0] = max_call(MAX_GATHER[rank_ix(&g->attrs[0])], g->gout[0], g->in[1], g->attrs);
        if (!g->gin[0]) return oar_last_status();
    }
    return OAR_OK;
}

RANKED_INFER(max_bwd_infer, 2, 2, "max_pool2d_backward")
RANKED_INFER(max_bwd_infer, 3, 3, "max_pool3d_backward")
RANKED_REF(max_bwd_ref, 2, 2, "max_pool2d_backward")
RANKED_REF(max_bwd_ref, 3, 3, "max_pool3d_backward")

const oar_op_def oar_opdef_max_pool2d_backward = {
    .name = "max_pool2d_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0", "1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_bwd_infer_2, .reference = max_bwd_ref_2, .grad = max_bwd_grad,
};

const oar_op_def oar_opdef_max_pool3d_backward = {
    .name = "max_pool3d_backward", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0,0", "1,1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_bwd_infer_3, .reference = max_bwd_ref_3, .grad = max_bwd_grad,
};

/* ---- max_poolNd_gather(v, x): v read at each window's argmax in x (v has x's shape). It is
 * max_poolNd's derivative in direction v, and the adjoint of max_poolNd_backward. */
static oar_status max_gather_infer(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                   int *n_out) {
    pgeom g;
    oar_status st = check_pair_dtypes(op, in, "v", "x");
    if (st == OAR_OK) st = max_geom(op, nsp, in[1], a, &g);
    if (st == OAR_OK) st = check_shape_is(op, "v", in[0], in[1]->shape, in[1]->ndim, "x's shape");
    if (st != OAR_OK) return st;
    pooled_meta(out, in[1]->dtype, in[1]->shape, in[1]->ndim, &g);
    *n_out = 1;
    return OAR_OK;
}

static oar_status max_gather_ref(const char *op, int nsp, oar_tensor *const *in, oar_tensor *const *out,
                                 const oar_attr *a) {
    pgeom g;
    max_geom(op, nsp, in[1], a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[1]->dtype];
    int64_t es = (int64_t)tr->size, iv = in_volume(&g), ov = out_volume(&g);
    const char *v = oar_tensor_ptr(in[0]), *x = oar_tensor_ptr(in[1]);
    char *y = oar_tensor_ptr(out[0]);
    FOR_OUTPUTS(&g, p, o, oz, oy, ox) {
        int64_t i = window_argmax(&g, tr, x + p * iv * es, oz, oy, ox);
        tr->store(y + (p * ov + o) * es, i < 0 ? 0.0 : tr->load(v + (p * iv + i) * es));
    }
    return OAR_OK;
}

static oar_status max_gather_grad(oar_grad_ctx *g) {
    if (g->needs[0]) {
        g->gin[0] = max_call(MAX_BWD[rank_ix(&g->attrs[0])], g->gout[0], g->in[1], g->attrs);
        if (!g->gin[0]) return oar_last_status();
    }
    return OAR_OK;
}

RANKED_INFER(max_gather_infer, 2, 2, "max_pool2d_gather")
RANKED_INFER(max_gather_infer, 3, 3, "max_pool3d_gather")
RANKED_REF(max_gather_ref, 2, 2, "max_pool2d_gather")
RANKED_REF(max_gather_ref, 3, 3, "max_pool3d_gather")

const oar_op_def oar_opdef_max_pool2d_gather = {
    .name = "max_pool2d_gather", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0", "1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_gather_infer_2, .reference = max_gather_ref_2, .grad = max_gather_grad,
};

const oar_op_def oar_opdef_max_pool3d_gather = {
    .name = "max_pool3d_gather", .n_inputs = 2, .n_outputs = 1, .n_attrs = 5, .attrs = {MAX_ATTRS("0,0,0", "1,1,1")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = max_gather_infer_3, .reference = max_gather_ref_3, .grad = max_gather_grad,
};

/* ================================================================ average pooling */
/* attrs: kernel, stride, padding, ceil_mode, count_include_pad, and (3-d) divisor_override;
 * after input_shape in the backward op. */
static oar_status avg_geom(const char *op, int nsp, const char *xname, const int64_t *xs, int nd, const oar_attr *a,
                           pgeom *g) {
    oar_status st = pool_geom(op, xname, xs, nd, nsp, &a[0], &a[1], &a[2], NULL, a[3].i != 0, g);
    g->include_pad = a[4].i != 0;
    if (st == OAR_OK && nsp == 3) {
        if (a[5].i < 0)
            return oar_error(OAR_ERR_INVALID_ARG, "%s: expected divisor_override >= 1 (or 0 for none), got %lld", op,
                             (long long)a[5].i);
        g->divisor = a[5].i;
    }
    return st;
}

/* The window of output (oz, oy, ox) clipped to the input ([lo, hi) per dim), and its divisor, as
 * torch computes them: with count_include_pad the divisor counts padding but not the part of a
 * ceil_mode window that hangs past the padding; divisor_override replaces it. Returns false for
 * a window with no input element. */
static bool avg_window(const pgeom *g, const int64_t *at, int64_t *lo, int64_t *hi, double *divisor) {
    int64_t padded = 1, inside = 1;
    for (int i = 0; i < 3; i++) {
        int64_t start = at[i] * g->s[i] - g->p[i];
        int64_t end = start + g->k[i] < g->sp[i] + g->p[i] ? start + g->k[i] : g->sp[i] + g->p[i];
        padded *= end - start;
        lo[i] = start > 0 ? start : 0;
        hi[i] = end < g->sp[i] ? end : g->sp[i];
        if (lo[i] >= hi[i]) return false;
        inside *= hi[i] - lo[i];
    }
    *divisor = (double)(g->divisor ? g->divisor : g->include_pad ? padded : inside);
    return true;
}

/* Visits the input elements (flat index in the plane's volume) of a clipped window. */
#define FOR_WINDOW(g, LO, HI, I)                                  \
    for (int64_t iz = LO[0]; iz < HI[0]; iz++)                    \
        for (int64_t iy = LO[1]; iy < HI[1]; iy++)                \
            for (int64_t ix = LO[2], I = (iz * (g)->sp[1] + iy) * (g)->sp[2] + ix; ix < HI[2]; ix++, I++)

static oar_status avg_pool_infer(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                 int *n_out) {
    pgeom g;
    oar_status st = oar_check_float(op, in[0], "x");
    if (st == OAR_OK) st = avg_geom(op, nsp, "x", in[0]->shape, in[0]->ndim, a, &g);
    if (st != OAR_OK) return st;
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, &g);
    *n_out = 1;
    return OAR_OK;
}

static oar_status avg_pool_ref(const char *op, int nsp, oar_tensor *const *in, oar_tensor *const *out,
                               const oar_attr *a) {
    pgeom g;
    avg_geom(op, nsp, "x", in[0]->shape, in[0]->ndim, a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size, iv = in_volume(&g), ov = out_volume(&g);
    const char *x = oar_tensor_ptr(in[0]);
    char *y = oar_tensor_ptr(out[0]);
    FOR_OUTPUTS(&g, p, o, oz, oy, ox) {
        int64_t lo[3], hi[3];
        double div, acc = 0;
        if (avg_window(&g, (int64_t[3]){oz, oy, ox}, lo, hi, &div)) {
            FOR_WINDOW(&g, lo, hi, i) acc += tr->load(x + (p * iv + i) * es);
            acc /= div;
        }
        tr->store(y + (p * ov + o) * es, acc);
    }
    return OAR_OK;
}

static oar_status avg_pool_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    int r = rank_ix(&g->attrs[0]);
    oar_attr a[7] = {oar_attr_ints(x->shape, x->ndim), g->attrs[0], g->attrs[1], g->attrs[2], g->attrs[3], g->attrs[4]};
    if (r) a[6] = g->attrs[5]; /* avg_pool3d's divisor_override */
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(AVG_BWD[r], in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

#define AVG_ATTRS(ZERO) {"kernel", OAR_ATTR_INTS}, {"stride", OAR_ATTR_INTS}, {"padding", OAR_ATTR_INTS, ZERO}, \
                  {"ceil_mode", OAR_ATTR_INT, "false"}, {"count_include_pad", OAR_ATTR_INT, "true"}

RANKED_INFER(avg_pool_infer, 2, 2, "avg_pool2d")
RANKED_INFER(avg_pool_infer, 3, 3, "avg_pool3d")
RANKED_REF(avg_pool_ref, 2, 2, "avg_pool2d")
RANKED_REF(avg_pool_ref, 3, 3, "avg_pool3d")

const oar_op_def oar_opdef_avg_pool2d = {
    .name = "avg_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 5, .attrs = {AVG_ATTRS("0,0")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_pool_infer_2, .reference = avg_pool_ref_2, .grad = avg_pool_grad,
};

const oar_op_def oar_opdef_avg_pool3d = {
    .name = "avg_pool3d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 6,
    .attrs = {AVG_ATTRS("0,0,0"), {"divisor_override", OAR_ATTR_INT, "0"}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_pool_infer_3, .reference = avg_pool_ref_3, .grad = avg_pool_grad,
};

/* ---- avg_poolNd_backward(grad; input_shape, ...): each output's gradient spread evenly over
 * its window, onto zeros of input_shape. The adjoint of avg_poolNd. */
static oar_status avg_bwd_geom(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, pgeom *g) {
    oar_status st = oar_check_float(op, in[0], "grad");
    if (st != OAR_OK) return st;
    if (a[0].n < nsp + 1 || a[0].n > nsp + 2)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have %d or %d entries, got %d", op, nsp + 1,
                         nsp + 2, a[0].n);
    if ((st = avg_geom(op, nsp, "input_shape", a[0].ints, a[0].n, a + 1, g)) != OAR_OK) return st;
    oar_meta m;
    pooled_meta(&m, in[0]->dtype, a[0].ints, a[0].n, g);
    return check_shape_is(op, "grad", in[0], m.shape, m.ndim, "the pooling's output for input_shape");
}

static oar_status avg_bwd_infer(const char *op, int nsp, oar_tensor *const *in, const oar_attr *a, oar_meta *out,
                                int *n_out) {
    pgeom g;
    oar_status st = avg_bwd_geom(op, nsp, in, a, &g);
    if (st != OAR_OK) return st;
    out->dtype = in[0]->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status avg_bwd_ref(const char *op, int nsp, oar_tensor *const *in, oar_tensor *const *out,
                              const oar_attr *a) {
    pgeom g;
    avg_bwd_geom(op, nsp, in, a, &g);
    const oar_dtype_traits *tr = &oar_dtypes[in[0]->dtype];
    int64_t es = (int64_t)tr->size, iv = in_volume(&g), ov = out_volume(&g);
    double *dx = zeroed_doubles(out[0]->numel);
    if (!dx) return OAR_ERR_OOM;
    const char *gy = oar_tensor_ptr(in[0]);
    FOR_OUTPUTS(&g, p, o, oz, oy, ox) {
        int64_t lo[3], hi[3];
        double div;
        if (!avg_window(&g, (int64_t[3]){oz, oy, ox}, lo, hi, &div)) continue;
        double v = tr->load(gy + (p * ov + o) * es) / div;
        FOR_WINDOW(&g, lo, hi, i) dx[p * iv + i] += v;
    }
    store_doubles(out[0], dx);
    return OAR_OK;
}

static oar_status avg_bwd_grad(oar_grad_ctx *g) {
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(AVG[rank_ix(&g->attrs[1])], in, 1, g->attrs + 1);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

RANKED_INFER(avg_bwd_infer, 2, 2, "avg_pool2d_backward")
RANKED_INFER(avg_bwd_infer, 3, 3, "avg_pool3d_backward")
RANKED_REF(avg_bwd_ref, 2, 2, "avg_pool2d_backward")
RANKED_REF(avg_bwd_ref, 3, 3, "avg_pool3d_backward")

const oar_op_def oar_opdef_avg_pool2d_backward = {
    .name = "avg_pool2d_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 6,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, AVG_ATTRS("0,0")},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_bwd_infer_2, .reference = avg_bwd_ref_2, .grad = avg_bwd_grad,
};

const oar_op_def oar_opdef_avg_pool3d_backward = {
    .name = "avg_pool3d_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 7,
    .attrs = {{"input_shape", OAR_ATTR_INTS}, AVG_ATTRS("0,0,0"), {"divisor_override", OAR_ATTR_INT, "0"}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = avg_bwd_infer_3, .reference = avg_bwd_ref_3, .grad = avg_bwd_grad,
};

/* ================================================================ adaptive average pooling */
/* Output bin i of n over size s covers [floor(i*s/n), ceil((i+1)*s/n)). */
static int64_t bin_start(int64_t i, int64_t s, int64_t n) { return i * s / n; }
static int64_t bin_end(int64_t i, int64_t s, int64_t n) { return ((i + 1) * s + n - 1) / n; }

static oar_status adaptive_check(const char *op, const char *xname, const int64_t *xs, int nd, const oar_attr *size) {
    oar_status st = check_input_shape(op, xname, xs, nd, 2);
    if (st != OAR_OK) return st;
    int64_t o[2];
    return read_list(op, "output_size", size, 2, 0, o);
}

static oar_status adaptive_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "adaptive_avg_pool2d";
    oar_status st = oar_check_float(op, in[0], "x");
    if (st == OAR_OK) st = adaptive_check(op, "x", in[0]->shape, in[0]->ndim, &a[0]);
    if (st != OAR_OK) return st;
    pgeom g = {.nsp = 2, .o = {1, a[0].ints[0], a[0].ints[1]}};
    pooled_meta(out, in[0]->dtype, in[0]->shape, in[0]->ndim, &g);
    *n_out = 1;
    return OAR_OK;
}

/* Shared walk of the bins: forward averages x into y; backward spreads y over x (in double). */
static void adaptive_walk(bool forward, const oar_dtype_traits *tr, int64_t planes, int64_t h, int64_t w,
                          int64_t oh, int64_t ow, const char *x, char *y, double *dx) {
    int64_t es = (int64_t)tr->size;
    for (int64_t p = 0; p < planes; p++)
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0 = bin_start(oy, h, oh), y1 = bin_end(oy, h, oh);
            for (int64_t ox = 0; ox < ow; ox++) {
                int64_t x0 = bin_start(ox, w, ow), x1 = bin_end(ox, w, ow);
                double div = (double)((y1 - y0) * (x1 - x0)), acc = 0;
                char *yo = y + ((p * oh + oy) * ow + ox) * es;
                double gv = forward ? 0 : tr->load(yo) / div;
                for (int64_t iy = y0; iy < y1; iy++)
                    for (int64_t ix = x0; ix < x1; ix++) {
                        int64_t i = (p * h + iy) * w + ix;
                        if (forward) acc += tr->load(x + i * es);
                        else dx[i] += gv;
                    }
                if (forward) tr->store(yo, acc / div);
            }
        }
}

static oar_status adaptive_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                               int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out;
    const oar_tensor *x = in[0];
    int nd = x->ndim;
    int64_t planes = x->numel / (x->shape[nd - 2] * x->shape[nd - 1]);
    adaptive_walk(true, &oar_dtypes[x->dtype], planes, x->shape[nd - 2], x->shape[nd - 1], a[0].ints[0],
                  a[0].ints[1], oar_tensor_ptr(x), oar_tensor_ptr(out[0]), NULL);
    return OAR_OK;
}

static oar_status adaptive_grad(oar_grad_ctx *g) {
    const oar_tensor *x = g->in[0];
    oar_attr a[1] = {oar_attr_ints(x->shape, x->ndim)};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_adaptive_avg_pool2d_backward, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_adaptive_avg_pool2d = {
    .name = "adaptive_avg_pool2d", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"output_size", OAR_ATTR_INTS}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = adaptive_infer, .reference = adaptive_ref, .grad = adaptive_grad,
};

/* ---- adaptive_avg_pool2d_backward(grad; input_shape): the adjoint of adaptive_avg_pool2d;
 * grad's last two dims give the output size. */
static oar_status adaptive_bwd_infer(oar_tensor *const *in, int n_in, const oar_attr *a, oar_meta *out, int *n_out) {
    (void)n_in;
    const char *op = "adaptive_avg_pool2d_backward";
    const oar_tensor *gy = in[0];
    oar_status st = oar_check_float(op, gy, "grad");
    if (st != OAR_OK) return st;
    if (a[0].n < 3 || a[0].n > 4)
        return oar_error(OAR_ERR_INVALID_ARG, "%s: expected input_shape to have 3 or 4 entries, got %d", op, a[0].n);
    if ((st = check_input_shape(op, "input_shape", a[0].ints, a[0].n, 2)) != OAR_OK) return st;
    if (gy->ndim != a[0].n || memcmp(gy->shape, a[0].ints, sizeof(int64_t) * (size_t)(gy->ndim - 2))) {
        char s[128], t[128];
        oar_format_shape(gy->shape, gy->ndim, s, sizeof s);
        oar_format_shape(a[0].ints, a[0].n, t, sizeof t);
        return oar_error(OAR_ERR_SHAPE, "%s: expected grad to match input_shape %s but in its last two dims, got %s",
                         op, t, s);
    }
    out->dtype = gy->dtype;
    out->ndim = a[0].n;
    memcpy(out->shape, a[0].ints, sizeof(int64_t) * (size_t)a[0].n);
    *n_out = 1;
    return OAR_OK;
}

static oar_status adaptive_bwd_ref(const oar_kctx *ctx, oar_tensor *const *in, int n_in, oar_tensor *const *out,
                                   int n_out, const oar_attr *a) {
    (void)ctx; (void)n_in; (void)n_out; (void)a;
    const oar_tensor *gy = in[0], *dx = out[0];
    int nd = dx->ndim;
    int64_t h = dx->shape[nd - 2], w = dx->shape[nd - 1];
    double *acc = zeroed_doubles(dx->numel);
    if (!acc) return OAR_ERR_OOM;
    adaptive_walk(false, &oar_dtypes[gy->dtype], dx->numel / (h * w), h, w, gy->shape[nd - 2], gy->shape[nd - 1],
                  NULL, oar_tensor_ptr(gy), acc);
    store_doubles(out[0], acc);
    return OAR_OK;
}

static oar_status adaptive_bwd_grad(oar_grad_ctx *g) {
    const oar_tensor *gy = g->in[0];
    oar_attr a[1] = {oar_attr_ints(gy->shape + gy->ndim - 2, 2)};
    oar_tensor *in[1] = {g->gout[0]};
    g->gin[0] = oar_op_call1(OAR_OP_adaptive_avg_pool2d, in, 1, a);
    return g->gin[0] ? OAR_OK : oar_last_status();
}

const oar_op_def oar_opdef_adaptive_avg_pool2d_backward = {
    .name = "adaptive_avg_pool2d_backward", .n_inputs = 1, .n_outputs = 1, .n_attrs = 1,
    .attrs = {{"input_shape", OAR_ATTR_INTS}},
    .ref_dtypes = OAR_FLOAT_DTYPES,
    .infer = adaptive_bwd_infer, .reference = adaptive_bwd_ref, .grad = adaptive_bwd_grad,
};

/* ================================================================ public API */
static oar_tensor *pool_public(oar_op_id op, oar_tensor *x, const oar_pool_opts *o) {
    const char *name = oar_op_table[op]->name;
    if (!o) {
        oar_error(OAR_ERR_INVALID_ARG, "%s: expected options with the kernel size, got NULL opts", name);
        return NULL;
    }
    int64_t s[2], d[2];
    for (int i = 0; i < 2; i++) {
        s[i] = o->stride[i] ? o->stride[i] : o->kernel[i];
        d[i] = o->dilation[i] ? o->dilation[i] : 1;
    }
    oar_tensor *in[1] = {x};
    if (op == OAR_OP_max_pool2d) {
        oar_attr a[5] = {oar_attr_ints(o->kernel, 2), oar_attr_ints(s, 2), oar_attr_ints(o->padding, 2),
                         oar_attr_ints(d, 2), oar_attr_int(o->ceil_mode)};
        return oar_op_call1(op, in, 1, a);
    }
    if (d[0] != 1 || d[1] != 1) {
        oar_error(OAR_ERR_INVALID_ARG, "avg_pool2d: expected dilation 1 (average pooling has no dilation), got "
                                       "[%lld, %lld]", (long long)d[0], (long long)d[1]);
        return NULL;
    }
    oar_attr a[5] = {oar_attr_ints(o->kernel, 2), oar_attr_ints(s, 2), oar_attr_ints(o->padding, 2),
                     oar_attr_int(o->ceil_mode), oar_attr_int(!o->exclude_pad)};
    return oar_op_call1(op, in, 1, a);
}

oar_tensor *oar_max_pool2d(oar_tensor *x, const oar_pool_opts *opts) { return pool_public(OAR_OP_max_pool2d, x, opts); }
oar_tensor *oar_avg_pool2d(oar_tensor *x, const oar_pool_opts *opts) { return pool_public(OAR_OP_avg_pool2d, x, opts); }

oar_tensor *oar_adaptive_avg_pool2d(oar_tensor *x, int64_t out_h, int64_t out_w) {
    int64_t size[2] = {out_h, out_w};
    oar_attr a[1] = {oar_attr_ints(size, 2)};
    oar_tensor *in[1] = {x};
    return oar_op_call1(OAR_OP_adaptive_avg_pool2d, in, 1, a);
}
